"""Result files the long fuzz (tests/fuzz_long.py, seed 2030) found breaking the contract,
kept as regressions: each must give exit 0 or 2, never 4, and a LaTeX report must compile."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from latex_compile import needs_pdflatex, pdflatex
from paths import TESTS

from exactattn.cli import main

DATA = TESTS / "data" / "fuzz_regressions"


def test_a_malformed_tau_star_bracket_is_bad_input(tmp_path: Path) -> None:
    """`non_monotone` written as a number, not a list: it crashed the report (exit 4)."""
    res = CliRunner().invoke(
        main, ["report", str(DATA / "non_monotone_int.json"), "-o", str(tmp_path / "r.tex")]
    )
    assert res.exit_code == 2, res.output
    assert "lengths[n=3]: malformed entry" in res.output
    assert not any(tmp_path.iterdir())  # nothing half-written


@needs_pdflatex
def test_a_long_rational_marked_dagger_compiles(tmp_path: Path) -> None:
    """An exact value too long to print is shown as an enclosure ending in ×10^{-4500} and
    marked †: the dagger must not become a double superscript (pdflatex failed)."""
    src = tmp_path / "r.json"
    shutil.copy(DATA / "dagger_after_exponent.json", src)
    out = tmp_path / "out.tex"
    res = CliRunner().invoke(main, ["report", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    tex = out.read_text("utf-8")
    assert r"\times10^{-4500}}^{\dagger}" in tex
    assert r"10^{-4500}^" not in tex
    pdflatex(out)


@pytest.mark.parametrize("name", ["non_monotone_int.json", "dagger_after_exponent.json"])
def test_markdown_reports_never_crash(tmp_path: Path, name: str) -> None:
    res = CliRunner().invoke(main, ["report", str(DATA / name), "-o", str(tmp_path / "r.md")])
    assert res.exit_code in (0, 2), res.output


def test_a_precision_file_with_backend_but_no_version_is_bad_input(tmp_path: Path) -> None:
    """Seed 2040 (issue 40's run), case 15,728: ``settings.backend`` without
    ``backend_version`` passed the validation and crashed the precision record (exit 4)."""
    src = DATA / "precision_backend_without_version.json"
    res = CliRunner().invoke(main, ["report", str(src), "-o", str(tmp_path / "r.md")])
    assert res.exit_code == 2, res.output
    assert "settings.backend_version: missing" in res.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "name, needle",
    [
        ("certificate_provenance_not_object.json", "provenance: expected an object"),
        ("certificate_provenance_without_reason.json", "provenance.reason: missing"),
        ("certificate_provenance_without_digest.json", "provenance.model_sha256: expected a"),
    ],
)
def test_a_certificate_with_a_malformed_provenance_is_bad_input(
    tmp_path: Path, name: str, needle: str
) -> None:
    """Seeds 2040 and 2041 on the merge of issue 41 (cases 1,005, 3,785 and 5,185):
    certificates gained ``provenance`` after ``report``'s validation was written, and a
    mutated one crashed the certificate record (exit 4)."""
    res = CliRunner().invoke(main, ["report", str(DATA / name), "-o", str(tmp_path / "r.md")])
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "name, needle",
    [
        ("certificate_sharp_head_not_object.json", "sharp_chain.heads[1]: expected an object"),
        ("certificate_sharp_head_index_text.json", "sharp_chain.heads[2].head: expected an"),
        (
            "certificate_enumerated_length_text.json",
            "certified_by_enumeration.lengths[1]: expected an integer",
        ),
    ],
)
def test_a_certificate_with_a_malformed_chain_record_is_bad_input(
    tmp_path: Path, name: str, needle: str
) -> None:
    """Seed 2047 on main after issue 35's Theorem S (cases 177 and 678): ``sharp_chain`` and
    ``certified_by_enumeration`` were added to certificates after ``report``'s validation
    was written, and a mutated head crashed the certificate record (exit 4); a length
    written as text was printed as it stood."""
    res = CliRunner().invoke(main, ["report", str(DATA / name), "-o", str(tmp_path / "r.md")])
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert not any(tmp_path.iterdir())
