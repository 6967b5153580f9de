"""The attention pass of the float tiers: one head's δ = soft − hard, for a whole batch.

Same *hard + δ* formulation as :mod:`exactattn.engine.soft` (read its docstring): the hard
scores, weights and values are exact (:mod:`exactattn.engine.hard`), δ is evaluated in the
enclosures of :mod:`.interval`. Tightness (so that words settle, not for soundness):

* Σ_j δα_ij = 0, so δα·v is computed as Σ_j δα_ij (v_j − v_ref(i)): keys with the
  reference value drop out exactly.
* Rows whose scores move by ≥ τ use softmax − hard directly, as soft.py does
  (:func:`_direct_rows`), or centred on their winner (the centred tier, :func:`big_rows`).
* Hard scores beyond int64 enter as exact int64 limbs (:func:`_score_limbs`), not as Python
  integers.

:func:`head_delta` picks the layout: :func:`_head_free` (no δ coming in, small batches, laid
out for them) or :func:`_head`; both give the same bits.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from exactattn.engine.cascade.batch import query_rows
from exactattn.engine.cascade.interval import (
    CONV,
    MR,
    STACK_MAX,
    SUM_U,
    TINY,
    WIDEN,
    Cols,
    add,
    div,
    dot_keys,
    floor_rad,
    from_rat,
    guard,
    mr_exp,
    mr_expm1,
    mul,
    outer_sum,
    rat_float,
    rat_mid,
    recip_raw,
    rounding_constants,
    scale_rows,
    seq_sum,
    sub,
    sum_keys,
)
from exactattn.engine.cascade.weights import lin, lin_plan, lin_stack
from exactattn.engine.hard import HeadTrace, rows_alike
from exactattn.engine.ratarray import RatArray

# the rows with large score perturbations (|δs/τ| ≥ 1): the float64 tier's own direct softmax by
# default; the centred tier (centred.py) computes them in its own sound way
_BIG_ROWS: contextvars.ContextVar[Callable[..., None] | None] = contextvars.ContextVar(
    "exactattn_big_rows", default=None
)


@contextmanager
def big_rows(fn: Callable[..., None]) -> Iterator[None]:
    """Inside the block, attention rows with |δs/τ| ≥ 1 are computed by ``fn(tr, ds, inv_tau,
    big, da)`` (it overwrites δα on the rows ``big``, as :func:`_direct_rows` does)."""
    token = _BIG_ROWS.set(fn)
    try:
        yield
    finally:
        _BIG_ROWS.reset(token)


def _columns(ra: RatArray, want: Any) -> dict[int, MR]:
    """Columns ``want`` of an exact array as enclosures (elementwise: the bits of converting
    the whole array, without converting the columns nobody reads)."""
    return {c: from_rat(ra.num[..., c], ra.den) for c in want}


def delta_rows(delta: Cols, a: int, b: int) -> Cols:
    """Rows a..b−1 of every column of δ (views)."""
    if not delta or (a == 0 and b == next(iter(delta.values()))[0].shape[1]):
        return delta
    return {c: (m[:, a:b], r[:, a:b]) for c, (m, r) in delta.items()}


def _exact_col_sums(
    DA: np.ndarray, xm: np.ndarray, c_v: float, T: int
) -> tuple[np.ndarray, np.ndarray]:
    """Σ_j δα_j·(v_j − v_ref) over the keys for exact value columns, with radii: δα as
    (mid, rad) ``DA`` (2, j, i, B), the value differences' rounded quotients ``xm`` (E, j, i, B)
    within ``c_v`` relative (_dot_weight's bound, then _dot_exact's products and key sums).
    Both the plain and the shared head use it; returns (E, i, B) midpoints and radii."""
    q = np.abs(DA[0]) * (c_v + (T + 2) * SUM_U)  # _dot_weight
    q += DA[1] * (1 + c_v)
    P = np.empty((2,) + xm.shape)  # _dot_exact: products and their radii, then key sums
    np.multiply(DA[0], xm, out=P[0])
    np.abs(xm, out=P[1])
    P[1] *= q
    tm, tr_ = seq_sum(P, 2)  # (E, i, B) each
    tr_ *= 1 + (T + 4) * SUM_U
    return tm, guard(tm, floor_rad(tr_))


def _head(
    tr: HeadTrace, rule: str, delta: Cols, inv_tau: MR, hw: dict[str, Any], q0: int = 0
) -> Cols:
    """One head's contribution to δ (already through its output matrix).

    ``tr`` may hold only the query rows q0..q0+R−1 (:func:`query_rows`), with every key;
    ``delta`` always holds every row. The result has the trace's query rows.
    Attention arrays are stored key-major, A[b, j, i] (key j, query i), so that sums over
    the keys are sums of contiguous (B, ·) slices in a fixed order; every entry is computed
    by the same operations in the same order whatever R is, so its bits do not depend on it.
    """
    B, R, T = tr.top.shape  # R query rows (q0..q0+R−1), T keys
    dq = lin(delta_rows(delta, q0, q0 + R), hw["Q"])
    vis_same = _visibility(tr.visible)[0]
    if (
        R > 1
        and not dq
        and vis_same
        and bool((tr.q.num[:, 0] == tr.q.num[:, 1]).all())  # a cheap first test
        and rows_alike(tr)
    ):
        # every query row has the same hard query, no δ on it and the same visible keys
        # (a constant query over all positions: "is there a bad position?"): every row
        # computes the same numbers, so compute one and copy it
        one = _head(query_rows(tr, 0, 1), rule, delta, inv_tau, hw, q0)
        return {c: (np.repeat(m, R, axis=1), np.repeat(r, R, axis=1)) for c, (m, r) in one.items()}
    dk = lin(delta, hw["K"])
    dv = lin(delta, hw["V"])
    ds: MR | None = None
    if dq or dk:
        # δs_ij = Σ_a dq_ia (k_ja + dk_ja) + q_ia dk_ja, as fused outer products
        qc = _columns(tr.q, dk)  # q_a is read where dk_a ≠ 0, k_a where dq_a ≠ 0
        kc = _columns(tr.k, dq)
        pairs: list[tuple[MR, MR]] = []
        for a in range(tr.q.num.shape[-1]):
            if a in dq:
                pairs.append((dq[a], add(kc[a], dk[a]) if a in dk else kc[a]))
            if a in dk:
                pairs.append((qc[a], dk[a]))
        ds = outer_sum(pairs, kqw=True)  # (j, i, B)
    # The δ formulas run laid out [key, query, word] (j, i, B), as _head_free: a sum over the
    # keys adds contiguous blocks and a per-query factor broadcasts over the leading axis,
    # so numpy's inner loops run over the batch, not over a query row's few entries
    # (elementwise operations and key sums in the same order: the same bits).
    top_q = tr.top  # (B, i, j)
    topk = np.ascontiguousarray(top_q.transpose(2, 1, 0))  # (j, i, B)
    visb, visfk = _visibility_keys(tr.visible, B)
    restk = visb & ~topk
    has_rest = bool(restk.any())
    nA_i = top_q.sum(axis=2)
    if ds is None and not dv and not has_rest and (rule == "average" or nA_i.max(initial=0) <= 1):
        return {}  # every visible key ties at the top and nothing moved: exactly hard
    big: np.ndarray | None = None
    if ds is not None:
        # large perturbations (|δs/τ| ≥ 1 somewhere in the row, as in soft.py): the δ
        # formulas overflow or cancel; softmax − hard is computed directly for those rows
        a = np.abs(ds[0])
        a += ds[1]
        a *= visfk
        amax = a.max(axis=0)  # (i, B), exact in any order (nan propagates, as np.maximum)
        bigk = amax * inv_tau[0] >= 1.0
        bigk |= ~np.isfinite(amax)
        if bigk.any():
            big = np.ascontiguousarray(bigk.T)  # (B, i)
    s = tr.scores.num  # (B, i, j)
    # Python-integer (or near-int64-limit) scores: gaps from exact limbs (_score_limbs)
    wide = s.dtype == object or bool(s.size and int(np.abs(s).max()) >= 2**61)
    limbs: tuple[list[np.ndarray], int] | None = None
    if ds is not None and wide:
        limbs = _score_limbs(tr)
    # (B, i): the first top key of every query (0 if none); every top key holds the row's
    # maximum of the visible scores, so it is read there
    first = np.argmax(top_q, axis=2)
    sden = tr.scores.den
    dak: MR | None = None  # δα laid out (j, i, B)
    dab: MR | None = None  # δα laid out (B, j, i)
    if big is None:
        dak = _delta_alpha(
            topk, restk, has_rest, s, wide, limbs, sden, tr.support, visfk, ds,
            first, nA_i, inv_tau, rule,
        )  # fmt: skip
        da = dak
    else:
        # _direct_rows overwrites every entry of the big rows: the δ formulas run on the
        # other rows only, gathered into one (keys, rows, 1) batch (every entry is computed
        # by the same operations, elementwise or along its own row: the same bits)
        assert ds is not None
        ds = (  # (B, j, i), as the big rows' tiers read it
            np.ascontiguousarray(ds[0].transpose(2, 0, 1)),
            np.ascontiguousarray(ds[1].transpose(2, 0, 1)),
        )
        da = dab = (np.zeros((B, T, R)), np.zeros((B, T, R)))
        if not big.all():
            bs, is_ = np.nonzero(~big)
            tq = top_q[bs, is_]  # (K, T)
            tk = np.ascontiguousarray(tq.T)[:, :, None]  # (T, K, 1)
            vT = np.ascontiguousarray(tr.visible[is_].T)[:, :, None]
            rest_c = vT & ~tk
            ds_c = (ds[0][bs, :, is_].T[:, :, None], ds[1][bs, :, is_].T[:, :, None])
            limbs_c = None if limbs is None else ([c[bs, is_][None] for c in limbs[0]], limbs[1])
            dm, dr = _delta_alpha(
                tk, rest_c, bool(rest_c.any()), s[bs, is_][None], wide, limbs_c, sden,
                tr.support[bs, is_][None], vT.astype(np.float64), ds_c,
                first[bs, is_][None], nA_i[bs, is_][None], inv_tau, rule,
            )  # fmt: skip
            dab[0][bs, :, is_] = dm[:, :, 0].T
            dab[1][bs, :, is_] = dr[:, :, 0].T
        hook = _BIG_ROWS.get()  # the centred tier's rows (centred.py), if set
        if hook is not None:
            hook(tr, ds, inv_tau, big, da)
        else:
            if limbs is None and s.dtype == object:
                limbs = _score_limbs(tr)
            _direct_rows(tr, ds, inv_tau, big, da, limbs)
    # Σ_j α_hard_ij δv_j + Σ_j δα_ij (v_j + δv_j)
    nv = tr.v.num.shape[-1]
    out: Cols = {}
    da_nz = bool(da[1].any())
    jref = first
    vden = tr.v.den
    exact: dict[int, MR] = {}
    ex = [c for c in range(nv) if c not in dv] if da_nz and vden < 2**400 else []
    if ex:
        # Σ_j δα_ij = 0, so Σ_j δα_ij vv_j = Σ_j δα_ij (vv_j − v_ref(i)) with v_ref(i) the
        # hard value of row i's first top key: equal values cancel exactly, not ± width.
        # Columns without δv: exact hard differences, rad = |vd|·c_v, so the radius of every
        # product is |vd_j|·Q_j with Q shared by all of them; all such columns at once
        # (a last axis, elementwise: the bits of column by column)
        # Laid out [column, key, query, word] as in _head_free (the words innermost: numpy's
        # inner loops run over the batch, not over a query row's few entries), the numbers
        # of _dot_weight and _dot_exact, elementwise and summed over the keys in the same
        # order: the same bits.
        vn = tr.v.num if len(ex) == nv else tr.v.num[..., ex]  # (B, j, E)
        E = len(ex)
        vk = np.ascontiguousarray(vn.transpose(2, 1, 0))  # (E, j, B)
        vref = np.take(vk.reshape(E, T * B), jref.T * B + np.arange(B), axis=1)  # (E, i, B)
        dn = vk[:, :, None, :] - vref[:, None, :, :]  # (E, j, i, B)
        xm = rat_mid(dn, vden)
        if dak is None:
            assert dab is not None
            DA = np.empty((2, T, R, B))
            DA[0] = dab[0].transpose(1, 2, 0)
            DA[1] = dab[1].transpose(1, 2, 0)
        else:
            DA = dak
        tm, tr_ = _exact_col_sums(DA, xm, CONV + 2.0 * TINY * vden, T)
        for e, c in enumerate(ex):
            exact[c] = (tm[e].T, tr_[e].T)  # (B, i) views
    supT = inv = None  # the hard weights' pieces, the same for every value column
    for c in range(nv):
        acc: MR | None = None
        if c in dv:
            dm, dr = dv[c]
            if supT is None or inv is None:
                cnt = tr.count.astype(np.float64)
                supT = tr.support.transpose(0, 2, 1).astype(np.float64)
                inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)
            sm, sr = sum_keys((supT * dm[:, :, None], supT * dr[:, :, None]))
            acc = mul((sm, sr), (inv, np.abs(inv) * CONV))
        if da_nz:
            t = exact.get(c)
            if t is None:
                vn1 = tr.v.num[..., c]
                vref1 = np.take_along_axis(vn1, jref, axis=1)  # (B, i)
                vd = from_rat(vn1[:, :, None] - vref1[:, None, :], vden)  # (B, j, i)
                if c in dv:
                    vd = add(vd, (dv[c][0][:, :, None], dv[c][1][:, :, None]))
                if dab is None:  # dot_keys reads δα as (B, j, i)
                    assert dak is not None
                    dab = (
                        np.ascontiguousarray(dak[0].transpose(2, 0, 1)),
                        np.ascontiguousarray(dak[1].transpose(2, 0, 1)),
                    )
                t = dot_keys(dab, vd)
            acc = t if acc is None else add(acc, t)
        if acc is not None:
            out[c] = acc
    if hw["O"] is not None:
        out = lin(out, hw["O"])
    return out


def _delta_alpha(
    top: np.ndarray,
    rest: np.ndarray,
    has_rest: bool,
    s: np.ndarray,
    wide: bool,
    limbs: tuple[list[np.ndarray], int] | None,
    sden: int,
    support: np.ndarray,
    visf: np.ndarray,
    ds: MR | None,
    first: np.ndarray,
    nA_i: np.ndarray,
    inv_tau: MR,
    rule: str,
) -> MR:
    """δα of a head by the δ formulas, laid out [key, query, word] (T, R, B), for
    :func:`_head`: top/rest (T, R, B) the hard top and other visible keys, s the hard score
    numerators (B, R, T) over ``sden`` (``wide``: Python integers or near the int64 limit;
    ``limbs``: the same exactly, :func:`_score_limbs`), support (B, R, T), visf the
    visibility as floats (broadcasting to (T, R, B)), ds the score perturbations (T, R, B)
    (None: none), first (B, R) the first top key of every query, nA_i its number of top
    keys."""
    T, R, B = top.shape
    # u = expm1(δs/τ) on the top keys, w = exp((δs − g)/τ) on the other visible keys
    # (g = max s − s ≥ 0, exact), computed only where needed, into one array
    shape = (T, R, B)
    UW = np.zeros((3, T * R * B))  # u/w: midpoints, radii, |midpoints| (for the key sums)
    uw_m, uw_r = UW[0], UW[1]
    if ds is not None:
        it = np.flatnonzero(top)
        um, ur = mr_expm1(mul((ds[0].reshape(-1)[it], ds[1].reshape(-1)[it]), inv_tau))
        uw_m[it] = um
        uw_r[it] = ur
    if has_rest:
        ir = np.flatnonzero(rest)
        gf: np.ndarray | None = None  # the gaps' numerators as floats, from limbs
        if wide:
            jj, qq, bb = np.unravel_index(ir, shape)
            if limbs is not None:
                # exact int64 limbs of smax − s, converted as Python's float(int) would
                cs, lb = limbs
                gl = []
                for c in cs:
                    cmax = np.take_along_axis(c, first[:, :, None], axis=2)[:, :, 0]
                    gl.append(cmax[bb, qq] - c[bb, qq, jj])
                gf = _limbs_float(gl, lb, owned=True)
            if gf is None:
                # Python integers: subtract only where needed (the visible non-top keys)
                so = s if s.dtype == object else s.astype(object)
                smax = np.take_along_axis(so, first[:, :, None], axis=2)[:, :, 0]
                gnum = smax[bb, qq] - so[bb, qq, jj]
        else:
            sk = np.ascontiguousarray(s.transpose(2, 1, 0))  # (j, i, B)
            at = _flat_grid(R, B)[0]
            smax = np.take(sk, first.T * (R * B) + at)  # (i, B): the row maxima
            gnum = (smax - sk).reshape(-1)[ir]  # max s − s (sk may be a view of s)
        if ds is None and sden < 2**400 and inv_tau[0] > 0:  # 1/τ may underflow to 0
            wm, wr = _gap_weights(gnum, sden, inv_tau)
        else:
            g = from_rat(gnum, sden) if gf is None else rat_float(gf, sden)
            if ds is None:
                X = (-g[0], g[1])
            else:
                X = sub((ds[0].reshape(-1)[ir], ds[1].reshape(-1)[ir]), g)
            wm, wr = mr_exp(mul(X, inv_tau))
        uw_m[ir] = wm
        uw_r[ir] = wr
    np.abs(UW[0], out=UW[2])
    X = UW.reshape((3,) + shape)
    uw_m, uw_r = X[0], X[1]
    # U + R, (R, B): _sum_keys_x over the leading key axis (the same sums in the same order)
    if X[0].size <= STACK_MAX:  # small: one pass over the three stacked arrays
        sm, sr, sa = seq_sum(X, 1)
    else:  # large: three passes over contiguous slices cost less than strided ones
        sm, sr, sa = seq_sum(X[0], 0), seq_sum(X[1], 0), seq_sum(X[2], 0)
    kk = (T + 2) * SUM_U
    UR = (sm, guard(sm, sr * (1 + kk) + sa * kk))
    nA = nA_i.T.astype(np.float64)  # (R, B) exact small integers
    safe = np.maximum(nA, 1.0)  # nA where nA > 0, else 1
    # a query that sees nothing has δα = 0; Z = 1 there keeps the arithmetic finite
    Z = add((safe, 0.0), UR)  # type: ignore[arg-type]
    iz = recip_raw(Z)  # _head runs under the chunk's errstate
    if rule == "average":
        topf = top.astype(np.float64)
        mm = UR[0] / safe
        mean = (mm, UR[1] / safe * (1 + WIDEN) + np.abs(mm) * WIDEN + np.minimum(UR[1], TINY))
        numer = sub((uw_m, uw_r), (mean[0] * topf, mean[1] * topf))
    else:
        sup = support.transpose(2, 1, 0)
        # kstar: u − (nA − 1) − U − R; other tops: 1 + u
        base = sub((nA - 1.0, np.zeros_like(nA)), (-UR[0], UR[1]))  # nA − 1 + U + R
        kst = sub((uw_m, uw_r), base)
        one_u = (uw_m + 1.0, uw_r * (1 + WIDEN) + np.abs(uw_m + 1.0) * WIDEN)
        numer = (np.where(sup, kst[0], one_u[0]), np.where(sup, kst[1], one_u[1]))
        numer = (np.where(top, numer[0], uw_m), np.where(top, numer[1], uw_r))
    dm, dr = scale_rows(numer, iz)
    dm *= visf
    dr *= visf
    return dm, dr


_GAPW: dict[tuple[Any, ...], MR] = {}
_VIS: dict[tuple[Any, ...], tuple[bool, np.ndarray, np.ndarray]] = {}


def _visibility(vis: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
    """For a visibility mask (R, T): whether all its rows are equal, and its transpose
    (1, T, R) as bool and as float (read only), memoised by the mask's value."""
    key = (vis.shape, vis.tobytes())
    got = _VIS.get(key)
    if got is None:
        if len(_VIS) > 256:
            _VIS.clear()
        visT = np.ascontiguousarray(vis.T)[None]
        visf = visT.astype(np.float64)
        visT.flags.writeable = False
        visf.flags.writeable = False
        same = bool(vis.shape[0] == 0 or (vis == vis[:1]).all())
        got = _VIS[key] = (same, visT, visf)
    return got


def _gap_weights(gnum: np.ndarray, sden: int, inv_tau: MR) -> MR:
    """exp(−g/τ) for exact gaps g = gnum/sden > 0 (no score perturbation), as enclosures.

    Every entry is an elementwise function of its gap alone, so it is computed once per
    distinct value: over the range of the (int64) gaps when it is short, memoised by that
    range, τ's enclosure and the rounding constants (a pure function of them: no state of a
    model or batch); then gathered. The same bits as computing every entry."""
    if gnum.dtype == np.int64 and gnum.size:
        lo = int(gnum.min())
        hi = int(gnum.max())
        if hi - lo < 256:  # a short range: every value in it, indexed by gnum − lo
            vals: tuple[int, ...] | None = (lo, hi)
            at: np.ndarray | None = gnum - lo
            grid = np.arange(lo, hi + 1)
        else:  # two values (the usual case beyond), else none of this
            is_hi = gnum == hi
            vals = (lo, hi, 2) if bool((is_hi | (gnum == lo)).all()) else None
            at = is_hi.astype(np.intp)
            grid = np.array([lo, hi], dtype=np.int64)
        if vals is not None:
            key = (vals, sden, float(inv_tau[0]), float(inv_tau[1]), rounding_constants())
            got = _GAPW.get(key)
            if got is None:
                if len(_GAPW) > 4096:
                    _GAPW.clear()
                got = _GAPW[key] = _gap_weights_all(grid, sden, inv_tau)
            return got[0][at], got[1][at]
    return _gap_weights_all(gnum, sden, inv_tau)


def _gap_weights_all(gnum: np.ndarray, sden: int, inv_tau: MR) -> MR:
    """exp(−g/τ) for exact gaps g = gnum/sden > 0, entry by entry (see :func:`_gap_weights`).

    E = −g/τ: |E − m| ≤ |m|·(c_g + ρ_τ(1 + c_g))·(1 + W) + |m|·W."""
    gm = rat_mid(gnum, sden)
    c_g = CONV + 2.0 * TINY * sden
    rho_t = float(inv_tau[1]) / float(inv_tau[0])
    kk = (c_g + rho_t * (1 + c_g)) * (1 + WIDEN) * (1 + WIDEN) + 2 * WIDEN
    em = gm * (-float(inv_tau[0]))
    return mr_exp((em, em * (-kk) + TINY))


def _direct_rows(
    tr: HeadTrace,
    ds: MR,
    inv_tau: MR,
    big: np.ndarray,
    da: MR,
    limbs: tuple[list[np.ndarray], int] | None = None,
) -> None:
    """Overwrite δα on the queries flagged ``big`` by softmax((s + δs)/τ) − hard weights.

    ``limbs``: the hard scores as :func:`_score_limbs` gives them (converted from those
    instead of from Python integers: the same floats)."""
    bi, ii = np.nonzero(big)
    vis = tr.visible[ii]  # (K, j)
    K, T = vis.shape
    R = big.shape[1]
    # only the visible entries (row-major, 1-D): the others end as exact zeros, so every
    # operation of softmax − hard runs on these alone (elementwise, or per row after a
    # scatter into (K, j) zeros: the same arrays, the same bits)
    iv = None if vis.all() else np.flatnonzero(vis)
    if iv is None:
        row = np.repeat(np.arange(K), T)
        col = np.tile(np.arange(T), K)
    else:
        row = iv // T
        col = iv - row * T
    # each entry's position in query-major (B, i, j) arrays and in key-major (B, j, i) ones:
    # one flat gather each, not a (K, j) gather and then the visible entries
    e_q = (bi * R + ii)[row] * T + col
    e_k = (bi[row] * T + col) * R + ii[row]

    def pick(x: np.ndarray) -> np.ndarray:  # x (B, i, j)
        return x.reshape(-1)[e_q]

    def spread(x: np.ndarray, fill: float) -> np.ndarray:
        if iv is None:
            return x.reshape(K, T)
        out = np.full((K, T), fill)
        out.reshape(-1)[iv] = x
        return out

    sf = None
    if limbs is not None:
        sf = _limbs_float([pick(c) for c in limbs[0]], limbs[1], owned=True)
    if sf is None:
        s = from_rat(pick(tr.scores.num), tr.scores.den)
    else:
        s = rat_float(sf, tr.scores.den)
    es = mul(add(s, (ds[0].reshape(-1)[e_k], ds[1].reshape(-1)[e_k])), inv_tau)
    shift = spread(es[0], -np.inf).max(axis=1)  # any float will do
    shift = np.where(np.isfinite(shift), shift, 0.0)[row]
    x = sub(es, (shift, np.zeros_like(shift)))
    ws = mr_exp(x)
    Z = sum_keys((spread(ws[0], 0.0), spread(ws[1], 0.0)))
    alpha = div(ws, (Z[0][row], Z[1][row]))
    cnt = tr.count[bi, ii].astype(np.float64)
    inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)[row]
    h = np.where(pick(tr.support), inv, 0.0)
    d = sub(alpha, (h, h * CONV))
    da[0][bi, :, ii] = spread(d[0], 0.0)
    da[1][bi, :, ii] = spread(d[1], 0.0)


def _score_limbs(tr: HeadTrace) -> tuple[list[np.ndarray], int] | None:
    """The hard score numerators of a head exactly, as int64 limbs: s = Σ_n c[n]·2^(b·n).

    Scores are q·kᵀ over q.den·k.den (hard.run_head builds them so), and when they need more
    than 62 bits they are Python integers, whose subtraction and conversion to float cost
    ~100 times a float operation per entry. q and k are int64: split into signed b-bit limbs,
    every limb product and its sum over the inner dimension are exact int64 (|c[n]| < 2^60,
    so gaps of two scores stay below 2^61). None when the trace is not of that form or the
    numbers do not fit (then the Python-integer path is used)."""
    q, k = tr.q.num, tr.k.num
    if q.dtype != np.int64 or k.dtype != np.int64 or tr.scores.den != tr.q.den * tr.k.den:
        return None
    A = q.shape[-1]
    if not q.size or not k.size or not 0 < A <= 4096:
        return None
    b = (60 - (3 * A).bit_length()) // 2  # 3 limb pairs per power at most: 3·A·2^(2b) ≤ 2^60
    limbs = []
    for x in (q, k):
        lo, hi = int(x.min()), int(x.max())
        if lo <= -(2**62) or hi >= 2**62:
            return None
        n = max(1, -(-max(-lo, hi).bit_length() // b))
        if n > 3:
            return None
        ax = np.abs(x)
        neg = x < 0
        parts = []
        for i in range(n):
            p = (ax >> (b * i)) & ((1 << b) - 1)
            parts.append(np.where(neg, -p, p))  # signed digits: x = Σ parts[i]·2^(b·i)
        limbs.append(parts)
    ql, kl = limbs
    kT = [p.swapaxes(-1, -2) for p in kl]
    c: list[np.ndarray | None] = [None] * (len(ql) + len(kl) - 1)
    for i, qp in enumerate(ql):
        for j, kp in enumerate(kT):
            prod = np.matmul(qp, kp)  # exact: |Σ| ≤ A·2^(2b) per pair
            c[i + j] = prod if c[i + j] is None else c[i + j] + prod  # type: ignore[operator]
    return [x for x in c if x is not None], b


def _limbs_float(c: list[np.ndarray], b: int, owned: bool = False) -> np.ndarray | None:
    """float(Σ_n c[n]·2^(b·n)) correctly rounded (half to even, as Python's float(int)), for
    int64 limbs with |c[n]| < 2^61 and b ≤ 29; None when the value could need more than 63
    bits above 2^(2b) (then the caller converts Python integers).

    The limbs are normalised (c[n] in [0, 2^b) below the top one; the sign from the top) and
    |X| is cut to a 59–60-bit window W = ⌊|X|/2^t⌋ with a sticky last bit (W | [remainder ≠ 0],
    "round to odd"): W has ≥ 6 bits below the 53 kept, so rounding W·2^t to nearest gives
    the nearest float to |X| (the int64 → float64 conversion rounds to nearest even).
    ``owned``: the arrays of ``c`` are the caller's to change (else they are copied)."""
    mask = (1 << b) - 1
    c = [x if owned and x.dtype == np.int64 else x.astype(np.int64, copy=True) for x in c]
    while len(c) < 3:
        c.append(np.zeros_like(c[0]))
    N = len(c)

    def norm() -> None:
        for i in range(N - 1):
            c[i + 1] += c[i] >> b  # floor: c[i] − 2^b·carry ∈ [0, 2^b)
            c[i] &= mask

    norm()
    neg = c[-1] < 0
    sign = None
    if neg.any():
        sign = 1 - 2 * neg.astype(np.int64)  # ±1 (a product: a masked ufunc is much slower)
        for x in c:
            x *= sign
        norm()
    if int(c[-1].max(initial=0)) >= 2 ** (62 - b * (N - 3)):
        return None
    L = c[0] + (c[1] << b)  # < 2^(2b)
    P = c[2].copy()  # |X| = P·2^(2b) + L, P < 2^62
    for i in range(3, N):
        P += c[i] << (b * (i - 2))
    e = np.frexp(P.astype(np.float64))[1].astype(np.int64)  # bit length of P, or one more
    t = np.clip(e + 2 * b - 60, 0, 2 * b)
    W = (P << (2 * b - t)) | (L >> t)  # < 2^60
    W |= (L & ((np.int64(1) << t) - 1)) != 0
    f = np.ldexp(W.astype(np.float64), t.astype(np.int32))
    if sign is not None:
        f *= sign  # exact: f ≠ 0 where X < 0
    return f


_GAPX: dict[tuple[Any, ...], np.ndarray] = {}


def _gap_table(vals: tuple[int, ...], grid: np.ndarray, sden: int, inv_tau: MR) -> np.ndarray:
    """:func:`_gap_weights`'s table of exp(−g/τ) for the gaps ``grid`` as a (2, K + 1) array
    [midpoints; radii] with a last (0, 0) entry, so that one gather fills a whole (key,
    query) array, zeros off the non-top visible keys; memoised by the same key (the values,
    τ's enclosure and the rounding constants: a pure function of them)."""
    key = (vals, sden, float(inv_tau[0]), float(inv_tau[1]), rounding_constants())
    got = _GAPX.get(key)
    if got is None:
        if len(_GAPX) > 4096:
            _GAPX.clear()
        wm, wr = _gap_weights_all(grid, sden, inv_tau)
        got = np.zeros((2, len(grid) + 1))
        got[0, :-1] = wm
        got[1, :-1] = wr
        got.flags.writeable = False
        _GAPX[key] = got
    return got


def _rows_equal(q: np.ndarray) -> bool:
    """hard.rows_alike's test of the queries (every row of every word equals its row 0):
    each row equals the next, over rows laid flat (one comparison without broadcasting)."""
    B, R = q.shape[:2]
    if q.dtype == object or R < 2:
        return R < 2 or bool((q == q[:, :1]).all())
    f = q.reshape(B, -1)
    w = f.shape[1] // R
    return bool((f[:, w:] == f[:, :-w]).all())


_FLAT: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _flat_grid(R: int, B: int) -> tuple[np.ndarray, np.ndarray]:
    """(i·B + b, b) over (R, B), read only, memoised by the shape."""
    got = _FLAT.get((R, B))
    if got is None:
        if len(_FLAT) > 256:
            _FLAT.clear()
        at = np.arange(R * B).reshape(R, B)
        at_b = np.broadcast_to(np.arange(B), (R, B)).copy()
        at.flags.writeable = False
        at_b.flags.writeable = False
        got = _FLAT[(R, B)] = (at, at_b)
    return got


_VISK: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}


def _visibility_keys(vis: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    """A visibility mask (R, T) as full [key, query, word] arrays (T, R, B), bool and float
    (read only), memoised by the mask's value and B: a full array multiplies in one
    contiguous pass, where a broadcast runs numpy's inner loop once per (key, query)."""
    key = (vis.shape, vis.tobytes(), B)
    got = _VISK.get(key)
    if got is None:
        if len(_VISK) > 256:
            _VISK.clear()
        R, T = vis.shape
        vb = np.ascontiguousarray(np.broadcast_to(vis.T[:, :, None], (T, R, B)))
        vf = vb.astype(np.float64)
        vb.flags.writeable = False
        vf.flags.writeable = False
        got = _VISK[key] = (vb, vf)
    return got


def _head_free(tr: HeadTrace, rule: str, inv_tau: MR, hw: dict[str, Any]) -> Cols | None:
    """:func:`_head` of an average head with no δ coming in (δ = 0 before the layer: the
    heads of most tracr programs); None where it does not apply (the caller then runs
    :func:`_head`). The same elementwise operations on the same numbers in the same order,
    so the same bits, laid out for small batches:

    * arrays laid out [key, query, word] (``_head`` has [word, key, query]): a sum over the
      keys adds contiguous blocks, a per-query factor broadcasts over the leading axis, the
      value columns lead too ([column, key, query, word]), and every broadcast keeps the
      words innermost — numpy's inner loops run over the batch, not over a query row (or
      two value columns) at a time, which is most of the cost on small batches;
    * the softmax weights of the non-top visible keys are one gather from the gap table
      (:func:`_gap_table`), zeros elsewhere, instead of a scatter into zeros;
    * tests whose answer is known: every weight midpoint lies in [0, 1] (so Σ|m| = Σm, the
      key sums and 1/Z are finite — ``guard`` changes nothing there — and Z ≥ 1);
    * no δ projections (there is no δ)."""
    s = tr.scores.num
    sden, vden = tr.scores.den, tr.v.den
    if (
        rule != "average"
        or s.dtype != np.int64
        or sden >= 2**400
        or vden >= 2**400
        or not inv_tau[0] > 0  # 1/τ may underflow to 0
    ):
        return None
    B, R, T = tr.top.shape
    if R > 1 and _visibility(tr.visible)[0] and _rows_equal(tr.q.num):
        # a constant query (see _head): compute one row and copy it
        one = _head_free(query_rows(tr, 0, 1), rule, inv_tau, hw)
        if one is None:
            return None
        return {c: (np.repeat(m, R, axis=1), np.repeat(r, R, axis=1)) for c, (m, r) in one.items()}
    top_q = tr.top  # (B, i, j)
    top = np.ascontiguousarray(top_q.transpose(2, 1, 0))  # (j, i, B)
    visb, visf = _visibility_keys(tr.visible, B)
    rest = visb & ~top
    if not rest.any():
        return {}  # every visible key ties at the top and nothing moved: exactly hard
    if s.size and int(np.abs(s).max()) >= 2**61:
        return None
    # the first top key of every query (it holds the row maximum), as flat indices into
    # [key, query, word] arrays: key·R·B + (query·B + word)
    first = np.argmax(top_q, axis=2).T  # (i, B)
    at, at_b = _flat_grid(R, B)
    sk = np.ascontiguousarray(s.transpose(2, 1, 0))  # (j, i, B)
    smax = np.take(sk, first * (R * B) + at)  # (i, B)
    g = smax - sk  # (j, i, B) exact gaps (used where rest)
    gr = g[rest]
    lo = int(gr.min())
    hi = int(gr.max())
    if hi - lo < 256:  # _gap_weights's two tables: a short range, or two values
        tab = _gap_table((lo, hi), np.arange(lo, hi + 1), sden, inv_tau)
        g -= lo
    elif bool(((gr == hi) | (gr == lo)).all()):
        tab = _gap_table((lo, hi, 2), np.array([lo, hi], dtype=np.int64), sden, inv_tau)
        g = g == hi
    else:
        return None
    UW = np.take(tab, np.where(rest, g, tab.shape[1] - 1), axis=1)  # (2, j, i, B)
    uw_m, uw_r = UW[0], UW[1]
    # _sum_keys_x with Σ|m| = Σm (every midpoint ≥ +0) and no guard (the sums are finite)
    sm, sr = seq_sum(UW, 1)
    k = (T + 2) * SUM_U
    ur_r = sr * (1 + k) + sm * k
    nA = top.sum(axis=0).astype(np.float64)  # (i, B) exact small integers
    safe = np.maximum(nA, 1.0)  # nA where nA > 0, else 1
    # Z = add((safe, 0), UR) and recip_raw(Z): Z ≥ 1 is finite, so are 1/Z and its guard
    zm = safe + sm
    zr = ur_r * (1 + WIDEN) + zm * WIDEN  # (0 + r): the same number (r ≥ +0), |zm| = zm
    izm = 1.0 / zm
    izr = zr * izm / (zm - zr) * (1 + WIDEN) ** 2 + izm * WIDEN
    izr = izr / (np.isfinite(zr) & (zm > zr))  # not certainly positive: infinite radius
    topf = top.astype(np.float64)
    mm = sm / safe  # ≥ 0: |mm| = mm
    mean_r = ur_r / safe * (1 + WIDEN) + mm * WIDEN + np.minimum(ur_r, TINY)
    nm, nr = sub((uw_m, uw_r), (mm * topf, mean_r * topf))
    # δα = scale_rows(numer, 1/Z) · visibility, into one stacked array (1/Z > 0: |izm| = izm)
    DA = np.empty((2,) + nm.shape)
    np.multiply(nm, izm, out=DA[0])
    r = np.abs(nm)
    r *= izr
    r += nr * (izm + izr)
    r *= 1 + WIDEN
    r += np.abs(DA[0]) * WIDEN
    np.maximum(r, np.minimum(r * 2.0**600, TINY), out=DA[1])  # floor_rad
    DA *= visf
    if not DA[1].any():
        return {}
    # Σ_j δα_ij (v_j − v_ref(i)), every value column at once (_head's exact columns): the
    # rounding bound of _dot_weight/_dot_exact, [column, key, query, word]
    vn = tr.v.num  # (B, j, E)
    E = vn.shape[-1]
    if not E:
        return {}
    vk = np.ascontiguousarray(vn.transpose(2, 1, 0))  # (E, j, B)
    vref = np.take(vk.reshape(E, T * B), first * B + at_b, axis=1)  # (E, i, B)
    dn = vk[:, :, None, :] - vref[:, None, :, :]  # (E, j, i, B)
    xm = rat_mid(dn, vden)
    tm, tr_ = _exact_col_sums(DA, xm, CONV + 2.0 * TINY * vden, T)
    out: Cols = {c: (tm[c].T, tr_[c].T) for c in range(E)}  # (B, i) views
    if hw["O"] is None:
        return out
    plan = hw.get(("plan", E))
    if plan is None:
        plan = hw[("plan", E)] = lin_plan(out, hw["O"])  # which rows: depends on E only
    if len(plan) < 2:
        return lin(out, hw["O"])
    m, r = lin_stack(out, plan, (E + 3) * SUM_U)  # lin's numbers
    return {a: (m[i], r[i]) for i, (a, _) in enumerate(plan)}


HEAD_FREE_MAX = 1 << 15  # (word, query, key) entries up to which _head_free is used


def head_delta(
    tr: HeadTrace, rule: str, delta: Cols, inv_tau: MR, hw: dict[str, Any], q0: int = 0
) -> Cols:
    """:func:`_head`, by :func:`_head_free` where no δ comes in on a small batch (the same
    bits; on large ones its transposed copies cost more than its shorter loops save)."""
    if not delta and tr.top.size <= HEAD_FREE_MAX:
        got = _head_free(tr, rule, inv_tau, hw)
        if got is not None:
            return got
    return _head(tr, rule, delta, inv_tau, hw, q0)
