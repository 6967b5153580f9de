"""The PyTorch export and the torch backends of ``precision`` (issue 26).

Skipped, with the reason, when the optional extra is absent (``pip install -e '.[torch]'``;
CI installs it).
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from paths import ROOT

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (optional extra: pip install -e '.[torch]')"
)
# one intra-op thread: the tests' tensors are tiny, and on a shared machine torch's thread
# pool costs more than it saves (10 ms per small matmul measured under load)
torch.set_num_threads(1)

from exactattn.cli import main  # noqa: E402
from exactattn.engine.certify import certify_word  # noqa: E402
from exactattn.engine.hard import CompiledModel, run_hard  # noqa: E402
from exactattn.engine.measure import LengthAccumulator  # noqa: E402
from exactattn.engine.soft import WeightCache  # noqa: E402
from exactattn.engine.temperature import Temperatures  # noqa: E402
from exactattn.export.torch import export_torch, load, save  # noqa: E402
from exactattn.inputs import words_of_length  # noqa: E402
from exactattn.model import load_model, model_from_dict  # noqa: E402
from exactattn.run.precision import (  # noqa: E402
    DtypeModel,
    dtype_decisions,
    flipped,
    rat_to_dtype,
    run_dtype,
    sweep_words,
)

MODELS = ROOT / "models"

BUNDLED = sorted(p.stem for p in MODELS.glob("*.json"))
MAX_N = 6
SLACK = 1e-12  # the allowance beyond the certified enclosure


def _lengths(model, hi: int = MAX_N) -> range:
    top = hi if model.max_length is None else min(hi, model.max_length)
    return range(model.min_length, top + 1)


def _hard_f64(ra) -> np.ndarray:
    return np.vectorize(lambda v: float(Fraction(int(v), ra.den)), otypes=[np.float64])(ra.num)


FULL = [pytest.param(name, 1, 4, id=f"{name}-n1-4") for name in BUNDLED] + [
    pytest.param(name, 5, MAX_N, id=f"{name}-n5-6", marks=pytest.mark.slow) for name in BUNDLED
]


def _violations(model, n: int, mod) -> tuple[list[str], int]:
    """Entries (every layer, every input of length n) where the module's float64 value lies
    outside the certified soft enclosure hard + δ widened by 1e-12. The comparison runs in
    float64 with an explicit allowance for its own three roundings (2⁻⁵⁰ relative)."""
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))
    acts = [a.numpy() for a in mod.run(mod.embed(mod.encode(words)))]
    hb = run_hard(cm, words, n)
    la = LengthAccumulator(model, n, None, len(model.layers))
    la.add_hard(hb)
    weights = WeightCache(cm)
    temps = Temperatures(model, None)
    hard = [_hard_f64(a) for a in hb.activations]
    np.testing.assert_array_equal(acts[0], hard[0])  # the embedding: exact sums here
    bad_list: list[str] = []
    checked = 0
    for b in range(len(words)):
        sr = certify_word(cm, hb, b, la, temps, weights)
        for li, delta in enumerate(sr.deltas, start=1):
            h = hard[li][b]
            t = acts[li][b]
            if delta is None:
                mid = np.zeros_like(h)
                rad = np.zeros_like(h)
            else:
                ent = delta.entries()
                mid = np.array([float(e.mid()) for e in ent]).reshape(h.shape)
                rad = np.array([float(e.rad()) for e in ent]).reshape(h.shape)
            dist = np.abs(t - (h + mid))
            allow = rad + SLACK + 2.0**-50 * (np.abs(h) + np.abs(mid) + np.abs(t))
            for idx in np.argwhere(dist > allow)[:1]:
                i = tuple(idx)
                bad_list.append(
                    f"n={n} {''.join(words[b])} layer {li - 1} slot/coord {idx.tolist()}: "
                    f"torch {t[i]!r}, certified soft {h[i] + mid[i]!r} ± {rad[i]:.3g}"
                )
            checked += h.size
    return bad_list, checked


@pytest.mark.parametrize("name,lo,hi", FULL)
def test_float64_export_within_certified_soft_enclosure(name: str, lo: int, hi: int) -> None:
    """Every layer's float64 activations lie in the certified soft enclosure plus 1e-12, on
    every input up to n = 6 (n ≤ 4 in the default suite, 5 and 6 with -m slow)."""
    model = load_model(MODELS / f"{name}.json")
    checked = 0
    for n in [n for n in _lengths(model) if lo <= n <= hi]:
        bad, c = _violations(model, n, export_torch(model, n, "float64").module)
        assert not bad, f"{name}: " + "; ".join(bad[:3])
        checked += c
    assert checked > 0


def test_enclosure_comparison_catches_a_wrong_temperature() -> None:
    """A test of the test: the module exported at τ = 1.01/n (the model's is 1/n) leaves the
    certified enclosure of the model's own soft meaning."""
    from exactattn.engine.temperature import parse_tau

    model = load_model(MODELS / "ltl_counting_temperature.json")
    mod = export_torch(model, 3, "float64", tau=parse_tau("101/(100*n)")).module
    bad, _ = _violations(model, 3, mod)
    assert bad


AGREE = [pytest.param(name, 3, id=f"{name}-n1-3") for name in BUNDLED] + [
    pytest.param(name, MAX_N, id=f"{name}-n1-6", marks=pytest.mark.slow) for name in BUNDLED
]


@pytest.mark.parametrize("name,hi", AGREE)
def test_float32_decisions_agree_with_precision_torch_eager(name: str, hi: int) -> None:
    """The exported float32 module decides every input like ``precision --backend
    torch-eager`` (per input, and the flip counts precision reports)."""
    model = load_model(MODELS / f"{name}.json")
    cm = CompiledModel(model)
    dm = DtypeModel(cm, "float32", "torch-eager")
    ns = list(_lengths(model, hi))
    words_by_n = {n: list(words_of_length(model.alphabet, n)) for n in ns}
    runs = sweep_words(
        model, words_by_n, ["float32"], [("model", None)], certified=False, backend="torch-eager"
    )
    for n, entry in zip(ns, runs[0].lengths, strict=True):
        words = words_by_n[n]
        mod = export_torch(model, n, "float32").module
        y = mod(mod.encode(words))
        mine = mod.decide(y)
        hb = run_hard(cm, words, n)
        run = run_dtype(dm, rat_to_dtype(hb.x0, dm.dt), n)
        theirs = dtype_decisions(dm, run.acts[-1], n)
        if model.output.kind == "value":
            np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=0, atol=1e-6)
        else:
            assert mine == theirs, f"{name} n={n}"
        # precision's flip count equals the module's, against the exact hard decisions
        hard = dtype_decisions(DtypeModel(cm, "float64"), _hard_f64(hb.activations[-1]), n)
        mine_flips = (
            0
            if model.output.kind == "value"
            else sum(flipped(model, h, m) for h, m in zip(hard, mine, strict=True))
        )
        assert entry.inputs == len(words)
        assert entry.flips == mine_flips, f"{name} n={n}"


def test_hard_modes_reproduce_the_exact_hard_meaning() -> None:
    """attention='hard' in float64 gives the exact hard activations of dyck2 (all integers
    or dyadic-friendly values at n ≤ 4, within 1e-12), and softmax does not: the mode
    switch is real."""
    model = load_model(MODELS / "dyck2.json")
    cm = CompiledModel(model)
    n = 4
    words = list(words_of_length(model.alphabet, n))
    exp = export_torch(model, n, "float64", attention="hard")
    acts = exp.module.run(exp.module.embed(exp.module.encode(words)))
    hb = run_hard(cm, words, n)
    hard = _hard_f64(hb.activations[-1])
    np.testing.assert_allclose(acts[-1].numpy(), hard, rtol=0, atol=1e-12)
    exp.module.attention = "softmax"
    soft = exp.module.run(exp.module.embed(exp.module.encode(words)))[-1].numpy()
    assert np.abs(soft - hard).max() > 1e-6


def _tiny(mask: str, hard: str = "average") -> dict:
    """One head, d = 2: score x_i·(x_j's first coordinate); values are the second."""
    return {
        "format": "exactattn/1",
        "name": "tiny",
        "alphabet": ["a", "b"],
        "d": 2,
        "embedding": {"token": {"a": [1, 0], "b": [0, 1]}},
        "layers": [
            {
                "kind": "attention",
                "heads": [
                    {
                        "query": [[0, 1]],
                        "key": [[1, 0]],
                        "value": [[0, 0], [1, 0]],
                        "mask": mask,
                        "hard": hard,
                    }
                ],
            }
        ],
        "temperature": "1/3",
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [0, 1],
            "bias": 0,
            "threshold": "1/2",
        },
    }


@pytest.mark.parametrize(
    "mask,rule,expected",
    [
        # word "abb": values (first coordinate of each key) 1, 0, 0; a queries see all
        # scores tie (q = 0), b queries score a-keys 1 and b-keys 0
        ("none", "average", [Fraction(1, 3), 2, 2]),
        ("none", "rightmost", [0, 2, 2]),
        ("leq", "leftmost", [1, 2, 2]),
        ("lt", "rightmost", [0, 2, 2]),  # slot 0 sees nothing: adds 0
        ("gt", "average", [0, 1, 1]),  # the last slot sees nothing
        ("geq", "leftmost", [1, 1, 1]),
    ],
)
def test_masks_and_hard_rules_by_hand(mask: str, rule: str, expected: list) -> None:
    """Second coordinate after the layer on "abb", hand-derived: 1 at b-tokens plus the
    value the rule picks among the visible keys."""
    exp = export_torch(model_from_dict(_tiny(mask, rule)), 3, "float64", attention="hard")
    x = exp.module.run(exp.module.embed(exp.module.encode([["a", "b", "b"]])))[-1][0].numpy()
    np.testing.assert_allclose(x[:, 1], [float(v) for v in expected], rtol=0, atol=1e-15)


@pytest.mark.parametrize("kernel", ["eager", "sdpa", "sdpa-math", "sdpa-flash"])
def test_softmax_by_hand(kernel: str) -> None:
    """τ = 1/3: a b-query over a, b, b (mask none) has logits 3, 0, 0, so it adds
    e³/(e³ + 2); an a-query has equal logits and adds 1/3."""
    import math

    exp = export_torch(model_from_dict(_tiny("none")), 3, "float64", kernel=kernel)
    x = exp.module.run(exp.module.embed(exp.module.encode([["a", "b", "b"]])))[-1][0].numpy()
    e3 = math.exp(3)
    np.testing.assert_allclose(
        x[:, 1], [1 / 3, 1 + e3 / (e3 + 2), 1 + e3 / (e3 + 2)], rtol=0, atol=1e-14
    )


def test_rounding_report_is_exact() -> None:
    """1/3 rounds in every dtype, 1/2 in none; 2049 rounds in float16 (11-bit significand)
    but not in float32; τ = 1/3 is reported too."""
    m = _tiny("none")
    m["layers"][0]["heads"][0]["value"] = [[0, 0], ["1/3", "1/2"]]
    m["embedding"]["token"]["b"] = [0, 2049]
    model = model_from_dict(m)
    r32 = {r["tensor"]: r for r in export_torch(model, 2, "float32").rounding}
    assert set(r32) == {"layers.0.0.W_V", "layers.0.0.tau"}
    assert r32["layers.0.0.W_V"]["rounded"] == 1
    assert r32["layers.0.0.W_V"]["examples"][0] == {
        "index": [1, 0],
        "exact": "1/3",
        "value": repr(float(np.float32(1 / 3))),
    }
    r16 = {r["tensor"]: r for r in export_torch(model, 2, "float16").rounding}
    assert r16["token_embedding"]["examples"][0]["exact"] == "2049"
    assert r16["token_embedding"]["examples"][0]["value"] == "2048.0"
    r64 = {r["tensor"] for r in export_torch(model, 2, "float64").rounding}
    assert r64 == {"layers.0.0.W_V", "layers.0.0.tau"}


def test_kernels_agree_in_float64_and_save_load_round_trip(tmp_path) -> None:
    model = load_model(MODELS / "induction_k1.json")
    n = 4
    words = list(words_of_length(model.alphabet, n))[:50]
    exp = export_torch(model, n, "float64")
    ids = exp.module.encode(words)
    eager = exp.module(ids)
    exp.module.kernel = "sdpa-math"
    np.testing.assert_allclose(exp.module(ids).numpy(), eager.numpy(), rtol=0, atol=1e-9)
    exp.module.kernel = "eager"
    from exactattn.export.torch import torch_module

    assert torch.equal(torch_module(MODELS / "induction_k1.json", n)(ids), eager)
    save(exp, tmp_path / "m.pt")
    back = load(tmp_path / "m.pt")
    assert torch.equal(back(ids), eager)
    assert back.config["n"] == n and back.config["dtype"] == "float64"


def test_cli_export_torch(tmp_path) -> None:
    out = tmp_path / "d.pt"
    js = tmp_path / "r.json"
    r = CliRunner().invoke(
        main,
        [
            "export",
            "torch",
            str(MODELS / "dyck2.json"),
            "-o",
            str(out),
            "--dtype",
            "float32",
            "--n",
            "4",
            "--json",
            str(js),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "round in float32" in r.output
    doc = json.loads(js.read_text())
    assert {x["tensor"] for x in doc["rounding"]} >= {"position_embedding", "layers.0.0.tau"}
    mod = load(out)
    assert mod.decide(mod(mod.encode([list("([])"), list("([)]")]))) == [True, False]
    bad = CliRunner().invoke(
        main,
        ["export", "torch", str(MODELS / "dyck2.json"), "-o", str(tmp_path / "x.pt"), "--n", "0"],
    )
    assert bad.exit_code == 2 and not (tmp_path / "x.pt").exists()


def test_precision_reports_backend_and_version(tmp_path) -> None:
    js = tmp_path / "p.json"
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck1.json"),
            "--max-n",
            "3",
            "--dtype",
            "float32",
            "--backend",
            "torch-sdpa",
            "--no-certified",
            "--json",
            str(js),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(js.read_text())
    assert doc["settings"]["backend"] == "torch-sdpa"
    assert doc["settings"]["backend_version"] == f"torch {torch.__version__}"
    assert "torch-sdpa (torch " in r.output
    assert doc["lengths"][-1]["inputs"] == 8


@pytest.mark.slow
def test_dyck2_4096_float32_flips_with_sdpa_not_numpy() -> None:
    """The issue's observation: at n = 4,096 in float32 the bundled Dyck-2 `nested` word
    flips with PyTorch's SDPA (math kernel) and not with the numpy emulation or eager."""
    from exactattn.run.precision import sweep_family

    model = load_model(MODELS / "dyck2.json")
    first = {}
    for backend in ("numpy", "torch-eager", "torch-sdpa", "torch-sdpa-math"):
        runs = sweep_family(
            model,
            ["nested"],
            [4096],
            ["float32"],
            [("model", None)],
            certified=False,
            backend=backend,
        )
        first[backend] = runs[0].first_flip_n
    assert first == {
        "numpy": None,
        "torch-eager": None,
        "torch-sdpa": 4096,
        "torch-sdpa-math": 4096,
    }


@pytest.mark.skipif(torch.cuda.is_available(), reason="the efficient kernel runs on CUDA")
def test_a_kernel_torch_cannot_run_is_exit_2() -> None:
    r = CliRunner().invoke(
        main,
        [
            "precision",
            str(MODELS / "dyck1.json"),
            "--max-n",
            "2",
            "--dtype",
            "float32",
            "--backend",
            "torch-sdpa-efficient",
            "--no-certified",
        ],
    )
    assert r.exit_code == 2, r.output
    assert "cannot run the sdpa-efficient kernel" in r.output
