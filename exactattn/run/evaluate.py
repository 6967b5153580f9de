"""One input, every intermediate value, both meanings: for people debugging a construction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb, ctx

from exactattn.core.errors import UsageError
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import CompiledModel, read_output, run_hard
from exactattn.engine.measure import LengthAccumulator, delta_bounds
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import Temperatures, parse_tau
from exactattn.model import Model
from exactattn.model.reference import Oracle
from exactattn.results.settings import TauOverride


@dataclass
class Evaluation:
    """Both meanings of one input, every layer (index 0 = embedding)."""

    model: Model
    word: tuple[str, ...]
    tokens: list[str]
    hard: list[list[list[Fraction]]]
    soft: list[list[list[arb]]]
    errors: list[tuple[arb, arb]]
    hard_attention: list[list[list[list[Fraction]]] | None]
    soft_attention: list[list[list[list[arb]]] | None]
    output_hard: Any
    output_soft: Any
    soft_decided: bool
    tau: list[list[arb] | None]
    prec: int


def evaluate(model: Model, word: Sequence[str], tau: TauOverride | str = None) -> Evaluation:
    """Both meanings of one input with every intermediate value."""
    word = tuple(word)
    for i, t in enumerate(word):
        if t not in model.alphabet:
            raise UsageError(
                f"input symbol {i + 1} '{t}' is not in the alphabet {list(model.alphabet)}"
            )
    n = len(word)
    model.check_length(n)
    override = parse_tau(tau) if isinstance(tau, str) else tau
    temps = Temperatures(model, override)
    cm = CompiledModel(model)
    weights = WeightCache(cm)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    hb = run_hard(cm, [word], n)
    acc = LengthAccumulator(model, n, oracle, len(model.layers))
    acc.add_hard(hb)
    sr = certify_word(cm, hb, 0, acc, temps, weights, keep_alphas=True)
    hard = [x.to_fractions()[0] for x in hb.activations]
    soft: list[list[list[arb]]] = []
    errors: list[tuple[arb, arb]] = []
    with ctx.workprec(sr.prec):
        for li, act in enumerate(hard):
            d = None if li == 0 else sr.deltas[li - 1]
            rows = []
            for p, row in enumerate(act):
                rows.append(
                    [
                        arb(v.numerator) / v.denominator + (d[p, k] if d is not None else 0)
                        for k, v in enumerate(row)
                    ]
                )
            soft.append(rows)
            if li:
                lo, hi, _ = delta_bounds(d)
                errors.append((lo, hi))
    hard_att: list[Any] = []
    for lt in hb.layers:
        if lt.heads is None:
            hard_att.append(None)
            continue
        per_head = []
        for tr in lt.heads:
            T = tr.visible.shape[0]
            rows = []
            for i in range(T):
                c = int(tr.count[0, i])
                rows.append(
                    [Fraction(1, c) if c and tr.support[0, i, j] else Fraction(0) for j in range(T)]
                )
            per_head.append(rows)
        hard_att.append(per_head)
    out_hard = acc.hard_output(0)
    if model.output.kind == "accept":
        out_hard = {
            "value": read_output(model, hb.activations[-1], n).values.fraction(0),
            "accept": out_hard,
        }
    return Evaluation(
        model=model,
        word=word,
        tokens=model.tokens(word),
        hard=hard,
        soft=soft,
        errors=errors,
        hard_attention=hard_att,
        soft_attention=sr.alphas,
        output_hard=out_hard,
        output_soft=sr.verdict,
        soft_decided=sr.verdict.decided,
        tau=temps.at(n, sr.prec),
        prec=sr.prec,
    )
