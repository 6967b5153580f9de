"""A certified float64 filter for the hard meaning (issue 38): enclosures or "cannot tell".

The exact hard meaning (:mod:`.hard`) costs most of a check on a model whose exact numbers
outgrow int64 (the random benchmark models: 50–108-bit score numerators, Python integers).
There the check computes exactly only the leading layers whose numbers stay int64 (the
*exact prefix*, :func:`filter_plan`), and the rest in float64 with a certified bound per word
on every tensor — the Shewchuk/CGAL pattern: the filter decides each query row's argmax (a
unique top certified by a score gap wider than the scores' radii; at the first filtered
layer also a tie, confirmed on the exact keys), the accept read-out, and encloses every
quantity a measurement takes an extremum of (each layer's largest |activation|, each head's
smallest score gap, the read-out's margin |y − t|). What it cannot decide — near-ties, ties
it cannot confirm, non-finite numbers — marks the word "cannot tell", and :mod:`.measure`
recomputes it with :func:`.hard.run_hard`, as it recomputes every word that may attain an
extremum (a candidate: its enclosure is not certainly beaten), so that every measured value
and witness is the exact path's (proofs/hard_filter.md, Lemma X).

Radii are one float per word and tensor (a bound on |computed − exact| for every entry of the
word), propagated by forward error analysis as the coarse tier's lemmas (proofs/coarse_tier.md)
with the per-entry radius replaced by its per-word maximum; proofs/hard_filter.md states and
proves the lemmas, labelled as in the comments here: HE (exact numbers converted), HL (linear
maps), HR (ReLU), HD (scores), HA (argmax decisions and gap enclosures), HT (ties confirmed
on exact keys), HM (the hard mix), HS (residual sums), HO (the accept read-out). Every radius
is multiplied by SAFE (the radius formula's own roundings) and raised by ETA (underflow).

Tensors are feature-major (d, B, T) as in the coarse tier, which reads the exact prefix and
this filter's layers (:class:`FilterSource`) instead of an exact trace; products are
fixed-order sums of elementwise IEEE operations (:func:`.cascade.interval.fixed_prod`), so
every bit — and hence which words are recomputed and what the coarse tier reads — is the same
on every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice
from typing import Any

import numpy as np

from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade.coarse import BIG_SCORE, RULE_WORDS, coarse_pays, exact_layer
from exactattn.engine.hard import (
    CompiledModel,
    HardBatch,
    head_keys,
    read_output,
    run_hard,
    visible_mask,
)
from exactattn.engine.ratarray import RatArray
from exactattn.inputs import words_of_length
from exactattn.model import AcceptOutput, AttentionLayer

U = 2.0**-53  # unit roundoff of binary64
SAFE = 1.0 + 2.0**-20  # every radius is multiplied by this (the radius formula's roundings)
ETA = 2.0**-1000  # absolute allowance per radius (underflow of products, ≥ 2^13·2^-1074)
CONV = 2.0**-50  # relative error of an exact rational converted by fl(fl(N)/fl(D)) (Lemma HE)
REL = 2.0**-50  # relative slack of an enclosure end computed in a few roundings (Lemma HA)
MAG = 1.0 + 2.0**-40  # Lemma HL (ii): a magnitude bound's factor for the roundings
BIG = 2.0**1000  # a per-word bound at or above this: the word is not decided (overflow)
# the range the lemmas assume (otherwise the filter declines the model): nonzero weights are
# normal floats (their rounding relative), inner dimensions ≤ 2^12
MAX_DIM = 2**12
MIN_WEIGHT = Fraction(2) ** -1022


def gamma(k: int) -> float:
    """γ_k = k·u/(1 − k·u), rounded up (Higham, Lemma 3.1)."""
    return iv.float_up(Fraction(k) * Fraction(U) / (1 - Fraction(k) * Fraction(U)))


@dataclass
class _Map:
    """y = x·Wᵀ + b (W exact, m × d) with the constants of Lemma HL, only its nonzero terms."""

    terms: iv.Terms  # per output o: (c, Ŵ_oc ≠ 0), c increasing
    bias: np.ndarray | None  # b̂ (m,), None where b = 0
    norm: float  # ⌈‖W‖∞⌉ = ⌈max_o Σ_c |W_oc|⌉
    bmax: float  # ⌈max |b|⌉
    g: float  # ⌈(γ_{d+1} + u)(1 + u)·SAFE⌉: the product's and the weights' rounding

    @staticmethod
    def of(w: Sequence[Sequence[Fraction]], b: Sequence[Fraction] | None) -> _Map:
        d = len(w[0]) if len(w) else 0
        terms = [[(c, float(x)) for c, x in enumerate(row) if x != 0] for row in w]
        bias = None if b is None or not any(b) else np.array([float(x) for x in b])
        norm = iv.float_up(max((sum(abs(x) for x in row) for row in w), default=Fraction(0)))
        bmax = iv.float_up(max((abs(x) for x in b), default=Fraction(0))) if b else 0.0
        g = iv.float_up((Fraction(gamma(d + 1)) + Fraction(U)) * (1 + Fraction(U)) * Fraction(SAFE))
        return _Map(terms, bias, norm, bmax, g)

    def __call__(
        self, x: np.ndarray, mag: np.ndarray, rad: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ŷ (m, B, T), its magnitude bound and its radius per word (B,)) from x̂ (d, B, T)
        with max |x̂| ≤ ``mag`` and radius ``rad`` per word. Lemma HL: |ŷ − y| ≤ ‖W‖∞·R +
        g·(‖W‖∞·M + max|b|), and max |ŷ| ≤ (‖W‖∞·M + max|b|)·MAG (no pass over ŷ)."""
        y = iv.fixed_prod(x, self.terms)
        if self.bias is not None:
            y += self.bias[:, None, None]
        base = self.norm * mag + self.bmax
        r = (self.norm * rad + self.g * base) * SAFE + ETA
        return y, base * MAG, r


def _row_max_abs(x: np.ndarray) -> np.ndarray:
    """max |x| per (word, row), (B, T), of a feature-major (d, B, T) array (nan propagates)."""
    if x.shape[0] == 0:
        return np.zeros(x.shape[1:])
    hi = x.max(axis=0)
    np.maximum(hi, -x.min(axis=0), out=hi)
    return hi


def _word_max(a: np.ndarray) -> np.ndarray:
    """max per word (B,) of a (B, T) array, exactly: a loop over T (nan propagates)."""
    if a.shape[1] == 0:
        return np.zeros(a.shape[0])
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.maximum(out, a[:, j], out=out)
    return out


@dataclass
class _Head:
    q: _Map
    k: _Map
    v: _Map
    o: _Map | None  # None: the head writes its value rows itself (m = d)
    cols: np.ndarray  # the coordinates the head writes (rows of O that are not all zero)
    c: int  # inner dimension of the scores
    gc: float  # γ_c, rounded up
    gT: float  # γ_T, rounded up (a tie's average: a sum of at most T values)
    vis: np.ndarray  # (T, T) bool
    nvis: np.ndarray  # (T,) visible keys per query row
    rule: str  # the tie rule (average, leftmost, rightmost)


@dataclass
class _FFN:
    hidden: list[_Map]
    out: _Map
    cols: np.ndarray  # the coordinates the layer writes


class FilterWeights:
    """A model's weights as float64 terms with Lemma HL's constants, for one input length."""

    def __init__(self, cm: CompiledModel, T: int) -> None:
        self.layers: list[list[_Head] | _FFN] = []
        try:
            self._build(cm, T)
        except OverflowError:  # a weight past float64's range: the filter declines the model
            self.layers = []
            self.ok = False

    def _build(self, cm: CompiledModel, T: int) -> None:
        model = cm.model
        mats: list[Sequence[Sequence[Fraction]]] = []
        for layer in model.layers:
            if isinstance(layer, AttentionLayer):
                heads = []
                for h in layer.heads:
                    vis = visible_mask(h.mask, T)
                    if h.output is None:
                        cols, o = np.arange(model.d), None
                    else:
                        cols = np.flatnonzero([any(row) for row in h.output])
                        o = _Map.of([h.output[r] for r in cols.tolist()], None)
                    heads.append(
                        _Head(
                            _Map.of(h.query, h.query_bias),
                            _Map.of(h.key, h.key_bias),
                            _Map.of(h.value, h.value_bias),
                            o,
                            cols,
                            len(h.query),
                            gamma(max(len(h.query), 1)),
                            gamma(max(T, 1)),
                            vis,
                            vis.sum(axis=1),
                            h.hard,
                        )
                    )
                    mats += [h.query, h.key, h.value] + ([h.output] if h.output else [])
                self.layers.append(heads)
            else:
                w, b = layer.output
                cols = np.flatnonzero([any(row) or bb != 0 for row, bb in zip(w, b, strict=True)])
                self.layers.append(
                    _FFN(
                        [_Map.of(hw, hb) for hw, hb in layer.hidden],
                        _Map.of([w[r] for r in cols.tolist()], [b[r] for r in cols.tolist()]),
                        cols,
                    )
                )
                mats += [hw for hw, _ in layer.hidden] + [w]
        out = model.output
        self.ok = isinstance(out, AcceptOutput) and T <= MAX_DIM
        if isinstance(out, AcceptOutput):
            mats.append((tuple(out.weight),))
            self.read = _Map.of((tuple(out.weight),), (out.bias,))
            self.thr = float(out.threshold)
            self.thr_err = iv.float_up(abs(Fraction(self.thr) - out.threshold))
        self.ok = self.ok and all(_in_range(w) for w in mats)


def _in_range(w: Sequence[Sequence[Fraction]]) -> bool:
    """At most MAX_DIM rows and columns, no nonzero weight below 2^-1022 (Lemma HL)."""
    return len(w) <= MAX_DIM and all(
        len(row) <= MAX_DIM and all(x == 0 or abs(x) >= MIN_WEIGHT for x in row) for row in w
    )


_FW: dict[tuple[int, int], tuple[CompiledModel, FilterWeights]] = {}


def filter_weights(cm: CompiledModel, T: int) -> FilterWeights:
    hit = _FW.get((id(cm), T))
    if hit is None or hit[0] is not cm:
        if len(_FW) > 16:
            _FW.clear()
        hit = _FW[(id(cm), T)] = (cm, FilterWeights(cm, T))
    return hit[1]


_PLAN: dict[tuple[int, int], tuple[CompiledModel, int | None]] = {}


def filter_plan(cm: CompiledModel, n: int) -> int | None:
    """Where the filter takes over at length ``n``: the number of leading layers computed
    exactly (the exact prefix), or None where the filter does not run.

    It runs on a model with an accept read-out and weights in the lemmas' range whose exact
    scores are beyond float64 on the first words of the length (the coarse tier's rule,
    :func:`~.cascade.coarse.coarse_pays`: there the exact path computes with Python
    integers); the prefix is the layers before the first whose exact trace, on those words,
    holds a Python-integer array or scores of 2^53 or more (so it stays int64 and cheap; its
    rows depend on few letters, which makes extrema shared by many words: exact there, they
    need no candidates).
    A function of the model and n only: the same in every process, shard and resume."""
    hit = _PLAN.get((id(cm), n))
    if hit is not None and hit[0] is cm:
        return hit[1]
    plan = _plan(cm, n)
    if len(_PLAN) > 64:
        _PLAN.clear()
    _PLAN[(id(cm), n)] = (cm, plan)
    return plan


def _plan(cm: CompiledModel, n: int) -> int | None:
    model = cm.model
    if not isinstance(model.output, AcceptOutput) or not model.layers:
        return None
    if not filter_weights(cm, model.length(n)).ok or not coarse_pays(cm, n):
        return None
    words = list(islice(words_of_length(model.alphabet, n), RULE_WORDS))
    hb = run_hard(cm, words, n, share=False)
    for li, lt in enumerate(hb.layers):
        arrays = [lt.x_out] + list(lt.pre or ())
        for tr in lt.heads or ():
            arrays += [tr.q, tr.k, tr.v, tr.scores, tr.mixed]
        if any(a.num.dtype == object for a in arrays) or any(
            tr.scores.bound() >= BIG_SCORE for tr in lt.heads or ()
        ):
            return li
    return None  # small integers throughout: nothing to gain


@dataclass
class FirstHead:
    """A first-layer head's scores and values (both meanings start from the embeddings): what
    the coarse tier reads in place of the exact ones (its ``EXACT_FIRST``), when the filter
    computes the first layer."""

    s: np.ndarray  # (B, T, T) ŝ
    rho: np.ndarray  # (B,) |ŝ − s| ≤ rho per word (Lemma HD)
    v: np.ndarray  # (m, B, T) v̂, feature-major
    rv: np.ndarray  # (B,) |v̂ − v| ≤ rv per word (Lemma HL)


@dataclass
class HeadFacts:
    """What the filter found for one head on every word (where the word is decided)."""

    gap_lo: np.ndarray  # (B,) ≤ the word's smallest score gap (inf: no row has one)
    gap_hi: np.ndarray  # (B,) ≥ it
    top_max: np.ndarray  # (B,) the largest argmax set of a row
    nontop_max: np.ndarray  # (B,) the most visible keys outside a row's argmax set


@dataclass
class HardFilter:
    """The filter's results on a batch of words of length n (per-word arrays are (B,)).

    ``pre`` is the exact trace of the first ``len(pre.layers)`` layers (the whole batch, as
    :func:`.hard.run_hard` computes it); the layers after are the filter's. A word is ``ok``
    when every argmax of every filtered head and its accept decision are certain and every
    number finite; then ``x[l]`` (feature-major (d, B, T)) encloses its exact activations
    after filtered layer l within ``rad[l]``, and ``act_lo``/``act_hi``, ``heads[(l, h)]``,
    ``margin_lo``/``margin_hi`` enclose its largest |activation|, its smallest score gap and
    |y − t|. The words recomputed exactly by the measurement (every word not ok, and every
    candidate for an extremum) are ``exact_idx`` (rank order) with their trace ``exact_hb``."""

    n: int
    words: list[tuple[str, ...]]
    letters: np.ndarray | None
    pre: HardBatch  # the exact prefix (its x0: the exact embeddings)
    ok: np.ndarray
    x: dict[int, np.ndarray]  # filtered layer → x̂ after it, (d, B, T)
    rad: dict[int, np.ndarray]  # filtered layer → its radius per word
    act_lo: dict[int, np.ndarray]  # filtered layer → ≤ max |x| of the word
    act_hi: dict[int, np.ndarray]  # filtered layer → ≥ max |x| of the word
    heads: dict[tuple[int, int], HeadFacts]  # filtered heads
    nvis: dict[tuple[int, int], np.ndarray]  # filtered heads: visible keys per query row
    accept: np.ndarray  # the hard decision y > t (where ok)
    margin_lo: np.ndarray  # ≤ |y − t| (where ok)
    margin_hi: np.ndarray  # ≥ |y − t|
    first: list[FirstHead]  # the first layer's heads, when the filter computed them
    exact_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    exact_hb: HardBatch | None = None

    @property
    def B(self) -> int:
        return len(self.words)

    @property
    def x0(self) -> RatArray:
        return self.pre.x0

    @property
    def start(self) -> int:
        """The first filtered layer (the exact prefix's length)."""
        return len(self.pre.layers)

    def exact(self, cm: CompiledModel, idx: np.ndarray) -> HardBatch:
        """The exact hard meaning of the words ``idx`` (a sub-batch, no row sharing: what
        ``cascade.batch.take_batch`` of the whole batch's trace holds, up to the common
        denominators, which are those of the sub-batch's values)."""
        return run_hard(cm, [self.words[i] for i in idx.tolist()], self.n, share=False)


def run_filter(cm: CompiledModel, words: Sequence[Sequence[str]], n: int, start: int) -> HardFilter:
    """The hard meaning of a batch of words of length n: the first ``start`` layers exactly
    (:func:`filter_plan`), the rest by the filter."""
    model = cm.model
    pre = run_hard(cm, words, n, upto=start)
    x_in = pre.activations[-1]  # exact: the embeddings or the prefix's last layer
    B, T, _ = x_in.shape
    fw = filter_weights(cm, T)
    bad = np.zeros(B, dtype=bool)  # a bound reached BIG or is not finite: not decided
    sure = np.ones(B, dtype=bool)  # every argmax decided so far
    xs: dict[int, np.ndarray] = {}
    rads: dict[int, np.ndarray] = {}
    act_lo: dict[int, np.ndarray] = {}
    act_hi: dict[int, np.ndarray] = {}
    facts: dict[tuple[int, int], HeadFacts] = {}
    nvis: dict[tuple[int, int], np.ndarray] = {}
    first: list[FirstHead] = []
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        # Lemma HE: x̂ = fl(fl(N)/fl(D)), |x̂ − x| ≤ CONV·|x̂| + ETA
        try:
            x = iv.rat_float_fm(x_in.num, x_in.den)
        except OverflowError:  # exact numbers beyond float range: every word exactly
            x = np.zeros((x_in.shape[2], B, T))
            bad[:] = True
        mag = _word_max(_row_max_abs(x))
        rad = conversion_radius(x_in, mag)
        for li in range(start, len(fw.layers)):
            layer = fw.layers[li]
            if isinstance(layer, list):
                new = x.copy()
                radd = rad.copy()
                mags = mag.copy()
                for hi_, hd in enumerate(layer):
                    ex = None
                    if li == start:  # the exact keys of the layer input: ties confirmed
                        ch = cm.layers[li][hi_]  # type: ignore[index]
                        ex = (ch, x_in)
                    out, m_out, r_out, dec, hf_, fh = _head(hd, x, mag, rad, li == 0, ex)
                    sure &= dec
                    facts[(li, hi_)] = hf_
                    nvis[(li, hi_)] = hd.nvis
                    if fh is not None:
                        first.append(fh)
                    new[hd.cols] += out
                    radd += r_out
                    mags += m_out
                # Lemma HS: one rounded addition per head, each within u·(Σ magnitudes)
                rad = (radd + len(layer) * U * mags) * SAFE + ETA
                x = new
            else:
                h, hm, hr = x, mag, rad
                for lin in layer.hidden:
                    h, hm, hr = lin(h, hm, hr)
                    np.maximum(h, 0.0, out=h)  # Lemma HR: |relu a − relu b| ≤ |a − b|
                o, om, ro = layer.out(h, hm, hr)
                x = x.copy()
                x[layer.cols] += o
                rad = (rad + ro + U * (mag + om)) * SAFE + ETA
            rows = _row_max_abs(x)
            mag = _word_max(rows)
            bad |= ~(mag < BIG) | ~(rad < BIG)
            xs[li] = x
            rads[li] = rad
            # max |x| of the word: within rad of the computed max (every entry is)
            act_hi[li] = (mag + rad) * (1 + REL)
            act_lo[li] = np.maximum(mag - rad, 0.0) * (1 - REL)
        # Lemma HO: the accept read-out y = w·x[slot] + b against the threshold t
        slot = model.accept_slot(n)
        y, _, ry = fw.read(x[:, :, slot : slot + 1], mag, rad)
        cdiff = y[0, :, 0] - fw.thr
        crad = (ry + fw.thr_err + U * np.abs(cdiff)) * SAFE
        yes = cdiff - crad > 0
        no = cdiff + crad < 0
        fin = np.isfinite(cdiff) & np.isfinite(crad) & ~bad
        ok = sure & fin & (yes | no)
        margin_lo = np.maximum(np.abs(cdiff) - crad, 0.0) * (1 - REL)
        margin_hi = (np.abs(cdiff) + crad) * (1 + REL)
    return HardFilter(
        n=n,
        words=[tuple(w) for w in words],
        letters=pre.letters,
        pre=pre,
        ok=ok,
        x=xs,
        rad=rads,
        act_lo=act_lo,
        act_hi=act_hi,
        heads=facts,
        nvis=nvis,
        accept=yes,
        margin_lo=margin_lo,
        margin_hi=margin_hi,
        first=first,
    )


def conversion_radius(ra: RatArray, mag: np.ndarray) -> np.ndarray:
    """Lemma HE's radius per word of fl(fl(N)/fl(D)) for an exact array (max |x̂| = ``mag``):
    CONV·max|x̂| + ETA; ETA alone for integers below 2^53 over a power of two, which convert
    exactly but for underflow."""
    if ra.den & (ra.den - 1) == 0 and ra.bound() < 2**53:
        return np.full(mag.shape, ETA)
    return mag * CONV + ETA


def _head(
    hd: _Head,
    x: np.ndarray,
    mag: np.ndarray,
    rad: np.ndarray,
    keep_first: bool,
    exact: tuple[Any, RatArray] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, HeadFacts, FirstHead | None]:
    """One head on x̂ (d, B, T): its output on the columns it writes with a magnitude bound
    and radius per word, whether every query row's argmax is certain (per word), what the
    measurement needs (:class:`HeadFacts`), and the first-layer scores and values
    (``keep_first``). ``exact``: the head's compiled weights and its exact input, where ties
    are confirmed on the exact keys (Lemma HT)."""
    B, T = x.shape[1], x.shape[2]
    q, mq, rq = hd.q(x, mag, rad)
    k, mk, rk = hd.k(x, mag, rad)
    v, mv, rv = hd.v(x, mag, rad)
    # Lemma HD: |ŝ − s| ≤ c·(γ_c·M_q·M_k + M_q·R_k + R_q·(M_k + R_k)) + c·η, and no partial
    # sum overflows while c·M_q·M_k stays below BIG
    c = float(hd.c)
    rho = c * (hd.gc * mq * mk + mq * rk + rq * (mk + rk)) * SAFE + ETA
    fine = (c * mq * mk < BIG) & (rho < BIG)
    thr = (2.0 * SAFE) * rho  # (B,): a difference of two ŝ above it is certain (Lemma HA)
    # ŝ key by key, (B, i) slices ŝ[:, :, j] (fixed order over a), with the running top, its
    # key (the first largest) and the largest of the other visible keys: no (B, T, T) array
    # and no reduction over a short axis (the first layer keeps its scores for the coarse tier)
    S = np.empty((T, B, T))
    best = np.full((B, T), -np.inf)
    sec = np.full((B, T), -np.inf)
    t = np.zeros((B, T), dtype=np.int64)
    tmp = np.empty((B, T))
    new = np.empty((B, T), dtype=bool)
    for j in range(T):
        col = S[j]
        if hd.c == 0:
            col[...] = 0.0
        else:
            np.multiply(q[0], k[0][:, j : j + 1], out=col)
            for a in range(1, hd.c):
                np.multiply(q[a], k[a][:, j : j + 1], out=tmp)
                col += tmp
        vis_j = hd.vis[:, j]
        if not vis_j.any():
            continue
        cv = col if vis_j.all() else np.where(vis_j, col, -np.inf)
        np.greater(cv, best, out=new)
        np.maximum(sec, np.where(new, best, cv), out=sec)
        np.copyto(best, cv, where=new)
        np.copyto(t, j, where=new)
    fh = None
    if keep_first:
        fh = FirstHead(np.ascontiguousarray(S.transpose(1, 2, 0)), rho, v, rv)
    # Lemma HA: the top t of a row is its unique exact top when ŝ_t − (the largest other
    # visible ŝ) > thr; rows with one visible key have it trivially, rows with none no top
    many = hd.nvis >= 2  # (T,) rows with a gap to measure
    diff = best - sec  # (B, T); −inf − (−inf) = nan on rows without keys (never read)
    uniq = ~many[None, :] | (diff > thr[:, None])
    top_n = np.where(hd.nvis > 0, 1, 0)[None, :] * np.ones((B, 1), dtype=np.int64)
    lo_d = diff * (1 - REL) - thr[:, None] * (1 + REL)  # the gap, where the top is unique
    hi_d = diff * (1 + REL) + thr[:, None] * (1 + REL)
    mix = np.take_along_axis(v, t[None], axis=2)  # Lemma HM: a unique top's value row
    rmix, mmix = rv, mv
    if exact is not None and not uniq.all():
        # Lemma HT: where every key not certainly below the top has the top's exact key row,
        # all of them tie exactly (equal keys, equal scores), and nothing else reaches them
        rmix, mmix = _confirm_ties(
            hd, exact, S, best, thr, t, v, mv, rv, uniq, top_n, mix, lo_d, hi_d
        )
    dec = uniq.all(axis=1) & fine
    gaps = many[None, :] & (top_n < hd.nvis[None, :])  # rows with keys outside the top
    lo_g = np.where(gaps, lo_d - np.abs(lo_d) * REL, np.inf)
    hi_g = np.where(gaps, hi_d + np.abs(hi_d) * REL, np.inf)
    facts = HeadFacts(
        _word_min(lo_g),
        _word_min(hi_g),
        _word_max(top_n.astype(np.float64)).astype(np.int64),
        _word_max((hd.nvis[None, :] - top_n).astype(np.float64)).astype(np.int64),
    )
    if not (hd.nvis > 0).all():
        mix[:, :, hd.nvis == 0] = 0.0  # no visible key: exactly 0
    if hd.o is None:
        return mix, mmix, rmix, dec, facts, fh
    out, mout, rout = hd.o(mix, mmix, rmix)
    return out, mout, rout, dec, facts, fh


def _word_min(a: np.ndarray) -> np.ndarray:
    """min per word (B,) of a (B, T) array (inf where T = 0)."""
    if a.shape[1] == 0:
        return np.full(a.shape[0], np.inf)
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.minimum(out, a[:, j], out=out)
    return out


def _confirm_ties(
    hd: _Head,
    exact: tuple[Any, RatArray],
    S: np.ndarray,
    best: np.ndarray,
    thr: np.ndarray,
    t: np.ndarray,
    v: np.ndarray,
    mv: np.ndarray,
    rv: np.ndarray,
    uniq: np.ndarray,
    top_n: np.ndarray,
    mix: np.ndarray,
    lo_d: np.ndarray,
    hi_d: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose top is not certainly unique, settled where the exact keys confirm a tie
    (Lemma HT): ``uniq`` becomes True there, ``top_n`` the tie's size, ``mix`` its hard mix,
    ``lo_d``/``hi_d`` its gap (the tie against the keys outside it). Returns the mix's
    radius and magnitude bound per word (Lemma HM: an average of k values adds γ_T·M_v +
    u·M_v to the radius, and may exceed M_v by its roundings, within MAG)."""
    ch, x_in = exact
    T = S.shape[0]
    bi, ii = np.nonzero(~uniq)
    words = np.unique(bi)
    keys = head_keys(ch, RatArray(x_in.num[words], x_in.den)).num  # (K, T, c) exact
    kw = np.searchsorted(words, bi)
    sc = S[:, bi, ii].T  # (R, T): ŝ of the undecided rows
    vis = hd.vis[ii]  # (R, T)
    near = vis & ~(best[bi, ii][:, None] - sc > thr[bi][:, None])  # not certainly below
    kt = keys[kw, t[bi, ii]]  # (R, c): the top's exact key row
    same = (keys[kw] == kt[:, None, :]).all(axis=2)  # (R, T)
    ok = (~near | same).all(axis=1)
    if not ok.any():
        return rv, mv
    bi, ii, near = bi[ok], ii[ok], near[ok]
    uniq[bi, ii] = True
    cnt = near.sum(axis=1)
    top_n[bi, ii] = cnt
    # the gap: the tie's scores (within ρ of ŝ_t = best) against the largest outside it
    outside = np.where(vis[ok] & ~near, sc[ok], -np.inf).max(axis=1)
    diff = best[bi, ii] - outside
    lo_d[bi, ii] = diff * (1 - REL) - thr[bi] * (1 + REL)
    hi_d[bi, ii] = diff * (1 + REL) + thr[bi] * (1 + REL)
    if hd.rule == "average":
        # the average of the tied value rows: a fixed-order sum over the keys, one division
        vals = v[:, bi, :]  # (m, R, T)
        tot = np.zeros(vals.shape[:2])
        for j in range(T):
            tot += np.where(near[:, j], vals[:, :, j], 0.0)
        mix[:, bi, ii] = tot / cnt
        rmix = rv.copy()
        mmix = mv.copy()
        tied = np.unique(bi)
        rmix[tied] = (rv[tied] + (hd.gT + U) * mv[tied]) * SAFE + ETA
        mmix[tied] = mv[tied] * MAG
        return rmix, mmix
    pick = (
        np.argmax(near, axis=1)
        if hd.rule == "leftmost"
        else T - 1 - np.argmax(near[:, ::-1], axis=1)
    )
    mix[:, bi, ii] = v[:, bi, pick]  # one of the tied value rows, exactly (Lemma HM)
    return rv, mv


__all__ = [
    "FilterSource",
    "FilterWeights",
    "HardFilter",
    "filter_plan",
    "run_filter",
]


class FilterSource:
    """The coarse tier's hard source (``cascade.coarse.HardSource``) on a filtered batch: the
    exact prefix (as the exact trace gives it: the same conversions), then the filter's
    enclosures for the words it decided, and the exact values (converted, Lemma H of
    proofs/coarse_tier.md) of the others, which the measurement recomputed (``exact_hb``)."""

    def __init__(self, cm: CompiledModel, hf: HardFilter) -> None:
        self.hf = hf
        self.bad = np.flatnonzero(~hf.ok)
        self.hard_tie = np.zeros(hf.B, dtype=bool)
        self.pos = np.zeros(0, dtype=np.int64)
        if self.bad.size:
            assert hf.exact_hb is not None, "the measurement recomputes every undecided word"
            self.pos = np.searchsorted(hf.exact_idx, self.bad)
            assert (hf.exact_idx[self.pos] == self.bad).all()
            hb = hf.exact_hb
            vals = read_output(cm.model, hb.activations[-1], hb.n).values
            t = cm.model.output.threshold  # type: ignore[union-attr]
            num = vals.num[self.pos].astype(object)
            self.hard_tie[self.bad] = np.array(
                num * t.denominator == t.numerator * vals.den, dtype=bool
            )

    def first_head(self, h: int) -> Any:
        if self.hf.start > 0:
            heads = self.hf.pre.layers[0].heads
            assert heads is not None
            return heads[h]  # the exact trace
        return self.hf.first[h]  # the filter's (every word: the input is exact)

    def layer(self, li: int) -> tuple[np.ndarray, np.ndarray]:
        hf = self.hf
        if li < hf.start:  # the exact prefix: Lemma H, as for an exact trace
            return exact_layer(hf.pre.layers[li].x_out)
        x, r = hf.x[li], hf.rad[li]
        if not self.bad.size:
            return x, r
        assert hf.exact_hb is not None
        ex = hf.exact_hb.layers[li].x_out
        conv = iv.rat_float_fm(ex.num[self.pos], ex.den)  # (d, k, T)
        x = x.copy()
        r = r.copy()
        x[:, self.bad] = conv
        r[self.bad] = CONV * _word_max(_row_max_abs(conv))
        return x, r
