"""Exact hard meaning of ONE long input, streaming: memory O(n·d), blocked over query rows.

Why a separate evaluator: the batched engine (:mod:`exactattn.engine.hard`) keeps the (N, T, T)
score tensor and one common denominator per array; at n = 65,536 the score matrix alone
is 4·10⁹ entries and lcm(1..T) has thousands of digits. Here every activation row has
its own denominator (``RowRat``), rows are reduced by their gcd after every step, and the
score matrix is never stored: query rows are processed in blocks of ``B`` against all
keys, and only what later layers need (the activations) is kept.

Comparisons stay exact: for one query row i, s_ij = (q̂_i · k̂_j) / (den_i · L) with L
the lcm of the (reduced) key denominators, so the argmax set is read off integer dot
products. Coordinates that the query never reads are dropped before L is formed (a
score-form head has K = I, and the identity would otherwise import the denominators of
every coordinate). Products use :func:`exactattn.engine.ratarray.int_matmul` (float64 BLAS when
a bound proves it exact, multi-limb otherwise, Python integers past 2^62): exact always.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.hard import (
    CompiledFFN,
    CompiledHead,
    CompiledModel,
    tie_support,
    visible_block,
)
from exactattn.engine.ratarray import INT64_SAFE, RatArray, int_matmul
from exactattn.engine.sparsehead import exact_class_head, exact_head
from exactattn.model import AcceptOutput, ArgmaxOutput, Model

BLOCK_ENTRIES = 1 << 21  # query-block rows × keys per score block (~16 MB as int64)
SPARSE_MIN_T = 512  # from this length on, argmax sets from candidate keys (engine/sparsehead)


def _maxabs(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    return int(max(abs(int(a.max())), abs(int(a.min()))))


def _obj(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == object else a.astype(object)


def _narrow(a: np.ndarray) -> np.ndarray:
    if a.dtype == object and (a.size == 0 or _maxabs(a) < INT64_SAFE):
        return a.astype(np.int64)
    return a


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact elementwise product (broadcasting), int64 when a bound allows."""
    if a.dtype != object and b.dtype != object and _maxabs(a) * _maxabs(b) < INT64_SAFE:
        return a * b
    return _narrow(_obj(a) * _obj(b))


def _addn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype != object and b.dtype != object and _maxabs(a) + _maxabs(b) < INT64_SAFE:
        return a + b
    return _narrow(_obj(a) + _obj(b))


@dataclass
class RowRat:
    """Rows ``num[i] / den[i]``: integer numerators (T, c), positive denominators (T,)."""

    num: np.ndarray
    den: np.ndarray

    def reduced(self) -> RowRat:
        """Divide each row by gcd(row numerators, row denominator)."""
        num, den = self.num, self.den
        if num.dtype != object and den.dtype != object:
            g = np.gcd.reduce(np.concatenate([num, den[:, None]], axis=1), axis=1)
            g = np.maximum(g, 1)
            return RowRat(num // g[:, None], den // g)
        nn = _obj(num)
        dd = _obj(den)
        if len(dd) == 0:
            return RowRat(_narrow(nn), _narrow(dd))
        g = np.gcd.reduce(np.concatenate([nn, dd[:, None]], axis=1), axis=1)  # math.gcd
        g = np.where(g == 0, 1, g)
        return RowRat(_narrow(nn // g[:, None]), _narrow(dd // g))

    def fraction(self, i: int, c: int) -> Fraction:
        return Fraction(int(self.num[i, c]), int(self.den[i]))

    def row(self, i: int) -> list[Fraction]:
        return [self.fraction(i, c) for c in range(self.num.shape[1])]

    def columns(self, cols: Sequence[int]) -> RowRat:
        return RowRat(self.num[:, list(cols)], self.den).reduced()

    def common(self) -> tuple[np.ndarray, int]:
        """(numerators over one common denominator L, L): for exact comparisons across rows."""
        L = 1
        for v in np.unique(self.den) if self.den.dtype != object else set(self.den.tolist()):
            L = math.lcm(L, int(v))
        if self.den.dtype != object and L < INT64_SAFE:
            f = (L // self.den).astype(np.int64)
        else:
            f = np.array([L // int(v) for v in self.den], dtype=object)
        return _mul(self.num, f[:, None]), L

    def __add__(self, other: RowRat) -> RowRat:
        if self.den.dtype != object and other.den.dtype != object:
            g = np.gcd(self.den, other.den)
            fa, fb = other.den // g, self.den // g
            if _maxabs(self.den) * _maxabs(fa) < INT64_SAFE:
                den = self.den * fa
            else:
                den = _narrow(_obj(self.den) * _obj(fa))
        else:
            ga = [math.gcd(int(a), int(b)) for a, b in zip(self.den, other.den, strict=True)]
            fa = np.array([int(b) // g for b, g in zip(other.den, ga, strict=True)], dtype=object)
            fb = np.array([int(a) // g for a, g in zip(self.den, ga, strict=True)], dtype=object)
            den = _narrow(_obj(self.den) * fa)
            fa, fb = _narrow(fa), _narrow(fb)
        num = _addn(_mul(self.num, fa[:, None]), _mul(other.num, fb[:, None]))
        return RowRat(num, den).reduced()


def affine(x: RowRat, w: RatArray, b: RatArray | None) -> RowRat:
    """Rows of ``x @ w.T + b`` exactly (per-row denominators, reduced)."""
    prod = int_matmul(x.num, w.num.T)  # (T, out) over den_i · w.den
    if w.den != 1:
        den = _mul(x.den, np.array(w.den, dtype=object if w.den >= INT64_SAFE else np.int64))
    else:
        den = x.den
    y = RowRat(_narrow(prod) if prod.dtype == object else prod, den)
    if b is not None and _maxabs(b.num):
        # + b = b.num / b.den: common row denominator den_i · b.den
        bn = b.num.reshape(1, -1)
        num = _addn(
            _mul(y.num, np.array(b.den, dtype=object if b.den >= INT64_SAFE else np.int64)),
            _mul(bn, y.den[:, None]),
        )
        den2 = _mul(y.den, np.array(b.den, dtype=object if b.den >= INT64_SAFE else np.int64))
        y = RowRat(num, den2)
    return y.reduced()


def embed_rows(cm: CompiledModel, word: Sequence[str]) -> RowRat:
    """x^(0) of one word with per-row denominators (column by column in int64 when every
    numerator and denominator allows, else row by row in Python integers)."""
    m = cm.model
    n = len(word)
    cols = _position_columns(m, n)
    toks = m.tokens(word)
    fast = _embed_int64(m, toks, cols)
    if fast is not None:
        return fast
    pos = m.position_vectors(n)
    d = m.d
    num = np.empty((len(toks), d), dtype=object)
    den = np.empty(len(toks), dtype=object)
    cache: dict[tuple[str, tuple[Fraction, ...]], tuple[list[int], int]] = {}
    for p, t in enumerate(toks):
        key = (t, pos[p])
        hit = cache.get(key)
        if hit is None:
            row = [a + b for a, b in zip(m.token_embedding[t], pos[p], strict=True)]
            L = 1
            for v in row:
                L = math.lcm(L, v.denominator)
            hit = ([int(v * L) for v in row], L)
            if len(cache) < 4096:
                cache[key] = hit
        num[p] = hit[0]
        den[p] = hit[1]
    return RowRat(_narrow(num), _narrow(den)).reduced()


_POSITIONS: list[Any] = []  # [(model, n, columns)]: the last length's position columns


def _position_columns(m: Model, n: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """P(p, n) column by column as int64 (numerators, denominators), or None past int64.
    The last (model, n) is kept: the family words of one length share it."""
    if _POSITIONS and _POSITIONS[0][0] is m and _POSITIONS[0][1] == n:
        cols: list[tuple[np.ndarray, np.ndarray]] | None = _POSITIONS[0][2]
        return cols
    out: list[tuple[np.ndarray, np.ndarray]] | None = []
    for col in zip(*m.position_vectors(n), strict=True):
        pn = [f.numerator for f in col]
        pd = [f.denominator for f in col]
        if max(map(abs, pn)) >= INT64_SAFE or max(pd) >= INT64_SAFE:
            out = None
            break
        assert out is not None
        out.append((np.array(pn, dtype=np.int64), np.array(pd, dtype=np.int64)))
    _POSITIONS[:] = [(m, n, out)]
    return out


def _embed_int64(
    m: Model, toks: list[str], cols: list[tuple[np.ndarray, np.ndarray]] | None
) -> RowRat | None:
    """token + position rows, column by column: each coordinate in int64, then numerators
    over the per-row lcm of the denominators (Python integers where that leaves int64);
    None when a single coordinate is too large for int64 (the caller's Python path)."""
    T, d = len(toks), m.d
    if T == 0 or cols is None:
        return None
    names = sorted(set(toks))
    index = {t: i for i, t in enumerate(names)}
    tid = np.array([index[t] for t in toks], dtype=np.int64)
    num_cols, den_cols = [], []
    for c in range(d):
        a, b = cols[c]
        tn = [m.token_embedding[t][c].numerator for t in names]
        td = [m.token_embedding[t][c].denominator for t in names]
        ma, mb, mta, mtb = _maxabs(a), _maxabs(b), max(map(abs, tn)), max(td)
        if mb * mtb >= INT64_SAFE or ma * mtb + mta * mb >= INT64_SAFE:
            return None  # the common denominator or the numerator could leave int64
        ta, tb = np.array(tn, dtype=np.int64)[tid], np.array(td, dtype=np.int64)[tid]
        g = np.gcd(b, tb)
        den_c = (b // g) * tb  # < 2^62
        num_cols.append(a * (tb // g) + ta * (b // g))  # < 2^63
        den_cols.append(den_c)
    num = np.stack(num_cols, axis=1)
    dens = np.stack(den_cols, axis=1)
    g = np.gcd(num, dens)
    g = np.maximum(g, 1)
    num, dens = num // g, dens // g  # each coordinate in lowest terms
    # the row denominator: lcm of the coordinates' denominators (Python integers past int64)
    L: np.ndarray = np.ones(T, dtype=np.int64)
    for c in range(d):
        dc = dens[:, c]
        f = dc // np.gcd(L, dc).astype(dc.dtype)
        if L.dtype != object and int((L.astype(object) * f.astype(object)).max()) >= INT64_SAFE:
            L = L.astype(object)
        L = L * (f.astype(object) if L.dtype == object else f)
    scale = L[:, None] // dens
    if L.dtype == object or int(np.abs(num).max()) * int(scale.max()) >= INT64_SAFE:
        return RowRat(_narrow(_obj(num) * _obj(scale)), _narrow(_obj(L))).reduced()
    return RowRat(num * scale, L).reduced()


@dataclass
class HeadInfo:
    """What the long-input exact run keeps about one head (O(T) memory)."""

    count: np.ndarray  # (T,) |hard support| per query row
    top_count: np.ndarray  # (T,) |argmax set| per query row
    gap: Fraction | None  # min over rows of (max score − best non-max visible score)
    gap_row: int | None
    q: RowRat  # reduced query rows (active columns only)
    kc: np.ndarray  # key numerators over the common denominator kL (active columns)
    kL: int
    cols: list[int]


@dataclass
class LongHard:
    """Exact hard meaning of one word: activations after every layer (index 0 = embedding)."""

    word: tuple[str, ...]
    n: int
    acts: list[RowRat]
    heads: dict[tuple[int, int], HeadInfo] = field(default_factory=dict)

    def scores_row(self, li: int, hi: int, i: int) -> list[Fraction]:
        """Exact scores of query slot i against every key slot (for diagnosis)."""
        h = self.heads[(li, hi)]
        qi = h.q.num[i : i + 1]
        s = int_matmul(qi, h.kc.T)[0]
        den = int(h.q.den[i]) * h.kL
        return [Fraction(int(v), den) for v in s]


def exact_scores(qn: np.ndarray, kn: np.ndarray) -> np.ndarray:
    """qn @ kn.T exactly; a direct int64 multiply-add over the few columns when bounded."""
    cols = qn.shape[1]
    if (
        qn.dtype != object
        and kn.dtype != object
        and _maxabs(qn) * _maxabs(kn) * max(cols, 1) < INT64_SAFE
    ):
        S = qn[:, 0, None] * kn[None, :, 0]
        for c in range(1, cols):
            S += qn[:, c, None] * kn[None, :, c]
        return S
    return int_matmul(qn, kn.T)


def run_head_long(
    ch: CompiledHead,
    x: RowRat,
    block: int | None = None,
    want_gap: bool = True,
    sparse: bool | None = None,
) -> tuple[RowRat, HeadInfo]:
    """One head on one long input; returns its contribution (T, d) and O(T) facts.

    Without ``want_gap`` and from ``SPARSE_MIN_T`` on (or with ``sparse``), the argmax sets
    come from :func:`exactattn.engine.sparsehead.exact_head` (a float64 filter picks the
    candidate keys, exact integers decide); rows it leaves, and everything with
    ``want_gap``, go through the dense blocks below. Both give the same exact values."""
    T = x.num.shape[0]
    q = affine(x, ch.Q, ch.bq)
    k = affine(x, ch.K, ch.bk)
    v = affine(x, ch.V, ch.bv)
    cols = [c for c in range(q.num.shape[1]) if _maxabs(q.num[:, c]) != 0]
    if cols:
        qa = q.columns(cols)
        kc, kL = k.columns(cols).common()
    else:
        qa = RowRat(np.zeros((T, 1), dtype=np.int64), np.ones(T, dtype=np.int64))
        kc, kL = np.zeros((T, 1), dtype=np.int64), 1
    vc, vL = v.common()
    rule = ch.head.hard
    B = block or max(1, BLOCK_ENTRIES // max(T, 1))
    m = vc.shape[1]
    mixed_num = np.zeros((T, m), dtype=object)
    count = np.zeros(T, dtype=np.int64)
    top_count = np.zeros(T, dtype=np.int64)
    best_gap: Fraction | None = None
    gap_row: int | None = None
    mask = ch.head.mask
    todo = np.ones(T, dtype=bool)
    if not want_gap and (sparse if sparse is not None else T >= SPARSE_MIN_T):
        eh = _sparse_exact(qa.num if cols else None, kc if cols else None, vc, mask, rule)
        if eh is not None:
            mixed_num, count, top_count = eh.mixed, eh.count, eh.top_count
            todo = eh.dense
    for start in range(0, T, B):
        rows = np.arange(start, min(T, start + B))
        rows = rows[todo[rows]]
        if rows.size == 0:
            continue
        # keys that no query of this block can see are left out (exact: they are masked)
        k0 = int(rows[0]) if mask in ("geq", "gt") else 0
        k1 = int(rows[-1]) + 1 if mask in ("leq", "lt") else T
        if k1 <= k0:
            k1 = k0 + 1
        vis = visible_block(mask, rows, T)[:, k0:k1]
        S = exact_scores(qa.num[rows], kc[k0:k1])  # (b, k1-k0) exact integers
        if S.dtype == object:
            lo = -(_maxabs(S) + 1)
            masked = np.where(vis, S, lo)
        else:
            lo = np.iinfo(np.int64).min
            masked = np.where(vis, S, lo)
        rmax = masked.max(axis=1, keepdims=True)
        has = vis.any(axis=1)
        top = vis & (S == rmax)
        top_count[rows] = top.sum(axis=1)
        support = tie_support(top, rule)
        count[rows] = support.sum(axis=1)
        summed = int_matmul(support.astype(np.int64), vc[k0:k1])  # (b, m)
        mixed_num[rows] = _obj(summed)
        if want_gap:
            rest = np.where(vis & ~top, S, lo)
            second = rest.max(axis=1)
            ok = has & ((vis & ~top).any(axis=1))
            for r in np.nonzero(ok)[0]:
                i = int(rows[r])
                g = Fraction(int(rmax[r, 0]) - int(second[r]), int(qa.den[i]) * kL)
                if best_gap is None or g < best_gap:
                    best_gap, gap_row = g, i
    den = np.array([int(c) * vL if c else 1 for c in count], dtype=object)
    mixed = RowRat(_narrow(mixed_num), _narrow(den)).reduced()
    contrib = affine(mixed, ch.O, None) if ch.O is not None else mixed
    info = HeadInfo(count, top_count, best_gap, gap_row, qa, kc, kL, cols)
    return contrib, info


def _sparse_exact(
    qn: np.ndarray | None, kc: np.ndarray | None, vc: np.ndarray, mask: str, rule: str
) -> Any:
    """:func:`exact_head`, with each distinct query row computed once under mask ``none``
    (its argmax set depends on the row's score numerators only)."""
    T = vc.shape[0]
    if qn is None or mask != "none" or qn.dtype == object:
        return exact_head(qn, kc, vc, mask, rule, T)
    _, first, inv = np.unique(qn, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    assert kc is not None
    eh = exact_class_head(qn[first], kc, vc, rule)
    if eh is None:
        eh = exact_head(qn[first], kc, vc, mask, rule, T)
    if eh is None:
        return None
    eh.mixed, eh.count, eh.top_count, eh.dense = (
        eh.mixed[inv],
        eh.count[inv],
        eh.top_count[inv],
        eh.dense[inv],
    )
    return eh


def run_ffn_long(layer: CompiledFFN, x: RowRat) -> RowRat:
    h = x
    for w, b in layer.hidden:
        z = affine(h, w, b)
        h = RowRat(np.where(z.num > 0, z.num, 0).astype(z.num.dtype), z.den)
    w, b = layer.out
    return x + affine(h, w, b)


def run_hard_long(
    cm: CompiledModel,
    word: Sequence[str],
    block: int | None = None,
    want_gap: bool = False,
    sparse: bool | None = None,
) -> LongHard:
    """The exact hard meaning of one word, any length, memory O(T·d) + O(block·T)."""
    word = tuple(word)
    n = len(word)
    x = embed_rows(cm, word)
    res = LongHard(word=word, n=n, acts=[x])
    for li, layer in enumerate(cm.layers):
        if isinstance(layer, list):
            out = x
            for hi, ch in enumerate(layer):
                contrib, info = run_head_long(ch, x, block, want_gap, sparse)
                res.heads[(li, hi)] = info
                out = out + contrib
            x = out
        else:
            x = run_ffn_long(layer, x)
        res.acts.append(x)
    return res


def hard_output(model: Model, lh: LongHard) -> tuple[object, Fraction]:
    """The exact read-out: (decision, margin). accept → bool; argmax → labels list."""
    x = lh.acts[-1]
    out = model.output
    n = lh.n
    if isinstance(out, AcceptOutput):
        slot = model.accept_slot(n)
        y = sum((w * x.fraction(slot, c) for c, w in enumerate(out.weight)), Fraction(0))
        y += out.bias
        return y > out.threshold, abs(y - out.threshold)
    if isinstance(out, ArgmaxOutput):
        labels: list[str | None] = []
        margin: Fraction | None = None
        for slot in model.output_positions(n):
            row = x.row(slot)
            vals = [
                sum((w * r for w, r in zip(wr, row, strict=True)), Fraction(0)) + b
                for wr, b in zip(out.weight, out.bias, strict=True)
            ]
            best = max(vals)
            win = [i for i, v in enumerate(vals) if v == best]
            labels.append(out.labels[win[0]] if len(win) == 1 else None)
            rest = [v for i, v in enumerate(vals) if i != win[0]]
            mg = best - max(rest) if rest and len(win) == 1 else Fraction(0)
            margin = mg if margin is None or mg < margin else margin
        return labels, margin if margin is not None else Fraction(0)
    vals_all = []
    for slot in model.output_positions(n):
        row = x.row(slot)
        vals_all.append(
            [
                sum((w * r for w, r in zip(wr, row, strict=True)), Fraction(0)) + b
                for wr, b in zip(out.weight, out.bias, strict=True)
            ]
        )
    return vals_all, Fraction(0)
