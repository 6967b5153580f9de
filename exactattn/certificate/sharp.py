"""Theorem S at one length from a model's claims (the inputs of :mod:`exactattn.bounds.chain`).

``SharpPlan.of(model)`` is built once per model (the chain's plan, which claim covers which
coordinate and head); ``SharpPlan.at(n, …)`` evaluates the claims at n and runs the chain:

* ranges (R): a coordinate's claimed ``coordinate_ranges`` entry (an integer range with at
  most :data:`~exactattn.bounds.chain.MAX_SET` values becomes that finite set), intersected
  with Lemma G's symmetric bound at each layer boundary (or ``activation_upper``); a
  coordinate without a claim gets the symmetric bound alone. A ``bos`` entry makes two
  position classes (BOS, and the rest);
* profiles (P): a head's claimed ``head_profiles`` entry, with its gap raised to the model's
  γ(n) (``gamma_lower``); a head without one the profile (γ(n), 0, 1); a flat head (QᵀK = 0,
  Kᵀb_q = 0) none; a leftmost/rightmost head is treated as the average head it equals under
  ``unique_top`` (the caller refuses such heads otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.bounds.chain import (
    MAX_SET,
    ChainPlan,
    ChainResult,
    CoordRange,
    HeadPlan,
    Profile,
    sharp_chain,
)
from exactattn.model import Model
from exactattn.model.claimed import RangeClaim, expr_ends, profile_at

__all__ = ["SharpPlan"]


def _const(e: Any) -> bool:
    return "n" not in e.variables()


@dataclass(frozen=True)
class SharpPlan:
    """What the per-coordinate chain needs from a model, independent of n."""

    model: Model
    plan: ChainPlan
    main: dict[int, RangeClaim]  # coordinate -> its claimed range (every position)
    bos: dict[int, RangeClaim]  # coordinate -> its claimed range at the BOS position
    profiles: dict[tuple[int, int], tuple[int, Any]]  # (layer, head) -> (index, ProfileClaim)
    unique: frozenset[tuple[int, int]]  # leftmost/rightmost heads (unique_top claimed)
    _const_cache: dict[tuple[str, int], CoordRange]

    @staticmethod
    def of(model: Model) -> SharpPlan:
        cl = model.claims
        main: dict[int, RangeClaim] = {}
        bos: dict[int, RangeClaim] = {}
        if cl is not None and cl.coordinate_ranges is not None:
            main = {r.coordinate: r for r in cl.coordinate_ranges.ranges}
            if model.bos is not None:
                bos = {r.coordinate: r for r in cl.coordinate_ranges.bos}
        profiles: dict[tuple[int, int], tuple[int, Any]] = {}
        if cl is not None and cl.head_profiles is not None:
            profiles = {(h.layer, h.head): (k, h) for k, h in enumerate(cl.head_profiles.heads)}
        plan = ChainPlan.of(model)
        unique = frozenset(
            (h.layer, h.head)
            for layer in plan.layers
            if isinstance(layer, tuple)
            for h in layer
            if h.rule != "average"
        )
        return SharpPlan(model, plan, main, bos, profiles, unique, {})

    @property
    def claimed(self) -> bool:
        """Whether the model claims anything Theorem S uses beyond γ and Lemma G."""
        return bool(self.main or self.profiles)

    # -- claims at n ------------------------------------------------------------------
    def _range(self, r: RangeClaim, n: int, block: str) -> CoordRange:
        key = (block, r.coordinate)
        got = self._const_cache.get(key)
        if got is not None:
            return got
        path = f"claims.coordinate_ranges.{block}.{r.key}"
        lo = expr_ends(r.lo, n, f"{path}.min")[0]
        hi = expr_ends(r.hi, n, f"{path}.max")[1]
        out = self._make(r, lo, hi)
        if _const(r.lo) and _const(r.hi):
            self._const_cache[key] = out
        return out

    @staticmethod
    def _make(r: RangeClaim, lo: Fraction, hi: Fraction) -> CoordRange:
        vals = None
        if r.integer:
            a, b = math.ceil(lo), math.floor(hi)
            if b - a + 1 <= MAX_SET:
                vals = tuple(Fraction(v) for v in range(a, b + 1))
            lo, hi = Fraction(a), Fraction(b)
        if lo > hi:  # an empty range is a false claim; check finds it, the chain ignores it
            return CoordRange(lo, lo)
        return CoordRange(lo, hi, vals)

    def ranges(self, n: int, x_bounds: list[Fraction]) -> list[list[list[CoordRange]]]:
        """Per boundary ℓ (0..L), the position classes' ranges: ``x_bounds[ℓ]`` bounds every
        |hard entry| at boundary ℓ (Lemma G / activation_upper). A claimed range is used as
        it is (the claim holds at every boundary); only coordinates without one take the
        symmetric bound of their boundary."""
        d = self.model.d
        main = {c: self._range(r, n, "ranges") for c, r in self.main.items()}
        bos = {c: self._range(r, n, "bos") for c, r in self.bos.items()}
        free = [c for c in range(d) if c not in main]
        out = []
        prev: tuple[Fraction, list[list[CoordRange]]] | None = None
        for x in x_bounds:
            if prev is not None and (not free or prev[0] == x):
                out.append(prev[1])  # the same ranges as the previous boundary
                continue
            sym = CoordRange.symmetric(x)
            rest = [main.get(c, sym) for c in range(d)]
            if bos:
                first = [bos.get(c, rest[c]) for c in range(d)]
                classes = [first, rest]
            else:
                classes = [rest]
            out.append(classes)
            prev = (x, classes)
        return out

    def profiles_at(self, n: int, gamma: Fraction) -> dict[tuple[int, int], Profile | None]:
        out: dict[tuple[int, int], Profile | None] = {}
        for layer in self.plan.layers:
            if not isinstance(layer, tuple):
                continue
            for h in layer:
                out[(h.layer, h.head)] = self._profile(h, n, gamma)
        return out

    def _profile(self, h: HeadPlan, n: int, gamma: Fraction) -> Profile | None:
        if h.flat:
            return None
        got = self.profiles.get((h.layer, h.head))
        if got is None:
            return Profile(gamma)
        k, pc = got
        gap, step = profile_at(pc, n, k)
        return Profile(max(gap, gamma), max(step, Fraction(0)), pc.per_rank, pc.unique)

    # -- the chain --------------------------------------------------------------------
    def at(
        self,
        n: int,
        gamma: Fraction,
        x_bounds: list[Fraction],
        taus: list[list[arb] | None],
        diagnose: bool = True,
    ) -> ChainResult:
        """Theorem S at length n with the model's claims (γ(n) ≥ ``gamma`` > 0)."""
        m = self.model.length(n) - 1
        return sharp_chain(
            self.plan,
            self.ranges(n, x_bounds),
            self.profiles_at(n, gamma),
            m,
            taus,
            {k: True for k in self.unique},
            diagnose,
        )
