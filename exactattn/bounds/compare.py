"""Proved bounds held against measured errors (``check --bounds``), τ_thm and τ*.

The constants come from the weights (:mod:`exactattn.bounds`, proofs in ``proofs/``);
γ, activation bounds and visible-key counts come from the exact hard pass. The bound
chain starts from ε_0 = 0 (identical embeddings) and uses Theorem 3(b), which holds
for every ε ≥ 0, so it never silently relies on the ε ≤ 1 hypothesis; the paper-shaped
Theorem 3(a) appears in τ_thm (Theorem 5), whose proof keeps every intermediate bound ≤ 1.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from flint import arb

import exactattn.bounds as B
from exactattn.core.numbers import arb_endpoints, arb_is_huge, to_arb
from exactattn.model import AcceptOutput, ArgmaxOutput, AttentionLayer, Model
from exactattn.results import LengthRecord
from exactattn.results.bounds import (
    BoundsRecord,
    BoundViolation,
    CertifiedBall,
    CertifiedEnd,
    LayerBound,
    TheoremConstants,
)


@lru_cache(maxsize=16)
def _constants(model: Model) -> list[B.LayerConstants]:
    out = []
    for layer in model.layers:
        if isinstance(layer, AttentionLayer):
            hs = [
                B.attention_head_constants(
                    h.query,
                    h.query_bias,
                    h.key,
                    h.key_bias,
                    h.value,
                    h.value_bias,
                    h.output,
                    rule=h.hard,
                )
                for h in layer.heads
            ]
            out.append(B.attention_layer_constants(hs))
        else:
            out.append(B.ffn_constants(list(layer.hidden), layer.output))
    return out


def layer_constants(model: Model) -> list[B.LayerConstants]:
    return _constants(model)


def readout_constant(model: Model) -> Fraction:
    o = model.output
    if isinstance(o, AcceptOutput):
        return B.readout_lipschitz("accept", o.weight)
    if isinstance(o, ArgmaxOutput):
        return B.readout_lipschitz("argmax", o.weight)
    return B.readout_lipschitz("value", o.weight)


def eps_star(model: Model, margin: Fraction | None) -> Fraction:
    """Target final error: half of what keeps every decision (min(μ/C, 1)), or 1/2."""
    C = readout_constant(model)
    if margin is None or margin <= 0 or C == 0:
        return Fraction(1, 2)
    return min(margin / C, Fraction(1)) / 2


def theorem_inputs(model: Model, rec: LengthRecord) -> TheoremConstants:
    """L, K, x_max, γ, m for Theorems 4/5 from one length's measurements (and the read-out's
    Lipschitz constant)."""
    cs = layer_constants(model)
    K = max((B.paper_K(c) for c in cs), default=Fraction(1))  # no layer: unused
    x_in = [rec.x_max] + [layer.activation_max for layer in rec.layers]
    xs = [x_in[li] for li, layer in enumerate(model.layers) if isinstance(layer, AttentionLayer)]
    m = max((h.max_nontop for layer in rec.layers for h in layer.heads or ()), default=0)
    return TheoremConstants(
        L=len(model.layers),
        K=K,
        x_max=max(xs, default=Fraction(1)),
        gamma=rec.gamma,
        m=m,
        readout_lipschitz=readout_constant(model),
    )


def unique_hard_ties(model: Model, rec: LengthRecord) -> bool:
    """Whether some leftmost/rightmost head has a tie at the top at this length.

    Then no temperature makes softmax reproduce it (Theorem 3(c)): τ_thm does not exist.
    """
    for li, layer in enumerate(model.layers):
        if isinstance(layer, AttentionLayer):
            for hi, h in enumerate(layer.heads):
                heads = rec.layers[li].heads
                assert heads is not None
                if h.hard != "average" and heads[hi].max_top > 1:
                    return True
    return False


def tau_theorem_value(model: Model, rec: LengthRecord) -> tuple[arb | None, Fraction]:
    """τ_thm(n; ε*) as a ball (its lower end is a certified temperature), and ε*.

    None when a unique-hard head has ties at the top (no temperature is guaranteed).
    """
    if unique_hard_ties(model, rec):
        return None, eps_star(model, rec.min_margin)
    ti = theorem_inputs(model, rec)
    es = eps_star(model, rec.min_margin)
    # no layer (a compiled program of token tests only): soft = hard at every τ
    t = B.tau_theorem(ti.L, ti.K, ti.x_max, ti.gamma, ti.m, es) if ti.L else arb(1)
    return t, es


def bounds_for_length(
    model: Model, rec: LengthRecord, taus: list[list[arb] | None]
) -> BoundsRecord:
    """The proved bound after every layer at the temperatures in use, and the comparison."""
    cs = layer_constants(model)
    eps: arb | None = arb(0)
    x_in: Fraction = rec.x_max
    layers_out = []
    violations = []
    for li, (c, layer) in enumerate(zip(cs, model.layers, strict=True)):
        le = rec.layers[li]
        if eps is None:
            bound = None
        elif isinstance(layer, AttentionLayer):
            hs = le.heads or ()
            gaps = [h.gamma for h in hs]
            nonmax = [h.max_nontop for h in hs]
            single = [h.max_top <= 1 for h in hs]
            row = taus[li]
            assert row is not None and x_in is not None
            bound = B.attention_layer_bound(c, x_in, eps, row, gaps, nonmax, single)
        else:
            bound = B.ffn_layer_bound(c, eps)
        written: CertifiedEnd | None = None
        ratio: CertifiedEnd | None = None
        err = le.error
        if bound is not None and bound.is_finite():
            written = CertifiedEnd(bound)
            violated = False
            huge = (
                err is not None
                and err.upper is not None
                and (arb_is_huge(err.upper) or arb_is_huge(err.lower) or arb_is_huge(bound))
            )
            if huge:
                # e^(-huge) at tiny τ: compare as balls, never as exact Fractions
                assert err is not None and err.upper is not None
                if bound > 0:
                    ratio = CertifiedEnd(err.upper / bound, digits=6)
                violated = bool(err.lower > bound)
            elif err is not None and err.upper is not None:
                up = arb_endpoints(err.upper)[1]
                lo = arb_endpoints(err.lower)[0]
                bnd = arb_endpoints(bound)[1]
                if bnd > 0:
                    ratio = CertifiedEnd(up / bnd, digits=6)
                elif up == 0:
                    ratio = CertifiedEnd(Fraction(0), digits=6)
                violated = lo > bnd
            if violated:
                assert err is not None
                violations.append(
                    BoundViolation(
                        li,
                        CertifiedEnd(err.lower, up=False),
                        written,
                        err.witness.data if err.witness else None,
                    )
                )
        layers_out.append(LayerBound(li, written, ratio))
        eps = bound if bound is not None and bound.is_finite() else None
        x_in = le.activation_max
    t, es = tau_theorem_value(model, rec)
    return BoundsRecord(
        layers=tuple(layers_out),
        tau_theorem=None if t is None else CertifiedBall.of(t),
        eps_star=es,
        constants=theorem_inputs(model, rec),
        violation_details=tuple(violations),
    )


def dyadic_lower(t: arb) -> Fraction:
    """The exact lower end of a ball: a certified rational temperature."""
    return arb_endpoints(t)[0]


__all__ = [
    "bounds_for_length",
    "eps_star",
    "layer_constants",
    "tau_theorem_value",
    "dyadic_lower",
    "to_arb",
]
