"""One head on one long input from the keys that matter: the exact argmax sets and the dtype
softmax, both found by one float64 filter over query blocks.

Why: at n = 2^16 a head has T² ≈ 4·10⁹ (query, key) pairs, and evaluating each of them in
exact integers (the hard meaning) or in the dtype's own arithmetic (the deployed soft
meaning) costs minutes per head. In both meanings almost every pair is irrelevant: a key
outside the argmax set contributes nothing to hard attention, and a key whose dtype logit is
far below the row's maximum gets softmax weight exactly +0 (``exp`` underflows). So both
passes share one structure, blocked over query rows against the visible keys only (causal
masks cut the key range):

1. **filter** — the scores of the block in float64 by one BLAS product, q·kᵀ, and per query
   row a threshold θ_i such that every key below θ_i *provably* does not matter (the bound
   below);
2. **candidates** — the (row, key) pairs at or above θ_i, a few hundred per row;
3. **exact evaluation** on the candidates only — exact integers for the hard meaning, the
   dtype's own operations (the same numpy ufuncs on the same values, so the same bits) for
   the deployed one, with the softmax sums of :mod:`exactattn.engine.rowsum`.

Soundness (the certified-filter pattern: the float64 filter only decides what to *skip*; every
value that is kept is computed exactly, and every row the bound cannot cover is computed by
the dense code):

* hard meaning: with integers q̂, k̂ (|q̂|,|k̂| < 2^62) the float64 product S̃ of the roundings
  satisfies |S̃_ij − S_ij| ≤ ε_i = (r + 2)·2⁻⁵²·Σ_c |q̂_ic|·max_j |k̂_jc| (r columns; each
  conversion and each of the r products and sums within 2⁻⁵³ relatively, any summation order).
  Keys with S̃_ij < max_j S̃_ij − 2ε_i are below the true maximum; the rest are scored exactly.
  When Σ|q̂||k̂| < 2^53 every float64 operation is exact and S̃ = S.
* dtype: with dtype vectors q, k and S* = Σ_c q_c k_c (real), the dtype's left-to-right sum
  S satisfies |S − S*| ≤ γ_r·A + 2rη (A ≥ Σ_c |q_c k_c|, γ_r = rū/(1 − rū), ū = 2u covering
  float16/bfloat16's float32-then-dtype double rounding, η the dtype's smallest subnormal for
  underflow), the float64 product adds (r + 1)·2⁻⁵³·A, and L = fl(S/τ) ≤ S/τ + ū|S/τ| + η.
  A key whose bound on L lies below L° + X₀ (L° the dtype logit of the float64 argmax key, a
  lower bound on the row maximum m; X₀ = ``EXP_ZERO``) has L − m < X₀, so fl(L − m) ≤ X₀ and
  ``exp`` returns exactly +0 (checked exhaustively for float16/bfloat16, by sampling for
  float32/float64: tests/engine/test_sparse_heads_same_bits_as_dense.py); it is not the
  maximum either. Rows whose bounds could overflow the dtype (A/τ near the largest finite
  value) are computed densely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from exactattn.engine.hard import visible_block
from exactattn.engine.ratarray import INT64_SAFE
from exactattn.engine.rowsum import class_row_sums, row_sums

FILTER_ENTRIES = 1 << 22  # (query rows × keys) per filter block: 32 MB of float64
DENSE_SHARE = 8  # a block with more than 1/DENSE_SHARE of its pairs as candidates goes dense
FLOAT_EXACT = 2**53

# exp(x) is exactly +0 in the dtype for every dtype value x ≤ EXP_ZERO (true values 1e-87,
# 1e-18, 1e-651 against smallest subnormals 1e-45 / 9e-41, 6e-8, 5e-324)
EXP_ZERO = {"float16": -40.0, "bfloat16": -200.0, "float32": -200.0, "float64": -1500.0}


CHUNK = 1 << 21  # candidate pairs emulated together (amortises numpy's per-call cost)


def key_range(mask: str, r0: int, r1: int, T: int) -> tuple[int, int]:
    """Keys [k0, k1) that some query of rows [r0, r1) can see."""
    k0 = r0 if mask in ("geq", "gt") else 0
    k1 = r1 if mask in ("leq", "lt") else T
    if mask == "lt":
        k1 = max(r1 - 1, 0)
    if mask == "gt":
        k0 = min(r0 + 1, T)
    return k0, max(k1, k0)


def row_blocks(
    mask: str, T: int, entries: int = FILTER_ENTRIES, nq: int | None = None
) -> list[tuple[int, int]]:
    """Query blocks [r0, r1) of ``nq`` rows (default T) with about ``entries`` visible
    (row, key) pairs each, T keys."""
    out = []
    r0 = 0
    nq = T if nq is None else nq
    while r0 < nq:
        if mask in ("leq", "lt"):  # keys up to r1 = r0 + b: b·(r0 + b) ≤ entries
            b = max(1, int((math.isqrt(r0 * r0 + 4 * entries) - r0) // 2))
        elif mask in ("geq", "gt"):
            b = max(1, entries // max(T - r0, 1))
        else:
            b = max(1, entries // max(T, 1))
        r1 = min(nq, r0 + b)
        out.append((r0, r1))
        r0 = r1
    return out


def _segments(rows: np.ndarray, nrows: int) -> tuple[np.ndarray, np.ndarray]:
    """(start index of each row's run in the sorted ``rows``, count per row)."""
    cnt = np.bincount(rows, minlength=nrows)
    start = np.concatenate(([0], np.cumsum(cnt)[:-1]))
    return start, cnt


def _seg_reduce(ufunc: Any, vals: np.ndarray, start: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """ufunc.reduce over each row's run (rows with cnt 0 get an arbitrary value)."""
    nonempty = cnt > 0
    out = np.zeros(len(cnt), dtype=vals.dtype)
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(vals, start[nonempty])
    return out


# ---------------------------------------------------------------------------------------
# the shared search: tiles of keys, a seed per row, a threshold, the keys at or above it
# ---------------------------------------------------------------------------------------

TILE = 32  # keys per tile of the coarse bound

# pair counts of the searches so far (benchmarks/bench_long_input.py prints them):
# "visible" (row, key) pairs, "scored" by the float64 filter, "kept" candidates
STATS = {"visible": 0, "scored": 0, "kept": 0, "rowsurv": 0}


@dataclass
class Tiles:
    """Consecutive keys in tiles of ``TILE``: per tile the box [lo, hi] of each column."""

    lo: np.ndarray  # (nt, r)
    hi: np.ndarray  # (nt, r)
    start: np.ndarray  # (nt,) first key
    end: np.ndarray  # (nt,) one past the last key
    kabs: np.ndarray  # (r,) max |k| per column over every key


def tiles_of(kf: np.ndarray) -> Tiles:
    T, r = kf.shape
    nt = -(-T // TILE)
    pad = nt * TILE - T
    kp = np.concatenate([kf, np.repeat(kf[-1:], pad, axis=0)]) if pad else kf
    kt = kp.reshape(nt, TILE, r)
    start = np.arange(nt) * TILE
    return Tiles(
        kt.min(axis=1),
        kt.max(axis=1),
        start,
        np.minimum(start + TILE, T),
        np.abs(kf).max(axis=0) if T else np.zeros(r),
    )


def visible_keys(mask: str, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(len(rows), len(keys)) visibility of arbitrary key slots."""
    if mask == "none":
        return np.ones((len(rows), len(keys)), dtype=bool)
    q, k = rows[:, None], keys[None, :]
    return {"leq": k <= q, "lt": k < q, "geq": k >= q, "gt": k > q}[mask]


def _visible_pairs(mask: str, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Visibility of keys[i, :] for query rows[i] (same leading shape)."""
    if mask == "none":
        return np.ones(keys.shape, dtype=bool)
    q = rows.reshape((-1,) + (1,) * (keys.ndim - 1))
    return {"leq": keys <= q, "lt": keys < q, "geq": keys >= q, "gt": keys > q}[mask]


def _visible_tiles(mask: str, rows: np.ndarray, t: Tiles) -> np.ndarray:
    """(len(rows), nt): the tile has a key the row can see."""
    if mask == "none":
        return np.ones((len(rows), len(t.start)), dtype=bool)
    q = rows[:, None]
    first, last = t.start[None, :], t.end[None, :] - 1
    return {"leq": first <= q, "lt": first < q, "geq": last >= q, "gt": last > q}[mask]


@dataclass
class Found:
    """The candidates of query rows [r0, r1): pairs (ri local, kj global) sorted, their
    float64 scores, the rows the bound cannot cover (``bad``) and those with a visible key."""

    r0: int
    r1: int
    ri: np.ndarray
    kj: np.ndarray
    s: np.ndarray
    bad: np.ndarray
    has: np.ndarray


SUB = 32  # query rows per scoring sub-block (each scores the union of its rows' tiles)


def search(
    qf: np.ndarray,
    kf: np.ndarray,
    mask: str,
    slack: np.ndarray,
    coef: float,
    const: np.ndarray,
    target_of: Any,
) -> Any:
    """Every visible (row, key) with q̃_i·k̃_j + G_ij ≥ H_i, blocked over query rows.

    The float64 score q̃_i·k̃_j is within ``slack[i]`` of the real product of the float64
    vectors (so are the tile bounds); G_ij = ``coef``·Σ_c |q_ic|·max_{j' ∈ tile(j)} |k_j'c| +
    ``const[i]`` is the caller's error allowance, per key tile; ``target_of(r0, r1, seed)``
    returns (H, bad) for rows [r0, r1) from one visible seed key per row (the best key, by
    float64 score, of the tile whose bound is largest). A tile whose bound UB_it satisfies
    UB_it + 2·slack_i + G_it < H_i holds no such key; each sub-block of ``SUB`` rows scores
    only the union of its rows' remaining tiles. Yields :class:`Found` per block."""
    nq, r = qf.shape
    T = kf.shape[0]
    t = tiles_of(kf)
    qpos, qneg = np.maximum(qf, 0), np.minimum(qf, 0)
    qabs = np.abs(qf)
    tabs = np.maximum(np.abs(t.lo), np.abs(t.hi))  # (nt, r)
    tile_of = np.arange(T) // TILE
    off = np.arange(TILE)
    for r0, r1 in row_blocks(mask, T, nq=nq):
        rows = np.arange(r0, r1)
        b = r1 - r0
        vt = _visible_tiles(mask, rows, t)
        has = vt.any(axis=1)
        UB = qpos[r0:r1] @ t.hi.T + qneg[r0:r1] @ t.lo.T
        UB = np.where(vt, UB, -np.inf)
        bt = np.argmax(UB, axis=1)
        kk = np.minimum(t.start[bt][:, None] + off[None, :], T - 1)  # (b, TILE)
        ss = np.einsum("br,bsr->bs", qf[r0:r1], kf[kk])
        sv = _visible_pairs(mask, rows, kk)
        seed = kk[np.arange(b), np.argmax(np.where(sv, ss, -np.inf), axis=1)]
        H, bad = target_of(r0, r1, seed)
        G = coef * (qabs[r0:r1] @ tabs.T) + const[r0:r1, None]  # (b, nt)
        surv = vt & (UB + 2 * slack[r0:r1, None] + G >= H[:, None])
        surv &= ~bad[:, None] & has[:, None]
        STATS["rowsurv"] += int(surv.sum()) * TILE
        k0, k1 = key_range(mask, r0, r1, T)
        STATS["visible"] += b * (k1 - k0)
        out_r, out_k, out_s = [], [], []
        for s0 in range(0, b, SUB):
            s1 = min(b, s0 + SUB)
            tu = np.flatnonzero(surv[s0:s1].any(axis=0))
            if tu.size == 0:
                continue
            lens = t.end[tu] - t.start[tu]
            keys = np.repeat(t.start[tu] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
            keys += np.arange(keys.size)
            S = qf[r0 + s0 : r0 + s1] @ np.ascontiguousarray(kf[keys].T)
            Gk = G[s0:s1][:, tile_of[keys]]
            keep = visible_keys(mask, rows[s0:s1], keys) & (S + Gk >= H[s0:s1, None])
            keep &= ~bad[s0:s1, None]
            ri, ci = np.nonzero(keep)
            STATS["scored"] += S.size
            STATS["kept"] += ri.size
            out_r.append(ri + s0)
            out_k.append(keys[ci])
            out_s.append(S[ri, ci])
        if out_r:
            yield Found(
                r0,
                r1,
                np.concatenate(out_r),
                np.concatenate(out_k),
                np.concatenate(out_s),
                bad,
                has,
            )
        else:
            e = np.zeros(0, dtype=np.int64)
            yield Found(r0, r1, e, e, np.zeros(0), bad, has)


# ---------------------------------------------------------------------------------------
# the hard meaning
# ---------------------------------------------------------------------------------------


def _maxabs(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    return int(max(abs(int(a.max())), abs(int(a.min()))))


@dataclass
class ExactHead:
    """One head's hard attention on one long input, from the candidate pairs. Rows flagged
    in ``dense`` are not filled in: the caller computes them with the dense code."""

    mixed: np.ndarray  # (nq, m) object: Σ over the support of the value numerators
    count: np.ndarray  # (nq,) |support|
    top_count: np.ndarray  # (nq,) |argmax set|
    dense: np.ndarray  # (nq,) bool


def exact_tops(qn: np.ndarray, kc: np.ndarray, mask: str) -> Any:
    """The exact argmax sets of every query row, block by block: yields (r0, r1, rows local,
    keys) of the argmax pairs, sorted, or (r0, r1, None, None) for a block with more
    candidates than ``FILTER_ENTRIES / DENSE_SHARE`` (the caller runs the dense code).

    ``qn`` (nq, r) and ``kc`` (T, r) are int64 numerators: the true score of (i, j) is
    qn_i·kc_j over a positive per-row factor, so comparisons within a row are exact."""
    T, r = kc.shape
    mq, mk = _maxabs(qn), _maxabs(kc)
    qf = qn.astype(np.float64)
    kf = kc.astype(np.float64)
    exact = mq * mk * max(r, 1) < FLOAT_EXACT  # every float64 product and sum is exact
    A = (np.abs(qf) @ np.abs(kf).max(axis=0)) * (1 + 2.0**-40) if T else np.zeros(len(qf))
    slack = (r + 2) * 2.0**-52 * A
    # S̃_ij ≥ S_ij − ε_ij and S̃_seed ≤ S_seed + ε_i: a key of the true maximum has
    # S̃_ij + ε_ij ≥ S̃_seed − ε_i; both ε within (r + 2)·2⁻⁵²·Σ|q̂||k̂| (0 when exact)
    coef = 0.0 if exact else 2 * (r + 2) * 2.0**-52 * (1 + 2.0**-40)
    zero = np.zeros(len(qf))

    def target_of(r0: int, r1: int, seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = np.einsum("br,br->b", qf[r0:r1], kf[seed])
        eps = 0.0 if exact else 2 * slack[r0:r1]
        return s - eps, np.zeros(r1 - r0, dtype=bool)

    for f in search(qf, kf, mask, slack, coef, zero, target_of):
        b = f.r1 - f.r0
        if f.ri.size > max(FILTER_ENTRIES // DENSE_SHARE, T) and b > 1:
            yield f.r0, f.r1, None, None
            continue
        if exact:
            ex: np.ndarray = f.s
        elif mq * mk * max(r, 1) < INT64_SAFE:
            ex = np.zeros(f.ri.size, dtype=np.int64)
            for c in range(r):
                ex += qn[f.ri + f.r0, c] * kc[f.kj, c]
        else:
            ex = np.zeros(f.ri.size, dtype=object)
            for c in range(r):
                ex = ex + qn[f.ri + f.r0, c].astype(object) * kc[f.kj, c].astype(object)
        start, cnt = _segments(f.ri, b)
        best = _seg_reduce(np.maximum, ex, start, cnt)
        top = ex == best[f.ri]
        yield f.r0, f.r1, f.ri[top], f.kj[top]


def support_of_tops(
    ri: np.ndarray, kj: np.ndarray, rule: str, nrows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(support rows, support keys, |argmax set| per row) of sorted argmax pairs under the
    tie rule (the rule of ``engine.hard.tie_support``)."""
    start, cnt = _segments(ri, nrows)
    if rule == "average":
        return ri, kj, cnt
    has = cnt > 0
    idx = start[has] if rule == "leftmost" else start[has] + cnt[has] - 1
    return ri[idx], kj[idx], cnt


def exact_head(
    qn: np.ndarray | None, kc: np.ndarray | None, vc: np.ndarray, mask: str, rule: str, T: int
) -> ExactHead | None:
    """Hard attention of every query row of ``qn`` (nq rows; nq = T unless the mask is
    ``none``): the sums of the value numerators ``vc`` (T, m) over each row's support,
    exactly. ``qn`` None: no active score column (every visible key ties). None: leave the
    head to the dense code (scores beyond int64)."""
    if qn is None:
        return _uniform_exact(vc, mask, T)
    if qn.dtype == object or kc is None or kc.dtype == object:
        return None
    nq = qn.shape[0]
    m = vc.shape[1]
    mixed = np.zeros((nq, m), dtype=object)
    count = np.zeros(nq, dtype=np.int64)
    top_count = np.zeros(nq, dtype=np.int64)
    dense = np.zeros(nq, dtype=bool)
    small = vc.dtype != object and _maxabs(vc) * T < INT64_SAFE
    for r0, r1, ri, kj in exact_tops(qn, kc, mask):
        if ri is None:
            dense[r0:r1] = True
            continue
        b = r1 - r0
        sr, sk, tc = support_of_tops(ri, kj, rule, b)
        top_count[r0:r1] = tc
        scnt = np.bincount(sr, minlength=b)
        count[r0:r1] = scnt
        if sr.size == 0:
            continue
        nz = scnt > 0
        sstart = np.concatenate(([0], np.cumsum(scnt)[:-1]))[nz]
        vals = vc[sk] if small else vc[sk].astype(object)
        blk = np.zeros((b, m), dtype=object)
        blk[nz] = np.add.reduceat(vals, sstart, axis=0).astype(object)
        mixed[r0:r1] = blk
    return ExactHead(mixed, count, top_count, dense)


def exact_class_head(qn: np.ndarray, kc: np.ndarray, vc: np.ndarray, rule: str) -> ExactHead | None:
    """Mask ``none`` with few distinct key numerator rows (``CLASS_MAX``): the argmax set of
    a row is a union of key classes (all keys of a class score alike), so its support sum,
    size and ends come from per-class sums, counts and first/last positions. None: too
    many classes (or numerators past int64)."""
    T = kc.shape[0]
    if qn.dtype == object or kc.dtype == object:
        return None
    kf, kid = distinct_rows(kc)
    U = len(kf)
    if U > CLASS_MAX:
        return None
    ku = kc[kf]
    r = kc.shape[1]
    if _maxabs(qn) * _maxabs(ku) * max(r, 1) >= INT64_SAFE:
        return None
    S = qn.astype(np.int64) @ ku.T.astype(np.int64)  # (nq, U) exact
    top = S == S.max(axis=1, keepdims=True)
    cnt = np.bincount(kid, minlength=U)
    order = np.argsort(kid, kind="stable")
    ptr = np.concatenate(([0], np.cumsum(cnt)))
    firstpos, lastpos = order[ptr[:-1]], order[ptr[1:] - 1]
    nq, m = qn.shape[0], vc.shape[1]
    top_count = top.astype(np.int64) @ cnt
    v = vc if (vc.dtype != object and _maxabs(vc) * T < INT64_SAFE) else vc.astype(object)
    if rule == "average":
        csum = np.zeros((U, m), dtype=v.dtype)
        np.add.at(csum, kid, v)
        if csum.dtype != object and _maxabs(csum) * U < INT64_SAFE:
            mixed = (top.astype(np.int64) @ csum).astype(object)
        else:
            mixed = top.astype(object) @ csum.astype(object)
        count = top_count
    elif rule == "leftmost":
        mixed = v[np.min(np.where(top, firstpos[None, :], T), axis=1)].astype(object)
        count = np.ones(nq, dtype=np.int64)
    else:
        mixed = v[np.max(np.where(top, lastpos[None, :], -1), axis=1)].astype(object)
        count = np.ones(nq, dtype=np.int64)
    return ExactHead(
        np.asarray(mixed, dtype=object).reshape(nq, m), count, top_count, np.zeros(nq, dtype=bool)
    )


def _uniform_exact(vc: np.ndarray, mask: str, T: int) -> ExactHead:
    """Every visible key ties: the support is the visible range, its sum a prefix sum."""
    v = vc if (vc.dtype != object and _maxabs(vc) * T < INT64_SAFE) else vc.astype(object)
    zero = np.zeros((1, v.shape[1]), dtype=v.dtype)
    pre = np.concatenate([zero, np.cumsum(v, axis=0)], axis=0)  # pre[i] = Σ_{j<i} v_j
    total = pre[-1]
    i = np.arange(T)
    if mask == "none":
        s = np.broadcast_to(total, v.shape)
        cnt = np.full(T, T)
    elif mask == "leq":
        s, cnt = pre[1:], i + 1
    elif mask == "lt":
        s, cnt = pre[:-1], i
    elif mask == "geq":
        s, cnt = total[None, :] - pre[:-1], T - i
    else:  # gt
        s, cnt = total[None, :] - pre[1:], T - i - 1
    mixed = np.asarray(s).astype(object)
    cnt = np.asarray(cnt, dtype=np.int64)
    return ExactHead(mixed, cnt, cnt.copy(), np.zeros(T, dtype=bool))


# ---------------------------------------------------------------------------------------
# the dtype's softmax
# ---------------------------------------------------------------------------------------


@dataclass
class Limits:
    """What the dtype bound needs: unit roundoff, smallest subnormal, largest finite value,
    the exp underflow point."""

    name: str
    u: float
    eta: float
    big: float
    exp_zero: float


def limits(name: str, fi: Any) -> Limits:
    return Limits(
        name, float(fi.eps) / 2, float(fi.smallest_subnormal), float(fi.max), EXP_ZERO[name]
    )


def _is_bf16(dt: Any) -> bool:
    return np.dtype(dt).itemsize == 2 and dt is not np.float16


def _bf16_counts(dt: Any, T: int) -> np.ndarray:
    """c[k] = the bfloat16 left-to-right sum of k ones (k = 0..T): exact up to 256, then
    stuck (256 + 1 rounds to 256)."""
    out = np.zeros(T + 1, dtype=dt)
    one = np.ones((), dtype=dt)
    c = np.zeros((), dtype=dt)
    for k in range(1, T + 1):
        nxt = c + one
        out[k] = nxt
        if nxt == c:
            out[k:] = c
            break
        c = nxt
    return out


def uniform_dtype_head(
    dt: Any, v: np.ndarray, vzero: list[bool], mask: str, T: int, out: np.ndarray
) -> None:
    """A head with no active score column and 0 < τ < ∞ (every logit 0/τ = 0, weight 1 on
    every visible key): Z_i = the dtype sum of |V_i| ones, α_i = 1/Z_i, out_ic =
    numpy.sum_j(α_ij·v_jc). The last sum is formed densely per block (its products differ
    per row) with the dense code's own expression, minus its score, exponential and
    normalisation passes."""
    i = np.arange(T)
    cnt = {"none": np.full(T, T), "leq": i + 1, "lt": i, "geq": T - i, "gt": T - i - 1}[mask]
    name = np.dtype(dt).name
    if name in ("float32", "float64"):
        Z = cnt.astype(dt)  # integers below 2^24: every partial sum exact, in any order
    elif dt is np.float16:
        Z = cnt.astype(np.float32).astype(np.float16)  # a float32 sum, rounded once
    else:
        Z = _bf16_counts(dt, T)[cnt]
    one = np.ones((), dtype=dt)
    zero = np.zeros((), dtype=dt)
    with np.errstate(all="ignore"):
        alpha = np.where(cnt > 0, one / Z, zero)
    if mask == "none":  # every row sees every key with the same weight: one row
        for c in range(v.shape[1]):
            if not vzero[c]:
                out[:, c] = (alpha[0] * v[:, c]).sum()
        return
    for r0, r1 in row_blocks("none", T, 1 << 21):
        vis = visible_block(mask, np.arange(r0, r1), T)
        A = np.where(vis, alpha[r0:r1, None], zero)
        for c in range(v.shape[1]):
            if not vzero[c]:  # α is finite: the dense code skips an all-zero value column
                out[r0:r1, c] = (A * v[None, :, c]).sum(axis=1)


@dataclass
class _Chunk:
    """Candidate pairs of consecutive query rows [r0, r1), waiting to be emulated."""

    r0: int
    ri: list[np.ndarray]
    kj: list[np.ndarray]
    size: int = 0


class DtypeBound:
    """The dtype logit bound of one head (module docstring): for query row i and key j,
    L_ij ≤ bound(S̃_ij + G_ij), G the per-tile allowance of :func:`search`. ``rough`` rows
    (non-finite q, or a bound that could overflow the dtype) are left to the dense code."""

    def __init__(
        self, q: np.ndarray, k: np.ndarray, cols: list[int], tau: Any, lim: Limits
    ) -> None:
        self.tau = tau
        self.ftau = float(tau)
        self.lim = lim
        self.qc = np.ascontiguousarray(q[:, cols])
        self.kc = np.ascontiguousarray(k[:, cols])
        q64 = self.qc.astype(np.float64)
        self.k64 = self.kc.astype(np.float64)
        self.ok = bool(np.isfinite(self.k64).all()) and 0 < self.ftau < math.inf
        finite_q = np.isfinite(q64).all(axis=1)
        self.q64 = np.where(finite_q[:, None], q64, 0)
        r = self.r = len(cols)
        ub = self.ub = 2 * lim.u
        gam = r * ub / (1 - r * ub)
        gam64 = (r + 3) * 2.0**-53
        with np.errstate(all="ignore"):
            A = np.abs(self.q64) @ np.abs(self.k64).max(axis=0) * (1 + 2.0**-40)
            self.coef = (gam + gam64 * (1 + gam)) * (1 + 2.0**-30)
            self.const = np.full(len(q64), 2 * r * lim.eta * (1 + 2.0**-30))
            E = self.coef * A + self.const
            scale = max(1.0, 1 / self.ftau) if self.ok else math.inf
            over = (A * (1 + gam) + E) * scale * (1 + ub) * 1.01 >= lim.big
        self.rough = ~finite_q | over | ~np.isfinite(A)
        self.A = np.where(np.isfinite(A), A, 0)
        self.Emax = self.coef * self.A + self.const
        self.slack = (r + 3) * 2.0**-52 * self.A

    def logits(self, gi: np.ndarray, kj: np.ndarray) -> np.ndarray:
        """The dtype logits of pairs (query gi, key kj): the dense code's operations."""
        qc, kc = self.qc, self.kc
        with np.errstate(all="ignore"):
            S = qc[gi, 0] * kc[kj, 0]
            for c in range(1, self.r):
                S = S + qc[gi, c] * kc[kj, c]
            return S / self.tau

    def target(self, r0: int, r1: int, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(H, bad): S̃_ij + G_ij < H_i proves L_ij < Y_i (float64 Y per row)."""
        sl = slice(r0, r1)
        ub = self.ub
        with np.errstate(all="ignore"):
            Y = Y - self.lim.eta
            zmax = np.where(Y >= 0, Y / (1 + ub), Y / (1 - ub))
            H = self.ftau * zmax
            H -= (np.abs(H) + self.Emax[sl] + self.A[sl]) * 2.0**-40 + 2.0**-1000
        return H, self.rough[sl] | ~np.isfinite(H)

    def search(self, mask: str, target_of: Any) -> Any:
        return search(self.q64, self.k64, mask, self.slack, self.coef, self.const, target_of)


def dtype_head(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cols: list[int],
    tau: Any,
    mask: str,
    lim: Limits,
    vzero: list[bool],
    out: np.ndarray,
) -> np.ndarray:
    """The dtype head output (before O) of the query rows q (nq, ·) into ``out`` (nq, m);
    returns a boolean (nq,) of the rows it could not cover (the caller runs the dense code
    there). k, v: (T, ·) dtype arrays; ``cols`` the active score columns (not empty); nq = T
    unless the mask is ``none``."""
    nq = q.shape[0]
    T = k.shape[0]
    need_dense = np.zeros(nq, dtype=bool)
    bd = DtypeBound(q, k, cols, tau, lim)
    if not bd.ok or not np.isfinite(v).all():
        need_dense[:] = True
        return need_dense
    pos_count = (~np.signbit(v.astype(np.float32))).sum(axis=0)  # +signed keys per column
    chunk = _Chunk(0, [], [])

    def flush(r1: int) -> None:
        if chunk.r0 < r1:
            gi = np.concatenate(chunk.ri) if chunk.ri else np.zeros(0, dtype=np.int64)
            kj = np.concatenate(chunk.kj) if chunk.kj else np.zeros(0, dtype=np.int64)
            L = bd.logits(gi, kj)
            r0 = chunk.r0
            softmax_rows(L, gi - r0, kj, r0, r1, T, v, vzero, pos_count, out, need_dense)
        chunk.r0, chunk.ri, chunk.kj, chunk.size = r1, [], [], 0

    def target_of(r0: int, r1: int, seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # L° = the dtype logit of the seed key: a lower bound on the row maximum
        Lo = bd.logits(np.arange(r0, r1), seed).astype(np.float64)
        return bd.target(r0, r1, Lo + lim.exp_zero)

    with np.errstate(all="ignore"):
        for f in bd.search(mask, target_of):
            need_dense[f.r0 : f.r1] |= f.bad & f.has
            if f.ri.size > max(FILTER_ENTRIES // DENSE_SHARE, T) and f.r1 - f.r0 > 1:
                need_dense[f.r0 : f.r1] |= f.has
                continue
            chunk.ri.append(f.ri + f.r0)
            chunk.kj.append(f.kj)
            chunk.size += f.ri.size
            if chunk.size >= CHUNK:
                flush(f.r1)
    flush(nq)
    return need_dense


def _visible_counts(mask: str, T: int) -> np.ndarray:
    i = np.arange(T)
    return {"none": np.full(T, T), "leq": i + 1, "lt": i, "geq": T - i, "gt": T - i - 1}[mask]


def _uniform_events(
    dt: Any, tau: Any, mask: str, T: int, qn: np.ndarray | None, kn: np.ndarray | None
) -> np.ndarray:
    """:func:`event_rows` for a head whose dtype logits are all 0/τ = 0: absorption wherever
    the exact argmax set is not the whole visible range, underflow where 1/Z is 0."""
    ftau = float(tau)
    if not 0 < ftau < math.inf:
        return np.ones(T, dtype=bool)
    nvis = _visible_counts(mask, T)
    if qn is None:  # every visible key ties exactly too
        tc = nvis
    else:
        if qn.dtype == object or kn is None or kn.dtype == object:
            return np.ones(T, dtype=bool)
        tc = np.zeros(T, dtype=np.int64)
        flag = np.zeros(T, dtype=bool)
        for r0, r1, ri, _ in exact_tops(qn, kn, mask):
            if ri is None:
                flag[r0:r1] = True
            else:
                tc[r0:r1] = np.bincount(ri, minlength=r1 - r0)
        return flag | (tc < nvis) | _uniform_zero_weight(dt, nvis, tc)
    return _uniform_zero_weight(dt, nvis, tc)


def _uniform_zero_weight(dt: Any, nvis: np.ndarray, tc: np.ndarray) -> np.ndarray:
    """Rows of an all-zero-logit head whose weight 1/Z is 0 with ≥ 2 keys tied."""
    name = np.dtype(dt).name
    if name in ("float32", "float64"):
        Z = nvis.astype(dt)
    elif dt is np.float16:
        Z = nvis.astype(np.float32).astype(np.float16)
    else:
        Z = _bf16_counts(dt, len(nvis))[nvis]
    with np.errstate(all="ignore"):
        a = np.ones((), dtype=dt) / Z
    return (tc > 1) & (a.astype(np.float64) == 0)


def event_rows(
    q: np.ndarray,
    k: np.ndarray,
    cols: list[int],
    tau: Any,
    mask: str,
    lim: Limits,
    qn: np.ndarray | None,
    kn: np.ndarray | None,
) -> np.ndarray:
    """The query rows (a superset) where the dense diagnosis of a head can find an event:
    a non-finite visible logit, a visible key outside the exact argmax set (from the exact
    numerators ``qn``/``kn``) whose logit reaches the smallest logit inside it
    (absorption), or an argmax set of ≥ 2 keys one of which is more than 1 below the row's
    maximum logit (only such a key can get weight 0: otherwise α ≥ e⁻¹/Z > 0). ``qn`` None:
    the head has no exact score column (every visible key is in the argmax set)."""
    nq, T = q.shape[0], k.shape[0]
    flag = np.zeros(nq, dtype=bool)
    if not cols:
        return _uniform_events(q.dtype.type, tau, mask, T, qn, kn)
    bd = DtypeBound(q, k, cols, tau, lim)
    if not bd.ok or qn is None or qn.dtype == object or kn.dtype == object:
        flag[:] = True
        return flag
    flag |= bd.rough
    tri, tkj = [], []
    for r0, r1, ri, kj in exact_tops(qn, kn, mask):
        if ri is None:
            flag[r0:r1] = True
            continue
        tri.append(ri + r0)
        tkj.append(kj)
    gi = np.concatenate(tri) if tri else np.zeros(0, dtype=np.int64)
    kj = np.concatenate(tkj) if tkj else np.zeros(0, dtype=np.int64)
    Lt = bd.logits(gi, kj).astype(np.float64)
    fin = np.isfinite(Lt)
    flag[gi[~fin]] = True
    start, cnt = _segments(gi, nq)
    tmin = _seg_reduce(np.minimum, np.where(fin, Lt, np.inf), start, cnt)
    tmin = np.where(cnt > 0, tmin, np.inf)
    topkey = gi * (T + 1) + kj  # sorted

    def target_of(r0: int, r1: int, seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return bd.target(r0, r1, tmin[r0:r1])

    with np.errstate(all="ignore"):
        for f in bd.search(mask, target_of):
            b = f.r1 - f.r0
            flag[f.r0 : f.r1] |= f.bad & f.has
            if f.ri.size > max(FILTER_ENTRIES // DENSE_SHARE, T) and b > 1:
                flag[f.r0 : f.r1] |= f.has
                continue
            g = f.ri + f.r0
            L = bd.logits(g, f.kj).astype(np.float64)
            nf = ~np.isfinite(L)
            flag[g[nf]] = True
            pos = np.searchsorted(topkey, g * (T + 1) + f.kj)
            is_top = (pos < topkey.size) & (
                topkey[np.minimum(pos, topkey.size - 1)] == g * (T + 1) + f.kj
            )
            flag[g[~is_top & (L >= tmin[g])]] = True
            # the row maximum lies among these keys (it is ≥ every top logit ≥ tmin)
            s_, c_ = _segments(f.ri, b)
            mx = _seg_reduce(np.maximum, np.where(nf, -np.inf, L), s_, c_)
            multi = (cnt[f.r0 : f.r1] > 1) & (c_ > 0)
            flag[f.r0 : f.r1] |= multi & (tmin[f.r0 : f.r1] < mx - 1)
    return flag


def _emulate(
    qc: np.ndarray,
    kc: np.ndarray,
    v: np.ndarray,
    tau: Any,
    vzero: list[bool],
    pos_count: np.ndarray,
    r0: int,
    r1: int,
    gi: np.ndarray,
    kj: np.ndarray,
    T: int,
    out: np.ndarray,
    need_dense: np.ndarray,
) -> None:
    """The dtype logits of the candidate pairs (gi, kj) of rows [r0, r1), sorted, by the
    dense code's operations, then :func:`softmax_rows`."""
    r = qc.shape[1]
    with np.errstate(all="ignore"):
        S = qc[gi, 0] * kc[kj, 0]
        for c in range(1, r):
            S = S + qc[gi, c] * kc[kj, c]
        L = S / tau
    softmax_rows(L, gi - r0, kj, r0, r1, T, v, vzero, pos_count, out, need_dense)


def softmax_rows(
    L: np.ndarray,
    ri: np.ndarray,
    kj: np.ndarray,
    r0: int,
    r1: int,
    T: int,
    v: np.ndarray,
    vzero: list[bool],
    pos_count: np.ndarray,
    out: np.ndarray,
    need_dense: np.ndarray,
) -> None:
    """The dtype softmax of rows [r0, r1) from the logits L of their candidate pairs (ri
    local, kj), sorted: the dense code's operations on those pairs, its sums by
    :func:`row_sums`. Rows without a pair see no key (α = 0); rows with a non-finite logit
    are flagged for the dense code."""
    dt = L.dtype.type
    b = r1 - r0
    fin = np.isfinite(L.astype(np.float64))
    if not fin.all():  # the dense code decides (inf − inf, NaN rows)
        badrows = np.unique(ri[~fin])
        need_dense[r0 + badrows] = True
        ok = ~np.isin(ri, badrows)
        ri, kj, L = ri[ok], kj[ok], L[ok]
    start, cnt = _segments(ri, b)
    mx = _seg_reduce(np.maximum, L, start, cnt)
    with np.errstate(all="ignore"):
        e = np.exp(L - mx[ri])
        Z = row_sums(dt, T, ri, kj, e, b)
        alpha = e / Z[ri]
    if not np.isfinite(alpha.astype(np.float64)).all():
        need_dense[r0:r1] |= cnt > 0
        return
    bf = _is_bf16(dt)
    for c in range(v.shape[1]):
        if vzero[c]:
            continue  # α is finite: the dense code skips an all-zero value column
        vj = v[kj, c]
        with np.errstate(all="ignore"):
            prod = alpha * vj
        rest_neg = None
        if bf:  # every element not passed is +0·v_j: −0 iff v_j carries a sign
            posc = np.bincount(ri, weights=~np.signbit(vj.astype(np.float32)), minlength=b)
            rest_neg = posc.astype(np.int64) == pos_count[c]
        out[r0:r1, c] = row_sums(dt, T, ri, kj, prod, b, rest_neg)


# ---------------------------------------------------------------------------------------
# few distinct vectors (low-precision dtypes): a table of logits, no bound needed
# ---------------------------------------------------------------------------------------

TABLE_KEYS = 1 << 15  # distinct key vectors of the logit table, at most …
TABLE_SHARE = 4  # … and at most 1/TABLE_SHARE of the keys


def distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each distinct row's first occurrence, id of every row), by bits (−0 and +0
    differ; so do NaN payloads)."""
    a = np.ascontiguousarray(a)
    if a.size == 0 or a.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(a.shape[0], dtype=np.int64)
    key = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(-1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def distinct_counts(q: np.ndarray, k: np.ndarray, cols: list[int]) -> tuple[int, int]:
    """How many distinct query and key vectors (bits, active columns) a head has."""
    return len(distinct_rows(q[:, cols])[0]), len(distinct_rows(k[:, cols])[0])


def table_head(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cols: list[int],
    tau: Any,
    mask: str,
    lim: Limits,
    vzero: list[bool],
    out: np.ndarray,
) -> np.ndarray | None:
    """The dtype head from the logits of distinct key vectors: a logit depends on the bits
    of q_i and k_j only, so per block of query rows the logits of the block's distinct
    queries against the distinct keys are every logit the dense code forms. The row maximum
    over the visible keys is a prefix maximum (keys ordered by first visibility); the keys
    whose logit is ≥ max + X₀ (``EXP_ZERO``: below it the weight is exactly +0) are the
    candidates. No error bound is involved. None: too many distinct keys (the caller uses
    the filter)."""
    nq, T = q.shape[0], k.shape[0]
    kf_, kid = distinct_rows(k[:, cols])
    Uk = len(kf_)
    if Uk > TABLE_KEYS or Uk * TABLE_SHARE > T:
        return None
    need_dense = np.zeros(nq, dtype=bool)
    if not np.isfinite(v).all():
        need_dense[:] = True
        return need_dense
    qf_, qid = distinct_rows(q[:, cols])
    qu = np.ascontiguousarray(q[qf_][:, cols])
    # positions of every distinct key, sorted (CSR); order keys by when they become visible
    order = np.argsort(kid, kind="stable")
    ptr = np.concatenate(([0], np.cumsum(np.bincount(kid, minlength=Uk))))
    kpos = order  # positions grouped by key id, ascending within a key
    first = kpos[ptr[:-1]]
    last = kpos[ptr[1:] - 1]
    i = np.arange(nq)
    if mask in ("leq", "lt"):
        perm = np.argsort(first, kind="stable")
        nvis = np.searchsorted(first[perm], i, side="right" if mask == "leq" else "left")
    elif mask in ("geq", "gt"):
        perm = np.argsort(-last, kind="stable")
        nvis = np.searchsorted(-last[perm], -i, side="right" if mask == "geq" else "left")
    else:
        perm = np.arange(Uk)
        nvis = np.full(nq, Uk)
    rank = np.empty(Uk, dtype=np.int64)
    rank[perm] = np.arange(Uk)
    ku = np.ascontiguousarray(k[kf_[perm]][:, cols])  # distinct keys in visibility order
    has = nvis > 0
    col = np.maximum(nvis - 1, 0)
    pos_count = (~np.signbit(v.astype(np.float32))).sum(axis=0)
    ckey = kid[order] * (T + 1) + kpos
    for r0, r1 in row_blocks("none", Uk, FILTER_ENTRIES, nq=nq):
        ub, inv = np.unique(qid[r0:r1], return_inverse=True)
        qb = qu[ub]
        with np.errstate(all="ignore"):
            S = qb[:, None, 0] * ku[None, :, 0]
            for c in range(1, len(cols)):
                S = S + qb[:, None, c] * ku[None, :, c]
            Lb = S / tau  # (distinct queries of the block, Uk): the dense code's logits
        LP = Lb.astype(np.float64)
        fin = np.isfinite(LP)
        bad = np.maximum.accumulate(~fin, axis=1)  # a non-finite visible logit: dense code
        with np.errstate(all="ignore"):
            PM = np.maximum.accumulate(np.where(fin, LP, -np.inf), axis=1)
        cb = col[r0:r1]
        hb = has[r0:r1]
        need_dense[r0:r1] |= hb & bad[inv, cb]
        mx = np.where(hb, PM[inv, cb], np.inf)
        lo = mx + lim.exp_zero - np.abs(mx) * 2.0**-50 - 2.0**-1000
        keep = (LP[inv] >= lo[:, None]) & (np.arange(Uk)[None, :] < nvis[r0:r1, None])
        keep &= (hb & ~need_dense[r0:r1])[:, None]
        ri, ci = np.nonzero(keep)
        u = perm[ci]
        # expand every (row, key id) to the key's positions the row can see
        lo_, hi_ = ptr[u], ptr[u + 1]
        gi = ri + r0
        if mask in ("leq", "lt"):
            side = "right" if mask == "leq" else "left"
            n_ = np.searchsorted(ckey, u * (T + 1) + gi, side=side) - lo_
            base = lo_
        elif mask in ("geq", "gt"):
            side = "left" if mask == "geq" else "right"
            base = np.searchsorted(ckey, u * (T + 1) + gi, side=side)
            n_ = hi_ - base
        else:
            n_ = hi_ - lo_
            base = lo_
        rr = np.repeat(ri, n_)
        idx = np.repeat(base - np.concatenate(([0], np.cumsum(n_)[:-1])), n_)
        kj = kpos[idx + np.arange(idx.size)]
        srt = np.lexsort((kj, rr))
        rr, kj = rr[srt], kj[srt]
        L = Lb[inv[rr], rank[kid[kj]]]
        softmax_rows(L, rr, kj, r0, r1, T, v, vzero, pos_count, out, need_dense)
    return need_dense


# ---------------------------------------------------------------------------------------
# mask none, few distinct (key, value) vectors: every row is a pattern of classes
# ---------------------------------------------------------------------------------------

CLASS_MAX = 64  # distinct (key, value) vectors of a head taken as classes, at most


def class_head(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cols: list[int],
    tau: Any,
    vzero: list[bool],
    out: np.ndarray,
) -> np.ndarray | None:
    """A head with mask ``none`` whose keys and values take few distinct bit patterns
    (``CLASS_MAX``; e.g. compare heads keyed on BOS only): every key of a class gets the
    same logit, weight and term, so a row of the dense code is a fixed pattern of class
    values, summed exactly by :func:`class_row_sums`; rows with the same logit bits share
    their outputs. No bound and no candidate is involved, and rows with every key weighted
    (dense attention) cost O(T/64) instead of O(T). None: too many classes."""
    nq = q.shape[0]
    cf, cid = distinct_rows(np.concatenate([k[:, cols], v], axis=1))
    if len(cf) > CLASS_MAX:
        return None
    need = np.zeros(nq, dtype=bool)
    if not np.isfinite(v).all():
        need[:] = True
        return need
    dt = q.dtype.type
    ku = np.ascontiguousarray(k[cf][:, cols])
    vu = v[cf]
    qc = np.ascontiguousarray(q[:, cols])
    for r0, r1 in row_blocks("none", len(cf), FILTER_ENTRIES // 4, nq=nq):
        with np.errstate(all="ignore"):
            S = qc[r0:r1, None, 0] * ku[None, :, 0]
            for c in range(1, len(cols)):
                S = S + qc[r0:r1, None, c] * ku[None, :, c]
            L = S / tau  # (b, classes): the dense code's logits of every key, by class
        fin = np.isfinite(L.astype(np.float64)).all(axis=1)
        need[r0:r1] |= ~fin
        lf, linv = distinct_rows(L)
        Ld = L[lf]
        with np.errstate(all="ignore"):
            e = np.exp(Ld - Ld.max(axis=1)[:, None])  # every class is present: the max
            Z = class_row_sums(dt, e, cid)
            alpha = e / Z[:, None]
        afin = np.isfinite(alpha.astype(np.float64)).all(axis=1)
        need[r0:r1] |= ~afin[linv]
        for c in range(v.shape[1]):
            if vzero[c]:
                continue  # α is finite: the dense code skips an all-zero value column
            with np.errstate(all="ignore"):
                p = alpha * vu[None, :, c]
                out[r0:r1, c] = class_row_sums(dt, p, cid)[linv]
    return need
