"""The float filter at the edge of the float range (issue 27): overflow never decides.

The models ("EOS payload"): alphabet {a, b} with EOS "$"; coordinates c_0..c_{m-1} (written
by the head), e_0..e_{m-1} (the payload A, nonzero only on "$"), is_eos, out. One average
head, mask none, query 1, key is_eos, value e_k written to c_k. Every query's only top key
is "$" (gap 1), so hard c_k = A_k at every position; soft, "$" gets weight
α = e^{1/τ}/(e^{1/τ} + n) (n other tokens), so δc_k = (α − 1)·A_k = −(1 − α)·A_k.

(a) linear FFN path. A = (X, −Y, −Y, −Y), X = 10^308, Y = 1.5·10^308; one hidden unit
    z = 4c_0 + c_1 + c_2 + c_3 + b with b = 3Y − 4X, so z_hard = 0 (ReLU off) and
    z_soft = (1 − α)(3Y − 4X) = (1 − α)·0.5·10^308 > 0, written to `out`; accept iff
    out > 1 at "$". Hard rejects, soft accepts: every input disagrees (2^n at length n).
    In floats 4·δc_0 ≈ −2.7·10^308 overflows to −inf, and before the overflow rule the sign
    test −val ≥ rad read inf ≥ inf as "certainly off": δ = 0, 0 disagreements.
(b) the same through the generic ReLU path (an unused hidden unit with weight 2^60 makes
    the exact integer tracking overflow 2^52): −inf midpoint with a *finite* radius out of
    the weighted sum.
(c) value output Σ_k c_k with A = (−Z, −Z, Z, Z), Z = 1.7·10^308: the read-out sums δ columns
    of ±(1 − α)Z ≈ ±1.2·10^308; its midpoint overflows to +inf though soft = hard exactly
    (the δ's cancel): clean, not "outside tolerance".
(d) layer-0 error 1 + 10^-16: A = (2 + 2·10^-16), τ = 10^30, n = 1: ε_0 = A/(1 + e^{1/τ})
    = (1 + 10^-16)(1 − 5·10^-31 + …) > 1, certified at 96 bits: the invariant fails (exit 1),
    not "undecided at 4096 bits" (the endpoints were rounded to 53 bits).

Each is checked with and without the float filter (``--arb-only``): the same decisions,
counts and verdicts, and overlapping error enclosures
(tests/engine/cascade/test_float_filter_changes_only_last_digits.py).
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from cascade_patch import patch_everywhere
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from test_float_filter_changes_only_last_digits import _compare, _overlap

from exactattn import model_from_dict, run_check
from exactattn.core.errors import ExactAttnError
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import weights as wt

X, Y, Z = 10**308, 15 * 10**307, 17 * 10**307


def eos_model(
    payload: list[Any],
    output: str = "accept",
    hidden: list[int] | None = None,
    bias: Any = 0,
    tau: str = "100",
    generic: bool = False,
    threshold: Any = 1,
    tolerance: str = "1/100",
) -> dict[str, Any]:
    """The EOS-payload model of the module docstring (``hidden`` None: no FFN layer)."""
    m = len(payload)
    d = 2 * m + 2 + (1 if generic else 0)
    iseos, out = 2 * m, 2 * m + 1
    unit = [[1 if c == i else 0 for c in range(d)] for i in range(d)]
    eos = [0] * d
    eos[m : 2 * m] = payload
    eos[iseos] = 1
    head = {
        "query": [[0] * d],
        "query_bias": [1],
        "key": [unit[iseos]],
        "value": [unit[m + k] for k in range(m)],
        "output": [[1 if r == k else 0 for k in range(m)] for r in range(d)],
        "mask": "none",
        "hard": "average",
    }
    layers: list[dict[str, Any]] = [{"kind": "attention", "heads": [head]}]
    if hidden is not None:
        rows = [list(hidden) + [0] * (d - m)]
        biases = [bias]
        if generic:  # a unit reading the always-zero last coordinate: ints overflow 2^52
            rows.append([0] * (d - 1) + [2**60])
            biases.append(0)
        layers.append(
            {
                "kind": "ffn",
                "hidden": [{"weight": rows, "bias": biases}],
                "output": {
                    "weight": [[1 if r == out else 0] * len(rows) for r in range(d)],
                    "bias": [0] * d,
                },
            }
        )
    if output == "accept":
        o: dict[str, Any] = {
            "kind": "accept",
            "position": "eos",
            "weight": unit[out if hidden is not None else 0],
            "bias": 0,
            "threshold": threshold,
        }
    elif output == "argmax":  # labels: P = out (or c_0), Q = the constant `threshold`
        o = {
            "kind": "argmax",
            "weight": [unit[out if hidden is not None else 0], [0] * d],
            "bias": [0, threshold],
            "labels": ["P", "Q"],
        }
    else:
        o = {
            "kind": "value",
            "weight": [[1 if c < m else 0 for c in range(d)]],
            "tolerance": tolerance,
        }
    return {
        "format": "exactattn/1",
        "name": "overflow",
        "alphabet": ["a", "b"],
        "eos": "$",
        "d": d,
        "embedding": {"token": {"a": [0] * d, "b": [0] * d, "$": eos}},
        "temperature": tau,
        "layers": layers,
        "output": o,
    }


MODEL_A = eos_model([X, -Y, -Y, -Y], hidden=[4, 1, 1, 1], bias=3 * Y - 4 * X)
MODEL_B = eos_model([X, -Y, -Y, -Y], hidden=[4, 1, 1, 1], bias=3 * Y - 4 * X, generic=True)
MODEL_C = eos_model([-Z, -Z, Z, Z], output="value")
MODEL_D = eos_model(["2.0000000000000002"], hidden=[0], tau="10^30", threshold=10)


def both(model: dict[str, Any], max_n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The check with the float filter and with --arb-only; the same decisions and counts,
    every error enclosure overlapping."""
    m = model_from_dict(model)
    fast = run_check(m, max_n=max_n).to_json()
    slow = run_check(m, max_n=max_n, float_filter=False).to_json()
    assert _compare(slow, fast) == []
    for rf, rs in zip(fast["lengths"], slow["lengths"], strict=True):
        for lf, ls in zip(rf["layers"], rs["layers"], strict=True):
            assert _overlap(lf["error"], ls["error"]), (rf["n"], lf["index"])
    return fast, slow


@pytest.mark.parametrize("model", [MODEL_A, MODEL_B], ids=["linear", "generic"])
def test_relu_flip_through_overflow(model: dict[str, Any]) -> None:
    fast, _ = both(model, 4)
    assert [r["disagreements"] for r in fast["lengths"]] == [2, 4, 8, 16]
    assert [r["first_disagreement_detail"] for r in fast["lengths"]] == [
        {"hard": False, "soft": True}
    ] * 4


def test_value_readout_overflow_is_clean() -> None:
    fast, _ = both(MODEL_C, 4)
    assert fast["verdict"]["status"] == "clean"
    assert [r["disagreements"] for r in fast["lengths"]] == [0, 0, 0, 0]
    # the read-outs' midpoints did overflow: those inputs went to arb
    assert fast["lengths"][-1]["float_settled"] < 16


def test_error_just_above_one_fails_the_invariant() -> None:
    """ε_0 = (1 + 10^-16)(1 − 5·10^-31 + …): certified > 1, so "fails", exit 1."""
    fast, _ = both(MODEL_D, 1)
    (rec,) = fast["lengths"]
    assert rec["invariant"] == "fails"
    assert fast["verdict"]["status"] == "problems"


def test_precision_of_endpoints() -> None:
    """point_lower/arb_endpoints keep the enclosure's bits (arb.lower() rounds to 53)."""
    from flint import arb, ctx

    from exactattn.core.numbers import arb_endpoints, point_lower

    with ctx.workprec(96):
        x = (arb(1) + arb(10) ** -16) * (1 + arb(2) ** -90)
    assert not arb(x.lower()) > 1  # the old conversion loses it ...
    assert point_lower(x) > 1  # ... ours does not
    assert arb_endpoints(x)[0] > 1
    assert arb_endpoints(x)[0] <= Fraction(1) + Fraction(1, 10**16) + Fraction(1, 10**26)


def variants() -> list[dict[str, Any]]:
    """Ten models generated around (a)–(d): other magnitudes, weights, temperatures, signs
    (the keep test overflowing to +inf) and read-outs (argmax, value with a tolerance)."""
    rng = random.Random(27)
    out = []
    for i in range(10):
        kind = i % 5
        s = rng.choice([9, 10, 12, 17])  # × 10^307
        t = rng.choice(["100", "1000", "10^6", "1/n + 50"])
        if kind in (0, 1):  # (a)/(b) with random weights whose sum overflows
            x, y = s * 10**307, (s + rng.randint(1, 5)) * 10**307
            w = rng.choice([4, 5, 8])
            k = -(-w * x // y) + 1  # enough −Y terms to win: k·y > w·x
            sign = rng.choice([1, -1])  # −1: z_hard = 0 from above, keep test at +inf
            pay = [sign * x] + [-sign * y] * k
            hid = [w] + [1] * k
            bias = -(sign * (w * x - k * y))
            out.append(eos_model(pay, hidden=hid, bias=bias, tau=t, generic=kind == 1))
        elif kind == 2:  # (c): cancelling columns of ±1e308, value read-out
            z = s * 10**307
            out.append(eos_model([-z, z, -z, z][: rng.choice([2, 4])], output="value", tau=t))
        elif kind == 3:  # (a) read out by argmax: out against a constant label
            pay = [X, -Y, -Y, -Y]
            out.append(
                eos_model(pay, output="argmax", hidden=[4, 1, 1, 1], bias=3 * Y - 4 * X, tau=t)
            )
        else:  # (d) around 1: just above, just below, exactly at (τ large)
            a = rng.choice(["2.0000000000000002", "1.9999999999999998", "2.00000000000000000001"])
            out.append(eos_model([a], hidden=[0], tau="10^30", threshold=10))
    return out


@pytest.mark.parametrize("i", range(10))
def test_generated_variants_agree_with_arb_only(i: int) -> None:
    model = variants()[i]
    both(model, 1 if model["temperature"] == "10^30" else 3)


# ----------------------------------------------------------------------------------------
# the primitives: an overflowed midpoint gets an infinite radius


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_primitives_follow_the_overflow_rule() -> None:
    big = np.array([[1.5e308, 1.5e308]])
    zero = np.zeros_like(big)
    small = np.full_like(big, 1.0)
    # outer_sum: x·y with x = 1.5e308, y = 1 summed over two terms
    m, r = iv.outer_sum([((big[:, :1], zero[:, :1]), (small, zero))] * 2)
    assert np.isinf(m).all() and np.isinf(r).all()
    m, r = iv.dot_keys((big, zero), (small, zero))
    assert np.isinf(m).all() and np.isinf(r).all()
    q = iv._dot_weight((big, zero), 1)
    m, r = iv._dot_exact(big, small, q)
    assert np.isinf(m).all() and np.isinf(r).all()
    got = wt.lin({0: (big, zero), 1: (big, zero)}, [[(0, 1.0), (1, 1.0)]])[0]
    assert np.isinf(got[0]).all() and np.isinf(got[1]).all()
    # sign tests: (−inf, inf) is neither certainly ≥ 0 nor certainly ≤ 0
    m, r = iv.mr_relu((np.array([-np.inf, np.inf, np.nan]), np.array([np.inf, np.inf, 1.0])))
    assert np.isinf(r).all()
    lo, hi = iv.abs_bounds((np.array([np.inf, 1.0]), np.array([1.0, np.nan])))
    assert lo.tolist() == [0.0, 0.0] and np.isinf(hi).all()


# ----------------------------------------------------------------------------------------
# property: models with activations near (and past) the float range


def _big(draw) -> Any:
    kind = draw(st.sampled_from(["near", "near", "past", "digits", "small", "zero"]))
    sign = draw(st.sampled_from([1, -1]))
    if kind == "near":  # 10^305 .. 1.79·10^308, around where sums overflow
        return sign * draw(st.integers(1, 179)) * 10 ** draw(st.integers(305, 306))
    if kind == "past":  # beyond float64: every batch holding it goes to arb
        return sign * draw(st.integers(2, 9)) * 10 ** draw(st.integers(308, 320))
    if kind == "digits":  # an integer literal of hundreds of digits
        n = draw(st.integers(150, 330))
        return sign * draw(st.integers(10 ** (n - 1), 10**n - 1))
    if kind == "small":
        return sign * draw(st.integers(1, 9))
    return 0


@st.composite
def near_range_models(draw) -> dict[str, Any]:
    out = draw(st.sampled_from(["accept", "accept", "argmax", "value"]))
    tau = draw(st.sampled_from(["100", "1", "10^6", "n"]))
    if draw(st.booleans()):
        # adversarial: a first weighted term that overflows one way, later ones that bring the
        # exact sum back to the other side (the float sum stays at ±inf)
        x = draw(st.integers(50, 179)) * 10**306
        y = draw(st.integers(50, 179)) * 10**306
        w = draw(st.integers(2, 8))
        k = min(6, w * x // y + draw(st.integers(1, 2)))
        sign = draw(st.sampled_from([1, -1]))
        pay = [sign * x] + [-sign * y] * k
        hid = [w] + [1] * k
    else:
        m = draw(st.integers(1, 4))
        pay = [_big(draw) for _ in range(m)]
        hid = [draw(st.integers(-5, 5)) for _ in range(m)]
    if out == "value" and draw(st.booleans()):
        return eos_model(pay, output="value", tau=tau, tolerance="1/100")
    # the bias puts z_hard at 0 (or just off it) so the sign tests matter
    z_hard = sum(w * a for w, a in zip(hid, pay, strict=True))
    bias = -z_hard + draw(st.sampled_from([0, 0, 1, -1, 10**300, -(10**300)]))
    thr = draw(st.sampled_from([1, 0, -1, 10**307]))
    generic = draw(st.booleans())
    return eos_model(
        pay, output=out, hidden=hid, bias=bias, tau=tau, generic=generic, threshold=thr
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=near_range_models())
def test_near_float_range_agrees_with_arb_only(d: dict[str, Any]) -> None:
    """Decisions, counts and verdicts as --arb-only; overlapping error enclosures."""
    try:
        model_from_dict(d)
    except ExactAttnError:
        return
    both(d, 3)


def test_finiteness_checks_are_needed(monkeypatch) -> None:
    """Without the overflow rule (no guard, every enclosure taken as finite) the float filter
    misses the flips of (a) and (b) and finds false ones in (c): the checks carry weight."""
    patch_everywhere(monkeypatch, "guard", lambda m, r: r)
    patch_everywhere(monkeypatch, "finite", lambda a: np.ones(np.shape(a[0]), dtype=bool))
    for model in (MODEL_A, MODEL_B, MODEL_C):
        with pytest.raises(AssertionError):
            both(model, 3)


# ----------------------------------------------------------------------------------------
# the error witness (issue 27 item 6): the rule of docs/model-format.md


def _witness_within_accuracy(model: Any, max_n: int) -> None:
    """On both paths, every error witness's own certified error is within the reporting
    accuracy (relative 1e-6, and the decimals' rounding; below 1e-40 anything from 0) of the
    reported maximum."""
    from exactattn.core.numbers import arb_endpoints, parse_decimal
    from exactattn.run.evaluate import evaluate

    for ff in (True, False):
        data = run_check(model, max_n=max_n, float_filter=ff).to_json()
        for rec in data["lengths"]:
            for layer in rec["layers"]:
                w, err = layer.get("error_witness"), layer.get("error")
                if not w or not err or err["upper"] == "inf":
                    continue
                lo, hi = evaluate(model, w["input"]).errors[layer["index"]]
                lower, upper = parse_decimal(err["lower"]), parse_decimal(err["upper"])
                assert arb_endpoints(hi)[1] >= lower * (1 - Fraction(2, 10**6)), (ff, rec["n"])
                assert arb_endpoints(lo)[0] <= upper, (ff, rec["n"])
                if upper > Fraction(1, 10**40):  # else the zero rule: [0, ≤ 1e-40] is accurate
                    assert arb_endpoints(lo)[0] >= upper * (1 - Fraction(3, 10**6)), (ff, rec["n"])


def test_error_witness_rule_bundled() -> None:

    from exactattn import load_model

    root = ROOT
    _witness_within_accuracy(load_model(root / "models" / "dyck2.json"), 3)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=st.data())
def test_error_witness_rule_random(d) -> None:
    from strategies import models, to_json_text

    from exactattn.core.numbers import load_json_text
    from exactattn.model import model_from_raw

    raw = d.draw(models())
    try:
        model = model_from_raw(load_json_text(to_json_text(raw)))
        _witness_within_accuracy(model, 3)
    except ExactAttnError:
        return
