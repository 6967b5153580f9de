"""docs/tutorial.md runs end to end (issue 39): its files are written, each of its commands
runs as written in a fresh directory, with the exit code it states, and prints the output
the page shows (lines marked … left out)."""

from __future__ import annotations

from pathlib import Path

from doc_sessions import files_of, missing_lines, run_step, steps_of
from paths import ROOT

PAGE = (ROOT / "docs" / "tutorial.md").read_text("utf-8")


def test_the_tutorial_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = files_of(PAGE)
    assert set(files) == {"contains_a.json", "hot.json", "contains_a.rasp"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, "utf-8")
    steps = steps_of(PAGE)
    assert len(steps) >= 10
    for step in steps:
        code, out = run_step(step, tmp_path)
        assert code == step.exit_code, (step.command, out[-3000:])
        missing = missing_lines(step.expected, out)
        assert not missing, (step.command, missing, out[-3000:])
    for made in ("heads.png", "rasp_contains_a.json", "result.json", "report.md"):
        assert (tmp_path / made).stat().st_size > 0, made
    # the failing variant's first failing input is the one the page explains
    assert "'abb': expected accept · hard accept · soft reject" in PAGE
