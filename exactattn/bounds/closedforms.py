"""Closed forms of the exact per-length sequences of a check, conjectured and then verified.

A check measures γ(n), x_max(n), the smallest margin and the accepted count exactly, as
rationals. This module guesses a formula for each sequence from the *smallest* lengths and
keeps it only if it reproduces, exactly, every length held back (at least two). Nothing here
is a proof: a verified closed form is a conjecture that the data up to the largest checked n
confirm. A fit that is not verified is never reported.

Kinds of formula, tried in order of their number of free parameters (a form with c parameters
is fitted on c lengths, so it needs c + 2 lengths):

* rational functions P(n)/Q(n) of degree (p, q), c = p + q + 1 (polynomials first);
* r(n)·k^n with r rational of degree (p, q) and a base k, c = p + q + 2 (the base is read from
  the data, or is one of a few small integers and their reciprocals);
* hypergeometric terms y(n+1) = R(n)·y(n), R rational with c − 1 parameters (binomials,
  factorials, Catalan numbers);
* each of the above from some length n₀ on (the first few lengths may be exceptional, e.g. a
  construction whose first position is special); the record then says ``valid_from``;
* last, one form for even and one for odd n (Dyck counts are 0 at odd n), each verified on at
  least two lengths of its own parity.

Every reported expression is also re-evaluated through sympy at every length it names.

Certified quantities (per-layer errors, τ*, τ_thm) are enclosures, not exact values; for them
the module gives a *bracket supported by the data*: c₁·n^b·e^{−a n} ≤ value(n) ≤ c₂·n^b·e^{−a n}
for every checked n, with simple rational a, b chosen to make c₂/c₁ small and c₁, c₂ certified
(outward-rounded). It describes the checked lengths only; it is not an asymptotic proof.

Everything is computed from the result's exact strings (``Fraction``), never from floats;
brackets are computed in arb ball arithmetic and rounded outward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

from flint import arb, ctx, fmpz

from exactattn.core.numbers import arb_endpoints, decimal_is_huge, parse_decimal, short_decimal
from exactattn.results.closedforms import (
    DESCRIPTIVE_SPREAD,
    HYPERGEOMETRIC,
    PARITY,
    POWER,
    RATIONAL,
    SHAPE_A_MAX,
    SHAPE_B_MAX,
    Bracket,
    ClosedFormRecord,
    ClosedForms,
    FitRecord,
    Form,
    fraction_text,
)
from exactattn.results.resultfile import closed_form_problem
from exactattn.results.sequences import (
    ACCEPTED,
    EXACT_QUANTITIES,
    GAMMA,
    MIN_MARGIN,
    TAU_STAR,
    TAU_STAR_DEC,
    TAU_STAR_INV,
    TAU_THM,
    X_MAX,
    LengthValues,
    closed_form_records,
)
from exactattn.results.views import ABSENT

#: Largest number of free parameters of a conjectured form (degree (p, q) with p + q ≤ 4).
MAX_PARAMS = 5
#: Lengths at the start that may be exceptional (a form valid from n₀ on).
MAX_SKIP = 3
#: Lengths that must verify a fit, at least.
MIN_VERIFY = 2
#: Bases tried for r(n)·k^n besides the one read from the data.
BASES = tuple(Fraction(k) for k in (2, 3, 4, 5, 6, 8)) + tuple(
    Fraction(1, k) for k in (2, 3, 4, 5, 6, 8)
)

NONE_FITS = "no closed form of this kind fits"
#: The reason when a form verified but is too long for a result file: ``report`` would refuse
#: it (docs/limits.md), so it is not written.
TOO_LONG = (
    "a closed form fits, but its coefficients are longer than a result file allows "
    "(docs/limits.md); not written"
)
KINDS_TRIED = [
    f"rational functions of n with numerator and denominator degrees summing to ≤ {MAX_PARAMS - 1}",
    "r(n)·k^n, r rational, k read from the data or in {2, 3, 4, 5, 6, 8} and reciprocals",
    "y(n+1) = R(n)·y(n) with R rational (hypergeometric: binomials, Catalan numbers)",
    f"each of the above from n₀ on, skipping at most {MAX_SKIP} first lengths",
    "one such form for even n and one for odd n",
]

Point = tuple[int, Fraction]


def max_params(lengths: int) -> int:
    """The most free parameters a form can have and still be verified on ``lengths`` lengths
    (fitted on c of them, verified on MIN_VERIFY more), capped at MAX_PARAMS."""
    return min(MAX_PARAMS, lengths - MIN_VERIFY)


def kinds_tried(lengths: int, consecutive: bool = True) -> tuple[str, ...]:
    """What the search tried on ``lengths`` lengths, truthfully: with fewer than
    MAX_PARAMS + MIN_VERIFY lengths the larger degrees cannot be fitted and verified, so they
    were not tried, and the list says which degrees were (issue 39: it used to claim
    degrees up to 4 on five lengths). With enough lengths it is :data:`KINDS_TRIED`."""
    c = max_params(lengths)
    if c >= MAX_PARAMS:
        return tuple(KINDS_TRIED)
    out = [
        f"rational functions of n with numerator and denominator degrees summing to ≤ {c - 1}"
        if c > 1
        else "constants"
    ]
    if c >= 2:
        r = f"r rational with degrees summing to ≤ {c - 2}" if c > 2 else "r a constant"
        out.append(f"r·k^n, {r}, k read from the data or in {{2, 3, 4, 5, 6, 8}} and reciprocals")
    if c >= 3:
        out.append(
            f"y(n+1) = R(n)·y(n) with R rational of degrees summing to ≤ {c - 2} "
            "(hypergeometric: binomials, Catalan numbers)"
        )
    skip = min(MAX_SKIP, lengths - 1 - MIN_VERIFY)
    if skip >= 1:
        out.append(
            f"each of the above from n₀ on, skipping at most {skip} first "
            f"length{'s' if skip > 1 else ''} (with as many fewer parameters)"
        )
    half = max_params(lengths // 2)
    if consecutive and half >= 1:
        out.append(
            f"one such form for even n and one for odd n, each with at most {half} "
            f"parameter{'s' if half > 1 else ''}"
        )
    return tuple(out)


def none_fits_reason(lengths: int) -> str:
    """Why no form was found: :data:`NONE_FITS` when every kind was tried; with too few
    lengths for the larger forms, that (the forms that fit are often just longer than
    the data can verify: γ(n) = 1/(n+1)³ has 4 parameters, so it needs 6 lengths)."""
    c = max_params(lengths)
    if c >= MAX_PARAMS:
        return NONE_FITS
    return (
        f"no closed form with at most {c} parameter{'s' if c > 1 else ''} fits; {lengths} "
        f"lengths are too few for more (c parameters need c + {MIN_VERIFY} lengths; "
        "1/(n+1)^3 has 4): check more lengths"
    )


# ---------------------------------------------------------------------------------------------
# exact linear algebra over Fraction


def _nullspace(rows: list[list[Fraction]], ncols: int) -> list[list[Fraction]]:
    """A basis of {x : rows·x = 0} by Gauss–Jordan elimination over the rationals."""
    m = [list(r) for r in rows]
    pivots: list[int] = []
    r = 0
    for c in range(ncols):
        piv = next((i for i in range(r, len(m)) if m[i][c] != 0), None)
        if piv is None:
            continue
        m[r], m[piv] = m[piv], m[r]
        inv = 1 / m[r][c]
        m[r] = [v * inv for v in m[r]]
        for i in range(len(m)):
            if i != r and m[i][c] != 0:
                f = m[i][c]
                m[i] = [a - f * b for a, b in zip(m[i], m[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == len(m):
            break
    free = [c for c in range(ncols) if c not in pivots]
    basis = []
    for fc in free:
        x = [Fraction(0)] * ncols
        x[fc] = Fraction(1)
        for i, pc in enumerate(pivots):
            x[pc] = -m[i][fc]
        basis.append(x)
    return basis


def _poly(coeffs: Sequence[Fraction], n: int | Fraction) -> Fraction:
    """Horner: coefficients in ascending powers of n."""
    acc = Fraction(0)
    for c in reversed(coeffs):
        acc = acc * n + c
    return acc


# ---------------------------------------------------------------------------------------------
# forms: structured, evaluated exactly without parsing anything


def evaluate_form(form: Form | Mapping[str, Any], n: int) -> Fraction | None:
    """The exact value of a structured form at n (None where it is undefined); a written
    form (a result file's) is read by :meth:`Form.from_json` first."""
    if not isinstance(form, Form):
        form = Form.from_json(form)
    if form.kind == PARITY:
        half = form.even if n % 2 == 0 else form.odd
        return None if half is None else evaluate_form(half, n)
    num, den = form.num, form.den
    if form.kind == HYPERGEOMETRIC:
        start, step = form.start, form.step
        if n < start or (n - start) % step:
            return None
        value = form.value
        for j in range(start, n, step):
            q = _poly(den, j)
            if q == 0:
                return None
            value *= _poly(num, j) / q
        return value
    q = _poly(den, n)
    if q == 0:
        return None
    value = _poly(num, n) / q
    if form.base is not None:
        value *= form.base**n
    return value


def _fit_rational(points: Sequence[Point], p: int, q: int) -> tuple[list, list] | None:
    """P/Q with deg P ≤ p, deg Q ≤ q through the points (exactly), or None."""
    rows = []
    for n, y in points:
        rows.append([Fraction(n) ** i for i in range(p + 1)] + [-y * n**j for j in range(q + 1)])
    basis = _nullspace(rows, p + q + 2)
    if len(basis) != 1:  # none, or not determined (a smaller form fits: tried before)
        return None
    v = basis[0]
    num, den = v[: p + 1], v[p + 1 :]
    if all(c == 0 for c in den):
        return None
    for n, y in points:
        d = _poly(den, n)
        if d == 0 or _poly(num, n) / d != y:  # an unattainable point
            return None
    # normalize: the highest nonzero denominator coefficient is 1
    lead = next(c for c in reversed(den) if c != 0)
    return [c / lead for c in num], [c / lead for c in den]


def _candidate_forms(fit: Sequence[Point], c: int) -> list[Form]:
    """Every form with c free parameters through the fitting points (exactly)."""
    out = []
    for q in range(c):  # polynomials first
        p = c - 1 - q
        got = _fit_rational(fit, p, q)
        if got is not None:
            out.append(Form(RATIONAL, tuple(got[0]), tuple(got[1])))
    if c >= 2 and all(y != 0 for _, y in fit):
        bases: list[Fraction] = []
        (n0, y0), (n1, y1) = fit[-2], fit[-1]
        if n1 == n0 + 1:
            bases.append(y1 / y0)
        bases += [b for b in BASES if b not in bases]
        for k in bases:
            if k in (0, 1) or k < 0:
                continue
            scaled = [(n, y / k**n) for n, y in fit]
            for q in range(c - 1):
                p = c - 2 - q
                got = _fit_rational(scaled, p, q)
                if got is not None:
                    out.append(Form(POWER, tuple(got[0]), tuple(got[1]), base=k))
    return out


def _hypergeometric(fit: Sequence[Point], c: int, step: int) -> list[Form]:
    """y(n + step) = R(n)·y(n) with R rational of c − 1 parameters, through the fit points."""
    if c < 2 or any(y == 0 for _, y in fit):
        return []
    if any(b[0] - a[0] != step for a, b in zip(fit, fit[1:], strict=False)):
        return []
    ratios = [(a[0], b[1] / a[1]) for a, b in zip(fit, fit[1:], strict=False)]
    if len(ratios) != c - 1:
        return []
    out = []
    for q in range(1, c - 1):  # q = 0 is a polynomial ratio; needs more data than it is worth
        p = c - 2 - q
        got = _fit_rational(ratios, p, q)
        if got is not None:
            out.append(
                Form(
                    HYPERGEOMETRIC,
                    tuple(got[0]),
                    tuple(got[1]),
                    start=fit[0][0],
                    step=step,
                    value=fit[0][1],
                )
            )
    return out


def _search(
    points: Sequence[Point], step: int, max_skip: int
) -> tuple[Form, Sequence[Point], Sequence[Point], int] | None:
    """The first form (fewest parameters, then fewest skipped lengths) that verifies."""
    for c in range(1, MAX_PARAMS + 1):
        for skip in range(max_skip + 1):
            rest = points[skip:]
            if len(rest) < c + MIN_VERIFY:
                break
            fit, held = rest[:c], rest[c:]
            forms = _candidate_forms(fit, c) + _hypergeometric(fit, c, step)
            for form in forms:
                if all(evaluate_form(form, n) == y for n, y in held):
                    return form, fit, held, skip
    return None


def fit_sequence(values: dict[int, Fraction | None]) -> dict[str, Any]:
    """The written record of :func:`fit_record` (what a result's ``closed_forms`` holds)."""
    return fit_record(values).to_json()


def fit_record(values: dict[int, Fraction | None]) -> FitRecord:
    """Conjecture a closed form for {n: value} and verify it on held-back lengths.

    Lengths whose value is None (e.g. γ = ∞: no strict gap) are left out and listed under
    ``undefined_at``. Returns a found record (``expression``, ``latex``, ``form``,
    ``fitted_on``, ``verified_on``, maybe ``valid_from``) or a none record (``expression``
    None, ``reason``, ``kinds_tried``, ``lengths``).
    """
    undefined = tuple(sorted(n for n, v in values.items() if v is None))
    points = sorted((n, Fraction(v)) for n, v in values.items() if v is not None)
    ns = tuple(n for n, _ in points)
    if len(points) < 1 + MIN_VERIFY:
        return FitRecord(
            None,
            reason=f"too few lengths: a closed form needs at least {1 + MIN_VERIFY} "
            f"(one to fit a constant, {MIN_VERIFY} to verify it)",
            lengths=ns,
            undefined_at=undefined,
        )
    # ns is sorted and distinct; no list of the range (a result file may say n = 10^100)
    consecutive = ns[-1] - ns[0] + 1 == len(ns)
    too_long = False

    def readable(record: FitRecord) -> bool:
        nonlocal too_long
        ok = closed_form_problem(record.to_json()) is None
        too_long = too_long or not ok
        return ok

    got = _search(points, 1, MAX_SKIP)
    if got is not None:
        form, fit, held, skip = got
        record = _found(form, fit, held, points[skip:], undefined)
        if record is not None:
            if skip:
                record = replace(record, valid_from=points[skip][0], exceptions=ns[:skip])
            if readable(record):
                return record
    if consecutive:  # one form for even n and one for odd n (e.g. Dyck counts: 0 at odd n)
        halves = [[pt for pt in points if pt[0] % 2 == r] for r in (0, 1)]
        found = [_search(h, 2, 0) for h in halves]
        if all(f is not None for f in found):
            even, odd = found
            assert even is not None and odd is not None
            record = _found(
                Form(PARITY, even=even[0], odd=odd[0]),
                sorted([*even[1], *odd[1]]),
                sorted([*even[2], *odd[2]]),
                points,
                undefined,
            )
            if record is not None and readable(record):
                return record
    return FitRecord(
        None,
        reason=TOO_LONG if too_long else none_fits_reason(len(points)),
        kinds_tried=kinds_tried(len(points), consecutive),
        lengths=ns,
        undefined_at=undefined,
    )


def _found(
    form: Form,
    fit: Sequence[Point],
    held: Sequence[Point],
    used: Sequence[Point],
    undefined: tuple[int, ...],
) -> FitRecord | None:
    """The record of a verified form; its sympy expression is re-checked at every length."""
    # lazy: sympy costs ≈ 0.5 s to import; only closed-form typesetting and checks need it
    import sympy

    n = sympy.Symbol("n")
    expr = form_expr(form, n)
    for m, y in used:  # the printed expression must give the data exactly, too
        got = expr.subs(n, m)
        got = got if got.is_Rational else sympy.simplify(got)
        if got != sympy.Rational(y.numerator, y.denominator):
            return None
    text = sympy.sstr(expr)
    if sympy.parse_expr(text, local_dict={"n": n}) != expr:  # our own text, not user input
        return None
    return FitRecord(
        text,
        latex=sympy.latex(expr),
        fitted_on=tuple(m for m, _ in fit),
        verified_on=tuple(m for m, _ in held),
        form=form,
        undefined_at=undefined,
    )


def form_expr(form: Form | Mapping[str, Any], n: Any = None) -> Any:
    """The sympy expression of a structured form (built from numbers, never parsed); a
    written form (a result file's) is read by :meth:`Form.from_json` first."""
    # lazy: sympy costs ≈ 0.5 s to import; only closed-form typesetting and checks need it
    import sympy

    if not isinstance(form, Form):
        form = Form.from_json(form)
    n = sympy.Symbol("n") if n is None else n

    def rat(x: Fraction) -> Any:
        return sympy.Rational(x.numerator, x.denominator)

    if form.kind == PARITY:
        halves = [sympy.nan if h is None else form_expr(h, n) for h in (form.even, form.odd)]
        return sympy.Piecewise((halves[0], sympy.Eq(sympy.Mod(n, 2), 0)), (halves[1], True))

    def ratio(x: Any) -> Any:
        num = sum(rat(c) * x**i for i, c in enumerate(form.num))
        den = sum(rat(c) * x**i for i, c in enumerate(form.den))
        return sympy.factor(sympy.cancel(num / den))

    if form.kind == HYPERGEOMETRIC:
        k = sympy.Dummy("k", integer=True, nonnegative=True)
        start, step = form.start, form.step
        prod = sympy.Product(ratio(start + step * k), (k, 0, (n - start) / step - 1)).doit()
        return sympy.simplify(rat(form.value) * sympy.gammasimp(prod))
    expr = ratio(n)
    if form.base is not None:
        expr = expr * rat(form.base) ** n
    return expr


# ---------------------------------------------------------------------------------------------
# certified quantities: a bracket c1·n^b·e^(−a n) ≤ value ≤ c2·n^b·e^(−a n) on the checked n

_PREC = 128
#: Largest |b| of the power n^b tried.
MAX_B = SHAPE_B_MAX
#: Lengths needed before an exponential factor e^(−a n) is considered at all.
MIN_EXP_POINTS = 5
_LOG2_SCALED = 6931471805599453 * 8 * 2**64 // 10**16  # log 2, for choosing a shape only


def _decimal_arb(text: str) -> Any:
    """A result-file decimal as an arb ball containing it (no float, no giant Fraction)."""

    if "/" in text:
        q = Fraction(text)
        return arb(fmpz(q.numerator)) / q.denominator
    d = Decimal(text.strip())
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    mant = int("".join(map(str, digits)) or "0")
    v = arb(fmpz(-mant if sign else mant))
    return v * arb(10) ** exp if exp else v


def _finite(e: tuple[str, str]) -> bool:
    """Both endpoints are numbers (not ``inf``/``-inf``/``nan``, which result files may hold)."""
    return all(t.strip().lower().lstrip("+-") not in ("inf", "infinity", "nan") for t in e)


def _nonnegative(e: tuple[str, str] | None) -> tuple[str, str] | None:
    """An enclosure of a quantity ≥ 0 as given, lower end raised to 0; None if unusable."""
    if e is None or not _finite(e):
        return None
    lo, hi = e
    if hi.strip().startswith("-") and not _is_zero(hi):
        return None  # an upper end below 0: not an enclosure of a quantity ≥ 0
    return ("0", hi) if lo.strip().startswith("-") else e


def _is_zero(text: str) -> bool:
    if "/" in text:
        return Fraction(text) == 0
    mant = text.strip().lower().split("e")[0]  # the exponent may be too large for Decimal
    return Decimal(mant) == 0


def bracket_sequence(encl: dict[int, tuple[str, str] | None], exp_allowed: bool = True) -> Bracket:
    """The bracket c1·n^b·e^(−a n) ≤ v(n) ≤ c2·n^b·e^(−a n) over the n with two-sided
    positive enclosures; ``rests_on`` lists those enclosures (the bracket's only evidence)."""

    # an infinite endpoint (an error that is not finite, "inf" in a result file) bounds nothing;
    # every quantity bracketed here is ≥ 0, so a negative lower end says no more than 0
    encl = {n: _nonnegative(e) for n, e in encl.items()}
    pts = {n: e for n, e in sorted(encl.items()) if e is not None}
    zeros = tuple(n for n, (lo, hi) in pts.items() if _is_zero(hi))
    usable = {n: e for n, e in pts.items() if not _is_zero(e[1])}
    open_at = tuple(sorted(n for n, e in encl.items() if e is None))
    if len(usable) < 2:
        return Bracket(
            None,
            reason="fewer than two lengths with a positive enclosure",
            exactly_zero_at=zeros,
            open_at=open_at,
        )

    if any(decimal_is_huge(t) for e in usable.values() for t in e):
        # e.g. e^(-2^40) at a tiny τ: exact endpoints would need 10^12-bit rationals
        return Bracket(
            None,
            reason="enclosures beyond the exact range (tiny τ)",
            exactly_zero_at=zeros,
            open_at=open_at,
        )
    old = ctx.prec
    ctx.prec = _PREC
    try:
        ns = sorted(usable)
        lo_val = {n: _decimal_arb(usable[n][0]) for n in ns}
        hi_val = {n: _decimal_arb(usable[n][1]) for n in ns}
        positive_lower = all(not _is_zero(usable[n][0]) for n in ns)
        a, b = Fraction(0), Fraction(0)
        if positive_lower:
            # choosing the shape only (the bracket itself is certified below): logarithms as
            # integers scaled by 8·2^64, a = ka/8, b = jb/2, so a spread is integer arithmetic
            lo_log = {n: _scaled(lo_val[n].log()) for n in ns}
            hi_log = {n: _scaled(hi_val[n].log()) for n in ns}
            logn = {n: _scaled(arb(n).log()) // 8 for n in ns}
            unit = 2**64

            def spread(ka: int, jb: int) -> int:
                shift = {n: ka * n * unit - 4 * jb * logn[n] for n in ns}
                return max(hi_log[n] + shift[n] for n in ns) - min(lo_log[n] + shift[n] for n in ns)

            def best_over(with_exp: bool) -> tuple[int, int, int]:
                best = None
                for jb in range(-2 * MAX_B, 2 * MAX_B + 1):
                    ka = _best_a(spread, jb) if with_exp else 0
                    sp = spread(ka, jb)
                    if best is None or sp < best[0]:
                        best = (sp, ka, jb)
                assert best is not None
                return best

            s_pow, ka, jb = best_over(False)
            if exp_allowed and len(ns) >= MIN_EXP_POINTS:
                s_exp, ka_e, jb_e = best_over(True)
                # the extra parameter must narrow the bracket by a factor 2 or more
                if s_exp + _LOG2_SCALED <= s_pow:
                    ka, jb = ka_e, jb_e
            a, b = Fraction(ka, 8), Fraction(jb, 2)
        shape = {
            n: (arb(n) ** (arb(b.numerator) / b.denominator))
            * (-(arb(a.numerator) / a.denominator) * n).exp()
            for n in ns
        }
        c2_hi = max(arb_endpoints(hi_val[n] / shape[n])[1] for n in ns)
        c1_lo = min(arb_endpoints(lo_val[n] / shape[n])[0] for n in ns)
        c1_lo = max(c1_lo, Fraction(0))
    finally:
        ctx.prec = old
    return Bracket(
        _shape_text(a, b),
        a=a,
        b=b,
        c_lower=c1_lo,
        c_upper=c2_hi,
        on=tuple(ns),
        rests_on=tuple((n, usable[n][0], usable[n][1]) for n in ns),
        exactly_zero_at=zeros,
        open_at=open_at,
    )


def _scaled(x: Any) -> int:
    """floor(mid(x)·8·2^64): a logarithm as an integer, for choosing a shape."""

    m = arb_endpoints(x.mid())[0] * 8 * 2**64
    return m.numerator // m.denominator


def _best_a(spread: Any, jb: int) -> int:
    """The decay rate a = ka/8 ≥ 0 minimizing the bracket's spread for b = jb/2 (0 when it
    does as well)."""
    lo, hi = 0, SHAPE_A_MAX * 8
    while hi - lo > 2:  # ternary search: the spread is convex and piecewise linear in a
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if spread(m1, jb) <= spread(m2, jb):
            hi = m2
        else:
            lo = m1
    ka = min(range(lo, hi + 1), key=lambda k: (spread(k, jb), k))
    return 0 if spread(0, jb) <= spread(ka, jb) else ka


def _shape_text(a: Fraction, b: Fraction) -> str:
    parts = []
    if b != 0:
        parts.append(
            f"n^({fraction_text(b)})" if b.denominator != 1 or b < 0 else f"n^{fraction_text(b)}"
        )
    if a != 0:
        parts.append(
            f"exp(-({fraction_text(a)})*n)"
            if a.denominator != 1 or a < 0
            else f"exp(-{fraction_text(a)}*n)"
        )
    return "*".join(parts) or "1"


# ---------------------------------------------------------------------------------------------
# the result's closed_forms object


def closed_forms(lengths: Sequence[LengthValues]) -> dict[str, Any]:
    """The written ``closed_forms`` object of :func:`fit_closed_forms`."""
    return fit_closed_forms(lengths).to_json()


def fit_closed_forms(lengths: Sequence[LengthValues]) -> ClosedForms:
    """The ``closed_forms`` of a result, from the lengths present.

    ``lengths``: :meth:`LengthValues.of` a check's records (exact values as computed), or
    :meth:`LengthValues.from_row` of a result file's entries.
    """
    rows = sorted(lengths, key=lambda r: r.n)
    out: list[tuple[str, ClosedFormRecord]] = []
    for key in EXACT_QUANTITIES:
        if not any(key in r.exact for r in rows):
            continue
        if key != GAMMA and all(r.exact.get(key) is None for r in rows):
            continue
        out.append((key, fit_record({r.n: r.exact.get(key) for r in rows})))
    # certified: per-layer errors, τ_thm, τ*
    layer_ids = sorted({li for r in rows for li in r.layers})
    for li in layer_ids:
        encl = {r.n: r.errors[li] for r in rows if li in r.errors}
        if encl:
            out.append((f"error_layer_{li}", _certified(encl)))
    thm = {r.n: r.tau_theorem for r in rows if r.tau_theorem is not None}
    if thm:
        out.append((TAU_THM, bracket_sequence(thm)))  # type: ignore[arg-type]
    star: dict[str, dict[int, tuple[str, str] | None]] = {}
    for r in rows:
        for key, ends in r.tau_star.items():
            star.setdefault(key, {})[r.n] = ends
    for key, encl in star.items():
        out.append((key, bracket_sequence(encl)))
    return ClosedForms(tuple(out))


def _certified(encl: dict[int, tuple[str, str]]) -> ClosedFormRecord:
    """Point enclosures (lower = upper, e.g. an exact 0) are exact data: fit them; else bracket."""

    if not all(_finite(e) for e in encl.values()):
        return bracket_sequence(encl)  # an infinite endpoint: no exact fit
    if any(decimal_is_huge(t) for e in encl.values() for t in e):
        return bracket_sequence(encl)  # says why no bracket
    if all(Decimal(lo) == Decimal(hi) for lo, hi in encl.values()):
        vals = {n: Fraction(Decimal(lo)) for n, (lo, _) in encl.items()}
        if len(vals) >= 1 + MIN_VERIFY or all(v == 0 for v in vals.values()):
            rec = fit_record(vals)
            if rec.found:
                return rec
    return bracket_sequence(encl)


# ---------------------------------------------------------------------------------------------
# terminal summary

_NAMES = {
    GAMMA: "γ(n)",
    X_MAX: "x_max(n)",
    MIN_MARGIN: "μ(n)",
    ACCEPTED: "accepted(n)",
    TAU_THM: "τ_thm(n)",
    TAU_STAR: "τ*(n)",
    TAU_STAR_DEC: "τ*_dec(n)",
    TAU_STAR_INV: "τ*_inv(n)",
}


def _runs(ns: Sequence[int]) -> str:
    ns = sorted(ns)
    if len(ns) >= 3 and ns[-1] - ns[0] + 1 == len(ns) == len(set(ns)):
        return f"{ns[0]}..{ns[-1]}"
    return ", ".join(map(str, ns))


def trend_words(rests_on: Sequence[tuple[int, str, str]]) -> str:
    """ ", rising at every step" / ", falling at every step" when the certified enclosures
    say so for every pair of consecutive lengths (else nothing)."""
    pts = sorted((n, parse_decimal(lo), parse_decimal(hi)) for n, lo, hi in rests_on)
    if len(pts) < 2 or any(b[0] != a[0] + 1 for a, b in zip(pts, pts[1:], strict=False)):
        return ""
    steps = [
        b[1] > a[2] and "up" or b[2] < a[1] and "down" or "open"
        for a, b in zip(pts, pts[1:], strict=False)
    ]
    if set(steps) == {"up"}:
        return ", rising at every step"
    if set(steps) == {"down"}:
        return ", falling at every step"
    return ""


def summary_lines(cf: dict[str, Any]) -> list[str]:
    """One line per quantity for the terminal: verified closed forms, then brackets."""
    lines = []
    for key, rec in closed_form_records(cf).items():
        name = _NAMES.get(key) or (
            f"ε L{key.removeprefix('error_layer_')}" if key.startswith("error_layer_") else key
        )
        if rec.is_bracket:
            if rec.shape is None:
                continue
            span = rec.data_range
            if rec.descriptive or span is None:
                lines.append(
                    f"  {name} ∈ [{rec.c_lower}, {rec.c_upper}]·{rec.shape} "
                    f"at n = {_runs(rec.on)} (certified bracket of the data, not a proof)"
                )
            else:  # a shape at its search bound, or a loose one: it would read as a law
                lo = short_decimal(parse_decimal(span[0]), False)
                hi = short_decimal(parse_decimal(span[1]), True)
                lines.append(
                    f"  {name} ∈ [{lo}, {hi}] at n = {_runs(rec.on)} (certified range of the "
                    f"data{trend_words(rec.rests_on)}; no c·n^b·e^(−an) within a factor "
                    f"{DESCRIPTIVE_SPREAD} describes it)"
                )
        elif rec.expression is not None:
            extra = f", from n = {rec.valid_from}" if rec.valid_from else ""
            lines.append(
                f"  {name} = {rec.expression}   (fitted n = {_runs(rec.fitted_on)}, "
                f"verified exactly n = {_runs(rec.verified_on)}{extra})"
            )
        else:
            reason = None if rec.reason is ABSENT else rec.reason
            lines.append(f"  {name}: {reason} (n = {_runs(rec.lengths)})")
    if lines:
        lines.insert(0, "closed forms (conjectured on the smallest n, verified on the rest):")
    return lines
