"""The command line's last line of defence: every failure becomes its documented exit code.

0 clean · 1 problem found · 2 bad input or usage · 3 undecided · 4 internal error ·
75 a ``--dask`` cluster lost mid-run (resumable), or 1 when the lengths finished before the
loss already found a problem (a finding stands) · 130 interrupted (a Ctrl-C once a command's
work is done is held and the exit follows the result: ``cli/common.py``, ``FinishHold``). A
bug must never exit 1 ("problem found"), which a script or CI job would read as a finding:
unexpected exceptions exit 4 with a short message, where to report it, and the traceback only
with ``--debug`` (or ``EXACTATTN_DEBUG=1``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from exactattn.core.limits import cap_message

EXIT_CLEAN = 0
EXIT_PROBLEM = 1
EXIT_BAD_INPUT = 2
EXIT_UNDECIDED = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
EXIT_CLUSTER_LOST = 75
"""A ``--dask`` cluster lost mid-run: not Ctrl-C (130), not a bug (4), not bad input (2). 75 is
sysexits.h's EX_TEMPFAIL, "a temporary failure; retry": the incomplete result is kept and the
same command (with ``--checkpoint``) resumes. Not when the lengths finished before the loss
already found a problem: that run exits 1 (EXIT_PROBLEM), since resuming can add problems,
never remove one (``CheckResult.exit_code`` in run/check.py)."""

REPORT_TO = "the exactattn issue tracker (where you got exactattn; see README.md, 'Exit codes')"


def debug_enabled() -> bool:
    """``--debug`` anywhere on the command line, or EXACTATTN_DEBUG set to a non-empty value."""
    return bool(os.environ.get("EXACTATTN_DEBUG")) or "--debug" in sys.argv[1:]


def _say(text: str) -> None:
    """Print to stderr even when the text cannot be encoded (lone surrogates, odd locales)."""
    data = (text + "\n").encode(sys.stderr.encoding or "utf-8", errors="backslashreplace")
    try:
        sys.stderr.buffer.write(data)
        sys.stderr.flush()
    except (AttributeError, ValueError):  # a replaced stderr (tests) without .buffer
        sys.stderr.write(data.decode(sys.stderr.encoding or "utf-8", errors="replace"))


def bad_input(message: object) -> NoReturn:
    """Exit 2 with one line: ``error: <message>``."""
    _say("error: " + cap_message(str(message)))
    sys.exit(EXIT_BAD_INPUT)


def _early_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the command line is still importing its modules (about 0.4 s; longer on a
    busy machine): nothing has been written yet, so exit 130 at once with the one line. A
    KeyboardInterrupt there left a traceback and a death by SIGINT (the signal fuzz)."""
    _say("interrupted")
    os._exit(EXIT_INTERRUPTED)


def start_of_command_line() -> None:
    """Called first thing when the package is imported as the ``exactattn`` command (console
    script or ``python -m exactattn``), never for a library import: a notebook keeps its
    own Ctrl-C handling."""
    argv0 = os.path.basename(sys.argv[0] or "")
    orig = list(getattr(sys, "orig_argv", []))
    as_module = "-m" in orig and orig[orig.index("-m") + 1 : orig.index("-m") + 2] == ["exactattn"]
    if (
        (argv0 == "exactattn" or as_module)
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    ):
        # an inherited SIG_IGN (nohup, a background job of a script) stays: whoever
        # started us asked for Ctrl-C not to reach this process, and Python keeps it too
        signal.signal(signal.SIGINT, _early_interrupt)


def end_of_imports() -> None:
    """The command line is loaded: Ctrl-C is a KeyboardInterrupt again, which each command
    turns into "interrupted" and exit 130 after keeping finished work."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is _early_interrupt
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted() -> NoReturn:
    _say("interrupted")
    sys.exit(EXIT_INTERRUPTED)


def internal_error(exc: BaseException) -> NoReturn:
    """Exit 4: a bug in exactattn, not a property of the model."""
    if debug_enabled():
        _say("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
    what = cap_message(f"{type(exc).__name__}: {exc}")
    _say(
        f"internal error (a bug in exactattn, not a finding about the model): {what}\n"
        f"Please report it to {REPORT_TO} with the command line and the input files"
        + ("." if debug_enabled() else "; rerun with --debug for the traceback.")
    )
    sys.exit(EXIT_INTERNAL)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, then raise KeyboardInterrupt.

    For work that must not be cut half-way: writing a length's results imports sympy (closed
    forms) the first time, and an interrupt inside that import left the module half-loaded,
    so the final save crashed (exit 4 instead of 130). Outside the main thread (where
    signal handlers cannot be set) the block just runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: hit.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if hit:
        raise KeyboardInterrupt
