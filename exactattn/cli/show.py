"""Terminal display of one evaluation (``exactattn eval``)."""

from __future__ import annotations

import shlex
from fractions import Fraction
from typing import Any

from flint import arb
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import (
    arb_exact_value,
    arb_lower_str,
    arb_upper_str,
    decimal_up,
    frac_str,
    short_decimal,
)
from exactattn.model import AttentionLayer
from exactattn.results.views import first_failures
from exactattn.run.evaluate import Evaluation, evaluate


def ball(x: arb, digits: int = 6) -> str:
    """A certified value, short: the enclosure when it is wide, else the common digits."""
    exact = arb_exact_value(x)
    if exact is not None:
        return frac_str(exact) if exact.denominator < 10**6 else decimal_up(exact, digits)
    a, b = arb_lower_str(x, digits), arb_upper_str(x, digits)
    return a if a == b else f"[{a}, {b}]"


def _width(cell: str, markup: bool = True) -> int:
    """Display width of a cell (its widest line; markup not counted)."""
    text = Text.from_markup(cell) if markup else Text(cell)
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def print_split_table(
    console: Console,
    lead: list[tuple[str, list[str]]],
    columns: list[tuple[str, list[str]]],
) -> None:
    """A table of ``lead`` columns (positions, tokens) and value ``columns``, split into
    several tables of consecutive value columns when it is wider than the console, each
    repeating the lead columns: no cell is cut (at 80 columns a cut cell read as another
    number). Headers and cells are rich markup (user text escaped by the caller)."""
    limit = max(console.width, 40)

    def need(col: tuple[str, list[str]]) -> int:
        name, cells = col
        return max([_width(name), *(_width(c) for c in cells)]) + 3  # padding and rule

    base = 1 + sum(need(c) for c in lead)
    groups: list[list[tuple[str, list[str]]]] = [[]]
    used = base
    for col in columns:
        w = need(col)
        if groups[-1] and used + w > limit:
            groups.append([])
            used = base
        groups[-1].append(col)
        used += w
    rows = len(lead[0][1]) if lead else len(columns[0][1]) if columns else 0
    for g, group in enumerate(groups):
        t = Table()
        for name, _ in lead:
            t.add_column(name, no_wrap=True)
        for name, _ in group:
            t.add_column(name, justify="right", no_wrap=True, overflow="fold")
        for r in range(rows):
            t.add_row(*(cells[r] for _, cells in lead), *(cells[r] for _, cells in group))
        if len(groups) > 1:
            console.print(
                f"[dim](columns, part {g + 1} of {len(groups)}: split to fit {console.width} "
                "characters)[/]",
                highlight=False,
            )
        console.print(t)


def _line(console: Console, text: str) -> None:
    """A heading line printed as it is (rich markup); a number in it is never broken."""
    console.print(text, highlight=False, soft_wrap=True)


def show_evaluation(ev: Evaluation, console: Console) -> None:
    m = ev.model
    names = list(m.coordinates) if m.coordinates else [f"x{k}" for k in range(m.d)]
    _line(
        console,
        f"[bold]{escape(m.name)}[/] on {escape(' '.join(ev.word))}  "
        f"(n = {len(ev.word)}, precision {ev.prec} bits)",
    )
    for li, act in enumerate(ev.hard):
        _line(
            console,
            "embedding x^(0)" if li == 0 else f"after layer {li - 1} ({m.layers[li - 1].kind})",
        )
        if li:
            lo, hi = ev.errors[li - 1]
            _line(console, f"  ‖soft − hard‖∞ ∈ [{arb_lower_str(lo, 6)}, {arb_upper_str(hi, 6)}]")
        columns = []
        for k, nm in enumerate(names):
            cells = []
            for p, row in enumerate(act):
                s = ev.soft[li][p][k]
                hv = frac_str(row[k])
                sv = ball(s)
                cells.append(hv if sv == hv else f"{hv}\n[dim]{escape(sv)}[/]")
            columns.append((escape(nm), cells))
        lead = [
            ("pos", [str(m.position_index(p)) for p in range(len(act))]),
            ("token", [escape(ev.tokens[p]) for p in range(len(act))]),
        ]
        print_split_table(console, lead, columns)
        if li < len(m.layers) and isinstance(m.layers[li], AttentionLayer):
            _show_attention(ev, li, console)
    _show_output(ev, console)


def _show_attention(ev: Evaluation, li: int, console: Console) -> None:
    hard = ev.hard_attention[li]
    soft = ev.soft_attention[li] if ev.soft_attention else None
    if hard is None:
        return
    for hi, rows in enumerate(hard):
        tau = ev.tau[li][hi] if ev.tau[li] else None
        name = ev.model.layers[li].heads[hi].name  # e.g. the RASP program line it implements
        _line(console, f"layer {li} head {hi} attention (rows: queries; hard, soft below)")
        if tau is not None:
            _line(console, f"  τ = {ball(tau)}")
        if name:
            _line(console, f"  {escape(name)}")
        columns = []
        for j, tok in enumerate(ev.tokens):
            cells = []
            for i, row in enumerate(rows):
                w = row[j]
                s = soft[hi][i][j] if soft and soft[hi] else None
                cell = frac_str(w) if w else "·"
                if s is not None:
                    cell += f"\n[dim]{escape(ball(s, 4))}[/]"
                cells.append(cell)
            columns.append((escape(f"{ev.model.position_index(j)}:{tok}"), cells))
        lead = [("q\\k", [str(ev.model.position_index(i)) for i in range(len(rows))])]
        print_split_table(console, lead, columns)


def _plain(x: Any) -> Any:
    """Rationals as 1/2, lists as lists: what a reader expects, not Python reprs."""
    if isinstance(x, Fraction):
        return frac_str(x)
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(str(_plain(v)) for v in x) + "]"
    return x


def _show_output(ev: Evaluation, console: Console) -> None:
    v = ev.output_soft
    out: Any = ev.output_hard
    if isinstance(out, dict):
        val: Fraction = out["value"]
        console.print(
            f"output (accept): hard y = {frac_str(val)} → "
            f"{'accept' if out['accept'] else 'reject'}; soft → "
            + (("accept" if v.value else "reject") if v.decided else "undecided"),
            highlight=False,
        )
    else:  # labels are the user's strings: no markup from here on
        console.print(
            f"output ({ev.model.output.kind}): hard {_plain(out)}", highlight=False, markup=False
        )
        if v.value is not None:
            console.print(
                f"   soft {_plain(v.value)}{'' if v.decided else ' (undecided)'}",
                highlight=False,
                markup=False,
            )
        elif v.within_tol is not None:
            console.print(
                f"   soft within tolerance of hard: {v.within_tol}", highlight=False, markup=False
            )


# ---------------------------------------------------------------------------------------------
# the first failing inputs of a check, on screen (issue 39)

SHOWN_FAILURES = 3
"""Failing inputs shown after a check (every length's first ones are in the --json file)."""
PART = Fraction(1, 2)
"""Soft and hard "part" at the first layer whose certified error is at least this (on the
absolute scale of the ε ≤ 1 invariant: half a unit, where a 0/1 or integer feature read from
the soft activations can change); below it everywhere, at the layer of the largest error."""


def word_text(model: Any, word: tuple[str, ...]) -> str:
    """An input as a user types it for ``eval``: letters run together when every symbol of the
    alphabet is one character, else separated by spaces."""
    if all(len(t) == 1 for t in model.alphabet) and " " not in word:
        return "".join(word)
    return " ".join(word)


def decision_text(x: Any) -> str:
    """A decision in words: accept/reject, labels, value rows (None: a tie or undefined)."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "accept" if x else "reject"
    if isinstance(x, (list, tuple)):
        return " ".join(decision_text(v) if not isinstance(v, str) else v for v in x)
    if isinstance(x, Fraction):
        return frac_str(x)
    return str(x)


def _errors_text(errors: list[tuple[Fraction, Fraction]]) -> str:
    ups = [short_decimal(hi, True) if hi else "0" for _, hi in errors]
    if len(ups) > 10:
        ups = [*ups[:4], "…", *ups[-4:]]
    return " · ".join(ups)


def parting_layer(errors: list[tuple[Fraction, Fraction]]) -> int | None:
    """Where soft and hard part on one input (see :data:`PART`); None: no error anywhere."""
    for li, (lo, _) in enumerate(errors):
        if lo >= PART:
            return li
    if not errors or max(hi for _, hi in errors) == 0:
        return None
    top = max(hi for _, hi in errors)
    return next(li for li, (_, hi) in enumerate(errors) if hi == top)


def failure_lines(
    model: Any, view: Any, tau: str | None, model_path: str, theorem: bool = False
) -> list[str]:
    """The first failing inputs of a check result, each evaluated once more (``evaluate``)
    to name its expected, hard and soft outputs and the layer where soft and hard part; then
    the ``exactattn eval`` command for the first of them. Plain text (user strings).

    ``theorem``: the check ran at τ_thm(n), which ``eval`` does not take; the inputs are then
    named from the result alone."""
    seen: set[tuple[int, tuple[str, ...]]] = set()
    picked = []
    for f in first_failures(view):
        if (f.n, f.input) in seen:
            continue
        seen.add((f.n, f.input))
        picked.append(f)
        if len(picked) == SHOWN_FAILURES:
            break
    if not picked:
        return []
    lines = ["first failing inputs (each length's first ones are in the --json file):"]
    for f in picked:
        word = word_text(model, f.input)
        head = f"  n = {f.n}  {word!r}: "
        try:
            ev = None if theorem else evaluate(model, f.input, tau=tau)
        except (ExactAttnError, ValueError):  # shown from the record alone
            ev = None
        if ev is None:
            what = f"expected {decision_text(f.expected)}" if f.is_reference else f.kind
            lines.append(head + what)
            continue
        parts = []
        expected = ev.expected if ev.expected is not None else f.expected
        if expected is not None:
            parts.append(f"expected {decision_text(expected)}")
        parts.append(f"hard {decision_text(ev.decision)}")
        soft = ev.soft_decision
        if model.output.kind == "value":
            parts.append(
                "soft "
                + {True: "within tolerance", False: "off by more than the tolerance"}.get(
                    ev.agree, "undecided"
                )
            )
        else:
            parts.append(f"soft {decision_text(soft)}" if soft is not None else "soft undecided")
        lines.append(head + " · ".join(parts))
        errs = ev.layer_errors
        if f.is_invariant and f.layer is not None:
            lines.append(f"      ε ≤ 1 fails after layer {f.layer}, which feeds another layer")
        if ev.agree is True and f.is_reference:
            lines.append(
                "      soft and hard agree: the hard meaning itself differs from the reference"
            )
        else:
            li = parting_layer(errs)
            if li is not None:
                lines.append(
                    f"      soft and hard part at layer {li} ({model.layers[li].kind}); "
                    f"‖soft − hard‖∞ after each layer ≤ {_errors_text(errs)}"
                )
    first = picked[0]
    cmd = ["exactattn", "eval", model_path, word_text(model, first.input)]
    if tau is not None:
        cmd += ["--tau", tau]
    lines.append(
        "look at one closely: "
        + shlex.join(cmd)
        + (
            " --tau EXPR (the check ran at τ_thm(n): its value is in the --json file)"
            if theorem
            else ""
        )
    )
    return lines
