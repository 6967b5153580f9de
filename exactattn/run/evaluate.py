"""One input, every intermediate value, both meanings: for people debugging a construction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb, ctx

from exactattn.core.errors import UsageError
from exactattn.core.numbers import arb_endpoints
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
    """Both meanings of one input, every layer (index 0 = embedding).

    The plain answers (what a notebook asks first) are ``decision`` (the hard meaning's),
    ``soft_decision`` (the soft meaning's, None when it could not be certified), ``agree``
    (True/False, None when undecided) and ``expected`` (the model's reference; None without
    one or where it says nothing). Accept outputs decide a ``bool``; argmax outputs a tuple
    of labels (None at a tie); value outputs a tuple of rows of ``Fraction`` (hard) — their
    soft values are balls, so ``soft_decision`` is None and ``agree`` says whether every
    entry is within the output's tolerance of the hard one.
    """

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
    expected: Any = None

    @property
    def decision(self) -> Any:
        """The hard meaning's answer: bool, tuple of labels, or tuple of rows of Fractions."""
        out = self.output_hard
        if isinstance(out, dict):
            return bool(out["accept"])
        if self.model.output.kind == "value":
            return tuple(tuple(row) for row in out)
        return tuple(out)

    @property
    def soft_decision(self) -> Any:
        """The soft meaning's answer, certified (None: undecided, or a value output)."""
        v = self.output_soft
        if not v.decided or v.value is None:
            return None
        if isinstance(v.value, bool):
            return v.value
        return tuple(v.value)

    @property
    def agree(self) -> bool | None:
        """Whether the soft meaning decides like the hard one (None: not certified either
        way). Argmax outputs are compared where the hard meaning decides (not at its ties)."""
        v = self.output_soft
        if self.model.output.kind == "value":
            return v.within_tol
        if not v.decided:
            return None
        hard, soft = self.decision, self.soft_decision
        if isinstance(hard, bool):
            return hard == soft
        return all(h is None or h == s for h, s in zip(hard, soft, strict=True))

    @property
    def layer_errors(self) -> list[tuple[Fraction, Fraction]]:
        """‖soft − hard‖∞ after each layer as exact [lower, upper] ends (outward)."""
        return [(arb_endpoints(lo)[0], arb_endpoints(hi)[1]) for lo, hi in self.errors]


def _plain(x: Any) -> Any:
    """A reference's output as the decisions are given: lists as tuples (hashable)."""
    if isinstance(x, list):
        return tuple(_plain(v) for v in x)
    return x


MAX_EVAL_VALUES = 100_000
"""Most values ``eval`` keeps and shows for one input: every activation ((L + 1)·T·d) and every
attention weight (heads·T², T = n + BOS + EOS). Each weight costs about 200 bytes as exact
and certified values and 1.2 KB and 0.17 ms in the terminal table (90,000 weights: 15 CPU-s
and 190 MB), and a 6,000-symbol input aborted at 3.3 GB (exit 134; issue 40)."""


def eval_size(model: Model, n: int) -> int:
    """How many values :func:`evaluate` keeps for an input of length n."""
    t = n + (model.bos is not None) + (model.eos is not None)
    return (len(model.layers) + 1) * t * model.d + len(model.attention_heads()) * t * t


def evaluate(model: Model, word: Sequence[str], tau: TauOverride | str = None) -> Evaluation:
    """Both meanings of one input with every intermediate value."""
    word = tuple(word)
    n = len(word)
    size = eval_size(model, n)
    if size > MAX_EVAL_VALUES:  # before the symbols are checked one by one (a long input)
        raise UsageError(
            f"eval: an input of length {n:,} has {size:,} activations and attention weights "
            f"to keep and show, more than the limit of {MAX_EVAL_VALUES:,} (docs/limits.md) "
            "(fix: a shorter input; for long inputs `exactattn precision --inputs FILE` or "
            "`exactattn search`, which keep no n × n tables)"
        )
    for i, t in enumerate(word):
        if t not in model.alphabet:
            raise UsageError(
                f"input symbol {i + 1} '{t}' is not in the alphabet {list(model.alphabet)}"
            )
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
        expected=_plain(oracle.expected(word)) if oracle is not None else None,
    )
