"""JSON files in and out: atomic writes, and reading without binary floats.

Writers go through :func:`write_json_atomic` (temp file, then rename), so a reader —
or a run killed half-way — never sees half a file. Readers of result-like files use
:func:`read_json`: numbers stay exact (counts become ints, anything else stays text).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .numbers import JsonNumber, load_json_text


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write text so a reader never sees half a file (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; results are ordinary files
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        return int(x) if str(x).lstrip("-").isdigit() else str(x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    return x


def read_json(path: str | Path) -> Any:
    """A result, checkpoint or manifest file, numbers exact (see :func:`plain`)."""
    text = Path(path).read_text(encoding="utf-8")
    return plain(load_json_text(text, source=str(path)))
