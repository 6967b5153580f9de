"""Certified soft meaning of ONE long input: float64 enclosures, blocked over query rows.

Why: :mod:`exactattn.engine.longinput` gives the exact hard meaning of a word of any length
in O(n·d) memory, but the soft meaning was certified only by the batched engines, which
keep (T, T) arrays and one common denominator (n ≲ 40). Here the soft meaning is
certified as *hard + δ*, exactly the formulation of :mod:`exactattn.engine.soft` and
:mod:`exactattn.engine.cascade.float64` (read their docstrings): δ = soft − hard is propagated
through the layers in float64 midpoint-radius enclosures with proven outward rounding
(the primitives of :mod:`exactattn.engine.cascade.interval`, whose soundness argument applies
unchanged), one block of query rows at a time against every visible key. Memory: O(T·d) for
the activations and δ, plus one (keys × block rows) block.

Differences from the float64 tier (all keep the enclosures sound, none changes the formulas):

* every activation row has its own denominator (``RowRat``), so exact rationals are turned
  into enclosures row by row (:func:`rows_mr`, relative error ≤ 3u < CONV);
* sums over keys use numpy's reductions (any summation order): a K-term sum loses at most
  (K − 1)·u·Σ|terms|, covered by the same (K + 2)·SUM_U allowance the float64 tier uses; numbers
  may therefore differ in the last bits between machines, the enclosures do not lose
  soundness;
* v_j − v_ref(i) is an exact zero where the two hard values are equal (decided exactly,
  by value identifiers), otherwise the difference of the two enclosures;
* visible keys whose weight e^{(δs − g)/τ} is certainly below e^{−800} get the enclosure
  [0, TINY] directly (a wide argument would otherwise give an infinite radius).

When the floats cannot decide the read-out (or an enclosure is not finite) and the input
is short enough for the batched engine, the arb path (:func:`exactattn.engine.certify.
certify_word`) decides instead; past that length the result says ``undecided`` — the
decision is never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade import ffn
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import weights as wt
from exactattn.engine.cascade.policy import malloc_tuned_long
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import (
    CompiledFFN,
    CompiledHead,
    CompiledModel,
    run_hard,
    tie_support,
    visible_block,
)
from exactattn.engine.longinput import LongHard, RowRat, affine, exact_scores, run_hard_long
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.model import AcceptOutput, ArgmaxOutput, Model
from exactattn.results.settings import TauOverride

MR = iv.MR
Cols = iv.Cols
BLOCK_ENTRIES = 1 << 19  # keys × query rows per block (≈ 40 float arrays of this size live)
ARB_MAX_N = 40  # the batched engine's length bound (its common denominator leaves int64)
TINY_EXP = -800.0  # e^x < TINY for every x below this


# ---------------------------------------------------------------------------------------
# exact rationals with per-row denominators → enclosures
# ---------------------------------------------------------------------------------------


def _to_f64(a: np.ndarray) -> np.ndarray:
    """Integers as float64, each within a relative u (inf when beyond the float range)."""
    if a.dtype != object:
        return a.astype(np.float64)
    out = np.empty(a.shape)
    flat = out.reshape(-1)
    for i, v in enumerate(a.reshape(-1)):
        try:
            flat[i] = float(int(v))
        except OverflowError:
            flat[i] = math.inf if v > 0 else -math.inf
    return out


def _inv_rows(den: np.ndarray, scale: int = 1) -> np.ndarray:
    """1/(den_i·scale) as floats within a relative u, each a normal number (else nan)."""
    out = np.empty(len(den))
    for i, v in enumerate(den.tolist()):
        f = 1 / (int(v) * scale)  # Python int division: correctly rounded
        out[i] = f if f >= 2.0**-1000 else math.nan
    return out


def rows_mr(num: np.ndarray, inv_den: np.ndarray) -> MR:
    """num[i, ...]·inv_den[i]: exact rationals (integers over per-row denominators whose
    reciprocals ``inv_den`` are within u) as enclosures. Errors: the integer, the reciprocal
    and the product each ≤ u relative, ≤ 3u < CONV in all; the product of two normal
    numbers ≥ 2^-1000 in size cannot underflow, and a nonzero entry gets rad ≥ TINY."""
    nf = _to_f64(num)
    shape = (-1,) + (1,) * (nf.ndim - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        m = nf * inv_den.reshape(shape)
        nz = num != 0 if num.dtype != object else np.array(num != 0, dtype=bool)
        r = np.abs(m) * iv.CONV + nz * iv.TINY
    bad = ~np.isfinite(m)
    if bad.any():
        m = np.where(bad, 0.0, m)
        r = np.where(bad, math.inf, r)
    return m, r


def rowrat_mr(x: RowRat) -> MR:
    return rows_mr(x.num, _inv_rows(x.den))


def _value_ids(x: RowRat) -> np.ndarray:
    """(T, c) int64 identifiers: equal iff the exact values are equal (column by column)."""
    T, c = x.num.shape
    ids = np.empty((T, c), dtype=np.int64)
    for col in range(c):
        num = x.num[:, col]
        if num.dtype != object and x.den.dtype != object:
            g = np.maximum(np.gcd(num, x.den), 1)
            pair = np.stack([num // g, x.den // g], axis=1)
            _, inv = np.unique(pair, axis=0, return_inverse=True)
            ids[:, col] = inv.reshape(-1)
        else:
            seen: dict[Fraction, int] = {}
            for i in range(T):
                f = Fraction(int(num[i]), int(x.den[i]))
                ids[i, col] = seen.setdefault(f, len(seen))
    return ids


# ---------------------------------------------------------------------------------------
# vectorised reductions over the key axis (axis 0), any order
# ---------------------------------------------------------------------------------------


def ksum(a: MR) -> MR:
    """Σ over axis 0 (K terms): midpoint loses ≤ (K − 1)u·Σ|m|, radius sum ≤ (K − 1)u·Σr."""
    m, r = a
    K = m.shape[0]
    k = (K + 2) * iv.SUM_U
    sm = m.sum(axis=0)
    return sm, iv.guard(sm, r.sum(axis=0) * (1 + k) + np.abs(m).sum(axis=0) * k)


def kdot(a: MR, b: MR) -> MR:
    """Σ_j a[j]·b[j] over axis 0 (the argument of interval.dot_keys, any order)."""
    K = a[0].shape[0]
    rho = (K + 2) * iv.SUM_U
    abm = np.abs(b[0])
    pm = a[0] * b[0]
    pr = np.abs(a[0]) * (b[1] + rho * abm)
    pr += a[1] * (abm + b[1])
    sm = pm.sum(axis=0)
    sr = pr.sum(axis=0) * (1 + (K + 4) * iv.SUM_U)
    return sm, iv.guard(sm, iv.floor_rad(sr))


def _scale_cols(a: MR, s: MR) -> MR:
    """a[j, i]·s[i] (s a per-query factor), as interval.scale_rows."""
    sm, sr = s[0][None, :], s[1][None, :]
    m = a[0] * sm
    r = np.abs(a[0]) * sr
    r += a[1] * (np.abs(sm) + sr)
    r *= 1 + iv.WIDEN
    r += np.abs(m) * iv.WIDEN
    return m, iv.floor_rad(r)


# ---------------------------------------------------------------------------------------
# one head
# ---------------------------------------------------------------------------------------


def _take(cols: Cols, idx: np.ndarray | slice) -> Cols:
    return {c: (v[0][idx], v[1][idx]) for c, v in cols.items()}


@dataclass
class _HeadSetup:
    """What every query block of one head shares (O(T·d))."""

    q: list[MR]
    k: list[MR]
    qa: RowRat
    kc: np.ndarray
    kL: int
    inv_qk: np.ndarray  # 1/(den_i·kL) per query row, within u
    v_mr: list[MR]
    v_ids: np.ndarray


def _setup(ch: CompiledHead, x: RowRat) -> _HeadSetup:
    T = x.num.shape[0]
    q = affine(x, ch.Q, ch.bq)
    k = affine(x, ch.K, ch.bk)
    v = affine(x, ch.V, ch.bv)
    cols = [c for c in range(q.num.shape[1]) if np.any(q.num[:, c] != 0)]
    if cols:
        qa = q.columns(cols)
        kc, kL = k.columns(cols).common()
    else:
        qa = RowRat(np.zeros((T, 1), dtype=np.int64), np.ones(T, dtype=np.int64))
        kc, kL = np.zeros((T, 1), dtype=np.int64), 1
    qm, qr = rowrat_mr(q)
    km, kr = rowrat_mr(k)
    vm, vr = rowrat_mr(v)
    return _HeadSetup(
        q=[(qm[:, c], qr[:, c]) for c in range(qm.shape[1])],
        k=[(km[:, c], kr[:, c]) for c in range(km.shape[1])],
        qa=qa,
        kc=kc,
        kL=kL,
        inv_qk=_inv_rows(qa.den, kL),
        v_mr=[(vm[:, c], vr[:, c]) for c in range(vm.shape[1])],
        v_ids=_value_ids(v),
    )


def head_long(
    ch: CompiledHead,
    x: RowRat,
    delta: Cols,
    inv_tau: MR,
    hw: dict[str, Any],
    block: int | None = None,
) -> Cols:
    """One head's contribution to δ (through its output matrix), (T,) columns."""
    T = x.num.shape[0]
    dq = wt.lin(delta, hw["Q"])
    dk = wt.lin(delta, hw["K"])
    dv = wt.lin(delta, hw["V"])
    st = _setup(ch, x)
    rule = ch.head.hard
    mask = ch.head.mask
    n_v = len(st.v_mr)
    out_m = {c: np.zeros(T) for c in range(n_v)}
    out_r = {c: np.zeros(T) for c in range(n_v)}
    touched: set[int] = set()
    B = block or max(1, BLOCK_ENTRIES // max(T, 1))
    for start in range(0, T, B):
        rows = np.arange(start, min(T, start + B))
        k0 = int(rows[0]) if mask in ("geq", "gt") else 0
        k1 = int(rows[-1]) + 1 if mask in ("leq", "lt") else T
        if k1 <= k0:
            k1 = k0 + 1
        got = _head_block(st, rule, mask, rows, k0, k1, T, dq, dk, dv, inv_tau)
        for c, (m, r) in got.items():
            out_m[c][rows] = m
            out_r[c][rows] = r
            touched.add(c)
    out: Cols = {c: (out_m[c], out_r[c]) for c in sorted(touched)}
    if hw["O"] is not None:
        out = wt.lin(out, hw["O"])
    return out


def _head_block(
    st: _HeadSetup,
    rule: str,
    mask: str,
    rows: np.ndarray,
    k0: int,
    k1: int,
    T: int,
    dq: Cols,
    dk: Cols,
    dv: Cols,
    inv_tau: MR,
) -> Cols:
    """δ of the head output for query rows ``rows`` (keys k0..k1-1), before O.

    Arrays are key-major (K, b). Formulas: attention._head (δα from u = expm1(δs/τ) on the
    argmax set, w = exp((δs − g)/τ) elsewhere; direct softmax − hard for rows where
    |δs/τ| ≥ 1)."""
    keys = slice(k0, k1)
    b = len(rows)
    vis_q = visible_block(mask, rows, T)[:, k0:k1]  # (b, K)
    S = exact_scores(st.qa.num[rows], st.kc[keys])  # (b, K) exact, scale 1/(den_i·kL)
    if S.dtype == object:
        big = max(abs(int(S.max())), abs(int(S.min()))) + 1 if S.size else 1
        masked = np.where(vis_q, S, -big)
    else:
        masked = np.where(vis_q, S, np.iinfo(np.int64).min)
    rmax = masked.max(axis=1, keepdims=True)
    top_q = vis_q & (S == rmax)
    sup_q = tie_support(top_q, rule)
    cnt = sup_q.sum(axis=1).astype(np.float64)
    nA = top_q.sum(axis=1).astype(np.float64)
    vis = np.ascontiguousarray(vis_q.T)  # (K, b)
    top = np.ascontiguousarray(top_q.T)
    sup = np.ascontiguousarray(sup_q.T)
    rest = vis & ~top
    has_rest = bool(rest.any())
    ds: MR | None = None
    if dq or dk:
        pairs: list[tuple[MR, MR]] = []
        for a in range(len(st.q)):
            if a in dq:
                kk = st.k[a][0][keys], st.k[a][1][keys]
                y = iv.add(kk, (dk[a][0][keys], dk[a][1][keys])) if a in dk else kk
                pairs.append(
                    ((dq[a][0][rows][None], dq[a][1][rows][None]), (y[0][None], y[1][None]))
                )
            if a in dk:
                pairs.append(
                    (
                        (st.q[a][0][rows][None], st.q[a][1][rows][None]),
                        (dk[a][0][keys][None], dk[a][1][keys][None]),
                    )
                )
        m3, r3 = iv.outer_sum(pairs)  # (1, K, b)
        ds = (m3[0], r3[0])
    out: Cols = {}
    dalpha: MR | None = None
    if not (ds is None and not has_rest and (rule == "average" or nA.max(initial=0) <= 1)):
        dalpha = _dalpha(st, rule, rows, S, rmax, vis, top, sup, rest, nA, cnt, ds, inv_tau)
    inv_cnt = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)
    jref = np.argmax(top_q, axis=1) + k0  # (b,) first top key of every query (k0 if none)
    for c in range(len(st.v_mr)):
        acc: MR | None = None
        if c in dv:
            supf = sup.astype(np.float64)
            sm, sr = ksum((supf * dv[c][0][keys][:, None], supf * dv[c][1][keys][:, None]))
            acc = iv.mul((sm, sr), (inv_cnt, np.abs(inv_cnt) * iv.CONV))
        if dalpha is not None:
            # Σ_j δα_ij = 0: Σ_j δα_ij vv_j = Σ_j δα_ij (vv_j − v_ref(i)), equal values drop out
            vm, vr = st.v_mr[c]
            same = st.v_ids[keys, c][:, None] == st.v_ids[jref, c][None, :]  # (K, b)
            dmid, drad = iv.sub(
                (vm[keys][:, None], vr[keys][:, None]), (vm[jref][None, :], vr[jref][None, :])
            )
            vd = (np.where(same, 0.0, dmid), np.where(same, 0.0, drad))
            if c in dv:
                vd = iv.add(vd, (dv[c][0][keys][:, None], dv[c][1][keys][:, None]))
            t = kdot(dalpha, vd)
            acc = t if acc is None else iv.add(acc, t)
        if acc is not None:
            out[c] = acc
    del b
    return out


def _dalpha(
    st: _HeadSetup,
    rule: str,
    rows: np.ndarray,
    S: np.ndarray,
    rmax: np.ndarray,
    vis: np.ndarray,
    top: np.ndarray,
    sup: np.ndarray,
    rest: np.ndarray,
    nA: np.ndarray,
    cnt: np.ndarray,
    ds: MR | None,
    inv_tau: MR,
) -> MR:
    """δα (K, b) of one block (attention._head's formulas)."""
    shape = vis.shape
    uw_m = np.zeros(shape)
    uw_r = np.zeros(shape)
    if ds is not None and top.any():
        um, ur = iv.mr_expm1(iv.mul((ds[0][top], ds[1][top]), inv_tau))
        uw_m[top] = um
        uw_r[top] = ur
    if rest.any():
        gnum = (rmax - S).T[rest]  # exact, ≥ 0 (int64: both in [−2^62, 2^62])
        scale = np.broadcast_to(st.inv_qk[rows][None, :], shape)[rest]
        g = rows_mr(gnum, np.ones(1))  # integer enclosures
        g = iv.mul(g, (scale, np.abs(scale) * iv.CONV))  # × 1/(den_i·kL) (within u)
        if ds is None:
            X = (-g[0], g[1])
        else:
            X = iv.sub((ds[0][rest], ds[1][rest]), g)
        E = iv.mul(X, inv_tau)
        wm, wr = iv.mr_exp(E)
        tiny = (E[0] + E[1] < TINY_EXP) & np.isfinite(E[0] + E[1])
        uw_m[rest] = np.where(tiny, 0.0, wm)
        uw_r[rest] = np.where(tiny, iv.TINY, wr)
    UR = ksum((uw_m, uw_r))
    Z = iv.add((np.where(nA > 0, nA, 1.0), np.zeros_like(nA)), UR)
    iz = iv.recip(Z)
    topf = top.astype(np.float64)
    if rule == "average":
        safe = np.maximum(nA, 1.0)
        mm = UR[0] / safe
        mean = (
            mm,
            UR[1] / safe * (1 + iv.WIDEN) + np.abs(mm) * iv.WIDEN + np.minimum(UR[1], iv.TINY),
        )
        numer = iv.sub((uw_m, uw_r), (mean[0][None, :] * topf, mean[1][None, :] * topf))
    else:
        base = iv.sub((nA - 1.0, np.zeros_like(nA)), (-UR[0], UR[1]))  # nA − 1 + U + R
        kst = iv.sub((uw_m, uw_r), (base[0][None, :], base[1][None, :]))
        one_u = (uw_m + 1.0, uw_r * (1 + iv.WIDEN) + np.abs(uw_m + 1.0) * iv.WIDEN)
        numer = (np.where(sup, kst[0], one_u[0]), np.where(sup, kst[1], one_u[1]))
        numer = (np.where(top, numer[0], uw_m), np.where(top, numer[1], uw_r))
    da = _scale_cols(numer, iz)
    visf = vis.astype(np.float64)
    da = (da[0] * visf, da[1] * visf)
    if ds is not None:
        a = (np.abs(ds[0]) + ds[1]) * visf
        amax = a.max(axis=0)
        big = amax * inv_tau[0] >= 1.0
        big |= ~np.isfinite(amax)
        if big.any():
            _direct_cols(st, rows, S, vis, sup, cnt, ds, inv_tau, big, da)
    return da


def _direct_cols(
    st: _HeadSetup,
    rows: np.ndarray,
    S: np.ndarray,
    vis: np.ndarray,
    sup: np.ndarray,
    cnt: np.ndarray,
    ds: MR,
    inv_tau: MR,
    big: np.ndarray,
    da: MR,
) -> None:
    """Overwrite δα of the queries flagged ``big`` by softmax((s + δs)/τ) − hard weights."""
    for i in np.flatnonzero(big):
        v = vis[:, i]
        s = rows_mr(S[i], np.array([st.inv_qk[rows[i]]]))
        s = (s[0].reshape(-1), s[1].reshape(-1))
        es = iv.mul(iv.add(s, (ds[0][:, i], ds[1][:, i])), inv_tau)
        shift = float(np.where(v, es[0], -np.inf).max())  # any float will do
        shift = shift if math.isfinite(shift) else 0.0
        xx = iv.sub(es, (np.full_like(es[0], shift), np.zeros_like(es[0])))
        xx = (np.where(v, xx[0], 0.0), np.where(v, xx[1], 0.0))
        ws = iv.mr_exp(xx)
        ws = (np.where(v, ws[0], 0.0), np.where(v, ws[1], 0.0))
        Z = ksum((ws[0][:, None], ws[1][:, None]))
        alpha = iv.div(ws, (np.full_like(ws[0], Z[0][0]), np.full_like(ws[0], Z[1][0])))
        inv = 1.0 / cnt[i] if cnt[i] > 0 else 0.0
        h = np.where(sup[:, i], inv, 0.0)
        d = iv.sub(alpha, (h, h * iv.CONV))
        da[0][:, i] = np.where(v, d[0], 0.0)
        da[1][:, i] = np.where(v, d[1], 0.0)


# ---------------------------------------------------------------------------------------
# feed-forward layers
# ---------------------------------------------------------------------------------------


def ffn_long(layer: CompiledFFN, x: RowRat, delta: Cols, fw_layer: Any) -> Cols:
    """δ through a feed-forward layer (ffn.ffn_linear's exact-coefficient tracking when it fits)."""
    if not delta:
        return {}
    hidden, out_rows, ints = fw_layer
    pres: list[RowRat] = []
    h = x
    for w, b in layer.hidden:
        z = affine(h, w, b)
        pres.append(z)
        h = RowRat(np.where(z.num > 0, z.num, 0).astype(z.num.dtype), z.den)
    invs = [_inv_rows(z.den) for z in pres]

    def pre(k: int, u: int) -> tuple[np.ndarray, np.ndarray, MR]:
        zn = pres[k].num[:, u]
        zpos = np.array(zn > 0, dtype=bool)
        zneg = np.array(zn < 0, dtype=bool)
        return zpos, zneg, rows_mr(zn, invs[k])

    T = x.num.shape[0]
    if ints.ok:
        return ffn.ffn_linear(pre, delta, ints, (T,))
    return ffn.ffn_generic(pre, delta, hidden, out_rows)


# ---------------------------------------------------------------------------------------
# the whole input
# ---------------------------------------------------------------------------------------


@dataclass
class LongSoft:
    """The certified soft meaning of one word (δ = soft − hard enclosed per layer).

    ``layer_error[l]`` = (lower, upper, slot) of max |soft − hard| over the slots and
    coordinates after layer l (floats that are exact bounds; upper = inf: no finite
    enclosure). ``decided`` False means the read-out could not be decided ("undecided"):
    ``output`` then holds None where it is unknown."""

    word: tuple[str, ...]
    n: int
    layer_error: list[tuple[float, float, int]]
    output: Any  # accept: bool | None; argmax: labels (None = tie or undecided)
    decided: bool
    method: str  # "float64" or "arb"
    readout: tuple[float, float] | None = None  # accept: soft y − threshold, enclosed
    delta: Cols | None = None  # δ after the last layer (float path), (T,) columns
    undecided_at: list[bool] | None = None
    notes: list[str] = field(default_factory=list)
    arb_delta: Any = None  # δ after the last layer (arb path): an arb_mat, or None = 0
    arb_prec: int = 0


def _layer_error(delta: Cols) -> tuple[float, float, int]:
    lo, hi, row = 0.0, 0.0, 0
    for _c, v in sorted(delta.items()):
        al, au = iv.abs_bounds(v)
        au = np.where(np.isnan(au), math.inf, au)
        lo = max(lo, float(np.nan_to_num(al).max(initial=0.0)))
        j = int(np.argmax(au)) if au.size else 0
        if au.size and au[j] > hi:
            hi, row = float(au[j]), j
    return lo, hi, row


def _frac_arr(q: Fraction) -> MR:
    m, r = iv.frac_mr(q)
    return np.array([m]), np.array([r])


def _slot_cols(delta: Cols, slot: int) -> Cols:
    return _take(delta, slice(slot, slot + 1))


def _readout(model: Model, lh: LongHard, delta: Cols, fw: wt.FloatWeights) -> tuple[Any, ...]:
    """(output, decided, readout enclosure, undecided_at) from the final δ."""
    o = model.output
    n = lh.n
    x = lh.acts[-1]
    if isinstance(o, AcceptOutput):
        slot = model.accept_slot(n)
        y = sum((w * x.fraction(slot, c) for c, w in enumerate(o.weight)), Fraction(0)) + o.bias
        c = y - o.threshold
        got = wt.lin(_slot_cols(delta, slot), fw.out).get(0)
        if got is None or not got[1].any():
            m, r = iv.frac_mr(c)
            return c > 0, True, (m - r, m + r), None
        val = iv.add(_frac_arr(c), got)
        vm, vr = float(val[0][0]), float(val[1][0])
        if not (math.isfinite(vm) and math.isfinite(vr)):
            return None, False, (-math.inf, math.inf), None
        lo = iv.float_down(Fraction(vm) - Fraction(vr))
        hi = iv.float_up(Fraction(vm) + Fraction(vr))
        if vm > vr:
            return True, True, (lo, hi), None
        if -vm >= vr:
            return False, True, (lo, hi), None
        return None, False, (lo, hi), None
    if isinstance(o, ArgmaxOutput):
        labels: list[str | None] = []
        undecided: list[bool] = []
        hard_labels: list[str | None] = []
        for p in model.output_positions(n):
            row = x.row(p)
            hard = [
                sum((w * r for w, r in zip(wr, row, strict=True)), Fraction(0)) + bb
                for wr, bb in zip(o.weight, o.bias, strict=True)
            ]
            best = max(hard)
            win = [i for i, v in enumerate(hard) if v == best]
            hard_lab = o.labels[win[0]] if len(win) == 1 else None
            hard_labels.append(hard_lab)
            dys = wt.lin(_slot_cols(delta, p), fw.out)
            if all(v[1][0] == 0 for v in dys.values()):
                labels.append(hard_lab)
                undecided.append(False)
                continue
            z = (np.zeros(1), np.zeros(1))
            nr = len(hard)
            dominated = [False] * nr
            fin = True
            for i in range(nr):
                for j in range(nr):
                    if i == j:
                        continue
                    diff = iv.add(
                        _frac_arr(hard[j] - hard[i]), iv.sub(dys.get(j, z), dys.get(i, z))
                    )
                    dm, dr = float(diff[0][0]), float(diff[1][0])
                    fin &= math.isfinite(dm) and math.isfinite(dr)
                    if dm > dr:
                        dominated[i] = True
            cand = [i for i in range(nr) if not dominated[i]]
            if fin and len(cand) == 1:
                labels.append(o.labels[cand[0]])
                undecided.append(False)
            else:
                labels.append(None)
                undecided.append(True)
        # as the check: only positions where the hard meaning decides must be decided
        decided = not any(u for u, h in zip(undecided, hard_labels, strict=True) if h is not None)
        return labels, decided, None, undecided
    # value outputs: the soft rows are hard + δ; decided = every |δy| certainly within or
    # certainly outside the tolerance
    tol_lo, tol_hi = iv.float_down(o.tolerance), iv.float_up(o.tolerance)
    outside = False
    unknown = False
    for p in model.output_positions(n):
        for v in wt.lin(_slot_cols(delta, p), fw.out).values():
            lo, hi = iv.abs_bounds(v)
            outside |= bool(lo[0] > tol_hi)
            unknown |= not (hi[0] <= tol_lo or lo[0] > tol_hi)
    if outside:
        return False, True, None, None
    if not unknown:
        return True, True, None, None
    return None, False, None, None


def certify_long(
    cm: CompiledModel,
    lh: LongHard,
    tau_override: TauOverride = None,
    block: int | None = None,
    arb_fallback: bool = True,
) -> LongSoft:
    """The certified soft meaning of the word of ``lh``, streaming (O(T·d) + one block).

    δ is enclosed after every layer; the read-out is decided from hard + δ, else (short
    words) by the arb path, else reported undecided."""

    model = cm.model
    n = lh.n
    malloc_tuned_long()  # the allocator setting (no bit depends on it): see its docstring
    temps = Temperatures(model, tau_override)
    taus = iv.tau_enclosures(temps.at(n, BASE_PREC))
    fw = wt.float_weights(cm)
    delta: Cols = {}
    errs: list[tuple[float, float, int]] = []
    notes: list[str] = []
    if not fw.ok:
        notes.append("a weight lies outside [2^-100, 2^100]: float enclosures not trusted")
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        for li, layer in enumerate(cm.layers):
            x = lh.acts[li]
            if isinstance(layer, list):
                total = delta
                row = taus[li]
                assert row is not None
                for hi_, ch in enumerate(layer):
                    it = iv.inv_tau(*row[hi_])
                    contrib = head_long(ch, x, delta, it, fw.layers[li][hi_], block)
                    total = wt.add_cols(total, contrib)
                delta = total
            else:
                delta = ffn_long(layer, x, delta, fw.layers[li])
            errs.append(_layer_error(delta))
        output, decided, ro, und = _readout(model, lh, delta, fw)
    finite = all(math.isfinite(hi) for _, hi, _ in errs)
    if not fw.ok:
        decided = False
        output = None if not isinstance(model.output, ArgmaxOutput) else [None] * len(output)
    res = LongSoft(lh.word, n, errs, output, decided, "float64", ro, delta, und, notes)
    if (not decided or not finite) and arb_fallback and n <= ARB_MAX_N:
        return _arb(cm, lh, tau_override, res)
    if not decided:
        notes.append(
            "float64 enclosures cannot decide the soft read-out"
            + (f" and n = {n} is past the arb path's bound ({ARB_MAX_N})" if n > ARB_MAX_N else "")
        )
    return res


def _arb(cm: CompiledModel, lh: LongHard, tau_override: TauOverride, fl: LongSoft) -> LongSoft:
    """The check's arb path on this one word (short words only)."""

    model = cm.model
    n = lh.n
    hb = run_hard(cm, [lh.word], n)
    acc = LengthAccumulator(model, n, None, len(model.layers))
    acc.add_hard(hb)
    sr = certify_word(cm, hb, 0, acc, Temperatures(model, tau_override), WeightCache(cm))
    errs = []
    for lo, hi, row in sr.bounds or []:
        flo = arb_endpoints(lo)[0] if lo.is_finite() else Fraction(0)
        fhi = arb_endpoints(hi)[1] if hi.is_finite() else None
        errs.append(
            (
                iv.float_down(max(flo, Fraction(0))),
                math.inf if fhi is None else iv.float_up(fhi),
                int(row),
            )
        )
    v = sr.verdict
    notes = fl.notes + [f"float64 enclosures undecided; arb path at {sr.prec} bits"]
    return LongSoft(lh.word, n, errs, v.value, v.decided, "arb", None, None, v.undecided_at, notes)


def rounding_enclosure(a: np.ndarray, hard: RowRat, delta: Cols | None) -> tuple[float, float]:
    """‖a − (hard + δ)‖∞ enclosed: a the dtype's final activations (T, d), exact binary."""
    a64 = a.astype(np.float64)
    if not np.isfinite(a64).all():
        return math.inf, math.inf
    hm, hr = rowrat_mr(hard)
    dm, dr = iv.sub((a64, np.zeros_like(a64)), (hm, hr))
    lo, hi = 0.0, 0.0
    for c in range(a64.shape[1]):
        v = (dm[:, c], dr[:, c])
        if delta is not None and c in delta:
            v = iv.sub(v, delta[c])
        al, au = iv.abs_bounds(v)
        lo = max(lo, float(al.max(initial=0.0)))
        hi = max(hi, float(np.where(np.isnan(au), math.inf, au).max(initial=0.0)))
    return lo, hi


def labels_differ(hard: Any, soft: Any, undecided_at: list[bool] | None) -> bool | None:
    """Argmax read-outs: whether the soft labels differ from the hard ones where the hard
    meaning decides (a hard tie, label None, requires nothing: as the check's verdict);
    None when one of those positions is undecided."""
    und = undecided_at or [False] * len(hard)
    differ = False
    for h, sl, u in zip(hard, soft, und, strict=True):
        if h is None:
            continue
        if u:
            return None
        differ |= sl != h
    return differ


def soft_differs(model: Model, hard: Any, ls: LongSoft) -> bool | None:
    """Whether the certified soft decision differs from the hard one (None: undecided)."""
    if isinstance(model.output, AcceptOutput):
        return None if ls.output is None or not ls.decided else bool(ls.output != hard)
    if isinstance(model.output, ArgmaxOutput):
        return labels_differ(hard, ls.output, ls.undecided_at)
    if ls.output is None:
        return None
    return not ls.output


def certify_word_long(
    model: Model, word: Sequence[str], tau_override: TauOverride = None, block: int | None = None
) -> tuple[LongHard, LongSoft]:
    """Convenience: the exact hard and the certified soft meaning of one word."""

    cm = CompiledModel(model)
    lh = run_hard_long(cm, word, block)
    return lh, certify_long(cm, lh, tau_override, block)
