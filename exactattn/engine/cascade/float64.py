"""The float64 tier: the certified soft meaning of a whole batch in float64 enclosures.

Same *hard + δ* formulation as :mod:`exactattn.engine.soft` (read its docstring), but δ is
evaluated for every word of a :class:`~exactattn.engine.hard.HardBatch` at once with numpy,
so a word costs tens of microseconds instead of a millisecond. Every number is an enclosure
of :mod:`.interval` (its docstring has the soundness argument); the layers are the passes
:mod:`.attention` and :mod:`.ffn`, the decisions :mod:`.readout`'s. :func:`certify_float`
says which words the floats settle; the chain (:mod:`.chain`) gives the others to the
centred and double-double tiers and what they leave to the arb path.

Determinism: only elementwise operations; every sum is a Python loop over the small
inner dimension (weights, keys) in a fixed order — no BLAS, no numpy float sums. (The one
exception is opt-in: ``EXACTATTN_BLAS=1`` computes the score perturbations in
:func:`outer_sum` with BLAS and Rump's order-independent bound, proofs/blas_bound.md — sound
in any order, bit-identical for any thread count, but its last bits depend on the BLAS kernel
of the machine; notes/benchmark-rounds.md, "BLAS products".) A word's
numbers do not depend on the order of the batch, but the *last bits* of its enclosures can
depend on which other words share its batch: work is skipped for δ columns that are exactly
zero for the whole batch (a head where nothing moves, an FFN coefficient that vanishes),
and a zero term that is kept still widens a radius by an ulp. The batches of a shard are
fixed by the shard layout (EXACTATTN_SHARD_INPUTS, recorded in checkpoints), so a result
never depends on how shards were scheduled; the bundled models give the same bits in every
batching (tests/engine/cascade/test_float64_tier_vs_arb.py), and
tests/results/test_records_merge_in_any_order.py allows the difference.

Prefix sharing (:class:`~exactattn.engine.hard.Sharing`): words of a batch that share a
prefix share their first rows' δ, computed once per group; the same bits as without it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.cascade.attention import delta_rows, head_delta
from exactattn.engine.cascade.batch import (
    CHUNK_ENTRIES,
    SUB_BATCH,
    FloatBatch,
    concat,
    query_rows,
    slice_batch,
    slice_trace,
)
from exactattn.engine.cascade.ffn import ffn_generic, ffn_linear, rat_pre
from exactattn.engine.cascade.interval import Cols, abs_bounds, inv_tau, stack_floats
from exactattn.engine.cascade.policy import malloc_tuned
from exactattn.engine.cascade.readout import ERR_DEFER, errors_into, finish
from exactattn.engine.cascade.weights import add_cols, float_weights
from exactattn.engine.hard import CompiledModel, HardBatch, HeadTrace, Sharing, prefix_sharing
from exactattn.engine.ratarray import RatArray


def certify_float(
    cm: CompiledModel,
    hb: HardBatch,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    share: bool = True,
) -> FloatBatch:
    """δ after every layer for every word of the batch, and the soft read-out, certified.

        ``taus[l]`` is None for a feed-forward layer, else per head an exact (lo, hi) with
        lo ≤ τ ≤ hi. A word is ``settled`` when every reported number meets the reporting
        accuracy, the ε ≤ 1 comparisons before the last layer are decided and the read-out is
        decided; the other words need the arb path. Every word's numbers are computed
        elementwise; the last bits of enclosures can depend on the batch (see the module's
    "Determinism"), never its decisions, exact values or soundness.
    """
    malloc_tuned()
    B = len(hb.words)
    T = hb.x0.shape[1]
    chunk = max(1, min(SUB_BATCH, CHUNK_ENTRIES // (T * T)))
    sh = None
    if share:
        # run_hard found the sharing of the whole batch (max group B): the same answer
        # whenever the batch is one chunk (a group never exceeds B either way); None when
        # it shared nothing (or was told not to: sharing changes no bit, only the time)
        sh = hb.sharing if B <= chunk else prefix_sharing(cm.model, hb.words, hb.n, chunk)
    if sh is not None:
        chunk = chunk // sh.group * sh.group  # groups never straddle two chunks
    if B <= chunk:
        return _certify_chunk(cm, hb, taus, sh)
    parts = [
        _certify_chunk(cm, slice_batch(hb, slice(i, i + chunk)), taus, sh)
        for i in range(0, B, chunk)
    ]
    return concat(parts)


def _certify_chunk(
    cm: CompiledModel,
    hb: HardBatch,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    sh: Sharing | None = None,
) -> FloatBatch:
    fw = float_weights(cm)
    B = len(hb.words)
    T = hb.x0.shape[1]
    d = hb.x0.shape[2]
    L = len(cm.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.zeros((B, L))
    err_row = np.zeros((B, L), dtype=np.int64)
    delta: Cols = {}
    err = (err_lo, err_hi, err_row)
    pending: list[tuple[int, Cols]] = []  # layers whose error bounds wait (errors_into)
    size = 0
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        for li, (layer, lt) in enumerate(zip(cm.layers, hb.layers, strict=True)):
            if isinstance(layer, list):
                assert lt.heads is not None
                row = taus[li]
                assert row is not None
                if sh is not None and li < sh.layers:
                    delta, parts = _shared_layer(
                        lt.heads, layer, row, delta, fw.layers[li], sh, B, T
                    )
                    size = _shared_errors(li, delta, parts, sh, pending, size, err, B, T, d)
                    continue
                total = delta
                for hi_, (ch, tr) in enumerate(zip(layer, lt.heads, strict=True)):
                    it = inv_tau(*row[hi_])
                    contrib = head_delta(tr, ch.head.hard, delta, it, fw.layers[li][hi_])
                    total = add_cols(total, contrib)
                delta = total
            elif sh is not None and li < sh.layers:
                assert lt.pre is not None
                delta, parts = _shared_ffn(lt.pre, delta, fw.layers[li], sh, B, T)
                size = _shared_errors(li, delta, parts, sh, pending, size, err, B, T, d)
                continue
            else:
                assert lt.pre is not None
                hidden, out_rows, ints = fw.layers[li]
                pre = rat_pre(lt.pre)
                if ints.ok:
                    delta = ffn_linear(pre, delta, ints, (B, T))
                else:
                    delta = ffn_generic(pre, delta, hidden, out_rows)
            pending.append((li, delta))
            size += len(delta) * B * T
            if size > ERR_DEFER:
                errors_into(pending, err, B, T, d)
                pending, size = [], 0
        errors_into(pending, err, B, T, d)
        return finish(cm, hb, delta, fw, err_lo, err_hi, err_row)


def _assemble(first: Cols, rest: Cols, sh: Sharing, B: int, T: int) -> Cols:
    """δ of every row: rows < q0 from each group's first word, the others per word."""
    out: Cols = {}
    q0, G = sh.q0, sh.group
    for c in sorted(set(first) | set(rest)):
        m = np.zeros((B, T))
        r = np.zeros((B, T))
        if c in first:
            m[:, :q0] = np.repeat(first[c][0], G, axis=0)
            r[:, :q0] = np.repeat(first[c][1], G, axis=0)
        if c in rest:
            m[:, q0:] = rest[c][0]
            r[:, q0:] = rest[c][1]
        out[c] = (m, r)
    return out


def _shared_layer(
    traces: list[HeadTrace],
    heads: list[Any],
    row: list[tuple[Fraction, Fraction]],
    delta: Cols,
    hws: list[dict[str, Any]],
    sh: Sharing,
    B: int,
    T: int,
) -> tuple[Cols, tuple[Cols, Cols]]:
    """One attention layer under :class:`Sharing`: the same sums as the plain loop; the δ of
    every row and its compact parts (the firsts' rows before q0, every word's from q0)."""
    q0, G = sh.q0, sh.group
    firsts = slice(0, B, G)
    d_first = {c: (m[firsts], r[firsts]) for c, (m, r) in delta.items()}
    top = delta_rows(d_first, 0, q0)
    rest = delta_rows(delta, q0, T)
    for hi_, (ch, tr) in enumerate(zip(heads, traces, strict=True)):
        it = inv_tau(*row[hi_])
        hw = hws[hi_]
        tr_first = query_rows(slice_trace(tr, firsts), 0, q0)
        top = add_cols(top, head_delta(tr_first, ch.head.hard, d_first, it, hw, 0))
        rest = add_cols(rest, head_delta(query_rows(tr, q0, T), ch.head.hard, delta, it, hw, q0))
    return _assemble(top, rest, sh, B, T), (top, rest)


def _shared_errors(
    li: int,
    delta: Cols,
    parts: tuple[Cols, Cols],
    sh: Sharing,
    pending: list[tuple[int, Cols]],
    size: int,
    err: tuple[np.ndarray, np.ndarray, np.ndarray],
    B: int,
    T: int,
    d: int,
) -> int:
    """The error bounds of a layer run under :class:`Sharing` (δ = ``_assemble(*parts)``):
    a large one at once on its compact rows (:func:`_errors_compact`), a small one waits in
    ``pending`` to share a pass (:func:`errors_into`); the same numbers either way.
    Returns the new pending size."""
    if not delta:
        return size
    if len(delta) * B * T > ERR_DEFER:
        err[0][:, li], err[1][:, li], err[2][:, li] = _errors_compact(*parts, sh, B, T)
        return size
    pending.append((li, delta))
    size += len(delta) * B * T
    if size > ERR_DEFER:
        errors_into(pending, err, B, T, d)
        pending.clear()
        size = 0
    return size


def _errors_compact(
    top: Cols, rest: Cols, sh: Sharing, B: int, T: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`layer_errors` of ``_assemble(top, rest)`` from the compact rows: abs_bounds
    is elementwise and the maxima exact (it gives no nan), so the rows before q0 are
    bounded once per group and repeated; every word's bounds, its largest upper bound per
    row, and so its first row of the largest, are those of the assembled δ."""
    q0, G = sh.q0, sh.group
    F = len(range(0, B, G))
    cols = sorted(set(top) | set(rest))

    def bounds(part: Cols, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        z = np.zeros(shape)  # a column absent from a part is 0 there (as _assemble fills)
        m = stack_floats([part[c][0] if c in part else z for c in cols])
        r = stack_floats([part[c][1] if c in part else z for c in cols])
        return abs_bounds((m, r))  # (C, rows, slots)

    al_t, au_t = bounds(top, (F, q0))
    al_r, au_r = bounds(rest, (B, T - q0))
    up = np.empty((B, T))
    up[:, :q0] = np.repeat(au_t.max(axis=0), G, axis=0)
    up[:, q0:] = au_r.max(axis=0)
    lo = np.maximum(
        np.repeat(al_t.max(axis=(0, 2), initial=0.0), G), al_r.max(axis=(0, 2), initial=0.0)
    )
    lo = np.maximum(np.zeros(B), lo)
    return lo, up.max(axis=1), np.argmax(up, axis=1).astype(np.int64)


def _shared_ffn(
    pre: list[RatArray], delta: Cols, fl: Any, sh: Sharing, B: int, T: int
) -> tuple[Cols, tuple[Cols, Cols]]:
    """A feed-forward layer under :class:`Sharing`: rows before q0 on each group's first
    word only, the other rows on every word, all as one (1, rows) batch, then assembled.

    The same bits as the whole (B, T) batch: every entry is computed from its own row
    elementwise, and the batch-level pruning of :func:`ffn_linear` (which coefficients and
    residuals it keeps) asks only whether something is nonzero for *some* entry; the
    compact rows hold every row of the whole batch — rows before q0 are the same in every
    word of a group (the δ coming in is assembled from the firsts' rows, as
    :func:`_shared_layer` reads it; the exact pre-activations are the same numbers)."""
    if not delta:
        return {}, ({}, {})  # what ffn_linear and ffn_generic give
    q0, G = sh.q0, sh.group
    firsts = slice(0, B, G)
    F = len(range(0, B, G))

    def pack(x: np.ndarray) -> np.ndarray:  # (B, T, …) -> (1, F·q0 + B·(T − q0), …)
        tail = x.shape[2:]
        a = x[firsts, :q0].reshape((F * q0,) + tail)
        return np.concatenate([a, x[:, q0:].reshape((B * (T - q0),) + tail)])[None]

    dc = {c: (pack(m), pack(r)) for c, (m, r) in delta.items()}
    pc = rat_pre([RatArray(pack(z.num), z.den) for z in pre])
    hidden, out_rows, ints = fl
    if ints.ok:
        out = ffn_linear(pc, dc, ints, (1, F * q0 + B * (T - q0)))
    else:
        out = ffn_generic(pc, dc, hidden, out_rows)
    k = F * q0
    top = {c: (m[0, :k].reshape(F, q0), r[0, :k].reshape(F, q0)) for c, (m, r) in out.items()}
    rest = {
        c: (m[0, k:].reshape(B, T - q0), r[0, k:].reshape(B, T - q0)) for c, (m, r) in out.items()
    }
    got = _assemble(top, rest, sh, B, T)
    return {c: got[c] for c in out}, (top, rest)  # in ffn_linear's order
