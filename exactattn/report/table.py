"""One table model for the reports, rendered to Markdown and to LaTeX.

A :class:`Table` is built once (:mod:`exactattn.report.tables` builds every table of the check
report from its records) and rendered by :func:`markdown` or :func:`latex`. Cells carry values,
not markup: exact numbers as :class:`~exactattn.report.fmt.Shown` (formatted identically in both
formats), user text as :class:`Text` or :class:`Code` (escaped here, by the renderer, with
:mod:`exactattn.report.escape`), and our own fixed markup as :class:`Lit` (one spelling per
format; never user text). A column's alignment is said once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from exactattn.report.escape import _visible, plain, text
from exactattn.report.fmt import Bracket, Frac, Interval, Num, Shown, Special

# ---------------------------------------------------------------------------------------------
# cells


@dataclass(frozen=True)
class Text:
    """Free text (possibly from the result file): Markdown-literal, LaTeX text mode."""

    s: str


@dataclass(frozen=True)
class Code:
    """A token, word or expression shown verbatim: a Markdown code span, LaTeX typewriter."""

    s: str


@dataclass(frozen=True)
class Value:
    """A formatted number (exact rational or certified enclosure); absent: an em dash."""

    shown: Shown


@dataclass(frozen=True)
class Lit:
    """Fixed markup of ours, spelled for each format (never user text)."""

    md: str
    tex: str


MISSING = Lit("—", "---")
"""An absent value."""


@dataclass(frozen=True)
class Alt:
    """Content worded differently per format (each side a cell, escaped as usual)."""

    md: Cell
    tex: Cell


@dataclass(frozen=True)
class Rich:
    """Parts set side by side in one cell."""

    parts: tuple[Cell, ...]


Cell = Text | Code | Value | Lit | Alt | Rich
Part = Cell


def rich(*parts: Part | str) -> Rich:
    """A cell of several parts; a ``str`` part is :class:`Text`."""
    return Rich(tuple(Text(p) if isinstance(p, str) else p for p in parts))


def joined(cells: Sequence[Cell], sep: Part | str, empty: Cell = MISSING) -> Cell:
    """Cells joined by ``sep`` into one (``empty`` when there are none)."""
    if not cells:
        return empty
    parts: list[Part] = []
    for k, c in enumerate(cells):
        if k:
            parts.append(Text(sep) if isinstance(sep, str) else sep)
        parts.extend(c.parts if isinstance(c, Rich) else (c,))
    return Rich(tuple(parts))


# ---------------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class Column:
    """A column: its header (a cell, or LaTeX header lines stacked in one cell) and alignment
    (``"l"``, ``"r"``, ``"c"``)."""

    head: Cell
    align: str = "l"
    stack: tuple[Cell, ...] = ()  # LaTeX: the header on several lines (Markdown: ``head``)


@dataclass(frozen=True)
class Group:
    """Columns ``first``..``first + span - 1`` (0-based) share a heading (LaTeX only: a
    ``\\multicolumn`` row with rules below; Markdown headers name each column)."""

    first: int
    span: int
    head: Cell


@dataclass
class Table:
    """Header, rows of cells, alignment; ``caption``/``label`` are set by LaTeX floats."""

    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    caption: str = ""  # LaTeX caption (already LaTeX: the builders' own text, names escaped)
    label: str = ""


# ---------------------------------------------------------------------------------------------
# Markdown


def md_value(shown: Shown) -> str:
    """A formatted number for Markdown."""
    v = shown.value
    if isinstance(v, Num):
        out = ("-" if v.neg else "") + v.mant + ("" if v.exp is None else f"e{v.exp}")
    elif isinstance(v, Bracket):
        out = f"{v.head}[{v.a},{v.b}]" + ("" if v.exp is None else f"e{v.exp}")
    elif isinstance(v, Interval):
        out = f"[{md_value(Shown(v.lo))}, {md_value(Shown(v.hi))}]"
    elif isinstance(v, Frac):
        out = ("-" if v.neg else "") + f"{v.p}/{v.q}"
    else:
        assert isinstance(v, Special)
        out = {"inf": "∞", "-inf": "-∞", "none": "—"}[v.kind]
    return out + ("†" if shown.dagger else "")


def md_code(s: str, in_table: bool = True) -> str:
    """A code span that survives backticks and table pipes in token names.

    A ``|`` is escaped only in a table cell: GFM drops the backslash there, but in a heading or
    a list item a code span shows ``\\|`` literally.
    """
    s = _visible(s)
    if in_table:
        s = s.replace("|", "\\|")
    run, longest = 0, 0
    for ch in s:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_cell(c: Cell) -> str:
    if isinstance(c, Text):
        return plain(c.s)
    if isinstance(c, Code):
        return md_code(c.s)
    if isinstance(c, Value):
        return md_value(c.shown)
    if isinstance(c, Lit):
        return c.md
    if isinstance(c, Alt):
        return md_cell(c.md)
    return "".join(md_cell(p) for p in c.parts)


def markdown(t: Table) -> list[str]:
    """GitHub-flavoured table lines."""
    lines = ["| " + " | ".join(md_cell(c.head) for c in t.columns) + " |"]
    lines.append("|" + "|".join("---:" if c.align == "r" else "---" for c in t.columns) + "|")
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in t.rows]
    return lines


# ---------------------------------------------------------------------------------------------
# LaTeX

_TT_CHARS = set("\\{}$&#^_%~")


def tt(s: str) -> str:
    """Typewriter text: ASCII specials by their slot in the typewriter font (which has them)."""
    out = []
    for ch in s:
        if ch in _TT_CHARS:
            out.append("{\\char" + str(ord(ch)) + "}")
        elif ch in "<>|":
            out.append(ch)
        else:
            out.append(text(ch))
    return r"\texttt{" + "".join(out) + "}"


def tex_math(shown: Shown) -> str:
    """A formatted number in math mode (without the dollars)."""
    v = shown.value
    if isinstance(v, Num):
        out = ("-" if v.neg else "") + _sci(v.mant, v.exp)
    elif isinstance(v, Bracket):
        body = v.head + r"{\scriptstyle[" + v.a + "," + v.b + "]}"
        out = body if v.exp is None else body + rf"\times10^{{{v.exp}}}"
    elif isinstance(v, Interval):
        out = "[" + tex_math(Shown(v.lo)) + r",\," + tex_math(Shown(v.hi)) + "]"
    elif isinstance(v, Frac):
        out = ("-" if v.neg else "") + rf"\tfrac{{{v.p}}}{{{v.q}}}"
    else:
        assert isinstance(v, Special)
        out = {"inf": r"\infty", "-inf": r"-\infty", "none": r"\text{---}"}[v.kind]
    # braced: a value ending in ×10^{e} would otherwise take a double superscript
    return "{" + out + r"}^{\dagger}" if shown.dagger else out


def _sci(mant: str, exp: int | None) -> str:
    if exp is None:
        return mant
    if mant == "1":
        return rf"10^{{{exp}}}"
    return rf"{mant}\times10^{{{exp}}}"


def tex_value(shown: Shown) -> str:
    """A number cell: the value in math mode, or an em dash when absent."""
    if isinstance(shown.value, Special) and shown.value.kind == "none":
        return "---"
    return "$" + tex_math(shown) + "$"


def tex_cell(c: Cell) -> str:
    if isinstance(c, Text):
        return text(c.s)
    if isinstance(c, Code):
        return tt(c.s)
    if isinstance(c, Value):
        return tex_value(c.shown)
    if isinstance(c, Lit):
        return c.tex
    if isinstance(c, Alt):
        return tex_cell(c.tex)
    return "".join(tex_cell(p) for p in c.parts)


def _tex_head(c: Column) -> str:
    if len(c.stack) > 1:
        return (
            r"\begin{tabular}[b]{@{}c@{}}"
            + r"\\".join(tex_cell(x) for x in c.stack)
            + (r"\end{tabular}")
        )
    return tex_cell(c.head)


def latex(t: Table) -> list[str]:
    """A booktabs table float (resized to the line width when wider)."""
    head: list[str] = []
    if t.groups:
        cells, rules, col = [], [], 0
        for g in sorted(t.groups, key=lambda g: g.first):
            cells += [""] * (g.first - col)
            cells.append(rf"\multicolumn{{{g.span}}}{{c}}{{{tex_cell(g.head)}}}")
            rules.append(rf"\cmidrule(lr){{{g.first + 1}-{g.first + g.span}}}")
            col = g.first + g.span
        cells += [""] * (len(t.columns) - col)
        head += [" & ".join(cells) + r" \\", "".join(rules)]
    head.append(" & ".join(_tex_head(c) for c in t.columns) + r" \\")
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{" + t.caption + "}",
        r"\label{" + t.label + "}",
        r"\vspace{0.5ex}",
        r"\small",
        r"\renewcommand{\arraystretch}{1.2}",
        r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
        r"\begin{tabular}{" + "".join(c.align for c in t.columns) + "}",
        r"\toprule",
    ]
    lines += head
    lines.append(r"\midrule")
    lines += [" & ".join(tex_cell(c) for c in row) + r" \\" for row in t.rows]
    lines += [r"\bottomrule", r"\end{tabular}}", r"\end{table}"]
    return lines
