"""What closed forms are fitted on: one length's exact values and certified enclosures.

:func:`exactattn.bounds.closedforms.closed_forms` fits sequences over the lengths of a
check. It takes :class:`LengthValues`, built here from a typed
:class:`~exactattn.results.LengthRecord` (exact Fractions, no text in between) or, for a
result file written without ``closed_forms``, from the file's per-length entry. Certified
quantities (errors, τ_thm, τ*) enter as the enclosures the result publishes: their exact
ends rounded outward, which is what a bracket's ``rests_on`` cites and anyone can re-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactattn.core.numbers import decimal_is_huge, parse_decimal, parse_rational
from exactattn.results import LengthRecord
from exactattn.results.bounds import TauBracket
from exactattn.results.closedforms import DESCRIPTIVE_SPREAD, SHAPE_A_MAX, SHAPE_B_MAX, Form
from exactattn.results.views import ABSENT

EXACT_QUANTITIES = ("gamma", "x_max", "min_margin", "accepted")
"""Exact per-length quantities fitted by closed forms (their keys in ``closed_forms``)."""

Enclosure = tuple[str, str]


@dataclass(frozen=True)
class LengthValues:
    """One length's fitted quantities: ``exact`` (key → value; a key is absent when the
    result does not have it), ``errors`` (layer → written enclosure), ``tau_theorem``, and
    ``tau_star`` (closed-form key → bracket ends; None: an open bracket)."""

    n: int
    exact: dict[str, Fraction | None] = field(default_factory=dict)
    errors: dict[int, Enclosure] = field(default_factory=dict)
    layers: tuple[int, ...] = ()
    tau_theorem: Enclosure | None = None
    tau_star: dict[str, Enclosure | None] = field(default_factory=dict)

    @staticmethod
    def of(rec: LengthRecord) -> LengthValues:
        """From a typed record: exact values as they are."""
        exact: dict[str, Fraction | None] = {
            "gamma": rec.gamma,
            "x_max": rec.x_max,
            "min_margin": rec.min_margin,
            "accepted": None if rec.accepted is None else Fraction(rec.accepted),
        }
        errors = {}
        for layer in rec.layers:
            if layer.error is not None:
                iv = layer.error.interval().to_json()
                errors[layer.index] = (iv["lower"], iv["upper"])
        thm = None
        if rec.bounds is not None and rec.bounds.tau_theorem is not None:
            t = rec.bounds.tau_theorem
            thm = (t.lower.to_json(), t.upper.to_json())
        star: dict[str, Enclosure | None] = {}
        ts = rec.tau_star
        if ts is not None:
            parts = (
                {"tau_star": ts.invariant}
                if ts.legacy
                else {"tau_star_decisions": ts.decisions, "tau_star_invariant": ts.invariant}
            )
            for key, b in parts.items():
                if b is not None:
                    star[key] = _bracket_ends(b)
        return LengthValues(rec.n, exact, errors, tuple(x.index for x in rec.layers), thm, star)

    @staticmethod
    def from_row(row: dict[str, Any]) -> LengthValues:
        """From a result file's per-length entry (reports of files without closed_forms)."""
        exact = {k: _exact(row.get(k)) for k in EXACT_QUANTITIES if k in row}
        errors: dict[int, Enclosure] = {}
        layers = []
        for e in row.get("layers") or []:
            layers.append(e["index"])
            err = e.get("error")
            if err is not None and e["index"] not in errors:
                errors[e["index"]] = (str(err["lower"]), str(err["upper"]))
        t = (row.get("bounds") or {}).get("tau_theorem")
        thm = None if t is None else (str(t["lower"]), str(t["upper"]))
        star: dict[str, Enclosure | None] = {}
        ts = row.get("tau_star")
        if ts is not None:
            if "decisions" in ts or "invariant" in ts:
                parts = {f"tau_star_{k}": ts.get(k) for k in ("decisions", "invariant") if k in ts}
            else:
                parts = {"tau_star": ts}
            for key, part in parts.items():
                if part is None:
                    continue
                lo, hi = part.get("lower"), part.get("upper")
                star[key] = None if lo is None or hi is None else (str(lo), str(hi))
        return LengthValues(row["n"], exact, errors, tuple(layers), thm, star)


def _bracket_ends(b: TauBracket) -> Enclosure | None:
    if b.lower is None or b.upper is None:
        return None
    return (b.lower.to_json(), b.upper.to_json())


def _exact(v: Any) -> Fraction | None:
    return None if v is None else parse_rational(str(v), "result", max_exponent=None)


def values_of_rows(rows: Any) -> list[LengthValues]:
    """:meth:`LengthValues.from_row` of every per-length entry of a result file."""
    return [LengthValues.from_row(r) for r in rows]


# ---------------------------------------------------------------------------------------------
# closed_forms records read back (reports, the claims ledger, the terminal)

GAMMA = "gamma"
"""The ``closed_forms`` key of γ(n)."""
TAU_THM = "tau_theorem"
"""The ``closed_forms`` key of τ_thm(n)."""
X_MAX, MIN_MARGIN, ACCEPTED = "x_max", "min_margin", "accepted"
TAU_STAR, TAU_STAR_DEC, TAU_STAR_INV = "tau_star", "tau_star_decisions", "tau_star_invariant"
"""The other quantities' ``closed_forms`` keys (τ*: the flat bracket of older results, then
the two searches)."""


def _ints(x: Any) -> tuple[int, ...]:
    return tuple(x) if isinstance(x, list) else ()


@dataclass(frozen=True)
class ClosedForm:
    """One record of ``closed_forms`` as written: a verified closed form (``expression``, its
    structured ``form``, the lengths it was fitted and verified on), a none record
    (``reason``, the ``lengths`` tried), or a certified bracket (``is_bracket``: ``shape`` with
    exponents ``a``, ``b`` and constants ``c_lower``, ``c_upper`` on the lengths ``on``).
    ``reason`` is ABSENT when the record has no such key (None: written null)."""

    is_bracket: bool
    expression: str | None
    form: Form | None  # the structured form, exact (None: absent or not one this version writes)
    fitted_on: tuple[int, ...]
    verified_on: tuple[int, ...]
    valid_from: int | None
    exceptions: tuple[int, ...]
    undefined_at: tuple[int, ...]
    reason: Any
    lengths: tuple[int, ...]
    shape: str | None
    a: str | None
    b: str | None
    c_lower: str | None
    c_upper: str | None
    on: tuple[int, ...]
    exactly_zero_at: tuple[int, ...]
    open_at: tuple[int, ...]
    rests_on: tuple[tuple[int, str, str], ...] = ()  # (n, lower, upper) as written

    @property
    def descriptive(self) -> bool:
        """Whether a bracket's shape describes its data (see DESCRIPTIVE_SPREAD): the
        constants within that factor of each other and neither exponent at its search
        bound. Otherwise the printers show the data's range instead of a shape."""
        try:
            a, b = _fraction(self.a), _fraction(self.b)
            lo, hi = _fraction(self.c_lower), _fraction(self.c_upper)
        except (ValueError, ZeroDivisionError, TypeError):
            return False
        if self.shape is None or None in (a, b, lo, hi):
            return False
        assert a is not None and b is not None and lo is not None and hi is not None
        if abs(b) >= SHAPE_B_MAX or a >= SHAPE_A_MAX:
            return False
        return lo > 0 and hi <= DESCRIPTIVE_SPREAD * lo

    @property
    def data_range(self) -> tuple[str, str] | None:
        """The smallest lower end and the largest upper end the bracket rests on, as written
        (None when the record has no enclosures)."""
        ends = []
        for _, lo, hi in self.rests_on:
            try:
                ends.append((_fraction(lo), lo, _fraction(hi), hi))
            except (ValueError, ZeroDivisionError, TypeError):
                return None
        if not ends:
            return None
        return min(ends)[1], max(ends, key=lambda e: e[2])[3]

    @property
    def verified(self) -> bool:
        """A verified closed form with a usable structured form."""
        return self.expression is not None and bool(self.verified_on) and self.form is not None

    @staticmethod
    def from_json(rec: dict[str, Any]) -> ClosedForm:
        """A written record, read tolerantly (any file; ``form`` through :meth:`Form.read`)."""
        form = rec.get("form")
        expr, reason = rec.get("expression"), rec.get("reason", ABSENT)
        return ClosedForm(
            is_bracket=rec.get("kind") == "bracket",
            expression=None if expr is None else str(expr),
            form=None if form is None else Form.read(form),
            fitted_on=_ints(rec.get("fitted_on")),
            verified_on=_ints(rec.get("verified_on")),
            valid_from=rec.get("valid_from"),
            exceptions=_ints(rec.get("exceptions")),
            undefined_at=_ints(rec.get("undefined_at")),
            reason=reason if reason is None or reason is ABSENT else str(reason),
            lengths=_ints(rec.get("lengths")),
            shape=rec.get("shape"),
            a=rec.get("a"),
            b=rec.get("b"),
            c_lower=None if rec.get("c_lower") is None else str(rec["c_lower"]),
            c_upper=None if rec.get("c_upper") is None else str(rec["c_upper"]),
            on=_ints(rec.get("on")),
            exactly_zero_at=_ints(rec.get("exactly_zero_at")),
            open_at=_ints(rec.get("open_at")),
            rests_on=_rests_on(rec.get("rests_on")),
        )


def _fraction(x: Any) -> Fraction | None:
    """A written exponent or constant ("-5/2", "0.0474258") exactly; None when absent.
    A decimal past the exact range (a hostile "1e-999999999") is a ValueError, not a
    billion-digit integer."""
    if x is None:
        return None
    text = str(x)
    if len(text) > 100 or ("/" not in text and decimal_is_huge(text)):
        raise ValueError(text[:20])
    return parse_decimal(text) if "/" not in text else Fraction(text)


def _rests_on(x: Any) -> tuple[tuple[int, str, str], ...]:
    """A bracket's written enclosures, read tolerantly (anything malformed: none)."""
    if not isinstance(x, dict):
        return ()
    out = []
    for n, e in x.items():
        if not (isinstance(e, dict) and isinstance(e.get("lower"), str)):
            return ()
        if not (isinstance(e.get("upper"), str) and str(n).isdigit()):
            return ()
        out.append((int(n), e["lower"], e["upper"]))
    return tuple(out)


def closed_form_records(cf: dict[str, Any] | None) -> dict[str, ClosedForm]:
    """Every record of a result's ``closed_forms``, by quantity key, in the file's order."""
    return {key: ClosedForm.from_json(rec) for key, rec in (cf or {}).items()}
