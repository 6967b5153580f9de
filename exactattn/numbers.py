"""Exact numbers in, certified numbers out.

JSON numbers never become binary floats: the loader keeps each literal's text and
converts it to a :class:`fractions.Fraction` with the JSON path in hand, so every
error can name where it is. Certified reals (python-flint ``arb`` balls) leave the
tool as decimal strings rounded *outward*.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any

from flint import arb, fmpq

from .errors import ModelError

MAX_NUMBER_CHARS = 4_000
"""Longest number literal (Python refuses int() of more than 4,300 digits)."""

MAX_ANY_EXPONENT = 10_000_000
"""Even result files (whose errors reach 1e-434295) stay below this exponent."""

MAX_DECIMAL_EXPONENT = 300
"""Literals like ``1e400`` are refused: other JSON readers turn them into infinity."""

# ASCII digits only, no padding, a sign only in front: "١/٢", " 1 " and "1/-2" are refused.
_LITERAL = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]*))?(?:[eE](?P<exp>[+-]?[0-9]+))?"
)
_RATIO = re.compile(r"(?P<num>[+-]?[0-9]+)/(?P<den>[0-9]+)")
_DOT_FIRST = re.compile(r"(?P<sign>[+-]?)\.(?P<frac>[0-9]+)(?:[eE](?P<exp>[+-]?[0-9]+))?")


class JsonNumber(str):
    """The text of a JSON number literal, kept verbatim until it is validated."""


class JsonConstant(str):
    """``NaN``, ``Infinity`` or ``-Infinity`` in the JSON text: always an error later."""


def load_json_text(text: str, source: str = "model") -> Any:
    """Parse JSON keeping number literals as text (never as binary floats).

    The limits of docs/limits.md are enforced here, so every later stage may assume them:
    nesting depth, string and number lengths, no duplicate keys, no lone surrogates.
    """
    from .limits import check_tree, dedup_pairs

    try:
        tree = json.loads(
            text,
            parse_float=JsonNumber,
            parse_int=JsonNumber,
            parse_constant=JsonConstant,
            object_pairs_hook=dedup_pairs,
        )
    except RecursionError:
        from .limits import MAX_DEPTH

        raise ModelError(
            source,
            f"the JSON is nested deeper than the limit of {MAX_DEPTH} levels (docs/limits.md)",
            "flatten the file; model and result files need fewer than 10 levels",
        ) from None
    except json.JSONDecodeError as exc:
        raise ModelError(
            source,
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "fix the JSON syntax (a JSON validator shows the spot)",
        ) from None
    check_tree(tree, source)
    return tree


def parse_rational(
    value: Any, path: str, max_exponent: int | None = MAX_DECIMAL_EXPONENT
) -> Fraction:
    """Turn a JSON number or a rational-literal string into an exact Fraction.

    Model files refuse decimal exponents beyond ±300 (``max_exponent``); result files,
    whose certified errors can be 1e-434295, read back with no limit.
    """
    if isinstance(value, JsonConstant):
        raise ModelError(
            path,
            f"{value} is not a number exactattn accepts",
            'use a finite rational such as 3, "3/4" or 0.125',
        )
    if isinstance(value, bool) or not isinstance(value, str):
        raise ModelError(
            path,
            f"expected a number, got {_describe(value)}",
            'write a JSON number or a string such as "3/4"',
        )
    text = str(value)
    m = _RATIO.fullmatch(text) if len(text) <= MAX_NUMBER_CHARS else None
    if m:
        den = int(m["den"])
        if den == 0:
            raise ModelError(path, f"'{text}' divides by zero", "use a nonzero denominator")
        return Fraction(int(m["num"]), den)
    if len(text) > MAX_NUMBER_CHARS:
        raise ModelError(
            path,
            f"a number of {len(text):,} characters is longer than the limit of "
            f"{MAX_NUMBER_CHARS:,} (docs/limits.md)",
            "rescale the model so its numbers are shorter",
        )
    m = _LITERAL.fullmatch(text) or _DOT_FIRST.fullmatch(text)
    if not m:
        raise ModelError(
            path,
            f"{_clip(text)!r} is not a rational literal",
            'write an integer, a decimal like 0.125 or 1e-3, or a ratio like "3/4"',
        )
    exp = int(m["exp"] or 0)
    if abs(exp) > MAX_ANY_EXPONENT:
        raise ModelError(
            path,
            f"{_clip(text)!r} has a decimal exponent beyond ±{MAX_ANY_EXPONENT:,}",
            "write a smaller exponent",
        )
    if max_exponent is not None and abs(exp) > max_exponent:
        raise ModelError(
            path,
            f"'{text}' has a decimal exponent beyond ±{MAX_DECIMAL_EXPONENT} "
            "(other JSON readers would make it infinite or zero)",
            'rescale the model or write the value as a ratio string "p/q"',
        )
    groups = m.groupdict()
    digits = (groups.get("int") or "0") + (groups.get("frac") or "")
    scale = len(groups.get("frac") or "") - exp
    num = int(digits)
    result = Fraction(num, 10**scale) if scale >= 0 else Fraction(num * 10 ** (-scale))
    return -result if m["sign"] == "-" else result


def _clip(text: str, limit: int = 60) -> str:
    """A user string shortened for an error message (messages stay one short line)."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return repr(_clip(str(value)))


def frac_str(x: Fraction | int) -> str:
    """Rationals in results: ``"1/6"``, ``"-2"``."""
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def to_arb(x: Fraction | int) -> arb:
    """An exact rational as an arb ball (exact when dyadic, else a tight ball)."""
    x = Fraction(x)
    return arb(fmpq(x.numerator, x.denominator))


def arb_endpoints(x: arb) -> tuple[Fraction, Fraction]:
    """The exact dyadic endpoints of a ball (a non-finite ball has no endpoints)."""
    if not x.is_finite():
        raise ValueError("non-finite ball")
    lo_m, lo_e = x.lower().man_exp()
    hi_m, hi_e = x.upper().man_exp()
    return _dyadic(int(lo_m), int(lo_e)), _dyadic(int(hi_m), int(hi_e))


def _dyadic(m: int, e: int) -> Fraction:
    return Fraction(m * 2**e) if e >= 0 else Fraction(m, 2 ** (-e))


def decimal_down(x: Fraction, digits: int = 15) -> str:
    """The largest decimal with `digits` significant digits that is ≤ x."""
    return _decimal(x, digits, up=False)


def decimal_up(x: Fraction, digits: int = 15) -> str:
    """The smallest decimal with `digits` significant digits that is ≥ x."""
    return _decimal(x, digits, up=True)


def _decimal(x: Fraction, digits: int, up: bool) -> str:
    if x == 0:
        return "0"
    neg = x < 0
    a = -x if neg else x
    # exponent e with 10^e <= a < 10^(e+1), found from bit lengths then corrected
    e = _floor_log10(a)
    shift = digits - 1 - e
    num, den = a.numerator, a.denominator
    if shift >= 0:
        num *= 10**shift
    else:
        den *= 10 ** (-shift)
    # round the magnitude away from zero when the sign asks for it
    round_up_mag = up != neg
    q, r = divmod(num, den)
    if r and round_up_mag:
        q += 1
    if len(str(q)) > digits:  # 9.99..9 rounded up to exactly 10.0..0
        q //= 10
        shift -= 1
    s = _format_scaled(q, shift)
    return "-" + s if neg else s


def _floor_log10(a: Fraction) -> int:
    """floor(log10(a)) for a > 0, estimated from bit lengths and then corrected exactly."""
    bits = a.numerator.bit_length() - a.denominator.bit_length()
    e = (bits * 30103) // 100000 - 1
    while _pow10_gt(e, a):
        e -= 1
    while not _pow10_gt(e + 1, a):
        e += 1
    return e


def _pow10_gt(e: int, a: Fraction) -> bool:
    """Whether 10^e > a, in integer arithmetic."""
    if e >= 0:
        return 10**e * a.denominator > a.numerator
    return a.denominator > a.numerator * 10 ** (-e)


def _format_scaled(q: int, shift: int) -> str:
    """Render q · 10^(−shift) without floats, in plain or scientific notation."""
    s = str(q).rstrip("0") or "0"
    trailing = len(str(q)) - len(s)
    shift -= trailing
    exp10 = len(s) - 1 - shift  # exponent of the leading digit
    if -6 <= exp10 <= 20:
        if shift <= 0:
            return s + "0" * (-shift)
        if shift >= len(s):
            return "0." + "0" * (shift - len(s)) + s
        return s[: len(s) - shift] + "." + s[len(s) - shift :]
    mant = s[0] + ("." + s[1:] if len(s) > 1 else "")
    return f"{mant}e{exp10}"


def arb_interval(x: arb, digits: int = 15) -> dict[str, str]:
    """A certified real for results: ``{"lower": …, "upper": …}`` rounded outward."""
    lo, hi = arb_endpoints(x)
    return {"lower": decimal_down(lo, digits), "upper": decimal_up(hi, digits)}


def parse_decimal(text: str) -> Fraction:
    """Read back a decimal string written by :func:`decimal_down`/:func:`decimal_up`."""
    return parse_rational(JsonNumber(text), "decimal", max_exponent=None)
