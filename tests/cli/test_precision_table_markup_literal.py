"""The precision table prints the user's strings as typed: tokens and ``--tau`` text may hold
rich markup (``[bold]``), which must be shown, not interpreted."""

from __future__ import annotations

import dataclasses
import json

from paths import TESTS
from rich.console import Console

from exactattn.cli import extra
from exactattn.results.precision import Diagnosis, FirstFlip, PrecisionResult

GOLDEN = TESTS / "golden" / "precision" / "dyck1_n3_float64.json"


def test_tokens_and_tau_with_markup_are_printed_verbatim(monkeypatch) -> None:
    res = PrecisionResult.from_json(json.loads(GOLDEN.read_text("utf-8")))
    run = res.runs[0]
    length = run.lengths[0]
    ff = FirstFlip(("[bold]x[/bold]",), None, True, False, Diagnosis("rounding", 0, ""), True)
    length = dataclasses.replace(length, first_flip=ff)
    run = dataclasses.replace(run, tau="[red]1/n[/red]", lengths=(length,))
    con = Console(record=True, width=200, color_system=None)
    monkeypatch.setattr(extra, "console", con)
    monkeypatch.setattr(extra, "_precision_console", lambda: con)
    extra.print_precision([run])
    text = con.export_text()
    assert "[bold]x[/bold]" in text
    assert "[red]1/n[/red]" in text
