"""Soft meaning, certified: softmax at temperature τ(n) in ball arithmetic.

The soft activations are computed as *hard + δ*, where the hard part is the exact
trace from :mod:`exactattn.engine.hard` and δ is a python-flint ``arb_mat`` (or ``None``
when it is exactly zero). Why: the quantity we report is δ itself, and the error
of a well-behaved model is tiny (e^-1000 is common). Computing soft and hard
separately and subtracting would need thousands of bits; computing δ directly from

    δα_j = (u_j − (U + R)/|A|) / Z      for j in the argmax set A (average-hard)
    δα_j = w_j / Z                      for visible j outside A

with u_j = expm1(δs_j/τ), w_j = exp((s_j − max s + δs_j)/τ), U = Σ_A u, R = Σ w,
Z = |A| + U + R, keeps full relative accuracy at ordinary precision. A softmax
that equals the hard average exactly (all visible scores tie, δ = 0) gives δ = 0
exactly, so exact agreements are decided, not left undecided.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flint import arb, arb_mat, ctx, fmpq, fmpz_mat

from exactattn.engine.hard import CompiledFFN, CompiledHead, CompiledModel, HardBatch, HeadTrace
from exactattn.engine.ratarray import RatArray

_ZERO = arb(0)
DALPHA_CELLS = 1 << 20  # the δα memo's bound (WeightCache.dalpha), in T² cells


def rat_to_arb_mat(num: np.ndarray, den: int) -> arb_mat:
    """An exact 2-D rational array as an arb matrix (exact when den is a power of 2)."""
    r, c = num.shape
    m = arb_mat(fmpz_mat(r, c, [int(x) for x in num.reshape(-1)]))
    if den != 1:
        m = m / arb(den)
    return m


def _add(a: arb_mat | None, b: arb_mat | None) -> arb_mat | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _is_zero_mat(m: arb_mat) -> bool:
    return all(x.is_zero() for x in m.entries())


class WeightCache:
    """Transposed weights as arb matrices, per precision (converted once)."""

    def __init__(self, cm: CompiledModel) -> None:
        self.cm = cm
        self._cache: dict[tuple[int, int, str, int], arb_mat] = {}
        # δα of a head whose input δ is exactly zero, by everything it is a function of
        # (_soft_head): words of one length repeat few score patterns
        self.dalpha: dict[tuple[object, ...], tuple[arb, arb_mat | None]] = {}
        self.dalpha_cells = 0  # T² summed over its entries: the memo's size, bounded

    def get(self, layer: int, idx: int, which: str, ra: RatArray) -> arb_mat:
        key = (layer, idx, which, ctx.prec)
        m = self._cache.get(key)
        if m is None:
            m = rat_to_arb_mat(ra.num.T.copy(), ra.den)
            self._cache[key] = m
        return m


@dataclass
class SoftTrace:
    """δ after each layer for one input (None = exactly zero), and the soft weights."""

    deltas: list[arb_mat | None]  # one per layer (after it)
    alphas: list[list[list[list[arb]] | None] | None]  # per layer, per head: soft α (T×T)


def run_soft(
    cm: CompiledModel,
    hb: HardBatch,
    b: int,
    taus: list[list[arb] | None],
    weights: WeightCache,
    keep_alphas: bool = False,
) -> SoftTrace:
    """δ = soft − hard after every layer, for word `b` of the batch, at ctx.prec."""
    delta: arb_mat | None = None
    deltas: list[arb_mat | None] = []
    alphas: list[list[list[list[arb]] | None] | None] = []
    for li, (layer, lt) in enumerate(zip(cm.layers, hb.layers, strict=True)):
        if isinstance(layer, list):
            assert lt.heads is not None
            total = delta
            head_alphas: list[list[list[arb]] | None] = []
            layer_taus = taus[li]
            assert layer_taus is not None
            for hi, (ch, tr) in enumerate(zip(layer, lt.heads, strict=True)):
                contrib, alpha = _soft_head(
                    ch, tr, b, delta, layer_taus[hi], weights, li, hi, keep_alphas
                )
                total = _add(total, contrib)
                head_alphas.append(alpha)
            delta = total
            alphas.append(head_alphas)
        else:
            assert isinstance(layer, CompiledFFN) and lt.pre is not None
            delta = _soft_ffn(layer, lt.pre, b, delta, weights, li)
            alphas.append(None)
        deltas.append(delta)
    return SoftTrace(deltas=deltas, alphas=alphas)


def _soft_head(
    ch: CompiledHead,
    tr: HeadTrace,
    b: int,
    delta: arb_mat | None,
    tau: arb,
    weights: WeightCache,
    li: int,
    hi: int,
    keep_alpha: bool,
) -> tuple[arb_mat | None, list[list[arb]] | None]:
    T = tr.visible.shape[0]
    vis = tr.visible
    top = tr.top[b].tolist()
    support = tr.support[b]
    sup_l = support.tolist()
    s_num = tr.scores.num[b]
    s_l = s_num.tolist()
    s_den = tr.scores.den
    vis_lists = _visible_lists(vis)
    if delta is not None:
        dq = delta * weights.get(li, hi, "Q", ch.Q)
        dk = delta * weights.get(li, hi, "K", ch.K)
        dv = delta * weights.get(li, hi, "V", ch.V)
        q = rat_to_arb_mat(tr.q.num[b], tr.q.den)
        k = rat_to_arb_mat(tr.k.num[b], tr.k.den)
        ds = dq * k.transpose() + q * dk.transpose() + dq * dk.transpose()
        ds_e = ds.entries()
    else:
        dv = None
        ds_e = None
    # with δ = 0 in, δα is a function of this word's scores, argmax and support rows, the
    # mask, the rule, τ and the precision alone: computed once per pattern (the same balls)
    memo = None
    if ds_e is None and not keep_alpha and s_num.dtype != object:
        memo = (
            li,
            hi,
            ctx.prec,
            id(tau),
            T,
            s_den,
            s_num.dtype.str,
            s_num.tobytes(),
            tr.top[b].tobytes(),
            support.tobytes(),
            vis.tobytes(),
        )
        got = weights.dalpha.get(memo)
        if got is not None and got[0] is tau:  # it holds τ, so id(τ) is not reused
            if got[1] is None:
                return None, None
            hit = got[1] * rat_to_arb_mat(tr.v.num[b], tr.v.den)
            return (hit if ch.O is None else hit * weights.get(li, hi, "O", ch.O)), None
    inv_tau = 1 / tau
    exp_by_gap: dict[int, arb] = {}
    dalpha_rows: list[list[arb]] = []
    any_nonzero = False
    alpha_rows: list[list[arb]] | None = [] if keep_alpha else None
    for i in range(T):
        row = [_ZERO] * T
        vis_i = vis_lists[i]
        top_i = top[i]
        if not vis_i:
            dalpha_rows.append(row)
            if alpha_rows is not None:
                alpha_rows.append(row)
            continue
        A = [j for j in vis_i if top_i[j]]
        rest = [j for j in vis_i if not top_i[j]]
        if ds_e is None and not rest and (ch.head.hard == "average" or len(A) == 1):
            dalpha_rows.append(row)  # every visible key ties at the top, δ = 0: exactly hard
            if alpha_rows is not None:
                alpha_rows.append(_hard_row(vis_i, support[i], int(tr.count[b, i]), T, row))
            continue
        smax = int(s_l[i][A[0]])
        if ds_e is not None and not all((ds_e[i * T + j] * inv_tau).abs_upper() < 1 for j in vis_i):
            # large perturbation: the δ formulas lose their point (and may overflow);
            # compute the soft weights directly, shifted by a midpoint for stability
            row = _direct_dalpha(
                ch.head.hard,
                vis_i,
                A,
                support[i],
                int(tr.count[b, i]),
                s_num[i],
                s_den,
                ds_e[i * T : (i + 1) * T],
                inv_tau,
                T,
            )
            if any(not x.is_zero() for x in row):
                any_nonzero = True
            dalpha_rows.append(row)
            if alpha_rows is not None:
                alpha_rows.append(_hard_row(vis_i, support[i], int(tr.count[b, i]), T, row))
            continue
        u = {}
        for j in A:
            if ds_e is None:
                u[j] = arb(0)
            else:
                dsj = ds_e[i * T + j]
                u[j] = (dsj * inv_tau).expm1() if not dsj.is_zero() else arb(0)
        w = {}
        for j in rest:
            gap = smax - int(s_l[i][j])
            if ds_e is None:
                # e^{-g/τ} depends on the gap alone: long inputs repeat few gaps
                wj = exp_by_gap.get(gap)
                if wj is None:
                    wj = exp_by_gap[gap] = (-arb(fmpq(gap, s_den)) * inv_tau).exp()
                w[j] = wj
                continue
            e = -arb(fmpq(gap, s_den)) + ds_e[i * T + j]
            w[j] = (e * inv_tau).exp()
        U = sum(u.values(), arb(0))
        R = sum(w.values(), arb(0))
        nA = len(A)
        Z = nA + U + R
        if ch.head.hard == "average":
            if ds_e is None:  # every u_j = 0: one value for the whole argmax set
                shared = -((U + R) / nA) / Z
                for j in A:
                    row[j] = shared
            else:
                for j in A:
                    row[j] = (u[j] - (U + R) / nA) / Z
        else:
            kstar = next(j for j in A if sup_l[i][j])
            for j in A:
                row[j] = (u[j] - (nA - 1) - U - R) / Z if j == kstar else (1 + u[j]) / Z
        by_id: dict[int, arb] = {}  # w_j shared by equal gaps: divide once
        for j in rest:
            wj = w[j]
            q = by_id.get(id(wj))
            if q is None:
                q = by_id[id(wj)] = wj / Z
            row[j] = q
        if not any_nonzero and any(not x.is_zero() for x in row):
            any_nonzero = True
        dalpha_rows.append(row)
        if alpha_rows is not None:
            alpha_rows.append(_hard_row(vis_i, support[i], int(tr.count[b, i]), T, row))
    out: arb_mat | None = None
    if dv is not None:
        # Σ_j α_hard_ij δv_j: the hard weights applied to the value perturbation
        cnt = tr.count[b]
        ah = arb_mat(T, T)
        for i in range(T):
            if cnt[i]:
                inv = arb(1) / int(cnt[i])
                for j in range(T):
                    if support[i, j]:
                        ah[i, j] = inv
        out = ah * dv
    da = arb_mat(dalpha_rows) if any_nonzero else None
    if memo is not None:
        # bounded in T² cells (a 48-byte ball and ~11 key bytes each): 2^20 cells, ~60 MB;
        # a long run meets many patterns, a long word has large ones
        if weights.dalpha_cells + T * T > DALPHA_CELLS:
            weights.dalpha.clear()
            weights.dalpha_cells = 0
        if T * T <= DALPHA_CELLS:
            weights.dalpha[memo] = (tau, da)
            weights.dalpha_cells += T * T
    if da is not None:
        v = rat_to_arb_mat(tr.v.num[b], tr.v.den)
        vv = v if dv is None else v + dv
        out = _add(out, da * vv)
    if out is not None and ch.O is not None:
        out = out * weights.get(li, hi, "O", ch.O)
    return out, alpha_rows


_VIS_CACHE: dict[bytes, list[list[int]]] = {}


def _visible_lists(vis: np.ndarray) -> list[list[int]]:
    """The visible keys of every query, as lists (cached per mask matrix)."""
    key = vis.tobytes() + bytes([vis.shape[0] % 256])
    got = _VIS_CACHE.get(key)
    if got is None:
        got = _VIS_CACHE[key] = [np.nonzero(row)[0].tolist() for row in vis]
    return got


def _hard_row(
    vis_i: list[int], support: np.ndarray, cnt: int, T: int, drow: list[arb]
) -> list[arb]:
    """Soft weights = hard weights + δα (for display)."""
    hard_w = [arb(0)] * T
    for j in vis_i:
        if support[j]:
            hard_w[j] = arb(1) / cnt
    return [hard_w[j] + drow[j] for j in range(T)]


def _direct_dalpha(
    rule: str,
    vis_i: list[int],
    A: list[int],
    support: np.ndarray,
    cnt: int,
    s_row: np.ndarray,
    s_den: int,
    ds_row: list[arb],
    inv_tau: arb,
    T: int,
) -> list[arb]:
    """δα = softmax − hard weights, computed directly (for large score perturbations)."""
    es = {j: (arb(fmpq(int(s_row[j]), s_den)) + ds_row[j]) * inv_tau for j in vis_i}
    shift = max(es[j].mid() for j in vis_i)
    ws = {j: (es[j] - shift).exp() for j in vis_i}
    Z = sum(ws.values(), arb(0))
    row = [arb(0)] * T
    for j in vis_i:
        h = arb(1) / cnt if support[j] else arb(0)
        row[j] = ws[j] / Z - h
    del rule, A
    return row


def _soft_ffn(
    layer: CompiledFFN,
    pre: list[RatArray],
    b: int,
    delta: arb_mat | None,
    weights: WeightCache,
    li: int,
) -> arb_mat | None:
    if delta is None:
        return None
    dh = delta
    for k, (w, _bias) in enumerate(layer.hidden):
        dz = dh * weights.get(li, k, "W", w)
        z = pre[k]
        rows, cols = z.num.shape[1:]
        zl = z.num[b].ravel().tolist()
        dze = dz.entries()
        zcache: dict[int, arb] = {}
        out = []
        for zi, d in zip(zl, dze, strict=True):
            if d.is_zero():
                out.append(_ZERO)
                continue
            zv = zcache.get(zi)
            if zv is None:
                zv = zcache[zi] = arb(fmpq(int(zi), z.den))
            val = zv + d
            if zi > 0 and val > 0:
                out.append(d)
            elif zi < 0 and val < 0:
                out.append(_ZERO)
            else:
                out.append(val.nonnegative_part() - (zv if zi > 0 else 0))
        dh = arb_mat(rows, cols, out)
    wo, _bo = layer.out
    res = dh * weights.get(li, -1, "W", wo)
    return delta + res
