"""Files in and out: atomic writes, and JSON read without binary floats.

Every file exactattn writes (results, checkpoints, reports, figures, models) goes through
:func:`atomic_path` (temp file, then rename), so a reader — or a run killed half-way —
never sees half a file. Readers of result-like files use
:func:`read_json`: numbers stay exact (counts become ints, anything else stays text).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exactattn.core.numbers import JsonNumber, load_json_text


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it replaces ``path``, on error it is
    removed (a crash, exit 2/4 or Ctrl-C never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; outputs are ordinary files
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write UTF-8 text with ``\\n`` line ends, atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_with(path: str | Path, writer: Callable[[Path], object]) -> None:
    """Let ``writer`` (e.g. matplotlib's savefig) write a temporary file, then move it in."""
    with atomic_path(path) as tmp:
        writer(tmp)


def dumps(data: Any, indent: int | None = 2) -> str:
    """The one JSON text form of our files (UTF-8, trailing newline)."""
    if indent is None:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n"
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 2) -> None:
    """Write JSON atomically (see :func:`write_text_atomic`)."""
    write_text_atomic(path, dumps(data, indent))


def plain(x: Any) -> Any:
    """Result files hold numbers only as ints (counts): turn kept literals back into int."""
    if isinstance(x, JsonNumber):
        digits = str(x).lstrip("-")
        return int(x) if digits.isdigit() and len(digits) <= 4_000 else str(x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    return x


def read_json(path: str | Path) -> Any:
    """A result, checkpoint or manifest file, numbers exact (see :func:`plain`)."""
    text = Path(path).read_text(encoding="utf-8")
    return plain(load_json_text(text, source=str(path)))
