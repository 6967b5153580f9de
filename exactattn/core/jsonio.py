"""Files in and out: atomic writes, and JSON read without binary floats.

Every file exactattn writes (results, checkpoints, reports, figures, models) goes through
:func:`atomic_path` (temp file, then rename), so a reader — or a run killed half-way, or a
full disk — never sees half a file. A special file (``--json /dev/null``, a FIFO, a
terminal) is written directly instead: a rename would replace the device by a regular file
(as root, /dev/null itself; issue 40). Readers of result-like files use
:func:`read_json`: numbers stay exact (counts become ints, anything else stays text).
"""

from __future__ import annotations

import io
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from exactattn.core.numbers import JsonNumber, load_json_text


def is_special(path: str | Path) -> bool:
    """Whether ``path`` (after symlinks) is a device, FIFO or socket: written in place, never
    renamed over, never removed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # absent (or unreadable: the write will say so)
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it replaces ``path``, on error it is
    removed (a crash, exit 2/4, Ctrl-C or a full disk never leaves half a file).

    A special file (:func:`is_special`) is yielded itself: the writer writes into it.

    An :class:`OSError` of the write that names no file, or the temporary one (a file
    object's write on a full disk names neither), is raised again naming ``path``: the exit-2
    message says which output failed."""
    path = Path(path)
    if is_special(path):
        try:
            yield path
        except OSError as exc:
            raise _naming(exc, path, None) from exc
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; outputs are ordinary files
    try:
        yield Path(tmp)
        staged = _STAGED.get()
        if staged is None:
            os.replace(tmp, path)
        else:  # moved in with the other files of the group (all_or_nothing)
            staged.append((Path(tmp), path))
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, path, tmp) from exc
        raise


def _naming(exc: OSError, path: Path, tmp: str | None) -> OSError:
    """``exc`` naming ``path`` where it names no file or the temporary ``tmp`` (the same
    errno, so the same OSError subclass); otherwise ``exc`` itself."""
    if exc.errno is None or exc.filename not in (None, tmp):
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


_STAGED: ContextVar[list[tuple[Path, Path]] | None] = ContextVar("_STAGED", default=None)


@contextmanager
def all_or_nothing() -> Iterator[None]:
    """Files written inside the block (through :func:`atomic_path`) are moved in together at
    its end, or, when the block fails, none is: a report and its figures appear whole or not
    at all (a full disk at the last figure left the report beside exit 2; issue 40). Inside
    another such block it joins that one."""
    if _STAGED.get() is not None:
        yield
        return
    staged: list[tuple[Path, Path]] = []
    token = _STAGED.set(staged)
    try:
        yield
    except BaseException:
        _discard(staged)
        raise
    finally:
        _STAGED.reset(token)
    for k, (tmp, path) in enumerate(staged):
        try:
            os.replace(tmp, path)
        except BaseException:
            _discard(staged[k:])
            raise


def _discard(staged: list[tuple[Path, Path]]) -> None:
    for tmp, _ in staged:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write UTF-8 text with ``\\n`` line ends, atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_with(path: str | Path, writer: Callable[[Path], object]) -> None:
    """Let ``writer`` (e.g. matplotlib's savefig) write a temporary file, then move it in."""
    with atomic_path(path) as tmp:
        writer(tmp)


def write_rendered(path: str | Path, render: Callable[[io.BytesIO], object]) -> None:
    """Let ``render`` (matplotlib's savefig, ``torch.save``) write into memory, then the bytes
    through a temporary file: a failed write is an :class:`OSError` naming ``path``
    (:func:`atomic_path`). matplotlib's PDF writer turned a full disk (a file-size limit) into
    "AttributeError: 'Stream' object has no attribute 'pos'", which was exit 4 (the fuzz's
    fulldisk kind, issue 40); PyTorch's, into a RuntimeError."""
    buf = io.BytesIO()
    render(buf)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(buf.getbuffer())


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
