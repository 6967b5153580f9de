"""The theory side of a length's record: proved bounds (``bounds``) and τ* brackets
(``tau_star``), typed and exact until the JSON writer.

:mod:`exactattn.bounds` computes these records; only this module spells their JSON keys.
Certified numbers are kept as exact values (``arb`` balls or points, ``Fraction``) and
rounded outward only by ``to_json``. A record read back from a file keeps the text it was
written as, so ``from_json(d).to_json() == d`` byte for byte, and the exact value that text
stands for (an outward-rounded decimal is itself an exact rational).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from flint import arb, ctx

from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import (
    arb_endpoints,
    arb_lower_str,
    arb_upper_str,
    decimal_down,
    decimal_to_arb,
    decimal_up,
    frac_str,
    parse_decimal,
    parse_rational,
)

# ---------------------------------------------------------------------------
# certified numbers written as decimals
# ---------------------------------------------------------------------------


def _read_point(text: Any, up: bool) -> arb | None:
    """The exact point a written end stands for (None: not a finite number)."""
    if not isinstance(text, str):
        return None
    try:
        if "*2^" in text:
            m, e = text.split("*2^")
            return arb((int(m), int(e)))
        ball = decimal_to_arb(text)
    except (ValueError, ArithmeticError, ExactAttnError):
        return None
    return arb(ball.upper() if up else ball.lower())


@dataclass(frozen=True)
class CertifiedEnd:
    """One end of a certified real: ``value`` exact (a ball, whose ``up``-ward end is meant,
    or a Fraction), written as a decimal rounded outward to ``digits`` digits.

    ``text`` is set on records read from a file: they are written back as they were read.
    """

    value: arb | Fraction | None
    up: bool = True
    digits: int = 15
    text: str | None = None

    def to_json(self) -> str:
        if self.text is not None:
            return self.text
        v = self.value
        assert v is not None
        if isinstance(v, Fraction):
            return decimal_up(v, self.digits) if self.up else decimal_down(v, self.digits)
        return arb_upper_str(v, self.digits) if self.up else arb_lower_str(v, self.digits)

    @staticmethod
    def from_json(text: Any, up: bool = True) -> CertifiedEnd:
        """The end as written; its exact point is read only when asked for (:meth:`point`)."""
        s = text if isinstance(text, str) else str(text)
        return CertifiedEnd(None, up, text=s)

    def point(self) -> arb | None:
        """The exact point the end stands for (the written decimal rounded outward to a
        dyadic; None: not a finite number)."""
        if self.value is None:
            return _read_point(self.text, self.up)
        if isinstance(self.value, Fraction):
            return None
        return arb(self.value.upper() if self.up else self.value.lower())


def _end(v: CertifiedEnd | None) -> str | None:
    return None if v is None else v.to_json()


@dataclass(frozen=True)
class CertifiedBall:
    """A certified real ``{"lower", "upper"}`` (τ_thm): both ends of one ball."""

    lower: CertifiedEnd
    upper: CertifiedEnd

    @staticmethod
    def of(x: arb) -> CertifiedBall:
        return CertifiedBall(CertifiedEnd(x, up=False), CertifiedEnd(x, up=True))

    def to_json(self) -> dict[str, str]:
        return {"lower": self.lower.to_json(), "upper": self.upper.to_json()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> CertifiedBall:
        return CertifiedBall(
            CertifiedEnd.from_json(d.get("lower"), up=False),
            CertifiedEnd.from_json(d.get("upper"), up=True),
        )


def _q_or_none(text: Any) -> Fraction | None:
    """A written rational; None when absent or unreadable (reports read any file)."""
    if text is None:
        return None
    try:
        return parse_rational(text, "result", max_exponent=None)
    except (ValueError, ArithmeticError, ExactAttnError):
        return None


# ---------------------------------------------------------------------------
# bounds (check --bounds)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerBound:
    """The proved bound after one layer at the temperatures in use, and measured/bound."""

    index: int
    bound: CertifiedEnd | None  # None: no finite bound (an earlier bound was not finite)
    measured_over_bound: CertifiedEnd | None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "bound": _end(self.bound),
            "measured_over_bound": _end(self.measured_over_bound),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> LayerBound:
        b, r = d.get("bound"), d.get("measured_over_bound")
        return LayerBound(
            d["index"],
            None if b is None else CertifiedEnd.from_json(b),
            None if r is None else CertifiedEnd.from_json(r),
        )


@dataclass(frozen=True)
class BoundViolation:
    """A layer whose certified error is above its proved bound (a bug in bounds or engine)."""

    layer: int
    measured_lower: CertifiedEnd
    bound: CertifiedEnd
    witness: Any  # the error witness as written (input, position)

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "measured_lower": self.measured_lower.to_json(),
            "bound": self.bound.to_json(),
            "witness": self.witness,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> BoundViolation:
        return BoundViolation(
            d.get("layer", -1),
            CertifiedEnd.from_json(d.get("measured_lower"), up=False),
            CertifiedEnd.from_json(d.get("bound")),
            d.get("witness"),
        )


@dataclass(frozen=True)
class TheoremConstants:
    """L, K, x_max, γ, m of Theorems 4/5 at one length, and the read-out's Lipschitz constant."""

    L: int
    K: Fraction
    x_max: Fraction
    gamma: Fraction | None
    m: int
    readout_lipschitz: Fraction

    def to_json(self) -> dict[str, Any]:
        return {
            "L": self.L,
            "K": frac_str(self.K),
            "x_max": frac_str(self.x_max),
            "gamma": frac_str(self.gamma) if self.gamma is not None else None,
            "m": self.m,
            "readout_lipschitz": frac_str(self.readout_lipschitz),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TheoremConstants:
        return TheoremConstants(
            d["L"],
            _q_or_none(d["K"]),  # type: ignore[arg-type]
            _q_or_none(d["x_max"]),  # type: ignore[arg-type]
            _q_or_none(d.get("gamma")),
            d["m"],
            _q_or_none(d["readout_lipschitz"]),  # type: ignore[arg-type]
        )


def _constants(c: Any) -> TheoremConstants | None:
    if not isinstance(c, dict):
        return None
    try:
        return TheoremConstants.from_json(c)
    except (KeyError, TypeError):
        return None


@dataclass(frozen=True)
class BoundsRecord:
    """``bounds`` of one length: the proved bound per layer, τ_thm(n), ε*, the constants."""

    layers: tuple[LayerBound, ...]
    tau_theorem: CertifiedBall | None  # None: a unique-hard head ties at the top
    eps_star: Fraction | None
    constants: TheoremConstants | None
    violation_details: tuple[BoundViolation, ...] = ()
    declared_violations: int | None = None  # as read from a file (else len(details))

    @property
    def violations(self) -> int:
        if self.declared_violations is not None:
            return self.declared_violations
        return len(self.violation_details)

    def layer(self, index: int) -> LayerBound | None:
        return next((b for b in self.layers if b.index == index), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": [b.to_json() for b in self.layers],
            "tau_theorem": None if self.tau_theorem is None else self.tau_theorem.to_json(),
            "eps_star": None if self.eps_star is None else frac_str(self.eps_star),
            "constants": None if self.constants is None else self.constants.to_json(),
            "violations": self.violations,
            "violation_details": [v.to_json() for v in self.violation_details],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> BoundsRecord:
        """Tolerant of the parts a file may lack (reports read older or hand-made files)."""
        t, c, v = d.get("tau_theorem"), d.get("constants"), d.get("violations")
        return BoundsRecord(
            tuple(LayerBound.from_json(e) for e in d.get("layers") or []),
            None if t is None else CertifiedBall.from_json(t),
            _q_or_none(d.get("eps_star")),
            _constants(c),
            tuple(BoundViolation.from_json(x) for x in d.get("violation_details") or []),
            v if isinstance(v, int) else None,
        )


# ---------------------------------------------------------------------------
# τ* (check --find-tau)
# ---------------------------------------------------------------------------

TAU_GRID = 8  # τ* is searched on the grid 2^(k/8)
GRID = "2^(k/8)"


@lru_cache(maxsize=4096)
def grid_text(k: int) -> str:
    """2^(k/8) rounded down to a 12-significant-digit decimal (exact, as text)."""
    q, r = divmod(k, TAU_GRID)
    with ctx.workprec(64):
        val = arb(2) ** q * (arb(2) ** (arb(r) / TAU_GRID))
        lo = arb_endpoints(val)[0]
    return decimal_down(lo, 12)


def grid_value(k: int) -> Fraction:
    """The exact temperature probed at grid point k (the decimal :func:`grid_text` writes)."""
    return parse_decimal(grid_text(k))


@dataclass(frozen=True)
class GridTau:
    """One grid temperature: ``k`` (τ = 2^(k/8) rounded down to 12 digits), or the text read
    from a file."""

    k: int | None
    text: str | None = None

    @property
    def value(self) -> Fraction | None:
        """The exact temperature."""
        if self.k is not None:
            return grid_value(self.k)
        try:
            return parse_decimal(self.text or "")
        except ValueError:
            return None

    def to_json(self) -> str:
        if self.text is not None:
            return self.text
        assert self.k is not None
        return grid_text(self.k)

    def __str__(self) -> str:
        return self.to_json()

    @staticmethod
    def from_json(text: Any) -> GridTau:
        return GridTau(None, text if isinstance(text, str) else str(text))


def _grid(x: GridTau | None) -> str | None:
    return None if x is None else x.to_json()


def _grid_in(x: Any) -> GridTau | None:
    return None if x is None else GridTau.from_json(x)


@dataclass(frozen=True)
class ProbeWitness:
    """Why a grid τ is bad: an input that flips or stays undecided, or whose error after a
    layer is above 1 (or not certified ≤ 1)."""

    reason: str
    input: tuple[str, ...] | None
    hard: Any = None  # disagreement: the decisions (JSON data)
    soft: Any = None
    layer: int | None = None  # error > 1: the layer and the certified error
    error_lower: Fraction | None = None
    error_upper: Fraction | None = None  # None: not finite
    extra: tuple[tuple[str, Any], ...] = ()  # keys of a file this version does not know
    error_written: Any = None  # the error object as read from a file (written back as is)

    @property
    def is_disagreement(self) -> bool:
        return self.reason == "disagreement"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "reason": self.reason,
            "input": None if self.input is None else list(self.input),
        }
        if self.reason == "disagreement":
            out["hard"] = self.hard
            out["soft"] = self.soft
        if self.layer is not None:
            out["layer"] = self.layer
            if self.error_written is not None:
                out["error"] = self.error_written
            else:
                assert self.error_lower is not None
                out["error"] = {
                    "lower": decimal_down(self.error_lower),
                    "upper": "inf" if self.error_upper is None else decimal_up(self.error_upper),
                }
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> ProbeWitness | None:
        if not d:
            return None
        known = {"reason", "input", "hard", "soft", "layer", "error"}
        return ProbeWitness(
            str(d.get("reason")),
            None if d.get("input") is None else tuple(d["input"]),
            d.get("hard"),
            d.get("soft"),
            d.get("layer"),
            extra=tuple((k, v) for k, v in d.items() if k not in known),
            error_written=d.get("error"),
        )


@dataclass(frozen=True)
class NonMonotone:
    """A grid τ on the wrong side of a bracket: bad below its lower end (with the witness),
    or good above its upper end."""

    tau: GridTau
    found: str  # "bad below lower" / "good above upper"
    why: ProbeWitness | None = None

    @property
    def good_above(self) -> bool:
        return self.found == "good above upper"

    def to_json(self) -> dict[str, Any]:
        return {"tau": self.tau.to_json(), "found": self.found} | (
            self.why.to_json() if self.why is not None else {}
        )

    @staticmethod
    def from_json(d: dict[str, Any]) -> NonMonotone:
        rest = {k: v for k, v in d.items() if k not in ("tau", "found")}
        return NonMonotone(
            GridTau.from_json(d.get("tau")), str(d.get("found")), ProbeWitness.from_json(rest)
        )


@dataclass(frozen=True)
class TauBracket:
    """One searched bracket: τ ≤ ``lower`` keeps the property (a certified grid τ), ``upper``
    loses it; None ends: 0 / the search reached its top."""

    lower: GridTau | None
    upper: GridTau | None
    upper_witness: ProbeWitness | None = None
    scanned_down_to: GridTau | None = None
    non_monotone: tuple[NonMonotone, ...] | None = ()  # None: written before the scan existed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lower": _grid(self.lower), "upper": _grid(self.upper)}
        if self.upper is not None:
            w = self.upper_witness
            out["upper_witness"] = {} if w is None else w.to_json()
        out["scanned_down_to"] = _grid(self.scanned_down_to)
        if self.non_monotone is not None:
            out["non_monotone"] = [x.to_json() for x in self.non_monotone]
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> TauBracket:
        w = d.get("upper_witness")
        nm = d.get("non_monotone")
        return TauBracket(
            _grid_in(d.get("lower")),
            _grid_in(d.get("upper")),
            ProbeWitness.from_json(w) if isinstance(w, dict) else None,
            _grid_in(d.get("scanned_down_to")),
            None if nm is None else tuple(NonMonotone.from_json(x) for x in nm),
        )


@dataclass(frozen=True)
class TauStarRecord:
    """``tau_star`` of one length: the τ*_dec and τ*_inv brackets on the grid.

    Results written before the two searches were split hold one flat bracket; its probe also
    required ε ≤ 1, so it reads as the invariant bracket (``legacy``) with no decision one.
    """

    grid: str | None
    probes: int | None
    decisions: TauBracket | None
    invariant: TauBracket | None
    legacy: bool = False

    def brackets(self) -> tuple[TauBracket | None, TauBracket | None]:
        """(τ*_dec, τ*_inv)."""
        return self.decisions, self.invariant

    def to_json(self) -> dict[str, Any]:
        if self.legacy:
            inv = self.invariant.to_json() if self.invariant is not None else {}
            return {"lower": inv.get("lower"), "upper": inv.get("upper")} | {
                k: v for k, v in (("grid", self.grid), ("probes", self.probes)) if v is not None
            }
        out: dict[str, Any] = {"grid": self.grid, "probes": self.probes}
        if self.decisions is not None:
            out["decisions"] = self.decisions.to_json()
        if self.invariant is not None:
            out["invariant"] = self.invariant.to_json()
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> TauStarRecord:
        grid, probes = d.get("grid"), d.get("probes")
        if "decisions" in d or "invariant" in d:
            dec, inv = d.get("decisions"), d.get("invariant")
            return TauStarRecord(
                grid,
                probes,
                None if dec is None else TauBracket.from_json(dec),
                None if inv is None else TauBracket.from_json(inv),
            )
        flat = TauBracket(_grid_in(d.get("lower")), _grid_in(d.get("upper")), non_monotone=None)
        return TauStarRecord(grid, probes, None, flat, legacy=True)


def tau_star_brackets(
    ts: TauStarRecord | None,
) -> tuple[TauBracket | None, TauBracket | None]:
    """(τ*_dec, τ*_inv) of a length's τ* record (both None without one)."""
    return (None, None) if ts is None else ts.brackets()


__all__: Sequence[str] = (
    "BoundViolation",
    "BoundsRecord",
    "CertifiedBall",
    "CertifiedEnd",
    "GRID",
    "GridTau",
    "LayerBound",
    "NonMonotone",
    "ProbeWitness",
    "TAU_GRID",
    "TauBracket",
    "TauStarRecord",
    "TheoremConstants",
    "grid_text",
    "grid_value",
    "tau_star_brackets",
)
