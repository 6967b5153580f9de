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

from exactattn.engine.hard import HardBatch, HeadTrace
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


def head_drops(tr: HeadTrace) -> list[Fraction]:
    """d_k = the smallest k-th drop (top score minus the k-th visible key below it) over the
    queries of the batch, k = 1, 2, … as far as some query has k lower keys."""
    s = tr.scores.num
    if s.size == 0:
        return []
    lower = tr.visible[None] & ~tr.top  # (N, T, T): visible, not at the maximum
    if s.dtype == object or int(np.abs(s).max()) >= 2**61:
        out: list[int] = []
        for b in range(s.shape[0]):
            for i in range(s.shape[1]):
                row = [int(x) for x, ok in zip(s[b, i], lower[b, i], strict=True) if ok]
                if not row:
                    continue
                top = max(int(x) for x, t in zip(s[b, i], tr.top[b, i], strict=True) if t)
                for k, v in enumerate(sorted(top - x for x in row)):
                    if k < len(out):
                        out[k] = min(out[k], v)
                    else:
                        out.append(v)
        return [Fraction(v, tr.scores.den) for v in out]
    big = np.iinfo(np.int64).max
    lo = np.iinfo(np.int64).min
    top = np.where(tr.top, s, lo).max(axis=2, keepdims=True)
    drops = np.where(lower, top - s, big)
    drops.sort(axis=2)
    m = drops.min(axis=(0, 1))
    return [Fraction(int(v), tr.scores.den) for v in m if v != big]


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
        self.cols = [sorted(claimed & w) for w in written_columns(model)]
        self.stats: ChainStats | None = None

    @property
    def active(self) -> bool:
        return bool(self.coords or self.heads)

    def add(self, hb: HardBatch) -> None:
        coords: dict[tuple[int, str], CoordStats] = {}
        bos = self.model.bos is not None

        def note(arr, cols: list[int]) -> None:  # type: ignore[no-untyped-def]
            if not cols or arr.num.size == 0:
                return
            num = arr.num[:, :, cols]
            parts = [("bos", num[:, :1]), ("rest", num[:, 1:])] if bos else [("rest", num)]
            for cls, part in parts:
                if part.size == 0:
                    continue
                lo, hi = part.min(axis=(0, 1)), part.max(axis=(0, 1))
                if arr.den == 1:
                    ints = [True] * len(cols)
                else:
                    ints = [bool(x) for x in (part % arr.den == 0).all(axis=(0, 1))]
                for j, c in enumerate(cols):
                    st = CoordStats(
                        Fraction(int(lo[j]), arr.den), Fraction(int(hi[j]), arr.den), ints[j]
                    )
                    key = (c, cls)
                    coords[key] = st if key not in coords else coords[key].merge(st)

        note(hb.x0, self.coords)
        for li, lt in enumerate(hb.layers):
            note(lt.x_out, self.cols[li])
        drops = []
        for li, hi in self.heads:
            lt = hb.layers[li]
            if lt.heads is not None:
                drops.append((li, hi, tuple(head_drops(lt.heads[hi]))))
        st = ChainStats(tuple((c, k, s) for (c, k), s in sorted(coords.items())), tuple(drops))
        self.stats = st if self.stats is None else self.stats.merge(st)
