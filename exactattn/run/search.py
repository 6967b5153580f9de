"""Search over inputs of one length N: certified witnesses where enumeration is impossible.

Why: at N = 64 or 1,024 the 4^N inputs cannot be enumerated, but a user still wants an
input with a small margin, a large soft error or a small score gap. We run a seeded local
search (families and random starts, then single-symbol mutations of the best candidates,
a small beam) and evaluate every candidate *exactly* (hard meaning by the streaming
evaluator) or *certified* (soft error by the check's certify_word up to n = 40, by the
streaming float64 enclosures of engine/longsoft.py past that). The result is a
witness and a bound (e.g. γ(N) ≤ the gap found), never a claim about all inputs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from exactattn.core.errors import UsageError
from exactattn.core.numbers import arb_endpoints_outward
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.engine.longsoft import certify_long
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import Temperatures
from exactattn.inputs.families import families_for
from exactattn.model import Model
from exactattn.model.provenance import model_sha256
from exactattn.results.search import SEARCH_FORMAT, SearchResult, SearchValue, SearchWitness
from exactattn.results.settings import TauChoice, TauOverride

__all__ = ["OBJECTIVES", "SEARCH_FORMAT", "Scored", "SearchResult", "run_search"]
OBJECTIVES = ("margin", "error", "gamma")
MAX_ERROR_N = 40  # up to here certify_word (arb, batched engine); past it engine/longsoft.py


@dataclass
class Scored:
    word: tuple[str, ...]
    key: Fraction  # smaller is better (error is negated)
    value: SearchValue
    layer: int | None
    position: int | None
    decision: bool | None = None
    head: int | None = None
    prec: int | None = None
    method: str | None = None


def _spec_pos(model: Model, slot: int) -> int:
    return model.position_index(slot)


def score_margin(model: Model, cm: CompiledModel, w: tuple[str, ...]) -> Scored:
    lh = run_hard_long(cm, w)
    dec, margin = hard_output(model, lh)
    n = len(w)
    pos = model.accept_slot(n) if model.output.kind == "accept" else None
    return Scored(
        w,
        margin,
        SearchValue.point(margin),
        len(model.layers) - 1,
        None if pos is None else _spec_pos(model, pos),
        decision=dec if isinstance(dec, bool) else None,
    )


def score_gamma(model: Model, cm: CompiledModel, w: tuple[str, ...]) -> Scored:
    lh = run_hard_long(cm, w, want_gap=True)
    best: tuple[Fraction, int, int, int] | None = None
    for (li, hi), info in lh.heads.items():
        if info.gap is not None and (best is None or info.gap < best[0]):
            assert info.gap_row is not None
            best = (info.gap, li, hi, info.gap_row)
    if best is None:
        big = Fraction(10**30)
        return Scored(w, big, SearchValue.point(None), None, None)
    g, li, hi, row = best
    return Scored(w, g, SearchValue.point(g), li, _spec_pos(model, row), head=hi)


def score_error(
    model: Model, cm: CompiledModel, w: tuple[str, ...], tau: TauOverride = None
) -> Scored:

    n = len(w)
    if n > MAX_ERROR_N:
        return _score_error_long(model, cm, w, tau)
    hb = run_hard(cm, [w], n)
    acc = LengthAccumulator(model, n, None, len(model.layers))
    acc.add_hard(hb)
    sr = certify_word(cm, hb, 0, acc, Temperatures(model, tau), WeightCache(cm))
    assert sr.bounds is not None
    lo, hi, row = sr.bounds[-1]
    # an error below 2^-65536 (tiny τ) ranks as 0; its printed ends stay certified
    flo = max(arb_endpoints_outward(lo)[0], Fraction(0))
    return Scored(
        w,
        -flo,
        SearchValue(lo if flo else Fraction(0), hi),
        len(model.layers) - 1,
        _spec_pos(model, int(row)),
        prec=sr.prec,
    )


def _score_error_long(
    model: Model, cm: CompiledModel, w: tuple[str, ...], tau: TauOverride
) -> Scored:
    """The certified error of a long word by the streaming float64 enclosures."""

    ls = certify_long(cm, run_hard_long(cm, w), tau)
    lo, hi, row = ls.layer_error[-1]
    flo = Fraction(lo)
    up = None if hi == float("inf") else Fraction(hi)
    return Scored(
        w,
        -flo,
        SearchValue(flo, up),
        len(model.layers) - 1,
        _spec_pos(model, int(row)),
        method=ls.method,
    )


def run_search(
    model: Model,
    n: int,
    objective: str,
    budget: int = 200,
    seed: int = 0,
    beam: int = 4,
    tau: TauChoice | TauOverride = None,
    progress: Callable[[int, Scored], None] | None = None,
) -> SearchResult:
    """Local/beam search; returns the exactattn-search/1 record (``tau``: a
    :class:`~exactattn.results.settings.TauChoice` without theorem mode, or an expression)."""
    tau = TauChoice.override_expr(tau, "search")
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}")
    model.check_length(n)
    if budget < 1:
        raise UsageError("--budget must be at least 1")
    cm = CompiledModel(model)
    rng = random.Random(seed)
    if objective == "margin":

        def f(w: tuple[str, ...]) -> Scored:
            return score_margin(model, cm, w)
    elif objective == "gamma":

        def f(w: tuple[str, ...]) -> Scored:
            return score_gamma(model, cm, w)
    else:

        def f(w: tuple[str, ...]) -> Scored:
            return score_error(model, cm, w, tau)

    seen: dict[tuple[str, ...], Scored] = {}
    alphabet = model.alphabet

    def evaluate(w: tuple[str, ...]) -> Scored | None:
        if w in seen or len(seen) >= budget:
            return seen.get(w)
        s = f(w)
        seen[w] = s
        if progress:
            progress(len(seen), s)
        return s

    # starts: every family (seed-varied), then random words
    starts = [fam(model, n, seed) for fam in families_for(model).values()]
    for w in starts:
        evaluate(tuple(w))
    for _ in range(max(1, budget // 10)):
        evaluate(tuple(rng.choice(alphabet) for _ in range(n)))
    # local search: mutate the beam's members (one or two symbols), keep the best `beam`
    stall = 0
    while len(seen) < budget and stall < 50 * beam:
        pool = sorted(seen.values(), key=lambda s: (s.key, s.word))[:beam]
        base = rng.choice(pool).word
        w = list(base)
        for _ in range(rng.choice((1, 1, 2))):
            p = rng.randrange(n)
            w[p] = rng.choice([a for a in alphabet if a != w[p]] or alphabet)
        tw = tuple(w)
        if tw in seen:
            stall += 1
            continue
        evaluate(tw)
    best = min(seen.values(), key=lambda s: (s.key, s.word))
    witness = SearchWitness(
        best.word,
        best.value,
        best.layer,
        best.position,
        decision=best.decision,
        head=best.head,
        prec=best.prec,
        method=best.method,
        objective=objective,
    )
    digest = model_sha256(model)
    return SearchResult(model.name, n, objective, len(seen), seed, budget, witness, digest)
