"""Exact numbers in, certified numbers out.

JSON numbers never become binary floats: the loader keeps each literal's text and
converts it to a :class:`fractions.Fraction` with the JSON path in hand, so every
error can name where it is. Certified reals (python-flint ``arb`` balls) leave the
tool as decimal strings rounded *outward*.
"""

from __future__ import annotations

import json
import math
import re
import sys
from fractions import Fraction
from typing import Any

from flint import arb, ctx, fmpq

from exactattn.core.errors import ModelError
from exactattn.core.limits import MAX_DEPTH, check_tree, dedup_pairs

MAX_INT_DIGITS = 100_000
"""Longest integer exactattn writes or reads as decimal text (docs/limits.md).

Python refuses ``str(int)`` past 4,300 digits by default, a guard against quadratic-time
conversion of untrusted text. Literals in files stay below 4,000 characters
(:data:`MAX_NUMBER_CHARS`), but exact values computed from them grow: a γ with a
4,400-digit denominator, FFN activations of 4,800 digits (issue 27). Exact arithmetic must
not stop at a conversion guard, so importing exactattn raises Python's limit to this many
digits (never lowers it; worker processes import exactattn too). Conversion is quadratic
in Python 3.11 (10^5 digits: 0.5 s, 10^6: 46 s), hence 10^5; a value past it stops the
command with exit 2 and a message saying so (exactattn/cli/__init__.py). Result files read back
rationals of up to this many characters; model literals stay below 4,000.
"""


def allow_long_ints() -> None:
    """Raise Python's int/str conversion limit to :data:`MAX_INT_DIGITS` (idempotent)."""
    get = getattr(sys, "get_int_max_str_digits", None)
    if get is not None and 0 < get() < MAX_INT_DIGITS:
        sys.set_int_max_str_digits(MAX_INT_DIGITS)


allow_long_ints()

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

    try:
        tree = json.loads(
            text,
            parse_float=JsonNumber,
            parse_int=JsonNumber,
            parse_constant=JsonConstant,
            object_pairs_hook=dedup_pairs,
        )
    except RecursionError:
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
    # results (max_exponent None) hold computed rationals: γ with 4,400-digit denominators
    max_chars = MAX_NUMBER_CHARS if max_exponent is not None else MAX_INT_DIGITS
    m = _RATIO.fullmatch(text) if len(text) <= max_chars else None
    if m:
        den = int(m["den"])
        if den == 0:
            raise ModelError(path, f"'{text}' divides by zero", "use a nonzero denominator")
        return Fraction(int(m["num"]), den)
    if len(text) > max_chars:
        raise ModelError(
            path,
            f"a number of {len(text):,} characters is longer than the limit of "
            f"{max_chars:,} (docs/limits.md)",
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


def _point_prec(x: arb) -> int:
    """A precision at which x's endpoints keep every bit of its midpoint, and more.

    ``arb.lower()``/``upper()`` round to the *context's* precision (53 bits outside a
    ``workprec``): 1 + 1e-16 computed at 96 bits would become 1, and "> 1" undecidable."""
    m, _ = x.mid().man_exp()
    return max(ctx.prec, int(m).bit_length() + 64)


def point_lower(x: arb) -> arb:
    """x's lower endpoint as an exact point (radius 0), rounded down at the precision of the
    enclosure, never at the context's 53 bits: for comparisons with thresholds."""
    with ctx.workprec(_point_prec(x)):
        return x.lower()


def point_upper(x: arb) -> arb:
    """x's upper endpoint as an exact point, rounded up at the precision of the enclosure."""
    with ctx.workprec(_point_prec(x)):
        return x.upper()


def arb_endpoints(x: arb) -> tuple[Fraction, Fraction]:
    """The dyadic endpoints of a ball, outward at the enclosure's own precision (a non-finite
    ball has no endpoints)."""
    if not x.is_finite():
        raise ValueError("non-finite ball")
    lo_m, lo_e = point_lower(x).man_exp()
    hi_m, hi_e = point_upper(x).man_exp()
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
    e = floor_log10(a)
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


def short_decimal(x: Fraction, up: bool, plain: tuple[int, int] = (-1, 3), digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, rounded up or down (never through a float);
    plain notation when its decimal exponent lies in ``plain``, else ``m.mme±E``."""
    if x == 0:
        return "0"
    text = (decimal_up if up else decimal_down)(x, digits)
    e = floor_log10(abs(x))
    if plain[0] <= e <= plain[1] or "e" in text:
        return text
    mant = (decimal_up if up else decimal_down)(x / Fraction(10) ** e, digits)
    return f"{mant}e{e}"


def floor_log10(a: Fraction) -> int:
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


EXACT_BINARY_EXPONENT = 2**16
"""Endpoints whose binary exponent is beyond ±this are not expanded into a Fraction."""


def arb_upper_str(x: arb, digits: int = 15) -> str:
    """A decimal ≥ every point of the finite ball x (``"inf"`` when x is not finite).

    Why not ``decimal_up(arb_endpoints(x)[1])``: at τ = 2^-40 an error is e^(-2^40), whose
    exact dyadic endpoint has a 10^12-bit denominator. Such endpoints are converted by
    arb's own certified decimal enclosure instead; ordinary ones exactly as before.
    """
    if not x.is_finite():
        return "inf"
    return _endpoint_str(point_upper(x), digits, up=True)


def arb_lower_str(x: arb, digits: int = 15) -> str:
    """A decimal ≤ every point of the finite ball x (``"-inf"`` when x is not finite)."""
    if not x.is_finite():
        return "-inf"
    return _endpoint_str(point_lower(x), digits, up=False)


def arb_exact_value(x: arb) -> Fraction | None:
    """The value of an exact ball (radius 0) of moderate exponent, else None."""
    if not x.is_finite() or not x.rad().is_zero():
        return None
    man, exp = x.mid().man_exp()
    m, e = int(man), int(exp)
    if m == 0:
        return Fraction(0)
    if -EXACT_BINARY_EXPONENT < e and e + m.bit_length() < EXACT_BINARY_EXPONENT:
        return _dyadic(m, e)
    return None


def _endpoint_str(point: Any, digits: int, up: bool) -> str:
    man, exp = point.man_exp()
    m, e = int(man), int(exp)
    if m == 0:
        return "0"
    if -EXACT_BINARY_EXPONENT < e and e + m.bit_length() < EXACT_BINARY_EXPONENT:
        return _decimal(_dyadic(m, e), digits, up)
    # (mid ± rad)·10^e10 encloses the exact point; round its outer end outward
    mid, rad, e10 = arb(point).mid_rad_10exp(digits + 3)
    mid, rad, e10 = int(mid), int(rad), int(e10)
    bound = mid + rad if up else mid - rad
    if bound == 0:
        return "0"
    neg = bound < 0
    mag = -bound if neg else bound
    drop = max(0, len(str(mag)) - digits)
    q, r = divmod(mag, 10**drop)
    if r and (up != neg):  # away from zero exactly when the direction asks for it
        q += 1
    s = _format_scaled(q, -(e10 + drop))
    return "-" + s if neg else s


_DECIMAL_TEXT = re.compile(r"^(?P<sign>-?)(?P<int>\d+)(?:\.(?P<frac>\d+))?(?:e(?P<exp>[+-]?\d+))?$")
HUGE_DECIMAL_EXPONENT = 1000
"""Decimal strings with a power of ten beyond ±this are shortened without Fractions."""


def short_sci_huge(text: str, digits: int, up: bool) -> str | None:
    """``text`` (as written by :func:`arb_upper_str`) rounded outward to `digits` significant
    digits as ``m.mme±E``, when its exponent is too large for a Fraction; else None.

    Why: a certified error can be 3e-1889595908185821346144366738539203194586237552713217407397;
    ``Fraction(3, 10**…)`` of it never finishes, but its digits and exponent are plain integers.
    """
    m = _DECIMAL_TEXT.match(text)
    if not m:
        return None
    frac = m["frac"] or ""
    exp = int(m["exp"] or 0) - len(frac)
    mag = int(m["int"] + frac)
    if mag == 0 or abs(exp) <= HUGE_DECIMAL_EXPONENT:
        return None
    neg = m["sign"] == "-"
    drop = max(0, len(str(mag)) - digits)
    q, r = divmod(mag, 10**drop)
    if r and (up != neg):
        q += 1
    exp += drop
    qs = str(q)
    lead = exp + len(qs) - 1  # exponent of the leading digit
    body = qs.rstrip("0") or "0"
    mant = body[0] + ("." + body[1:] if len(body) > 1 else "")
    return f"{'-' if neg else ''}{mant}e{lead}"


def decimal_to_arb(text: str) -> arb:
    """A ball containing the decimal ``text`` (any exponent; exact when the value is dyadic)."""
    m = _DECIMAL_TEXT.match(text)
    if not m:
        return to_arb(parse_decimal(text))
    frac = m["frac"] or ""
    exp = int(m["exp"] or 0) - len(frac)
    mag = int(m["int"] + frac)
    if abs(exp) <= HUGE_DECIMAL_EXPONENT:
        return to_arb(parse_decimal(text))
    saved = ctx.prec
    ctx.prec = max(saved, 2 * abs(exp).bit_length() + 64)  # 10^exp keeps its digits
    try:
        x = arb(mag) * arb(10) ** exp
    finally:
        ctx.prec = saved
    return -x if m["sign"] == "-" else x


def decimal_is_huge(text: str) -> bool:
    """Whether a decimal string's power of ten is too large to expand into a Fraction."""
    return short_sci_huge(text, 3, True) is not None


def arb_is_huge(x: arb) -> bool:
    """Whether an endpoint of x is too large or small to expand into a Fraction."""
    if not x.is_finite():
        return False
    for point in (x.lower(), x.upper()):
        man, exp = point.man_exp()
        m, e = int(man), int(exp)
        if m and not (-EXACT_BINARY_EXPONENT < e and e + m.bit_length() < EXACT_BINARY_EXPONENT):
            return True
    return False


def arb_endpoints_outward(x: arb) -> tuple[Fraction, Fraction]:
    """Dyadic endpoints of a finite ball, exact unless one is beyond 2^±EXACT_BINARY_EXPONENT
    in size: a tiny endpoint is then widened outward (a lower end to 0 or −2^-E, an upper end
    to 2^-E or 0), a huge one raises OverflowError.

    Why: at τ = e^-700 an error is about e^(-e^700), whose exact endpoint has a 10^300-bit
    denominator: :func:`arb_endpoints` never returns (``search``, ``precision``, issue 27).
    """
    if not x.is_finite():
        raise ValueError("non-finite ball")
    out = []
    # endpoints at the enclosure's own precision, like arb_endpoints (never 53 bits)
    for point, up in ((point_lower(x), False), (point_upper(x), True)):
        man, exp = point.man_exp()
        m, e = int(man), int(exp)
        if m == 0 or (-EXACT_BINARY_EXPONENT < e and e + m.bit_length() < EXACT_BINARY_EXPONENT):
            out.append(_dyadic(m, e))
        elif e + m.bit_length() >= EXACT_BINARY_EXPONENT:
            raise OverflowError(f"a ball endpoint beyond 2^{EXACT_BINARY_EXPONENT}")
        else:  # 0 < |point| < 2^-E: round away from the ball
            tiny = Fraction(1, 2**EXACT_BINARY_EXPONENT)
            out.append((tiny if up else Fraction(0)) if m > 0 else (Fraction(0) if up else -tiny))
    return out[0], out[1]


def arb_interval(x: arb, digits: int = 15) -> dict[str, str]:
    """A certified real for results: ``{"lower": …, "upper": …}`` rounded outward."""
    return {"lower": arb_lower_str(x, digits), "upper": arb_upper_str(x, digits)}


def parse_decimal(text: str) -> Fraction:
    """Read back a decimal string written by :func:`decimal_down`/:func:`decimal_up`."""
    return parse_rational(JsonNumber(text), "decimal", max_exponent=None)


def interval_json(lo: float | Fraction, hi: float | Fraction) -> dict[str, str]:
    """An enclosure as outward-rounded decimal strings ("inf" when not finite)."""

    def conv(x: float | Fraction, up: bool) -> str:
        if isinstance(x, float) and not math.isfinite(x):
            return "inf" if x > 0 else "-inf"
        f = Fraction(x)
        return decimal_up(f, 6) if up else decimal_down(f, 6)

    return {"lower": conv(lo, False), "upper": conv(hi, True)}
