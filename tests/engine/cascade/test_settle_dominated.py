"""run/shard.py's settle_dominated (issue 25, notes/benchmark-rounds.md "The random model's last
third"):
a loose word is settled without arb when every layer is tight or below a certified lower end
of any word of the length, and its read-out is decided; its own ε ≤ 1 test may stay open only
where a lower end > 1 that enters the record already makes ε > 1 certain there. The results
keep the arb-only path's exact fields and stay independent of scheduling."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

from exactattn import model_from_dict, run_check
from exactattn.engine.cascade.batch import FloatBatch
from exactattn.engine.cascade.chain import settle_dominated

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cascade_patch import set_policy  # noqa: E402
from tiers_vs_arb import check_bytes  # noqa: E402


def _benchmark_model() -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model
    finally:
        sys.path.pop(0)
    return random_model(d=16, blocks=4, heads=2, seed=0)  # bench_softfloat's random model


def _fb(lo, hi, tight, read) -> FloatBatch:
    lo, hi, tight = np.array(lo), np.array(hi), np.array(tight, dtype=bool)
    read = np.array(read, dtype=bool)
    eps = ((hi[:, :-1] <= 1) | (lo[:, :-1] > 1)).all(axis=1)
    decided = read & eps
    return FloatBatch(
        settled=decided & tight.all(axis=1),
        err_lo=lo,
        err_hi=hi,
        err_row=np.zeros(lo.shape, dtype=np.int64),
        decided=decided,
        tight=tight,
        read=read,
    )


def test_threshold_from_any_words_lower_end() -> None:
    """A loose word below the certified lower end of a word that is *not* settled (its read-out
    open, or only known from ``known``) is settled; at or above it, it is not."""
    fb = _fb(
        lo=[[2.0, 0.5], [0.3, 0.5], [0.3, 0.5], [0.3, 0.5]],
        hi=[[2.1, 0.5], [0.7, 0.5], [0.8, 0.5], [0.95, 0.5]],
        tight=[[0, 1], [0, 1], [0, 1], [0, 1]],
        read=[0, 1, 1, 1],  # word 0: loose, read-out open, lower end 2.0 > 1 in layer 0
    )
    none = np.zeros(4, dtype=bool)
    # threshold 2.0 in layer 0 from word 0 (unsettled): words 1-3 are below it
    assert settle_dominated(fb, none, none, [0.0, 0.0]).tolist() == [False, True, True, True]
    fb.err_lo[0, 0] = 0.8  # now 0.8: only word 1 (0.7) is strictly below; word 2 (0.8) not
    assert settle_dominated(fb, none, none, [0.0, 0.0]).tolist() == [False, True, False, False]
    known = np.array([[0.9, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    got = settle_dominated(fb, none, none, [0.0, 0.0], (known,))
    assert got.tolist() == [False, True, True, False]
    under = np.array([0, 1, 0, 0], dtype=bool)  # an underflowed word is never settled here
    got = settle_dominated(fb, none, under, [0.0, 0.0], (known,))
    assert got.tolist() == [False, False, True, False]


def test_open_eps_only_where_a_recorded_lower_end_exceeds_1() -> None:
    """Word 1's ε ≤ 1 test is open in layer 0 (0.95 ≤ ε ≤ 1.05) and its enclosure is loose but
    dominated. It is settled only when a lower end > 1 in layer 0 enters the record: reported
    earlier (``lower``), or a word settled in the same call (found by the fixpoint) — not the
    lower end of a word that goes to arb."""
    lo = [[2.0, 0.1], [0.95, 0.1], [2.0, 0.1]]
    hi = [[2.0, 0.1], [1.05, 0.1], [2.5, 0.1]]
    # word 0 tight and settled; word 2 loose and not dominated (2.5 ≥ 2.0)
    fb = _fb(lo, hi, tight=[[1, 1], [0, 1], [0, 1]], read=[1, 1, 1])
    got = settle_dominated(fb, fb.settled.copy(), np.zeros(3, bool), [0.0, 0.0])
    assert got.tolist() == [True, True, False]
    # word 0's read-out open: its 2.0 still dominates word 1's 1.05, but ε > 1 is not recorded
    fb = _fb(lo, hi, tight=[[1, 1], [0, 1], [0, 1]], read=[0, 1, 1])
    got = settle_dominated(fb, fb.settled.copy(), np.zeros(3, bool), [0.0, 0.0])
    assert got.tolist() == [False, False, False]
    # ... unless an earlier batch reported a lower end > 1 there
    got = settle_dominated(fb, fb.settled.copy(), np.zeros(3, bool), [1.5, 0.0])
    assert got.tolist() == [False, True, False]
    # the fixpoint: word 2 (settled here, tight, lower end 2.0 > 1) lets word 1 in
    fb = _fb(lo, hi, tight=[[0, 1], [0, 1], [1, 1]], read=[0, 1, 1])
    fb.err_hi[2, 0] = 2.0
    got = settle_dominated(fb, np.zeros(3, bool), np.zeros(3, bool), [0.0, 0.0])
    assert got.tolist() == [False, True, True]
    # the last layer needs no ε ≤ 1 test: an open one there is fine
    fb = _fb([[0.1, 0.95]], [[0.1, 1.05]], tight=[[1, 1]], read=[1])
    assert settle_dominated(fb, np.zeros(1, bool), np.zeros(1, bool), [0.0, 0.0]).tolist() == [True]


def test_benchmark_model_agrees_with_arb_only(monkeypatch) -> None:
    """The random benchmark model at n = 8, where the rule settles 254 of 256 words (150
    before; 256 with the centred tier, engine/cascade/centred.py): every exact field, count,
    decision and verdict is the arb-only path's, the enclosures overlap, and every reported error
    keeps the 1e-6 accuracy."""
    from fractions import Fraction

    from test_float_filter_changes_only_last_digits import _check

    from exactattn.core.numbers import parse_decimal

    set_policy(monkeypatch, coarse=False)  # the counts are those of the tiers after it
    model = model_from_dict(_benchmark_model())
    with monkeypatch.context() as mp:
        set_policy(mp, centred=False)
        off = run_check(model, max_n=8, min_n=8).to_json()
    assert off["lengths"][0]["float_settled"] == 254
    got = run_check(model, max_n=8, min_n=8).to_json()
    assert got["lengths"][0]["float_settled"] == 256
    for layer in got["lengths"][0]["layers"]:
        lo, hi = parse_decimal(layer["error"]["lower"]), parse_decimal(layer["error"]["upper"])
        assert hi - lo <= hi * Fraction(1, 10**6) * 2  # decimals are rounded outward
    _check(model, 8, min_n=8)
    _check(model, 7, min_n=6)


def test_jobs_and_resume_byte_identical(tmp_path: Path) -> None:
    """Shards of 64 words: the same bytes with --jobs 1, --jobs 2 and after a resume from a
    checkpoint that lost two of its four shards."""
    (tmp_path / "m.json").write_text(json.dumps(_benchmark_model()))
    env = {**os.environ, "EXACTATTN_SHARD_INPUTS": "64"}

    def run(name: str, *extra: str) -> bytes:
        return check_bytes(tmp_path / "m.json", 8, tmp_path / name, env, *extra)

    one = run("one.json", "--jobs", "1")
    assert run("two.json", "--jobs", "2") == one
    ck = tmp_path / "ck"
    assert run("ck.json", "--checkpoint", str(ck)) == one
    shards = sorted(ck.glob("*-n8/s*.json"))
    assert len(shards) == 4
    for p in shards[1:3]:
        p.unlink()
    assert run("resumed.json", "--checkpoint", str(ck), "--jobs", "2") == one
    assert json.loads(one)["lengths"][0]["float_settled"] > 0


@pytest.mark.slow
def test_random_models_agree_with_arb_only_many() -> None:
    """Badly conditioned random models (3–4 blocks, d = 16, seeds 0–23) at n = 7 and 8: with
    both extensions every exact field is the arb-only path's and the enclosures overlap. (The
    extensions settle 8,925 of their 9,216 inputs without arb, 7,709 without them; they change
    the count on seeds 5, 7, 11, 13, 15 and 21.)"""
    from test_float_filter_changes_only_last_digits import _check

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model
    finally:
        sys.path.pop(0)
    for seed in range(24):
        model = model_from_dict(random_model(d=16, blocks=3 + seed % 2, heads=2, seed=seed))
        _check(model, 8, min_n=7)
