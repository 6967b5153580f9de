"""Midpoint-radius float64 arithmetic: the certified enclosures every float tier is built on.

Every number is an enclosure ``mid ± rad`` (the real interval [mid − rad, mid + rad]) of an
array of reals; :data:`MR` is such a pair of arrays, :data:`Cols` the δ = soft − hard of a
batch as columns. The passes (:mod:`.attention`, :mod:`.ffn`, :mod:`.readout`) and the tiers
use only these operations and allowances, so the argument below is the whole soundness
argument of the float64 tier (and of the centred tier, which is the float64 tier with other
rows, and of the long-input path, engine/longsoft.py).

Why the enclosures are sound (u = 2^-53, IEEE binary64, round to nearest):

* + − × / are correctly rounded: |fl(x∘y) − x∘y| ≤ u·|fl(x∘y)|, or ≤ 2^-1075 when the
  result underflows. A sum that rounds to zero, or to a subnormal, is exact (Hauser).
  Radii are sums and products of non-negative numbers, so computing them loses at most
  a relative u per operation.
* So each basic operation adds ``WIDEN`` (2^-50 = 8u) times the midpoint magnitude and
  multiplies the radius by (1 + WIDEN); a K-term sum (weights, keys) adds
  (K + 2)·``SUM_U`` (2^-52 = 2u per term) instead, which also covers the float weights
  (within u of the exact rational ones). Exact rationals become floats with relative
  error ≤ 3u < ``CONV`` (2^-50).
* Exact zeros are structural: an entry is exactly 0 iff mid = rad = 0, and every entry
  that may be nonzero has rad ≥ ``TINY`` (2^-500). TINY² is still a normal number, so a
  product of two possibly-nonzero entries has a positive radius, which is raised to TINY
  (:func:`floor_rad`) — far above the ≤ 2^-1074 any underflow loses. Weight sums cannot
  underflow: nonzero weights are checked to lie in [2^-100, 2^100] (otherwise no word is
  settled). So [0, 0] stays [0, 0] exactly where the arb path gets exact zeros (δ = 0
  when all visible scores tie), and an underflowing δ is still enclosed, by [0, ~TINY],
  which meets the reporting rule ``lo = 0, hi ≤ 1e-40``.
* exp and expm1 are our own (:func:`_exp`, :func:`_expm1`), built from correctly rounded
  operations only, so results are bit-identical on every machine (numpy's exp dispatches
  to CPU-specific SIMD kernels) and in every batching. exp: x = (32q + j)·ln2/32 + r,
  |r| ≤ ln2/64 (Cody–Waite, two-float ln2/32), 2^(j/32) from a table of correctly rounded
  values, a degree-6 Taylor polynomial (truncation < 2^-58), ``ldexp``. The reduced r is
  off by ≤ u(|x| + 2), Horner loses ≤ 12u, table entry and product u each: relative error
  ≤ u(|x| + 17). expm1: its Taylor series (degree 16, ≤ 41u) for |x| < 1/4, else exp − 1
  (which magnifies exp's error by ≤ 4.6). The bound we *use* is much larger:
  ``EXP_ERR + EXP_ERR_X·|x|`` = 2^-42 + 2^-46·|x|
  (tests/engine/cascade/test_float64_tier_vs_arb.py checks 4× that margin against arb), plus
  2^-1074 absolutely in the subnormal range (covered by TINY).
* exp(m ± r) lies within exp(m)·(r + r²) of exp(m) for r ≤ 1, and expm1(m ± r) within
  e^m (r + r²) of expm1(m); wider arguments give an infinite radius (not settled).
* Decisions compare floats that are exact endpoints: ``mid > rad`` means mid − rad > 0.
* Overflow. The bounds above are for finite results: past the float range an operation
  returns ±inf (and inf − inf, 0·inf give nan), about whose exact value the error bound
  says nothing. The rule: a midpoint that is not finite has an infinite (or nan) radius.
  add, sub, mul, div and the scalings get it for free (their radii contain |m|·WIDEN);
  where a radius is built from the operands' sizes instead (:func:`outer_sum`,
  :func:`dot_keys`, :func:`_dot_exact`, :func:`sum_keys`, ``weights.lin``, longsoft's sums) a
  sum can overflow while its radius stays finite — (±inf, finite) is no real interval — so
  :func:`guard` sets the radius to inf there. An infinite enclosure is trivially sound, but
  only if nothing reads a claim out of it, and IEEE comparisons do (inf ≥ inf is true): so
  every test requires a finite midpoint and radius (:func:`finite`) and otherwise answers
  "cannot tell" — the ReLU sign tests (:func:`mr_relu`, the keep/kill tests of the FFNs),
  certain positivity in :func:`div`/:func:`recip`, exp's argument test, :func:`abs_bounds`
  ([0, inf]), the ε ≤ 1 test and all three read-outs (accept, argmax, value). Such a word
  is not settled and goes to arb. tests/engine/cascade/test_float_overflow_never_decides.py:
  models whose activations reach 10^308 decide as ``--arb-only`` does, and do not without
  these checks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, ctx

from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade.blas import mr_matmul, one_thread
from exactattn.engine.cascade.policy import blas_on

WIDEN = 2.0**-50  # relative slack per basic operation (≥ 8u; monkeypatched to 0 by a test)
SUM_U = 2.0**-52  # per-term relative slack of a K-term sum: (K + 2)·SUM_U ≥ (K + 1)·u
TINY = 2.0**-500  # radius floor of every possibly-nonzero entry (TINY² is still normal)
SLACK = 2.0**-30  # relative slack of the exp/expm1 derivative bounds
CONV = 2.0**-50  # relative error bound of an exact rational converted to float (≤ 3u)
EXP_ERR = 2.0**-42  # exp/expm1 relative error bound: constant part
EXP_ERR_X = 2.0**-46  # ... and per unit |x|
WEIGHT_MIN = 2.0**-100
WEIGHT_MAX = 2.0**100
TIGHT_REL_F = float(np.nextafter(1e-6, 0))  # < 1e-6 exactly
ZERO_UPPER_F = float(np.nextafter(1e-40, 0))  # < 1e-40 exactly
assert Fraction(TIGHT_REL_F) < Fraction(1, 10**6) and Fraction(ZERO_UPPER_F) < Fraction(1, 10**40)
MR = tuple[np.ndarray, np.ndarray]  # (mid, rad)
Cols = dict[int, MR]  # δ as columns: absent = exactly zero for every word and slot
_LN2 = Fraction(
    "0.6931471805599453094172321214581765680755001343602552541206800094933936219696947156"
)
_C_HI = float(_LN2 / 32)  # ln 2 / 32, split in two floats (Cody–Waite)
_C_LO = float(_LN2 / 32 - Fraction(_C_HI))
_INV_C = float(32 / _LN2)
_EXP_C = [float(Fraction(1, math.factorial(i))) for i in range(7)]  # 1/i!, i = 0..6
_EXPM1_C = [float(Fraction(1, math.factorial(i + 1))) for i in range(16)]  # 1/(i+1)!


def _pow2_32() -> np.ndarray:
    """2^(j/32), j = 0..31, correctly rounded (from 120-bit arb balls)."""
    saved = ctx.prec
    ctx.prec = 120
    try:
        vals = []
        for j in range(32):
            lo, hi = arb_endpoints(arb(2) ** (arb(j) / 32))
            f = float((lo + hi) / 2)
            assert abs(Fraction(f) - (lo + hi) / 2) <= Fraction(f) * Fraction(1, 2**52)
            vals.append(f)
    finally:
        ctx.prec = saved
    return np.array(vals)


_EXP_TAB = _pow2_32()


def _exp(x: np.ndarray) -> np.ndarray:
    """e^x within EXP_ERR + EXP_ERR_X·|x| relative (2^-1074 absolute when subnormal).

    x = (32q + j)·ln2/32 + r with |r| ≤ ln2/64; e^x = 2^q · 2^(j/32) · p(r), p the degree-6
    Taylor polynomial (truncation < 2^-58). Errors: r is off by ≤ u(|x| + 2), Horner loses
    ≤ 12u, the table entry and the product u each: ≤ u(|x| + 17) ≪ the bound used.

    Every x ≤ −760 (−inf too) is clipped to −760 first, so its result is that of −760
    (``_EXP_LOW``, 0): where most entries are that low (the weights of far-from-top keys)
    only the others go through the polynomial — the same bits, fewer operations."""
    if x.size >= 4096:
        low = x <= -760.0
        nlow = int(np.count_nonzero(low))
        if nlow * 4 >= x.size:
            out = np.full(x.shape, _EXP_LOW)
            if nlow < x.size:
                keep = ~low
                out[keep] = _exp_all(x[keep])
            return out
    return _exp_all(x)


def _exp_all(x: np.ndarray) -> np.ndarray:
    """:func:`_exp`, entry by entry."""
    xc = np.clip(x, -760.0, 720.0)
    kf = np.rint(xc * _INV_C)
    r = (xc - kf * _C_HI) - kf * _C_LO
    p = np.full_like(r, _EXP_C[-1])
    for c in reversed(_EXP_C[:-1]):
        p *= r
        p += c
    k = np.where(np.isnan(kf), 0.0, kf).astype(np.int64)  # kf is finite or nan (clipped)
    p *= _EXP_TAB[k & 31]
    return np.ldexp(p, (k >> 5).astype(np.int32))


_EXP_LOW = float(_exp_all(np.array([-760.0]))[0])  # _exp of every x ≤ −760


def _expm1(x: np.ndarray) -> np.ndarray:
    """e^x − 1 with the same relative error bound as :func:`_exp`; expm1(0) = 0 exactly."""
    small = np.abs(x) < 0.25
    all_small = bool(small.all())
    xs = x if all_small else np.where(small, x, 0.0)
    p = np.full_like(xs, _EXPM1_C[-1])
    for c in reversed(_EXPM1_C[:-1]):
        p *= xs
        p += c
    p *= xs
    if all_small:
        return p
    return np.where(small, p, _exp(x) - 1.0)


def _err(m: np.ndarray) -> np.ndarray:
    return EXP_ERR + EXP_ERR_X * np.abs(m)


def guard(m: Any, r: Any) -> Any:
    """The overflow rule: where a midpoint is not finite (±inf or nan), the radius is +inf.

    Needed wherever a radius is built from the operands' sizes rather than from the computed
    midpoint (sums of products, weighted sums): such a midpoint can overflow to ±inf while
    the radius stays finite, and (±inf, finite) is not a real interval."""
    fin = np.isfinite(m)
    if fin.all():
        return r
    return np.where(fin, r, np.inf)


def finite(a: MR) -> np.ndarray:
    """Where an enclosure is a real interval (finite midpoint and radius): the only places a
    sign test or a read-out may decide anything; elsewhere the answer is "cannot tell"."""
    return np.isfinite(a[0]) & np.isfinite(a[1])


def _nzfloor(ra: np.ndarray | float, rb: np.ndarray | float) -> Any:
    """TINY where both operands may be nonzero (rad ≥ TINY), else 0."""
    return np.minimum(np.minimum(ra, rb), TINY)


def add(a: MR, b: MR) -> MR:
    m = a[0] + b[0]
    return m, (a[1] + b[1]) * (1 + WIDEN) + np.abs(m) * WIDEN


def sub(a: MR, b: MR) -> MR:
    m = a[0] - b[0]
    return m, (a[1] + b[1]) * (1 + WIDEN) + np.abs(m) * WIDEN


def mul(a: MR, b: MR) -> MR:
    am, ar = a
    bm, br = b
    m = am * bm
    r = (np.abs(am) * br + ar * np.abs(bm) + ar * br) * (1 + WIDEN) + np.abs(m) * WIDEN
    return m, r + _nzfloor(ar, br)


def div(a: MR, b: MR) -> MR:
    """a / b; an infinite radius where b is not certainly positive."""
    am, ar = a
    bm, br = b
    m = am / bm
    low = bm - br
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (ar + np.abs(m) * br) * (1 + WIDEN) / low * (1 + WIDEN) + np.abs(m) * WIDEN
    r = np.where(finite(b) & (bm > br), r, np.inf)
    return m, guard(m, r + np.minimum(ar, TINY))


def floor_rad(r: np.ndarray) -> np.ndarray:
    """Raise every positive radius to at least TINY (zero stays zero)."""
    return np.maximum(r, np.minimum(r * 2.0**600, TINY))


def outer_sum(pairs: list[tuple[MR, MR]], kqw: bool = False) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array (the score perturbations δs);
    with ``kqw`` laid out [key, query, word] (j, i, B) instead (the same numbers).

    Fixed-order elementwise sums by default (bit-identical on every machine); with
    ``EXACTATTN_BLAS=1`` one BLAS product per word with Rump's a priori bound (sound for any
    summation order, but its last bits depend on the BLAS kernel: notes/benchmark-rounds.md)."""
    if blas_on():
        m, r = _outer_sum_blas(pairs)
        if kqw:
            return np.ascontiguousarray(m.transpose(1, 2, 0)), np.ascontiguousarray(
                r.transpose(1, 2, 0)
            )
        return m, r
    return _outer_sum_fixed(pairs, kqw)


def _outer_sum_fixed(pairs: list[tuple[MR, MR]], kqw: bool = False) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array, fixed order, one radius bound.

    Rounding: each product and the running sum lose ≤ n·u·Σ|x_m y_m| (n terms), covered
    by ρ|y_m| in the radius; the radius arithmetic loses ≤ 4n·u relative, covered by (1 + ρ').

    Computed as (j, i, B) arrays — the word axis innermost, so that every broadcast product
    runs over long contiguous rows rather than rows of a dozen queries — and transposed
    once at the end (elementwise: the same bits)."""
    n = len(pairs)
    rho = (n + 2) * SUM_U
    m = r = t1 = t2 = None
    for x, y in pairs:
        xm = np.ascontiguousarray(x[0].T)[None]  # (1, i, B)
        xr = np.ascontiguousarray(x[1].T)[None]
        y0 = np.ascontiguousarray(y[0].T)  # (j, B)
        y1r = np.ascontiguousarray(y[1].T)
        aym = np.abs(y0)
        ym = y0[:, None, :]  # (j, 1, B)
        y1 = (y1r + rho * aym)[:, None, :]
        y2 = (aym + y1r)[:, None, :]
        if m is None or r is None or t1 is None or t2 is None:
            m = xm * ym
            r = np.abs(xm) * y1
            t1 = xr * y2
            r += t1
            t2 = np.empty_like(t1)
        else:  # the same operations into two scratch arrays (no temporaries)
            np.multiply(xm, ym, out=t1)
            m += t1
            np.multiply(np.abs(xm), y1, out=t1)
            np.multiply(xr, y2, out=t2)
            t1 += t2
            r += t1
    assert m is not None and r is not None
    r *= 1 + (4 * n + 4) * SUM_U
    r = guard(m, floor_rad(r))
    if kqw:
        return m, r
    return np.ascontiguousarray(m.transpose(2, 0, 1)), np.ascontiguousarray(r.transpose(2, 0, 1))


def _outer_sum_blas(pairs: list[tuple[MR, MR]]) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array: one BLAS product per word.

    The midpoint is numpy's matmul in whatever order BLAS sums; the radius is the a priori
    bound of :func:`exactattn.engine.cascade.blas.mr_matmul` (proofs/blas_bound.md): γ_n for the
    midpoint (n terms, any order), the propagated radii, all rounded up. Tighter than the
    fixed-order bound it replaced ((n + 2)·2u per term), and ~ one pass instead of n."""
    ym = np.stack([y[0] for _, y in pairs], axis=2)  # (B, j, t)
    yr = np.stack([y[1] for _, y in pairs], axis=2)
    xm = np.stack([x[0] for x, _ in pairs], axis=1)  # (B, t, i)
    xr = np.stack([x[1] for x, _ in pairs], axis=1)
    with one_thread():  # midpoint bits independent of the BLAS thread count
        m, r = mr_matmul((ym, yr), (xm, xr))
    return m, guard(m, floor_rad(r))


def stack_floats(xs: list[np.ndarray]) -> np.ndarray:
    """np.stack(xs) of equal-shape float arrays (np.array: the same copy, less overhead)."""
    return np.array(xs, dtype=np.float64)


STACK_MAX = 1 << 16  # arrays up to this size are stacked to share passes (fewer calls)


def seq_sum(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """x[…, 0, …] + x[…, 1, …] + …, over ``axis``, added left to right (not numpy's
    pairwise sum). ``x`` may stack several arrays on a leading axis: one pass sums them all."""
    if not axis:
        s = x[0].copy()
        for j in range(1, x.shape[0]):
            s += x[j]
        return s
    # x[:, …, j] by a fixed index prefix (views: the same elements in the same order as
    # np.moveaxis, without its per-call axis normalisation)
    pre = (slice(None),) * axis
    s = x[pre + (0,)].copy()
    for j in range(1, x.shape[axis]):
        s += x[pre + (j,)]
    return s


Terms = list[list[tuple[int, float]]]  # a linear map's weights: per output o, (c, ŵ_co ≠ 0)


def fixed_prod(x: np.ndarray, terms: Terms) -> np.ndarray:
    """y[o] = Σ_c w_co·x[c] for a feature-major x (d, B, T), added left to right over the
    nonzero w_co (``terms[o]``, c increasing): one elementwise product and one addition per
    term, each over the B·T contiguous entries of a feature. No BLAS and no numpy reduction,
    so the bits do not depend on the machine (and faster than BLAS here: no transposes, zeros
    skipped; a zero weight's product is exactly 0 in the exact map). The linear maps of the
    coarse tier (proofs/coarse_tier.md, Lemma L) and of the hard filter (proofs/hard_filter.md,
    Lemma HL)."""
    y = np.empty((len(terms),) + x.shape[1:])
    tmp = np.empty(x.shape[1:])
    for o, col in enumerate(terms):
        if not col:
            y[o] = 0.0
            continue
        c0, w0 = col[0]
        np.multiply(x[c0], w0, out=y[o])
        for c, w in col[1:]:
            np.multiply(x[c], w, out=tmp)
            y[o] += tmp
    return y


def rat_float_fm(num: np.ndarray, den: int) -> np.ndarray:
    """fl(fl(N)/fl(D)) of a (B, T, d) exact array N/D, feature-major (d, B, T): the conversion
    and the transpose in one pass (each entry correctly rounded, then divided once; the coarse
    tier's Lemma H and the hard filter's Lemma HE)."""
    x = np.array(np.asarray(num).transpose(2, 0, 1), dtype=np.float64, order="C")
    x /= float(den)
    return x


def dot_keys(a: MR, b: MR) -> MR:
    """Σ_j a[:, j]·b[:, j] (axis 1, in a fixed order; one radius bound for the sum)."""
    T = a[0].shape[1]
    rho = (T + 2) * SUM_U
    abm = np.abs(b[0])
    shape = np.broadcast(a[0], b[0]).shape
    if math.prod(shape) > STACK_MAX:
        pr = np.abs(a[0]) * (b[1] + rho * abm)
        pr += a[1] * (abm + b[1])
        sm, sr = seq_sum(a[0] * b[0]), seq_sum(pr)
    else:
        P = np.empty((2,) + shape)
        np.multiply(a[0], b[0], out=P[0])
        np.multiply(np.abs(a[0]), b[1] + rho * abm, out=P[1])
        P[1] += a[1] * (abm + b[1])
        sm, sr = seq_sum(P, 2)
    sr *= 1 + (T + 4) * SUM_U
    return sm, guard(sm, floor_rad(sr))


def rat_mid(num: np.ndarray, den: int) -> np.ndarray:
    """num/den as floats (the midpoints of :func:`from_rat`)."""
    if den & (den - 1) == 0 and den < 2**900:
        return num.astype(np.float64) * (1.0 / den)
    return num.astype(np.float64) / float(den)


def _dot_weight(a: MR, den: int) -> np.ndarray:
    """Q with |Σ_j a_j·x_j − Σ_j fl(a_m,j·x_j)| ≤ Σ_j |x_j|·Q_j for x exact rationals over
    den given by their float midpoints (rad |x|·c_v, as from_rat)."""
    T = a[0].shape[1]
    c_v = CONV + 2.0 * TINY * den
    rho = (T + 2) * SUM_U
    q = np.abs(a[0]) * (c_v + rho)
    q += a[1] * (1 + c_v)
    return q


def _dot_exact(am: np.ndarray, xm: np.ndarray, q: np.ndarray) -> MR:
    """Σ_j a[:, j]·x[:, j] for x exact (see :func:`_dot_weight`), fixed order."""
    T = am.shape[1]
    shape = np.broadcast(am, xm).shape
    if math.prod(shape) > STACK_MAX:
        pr = np.abs(xm)
        pr *= q
        sm, sr = seq_sum(am * xm), seq_sum(pr)
    else:
        P = np.empty((2,) + shape)
        np.multiply(am, xm, out=P[0])
        np.abs(xm, out=P[1])
        P[1] *= q
        sm, sr = seq_sum(P, 2)
    sr *= 1 + (T + 4) * SUM_U
    return sm, guard(sm, floor_rad(sr))


def sum_keys(a: MR) -> MR:
    """Σ over axis 1 in a fixed order."""
    m, r = a
    if m.size > STACK_MAX:  # large: no copies (see _sum_keys_x)
        k = (m.shape[1] + 2) * SUM_U
        sm, sr, sa = seq_sum(m), seq_sum(r), seq_sum(np.abs(m))
        return sm, guard(sm, sr * (1 + k) + sa * k)
    X = np.empty((3,) + m.shape)
    X[0] = m
    X[1] = r
    np.abs(m, out=X[2])
    return _sum_keys_x(X)


def _sum_keys_x(X: np.ndarray) -> MR:
    """:func:`sum_keys` of (m, r) given stacked as X = [m, r, |m|] (3, B, keys, …)."""
    if X[0].size <= STACK_MAX:  # small: one pass over the three stacked arrays
        sm, sr, sa = seq_sum(X, 2)
    else:  # large: three passes over contiguous slices cost less than strided ones
        sm, sr, sa = seq_sum(X[0]), seq_sum(X[1]), seq_sum(X[2])
    m = X[0]
    # rounding of the midpoint sum ≤ (T − 1)·u·Σ|m|; of the radius sum ≤ (T − 1)·u·Σr
    k = (m.shape[1] + 2) * SUM_U
    return sm, guard(sm, sr * (1 + k) + sa * k)


def mr_exp(a: MR) -> MR:
    m, r = a
    mid = _exp(m)
    rad = mid * (r + r * r + 2 * _err(m)) * (1 + SLACK) + TINY
    with np.errstate(divide="ignore"):  # dividing by False is the point: no RuntimeWarning
        return mid, rad / ((r <= 1.0) & np.isfinite(m))  # r > 1, nan or m ±inf: infinite radius


def mr_expm1(a: MR) -> MR:
    m, r = a
    mid = _expm1(m)
    am = np.abs(mid)
    rad = ((1 + am) * (r + r * r) * (1 + SLACK) + 2 * _err(m) * am) * (1 + WIDEN)
    rad = rad + np.minimum(r, TINY)
    with np.errstate(divide="ignore"):  # dividing by False is the point: no RuntimeWarning
        return mid, rad / ((r <= 1.0) & np.isfinite(m))  # r > 1, nan or m ±inf: infinite radius


def mr_relu(a: MR) -> MR:
    """max(x, 0) on the interval."""
    m, r = a
    lo = np.maximum(m - r, 0.0)
    hi = np.maximum(m + r, 0.0)
    mid = (lo + hi) * 0.5
    rad = ((hi - lo) * 0.5 + (np.abs(m) + r) * WIDEN) * (1 + WIDEN) + np.minimum(r, TINY)
    # certainly ≥ 0: x itself; certainly ≤ 0: exactly 0 (exact comparisons of finite floats)
    fin = finite(a)
    nonneg = fin & (m >= r)
    nonpos = fin & (-m >= r)
    mid = np.where(nonneg, m, np.where(nonpos, 0.0, mid))
    rad = np.where(nonneg, r, np.where(nonpos, 0.0, rad))
    return mid, guard(mid, np.where(fin, rad, np.inf))


def abs_bounds(a: MR) -> tuple[np.ndarray, np.ndarray]:
    """Certified lower and upper bounds of |x| (floats, exact as reals); [0, inf] where the
    enclosure is not finite (the overflow rule)."""
    m, r = a
    am = np.abs(m)
    hi = (am + r) * (1 + CONV)
    lo = np.maximum(am - r, 0.0) * (1 - CONV)
    fin = finite(a)
    if not fin.all():
        lo = np.where(fin, lo, 0.0)
        hi = np.where(fin, hi, np.inf)
    return lo, hi


def from_rat(num: np.ndarray, den: int) -> MR:
    """An exact rational array (numerators over one denominator) as an enclosure."""
    if den & (den - 1) == 0 and den < 2**900:
        # exact scaling by a power of 2 of integers (no floating-point exception can occur;
        # an integer beyond float range raises OverflowError in astype): no errstate needed,
        # which was half of this function's cost on small arrays
        m = num.astype(np.float64) * (1.0 / den)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            m = num.astype(np.float64) / float(den)
    if den < 2**400:
        # |m| ≥ (1 − u)/den when num ≠ 0, so |m|·2·TINY·den ≥ TINY there (0 where num = 0)
        return m, np.abs(m) * (CONV + 2.0 * TINY * den)
    nz = (num != 0) if num.dtype != object else np.array(num != 0, dtype=bool)
    return m, np.abs(m) * CONV + nz * TINY


def rat_float(f: np.ndarray, den: int) -> MR:
    """:func:`from_rat` of numerators given as their correctly rounded floats ``f`` (what
    ``num.astype(np.float64)`` gives: the same operations on the same floats, so the same
    bits; num ≠ 0 exactly where f ≠ 0)."""
    if den & (den - 1) == 0 and den < 2**900:
        m = f * (1.0 / den)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            m = f / float(den)
    if den < 2**400:
        return m, np.abs(m) * (CONV + 2.0 * TINY * den)
    return m, np.abs(m) * CONV + (f != 0) * TINY


def recip(z: MR) -> MR:
    """1/z for z certainly positive (an infinite radius elsewhere)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return recip_raw(z)


def recip_raw(z: MR) -> MR:
    """:func:`recip` for callers already under ``np.errstate`` (the chunk loop)."""
    zm, zr = z
    m = 1.0 / zm
    low = zm - zr
    r = zr * m / low * (1 + WIDEN) ** 2 + m * WIDEN
    return m, guard(m, r / (finite(z) & (zm > zr)))  # not certainly positive: infinite radius


def scale_rows(a: MR, s: MR) -> MR:
    """a[j, i, b]·s[i, b] (s a per-query factor, broadcasting over the keys)."""
    sm, sr = s
    m = a[0] * sm
    am = np.abs(a[0])
    r = am * sr
    r += a[1] * (np.abs(sm) + sr)
    r *= 1 + WIDEN
    r += np.abs(m) * WIDEN
    return m, floor_rad(r)


def frac_mr(q: Fraction) -> tuple[float, float]:
    """A Fraction as a scalar enclosure."""
    m = float(q)
    if q == 0:
        return 0.0, 0.0
    return m, abs(m) * CONV + TINY


def float_down(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) <= q else float(np.nextafter(f, -np.inf))


def float_up(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def tau_enclosures(taus: list[list[arb] | None]) -> list[list[tuple[Fraction, Fraction]] | None]:
    """Temperatures.at(n, prec) arb balls as exact (lo, hi) Fractions per head."""
    return [None if row is None else [arb_endpoints(t) for t in row] for row in taus]


_INV_TAU: dict[tuple[Fraction, Fraction], MR] = {}
_INV_TAU_ID: dict[int, tuple[Fraction, Fraction, MR]] = {}


def inv_tau(lo: Fraction, hi: Fraction) -> MR:
    """1/τ for lo ≤ τ ≤ hi as a scalar enclosure (memoised: exact arithmetic on the same
    temperatures was a fixed cost of every batch and head)."""
    mine = _INV_TAU_ID.get(id(lo))  # the same objects again (no Fraction hashing)
    if mine is not None and mine[0] is lo and mine[1] is hi:
        return mine[2]
    got = _INV_TAU.get((lo, hi))
    if got is None:
        if len(_INV_TAU) > 4096:
            _INV_TAU.clear()
        got = _INV_TAU[(lo, hi)] = _inv_tau(lo, hi)
    if len(_INV_TAU_ID) > 4096:
        _INV_TAU_ID.clear()
    _INV_TAU_ID[id(lo)] = (lo, hi, got)  # holds lo and hi: their ids are not reused
    return got


def _inv_tau(lo: Fraction, hi: Fraction) -> MR:
    """1/τ for lo ≤ τ ≤ hi as a scalar enclosure, from exact arithmetic (lo ≤ 0: infinite)."""
    if lo <= 0:
        return np.float64(0.0), np.float64(np.inf)
    a = float_down(1 / hi)
    b = float_up(1 / lo)
    m = float((Fraction(a) + Fraction(b)) / 2)
    r = float_up(max(Fraction(b) - Fraction(m), Fraction(m) - Fraction(a)))
    return np.float64(m), np.float64(r + TINY)


def rounding_constants() -> tuple[float, ...]:
    """The rounding constants (tests set them to 0: memoised results must follow)."""
    return (WIDEN, SUM_U, TINY, SLACK, CONV, EXP_ERR, EXP_ERR_X)
