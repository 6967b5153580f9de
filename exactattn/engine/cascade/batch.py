"""What every float tier returns (:class:`FloatBatch`), and batches of hard traces cut and joined.

A tier takes a :class:`~exactattn.engine.hard.HardBatch` and returns, per word, certified
enclosures of every layer's max |δ| (or "cannot tell") and the read-out where certain. The
chain (:mod:`.chain`) gives the words one tier leaves to the next as a sub-batch
(:func:`take_batch`) and puts each word's row back (:func:`put_rows`), so that every word's row
in the record is one tier's enclosures, never a mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactattn.engine.hard import HardBatch, HeadTrace, LayerTrace
from exactattn.engine.ratarray import RatArray


@dataclass
class FloatBatch:
    """Certified float results for every word of a batch (see ``float64.certify_float``)."""

    settled: np.ndarray  # (B,) bool: decided, and every layer's error enclosure tight
    err_lo: np.ndarray  # (B, L) float64
    err_hi: np.ndarray  # (B, L) float64
    err_row: np.ndarray  # (B, L) int64
    accept: np.ndarray | None = None  # (B,) bool
    labels: np.ndarray | None = None  # (B, P) int64, -1 = tie
    within_tol: np.ndarray | None = None  # (B,) bool
    decided: np.ndarray | None = None  # (B,) bool: ε ≤ 1 before the last layer and read-out
    tight: np.ndarray | None = None  # (B, L) bool: the layer's enclosure meets the accuracy
    tie: np.ndarray | None = None  # (B,) bool: read-out undecided only where the hard one ties
    read: np.ndarray | None = None  # (B,) bool: the read-out decided (ε ≤ 1 aside)

    def underflowed(self) -> np.ndarray:
        """(B,) words with an error that underflowed to [0, ≲ TINY] in some layer (tiny τ):
        a true bound that says little, so the check gives them arb, which sizes them."""
        return ((self.err_lo == 0) & (self.err_hi > 0) & (self.err_hi < 1e-140)).any(axis=1)


SUB_BATCH = 1024  # words per internal chunk: fewer Python-level calls, arrays still small
CHUNK_ENTRIES = 1 << 18  # at most this many (word, query, key) entries per chunk: long inputs
# get chunks of a few words (one at T ≳ 512), so memory stays O(T²) however large the batch


def _ra(x: RatArray, sl: slice) -> RatArray:
    return RatArray(x.num[sl], x.den)


def slice_trace(h: HeadTrace, sl: slice) -> HeadTrace:
    return HeadTrace(
        q=_ra(h.q, sl),
        k=_ra(h.k, sl),
        v=_ra(h.v, sl),
        scores=_ra(h.scores, sl),
        visible=h.visible,
        top=h.top[sl],
        support=h.support[sl],
        count=h.count[sl],
        mixed=_ra(h.mixed, sl),
    )


def slice_batch(hb: HardBatch, sl: slice) -> HardBatch:
    """Words ``sl`` of a hard batch (views, no copies)."""
    layers = []
    for lt in hb.layers:
        heads = None
        if lt.heads is not None:
            heads = [slice_trace(h, sl) for h in lt.heads]
        pre = None if lt.pre is None else [_ra(z, sl) for z in lt.pre]
        layers.append(LayerTrace(lt.kind, _ra(lt.x_in, sl), _ra(lt.x_out, sl), heads, pre))
    return HardBatch(n=hb.n, words=hb.words[sl], x0=_ra(hb.x0, sl), layers=layers)


def query_rows(tr: HeadTrace, a: int, b: int) -> HeadTrace:
    """The trace restricted to query rows a..b−1, every key kept (views)."""
    return HeadTrace(
        q=RatArray(tr.q.num[:, a:b], tr.q.den),
        k=tr.k,
        v=tr.v,
        scores=RatArray(tr.scores.num[:, a:b], tr.scores.den),
        visible=tr.visible[a:b],
        top=tr.top[:, a:b],
        support=tr.support[:, a:b],
        count=tr.count[:, a:b],
        mixed=RatArray(tr.mixed.num[:, a:b], tr.mixed.den),
    )


def take_batch(hb: HardBatch, idx: np.ndarray) -> HardBatch:
    """Words ``idx`` of a hard batch (copies)."""
    layers = []
    for lt in hb.layers:
        heads = None
        if lt.heads is not None:
            heads = [slice_trace(h, idx) for h in lt.heads]  # type: ignore[arg-type]
        pre = None if lt.pre is None else [_ra(z, idx) for z in lt.pre]  # type: ignore[arg-type]
        layers.append(
            LayerTrace(lt.kind, _ra(lt.x_in, idx), _ra(lt.x_out, idx), heads, pre)  # type: ignore[arg-type]
        )
    words = [hb.words[i] for i in idx.tolist()]
    return HardBatch(n=hb.n, words=words, x0=_ra(hb.x0, idx), layers=layers)  # type: ignore[arg-type]


def put_rows(fb: FloatBatch, idx: np.ndarray, part: FloatBatch) -> FloatBatch:
    """``fb`` with its rows ``idx`` replaced by every row of ``part`` (a tier's results on
    ``take_batch(hb, idx)``), so that each word's row is one tier's. A field only ``part``
    has gets "no tie" / False / −1 rows elsewhere (as :func:`concat`); a field only ``fb``
    has keeps its rows (filled likewise at ``idx``)."""
    out = {}
    for name, v in vars(fb).items():
        w = getattr(part, name)
        if v is None and w is None:
            out[name] = None
            continue
        like = v if v is not None else w
        fill = -1 if like.dtype.kind in "iu" else 0
        v = (
            np.full((len(fb.settled),) + like.shape[1:], fill, like.dtype)
            if v is None
            else v.copy()
        )
        v[idx] = fill if w is None else w
        out[name] = v
    return FloatBatch(**out)


def concat(parts: list[FloatBatch]) -> FloatBatch:
    """The batch of consecutive chunks (the float64 and double-double tiers chunk large
    batches the same way)."""

    def cat(name: str) -> np.ndarray | None:
        xs = [getattr(p, name) for p in parts]
        if all(x is None for x in xs):
            return None
        if any(x is None for x in xs):
            # a part may not know a field: the tie flag, or the read-out of a part the
            # double-double tier gave up on (nothing settled there, so its rows are never
            # read): fill it with "no tie" / False / −1 rows of the others' shape and dtype
            like = next(x for x in xs if x is not None)
            fill = -1 if like.dtype.kind in "iu" else 0
            xs = [
                np.full((len(p.settled),) + like.shape[1:], fill, like.dtype) if x is None else x
                for p, x in zip(parts, xs, strict=True)
            ]
        return np.concatenate(xs)

    return FloatBatch(
        settled=cat("settled"),  # type: ignore[arg-type]
        decided=cat("decided"),
        tight=cat("tight"),
        err_lo=cat("err_lo"),  # type: ignore[arg-type]
        err_hi=cat("err_hi"),  # type: ignore[arg-type]
        err_row=cat("err_row"),  # type: ignore[arg-type]
        accept=cat("accept"),
        labels=cat("labels"),
        within_tol=cat("within_tol"),
        tie=cat("tie"),
        read=cat("read"),
    )
