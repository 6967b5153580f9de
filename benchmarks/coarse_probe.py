"""Feasibility probe for a "coarse" first float tier (issue 25): measured, not built.

The idea (docs/scale.md, "Coarse tier: measured, not built"): most words of a length never need
a tight error enclosure, since ``run.shard.settle_dominated`` settles a word whose read-out is
decided and whose per-layer error upper end is below a certified *lower* end of another word's
error. A first tier would then only need cheap, loose but certified ends: the plain float64
forward pass (as ``float_baseline.py``) with radii — bounds on |computed − exact| — by forward
error analysis, either one per (word, row) of every tensor (the default) or one per entry
(``--vector``, the variant that settles 99.7% of the random model's words):

* linear maps: R·|W|ᵀ per entry (‖W‖∞·R per row) + (γ_{d+1} + u)(1 + u)(‖W‖∞·max|x̂| + max|b|)
  per word; ReLU 1-Lipschitz, and (per entry) exactly 0 where ŷ + R ≤ 0;
* scores: per entry Σ_c |q̂_ic|(γ_d|k̂_jc| + R_k,jc) + R_q,ic(|k̂_jc| + R_k,jc) (per row with
  ℓ1/ℓ∞ norms), so |x̂_ij − x_ij| ≤ ρ_ij with 1/τ's enclosure and the product's rounding;
* an attention row's midpoint is v̂_t (t = the key of the largest computed argument), its
  radius R_v[t] + Σ_{j≠t} e^{x̂_j − x̂_t + ρ_ij + ρ_it} · (value spread + 2 max R_v), the
  exponentials rounded up from float bits and the sum capped at 1 — where that off-key mass may
  exceed 2^-50 the row is computed instead with softfloat's proven interval softmax
  (``mr_exp``, ``div``, the centred tier's ``row_sum``; E_t = 1 exactly), kept where smaller;
* residual sums add radii and a rounding; hard values converted within 2^-50.

Every radius is multiplied by SAFE = 1 + 2^-20. The "Lemma" labels in the comments (L linear
maps, D scores, A attention rows, E the exp bound, H hard values, R ReLU, S sums, W interval
softmax rows) name these bounds, argued in the comments only. This file is the prototype the
measurement used, not a tier of the check: nothing here is proven in proofs/ and no test
covers it. Its checks: ``--arb-check`` (enclosures and decided read-outs against arb on random
and bundled models; it fails when the rounding allowances are removed), and every run compares
its enclosures and read-outs with certify_float's.

A run prints the float64 baseline and the coarse pass (alternated, best of ``--reps``), the
share it settles (``settle_dominated`` as in the check), certify_float and the centred tier on
the rest, and today's chain (certify_float on all words, centred on what it leaves), all CPU
seconds in one process.

    python benchmarks/coarse_probe.py [--vector] [--reps 9] [--per-row-rho] [--tight-exp]
        [--model random|random3|ltl|models/dyck2.json] [--n 12]
    python benchmarks/coarse_probe.py --vector --arb-check [--arb-random 200]   # ≈ 5 s / 25 s
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn.engine import softfloat as sf  # noqa: E402
from exactattn.engine.centred import row_sum as centred_row_sum  # noqa: E402
from exactattn.engine.hard import CompiledModel, HardBatch, read_output, visible_mask  # noqa: E402
from exactattn.model import AcceptOutput, AttentionLayer  # noqa: E402

TIGHT_EXP = False  # what-if only (--tight-exp): see _softmax_rows
VECTOR = False  # --vector: one radius per entry (|W|·R products) instead of per row
PER_ENTRY_RHO = True  # ρ per (row, key) entry; False: per row (max over keys, cheaper)
U = 2.0**-53  # unit roundoff of binary64
SAFE = 1.0 + 2.0**-20  # every radius is multiplied by this (covers the radius formula's roundings)
CONV = 2.0**-50  # relative error of num.astype(float64) / float(den) (three roundings, Lemma H)
ETA = 2.0**-1000  # absolute allowance per radius for underflow (≥ d·2^-1074 for d ≤ 2^70)
MARGIN = 1.0 + 2.0**-18  # err_hi is raised by this before domination (docs/scale.md)
L2E_LO = sf.float_down(Fraction(1) / Fraction(0.6931471805599453094172321214581766))


def gamma(k: int) -> float:
    """γ_k = k·u/(1 − k·u), rounded up (Higham, Lemma 3.1): any-order k-term dot products."""
    return sf.float_up(Fraction(k) * Fraction(U) / (1 - Fraction(k) * Fraction(U)))


def _norm_inf(w: tuple[tuple[Fraction, ...], ...]) -> float:
    """max_r Σ_c |W_rc|, exact, rounded up."""
    return sf.float_up(max((sum(abs(x) for x in row) for row in w), default=Fraction(0)))


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

    @staticmethod
    def of(w: tuple[tuple[Fraction, ...], ...], b: tuple[Fraction, ...] | None) -> _Lin:
        d = len(w[0]) if w else 0
        bb = None if b is None or not any(b) else np.array([float(x) for x in b])
        bmax = sf.float_up(max((abs(x) for x in b), default=Fraction(0))) if b else 0.0
        g = sf.float_up((Fraction(gamma(d + 1)) + Fraction(U)) * (1 + Fraction(U)))
        wt = _f(w).T.copy()
        return _Lin(wt, bb, _norm_inf(w), bmax, g, np.abs(wt) * ((1 + 2.0**-50) * SAFE))

    def __call__(self, x: np.ndarray, xn: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, ...]:
        """(ŷ, max |ŷ| per word (B, 1), radius per row) from x̂ (B, T, d), its per-word
        magnitude (B, 1) and its row radii (B, T).

        Lemma L: |ŷ − y| ≤ ‖W‖∞·R + g·(‖W‖∞·‖x̂‖∞ + max|b|) per row (with ‖Ŵ‖∞ ≤ (1+u)‖W‖∞
        absorbed in g's factor (1 + u))."""
        y = x @ self.w
        if self.b is not None:
            y += self.b
        rnd = self.g * (self.norm * (1 + U) * xn + self.bmax)
        if r.ndim == 3:  # radii per column: |(x̂ − x)Wᵀ| ≤ R·|W|ᵀ (non-negative: any order)
            return y, self.mag(xn), r @ self.aw + (rnd[:, :, None] + ETA)
        rad = (self.norm * r + rnd) * SAFE + ETA
        return y, self.mag(xn), rad

    def mag(self, xn: np.ndarray) -> np.ndarray:
        """≥ max |ŷ| per word without a reduction: ‖Ŵ‖∞·max|x̂| + max|b̂|, with the product's
        and the weights' roundings (γ_{d+1}, (1 + u)²) inside the factor 1 + 2^-40."""
        return (self.norm * xn + self.bmax) * (1 + 2.0**-40)


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
        if self.ok:
            out = model.output
            assert isinstance(out, AcceptOutput)
            self.read = _Lin.of((tuple(out.weight),), (out.bias,))
            self.thr = float(out.threshold)
            self.thr_err = sf.float_up(abs(Fraction(self.thr) - out.threshold))


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
    """min(1, a float ≥ e^{y'}) for every y' ≤ y + 0.69 (Lemma E), at least 2^-1022: with
    w = y·log2(e) + 1 (y < 0: y·L2E_LO ≥ y/ln 2; y ≥ 0 gives ≥ 1, capped to 1), the float whose
    bits are ⌊(w + 1023)·2^52⌋ is 2^⌊w⌋(1 + frac w)(1 − ≤2^-42) ≥ 2^w/1.01 ≥ 2^(w − 1)·1.98 ≥ e^y
    (Schraudolph's construction; 1 + f ≥ 2^f on [0, 1]; the 2^-42 is the rounding of the sum
    at magnitude 2^62). nan (an overflowed row) → 1, the cap; −inf (masked keys) → 2^-1022."""
    w = y * _E_LO
    w += 1024.0 * _P52
    w = np.fmax(np.fmin(w, 1023.0 * _P52), _P52)
    return w.astype(np.int64).view(np.float64)


def _w(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """A per-word (B, 1) array shaped to add to radii ``r`` of (B, T) or (B, T, d)."""
    return a[:, :, None] if r.ndim == 3 else a


def _mag(a: np.ndarray) -> np.ndarray:
    """max |a| per word, (B, 1) (nan and inf propagate): reductions over a small last axis
    cost ~6× one over the whole word."""
    return np.abs(a).max(axis=(1, 2))[:, None]


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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head's output rows, a bound on their magnitude per word, and their radii."""
    q, qn, rq = hd.q(x, xn, r)
    k, kn, rk = hd.k(x, xn, r)
    v, vn_word, rv = hd.v(x, xn, r)
    B, T, _ = x.shape
    s = q @ np.swapaxes(k, 1, 2)  # (B, i, j)
    # Lemma D: |ŝ_ij − s_ij| ≤ ‖q̂_i‖₁(γ_d‖k̂_j‖∞ + R_k[j]) + R_q[i](‖k̂_j‖₁ + d·R_k[j])
    gd = gamma(hd.d)
    if rq.ndim == 2:
        q1 = np.abs(q) @ np.ones(q.shape[2])  # ℓ1 norms of the rows (any order: SAFE covers)
        k1 = np.abs(k) @ np.ones(k.shape[2])
        ka = gd * kn + rk  # per key j
        kb = k1 + hd.d * rk
    if rq.ndim == 3:  # per column: Σ_c |q̂_ic|(γ_d|k̂_jc| + R_k,jc) + R_q,ic(|k̂_jc| + R_k,jc)
        ak = np.abs(k)
        es = np.abs(q) @ np.swapaxes(gd * ak + rk, 1, 2)
        es += rq @ np.swapaxes(ak + rk, 1, 2)  # (SAFE: in c1 below)
    elif PER_ENTRY_RHO:
        es = q1[:, :, None] * ka[:, None, :] + rq[:, :, None] * kb[:, None, :]
    else:  # one bound per row: the maxima over every key (⊇ the visible ones)
        es = (q1 * ka.max(axis=1)[:, None] + rq * kb.max(axis=1)[:, None])[:, :, None]
    # |x̂_ij − x_ij| ≤ ρ_ij (Lemma D with 1/τ's enclosure and the product's rounding)
    sa = np.abs(s) if PER_ENTRY_RHO else np.abs(s).max(axis=2, keepdims=True)
    # (no ETA: an absolute 2^-1000 is inside _exp_up's margin; _softmax_rows adds its own)
    rho = es * (itau_hi * SAFE * SAFE * SAFE)
    rho += sa * ((dc + 2 * U * itau_hi) * SAFE)
    if not PER_ENTRY_RHO:
        rho = np.broadcast_to(rho, s.shape)
    xs = s * inv_tau
    xs += hd.mask_add  # 0 on visible keys, −inf on the others
    t = np.argmax(xs, axis=2)  # (B, i): the key of the largest computed argument
    xt = np.take_along_axis(xs, t[:, :, None], axis=2)
    rt = np.take_along_axis(rho, t[:, :, None], axis=2)
    # y ≥ x_j − x_t up to the roundings of these sums (≤ u|y| + u·ρ, inside _exp_up's 0.69)
    y = xs - xt
    y += rho
    y += rt
    np.put_along_axis(y, t[:, :, None], -np.inf, axis=2)  # the key t itself is not off-key
    off = _exp_up(y)
    off = np.minimum((off @ np.ones(T)) * SAFE, 1.0)  # ≥ Σ_{j≠t} α_j, which is ≤ 1 (Lemma A)
    mix = np.take_along_axis(v, t[:, :, None], axis=1)  # (B, i, m): v̂_t
    if rv.ndim == 3:  # per column
        spread = (v.max(axis=1) - v.min(axis=1)) * SAFE + 2 * rv.max(axis=1)  # (B, m)
        rvt = np.take_along_axis(rv, t[:, :, None], axis=1)
        rmix = (rvt + off[:, :, None] * spread[:, None, :]) * SAFE
    else:
        spread = (v.max(axis=1) - v.min(axis=1)).max(axis=1) * SAFE + 2 * rv.max(axis=1)
        rmix = (np.take_along_axis(rv, t, axis=1) + off * spread[:, None]) * SAFE
    diffuse = hd.any_vis[None, :] & ~(off <= DIFFUSE)  # (nan: too)
    if diffuse.any():
        _softmax_rows(hd, np.nonzero(diffuse), xs, t, rho, v, rv, mix, rmix)
    if not hd.any_vis.all():
        mix = np.where(hd.any_vis[None, :, None], mix, 0.0)  # no visible key: exactly 0
        av = hd.any_vis[None, :, None] if rmix.ndim == 3 else hd.any_vis[None, :]
        rmix = np.where(av, rmix, 0.0)
    if hd.o is None:
        return mix, (_mag(mix) if diffuse.any() else vn_word), rmix
    # every hardmax row is a row of v̂; where softmax rows were kept, measure
    mixn = _mag(mix) if diffuse.any() else vn_word
    out, outn, rout = hd.o(mix, mixn, rmix)
    return out, outn, rout


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
    computed in softfloat's proven midpoint-radius arithmetic (Lemma W): E_j ∋
    e^{x_j − x_t} from z_j = x̂_j − x̂_t ± (2ρ + u|z_j|), E_t = 1 exactly, α = E/ΣE, then
    Σ_j α_j v_j with v̂_j ± R_v[j]."""
    bi, ii = rows
    vis = hd.vis[ii]  # (K, T)
    K = bi.size
    z = xs[bi, ii, :] - np.take_along_axis(xs[bi, ii, :], t[bi, ii][:, None], axis=1)
    z = np.where(vis, z, 0.0)
    rr = rho[bi, ii, :]
    zr = (rr + np.take_along_axis(rr, t[bi, ii][:, None], axis=1) + U * np.abs(z)) * SAFE + ETA
    is_t = np.arange(vis.shape[1])[None, :] == t[bi, ii][:, None]
    if TIGHT_EXP:  # what-if: the proven u(|x| + 17) of softfloat's docstring, not its 2^-42 + …
        em = sf._exp(z)
        er = em * (zr + zr * zr + 2 * U * (np.abs(z) + 17)) * (1 + 2.0**-30) + sf.TINY
        e = (em, er / (zr <= 1.0))
    else:
        e = sf.mr_exp((z, zr))
    other = vis & ~is_t
    E = (np.where(other, e[0], np.where(is_t, 1.0, 0.0)), np.where(other, e[1], 0.0))
    Z = centred_row_sum(E)
    a_m, a_r = sf.div(E, (Z[0][:, None], Z[1][:, None]))
    a_m = np.where(vis, a_m, 0.0)
    a_r = np.where(vis, a_r, 0.0)
    vk = v[bi]  # (K, T, m)
    rk = rv[bi]  # (K, T) or (K, T, m)
    mid = np.einsum("kj,kjm->km", a_m, vk)
    T = vis.shape[1]
    if rk.ndim == 3:  # per column
        av = np.abs(vk)
        rad = (
            np.einsum("kj,kjm->km", a_r + gamma(T) * np.abs(a_m), av)
            + np.einsum("kj,kjm->km", np.abs(a_m) + a_r, rk)
        ) * SAFE + ETA
        use = np.isfinite(mid) & np.isfinite(rad) & (rad < rmix[bi, ii])
        cur_m, cur_r = mix[bi, ii], rmix[bi, ii]
        mix[bi, ii] = np.where(use, mid, cur_m)  # per column: either enclosure is sound
        rmix[bi, ii] = np.where(use, rad, cur_r)
        return
    vn = np.abs(vk).max(axis=2)  # (K, T)
    rad = (
        (a_r * vn).sum(axis=1)
        + ((np.abs(a_m) + a_r) * rk).sum(axis=1)
        + gamma(T) * (np.abs(a_m) * vn).sum(axis=1)
    ) * SAFE + ETA
    # keep the softmax where it beats the hardmax row's own bound (v̂_t ± (R_v[t] + spread))
    use = np.isfinite(mid).all(axis=1) & np.isfinite(rad) & (rad < rmix[bi, ii])
    mix[bi[use], ii[use]] = mid[use]
    rmix[bi[use], ii[use]] = rad[use]
    del K


@dataclass
class CoarseResult:
    """Per word: certified ends of every layer's max |δ| and the soft accept decision."""

    err_lo: np.ndarray  # (B, L)
    err_hi: np.ndarray  # (B, L), already raised by MARGIN
    read: np.ndarray  # (B,) accept decided (and the hard read-out not at the threshold)
    accept: np.ndarray  # (B,)


def certify_coarse(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> CoarseResult | None:
    """The coarse tier on every word of ``hb`` (None: the model is not supported)."""
    T = hb.x0.shape[1]
    cw = coarse_weights(cm, T)
    if not cw.ok:
        return None
    B = len(hb.words)
    L = len(cw.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.full((B, L), np.inf)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        x = _to_float(hb.x0)
        xn = _mag(x)
        if VECTOR:
            r = np.abs(x) * CONV + ETA  # Lemma H, per entry
        else:
            r = np.broadcast_to(xn * CONV + ETA, x.shape[:2]).copy()  # Lemma H
        for li, (layer, lt) in enumerate(zip(cw.layers, hb.layers, strict=True)):
            if isinstance(layer, list):
                row = taus[li]
                assert row is not None
                new = x.copy()
                radd = r.copy()
                mag = xn.copy()
                for hd, (lo, hi) in zip(layer, row, strict=True):
                    if lo <= 0:
                        return None
                    c = float(2 / (lo + hi))
                    itau_hi = sf.float_up(1 / lo)
                    dc = sf.float_up(max(abs(Fraction(c) - 1 / lo), abs(Fraction(c) - 1 / hi)))
                    out, outn, rout = _head(hd, x, xn, r, c, itau_hi, dc)
                    new += out
                    radd += rout
                    mag += outn
                nh = len(layer)
                # Lemma S: nh rounded additions, each within u·(Σ magnitudes)
                r = (radd + nh * U * (1 + U) * _w(mag, r)) * SAFE
                x = new
            else:
                hidden, outl = layer
                h, hn, rh = x, xn, r
                for lin in hidden:
                    h, hn, rh = lin(h, hn, rh)
                    if rh.ndim == 3:  # certainly ≤ 0 (exact sign of a float sum): 0 exactly
                        rh = np.where(h + rh <= 0, 0.0, rh)
                    np.maximum(h, 0.0, out=h)  # Lemma R: |relu a − relu b| ≤ |a − b|
                    hn = np.maximum(hn, 0.0)  # max|relu(ŷ)| ≤ max|ŷ|
                o, on, ro = outl(h, hn, rh)
                x = x + o
                r = (r + ro + U * (1 + U) * _w(xn + on, r)) * SAFE
            xn = _mag(x)
            # δ = soft − hard: Lemma H for the hard values, one rounding for the difference
            hard = _to_float(lt.x_out)
            dl = x - hard
            if r.ndim == 3:
                # |δ̂ − δ| ≤ R + c per entry, c = CONV·max|ĥ| + 2u·max|δ̂| per word (Lemma H and
                # the difference's rounding); the float sums are within u, the maxima exact
                ad = np.abs(dl)
                c = (CONV * _mag(hard) + 2 * U * _mag(dl))[:, 0] * SAFE + ETA
                hi_ = ((ad + r).max(axis=(1, 2)) * (1 + 2.0**-50) + c) * SAFE * MARGIN
                m = (ad - r).max(axis=(1, 2)) * (1 - 2.0**-50)  # ≤ the exact max (u per term)
                lo_ = np.maximum((m - c) * (1 - 2.0**-50), 0.0)
            else:
                dn = np.abs(dl).max(axis=2)
                rd = (r + CONV * _mag(hard) + U * (1 + U) * dn) * SAFE + ETA
                hi_ = ((dn + rd) * SAFE).max(axis=1) * MARGIN
                lo_ = np.maximum((dn - rd) * (1 - 2.0**-50), 0.0).max(axis=1)
            fin = np.isfinite(hi_) & np.isfinite(lo_) & np.isfinite(xn[:, 0])
            err_hi[:, li] = np.where(fin, hi_, np.inf)
            err_lo[:, li] = np.where(fin, lo_, 0.0)
        # the accept read-out: y = w·x[slot] + b against the threshold
        slot = cm.model.accept_slot(hb.n)
        xs = x[:, slot : slot + 1, :]
        y, _, ry = cw.read(xs, xn, r[:, slot : slot + 1])
        cdiff = y[:, 0, 0] - cw.thr
        rad = (ry.reshape(B) + cw.thr_err + U * (1 + U) * np.abs(cdiff)) * SAFE
        yes = cdiff - rad > 0
        no = cdiff + rad < 0
        fin = np.isfinite(err_hi).all(axis=1) & np.isfinite(cdiff) & np.isfinite(rad)
        vals = read_output(cm.model, hb.activations[-1], hb.n).values
        t = cm.model.output.threshold  # type: ignore[union-attr]
        num = vals.num.astype(object)
        hard_tie = np.array(num * t.denominator == t.numerator * vals.den, dtype=bool)
        read = fin & (yes | no) & ~hard_tie
    return CoarseResult(err_lo, err_hi, read, yes & read)


def arb_check(n_random: int = 6, n_bundled: int = 5, limit: int = 300, extra: int = 0) -> None:
    """The probe's enclosures and decided read-outs against arb (tests/tiers_vs_arb.py), word
    by word: random models at n_random, every bundled model with an accept read-out."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiers_vs_arb import assert_meets_arb, random_benchmark_model

    from exactattn import load_model
    from exactattn.engine.hard import run_hard
    from exactattn.engine.softfloat import FloatBatch, tau_enclosures
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import words_of_length

    cases = [
        (f"random seed {sd}, {bl} blocks", random_benchmark_model(sd, blocks=bl), n)
        for sd, bl, n in (
            (0, 4, n_random),
            (1, 3, n_random),
            (2, 4, n_random - 1),
            (3, 2, n_random),
        )
    ]
    cases += [(p.stem, load_model(p), n_bundled) for p in sorted((ROOT / "models").glob("*.json"))]
    # more random models: seeds 100.., 2–4 blocks, n = 4–5 (every word)
    cases += [
        (
            f"random seed {100 + i}, {2 + i % 3} blocks",
            random_benchmark_model(100 + i, 2 + i % 3),
            4 + i % 2,
        )
        for i in range(extra)
    ]
    for name, m, n in cases:
        cm = CompiledModel(m)
        temps = Temperatures(m, None)
        taus = tau_enclosures(temps.at(n, BASE_PREC))
        hb = run_hard(cm, list(words_of_length(m.alphabet, n))[:limit], n)
        cr = certify_coarse(cm, hb, taus)
        if cr is None:
            print(f"{name}: declined (not an accept read-out)")
            continue
        B, L = cr.err_lo.shape
        no = np.zeros(B, dtype=bool)
        fb = FloatBatch(no, cr.err_lo, cr.err_hi, np.zeros((B, L), np.int64), accept=cr.accept)
        assert_meets_arb(cm, hb, fb, temps, cr.read)
        print(f"{name} n={n}: {B} words meet arb, {int(cr.read.sum())} read-outs decided")


def main() -> None:
    global PER_ENTRY_RHO, TIGHT_EXP, VECTOR
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--per-row-rho", action="store_true", help="ρ per row (max over keys)")
    ap.add_argument("--model", default="random", help="random, random3, ltl or a path")
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--vector", action="store_true", help="radii per entry, not per row")
    ap.add_argument("--tight-exp", action="store_true", help="what-if: exp error u(|x| + 17)")
    ap.add_argument("--arb-check", action="store_true", help="only: enclosures against arb")
    ap.add_argument("--arb-random", type=int, default=0, help="--arb-check: more random models")
    args = ap.parse_args()
    PER_ENTRY_RHO = not args.per_row_rho
    TIGHT_EXP = args.tight_exp
    VECTOR = args.vector
    if args.arb_check:
        arb_check(extra=args.arb_random)
        return
    from float_baseline import FloatModel

    from exactattn import load_model, model_from_dict
    from exactattn.engine.centred import certify_centred
    from exactattn.engine.hard import run_hard
    from exactattn.engine.softfloat import FloatBatch, certify_float, second_tier, tau_enclosures
    from exactattn.engine.softfloat import _take_batch as take_batch  # diagnostic only
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import batches, words_of_length
    from exactattn.run.shard import BATCH, settle_dominated
    from models import random_model

    if args.model == "random":
        m = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
    elif args.model == "random3":  # bench_softfloat.py's second random model
        m = model_from_dict(random_model(d=16, blocks=3, heads=2, seed=1))
    elif args.model == "ltl":  # bench_softfloat.py's deep LTL model (12 layers)
        from bench_softfloat import DEEP_LTL

        from exactattn.constructions.ltl import compile_ltl

        m = model_from_dict(compile_ltl(DEEP_LTL, ("a", "b")))
    else:
        m = load_model(args.model)
    n = args.n
    cm = CompiledModel(m)
    taus = tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    fm = FloatModel(m, n)
    chunks = list(batches(words_of_length(m.alphabet, n), BATCH))
    hbs = [run_hard(cm, c, n) for c in chunks]

    def best(f) -> float:
        ts = []
        for _ in range(args.reps):
            t0 = time.process_time()
            f()
            ts.append(time.process_time() - t0)
        return min(ts)

    # the baseline and the pass alternate, so that a change of the machine's load hits both
    tb, tc = [], []
    for _ in range(args.reps):
        t0 = time.process_time()
        for c in chunks:
            fm.forward(c)
        t1 = time.process_time()
        for hb in hbs:
            certify_coarse(cm, hb, taus)
        tb.append(t1 - t0)
        tc.append(time.process_time() - t1)
    t_base, t_coarse = min(tb), min(tc)
    L = len(m.layers)
    lower = np.zeros(L)
    total = settled = bad = 0
    t_all = t_rest = t_c = t_c0 = 0.0
    by_f64 = by_c = 0
    fin_layer = np.zeros(L)
    for hb in hbs:
        B = len(hb.words)
        cr = certify_coarse(cm, hb, taus)
        if cr is None:
            print("the probe declines this model (not an accept read-out)")
            return
        no = np.zeros(B, dtype=bool)
        fb = FloatBatch(
            no,
            cr.err_lo,
            cr.err_hi,
            np.zeros((B, L), np.int64),
            accept=cr.accept,
            decided=cr.read,
            tight=np.zeros((B, L), bool),
            read=cr.read,
        )
        ok = settle_dominated(fb, no, no, list(lower))
        total += B
        settled += int(ok.sum())
        fin_layer += np.isfinite(cr.err_hi).sum(axis=0)
        t_all += best(lambda hb=hb: certify_float(cm, hb, taus))
        ff = certify_float(cm, hb, taus)
        # both certified: the enclosures must meet, and decided read-outs agree
        bad += int((cr.err_lo > ff.err_hi).sum() + (ff.err_lo > cr.err_hi).sum())
        both = cr.read & ff.read
        bad += int((cr.accept[both] != ff.accept[both]).sum())
        idx = np.flatnonzero(~ok)
        if idx.size:
            hr = take_batch(hb, idx)
            t_rest += best(lambda hr=hr: certify_float(cm, hr, taus))
            # the chain on the rest, as run/shard.py runs it, the coarse lower ends as thresholds
            fr = certify_float(cm, hr, taus)
            under = fr.underflowed()
            ok2 = settle_dominated(fr, fr.settled & ~under, under, list(lower), (cr.err_lo,))
            by_f64 += int(ok2.sum())
            if not ok2.all():
                t_c += best(
                    lambda hr=hr, fr=fr, ok2=ok2: second_tier(
                        cm, hr, fr, ~ok2, taus, certify_centred
                    )
                )
                fc = second_tier(cm, hr, fr, ~ok2, taus, certify_centred)
                under = fc.underflowed()
                todo = fc.settled & ~under & ~ok2
                ok3 = settle_dominated(fc, ok2 | todo, under, list(lower), (cr.err_lo, fr.err_lo))
                by_c += int(ok3.sum()) - int(ok2.sum())
        # today's chain without the coarse pass, for the A/B: certify_float on all, centred
        under = ff.underflowed()
        ok0 = settle_dominated(ff, ff.settled & ~under, under, list(lower))
        if not ok0.all():
            t_c0 += best(
                lambda hb=hb, ff=ff, ok0=ok0: second_tier(cm, hb, ff, ~ok0, taus, certify_centred)
            )
        good = ff.settled
        if good.any():
            lower = np.maximum(lower, ff.err_lo[good].max(axis=0))
    print(
        f"model {args.model} n={n}, {total} words; radii per {'entry' if VECTOR else 'row'}, "
        f"rho per {'row' if args.per_row_rho else 'entry'}"
        f"{'; what-if exp bound u(|x| + 17)' if TIGHT_EXP else ''}"
    )
    print(
        f"float64 baseline {t_base:.3f} s; coarse pass {t_coarse:.3f} s ({t_coarse / t_base:.2f}x)"
    )
    print(
        f"certify_float on all words {t_all:.3f} s ({t_all / t_base:.2f}x); on the words the "
        f"coarse pass leaves {t_rest:.3f} s"
    )
    print(f"settled by the coarse pass: {settled} of {total} ({settled / total:.2%})")
    print(
        "words with a finite coarse upper end, per layer:",
        " ".join(f"{f / total:.0%}" for f in fin_layer),
    )
    print(
        f"of the rest: certify_float settles {by_f64}, the centred tier {by_c} more "
        f"({t_c:.3f} s); left to double-double/arb: {total - settled - by_f64 - by_c}"
    )
    print(
        f"projected coarse + certify_float + centred on the rest: "
        f"{(t_coarse + t_rest + t_c) / t_base:.2f}x float64; today's chain (certify_float on "
        f"all, centred on what it leaves: {t_c0:.3f} s): {(t_all + t_c0) / t_base:.2f}x"
    )
    print(f"enclosures not meeting certify_float's / read-outs disagreeing: {bad}")


if __name__ == "__main__":
    main()
