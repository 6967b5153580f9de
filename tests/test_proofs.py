"""The proofs' machine checks: every proofs/check_*.py must pass, and the .tex must compile."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROOFS = Path(__file__).resolve().parent.parent / "proofs"
CHECKS = sorted(PROOFS.glob("check_*.py"))


def test_there_are_checks() -> None:
    """Guard against a silent glob miss (a renamed directory would make every test vacuous)."""
    assert len(CHECKS) >= 6, CHECKS


@pytest.mark.parametrize("script", CHECKS, ids=[p.stem for p in CHECKS])
def test_check_script(script: Path) -> None:
    """Each script exits 0 only if every symbolic identity and numeric spot check holds."""
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=PROOFS,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "all checks passed" in proc.stdout
    assert "FAIL" not in proc.stdout


def test_tex_compiles(tmp_path: Path) -> None:
    """proofs/exactattn-bounds.tex is standalone: two pdflatex runs, no errors, no bad refs."""
    if shutil.which("pdflatex") is None:
        pytest.skip(
            "pdflatex not installed (apt-get install texlive-latex-base "
            "texlive-latex-recommended to enable this test)"
        )
    src = PROOFS / "exactattn-bounds.tex"
    shutil.copy(src, tmp_path / src.name)
    for _ in range(2):
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", src.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-4000:]
    log = (tmp_path / "exactattn-bounds.log").read_text(errors="replace")
    assert (tmp_path / "exactattn-bounds.pdf").stat().st_size > 0
    assert "There were undefined references" not in log
    assert "LaTeX Warning: Reference" not in log
