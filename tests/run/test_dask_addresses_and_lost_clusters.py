"""``--dask`` with bad or unreachable addresses, and clusters that die mid-run (issue 27, 14).

A bad address, or a scheduler without workers, is one line and exit 2, quickly (a short
timeout), with no file written; a scheduler or worker killed mid-run ends as an incomplete
result (exit 75, "retry"; not 130, which means Ctrl-C; one line) that the same command with
``--checkpoint`` resumes to the byte-identical result.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from paths import ROOT

import exactattn.cli as cli_module
from exactattn.cli import main
from exactattn.core.errors import UsageError
from exactattn.core.guard import EXIT_CLUSTER_LOST
from exactattn.model import load_model
from exactattn.run.check import run_check
from exactattn.run.executors import Dask

pytest.importorskip("dask.distributed")

MODEL = ROOT / "models" / "dyck1.json"


def _junk_server() -> tuple[int, threading.Event]:
    """A TCP server that answers every connection with bytes that are no dask message."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + b"\xff" * 64)
            finally:
                conn.close()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], stop


ADDRESSES = [
    "nonsense",
    "",
    " ",
    "tcp://",
    "http://example.com:8786",
    "inproc://",
    "inproc://127.0.0.1/1/2",
    "tls://",
    "ucx://",
    "ucx://127.0.0.1:8786",
    "example.invalid",  # a bare host
    "127.0.0.1",
    ":::",
    "[::1]",
    "tcp://127.0.0.1:0",
    "tcp://127.0.0.1:99999",
    "tcp://127.0.0.1:-5",
    "tcp://:8786",
    "tcp://127.0.0.1:1",  # nothing listens: refused until the timeout
    "tls://127.0.0.1:1",  # TLS without a TLS configuration
    "ws://127.0.0.1:1",
    "\x00:1",
    "a" * 5000,
    "JUNK",  # replaced by a server that answers garbage
]


@pytest.mark.parametrize("address", ADDRESSES, ids=[repr(a)[:30] for a in ADDRESSES])
def test_bad_address_is_one_line_exit_2(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXACTATTN_DASK_TIMEOUT", "1")
    stop = None
    if address == "JUNK":
        port, stop = _junk_server()
        address = f"tcp://127.0.0.1:{port}"
    out, ck = tmp_path / "r.json", tmp_path / "ck"
    t0 = time.monotonic()
    try:
        res = CliRunner().invoke(
            main,
            ["check", str(MODEL), "--max-n", "2", "-q", "--dask", address]
            + ["--json", str(out), "--checkpoint", str(ck)],
        )
    finally:
        if stop is not None:
            stop.set()
    assert time.monotonic() - t0 < 20
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --dask"), res.output
    assert len(lines[0]) < 1000 and "Traceback" not in res.output
    assert not out.exists() and not ck.exists()  # nothing written, not even the checkpoint


class _LostFuture:
    def done(self) -> bool:
        return True

    def result(self) -> None:
        raise CancelledError("scheduler-connection-lost")


class _DyingClient:
    """A client whose scheduler went away: every shard comes back cancelled."""

    status = "running"

    def scatter(self, x, broadcast=False):  # type: ignore[no-untyped-def]
        return x

    def submit(self, *a, **k):  # type: ignore[no-untyped-def]
        return _LostFuture()


def test_lost_cluster_is_an_incomplete_result_not_a_crash() -> None:
    model = load_model(MODEL)
    res = run_check(model, max_n=3, executor=Dask(_DyingClient()))
    assert res.stopped == "cluster lost" and not res.complete
    assert not res.interrupted  # `interrupted` is Ctrl-C only
    assert res.lengths == [] and "lost the cluster mid-run" in (res.stopped_by or "")
    assert res.verdict().status == "incomplete"
    assert res.exit_code() == EXIT_CLUSTER_LOST == 75  # not 130: nobody pressed Ctrl-C
    data = res.to_json()
    assert data["interrupted"] is False and data["stopped"] == "cluster lost"
    assert data["verdict"]["summary"].endswith(
        "the run was stopped: its Dask cluster was lost, rerun to resume"
    )


def test_lost_cluster_cli_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line: one line `stopped: --dask …`, exit 75, the file says incomplete."""
    monkeypatch.setattr(cli_module, "make_executor", lambda jobs, dask: Dask(_DyingClient()))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        main, ["check", str(MODEL), "--max-n", "2", "-q", "--dask", "x:1", "--json", str(out)]
    )
    assert res.output.startswith("stopped: --dask") and res.output.count("\n") == 1, res.output
    data = json.loads(out.read_text())
    assert data["verdict"]["status"] == "incomplete"
    assert (data["interrupted"], data["stopped"]) == (False, "cluster lost")
    assert "interrupted" not in data["verdict"]["summary"]
    assert res.exit_code == EXIT_CLUSTER_LOST, res.output


@pytest.fixture
def one_worker_cluster() -> Iterator[Any]:
    """A real scheduler with one in-process worker on tcp://127.0.0.1."""
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        yield cluster


@pytest.mark.parametrize(
    ("tau", "code", "status"),
    [
        ("10", 1, "problems"),  # n = 1 already disagrees at τ = 10: a finding, exit 1
        (None, EXIT_CLUSTER_LOST, "incomplete"),  # n = 1 clean: retry, exit 75
    ],
)
def test_cluster_lost_after_a_finished_length(
    one_worker_cluster: Any,
    tau: str | None,
    code: int,
    status: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real LocalCluster loses its only worker once n = 1 is saved, so n = 2 finds no
    worker: the run stops as "cluster lost". Exit 1 when n = 1 already found a problem
    (a finding stands: resuming can add problems, never remove one), else 75; the file says
    `stopped: cluster lost`, never `interrupted`, and its summary says why it is short."""
    monkeypatch.setenv("EXACTATTN_DASK_TIMEOUT", "1")
    real = cli_module.run_check

    def losing(*a: Any, **kw: Any) -> Any:
        save = kw["on_length"]

        def on_length(result: Any) -> None:
            save(result)
            one_worker_cluster.scale(0)  # the last worker goes away after n = 1
            deadline = time.monotonic() + 30
            while one_worker_cluster.scheduler_info.get("workers"):
                assert time.monotonic() < deadline, "the worker did not leave"
                time.sleep(0.05)

        return real(*a, **{**kw, "on_length": on_length})

    monkeypatch.setattr(cli_module, "run_check", losing)
    out, rep = tmp_path / "r.json", tmp_path / "r.md"
    args = ["check", str(MODEL), "--max-n", "2", "-q", "--json", str(out), "--report", str(rep)]
    if tau:
        args += ["--tau", tau]
    res = CliRunner().invoke(main, [*args, "--dask", one_worker_cluster.scheduler_address])
    assert res.exit_code == code, (res.output, res.exception)
    assert res.output.startswith("stopped: --dask") and res.output.count("\n") == 1, res.output
    assert ("already show problems" in res.output) == (code == 1)
    data = json.loads(out.read_text())
    assert [r["n"] for r in data["lengths"]] == [1]
    assert data["verdict"]["status"] == status
    assert (data["interrupted"], data["stopped"]) == (False, "cluster lost")
    summary = data["verdict"]["summary"]
    assert "n = 1..2 was asked for and the run was stopped: its Dask cluster was lost" in summary
    assert "interrupted" not in summary
    assert "stopped: its Dask cluster was lost" in rep.read_text()  # the report says so too


@pytest.fixture
def no_worker_scheduler() -> Iterator[Any]:
    """A real scheduler on tcp://127.0.0.1 (in this process's background loop), no workers."""
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster:
        yield cluster


def test_scheduler_without_workers_is_a_usage_error(
    no_worker_scheduler: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker from the start: exit 2 before any work, one line saying how to start one
    (it used to be "lost the cluster mid-run" and exit 130); no file, no checkpoint."""
    monkeypatch.setenv("EXACTATTN_DASK_TIMEOUT", "1")
    addr = no_worker_scheduler.scheduler_address
    out, ck = tmp_path / "r.json", tmp_path / "ck"
    t0 = time.monotonic()
    res = CliRunner().invoke(
        main,
        ["check", str(MODEL), "--max-n", "2", "-q", "--dask", addr]
        + ["--json", str(out), "--checkpoint", str(ck)],
    )
    assert 1 <= time.monotonic() - t0 < 20  # it waited the timeout for a worker to join
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output == (
        f"error: --dask {addr}: the scheduler there has no workers (none joined within 1 s); "
        f"start workers with `dask worker {addr}`, or wait longer with EXACTATTN_DASK_TIMEOUT\n"
    )
    assert not out.exists() and not ck.exists()
    # the API: a Client on that scheduler is refused the same way
    distributed = pytest.importorskip("dask.distributed")
    with distributed.Client(addr, set_as_default=False) as client:
        with pytest.raises(UsageError, match="has no workers"):
            Dask(client)


def test_a_worker_that_joins_within_the_timeout_is_waited_for(
    no_worker_scheduler: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker starting a moment after the scheduler (the usual `dask scheduler & dask
    worker` race) is not an error: the run waits for it and gives the in-process result."""
    monkeypatch.setenv("EXACTATTN_DASK_TIMEOUT", "20")
    timer = threading.Timer(0.5, no_worker_scheduler.scale, args=(1,))
    timer.start()
    ex = Dask(no_worker_scheduler.scheduler_address)
    try:
        assert ex.client.scheduler_info()["workers"]
        model = load_model(MODEL)
        res = run_check(model, max_n=3, executor=ex)
    finally:
        ex.close()
        timer.join()
    want = run_check(model, max_n=3)
    assert res.complete and res.exit_code() == 0
    assert json.dumps(res.to_json()) == json.dumps(want.to_json())


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "exactattn", *args]


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["worker", "scheduler"])
def test_cluster_killed_mid_run_then_resume(victim: str, tmp_path: Path) -> None:
    """A real scheduler and worker (subprocesses); SIGKILL one once shards of n = 6 are
    stored; the run ends in one line, exit 75, an incomplete result; resuming without the
    cluster from the checkpoint gives the fresh run's bytes."""
    dask = [str(Path(sys.executable).parent / "dask")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "EXACTATTN_SHARD_INPUTS": "256", "EXACTATTN_DASK_TIMEOUT": "3"}
    sched = _start([*dask, "scheduler", "--port", str(port), "--no-dashboard"], tmp_path / "s.log")
    worker = None
    try:
        time.sleep(3)
        worker = subprocess.Popen(
            [*dask, "worker", addr, "--nthreads", "1", "--no-dashboard", "--no-nanny"],
            stdout=(tmp_path / "w.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        time.sleep(4)
        model = ROOT / "models" / "dyck2.json"
        args = ["check", str(model), "--min-n", "5", "--max-n", "6", "-q", "--force", "--arb-only"]
        ck, out = tmp_path / "ck", tmp_path / "killed.json"
        run = subprocess.Popen(
            _cli(*args, "--dask", addr, "--checkpoint", str(ck), "--json", str(out)),
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.time() + 240
        while time.time() < deadline and len(list(ck.glob("*-n6/s*.json"))) < 2:
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            time.sleep(0.2)
        (worker if victim == "worker" else sched).send_signal(signal.SIGKILL)
        _, err = run.communicate(timeout=120)
        assert run.returncode == EXIT_CLUSTER_LOST, err  # 75 (retry), not 130 (Ctrl-C)
        assert err.strip().count("\n") == 0 and "Traceback" not in err, err
        assert err.startswith("stopped: --dask") and "rerun to resume" in err
        assert json.loads(out.read_text())["verdict"]["status"] == "incomplete"
    finally:
        for p in (worker, sched):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    subprocess.run(
        _cli(*args, "--checkpoint", str(ck), "--json", str(tmp_path / "resumed.json")),
        env=env,
        check=True,
    )
    subprocess.run(_cli(*args, "--json", str(tmp_path / "fresh.json")), env=env, check=True)
    assert (tmp_path / "resumed.json").read_bytes() == (tmp_path / "fresh.json").read_bytes()


@pytest.mark.parametrize(
    ("top", "label"),
    [
        ({"interrupted": False, "stopped": "cluster lost"}, "stopped: cluster lost"),
        ({"interrupted": True}, "interrupted"),  # Ctrl-C, and files before `stopped` existed
        ({"interrupted": False, "stopped": "\\input{/etc/passwd}"}, "stopped"),  # never echoed
        ({"interrupted": False}, None),
    ],
)
def test_the_claims_ledger_says_how_a_run_ended(top: dict, label: str | None) -> None:
    """The claims ledger's verdict column names the early end in fixed words."""
    from exactattn.report.claims import verdict_text
    from exactattn.results.views import ResultView

    data = run_check(load_model(MODEL), max_n=1).to_json()
    view = ResultView.from_json({**data, **top})
    assert view.ended_early == label
    text = verdict_text(view, "own τ")
    assert text.endswith(f"**clean** ({label})" if label else "**clean**"), text
