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
from typing import Any

from flint import arb

from . import bounds as B
from .model import AcceptOutput, ArgmaxOutput, AttentionLayer, Model
from .numbers import (
    arb_endpoints,
    arb_interval,
    arb_is_huge,
    arb_upper_str,
    decimal_is_huge,
    decimal_to_arb,
    decimal_up,
    frac_str,
    parse_decimal,
    to_arb,
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


def _frac(s: str | None) -> Fraction | None:
    if s is None:
        return None
    num, _, den = s.partition("/")
    return Fraction(int(num), int(den) if den else 1)


def _up_str(x: arb) -> str:
    return arb_upper_str(x)


def theorem_inputs(model: Model, entry: dict[str, Any]) -> dict[str, Any]:
    """L, K, x_max, γ, m for Theorems 4/5 from one length's measurements."""
    cs = layer_constants(model)
    K = max(B.paper_K(c) for c in cs)
    x_in = [_frac(entry["x_max"])] + [_frac(layer["activation_max"]) for layer in entry["layers"]]
    xs = [x_in[li] for li, layer in enumerate(model.layers) if isinstance(layer, AttentionLayer)]
    m = max(
        (h["max_nontop"] for layer in entry["layers"] for h in layer.get("heads", [])), default=0
    )
    return {
        "L": len(model.layers),
        "K": K,
        "x_max": max(xs, default=Fraction(1)),
        "gamma": _frac(entry["gamma"]),
        "m": m,
    }


def unique_hard_ties(model: Model, entry: dict[str, Any]) -> bool:
    """Whether some leftmost/rightmost head has a tie at the top at this length.

    Then no temperature makes softmax reproduce it (Theorem 3(c)): τ_thm does not exist.
    """
    for li, layer in enumerate(model.layers):
        if isinstance(layer, AttentionLayer):
            for hi, h in enumerate(layer.heads):
                if h.hard != "average" and entry["layers"][li]["heads"][hi].get("max_top", 2) > 1:
                    return True
    return False


def tau_theorem_value(model: Model, entry: dict[str, Any]) -> tuple[arb | None, Fraction]:
    """τ_thm(n; ε*) as a ball (its lower end is a certified temperature), and ε*.

    None when a unique-hard head has ties at the top (no temperature is guaranteed).
    """
    if unique_hard_ties(model, entry):
        return None, eps_star(model, _frac(entry["min_margin"]))
    ti = theorem_inputs(model, entry)
    es = eps_star(model, _frac(entry["min_margin"]))
    t = B.tau_theorem(ti["L"], ti["K"], ti["x_max"], ti["gamma"], ti["m"], es)
    return t, es


def bounds_for_length(
    model: Model, entry: dict[str, Any], taus: list[list[arb] | None]
) -> dict[str, Any]:
    """The proved bound after every layer at the temperatures in use, and the comparison."""
    cs = layer_constants(model)
    eps: arb | None = arb(0)
    x_in = _frac(entry["x_max"])
    layers_out = []
    violations = []
    for li, (c, layer) in enumerate(zip(cs, model.layers, strict=True)):
        le = entry["layers"][li]
        if eps is None:
            bound = None
        elif isinstance(layer, AttentionLayer):
            hs = le["heads"]
            gaps = [_frac(h["gamma"]) for h in hs]
            nonmax = [h["max_nontop"] for h in hs]
            single = [h.get("max_top", 2) <= 1 for h in hs]
            row = taus[li]
            assert row is not None and x_in is not None
            bound = B.attention_layer_bound(c, x_in, eps, row, gaps, nonmax, single)
        else:
            bound = B.ffn_layer_bound(c, eps)
        item: dict[str, Any] = {"index": li, "bound": None, "measured_over_bound": None}
        err = le.get("error")
        if bound is not None and bound.is_finite():
            item["bound"] = _up_str(bound)
            if err is not None and err["upper"] != "inf" and _huge(err, bound):
                # e^(-huge) at tiny τ: compare as balls, never as exact Fractions
                up_b, lo_b = decimal_to_arb(err["upper"]), decimal_to_arb(err["lower"])
                if bound > 0:
                    item["measured_over_bound"] = arb_upper_str(up_b / bound, 6)
                if lo_b > bound:
                    violations.append(
                        {
                            "layer": li,
                            "measured_lower": err["lower"],
                            "bound": item["bound"],
                            "witness": le.get("error_witness"),
                        }
                    )
            elif err is not None and err["upper"] != "inf":
                up = parse_decimal(err["upper"])
                lo = parse_decimal(err["lower"])
                bnd = arb_endpoints(bound)[1]
                if bnd > 0:
                    item["measured_over_bound"] = decimal_up(up / bnd, 6)
                elif up == 0:
                    item["measured_over_bound"] = "0"
                if lo > bnd:
                    violations.append(
                        {
                            "layer": li,
                            "measured_lower": err["lower"],
                            "bound": item["bound"],
                            "witness": le.get("error_witness"),
                        }
                    )
        layers_out.append(item)
        eps = bound if bound is not None and bound.is_finite() else None
        x_in = _frac(le["activation_max"])
    t, es = tau_theorem_value(model, entry)
    ti = theorem_inputs(model, entry)
    return {
        "layers": layers_out,
        "tau_theorem": None if t is None else arb_interval(t),
        "eps_star": frac_str(es),
        "constants": {
            "L": ti["L"],
            "K": frac_str(ti["K"]),
            "x_max": frac_str(ti["x_max"]),
            "gamma": frac_str(ti["gamma"]) if ti["gamma"] is not None else None,
            "m": ti["m"],
            "readout_lipschitz": frac_str(readout_constant(model)),
        },
        "violations": len(violations),
        "violation_details": violations,
    }


def _huge(err: dict[str, str], bound: arb) -> bool:
    return decimal_is_huge(err["upper"]) or decimal_is_huge(err["lower"]) or arb_is_huge(bound)


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
