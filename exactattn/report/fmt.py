"""Number formatting for reports: exact rationals and certified enclosures, never through float.

Certified values arrive as decimal strings with arbitrary exponents (``"3.2968e-434295"``), so
they are handled as exact integers scaled by powers of ten. Every rounding is outward (lower
endpoints down, upper endpoints up): what is printed always contains what was certified, and no
more digits are printed than the enclosure supports.

Formatting produces a small, output-neutral value (:class:`Shown`) that the Markdown and LaTeX
writers render in their own syntax, so both formats show the same digits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from exactattn.results.bounds import CertifiedBall, TauBracket
from exactattn.results.views import Written


@dataclass(frozen=True)
class PowerFit:
    """Least-squares fit of log γ = log c − k log n (floating point, display only)."""

    log10_c: float
    k: float
    ns: tuple[int, ...]


#: Significant digits shown for certified enclosures in tables.
DIGITS = 5
#: Significant digits shown for one-sided values (bounds, ratios), rounded up.
UPPER_DIGITS = 4
#: Longest rational (digits of numerator plus denominator) printed as a fraction.
MAX_FRACTION_DIGITS = 12


@dataclass(frozen=True)
class Exact:
    """The exact value ``num / den * 10**exp`` (``den > 0``), or +-infinity when ``den == 0``.

    Keeping the power of ten apart lets ``1e-434295`` stay small; Fraction would build the
    434296-digit denominator.
    """

    num: int
    den: int = 1
    exp: int = 0

    @property
    def is_inf(self) -> bool:
        return self.den == 0

    @property
    def is_zero(self) -> bool:
        return self.num == 0 and self.den != 0

    @property
    def negative(self) -> bool:
        return self.num < 0

    def floor_scaled(self, u: int) -> int:
        """floor(self / 10**u), without building powers of ten larger than the operands."""
        _require_finite(self)
        t = self.exp - u
        num, den = self.num, self.den
        if num == 0:
            return 0
        if t >= 0:
            return (num * 10**t) // den
        # |num| < 10**len(num) <= den * 10**(-t) when len(num) <= len(den) - 1 - t.
        if _ndigits(num) <= _ndigits(den) - 1 - t:
            return 0 if num >= 0 else -1
        return num // (den * 10 ** (-t))

    def ceil_scaled(self, u: int) -> int:
        """ceil(self / 10**u)."""
        return -Exact(-self.num, self.den, self.exp).floor_scaled(u)

    def leading_exponent(self) -> int:
        """floor(log10 |self|) for a finite non-zero value, exactly."""
        _require_finite(self)
        if self.num == 0:
            raise ValueError("zero has no leading exponent")
        a, b = abs(self.num), self.den
        k = _ndigits(a) - _ndigits(b)
        big = a >= b * 10**k if k >= 0 else a * 10 ** (-k) >= b
        return k + self.exp if big else k - 1 + self.exp

    def log10(self) -> float:
        """log10 |self| as a float for plot coordinates (-inf for zero)."""
        if self.is_inf:
            return math.inf
        if self.num == 0:
            return -math.inf
        return math.log10(abs(self.num)) - math.log10(self.den) + self.exp  # display only

    def __le__(self, other: Exact) -> bool:
        return _compare(self, other) <= 0

    def __lt__(self, other: Exact) -> bool:
        return _compare(self, other) < 0


def _ndigits(x: int) -> int:
    return len(str(abs(x)))


def _require_finite(x: Exact) -> None:
    if x.is_inf:
        raise ValueError("infinite value")


def _compare(a: Exact, b: Exact) -> int:
    """Sign of a - b, exact (infinities compare by sign); cheap for far-apart exponents."""
    if a.is_inf or b.is_inf:
        sa = (1 if a.num > 0 else -1) if a.is_inf else 0
        sb = (1 if b.num > 0 else -1) if b.is_inf else 0
        return (sa > sb) - (sa < sb)
    sa, sb = (a.num > 0) - (a.num < 0), (b.num > 0) - (b.num < 0)
    if sa != sb or sa == 0:
        return (sa > sb) - (sa < sb)
    ea, eb = a.leading_exponent(), b.leading_exponent()
    if ea != eb:
        return sa if ea > eb else -sa
    e = min(a.exp, b.exp)
    lhs = a.num * b.den * 10 ** (a.exp - e)
    rhs = b.num * a.den * 10 ** (b.exp - e)
    return (lhs > rhs) - (lhs < rhs)


_HUGE_EXP = re.compile(r"^(?P<sign>[+-]?)(?P<int>\d+)(?:\.(?P<frac>\d+))?[eE](?P<exp>[+-]?\d+)$")


def parse_decimal(text: str) -> Exact:
    """Exact value of a result-file number: a decimal string (``"0.2689"``,
    ``"3.2968e-434295"``, ``"inf"``) or a rational ``"p/q"``."""
    if "/" in str(text):
        return exact_of_fraction(parse_rational(text))
    try:
        d = Decimal(str(text).strip())
    except InvalidOperation:
        # Decimal refuses exponents past ±10^18; errors at τ = 2^-64 are ~1e-8011319160293570763
        m = _HUGE_EXP.match(str(text).strip())
        if not m:
            raise ValueError(f"not a decimal number: {text!r}") from None
        frac = m["frac"] or ""
        coeff = int(m["int"] + frac)
        return Exact(-coeff if m["sign"] == "-" else coeff, 1, int(m["exp"]) - len(frac))
    if d.is_nan():
        raise ValueError(f"not a number: {text!r}")
    if d.is_infinite():
        return Exact(-1 if d < 0 else 1, 0, 0)
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    coeff = int("".join(map(str, digits)) or "0")
    return Exact(-coeff if sign else coeff, 1, exponent)


def parse_rational(text: str | int) -> Fraction:
    """Exact rational from a result-file string (``"1/6"``, ``"-2"``, ``"0.125"``)."""
    try:
        return Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"not a rational number: {text!r}") from None


def exact_of_fraction(q: Fraction) -> Exact:
    return Exact(q.numerator, q.denominator, 0)


# ---------------------------------------------------------------------------------------------
# Output-neutral shown values


@dataclass(frozen=True)
class Num:
    """A finite decimal to print: ``mant`` is plain digits with an optional point; ``exp`` set
    means scientific notation ``mant x 10^exp``."""

    neg: bool
    mant: str
    exp: int | None = None


@dataclass(frozen=True)
class Bracket:
    """``head[a,b]`` (times ``10^exp`` when set): the value lies between head+a and head+b."""

    head: str
    a: str
    b: str
    exp: int | None = None


@dataclass(frozen=True)
class Interval:
    """An explicit interval ``[lo, hi]``."""

    lo: Num | Special
    hi: Num | Special


@dataclass(frozen=True)
class Frac:
    """An exact rational ``p/q`` with ``q > 1``."""

    neg: bool
    p: int
    q: int


@dataclass(frozen=True)
class Special:
    """``inf``, ``-inf`` or ``none`` (absent value)."""

    kind: str


@dataclass(frozen=True)
class Shown:
    """A value ready to render; ``dagger`` marks an exact rational too long to print."""

    value: Num | Bracket | Interval | Frac | Special
    dagger: bool = False


NONE = Shown(Special("none"))


def _num_text(neg: bool, digits: int, u: int, trim: bool = True) -> Num:
    """The decimal ``digits * 10**u`` as plain text when moderate, else scientific."""
    if digits == 0:
        return Num(False, "0")
    if trim:
        while digits % 10 == 0:
            digits //= 10
            u += 1
    s = str(digits)
    lead = len(s) - 1 + u
    if -3 <= lead <= 5:
        return Num(neg, _plain(s, u))
    mant = s[0] + ("." + s[1:] if len(s) > 1 else "")
    return Num(neg, mant, lead)


def _plain(s: str, u: int) -> str:
    """Digit string ``s`` times ``10**u`` written without exponent."""
    if u >= 0:
        return s + "0" * u
    s = s.rjust(-u + 1, "0")
    return s[:u] + "." + s[u:]


def _endpoint(x: Exact, u: int, up: bool) -> Num:
    v = x.ceil_scaled(u) if up else x.floor_scaled(u)
    return _num_text(v < 0, abs(v), u)


def _special(x: Exact) -> Shown | None:
    if x.is_inf:
        return Shown(Special("inf" if x.num > 0 else "-inf"))
    return None


def _one_sided(x: Exact, digits: int, up: bool) -> Num | Special:
    """One endpoint on its own scale, rounded outward (up for upper ends)."""
    if x.is_inf:
        return Special("inf" if x.num > 0 else "-inf")
    if x.is_zero:
        return Num(False, "0")
    return _endpoint(x, x.leading_exponent() - digits + 1, up)


def enclosure(lo: Exact, hi: Exact, digits: int = DIGITS) -> Shown:
    """Show the certified enclosure [lo, hi] with at most ``digits`` significant digits.

    Compact notation when the endpoints share at least two leading digits: ``0.2689[4,5]`` is
    [0.26894, 0.26895]. Otherwise an explicit interval. Endpoints are rounded outward.
    """
    if hi < lo:
        raise ValueError("enclosure with lower > upper")
    if lo.is_inf or hi.is_inf:
        if lo == hi:
            return Shown(Special("inf" if lo.num > 0 else "-inf"))
        return Shown(Interval(_one_sided(lo, digits, False), _one_sided(hi, digits, True)))
    if lo.is_zero and hi.is_zero:
        return Shown(Num(False, "0"))
    lead = max(x.leading_exponent() for x in (lo, hi) if not x.is_zero)
    if not lo.negative:
        for p in range(digits, 1, -1):
            u = lead - p + 1
            a, b = lo.floor_scaled(u), hi.ceil_scaled(u)
            if a == b:
                return Shown(_num_text(False, a, u))
            sa, sb = str(a), str(b)
            width = max(len(sa), len(sb))
            sa, sb = sa.rjust(width, "0"), sb.rjust(width, "0")
            c = 0
            while c < width and sa[c] == sb[c]:
                c += 1
            if width - c <= 2 and c >= 2:
                shown = _bracket(sa, sb, c, u)
                if shown is not None:
                    return Shown(shown)
                break
            if c < 2:
                break
    # Explicit interval: the coarsest common unit (>= 2 digits) that resolves the width.
    for p in range(2, digits + 1):
        u = lead - p + 1
        a, b = lo.floor_scaled(u), hi.ceil_scaled(u)
        if b - a >= 10 or p == digits:
            if a == b:
                return Shown(_num_text(a < 0, abs(a), u))
            return Shown(Interval(_num_text(a < 0, abs(a), u), _num_text(b < 0, abs(b), u)))
    raise AssertionError("unreachable")


def _bracket(sa: str, sb: str, c: int, u: int) -> Bracket | None:
    """Compact ``head[a,b]`` for the digit strings sa, sb (same length) scaled by 10**u."""
    width = len(sa)
    tail = width - c
    lead = width - 1 + u
    # Plain notation only when every bracketed digit is after the decimal point.
    if -3 <= lead <= 5 and tail <= -u:
        text = _plain(sa, u)
        return Bracket(text[:-tail], sa[c:], sb[c:])
    if sa[0] == "0":
        return None
    mant = sa[0] + "." + sa[1:]
    return Bracket(mant[:-tail], sa[c:], sb[c:], lead)


def certified(
    value: Written | CertifiedBall | None, digits: int = DIGITS, missing_lower: str = "-inf"
) -> Shown:
    """Show a result-file certified real ``{"lower": ..., "upper": ...}`` or a typed ball as
    written (None: absent).

    A null endpoint is unbounded on that side (upper: +inf; lower: ``missing_lower``, e.g.
    ``"0"`` for a temperature, which is positive).
    """
    if value is None:
        return NONE
    if isinstance(value, CertifiedBall):
        lo, hi = value.lower.to_json(), value.upper.to_json()
    else:
        lo, hi = value.lower, value.upper
    if lo is None and hi is None:
        return NONE
    lower = parse_decimal(missing_lower if lo is None else lo)
    upper_ = parse_decimal("inf" if hi is None else hi)
    return enclosure(lower, upper_, digits)


def search_bracket(value: TauBracket | None, digits: int = 6) -> Shown:
    """Show a searched bracket [good, bad] (τ*): each end on its own scale, rounded outward;
    an absent lower end is 0 (temperatures are positive), an absent upper end is ∞ (the
    search reached its top)."""
    if value is None or (value.lower is None and value.upper is None):
        return NONE
    lo = parse_decimal("0" if value.lower is None else value.lower.to_json())
    hi = parse_decimal("inf" if value.upper is None else value.upper.to_json())
    return Shown(Interval(_one_sided(lo, digits, False), _one_sided(hi, digits, True)))


def upper(text: str | None, digits: int = UPPER_DIGITS) -> Shown:
    """Show a one-sided upper value (a bound, a ratio) rounded up to ``digits`` digits."""
    if text is None:
        return NONE
    x = parse_decimal(text)
    special = _special(x)
    if special is not None:
        return special
    return Shown(_one_sided(x, digits, True))


def rational(text: str | int | None, digits: int = DIGITS) -> Shown:
    """Show an exact rational as a fraction, or (dagger) its enclosure when too long to print."""
    if text is None:
        return NONE
    q = parse_rational(text)
    p, d = abs(q.numerator), q.denominator
    if _ndigits(p) + (_ndigits(d) if d > 1 else 0) > MAX_FRACTION_DIGITS:
        x = exact_of_fraction(q)
        return Shown(enclosure(x, x, digits).value, dagger=True)
    if d == 1:
        return Shown(Num(q < 0, str(p)))
    return Shown(Frac(q < 0, p, d))


# ---------------------------------------------------------------------------------------------
# Small display helpers shared by the writers

#: Longest run of digits a report prints in full; a longer one (a closed-form coefficient of
#: thousands of digits) is abbreviated, since TeX cannot set a box that wide ("Dimension too
#: large") and nobody reads it. The result file keeps every digit.
MAX_SHOWN_DIGITS = 100
#: Leading and trailing digits kept in an abbreviation.
KEPT_DIGITS = 20
_DIGIT_RUN = re.compile("[0-9]{" + str(MAX_SHOWN_DIGITS + 1) + ",}")


def long_digits(s: str, latex: bool = False) -> str:
    """``s`` with every run of more than MAX_SHOWN_DIGITS digits abbreviated.

    ``1234…7890 (4,600 digits)`` as plain text; in LaTeX math mode the count under a brace,
    ``{\\underbrace{1234\\ldots7890}_{\\text{4,600 digits}}}`` (a group: an exponent after it
    applies to the whole number). Display only: exact values stay in the JSON.
    """

    def short(m: re.Match[str]) -> str:
        d = m[0]
        head, tail, count = d[:KEPT_DIGITS], d[-KEPT_DIGITS:], f"{len(d):,} digits"
        if latex:
            return rf"{{\underbrace{{{head}\ldots{tail}}}_{{\text{{{count}}}}}}}"
        return f"{head}…{tail} ({count})"

    return _DIGIT_RUN.sub(short, s)


def word(tokens: list[str] | None) -> str:
    """An input as one string: tokens concatenated when all are single characters."""
    if tokens is None:
        return ""
    if all(len(t) == 1 for t in tokens):
        return "".join(tokens)
    return " ".join(tokens)


def runs(ns: Sequence[int], ellipsis: str = ", …, ") -> str:
    """``1, …, 5, 7, 9, …, 12``: consecutive integers collapsed so long n lists stay short."""
    out: list[str] = []
    items = sorted(set(ns))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{items[i]}{ellipsis}{items[j]}")
        else:
            out += [str(x) for x in items[i : j + 1]]
        i = j + 1
    return ", ".join(out)


def sig(x: float, digits: int = 3) -> str:
    """A float (fit parameters only, display only) with ``digits`` significant digits."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    text = f"{x:.{digits}g}"
    return "0" if text in ("-0", "0") else text


def fit_parts(log10_c: float, k: float) -> tuple[str, int | None, str]:
    """(c mantissa, c exponent or None, exponent of n) for the fit c·n^(−k), 3 digits."""
    e = math.floor(log10_c)
    if -3 <= e <= 3:
        c, ce = sig(10**log10_c), None  # display only
    else:
        c, ce = pow10_text(log10_c)
    return c, ce, sig(-k)


def fit_text(fit: PowerFit) -> str:
    """``γ(n) ≈ 0.5·n^(-1.02)`` for Markdown."""
    c, ce, power = fit_parts(fit.log10_c, fit.k)
    cs = c if ce is None else f"{c}e{ce}"
    return f"γ(n) ≈ {cs}·n^({power})"


def fit_tex(fit: PowerFit) -> str:
    """``\\gamma(n) \\approx 0.5\\,n^{-1.02}`` (math mode) for LaTeX and mathtext."""
    c, ce, power = fit_parts(fit.log10_c, fit.k)
    cs = c if ce is None else rf"{c}\times10^{{{ce}}}"
    return rf"\gamma(n) \approx {cs}\,n^{{{power}}}"


def pow10_text(log10_value: float, digits: int = 3) -> tuple[str, int]:
    """(mantissa, exponent) of 10**log10_value without overflow (display only)."""
    e = math.floor(log10_value)
    m = 10 ** (log10_value - e)  # display only
    text = f"{m:.{digits - 1}f}"
    if text.startswith("10"):
        e += 1
        text = f"{1:.{digits - 1}f}"
    return text, e
