"""Deployed-dtype evaluation (exactattn.run.precision) and the streaming exact evaluator.

The reference below is written independently of exactattn.run.precision: one word at a time,
full T × T matrices, weights read straight from the Model's Fractions, no skipping of zero
terms, no blocking. The operation order is the documented one (left-to-right inner sums,
s/τ, max-subtracted exp, numpy.sum over keys), so the results must agree bit for bit.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import warnings
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn import load_model
from exactattn.cli import main
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.inputs.families import families_for, family_word
from exactattn.model import AttentionLayer
from exactattn.model.reference import dyck_accepts
from exactattn.run.precision import (
    DtypeModel,
    dtype_decisions,
    dtype_of,
    embed_dtype,
    evaluate_long,
    rat_to_dtype,
    round_exact,
    run_dtype,
)

MODELS = ROOT / "models"
DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _cast(values, dt):
    """Fractions → dtype through float64 (no double-rounding midpoints occur in these models)."""
    return np.array([float(v) for v in values], dtype=np.float64).astype(dt)


def _lin(x, rows, bias, dt):
    """x (T, d) times the matrix with the given rows, summed left to right, + bias."""
    W = np.array([_cast(r, dt) for r in rows])
    out = np.empty((x.shape[0], W.shape[0]), dtype=dt)
    for r in range(W.shape[0]):
        acc = x[:, 0] * W[r, 0]
        for c in range(1, W.shape[1]):
            acc = acc + x[:, c] * W[r, c]
        out[:, r] = acc
    if bias is not None:
        out = out + _cast(bias, dt)
    return out


def reference_eval(model, word, dtype, tau=None):
    """The final activations of one word in dtype, straightforwardly."""
    dt = dtype_of(dtype)
    n = len(word)
    toks = model.tokens(word)
    pos = model.position_vectors(n)
    T = len(toks)
    x = np.array(
        [
            _cast([a + b for a, b in zip(model.token_embedding[t], pos[p], strict=True)], dt)
            for p, t in enumerate(toks)
        ]
    )
    with np.errstate(all="ignore"):
        for li, layer in enumerate(model.layers):
            if isinstance(layer, AttentionLayer):
                new = x
                for hi, h in enumerate(layer.heads):
                    e = model.head_temperature(li, hi, tau)
                    t = np.array(float(e.eval_arb({"n": n}, 256).mid())).astype(dt)
                    q = _lin(x, h.query, h.query_bias, dt)
                    k = _lin(x, h.key, h.key_bias, dt)
                    v = _lin(x, h.value, h.value_bias, dt)
                    S = q[:, None, 0] * k[None, :, 0]
                    for c in range(1, q.shape[1]):
                        S = S + q[:, None, c] * k[None, :, c]
                    L = S / t
                    ii, jj = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
                    vis = {
                        "none": np.ones((T, T), bool),
                        "leq": jj <= ii,
                        "lt": jj < ii,
                        "geq": jj >= ii,
                        "gt": jj > ii,
                    }[h.mask]
                    m = np.where(vis, L, np.array(-np.inf).astype(dt)).max(axis=1)
                    ex = np.where(vis, np.exp(L - m[:, None]), np.zeros((), dt))
                    Z = ex.sum(axis=1)
                    a = ex / Z[:, None]
                    a[~vis.any(axis=1)] = 0
                    o = np.empty((T, v.shape[1]), dtype=dt)
                    for c in range(v.shape[1]):
                        o[:, c] = (a * v[None, :, c]).sum(axis=1)
                    if h.output is not None:
                        o = _lin(o, h.output, None, dt)
                    new = new + o
                x = new
            else:
                hdd = x
                for w, b in layer.hidden:
                    hdd = np.maximum(_lin(hdd, w, b, dt), np.zeros((), dt))
                x = x + _lin(hdd, layer.output[0], layer.output[1], dt)
    return x


def _batch_run(model, words, dtype, tau=None):
    cm = CompiledModel(model)
    n = len(words[0])
    hb = run_hard(cm, words, n)
    dm = DtypeModel(cm, dtype)
    run = run_dtype(dm, rat_to_dtype(hb.x0, dm.dt), n, tau, block=3)
    return dm, run, hb


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_matches_reference_bitwise_dyck2_all_n4(dtype):
    """Every Dyck-2 input of length 4 (256), batched and blocked, vs the reference."""
    _dyck_all(dtype, 4)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 6])
def test_dtype_matches_reference_bitwise_dyck2_all_slow(dtype, n):
    """Every Dyck-2 input of length 5 and 6 (1,024 + 4,096 per dtype)."""
    _dyck_all(dtype, n)


def _dyck_all(dtype, n):
    model = load_model(MODELS / "dyck2.json")
    words = list(itertools.product(model.alphabet, repeat=n))
    _, run, _ = _batch_run(model, words, dtype)
    got = run.acts[-1]
    for b, w in enumerate(words):
        ref = reference_eval(model, w, dtype)
        assert np.array_equal(got[b], ref, equal_nan=True), (dtype, w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["ltl_counting_temperature", "ltl_since_until_positions"])
def test_dtype_matches_reference_bitwise_other_models(dtype, name):
    """25 random inputs of lengths 3, 5, 8 per model and dtype."""
    _other(dtype, name, 25)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "name", ["ltl_counting_temperature", "induction_k2", "ltl_since_until_positions"]
)
def test_dtype_matches_reference_bitwise_other_models_slow(dtype, name):
    """300 random inputs per model and dtype (3,600 in all)."""
    _other(dtype, name, 100)


def _other(dtype, name, count):
    model = load_model(MODELS / f"{name}.json")
    rng = random.Random(7)
    for n in (3, 5, 8):
        if model.max_length is not None and n > model.max_length:
            continue
        words = [tuple(rng.choice(model.alphabet) for _ in range(n)) for _ in range(count)]
        _, run, _ = _batch_run(model, words, dtype)
        for b, w in enumerate(words):
            ref = reference_eval(model, w, dtype)
            assert np.array_equal(run.acts[-1][b], ref, equal_nan=True), (name, dtype, w)


@pytest.mark.parametrize("name", ["dyck2", "induction_k1", "ltl_counting_positions"])
def test_streaming_exact_matches_run_hard(name):
    """The per-row-denominator streaming evaluator equals the batched engine exactly."""
    model = load_model(MODELS / f"{name}.json")
    cm = CompiledModel(model)
    rng = random.Random(3)
    for n in (1, 2, 4, 7):
        words = [tuple(rng.choice(model.alphabet) for _ in range(n)) for _ in range(10)]
        hb = run_hard(cm, words, n)
        for b, w in enumerate(words):
            lh = run_hard_long(cm, w, block=2)
            for li, act in enumerate(hb.activations):
                ref = act.to_fractions()[b]
                assert [lh.acts[li].row(i) for i in range(len(ref))] == ref


def test_long_exact_dyck_agrees_with_oracle_at_n_1024():
    """Exact hard meaning at n = 1,024 (beyond lcm(1..T) in int64): the Dyck oracle's verdict."""
    model = load_model(MODELS / "dyck2.json")
    cm = CompiledModel(model)
    for fam in ("nested", "far-error", "random-balanced", "negative-prefix"):
        w = family_word(model, fam, 1024, 5)
        dec, margin = hard_output(model, run_hard_long(cm, w))
        assert dec == dyck_accepts(w, ["()", "[]"]), fam
        assert margin == Fraction(1, 2)


def test_round_exact_is_nearest_even():
    """Rounding exact rationals to each dtype equals brute-force nearest (ties to even)."""
    rng = random.Random(11)
    fr = [Fraction(rng.randint(-(10**9), 10**9), rng.randint(1, 10**6)) for _ in range(300)]
    fr += [Fraction(2049, 2), Fraction(2051, 2), Fraction(1, 3), Fraction(10**6 + 1, 7)]
    # a double-rounding trap: x = 1 + 2^-11 + 2^-60 (float16 tie at float64 precision)
    fr.append(1 + Fraction(1, 2**11) + Fraction(1, 2**60))
    num = np.array([f.numerator for f in fr], dtype=object)
    den = np.array([f.denominator for f in fr], dtype=object)
    for name in ("float16", "bfloat16", "float32"):
        dt = dtype_of(name)
        got = round_exact(num, den, dt)
        for f, g in zip(fr, got, strict=True):
            if not np.isfinite(float(g)):
                assert abs(f) > 65504  # only float16 overflows on these values
                continue
            g = Fraction(float(g))
            a = np.array(float(g)).astype(dt)
            # brute force: no dtype value strictly closer than g (check ±1 ulp)
            for step in (-1, 1):
                nb = _neighbour(a, dt, step)
                if np.isfinite(float(nb)):
                    assert abs(Fraction(float(nb)) - f) >= abs(g - f), (name, f)
    # the trap rounds up in float16 (single rounding), not to even
    assert float(round_exact(num[-1:], den[-1:], np.float16)[0]) == 1 + 2**-10


def test_round_exact_next_to_the_largest_value_warns_nothing():
    """Just past ±max (below the overflow threshold) a value rounds to ±max with no warning:
    numpy's nextafter stepped from ±max to ±inf ("RuntimeWarning: overflow encountered in
    nextafter", seen at 65519 in float16); that neighbour is never needed."""
    vals = [Fraction(65519), Fraction(-65519), Fraction(65505), Fraction(65520), Fraction(65504)]
    big32 = Fraction(float(np.finfo(np.float32).max))
    vals += [big32 + 1, -(big32 + 2**100)]  # below float32's threshold max + 2^103
    num = np.array([v.numerator for v in vals], dtype=object)
    den = np.array([v.denominator for v in vals], dtype=object)
    for name, want in (
        ("float16", [65504, -65504, 65504, math.inf, 65504]),
        ("float32", [65519, -65519, 65505, 65520, 65504, float(big32), -float(big32)]),
        ("bfloat16", None),
    ):
        dt = dtype_of(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = round_exact(num, den, dt)
        if want is not None:
            assert [float(g) for g in got[: len(want)]] == want, name


def _neighbour(a, dt, step):
    bits = np.array(a, dtype=dt).view(np.uint16 if np.dtype(dt).itemsize == 2 else np.uint32)
    b = bits.astype(np.int64)
    v = float(a)
    if v == 0:
        return np.array(0.0).astype(dt)
    s = step if v > 0 else -step
    return np.array(b + s).astype(bits.dtype).view(dt)[()]


def test_flips_replay_alone_and_are_flips():
    """Every first flip reported at n = 64 replays as a flip when evaluated alone."""
    model = load_model(MODELS / "dyck2.json")
    res = evaluate_long(model, family_word(model, "nested", 64, 0), DTYPES)
    byd = {r.dtype: r for r in res}
    assert byd["float16"].flip and byd["bfloat16"].flip
    assert not byd["float32"].flip and not byd["float64"].flip
    assert byd["float16"].cause is not None and byd["float16"].cause.cause == "overflow"
    assert byd["bfloat16"].cause is not None and byd["bfloat16"].cause.cause == "absorption"
    # replay from scratch: fresh compiled model, fresh exact embedding, fresh dtype run
    cm = CompiledModel(model)
    w = family_word(model, "nested", 64, 0)
    lh = run_hard_long(cm, w)
    for d in ("float16", "bfloat16"):
        dm = DtypeModel(cm, d)
        run = run_dtype(dm, embed_dtype(dm, lh.acts[0]), 64, block=5)
        assert dtype_decisions(dm, run.acts[-1], 64)[0] == byd[d].dtype_output
        assert byd[d].dtype_output != byd[d].hard


def test_precision_cli_enumerated_json(tmp_path):
    out = tmp_path / "p.json"
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck2.json"),
            "--max-n",
            "3",
            "--dtype",
            "float16",
            "--json",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["format"] == "exactattn-precision/1" and d["dtype"] == "float16"
    assert [e["n"] for e in d["lengths"]] == [1, 2, 3]
    assert [e["inputs"] for e in d["lengths"]] == [4, 16, 64]
    e1 = d["lengths"][0]
    # softmax error at n = 1 is the certified check value 9.1e-2 (README table)
    assert e1["softmax_error"]["lower"].startswith("0.0909")
    assert e1["first_flip"] is None and e1["flips"] == 0


def test_precision_cli_family_flip_exit_1(tmp_path):
    out = tmp_path / "f.json"
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck2.json"),
            "--family",
            "nested",
            "--n",
            "16",
            "--tau",
            "1/(n^3*log(n))",
            "--dtype",
            "float16",
            "--json",
            str(out),
        ],
    )
    assert r.exit_code == 1, r.output
    d = json.loads(out.read_text())
    ff = d["lengths"][0]["first_flip"]
    assert ff["cause"] == "overflow" and ff["replayed"] is True
    assert ff["input"] == list("([([([([])])])])")


def test_families_shapes():
    model = load_model(MODELS / "dyck2.json")
    for name in families_for(model):
        for n in (1, 2, 7, 64):
            w = family_word(model, name, n, 1)
            assert len(w) == n and set(w) <= set(model.alphabet)
    assert dyck_accepts(family_word(model, "random-balanced", 200, 9), ["()", "[]"])
    assert not dyck_accepts(family_word(model, "far-error", 200, 0), ["()", "[]"])
    assert not dyck_accepts(family_word(model, "negative-prefix", 200, 0), ["()", "[]"])


# ---------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------


def test_search_reaches_exhaustive_gamma_and_margin():
    """At enumerable n the search finds run_check's exhaustive γ(n) and smallest margin."""
    from exactattn.run.check import run_check
    from exactattn.run.search import run_search

    for name, n in (("dyck2", 4), ("ltl_counting_temperature", 5)):
        model = load_model(MODELS / f"{name}.json")
        res = run_check(model, max_n=n, min_n=n, hard_only=True).to_json()["lengths"][0]
        g = run_search(model, n, "gamma", budget=120, seed=1).to_json()
        m = run_search(model, n, "margin", budget=120, seed=1).to_json()
        assert g["witness"]["value"]["upper"] == res["gamma"], name
        assert m["witness"]["value"]["upper"] == res["min_margin"], name
        assert g["format"] == "exactattn-search/1" and g["exhaustive"] is False


def test_search_error_matches_single_evaluation():
    """The certified error of the witness equals a fresh exact/certified evaluation."""
    from exactattn.core.numbers import parse_decimal
    from exactattn.run.evaluate import evaluate
    from exactattn.run.search import run_search

    model = load_model(MODELS / "dyck2.json")
    doc = run_search(model, 5, "error", budget=30, seed=2).to_json()
    ev = evaluate(model, doc["witness"]["input"])
    lo, hi = ev.errors[-1]
    from exactattn.core.numbers import arb_endpoints

    assert parse_decimal(doc["witness"]["value"]["lower"]) <= arb_endpoints(hi)[1]
    assert parse_decimal(doc["witness"]["value"]["upper"]) >= arb_endpoints(lo)[0]


def test_search_gamma_at_n_64_is_confirmed_exactly():
    """At n = 64 the witness's gap is recomputed exactly; Dyck-2's γ(64) is 1/65."""
    from exactattn.run.search import run_search

    model = load_model(MODELS / "dyck2.json")
    doc = run_search(model, 64, "gamma", budget=12, seed=0).to_json()
    w = tuple(doc["witness"]["input"])
    lh = run_hard_long(CompiledModel(model), w, want_gap=True)
    best = min(h.gap for h in lh.heads.values() if h.gap is not None)
    assert doc["witness"]["value"]["upper"] == f"{best.numerator}/{best.denominator}"
    assert best == Fraction(1, 65)


def test_precision_inputs_file_batch_replay_and_error_split(tmp_path):
    """--inputs: a batch of 3 words of length 16; the float16 flip replays alone; the
    exact hard decision is kept in the witness."""
    words = ["([([([([])])])])", "()()()()()()()()", "(((((((())))))))"]
    f = tmp_path / "in.txt"
    f.write_text("\n".join(words) + "\n")
    out = tmp_path / "p.json"
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck2.json"),
            "--inputs",
            str(f),
            "--tau",
            "1/(n^3*log(n))",
            "--dtype",
            "float16",
            "--json",
            str(out),
        ],
    )
    assert r.exit_code == 1, r.output
    e = json.loads(out.read_text())["lengths"][0]
    assert e["n"] == 16 and e["inputs"] == 3 and e["flips"] >= 1
    ff = e["first_flip"]
    assert ff["replayed"] is True and ff["cause"] == "overflow"
    assert ff["input"] == list(words[0]) and ff["hard"] is True


def test_error_split_triangle_inequality(tmp_path):
    from exactattn.core.numbers import parse_decimal

    out = tmp_path / "p.json"
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck1.json"),
            "--max-n",
            "4",
            "--min-n",
            "4",
            "--json",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    for run in json.loads(out.read_text())["runs"]:
        e = run["lengths"][0]
        tot = parse_decimal(e["total_error"]["lower"])
        bound = parse_decimal(e["softmax_error"]["upper"]) + parse_decimal(
            e["rounding_error"]["upper"]
        )
        assert tot <= bound, run["dtype"]
        # float64 rounding is tiny next to the softmax error at the model's own τ
        if run["dtype"] == "float64":
            assert parse_decimal(e["rounding_error"]["upper"]) < Fraction(1, 10**9)


@pytest.mark.slow
def test_search_at_n_1024_confirmed_exactly():
    """n = 1,024: the gamma and margin witnesses are recomputed by a fresh exact evaluation."""
    from exactattn.run.search import run_search

    model = load_model(MODELS / "dyck2.json")
    cm = CompiledModel(model)
    g = run_search(model, 1024, "gamma", budget=6, seed=0).to_json()
    lh = run_hard_long(cm, tuple(g["witness"]["input"]), want_gap=True)
    best = min(h.gap for h in lh.heads.values() if h.gap is not None)
    assert g["witness"]["value"]["upper"] == f"{best.numerator}/{best.denominator}" == "1/1025"
    m = run_search(model, 1024, "margin", budget=6, seed=0).to_json()
    _, margin = hard_output(model, run_hard_long(cm, tuple(m["witness"]["input"])))
    assert m["witness"]["value"]["upper"] == str(margin) == "1/2"


def test_flipped_ignores_hard_ties_and_compares_values_exactly() -> None:
    """A hard tie decides nothing (as in check): no dtype output flips it. A value output
    is compared with its tolerance exactly: float64 0.1 is 0.1000000000000000055…, which is
    more than 1/10 away from 0 (a float comparison says it is not)."""
    from fractions import Fraction

    import numpy as np

    from exactattn.model import model_from_dict
    from exactattn.run.precision import flipped

    dyck = load_model(ROOT / "models" / "dyck2.json")
    assert flipped(dyck, False, True)
    assert not flipped(dyck, False, True, hard_tie=True)
    assert not flipped(dyck, True, True)

    ind = load_model(ROOT / "models" / "induction_k1.json")
    assert not flipped(ind, ["a", None], ["a", "b"])  # position 2 tied in the hard meaning
    assert flipped(ind, ["a", "b"], ["a", "c"])
    assert not flipped(ind, ["a", "b"], ["a", "b"])

    value = model_from_dict(
        {
            "format": "exactattn/1",
            "name": "value",
            "alphabet": ["a"],
            "d": 1,
            "embedding": {"token": {"a": [0]}},
            "layers": [],
            "output": {
                "kind": "value",
                "weight": [[1]],
                "bias": [0],
                "tolerance": "1/10",
            },
        }
    )
    assert flipped(value, [[Fraction(0)]], [[np.float64(0.1)]])
    assert not flipped(value, [[Fraction(0)]], [[np.float64(0.09999999999999999)]])
    assert flipped(value, [[Fraction(0)]], [[np.float32("inf")]])
