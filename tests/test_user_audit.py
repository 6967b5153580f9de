"""Findings of a user's audit (README and docs followed literally): each test fails without
its fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from markdown_it import MarkdownIt

from exactattn.cli import main
from exactattn.report import render

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "result_small.json"


def _code_spans(html: str) -> list[str]:
    return [
        c.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        for c in re.findall(r"<code>(.*?)</code>", html, re.S)
    ]


def test_markdown_pipe_in_names_is_shown_as_written(tmp_path: Path) -> None:
    """A '|' in a model or token name is escaped in table cells only: in the heading and the
    summary list a code span would show the backslash ("a\\|b")."""
    r = json.loads(DATA.read_text())
    r["model"] = "a|b"
    r["model_info"]["alphabet"] = ["|", "x"]
    md = render(r, tmp_path / "r.md")[tmp_path / "r.md"]
    html = MarkdownIt("commonmark").enable("table").render(md)
    heading = re.search(r"<h1>(.*?)</h1>", html).group(1)
    assert _code_spans(heading) == ["a|b"]
    summary = re.search(r"<ul>(.*?)</ul>", html, re.S).group(1)
    spans = _code_spans(summary)
    assert spans[:3] == ["a|b", "|", "x"], spans
    assert not any("\\" in s for s in spans), spans


def test_eval_piped_is_not_cut_to_80_columns() -> None:
    """`exactattn eval` into a pipe or file shows every coordinate name and value, like the
    check table (a width-80 console crushed Dyck-2's 19 coordinates into '…')."""
    out = CliRunner().invoke(main, ["eval", str(ROOT / "models" / "dyck2.json"), "([])"])
    assert out.exit_code == 0, out.output
    for name in ("depth_ratio", "any_bad", "match2", "inv_pos"):
        assert name in out.output
    assert "…" not in out.output
    assert "output (accept): hard y = 1 → accept; soft → accept" in out.output
