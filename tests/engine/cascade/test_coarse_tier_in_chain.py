"""The coarse float tier in the check's chain (engine/cascade/coarse.py and chain.py;
notes/benchmark-rounds.md
"Coarse tier"): where the rule turns it on, that the switch turns it off, that the chain with
it keeps the arb-only path's exact fields and the 1e-6 accuracy, and that its results do not
depend on scheduling (--jobs, resume). Its soundness against arb:
tests/engine/cascade/test_coarse_tier_sound.py.
"""

from __future__ import annotations

import json
import os
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

import exactattn.run.shard as shard
from exactattn import load_model, run_check
from exactattn.engine.cascade import chain, coarse
from exactattn.engine.cascade.batch import FloatBatch, put_rows
from exactattn.engine.cascade.coarse import coarse_pays
from exactattn.engine.hard import CompiledModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cascade_patch import set_policy  # noqa: E402
from tiers_vs_arb import check_bytes, random_benchmark_model  # noqa: E402


def _spy(monkeypatch) -> list[int]:
    """Counts, per call of the chain's coarse tier, the words it settled."""
    calls: list[int] = []
    real_coarse, real_settle = chain.certify_coarse, chain.settle_dominated
    last: list[object] = [None]

    def coarse_spy(*a, **k):  # type: ignore[no-untyped-def]
        last[0] = fc = real_coarse(*a, **k)
        return fc

    def settle_spy(fb, *a, **k):  # type: ignore[no-untyped-def]
        out = real_settle(fb, *a, **k)
        if fb is last[0]:
            calls.append(int(out.sum()))
        return out

    monkeypatch.setattr(chain, "certify_coarse", coarse_spy)
    monkeypatch.setattr(chain, "settle_dominated", settle_spy)
    return calls


def test_rule_on_for_random_models_only() -> None:
    """On where the hard scores are not float64 numbers (the random benchmark models: 76–91
    bits); off on Dyck-1/2 and the LTL models (≤ 32 bits), and for argmax read-outs."""
    for seed, blocks in ((0, 4), (1, 3)):
        cm = CompiledModel(random_benchmark_model(seed, blocks=blocks))
        assert all(coarse_pays(cm, n) for n in (1, 4, 7))
    for name in ("dyck1", "dyck2", "ltl_since_until_temperature", "rasp_anbn", "induction_k1"):
        cm = CompiledModel(load_model(ROOT / "models" / f"{name}.json"))
        assert not any(coarse_pays(cm, n) for n in (1, 4, 7)), name
    # bench_softfloat's 12-layer LTL model, where the tier would settle 0 of 4,096 words
    from exactattn import model_from_dict
    from exactattn.constructions.ltl import compile_ltl

    deep = model_from_dict(compile_ltl("Y (a S (b & Y (a U (b S Y a))))", ("a", "b")))
    assert not any(coarse_pays(CompiledModel(deep), n) for n in (4, 12))


def test_switch_and_rule_decide_where_it_runs(monkeypatch) -> None:
    """The random model: the tier runs and settles words; EXACTATTN_COARSE=0 (policy.coarse
    False when the job is made): never called; Dyck-2 (rule off): never called."""
    calls = _spy(monkeypatch)
    model = random_benchmark_model(0, blocks=4)
    run_check(model, max_n=7, min_n=7)
    assert calls and sum(calls) > 100  # 113–117 of the 128 words
    calls.clear()
    run_check(load_model(ROOT / "models" / "dyck2.json"), max_n=4, min_n=4)
    assert calls == []
    set_policy(monkeypatch, coarse=False)
    assert not shard.LengthJob(model=model, n=7, tau=None, hard_only=False).policy.coarse
    run_check(model, max_n=7, min_n=7)
    assert calls == []


def test_words_left_go_to_the_centred_tier_first(monkeypatch) -> None:
    """After the coarse tier the words it leaves go to the centred tier, never to
    certify_float (cascade/chain.py, _float_chain's rule), and it settles every one of them on
    the random model at n = 7 (10 left); with the centred tier off (EXACTATTN_CENTRED=0),
    certify_float takes them as before."""
    seen: dict[str, list[int]] = {"float": [], "centred": []}

    def spy(name, real):  # type: ignore[no-untyped-def]
        def f(cm, hb, taus):  # type: ignore[no-untyped-def]
            seen[name].append(len(hb.words))
            return real(cm, hb, taus)

        return f

    monkeypatch.setattr(chain, "certify_float", spy("float", chain.certify_float))
    monkeypatch.setattr(chain, "certify_centred", spy("centred", chain.certify_centred))
    calls = _spy(monkeypatch)
    model = random_benchmark_model(0, blocks=4)
    got = run_check(model, max_n=7, min_n=7).to_json()
    assert sum(calls) < 128 and seen["float"] == []
    assert seen["centred"] == [128 - sum(calls)]
    assert got["lengths"][0]["float_settled"] == 128  # none left to arb
    seen["centred"].clear()
    set_policy(monkeypatch, centred=False)
    run_check(model, max_n=7, min_n=7)
    assert seen["float"] == [128 - sum(calls[:1])] and seen["centred"] == []


def test_chain_agrees_with_arb_only(monkeypatch) -> None:
    """With the tier settling most words (n = 5–7): every exact field, count, decision and
    verdict is the arb-only path's, the enclosures overlap, every reported error keeps the
    1e-6 accuracy."""
    from test_float_filter_changes_only_last_digits import _check

    from exactattn.core.numbers import parse_decimal

    calls = _spy(monkeypatch)
    model = random_benchmark_model(0, blocks=4)
    got = run_check(model, max_n=7, min_n=5).to_json()
    assert sum(calls) > 150
    for rec in got["lengths"]:
        assert rec["float_settled"] == 2 ** rec["n"]
        for layer in rec["layers"]:
            lo = parse_decimal(layer["error"]["lower"])
            hi = parse_decimal(layer["error"]["upper"])
            assert hi - lo <= hi * Fraction(1, 10**6) * 2  # decimals are rounded outward
    _check(model, 7, min_n=5)


def test_jobs_and_resume_byte_identical(tmp_path: Path) -> None:
    """Shards of 32 words with the tier on: the same bytes with --jobs 1, --jobs 2 and after a
    resume from a checkpoint that lost two of its four shards; shard identities carry the
    switch (coarse_tier)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model
    finally:
        sys.path.pop(0)
    (tmp_path / "m.json").write_text(json.dumps(random_model(d=16, blocks=4, heads=2, seed=0)))
    env = {**os.environ, "EXACTATTN_SHARD_INPUTS": "32"}
    env.pop("EXACTATTN_COARSE", None)

    def run(name: str, *extra: str) -> bytes:
        return check_bytes(tmp_path / "m.json", 7, tmp_path / name, env, *extra)

    one = run("one.json", "--jobs", "1")
    assert run("two.json", "--jobs", "2") == one
    ck = tmp_path / "ck"
    assert run("ck.json", "--checkpoint", str(ck)) == one
    shards = sorted(ck.glob("*-n7/s*.json"))
    assert len(shards) == 4
    assert all(json.loads(p.read_text())["identity"]["coarse_tier"] is True for p in shards)
    for p in shards[1:3]:
        p.unlink()
    assert run("resumed.json", "--checkpoint", str(ck), "--jobs", "2") == one
    assert json.loads(one)["lengths"][0]["float_settled"] == 128


def _fb(B: int, lo: float, tie: bool | None) -> FloatBatch:
    L = 2
    return FloatBatch(
        settled=np.zeros(B, dtype=bool),
        err_lo=np.full((B, L), lo),
        err_hi=np.full((B, L), lo + 1),
        err_row=np.full((B, L), int(lo), dtype=np.int64),
        accept=np.ones(B, dtype=bool),
        decided=np.ones(B, dtype=bool),
        tight=np.zeros((B, L), dtype=bool),
        tie=None if tie is None else np.full(B, tie),
        read=np.ones(B, dtype=bool),
    )


def test_put_rows_one_tier_per_row() -> None:
    """Rows idx come from the part, the others from the base; a field only one side has is
    filled with "no tie"/False elsewhere; the base is not changed."""
    base, part = _fb(5, 1.0, None), _fb(2, 7.0, True)
    part.settled[:] = True
    out = put_rows(base, np.array([1, 3]), part)
    assert out.err_lo[:, 0].tolist() == [1.0, 7.0, 1.0, 7.0, 1.0]
    assert out.err_row[:, 1].tolist() == [1, 7, 1, 7, 1]
    assert out.settled.tolist() == [False, True, False, True, False]
    assert out.tie is not None and out.tie.tolist() == [False, True, False, True, False]
    assert base.tie is None and base.err_lo.max() == 1.0
    assert put_rows(part, np.array([0]), _fb(1, 3.0, None)).tie.tolist() == [False, True]


@pytest.mark.parametrize("n", [3, 6])
def test_tier_declines_argmax(n: int) -> None:
    """certify_coarse declines a model without an accept read-out (None)."""
    from exactattn.engine.cascade.interval import tau_enclosures
    from exactattn.engine.hard import run_hard
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import words_of_length

    m = load_model(ROOT / "models" / "induction_k1.json")
    cm = CompiledModel(m)
    taus = tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    hb = run_hard(cm, list(words_of_length(m.alphabet, n))[:8], n)
    assert coarse.certify_coarse(cm, hb, taus) is None


@pytest.mark.parametrize("exact_first", [True, False])
def test_first_layer_paths_meet_arb(monkeypatch, exact_first: bool) -> None:
    """The first layer from the exact hard scores and values (EXACT_FIRST, the default) and
    from products with radii: both meet arb on every word of the random benchmark model at
    n = 5, every read-out decided and equal to arb's; the exact path is not looser."""
    from tiers_vs_arb import assert_meets_arb

    from exactattn.engine.cascade.interval import tau_enclosures
    from exactattn.engine.hard import run_hard
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import words_of_length

    m = random_benchmark_model(0, blocks=4)
    cm = CompiledModel(m)
    temps = Temperatures(m, None)
    taus = tau_enclosures(temps.at(5, BASE_PREC))
    hb = run_hard(cm, list(words_of_length(m.alphabet, 5)), 5)
    monkeypatch.setattr(coarse, "EXACT_FIRST", exact_first)
    fc = coarse.certify_coarse(cm, hb, taus)
    assert fc is not None and fc.read.all() and np.isfinite(fc.err_hi).all()
    assert_meets_arb(cm, hb, fc, temps, fc.read)
    if exact_first:
        monkeypatch.setattr(coarse, "EXACT_FIRST", False)
        other = coarse.certify_coarse(cm, hb, taus)
        assert other is not None
        assert (fc.err_hi[:, 0] <= other.err_hi[:, 0]).all()
