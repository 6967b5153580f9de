"""``exactattn build rasp PROGRAM -o MODEL.json`` (registered on the ``build`` group)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from exactattn.cli.common import _emit, err_console, refuse_overwrite
from exactattn.constructions.rasp_compile import EMBEDDINGS, compile_program
from exactattn.core.guard import bad_input
from exactattn.rasp.ast import RaspError
from exactattn.rasp.parse import parse_program


@click.command("rasp")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Model file (default: stdout)."
)
@click.option(
    "--embedding",
    type=click.Choice(EMBEDDINGS),
    default="unbounded",
    show_default=True,
    help="unbounded: every integer exact in the residual stream (i, i², n; γ ≥ 1/(n+1)); "
    "bounded: every embedding entry and activation bounded by a constant, an integer k held "
    "as k/(n+1) (γ ≥ 1/(n+1)³, the paper's regime; docs/rasp.md §10).",
)
@click.option("--quiet", "-q", is_flag=True, help="Do not list the heads and their gap bounds.")
def build_rasp_cmd(program: str, out: str | None, embedding: str, quiet: bool) -> None:
    """Compile a B-RASP / B-RASP[pos] / S-RASP program file (syntax: docs/rasp.md)."""

    refuse_overwrite([("PROGRAM", program)], [("-o", out)])
    path = Path(program)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        bad_input(f"{program}: not UTF-8 text (fix: save the program as UTF-8)")
    try:
        compiled = compile_program(parse_program(text, _stem(path)), embedding)
    except RaspError as exc:
        bad_input(f"{program}: {exc}")
    if not quiet:
        for h in compiled.heads:
            bound = h.bound or "none (uniform)"
            err_console.print(
                f"layer {h.layer} head {h.head}: line {h.line} ({h.definition}), "
                f"{h.primitive}, gap ≥ {bound}",
                highlight=False,
                markup=False,
            )
        err_console.print(f"gap bound γ(n) ≥ {compiled.gap_bound}", highlight=False)
    _emit(compiled.model, out)


def _stem(path: Path) -> str:

    s = re.sub(r"[^A-Za-z0-9_]", "_", path.stem) or "program"
    return s if not s[0].isdigit() else "p" + s
