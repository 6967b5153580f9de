"""The centred tier: float64 again, with the softmax of large perturbations centred on its winner.

For the words the float64 tier (:mod:`.float64`) cannot settle, before the double-double tier
(:mod:`.dd`). On badly conditioned models (the random
benchmark model: score perturbations |δs/τ| of 10^6–10^7 from the third attention layer on)
float64 loses those words to *interval overestimation*, not to precision
(notes/benchmark-rounds.md, "Centred tier"). The float64 filter computes a row with |δs/τ| ≥ 1 as
α_j = e^{x_j − m} / Σ_k e^{x_k − m} with x_j = (s_j + δs_j)/τ and a float shift m:

* the hard score s_j (≈ 10^9·τ there) enters rounded, so every argument carries ≈ 2^-50·|s/τ|
  ≈ 10^-5 of width that the softmax does not need (it depends on differences only);
* the winner's weight is w_t / (w_t + Σ_{k≠t} w_k) with w_t in numerator and denominator as two
  independent intervals: its width is twice the width of w_t, although the true α_t =
  1 / (1 + Σ_{k≠t} e^{x_k − x_t}) hardly moves when the other keys are far below.

Through four attention layers those widths compound (each layer multiplies a relative width by
≈ |δs/τ|). Here each such row is computed as (proofs/centred_softmax.md)

    α_j = E_j / Σ_k E_k,   E_t = 1 exactly,   E_j ∋ exp(((δs_j − δs_t) + (s_j − s_t))/τ),

with t the key of the largest float estimate and s_j − s_t an *exact* integer difference of the
hard scores, converted once. Everything else is the float64 tier itself (``certify_float``
with :func:`.attention.big_rows`), so every other rounding allowance is the float64 tier's, and a
word's decisions come from the same proven code. ``EXACTATTN_CENTRED=0`` turns the tier off
(:mod:`.policy`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade.attention import big_rows
from exactattn.engine.cascade.batch import FloatBatch
from exactattn.engine.cascade.float64 import certify_float
from exactattn.engine.hard import CompiledModel, HardBatch, HeadTrace

ROW_U = 2.0**-52  # per-term relative allowance of the fixed-order key sum Σ_k E_k (≥ 2u)
FAR = -800.0  # an argument certainly below this has 0 < e^x < e^-799 < TINY (Lemma C)

MR = tuple[np.ndarray, np.ndarray]


def row_sum(a: MR) -> MR:
    """Σ over axis 1 (the keys) in a fixed order, left to right, as an enclosure.

    Lemma S (proofs/centred_softmax.md): with T terms and k = (T + 2)·ROW_U the radius
    fl(Σ r)·(1 + k) + fl(Σ |m|)·k covers the radii and every rounding of the midpoint sum."""
    m, r = a
    T = m.shape[1]
    sm = m[:, 0].copy()
    sr = r[:, 0].copy()
    sa = np.abs(m[:, 0])
    for j in range(1, T):
        sm += m[:, j]
        sr += r[:, j]
        sa += np.abs(m[:, j])
    k = (T + 2) * ROW_U
    return sm, iv.guard(sm, sr * (1 + k) + sa * k)


def _below(num: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """num − num[row, first[row]] exactly, and as floats (to pick the centre). int64 when
    every entry fits below 2^61 (so that any difference of two is exact in int64), else
    Python integers."""
    rows = np.arange(num.shape[0])
    if num.dtype != object and not (num.size and int(np.abs(num).max()) >= 2**61):
        b = num - num[rows, first][:, None]  # |·| < 2^62: exact
        return b, b.astype(np.float64)
    b = num.astype(object, copy=False)
    b = b - b[rows, first][:, None]
    bf = b.astype(np.float64)  # correctly rounded (or ±inf: then stay with Python integers)
    if bf.size and float(np.abs(bf).max()) < 2.0**60:  # true |b| ≤ |bf|(1 + u) < 2^61
        b = b.astype(np.int64)
    return b, bf


def centred_rows(tr: HeadTrace, ds: MR, inv_tau: MR, big: np.ndarray, da: MR) -> None:
    """Overwrite δα = α − α° on the query rows ``big`` (B, i) with the centred softmax.

    ``ds`` and ``da`` are key-major (B, j, i), as in the attention pass's head. Sound for any
    choice of the centre t (proofs/centred_softmax.md, Lemma C); t is the visible key of the
    largest float estimate of (s_j + δs_j)/τ, so that the other E_j are ≤ ≈ 1."""
    bi, ii = np.nonzero(big)
    K = bi.size
    vis = tr.visible[ii]  # (K, T): a big row sees at least one key
    rows = np.arange(K)
    dm = ds[0][bi, :, ii]  # (K, T)
    dr = ds[1][bi, :, ii]
    den = tr.scores.den
    first = np.argmax(tr.top[bi, ii, :], axis=1)  # a hard top key (the row's maximum)
    # s_j − s_first (≤ 0 on visible keys), exact integers over den, and as floats
    below, bf = _below(tr.scores.num[bi, ii, :], first)
    with np.errstate(over="ignore", invalid="ignore"):  # an estimate: inf/nan only mis-pick t
        est = dm + bf * (1.0 / float(den))
    # t must be *visible* (Lemma C): a visible key whose estimate is nan or −inf still beats
    # every invisible one (−inf), and a big row sees at least one key
    est = np.where(vis, np.where(est > -np.inf, est, -np.finfo(np.float64).max), -np.inf)
    t = np.argmax(est, axis=1)  # any visible key is sound
    sdiff = below - below[rows, t][:, None]  # s_j − s_t, exact
    dd = iv.sub((dm, dr), (dm[rows, t][:, None], dr[rows, t][:, None]))  # δs_j − δs_t
    x = iv.mul(iv.add(dd, iv.from_rat(sdiff, den)), inv_tau)  # (s_j + δs_j − s_t − δs_t)/τ
    e = iv.mr_exp((np.where(vis, x[0], 0.0), np.where(vis, x[1], 0.0)))
    # far below the centre: fl(m + 2r) < −800 means m + r < −799, so 0 < E < e^-799 < TINY
    # (a wide argument there would otherwise give E, and so the whole row, an infinite radius)
    far = x[0] + 2.0 * x[1] < FAR
    e = (np.where(far, 0.0, e[0]), np.where(far, iv.TINY, e[1]))
    is_t = np.arange(vis.shape[1])[None, :] == t[:, None]
    other = vis & ~is_t
    E = (np.where(other, e[0], np.where(is_t, 1.0, 0.0)), np.where(other, e[1], 0.0))
    Z = row_sum(E)  # ≥ 1: the centre's term is exactly 1
    alpha = iv.div(E, (Z[0][:, None], Z[1][:, None]))
    cnt = tr.count[bi, ii].astype(np.float64)
    inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)[:, None]  # fl(1/c): within u
    h = np.where(tr.support[bi, ii, :], inv, 0.0)
    d = iv.sub(alpha, (h, h * iv.CONV))
    da[0][bi, :, ii] = np.where(vis, d[0], 0.0)
    da[1][bi, :, ii] = np.where(vis, d[1], 0.0)


def certify_centred(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> FloatBatch:
    """The float64 filter on every word of ``hb`` with :func:`centred_rows` for the rows of
    large perturbations: a :class:`~.batch.FloatBatch` with the same contract as
    ``certify_float``'s and ``certify_dd``'s (a settled word has every decision certain and
    every reported enclosure tight)."""
    with big_rows(centred_rows):
        return certify_float(cm, hb, taus, share=False)
