"""The certified soft meaning of one long input (exactattn/engine/longsoft.py).

References: the check's arb path (certify_word, rising precision) on the same words —
the float64 enclosures must contain its values and agree on every decision; the proved
per-layer bound of Theorem 3 (exactattn/bounds/__init__.py) at n = 256; the independent float64
deployment (exactattn/run/precision.py) at n = 512.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from cascade_patch import patch_everywhere
from flint import arb

from exactattn import load_model, model_from_dict
from exactattn.bounds import attention_layer_bound, ffn_layer_bound
from exactattn.bounds.compare import layer_constants
from exactattn.core.numbers import arb_endpoints
from exactattn.engine import longsoft as ls
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs.families import families_for, family_word
from exactattn.model import AttentionLayer

BUNDLED = {
    "dyck1": 7,
    "dyck2": 8,
    "induction_k1": 5,
    "induction_k2": 6,
    "ltl_counting_positions": 6,
    "ltl_counting_temperature": 6,
    "ltl_prev_next_positions": 6,
    "ltl_prev_next_temperature": 7,
    "ltl_since_until_positions": 6,
    "ltl_since_until_temperature": 8,
}


def _words(model, n: int, k: int = 5) -> list[tuple[str, ...]]:
    rng = random.Random(n)
    ws = [family_word(model, f, n, 0) for f in families_for(model)]
    ws += [tuple(rng.choice(model.alphabet) for _ in range(n)) for _ in range(k)]
    return list(dict.fromkeys(ws))


def _compare(model, n: int, words=None, block=None) -> tuple[int, int]:
    """(containment or decision failures, undecided) of the float pass against arb."""
    cm = CompiledModel(model)
    words = words or _words(model, n)
    hb = run_hard(cm, words, n)
    acc = LengthAccumulator(model, n, None, len(model.layers))
    acc.add_hard(hb)
    temps = Temperatures(model, None)
    wc = WeightCache(cm)
    bad = undecided = 0
    for b, w in enumerate(words):
        sr = certify_word(cm, hb, b, acc, temps, wc, base_prec=256)
        res = ls.certify_long(cm, run_hard_long(cm, w), arb_fallback=False, block=block)
        assert res.method == "float64"
        assert len(res.layer_error) == len(sr.bounds)
        for (lo, hi, _), (flo, fhi, _) in zip(sr.bounds, res.layer_error, strict=True):
            alo, ahi = arb_endpoints(lo)[0], arb_endpoints(hi)[1]
            if not (Fraction(flo) <= ahi and alo <= Fraction(fhi)):
                bad += 1
        if not res.decided:
            undecided += 1
        elif res.output != sr.verdict.value:
            bad += 1
    return bad, undecided


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_models_contain_arb(name):
    model = load_model(f"models/{name}.json")
    bad, undecided = _compare(model, BUNDLED[name])
    assert bad == 0
    assert undecided == 0  # every bundled word is decided by the floats at these lengths


def test_blocking_does_not_matter():
    """Blocks of 1 or 3 query rows give the same decisions and contain the arb values."""
    model = load_model("models/dyck2.json")
    words = _words(model, 6, 2)
    for block in (1, 3):
        assert _compare(model, 6, words, block) == (0, 0)


# ----------------------------------------------------------------------------------------
# widening: without it, containment breaks


ADVERSARIAL = {
    "format": "exactattn/1",
    "name": "adversarial",
    "alphabet": ["a", "b"],
    "bos": "<s>",
    "d": 3,
    "embedding": {
        "token": {"a": [1, "1/3", 0], "b": [1, "-1/5", 0], "<s>": [1, 0, 0]},
        "position": ["0", "1/(i+1)", "0"],
    },
    "temperature": "1",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [["1/3", 0, 0]],
                    "key": [[0, "1/7", "1/3"]],
                    "value": [[0, "1/3", 0], [0, 0, 0], ["1/5", "1/3", 0]],
                    "mask": "leq",
                }
            ],
        },
        {
            "kind": "ffn",
            "hidden": [{"weight": [[0, "1/3", "1/7"]], "bias": ["1/11"]}],
            "output": {"weight": [[0], [0], ["1/3"]], "bias": [0, 0, 0]},
        },
    ],
    "output": {"kind": "accept", "position": "last", "weight": [0, 1, 1], "bias": 0,
               "threshold": "1/3"},
}  # fmt: skip
"""τ = 1 (exact) and weights 1/3, 1/5 (as tests/engine/cascade/test_float64_tier_vs_arb.py):
every float result is rounded and no radius comes from the inputs, so only the widening keeps
values enclosed."""


def test_widening_is_needed(monkeypatch):
    model = model_from_dict(ADVERSARIAL)
    words = _words(model, 4, 4)
    assert _compare(model, 4, words)[0] == 0
    for name in ("WIDEN", "SUM_U", "TINY", "SLACK", "CONV", "EXP_ERR", "EXP_ERR_X"):
        patch_everywhere(monkeypatch, name, 0.0)
    assert _compare(model, 4, words)[0] > 0


# ----------------------------------------------------------------------------------------
# undecided is reported, never guessed

CANCEL = {
    "format": "exactattn/1",
    "name": "cancel",
    "alphabet": ["a"],
    "bos": "<s>",
    "d": 4,
    "embedding": {"token": {"a": [0, 1, 0, 0], "<s>": [1, 1, 0, 0]}, "position": ["0"] * 4},
    "temperature": "1/n",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {"query": [[0, 1, 0, 0]], "key": [[-1, 1, 0, 0]], "value": [[1, 0, 0, 0]],
                 "output": [[0], [0], [1], [0]], "mask": "leq", "hard": "average"},
                {"query": [[0, 1, 0, 0]], "key": [[-1, 1, 0, 0]], "value": [[1, 0, 0, 0]],
                 "output": [[0], [0], [0], [1]], "mask": "leq", "hard": "average"},
            ],
        }
    ],
    "output": {"kind": "accept", "position": "last", "weight": [0, 0, 1, -1], "bias": 0,
               "threshold": 0},
}  # fmt: skip
"""Two identical heads whose outputs the read-out subtracts: soft y = 0 = threshold exactly
(reject), hard y = 0 too, but each head's δ ≈ e^{-1}/(i·e) ≠ 0, so the float difference
is 0 ± (a radius) and cannot be decided."""


def test_undecided_is_reported_past_the_arb_bound():
    model = model_from_dict(CANCEL)
    cm = CompiledModel(model)
    lh = run_hard_long(cm, ("a",) * 64)
    res = ls.certify_long(cm, lh)
    assert res.method == "float64"
    assert not res.decided and res.output is None
    assert res.readout is not None and res.readout[0] < 0 < res.readout[1]
    assert any("cannot decide" in s for s in res.notes)
    # the error after the layer is enclosed all the same: BOS weight 1/(1 + i·e^{n·1}) ... > 0
    lo, hi, _ = res.layer_error[0]
    assert 0 < lo <= hi < 1


def test_undecided_goes_to_arb_when_short():
    model = model_from_dict(CANCEL)
    cm = CompiledModel(model)
    lh = run_hard_long(cm, ("a",) * 6)
    res = ls.certify_long(cm, lh)
    assert res.method == "arb"
    hb = run_hard(cm, [lh.word], 6)
    acc = LengthAccumulator(model, 6, None, 1)
    acc.add_hard(hb)
    sr = certify_word(cm, hb, 0, acc, Temperatures(model, None), WeightCache(cm))
    assert (res.decided, res.output) == (sr.verdict.decided, sr.verdict.value)


# ----------------------------------------------------------------------------------------
# moderate n: the proved bound, and the float64 deployment


def _proved_bounds(model, lh) -> list[arb]:
    """Theorem 3(b)/(d) chained over the layers with this word's own constants."""
    cs = layer_constants(model)
    x_in = max(
        max(Fraction(max(abs(int(v)) for v in x.num[i]), int(x.den[i])) for i in range(lh.n + 1))
        for x in lh.acts
    )
    T = lh.acts[0].num.shape[0]
    eps = arb(0)
    out = []
    for li, (c, layer) in enumerate(zip(cs, model.layers, strict=True)):
        if isinstance(layer, AttentionLayer):
            gaps, nonmax, single = [], [], []
            for hi, h in enumerate(layer.heads):
                info = lh.heads[(li, hi)]
                i = np.arange(T)
                vis = {"leq": i + 1, "lt": i, "none": np.full(T, T), "geq": T - i, "gt": T - i - 1}
                gaps.append(info.gap)
                nonmax.append(int((vis[h.mask] - info.top_count).max()))
                single.append(int(info.top_count.max()) <= 1)
            taus = Temperatures(model, None).at(lh.n, BASE_PREC)[li]
            eps = attention_layer_bound(c, x_in, eps, taus, gaps, nonmax, single)
        else:
            eps = ffn_layer_bound(c, eps)
        out.append(eps)
    return out


def test_dyck2_nested_256_below_the_proved_bound():
    model = load_model("models/dyck2.json")
    cm = CompiledModel(model)
    lh = run_hard_long(cm, family_word(model, "nested", 256), want_gap=True)
    res = ls.certify_long(cm, lh)
    assert res.decided and res.output is True and hard_output(model, lh)[0] is True
    bounds = _proved_bounds(model, lh)
    for (lo, hi, _), bnd in zip(res.layer_error, bounds, strict=True):
        assert Fraction(hi) <= arb_endpoints(bnd)[1]
        assert lo <= hi
    # layer 1 (the depth lookup) is where the softmax error enters: nonzero and certified
    assert res.layer_error[1][0] > 0


def test_dyck2_nested_512_matches_float64_deployment():
    """The float64 deployment differs from the certified soft meaning by rounding only:
    ‖float64 − certified soft‖ is far below ‖certified soft − hard‖'s scale of the embedding."""
    from exactattn.run.precision import DtypeModel, embed_dtype, error_enclosure, run_dtype

    model = load_model("models/dyck2.json")
    cm = CompiledModel(model)
    lh = run_hard_long(cm, family_word(model, "nested", 512))
    res = ls.certify_long(cm, lh)
    dm = DtypeModel(cm, "float64")
    run = run_dtype(dm, embed_dtype(dm, lh.acts[0]), 512)
    rlo, rhi = ls.rounding_enclosure(run.acts[-1][0], lh.acts[-1], res.delta)
    tlo, thi, _ = error_enclosure(run.acts[-1][0], lh.acts[-1])
    slo, shi, _ = res.layer_error[-1]
    # triangle inequality, both ways, on certified enclosures
    assert tlo <= shi + rhi and slo <= thi + rhi
    assert rhi < 1e-6  # float64 rounding of activations of size ≤ 513² relative 2^-53


# ----------------------------------------------------------------------------------------
# wired into `exactattn precision`


def test_precision_family_reports_the_error_split():
    from exactattn.run.precision import sweep_family

    model = load_model("models/dyck2.json")
    (run,) = sweep_family(model, ["nested", "far-error"], [64], ["float64"], [("model", None)])
    (e,) = (x.to_json() for x in run.lengths)
    cm = CompiledModel(model)
    errs = [
        ls.certify_long(cm, run_hard_long(cm, family_word(model, f, 64))).layer_error[-1]
        for f in ("nested", "far-error")
    ]
    hi = max(x[1] for x in errs)
    assert e["softmax_error"] is not None and e["rounding_error"] is not None
    assert Fraction(e["softmax_error"]["upper"]) >= Fraction(hi)
    assert Fraction(e["softmax_error"]["lower"]) <= Fraction(hi)
    assert 0 < float(e["softmax_error"]["lower"])  # e^{-γ/τ}-sized, not zero at n = 64
    assert e["soft"] == {"decided": 2, "undecided": 0, "differs_from_hard": 0}
    # float64 rounding of activations of size ≤ 65²: far below 1e-6
    assert float(e["rounding_error"]["upper"]) < 1e-6


def test_precision_cli_inputs_past_the_batched_bound(tmp_path):
    """--inputs words longer than the batched engine's bound go through the streaming
    evaluators and still get the certified error split."""
    import json
    import subprocess
    import sys

    model = load_model("models/dyck2.json")
    w = "".join(family_word(model, "nested", 48))
    f = tmp_path / "in.txt"
    f.write_text(w + "\n" + w[:-1] + "]" + "\n")
    out = tmp_path / "p.json"
    r = subprocess.run(
        [sys.executable, "-m", "exactattn", "precision", "models/dyck2.json", "--inputs",
         str(f), "--dtype", "float32", "--json", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(out.read_text())
    (e,) = doc["lengths"]
    assert e["n"] == 48 and e["inputs"] == 2
    assert e["softmax_error"] is not None and float(e["softmax_error"]["upper"]) < 1e-3
    assert e["soft"]["decided"] == 2 and e["soft"]["differs_from_hard"] == 0


def test_search_error_past_the_batched_bound():
    """`search --objective error` at n = 64: the witness's value is its certified error."""
    from exactattn.run.search import run_search

    model = load_model("models/dyck2.json")
    doc = run_search(model, 64, "error", budget=6, seed=1).to_json()
    wit = doc["witness"]
    cm = CompiledModel(model)
    res = ls.certify_long(cm, run_hard_long(cm, tuple(wit["input"])))
    lo, hi, _ = res.layer_error[-1]
    assert Fraction(wit["value"]["lower"]) <= Fraction(lo) <= Fraction(hi)
    assert Fraction(hi) <= Fraction(wit["value"]["upper"])
    assert lo > 0 and wit["method"] == "float64"
