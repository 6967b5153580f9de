"""Markdown and LaTeX reports of ``precision`` and ``search`` files (``exactattn report``).

A file is validated first (:func:`~exactattn.results.resultfile.validate_precision`,
:func:`~exactattn.results.resultfile.validate_search`: exit 2 naming the JSON path), then read
by its record, and its tables are built with the report room's table model
(:mod:`exactattn.report.table`), which escapes every user string — model name, τ labels,
family names, input symbols, causes — for its format (issue 40: ``report`` is a surface a
hand-edited or hostile file reaches).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_text_atomic
from exactattn.report import fmt
from exactattn.report.escape import plain, text
from exactattn.report.latex import PACKAGES
from exactattn.report.table import MISSING, Cell, Code, Column, Lit, Table, Text, Value, rich
from exactattn.report.table import latex as latex_table
from exactattn.report.table import markdown as markdown_table
from exactattn.results.precision import PRECISION_FORMAT, Enclosure, PrecisionResult
from exactattn.results.resultfile import validate_precision, validate_search
from exactattn.results.search import SEARCH_FORMAT, SearchResult
from exactattn.results.views import format_of

SHOWN_SYMBOLS = 60
"""Longest input shown in full (an input can have 2^24 symbols): longer ones are cut."""


def _word(tokens: tuple[str, ...]) -> Cell:
    w = fmt.word(list(tokens[:SHOWN_SYMBOLS]))
    if len(tokens) > SHOWN_SYMBOLS:
        return rich(Code(w), f" … ({len(tokens):,} symbols)")
    return Code(w)


def _upper(x: Enclosure | None) -> Cell:
    """An error's certified upper end, rounded up (the file keeps the outward decimals)."""
    return MISSING if x is None else Value(fmt.upper(x.texts()[1]))


def _col(head: str, tex: str, align: str = "l") -> Column:
    return Column(Lit(plain(head), tex), align)


def precision_tables(res: PrecisionResult) -> list[tuple[str, Table, str]]:
    """One table per (dtype, τ) run: its heading, the table, and the line under it."""
    out = []
    for r in res.runs:
        t = Table(
            [
                _col("n", "$n$", "r"),
                _col("inputs", "inputs", "r"),
                _col("flips", "flips", "r"),
                _col("first flip", "first flip"),
                _col("cause", "cause"),
                _col("‖dtype − hard‖ ≤", r"$\|\mathrm{dtype}-\mathrm{hard}\|\le$"),
                _col("|y error| ≤", r"$|y\ \mathrm{error}|\le$"),
            ]
        )
        for e in r.lengths:
            ff = e.first_flip
            t.rows.append(
                [
                    Text(f"{e.n:,}"),
                    Text(f"{e.inputs:,}"),
                    Text(f"{e.flips:,}"),
                    MISSING if ff is None else _word(ff.input),
                    MISSING if ff is None else Text(ff.cause),
                    _upper(e.total_error),
                    _upper(e.readout_error),
                ]
            )
        fn = r.first_flip_n
        under = f"first flip at n = {fn:,}" if fn is not None else "no flip at the lengths run"
        out.append((f"{r.dtype}, τ = {r.tau}", t, under))
    return out


def _settings_line(res: PrecisionResult) -> str:
    return res.settings.describe()


def precision_markdown(res: PrecisionResult) -> str:
    lines = [f"# Precision: {plain(res.model)}", "", plain(_settings_line(res)), ""]
    stop = res.stop_text()
    if stop is not None:
        lines += [f"**Partial**: {plain(stop)}; the lengths below are those saved.", ""]
    for head, t, under in precision_tables(res):
        lines += [f"## {plain(head)}", "", *markdown_table(t), "", plain(under) + ".", ""]
    return "\n".join(lines)


def _latex_document(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            r"\documentclass[11pt]{article}",
            r"\usepackage[margin=2.2cm]{geometry}",
            r"\usepackage{" + ",".join(PACKAGES) + "}",
            r"\begin{document}",
            r"\section*{" + title + "}",
            *body,
            r"\end{document}",
            "",
        ]
    )


def precision_latex(res: PrecisionResult) -> str:
    body = [text(_settings_line(res))]
    stop = res.stop_text()
    if stop is not None:
        body.append(r"\textbf{Partial}: " + text(stop) + "; the lengths below are those saved.")
    for k, (head, t, under) in enumerate(precision_tables(res)):
        t.caption, t.label = text(head) + ": " + text(under) + ".", f"tab:precision-{k}"
        body += latex_table(t)
    return _latex_document("Precision: " + text(res.model), body)


def _search_rows(res: SearchResult) -> list[tuple[str, Cell]]:
    w = res.witness
    lo, hi = w.value.texts()
    rows: list[tuple[str, Cell]] = [
        ("objective", Text(res.objective)),
        ("n", Text(f"{res.n:,}")),
        (
            "inputs evaluated",
            Text(f"{res.evaluated:,} of a budget of {res.budget:,} (seed {res.seed})"),
        ),
        ("what it bounds", Text(res.meaning)),
        ("witness", _word(w.input)),
        ("value", Value(fmt.enclosure(fmt.parse_decimal(lo), fmt.parse_decimal(hi)))),
    ]
    if w.layer is not None:
        rows.append(("layer", Text(str(w.layer))))
    if w.position is not None:
        rows.append(("position", Text(str(w.position))))
    return rows


def _search_table(res: SearchResult) -> Table:
    t = Table([Column(Lit("", ""), "l"), Column(Lit("", ""), "l")])
    t.rows = [[Text(k), v] for k, v in _search_rows(res)]
    return t


_ENCLOSURE = (
    "The value is certified: an enclosure with outward-rounded ends (0.2689[4,5] is "
    "[0.26894, 0.26895])."
)


def search_markdown(res: SearchResult) -> str:
    lines = [f"# Search: {plain(res.model)}", "", "A search, not an enumeration.", ""]
    return "\n".join([*lines, *markdown_table(_search_table(res)), "", plain(_ENCLOSURE), ""])


def search_latex(res: SearchResult) -> str:
    t = _search_table(res)
    t.caption, t.label = "A search, not an enumeration. " + text(_ENCLOSURE), "tab:search"
    return _latex_document("Search: " + text(res.model), latex_table(t))


_WRITERS: dict[str, tuple[Callable[..., None], Any, dict[str, Callable[[Any], str]]]] = {
    PRECISION_FORMAT: (
        validate_precision,
        PrecisionResult.from_json,
        {"md": precision_markdown, "tex": precision_latex},
    ),
    SEARCH_FORMAT: (
        validate_search,
        SearchResult.from_json,
        {"md": search_markdown, "tex": search_latex},
    ),
}
FORMATS = tuple(_WRITERS)
"""The file formats this module renders."""


def write_run_report(data: dict[str, Any], out: Path, fmt_: str | None) -> Path:
    """Validate a precision or search file's dict, then write its report (``fmt_`` or the
    suffix of ``out`` chooses Markdown or LaTeX)."""
    kind = fmt_ or {".md": "md", ".markdown": "md", ".tex": "tex"}.get(out.suffix.lower())
    if kind is None:
        raise UsageError(
            f"cannot tell the report format from {out.name!r} (fix: use a .md or .tex file "
            "name, or `exactattn report --format md|tex`)"
        )
    validate, read, render = _WRITERS[format_of(data)]
    validate(data)
    write_text_atomic(out, render[kind](read(data)))
    return out
