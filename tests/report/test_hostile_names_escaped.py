"""Hostile user strings in reports: escaped in Markdown, LaTeX (incl. % comments) and figures.

A result file is user data (it can be edited by hand), so its model name, token names,
labels and texts may hold newlines, TeX commands, Markdown links and HTML. The LaTeX report
must compile and never carry ``\\input{/etc/passwd}`` on a live line; the Markdown must render
to HTML with no link, image, raw HTML or heading the report did not make itself.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from paths import TESTS

from exactattn.report import render, write_report

DATA = TESTS / "data" / "result_small.json"
PASSWD = r"\input{/etc/passwd}"
HOSTILE = [
    "x\n" + PASSWD + "\n%",
    "a\r\n\\end{document}",
    "`|` ``` | <script>alert(1)</script>",
    "](http://evil.example) ![i](http://evil.example/i.png)",
    "$\\frac{1}{0}$ \\def\\x{} ^^5c _ & # ~ %",
    "\n\n# injected heading\n\n",
    "<img src=x onerror=alert(1)>",
]


def hostile_result() -> dict:
    r = json.loads(DATA.read_text())
    r = copy.deepcopy(r)
    r["model"] = HOSTILE[0]
    info = r["model_info"]
    info["alphabet"] = HOSTILE[1:4]
    info["bos"] = HOSTILE[4]
    info["output"] = HOSTILE[5]
    info["temperature"] = HOSTILE[6]
    info["layers"][0]["kind"] = HOSTILE[4]  # shown in tables and in the figure legend
    for row in r["lengths"]:
        for layer in row["layers"]:
            if layer["index"] == 0:
                layer["kind"] = HOSTILE[4]
    r["verdict"] = {"ok": True, "status": HOSTILE[2], "summary": HOSTILE[3] + HOSTILE[5]}
    return r


def live_part(line: str) -> str:
    """A LaTeX line up to its first unescaped %, i.e. what TeX executes."""
    m = re.search(r"(?<!\\)%", line)
    return line if m is None else line[: m.start()]


@pytest.mark.parametrize("name", ["main", "fragment"])
def test_latex_has_no_live_injection(tmp_path: Path, name: str) -> None:
    texts = render(hostile_result(), tmp_path / "r.tex")
    tex = texts[tmp_path / "r.tex"] if name == "main" else texts[tmp_path / "r-fragment.tex"]
    for line in tex.splitlines():
        live = live_part(line)
        assert "\\input" not in live, line
        assert "\\end{document}" not in live or line == "\\end{document}", line
        assert "\\def" not in live and "^^" not in live, line
        if line.startswith("%"):
            assert all(32 <= ord(c) < 127 for c in line), repr(line)
    assert tex.count("\\end{document}") == (1 if name == "main" else 0)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_latex_with_hostile_names_compiles(tmp_path: Path) -> None:
    write_report(hostile_result(), tmp_path / "r.tex")
    run = subprocess.run(
        ["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "r.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (tmp_path / "r.log").read_text(errors="replace")
    assert run.returncode == 0, log[-3000:]
    # the name is typeset (it may appear in an overfull-box line), but no file was opened
    assert "(/etc/passwd" not in log and "root:x:" not in log


def test_markdown_renders_only_what_the_report_made(tmp_path: Path) -> None:
    md = render(hostile_result(), tmp_path / "r.md")[tmp_path / "r.md"]
    html = MarkdownIt("commonmark").enable("table").render(md)
    tags = set(re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html))
    allowed = {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "table", "thead"}
    allowed |= {"tbody", "tr", "th", "td", "img", "br"}
    assert {t.lstrip("/") for t in tags} <= allowed, tags
    assert "<a " not in html and 'src="http' not in html
    # every image is one of our figures, every heading is one of ours
    assert set(re.findall(r'<img src="([^"]+)"', html)) <= {
        "r-gamma.png",
        "r-error.png",
        "r-tau.png",
    }
    assert "injected heading" not in "".join(re.findall(r"<h\d>(.*?)</h\d>", html))
    # table rows keep their column count (a '|' in a name does not add a column)
    for block in re.findall(r"<table>.*?</table>", html, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", block, re.S)
        widths = {len(re.findall(r"<t[hd]", row)) for row in rows}
        assert len(widths) == 1, widths


def test_figures_with_hostile_layer_kind(tmp_path: Path) -> None:
    written = write_report(hostile_result(), tmp_path / "r.md")
    pngs = [p for p in written if p.suffix == ".png"]
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)


def test_unsafe_tex_file_name_is_refused(tmp_path: Path) -> None:
    from exactattn.core.errors import UsageError

    with pytest.raises(UsageError, match="letters, digits"):
        render(hostile_result(), tmp_path / "a%b.tex")


def test_figure_links_with_spaces_are_encoded(tmp_path: Path) -> None:
    md = render(hostile_result(), tmp_path / "my (report).md")[tmp_path / "my (report).md"]
    assert "](my%20%28report%29-gamma.png)" in md
