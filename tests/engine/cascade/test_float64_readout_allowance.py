"""The two-label read-out's rounding allowance on the label difference is pinned.

``_argmax_two`` widens the radius of δ_1 − δ_0 (``dr1``) like ``_label_decisions``'s one-pair
case does. Near the boundary where "label 1 certainly above label 0" flips, removing that
allowance makes the fast read-out decide words the general path leaves undecided: its
decisions must stay those of the general path, and every claim must hold in exact arithmetic.
"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from exactattn.engine.cascade import batch as fbm
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import readout as ro
from exactattn.engine.cascade import weights as wt
from exactattn.engine.ratarray import RatArray


def test_two_label_allowance_matches_general_path_and_is_sound():
    """A sweep of radii just below δ_1's midpoint, across the decision boundary (hard tie,
    δ_0 = 0): the same decided set as ``_label_decisions``, both sides of it present, and each
    decided word's label certain from the exact enclosure of δ_1 − δ_0."""
    x = 0.7
    t = np.arange(80) * 2.0**-53 * x  # boundary near 26·2^-52·x with the allowance
    B, T = len(t), 1
    delta: iv.Cols = {
        0: (np.zeros((B, T)), np.zeros((B, T))),
        1: (np.full((B, T), x), (x - t).reshape(B, T)),
    }
    fw = SimpleNamespace(out=[[(0, 1.0)], [(1, 1.0)]])  # output row a = δ column a
    vals = RatArray(np.zeros((B, T, 2), dtype=np.int64), 1)  # hard labels tie: h = 0
    res = fbm.FloatBatch(
        np.ones(B, bool), np.zeros((B, 1)), np.zeros((B, 1)), np.zeros((B, 1), np.int64)
    )
    assert ro._argmax_two(delta, fw, vals, [0], res)
    # the general path's decisions on the same δ
    plan = wt.lin_plan(delta, fw.out)
    gm, gr = wt.lin_stack(delta, plan, (len(delta) + 3) * iv.SUM_U)
    dm, dr = gm.transpose(1, 2, 0), gr.transpose(1, 2, 0)
    one, fin, pick = ro._label_decisions(vals.num, vals.den, dm, dr, ro._off_diagonal(2))
    ref = np.where(one, pick, -1)
    np.testing.assert_array_equal(res.labels, ref)
    np.testing.assert_array_equal(res.settled, (one & fin).all(axis=1))
    assert res.settled.any() and (~res.settled).any()  # the sweep crosses the boundary
    # soundness: a decided label is certain on the exact enclosures δ_a ∈ gm[a] ± gr[a]
    for b in np.flatnonzero(res.settled):
        lo = Fraction(gm[1, b, 0]) - Fraction(gr[1, b, 0]) - Fraction(gm[0, b, 0])
        lo -= Fraction(gr[0, b, 0])
        hi = Fraction(gm[1, b, 0]) + Fraction(gr[1, b, 0]) - Fraction(gm[0, b, 0])
        hi += Fraction(gr[0, b, 0])
        assert (lo > 0) if res.labels[b, 0] == 1 else (hi < 0)
