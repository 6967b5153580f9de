"""The tables of the check report, built once from the result and rendered by both writers.

Each function returns a :class:`~exactattn.report.table.Table` (no captions: those are prose
of each format); :mod:`exactattn.report.markdown` and :mod:`exactattn.report.latex` render it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import exactattn.report.fmt as fmt
from exactattn.report.data import ReportData
from exactattn.report.fmt import Shown, Special
from exactattn.report.table import (
    MISSING,
    Alt,
    Cell,
    Code,
    Column,
    Group,
    Lit,
    Table,
    Text,
    Value,
    joined,
    rich,
)
from exactattn.results.views import ABSENT, LengthView


def _text(v: Any) -> Cell:
    """A count or word as written; an absent value as an em dash."""
    return MISSING if v is ABSENT else Text(str(v))


def _col(md: str, tex: str, align: str = "l", *stack: str) -> Column:
    return Column(Lit(md, tex), align, tuple(Lit("", s) for s in stack))


def lengths(data: ReportData) -> Table:
    """Measured quantities per length."""
    cols = [
        _col("n", "$n$", "r"),
        _col("inputs", "inputs", "r"),
        _col("γ(n)", r"$\gamma(n)$"),
        _col("x_max(n)", r"$x_{\max}(n)$"),
    ]
    if data.layers:
        names = ", ".join(str(ly.index) for ly in data.layers)
        s = "s" if len(data.layers) > 1 else ""
        cols.append(
            _col(
                f"max\\|x\\| after layer{s} {names}",
                "",
                "l",
                r"$\max|x|$ after",
                f"layer{s} {names}",
            )
        )
    cols += [
        _col("τ(n)", r"$\tau(n)$"),
        _col("disagreements", "", "r", "dis-", "agreements"),
        _col("min margin", "", "l", "min", "margin"),
    ]
    if data.has_reference:
        cols.append(_col("reference mismatches hard / soft", "", "c", "reference", "hard / soft"))
    if data.has_undecided:
        cols.append(_col("undecided", "", "r", "un-", "decided"))
    t = Table(cols)
    for row in data.rows:
        gamma = Shown(Special("inf")) if row.gamma is None else fmt.rational(row.gamma)
        cells: list[Cell] = [
            Text(str(row.n)),
            _text(row.inputs),
            Value(gamma),
            Value(fmt.rational(row.x_max)),
        ]
        if data.layers:
            maxes: list[Cell] = []
            for layer in data.layers:
                entry = row.layer(layer.index)
                act = None if entry is None else entry.activation_max
                maxes.append(Value(fmt.rational(act)))
            cells.append(joined(maxes, ", "))
        cells += [
            Value(fmt.certified(row.tau)),
            _text(row.disagreements),
            Value(fmt.rational(row.min_margin)),
        ]
        if data.has_reference:
            cells.append(_reference(row))
        if data.has_undecided:
            cells.append(_text(row.undecided))
        t.rows.append(cells)
    return t


def _reference(row: LengthView) -> Cell:
    ref = row.reference
    if ref is None:
        return MISSING
    parts: list[Cell] = [_text(ref.hard), Text(" / "), _text(ref.soft)]
    if ref.undefined:
        parts.append(Text(f" ({ref.undefined} undefined)"))
    return rich(*parts)


def errors(data: ReportData) -> Table:
    """Certified per-layer errors (and the proved bounds, when computed)."""
    b = data.has_bounds
    cols = [_col("n", "$n$", "r")]
    groups = []
    for layer in data.layers:
        i = layer.index
        if b:
            groups.append(
                Group(
                    len(cols),
                    3,
                    rich(Lit("", f"layer {i} ("), Alt(Lit("", ""), Text(layer.kind)), Lit("", ")")),
                )
            )
            cols += [
                _col(f"ε_{i}(n)", rf"$\varepsilon_{{{i}}}(n)$"),
                _col(f"bound_{i}(n)", "bound"),
                _col(f"ε_{i}/bound", rf"$\varepsilon_{{{i}}}/$bound"),
            ]
        else:
            head = rich(
                Lit(f"ε_{i}(n)", rf"$\varepsilon_{{{i}}}(n)$ ("),
                Alt(Lit("", ""), Text(layer.kind)),
                Lit("", ")"),
            )
            cols.append(Column(head))
    cols.append(_col("ε ≤ 1", r"$\varepsilon\le1$"))
    if b:
        cols.append(_col("violations", "violations", "r"))
    t = Table(cols, groups=groups)
    for row in data.rows:
        cells: list[Cell] = [Text(str(row.n))]
        for layer in data.layers:
            entry = row.layer(layer.index)
            cells.append(Value(fmt.certified(None if entry is None else entry.error)))
            if b:
                bound = data.bound_entry(row, layer.index)
                cells.append(Value(fmt.upper(None if bound is None else bound.bound_text)))
                cells.append(Value(fmt.upper(None if bound is None else bound.ratio_text)))
        cells.append(_text(row.invariant))
        if b:
            rec = row.bounds
            v = None if rec is None else rec.declared_violations
            cells.append(MISSING if v is None else Text(str(v)))
        t.rows.append(cells)
    return t


def temperatures(data: ReportData) -> Table:
    """τ(n) used, τ_thm(n), τ*_dec(n), τ*_inv(n)."""
    t = Table(
        [
            _col("n", "$n$", "r"),
            _col("τ(n) used", r"$\tau(n)$ used"),
            _col("τ_thm(n)", r"$\tau_{\mathrm{thm}}(n)$"),
            _col("τ*_dec(n)", r"$\tau^*_{\mathrm{dec}}(n)$"),
            _col("τ*_inv(n)", r"$\tau^*_{\mathrm{inv}}(n)$"),
        ]
    )
    for row in data.rows:
        dec, inv = data.tau_star_of(row)
        t.rows.append(
            [
                Text(str(row.n)),
                Value(fmt.certified(row.tau)),
                Value(fmt.certified(data.tau_theorem_of(row))),
                Value(fmt.search_bracket(dec)),
                Value(fmt.search_bracket(inv)),
            ]
        )
    return t


def _word(tokens: Sequence[str] | None) -> Cell:
    return MISSING if tokens is None else Code(fmt.word(tokens))


def witnesses(data: ReportData) -> Table:
    """Where γ(n) and each ε_ℓ(n) are attained, and the first disagreement."""
    t = Table(
        [
            _col("n", "$n$", "r"),
            _col("γ(n) attained at", r"$\gamma(n)$ attained at"),
            _col(
                "ε_ℓ(n) attained at",
                r"$\varepsilon_\ell(n)$ attained at ($\ell$: input at position)",
            ),
            _col("first disagreement", "first disagreement"),
        ]
    )
    for row in data.rows:
        gw = row.gamma_witness
        if gw is None:
            gamma: Cell = MISSING
        else:
            gamma = rich(
                _word(gw.input),
                f": layer {gw.layer}, head {gw.head}, query {gw.query}, "
                f"key {gw.top_key} (top) vs {gw.other_key}",
            )
        errs: list[Cell] = []
        for layer in data.layers:
            entry = row.layer(layer.index)
            ew = None if entry is None else entry.error_witness
            if ew is not None:
                i = layer.index
                errs.append(
                    rich(
                        Alt(Text(f"L{i}: "), Text(f"{i}: ")),
                        _word(ew.input),
                        Alt(Text(" @ "), Text(" at ")),
                        str(ew.position),
                    )
                )
        t.rows.append([Text(str(row.n)), gamma, joined(errs, "; "), _word(row.first_disagreement)])
    return t


def compiler_gap(data: ReportData) -> Table | None:
    """Compiled RASP models: measured γ(n) beside the compiler's bound (issue 22)."""
    rows = data.compiler_gap_rows()
    if not rows:
        return None
    t = Table(
        [
            _col("n", "$n$", "r"),
            _col("measured γ(n)", r"measured $\gamma(n)$"),
            _col("bound", "bound"),
            _col("status", "status"),
        ]
    )
    for n, g in rows:
        status: Cell = (
            Text("holds")
            if g.holds
            else rich(Lit("**violated**", r"\textbf{violated}"), f" ({len(g.violations)})")
        )
        t.rows.append([Text(str(n)), Code(g.measured or "∞"), Code(g.bound or "∞"), status])
    return t
