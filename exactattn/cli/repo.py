"""The commands that maintain the repository's own files (``build models``, ``build claims``)
run in a checkout of exactattn. Elsewhere they used to compare against nothing and report
"out of date", exit 1 — a finding — where the truth is a usage error (exit 2, issue 39)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from exactattn.core.errors import UsageError


def need_repository(command: str, paths: Iterable[Path], what: str) -> None:
    """Refuse (exit 2, one line) when none of ``paths`` exists: the command is not running in
    the exactattn repository (or ``--dir``/``--root`` points elsewhere)."""
    paths = list(paths)
    if any(p.exists() for p in paths):
        return
    raise UsageError(
        f"exactattn {command}: {what} not found (working directory {Path.cwd()}): this command "
        "maintains the files of an exactattn checkout (fix: run it from the repository root)"
    )
