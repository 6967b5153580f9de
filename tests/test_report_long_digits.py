"""Closed forms with coefficients of thousands of digits in reports.

A weight of 1/(3…3) (2,300 threes) gives γ(n) = 1/(1…1·3…3·…), a 4,600-digit denominator. The
LaTeX that `check --report` wrote did not compile ("Dimension too large": TeX cannot set a box
that wide), and `report` refused the result file (a coefficient of more than 1,000 characters).
Now both reports abbreviate long digit runs and the JSON keeps every digit.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import fuzzing as F
import pytest
from click.testing import CliRunner

from exactattn.cli import main
from exactattn.report import fmt

THREES = "3" * 2300


def long_gamma_model() -> dict:
    m = copy.deepcopy(F.BASE_MODEL)
    m["name"] = "long-gamma"
    q = "1/" + THREES
    m["layers"][0]["heads"][0]["key"] = [[q, 0, 0, 0]]
    m["layers"][0]["heads"][0]["query"] = [[0, q, 0, 0]]
    return m


def test_long_digit_runs_are_abbreviated() -> None:
    digits = "12345" + "0" * 4590 + "67890"
    assert fmt.long_digits("1/" + digits) == (
        "1/12345000000000000000…00000000000000067890 (4,600 digits)"
    )
    assert fmt.long_digits(digits, latex=True) == (
        r"12345000000000000000\ldots 00000000000000067890\,(\text{4,600 digits})"
    )
    short = "1" * fmt.MAX_SHOWN_DIGITS
    assert fmt.long_digits(f"{short}/3 + n") == f"{short}/3 + n"  # up to the limit: unchanged
    assert "(101 digits)" in fmt.long_digits(short + "1")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """check --json --report (LaTeX) of the long-γ model; the JSON is kept as result.json."""
    d = tmp_path_factory.mktemp("long")
    model = d / "m.json"
    model.write_text(json.dumps(long_gamma_model()))
    args = ["check", str(model), "--max-n", "4", "--hard-only", "-q"]
    res = CliRunner().invoke(
        main, [*args, "--json", str(d / "result.json"), "--report", str(d / "r.tex")]
    )
    assert res.exit_code == 0, res.output
    return d


def test_json_keeps_every_digit(written: Path) -> None:
    gamma = json.loads((written / "result.json").read_text())["closed_forms"]["gamma"]
    coefficient = Fraction(gamma["form"]["num"][0]) / Fraction(gamma["form"]["den"][0])
    assert coefficient == Fraction(1, int(THREES) ** 2)  # γ(n) = the hard score gap, exactly
    assert gamma["verified_on"] == [2, 3, 4]


def test_report_accepts_the_file_and_abbreviates(written: Path) -> None:
    md = written / "again.md"
    res = CliRunner().invoke(main, ["report", str(written / "result.json"), "-o", str(md)])
    assert res.exit_code == 0, res.output
    text = md.read_text()
    assert "`γ(n) = 1/11111111111111111111…88888888888888888889 (4,600 digits)`" in text
    assert "1" * (fmt.MAX_SHOWN_DIGITS + 1) not in text
    tex = written / "again.tex"
    res = CliRunner().invoke(main, ["report", str(written / "result.json"), "-o", str(tex)])
    assert res.exit_code == 0, res.output
    assert r"\ldots 88888888888888888889\,(\text{4,600 digits})" in tex.read_text()


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_check_report_latex_compiles(written: Path) -> None:
    tex = (written / "r.tex").read_text()
    assert r"(\text{4,600 digits})" in tex and "1" * (fmt.MAX_SHOWN_DIGITS + 1) not in tex
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"],
        cwd=written,
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert (written / "r.pdf").stat().st_size > 0
