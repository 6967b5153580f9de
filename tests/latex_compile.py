"""Compile a report's LaTeX with pdflatex and check the log: shared by the report tests and
the fuzz regressions (a test module in one stage folder does not import another's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended)",
)


def pdflatex(tex: Path) -> Path:
    assert PDFLATEX is not None
    run = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tex.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = tex.with_suffix(".log")
    assert run.returncode == 0, log.read_text(errors="replace")[-3000:]
    text = log.read_text(errors="replace")
    assert "Overfull \\hbox" not in text, "a table or caption is wider than the text"
    assert "undefined" not in text.lower(), "undefined reference, font shape or control sequence"
    pdf = tex.with_suffix(".pdf")
    assert pdf.stat().st_size > 1000
    return pdf
