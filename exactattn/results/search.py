"""The ``exactattn-search/1`` record: a certified witness found at one length.

Typed and exact until the JSON writer: a margin or a gap is an exact ``Fraction``; a
certified error is held as the ball or the exact ends it came from and written outward.
Only this module spells the keys of the search format.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.numbers import arb_lower_str, arb_upper_str, decimal_down, decimal_up, frac_str

SEARCH_FORMAT = "exactattn-search/1"

End = Fraction | arb | str | None
"""One end of a value: exact (``Fraction``), a ball (its outward end is written), ``None``
for +∞, or text read back from a file (kept as written)."""


def _end(x: End, up: bool, exact: bool) -> str:
    if x is None:
        return "inf"
    if isinstance(x, str):
        return x
    if isinstance(x, arb):
        return arb_upper_str(x) if up else arb_lower_str(x)
    if exact:
        return frac_str(x)
    return decimal_up(x) if up else decimal_down(x)


@dataclass(frozen=True)
class SearchValue:
    """The witness's value: an exact point (``exact``) or an enclosure [lower, upper]."""

    lower: End
    upper: End
    exact: bool = False

    @staticmethod
    def point(x: Fraction | None) -> SearchValue:
        """An exact value (``None``: +∞, e.g. no lower score, so no gap)."""
        return SearchValue(x, x, exact=True)

    def texts(self) -> tuple[str, str]:
        """The two ends as written: exact text, or decimals rounded outward."""
        return _end(self.lower, False, self.exact), _end(self.upper, True, self.exact)

    def to_json(self) -> dict[str, str]:
        lo, hi = self.texts()
        return {"lower": lo, "upper": hi}

    @staticmethod
    def from_json(d: dict[str, str]) -> SearchValue:
        return SearchValue(d["lower"], d["upper"])


@dataclass(frozen=True)
class SearchWitness:
    """The best input found and where its value was measured."""

    input: tuple[str, ...]
    value: SearchValue
    layer: int | None
    position: int | None
    decision: bool | None = None  # objective margin: the exact hard decision (accept)
    head: int | None = None  # objective gamma: the head of the smallest gap
    prec: int | None = None  # objective error, n ≤ 40: bits of the arb evaluation
    method: str | None = None  # objective error, n > 40: the streaming enclosure's method
    objective: str = "margin"  # which of the optional fields is written

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "input": list(self.input),
            "value": self.value.to_json(),
            "layer": self.layer,
            "position": self.position,
        }
        if self.objective == "margin":
            d["decision"] = self.decision
        elif self.objective == "gamma":
            if self.head is not None:
                d["head"] = self.head
        elif self.prec is not None:
            d["prec"] = self.prec
        elif self.method is not None:
            d["method"] = self.method
        return d

    @staticmethod
    def from_json(d: dict[str, Any], objective: str) -> SearchWitness:
        return SearchWitness(
            tuple(d["input"]),
            SearchValue.from_json(d["value"]),
            d["layer"],
            d["position"],
            decision=d.get("decision"),
            head=d.get("head"),
            prec=d.get("prec"),
            method=d.get("method"),
            objective=objective,
        )


MEANING = {
    "margin": "smallest exact hard margin found: an upper bound on the smallest margin",
    "gamma": "smallest exact score gap found: an upper bound on γ(n)",
    "error": "largest certified ‖soft − hard‖∞ after the last layer found: "
    "a lower bound on the largest error",
}


@dataclass(frozen=True)
class SearchResult:
    """A whole ``exactattn-search/1`` document: a witness and a bound, never exhaustive."""

    model: str
    n: int
    objective: str
    evaluated: int
    seed: int
    budget: int
    witness: SearchWitness
    model_sha256: str | None = None  # the model's content digest; None: a file from before it

    @property
    def meaning(self) -> str:
        return MEANING[self.objective]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SEARCH_FORMAT,
            "model": self.model,
            **({"model_sha256": self.model_sha256} if self.model_sha256 is not None else {}),
            "n": self.n,
            "objective": self.objective,
            "evaluated": self.evaluated,
            "seed": self.seed,
            "budget": self.budget,
            "exhaustive": False,
            "meaning": self.meaning,
            "witness": self.witness.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> SearchResult:
        obj = d["objective"]
        return SearchResult(
            d["model"],
            d["n"],
            obj,
            d["evaluated"],
            d["seed"],
            d["budget"],
            SearchWitness.from_json(d["witness"], obj),
            d.get("model_sha256"),
        )
