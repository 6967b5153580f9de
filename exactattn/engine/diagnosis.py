"""Which dtype decisions flip, by how much the dtype is off, and which operation broke.

Why apart from the sweeps (run/precision.py): these judge *one* dtype run against the exact
hard meaning — the flip test (exact, ties decide nothing), the certified ‖dtype − hard‖∞
enclosure and the diagnosis of a flip (overflow, absorption, underflow, rounding) — and the
sweeps only fold their answers into records. The arithmetic model is docs/finite-precision.md.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.dtypes import (
    BLOCK_ENTRIES,
    SPARSE_MIN_T,
    DHead,
    DtypeModel,
    DtypeRun,
    _f64,
    _skippable,
    finfo,
    head_block,
    proj,
)
from exactattn.engine.longinput import LongHard, RowRat
from exactattn.engine.ratarray import RatArray, int_matmul
from exactattn.engine.sparsehead import event_rows, limits
from exactattn.model import AcceptOutput, ArgmaxOutput, Model
from exactattn.results.precision import Diagnosis

__all__ = ["diagnose", "error_enclosure", "flipped", "relative_error"]


def flipped(model: Model, hard: Any, dtype_out: Any, hard_tie: bool = False) -> bool:
    """Whether the dtype's decision differs from the exact hard decision.

    As in ``check``, a hard tie decides nothing, so no dtype output flips it: an accept
    read-out exactly at the threshold (``hard_tie``), an argmax position whose hard label is
    None. Value outputs are compared with the tolerance exactly (dtype values are binary
    fractions, the hard values and the tolerance rationals).
    """
    out = model.output
    if isinstance(out, AcceptOutput):
        return not hard_tie and hard != dtype_out
    if isinstance(out, ArgmaxOutput):
        return any(h is not None and h != d for h, d in zip(hard, dtype_out, strict=True))
    tol = Fraction(out.tolerance)
    for hrow, drow in zip(hard, dtype_out, strict=True):
        for hv, dv in zip(hrow, drow, strict=True):
            if not np.isfinite(dv) or abs(Fraction(hv) - Fraction(float(dv))) > tol:
                return True
    return False


# ---------------------------------------------------------------------------
# errors (dtype − hard) with an explicit enclosure
# ---------------------------------------------------------------------------


def error_enclosure(a: np.ndarray, hard: RowRat | RatArray) -> tuple[float, float, int]:
    """‖a − hard‖∞ over (T, d) as (lower, upper, row): float64 with an explicit allowance.

    a holds exact binary values; hard is rounded to float64 (relative error ≤ 2⁻⁵³), the
    difference is one more rounding; the allowance 2⁻⁵⁰(|h| + |a − h|) + 2⁻¹⁰⁷⁰ covers both.
    Non-finite entries give (inf, inf).
    """
    a64 = a.astype(np.float64)
    if isinstance(hard, RowRat):
        h = _f64(hard.num, hard.den[:, None])
    else:
        h = _f64(hard.num, np.array(hard.den, dtype=object if hard.den >= 2**53 else np.int64))
    if not np.isfinite(a64).all():
        bad = np.argwhere(~np.isfinite(a64))[0]
        return math.inf, math.inf, int(bad[0])
    diff = np.abs(a64 - h)
    allow = 2.0**-50 * (np.abs(h) + diff) + 2.0**-1070
    up = diff + allow
    lo = np.maximum(diff - allow, 0)
    idx = int(np.argmax(up.max(axis=-1)))
    return float(lo.max()), float(up.max() * (1 + 2.0**-50)), idx


def relative_error(a: np.ndarray, hard: RowRat) -> float:
    """max over entries of |a − h| / max(1, |h|) (float64; a diagnostic, not certified)."""
    a64 = a.astype(np.float64)
    if not np.isfinite(a64).all():
        return math.inf
    h = _f64(hard.num, hard.den[:, None])
    return float((np.abs(a64 - h) / np.maximum(1.0, np.abs(h))).max())


# ---------------------------------------------------------------------------
# diagnosis: which operation broke
# ---------------------------------------------------------------------------


def diagnose(
    dm: DtypeModel,
    run: DtypeRun,
    b: int,
    lh: LongHard,
    threshold: float = 0.1,
    sparse: bool | None = None,
) -> Diagnosis:
    """Which operation broke, for word b of a dtype run whose exact hard meaning is lh.

    Walks the layers in order and reports the first *event* at or before the first layer
    whose relative error max |dtype − hard| / max(1, |hard|) exceeds ``threshold``:
    overflow (a non-finite logit or activation, or τ rounding to 0 or ∞), absorption of a
    score difference (a key outside the exact argmax set whose dtype logit is ≥ that of a
    key inside it), underflow of a weight (a key of the exact argmax set, |A| > 1, whose
    dtype weight is 0). If none is found: "rounding" (errors accumulated without any of
    those events).
    """
    dt = dm.dt
    fi = finfo(dt)
    layer_err = [relative_error(run.acts[li][b], lh.acts[li]) for li in range(1, len(run.acts))]
    limit = next((i for i, e in enumerate(layer_err) if e > threshold), len(layer_err) - 1)
    with np.errstate(all="ignore"):
        for li in range(limit + 1):
            layer = dm.layers[li]
            x = run.acts[li][b : b + 1]
            if isinstance(layer, list):
                taus = run.taus[li]
                assert taus is not None
                for hi, h in enumerate(layer):
                    ev = _head_event(dm, h, x, taus[hi], lh, li, hi, fi, sparse)
                    if ev is not None:
                        return replace(ev, layer_errors=tuple(layer_err))
            if not np.isfinite(run.acts[li + 1][b]).all():
                return Diagnosis(
                    "overflow",
                    li,
                    f"a non-finite activation after layer {li}",
                    layer_errors=tuple(layer_err),
                )
    return Diagnosis(
        "rounding",
        limit,
        "no overflow, absorbed score difference or underflowed weight: "
        "rounding errors of ordinary operations accumulated",
        layer_errors=tuple(layer_err),
    )


def _head_event(
    dm: DtypeModel,
    h: DHead,
    x: np.ndarray,
    tau: np.generic,  # τ(n) in the dtype
    lh: LongHard,
    li: int,
    hi: int,
    fi: Any,
    sparse: bool | None = None,
) -> Diagnosis | None:
    """The first event of one head (blocks of query rows in order; in a block: overflow,
    then absorption, then underflow). From ``SPARSE_MIN_T`` on (or with ``sparse``) only
    the blocks holding a row that :func:`event_rows` cannot clear are examined: the same
    first event, without forming the other blocks' logits."""
    ftau = float(tau)
    if ftau == 0 or not math.isfinite(ftau):
        return Diagnosis(
            "overflow" if ftau == 0 else "underflow",
            li,
            f"τ rounds to {ftau} in {dm.name}: logits s/τ are not finite",
            head=hi,
        )
    info = lh.heads[(li, hi)]
    T = x.shape[1]
    q = proj(x, h.Q, h.bq)
    k = proj(x, h.K, h.bk)
    cols = [c for c in range(q.shape[2]) if not _skippable(q[..., c], k[..., c])]
    B = max(1, BLOCK_ENTRIES // max(1, T))
    look = np.ones(T, dtype=bool)
    if sparse if sparse is not None else T >= SPARSE_MIN_T:
        lim = limits(dm.name, fi)
        qn, kn = (info.q.num, info.kc) if info.cols else (None, None)
        look = event_rows(q[0], k[0], cols, tau, h.mask, lim, qn, kn)

    for start in range(0, T, B):
        rows = np.arange(start, min(T, start + B))
        if not look[rows].any():
            continue
        hb = head_block(h, q, k, rows, tau, cols)
        L = hb.logits[0].astype(np.float64)
        vis = hb.vis
        if not np.isfinite(np.where(vis, L, 0)).all():
            r, j = np.argwhere(vis & ~np.isfinite(L))[0]
            return Diagnosis(
                "overflow",
                li,
                f"logit s/τ is {L[r, j]} (max finite {float(fi.max):.4g})",
                head=hi,
                query=int(rows[r]),
                key=int(j),
            )
        S = int_matmul(info.q.num[rows], info.kc.T)
        lo = -np.inf
        Sf = S  # exact integers; per-row positive scale, so comparisons per row are exact
        if S.dtype == object:
            floor = -(max(abs(int(S.max())), abs(int(S.min()))) + 1)
        else:
            floor = np.iinfo(np.int64).min
        masked = np.where(vis, Sf, floor)
        rmax = masked.max(axis=1, keepdims=True)
        top = vis & (Sf == rmax)
        # absorption: a non-top visible key with logit >= the smallest top logit
        top_min = np.where(top, L, np.inf).min(axis=1, keepdims=True)
        bad = vis & ~top & (L >= top_min)
        if bad.any():
            r, j = np.argwhere(bad)[0]
            i = int(rows[r])
            s_exact = lh.scores_row(li, hi, i)
            jt = int(np.flatnonzero(top[r])[0])
            gap = s_exact[jt] - s_exact[int(j)]
            return Diagnosis(
                "absorption",
                li,
                f"exact scores differ by {float(gap):.3g} (key {jt} above key {int(j)}) "
                f"but the {dm.name} logits are {L[r, jt]:.6g} and {L[r, j]:.6g}",
                head=hi,
                query=i,
                key=int(j),
                top_key=jt,
                exact_gap=gap,
            )
        a = hb.alpha[0].astype(np.float64)
        multi = top.sum(axis=1) > 1
        under = top & multi[:, None] & (a == 0)
        if under.any():
            r, j = np.argwhere(under)[0]
            return Diagnosis(
                "underflow",
                li,
                f"key {int(j)} ties for the maximum exactly but its {dm.name} weight "
                f"underflows to 0 (its logit is {L[r, j]:.6g} against a row maximum "
                f"{np.where(vis[r], L[r], lo).max():.6g})",
                head=hi,
                query=int(rows[r]),
                key=int(j),
            )
    return None
