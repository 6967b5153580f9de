"""The centred float64 tier (engine/cascade/centred.py, proofs/centred_softmax.md): its key sum
encloses the exact sum and needs its allowance; its enclosures meet arb's on every bundled model
and on random models; on the random benchmark model it settles what float64 leaves; a check with
it keeps every exact field of the arb-only path and does not depend on scheduling."""

from __future__ import annotations

import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cascade_patch import set_policy
from flint import arb, ctx
from paths import ROOT
from tiers_vs_arb import assert_meets_arb, random_benchmark_model

from exactattn import load_model, run_check
from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade import centred
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade.centred import certify_centred, row_sum
from exactattn.engine.cascade.float64 import certify_float
from exactattn.engine.hard import CompiledModel, HeadTrace, run_hard
from exactattn.engine.ratarray import RatArray
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length

MODELS = sorted(p.stem for p in (ROOT / "models").glob("*.json"))
U = 2.0**-53


def _sum_violations(rows: list[list[tuple[float, float]]]) -> int:
    """Rows of (mid, rad) whose row_sum enclosure misses the exact sum of an endpoint choice
    (the midpoints, and every entry at its upper end)."""
    m = np.array([[a for a, _ in r] for r in rows])
    r = np.array([[b for _, b in r] for r in rows])
    sm, sr = row_sum((m, r))
    bad = 0
    for i, row in enumerate(rows):
        for pick in (0, 1):
            exact = sum(Fraction(a) + pick * Fraction(b) for a, b in row)
            if abs(exact - Fraction(float(sm[i]))) > Fraction(float(sr[i])):
                bad += 1
    return bad


def _adversarial() -> list[list[tuple[float, float]]]:
    """1 + 13 terms of 0.9u: each addition rounds back to 1 and loses 0.9u (11.7u in all,
    against an allowance of 16·2u = 32u; a quarter of it, 8u, is not enough)."""
    return [[(1.0, 0.0)] + [(0.9 * U, 0.0)] * 13, [(-1.0, 0.0)] + [(-0.9 * U, 0.0)] * 13]


def test_row_sum_encloses_exact() -> None:
    rng = random.Random(5)
    rows = _adversarial()
    for _ in range(300):
        T = rng.randint(1, 16)
        scale = 2.0 ** rng.randint(-60, 60)
        rows_ = [
            (rng.uniform(-1, 1) * scale * 2.0 ** rng.randint(-50, 0), abs(rng.gauss(0, 1)) * U)
            for _ in range(T)
        ]
        rows.append(rows_ + [(0.0, 0.0)] * (16 - T))
    rows = [r + [(0.0, 0.0)] * (16 - len(r)) for r in rows]
    assert _sum_violations(rows) == 0


def test_row_sum_allowance_is_needed(monkeypatch) -> None:
    """Lowering the key sum's allowance (ROW_U → ROW_U/4) lets the exact sum escape."""
    monkeypatch.setattr(centred, "ROW_U", centred.ROW_U / 4)
    assert _sum_violations(_adversarial()) > 0


def _trace(scores: np.ndarray, den: int, vis: np.ndarray) -> HeadTrace:
    """A head trace with the given hard scores (B, R, T) and visibility (R, T), average rule
    (the hard weights 1/|top| on the top keys); fields centred_rows does not read are zeros."""
    B, R, T = scores.shape
    masked = np.where(vis[None], scores, None if scores.dtype == object else scores.min() - 1)
    best = np.array([[max(masked[b, i][vis[i]]) for i in range(R)] for b in range(B)], object)
    top = np.array(masked == best[:, :, None], dtype=bool) & vis[None]
    zero = RatArray(np.zeros((B, T, 1), dtype=np.int64), 1)
    return HeadTrace(
        q=zero,
        k=zero,
        v=zero,
        scores=RatArray(scores, den),
        visible=vis,
        top=top,
        support=top,
        count=top.sum(axis=2),
        mixed=RatArray(np.zeros((B, R, 1), dtype=np.int64), 1),
    )


@pytest.mark.parametrize("big", [False, True])
def test_centred_rows_enclose_exact_softmax(big: bool) -> None:
    """Lemma C on its own: δα = softmax((s + δs)/τ) − hard weights, for hand-made rows (hard
    scores of 10^9, or of 2^70 as Python integers with ``big``; perturbations of ±40·τ; a
    masked key; a hard tie; with ``big`` a key 2^75 below the others, whose argument is wide
    but far below), against 300-bit arb at the midpoints of δs; and tight."""
    rng = np.random.default_rng(3 if big else 4)
    B, R, T, den = 3, 2, 5, 7
    raw = rng.integers(-(10**3), 10**3, size=(B, R, T))
    if big:
        scores = raw.astype(object) + 2**70
        scores[:, :, 4] -= 2**75
    else:
        scores = raw + 10**9
    scores[0, 0, 1] = scores[0, 0, 2]  # a hard tie
    vis = np.array([[True, True, True, False, True], [True] * T])
    tr = _trace(scores, den, vis)
    dm = rng.uniform(-40, 40, size=(B, T, R)) / 3
    dr = np.abs(dm) * 1e-13 + iv.TINY
    it = iv.inv_tau(Fraction(1, 3), Fraction(1, 3))
    da = (np.zeros((B, T, R)), np.zeros((B, T, R)))
    centred.centred_rows(tr, (dm, dr), it, np.ones((B, R), bool), da)
    ctx.prec = 300
    try:
        for b in range(B):
            for i in range(R):
                js = [j for j in range(T) if vis[i, j]]
                r0 = js[0]  # x_j − x_r0, exactly (softmax is shift-invariant)
                x = {
                    j: (
                        arb(int(scores[b, i, j] - scores[b, i, r0])) / den
                        + arb(float(dm[b, j, i]))
                        - arb(float(dm[b, r0, i]))
                    )
                    * 3
                    for j in js
                }
                # a key 2^75 below: e^x < e^-10^21 (arb's exp is slow that far out), so its
                # weight is in [0, 2^-1000] and adds at most that to the sum
                far = {j for j in js if x[j] < -(10**6)}
                z = sum(x[j].exp() for j in js if j not in far) + arb(0, 2.0**-1000)
                c = int(tr.count[b, i])
                for j in range(T):
                    m, r = float(da[0][b, j, i]), float(da[1][b, j, i])
                    if j not in js:
                        assert m == 0 and r == 0
                        continue
                    assert math.isfinite(m) and r < 1e-9, (b, i, j, m, r)  # tight
                    ex = arb(0, 2.0**-1000) if j in far else x[j].exp()
                    want = ex / z - (arb(1) / c if tr.support[b, i, j] else 0)
                    lo, hi = arb_endpoints(want)
                    assert Fraction(m) - Fraction(r) <= lo and hi <= Fraction(m) + Fraction(r)
    finally:
        ctx.prec = 53


def test_centred_rows_claim_nothing_from_non_finite_input() -> None:
    """δs of −inf or nan on every visible key of a row (key 0 masked): no finite enclosure
    comes out for that row (and the masked key stays exactly 0)."""
    scores = np.array([[[5, 3, 1, 0]]], dtype=np.int64)
    vis = np.array([[False, True, True, True]])
    tr = _trace(scores, 1, vis)
    for bad in (-np.inf, np.nan):
        dm = np.full((1, 4, 1), bad)
        da = (np.zeros((1, 4, 1)), np.zeros((1, 4, 1)))
        it = iv.inv_tau(Fraction(1, 2), Fraction(1, 2))
        with np.errstate(all="ignore"):
            centred.centred_rows(tr, (dm, np.zeros_like(dm)), it, np.ones((1, 1), bool), da)
        assert da[0][0, 0, 0] == 0 and da[1][0, 0, 0] == 0
        fin = np.isfinite(da[0][0, 1:, 0]) & np.isfinite(da[1][0, 1:, 0])
        assert not fin.any()


_random_model = random_benchmark_model


def _against_arb(model, n: int, limit: int = 64, only=None) -> tuple[int, int]:
    """Per word and layer, the tier's [lo, hi] of max|δ| meets arb's, and every decided
    read-out is arb's. ``only``: a mask of the words to compare (default all). Returns (words
    the tier settled, words compared)."""
    cm = CompiledModel(model)
    temps = Temperatures(model, None)
    words = list(words_of_length(model.alphabet, n))[:limit]
    hb = run_hard(cm, words, n)
    taus = iv.tau_enclosures(temps.at(n, BASE_PREC))
    if only is not None:
        idx = np.flatnonzero(only(cm, hb, taus))
        words = [words[i] for i in idx]
        hb = run_hard(cm, words, n)
    if not words:
        return 0, 0
    fb = certify_centred(cm, hb, taus)
    assert_meets_arb(cm, hb, fb, temps, fb.read)
    return int(fb.settled.sum()), len(words)


@pytest.mark.parametrize("name", MODELS)
def test_bundled_models_meet_arb(name: str) -> None:
    """Every bundled model at n = 4 (16 words each): the tier's enclosures contain arb's."""
    _against_arb(load_model(ROOT / "models" / f"{name}.json"), 4, limit=16)


def _f64_left(cm, hb, taus) -> np.ndarray:
    return ~certify_float(cm, hb, taus).settled


def test_benchmark_model_words_float64_leaves(monkeypatch) -> None:
    """The random benchmark model (4 blocks) at n = 8: on the words the float64 tier leaves
    (not tight or undecided) the tier reaches the centred rows, meets arb in every layer and
    decides every read-out; it settles most of them tight, float64 none."""
    calls = []
    real = centred.centred_rows

    def spy(*a) -> None:
        calls.append(int(a[3].sum()))
        real(*a)

    monkeypatch.setattr(centred, "centred_rows", spy)
    settled, compared = _against_arb(_random_model(0, blocks=4), 8, limit=256, only=_f64_left)
    assert compared > 50
    assert sum(calls) > 0
    assert settled >= compared * 3 // 4, (settled, compared)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_models_meet_arb(seed: int) -> None:
    _against_arb(_random_model(seed), 6)


def test_check_agrees_with_arb_only_without_dd(monkeypatch) -> None:
    """With the double-double tier off, the centred tier alone settles words float64 leaves on
    the benchmark model (n = 7), and every exact field and verdict is the arb-only path's."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_float_filter_changes_only_last_digits import _check

    set_policy(monkeypatch, dd=False)
    model = _random_model(0, blocks=4)
    on = run_check(model, max_n=7, min_n=7).to_json()
    with monkeypatch.context() as mp:
        set_policy(mp, centred=False)
        off = run_check(model, max_n=7, min_n=7).to_json()
    assert on["lengths"][0]["float_settled"] > off["lengths"][0]["float_settled"]
    _check(model, 7, min_n=7)


def test_switch_off_skips_the_tier(monkeypatch) -> None:
    """EXACTATTN_CENTRED=0 (``policy.centred`` False when the job is made): the tier is never
    called; on, it is (the benchmark model at n = 6 has words float64 leaves)."""
    import exactattn.run.shard as shard
    from exactattn.engine.cascade import chain

    model = _random_model(0, blocks=4)
    called = []

    def spy(*a):  # type: ignore[no-untyped-def]
        called.append(1)
        return certify_centred(*a)

    monkeypatch.setattr(chain, "certify_centred", spy)
    run_check(model, max_n=6, min_n=6)
    assert called
    called.clear()
    set_policy(monkeypatch, centred=False)
    assert not shard.LengthJob(model=model, n=6, tau=None, hard_only=False).policy.centred
    run_check(model, max_n=6, min_n=6)
    assert called == []


def test_jobs_1_and_2_identical_with_tier(monkeypatch) -> None:
    """Byte-identical check JSON with 1 and 2 processes where the tier settles words (the
    double-double tier off, so that the centred tier's enclosures are the ones reported)."""
    from exactattn.core.jsonio import dumps
    from exactattn.run.executors import Processes

    monkeypatch.setenv("EXACTATTN_SHARD_INPUTS", "32")
    set_policy(monkeypatch, dd=False)
    model = _random_model(0, blocks=4)
    one = dumps(run_check(model, max_n=6, min_n=6).to_json())
    pool = Processes(2)
    try:
        two = dumps(run_check(model, max_n=6, min_n=6, executor=pool).to_json())
    finally:
        pool.close()
    assert one == two


@pytest.mark.slow
def test_random_models_meet_arb_many(monkeypatch) -> None:
    """1,000 random models (2–3 blocks, d 8–16, seeds 0..999) at n = 4 (16 words each); most
    of them reach the centred rows (947 when this was written)."""
    real = centred.centred_rows
    reached: set[int] = set()
    seed = 0

    def spy(*a) -> None:
        reached.add(seed)
        real(*a)

    monkeypatch.setattr(centred, "centred_rows", spy)
    for seed in range(1000):
        d = 8 + (seed % 3) * 4
        _against_arb(_random_model(seed, blocks=2 + seed % 2, d=d), 4, limit=16)
    assert len(reached) > 900
