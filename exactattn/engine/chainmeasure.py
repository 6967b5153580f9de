"""The hard measurements behind the claims of Theorem S (results/chainstats.py), per batch.

Only what a model claims is measured: for each coordinate named in ``coordinate_ranges``, its
smallest and largest hard value in each position class (BOS, the rest) at every layer
boundary where it can change (the embedding, and each layer that writes it), and whether
every value is an integer; for each head named in ``head_profiles``, the k-th smallest drop
below the top over every query (the visible keys outside the argmax set, sorted).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from exactattn.engine.hard import HardBatch, HeadTrace, Sharing, rows_alike
from exactattn.model import AttentionLayer, Model
from exactattn.results.chainstats import ChainStats, CoordStats

__all__ = ["ChainCollector", "head_drops", "written_columns"]


def written_columns(model: Model) -> list[set[int]]:
    """Per layer, the coordinates its output may change (a nonzero output row, or bias)."""
    out: list[set[int]] = []
    for layer in model.layers:
        cols: set[int] = set()
        if isinstance(layer, AttentionLayer):
            for h in layer.heads:
                if h.output is None:
                    cols.update(r for r in range(model.d) if any(h.value[r]) or h.value_bias[r])
                else:
                    cols.update(r for r, row in enumerate(h.output) if any(row))
        else:
            W, b = layer.output
            cols.update(r for r, (row, bb) in enumerate(zip(W, b, strict=True)) if any(row) or bb)
        out.append(cols)
    return out


def head_drops(tr: HeadTrace, sh: Sharing | None = None, shared: bool = False) -> list[Fraction]:
    """d_k = the smallest k-th drop (top score minus the k-th visible key below it) over the
    queries of the batch, k = 1, 2, … as far as some query has k lower keys.

    Rows that repeat are looked at once (the minimum is the same): every row when all rows
    are alike (a constant query), and the shared rows before ``sh.q0`` on each group's first
    word when the head was computed under ``sh`` (``shared``)."""
    s, top, vis = tr.scores.num, tr.top, tr.visible
    if s.size == 0:
        return []
    # each row's largest visible score, as the hard meaning found it (int64 scores: the
    # lowest int64 where nothing is visible), so that _drops need not find it again
    rm = tr.rowmax if tr.rowmax is not None and tr.rowmax.shape == s.shape[:2] else None
    if rows_alike(tr):
        s, top, vis = s[:, :1], top[:, :1], vis[:1]
        rm = None if rm is None else rm[:, :1]
    elif shared and sh is not None and s.shape[0] % sh.group == 0 and 0 < sh.q0 < s.shape[1]:
        G, q0 = sh.group, sh.q0
        a = _drops(
            s[::G, :q0],
            top[::G, :q0],
            vis[:q0],
            tr.scores.den,
            None if rm is None else rm[::G, :q0],
        )
        b = _drops(
            s[:, q0:], top[:, q0:], vis[q0:], tr.scores.den, None if rm is None else rm[:, q0:]
        )
        n = max(len(a), len(b))
        return [
            min(
                x
                for x in (a[k] if k < len(a) else None, b[k] if k < len(b) else None)
                if x is not None
            )
            for k in range(n)
        ]
    return _drops(s, top, vis, tr.scores.den, rm)


def _drops(s, top, vis, den: int, rowmax=None) -> list[Fraction]:  # type: ignore[no-untyped-def]
    """The smallest k-th drop over the rows of ``s`` (N, R, T); ``rowmax`` (N, R): each
    row's largest visible score where known (int64 scores: the lowest int64 on a row
    without visible keys), which is the maximum over the row's argmax set ``top``."""
    if s.size == 0:
        return []
    lower = vis[None] & ~top  # (N, R, T): visible, not at the maximum
    # max |s| ≥ 2^61 (Python integers: no int64 overflow in the negation)
    if s.dtype == object or max(int(s.max()), -int(s.min())) >= 2**61:  # big: row by row
        out: list[int] = []
        for b in range(s.shape[0]):
            for i in range(s.shape[1]):
                row = [int(x) for x, ok in zip(s[b, i], lower[b, i], strict=True) if ok]
                if not row:
                    continue
                top_ = max(int(x) for x, t in zip(s[b, i], top[b, i], strict=True) if t)
                for k, v in enumerate(sorted(top_ - x for x in row)):
                    if k < len(out):
                        out[k] = min(out[k], v)
                    else:
                        out.append(v)
        return [Fraction(v, den) for v in out]
    big = np.iinfo(np.int64).max
    lo = np.iinfo(np.int64).min
    if rowmax is not None and rowmax.dtype == np.int64:
        tmax = rowmax[..., None]  # = max over top (top: the visible keys at the row's max)
    else:
        tmax = np.where(top, s, lo).max(axis=2, keepdims=True)
    drops = np.where(lower, tmax - s, big)
    drops.sort(axis=2)
    m = drops.reshape(-1, drops.shape[2]).min(axis=0)  # over every row (a view: contiguous)
    return [Fraction(int(v), den) for v in m if v != big]


class ChainCollector:
    """Accumulates :class:`~exactattn.results.chainstats.ChainStats` over the batches of one
    length (or one shard of it)."""

    def __init__(self, model: Model) -> None:
        cl = model.claims
        self.model = model
        rng = cl.coordinate_ranges if cl is not None else None
        self.coords = sorted(
            {r.coordinate for r in rng.ranges} | {r.coordinate for r in rng.bos}
            if rng is not None
            else set()
        )
        prof = cl.head_profiles if cl is not None else None
        self.heads = sorted({(h.layer, h.head) for h in prof.heads} if prof is not None else set())
        claimed = set(self.coords)
        self.integer = (
            {r.coordinate for r in (*rng.ranges, *rng.bos) if r.integer}
            if rng is not None
            else set()
        )
        self.cols = [sorted(claimed & w) for w in written_columns(model)]
        self.stats: ChainStats | None = None

    def _embedding(self, n: int) -> dict[tuple[int, str], CoordStats]:
        """x^(0) of every input of length n, per claimed coordinate and class: each slot holds
        BOS, EOS or any alphabet token (every input is enumerated) plus its position vector."""
        m = self.model
        pos = m.position_vectors(n)
        first = m.first_input_position()
        out: dict[tuple[int, str], CoordStats] = {}
        for p, vec in enumerate(pos):
            if m.bos is not None and p == 0:
                toks = [m.bos]
            elif m.eos is not None and p == len(pos) - 1:
                toks = [m.eos]
            else:
                toks = list(m.alphabet) if first <= p < first + n else []
            cls = "bos" if m.bos is not None and p == 0 else "rest"
            for t in toks:
                row = m.token_embedding[t]
                for c in self.coords:
                    v = row[c] + vec[c]
                    st = CoordStats(v, v, v.denominator == 1)
                    out[(c, cls)] = st if (c, cls) not in out else out[(c, cls)].merge(st)
        return out

    @property
    def active(self) -> bool:
        return bool(self.coords or self.heads)

    def add(self, hb: HardBatch) -> None:
        coords: dict[tuple[int, str], CoordStats] = {}
        bos = self.model.bos is not None

        def note(arr, cols: list[int]) -> None:  # type: ignore[no-untyped-def]
            if not cols or arr.num.size == 0:
                return
            # coordinate-major (c, T, N), so that each class's minimum and maximum per
            # coordinate is a reduction over one contiguous row (exact integers: the same
            # values as over the (N, T, c) layout, in a fraction of the time)
            num = np.ascontiguousarray(arr.num.transpose(2, 1, 0)[cols])
            nc = len(cols)
            if bos:
                parts = [("bos", num[:, 0, :]), ("rest", num[:, 1:, :].reshape(nc, -1))]
            else:
                parts = [("rest", num.reshape(nc, -1))]
            for cls, part in parts:
                if part.size == 0:
                    continue
                lo, hi = part.min(axis=1), part.max(axis=1)
                ints = [True] * len(cols)
                if arr.den != 1:  # integrality only where a claim says "integer"
                    for j, c in enumerate(cols):
                        if c in self.integer:
                            ints[j] = bool((part[j] % arr.den == 0).all())
                        else:
                            ints[j] = False
                for j, c in enumerate(cols):
                    st = CoordStats(
                        Fraction(int(lo[j]), arr.den), Fraction(int(hi[j]), arr.den), ints[j]
                    )
                    key = (c, cls)
                    coords[key] = st if key not in coords else coords[key].merge(st)

        if self.stats is None:  # the embedding: once per length, from its (token, slot) pairs
            for key, st in self._embedding(hb.n).items():
                coords[key] = st
        for li, lt in enumerate(hb.layers):
            note(lt.x_out, self.cols[li])
        drops = []
        sh = hb.sharing
        for li, hi in self.heads:
            lt = hb.layers[li]
            if lt.heads is not None:
                shared = sh is not None and li < sh.layers
                drops.append((li, hi, tuple(head_drops(lt.heads[hi], sh, shared))))
        st = ChainStats(tuple((c, k, s) for (c, k), s in sorted(coords.items())), tuple(drops))
        self.stats = st if self.stats is None else self.stats.merge(st)
