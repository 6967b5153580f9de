"""The feed-forward pass of the float tiers: δ through the ReLUs of a layer, for a whole batch.

Tightness (so that words settle, not for soundness): every hidden unit's δ is tracked as an
exact *integer* combination of the input δ columns while its ReLU is certainly in its linear
(or zero) range, so the "rounding gadgets" of the constructions, which subtract a coordinate
and add it back, give exactly 0 instead of ± the width of δ (:func:`ffn_linear`); where its
integers could overflow, :func:`ffn_generic` goes column by column. Every sum is the fixed-
order sum of :mod:`.interval`, so the bits do not depend on how the units are grouped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.cascade.interval import (
    CONV,
    MR,
    TINY,
    WIDEN,
    Cols,
    add,
    finite,
    from_rat,
    mr_relu,
    mul,
    stack_floats,
    sub,
)
from exactattn.engine.cascade.weights import IntFFN, Sparse, add_cols, lin
from exactattn.engine.ratarray import RatArray


def ffn_generic(pre: PreCols, delta: Cols, hidden: list[Sparse], out_rows: Sparse) -> Cols:
    """A feed-forward layer's δ column by column (when ffn_linear's integers would overflow)."""
    dh = delta
    for k, rows in enumerate(hidden):
        dz = lin(dh, rows)
        nxt: Cols = {}
        for c, d in dz.items():
            zpos, zneg, zm = pre(k, c)
            val = add(zm, d)
            rz = (np.where(zpos, zm[0], 0.0), np.where(zpos, zm[1], 0.0))
            gen = sub(mr_relu(val), rz)
            fin = finite(val)  # an overflowed sign test cannot tell
            keep = ~zneg & fin & (val[0] >= val[1])
            kill = (~zpos & fin & (-val[0] >= val[1])) | (d[1] == 0)
            m = np.where(keep, d[0], np.where(kill, 0.0, gen[0]))
            r = np.where(keep, d[1], np.where(kill, 0.0, gen[1]))
            nxt[c] = (m, r)
        dh = nxt
    return add_cols(delta, lin(dh, out_rows))


PreCols = Callable[[int, int], tuple[np.ndarray, np.ndarray, MR]]
# (hidden layer k, unit h) -> (z > 0, z < 0, enclosure of z): the exact pre-activations of a
# feed-forward layer, however they are stored (one denominator here, per-row in longsoft).
# It may also have ``block(k, units)``: the same for many units at once, unit-major.


class _RatPre:
    """PreCols of pre-activations stored as RatArrays (one denominator each): converted once
    per hidden layer (elementwise: the same bits as unit by unit) and kept unit-major, so
    that :meth:`block` gathers the units a feed-forward layer needs in one operation."""

    def __init__(self, pre: list[RatArray]) -> None:
        self.pre = pre
        self.full: dict[int, tuple[np.ndarray, np.ndarray, MR]] = {}

    def _get(self, k: int) -> tuple[np.ndarray, np.ndarray, MR]:
        got = self.full.get(k)
        if got is None:
            zn = self.pre[k].num
            m, r = from_rat(zn, self.pre[k].den)
            ax = (zn.ndim - 1,) + tuple(range(zn.ndim - 1))  # unit axis first (views)
            got = self.full[k] = (
                np.array(zn > 0, bool).transpose(ax),
                np.array(zn < 0, bool).transpose(ax),
                (m.transpose(ax), r.transpose(ax)),
            )
        return got

    def __call__(self, k: int, h: int) -> tuple[np.ndarray, np.ndarray, MR]:
        zpos, zneg, (m, r) = self._get(k)
        return zpos[h], zneg[h], (m[h], r[h])

    def block(self, k: int, units: np.ndarray) -> tuple[np.ndarray, np.ndarray, MR]:
        zpos, zneg, (m, r) = self._get(k)
        return zpos[units], zneg[units], (m[units], r[units])


def rat_pre(pre: list[RatArray]) -> PreCols:
    """PreCols of pre-activations stored as RatArrays (one denominator each)."""
    return _RatPre(pre)


def _pre_block(pre: PreCols, k: int, units: np.ndarray) -> tuple[np.ndarray, np.ndarray, MR]:
    """``pre`` of many units at once, unit-major (stacked when ``pre`` has no ``block``)."""
    block = getattr(pre, "block", None)
    if block is not None:
        return block(k, units)  # type: ignore[no-any-return]
    got = [pre(k, int(h)) for h in units]
    return (
        np.stack([g[0] for g in got]),
        np.stack([g[1] for g in got]),
        (np.stack([g[2][0] for g in got]), np.stack([g[2][1] for g in got])),
    )


@dataclass
class _Terms:
    """Integer combinations under construction: entry t = Σ w·E[e] over its terms (t, e, w);
    every entry belongs to one δ column, and a unit lists its entries in the order their
    columns first appear (the order of the fixed-order sum :func:`_fold` computes)."""

    t: list[int]
    e: list[int]
    w: list[int]
    col: list[int]  # δ column (position) of every new entry
    plan: Any = None  # combine's indices, once the terms are complete (see combine)
    steps: Any = None  # the same as per-term steps (see combine)

    def add(self, seen: dict[int, int], entries: list[int], w: int, ecol: list[int]) -> None:
        """w·(an input unit's entries) into the unit being built (``seen``: column -> entry)."""
        for e in entries:
            p = ecol[e]
            t = seen.get(p)
            if t is None:
                t = seen[p] = len(self.col)
                self.col.append(p)
            self.t.append(t)
            self.e.append(e)
            self.w.append(w)

    def combine(self, E: np.ndarray) -> np.ndarray:
        """The new entries' integer arrays (exact: every |sum| < 2^52 by IntFFN.ok)."""
        extra = (1,) * (E.ndim - 1)
        plan = self.plan
        if plan is None:
            plan = self.plan = self._plan()
        e, w, starts = plan
        if starts is None:  # one term per entry, in order (the usual case)
            return E[e] * w.reshape((-1,) + extra)
        # terms grouped by entry (integer sums: any order is exact): every entry's first
        # term, then the k-th terms of the entries that have one, added in place (most
        # entries have one term: no product array of every term, no reduceat)
        steps = self.steps
        if steps is None:
            steps = self.steps = self._steps(e, w, starts)
        (e0, w0), rest = steps[0], steps[1:]
        out = E[e0]
        out *= w0.reshape((-1,) + extra)
        for sel, ek, wk in rest:
            t = E[ek]
            t *= wk.reshape((-1,) + extra)
            out[sel] += t
        return out

    @staticmethod
    def _steps(e: list[int], w: np.ndarray, starts: list[int]) -> list[Any]:
        """combine's plan as steps: (first terms' entries, weights), then per k ≥ 1 (the
        entries with a k-th term, that term's entries, weights)."""
        ends = starts[1:] + [len(e)]
        cnt = [b - a for a, b in zip(starts, ends, strict=True)]
        steps: list[Any] = [([e[a] for a in starts], w[starts])]
        for k in range(1, max(cnt)):
            sel = [t for t, c in enumerate(cnt) if c > k]
            at = [starts[t] + k for t in sel]
            steps.append((np.asarray(sel, np.intp), [e[a] for a in at], w[at]))
        return steps

    def _plan(self) -> tuple[list[int], np.ndarray, list[int] | None]:
        """combine's gather indices and weights (terms are only added before it)."""
        n = len(self.col)
        if self.t == list(range(n)):
            return list(self.e), np.asarray(self.w, np.int64), None
        order = sorted(range(len(self.t)), key=self.t.__getitem__)
        ts = [self.t[i] for i in order]
        w = np.asarray([self.w[i] for i in order], np.int64)
        starts = [i for i in range(len(ts)) if i == 0 or ts[i] != ts[i - 1]]
        return [self.e[i] for i in order], w, starts


def _any_rows(x: np.ndarray) -> list[bool]:
    """Per entry of axis 0: is any element nonzero."""
    return x.reshape(len(x), -1).any(axis=1).tolist() if len(x) else []


def _scaled_res(rs: MR, w: int, den: int) -> MR:
    """A residual enclosure times w/den (residuals hold values, not numerators)."""
    rm, rr = rs
    f = float(Fraction(w, den))
    return rm * f, rr * abs(f) * (1 + WIDEN) + np.abs(rm * f) * WIDEN


def _gather(
    rows: list[list[tuple[int, int]]],
    firsts: list[int],
    lin_of: dict[int, list[int]],
    res_of: dict[int, MR],
    E: np.ndarray,
    ecol: list[int],
    wden: int,
    memo: dict[Any, Any] | None = None,
    key: Any = None,
) -> tuple[list[int], list[list[int]], list[MR | None], np.ndarray, np.ndarray]:
    """The units Σ_i w_i·(input unit i) of a layer (``rows``; ``firsts``: an entry of E to put
    first with weight 1, or −1): their integer entries, exactly, and residuals; returns the
    active units (a nonzero entry or a residual), their entries in order, their residuals,
    the entry arrays and the entries' δ columns.

    ``memo`` (with no residuals): a dict owned by the layer's weights, keyed by ``key``,
    which must determine ``rows``, ``firsts``, ``lin_of`` and ``ecol``; it keeps the
    combinations' structure (which entries, weights and columns: no arrays of a batch), so
    only the integer products are computed again."""
    if memo is not None and not res_of:
        got = memo.get(key)
        if got is None:
            if len(memo) > 256:
                memo.clear()
            t = _Terms([], [], [], [])
            cands0: list[list[int]] = []
            for row, first in zip(rows, firsts, strict=True):
                seen0: dict[int, int] = {}
                if first >= 0:
                    t.add(seen0, [first], 1, ecol)
                for i, w in row:
                    li = lin_of.get(i)
                    if li is not None:
                        t.add(seen0, li, w, ecol)
                cands0.append(list(seen0.values()))
            got = memo[key] = (t, cands0, np.asarray(t.col, np.intp))
        t, cands0, col_arr = got
        E2 = t.combine(E) if t.col else E[:0]
        nz = _any_rows(E2)
        act = []
        orders = []
        for a, cand in enumerate(cands0):
            order = [x for x in cand if nz[x]]
            if order:
                act.append(a)
                orders.append(order)
        return act, orders, [None] * len(act), E2, col_arr
    terms = _Terms([], [], [], [])
    cands: list[list[int]] = []
    ress: list[MR | None] = []
    tt, te, tw, tcol = terms.t, terms.e, terms.w, terms.col
    for row, first in zip(rows, firsts, strict=True):
        seen: dict[int, int] = {}
        if first >= 0:
            terms.add(seen, [first], 1, ecol)
        res: MR | None = None
        for i, w in row:
            li = lin_of.get(i)
            if li is not None:  # terms.add, inlined (this loop is the layer's Python cost)
                for e in li:
                    p = ecol[e]
                    t_ = seen.get(p)
                    if t_ is None:
                        t_ = seen[p] = len(tcol)
                        tcol.append(p)
                    tt.append(t_)
                    te.append(e)
                    tw.append(w)
            if res_of:
                rs = res_of.get(i)
                if rs is not None:
                    t = _scaled_res(rs, w, wden)
                    res = t if res is None else add(res, t)
        cands.append(list(seen.values()))
        ress.append(res)
    E2 = terms.combine(E) if terms.col else E[:0]
    nz = _any_rows(E2)  # an entry that is zero for every word is dropped (it would widen)
    act: list[int] = []
    orders: list[list[int]] = []
    act_res: list[MR | None] = []
    for a, (cand, res) in enumerate(zip(cands, ress, strict=True)):
        order = [t for t in cand if nz[t]]
        if order or res is not None:
            act.append(a)
            orders.append(order)
            act_res.append(res)
    return act, orders, act_res, E2, np.asarray(terms.col, np.intp)


def _fold(
    res: list[MR | None], orders: list[list[int]], E: np.ndarray, ecol: np.ndarray, den: int, D: MR
) -> MR:
    """Per unit a: res[a] (if any) + Σ_t (E[t]/den)·δ[col(t)] over its entries t in order,
    for every unit at once: step j adds every unit's j-th term by the same elementwise
    :func:`add` and :func:`mul` as a unit-by-unit fold, so the bits are the same.

    The units are taken longest first, so that the units with a j-th term are a prefix
    (views, added in place: no gathers and scatters), and put back in order at the end."""
    na = len(orders)
    shape = D[0].shape[1:]
    if den >= 2**400 or not E.size:
        return _fold_plain(res, orders, E, ecol, den, D)
    lens = [len(o) for o in orders]
    perm = sorted(range(na), key=lambda a: -lens[a])  # stable
    m = np.empty((na,) + shape)
    r = np.empty((na,) + shape)
    for i, a in enumerate(perm):
        if not lens[a]:
            ra = res[a]
            assert ra is not None
            m[i] = ra[0]
            r[i] = ra[1]
    with_res = [i for i, a in enumerate(perm) if lens[a] and res[a] is not None]
    for j in range(max(lens)):
        nj = sum(1 for x in lens if x > j)
        ent = [orders[a][j] for a in perm[:nj]]
        cp = ecol[ent]
        Ej = E if ent == list(range(len(E))) else E[ent]
        if len(cp) == len(D[0]) and cp.tolist() == list(range(len(cp))):
            Dj = D  # every δ column, in order: no gather (the same elements)
        else:
            Dj = (D[0][cp], D[1][cp])
        if j == 0:
            _ratmul_into(Ej, den, Dj, m[:nj], r[:nj])
            for i in with_res:  # res + the first term, as add(res, term)
                ra = res[perm[i]]
                assert ra is not None
                m[i], r[i] = add(ra, (m[i], r[i]))
        else:
            tm = np.empty((nj,) + shape)
            tr = np.empty((nj,) + shape)
            _ratmul_into(Ej, den, Dj, tm, tr)
            _add_into(m[:nj], r[:nj], tm, tr)
    if perm != list(range(na)):
        inv = np.empty(na, np.intp)
        inv[perm] = np.arange(na)
        m, r = m[inv], r[inv]
    return m, r


def _ratmul_into(Ej: np.ndarray, den: int, Dj: MR, m: np.ndarray, r: np.ndarray) -> None:
    """mul(from_rat(Ej, den), Dj) into m, r (den < 2^400): the same operations on the same
    operands (× and + commute exactly), without temporaries."""
    am = Ej.astype(np.float64)
    if den & (den - 1) == 0 and den < 2**900:
        am *= 1.0 / den
    else:
        am /= float(den)
    bm, br = np.broadcast_to(Dj[0], m.shape), np.broadcast_to(Dj[1], m.shape)
    aam = np.abs(np.broadcast_to(am, m.shape))
    ar = aam * (CONV + 2.0 * TINY * den)  # from_rat's radius
    np.multiply(am, bm, out=m)
    np.multiply(aam, br, out=r)  # |am|·br
    t = np.abs(bm)
    t *= ar
    r += t  # + ar·|bm|
    np.multiply(ar, br, out=t)
    r += t  # + ar·br
    r *= 1 + WIDEN
    np.abs(m, out=t)
    t *= WIDEN
    r += t
    np.minimum(ar, br, out=t)  # _nzfloor
    np.minimum(t, TINY, out=t)
    r += t


def _add_into(m: np.ndarray, r: np.ndarray, bm: np.ndarray, br: np.ndarray) -> None:
    """(m, r) = add((m, r), (bm, br)) in place (the same operations)."""
    m += bm
    r += br
    r *= 1 + WIDEN
    t = np.abs(m)
    t *= WIDEN
    r += t


def _fold_plain(
    res: list[MR | None], orders: list[list[int]], E: np.ndarray, ecol: np.ndarray, den: int, D: MR
) -> MR:
    """:func:`_fold` with gathers (and any denominator)."""
    na = len(orders)
    shape = D[0].shape[1:]
    have = [r is not None for r in res]
    m = np.empty((na,) + shape)
    r = np.empty((na,) + shape)
    for a, ra in enumerate(res):
        if ra is not None:
            m[a] = ra[0]
            r[a] = ra[1]
    for j in range(max(len(o) for o in orders)):
        sel = [a for a in range(na) if len(orders[a]) > j]
        ent = [orders[a][j] for a in sel]
        cp = ecol[ent]
        Ej = E if ent == list(range(len(E))) else E[ent]  # every entry, in order: no gather
        if len(cp) == len(D[0]) and cp.tolist() == list(range(len(cp))):
            Dj = D  # every δ column, in order: no gather (the same elements)
        else:
            Dj = (D[0][cp], D[1][cp])
        tm, tr = mul(from_rat(Ej, den), Dj)
        old = [i for i, a in enumerate(sel) if have[a]]
        if not old and len(sel) == na:
            m, r = tm, tr
        elif len(old) == na:  # every unit has a sum and a j-th term: no gathers
            m, r = add((m, r), (tm, tr))
        elif not old:
            m[sel] = tm
            r[sel] = tr
        else:
            sa = [sel[i] for i in old]
            m[sa], r[sa] = add((m[sa], r[sa]), (tm[old], tr[old]))
            new = [i for i, a in enumerate(sel) if not have[a]]
            if new:
                sn = [sel[i] for i in new]
                m[sn] = tm[new]
                r[sn] = tr[new]
        for a in sel:
            have[a] = True
    return m, r


def ffn_linear(pre: PreCols, delta: Cols, ints: IntFFN, shape: tuple[int, ...]) -> Cols:
    """A feed-forward layer, tracking δ of every hidden unit as an exact integer
    combination of the input δ columns (plus an enclosure where a ReLU is undecided).

    Why: constructions subtract a coordinate and add it back through ReLUs in their
    linear range ("rounding gadgets"); interval arithmetic alone would turn δ − δ = 0
    into ± the width of δ. With exact coefficients it is exactly 0.

    All units of a hidden layer are computed at once, unit-major: the integer coefficients
    exactly, each unit's sum in its fixed order (:func:`_fold`), the ReLU tests elementwise —
    the numbers of a unit-by-unit loop bit for bit, in a few dozen numpy operations per
    layer instead of ~15 per unit. A unit keeps a δ column's coefficient only where it is
    nonzero for some word (a zero term would still widen a radius by an ulp).
    """
    if not delta:
        return {}
    cols = sorted(delta)
    C = len(cols)
    D = (stack_floats([delta[c][0] for c in cols]), stack_floats([delta[c][1] for c in cols]))
    E = np.ones((C,) + shape, dtype=np.int64)  # integer coefficient entries, over den
    ecol = list(range(C))  # the δ column (position in cols) of every entry
    lin_of: dict[int, list[int]] = {c: [p] for p, c in enumerate(cols)}  # unit -> entries
    res_of: dict[int, MR] = {}  # unit -> enclosure where its ReLU was undecided
    den = 1
    plans = getattr(ints, "plans", None) if math.prod(shape) else None
    for k, (rows, wden) in enumerate(ints.hidden):
        if k == 0 and plans is not None:
            # every entry is a constant w (ones times a weight): kept as (n, 1, …) arrays
            # that broadcast to the same numbers, and the whole plan once per column set
            got = plans.get(tuple(cols))
            if got is None:
                if len(plans) > 256:
                    plans.clear()
                E1 = np.ones((C,) + (1,) * len(shape), dtype=np.int64)
                got = plans[tuple(cols)] = _gather(
                    rows, [-1] * len(rows), lin_of, res_of, E1, ecol, wden
                )
            act, orders, act_res, E2, col2 = got
        else:
            memo = plans if plans is not None and not res_of else None
            key = None
            if memo is not None:
                key = ("h", k, tuple(ecol), tuple((i, tuple(v)) for i, v in lin_of.items()))
            act, orders, act_res, E2, col2 = _gather(
                rows, [-1] * len(rows), lin_of, res_of, E, ecol, wden, memo, key
            )
        den *= wden
        lin_of, res_of = {}, {}
        if not act:
            E, ecol = np.zeros((0,) + shape, np.int64), []
            continue
        dz = _fold(act_res, orders, E2, col2, den, D)
        na = len(act)
        zpos, zneg, zm = _pre_block(pre, k, np.asarray(act, np.intp))
        val = add(zm, dz)
        # relu(z + d) − relu(z) is d when z ≥ 0 and z + d ≥ 0, 0 when both are ≤ 0
        fin = finite(val)  # an overflowed sign test cannot tell
        keep = ~zneg & fin & (val[0] >= val[1])
        kill = (~zpos & fin & (-val[0] >= val[1])) | (dz[1] == 0)
        gen_mask = ~keep & ~kill
        # the coefficients where the ReLU certainly keeps its input
        ents = [t for o in orders for t in o]
        owner = [a for a, o in enumerate(orders) for _ in o]
        E3 = np.where(keep[owner], E2[ents], 0)
        nz3 = _any_rows(E3)
        kept: list[int] = []
        pos = 0
        for a, o in enumerate(orders):
            mine = [pos + i for i in range(len(o)) if nz3[pos + i]]
            pos += len(o)
            if mine:
                lin_of[act[a]] = list(range(len(kept), len(kept) + len(mine)))
                kept.extend(mine)
        E = E3[kept]
        ecol = [int(col2[ents[i]]) for i in kept]
        # the residual: res where kept, relu(z + d) − relu(z) where undecided
        with_res = [a for a in range(na) if act_res[a] is not None]
        if not with_res and not gen_mask.any():
            continue
        r_m = np.zeros((na,) + shape)
        r_r = np.zeros((na,) + shape)
        if with_res:
            for a in with_res:
                rs = act_res[a]
                assert rs is not None
                r_m[a], r_r[a] = rs
            r_m = np.where(keep, r_m, 0.0)
            r_r = np.where(keep, r_r, 0.0)
        if gen_mask.any():
            rz = (np.where(zpos, zm[0], 0.0), np.where(zpos, zm[1], 0.0))
            gen = sub(mr_relu(val), rz)
            r_m = np.where(gen_mask, gen[0], r_m)
            r_r = np.where(gen_mask, gen[1], r_r)
        has = _any_rows(r_r)
        res_of = {act[a]: (r_m[a], r_r[a]) for a in range(na) if has[a]}
    # out[a] = δ[a] + Σ_h Wo[a, h]·(hidden δ_h), over one denominator
    dt = den * ints.out_den
    targets = sorted(set(delta) | {a for a, row in enumerate(ints.out) if row})
    pos_of = {c: p for p, c in enumerate(cols)}

    def out_terms(E: np.ndarray, ecol: list[int], idshape: tuple[int, ...]) -> Any:
        base = len(ecol)
        E_out = np.concatenate([E, np.full((C,) + idshape, dt, np.int64)])  # δ[a]·dt terms
        firsts = [base + pos_of[a] if a in pos_of else -1 for a in targets]
        rows = [ints.out[a] for a in targets]
        memo = plans if plans is not None and not res_of else None
        key = None
        if memo is not None:  # targets and firsts follow from cols
            key = ("o", tuple(cols), tuple(ecol), tuple((i, tuple(v)) for i, v in lin_of.items()))
        return _gather(
            rows, firsts, lin_of, res_of, E_out, ecol + list(range(C)), ints.out_den, memo, key
        )

    if plans is not None and not lin_of and not res_of:
        # every hidden δ vanished (or never started): the layer passes δ through, with
        # constant coefficients — planned once per set of columns, like the first layer
        key = ("out",) + tuple(cols)
        got = plans.get(key)
        if got is None:
            got = plans[key] = out_terms(
                E[:0].reshape((0,) + (1,) * len(shape)), [], (1,) * len(shape)
            )
        act, orders, act_res, E2, col2 = got
    else:
        act, orders, act_res, E2, col2 = out_terms(E, ecol, shape)
    if not act:
        return {}
    m, r = _fold(act_res, orders, E2, col2, dt, D)
    return {targets[a]: (m[i], r[i]) for i, a in enumerate(act)}
