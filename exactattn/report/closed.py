"""The closed forms of a result (``closed_forms``) in reports: a table per format.

Expressions are typeset from the record's structured ``form`` (exact numbers, rebuilt as a sympy
expression and printed by sympy's LaTeX printer); the ``expression`` text of a result file is
never parsed. A record without a usable ``form`` is shown verbatim.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import exactattn.report.fmt as fmt
import exactattn.report.table as table
from exactattn.bounds.closedforms import evaluate_form, form_expr, trend_words
from exactattn.core.numbers import parse_decimal, short_decimal
from exactattn.report.escape import plain, text
from exactattn.report.table import MISSING, Alt, Cell, Code, Column, Lit, Table, Text, rich
from exactattn.results.closedforms import DESCRIPTIVE_SPREAD
from exactattn.results.sequences import (
    ACCEPTED,
    GAMMA,
    MIN_MARGIN,
    TAU_STAR,
    TAU_STAR_DEC,
    TAU_STAR_INV,
    TAU_THM,
    X_MAX,
    ClosedForm,
    closed_form_records,
)
from exactattn.results.views import ABSENT

_LABELS = {
    GAMMA: ("γ(n)", r"\gamma(n)"),
    X_MAX: ("x_max(n)", r"x_{\max}(n)"),
    MIN_MARGIN: ("min margin(n)", r"\mu(n)"),
    ACCEPTED: ("accepted(n)", r"\mathrm{accepted}(n)"),
    TAU_THM: ("τ_thm(n)", r"\tau_{\mathrm{thm}}(n)"),
    TAU_STAR: ("τ*(n)", r"\tau^*(n)"),
    TAU_STAR_DEC: ("τ*_dec(n)", r"\tau^*_{\mathrm{dec}}(n)"),
    TAU_STAR_INV: ("τ*_inv(n)", r"\tau^*_{\mathrm{inv}}(n)"),
}


_LAYER_KEY = re.compile(r"error_layer_([0-9]{1,9})")


def label(key: str) -> tuple[str, str]:
    """(Markdown, LaTeX math) name of a closed-form key, each safe for its format.

    A key is result-file text: any key but the known ones is escaped (it once reached
    ``\\text{…}`` raw, so ``\\input`` read files into the PDF; issue 27).
    """
    if key in _LABELS:
        return _LABELS[key]
    m = _LAYER_KEY.fullmatch(key)
    if m:
        i = int(m[1])
        return f"ε_{i}(n)", rf"\varepsilon_{{{i}}}(n)"
    return plain(key), r"\text{" + text(key) + "}"


def verified(record: ClosedForm | None) -> bool:
    """A record that holds a verified closed form with a usable structured form."""
    return record is not None and record.verified


def form_latex(record: ClosedForm) -> str | None:
    """sympy's LaTeX of the record's structured form (None when the form is unusable), long
    digit runs abbreviated (a 4,600-digit coefficient is wider than TeX can set)."""
    # lazy: sympy costs ≈ 0.5 s to import; only closed-form typesetting and checks need it
    import sympy

    if record.form is None:
        return None
    try:
        tex = sympy.latex(form_expr(record.form))
    except Exception:  # noqa: BLE001 - result-file data that sympy cannot typeset: shown verbatim
        return None
    return fmt.long_digits(tex, latex=True)


def values(record: ClosedForm, ns: list[int]) -> list[tuple[int, Fraction]]:
    """The closed form's exact values at the given n (where it is defined)."""
    out = []
    if record.form is None:
        return []
    for n in ns:
        try:
            v = evaluate_form(record.form, n)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return []
        if v is not None:
            out.append((n, v))
    return out


def _remark(record: ClosedForm) -> str:
    parts = []
    if record.valid_from is not None:
        parts.append(f"from n = {record.valid_from} on (not n = {fmt.runs(record.exceptions)})")
    if record.undefined_at:
        parts.append(f"no value (∞) at n = {fmt.runs(record.undefined_at)}")
    return "; ".join(parts)


def _raw_name(key: str) -> str:
    """The unescaped display name (for a code span, which escapes it itself)."""
    if key in _LABELS or _LAYER_KEY.fullmatch(key):
        return label(key)[0]
    return key


def _exponent_text(a: str, b: str) -> str:
    parts = []
    if Fraction(b) != 0:
        parts.append(f"n^{b}" if Fraction(b).denominator == 1 and Fraction(b) > 0 else f"n^({b})")
    if Fraction(a) != 0:
        parts.append(f"e^(−{a}·n)" if Fraction(a).denominator == 1 else f"e^(−({a})·n)")
    return "·".join(parts)


def _shape_tex(a: str, b: str) -> str:
    parts = []
    if Fraction(b) != 0:
        parts.append(f"n^{{{_frac_tex(b)}}}")
    if Fraction(a) != 0:
        parts.append(f"e^{{-{_frac_tex(a)}\\,n}}")
    return r"\,".join(parts)


_SCI = re.compile(r"(-?[0-9]+(?:\.[0-9]*)?)(?:[eE]([+-]?[0-9]{1,6}))?")


def _sci_tex(x: str) -> str:
    """A decimal string as LaTeX, digits unchanged: ``2.4e-57`` -> ``2.4\\times10^{-57}``.

    Anything else (results/resultfile.py refuses it; this is the second line) is shown as ``?``."""
    m = _SCI.fullmatch(str(x))
    if m is None:
        return r"\text{?}"
    return m[1] + (rf"\times10^{{{int(m[2])}}}" if m[2] else "")


def _frac_tex(x: str) -> str:
    q = Fraction(x)
    if q.denominator == 1:
        return str(q.numerator)
    sign = "-" if q < 0 else ""
    return rf"{sign}{abs(q.numerator)}/{q.denominator}"


def _name(key: str) -> Cell:
    """The quantity's name: ours for known keys, else the key itself (escaped by the
    renderer; it once reached ``\\text{…}`` raw, issue 27)."""
    if key in _LABELS or _LAYER_KEY.fullmatch(key):
        md, tex = label(key)
        return Lit(md, "$" + tex + "$")
    return rich(Lit("", r"$\text{"), Text(key), Lit("", "}$"))


def _or_missing(s: str) -> Cell:
    return Text(s) if s else MISSING


def tables(cf: dict[str, Any]) -> tuple[Table | None, Table | None]:
    """(exact closed forms, brackets of certified quantities) as report tables."""
    exact = Table(
        [
            Column(Lit("quantity", "quantity")),
            Column(Lit("closed form", "closed form")),
            Column(Lit("fitted on n", "fitted on $n$")),
            Column(Lit("verified on n", "verified on $n$")),
            Column(Lit("remark", "remark")),
        ]
    )
    brackets = Table(
        [
            Column(Lit("quantity", "quantity")),
            Column(Lit("bracket c₁…c₂ · shape", r"$[c_1,\,c_2]\cdot$ shape")),
            Column(Lit("on n", "on $n$")),
            Column(Lit("remark", "remark")),
        ]
    )
    for key, rec in closed_form_records(cf).items():
        name = _name(key)
        if rec.is_bracket:
            if rec.shape is None:
                continue
            assert rec.a is not None and rec.b is not None
            span = None if rec.descriptive else rec.data_range
            if span is None:
                shape = _exponent_text(rec.a, rec.b)
                shape_tex = _shape_tex(rec.a, rec.b)
                c_lo, c_hi = str(rec.c_lower), str(rec.c_upper)
            else:  # the shape would read as a growth law: the range of the data instead
                shape, shape_tex = "", ""
                c_lo = short_decimal(parse_decimal(span[0]), False)
                c_hi = short_decimal(parse_decimal(span[1]), True)
            lo, hi = _sci_tex(c_lo), _sci_tex(c_hi)
            tex = rf"$[{lo},\,{hi}]" + (rf"\cdot {shape_tex}$" if shape_tex else "$")
            md = rich(
                Lit("[", ""),
                Alt(Text(c_lo), Lit("", "")),
                Lit(", ", ""),
                Alt(Text(c_hi), Lit("", "")),
                Lit("]" + (f" · {shape}" if shape else ""), tex),
            )
            notes = []
            if span is not None:
                notes.append(
                    f"range of the data{trend_words(rec.rests_on)}; no c·n^b·e^(−an) within "
                    f"a factor {DESCRIPTIVE_SPREAD} describes it"
                )
            if rec.exactly_zero_at:
                notes.append(f"exactly 0 at n = {fmt.runs(rec.exactly_zero_at)}")
            if rec.open_at:
                notes.append(f"open bracket at n = {fmt.runs(rec.open_at)}")
            brackets.rows.append([name, md, Text(fmt.runs(rec.on)), _or_missing("; ".join(notes))])
        elif rec.expression is not None:
            form = form_latex(rec)
            expr = Alt(
                Code(fmt.long_digits(f"{_raw_name(key)} = {rec.expression}")),
                Lit("", "$" + form + "$")
                if form is not None
                else Code(fmt.long_digits(rec.expression)),
            )
            exact.rows.append(
                [
                    name,
                    expr,
                    Text(fmt.runs(rec.fitted_on)),
                    Text(fmt.runs(rec.verified_on)),
                    _or_missing(_remark(rec)),
                ]
            )
        else:
            exact.rows.append(
                [
                    name,
                    Text("none" if rec.reason is ABSENT else str(rec.reason)),
                    _or_missing(fmt.runs(rec.lengths)),
                    MISSING,
                    _or_missing(_remark(rec)),
                ]
            )
    return (exact if exact.rows else None), (brackets if brackets.rows else None)


EXACT_NOTE = (
    "Each closed form was conjectured from the smallest lengths listed and then "
    "reproduced *exactly* (as rationals) at every held-back length listed; it is a "
    "conjecture the data confirm, not a proof for larger n. Lengths without a value "
    "are named; where no form verified, the row says so and lists the lengths tried."
)
BRACKET_NOTE = (
    "Brackets: c₁·shape(n) ≤ value(n) ≤ c₂·shape(n) holds, certified, at every listed n "
    "(the certified enclosures of the result are its only evidence); the shape's "
    "exponents are simple rationals chosen to make the bracket narrow. A description "
    "of the checked lengths, not an asymptotic proof."
)


def markdown(cf: dict[str, Any]) -> list[str]:
    """Markdown lines: exact closed forms, then brackets of the certified quantities."""
    exact, brackets = tables(cf)
    lines: list[str] = []
    if exact is not None:
        lines += table.markdown(exact) + ["", EXACT_NOTE]
    if brackets is not None:
        lines += [""] + table.markdown(brackets) + ["", BRACKET_NOTE]
    return lines
