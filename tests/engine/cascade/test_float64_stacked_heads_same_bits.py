"""The small-batch layouts of the float filter compute the same bits as the general code.

notes/benchmark-rounds.md, "Stacked heads (issue 25, tracr programs, third round)": a head with no δ
coming in is computed laid out [key, query, word] (``_head_free``), the argmax read-out
without per-slot loops (``_argmax_two``, ``_argmax_many``) and a call's layer error bounds
in one pass (``_errors_into``). Each must give exactly the numbers and decisions of the code
it stands in for (benchmarks/compare_softfloat.py checks whole models; these tests check the
pieces on random data, including the paths bundled models rarely reach: non-power-of-two
denominators, gaps spread wider than the gap table, constant queries, rows with nothing
visible, infinite and nan perturbations, labels that tie).
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from paths import TESTS

from exactattn import model_from_dict
from exactattn.engine.cascade import attention as att
from exactattn.engine.cascade import batch as fbm
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import readout as ro
from exactattn.engine.cascade import weights as wt
from exactattn.engine.hard import CompiledModel, HeadTrace, run_hard
from exactattn.engine.ratarray import RatArray
from exactattn.importers.tracr import import_tracr
from exactattn.inputs import words_of_length

TRACR = TESTS / "data" / "tracr_lib"


def _same(a: iv.Cols, b: iv.Cols) -> None:
    assert list(a) == list(b)
    for c in a:
        for x, y in zip(a[c], b[c], strict=True):
            assert x.shape == y.shape
            np.testing.assert_array_equal(
                np.asarray(x).view(np.int64), np.asarray(y).view(np.int64)
            )


def _trace(rng: np.random.Generator, B: int, R: int, T: int, spread: int, const_q: bool):
    """A random average-head trace: visible keys, integer scores, the top (maximal visible)
    keys, integer values; denominators powers of two or not."""
    vis = rng.random((R, T)) < 0.7
    if rng.random() < 0.3:
        vis[:] = True
    if R > 1 and rng.random() < 0.2:
        vis[rng.integers(R)] = False  # a query that sees nothing
    if spread < 0:  # two gaps, far apart: _gap_weights's two-value table
        s = rng.choice([spread, 0, -spread], (B, R, T)).astype(np.int64)
    else:
        s = rng.integers(-spread, spread + 1, (B, R, T)).astype(np.int64)
    if const_q:
        s[:] = s[:, :1]
        vis[:] = vis[:1]
    sm = np.where(vis[None], s, np.iinfo(np.int64).min).max(axis=2, keepdims=True)
    top = vis[None] & (s == sm)
    sden = int(rng.choice([1, 4, 3, 144]))
    vden = int(rng.choice([1, 2, 12]))
    E = int(rng.integers(0, 4))
    q = rng.integers(0, 3, (B, R, 2)).astype(np.int64)
    if const_q:
        q[:] = q[:, :1]
    return HeadTrace(
        q=RatArray(q, 1),
        k=RatArray(np.zeros((B, T, 2), np.int64), 1),
        v=RatArray(rng.integers(-5, 6, (B, T, E)).astype(np.int64), vden),
        scores=RatArray(s, sden),
        visible=vis,
        top=top,
        support=top,
        count=top.sum(axis=2),
        mixed=RatArray(np.zeros((B, R, E), np.int64), vden),
    ), E


@pytest.mark.parametrize("seed", range(60))
def test_free_head_is_bit_identical(seed):
    """``_head_free`` gives ``_head``'s numbers on a head with no δ coming in, or None."""
    rng = np.random.default_rng(seed)
    B, R, T = int(rng.integers(1, 9)), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    # 10^4: gaps wider than the 256-entry table; −5000: two gaps, 5000 and 10^4
    spread = int(rng.choice([2, 40, 10**4, -5000]))
    tr, E = _trace(rng, B, R, T, spread, const_q=seed % 5 == 0)
    O = None
    if E and rng.random() < 0.8:
        O = [[(c, float(rng.choice([1.0, -1.0, 0.5]))) for c in range(E) if rng.random() < 0.6]]
        O = O * int(rng.integers(1, 4))  # one, two or three output rows
    hw = {"Q": [], "K": [], "V": [], "O": O}
    lo = Fraction(int(rng.integers(1, 50)), int(rng.integers(1, 50)))
    it = iv.inv_tau(lo, lo * Fraction(1 + 2**-40))
    with np.errstate(all="ignore"):
        want = att._head(tr, "average", {}, it, hw)
        got = att._head_free(tr, "average", it, hw)
        if got is None:  # gaps neither in a short range nor two values: _head runs
            assert spread == 10**4
            got = att.head_delta(tr, "average", {}, it, hw)
    _same(got, want)


def test_free_head_reaches_the_tables_and_the_constant_query():
    """The seeds above reach the short-range table, the two-value table, the fallback and a
    constant query (computed once and repeated)."""
    seen = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        B, R, T = int(rng.integers(1, 9)), int(rng.integers(1, 7)), int(rng.integers(1, 7))
        spread = int(rng.choice([2, 40, 10**4, -5000]))
        tr, _ = _trace(rng, B, R, T, spread, const_q=seed % 5 == 0)
        rest = tr.visible[None] & ~tr.top
        if not rest.any():
            continue
        s = tr.scores.num
        g = (s.max(axis=2, keepdims=True, where=tr.visible[None], initial=s.min()) - s)[rest]
        lo, hi = int(g.min()), int(g.max())
        seen.add("range" if hi - lo < 256 else "two" if len(set(g.tolist())) == 2 else "other")
        if R > 1 and seed % 5 == 0:
            seen.add("const")
    assert seen == {"range", "two", "other", "const"}


def _lib(name: str):
    meta = json.loads((TRACR / f"{name}.json").read_text())
    m = model_from_dict(import_tracr(TRACR / f"{name}.npz", TRACR / f"{name}.json"))
    n = int(meta["max_seq_len"])
    cm = CompiledModel(m)
    words = list(words_of_length(m.alphabet, n))
    return m, cm, run_hard(cm, words, n), n


@pytest.mark.parametrize("name", ["lib_shift_by", "lib_length", "lib_sort_unique"])
@pytest.mark.parametrize("seed", range(6))
def test_argmax_readouts_match_the_general_path(name, seed, monkeypatch):
    """The two-label and many-label read-outs decide, label and flag ties exactly as the
    general slot-group path, on random δ with exact zeros, ties, infinities and nan."""
    m, cm, hb, n = _lib(name)
    fw = wt.float_weights(cm)
    rng = np.random.default_rng(seed)
    B, T = hb.x0.shape[:2]
    d = hb.x0.shape[2]
    delta = {}
    for c in sorted(rng.choice(d, size=int(rng.integers(1, d + 1)), replace=False).tolist()):
        if seed < 3:  # small: most words decided
            mid = rng.choice([0.0, 1e-9, -1e-9], (B, T)) * rng.random((B, T))
            rad = rng.choice([0.0, 1e-12], (B, T))
        else:  # wild: ties broken or not, infinities, nan
            mid = rng.choice([0.0, 1e-3, -1e-3, 0.5, 2.0], (B, T)) * rng.random((B, T))
            rad = rng.choice([0.0, 1e-12, 1e-3, 1.0], (B, T))
            pick = rng.random((B, T))
            mid[pick < 0.02] = np.inf
            rad[(pick > 0.02) & (pick < 0.04)] = np.nan
        delta[c] = (mid, rad)

    def run():
        res = fbm.FloatBatch(
            np.ones(B, bool), np.zeros((B, 1)), np.zeros((B, 1)), np.zeros((B, 1), np.int64)
        )
        with np.errstate(all="ignore"):
            ro._readout(cm, hb, delta, fw, res)
        return res

    fast = run()
    monkeypatch.setattr(ro, "_argmax_two", lambda *a: False)
    monkeypatch.setattr(ro, "_argmax_many", lambda *a: False)
    slow = run()
    for k in ("settled", "labels", "tie"):
        a, b = getattr(fast, k), getattr(slow, k)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert slow.settled.any() if seed < 3 else (~slow.settled).any()  # both outcomes


@pytest.mark.parametrize("seed", range(20))
def test_errors_of_several_layers_in_one_pass(seed):
    """``_errors_into`` writes each layer's ``_layer_errors`` bounds and row, and leaves a
    layer without δ at zero."""
    rng = np.random.default_rng(seed)
    B, T, L = int(rng.integers(1, 7)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
    pending = []
    for li in range(L):
        delta = {}
        for c in range(int(rng.integers(0, 4))):
            mid = rng.standard_normal((B, T)) * 10.0 ** rng.integers(-300, 300, (B, T))
            rad = np.abs(rng.standard_normal((B, T))) * rng.choice([0.0, 1e-9, 1.0], (B, T))
            special = rng.random((B, T))
            mid[special < 0.05] = np.inf
            rad[(special > 0.05) & (special < 0.1)] = np.inf
            mid[(special > 0.1) & (special < 0.12)] = np.nan
            delta[int(rng.integers(0, 10)) * 10 + c] = (mid, rad)
        pending.append((li, delta))
    err = (np.zeros((B, L)), np.zeros((B, L)), np.zeros((B, L), np.int64))
    ro.errors_into(pending, err, B, T, 0)
    for li, delta in pending:
        want = ro.layer_errors(delta, B, T, 0)
        for got, w in zip(err, want, strict=True):
            np.testing.assert_array_equal(got[:, li].view(np.int64), np.asarray(w).view(np.int64))
