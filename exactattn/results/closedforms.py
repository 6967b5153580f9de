"""The records of a result's ``closed_forms``, as fitted: exact until the writer.

:mod:`exactattn.bounds.closedforms` conjectures and verifies the forms; it builds these
records, and only their ``to_json`` spells the keys. A structured :class:`Form` keeps its
coefficients as Fractions, a :class:`Bracket` its certified constants as exact rationals
(rounded outward to six digits by the writer). Reports read written records back through
:class:`exactattn.results.sequences.ClosedForm`, which tolerates any file and holds its
structured form as a :class:`Form` (:meth:`Form.read`: None for a form this version does not
write). :meth:`Form.from_json` is the strict reader: exactly what :meth:`Form.to_json` writes,
so a form read back writes the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactattn.core.numbers import decimal_down, decimal_up

BRACKET_NOTE = (
    "holds at every listed n (certified); a description of the data, not a proof about larger n"
)
"""The ``note`` every bracket carries."""

PARITY, HYPERGEOMETRIC, RATIONAL, POWER = "parity", "hypergeometric", "rational", "power"
"""The kinds of a structured form."""


def fraction_text(x: Fraction | int) -> str:
    """An exact rational as written: ``"3"`` or ``"3/4"``."""
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


@dataclass(frozen=True)
class Form:
    """A structured closed form, evaluated exactly without parsing anything.

    ``rational``: num(n)/den(n) (coefficients in ascending powers of n); ``power``: the same
    times ``base``^n; ``hypergeometric``: y(``start``) = ``value`` and y(n + ``step``) =
    num(n)/den(n)·y(n); ``parity``: the form ``even`` at even n, ``odd`` at odd n (None: no
    value there)."""

    kind: str
    num: tuple[Fraction, ...] = ()
    den: tuple[Fraction, ...] = ()
    base: Fraction | None = None
    start: int = 0
    step: int = 1
    value: Fraction = Fraction(0)
    even: Form | None = None
    odd: Form | None = None

    def to_json(self) -> dict[str, Any]:
        if self.kind == PARITY:
            return {
                "kind": PARITY,
                "even": None if self.even is None else self.even.to_json(),
                "odd": None if self.odd is None else self.odd.to_json(),
            }
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == HYPERGEOMETRIC:
            out.update(start=self.start, step=self.step, value=fraction_text(self.value))
        out["num"] = [fraction_text(c) for c in self.num]
        out["den"] = [fraction_text(c) for c in self.den]
        if self.base is not None:
            out["base"] = fraction_text(self.base)
        return out

    @staticmethod
    def from_json(d: Any, top: bool = True) -> Form:
        """A written form, read strictly: exactly what :meth:`to_json` writes (a known kind,
        parity only at the top, coefficients as exact ``p``/``p/q`` text, ``base`` exactly
        for ``power``, ``start``/``step``/``value`` for ``hypergeometric``), so
        ``Form.from_json(x).to_json() == x``. Anything else raises ``ValueError`` or
        ``TypeError`` naming the field; :meth:`read` is the tolerant reader."""
        if not isinstance(d, Mapping):
            raise TypeError(f"a structured form is an object, not {type(d).__name__}")
        kind = d.get("kind")
        if kind not in FORM_KINDS or (kind == PARITY and not top):
            raise ValueError(
                f"form kind: expected one of {', '.join(FORM_KINDS)}, got {kind!r:.60}"
            )
        if kind == PARITY:
            _keys(d, ("kind", "even", "odd"), ())
            even, odd = (
                None if d[h] is None else Form.from_json(d[h], False) for h in ("even", "odd")
            )
            return Form(PARITY, even=even, odd=odd)
        extra = {HYPERGEOMETRIC: ("start", "step", "value"), POWER: ("base",)}.get(kind, ())
        _keys(d, ("kind", *extra, "num", "den"), ())
        num, den = _coeffs(d["num"], "num"), _coeffs(d["den"], "den")
        if not any(den):
            raise ValueError("form den: every coefficient is 0")
        if kind == HYPERGEOMETRIC:
            start, step = d["start"], d["step"]
            if not isinstance(start, int) or isinstance(start, bool) or start < 0:
                raise ValueError(f"form start: expected an integer ≥ 0, got {start!r:.60}")
            if step not in (1, 2) or isinstance(step, bool):
                raise ValueError(f"form step: expected 1 or 2, got {step!r:.60}")
            return Form(
                HYPERGEOMETRIC,
                num,
                den,
                start=start,
                step=step,
                value=exact_fraction(d["value"], "form value"),
            )
        base = exact_fraction(d["base"], "form base") if kind == POWER else None
        return Form(str(kind), num, den, base)

    @staticmethod
    def read(d: Any) -> Form | None:
        """A written form read tolerantly (reports of any file, older or hand-made): the
        strict reading, or None when the form is not one this version writes (the record is
        then shown verbatim, never evaluated)."""
        try:
            return Form.from_json(d)
        except (KeyError, TypeError, ValueError):
            return None


FORM_KINDS = (RATIONAL, POWER, HYPERGEOMETRIC, PARITY)
"""Every kind of structured form (``parity`` only at the top of a form)."""

_RATIONAL_TEXT = re.compile(r"-?[0-9]+(?:/[0-9]+)?")


def exact_fraction(x: Any, where: str) -> Fraction:
    """An exact rational as :func:`fraction_text` writes it (``"3"``, ``"-3/4"``); a JSON
    number (a float would not be exact) or any other text raises ``ValueError``."""
    if not isinstance(x, str) or not _RATIONAL_TEXT.fullmatch(x):
        raise ValueError(f"{where}: expected an exact rational 'p' or 'p/q', got {x!r:.60}")
    if "/" in x and int(x.split("/")[1]) == 0:
        raise ValueError(f"{where}: {x!r:.60} divides by zero")
    return Fraction(x)


def _coeffs(x: Any, part: str) -> tuple[Fraction, ...]:
    if not isinstance(x, list) or not x:
        raise ValueError(f"form {part}: expected a non-empty list of coefficients")
    return tuple(exact_fraction(c, f"form {part}[{i}]") for i, c in enumerate(x))


def _keys(d: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    """Exactly the keys a form of this kind is written with."""
    missing = [k for k in required if k not in d]
    if missing:
        raise KeyError(f"form: missing {', '.join(missing)}")
    unknown = [k for k in d if k not in required and k not in optional]
    if unknown:
        raise ValueError(f"form: unknown key {str(unknown[0])!r:.60}")


@dataclass(frozen=True)
class FitRecord:
    """One exact sequence's closed form: found (``expression`` and its ``latex``, the
    ``form``, the lengths it was ``fitted_on`` and ``verified_on``, and ``valid_from`` with
    the ``exceptions`` before it) or not (``expression`` None, the ``reason``, the
    ``kinds_tried`` when a search ran, the ``lengths``); ``undefined_at``: lengths without a
    value (γ = ∞)."""

    expression: str | None
    latex: str | None = None
    fitted_on: tuple[int, ...] = ()
    verified_on: tuple[int, ...] = ()
    form: Form | None = None
    valid_from: int | None = None
    exceptions: tuple[int, ...] = ()
    reason: str | None = None
    kinds_tried: tuple[str, ...] | None = None
    lengths: tuple[int, ...] = ()
    undefined_at: tuple[int, ...] = ()

    @property
    def found(self) -> bool:
        return self.expression is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.expression is not None:
            assert self.form is not None
            out = {
                "expression": self.expression,
                "latex": self.latex,
                "fitted_on": list(self.fitted_on),
                "verified_on": list(self.verified_on),
                "form": self.form.to_json(),
            }
            if self.valid_from is not None:
                out["valid_from"] = self.valid_from
                out["exceptions"] = list(self.exceptions)
        else:
            out = {"expression": None, "reason": self.reason}
            if self.kinds_tried is not None:
                out["kinds_tried"] = list(self.kinds_tried)
            out["lengths"] = list(self.lengths)
        if self.undefined_at:
            out["undefined_at"] = list(self.undefined_at)
        return out


SHAPE_B_MAX = 8
"""Largest |b| of the power n^b a bracket's shape may have (bounds/closedforms.py)."""
SHAPE_A_MAX = 64
"""Largest decay rate a of e^(−a n) a bracket's shape may have (bounds/closedforms.py)."""
DESCRIPTIVE_SPREAD = 10
"""A bracket is printed as its shape c·n^b·e^(−an) only when c_upper/c_lower is at most this
and neither exponent sits at its search bound; otherwise the data's range is printed: a
shape n^8 chosen at the bound to squeeze errors that the constructions keep below e^(−3)
read as a growth law (issue 39)."""


@dataclass(frozen=True)
class Bracket:
    """A certified bracket c_lower·n^b·e^(−a n) ≤ v(n) ≤ c_upper·n^b·e^(−a n) at the lengths
    ``on`` (``shape`` None: no bracket, and the ``reason``). ``c_lower``/``c_upper`` are
    exact certified rationals (the writer rounds them outward); ``rests_on`` holds the
    enclosures (n, lower, upper) the bracket rests on, as the result publishes them."""

    shape: str | None
    reason: str | None = None
    a: Fraction = Fraction(0)
    b: Fraction = Fraction(0)
    c_lower: Fraction = Fraction(0)
    c_upper: Fraction = Fraction(0)
    on: tuple[int, ...] = ()
    rests_on: tuple[tuple[int, str, str], ...] = ()
    exactly_zero_at: tuple[int, ...] = ()
    open_at: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "bracket"}
        if self.exactly_zero_at:
            out["exactly_zero_at"] = list(self.exactly_zero_at)
        if self.open_at:
            out["open_at"] = list(self.open_at)
        if self.shape is None:
            out.update(shape=None, reason=self.reason)
            return out
        out.update(
            shape=self.shape,
            a=fraction_text(self.a),
            b=fraction_text(self.b),
            c_lower=decimal_down(self.c_lower, 6),
            c_upper=decimal_up(self.c_upper, 6),
            on=list(self.on),
            rests_on={str(n): {"lower": lo, "upper": hi} for n, lo, hi in self.rests_on},
            note=BRACKET_NOTE,
        )
        return out


ClosedFormRecord = FitRecord | Bracket


@dataclass(frozen=True)
class ClosedForms:
    """A result's ``closed_forms``: (quantity key, record) in the order written."""

    records: tuple[tuple[str, ClosedFormRecord], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {key: rec.to_json() for key, rec in self.records}
