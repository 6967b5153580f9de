"""The dtype engine: a model's weights rounded to an IEEE dtype and its forward pass in numpy.

The arithmetic model is documented in :mod:`exactattn.run.precision` (which sweeps inputs
through it) and docs/finite-precision.md. Here, below the sweeps and below
:mod:`exactattn.export.torch` (which rounds the same weights for PyTorch's kernels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.core.errors import UsageError
from exactattn.engine.hard import CompiledModel, visible_block
from exactattn.engine.longinput import RowRat
from exactattn.engine.ratarray import RatArray
from exactattn.engine.sparsehead import (
    class_head,
    distinct_rows,
    dtype_head,
    limits,
    table_head,
    uniform_dtype_head,
)
from exactattn.model import AcceptOutput, ArgmaxOutput, AttentionLayer
from exactattn.results.settings import TauOverride

BLOCK_ENTRIES = 1 << 18
SPARSE_MIN_T = 512  # one word this long: heads from their candidate keys (engine/sparsehead.py)

DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")

# who does the forward pass (issue 26): this module's numpy emulation, or PyTorch's kernels
# (exactattn/export/torch.py; torch is an optional extra, imported only when asked for)
BACKENDS = (
    "numpy",
    "torch-eager",
    "torch-sdpa",
    "torch-sdpa-math",
    "torch-sdpa-flash",
    "torch-sdpa-efficient",
)


def dtype_of(name: str) -> Any:
    """The numpy scalar type for a dtype name (bfloat16 from ml_dtypes)."""
    if name == "float16":
        return np.float16
    if name == "float32":
        return np.float32
    if name == "float64":
        return np.float64
    if name == "bfloat16":
        # lazy: ml_dtypes takes ≈ 0.8 s to import; only bfloat16 needs it
        import ml_dtypes

        return ml_dtypes.bfloat16
    raise UsageError(f"unknown dtype '{name}'; use one of {', '.join(DTYPE_NAMES)}")


def finfo(dt: Any) -> Any:
    """IEEE limits of a dtype (ml_dtypes.finfo also knows bfloat16)."""
    # lazy: ml_dtypes takes ≈ 0.8 s to import; only bfloat16 needs it
    import ml_dtypes

    return ml_dtypes.finfo(dt)


# ---------------------------------------------------------------------------
# exact → dtype, correctly rounded
# ---------------------------------------------------------------------------


def _f64(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num/den correctly rounded to float64 (broadcasting)."""
    num_b, den_b = np.broadcast_arrays(num, den)
    if num_b.dtype != object and den_b.dtype != object:
        if np.abs(num_b).max(initial=0) < 2**53 and np.abs(den_b).max(initial=0) < 2**53:
            return num_b.astype(np.float64) / den_b.astype(np.float64)  # exact operands
        return _f64_int64(num_b, den_b)
    out = np.empty(num_b.shape, dtype=np.float64)
    fits = (np.abs(num_b) < INT64_LIMIT) & (np.abs(den_b) < INT64_LIMIT)
    fits = np.asarray(fits, dtype=bool)
    if fits.any():
        out[fits] = _f64_int64(num_b[fits].astype(np.int64), den_b[fits].astype(np.int64))
    rest = np.flatnonzero(~fits.reshape(-1))
    flat, nf, df = out.reshape(-1), num_b.reshape(-1), den_b.reshape(-1)
    for i in rest:
        flat[i] = _div(int(nf[i]), int(df[i]))
    return out


INT64_LIMIT = 2**63


def arithmetic_is_x87(ld: Any = np.longdouble) -> bool:
    """Whether arithmetic in the float type ``ld`` is x87 extended precision (64 bits).

    Asked of the arithmetic itself, not of ``finfo`` (which describes the storage format):
    int64 operands convert exactly and a quotient keeps 64 bits, not 53 (float64, or an
    x87 precision-control word set to double) nor more (binary128 would need its own
    double-rounding argument). Anything else takes the exact integer-division path."""
    with np.errstate(all="ignore"):
        big = np.array([2**63 - 1, -(2**63), 2**62 + 1], dtype=np.int64).astype(ld)
        exact_ints = (
            big[0] - ld(2.0**62) * 2 == -1 and big[1] == -ld(2.0**63) and big[2] - ld(2.0**62) == 1
        )
        q = ld(2**63 - 1) / ld(2.0**63)  # 1 - 2^-63: needs 64 bits, rounds to 1 in 53
        keeps_64 = q != 1 and (1 - q) * ld(2.0**63) == 1
        r = (ld(1) + ld(2.0**-64)) / ld(1)  # 1 + 2^-64: kept only by a wider significand
        not_wider = r == 1
    return bool(exact_ints and keeps_64 and not_wider)


# x87 extended precision holds every int64 exactly and divides to a 64-bit significand: the
# fast path of _f64_int64. Elsewhere int64 quotients are rounded in Python (exact, slower).
LONGDOUBLE_64 = np.finfo(np.longdouble).nmant == 63 and arithmetic_is_x87()


def _f64_int64(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """int64 num/den correctly rounded to float64.

    With x87 extended precision: the quotient of the exact int64 operands rounded to a
    64-bit significand, then to float64. That double rounding errs only where the first
    result lies exactly halfway between two float64 values (a value strictly between the
    exact quotient and a 64-bit result would be a nearer 64-bit number); those entries, and
    results near the ends of float64's range, are redone with Python's correctly rounded
    int division."""
    if not LONGDOUBLE_64:  # exact on every platform
        flat = [_div(int(a), int(b)) for a, b in zip(num.reshape(-1), den.reshape(-1), strict=True)]
        return np.array(flat, dtype=np.float64).reshape(num.shape)
    with np.errstate(all="ignore"):
        ql = num.astype(np.longdouble) / den.astype(np.longdouble)
        q = ql.astype(np.float64)
        diff = np.abs(ql - q.astype(np.longdouble))
        sp = np.spacing(np.abs(q)).astype(np.longdouble)
        aq = np.abs(q)
        sus = (
            (diff == sp / 2)
            | (diff == sp / 4)
            | ~(aq < 2.0**1000)
            | ((aq < 2.0**-1000) & (num != 0))
        )
    if sus.any():
        idx = np.flatnonzero(sus.reshape(-1))
        flat, nf, df = q.reshape(-1), num.reshape(-1), den.reshape(-1)
        for i in idx:
            flat[i] = _div(int(nf[i]), int(df[i]))
    return q


def _div(a: int, b: int) -> float:
    """a/b correctly rounded; past float64's range that rounding is ±inf (Python raises)."""
    try:
        return a / b
    except OverflowError:  # activations of 4,800 digits (issue 27)
        return math.inf if (a < 0) == (b < 0) else -math.inf


def round_exact(num: np.ndarray, den: np.ndarray, dt: Any) -> np.ndarray:
    """The rationals num/den rounded to nearest (ties to even) in dtype ``dt``.

    float64 first (Python/IEEE division of exact values is correctly rounded); a second
    rounding to a narrower dtype can only err when the float64 value is inexact AND exactly
    halfway between two dtype values: those few entries are redone with Fractions.
    """
    x = _f64(num, den)
    if dt is np.float64:
        return x
    with np.errstate(over="ignore"):
        y = x.astype(dt)
    back = y.astype(np.float64)
    cand = np.flatnonzero((back != x) & np.isfinite(back))
    if cand.size:
        # ±max with x beyond it has no finite neighbour that way (nextafter overflowed, with a
        # RuntimeWarning) and needs none: the midpoint past ±max is the overflow threshold,
        # which rounds to ±inf, so such an x is never a midpoint
        big = float((np.finfo(dt) if dt in (np.float16, np.float32) else finfo(dt)).max)
        past = np.abs(back.reshape(-1)[cand]) == big
        cand = cand[~(past & (np.abs(x.reshape(-1)[cand]) > big))]
    if cand.size:
        fy = y.reshape(-1)
        fx = x.reshape(-1)
        a = fy[cand]
        up = _next_vec(a, dt, fx[cand] > a.astype(np.float64))
        mid = (a.astype(np.float64) + up.astype(np.float64)) / 2  # exact: two narrow values
        num_b, den_b = np.broadcast_arrays(num, den)
        on = mid == fx[cand]  # the float64 value is a dtype midpoint: decide exactly
        for idx, ai, ui in zip(cand[on], a[on], up[on], strict=True):
            exact = Fraction(int(num_b.reshape(-1)[idx]), int(den_b.reshape(-1)[idx]))
            if exact == Fraction(float(fx[idx])):
                continue  # exactly halfway: float64's own tie rule is the dtype's rule
            pick = ui if abs(Fraction(float(ui)) - exact) < abs(Fraction(float(ai)) - exact) else ai
            fy[idx] = pick
    return y


def _next_vec(a: np.ndarray, dt: Any, upward: np.ndarray) -> np.ndarray:
    """The neighbours (one ulp up where ``upward``, else down) of dtype values ``a``."""
    if dt in (np.float16, np.float32):
        return np.nextafter(a, np.where(upward, np.inf, -np.inf).astype(dt))
    # bfloat16: step through the bit pattern (zero steps to the smallest subnormal)
    fi = finfo(dt)
    bits = a.view(np.uint16).astype(np.int64)
    a64 = a.astype(np.float64)
    step = np.where(upward == (a64 > 0), 1, -1)
    out = (bits + step).astype(np.uint16).view(dt)
    tiny = np.where(upward, fi.smallest_subnormal, -fi.smallest_subnormal).astype(dt)
    return np.where(a64 == 0, tiny, out)


def rat_to_dtype(ra: RatArray, dt: Any) -> np.ndarray:
    return round_exact(ra.num, np.array(ra.den, dtype=object if ra.den >= 2**62 else np.int64), dt)


def rows_to_dtype(rr: RowRat, dt: Any) -> np.ndarray:
    return round_exact(rr.num, rr.den[:, None], dt)


# ---------------------------------------------------------------------------
# the model in a dtype
# ---------------------------------------------------------------------------


@dataclass
class DHead:
    Q: np.ndarray
    bq: np.ndarray
    K: np.ndarray
    bk: np.ndarray
    V: np.ndarray
    bv: np.ndarray
    O: np.ndarray | None
    mask: str


@dataclass
class DFFN:
    hidden: list[tuple[np.ndarray, np.ndarray]]
    out: tuple[np.ndarray, np.ndarray]


class DtypeModel:
    """The model's weights rounded to one dtype."""

    def __init__(self, cm: CompiledModel, dtype: str, backend: str = "numpy") -> None:
        if backend not in BACKENDS:
            raise UsageError(f"unknown backend '{backend}'; use one of {', '.join(BACKENDS)}")
        self.backend = backend
        self.cm = cm
        self.model = cm.model
        self.name = dtype
        self.dt = dtype_of(dtype)
        dt = self.dt
        self.layers: list[list[DHead] | DFFN] = []
        for layer in cm.layers:
            if isinstance(layer, list):
                self.layers.append(
                    [
                        DHead(
                            rat_to_dtype(h.Q, dt),
                            rat_to_dtype(h.bq, dt),
                            rat_to_dtype(h.K, dt),
                            rat_to_dtype(h.bk, dt),
                            rat_to_dtype(h.V, dt),
                            rat_to_dtype(h.bv, dt),
                            rat_to_dtype(h.O, dt) if h.O is not None else None,
                            h.head.mask,
                        )
                        for h in layer
                    ]
                )
            else:
                self.layers.append(
                    DFFN(
                        [(rat_to_dtype(w, dt), rat_to_dtype(b, dt)) for w, b in layer.hidden],
                        (rat_to_dtype(layer.out[0], dt), rat_to_dtype(layer.out[1], dt)),
                    )
                )

    def taus(self, n: int, override: TauOverride = None) -> list[list[np.generic] | None]:
        """τ(n) per head: float64 nearest to the certified value, then rounded to the dtype."""
        out: list[list[np.generic] | None] = []
        m = self.model
        for li, layer in enumerate(m.layers):
            if isinstance(layer, AttentionLayer):
                row = []
                for hi in range(len(layer.heads)):
                    e = m.head_temperature(li, hi, override)
                    v = e.eval_arb({"n": n}, 256)
                    f = float(v.mid())
                    with np.errstate(under="ignore", over="ignore"):
                        row.append(np.array(f).astype(self.dt)[()])
                out.append(row)
            else:
                out.append(None)
        return out


def proj(x: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """x @ W.T (+ b), summed left to right over the inner index, in x's dtype."""
    acc = x[..., 0:1] * W[:, 0]
    for c in range(1, W.shape[1]):
        acc = acc + x[..., c : c + 1] * W[:, c]
    if b is not None:
        acc = acc + b
    return acc


def _skippable(a: np.ndarray, b: np.ndarray) -> bool:
    """a·b contributes exactly ±0 to every sum (so skipping it changes no value)."""
    return bool((not a.any() and np.isfinite(b).all()) or (not b.any() and np.isfinite(a).all()))


@dataclass
class HeadBlock:
    """One query block of one head in the dtype: logits, weights (for diagnosis)."""

    logits: np.ndarray  # (N, b, T)
    alpha: np.ndarray  # (N, b, T)
    vis: np.ndarray  # (b, T)


def head_block(
    h: DHead,
    q: np.ndarray,
    k: np.ndarray,
    rows: np.ndarray,
    tau: np.generic,  # τ(n) rounded to the head's dtype (DtypeModel.taus)
    cols: list[int],
) -> HeadBlock:
    """Logits and softmax weights of query rows ``rows`` against every key."""
    N, T, _ = k.shape
    vis = visible_block(h.mask, rows, T)
    dt = q.dtype
    if cols:
        c0 = cols[0]
        S = q[:, rows, c0, None] * k[:, None, :, c0]
        for c in cols[1:]:
            S = S + q[:, rows, c, None] * k[:, None, :, c]
    else:
        S = np.zeros((N, len(rows), T), dtype=dt)
    L = S / tau
    neg = np.array(-np.inf).astype(dt)
    mx = np.where(vis, L, neg).max(axis=2, keepdims=True)
    e = np.where(vis, np.exp(L - mx), np.zeros((), dtype=dt))
    Z = e.sum(axis=2, keepdims=True)
    has = vis.any(axis=1)
    alpha = e / Z
    if not has.all():
        alpha[:, ~has, :] = 0
    return HeadBlock(L, alpha, vis)


def run_head_dtype(
    h: DHead,
    x: np.ndarray,
    tau: np.generic,
    block: int | None = None,
    sparse: bool | None = None,
) -> tuple[np.ndarray, list[int], np.ndarray, np.ndarray]:
    """One head on a batch (N, T, d) in its dtype: contribution, active score columns, q, k.

    One long word (N = 1, T ≥ ``SPARSE_MIN_T``, or ``sparse``) is computed from its candidate
    keys (:mod:`exactattn.engine.sparsehead`), the same bits; the rows that path cannot cover
    and every batch go through the dense blocks below."""
    N, T, _ = x.shape
    q = proj(x, h.Q, h.bq)
    k = proj(x, h.K, h.bk)
    v = proj(x, h.V, h.bv)
    cols = [c for c in range(q.shape[2]) if not _skippable(q[..., c], k[..., c])]
    B = block or max(1, BLOCK_ENTRIES // max(1, N * T))
    m = v.shape[2]
    out = np.zeros((N, T, m), dtype=x.dtype)
    vzero = [not v[..., c].any() for c in range(m)]
    dense = np.ones(T, dtype=bool)
    if N == 1 and (sparse if sparse is not None else T >= SPARSE_MIN_T):
        dense = _sparse_head(h, q[0], k[0], v[0], cols, tau, vzero, out[0])
    for start in range(0, T, B):
        rows = np.arange(start, min(T, start + B))
        if not dense[rows].any():
            continue
        hb = head_block(h, q, k, rows, tau, cols)
        finite = bool(np.isfinite(hb.alpha).all())
        for c in range(m):
            if vzero[c] and finite:
                continue
            out[:, rows, c] = (hb.alpha * v[:, None, :, c]).sum(axis=2)
    contrib = proj(out, h.O, None) if h.O is not None else out
    return contrib, cols, q, k


def _sparse_head(
    h: DHead,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cols: list[int],
    tau: Any,
    vzero: list[bool],
    out: np.ndarray,
) -> np.ndarray:
    """One word's head output into ``out`` (T, m) from its candidate keys; returns the rows
    left to the dense blocks. With mask ``none`` rows with the same query bits have the same
    output, so each distinct query row is computed once."""
    T = q.shape[0]
    dt = q.dtype.type
    ftau = float(tau)
    if not (0 < ftau < math.inf) or T >= 1 << 24:
        return np.ones(T, dtype=bool)
    if not cols:
        uniform_dtype_head(dt, v, vzero, h.mask, T, out)
        return np.zeros(T, dtype=bool)
    lim = limits(np.dtype(dt).name, finfo(dt))
    if h.mask != "none":
        return _distinct_or_filter(q, k, v, cols, tau, h.mask, lim, vzero, out)
    first, inv = distinct_rows(q[:, cols])
    ou = np.zeros((len(first), out.shape[1]), dtype=out.dtype)
    need = class_head(q[first], k, v, cols, tau, vzero, ou)
    if need is None:
        need = _distinct_or_filter(q[first], k, v, cols, tau, "none", lim, vzero, ou)
    out[:] = ou[inv]
    return need[inv]


def _distinct_or_filter(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cols: list[int],
    tau: Any,
    mask: str,
    lim: Any,
    vzero: list[bool],
    out: np.ndarray,
) -> np.ndarray:
    """The logit table of distinct vectors when there are few (low-precision dtypes), else
    the float64 filter."""
    got = table_head(q, k, v, cols, tau, mask, lim, vzero, out)
    if got is not None:
        return got
    return dtype_head(q, k, v, cols, tau, mask, lim, vzero, out)


@dataclass
class DtypeRun:
    acts: list[np.ndarray]  # (N, T, d) per layer, index 0 = embedding
    taus: list[list[np.generic] | None]  # τ(n) per head, rounded to the dtype
    scols: dict[tuple[int, int], list[int]] = field(default_factory=dict)


def run_numpy(
    dm: DtypeModel,
    x0: np.ndarray,
    n: int,
    tau_override: TauOverride = None,
    block: int | None = None,
    sparse: bool | None = None,
) -> DtypeRun:
    """The deployed soft meaning of a batch of words of length n, by this module's numpy
    emulation (:func:`exactattn.run.precision.run_dtype` also dispatches to PyTorch)."""
    taus = dm.taus(n, tau_override)
    acts = [x0]
    x = x0
    run = DtypeRun(acts, taus)
    with np.errstate(all="ignore"):
        for li, layer in enumerate(dm.layers):
            if isinstance(layer, list):
                out = x
                lt = taus[li]
                assert lt is not None
                for hi, h in enumerate(layer):
                    c, cols, _, _ = run_head_dtype(h, x, lt[hi], block, sparse)
                    run.scols[(li, hi)] = cols
                    out = out + c
                x = out
            else:
                hdd = x
                for W, b in layer.hidden:
                    hdd = np.maximum(proj(hdd, W, b), np.zeros((), dtype=x.dtype))
                W, b = layer.out
                x = x + proj(hdd, W, b)
            acts.append(x)
    return run


def embed_dtype(dm: DtypeModel, hard_x0: RowRat | RatArray) -> np.ndarray:
    """Round the exact embedding to the dtype: (1, T, d) or (N, T, d)."""
    if isinstance(hard_x0, RowRat):
        return rows_to_dtype(hard_x0, dm.dt)[None]
    return rat_to_dtype(hard_x0, dm.dt)


# ---------------------------------------------------------------------------
# read-out and decisions
# ---------------------------------------------------------------------------


def dtype_decisions(dm: DtypeModel, x: np.ndarray, n: int) -> list[Any]:
    """Per word: accept → True/False/None (NaN); argmax → labels (None on tie/NaN); value → rows."""
    m = dm.model
    out = m.output
    dt = dm.dt
    with np.errstate(all="ignore"):
        if isinstance(out, AcceptOutput):
            slot = m.accept_slot(n)
            w = _frac_vec(out.weight, dt)[None, :]
            b = _frac_vec([out.bias], dt)
            thr = _frac_vec([out.threshold], dt)[0]
            y = proj(x[:, slot, :], w, b)[:, 0]
            return [None if np.isnan(v) else bool(v > thr) for v in y]
        slots = m.output_positions(n)
        W = np.array([_frac_vec(r, dt) for r in out.weight])
        b = _frac_vec(out.bias, dt)
        y = proj(x[:, slots, :], W, b)
        if isinstance(out, ArgmaxOutput):
            res = []
            for wi in range(y.shape[0]):
                labels: list[str | None] = []
                for p in range(y.shape[1]):
                    row = y[wi, p].astype(np.float64)
                    if np.isnan(row).any():
                        labels.append(None)
                        continue
                    best = row.max()
                    win = np.flatnonzero(row == best)
                    labels.append(out.labels[int(win[0])] if len(win) == 1 else None)
                res.append(labels)
            return res
        return [y[wi].astype(np.float64) for wi in range(y.shape[0])]


def _frac_vec(vals: Sequence[Fraction], dt: Any) -> np.ndarray:
    ra = RatArray.from_fractions(list(vals))
    return rat_to_dtype(ra, dt)
