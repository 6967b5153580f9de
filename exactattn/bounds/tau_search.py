"""Certified searches for the critical temperatures τ*_dec(n) and τ*_inv(n) (``--find-tau``).

Two questions, two names, because their answers differ by a lot (docs/model-format.md):

* **τ*_dec(n)** — where softmax stops *deciding* like hardmax: a τ is *decision-good* when
  every input of length n is decided by the soft meaning exactly as by the hard one, and none
  stays undecided.
* **τ*_inv(n)** — where the proof technique stops applying: a τ is *invariant-good* when it is
  decision-good *and* the certified error is ≤ 1 after every layer that feeds another (the
  per-layer lemma's hypothesis, proofs/03-layer-perturbation.md).

Both are searched on the grid τ = 2^(k/8) (each grid value rounded down to a 12-digit decimal,
so every probed τ is an exact rational). Each answer is a bracket [lower, upper] of adjacent
grid values, the first crossing from good to bad found when warming the model up from its own
τ(n) (octave steps, then bisection): ``lower`` was evaluated on every input and found good,
``upper`` was found bad (with a witness input and the reason). Neither property need be
monotone in τ, so the bracket alone certifies nothing below ``lower``: every grid τ from
``lower`` down to ``scanned_down_to`` (at or below the model's own τ(n)) is evaluated too, and
any grid τ found bad below ``lower``, or known good above ``upper``, is listed in
``non_monotone`` with its witness.

Probes share what they learn: an invariant-good τ is decision-good (the invariant probe checks
every decision too), and a decision-bad τ is invariant-bad.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb, ctx

from exactattn.core.numbers import arb_endpoints, parse_decimal
from exactattn.engine.certify import zero_test
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.measure import LengthAccumulator, delta_bounds
from exactattn.engine.soft import WeightCache, run_soft
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import batches, words_of_length
from exactattn.model import Model
from exactattn.model.expr import constant_expression
from exactattn.model.reference import Oracle
from exactattn.results import disagreement_decisions
from exactattn.results.bounds import (
    GRID,
    TAU_GRID,
    GridTau,
    NonMonotone,
    ProbeWitness,
    TauBracket,
    TauStarRecord,
    grid_text,
    grid_value,
)

LO_EXP = -40 * TAU_GRID  # smallest grid τ probed: 2^-40
HI_EXP = 16 * TAU_GRID  # largest grid τ probed: 2^16
HOT = 32  # failing inputs remembered and tried first at the next probe


def grid_tau(k: int) -> str:
    """2^(k/8) rounded down to a 12-significant-digit decimal (exact, as text)."""
    return grid_text(k)


def grid_floor(tau: Fraction) -> int:
    """The largest k with grid_tau(k) ≤ tau (tau > 0), decided exactly on the rationals."""
    with ctx.workprec(64):
        x = arb(TAU_GRID) * arb(tau.numerator / arb(tau.denominator)).log() / arb(2).log()
        k = int(arb_endpoints(x.floor())[0])
    while parse_decimal(grid_tau(k)) > tau:
        k -= 1
    while parse_decimal(grid_tau(k + 1)) <= tau:
        k += 1
    return k


@dataclass
class Fact:
    """What is known about one grid τ: None = not (yet) known. ``*_why`` is the witness."""

    dec: bool | None = None
    inv: bool | None = None
    dec_why: ProbeWitness | None = None
    inv_why: ProbeWitness | None = None


class Prober:
    """Evaluates every input of length n at grid temperatures, remembering what it learns."""

    def __init__(
        self,
        model: Model,
        cm: CompiledModel,
        n: int,
        batch: int,
        max_prec: int,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.model = model
        self.progress = progress  # (stage, inputs done, inputs of the probe): the CLI's bar
        self.cm = cm
        self.n = n
        self.batch = batch
        self.max_prec = max_prec
        self.weights = WeightCache(cm)  # τ-independent: shared by every probe
        self.facts: dict[int, Fact] = {}
        self.hot: list[tuple[str, ...]] = []  # recent failing inputs, tried first
        self.evaluated: set[int] = set()

    # -- the two predicates -------------------------------------------------------------
    def dec(self, k: int) -> bool:
        f = self.facts.get(k)
        if f is None or f.dec is None:
            f = self.probe(k, stop_on_invariant=False, want_inv=False)
        assert f.dec is not None
        return f.dec

    def inv(self, k: int) -> bool:
        f = self.facts.get(k)
        if f is None or f.inv is None:
            f = self.probe(k, stop_on_invariant=True, want_inv=True)
        assert f.inv is not None
        return f.inv

    def both(self, k: int) -> None:
        """Answer both questions at k with (at most) one probe run to the end."""
        f = self.facts.get(k)
        if f is None or f.dec is None:
            self.probe(k, stop_on_invariant=False, want_inv=True)
        if self.facts[k].inv is None:
            self.inv(k)

    # -- one probe ------------------------------------------------------------------------
    def _words(self) -> Iterator[list[tuple[str, ...]]]:
        """Every input of length n, recent failures first (a bad τ is then found fast)."""

        hot = [w for w in self.hot if len(w) == self.n]
        if hot:
            yield hot
        seen = set(hot)
        rest = (w for w in words_of_length(self.model.alphabet, self.n) if w not in seen)
        yield from batches(rest, self.batch)

    def _remember(self, word: tuple[str, ...]) -> None:
        w = tuple(word)
        if w in self.hot:
            self.hot.remove(w)
        self.hot.insert(0, w)
        del self.hot[HOT:]

    def probe(self, k: int, stop_on_invariant: bool, want_inv: bool) -> Fact:
        """Evaluate τ = grid_tau(k) on every input until the answer is known.

        It stops at the first decision that disagrees or stays undecided (then both properties
        fail) and, with ``stop_on_invariant``, at the first error > 1 (or not certified ≤ 1)
        after a layer that feeds another (then the invariant fails; decisions stay unknown).
        Precision rises only as far as the questions asked need: the decisions always, the
        comparisons ε vs 1 only with ``want_inv`` (without it, an error > 1 found on the way
        still counts, but an open comparison leaves the invariant unknown, not failed).
        """

        fact = self.facts.setdefault(k, Fact())
        want_inv = want_inv and fact.inv is None
        inv_open = False
        self.evaluated.add(k)
        # the grid τ as the exact constant it is written as (grid_tau(k) is its text)
        temps = Temperatures(self.model, constant_expression(grid_value(k)))
        acc = LengthAccumulator(self.model, self.n, None, len(self.model.layers))
        prec0 = BASE_PREC  # inputs of one length need similar precision
        stage = f"τ* n={self.n}: probe {len(self.evaluated)} at τ = {grid_tau(k)}"
        total = len(self.model.alphabet) ** self.n
        done = 0
        for chunk in self._words():
            hb = run_hard(self.cm, chunk, self.n)
            acc.add_hard(hb)
            for b in range(len(chunk)):
                verdict, bounds, prec = self._certify(hb, b, acc, temps, prec0, want_inv)
                prec0 = max(BASE_PREC, prec)
                acc.add_soft(hb, b, bounds, verdict, prec)
                word = tuple(hb.words[b])
                why = None
                if acc.disagreements:
                    hard, soft = disagreement_decisions(acc.first_disagreement)
                    why = ProbeWitness("disagreement", word, hard, soft)
                elif acc.undecided:
                    why = ProbeWitness("undecided", word)
                if why is not None:
                    self._remember(word)
                    fact.dec, fact.dec_why = False, why
                    if fact.inv is not False:
                        fact.inv, fact.inv_why = False, why
                    return fact
                if fact.inv is None:
                    for li, (lo, hi, _row) in enumerate(bounds[:-1]):
                        if hi <= 1:
                            continue
                        if not lo > 1 and not want_inv:
                            inv_open = True  # not asked: leave the invariant unknown
                            continue
                        fact.inv = False
                        fact.inv_why = ProbeWitness(
                            "error > 1" if lo > 1 else "error ≤ 1 undecided",
                            word,
                            layer=li,
                            error_lower=arb_endpoints(lo)[0],
                            error_upper=arb_endpoints(hi)[1] if hi.is_finite() else None,
                        )
                        self._remember(word)
                        break
                    if fact.inv is False and stop_on_invariant:
                        return fact
            done += len(chunk)
            if self.progress is not None:
                self.progress(stage, min(done, total), total)
        fact.dec = True
        if fact.inv is None and not inv_open:
            fact.inv = True
        return fact

    def _certify(
        self,
        hb: Any,
        b: int,
        acc: LengthAccumulator,
        temps: Any,
        prec: int,
        want_inv: bool,
    ) -> tuple[Any, list[tuple[arb, arb, int]], int]:
        """The soft verdict of word b and its per-layer error bounds, with precision doubled
        until the verdict is decided (and, with ``want_inv``, every ε vs 1 comparison).

        Unlike ``check.certify_word`` it does not insist on the report's 1e-6 accuracy of
        every error: the search only needs the comparisons.
        """

        while True:
            taus = temps.at(self.n, prec)
            with ctx.workprec(prec):
                st = run_soft(self.cm, hb, b, taus, self.weights)
                final = st.deltas[-1] if st.deltas else None
                verdict = acc.soft_verdict(hb, b, final, zero_test(self.cm, hb, b, st, temps))
                bounds = [delta_bounds(d) for d in st.deltas]
            done = verdict.decided and (
                not want_inv or all(hi <= 1 or lo > 1 for lo, hi, _ in bounds[:-1])
            )
            if done or prec >= self.max_prec:
                return verdict, bounds, prec
            prec = min(prec * 2, self.max_prec)


def _bracket(
    pred: Callable[[int], bool], start: int, lo_exp: int = LO_EXP, hi_exp: int = HI_EXP
) -> tuple[int | None, int | None]:
    """(good, bad): adjacent grid exponents with pred(good) true and pred(bad) false, found by
    octave steps from ``start`` and then bisection; good is None when even lo_exp is bad, bad
    is None when every step up to hi_exp was good."""
    k = max(lo_exp, min(hi_exp, start))
    if pred(k):
        good = k
        while True:
            nxt = min(good + TAU_GRID, hi_exp)
            if nxt == good:
                return good, None
            if not pred(nxt):
                bad = nxt
                break
            good = nxt
    else:
        bad = k
        while True:
            nxt = max(bad - TAU_GRID, lo_exp)
            if nxt == bad:
                return None, bad
            if pred(nxt):
                good = nxt
                break
            bad = nxt
    while bad - good > 1:
        mid = (good + bad) // 2
        if pred(mid):
            good = mid
        else:
            bad = mid
    return good, bad


def search_tau(
    model: Model,
    cm: CompiledModel,
    n: int,
    oracle: Oracle | None,
    batch: int,
    max_prec: int,
    progress: Callable[[str, int, int], None] | None = None,
) -> TauStarRecord:
    """Both certified brackets for length n, with the monotonicity scan (``tau_star`` entry).

    ``oracle`` is unused: τ* compares the soft meaning with the hard one, not with a reference.
    ``progress(stage, done, total)`` is called as each probe's inputs finish (the number of
    probes is not known in advance: each one is a stage of its own).
    """
    del oracle

    pr = Prober(model, cm, n, batch, max_prec, progress)
    with ctx.workprec(BASE_PREC):
        tau_n = arb_endpoints(Temperatures(model, None).display(n))[0]
    k_model = max(LO_EXP, min(HI_EXP, grid_floor(tau_n))) if tau_n > 0 else LO_EXP
    # Both searches move away from the model's own τ(n): warming it up, the first crossing
    # from good to bad is the one that matters. τ*_inv first; an invariant-good τ is
    # decision-good, so τ*_dec's search starts at τ*_inv's lower end.
    inv_good, inv_bad = _bracket(pr.inv, k_model)
    dec_good, dec_bad = _bracket(pr.dec, k_model if inv_good is None else inv_good)

    # the monotonicity scan: every grid τ below each lower end down to the model's own τ(n),
    # and at least one octave; where both questions are open, one full probe answers both
    floors: dict[str, int] = {}
    for name, good in (("dec", dec_good), ("inv", inv_good)):
        if good is not None:
            floors[name] = max(LO_EXP, min(k_model, good - TAU_GRID))
    goods = [g for g in (dec_good, inv_good) if g is not None]
    for k in range(max(goods, default=LO_EXP) - 1, min(floors.values(), default=0) - 1, -1):
        need_dec = dec_good is not None and floors["dec"] <= k < dec_good
        need_inv = inv_good is not None and floors["inv"] <= k < inv_good
        if need_dec and need_inv:
            pr.both(k)
        elif need_dec:
            pr.dec(k)
        elif need_inv:
            pr.inv(k)

    def first_crossing(which: str, good: int | None, bad: int | None) -> tuple[Any, Any]:
        """The bracket tightened to the first crossing above τ(n) the scan saw: octave steps
        can jump over a bad stretch, and the scan then knows every grid τ below ``good``."""
        if good is None:
            return good, bad
        below = [
            k for k, f in pr.facts.items() if k_model <= k < good and getattr(f, which) is False
        ]
        if below and getattr(pr.facts.get(min(below) - 1), which, None) is True:
            return min(below) - 1, min(below)
        return good, bad

    dec_good, dec_bad = first_crossing("dec", dec_good, dec_bad)
    inv_good, inv_bad = first_crossing("inv", inv_good, inv_bad)

    def entry(which: str, good: int | None, bad: int | None) -> TauBracket:
        odd = []
        for k in sorted(pr.facts):
            f = pr.facts[k]
            known = getattr(f, which)
            if good is not None and k < good and known is False:
                odd.append(NonMonotone(GridTau(k), "bad below lower", getattr(f, f"{which}_why")))
            elif bad is not None and k > bad and known is True:
                odd.append(NonMonotone(GridTau(k), "good above upper"))
        return TauBracket(
            lower=None if good is None else GridTau(good),
            upper=None if bad is None else GridTau(bad),
            upper_witness=None if bad is None else getattr(pr.facts[bad], f"{which}_why"),
            scanned_down_to=None if good is None else GridTau(floors[which]),
            non_monotone=tuple(odd),
        )

    return TauStarRecord(
        grid=GRID,
        probes=len(pr.evaluated),
        decisions=entry("dec", dec_good, dec_bad),
        invariant=entry("inv", inv_good, inv_bad),
    )
