"""Hostile ``closed_forms`` in a result file (issue 27, item 12: a security bug).

An unknown closed-form key reached ``\\text{…}`` in the LaTeX report raw, so ``pdflatex
-no-shell-escape`` read ``/etc/passwd`` into the PDF; keys, ``reason`` and ``c_lower`` reached
Markdown tables raw (HTML, ``|``); ``c_lower = \\input{…}`` and ``a = inf`` crashed the LaTeX
report (exit 4), ``a = 1e9999999`` took 49 CPU-s. Now every field is validated on read (exit 2
naming the JSON path) and every string escaped on write, keys too.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from paths import TESTS
from test_hostile_names_escaped import live_part

from exactattn.bounds.closedforms import closed_forms
from exactattn.cli import main
from exactattn.report import render, write_report
from exactattn.results.resultfile import validate_result
from exactattn.results.sequences import values_of_rows

DATA = TESTS / "data" / "result_small.json"
PAYLOADS = [
    r"}\input{SECRET}\text{",
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(1)</script>",
    "a | b | c",
    "`` ` |`",
    "\n\n# heading\n",
    r"\openin5=SECRET \read5 to\x \x",
    r"$\csname input\endcsname{SECRET}$",
    "^^5cinput{SECRET}",
    r"\catcode`\^^M=13 %",
]


def base() -> dict[str, Any]:
    r = json.loads(DATA.read_text())
    r["closed_forms"] = closed_forms(values_of_rows(r["lengths"]))
    return r


def hostile(secret: str = "/etc/passwd") -> dict[str, Any]:
    """Every payload as a closed-form key, a reason and an expression text."""
    r = base()
    cf = r["closed_forms"]
    proto_none = {"expression": None, "reason": "x", "lengths": [1, 2]}
    proto_expr = {"expression": "1/(n + 1)", "fitted_on": [1], "verified_on": [2, 3]}
    for i, p in enumerate(PAYLOADS):
        p = p.replace("SECRET", secret)
        cf[p] = {**proto_none, "reason": p}
        cf[f"{p}#{i}"] = {**proto_expr, "expression": p}
    cf[r"error_layer_1}\input{" + secret + "}"] = {**proto_none, "reason": "layer"}
    return r


def test_hostile_result_passes_validation() -> None:
    validate_result(hostile(), "r.json")  # keys and texts are fine: the writers escape them


@pytest.mark.parametrize("name", ["main", "fragment"])
def test_latex_closed_forms_have_no_live_commands(tmp_path: Path, name: str) -> None:
    texts = render(hostile(), tmp_path / "r.tex")
    tex = texts[tmp_path / ("r.tex" if name == "main" else "r-fragment.tex")]
    assert "Closed forms" in tex or "closed forms" in tex.lower()
    for line in tex.splitlines():
        live = live_part(line)
        for bad in ("\\input", "\\openin", "\\read", "\\csname", "^^", "\\catcode"):
            assert bad not in live, line


def test_markdown_closed_forms_are_literal() -> None:
    md = render(hostile(), Path("r.md"))[Path("r.md")]
    html = MarkdownIt("commonmark").enable("table").render(md)
    tags = {t.lstrip("/") for t in re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html)}
    allowed = {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "table", "thead"}
    assert tags <= allowed | {"tbody", "tr", "th", "td", "img", "br"}, tags
    assert "<script" not in html and "onerror=" not in re.sub(r"&lt;img[^<]*", "", html)
    assert "# heading" not in "".join(re.findall(r"<h\d>(.*?)</h\d>", html))
    for block in re.findall(r"<table>.*?</table>", html, re.S):
        widths = {
            len(re.findall(r"<t[hd]", row)) for row in re.findall(r"<tr>(.*?)</tr>", block, re.S)
        }
        assert len(widths) == 1, widths
    # and the payloads are shown (escaped), not dropped
    assert "onerror=alert(1)" in html and "a | b | c" in html


def _bracket(**kw: Any) -> dict[str, Any]:
    rec = {
        "kind": "bracket",
        "shape": "n^(-1)",
        "a": "0",
        "b": "-1",
        "c_lower": "0.1",
        "c_upper": "0.2",
        "on": [1, 2, 3],
    }
    return {**rec, **kw}


def _form(**kw: Any) -> dict[str, Any]:
    rec = {
        "expression": "1/(n + 1)",
        "fitted_on": [1, 2],
        "verified_on": [3],
        "form": {"kind": "rational", "num": ["1"], "den": ["1", "1"]},
    }
    rec["form"].update(kw.pop("form", {}))
    return {**rec, **kw}


BAD = {
    "c_lower TeX": ({"error_layer_1": _bracket(c_lower=r"\input{/etc/passwd}")}, "c_lower"),
    "c_upper inf": ({"error_layer_1": _bracket(c_upper="inf")}, "c_upper"),
    "a inf": ({"error_layer_1": _bracket(a="inf")}, ".a"),
    "a huge": ({"error_layer_1": _bracket(a="1e9999999")}, ".a"),
    "b over zero": ({"error_layer_1": _bracket(b="1/0")}, ".b"),
    "c huge exponent": ({"error_layer_1": _bracket(c_lower="1e99999999")}, "c_lower"),
    "bracket without on": ({"error_layer_1": _bracket(on=None)}, ".on"),
    "on not ints": ({"error_layer_1": _bracket(on=["1"])}, ".on[0]"),
    "kind unknown": ({"gamma": {"kind": "<b>"}}, ".kind"),
    "record not object": ({"gamma": "x"}, "closed_forms.gamma"),
    "closed_forms a list": ([1], "closed_forms"),
    "reason not text": ({"gamma": {"expression": None, "reason": ["x"]}}, ".reason"),
    "reason huge": ({"gamma": {"expression": None, "reason": "x" * 100_000}}, ".reason"),
    "key huge": ({"k" * 1000: {}}, "closed_forms"),
    "expression not text": ({"gamma": _form(expression=3)}, ".expression"),
    "form kind": ({"gamma": _form(form={"kind": "eval"})}, ".form.kind"),
    "form coefficient": ({"gamma": _form(form={"num": ["1e999999"]})}, ".form.num[0]"),
    "form many coefficients": ({"gamma": _form(form={"num": ["1"] * 100})}, ".form.num"),
    "form base": ({"gamma": _form(form={"base": "inf"})}, ".form.base"),
    "hypergeometric start": (
        {"gamma": _form(form={"kind": "hypergeometric", "start": -(10**9), "step": 1})},
        ".form.start",
    ),
    "hypergeometric step": (
        {"gamma": _form(form={"kind": "hypergeometric", "start": 1, "step": 0, "value": "1"})},
        ".form.step",
    ),
    "form far length": ({"gamma": _form(verified_on=[10**9])}, ".verified_on[0]"),
    "valid_from without exceptions": ({"gamma": _form(valid_from=2)}, ".exceptions"),
    "nested parity": (
        {"gamma": _form(form={"kind": "parity", "even": {"kind": "parity"}, "odd": None})},
        ".form.even.kind",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("fmt", ["md", "tex"])
def test_malformed_closed_forms_exit_2_naming_the_path(tmp_path: Path, case: str, fmt: str) -> None:
    cf, where = BAD[case]
    r = base()
    r["closed_forms"] = copy.deepcopy(cf)
    (tmp_path / "r.json").write_text(json.dumps(r))
    t0 = time.process_time()
    res = CliRunner().invoke(
        main, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / f"out.{fmt}")]
    )
    assert time.process_time() - t0 < 5
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: closed_forms"), res.output
    assert where in lines[0], lines[0]
    assert not list(tmp_path.glob("out*"))


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_pdflatex_reads_no_file_outside_the_report(tmp_path: Path) -> None:
    """Compile with ``-recorder``: every file TeX opened is the report's own or TeX's."""
    secret_dir = tmp_path / "elsewhere"
    secret_dir.mkdir()
    secret = secret_dir / "secret.tex"
    secret.write_text("SECRETCONTENT-7f3a\n")
    out = tmp_path / "rep"
    out.mkdir()
    write_report(hostile(str(secret)), out / "r.tex")
    run = subprocess.run(
        [
            "pdflatex",
            "-no-shell-escape",
            "-recorder",
            "-interaction=nonstopmode",
            "-halt-on-error",
            "r.tex",
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=180,
    )
    log = (out / "r.log").read_text(errors="replace")
    assert run.returncode == 0, log[-3000:]
    opened = {
        line.split(" ", 1)[1]
        for line in (out / "r.fls").read_text().splitlines()
        if line.startswith("INPUT ")
    }
    system = ("/usr/share/", "/etc/texmf/", "/var/lib/texmf/", "/usr/local/texlive/")
    foreign = {
        p
        for p in opened
        if not p.startswith(system)
        and "/texmf" not in p  # TeX's own trees, e.g. ~/.texlive2022/texmf-var (fonts)
        and Path(p if p.startswith("/") else out / p).resolve().parent != out.resolve()
    }
    assert foreign == set(), foreign
    assert str(secret) not in opened
    assert "SECRETCONTENT" not in log
    assert b"SECRETCONTENT" not in (out / "r.pdf").read_bytes()
    if shutil.which("pdftotext"):
        text = subprocess.run(
            ["pdftotext", str(out / "r.pdf"), "-"], capture_output=True, text=True
        ).stdout
        assert "SECRETCONTENT" not in text
        assert "secret.tex" in text  # the payload is typeset as text, visibly


SWEEP_PAYLOAD = r"<img src=x onerror=alert(1)>|\input{/etc/passwd}`"


def _leaves(x: Any, path: tuple = ()) -> Any:
    """Paths of every string leaf, and ("KEY", …) paths of every object key."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, (*path, k))
            yield ("KEY", *path, k)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _leaves(v, (*path, i))
    elif isinstance(x, str):
        yield path


def test_every_string_and_key_of_a_result_is_escaped_or_refused() -> None:
    """Each string field and each key of a full result (with closed forms and τ* scans), in
    turn replaced by a payload: validation refuses it, or both formats show it inertly."""
    from exactattn.core.errors import ExactAttnError

    r = base()
    accepted = 0
    for path in list(_leaves(r)):
        d = copy.deepcopy(r)
        is_key = path[0] == "KEY"
        path = path[1:] if is_key else path
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        if is_key:
            parent[SWEEP_PAYLOAD] = parent.pop(path[-1])
        else:
            parent[path[-1]] = SWEEP_PAYLOAD
        try:
            validate_result(d, "r.json")
            md = render(d, Path("r.md"))[Path("r.md")]
        except ExactAttnError:  # refused: exit 2 in the CLI
            continue
        accepted += 1
        html = MarkdownIt("commonmark").enable("table").render(md)
        assert '<img src="x"' not in html, path
        assert "onerror" not in re.sub(r"&lt;img[^<]*", "", html), path
        for tex in render(d, Path("r.tex")).values():
            for line in tex.splitlines():
                assert "\\input" not in live_part(line), (path, line)
    assert accepted > 100


@pytest.mark.parametrize("fmt", ["md", "tex"])
def test_form_sympy_cannot_typeset_is_shown_verbatim(tmp_path: Path, fmt: str) -> None:
    """A hypergeometric form with 150-digit coefficients (valid, but sympy's product raised
    AttributeError on it: exit 4 in LaTeX) falls back to the expression text, quickly."""
    import random

    rng = random.Random(1)

    def big() -> str:
        return f"{rng.randint(10**150, 10**151)}/{rng.randint(10**40, 10**41)}"

    r = base()
    form = {"kind": "hypergeometric", "start": 1, "step": 1, "value": big()}
    form |= {"num": [big() for _ in range(8)], "den": [big() for _ in range(8)]}
    r["closed_forms"]["gamma"] = {
        "expression": "odd_form(n)",
        "fitted_on": [1, 2],
        "verified_on": [3, 4],
        "form": form,
    }
    validate_result(r, "r.json")
    t0 = time.process_time()
    text = render(r, tmp_path / f"r.{fmt}")[tmp_path / f"r.{fmt}"]
    assert time.process_time() - t0 < 10
    assert "odd" in text and "form(n)" in text
