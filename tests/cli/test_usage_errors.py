"""Usage errors are bad input like any other: one line ``error: <command>: … (fix: see
'<command> --help')`` and exit 2 (README's exit-code table), not click's three lines (Usage,
Try, Error). `exactattn` or a group alone still prints click's help."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paths import ROOT

DYCK1 = str(ROOT / "models" / "dyck1.json")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exactattn", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "where", "what"),
    [
        (("check", DYCK1, "--max-n", "0"), "exactattn check", "--max-n 0 is below"),
        (("check", DYCK1), "exactattn check", "Missing option '--max-n'"),
        (("check", DYCK1, "--max-n", "2", "--bogus"), "exactattn check", "No such option"),
        (("--bogus",), "exactattn", "No such option '--bogus'"),
        (("nosuch",), "exactattn", "No such command 'nosuch'"),
        (("build", "dyck", "--bogus"), "exactattn build dyck", "No such option"),
    ],
)
def test_a_usage_error_is_one_line_with_the_fix(args, where, what):
    r = _run(*args)
    where = where.replace("exactattn", "python -m exactattn", 1)  # click's name for `-m`
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {where}: ")
    assert what in lines[0]
    assert lines[0].endswith(f"(fix: see '{where} --help')")


def test_no_arguments_still_print_the_help():
    r = _run()
    assert r.returncode == 2
    assert r.stderr.startswith("Usage: python -m exactattn") and "Commands:" in r.stderr
