"""The double-double tier: double-double midpoint–radius intervals (proofs/double_double.md).

For the words the float64 tier (:mod:`.float64`) and the centred tier leave, δ = soft −
hard is recomputed in the same *hard + δ* form (scores as δs − g with the exact hard gap g,
δα = α − α°, relu(z + δz) − relu(z)) with double-double midpoints: a number is the real
interval [h + l − r, h + l + r] of three float64 arrays, h + l the midpoint (an exact sum of two
floats, about 106 bits), r ≥ 0 the radius. Every rounding of the midpoint arithmetic is bounded
by computed quantities and added to the radius (error-free transformations: Knuth's TwoSum,
Dekker's split and TwoProduct — numpy has no fma); every radius is a sum of products of
non-negative floats, rounded up by the factor ``RADF`` plus the absolute ``ETA`` (Lemma R).
exp is argument reduction by a certified enclosure of ln 2, a degree-10 Taylor polynomial
evaluated *in this interval arithmetic* plus a proven remainder bound, then eight certified
squarings. Hard numbers come from the exact trace (:func:`rat_dd`). So each function returns an
enclosure of the exact real value, never a guess; anything not finite, or beyond ``MAXV``, gets
an infinite radius and no decision is read from it.

Only elementwise IEEE operations in a fixed order: results are bit-identical on every machine
and in every batching (a word's numbers never depend on the other words of its batch).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from exactattn.engine.cascade.batch import (
    CHUNK_ENTRIES,
    SUB_BATCH,
    FloatBatch,
    concat,
    slice_batch,
)
from exactattn.engine.cascade.interval import TINY, Cols
from exactattn.engine.cascade.readout import finish, layer_errors
from exactattn.engine.cascade.weights import float_weights
from exactattn.engine.hard import CompiledFFN, CompiledModel, HardBatch, HeadTrace
from exactattn.engine.ratarray import RatArray

U = 2.0**-53  # unit roundoff of binary64
RADF = 1.0 + 2.0**-48  # radius round-up factor: ≥ (1 + u)^31 (Lemma R, depth ≤ 30)
ETA = 2.0**-1000  # absolute slack per operation: ≥ every underflow loss (≤ a few 2^-1074)
MAXV = 2.0**300  # beyond this magnitude a value gets an infinite radius (no overflow inside)
SPLIT = 134217729.0  # 2^27 + 1, Dekker's splitter
REM = 2.0**-123  # exp: Taylor remainder bound (degree 10, |ρ| ≤ 2^-9), Lemma E
RHO_MAX = 2.0**-9
SQUARINGS = 8
RAT_ERR = 2.0**-51  # rat_dd: relative allowance of the low part, ≥ u(2 + u) (Lemma C)
EXP_LOW = -700.0  # below: e^x ≤ e^-699 < ETA, enclosed by [0, ETA]

DD = tuple[np.ndarray, np.ndarray, np.ndarray]  # (h, l, r): [h + l − r, h + l + r]

# ---------------------------------------------------------------------------------------
# error-free transformations
# ---------------------------------------------------------------------------------------


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth; any finite a, b, no overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a = ah + al exactly, each with ≤ 26 significant bits (Dekker; |a| < 2^996)."""
    c = SPLIT * a
    ah = c - (c - a)
    return ah, a - ah


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e = a·b, p = fl(a·b): exact without underflow, else within 5·2^-1074 (Dekker;
    Ogita–Rump–Oishi 2005, Algorithm 3.3)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


# ---------------------------------------------------------------------------------------
# interval operations (Lemmas A, M, Q in proofs/double_double.md)
# ---------------------------------------------------------------------------------------


def dd_add(a: DD, b: DD) -> DD:
    """a + b. Midpoint error ≤ u(|t| + |e2|) (Lemma A)."""
    s, e = two_sum(a[0], b[0])
    t = a[1] + b[1]
    e2 = e + t
    h, lo = two_sum(s, e2)
    r = (a[2] + b[2] + (np.abs(t) + np.abs(e2)) * U) * RADF + ETA
    return h, lo, r


def dd_neg(a: DD) -> DD:
    return -a[0], -a[1], a[2]


def dd_sub(a: DD, b: DD) -> DD:
    return dd_add(a, dd_neg(b))


def dd_mul(a: DD, b: DD) -> DD:
    """a·b. Midpoint error ≤ |al·bl| + u(|t1| + |t2| + |t3| + |e2|) + 7·2^-1074 (Lemma M);
    radius |A|·br + ar·(|B| + br)."""
    ah, al, ar = a
    bh, bl, br = b
    p, e = two_prod(ah, bh)
    t1 = ah * bl
    t2 = al * bh
    t3 = t1 + t2
    e2 = e + t3
    h, lo = two_sum(p, e2)
    aa = np.abs(ah) + np.abs(al)
    ba = np.abs(bh) + np.abs(bl)
    rnd = np.abs(al) * np.abs(bl) + (np.abs(t1) + np.abs(t2) + np.abs(t3) + np.abs(e2)) * U
    r = (aa * br + ar * (ba + br) + rnd) * RADF + ETA
    return h, lo, r


def dd_scale2(a: DD, k: np.ndarray) -> DD:
    """a·2^k (k integer array): exact but for underflow, which ETA covers."""
    kk = k.astype(np.int32)
    return np.ldexp(a[0], kk), np.ldexp(a[1], kk), np.ldexp(a[2], kk) * RADF + ETA


def dd_recip(z: DD) -> DD:
    """1/z where z is certainly positive; an infinite radius elsewhere (Lemma Q).

    Y is any double-double near 1/(zh + zl) (one Newton step); the radius comes a posteriori
    from the certified residual 1 − (zh + zl)·Y and a certified lower bound of z."""
    zh, zl, zr = z
    with np.errstate(divide="ignore", invalid="ignore"):
        y = 1.0 / zh
        p, e = two_prod(zh, y)
        res = ((1.0 - p) - e) - zl * y
        yh, yl = two_sum(y, y * res)
        d = dd_mul((zh, zl, np.zeros_like(zh)), (yh, yl, np.zeros_like(yh)))
        f1 = 1.0 - d[0]
        f2 = f1 - d[1]
        rho = np.abs(f2) * (1 + U) + np.abs(f1) * U + d[2]  # ≥ |1 − (zh + zl)·Y|
        low = (zh - (np.abs(zl) + zr) * RADF) * (1 - 2.0**-50)  # ≤ every z in the interval
        r = ((rho + zr / low) / low) * RADF + ETA
    ok = np.isfinite(zh) & np.isfinite(zl) & np.isfinite(zr) & (low > 2.0**-900)
    return yh, yl, np.where(ok, r, np.inf)


# ---------------------------------------------------------------------------------------
# constants and conversions
# ---------------------------------------------------------------------------------------


BIG = 2**1000  # rationals at least this large become (0, 0, inf): no float overflow here


def float_up(q: Fraction) -> float:
    """The smallest float ≥ q (q ≥ 0; inf for q ≥ BIG)."""
    if q >= BIG:
        return math.inf
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def frac_dd(q: Fraction) -> tuple[float, float, float]:
    """An exact rational as a scalar enclosure (h, l, r), r rounded up exactly; (0, 0, inf)
    beyond the float range (nothing is decided from it)."""
    if abs(q) >= BIG:
        return 0.0, 0.0, math.inf
    h = float(q)
    lo = float(q - Fraction(h))
    return h, lo, float_up(abs(q - Fraction(h) - Fraction(lo)))


def const(q: tuple[float, float, float], like: np.ndarray) -> DD:
    return (np.full_like(like, q[0]), np.full_like(like, q[1]), np.full_like(like, q[2]))


# ln 2 to 82 digits (truncated: |ln 2 − LN2_Q| < 10^-81), as an enclosure
_LN2_Q = Fraction(
    "0.6931471805599453094172321214581765680755001343602552541206800094933936219696947156"
)
_l2 = frac_dd(_LN2_Q)
LN2 = (_l2[0], _l2[1], float_up(Fraction(_l2[2]) + Fraction(1, 10**81)))
EXP_C = [frac_dd(Fraction(1, math.factorial(i))) for i in range(11)]  # 1/i!, i = 0..10


def rat_dd(num: np.ndarray, den: int) -> DD | None:
    """num/den (int64 numerators, one denominator < 2^53) as an enclosure; None when the
    numbers do not fit (object numerators, a larger denominator): the caller gives up.

    Each 30-bit-aligned part n of num is converted exactly: h = fl(n/den), p + e = h·den
    (TwoProduct), n − p exact (Sterbenz), ρ = fl((n − p) − e), l = fl(ρ/den) (Lemma C)."""
    if den <= 0:
        return None
    if num.dtype == object or den >= 2**53:
        return _big_rat_dd(num, den)
    df = float(den)
    hi_part = num >> 30  # floor division by 2^30, exact in int64
    lo_part = num - (hi_part << 30)  # in [0, 2^30)
    out: DD | None = None
    for part, scale in ((hi_part, 2.0**30), (lo_part, 1.0)):
        h, lo, r = small_rat_dd(part.astype(np.float64), df)  # |part| < 2^34: exact floats
        piece = (h * scale, lo * scale, r * scale)  # exact scalings by 2^30
        out = piece if out is None else dd_add(out, piece)
    return out


def _big_rat_dd(num: np.ndarray, den: int) -> DD | None:
    """num/den for Python-integer numerators or a large denominator: |num| in exact 30-bit
    pieces (exact floats, exact scalings), summed (Lemma A), times an exact enclosure of
    1/den (Lemma M). None beyond 2^600 (the caller gives up)."""
    a = np.abs(num).astype(object)
    top = int(a.max(initial=0))
    if top >= 2**600:
        return None
    sign = np.where(np.array(num < 0, dtype=bool), -1.0, 1.0)
    out: DD | None = None
    k = 0
    while k == 0 or (top >> (30 * k)) > 0:
        piece = np.array((a >> (30 * k)) & (2**30 - 1), dtype=np.float64) * sign
        sc = 2.0 ** (30 * k)
        t = (piece * sc, np.zeros_like(piece), np.zeros_like(piece))
        out = t if out is None else dd_add(out, t)
        k += 1
    assert out is not None
    return dd_mul(out, frac_dd(Fraction(1, den)))  # type: ignore[arg-type]


def small_rat_dd(n: np.ndarray, df: float) -> DD:
    """n/df for integers |n| < 2^53 and 0 < df < 2^53 given as floats (Lemma C)."""
    h = n / df
    p, e = two_prod(h, df)
    rho = (n - p) - e  # n − p is exact (Sterbenz)
    lo = rho / df
    return h, lo, np.abs(lo) * RAT_ERR + ETA


def to_mr(a: DD, tiny: float) -> tuple[np.ndarray, np.ndarray]:
    """A float64 midpoint–radius enclosure (mid h, radius ≥ |l| + r, at least ``tiny``); an
    infinite radius where the interval is not finite or beyond MAXV."""
    h, lo, r = a
    rad = np.maximum((np.abs(lo) + r) * RADF, tiny)
    bad = ~(np.isfinite(h) & np.isfinite(lo) & np.isfinite(r)) | (np.abs(h) > MAXV)
    return h, np.where(bad, np.inf, rad)


def guard(a: DD) -> DD:
    """The overflow rule: an infinite radius where the interval is not finite or is beyond
    MAXV (so that no split, product or exp inside the tier can overflow)."""
    h, lo, r = a
    bad = ~(np.isfinite(h) & np.isfinite(lo) & np.isfinite(r)) | (np.abs(h) > MAXV) | (r > MAXV)
    if not bad.any():
        return a
    return np.where(bad, 0.0, h), np.where(bad, 0.0, lo), np.where(bad, np.inf, r)


# ---------------------------------------------------------------------------------------
# exp
# ---------------------------------------------------------------------------------------


def dd_exp(x: DD) -> DD:
    """e^x on intervals of radius < 1 with x ≤ 1 (softmax arguments after the shift).

    x = k·ln2 + ρ·2^8, k = rint(xh/ln2); e^x = 2^k·(e^ρ)^(2^8) with |ρ| ≤ 2^-9; e^ρ is the
    degree-10 Taylor polynomial on the interval ρ plus [−REM, REM] (Lemma E). Arguments
    below EXP_LOW give [0, ETA]; a radius ≥ 1 or x above 1 gives an infinite radius."""
    xh, xl, xr = x
    low = xh + (np.abs(xl) + xr) * RADF < EXP_LOW  # e^x ≤ e^-700 < ETA (if xr < 1)
    ok = np.isfinite(xh) & np.isfinite(xl) & (xr < 1.0) & (xh <= 1.0)
    xs = (np.where(low | ~ok, 0.0, xh), np.where(low | ~ok, 0.0, xl), np.where(ok, xr, 0.0))
    k = np.rint(xs[0] * (1.0 / float(_LN2_Q)))
    kl2 = dd_mul((k, np.zeros_like(k), np.zeros_like(k)), const(LN2, k))
    rr = dd_sub(xs, kl2)
    c = 2.0**-SQUARINGS
    rho = (rr[0] * c, rr[1] * c, rr[2] * c + ETA)
    rmax = (np.abs(rho[0]) + np.abs(rho[1]) + rho[2]) * RADF
    p = const(EXP_C[-1], k)
    for ci in reversed(EXP_C[:-1]):
        p = dd_add(dd_mul(p, rho), const(ci, k))
    p = (p[0], p[1], p[2] * RADF + REM)
    for _ in range(SQUARINGS):
        p = dd_mul(p, p)
    h, lo, r = dd_scale2(p, k)
    good = ok & (rmax <= RHO_MAX)
    h = np.where(low, 0.0, h)
    lo = np.where(low, 0.0, lo)
    r = np.where(low & ok, ETA, np.where(good, r, np.inf))
    return h, lo, r


# ---------------------------------------------------------------------------------------
# the forward pass
# ---------------------------------------------------------------------------------------

Scalar = tuple[float, float, float]
Rows = list[list[tuple[int, Scalar]]]


def _rows(w: RatArray) -> Rows:
    """Nonzero weights per output row as scalar enclosures."""
    return [
        [(c, frac_dd(Fraction(int(w.num[a, c]), w.den))) for c in range(w.shape[1]) if w.num[a, c]]
        for a in range(w.shape[0])
    ]


def _bias(b: RatArray) -> list[Scalar | None]:
    return [frac_dd(Fraction(int(v), b.den)) if v else None for v in np.asarray(b.num).reshape(-1)]


class HeadRows(NamedTuple):
    """A head's query, key, value and output weights as rows of scalar enclosures (the
    δ form needs no biases: they cancel)."""

    q: Rows
    k: Rows
    v: Rows
    o: Rows | None


class DDWeights:
    """A model's weights and biases as double-double enclosures (converted once per model)."""

    def __init__(self, cm: CompiledModel) -> None:
        self.layers: list[object] = []
        for layer in cm.layers:
            if isinstance(layer, list):
                self.layers.append(
                    [
                        HeadRows(
                            q=_rows(ch.Q),
                            k=_rows(ch.K),
                            v=_rows(ch.V),
                            o=None if ch.O is None else _rows(ch.O),
                        )
                        for ch in layer
                    ]
                )
            else:
                assert isinstance(layer, CompiledFFN)
                hidden = [(_rows(w), _bias(b)) for w, b in layer.hidden]
                self.layers.append((hidden, (_rows(layer.out[0]), _bias(layer.out[1]))))


_CACHE: dict[int, tuple[CompiledModel, DDWeights]] = {}


def dd_weights(cm: CompiledModel) -> DDWeights:
    got = _CACHE.get(id(cm))
    if got is None or got[0] is not cm:
        got = _CACHE[id(cm)] = (cm, DDWeights(cm))
    return got[1]


class GiveUp(Exception):
    """Hard numbers beyond the exact conversion (:func:`rat_dd`): nothing is settled."""


def _hard(ra: RatArray) -> DD:
    got = rat_dd(ra.num, ra.den)
    if got is None:
        raise GiveUp
    return got


def _col(a: DD, c: int) -> DD:
    return a[0][..., c], a[1][..., c], a[2][..., c]


def _ax(a: DD, axis: int) -> DD:
    """Insert a broadcast axis."""
    return np.expand_dims(a[0], axis), np.expand_dims(a[1], axis), np.expand_dims(a[2], axis)


def _where(c: np.ndarray, a: DD, b: DD) -> DD:
    return np.where(c, a[0], b[0]), np.where(c, a[1], b[1]), np.where(c, a[2], b[2])


def _plus(a: DD | None, b: DD | None) -> DD | None:
    """a + b with None = exactly zero."""
    if a is None:
        return b
    return a if b is None else dd_add(a, b)


Delta = list[DD | None]  # δ per coordinate, (B, T) each; None = exactly zero


def _lin(cols: Delta, rows: Rows) -> Delta:
    """out[a] = Σ_c W[a, c]·cols[c], fixed order; None where no term is nonzero."""
    out: Delta = []
    for row in rows:
        acc: DD | None = None
        for c, w in row:
            col = cols[c]
            if col is not None:
                acc = _plus(acc, dd_mul(col, w))  # type: ignore[arg-type]
        out.append(acc)
    return out


def _relu(z: DD) -> DD:
    """max(z, 0) on the interval: z where certainly ≥ 0, exactly 0 where certainly ≤ 0,
    else [0, upper end of z]."""
    h, lo, r = z
    s = (np.abs(lo) + r) * RADF  # ≥ |l| + r
    pos = h >= s
    neg = -h >= s
    up = (h + s) * RADF
    wide = ~(up <= MAXV)  # a radius must not make a midpoint past MAXV (the guard's rule)
    mid = np.where(wide, 0.0, up * 0.5)
    return (
        np.where(pos, h, np.where(neg, 0.0, mid)),
        np.where(pos, lo, 0.0),
        np.where(pos, r, np.where(neg, 0.0, np.where(wide, np.inf, mid * RADF + ETA))),
    )


def _sum_last(a: DD) -> DD:
    """Σ over the last axis, in a fixed order."""
    acc = (a[0][..., 0], a[1][..., 0], a[2][..., 0])
    for j in range(1, a[0].shape[-1]):
        acc = dd_add(acc, (a[0][..., j], a[1][..., j], a[2][..., j]))
    return acc


GAP_EXACT = 2000.0  # gaps with g/τ below this (+ 2·max|δs/τ|) are converted exactly


def _gap(gnum: np.ndarray, den: int, ds: DD | None, itau: Scalar) -> DD:
    """The hard score gaps g ≥ 0 as enclosures. Python-integer gaps are slow to convert
    exactly, and a large gap only enters e^-(g − δs)/τ, far below anything reported: those
    get the float enclosure fl(fl(g)/fl(den)) ± 2^-50 relative (three roundings ≤ 3.01u);
    the others the exact conversion (Lemma C)."""
    if gnum.dtype != object:
        return _hard(RatArray(gnum, den))
    if den >= 2**600 or int(np.abs(gnum).max(initial=0)) >= 2**600:
        raise GiveUp
    gf = gnum.astype(np.float64) / float(den)
    lim = GAP_EXACT / max(itau[0], 2.0**-1000)
    if ds is not None:
        dmax = np.abs(ds[0]) + np.abs(ds[1]) + ds[2]
        lim = lim + 2 * dmax.max(axis=2, keepdims=True)
    near = np.flatnonzero(~(gf > lim))  # nan or inf: exact (or give up)
    out = (gf, np.zeros_like(gf), np.abs(gf) * 2.0**-50 + ETA)
    if near.size:
        ex = _hard(RatArray(gnum.reshape(-1)[near], den))
        for a, e in zip(out, ex, strict=True):
            a.reshape(-1)[near] = e
    return out


def _head(hw: HeadRows, tr: HeadTrace, delta: Delta, itau: Scalar) -> Delta:
    """One head's δ contribution O·(Σ_j α_ij (v_j + δv_j) − Σ_j α°_ij v_j) per output column.

    Softmax arguments as (δs_ij − g_ij)/τ with g = max_j s − s ≥ 0 the exact hard score gap,
    so the large hard scores never enter rounded (proofs/double_double.md, "δ form")."""
    dq = _lin(delta, hw.q)
    dk = _lin(delta, hw.k)
    dv = _lin(delta, hw.v)
    B, R, T = tr.top.shape
    vis = tr.visible[None]  # (1, i, j)
    snum = tr.scores.num
    if snum.dtype == object or (snum.size and int(np.abs(snum).max()) >= 2**61):
        snum = snum.astype(object)  # exact Python integers for the gap
        floor = -(int(np.abs(snum).max(initial=0)) + 1)
    else:
        floor = np.iinfo(np.int64).min // 2
    ds: DD | None = None
    if any(x is not None for x in dq) or any(x is not None for x in dk):
        q = _hard(tr.q)
        k = _hard(tr.k)
        for a in range(len(dq)):
            qa, ka = _col(q, a), _col(k, a)
            if dq[a] is not None:
                kk = ka if dk[a] is None else dd_add(ka, dk[a])  # type: ignore[arg-type]
                ds = _plus(ds, dd_mul(_ax(dq[a], 2), _ax(kk, 1)))  # type: ignore[arg-type]
            if dk[a] is not None:
                ds = _plus(ds, dd_mul(_ax(qa, 2), _ax(dk[a], 1)))  # type: ignore[arg-type]
    smax = np.where(vis, snum, floor).max(axis=2, keepdims=True)
    g = _gap(np.where(vis, smax - snum, 0), tr.scores.den, ds, itau)  # ≥ 0 where visible
    y = dd_neg(g) if ds is None else dd_sub(ds, g)
    x = dd_mul(y, itau)  # type: ignore[arg-type]
    m = np.where(vis, x[0], -np.inf).max(axis=2, keepdims=True)  # any float shift will do
    m = np.where(np.isfinite(m), m, 0.0)
    x = dd_sub(x, (m, np.zeros_like(m), np.zeros_like(m)))
    full_vis = np.broadcast_to(vis, x[0].shape)
    # exp only where visible and not certainly below EXP_LOW; [0, ETA] on the others
    need = full_vis & ~(x[0] < EXP_LOW - 2.0)
    idx = np.flatnonzero(need)
    wh = np.zeros(x[0].size)
    wl = np.zeros(x[0].size)
    wr = np.where(full_vis, ETA, 0.0).reshape(-1)
    bad = ~(np.isfinite(x[2]) & (x[2] < 1.0)) & full_vis
    wr[np.flatnonzero(bad)] = np.inf
    if idx.size:
        e = dd_exp((x[0].reshape(-1)[idx], x[1].reshape(-1)[idx], x[2].reshape(-1)[idx]))
        wh[idx], wl[idx], wr[idx] = e
    w = (wh.reshape(B, R, T), wl.reshape(B, R, T), wr.reshape(B, R, T))
    z = _sum_last(w)
    sees = tr.visible.any(axis=1)[None]  # (1, i): a query that sees nothing gets α = 0
    z = (np.where(sees, z[0], 1.0), np.where(sees, z[1], 0.0), np.where(sees, z[2], 0.0))
    alpha = dd_mul(w, _ax(dd_recip(z), 2))
    # hard weights α° = 1/count on the support (exact 1/c as double-double, Lemma C)
    cnt = tr.count.astype(np.float64)
    inv = small_rat_dd(np.where(cnt > 0, 1.0, 0.0), np.maximum(cnt, 1.0))
    sup = tr.support
    da = _where(sup, dd_sub(alpha, _ax(inv, 2)), alpha)  # δα = α − α°
    v = _hard(tr.v)
    mixed: Delta = []
    for c in range(v[0].shape[2]):
        vc = _col(v, c)
        if dv[c] is not None:
            vc = dd_add(vc, dv[c])  # type: ignore[arg-type]
        t = _sum_last(dd_mul(da, _ax(vc, 1)))  # Σ_j δα_ij (v_j + δv_j)
        if dv[c] is not None:
            dvc = _ax(dv[c], 1)  # type: ignore[arg-type]
            z0 = np.zeros((1, 1, 1))
            on = _where(sup, (dvc[0] + z0, dvc[1] + z0, dvc[2] + z0), (z0, z0, z0))
            t = dd_add(t, dd_mul(_sum_last(on), inv))  # + Σ_j α°_ij δv_j
        mixed.append(t)
    if hw.o is None:
        return mixed
    return _lin(mixed, hw.o)


def _ffn(lw: tuple, pre: list[RatArray], delta: Delta) -> Delta:
    """A feed-forward layer's δ: relu(z + δz) − relu(z) per hidden unit (δz where both are
    certainly in the linear range, exactly 0 where both are certainly ≤ 0), then W_out."""
    hidden, out = lw
    dh = delta
    for (rows, _bias), z_ra in zip(hidden, pre, strict=True):
        dz = _lin(dh, rows)
        zh = None
        new: Delta = []
        for u, d in enumerate(dz):
            if d is None:
                new.append(None)
                continue
            if zh is None:
                zh = _hard(z_ra)
            zn = z_ra.num[..., u]
            zpos, zneg = zn > 0, zn < 0
            zc = _col(zh, u)
            zs = dd_add(zc, d)  # the soft pre-activation
            s = (np.abs(zs[1]) + zs[2]) * RADF
            fin = np.isfinite(zs[0]) & np.isfinite(s)
            keep = ~zneg & fin & (zs[0] >= s)
            kill = ~zpos & fin & (-zs[0] >= s)
            zero = np.zeros_like(zs[0])
            gen = dd_sub(_relu(zs), _where(zpos, zc, (zero, zero, zero)))
            res = _where(keep, d, _where(kill, (zero, zero, zero), gen))
            new.append(res)
        dh = new
    o = _lin(dh, out[0])
    return [_plus(a, b) for a, b in zip(delta, o, strict=True)]


def inv_tau_dd(lo: Fraction, hi: Fraction) -> Scalar:
    """1/τ for lo ≤ τ ≤ hi as a scalar enclosure (exact arithmetic; lo ≤ 0: infinite)."""
    if lo <= 0:
        return 0.0, 0.0, math.inf
    a, b = 1 / hi, 1 / lo
    c = (a + b) / 2
    h, lo_, r = frac_dd(c)
    if math.isinf(r):
        return 0.0, 0.0, math.inf
    return h, lo_, float_up(Fraction(r) + (b - a) / 2)


def dd_deltas(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> list[Delta] | None:
    """δ = soft − hard after every layer (per layer, d coordinates (B, T), None = exactly
    zero), enclosed; None when a hard number does not fit the conversion (:class:`GiveUp`)."""
    itaus = [None if row is None else [inv_tau_dd(lo, hi) for lo, hi in row] for row in taus]
    dw = dd_weights(cm)
    B, T, d = hb.x0.shape
    delta: Delta = [None] * d
    outs = []
    alive = np.arange(B)  # words still computed: a word with an infinite radius is dropped
    try:
        for li, lt in enumerate(hb.layers):
            lw = dw.layers[li]
            if isinstance(lw, list):
                assert lt.heads is not None
                row = itaus[li]
                assert row is not None
                total = list(delta)
                for hw, tr, it in zip(lw, lt.heads, row, strict=True):
                    contrib = _head(hw, _take_trace(tr, alive, B), delta, it)
                    total = [_plus(a, b) for a, b in zip(total, contrib, strict=True)]
                delta = total
            else:
                assert lt.pre is not None
                pre = [_take_ra(z, alive, B) for z in lt.pre]
                delta = _ffn(lw, pre, delta)  # type: ignore[arg-type]
            delta = [None if c is None else guard(c) for c in delta]
            outs.append(_spread(delta, alive, B, T))
            # a word with an infinite radius anywhere has err_hi = inf in this layer, so it
            # is not settled whatever follows (each layer must be tight or dominated)
            dead = np.zeros(len(alive), dtype=bool)
            for c in delta:
                if c is not None:
                    dead |= np.isinf(c[2]).any(axis=1)
            if dead.any():
                keep = ~dead
                alive = alive[keep]
                delta = [None if c is None else (c[0][keep], c[1][keep], c[2][keep]) for c in delta]
            if alive.size == 0:
                for _ in range(li + 1, len(hb.layers)):
                    outs.append(_spread([None] * d, alive, B, T))
                break
    except GiveUp:
        return None
    return outs


def _take_ra(ra: RatArray, idx: np.ndarray, B: int) -> RatArray:
    return ra if len(idx) == B else RatArray(ra.num[idx], ra.den)


def _take_trace(tr: HeadTrace, idx: np.ndarray, B: int) -> HeadTrace:
    """The trace of the words ``idx`` (itself when every word is kept)."""
    if len(idx) == B:
        return tr
    return HeadTrace(
        q=_take_ra(tr.q, idx, B),
        k=_take_ra(tr.k, idx, B),
        v=_take_ra(tr.v, idx, B),
        scores=_take_ra(tr.scores, idx, B),
        visible=tr.visible,
        top=tr.top[idx],
        support=tr.support[idx],
        count=tr.count[idx],
        mixed=_take_ra(tr.mixed, idx, B),
    )


def _spread(delta: Delta, alive: np.ndarray, B: int, T: int) -> Delta:
    """δ of the kept words back to the whole batch; dropped words get [−inf, inf]."""
    if len(alive) == B:
        return delta
    out: Delta = []
    for c in delta:
        h = np.zeros((B, T))
        lo = np.zeros((B, T))
        r = np.full((B, T), np.inf)
        if c is not None:
            h[alive], lo[alive], r[alive] = c
        else:
            r[alive] = 0.0  # exactly zero for the kept words
        out.append((h, lo, r))
    return out


# ---------------------------------------------------------------------------------------
# the tier: a FloatBatch of every word, decided as the float64 tier's (readout.finish)
# ---------------------------------------------------------------------------------------

DD_PREC = 220  # bits of the temperature balls the second tier reads (τ to ≈ 2^-220)


def certify_dd(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> FloatBatch:
    """The second float tier on every word of ``hb``: a :class:`FloatBatch` like
    :func:`~.float64.certify_float`'s, from double-double enclosures of the direct soft forward pass
    (this module). Sound in the same sense: a word it settles has every
    decision certain and every reported enclosure tight; the rest goes on to arb."""
    B = len(hb.words)
    T = hb.x0.shape[1]
    chunk = max(1, min(SUB_BATCH, CHUNK_ENTRIES // (T * T)))
    parts = [
        _certify_dd_chunk(cm, slice_batch(hb, slice(i, i + chunk)), taus)
        for i in range(0, B, chunk)
    ]
    return concat(parts)


def _certify_dd_chunk(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> FloatBatch:
    fw = float_weights(cm)
    B = len(hb.words)
    T = hb.x0.shape[1]
    d = hb.x0.shape[2]
    L = len(cm.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.full((B, L), np.inf)
    err_row = np.zeros((B, L), dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        deltas = dd_deltas(cm, hb, taus)
        if deltas is None:  # numbers beyond the conversion: nothing settled here
            no = np.zeros(B, dtype=bool)
            return FloatBatch(
                no, err_lo, err_hi, err_row, decided=no, tight=np.zeros((B, L), bool), read=no
            )
        delta: Cols = {}
        for li, cols in enumerate(deltas):
            delta = {c: to_mr(v, TINY) for c, v in enumerate(cols) if v is not None}
            err_lo[:, li], err_hi[:, li], err_row[:, li] = layer_errors(delta, B, T, d)
        return finish(cm, hb, delta, fw, err_lo, err_hi, err_row)
