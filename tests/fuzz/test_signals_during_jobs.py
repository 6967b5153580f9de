"""Signals during ``check --jobs 2`` at random moments (issue 27: the fuzz suite extended to
signals). Each case interrupts a run with a checkpoint after a seeded random delay, sent to
the parent alone or to the whole process group as a terminal does, then resumes it.

The contract: exit 130 (or 0 when the run finished first), never a traceback; an interrupted
result file says "incomplete", and exit 0 means the complete file; the resumed run exits 0 and
its JSON is byte-identical to an uninterrupted run's. The default suite runs a few cases;
``-m slow`` runs 24. The window that fuzz once hit under load (a Ctrl-C just after the final
save: exit 130 beside a "clean" file) is tested deterministically at the end of this file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

MODEL = ROOT / "models" / "dyck2.json"
ARGS = ["check", str(MODEL), "--max-n", "7", "--jobs", "2", "-q"]


def _cli(args: list[str], **kw: object) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-m", "exactattn", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The uninterrupted run's result file."""
    out = tmp_path_factory.mktemp("fresh") / "r.json"
    p = _cli([*ARGS, "--json", str(out)])
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    return out.read_bytes()


def _case(tmp: Path, seed: int, fresh: bytes) -> str:
    rng = random.Random(seed)
    delay = rng.uniform(0.2, 3.0)
    to_group = rng.random() < 0.5
    out, ckpt = tmp / f"r{seed}.json", tmp / f"ck{seed}"
    args = [*ARGS, "--json", str(out), "--checkpoint", str(ckpt)]
    p = _cli(args, start_new_session=True)
    try:
        time.sleep(delay)
        if p.poll() is None:
            if to_group:
                os.killpg(p.pid, signal.SIGINT)
            else:
                p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    what = f"seed {seed}: delay {delay:.2f} s, {'group' if to_group else 'parent'}"
    assert p.returncode in (0, 130), (what, p.returncode, err)
    assert "Traceback" not in err, (what, err)
    if p.returncode == 130 and out.exists():
        assert json.loads(out.read_text())["verdict"]["status"] == "incomplete", what
    if p.returncode == 0:  # the complete result won: the file is the finished run's
        assert out.read_bytes() == fresh, what
    q = _cli(args)  # resume from the checkpoint
    _, err = q.communicate(timeout=600)
    assert q.returncode == 0, (what, err)
    assert out.read_bytes() == fresh, f"{what}: the resumed result differs from a fresh run"
    return "interrupted" if p.returncode == 130 else "finished"


@pytest.mark.parametrize("seed", [1, 2])
def test_interrupt_then_resume(tmp_path: Path, fresh: bytes, seed: int) -> None:
    _case(tmp_path, seed, fresh)


@pytest.mark.slow
def test_interrupt_then_resume_many(tmp_path: Path, fresh: bytes) -> None:
    kinds = [_case(tmp_path, seed, fresh) for seed in range(100, 124)]
    assert "interrupted" in kinds  # the delays reach into the run, not only past its end


def _py(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def test_ctrl_c_while_the_command_line_imports() -> None:
    """A Ctrl-C among the command line's imports (about 0.4 s; the signal fuzz hit it at
    1.55 s on a busy machine) is exit 130 with one line, not a traceback and a SIGINT death."""
    p = _py(
        "import sys; sys.argv = ['exactattn']\n"
        "import os, signal, exactattn\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "import time; time.sleep(30)\n"
    )
    assert p.returncode == 130 and p.stderr == "interrupted\n", (p.returncode, p.stderr)


def test_a_library_import_keeps_python_s_ctrl_c() -> None:
    """A notebook importing exactattn keeps KeyboardInterrupt (the early handler is only for
    the command line)."""
    p = _py(
        "import signal, exactattn\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "print('ok')\n"
    )
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


# ---------------------------------------------------------------------------------------------
# the window the slow fuzz once hit, made deterministic: a Ctrl-C injected at exact points


def _ctrl_c() -> None:
    """Ctrl-C to this process, as a terminal sends it (delivered before the next bytecode)."""
    os.kill(os.getpid(), signal.SIGINT)


def _invoke(tmp: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> tuple[int, dict, str]:
    """`check dyck1 --max-n 3 --json --report` in this process, with a Ctrl-C injected
    ``when``: "last length" (inside the save after the last length, before the run ends),
    "final save" (inside the final save), "after" (while the report is written), "close"
    (while the executor closes, between the run and the final save)."""
    from click.testing import CliRunner

    import exactattn.cli as cli_module
    from exactattn.cli import main

    real_write, real_report, real_exec = (
        cli_module.write_json_atomic,
        cli_module.write_report,
        cli_module.make_executor,
    )
    saves: list[str] = []

    def write(path: Path, data: dict) -> None:
        real_write(path, data)
        saves.append(data["verdict"]["status"])
        last = len(data["lengths"]) == 3
        if (when == "last length" and last and len(saves) == 3) or (
            when == "final save" and data["verdict"]["status"] == "clean"
        ):
            _ctrl_c()

    def report(data: dict, path: Path) -> None:
        if when == "after":
            _ctrl_c()
        real_report(data, path)

    def executor(jobs: int, dask: str | None) -> object:
        ex = real_exec(jobs, dask)
        close = ex.close

        def closing(*a: object, **k: object) -> None:
            close(*a, **k)
            if when == "close":
                _ctrl_c()

        ex.close = closing  # type: ignore[method-assign]
        return ex

    monkeypatch.setattr(cli_module, "write_json_atomic", write)
    monkeypatch.setattr(cli_module, "write_report", report)
    monkeypatch.setattr(cli_module, "make_executor", executor)
    out, rep = tmp / "r.json", tmp / "r.md"
    model = ROOT / "models" / "dyck1.json"
    args = ["check", str(model), "--max-n", "3", "-q", "--json", str(out), "--report", str(rep)]
    res = CliRunner().invoke(main, args)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    assert "Traceback" not in res.output, res.output
    return res.exit_code, json.loads(out.read_text()), res.output


@pytest.mark.parametrize("when", ["final save", "after", "close"])
def test_ctrl_c_once_every_length_is_checked_keeps_the_complete_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """The complete result wins: exit 0 with the clean file and the report (it used to be
    exit 130 beside a file that said "clean", the slow fuzz's one failure)."""
    code, data, output = _invoke(tmp_path, monkeypatch, when)
    assert (code, data["verdict"]["status"], data["interrupted"]) == (0, "clean", False), output
    assert (tmp_path / "r.md").is_file()
    assert "interrupt ignored: every length was already checked" in output


def test_ctrl_c_in_the_last_length_s_save_marks_the_file_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the run has returned, a Ctrl-C is an interrupt: exit 130 and the file says so
    (never 0 beside a partial file, never 130 beside a clean one)."""
    code, data, output = _invoke(tmp_path, monkeypatch, "last length")
    assert code == 130, output
    assert data["interrupted"] is True and data["verdict"]["status"] == "incomplete"
    assert data["verdict"]["summary"].endswith("the run was interrupted")
    assert "the run was interrupted" in (tmp_path / "r.md").read_text()  # the report too


@pytest.mark.parametrize("args", [["--max-n", "2", "-q"], ["--max-n", "0"]])
def test_a_ctrl_c_after_the_command_is_no_death_by_signal(args: list[str]) -> None:
    """Once a command has its exit code, the command line ignores Ctrl-C: Python's teardown
    puts SIGINT back to the system default, and a Ctrl-C there killed the process by signal
    (exit -2, nothing printed: 6 of 40 signals in the last 0.3 s of a run). Here the signal
    comes after the command returns, in the same process (clean run: 0; bad input: 2)."""
    model = ROOT / "models" / "dyck1.json"
    p = _py(
        f"import sys; sys.argv = ['exactattn', 'check', {str(model)!r}, *{args!r}]\n"
        "sys.orig_argv = [sys.executable, '-m', 'exactattn']  # as `python -m exactattn`\n"
        "import os, signal, exactattn\n"
        "from exactattn.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "print(code, signal.getsignal(signal.SIGINT) == signal.SIG_IGN)\n"
        "sys.exit(code)\n"
    )
    code = 0 if args[-1] == "-q" else 2
    assert p.returncode == code and p.stdout.endswith(f"{code} True\n"), (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr


def test_a_caller_that_sets_argv_keeps_its_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test or notebook that sets ``sys.argv`` to look like the command line and runs a
    command in-process keeps Python's Ctrl-C (it once left the whole test run ignoring
    SIGINT, and every subprocess it started with it)."""
    from click.testing import CliRunner

    from exactattn.cli import main
    from exactattn.cli.common import is_command_line

    monkeypatch.setattr("sys.argv", ["exactattn", "check"])
    assert not is_command_line()
    res = CliRunner().invoke(main, ["check", str(ROOT / "models" / "dyck1.json"), "--max-n", "0"])
    assert res.exit_code == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_inherited_ignore_is_kept_by_the_command_line() -> None:
    """``nohup exactattn …`` or ``exactattn … &`` in a script: SIGINT arrives ignored, and
    the command line must not re-arm it (neither the early handler nor the finish hold)."""
    code = (
        "import signal, sys\n"
        "sys.argv = ['exactattn']\n"
        "from exactattn.core.guard import start_of_command_line\n"
        "from exactattn.cli.common import FinishHold\n"
        "start_of_command_line()\n"
        "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
        "h = FinishHold(); h.start()\n"
        "assert not h.active and signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
        "print('ok')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


def test_worker_forks_hold_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--jobs`: the submits that fork the workers run with Ctrl-C held (a SIGINT inside
    os.fork's after-fork hooks was printed as "Exception ignored" and lost)."""
    from concurrent.futures import ProcessPoolExecutor

    from click.testing import CliRunner

    from exactattn.cli import main

    seen: list[object] = []
    real = ProcessPoolExecutor.submit

    def submit(self, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(signal.getsignal(signal.SIGINT))
        return real(self, *a, **k)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    res = CliRunner().invoke(
        main, ["check", str(ROOT / "models" / "dyck1.json"), "--max-n", "3", "--jobs", "2", "-q"]
    )
    assert res.exit_code == 0, res.output
    assert seen and all(h is not signal.default_int_handler for h in seen)
