"""Run the terminal sessions of a documentation page, as written (issue 39).

A page shows sessions in ```` ```console ```` blocks: a line ``$ COMMAND`` is run, the lines
after it (up to the next ``$``) are output that must appear, in that order, in what the
command printed (each compared with surrounding white space stripped; blank lines and ``…``
lines stand for output left out). ``COMMAND  # exit N`` expects exit code N (default 0).
Files the sessions use are blocks whose info string names them: ```` ```json file=m.json ````
is written to ``m.json`` before the first command.

``exactattn …`` runs in-process (click's runner, stdout and stderr together, as a terminal
shows them); ``python -m …`` runs as a subprocess of this interpreter.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

from exactattn.cli import main

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass
class Step:
    command: str
    exit_code: int = 0
    expected: list[str] = field(default_factory=list)


def files_of(page: str) -> dict[str, str]:
    """The blocks marked ``file=NAME``: name → content."""
    out = {}
    for info, body in FENCE.findall(page):
        m = re.search(r"\bfile=(\S+)", info)
        if m:
            out[m.group(1)] = body
    return out


def steps_of(page: str) -> list[Step]:
    """Every ``$`` command of the page's console blocks, in order, with its expected output."""
    steps: list[Step] = []
    for info, body in FENCE.findall(page):
        if info.strip().split(" ")[0] != "console":
            continue
        for line in body.splitlines():
            if line.startswith("$ "):
                cmd, _, comment = line[2:].partition("  # ")
                m = re.fullmatch(r"exit (\d+)", comment.strip())
                steps.append(Step(cmd.strip(), int(m.group(1)) if m else 0))
            elif steps and line.strip() and line.strip() != "…":
                steps[-1].expected.append(line.strip())
    return steps


def run_step(step: Step, cwd: Path) -> tuple[int, str]:
    """Run one command in ``cwd``: its exit code and everything it printed."""
    argv = shlex.split(step.command)
    if argv[0] == "exactattn":
        res = CliRunner().invoke(main, argv[1:])
        return res.exit_code, res.output
    if argv[:2] == ["python", "-m"]:
        p = subprocess.run(
            [sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=1800
        )
        return p.returncode, p.stdout + p.stderr
    raise AssertionError(f"not a command this runner knows: {step.command}")


def missing_lines(expected: list[str], output: str) -> list[str]:
    """The expected lines not found, in order, among the output's lines (stripped)."""
    lines = [x.strip() for x in output.splitlines()]
    at = 0
    missing = []
    for want in expected:
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            missing.append(want)
    return missing
