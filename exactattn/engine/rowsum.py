"""``numpy.sum`` of long rows that are zero almost everywhere, bit for bit, from their nonzeros.

Why: the dtype emulation (:mod:`exactattn.engine.dtypes`) defines a head's softmax sums as
``numpy.sum`` over all T keys of a row. At T = 65,538 a row of softmax weights is zero except
at a few hundred keys, so forming the dense row costs T² per head; this module gives the same
bits from the nonzero entries alone. The rules it reproduces (numpy 2.x, ml_dtypes; checked
against ``numpy.sum`` by tests/engine/test_row_sums_same_bits_as_numpy.py on random and
adversarial rows):

* float32 / float64: ``0 + pairwise(row)`` in the dtype. ``pairwise`` is numpy's
  ``pairwise_sum``: a block of n < 8 is summed left to right from 0; 8 ≤ n ≤ 128 with eight
  accumulators (r_j = a_j, r_j += a_{8k+j}, then ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the
  n mod 8 remaining elements left to right); n > 128 splits at n2 = n/2 − (n/2 mod 8) and adds
  the two halves.
* float16: the same in float32 accumulators (each element widened exactly), rounded to
  float16 once at the end.
* bfloat16 (ml_dtypes): left to right from the first element, rounding every step.

Zeros are exact identities of IEEE addition (x + ±0 = x for x ≠ 0), so a tree or a sequence
restricted to the nonzero entries gives the same nonzero value. Only a zero *result* can
depend on the zeros, through its sign: ``0 + …`` makes it +0 for float16/32/64; bfloat16's
left-to-right sum is −0 exactly when every element of the row is −0 (the caller says whether
the elements it does not pass are all −0).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

PW_BLOCKSIZE = 128


@lru_cache(maxsize=64)
def pairwise_tree(T: int) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, ...]]]:
    """numpy's pairwise summation tree over a row of length T.

    Returns (leaf starts, leaf sizes, levels): the leaves in row order, and the internal
    nodes grouped by height as (parent, left, right) index arrays into one node numbering
    (leaves 0..L−1, internal nodes L..); the last node is the root.
    """
    starts: list[int] = []
    sizes: list[int] = []
    heights: dict[int, int] = {}
    pending: list[tuple[int, int, int]] = []

    def build(s: int, n: int) -> int:
        if n <= PW_BLOCKSIZE:
            starts.append(s)
            sizes.append(n)
            node = -len(starts)  # leaves numbered later; negative marks a leaf
            heights[node] = 0
            return node
        n2 = n // 2
        n2 -= n2 % 8
        a = build(s, n2)
        b = build(s + n2, n - n2)
        node = len(pending) + 1
        pending.append((node, a, b))
        heights[node] = max(heights[a], heights[b]) + 1
        return node

    build(0, T)
    L = len(starts)

    def idx(node: int) -> int:
        return -node - 1 if node < 0 else L + node - 1

    by_height: dict[int, list[tuple[int, int, int]]] = {}
    for node, a, b in pending:
        by_height.setdefault(heights[node], []).append((idx(node), idx(a), idx(b)))
    levels = [
        tuple(np.array(col, dtype=np.int64) for col in zip(*by_height[h], strict=True))
        for h in sorted(by_height)
    ]
    return np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int64), levels


def acc_type(dt: Any) -> Any:
    """The type numpy's sum accumulates a row of ``dt`` in (float32 for float16)."""
    return np.float32 if dt is np.float16 else dt


def _segment_starts(keys: np.ndarray) -> np.ndarray:
    """Indices where a sorted key array changes value (the first index included)."""
    if keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))


def _fold(groups: np.ndarray, vals: np.ndarray, ngroups: int, acc: Any) -> np.ndarray:
    """Left-to-right sums of ``vals`` per group (groups sorted, order within a group kept),
    from 0, in ``acc`` arithmetic: round k adds every group's k-th element."""
    out = np.zeros(ngroups, dtype=acc)
    if groups.size == 0:
        return out
    first = _segment_starts(groups)
    rank = np.arange(groups.size) - np.repeat(first, np.diff(np.append(first, groups.size)))
    for k in range(int(rank.max()) + 1):
        sel = rank == k
        g = groups[sel]
        out[g] = out[g] + vals[sel]
    return out


def pairwise_row_sums(
    dt: Any, T: int, rows: np.ndarray, pos: np.ndarray, vals: np.ndarray, nrows: int
) -> np.ndarray:
    """``numpy.sum`` (float16/32/64) of ``nrows`` rows of length T whose entries are ``vals``
    at (``rows``, ``pos``) and zero elsewhere; (rows, pos) sorted, each pair once."""
    acc = acc_type(dt)
    out = np.zeros(nrows, dtype=acc)
    v = vals.astype(acc)
    nz = v != 0
    if not nz.all():
        rows, pos, v = rows[nz], pos[nz], v[nz]
    if rows.size:
        starts, sizes, levels = pairwise_tree(T)
        leaf = np.searchsorted(starts, pos, side="right") - 1
        off = pos - starts[leaf]
        n = sizes[leaf]
        body = n - n % 8
        # n < 8 (only when T < 8): the whole leaf is the left-to-right "rest"
        in_acc = (n >= 8) & (off < body)
        rl = rows * len(starts) + leaf  # (row, leaf) code, sorted
        codes, inv = np.unique(rl, return_inverse=True)
        G = codes.size
        # the eight accumulators of every (row, leaf): r_j folded over its elements in order
        sel = np.flatnonzero(in_acc)
        gj = inv[sel] * 8 + off[sel] % 8
        order = np.argsort(gj, kind="stable")
        r = _fold(gj[order], v[sel][order], G * 8, acc).reshape(G, 8)
        res = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + (
            (r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7])
        )
        rest = np.flatnonzero(~in_acc)
        if rest.size:  # added one at a time: res + t1 + t2 …, not res + (t1 + t2 …)
            res = _add_rest(res, inv[rest], v[rest], acc)
        lrow = codes // len(starts)
        lleaf = codes % len(starts)
        out = _tree(out, lrow, lleaf, res, len(starts), levels, acc)
    result = (np.zeros((), dtype=acc) + out).astype(dt)  # numpy's 0 + pairwise(row)
    return result


def _add_rest(res: np.ndarray, groups: np.ndarray, vals: np.ndarray, acc: Any) -> np.ndarray:
    """res[g] += each of group g's values in order (groups sorted)."""
    res = res.copy()
    first = _segment_starts(groups)
    rank = np.arange(groups.size) - np.repeat(first, np.diff(np.append(first, groups.size)))
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        sel = rank == k
        g = groups[sel]
        res[g] = res[g] + vals[sel]
    return res


def _tree(
    out: np.ndarray,
    lrow: np.ndarray,
    lleaf: np.ndarray,
    lval: np.ndarray,
    L: int,
    levels: list[tuple[np.ndarray, ...]],
    acc: Any,
) -> np.ndarray:
    """Combine per-(row, leaf) sums up the pairwise tree into ``out`` (rows)."""
    rows_u, rinv, cnt = np.unique(lrow, return_inverse=True, return_counts=True)
    # rows with nonzeros in one leaf: that leaf's value; in two: their sum (either order)
    one = cnt[rinv] == 1
    out[lrow[one]] = lval[one]
    two_rows = rows_u[cnt == 2]
    if two_rows.size:
        m = np.isin(lrow, two_rows)
        a = lval[m][0::2]
        b = lval[m][1::2]
        out[lrow[m][0::2]] = a + b
    many = rows_u[cnt > 2]
    if many.size:
        m = np.isin(lrow, many)
        sub = np.searchsorted(many, lrow[m])
        nodes = np.zeros((many.size, L + sum(len(p) for p, _, _ in levels)), dtype=acc)
        nodes[sub, lleaf[m]] = lval[m]
        for parent, left, right in levels:
            nodes[:, parent] = nodes[:, left] + nodes[:, right]
        out[many] = nodes[:, -1]
    return out


def sequential_row_sums(
    dt: Any,
    rows: np.ndarray,
    vals: np.ndarray,
    nrows: int,
    rest_negzero: np.ndarray | None = None,
) -> np.ndarray:
    """``numpy.sum`` of bfloat16 rows (left to right, rounding every step) whose entries are
    ``vals`` at ``rows`` (sorted, each row's entries in key order) and zero elsewhere.
    ``rest_negzero[r]``: every element of row r that is not passed is −0 (then a row of
    zeros sums to −0 iff its passed entries are −0 too).

    Rows are ordered by their number of nonzero entries, longest first, so that step k
    (adding every row's k-th entry to its running sum) works on a prefix of them."""
    out = np.zeros(nrows, dtype=dt)
    nz = vals != 0
    if nz.any():
        g, v = rows[nz], vals[nz]
        first = _segment_starts(g)
        cnt = np.diff(np.append(first, g.size))
        order = np.argsort(-cnt, kind="stable")
        first_o, cnt_o = first[order], cnt[order]
        acc = v[first_o].copy()
        active = np.searchsorted(-cnt_o, -np.arange(1, int(cnt_o[0]) + 1), side="right")
        for k in range(1, int(cnt_o[0])):
            m = int(active[k])  # rows with more than k entries
            acc[:m] = acc[:m] + v[first_o[:m] + k]
        out[g[first_o]] = acc
    if rest_negzero is not None and rest_negzero.any():
        # rows without a nonzero entry: −0 iff every element is −0
        has_nz = np.zeros(nrows, dtype=bool)
        has_nz[rows[nz]] = True
        pos_zero = np.zeros(nrows, dtype=bool)  # some passed entry is +0
        pz = (~nz) & ~np.signbit(vals.astype(np.float32))
        pos_zero[rows[pz]] = True
        neg = rest_negzero & ~has_nz & ~pos_zero
        out[neg] = -np.zeros((), dtype=dt)
    return out


DENSE_ROW = 16  # a row with ≥ T/DENSE_ROW entries is summed densely by numpy itself
DENSE_BLOCK = 1 << 22  # elements of one dense block


def row_sums(
    dt: Any,
    T: int,
    rows: np.ndarray,
    pos: np.ndarray,
    vals: np.ndarray,
    nrows: int,
    rest_negzero: np.ndarray | None = None,
) -> np.ndarray:
    """``numpy.sum`` of rows of length T in dtype ``dt`` from their entries (see the module
    docstring); ``rest_negzero`` matters for bfloat16 only. Rows with many entries are
    formed densely and summed by numpy (the definition itself); the others are emulated."""
    cnt = np.bincount(rows, minlength=nrows) if rows.size else np.zeros(nrows, dtype=np.int64)
    heavy = cnt >= max(64, T // DENSE_ROW)
    bf = np.dtype(dt).itemsize == 2 and dt is not np.float16
    if not heavy.any():
        if bf:
            return sequential_row_sums(dt, rows, vals, nrows, rest_negzero)
        return pairwise_row_sums(dt, T, rows, pos, vals, nrows)
    light = ~heavy[rows]
    if bf:
        out = sequential_row_sums(dt, rows[light], vals[light], nrows, rest_negzero)
    else:
        out = pairwise_row_sums(dt, T, rows[light], pos[light], vals[light], nrows)
    hr = np.flatnonzero(heavy)
    step = max(1, DENSE_BLOCK // max(T, 1))
    neg = -np.zeros((), dtype=dt)
    for s0 in range(0, hr.size, step):
        part = hr[s0 : s0 + step]
        dense = np.zeros((part.size, T), dtype=dt)
        if bf and rest_negzero is not None:
            dense[rest_negzero[part]] = neg  # only whether every element is −0 matters
        local = np.full(nrows, -1, dtype=np.int64)
        local[part] = np.arange(part.size)
        sel = local[rows] >= 0
        dense[local[rows[sel]], pos[sel]] = vals[sel]
        out[part] = dense.sum(axis=1)
    return out


# ---------------------------------------------------------------------------------------
# rows made of a few classes: every row has the same class at each position
# ---------------------------------------------------------------------------------------


def class_row_sums(dt: Any, vals: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """``numpy.sum`` of the rows r of length T = len(cls) whose element j is
    ``vals[r, cls[j]]`` — one value per class and row, a class pattern shared by the rows.

    float16/32/64: numpy's pairwise tree, each leaf simulated once per distinct class
    sequence (vectorised over the rows), the internal nodes combined level by level.
    bfloat16: left to right over the runs of equal classes; a run stops as soon as adding
    its value changes no row (the rest of the run adds nothing), and a zero result takes
    the sign numpy gives it (−0 iff every element is −0)."""
    if np.dtype(dt).itemsize == 2 and dt is not np.float16:
        return _class_sequential(dt, vals, cls)
    acc = acc_type(dt)
    T = len(cls)
    R = vals.shape[0]
    v = vals.astype(acc)
    starts, sizes, levels = pairwise_tree(T)
    L = len(starts)
    nodes = np.zeros((R, L + sum(len(p) for p, _, _ in levels)), dtype=acc)
    sig: dict[bytes, list[int]] = {}
    for li, (s0, n) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        sig.setdefault(cls[s0 : s0 + n].tobytes(), []).append(li)
    for leaves in sig.values():
        s0, n = int(starts[leaves[0]]), int(sizes[leaves[0]])
        nodes[:, leaves] = _leaf_sum(v, cls[s0 : s0 + n], acc)[:, None]
    for parent, left, right in levels:
        nodes[:, parent] = nodes[:, left] + nodes[:, right]
    return (np.zeros((), dtype=acc) + nodes[:, -1]).astype(dt)


def _leaf_sum(v: np.ndarray, c: np.ndarray, acc: Any) -> np.ndarray:
    """numpy's pairwise_sum of one leaf (its class sequence ``c``), for every row of v."""
    n = len(c)
    if n < 8:
        res = np.zeros(v.shape[0], dtype=acc)
        for i in range(n):
            res = res + v[:, c[i]]
        return res
    r = [v[:, c[j]].copy() for j in range(8)]
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] = r[j] + v[:, c[i + j]]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res = res + v[:, c[i]]
        i += 1
    return res


def _class_sequential(dt: Any, vals: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """bfloat16 left-to-right sums over runs of equal classes (see class_row_sums)."""
    T = len(cls)
    cut = np.flatnonzero(np.diff(cls)) + 1
    run_start = np.concatenate(([0], cut))
    run_len = np.diff(np.append(run_start, T))
    acc = vals[:, cls[0]].copy()
    first = True
    for s0, m in zip(run_start.tolist(), run_len.tolist(), strict=True):
        col = vals[:, cls[s0]]
        steps = m - 1 if first else m
        first = False
        if not col.any():
            continue  # adding ±0 leaves a nonzero sum as it is (zero sums: below)
        for _ in range(steps):
            nxt = acc + col
            if np.array_equal(nxt.view(np.uint16), acc.view(np.uint16)):
                break  # every row absorbs this value: the rest of the run adds nothing
            acc = nxt
    # a zero result is −0 exactly when every element of the row is −0
    present = np.zeros(vals.shape[1], dtype=bool)
    present[np.unique(cls)] = True
    v32 = vals.astype(np.float32)
    all_neg0 = ((v32 == 0) & np.signbit(v32) | ~present[None, :]).all(axis=1)
    zero = acc.astype(np.float32) == 0
    acc[zero] = np.zeros((), dtype=dt)
    acc[zero & all_neg0] = -np.zeros((), dtype=dt)
    return acc
