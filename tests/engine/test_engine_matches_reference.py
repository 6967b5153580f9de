"""The fast engine against the slow reference (tests/reference_evaluator.py), on random
small models drawn by tests/strategies.py, for n = 1..3.

What must agree, for every n:

* exactly: inputs, gamma(n) (and the hard score gap at the engine's witness equals gamma,
  its ``top_key`` attains the maximum visible score), x_max(n), activation_max per layer,
  min_margin, hard reference mismatches;
* the engine's certified error enclosure [lower, upper] contains the reference error (with
  a relative slack of 1e-30 for the reference's own mpmath rounding), is tight (relative
  width <= 1e-6), and the error at the engine's witness lies in the enclosure too; tau(n)
  lies in the engine's tau enclosure;
* decisions: when neither side has an undecided input the disagreement counts and the
  first disagreement are equal; otherwise each side's decided count is bounded by the
  other's decided + undecided count (an undecided input is one whose soft output cannot be
  told apart from the decision boundary: the reference keeps exactly rational soft values
  exact where that is provable, and so may decide inputs that certified balls cannot);
* the invariant, whenever the reference's errors are not within 1e-30 of 1.

``exactattn.run.evaluate`` is compared with the reference's per-layer activations: hard
activations equal, every soft ball contains the reference's soft value.

The runs are reproducible: ``derandomize=True``, no example database.
"""

from __future__ import annotations

import json
import os
import tempfile
from fractions import Fraction

import reference_evaluator as R
import strategies as S
from hypothesis import HealthCheck, given, settings
from hypothesis import note as _note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from paths import TESTS

from exactattn import evaluate, load_model, model_from_dict, run_check

mp = R.mp
MAX_N = S.MAX_N
SLACK = mp.mpf(10) ** -30
SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def note(text: str) -> None:
    """hypothesis.note inside a hypothesis test, silent elsewhere."""
    if currently_in_test_context():
        _note(text)


def _slack(x):
    return SLACK * max(1, abs(x))


def _real(text: str):
    return mp.mpf(text)


def _frac(text: str | None) -> Fraction | None:
    return None if text is None else Fraction(text)


def _engine_result(text: str, max_n: int) -> dict:
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return run_check(load_model(path), max_n=max_n).to_json()
    finally:
        os.unlink(path)


def _check_decisions(e: dict, r: R.LengthResult) -> None:
    e_dis, e_und = e["disagreements"], e["undecided"]
    assert isinstance(e_dis, int) and isinstance(e_und, int)
    assert r.disagreements <= e_dis + e_und, "a true disagreement the engine decided away"
    assert e_dis <= r.disagreements + r.undecided, "an engine disagreement that is not one"
    if e_und == 0 and r.undecided == 0:
        assert e_dis == r.disagreements
        assert e["first_disagreement"] == r.first_disagreement
    if r.undecided == 0 and e_und == 0 and r.disagreements == 0:
        assert e["first_disagreement"] is None


def _check_reference(e: dict, r: R.LengthResult) -> None:
    if r.reference_mismatches is None:
        assert e["reference_mismatches"] is None
        return
    em, rm = e["reference_mismatches"], r.reference_mismatches
    assert em["hard"] == rm["hard"]
    # the engine may count a mismatch at a decided position of an otherwise undecided argmax
    assert rm["soft"] <= em["soft"] + e["undecided"]
    assert em["soft"] <= rm["soft"] + rm["soft_undecided"]
    if e["undecided"] == 0 and rm["soft_undecided"] == 0:
        assert em["soft"] == rm["soft"]


def _check_errors(model: R.Model, e: dict, r: R.LengthResult) -> None:
    evals = {tuple(ev.tokens): ev for ev in R.check_length(model, r.n, True).evaluations}
    for li, layer in enumerate(e["layers"]):
        assert layer["index"] == li
        assert Fraction(layer["activation_max"]) == r.activation_max[li]
        lo, hi = _real(layer["error"]["lower"]), _real(layer["error"]["upper"])
        ref = r.error[li]
        assert lo - _slack(ref) <= ref <= hi + _slack(ref), (li, lo, ref, hi)
        assert hi - lo <= mp.mpf("1e-6") * hi + mp.mpf("1e-40"), ("loose enclosure", lo, hi)
        w = layer["error_witness"]
        at = R.error_at(evals[tuple(w["input"])], li, w["position"])
        assert lo - _slack(at) - mp.mpf("1e-6") * hi <= at <= hi + _slack(at), (li, w, at)


def _check_invariant(e: dict, r: R.LengthResult) -> None:
    feeding = r.error[:-1]
    if all(x <= 1 - SLACK for x in feeding):
        assert e["invariant"] == "holds"
    elif any(x > 1 + SLACK for x in feeding):
        assert e["invariant"] == "fails"


def compare(text: str) -> None:
    note(text)
    d = R.load_text(text)
    model = R.Model(d)
    max_n = min(MAX_N, int(d.get("max_length", MAX_N)))
    ours = [R.check_length(model, n) for n in range(1, max_n + 1)]
    theirs = _engine_result(text, max_n)
    assert theirs["format"] == "exactattn-result/1"
    assert [x["n"] for x in theirs["lengths"]] == list(range(1, max_n + 1))
    for e, r in zip(theirs["lengths"], ours, strict=True):
        note(f"n = {r.n}: engine {e}")
        assert e["inputs"] == r.inputs
        assert _frac(e["gamma"]) == r.gamma
        if r.gamma is None:
            assert e["gamma_witness"] is None
        else:
            w = e["gamma_witness"]
            assert R.gap_at(model, w) == r.gamma
            assert R.is_top_key(model, w)
        assert Fraction(e["x_max"]) == r.x_max
        tau_lo, tau_hi = _real(e["tau"]["lower"]), _real(e["tau"]["upper"])
        assert tau_lo - _slack(r.tau) <= R.mpf_of(r.tau) <= tau_hi + _slack(r.tau)
        assert _frac(e["min_margin"]) == r.min_margin
        assert len(e["layers"]) == len(model.layers)
        _check_errors(model, e, r)
        _check_invariant(e, r)
        _check_decisions(e, r)
        _check_reference(e, r)


@settings(max_examples=200, **SETTINGS)
@given(S.models())
def test_engine_matches_reference(d):
    compare(S.to_json_text(d))


# ----------------------------------------------------------------- per-input activations


def _arb_bounds(ball):
    """Exact endpoints of an arb ball as mpf numbers of the reference context."""
    mid_m, mid_e = ball.mid().man_exp()
    rad_m, rad_e = ball.rad().man_exp()
    mid = mp.ldexp(mp.mpf(int(mid_m)), int(mid_e))
    rad = mp.ldexp(mp.mpf(int(rad_m)), int(rad_e))
    return mid - rad, mid + rad


def compare_evaluate(d: dict, tokens: list[str]) -> None:
    text = S.to_json_text(d)
    note(text)
    note(f"input {tokens}")
    model = R.Model(R.load_text(text))
    ours = R.evaluate_input(model, tokens)
    ev = evaluate(model_from_dict(d), tokens)
    assert len(ev.hard) == len(ours.hard) == len(model.layers) + 1
    for l in range(len(ours.hard)):
        assert [[Fraction(v) for v in row] for row in ev.hard[l]] == ours.hard[l], l
        for p, row in enumerate(ours.soft[l]):
            for k, v in enumerate(row):
                lo, hi = _arb_bounds(ev.soft[l][p][k])
                x = R.mpf_of(v)
                assert lo - _slack(x) <= x <= hi + _slack(x), (l, p, k, lo, x, hi)
                assert hi - lo <= mp.mpf("1e-6") * max(1, abs(x)), ("loose ball", l, p, k)


@st.composite
def model_and_input(draw):
    d = draw(S.models())
    alphabet = d["alphabet"]
    n = draw(st.integers(1, MAX_N))
    return d, draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n))


@settings(max_examples=60, **SETTINGS)
@given(model_and_input())
def test_evaluate_matches_reference(case):
    compare_evaluate(*case)


def test_worked_example_against_engine():
    """The spec's worked example through both, n = 1..3 (the engine for n = 4, 5 is checked
    in test_closed_forms)."""

    compare((TESTS / "data" / "mean_a_position.json").read_text())


def _accept_model(**parts) -> dict:
    d = {
        "format": "exactattn/1",
        "name": "small",
        "alphabet": ["a"],
        "d": 1,
        "embedding": {"token": {"a": [0]}},
        "layers": [],
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [1],
            "bias": 0,
            "threshold": "1/2",
        },
    }
    d.update(parts)
    return d


def test_position_table_rows_are_position_numbers():
    """The spec: "row p is P(p, .) for p = 0, 1, ..." with input symbol w_i at position i,
    BOS at 0.  Without BOS, w_1 reads row 1 (row 0 is unused), so x_max(1) = 1 and the
    single input of length 1 is accepted (y = 1 > 1/2)."""
    d = _accept_model(
        max_length=1,
        embedding={"token": {"a": [0]}, "position": {"table": [[0], [1]]}},
        layers=[
            {
                "kind": "ffn",
                "hidden": [{"weight": [[0]], "bias": [0]}],
                "output": {"weight": [[0]], "bias": [0]},
            }
        ],
    )
    compare(S.to_json_text(d))
    r = run_check(model_from_dict(d), max_n=1).to_json()["lengths"][0]
    assert r["x_max"] == "1"
    assert r["min_margin"] == "1/2"


def test_zero_layers():
    """`layers` may be the empty list: x^(0) is read directly."""
    d = _accept_model(embedding={"token": {"a": [0]}, "position": ["i/n"]}, alphabet=["a", "b"])
    d["embedding"]["token"]["b"] = [1]
    compare(S.to_json_text(d))


# A hard tie is not a flip (issue 17). Every score is 9 (each embedding sums to 3), so the
# leftmost hard head copies position 1 and the soft head averages all positions (no mask:
# b, a and EOS); the read-out Q − P is coordinate 3. On b a: at position 1 the hard value is
# b[3] + b[3] = 0 (a tie of P and Q), the soft one b[3] + (0 + 1 + 0)/3 = 1/3 (Q); at
# position 2 both say Q (1 + 0 and 1 + 1/3). The soft meaning picks Q where the hard
# meaning makes no decision. The reference counted this as a disagreement until it learned
# the rule (hypothesis found it when the sample size changed).
_HARD_TIE_MODEL = {
    "format": "exactattn/1",
    "name": "hard tie",
    "alphabet": ["a", "b"],
    "eos": "</s>",
    "d": 4,
    "embedding": {
        "token": {
            "a": ["0", "1", "1", "1"],
            "b": ["1", "1", "1", "0"],
            "</s>": ["1", "1", "1", "0"],
        }
    },
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [["1", "1", "1", "1"]],
                    "key": [["1", "1", "1", "1"]],
                    "value": [["1"] * 4, ["1"] * 4, ["1"] * 4, ["0", "0", "0", "1"]],
                    "hard": "leftmost",
                    "temperature": "1",
                }
            ],
        }
    ],
    "output": {
        "kind": "argmax",
        "weight": [["1", "1", "1", "0"], ["1", "1", "1", "1"]],
        "labels": ["P", "Q"],
    },
}


def test_a_hard_tie_is_not_a_flip_in_either_evaluator():
    text = json.dumps(_HARD_TIE_MODEL)
    model = R.Model(R.load_text(text))
    r = R.check_length(model, 2)
    assert r.disagreements == 0
    ev = {tuple(e.tokens): e for e in R.check_length(model, 2, True).evaluations}
    assert R.decide(model, ev[("b", "a")], "hard")[0] == [R.TIE, "Q"]
    assert R.decide(model, ev[("b", "a")], "soft")[0] == ["Q", "Q"]
    e = _engine_result(text, 2)["lengths"][1]
    assert e["disagreements"] == 0 and e["hard_ties"]["inputs"] >= 1
    compare(text)
