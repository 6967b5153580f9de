"""Long commands show a rich progress bar with an ETA on a terminal, and only there (issue 39).

Each command runs in a subprocess twice: once with stderr on a pseudo-terminal (the bar must
be drawn there, with its description and "ETA") and stdout on a pipe, and once with both on
pipes (no bar anywhere). In both runs stdout is the same plain text, without a control
character: a bar never reaches stdout, and piping the answer to a file keeps it clean.
"""

from __future__ import annotations

import fcntl
import os
import re
import selectors
import struct
import subprocess
import sys
import termios

import pytest
from paths import ROOT


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("FORCE_TERMINAL", "TTY_INTERACTIVE", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        env.pop(k, None)
    env["TERM"] = "xterm-256color"
    return env


def run_tty(args: list[str]) -> tuple[bytes, bytes, int]:
    """``exactattn ARGS`` with stderr on a pseudo-terminal (100 columns), stdout on a pipe."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "exactattn", *args],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    assert proc.stdout is not None
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(master, selectors.EVENT_READ, err)
    open_fds = 2
    while open_fds:
        for key, _ in sel.select(timeout=300):
            try:
                chunk = os.read(key.fd, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                chunk = b""
            if not chunk:
                sel.unregister(key.fileobj)
                open_fds -= 1
            else:
                key.data.extend(chunk)
    code = proc.wait(timeout=300)
    os.close(master)
    return bytes(out), bytes(err), code


def run_piped(args: list[str]) -> tuple[bytes, bytes, int]:
    p = subprocess.run(
        [sys.executable, "-m", "exactattn", *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        timeout=300,
    )
    return p.stdout, p.stderr, p.returncode


CASES = {
    "certify-range": (
        ["certify", "models/dyck2.json", "--range", "1..400"],
        "certify n = 1..400",
    ),
    "check-find-tau": (
        ["check", "models/dyck1.json", "--max-n", "3", "--find-tau"],
        "τ* n=",
    ),
    "precision": (
        ["precision", "models/dyck1.json", "--max-n", "6", "--dtype", "float32"],
        "precision (inputs)",
    ),
    "search": (
        ["search", "models/dyck1.json", "--n", "12", "--objective", "margin", "--budget", "60"],
        "search n = 12",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_progress_on_a_terminal_only(name: str) -> None:
    args, description = CASES[name]
    out_t, err_t, code_t = run_tty(args)
    out_p, err_p, code_p = run_piped(args)
    assert code_t == code_p, (err_t, err_p)
    assert code_t in (0, 1), err_t.decode(errors="replace")
    shown = err_t.decode("utf-8", errors="replace")
    assert description in shown, shown[-2000:]
    assert "ETA" in shown, shown[-2000:]
    assert "\x1b" in shown  # drawn and cleared with terminal control sequences
    # no bar when stderr is a pipe, and stdout never gets one
    assert description.encode() not in err_p
    assert b"ETA" not in err_p
    for out in (out_t, out_p):
        assert b"\x1b" not in out and b"\r" not in out
        assert description.encode() not in out
    # the same answer; a range certified says how long it took, which differs run to run
    assert _untimed(out_t) == _untimed(out_p)


def _untimed(out: bytes) -> bytes:
    """The output with ``certify --range``'s run time (``…, 0.5 s)``) taken out."""
    return re.sub(rb"evaluated, [0-9.]+ s\)", b"evaluated, _ s)", out)
