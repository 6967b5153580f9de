"""Terminal display of one evaluation (``exactattn eval``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from flint import arb
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from exactattn.core.numbers import (
    arb_exact_value,
    arb_lower_str,
    arb_upper_str,
    decimal_up,
    frac_str,
)
from exactattn.model import AttentionLayer
from exactattn.run.evaluate import Evaluation


def ball(x: arb, digits: int = 6) -> str:
    """A certified value, short: the enclosure when it is wide, else the common digits."""
    exact = arb_exact_value(x)
    if exact is not None:
        return frac_str(exact) if exact.denominator < 10**6 else decimal_up(exact, digits)
    a, b = arb_lower_str(x, digits), arb_upper_str(x, digits)
    return a if a == b else f"[{a}, {b}]"


def show_evaluation(ev: Evaluation, console: Console) -> None:
    m = ev.model
    names = list(m.coordinates) if m.coordinates else [f"x{k}" for k in range(m.d)]
    console.print(
        f"[bold]{escape(m.name)}[/] on {escape(' '.join(ev.word))}  "
        f"(n = {len(ev.word)}, precision {ev.prec} bits)",
        highlight=False,
    )
    for li, act in enumerate(ev.hard):
        title = "embedding x^(0)" if li == 0 else f"after layer {li - 1} ({m.layers[li - 1].kind})"
        if li:
            lo, hi = ev.errors[li - 1]
            title += f"   ‖soft − hard‖∞ ∈ [{arb_lower_str(lo, 6)}, {arb_upper_str(hi, 6)}]"
        t = Table(title=title, title_justify="left")
        t.add_column("pos")
        t.add_column("token")
        for nm in names:
            t.add_column(escape(nm), justify="right")
        for p, row in enumerate(act):
            cells = []
            for k, v in enumerate(row):
                s = ev.soft[li][p][k]
                hv = frac_str(v)
                sv = ball(s)
                cells.append(hv if sv == hv else f"{hv}\n[dim]{escape(sv)}[/]")
            t.add_row(str(m.position_index(p)), escape(ev.tokens[p]), *cells)
        console.print(t)
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
        t = Table(
            title=f"layer {li} head {hi} attention (rows: queries; hard, soft below)"
            + (f"  τ = {ball(tau)}" if tau is not None else "")
            + (f"\n{escape(name)}" if name else ""),
            title_justify="left",
        )
        t.add_column("q\\k")
        for j, tok in enumerate(ev.tokens):
            t.add_column(escape(f"{ev.model.position_index(j)}:{tok}"), justify="right")
        for i, row in enumerate(rows):
            cells = []
            for j, w in enumerate(row):
                s = soft[hi][i][j] if soft and soft[hi] else None
                cell = frac_str(w) if w else "·"
                if s is not None:
                    cell += f"\n[dim]{escape(ball(s, 4))}[/]"
                cells.append(cell)
            t.add_row(str(ev.model.position_index(i)), *cells)
        console.print(t)


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
