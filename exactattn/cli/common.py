"""Helpers shared by the commands of :mod:`exactattn.cli` and :mod:`exactattn.cli.extra`
(below both, so neither imports the other)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import AbstractContextManager, nullcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import click
import rich.console

from exactattn.core.errors import UsageError
from exactattn.core.guard import deferred_interrupt
from exactattn.core.jsonio import atomic_path, is_special, write_json_atomic
from exactattn.core.numbers import short_decimal
from exactattn.model import model_from_dict


class Console(rich.console.Console):
    """rich's Console, except when the reader closes the pipe (`check … | head`).

    rich then raises SystemExit(1) — "problem found" — before the report is written and the
    exit code is decided. Here the rest of the output goes to /dev/null and the command runs
    on: its files are written and its exit code follows its result.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.file.fileno())
        except (OSError, ValueError):  # not a real file (tests capture output in memory)
            pass
        finally:
            os.close(devnull)


err_console = Console(stderr=True, soft_wrap=True)


def _snapshot(path: str | None) -> bytes | None:
    """A result file's bytes before the run (None: no such file)."""
    if path is None or is_special(path) or not Path(path).is_file():
        return None
    return Path(path).read_bytes()


def _restore(path: str | None, before: bytes | None) -> None:
    """Put a result file back as it was before the run (removed if it did not exist). A
    special file (``--json /dev/null``) is left alone: removing it as root removed the device."""
    if path is None or is_special(path):
        return
    p = Path(path)
    try:
        if before is None:
            p.unlink(missing_ok=True)
        else:
            with atomic_path(p) as tmp:
                tmp.write_bytes(before)
    except OSError:  # the error being reported is the one that matters
        pass


class FinishHold:
    """Ctrl-C held from the moment a command's work is done until the command ends.

    The final result file is the commit point. Before it, a Ctrl-C is an interrupt (exit
    130; ``check`` marks its file ``interrupted``); once the work is done (``check``: every
    length checked; ``precision``: every length run; ``search`` and ``certify``: the answer
    found), the complete result wins: the file, the table and the report are finished, and
    the exit code follows the result. A Ctrl-C that landed just after the final save used to
    exit 130 beside a file that said "clean" (the slow signal fuzz). Outside the main thread
    (no signal handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.active = False
        self.hit = False
        self._old: Any = None

    @classmethod
    def for_command(cls) -> FinishHold:
        """A hold that is stopped when the running click command ends, however it ends."""
        hold = cls()
        click.get_current_context().call_on_close(hold.stop)
        return hold

    def start(self) -> None:
        if self.active or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return  # Ctrl-C is ignored already (inherited, or the command line's late ignore)
        self._old = signal.signal(signal.SIGINT, self._note)
        self.active = True

    def _note(self, signum: int, frame: object) -> None:
        self.hit = True

    def saving(self) -> AbstractContextManager[None]:
        """Around a save before the hold: a Ctrl-C waits for the file (then interrupts)."""
        return nullcontext() if self.active else deferred_interrupt()

    def say_if_hit(self, done: str) -> None:
        """One line when a Ctrl-C was held: ``done`` says what was already complete."""
        if self.hit:
            err_console.print(f"interrupt ignored: {done}", highlight=False, markup=False)

    def stop(self) -> None:
        """Give Ctrl-C back to in-process callers (tests: the next command sees it again);
        the command line keeps ignoring it to the end (see :func:`ignore_late_ctrl_c`)."""
        if self.active:
            signal.signal(signal.SIGINT, signal.SIG_IGN if is_command_line() else self._old)
            self.active = False


def is_command_line() -> bool:
    """Whether this process was started as the ``exactattn`` command (console script or
    ``python -m exactattn``), not a library caller or a test runner invoking commands
    in-process. Read from the interpreter's own command line (``sys.orig_argv``), which a
    caller that sets ``sys.argv`` does not change."""
    orig = list(sys.orig_argv)
    if "-m" in orig:
        return orig[orig.index("-m") + 1 : orig.index("-m") + 2] == ["exactattn"]
    script = next((a for a in orig[1:] if not a.startswith("-")), "")
    return Path(script).name == "exactattn"


def ignore_late_ctrl_c() -> None:
    """A command has decided its exit code: the command line ignores Ctrl-C from here on.

    Python's finalization puts SIGINT back to the system default, so a Ctrl-C during the
    process's teardown killed it by signal (exit -2, nothing printed; 6 of 40 signals sent
    in the last 0.3 s of a run, the slow signal fuzz), and one during the unwinding of the
    exit became click's "Aborted!" and exit 1. An ignored signal stays ignored to the end.
    In-process callers (tests, notebooks) keep their Ctrl-C.
    """
    if is_command_line() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


Named = tuple[str, str | Path | None]
"""A file a command reads or writes, with how the user named it (``--json``, ``MODEL``)."""


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: the same inode (hard links, symlinks) or, when a path
    does not exist yet, the same resolved path (``./m.json`` and ``m.json``, a symlink to
    where the other will be)."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:  # one does not exist
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwrite(inputs: list[Named], outputs: list[Named]) -> None:
    """Exit 2 before any work when an output would replace an input or another output
    (``check m.json --json m.json`` overwrote the model; issue 40). Special files
    (``/dev/null``, ``/dev/stdout``) may be given more than once: they are written in place."""
    outs = [(what, p) for what, p in outputs if p is not None and not is_special(p)]
    for k, (what, out) in enumerate(outs):
        for other_what, other in [*inputs, *outs[:k]]:
            if other is None or not same_file(out, other):
                continue
            role = "the input" if (other_what, other) in inputs else "the output"
            raise UsageError(
                f"{what} {out}: the same file as {role} {other_what} {other}, which it would "
                "overwrite (fix: write to another path)"
            )


LONG_EXACT = 40
"""Exact rationals longer than this are shown as ``≈1.23e-2300`` in the table (JSON: exact)."""


def _exact_cell(text: str) -> str:
    """An exact rational for the table: as written, or (past LONG_EXACT characters, e.g. a γ
    with a 4,400-digit denominator) ≈ its 3-digit decimal, rounded toward zero."""
    if len(text) <= LONG_EXACT:
        return text
    q = Fraction(text)
    return "≈" + short_decimal(q, up=q < 0)


def _emit(model: dict[str, Any], out: str | None) -> None:

    model_from_dict(model)  # never write a model we would reject
    if out:
        write_json_atomic(Path(out), model)
        err_console.print(f"wrote {out}", highlight=False, markup=False)
    else:
        json.dump(model, sys.stdout, indent=2)
        sys.stdout.write("\n")
