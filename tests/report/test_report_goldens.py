"""Reports: golden files for both formats, a pdflatex compile, and honest number formatting.

A deliberate layout change fails the golden tests until the golden files are regenerated:

    EXACTATTN_UPDATE_GOLDEN=1 pytest tests/report/test_report_goldens.py
"""

from __future__ import annotations

import copy
import json
import os
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from latex_compile import PDFLATEX, needs_pdflatex, pdflatex
from paths import TESTS

from exactattn.core.errors import UsageError
from exactattn.report import fmt as F
from exactattn.report import render, write_report
from exactattn.report.data import load
from exactattn.report.fmt import Bracket, Interval, Num

HERE = TESTS
GOLDEN = HERE / "golden"
SMALL = HERE / "data" / "result_small.json"
UPDATE = os.environ.get("EXACTATTN_UPDATE_GOLDEN") == "1"


def small() -> dict[str, Any]:
    return json.loads(SMALL.read_text(encoding="utf-8"))


def minimal() -> dict[str, Any]:
    """The small result reduced to the fields the spec requires (no extensions)."""
    keep = {
        "n",
        "inputs",
        "gamma",
        "gamma_witness",
        "x_max",
        "tau",
        "layers",
        "invariant",
        "disagreements",
        "first_disagreement",
        "min_margin",
        "reference_mismatches",
    }
    result = small()
    return {
        "format": result["format"],
        "model": result["model"],
        "lengths": [{k: v for k, v in row.items() if k in keep} for row in result["lengths"]],
    }


def extreme() -> dict[str, Any]:
    """The small result with certified errors far below what a float can hold."""
    result = small()
    for row in result["lengths"][1:]:
        row["layers"][0]["error"] = {
            "lower": f"3.2968e-{434295 + row['n']}",
            "upper": f"3.2969e-{434295 + row['n']}",
        }
        row["bounds"]["layers"][0]["bound"] = f"1e-{434290 + row['n']}"
    return result


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("report")
    result = small()
    return {
        "md": write_report(result, out / "result_small.md"),
        "tex": write_report(result, out / "result_small.tex"),
    }


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        return
    assert path.exists(), f"missing golden file {path}; run EXACTATTN_UPDATE_GOLDEN=1 pytest"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"{name} differs from its golden file; if the layout change is intended, regenerate "
        "with EXACTATTN_UPDATE_GOLDEN=1 pytest tests/report/test_report_goldens.py"
    )


# --- golden files ---------------------------------------------------------------------------


def test_markdown_golden(written: dict[str, list[Path]]) -> None:
    files = written["md"]
    assert [p.name for p in files] == [
        "result_small.md",
        "result_small-gamma.png",
        "result_small-error.png",
        "result_small-tau.png",
    ]
    assert all(p.stat().st_size > 0 for p in files)
    check_golden("result_small.md", files[0].read_text(encoding="utf-8"))


def test_latex_golden(written: dict[str, list[Path]]) -> None:
    files = written["tex"]
    assert [p.name for p in files] == [
        "result_small.tex",
        "result_small-fragment.tex",
        "result_small-gamma.pdf",
        "result_small-error.pdf",
        "result_small-tau.pdf",
    ]
    check_golden("result_small.tex", files[0].read_text(encoding="utf-8"))
    check_golden("result_small-fragment.tex", files[1].read_text(encoding="utf-8"))


def test_render_matches_written(written: dict[str, list[Path]]) -> None:
    """render() is what write_report writes: committed reports can be checked without disk."""
    for files in written.values():
        texts = render(small(), files[0])
        for path, text in texts.items():
            assert path.read_text(encoding="utf-8") == text


def test_report_content(written: dict[str, list[Path]]) -> None:
    md = written["md"][0].read_text(encoding="utf-8")
    tex = written["tex"][1].read_text(encoding="utf-8")
    assert "| 1 | 2 | ∞ |" in md  # γ null is infinite
    assert "0.01955[5,6]" in md  # upper 0.0195550369835, lower ...834
    assert r"$0.01955{\scriptstyle[5,6]}$" in tex
    assert r"\tfrac{1}{6}" in tex and r"\toprule" in tex and r"\includegraphics" in tex
    assert "result_small-gamma.pdf" in tex and "result_small-gamma.png" in md
    assert "γ(n) ≈ 5.55·n^(-2.52)" in md
    assert r"\texttt{<s>}" in tex


# --- LaTeX compiles (helpers in tests/latex_compile.py) -----------------------------------


@needs_pdflatex
def test_latex_standalone_compiles(written: dict[str, list[Path]]) -> None:
    pdflatex(written["tex"][0])


@needs_pdflatex
def test_latex_fragment_includes_into_a_paper(
    written: dict[str, list[Path]], tmp_path: Path
) -> None:
    fragment = written["tex"][1]
    paper = tmp_path / "paper.tex"
    paper.write_text(
        "\\documentclass{article}\n\\usepackage{amsmath,booktabs,graphicx}\n"
        f"\\graphicspath{{{{{fragment.parent}/}}}}\n\\begin{{document}}\n"
        f"\\input{{{fragment.parent}/{fragment.stem}}}\n\\end{{document}}\n",
        encoding="utf-8",
    )
    pdflatex(paper)


@needs_pdflatex
def test_latex_minimal_compiles_with_special_characters(tmp_path: Path) -> None:
    result = minimal()
    result["model"] = "odd & name_with {specials} ~ ^ % $ # \\ <x>|"
    files = write_report(result, tmp_path / "minimal.tex")
    assert [p.name for p in files] == [
        "minimal.tex",
        "minimal-fragment.tex",
        "minimal-gamma.pdf",
        "minimal-error.pdf",
    ]
    pdflatex(files[0])


# --- behaviour -----------------------------------------------------------------------------


def test_format_from_suffix_and_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"\.md or \.tex"):
        write_report(small(), tmp_path / "r.html")
    with pytest.raises(UsageError, match="'md' or 'tex'"):
        write_report(small(), tmp_path / "r.md", fmt="pdf")
    with pytest.raises(UsageError, match="exactattn-result/1"):
        write_report({"format": "other"}, tmp_path / "r.md")
    bad = small()
    bad["lengths"][1]["layers"][0]["error"]["upper"] = "0.3x"
    with pytest.raises(UsageError, match=r"layers\[0\]\.error"):
        write_report(bad, tmp_path / "r.md")
    assert list(render(small(), tmp_path / "r.txt", fmt="md")) == [tmp_path / "r.txt"]


def test_minimal_result_without_extensions(tmp_path: Path) -> None:
    """Only the spec's fields: no bounds, τ* or verdict; the suffix .markdown means md."""
    files = write_report(minimal(), tmp_path / "m.markdown")
    assert [p.name for p in files] == ["m.markdown", "m-gamma.png", "m-error.png"]
    md = files[0].read_text(encoding="utf-8")
    assert "bound" not in md.split("## Witnesses")[0].split("## Certified per-layer error")[1]
    assert "no verdict in the result file" in md
    assert "undecided" not in md.split("## Measured")[1].split("\n\n")[1]


def test_extreme_exponents(tmp_path: Path) -> None:
    """Errors like 3e-434297 are printed from their digits and still plotted (exponent axis)."""
    result = extreme()
    md = render(result, tmp_path / "x.md")[tmp_path / "x.md"]
    assert "3.296[8,9]e-434297" in md and "| 1e-434292 |" in md
    files = write_report(result, tmp_path / "x.tex")
    tex = files[1].read_text(encoding="utf-8")
    assert r"3.296{\scriptstyle[8,9]}\times10^{-434297}" in tex
    assert all(p.stat().st_size > 0 for p in files)
    if PDFLATEX is not None:
        pdflatex(files[0])


def test_figures_are_deterministic(written: dict[str, list[Path]], tmp_path: Path) -> None:
    from exactattn.report.figures import gamma_figure

    data = load(small())
    for suffix in ("pdf", "png"):
        a = gamma_figure(data, tmp_path / f"a.{suffix}", data.gamma_fit()).read_bytes()
        b = gamma_figure(data, tmp_path / f"b.{suffix}", data.gamma_fit()).read_bytes()
        assert a == b
    for path in written["tex"][2:] + written["md"][1:]:
        data_bytes = path.read_bytes()
        assert b"CreationDate" not in data_bytes and b"matplotlib" not in data_bytes.lower()


def test_gamma_fit() -> None:
    fit = load(small()).gamma_fit()
    assert fit is not None and fit.ns == (2, 3, 4, 5)
    result = small()
    for row in result["lengths"]:
        row["gamma"] = f"2/{row['n']}"
    fit = load(result).gamma_fit()
    assert fit is not None and abs(fit.k - 1) < 1e-12 and abs(10**fit.log10_c - 2) < 1e-12
    result["lengths"] = result["lengths"][:2]
    result["lengths"][1]["gamma"] = None
    assert load(result).gamma_fit() is None


# --- number formatting ---------------------------------------------------------------------


def md(lo: str, hi: str, digits: int = F.DIGITS) -> str:
    from exactattn.report.markdown import value

    return value(F.enclosure(F.parse_decimal(lo), F.parse_decimal(hi), digits))


@pytest.mark.parametrize(
    ("lo", "hi", "shown"),
    [
        ("0.268941421369995", "0.268941421369996", "0.2689[4,5]"),
        ("0.268941421369995", "0.268941421369995", "0.2689[4,5]"),  # not representable in 5
        ("0.125", "0.125", "0.125"),
        ("0", "0", "0"),
        ("1", "1", "1"),
        ("3.2968e-434295", "3.2969e-434295", "3.296[8,9]e-434295"),
        ("0", "3.2968e-434295", "[0, 3.3e-434295]"),
        ("0.09999", "0.10001", "[0.09999, 0.10001]"),
        ("0.2689", "0.2695", "0.26[89,95]"),
        ("3.2e-5", "3.5e-5", "[3.2e-5, 3.5e-5]"),
        ("12.3", "14.1", "[12.3, 14.1]"),
        ("123456.7", "123456.8", "1.234[5,6]e5"),
        ("-0.26", "-0.25", "[-0.26, -0.25]"),
        ("0", "inf", "[0, ∞]"),
        ("0.000335462627902478", "0.000335462627902546", "3.354[6,7]e-4"),
    ],
)
def test_enclosure_notation(lo: str, hi: str, shown: str) -> None:
    assert md(lo, hi) == shown


def test_upper_and_rational() -> None:
    from exactattn.report.markdown import value

    assert value(F.upper("0.0195550369835")) == "0.01956"
    assert value(F.upper("0.99999")) == "1"
    assert value(F.upper("1.2e-700")) == "1.2e-700"
    assert value(F.upper(None)) == "—"
    assert value(F.rational("1/6")) == "1/6"
    assert value(F.rational("-4/2")) == "-2"
    assert value(F.rational("0.125")) == "1/8"
    long = F.rational("123456789/987654321")
    assert long.dagger and value(long) == "0.12[49,50]†"  # 0.12499999886...


def _exact_of_shown(v: Num) -> Decimal:
    text = ("-" if v.neg else "") + v.mant + ("" if v.exp is None else f"e{v.exp}")
    return Decimal(text)


def _bounds(v: Num | Bracket | Interval) -> tuple[Decimal, Decimal, int]:
    """The interval a shown value denotes, and its significant digits."""
    if isinstance(v, Num):
        x = _exact_of_shown(v)
        return x, x, len(v.mant.replace(".", "").lstrip("0"))
    if isinstance(v, Bracket):
        a = Num(False, v.head + v.a, v.exp)
        b = Num(False, v.head + v.b, v.exp)
        return (
            _exact_of_shown(a),
            _exact_of_shown(b),
            len((v.head + v.a).replace(".", "").lstrip("0")),
        )
    assert isinstance(v, Interval) and isinstance(v.lo, Num) and isinstance(v.hi, Num)
    return _exact_of_shown(v.lo), _exact_of_shown(v.hi), 0


def test_enclosures_are_outward_and_short() -> None:
    """What is printed always contains the certified enclosure, with at most DIGITS digits."""
    rng = random.Random(6)
    for _ in range(3000):
        exp = rng.choice([0, -3, -17, 5, -400000, rng.randint(-50, 50)])
        mant = rng.randint(1, 10**15)
        width = rng.choice([0, 1, 7, 10**5, 10**12, mant])
        lo = Decimal(f"{mant}e{exp}")
        hi = Decimal(f"{mant + width}e{exp}")
        if rng.random() < 0.2:
            lo = Decimal(0)
        shown = F.enclosure(F.parse_decimal(str(lo)), F.parse_decimal(str(hi)))
        a, b, digits = _bounds(shown.value)  # type: ignore[arg-type]
        assert a <= lo and hi <= b, (lo, hi, shown)
        assert digits <= F.DIGITS, (lo, hi, shown)


def test_report_package_never_floats_exact_values() -> None:
    """float() appears only on lines marked as display-only plot coordinates."""
    package = Path(F.__file__).parent
    for source in package.glob("*.py"):
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if "float(" in line or "math.log10(" in line:
                assert "display only" in line, f"{source.name}:{number}: {line.strip()}"


def test_copy_is_not_mutated() -> None:
    result = small()
    before = copy.deepcopy(result)
    load(result)
    render(result, Path("x.md"))
    assert result == before
