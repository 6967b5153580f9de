"""Deciding *exact* equalities of soft read-outs, which ball arithmetic never can.

A softmax read-out can equal its threshold exactly: in the worked example, on
input ``ab`` the soft output is (e²/2 + 1)/(e² + 2) = 1/2. A ball around 1/2 never
decides ``y > 1/2`` however many bits it has. When the read-out depends on the
softmax of one final attention layer whose input is the hard one (δ = 0 there),

    y − t = K' + Σ_h N_h / Z_h,   N_h = Σ_j c_hj e^{−g_hj/τ_h},  Z_h = Σ_j e^{−g_hj/τ_h},

with rational g (score gaps), c (value read-outs) and K'. Multiplying by Π Z_h > 0
gives a finite sum Σ_e C_e e^{−e}. If every τ_h is rational, the exponents e are
distinct rationals, and by the Lindemann–Weierstrass theorem the numbers e^{−e}
are linearly independent over the algebraic numbers: the sum is zero **iff every
coefficient C_e is zero** — an exact, finite test. (Proof in proofs/exact-zero.md.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from exactattn.engine.hard import CompiledHead, HardBatch, HeadTrace

Poly = dict[Fraction, Fraction]  # exponent e ↦ coefficient of e^{-e}


def _mul(a: Poly, b: Poly) -> Poly:
    out: dict[Fraction, Fraction] = defaultdict(Fraction)
    for ea, ca in a.items():
        for eb, cb in b.items():
            out[ea + eb] += ca * cb
    return {e: c for e, c in out.items() if c}


def _add(a: Poly, b: Poly) -> Poly:
    out: dict[Fraction, Fraction] = defaultdict(Fraction, a)
    for e, c in b.items():
        out[e] += c
    return {e: c for e, c in out.items() if c}


def readout_is_exactly(
    heads: Sequence[CompiledHead],
    traces: Sequence[HeadTrace],
    taus: Sequence[Fraction],
    b: int,
    slot: int,
    a: Sequence[Fraction],
    K: Fraction,
) -> bool:
    """Whether K + a·δ[slot] = 0 exactly, δ being the last attention layer's soft − hard.

    Preconditions (the caller checks them): the layer is the model's last, its input
    δ is exactly zero, and every τ_h is a positive rational.
    """
    Kp = K
    zs: list[Poly] = []
    ns: list[Poly] = []
    # only the read-out's nonzero coordinates matter (a wide model has millions of zeros)
    a_nz = [(r, ar) for r, ar in enumerate(a) if ar]
    for ch, tr, tau in zip(heads, traces, taus, strict=True):
        # c_j = a · (O v_j) = (Oᵀa) · v_j: fold the read-out into the head once
        if ch.O is not None:
            O = ch.O
            u: dict[int, Fraction] = defaultdict(Fraction)
            for r, ar in a_nz:
                for c in np.flatnonzero(O.num[r]).tolist():
                    u[c] += ar * Fraction(int(O.num[r, c]), O.den)
            u_nz = [(c, uc) for c, uc in u.items() if uc]
        else:
            u_nz = a_nz
        vis = [j for j in range(tr.visible.shape[0]) if tr.visible[slot, j]]
        if not vis:
            zs.append({Fraction(0): Fraction(1)})
            ns.append({})
            continue
        s = tr.scores
        smax = max(Fraction(int(s.num[b, slot, j]), s.den) for j in vis)
        vden = tr.v.den
        Z: Poly = defaultdict(Fraction)
        N: Poly = defaultdict(Fraction)
        cnt = int(tr.count[b, slot])
        vnum = tr.v.num[b]
        for j in vis:
            c = sum((uc * int(vnum[j, k]) for k, uc in u_nz), Fraction(0)) / vden
            if tr.support[b, slot, j]:
                Kp -= c / cnt
            e = (smax - Fraction(int(s.num[b, slot, j]), s.den)) / tau
            Z[e] += 1
            N[e] += c
        zs.append({e: c for e, c in Z.items() if c})
        ns.append({e: c for e, c in N.items() if c})
    prod_all: Poly = {Fraction(0): Fraction(1)}
    for z in zs:
        prod_all = _mul(prod_all, z)
    total = {e: c * Kp for e, c in prod_all.items() if c * Kp}
    for h, nh in enumerate(ns):
        term = nh
        for h2, z in enumerate(zs):
            if h2 != h:
                term = _mul(term, z)
        total = _add(total, term)
    return not total


def applicable(hb: HardBatch, deltas: Sequence[object]) -> bool:
    """The last layer is attention and its input δ is exactly zero."""
    if not hb.layers or hb.layers[-1].kind != "attention":
        return False
    return len(deltas) < 2 or deltas[-2] is None
