"""What a tier's δ decides: per-layer error ends, their tightness, ε ≤ 1, and the read-out.

:func:`finish` turns the last layer's δ and every layer's error enclosures into a
:class:`~exactattn.engine.cascade.batch.FloatBatch` (the float64, centred and double-double
tiers all end here): a word is settled when every reported error meets the reporting accuracy
(1e-6 relative, or [0, ≤ 1e-40]), the ε ≤ 1 comparisons before the last layer are decided and
the read-out (accept, argmax labels, value within tolerance) is decided. Every comparison reads
exact endpoints of finite enclosures; anything else is "cannot tell" (:mod:`.interval`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from exactattn.engine.cascade.batch import FloatBatch
from exactattn.engine.cascade.interval import (
    MR,
    SUM_U,
    TIGHT_REL_F,
    WIDEN,
    ZERO_UPPER_F,
    Cols,
    abs_bounds,
    add,
    finite,
    float_down,
    float_up,
    from_rat,
    stack_floats,
)
from exactattn.engine.cascade.weights import FloatWeights, Sparse, lin, lin_plan, lin_stack
from exactattn.engine.hard import CompiledModel, HardBatch, read_output
from exactattn.engine.ratarray import RatArray
from exactattn.model import AcceptOutput, ArgmaxOutput, ValueOutput


def layer_errors(delta: Cols, B: int, T: int, d: int) -> tuple[np.ndarray, ...]:
    """Per word: a lower and an upper bound of max |δ| over rows and columns, and the row of
    the (first) largest upper bound. Every column at once, column-major (C, B, T): the
    bounds are elementwise and maxima exact, so the bits are those of column by column, and
    the first row of the largest bound is the same (a column absent from δ is 0)."""
    if not delta:
        return np.zeros(B), np.zeros(B), np.zeros(B, dtype=np.int64)
    cols = list(delta)
    al, au = abs_bounds(
        (stack_floats([delta[c][0] for c in cols]), stack_floats([delta[c][1] for c in cols]))
    )
    lo = np.maximum(np.zeros(B), al.max(axis=(0, 2)))
    top = au.max(axis=0)  # (B, T): nan propagates, as through argmax below
    row = np.argmax(top, axis=1)
    return lo, top.max(axis=1), row.astype(np.int64)


ERR_DEFER = 1 << 13  # pending δ entries up to which layer errors wait to share one pass (small:
# beyond ~64 KB per array the stacked temporaries cost more in memory traffic than they save)


def errors_into(
    pending: list[tuple[int, Cols]],
    err: tuple[np.ndarray, np.ndarray, np.ndarray],
    B: int,
    T: int,
    d: int,
) -> None:
    """:func:`layer_errors` of several layers ``(index, δ)`` in one stacked pass, written into
    ``err`` = (err_lo, err_hi, err_row) (left as they are for a layer with no δ: zeros).

    The bounds are elementwise and the per-layer maxima exact (``abs_bounds`` gives no nan
    and no −0: its non-finite entries become [0, inf]), so segment maxima over the stacked
    columns give the bits of layer by layer, and the first row of the largest bound is the
    same. Small batches pay the per-call cost once per call of certify_float, not per layer."""
    pending = [(li, dl) for li, dl in pending if dl]
    if not pending:
        return
    if len(pending) == 1:
        li, dl = pending[0]
        err[0][:, li], err[1][:, li], err[2][:, li] = layer_errors(dl, B, T, d)
        return
    ms: list[np.ndarray] = []
    rs: list[np.ndarray] = []
    starts: list[int] = []
    for _, dl in pending:
        starts.append(len(ms))
        for m, r in dl.values():
            ms.append(m)
            rs.append(r)
    al, au = abs_bounds((stack_floats(ms), stack_floats(rs)))  # (C, B, T)
    ends = starts[1:] + [len(ms)]
    # per layer, the maximum over its columns (contiguous blocks), then over the rows
    lo = np.array([al[a:b].max(axis=0) for a, b in zip(starts, ends, strict=True)]).max(axis=2)
    top = np.array([au[a:b].max(axis=0) for a, b in zip(starts, ends, strict=True)])
    idx = [li for li, _ in pending]
    err[0][:, idx] = np.maximum(lo, 0.0).T
    err[1][:, idx] = top.max(axis=2).T
    err[2][:, idx] = np.argmax(top, axis=2).T


def _tight(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """measure.tight, decided soundly in floats (False when not certainly tight)."""
    fin = np.isfinite(hi) & np.isfinite(lo)
    # (called by finish, under the chunk's errstate: inf − inf gives nan quietly)
    rel = ((hi - lo) * (1 + 2.0**-50) <= hi * TIGHT_REL_F * (1 - 2.0**-50)) & (hi >= 2.0**-900)
    return fin & ((hi == 0) | ((lo == 0) & (hi <= ZERO_UPPER_F)) | rel)


def finish(
    cm: CompiledModel,
    hb: HardBatch,
    delta: Cols,
    fw: FloatWeights,
    err_lo: np.ndarray,
    err_hi: np.ndarray,
    err_row: np.ndarray,
) -> FloatBatch:
    """Decisions from the per-layer error enclosures and the last layer's δ (the float64,
    centred and double-double tiers)."""
    B, L = err_lo.shape
    decided = np.full(B, fw.ok)
    tight = _tight(err_lo, err_hi)  # elementwise: every layer at once
    if L > 1:  # ε ≤ 1 decided before the last layer (every layer at once)
        lo_, hi_ = err_lo[:, :-1], err_hi[:, :-1]
        decided &= ((hi_ <= 1) | ((lo_ > 1) & np.isfinite(lo_))).all(axis=1)
    res = FloatBatch(np.full(B, fw.ok), err_lo, err_hi, err_row)
    _readout(cm, hb, delta, fw, res)  # narrows ``settled`` to decided read-outs
    res.read = res.settled  # the read-out alone (chain.settle_dominated reads it)
    res.decided = res.read & decided
    res.tight = tight
    res.settled = res.decided & tight.all(axis=1)
    return res


def _dot_out(delta: Cols, rows: Sparse, slot: int) -> list[MR | None]:
    """Per output row r: Σ_k W[r, k]·δ[slot, k] (None = exactly zero)."""
    sub_cols = {c: (v[0][:, slot], v[1][:, slot]) for c, v in delta.items()}
    got = lin(sub_cols, rows)
    return [got.get(r) for r in range(len(rows))]


_OFF: dict[int, np.ndarray] = {}


def _off_diagonal(n: int) -> np.ndarray:
    """~eye(n) (read only)."""
    got = _OFF.get(n)
    if got is None:
        got = _OFF[n] = ~np.eye(n, dtype=bool)
        got.flags.writeable = False
    return got


def _label_decisions(
    hard: np.ndarray, den: int, dm: np.ndarray, dr: np.ndarray, off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per [word, slot]: whether exactly one label is not certainly below another (``one``),
    whether every label difference is finite, and that label (``pick``), from the exact
    hard label scores (numerators over ``den``) and their perturbation δ = dm ± dr."""
    if hard.shape[-1] == 2:
        # one pair: s_1 − s_0 by the operations of the general case's entry [0, 1]; its
        # entry [1, 0] is the exact negation with the same radius (round to nearest is
        # symmetric; a zero's sign decides nothing), so the decisions are the same
        hd1 = from_rat(hard[:, :, 1] - hard[:, :, 0], den)
        dm1 = dm[:, :, 1] - dm[:, :, 0]
        dr1 = (dr[:, :, 1] + dr[:, :, 0]) * (1 + WIDEN) + np.abs(dm1) * WIDEN
        d = add(hd1, (dm1, dr1))
        cand0 = ~(d[0] > d[1])  # label 0 not certainly below label 1
        one = cand0 ^ ~(-d[0] > d[1])
        return one, np.isfinite(d[0]) & np.isfinite(d[1]), np.where(cand0, 0, 1)
    return _label_decisions_pairs(hard, den, dm, dr, off)


def _label_decisions_pairs(
    hard: np.ndarray, den: int, dm: np.ndarray, dr: np.ndarray, off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_label_decisions` over every pair (i, j) of labels, [word, slot, i, j]."""
    hd = from_rat(hard[:, :, None, :] - hard[:, :, :, None], den)
    dm2 = dm[:, :, None, :] - dm[:, :, :, None]
    dr2 = (dr[:, :, None, :] + dr[:, :, :, None]) * (1 + WIDEN) + np.abs(dm2) * WIDEN
    diff = add(hd, (dm2, dr2))  # s_j − s_i = hard + sub(dmr[j], dmr[i])
    dominated = ((diff[0] > diff[1]) & off).any(axis=3)
    fin = ((np.isfinite(diff[0]) & np.isfinite(diff[1])) | ~off).all(axis=(2, 3))
    cand = ~dominated
    return cand.sum(axis=2) == 1, fin, np.argmax(cand, axis=2)


def _argmax_two(delta: Cols, fw: FloatWeights, vals: RatArray, slots: Any, res: FloatBatch) -> bool:
    """The argmax read-out of two labels, when δ reaches both output rows or neither (else
    False and nothing done): the general path's numbers and decisions in fewer calls.

    The hard labels from one exact difference h = s_1 − s_0 per slot (unique iff h ≠ 0,
    label 1 iff h > 0); δ's output rows by :func:`lin_stack` on the full columns (entries are
    elementwise, so selecting the slots afterwards gives the same numbers); then
    :func:`_label_decisions`'s one-pair test: with a = "label 0 certainly below" and b =
    "label 1 certainly below", exactly one candidate is a ^ b and it is label a (as 0/1)."""
    cols = delta
    plan = lin_plan(cols, fw.out)
    if plan and [a for a, _ in plan] != [0, 1]:
        return False
    num = vals.num  # (B, P, 2)
    small = num.dtype != object and (num.size == 0 or int(np.abs(num).max()) < 2**61)
    numo = num if small else num.astype(object)
    h = numo[:, :, 1] - numo[:, :, 0]  # exact
    uniq = np.asarray(h != 0, dtype=bool)
    up = np.asarray(h > 0, dtype=bool)
    labels = np.where(uniq, up, -1)  # hard labels (int64)
    if not plan:  # δ reaches no output row: the hard labels, nothing undecided
        res.labels = labels
        res.tie = np.zeros(len(num), dtype=bool)
        return True
    gm, gr = lin_stack(cols, plan, (len(cols) + 3) * SUM_U)  # (2, B, T)
    P = len(slots)
    sel: Any = np.asarray(slots, dtype=np.intp)
    if P and list(slots) == list(range(slots[0], slots[0] + P)):
        sel = slice(slots[0], slots[0] + P)
    gm, gr = gm[:, :, sel], gr[:, :, sel]  # (2, B, P)
    az = (gr == 0).all(axis=0)
    # _label_decisions's pair (1, 0), the same operations
    hd1 = from_rat(h, vals.den)
    dm1 = gm[1] - gm[0]
    dr1 = (gr[1] + gr[0]) * (1 + WIDEN) + np.abs(dm1) * WIDEN
    dm, dr = add(hd1, (dm1, dr1))
    a = dm > dr  # label 0 certainly below label 1
    one = a ^ (-dm > dr)
    fin = np.isfinite(dm) & np.isfinite(dr)
    res.labels = np.where(az, labels, np.where(one, a, -1))
    fail = ~(az | (one & fin))
    failed = fail.any(axis=1)
    res.settled &= ~failed
    # a word with no undecided unique-label slot fails only at ties
    res.tie = failed & ~(fail & uniq).any(axis=1)
    return True


_OFF4: dict[int, np.ndarray] = {}


def _argmax_many(
    delta: Cols, fw: FloatWeights, vals: RatArray, slots: Any, res: FloatBatch
) -> bool:
    """The argmax read-out of three or more labels on a small batch, laid out [label i,
    label j, slot, word] instead of [word, slot, i, j]: the same elementwise operations on
    the same numbers (so the same decisions and labels), but numpy's inner loops run over
    the slots and words, not over one row of labels, and the reductions over labels add
    whole blocks. False (nothing done) where the scores are not int64 below 2^61."""
    num = vals.num  # (B, P, r)
    if num.dtype != np.int64 or (num.size and int(np.abs(num).max()) >= 2**61):
        return False
    plan = lin_plan(delta, fw.out)
    B, P, nr = num.shape
    H = np.ascontiguousarray(num.transpose(2, 1, 0))  # (r, P, B) exact label scores
    is_best = H == H.max(axis=0)
    uniq = is_best.sum(axis=0) == 1  # (P, B)
    labels = np.where(uniq, np.argmax(is_best, axis=0), -1)  # hard labels (int64)
    if not plan:  # δ reaches no output row: the hard labels, nothing undecided
        res.labels = np.ascontiguousarray(labels.T)
        res.tie = np.zeros(B, dtype=bool)
        return True
    gm, gr = lin_stack(delta, plan, (len(delta) + 3) * SUM_U)  # (rows, B, T): lin's numbers
    sel: Any = np.asarray(slots, dtype=np.intp)
    if P and list(slots) == list(range(slots[0], slots[0] + P)):
        sel = slice(slots[0], slots[0] + P)
    present = [a for a, _ in plan]
    dm = np.zeros((nr, P, B))  # exact zeros for the rows δ does not reach
    dr = np.zeros((nr, P, B))
    dm[present] = gm[:, :, sel].transpose(0, 2, 1)
    dr[present] = gr[:, :, sel].transpose(0, 2, 1)
    az = (dr == 0).all(axis=0)  # (P, B)
    off = _OFF4.get(nr)
    if off is None:
        off = _OFF4[nr] = _off_diagonal(nr)[:, :, None, None]
    # _label_decisions_pairs at [i, j]: s_j − s_i = hard + sub(δ[j], δ[i])
    hd = from_rat(H[None, :] - H[:, None], vals.den)
    dm2 = dm[None, :] - dm[:, None]
    dr2 = (dr[None, :] + dr[:, None]) * (1 + WIDEN) + np.abs(dm2) * WIDEN
    d0, d1 = add(hd, (dm2, dr2))
    cand = ~((d0 > d1) & off).any(axis=1)  # (i, P, B): label i not certainly below another
    fin = ((np.isfinite(d0) & np.isfinite(d1)) | ~off).all(axis=(0, 1))
    one = cand.sum(axis=0) == 1
    lab = np.where(az, labels, np.where(one, np.argmax(cand, axis=0), -1))
    fail = ~(az | (one & fin))  # (P, B)
    failed = fail.any(axis=0)
    res.settled &= ~failed
    res.labels = np.ascontiguousarray(lab.T)
    # a word with no undecided unique-label slot fails only at ties
    res.tie = failed & ~(fail & uniq).any(axis=0)
    return True


def _readout(
    cm: CompiledModel, hb: HardBatch, delta: Cols, fw: FloatWeights, res: FloatBatch
) -> None:
    model = cm.model
    o = model.output
    n = hb.n
    B = len(hb.words)
    vals = read_output(model, hb.activations[-1], n).values
    if isinstance(o, AcceptOutput):
        slot = model.accept_slot(n)
        t = o.threshold
        num = vals.num.astype(object)
        cnum = num * t.denominator - t.numerator * vals.den
        cden = vals.den * t.denominator
        cpos = np.array(cnum > 0, dtype=bool)
        (dy,) = _dot_out(delta, fw.out, slot)
        if dy is None:
            res.accept = cpos
            res.tie = np.zeros(B, dtype=bool)
            return
        c = from_rat(cnum, cden)
        val = add(c, dy)
        exact0 = dy[1] == 0
        yes = val[0] > val[1]
        no = -val[0] >= val[1]
        fin = np.isfinite(val[0]) & np.isfinite(val[1])
        res.accept = np.where(exact0, cpos, yes)
        ok = exact0 | (fin & (yes | no))
        res.settled &= ok
        res.tie = ~ok & np.array(cnum == 0, dtype=bool)  # exactly at the threshold
        return
    slots = model.output_positions(n)
    num = vals.num  # (B, P, r)
    nr = num.shape[2]
    if isinstance(o, ArgmaxOutput):
        P = len(slots)
        if nr == 2 and B * P <= 1 << 18 and _argmax_two(delta, fw, vals, slots, res):
            return
        if nr > 2 and B * P * nr * nr <= 1 << 20 and _argmax_many(delta, fw, vals, slots, res):
            return
        # int64 differences are exact below 2^62; else Python integers (same floats either way)
        small = num.dtype != object and (num.size == 0 or int(np.abs(num).max()) < 2**61)
        numo = num if small else num.astype(object)
        off = _off_diagonal(nr)  # the pairs i ≠ j
        best = numo.max(axis=2)
        is_best = np.asarray(numo == best[:, :, None], dtype=bool)
        uniq = is_best.sum(axis=2) == 1
        labels = np.where(uniq, np.argmax(is_best, axis=2), -1).astype(np.int64)  # hard labels
        # the output rows at every slot at once (elementwise, so the same bits as slot by slot)
        sel: Any = np.asarray(slots, dtype=np.intp)
        if P and list(slots) == list(range(slots[0], slots[0] + P)):
            sel = slice(slots[0], slots[0] + P)  # consecutive slots: views, not copies
        cols = {c: (v[0][:, sel], v[1][:, sel]) for c, v in delta.items()}
        plan = lin_plan(cols, fw.out)
        fail_tie = np.zeros(B, dtype=bool)  # an undecided slot (where labels tie, see below)
        fail_other = np.zeros(B, dtype=bool)  # an undecided slot with a unique hard label
        if plan:  # else δ reaches no output row: the hard labels
            # lin's numbers for the rows it reaches (stacked), exact zeros for the others
            gm, gr = lin_stack(cols, plan, (len(cols) + 3) * SUM_U)
            present = [a for a, _ in plan]
            if present == list(range(nr)):  # every row reached: a view, not a copy
                dm_all, dr_all = gm.transpose(1, 2, 0), gr.transpose(1, 2, 0)  # (B, P, r)
            else:
                dm_all = np.zeros((B, P, nr))  # (B, P, r)
                dr_all = np.zeros((B, P, nr))
                dm_all[:, :, present] = gm.transpose(1, 2, 0)
                dr_all[:, :, present] = gr.transpose(1, 2, 0)
            allzero = (dr_all == 0).all(axis=2)
            # every pair (i, j) of labels at once, [b, p, i, j], over groups of slots that
            # keep the arrays small: the same elementwise operations as one pair at a time
            g = max(1, (1 << 20) // max(1, B * nr * nr))
            for a in range(0, P, g):
                sl = slice(a, a + g)
                hard = numo[:, sl]
                dm, dr = dm_all[:, sl], dr_all[:, sl]
                az = allzero[:, sl]
                one, fin, pick = _label_decisions(hard, vals.den, dm, dr, off)
                lab = np.where(az, labels[:, sl], np.where(one, pick, -1))
                labels[:, sl] = lab
                fail = ~(az | (one & fin))
                failed = fail.any(axis=1)
                res.settled &= ~failed
                # a word with no undecided unique-label slot fails only at ties: its tie
                # flag is "some slot failed" (the same flags as testing the ties apart)
                fail_tie |= failed
                fail_other |= (fail & uniq[:, sl]).any(axis=1)
        res.tie = fail_tie & ~fail_other
        res.labels = labels
        return
    assert isinstance(o, ValueOutput)
    tol_lo = float_down(o.tolerance)
    tol_hi = float_up(o.tolerance)
    within = np.ones(B, dtype=bool)
    unknown = np.zeros(B, dtype=bool)
    outside = np.zeros(B, dtype=bool)
    for p in slots:
        for x in _dot_out(delta, fw.out, p):
            if x is None:
                continue
            lo, hi = abs_bounds(x)  # [0, inf] where not finite: neither ok nor bad
            fin = finite(x)
            ok = fin & (hi <= tol_lo)
            bad = fin & (lo > tol_hi)
            outside |= bad
            unknown |= ~ok & ~bad
    within = ~outside
    res.within_tol = within
    res.settled &= outside | ~unknown
    del nr
