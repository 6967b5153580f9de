"""Atomic file writes: a reader (or a crash, exit 2/4, Ctrl-C) never leaves half a file.

Every file exactattn writes (results, reports, figures, models) goes through here: the
content is written to a temporary file in the target's directory, then ``os.replace``d.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it replaces ``path``, on error it is removed."""
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


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text with ``\\n`` line ends, atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def write_with(path: Path, writer: Callable[[Path], object]) -> None:
    """Let ``writer`` (e.g. matplotlib's savefig) write a temporary file, then move it in place."""
    with atomic_path(path) as tmp:
        writer(tmp)
