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
        r"{\underbrace{12345000000000000000\ldots00000000000000067890}_{\text{4,600 digits}}}"
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
    assert r"\ldots88888888888888888889}_{\text{4,600 digits}}}" in tex.read_text()


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_check_report_latex_compiles(written: Path) -> None:
    tex = (written / "r.tex").read_text()
    assert r"_{\text{4,600 digits}}" in tex and "1" * (fmt.MAX_SHOWN_DIGITS + 1) not in tex
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"],
        cwd=written,
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert (written / "r.pdf").stat().st_size > 0


def test_power_form_with_a_long_base(tmp_path: Path) -> None:
    """γ(n) = (7^250)^n: check wrote a power form with a 212-digit base, and report refused it
    (a base of at most 200 characters)."""
    m = copy.deepcopy(F.BASE_MODEL)
    m["name"] = "long-base"
    m["embedding"]["position"][0] = "i*(7^250)^n"  # adjacent positions' scores differ by 7^250n
    m["embedding"]["token"]["a"][0] = 0
    model, out, md = tmp_path / "m.json", tmp_path / "r.json", tmp_path / "r.md"
    model.write_text(json.dumps(m))
    args = ["check", str(model), "--max-n", "4", "--hard-only", "-q", "--json", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    form = json.loads(out.read_text())["closed_forms"]["gamma"]["form"]
    assert form["kind"] == "power" and Fraction(form["base"]) == 7**250
    res = CliRunner().invoke(main, ["report", str(out), "-o", str(md)])
    assert res.exit_code == 0, res.output
    assert "`γ(n) = 18815250448759004797…74625761742043131249 (212 digits)**n`" in md.read_text()


def test_a_form_too_costly_to_evaluate_is_refused(written: Path, tmp_path: Path) -> None:
    """Long coefficients are accepted, but not at any number of lengths: 16 distinct
    12,500-character coefficients took 0.24 s per length (100,000-digit ones 43 s)."""
    import time

    result = json.loads((written / "result.json").read_text())
    big = "1" * 6000 + "/" + "7" * 6000
    gamma = result["closed_forms"]["gamma"]
    gamma["form"] = {"kind": "rational", "num": [big] * 8, "den": [big] * 8}
    gamma["verified_on"] = list(range(2, 60))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(result))
    start = time.monotonic()
    res = CliRunner().invoke(main, ["report", str(bad), "-o", str(tmp_path / "r.md")])
    assert res.exit_code == 2 and time.monotonic() - start < 10, res.output
    assert res.output.startswith("error: closed_forms.gamma.form: evaluating the form at its 59")
    assert "digits (limit 5,000,000) (fix: " in res.output
