"""Hard meaning: exact, batched over every input of one length.

All inputs of length n share the sequence length T, so a batch is an (N, T, d)
:class:`~exactattn.engine.ratarray.RatArray`. The trace keeps what the soft evaluator and
the measurements need (scores, argmax sets, hard attention supports, FFN
pre-activations), so nothing is computed twice.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.ratarray import INT64_SAFE, RatArray, int_matmul, join_groups
from exactattn.model import AcceptOutput, ArgmaxOutput, AttentionLayer, FFNLayer, Head, Model


def visible_mask(mask: str, T: int) -> np.ndarray:
    """V as a (T, T) boolean matrix: row = query slot, column = key slot."""
    return visible_block(mask, np.arange(T), T)


def visible_block(mask: str, rows: np.ndarray, T: int) -> np.ndarray:
    """Visibility of keys 0..T-1 for the query slots ``rows``: (len(rows), T) bool."""
    q = rows[:, None]
    k = np.arange(T)[None, :]
    if mask == "none":
        return np.ones((len(rows), T), dtype=bool)
    if mask == "leq":
        return k <= q
    if mask == "lt":
        return k < q
    if mask == "geq":
        return k >= q
    if mask == "gt":
        return k > q
    raise ValueError(mask)


@dataclass(frozen=True)
class Sharing:
    """Consecutive groups of ``group`` words that differ only from sequence slot ``q0`` on.

    In the model's first ``layers`` layers every head looks only left (masks ``lt``/``leq``)
    or the layer is feed-forward, so rows before ``q0`` are the same for every word of a
    group: they can be computed once, on the group's first word. Both meanings use this.
    The hard meaning is unchanged bit for bit; the float filter's enclosures can differ in
    their last bits where its batch-level pruning differs (engine/cascade/float64.py,
    "Determinism").
    """

    group: int
    q0: int
    layers: int


def causal_depth(model: Model) -> int:
    """How many leading layers compute row i from rows ≤ i only."""
    depth = 0
    for layer in model.layers:
        if isinstance(layer, AttentionLayer) and any(
            h.mask not in ("lt", "leq") for h in layer.heads
        ):
            break
        depth += 1
    return depth


def prefix_sharing(
    model: Model, words: Sequence[Sequence[str]], n: int, max_group: int
) -> Sharing | None:
    """The cheapest :class:`Sharing` these words allow (None: nothing worth sharing).

    Needs aligned groups: words g·G … g·G+G−1 equal up to their last j letters, which holds
    for the rank-ordered batches of a shard (checked here, not assumed).
    """
    depth = causal_depth(model)
    B = len(words)
    T = model.length(n)
    k = len(model.alphabet)
    if depth == 0 or n == 0 or k < 2:
        return None
    best: tuple[float, int, int, int] | None = None
    G = 1
    for j in range(1, n + 1):
        G *= k
        if G > max_group or B % G:
            break
        q0 = model.first_input_position() + n - j
        if q0 < 1:
            break
        cost = (T - q0) * T + q0 * T / G  # query rows × keys per word
        if best is None or cost < best[0]:
            best = (cost, j, G, q0)
    if best is None or best[0] > 0.75 * T * T:
        return None
    _, j, G, q0 = best
    keep = n - j
    if not _groups_aligned(words, G, keep):
        return None
    return Sharing(G, q0, depth)


def _groups_aligned(words: Sequence[Sequence[str]], G: int, keep: int) -> bool:
    """Whether words g·G … g·G+G−1 have the same first ``keep`` letters, for every group g.

    The slices are taken and compared by ``map`` (no Python frame per word): this runs on
    every batch of the hard meaning and of the float filter.
    """
    cut = operator.itemgetter(slice(0, keep))
    prefixes = list(map(tuple, map(cut, words)))
    for g in range(0, len(words), G):
        head = prefixes[g]
        if prefixes[g : g + G].count(head) != G:
            return False
    return True


@dataclass
class CompiledHead:
    """A head's weights as RatArrays (converted once per model)."""

    head: Head
    Q: RatArray
    bq: RatArray
    K: RatArray
    bk: RatArray
    V: RatArray
    bv: RatArray
    O: RatArray | None

    def __post_init__(self) -> None:
        # the output coordinates the head writes (rows of O with a nonzero weight): adding
        # only those columns gives the same numbers as adding the mostly-zero full product
        if self.O is not None:
            rows = np.flatnonzero((self.O.num != 0).any(axis=1))
            self.out_cols: np.ndarray | None = rows
            self.O_used = RatArray(self.O.num[rows], self.O.den)
        else:
            self.out_cols = None


@dataclass
class CompiledFFN:
    hidden: list[tuple[RatArray, RatArray]]
    out: tuple[RatArray, RatArray]

    def __post_init__(self) -> None:
        # the output coordinates the layer writes (a nonzero weight row or bias): as for a
        # head's O, adding only those columns gives the numbers of adding the full product
        w, b = self.out
        rows = np.flatnonzero((w.num != 0).any(axis=1) | (b.num != 0))
        self.out_cols: np.ndarray | None = None
        if len(rows) < w.shape[0]:
            self.out_cols = rows
            self.out_used = (RatArray(w.num[rows], w.den), RatArray(b.num[rows], b.den))


class CompiledModel:
    """The model's weights as exact integer arrays, plus cached per-n embeddings."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.layers: list[list[CompiledHead] | CompiledFFN] = []
        for layer in model.layers:
            if isinstance(layer, AttentionLayer):
                self.layers.append([_compile_head(h) for h in layer.heads])
            else:
                assert isinstance(layer, FFNLayer)
                self.layers.append(
                    CompiledFFN(
                        hidden=[
                            (RatArray.from_fractions(w), RatArray.from_fractions(b))
                            for w, b in layer.hidden
                        ],
                        out=(
                            RatArray.from_fractions(layer.output[0]),
                            RatArray.from_fractions(layer.output[1]),
                        ),
                    )
                )
        toks = list(model.alphabet) + [t for t in (model.bos, model.eos) if t is not None]
        self.token_index = {t: i for i, t in enumerate(toks)}
        # one-character letters (ord < 256): a batch's letters are read by one string join
        # and a table lookup instead of one dict lookup per letter (embed)
        self._char_index: np.ndarray | None = None
        if all(len(t) == 1 and ord(t) < 256 for t in model.alphabet):
            table = np.full(256, -1, dtype=np.int64)
            for t in model.alphabet:
                table[ord(t)] = self.token_index[t]
            self._char_index = table
        self._letter_set = frozenset(model.alphabet)
        self.token_table = RatArray.from_fractions([model.token_embedding[t] for t in toks])
        self._positions: dict[int, RatArray] = {}
        self._tables: dict[int, RatArray] = {}

    def positions(self, n: int) -> RatArray:
        if n not in self._positions:
            self._positions[n] = RatArray.from_fractions(self.model.position_vectors(n))
        return self._positions[n]

    def _table(self, n: int) -> RatArray:
        """token + position embedding for every (token, slot) at length n: (V, T, d)."""
        if n not in self._tables:
            tok, pos = self.token_table, self.positions(n)
            V, T = tok.shape[0], pos.shape[0]
            self._tables.clear()  # one length at a time
            self._tables[n] = RatArray(np.repeat(tok.num[:, None, :], T, axis=1), tok.den) + (
                RatArray(np.broadcast_to(pos.num[None], (V,) + pos.shape).copy(), pos.den)
            )
        return self._tables[n]

    def letters(self, words: Sequence[Sequence[str]], n: int) -> np.ndarray:
        """The batch as (N, n) int64 letter indices (a letter's index is its position in
        the alphabet: the token table lists the alphabet first)."""
        letters = self._letters_by_char(words, n)
        if letters is None:
            letters = np.fromiter(
                map(self.token_index.__getitem__, itertools.chain.from_iterable(words)),
                dtype=np.int64,
                count=len(words) * n,
            ).reshape(len(words), n)
        return letters

    def embed(
        self, words: Sequence[Sequence[str]], n: int, letters: np.ndarray | None = None
    ) -> RatArray:
        """x^(0) for a batch of words of length n: (N, T, d). ``letters``: the batch's
        :meth:`letters`, when the caller has them."""
        m = self.model
        N = len(words)
        if letters is None:
            letters = self.letters(words, n)
        cols = [letters]
        if m.bos is not None:
            cols.insert(0, np.full((N, 1), self.token_index[m.bos], dtype=np.int64))
        if m.eos is not None:
            cols.append(np.full((N, 1), self.token_index[m.eos], dtype=np.int64))
        idx = np.concatenate(cols, axis=1) if len(cols) > 1 else letters
        table = self._table(n)
        V, S, d = table.shape
        T = idx.shape[1]
        # row (letter, slot) of the flattened (V·S, d) table: one np.take along axis 0, the
        # array of ``table.num[idx, np.arange(T)]`` (a two-index gather costs ~2× more)
        flat = np.ascontiguousarray(table.num).reshape(V * S, d)
        rows = idx * S + np.arange(T)
        x = np.take(flat, rows, axis=0)
        if flat.dtype != np.int64:
            return RatArray(x, table.den)
        # each column's max |x| over the table rows the batch uses (a pass over N·T row
        # numbers, not N·T·d entries): the bounds add_columns carries from layer to layer
        used = np.zeros(V * S, dtype=bool)
        used[rows.reshape(-1)] = True
        cols = np.abs(flat[used]).max(axis=0) if used.any() else np.zeros(d, dtype=np.int64)
        return RatArray(x, table.den, cols=cols)

    def _letters_by_char(self, words: Sequence[Sequence[str]], n: int) -> np.ndarray | None:
        """The (N, n) letter indices when every letter is one character: the batch joined
        into one string, its bytes looked up in a 256-entry table. None (the per-letter
        path, which names a bad letter) unless every word has exactly n letters, each a
        letter of the alphabet — then the string is the words' letters, one character
        each, in order."""
        table = self._char_index
        N = len(words)
        if table is None or N == 0 or n == 0:
            return None
        if set(map(len, words)) != {n} or not set().union(*words) <= self._letter_set:
            return None
        try:
            text = "".join(map("".join, words)).encode("latin-1")
        except (TypeError, UnicodeEncodeError):
            return None
        if len(text) != N * n:
            return None
        idx = table[np.frombuffer(text, dtype=np.uint8)]
        if (idx < 0).any():
            return None
        return idx.reshape(N, n)


def _compile_head(h: Head) -> CompiledHead:
    return CompiledHead(
        head=h,
        Q=RatArray.from_fractions(h.query),
        bq=RatArray.from_fractions(h.query_bias),
        K=RatArray.from_fractions(h.key),
        bk=RatArray.from_fractions(h.key_bias),
        V=RatArray.from_fractions(h.value),
        bv=RatArray.from_fractions(h.value_bias),
        O=RatArray.from_fractions(h.output) if h.output is not None else None,
    )


@dataclass
class HeadTrace:
    """Everything one head computed on a batch, hard meaning."""

    q: RatArray  # (N, T, k)
    k: RatArray  # (N, T, k)
    v: RatArray  # (N, T, m)
    scores: RatArray  # (N, T, T)
    visible: np.ndarray  # (T, T) bool
    top: np.ndarray  # (N, T, T) bool: argmax set A_i within V(i)
    support: np.ndarray  # (N, T, T) bool: where the hard weights are nonzero
    count: np.ndarray  # (N, T) int: |support| (0 when V(i) is empty)
    mixed: RatArray  # (N, T, m): Σ_j α_ij v_j
    # (N, T): the largest visible score of each query row, as _attend found it (int64
    # scores: the lowest int64 where nothing is visible); None where not kept (slices)
    rowmax: np.ndarray | None = None


@dataclass
class LayerTrace:
    kind: str
    x_in: RatArray
    x_out: RatArray
    heads: list[HeadTrace] | None = None
    pre: list[RatArray] | None = None  # FFN pre-activations, one per hidden layer


@dataclass
class HardBatch:
    n: int
    words: list[tuple[str, ...]]
    x0: RatArray
    layers: list[LayerTrace]
    sharing: Sharing | None = None  # how the causal rows were computed (None: every row)
    letters: np.ndarray | None = None  # (N, n) letter indices (CompiledModel.letters)

    @property
    def activations(self) -> list[RatArray]:
        return [self.x0] + [lt.x_out for lt in self.layers]


def _affine(x: RatArray, w: RatArray, b: RatArray, sh: Sharing | None = None) -> RatArray:
    """x·wᵀ + b. With ``sh`` (a causal layer under :class:`Sharing`), the product of rows
    before ``sh.q0`` is taken on each group's first word and repeated: the same integers
    (exact products, int64 both ways), only fewer of them computed."""
    fused = _affine_int64(x, w, b, sh)
    if fused is not None:
        return fused
    if sh is not None and _rows_shareable(x, w, sh):
        G, q0 = sh.group, sh.q0
        wt, ma, mb = w.num.T, x.bound(), w.bound()
        first = int_matmul(x.num[::G, :q0], wt, ma, mb)
        rest = int_matmul(x.num[:, q0:], wt, ma, mb)
        prod = RatArray(_join(first, rest, G), x.den * w.den)
        return prod + RatArray(b.num, b.den)
    return x.matmul_t(w) + RatArray(b.num, b.den)


def head_keys(ch: CompiledHead, x: RatArray) -> RatArray:
    """A head's exact keys x·Kᵀ + b_K on the layer input ``x`` (N, T, d): what the hard filter
    compares to confirm a tie exactly (engine/hardfilter.py, Lemma HT)."""
    return _affine(x, ch.K, ch.bk)


def _affine_int64(
    x: RatArray, w: RatArray, b: RatArray, sh: Sharing | None = None
) -> RatArray | None:
    """x·wᵀ + b in one int64 pass over only the input columns ``w`` reads, or None when a
    bound does not prove it (then :func:`_affine`'s plain path).

    Why: Dyck-2's weights read 0–6 of 19 coordinates, and the plain path multiplies all
    of them, then adds the bias in a second pass that first looks for the product's max.
    Here the common-denominator factor goes into the weights and the bias is added to the
    product block (under ``sh``, before the shared rows are repeated). Taken only when the
    plain path's own tests give int64 everywhere (int64 operands, |x|·|w|·d < 2**62 for the
    full product, and the scaled product plus the scaled bias < 2**62): then both are the
    exact integers of x·wᵀ·f + b·g over the same denominator, with the same dtype."""
    xn, wn, bn = x.num, w.num, b.num
    if xn.dtype != np.int64 or wn.dtype != np.int64 or bn.dtype != np.int64:
        return None
    pden = x.den * w.den
    den = math.lcm(pden, b.den)
    fp, fb = den // pden, den // b.den
    prod_bound = x.bound() * w.bound() * max(wn.shape[-1], 1)
    if prod_bound >= INT64_SAFE or prod_bound * fp + b.bound() * fb >= INT64_SAFE:
        return None
    # the scaled operands themselves must be int64 too: with x = 0 (or b = 0) the bounds
    # above pass whatever the factor, and w·f (or b·g) would overflow
    if w.bound() * fp >= INT64_SAFE or b.bound() * fb >= INT64_SAFE or max(fp, fb) >= INT64_SAFE:
        return None
    cols = np.flatnonzero((wn != 0).any(axis=0))
    wt = wn[:, cols].T * np.int64(fp)  # (c, out): |x|·|w|·f·c < 2**62 bounds every partial sum
    bias = bn * np.int64(fb)
    out_dim = wn.shape[0]

    def block(rows: np.ndarray) -> np.ndarray:
        if cols.size == 0:
            res = np.empty(rows.shape[:-1] + (out_dim,), dtype=np.int64)
            res[...] = bias
            return res
        used = rows[..., cols]
        res = np.matmul(used.reshape(-1, cols.size), wt)
        res += bias
        return res.reshape(rows.shape[:-1] + (out_dim,))

    N, T = xn.shape[0], xn.shape[1]
    if sh is not None and xn.ndim == 3 and N % sh.group == 0 and 0 < sh.q0 < T:
        G, q0 = sh.group, sh.q0
        return RatArray(_join(block(xn[::G, :q0]), block(xn[:, q0:]), G), den)
    return RatArray(block(xn), den)


def _rows_shareable(x: RatArray, w: RatArray, sh: Sharing) -> bool:
    """Whether :func:`_affine` may take the product in two row blocks: int64 operands whose
    products and sums stay below 2**62 (so the whole product, too, is int64 and exact),
    whole groups, and rows on both sides of ``sh.q0``."""
    N, T = x.shape[0], x.shape[1]
    return (
        x.num.dtype == np.int64
        and w.num.dtype == np.int64
        and N % sh.group == 0
        and 0 < sh.q0 < T
        and x.bound() * w.bound() * max(w.shape[-1], 1) < INT64_SAFE
    )


def run_head(
    ch: CompiledHead, x: RatArray, sh: Sharing | None = None
) -> tuple[HeadTrace, tuple[np.ndarray | None, RatArray]]:
    """One head on a batch: the trace and its contribution O·Σα v, as the columns it writes
    and their values (N, T, len(columns)); columns None: every column.

    With ``sh`` (a causal head under :class:`Sharing`), the argmax sets and averages of rows
    before ``sh.q0`` are found once per group of words; the trace is the same, bit for bit.
    """
    N, T, _ = x.shape
    q = _affine(x, ch.Q, ch.bq, sh)
    k = _affine(x, ch.K, ch.bk, sh)
    v = _affine(x, ch.V, ch.bv, sh)
    scores = _scores(q, k, sh)
    vis = visible_mask(ch.head.mask, T)
    rule = ch.head.hard
    if T > 1 and _same_rows(vis[None]) and _same_rows(q.num):
        # a constant query over the same keys: every row attends alike, find it once
        top, support, count, mixed, rowmax = (
            _repeat_rows(a, T) for a in _attend(scores.num[:, :1], vis[:1], rule, v)
        )
    elif sh is None:
        top, support, count, mixed, rowmax = _attend(scores.num, vis, rule, v)
    else:
        G, q0 = sh.group, sh.q0
        firsts = slice(0, N, G)
        f = _attend(scores.num[firsts, :q0], vis[:q0], rule, RatArray(v.num[firsts], v.den))
        r = _attend(scores.num[:, q0:], vis[q0:], rule, v)
        top, support, count = (_join(a, b, G) for a, b in zip(f[:3], r[:3], strict=True))
        mixed = join_groups(f[3], r[3], G)
        rowmax = _join(f[4], r[4], G)
    trace = HeadTrace(
        q=q,
        k=k,
        v=v,
        scores=scores,
        visible=vis,
        top=top,
        support=support,
        count=count,
        mixed=mixed,
        rowmax=rowmax,
    )
    return trace, _contribution(ch, mixed)


def _scores(q: RatArray, k: RatArray, sh: Sharing | None = None) -> RatArray:
    """The score matrices q·kᵀ per word: (N, T, T). For int64 q, k whose products and sums
    provably stay below 2**62, numpy's batched int64 matmul (exact, and for these small
    (T, c)·(c, T) blocks several times faster than converting to float64 and back, which
    :func:`~exactattn.engine.ratarray.int_matmul` does for a batched operand): the same
    integers. With ``sh``, the block of query and key rows before ``sh.q0`` is the same for
    every word of a group and is computed on the group's first word."""
    c = q.shape[-1]
    if (
        c > 1
        and q.num.dtype == np.int64
        and k.num.dtype == np.int64
        and q.bound() * k.bound() * c < INT64_SAFE
    ):
        qn, kt = q.num, np.swapaxes(k.num, 1, 2)
        N, T = qn.shape[0], qn.shape[1]
        if sh is None or N % sh.group or not 0 < sh.q0 < T:
            return RatArray(np.matmul(qn, kt), q.den * k.den)
        else:
            G, q0 = sh.group, sh.q0
            s = np.empty((N, T, T), dtype=np.int64)
            shared = np.matmul(qn[::G, :q0], kt[::G, :, :q0])  # (N/G, q0, q0)
            s.reshape(N // G, G, T, T)[:, :, :q0, :q0] = shared[:, None]
            s[:, :q0, q0:] = np.matmul(qn[:, :q0], kt[:, :, q0:])
            s[:, q0:, :] = np.matmul(qn[:, q0:], kt)
            return RatArray(s, q.den * k.den)
    return q.bmm(RatArray(np.swapaxes(k.num, 1, 2), k.den))


def _contribution(ch: CompiledHead, mixed: RatArray) -> tuple[np.ndarray | None, RatArray]:
    """O·mixed as (columns, values): only the columns the head writes (None: all of them)."""
    if ch.out_cols is None:
        return None, mixed
    return ch.out_cols, mixed.matmul_t(ch.O_used)


def _same_rows(a: np.ndarray) -> bool:
    """Whether every row (axis 1) of ``a`` equals row 0, for every word (axis 0)."""
    return a.shape[1] == 0 or bool((a == a[:, :1]).all())


def rows_alike(tr: HeadTrace) -> bool:
    """Whether every query row of the trace has the same hard query and visible keys (so
    the same scores, argmax sets and averages): one row stands for all of them."""
    return _same_rows(tr.visible[None]) and _same_rows(tr.q.num)


def _repeat_rows(a: np.ndarray | RatArray, T: int) -> Any:
    if isinstance(a, RatArray):
        return RatArray(np.repeat(a.num, T, axis=1), a.den)
    return np.repeat(a, T, axis=1)


def _join(first: np.ndarray, rest: np.ndarray, group: int) -> np.ndarray:
    """Rows of each group's first word (repeated ``group`` times), then every word's own.

    Written straight into the result (no repeated temporary): the array of
    ``np.concatenate([np.repeat(first, group, axis=0), rest], axis=1)``."""
    N = rest.shape[0]
    if first.shape[0] * group != N or first.shape[2:] != rest.shape[2:]:
        return np.concatenate([np.repeat(first, group, axis=0), rest], axis=1)
    q0 = first.shape[1]
    out = np.empty((N, q0 + rest.shape[1]) + rest.shape[2:], dtype=np.result_type(first, rest))
    out.reshape((N // group, group) + out.shape[1:])[:, :, :q0] = first[:, None]
    out[:, q0:] = rest
    return out


def tie_support(top: np.ndarray, rule: str) -> np.ndarray:
    """The positions hard attention averages over, given ``top`` (..., T): the maximal visible
    positions of each query row. ``average`` keeps them all; ``leftmost``/``rightmost`` keep
    the first/last of them. The one tie rule of every engine (batch, long input, certified
    long input)."""
    if rule == "average":
        return top
    support = np.zeros_like(top)
    pick = (
        np.argmax(top, axis=-1)
        if rule == "leftmost"
        else top.shape[-1] - 1 - np.argmax(top[..., ::-1], axis=-1)
    )
    idx = np.nonzero(top.any(axis=-1))
    support[(*idx, pick[idx])] = True
    return support


def row_counts(a: np.ndarray) -> np.ndarray:
    """``a.sum(axis=-1)`` of a boolean (N, R, T) array, as int64: summed in uint8 by einsum
    when T < 256 (no overflow: at most T ones), about 3× cheaper than numpy's boolean sum
    (or ``count_nonzero``) along a short last axis."""
    if a.ndim == 3 and a.shape[-1] < 256:
        return np.einsum("ijk->ij", a.view(np.uint8)).astype(np.int64)
    return a.sum(axis=-1, dtype=np.int64)


def _attend(
    s: np.ndarray, vis: np.ndarray, rule: str, v: RatArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, RatArray, np.ndarray]:
    """Hard attention of query rows with scores ``s`` (N, R, T) and visibility ``vis``
    (R, T): the argmax sets, the supports, their sizes, the averaged values (N, R, m) and
    the largest visible score of each row (N, R)."""
    if s.dtype == object:
        floor = -(max(abs(int(s.max())), abs(int(s.min()))) + 1) if s.size else -1
        masked = np.where(vis[None], s, floor)
        rowmax = masked.max(axis=2, keepdims=True)
    else:
        lowest = np.iinfo(np.int64).min
        if s.shape[-1]:
            # hidden keys at the lowest int64, then a running maximum key by key: the
            # maxima of ``np.max(s, where=vis, initial=lowest)`` (its masked reduction is
            # slower for these short rows)
            masked = np.where(vis[None], s, lowest)
            rowmax = masked[..., 0].copy()
            for j in range(1, s.shape[-1]):
                np.maximum(rowmax, masked[..., j], out=rowmax)
            rowmax = rowmax[..., None]
        else:
            rowmax = np.max(s, axis=2, keepdims=True, where=vis[None], initial=lowest)
    top = vis[None] & (s == rowmax)
    support = tie_support(top, rule)
    count = row_counts(support)
    if v.num.dtype == np.int64 and v.bound() * max(s.shape[-1], 1) < INT64_SAFE:
        # int64 matmul of 0/1 rows: exact by the bound, the integers of ``bmm`` without its
        # round trip through float64
        summed = RatArray(np.matmul(support.astype(np.int64), v.num), v.den)
    else:
        ones = RatArray(support.astype(np.int64), 1, bound=1 if support.any() else 0)
        summed = ones.bmm(v)  # (N, R, m) = Σ_{j∈H} v_j
    return top, support, count, _divide_rows(summed, count), rowmax[..., 0]


def _divide_rows(summed: RatArray, count: np.ndarray) -> RatArray:
    """Row r of ``summed`` (N, T, m) divided by ``count[r]`` exactly (rows with count 0 are 0).

    The common denominator grows only by the lcm of the counts that occur *after* cancelling
    each row's gcd with its numerators — not by lcm(1..T). It is ~e^T only when the averages
    really are 1/1, …, 1/T (one-letter inputs); then the numerators become Python ints in
    this array and what is computed from it, and stay int64 everywhere else.
    """
    if count.size == 0 or int(count.max()) <= 1:
        return summed.reduced()  # unique hard attention or no ties: nothing to divide
    num = summed.num
    cnt = np.maximum(count, 1).astype(np.int64)
    g_rows = np.gcd.reduce(num, axis=-1)  # 0 for an all-zero row
    g = np.gcd(g_rows, cnt).astype(np.int64)  # divides the count and every entry of the row
    cnt_red = cnt // g  # what the row's denominator still needs
    L = 1
    for c in np.flatnonzero(np.bincount(cnt_red.reshape(-1))).tolist():  # counts ≤ T: no sort
        L = math.lcm(L, int(c))
    if num.dtype != object and L < INT64_SAFE:
        quotient = num // g[..., None]
        factors = (L // cnt_red)[..., None]
    else:
        quotient = num.astype(object) // g[..., None].astype(object)
        factors = np.frompyfunc(lambda c: L // int(c), 1, 1)(cnt_red)[..., None]
    return RatArray(quotient, 1).scale_rows(factors, L * summed.den).reduced()


def run_hard(
    cm: CompiledModel,
    words: Sequence[Sequence[str]],
    n: int,
    share: bool = True,
    upto: int | None = None,
) -> HardBatch:
    """The hard meaning of every word in the batch (all of length n).

    ``share``: use :func:`prefix_sharing` when the batch allows it (same results).
    ``upto``: only the first ``upto`` layers (the exact prefix under the hard filter,
    engine/hardfilter.py); the trace of each is the same as in the whole run.
    """
    letters = cm.letters(words, n)
    x = cm.embed(words, n, letters).reduced()
    x0 = x
    sh = prefix_sharing(cm.model, words, n, len(words)) if share else None
    layers: list[LayerTrace] = []
    for li, layer in enumerate(cm.layers if upto is None else cm.layers[:upto]):
        if isinstance(layer, list):
            traces = []
            out = x
            for ch in layer:
                tr, (cols, contrib) = run_head(
                    ch, x, sh if sh is not None and li < sh.layers else None
                )
                traces.append(tr)
                out = out + contrib if cols is None else out.add_columns(cols, contrib)
            out = out.reduced()
            layers.append(LayerTrace("attention", x, out, heads=traces))
        else:
            h = x
            pre = []
            fsh = sh if sh is not None and li < sh.layers else None
            for w, b in layer.hidden:
                z = _affine(h, w, b, fsh)
                pre.append(z)
                h = z.relu()
            if layer.out_cols is None:
                w, b = layer.out
                out = (x + _affine(h, w, b, fsh)).reduced()
            else:
                w, b = layer.out_used
                out = x.add_columns(layer.out_cols, _affine(h, w, b, fsh)).reduced()
            layers.append(LayerTrace("ffn", x, out, pre=pre))
        x = out
    return HardBatch(
        n=n, words=[tuple(w) for w in words], x0=x0, layers=layers, sharing=sh, letters=letters
    )


# ---------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------


@dataclass
class HardOutputs:
    """Read-out of the final activations: per word, exact."""

    values: RatArray  # accept: (N,); argmax/value: (N, n, r)
    kind: str


_OUT_W: dict[int, tuple[Any, RatArray, RatArray]] = {}


def _output_weights(out: Any) -> tuple[RatArray, RatArray]:
    """The read-out's weight and bias as RatArrays, converted once per output object (the
    conversion was a fixed cost of every batch: tracr programs run batches of a few words)."""
    got = _OUT_W.get(id(out))
    if got is None or got[0] is not out:
        if len(_OUT_W) > 256:
            _OUT_W.clear()
        if isinstance(out, AcceptOutput):
            w = RatArray.from_fractions([list(out.weight)])
            b = RatArray.from_fractions([out.bias])
        else:
            w = RatArray.from_fractions(out.weight)
            b = RatArray.from_fractions(out.bias)
        got = _OUT_W[id(out)] = (out, w, b)
    return got[1], got[2]


_READ: dict[int, tuple[Model, RatArray, int, HardOutputs]] = {}


def read_output(model: Model, x: RatArray, n: int) -> HardOutputs:
    """The exact read-out of the final activations ``x`` (words of length n).

    The last two results are kept, by the identity of the model and of ``x`` (RatArrays
    are never changed in place): a check reads a batch's outputs for the hard meaning
    (measure.LengthAccumulator.add_hard) and again in the certified float read-out
    (the float64 tier), which now gets the same object instead of a second exact product."""
    got = _READ.get(id(x))
    if got is not None and got[0] is model and got[1] is x and got[2] == n:
        return got[3]
    res = _read_output(model, x, n)
    if len(_READ) >= 2:
        _READ.clear()
    _READ[id(x)] = (model, x, n, res)
    return res


def _read_output(model: Model, x: RatArray, n: int) -> HardOutputs:
    out = model.output
    if isinstance(out, AcceptOutput):
        slot = model.accept_slot(n)
        w, bias = _output_weights(out)
        y = x[:, slot, :].matmul_t(w)  # (N, 1)
        y = y + bias
        return HardOutputs(RatArray(y.num[:, 0], y.den), "accept")
    slots = model.output_positions(n)
    W, b = _output_weights(out)
    P = len(slots)
    if P and list(slots) == list(range(slots[0], slots[0] + P)):
        xs = RatArray(x.num[:, slots[0] : slots[0] + P, :], x.den)  # a view: same numbers
    else:
        xs = RatArray(x.num[:, slots, :], x.den)
    y = xs.matmul_t(W) + b  # b itself: its bound is found once, not per batch
    return HardOutputs(y, out.kind)


def accept_decisions(model: Model, y: RatArray) -> tuple[np.ndarray, list[Fraction]]:
    """Accept flags and margins |y − t| per word."""
    out = model.output
    assert isinstance(out, AcceptOutput)
    t = out.threshold
    res = []
    margins = []
    for idx in range(y.shape[0]):
        val = y.fraction(idx)
        res.append(val > t)
        margins.append(abs(val - t))
    return np.array(res, dtype=bool), margins


def argmax_labels(
    model: Model, y: RatArray
) -> tuple[list[list[str | None]], list[Fraction | None]]:
    """Per word and position, the label of the unique largest entry (None on a tie).

    The margin of a word is the smallest gap between the winner and the runner-up over its
    positions (0 at a tie, as the spec has it); ``None`` when no position has a competitor
    (a single label), rather than a 0 that would claim a tie.
    """
    out = model.output
    assert isinstance(out, ArgmaxOutput)
    num = y.num
    if num.dtype == np.int64 and num.ndim == 3 and num.shape[2] >= 1 and y.bound() < 2**61:
        return _argmax_labels_int64(out, num, y.den)
    labels: list[list[str | None]] = []
    margins: list[Fraction | None] = []
    for wi in range(num.shape[0]):
        row_labels: list[str | None] = []
        margin = None
        for p in range(num.shape[1]):
            vals = [int(v) for v in num[wi, p]]
            best = max(vals)
            winners = [i for i, v in enumerate(vals) if v == best]
            if len(winners) > 1:
                row_labels.append(None)
                mg = Fraction(0)  # a hard tie: margin 0 (the spec's convention)
            else:
                row_labels.append(out.labels[winners[0]])
                rest = [v for i, v in enumerate(vals) if i != winners[0]]
                mg = Fraction(best - max(rest), y.den) if rest else None
            if mg is not None and (margin is None or mg < margin):
                margin = mg
        labels.append(row_labels)
        margins.append(margin)
    return labels, margins


def argmax_least_margin(
    model: Model, y: RatArray
) -> tuple[list[list[str | None]], Fraction | None]:
    """:func:`argmax_labels`'s labels and the least of its margins (None when every margin
    is None): the batch's least margin without a Fraction per word."""
    out = model.output
    assert isinstance(out, ArgmaxOutput)
    num = y.num
    if num.dtype == np.int64 and num.ndim == 3 and num.shape[2] >= 1 and y.bound() < 2**61:
        labels, diff = _argmax_int64(out, num)
        return labels, None if diff is None else Fraction(int(diff.min()), y.den)
    labels, margins = argmax_labels(model, y)
    given = [mg for mg in margins if mg is not None]
    return labels, min(given) if given else None


def _argmax_labels_int64(
    out: ArgmaxOutput, num: np.ndarray, den: int
) -> tuple[list[list[str | None]], list[Fraction | None]]:
    """:func:`argmax_labels` of int64 numerators below 2**61 (differences fit int64), for the
    whole batch at once: the same labels and margins (it was a Python loop per word and
    position, most of a tracr program's measurement)."""
    labels, diff = _argmax_int64(out, num)
    if diff is None:
        return labels, [None] * num.shape[0]
    return labels, [Fraction(int(v), den) for v in diff.min(axis=1).tolist()]


def _argmax_int64(out: ArgmaxOutput, num: np.ndarray) -> tuple[list[list[str | None]], Any]:
    """The labels and the (N, P) margin numerators (None where no position has a
    competitor) of :func:`_argmax_labels_int64`."""
    N, P, r = num.shape
    best = num.max(axis=2)  # (N, P)
    eq = num == best[..., None]
    nwin = row_counts(eq) if eq.shape[-1] < 256 else eq.sum(axis=2)
    first = np.argmax(eq, axis=2)
    lab = np.empty(r + 1, dtype=object)
    lab[:r] = list(out.labels)
    lab[r] = None
    labels = lab[np.where(nwin > 1, r, first)].tolist()
    if r == 1 or N == 0 or P == 0:  # no competitor anywhere: no margin (None, not 0)
        return labels, None
    low = np.iinfo(np.int64).min
    others = num.copy()
    np.put_along_axis(others, first[..., None], low, axis=2)  # the winner left out
    return labels, np.where(nwin > 1, 0, best - others.max(axis=2))  # a tie: 0 (the spec's)
