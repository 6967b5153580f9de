"""The coarse float tier (issue 25): loose but certified error ends at about float64's cost.

Most words of a length never need a tight error enclosure: ``chain.settle_dominated``
settles a word whose read-out is decided and whose per-layer error upper end is below a
certified *lower* end of another word's error. This tier gives every word of a batch such
loose ends cheaply, so only the words it cannot settle go on to ``float64.certify_float``
(notes/benchmark-rounds.md, "Coarse tier"). It runs the plain float64 forward pass of the soft
meaning and
carries one radius — a bound on |computed − exact| — per entry of every tensor, by forward
error analysis:

* linear maps: R·|W|ᵀ per entry + (γ_{d+1} + u)(1 + u)(‖W‖∞·max|x̂| + max|b|) per word;
  ReLU 1-Lipschitz, and exactly 0 where ŷ + R ≤ 0;
* scores: per entry Σ_c |q̂_ic|(γ_d|k̂_jc| + R_k,jc) + R_q,ic(|k̂_jc| + R_k,jc), so
  |x̂_ij − x_ij| ≤ ρ_ij with 1/τ's enclosure and the product's rounding;
* an attention row's midpoint is v̂_t (t = the key of the largest computed argument), its
  radius R_v[t] + Σ_{j≠t} e^{x̂_j − x̂_t + ρ_ij + ρ_it} · (value spread + 2 max R_v), the
  exponentials rounded up from float bits and the sum capped at 1 — where that off-key mass may
  exceed 2^-50 the row is computed instead with the float64 tier's proven interval softmax
  (``mr_exp``, ``div``, the centred tier's ``row_sum``; E_t = 1 exactly), kept where smaller;
* residual sums add radii and a rounding; hard values converted within 2^-50.

Every radius is multiplied by SAFE = 1 + 2^-20. The "Lemma" labels in the comments (L linear
maps, D scores, A attention rows, E the exp bound, H hard values, R ReLU, S sums, W interval
softmax rows) name these bounds; proofs/coarse_tier.md proves them under the same labels. The
formulas are those of the prototype ``benchmarks/coarse_probe.py --vector`` (its measurement in
notes/benchmark-rounds.md) but one: the first layer's heads (whose input, the embeddings, is the
same for
both meanings) take the exact hard scores and values converted by Lemma H instead of Lemmas L
and D (``EXACT_FIRST``).

The tier never claims tightness (``tight`` all False, ``settled`` all False): its ends serve only
domination. It declines (None) a model without an accept read-out; a word with a non-finite
number gets [0, inf] ends and an undecided read-out.

Determinism: which words the tier settles depends on the last bits of its floats, so by default
every product is a fixed-order sum of elementwise IEEE operations (``interval.fixed_prod``,
``_scores_t``, ``_sum_keys``, Lemma W's key loop): no BLAS, no ``einsum``, no numpy float
reductions (only exact ones: max, argmax), so the bits are the same on every machine and BLAS kernel
(tests/engine/cascade/test_coarse_tier_same_bits_everywhere.py). Tensors are feature-major
(d, B, T), so that each term is one multiply and one add over a contiguous column, and zero
weights are skipped (their terms are exactly 0). ``EXACTATTN_BLAS=1`` (``policy.blas_on``,
recorded as ``blas`` in checkpoint identities) uses numpy/BLAS matrix products instead: the
enclosures hold for any summation order, but the last bits then depend on the BLAS kernel
(notes/benchmark-rounds.md, "Coarse tier").
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import islice
from typing import Any, Protocol

import numpy as np

from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade.batch import FloatBatch
from exactattn.engine.cascade.centred import row_sum as centred_row_sum
from exactattn.engine.cascade.policy import blas_on, malloc_tuned
from exactattn.engine.hard import (
    CompiledModel,
    HardBatch,
    HeadTrace,
    read_output,
    run_hard,
    visible_mask,
)
from exactattn.engine.ratarray import RatArray
from exactattn.inputs import words_of_length
from exactattn.model import AcceptOutput, AttentionLayer

RULE_WORDS = 64  # coarse_pays's sample: the first words of the length in rank order
BIG_SCORE = 2**53  # ... on when some hard score numerator reaches this (notes/benchmark-rounds.md)
EXACT_FIRST = True  # the first layer's heads from the exact hard scores and values (_head)
BATCHED_ROWS = 1  # _softmax_rows: products per word from this many rows per word on
U = 2.0**-53  # unit roundoff of binary64
SAFE = 1.0 + 2.0**-20  # every radius is multiplied by this (covers the radius formula's roundings)
CONV = 2.0**-50  # relative error of num.astype(float64) / float(den) (three roundings, Lemma H)
ETA = 2.0**-1000  # absolute allowance per radius for underflow (≥ d·2^-1074 for d ≤ 2^70)
MARGIN = 1.0 + 2.0**-18  # err_hi is raised by this before domination (notes/benchmark-rounds.md)
# the range proofs/coarse_tier.md assumes (otherwise the tier declines): every nonzero weight a
# normal float (its rounding relative), inner dimensions ≤ 2^12 (the magnitude factor 1 + 2^-40
# covers γ_{d+1} + 4u), τ ≥ 2^-50 (ETA covers the underflow of the scores times 1/τ)
MAX_DIM = 2**12
MIN_WEIGHT = Fraction(2) ** -1022
MIN_TAU = Fraction(1, 2**50)
L2E_LO = iv.float_down(Fraction(1) / Fraction(0.6931471805599453094172321214581766))


def gamma(k: int) -> float:
    """γ_k = k·u/(1 − k·u), rounded up (Higham, Lemma 3.1): any-order k-term dot products."""
    return iv.float_up(Fraction(k) * Fraction(U) / (1 - Fraction(k) * Fraction(U)))


def _norm_inf(w: tuple[tuple[Fraction, ...], ...]) -> float:
    """max_r Σ_c |W_rc|, exact, rounded up."""
    return iv.float_up(max((sum(abs(x) for x in row) for row in w), default=Fraction(0)))


def _f(w: tuple[tuple[Fraction, ...], ...]) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in w], dtype=np.float64).reshape(len(w), -1)


@dataclass
class _Lin:
    """y = x·Wᵀ + b with its constants for Lemma L."""

    w: np.ndarray  # (d, m) = Ŵᵀ, correctly rounded
    b: np.ndarray | None
    norm: float  # ‖W‖∞ rounded up (≥ ‖Ŵ‖∞/(1 + u))
    bmax: float  # max |b|, rounded up
    g: float  # (γ_{d+1} + u)(1 + u): the rounding allowance of the product and the weights
    aw: np.ndarray  # |Ŵ|ᵀ·(1 + 2^-50)·SAFE ≥ |W|ᵀ with the product's rounding (--vector)
    terms: iv.Terms  # per output o: (c, Ŵᵀ_co ≠ 0), c increasing
    aterms: iv.Terms  # ... of aw (the same nonzero pattern)

    @staticmethod
    def of(w: tuple[tuple[Fraction, ...], ...], b: tuple[Fraction, ...] | None) -> _Lin:
        d = len(w[0]) if w else 0
        bb = None if b is None or not any(b) else np.array([float(x) for x in b])
        bmax = iv.float_up(max((abs(x) for x in b), default=Fraction(0))) if b else 0.0
        # × SAFE: the term g·(‖W‖∞·max|x̂| + max|b|) is itself computed in five roundings
        # (proofs/coarse_tier.md, Lemma L; the factors (1 + U) in float arithmetic are 1.0)
        g = iv.float_up((Fraction(gamma(d + 1)) + Fraction(U)) * (1 + Fraction(U)) * Fraction(SAFE))
        wt = _f(w).T.copy()
        aw = np.abs(wt) * ((1 + 2.0**-50) * SAFE)
        return _Lin(wt, bb, _norm_inf(w), bmax, g, aw, _terms(wt), _terms(aw))

    def __call__(self, x: np.ndarray, xn: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`fm` on arrays (B, T, d) → (B, T, m) (tests and single maps)."""
        y, m, rad = self.fm(_fm(x), xn, _fm(r))
        return _bt(y), m, _bt(rad)

    def fm(self, x: np.ndarray, xn: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, ...]:
        """(ŷ, max |ŷ| per word (B, 1), radius per entry) from x̂ feature-major (d, B, T), its
        per-word magnitude (B, 1) and its radii per entry (d, B, T); ŷ and radii (m, B, T).

        Lemma L: |ŷ − y| ≤ R·|W|ᵀ + g·(‖W‖∞·‖x̂‖∞ + max|b|) per entry (with ‖Ŵ‖∞ ≤ (1+u)‖W‖∞
        absorbed in g's factor (1 + u)). Fixed-order products (:func:`.interval.fixed_prod`)
        unless BLAS products are switched on (``policy.blas_on``)."""
        rnd = self.g * (self.norm * (1 + U) * xn + self.bmax)
        if not blas_on():
            y = iv.fixed_prod(x, self.terms)
            if self.b is not None:
                y += self.b[:, None, None]
            # |(x̂ − x)Wᵀ| ≤ R·|W|ᵀ (non-negative terms; a zero weight's term is exactly 0)
            rad = iv.fixed_prod(r, self.aterms)
        else:  # BLAS: B products of T rows (one of B·T rows starts BLAS threads)
            y = _fm(_bt(x) @ self.w)
            if self.b is not None:
                y += self.b[:, None, None]
            rad = _fm(_bt(r) @ self.aw)  # non-negative terms: any summation order
        rad += (rnd + ETA)[None]  # per word: (1, B, 1)
        return y, self.mag(xn), rad

    def mag(self, xn: np.ndarray) -> np.ndarray:
        """≥ max |ŷ| per word without a reduction: ‖Ŵ‖∞·max|x̂| + max|b̂|, with the product's
        and the weights' roundings (γ_{d+1}, (1 + u)²) inside the factor 1 + 2^-40."""
        return (self.norm * xn + self.bmax) * (1 + 2.0**-40)


def _terms(wt: np.ndarray) -> iv.Terms:
    """Per output column o of Ŵᵀ (d, m), its nonzero entries (c, Ŵᵀ_co), c increasing: the
    terms of :func:`.interval.fixed_prod` (a zero weight's product is exactly 0 in the exact
    map)."""
    d, m = wt.shape
    return [[(c, float(wt[c, o])) for c in range(d) if wt[c, o] != 0] for o in range(m)]


def _fm(x: np.ndarray) -> np.ndarray:
    """(B, T, d) → feature-major (d, B, T), contiguous: the tier's layout."""
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def _bt(y: np.ndarray) -> np.ndarray:
    """Feature-major (m, B, T) → (B, T, m), contiguous (the inverse of :func:`_fm`)."""
    return np.ascontiguousarray(y.transpose(1, 2, 0))


def _scores_t(
    q: np.ndarray, k: np.ndarray, rq: np.ndarray, rk: np.ndarray, gd: float
) -> tuple[np.ndarray, np.ndarray]:
    """ŝ = q̂k̂ᵀ and Lemma D's es = |q̂|·(γ_d|k̂| + R_k)ᵀ + R_q·(|k̂| + R_k)ᵀ, (B, i, j), from
    feature-major (c, B, T) enclosures: each of the three sums over c left to right, as
    elementwise (broadcast) products over (B, i, j), then the two sums of es added (no BLAS:
    the same bits on every machine)."""
    a1 = np.abs(k)
    a2 = a1 + rk  # |k̂| + R_k
    a1 *= gd
    a1 += rk  # fl(γ_d|k̂|) + R_k
    aq = np.abs(q)
    B, Ti, Tj = q.shape[1], q.shape[2], k.shape[2]
    new = np.empty if q.shape[0] else np.zeros  # (every entry written at c = 0)
    s, e1, e2 = new((B, Ti, Tj)), new((B, Ti, Tj)), new((B, Ti, Tj))
    # in blocks of SCORE_BLOCK words, so that the block's arrays stay in cache (≈ 2× faster;
    # elementwise: the same bits for any block size)
    tmp = np.empty((min(B, SCORE_BLOCK), Ti, Tj))
    for b0 in range(0, B, SCORE_BLOCK):
        w = slice(b0, b0 + SCORE_BLOCK)
        t = tmp[: min(B - b0, SCORE_BLOCK)]
        for acc, x, y in ((s, q, k), (e1, aq, a1), (e2, rq, a2)):
            ab = acc[w]
            for c in range(q.shape[0]):
                if c == 0:
                    np.multiply(x[0][w, :, None], y[0][w, None, :], out=ab)
                else:
                    np.multiply(x[c][w, :, None], y[c][w, None, :], out=t)
                    ab += t
    e1 += e2
    return s, e1


SCORE_BLOCK = 256  # words per block of _scores_t


def _sum_keys(a: np.ndarray) -> np.ndarray:
    """Σ over the last axis of (B, i, T), left to right (fixed order)."""
    out = a[..., 0].copy()
    for j in range(1, a.shape[-1]):
        out += a[..., j]
    return out


@dataclass
class _Head:
    q: _Lin
    k: _Lin
    v: _Lin
    o: _Lin | None
    vis: np.ndarray  # (T, T)
    mask_add: np.ndarray  # (T, T): 0 where visible, −inf elsewhere
    any_vis: np.ndarray  # (T,) a query row sees a key
    d: int  # inner dimension of the scores


class CoarseWeights:
    """A model's weights as float64 arrays with their norms, for one input length (cached)."""

    def __init__(self, cm: CompiledModel, T: int) -> None:
        model = cm.model
        self.ok = isinstance(model.output, AcceptOutput)
        self.layers: list[object] = []
        for layer in model.layers:
            if isinstance(layer, AttentionLayer):
                heads = []
                for h in layer.heads:
                    vis = visible_mask(h.mask, T)
                    heads.append(
                        _Head(
                            _Lin.of(h.query, h.query_bias),
                            _Lin.of(h.key, h.key_bias),
                            _Lin.of(h.value, h.value_bias),
                            None if h.output is None else _Lin.of(h.output, None),
                            vis,
                            np.where(vis, 0.0, -np.inf),
                            vis.any(axis=1),
                            len(h.query),
                        )
                    )
                self.layers.append(heads)
            else:
                self.layers.append(
                    ([_Lin.of(w, b) for w, b in layer.hidden], _Lin.of(*layer.output))
                )
        mats = [(model.output.weight,)] if isinstance(model.output, AcceptOutput) else []
        for layer in model.layers:
            if isinstance(layer, AttentionLayer):
                for h in layer.heads:
                    mats += [h.query, h.key, h.value] + ([h.output] if h.output else [])
            else:
                mats += [w for w, _ in layer.hidden] + [layer.output[0]]
        self.ok = self.ok and all(_in_range(w) for w in mats)
        if self.ok:
            out = model.output
            assert isinstance(out, AcceptOutput)
            self.read = _Lin.of((tuple(out.weight),), (out.bias,))
            self.thr = float(out.threshold)
            self.thr_err = iv.float_up(abs(Fraction(self.thr) - out.threshold))


def _in_range(w: tuple[tuple[Fraction, ...], ...]) -> bool:
    """At most MAX_DIM rows and columns (every inner dimension of a product, the scores' too)
    and no nonzero weight below 2^-1022 in magnitude (Lemma L)."""
    return len(w) <= MAX_DIM and all(
        len(row) <= MAX_DIM and all(x == 0 or abs(x) >= MIN_WEIGHT for x in row) for row in w
    )


_CW: dict[tuple[int, int], tuple[CompiledModel, CoarseWeights]] = {}


def coarse_weights(cm: CompiledModel, T: int) -> CoarseWeights:
    hit = _CW.get((id(cm), T))
    if hit is None or hit[0] is not cm:
        if len(_CW) > 16:
            _CW.clear()
        hit = _CW[(id(cm), T)] = (cm, CoarseWeights(cm, T))
    return hit[1]


_P52 = 2.0**52
_E_LO = L2E_LO * _P52  # exact scaling


def _exp_up(y: np.ndarray) -> np.ndarray:
    """min(1, a float ≥ e^Y) for every Y ≤ y + ln 2 − u|y| − 2^-44 (Lemma E), at least 2^-1022: with
    w = y·log2(e) + 1 (y < 0: y·L2E_LO ≥ y/ln 2; y ≥ 0 gives ≥ 1, capped to 1), the float whose
    bits are ⌊(w + 1023)·2^52⌋ is 2^⌊w⌋(1 + frac w)(1 − ≤2^-42) ≥ 2^w/1.01 ≥ 2^(w − 1)·1.98 ≥ e^y
    (Schraudolph's construction; 1 + f ≥ 2^f on [0, 1]; the 2^-42 is the rounding of the sum
    at magnitude 2^62). nan (an overflowed row) → 1, the cap; −inf (masked keys) → 2^-1022.
    Overwrites ``y`` (a temporary of the caller: no new arrays but the result)."""
    w = np.multiply(y, _E_LO, out=y)
    w += 1024.0 * _P52
    np.fmin(w, 1023.0 * _P52, out=w)
    np.fmax(w, _P52, out=w)
    return w.astype(np.int64).view(np.float64)


def _max_keys(a: np.ndarray) -> np.ndarray:
    """max over the last axis (the keys) of (m, B, T), exactly (a loop over T: numpy's
    reduction over a short last axis is several times slower); nan propagates."""
    out = a[..., 0].copy()
    for j in range(1, a.shape[-1]):
        np.maximum(out, a[..., j], out=out)
    return out


def _w(a: np.ndarray) -> np.ndarray:
    """A per-word (B, 1) array shaped to add to feature-major radii (d, B, T)."""
    return a[None]


def _word_max(a: np.ndarray) -> np.ndarray:
    """max per word, (B,), of a feature-major (d, B, T) array, exactly (nan propagates): over
    the features, then a loop over T (numpy's max over axes (0, 2) is ~8× slower)."""
    return _max_keys(a.max(axis=0))


def _mag(a: np.ndarray) -> np.ndarray:
    """max |a| per word, (B, 1), of a feature-major (d, B, T) array (nan and inf propagate)."""
    return _word_max(np.abs(a))[:, None]


def _to_float(ra: object) -> np.ndarray:
    num, den = ra.num, ra.den  # type: ignore[attr-defined]
    return np.asarray(num, dtype=np.float64) / float(den)


def _head(
    hd: _Head,
    x: np.ndarray,
    xn: np.ndarray,
    r: np.ndarray,
    inv_tau: float,
    itau_hi: float,
    dc: float,
    exact: HeadTrace | Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_head_fm` on arrays (B, T, d) → (B, T, m) (tests)."""
    out, outn, rout = _head_fm(hd, _fm(x), xn, _fm(r), inv_tau, itau_hi, dc, exact)
    return _bt(out), outn, _bt(rout)


def _head_fm(
    hd: _Head,
    x: np.ndarray,
    xn: np.ndarray,
    r: np.ndarray,
    inv_tau: float,
    itau_hi: float,
    dc: float,
    exact: HeadTrace | Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head's output rows, a bound on their magnitude per word, and their radii, all
    feature-major ((d, B, T) in, (m, B, T) out; scores and weights are (B, i, j)).

    ``exact``: the head's hard trace, given only where the head's input is the exact hard
    one (the first layer: both meanings start from the same embeddings), so that its scores
    and values are the hard ones, converted (Lemma H) instead of computed (Lemmas L, D).
    Fixed-order products unless ``policy.blas_on()``."""
    blas = blas_on()
    T = x.shape[2]
    if exact is not None and hasattr(exact, "rho"):
        # the hard filter's scores and values (proofs/hard_filter.md, Lemmas HD and HL): one
        # radius per word, |ŝ − s| ≤ rho and |v̂ − v| ≤ rv on every entry of the word
        s = exact.s  # (B, i, j)
        sa = np.abs(s)
        sbound = sa.max(axis=(1, 2))[:, None]  # max |ŝ| per word (B, 1)
        es = np.broadcast_to(exact.rho[:, None, None], s.shape)
        v = exact.v
        rv = np.broadcast_to(exact.rv[None, :, None], v.shape)
        vn_word = _mag(v)
    elif exact is not None:
        # Lemma H: the exact scores and values converted, |ŝ − s| ≤ CONV·|ŝ| + ETA per entry
        s = _to_float(exact.scores)  # (B, i, j)
        sa = np.abs(s)
        sbound = sa.max(axis=(1, 2))[:, None]  # max |ŝ| per word (B, 1)
        es = sa * CONV + ETA
        v = iv.rat_float_fm(exact.v.num, exact.v.den)
        rv = np.abs(v) * CONV + ETA
        vn_word = _mag(v)
    elif not blas:  # fixed order (Lemmas L, D as below)
        q, qn, rq = hd.q.fm(x, xn, r)
        k, kn, rk = hd.k.fm(x, xn, r)
        sbound = qn * kn * float(hd.d)  # ≥ max |ŝ| per word, (1 + γ_d) inside the factor 2 below
        v, vn_word, rv = hd.v.fm(x, xn, r)
        s, es = _scores_t(q, k, rq, rk, gamma(hd.d))
        sa = np.abs(s)
    else:  # BLAS products (EXACTATTN_BLAS=1)
        q, qn, rq = (_bt(a) if a.ndim == 3 else a for a in hd.q.fm(x, xn, r))
        k, kn, rk = (_bt(a) if a.ndim == 3 else a for a in hd.k.fm(x, xn, r))
        sbound = qn * kn * float(hd.d)  # ≥ max |ŝ| per word, (1 + γ_d) inside the factor 2 below
        v, vn_word, rv = hd.v.fm(x, xn, r)
        s = q @ np.swapaxes(k, 1, 2)  # (B, i, j)
        # Lemma D, per entry:
        # |ŝ_ij − s_ij| ≤ Σ_c |q̂_ic|(γ_d|k̂_jc| + R_k,jc) + R_q,ic(|k̂_jc| + R_k,jc)
        gd = gamma(hd.d)
        ak = np.abs(k)
        es = np.abs(q) @ np.swapaxes(gd * ak + rk, 1, 2)
        es += rq @ np.swapaxes(ak + rk, 1, 2)  # (SAFE: in the factor below)
        sa = np.abs(s)
    # |x̂_ij − x_ij| ≤ ρ_ij (Lemma D's last step, with 1/τ's enclosure and the product's
    # rounding)
    # (no ETA: an absolute 2^-1000 is inside _exp_up's margin; _softmax_rows adds its own)
    rho = es * (itau_hi * SAFE * SAFE * SAFE)
    rho += sa * ((dc + 2 * U * itau_hi) * SAFE)
    xs = s * inv_tau
    xs += hd.mask_add  # 0 on visible keys, −inf on the others
    t = np.argmax(xs, axis=2)  # (B, i): the key of the largest computed argument
    xt = np.take_along_axis(xs, t[:, :, None], axis=2)
    rt = np.take_along_axis(rho, t[:, :, None], axis=2)
    # y ≥ x_j − x_t up to the roundings of these sums: ≤ 3u|y| + 2u·ρ, the second inside ρ's
    # surplus 1 + 2^-21 (SAFE), the first inside _exp_up's margin ln 2 (proofs/coarse_tier.md, A)
    y = xs - xt
    y += rho
    y += rt
    np.put_along_axis(y, t[:, :, None], -np.inf, axis=2)  # the key t itself is not off-key
    off = _exp_up(y)
    tot = (off @ np.ones(T)) if blas else _sum_keys(off)  # (fixed order by default)
    off = np.minimum(tot * SAFE, 1.0)  # ≥ Σ_{j≠t} α_j, which is ≤ 1 (Lemma A)
    # Lemma A needs x̂ = fl(ŝ·c) finite where ŝ is: an overflow to −inf beside a finite ρ would
    # bound a key's weight by 2^-1022. Where the per-word bound of |ŝ·c| may reach 2^1020, the
    # off-key mass is taken as 1, which is always true.
    big = ~(sbound * (2.0 * inv_tau) < 2.0**1020)  # (B, 1); nan too
    if big.any():
        off = np.where(big, 1.0, off)
    mix = np.take_along_axis(v, t[None], axis=2)  # (m, B, i): v̂_t
    # Lemma A, per column: v̂_t ± (R_v[t] + off-key mass · (value spread + 2 max R_v))
    spread = (_max_keys(v) + _max_keys(-v)) * SAFE + 2 * _max_keys(rv)  # (m, B)
    rvt = np.take_along_axis(rv, t[None], axis=2)
    rmix = (rvt + off[None] * spread[:, :, None]) * SAFE
    diffuse = hd.any_vis[None, :] & ~(off <= DIFFUSE)  # (nan: too)
    if diffuse.any():
        _softmax_rows(hd, np.nonzero(diffuse), xs, t, rho, v, rv, mix, rmix)
    if not hd.any_vis.all():
        mix = np.where(hd.any_vis, mix, 0.0)  # no visible key: exactly 0
        rmix = np.where(hd.any_vis, rmix, 0.0)
    if hd.o is None:
        return mix, (_mag(mix) if diffuse.any() else vn_word), rmix
    # every hardmax row is a row of v̂; where softmax rows were kept, measure
    mixn = _mag(mix) if diffuse.any() else vn_word
    return hd.o.fm(mix, mixn, rmix)


DIFFUSE = 2.0**-50  # rows whose off-key mass may exceed this get the softmax itself (Lemma W)


def _softmax_rows(
    hd: _Head,
    rows: tuple[np.ndarray, np.ndarray],
    xs: np.ndarray,
    t: np.ndarray,
    rho: np.ndarray,
    v: np.ndarray,
    rv: np.ndarray,
    mix: np.ndarray,
    rmix: np.ndarray,
) -> None:
    """Overwrite the rows ``rows`` = (word, query) of ``mix``/``rmix`` with the softmax
    computed in the proven midpoint-radius arithmetic of :mod:`.interval` (Lemma W): E_j ∋
    e^{x_j − x_t} from z_j = x̂_j − x̂_t ± (2ρ + u|z_j|), E_t = 1 exactly, α = E/ΣE, then
    Σ_j α_j v_j with v̂_j ± R_v[j]. ``v``, ``rv``, ``mix``, ``rmix`` feature-major (m, B, T)."""
    bi, ii = rows
    vis = hd.vis[ii]  # (K, T)
    K = bi.size
    tt = t[bi, ii][:, None]
    is_t = np.arange(vis.shape[1])[None, :] == tt
    other = vis & ~is_t
    xr = xs[bi, ii, :]
    rr = rho[bi, ii, :]
    # only the visible keys other than t need an exponential (E_t = 1, 0 off V(i))
    z = (xr - np.take_along_axis(xr, tt, axis=1))[other]
    zr = ((rr + np.take_along_axis(rr, tt, axis=1))[other] + U * np.abs(z)) * SAFE + ETA
    e = iv.mr_exp((z, zr))
    E = (is_t.astype(np.float64), np.zeros(is_t.shape))
    E[0][other] = e[0]
    E[1][other] = e[1]
    Z = centred_row_sum(E)
    a_m, a_r = iv.div(E, (Z[0][:, None], Z[1][:, None]))
    a_m = np.where(vis, a_m, 0.0)
    a_r = np.where(vis, a_r, 0.0)
    B, T = xs.shape[:2]
    # Σ_j α_j v_j ± (Σ_j (a_r + γ_T|a_m|)|v̂_j| + (|a_m| + a_r)R_v[j]): sums of products in
    # any order (γ_T covers the midpoint's rounding, the radius terms are non-negative)
    if not blas_on():  # fixed order: over the keys left to right, the rows innermost
        gT = gamma(T)
        am = np.ascontiguousarray(a_m.T)  # (T, K)
        ar = np.ascontiguousarray(a_r.T)
        aam = np.abs(am)
        w1 = gT * aam
        w1 += ar  # fl(a_r + fl(γ_T|a_m|))
        w2 = aam + ar  # |a_m| + a_r
        # (T, m, K): key-major copies, then one take of the rows' words (≈ 4× faster than
        # gathering (m, K, T) and transposing it; the same values)
        vt = _rows_of(np.ascontiguousarray(v.transpose(2, 0, 1)), bi)
        rvt = _rows_of(np.ascontiguousarray(rv.transpose(2, 0, 1)), bi)
        mid_t = am[0] * vt[0]
        r1 = w1[0] * np.abs(vt[0])
        r2 = w2[0] * rvt[0]
        tmp = np.empty_like(mid_t)
        for j in range(1, T):
            np.multiply(am[j], vt[j], out=tmp)
            mid_t += tmp
            np.abs(vt[j], out=tmp)
            tmp *= w1[j]
            r1 += tmp
            np.multiply(w2[j], rvt[j], out=tmp)
            r2 += tmp
        r1 += r2
        r1 *= SAFE
        r1 += ETA
        mid, rad = mid_t, r1  # (m, K)
    elif K >= B * BATCHED_ROWS:  # BLAS, many rows (layer 0): batched products per word
        v, rv = _bt(v), _bt(rv)  # (B, T, m)
        am = np.zeros((B, T, T))
        ar = np.zeros((B, T, T))
        am[bi, ii] = a_m
        ar[bi, ii] = a_r
        aam = np.abs(am)
        mid = (am @ v)[bi, ii]
        rad = ((ar + gamma(T) * aam) @ np.abs(v) + (aam + ar) @ rv)[bi, ii] * SAFE + ETA
        mid, rad = mid.T, rad.T  # (m, K)
    else:  # BLAS, a few rows: products per row
        vk = _bt(v)[bi]  # (K, T, m)
        rk = _bt(rv)[bi]  # (K, T, m)
        mid = np.einsum("kj,kjm->km", a_m, vk)
        av = np.abs(vk)
        rad = (
            np.einsum("kj,kjm->km", a_r + gamma(T) * np.abs(a_m), av)
            + np.einsum("kj,kjm->km", np.abs(a_m) + a_r, rk)
        ) * SAFE + ETA
        mid, rad = mid.T, rad.T  # (m, K)
    # keep the softmax where it beats the hardmax row's own bound, per column: either
    # enclosure is sound
    use = np.isfinite(mid) & np.isfinite(rad) & (rad < rmix[:, bi, ii])
    cur_m, cur_r = mix[:, bi, ii], rmix[:, bi, ii]
    mix[:, bi, ii] = np.where(use, mid, cur_m)
    rmix[:, bi, ii] = np.where(use, rad, cur_r)
    del K


def _rows_of(a: np.ndarray, bi: np.ndarray) -> np.ndarray:
    """``np.take(a, bi, axis=2)`` (a copy of word bi[k]'s entries for each row k); where
    ``bi`` is non-decreasing (the words of ``np.nonzero``'s rows, in order) as one
    ``np.repeat`` of each word by its number of rows, ≈ 2× faster: the same values."""
    if bi.size > 1 and not (bi[1:] >= bi[:-1]).all():
        return np.take(a, bi, axis=2)
    return np.repeat(a, np.bincount(bi, minlength=a.shape[2]), axis=2)


_PAYS: dict[tuple[int, int], tuple[CompiledModel, bool]] = {}


def coarse_pays(cm: CompiledModel, n: int) -> bool:
    """Whether the check runs the coarse tier at length ``n`` (notes/benchmark-rounds.md, "Coarse
    tier", the rule): the model has an accept read-out and some head's exact hard score numerator on
    the first RULE_WORDS words of length n (rank order) reaches 2^53, i.e. the scores are not
    float64 numbers. That is where certify_float pays for Python-integer scores and its
    enclosures are loose anyway (the random models: 76–91 bits, 96–99.7% settled by this
    tier); every bundled model's scores have ≤ 32 bits, and there the tier settles nothing on
    Dyck-1/2 and the LTL models (exact-zero layer errors) while costing 2–4× float64.

    Exact arithmetic on a fixed sample: the same answer in every process, shard, --jobs,
    Dask worker and resume (cached per model object and n)."""
    if not isinstance(cm.model.output, AcceptOutput):
        return False
    hit = _PAYS.get((id(cm), n))
    if hit is not None and hit[0] is cm:
        return hit[1]
    words = list(islice(words_of_length(cm.model.alphabet, n), RULE_WORDS))
    hb = run_hard(cm, words, n, share=False)
    big = any(
        h.scores.bound() >= BIG_SCORE
        for lt in hb.layers
        for h in (lt.heads or ())
        if h.scores.num.size
    )
    if len(_PAYS) > 64:
        _PAYS.clear()
    _PAYS[(id(cm), n)] = (cm, big)
    return big


class HardSource(Protocol):
    """Where the tier reads the hard meaning of a batch (its δ = soft − hard needs only
    enclosures of it): the exact trace by default (:class:`ExactSource`), or the certified
    float filter of the hard meaning (``engine/hardfilter.py``, proofs/hard_filter.md)."""

    hard_tie: np.ndarray  # (B,) bool: the exact read-out sits on the threshold

    def first_head(self, h: int) -> Any:
        """The first layer's head h: its exact trace, or an object with ``s`` (B, T, T),
        ``rho`` (B,), ``v`` (m, B, T) and ``rv`` (B,): |ŝ − s| ≤ rho, |v̂ − v| ≤ rv per word."""

    def layer(self, li: int) -> tuple[np.ndarray, np.ndarray]:
        """The hard activations after layer li, feature-major (d, B, T), and a radius per word
        (B,) that bounds |ĥ − h| on every entry of the word."""


class ExactSource:
    """:class:`HardSource` of an exact trace: Lemma H's conversions (the tier's own bits)."""

    def __init__(self, cm: CompiledModel, hb: HardBatch) -> None:
        self.hb = hb
        vals = read_output(cm.model, hb.activations[-1], hb.n).values
        t = cm.model.output.threshold  # type: ignore[union-attr]
        num = vals.num.astype(object)
        self.hard_tie = np.array(num * t.denominator == t.numerator * vals.den, dtype=bool)

    def first_head(self, h: int) -> HeadTrace:
        heads = self.hb.layers[0].heads
        assert heads is not None
        return heads[h]

    def layer(self, li: int) -> tuple[np.ndarray, np.ndarray]:
        return exact_layer(self.hb.layers[li].x_out)


def exact_layer(x_out: RatArray) -> tuple[np.ndarray, np.ndarray]:
    """Exact hard activations (B, T, d) as the tier reads them: converted, feature-major, with
    Lemma H's radius per word, |ĥ − h| ≤ CONV·max|ĥ| (the ETA is added where it is used)."""
    hard = iv.rat_float_fm(x_out.num, x_out.den)
    return hard, CONV * _mag(hard)[:, 0]


def certify_coarse(
    cm: CompiledModel,
    hb: HardBatch | Any,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    hard: HardSource | None = None,
) -> FloatBatch | None:
    """The coarse tier on every word of ``hb``: a :class:`~.batch.FloatBatch` of certified
    but loose ends of every layer's max |δ| (``err_hi`` already raised by MARGIN), the row of
    each upper end, and the soft accept decision where certain (``read``, also ``decided``).
    Nothing is ``tight`` or ``settled``: the ends serve only ``settle_dominated``. None when
    the tier declines the model or batch (no accept read-out, a non-positive τ, numbers
    beyond float range); a word with a non-finite number gets [0, inf] and no decision.

    ``hard``: where the hard meaning is read (default: ``hb``'s exact trace, bit for bit as
    before); with the filter's (engine/hardfilter.py), ``hb`` needs only ``x0``, ``n`` and
    ``words``."""
    if not isinstance(cm.model.output, AcceptOutput):
        return None
    for row in taus:
        if row is not None and any(lo < MIN_TAU for lo, _ in row):
            return None
    # the allocator setting (policy.malloc_tuned: once per process; no bit depends on it): the
    # tier's (B, T, T) and (d, B, T) temporaries of 3-30 MB otherwise cost fresh pages each time,
    # ≈ 35% of its CPU time (notes/benchmark-rounds.md, "Coarse tier: built"); certify_float made
    # the setting only at its own first call, after the first batch's coarse pass
    malloc_tuned()
    try:
        cw = coarse_weights(cm, hb.x0.shape[1])
        if not cw.ok:  # outside the range of proofs/coarse_tier.md
            return None
        return _certify(cm, cw, hb, taus, hard or ExactSource(cm, hb))
    except OverflowError:  # exact numbers beyond float range: the next tier decides
        return None


def _certify(
    cm: CompiledModel,
    cw: CoarseWeights,
    hb: HardBatch | Any,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    src: HardSource,
) -> FloatBatch:
    B = len(hb.words)
    L = len(cw.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.full((B, L), np.inf)
    err_row = np.zeros((B, L), dtype=np.int64)
    # every tensor feature-major (d, B, T): the fixed-order products' columns are contiguous
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        x = iv.rat_float_fm(hb.x0.num, hb.x0.den)
        xn = _mag(x)
        r = np.abs(x) * CONV + ETA  # Lemma H, per entry
        for li, layer in enumerate(cw.layers):
            if isinstance(layer, list):
                row = taus[li]
                assert row is not None  # an attention layer has per-head τ enclosures
                new = x.copy()
                radd = r.copy()
                mag = xn.copy()
                first = li == 0 and EXACT_FIRST  # the hard input: the embeddings
                for h, (hd, (lo, hi)) in enumerate(zip(layer, row, strict=True)):
                    c = float(2 / (lo + hi))
                    itau_hi = iv.float_up(1 / lo)
                    dc = iv.float_up(max(abs(Fraction(c) - 1 / lo), abs(Fraction(c) - 1 / hi)))
                    tr = src.first_head(h) if first else None
                    out, outn, rout = _head_fm(hd, x, xn, r, c, itau_hi, dc, tr)
                    new += out
                    radd += rout
                    mag += outn
                nh = len(layer)
                # Lemma S: nh rounded additions, each within u·(Σ magnitudes)
                r = (radd + nh * U * (1 + U) * _w(mag)) * SAFE
                x = new
            else:
                hidden, outl = layer
                h, hn, rh = x, xn, r
                for lin in hidden:
                    h, hn, rh = lin.fm(h, hn, rh)
                    # certainly ≤ 0 (exact sign of a float sum): 0 exactly
                    rh = np.where(h + rh <= 0, 0.0, rh)
                    np.maximum(h, 0.0, out=h)  # Lemma R: |relu a − relu b| ≤ |a − b|
                    hn = np.maximum(hn, 0.0)  # max|relu(ŷ)| ≤ max|ŷ|
                o, on, ro = outl.fm(h, hn, rh)
                x = x + o
                r = (r + ro + U * (1 + U) * _w(xn + on)) * SAFE
            xn = _mag(x)
            # δ = soft − hard: the hard values within rh per word (Lemma H: CONV·max|ĥ|; the
            # filter's enclosures, proofs/hard_filter.md), one rounding for the difference
            hard, rh = src.layer(li)
            dl = x - hard
            # |δ̂ − δ| ≤ R + c per entry, c = rh + 2u·max|δ̂| per word (the hard values' radius
            # and the difference's rounding); the float sums are within u, the maxima exact
            ad = np.abs(dl)
            c = (rh + 2 * U * _word_max(ad)) * SAFE + ETA
            top = (ad + r).max(axis=0)  # (B, T)
            err_row[:, li] = np.argmax(top, axis=1)  # the row of the upper end (witness)
            hi_ = (top.max(axis=1) * (1 + 2.0**-50) + c) * SAFE * MARGIN
            m = _word_max(ad - r) * (1 - 2.0**-50)  # ≤ the exact max (u per term)
            lo_ = np.maximum((m - c) * (1 - 2.0**-50), 0.0)
            fin = np.isfinite(hi_) & np.isfinite(lo_) & np.isfinite(xn[:, 0])
            err_hi[:, li] = np.where(fin, hi_, np.inf)
            err_lo[:, li] = np.where(fin, lo_, 0.0)
        # the accept read-out: y = w·x[slot] + b against the threshold
        slot = cm.model.accept_slot(hb.n)
        xs = x[:, :, slot : slot + 1]
        y, _, ry = cw.read.fm(xs, xn, r[:, :, slot : slot + 1])
        cdiff = y[0, :, 0] - cw.thr
        rad = (ry.reshape(B) + cw.thr_err + U * (1 + U) * np.abs(cdiff)) * SAFE
        yes = cdiff - rad > 0
        no = cdiff + rad < 0
        fin = np.isfinite(err_hi).all(axis=1) & np.isfinite(cdiff) & np.isfinite(rad)
        read = fin & (yes | no) & ~src.hard_tie
    never = np.zeros(B, dtype=bool)
    return FloatBatch(
        never,
        err_lo,
        err_hi,
        err_row,
        accept=yes & read,
        decided=read,
        tight=np.zeros((B, L), dtype=bool),
        read=read,
    )
