"""Results do not depend on how the work was scheduled: one process, several, a Dask
cluster, or a run killed with SIGKILL and resumed from its checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from paths import ROOT
from strategies import models, to_json_text

from exactattn.core.errors import ExactAttnError, UsageError
from exactattn.core.jsonio import dumps
from exactattn.core.numbers import load_json_text
from exactattn.model import load_model, model_from_raw
from exactattn.run.check import run_check
from exactattn.run.executors import Checkpoint, Processes, fingerprint, make_executor

BUNDLED = ["dyck2", "ltl_counting_temperature", "induction_k1"]


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many shards even at small n, so that scheduling has something to reorder."""
    monkeypatch.setenv("EXACTATTN_SHARD_INPUTS", "16")


def _run(model, max_n: int, executor=None, **kw) -> str:
    return dumps(run_check(model, max_n=max_n, executor=executor, **kw).to_json())


@pytest.mark.parametrize("name", BUNDLED)
def test_jobs_1_and_2_give_identical_json(name: str, small_shards: None) -> None:
    model = load_model(ROOT / "models" / f"{name}.json")
    one = _run(model, 4)
    pool = Processes(2)
    try:
        two = _run(model, 4, pool)
    finally:
        pool.close()
    assert one == two
    assert json.loads(one)["lengths"][-1]["inputs"] == len(model.alphabet) ** 4


def test_local_dask_cluster_gives_identical_json(small_shards: None) -> None:
    distributed = pytest.importorskip("dask.distributed")
    model = load_model(ROOT / "models" / "dyck2.json")
    one = _run(model, 4, bounds=True)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        ex = make_executor(dask=client)
        assert _run(model, 4, ex, bounds=True) == one


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_identical_across_processes(d) -> None:
    with mock.patch.dict(os.environ, {"EXACTATTN_SHARD_INPUTS": "4"}):
        try:
            model = model_from_raw(load_json_text(to_json_text(d)))
            one = _run(model, 3)
        except ExactAttnError:
            return
        pool = Processes(2)
        try:
            assert _run(model, 3, pool) == one
        finally:
            pool.close()


def test_mismatched_checkpoint_is_refused(tmp_path: Path) -> None:
    Checkpoint(tmp_path, fingerprint("model A", {"max_n": 5}))
    Checkpoint(tmp_path, fingerprint("model A", {"max_n": 5}))  # the same job: accepted
    with pytest.raises(UsageError, match="different job.*model_sha256"):
        Checkpoint(tmp_path, fingerprint("model B", {"max_n": 5}))
    with pytest.raises(UsageError, match="different job.*settings"):
        Checkpoint(tmp_path, fingerprint("model A", {"max_n": 6}))
    fp = fingerprint("model A", {"max_n": 5})
    fp["exactattn"] = "0.0.1"
    with pytest.raises(UsageError, match="exactattn"):
        Checkpoint(tmp_path, fp)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "exactattn", *args]


def test_sigkill_mid_length_then_resume_gives_identical_json(tmp_path: Path) -> None:
    """Kill a run with SIGKILL once some shards of n = 6 are stored, resume, compare.

    ``--arb-only`` keeps a 256-input shard at a few tenths of a second: with the float filter
    the whole length now takes less than the time between noticing stored shards and the kill.
    """
    model = ROOT / "models" / "dyck2.json"
    args = ["check", str(model), "--min-n", "6", "--max-n", "6", "-q", "--force", "--arb-only"]
    env = {**os.environ, "EXACTATTN_SHARD_INPUTS": "256"}
    ck = tmp_path / "ck"
    proc = subprocess.Popen(
        _cli(*args, "--checkpoint", str(ck), "--json", str(tmp_path / "killed.json")), env=env
    )
    deadline = time.time() + 240
    while time.time() < deadline:
        if len(list(ck.glob("*/s*.json"))) >= 2:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(list(ck.glob("*/s*.json")))
    assert 2 <= stored < 16
    assert not (tmp_path / "killed.json").exists()  # nothing half-written
    subprocess.run(
        _cli(*args, "--checkpoint", str(ck), "--json", str(tmp_path / "resumed.json")),
        env=env,
        check=True,
    )
    subprocess.run(_cli(*args, "--json", str(tmp_path / "fresh.json")), env=env, check=True)
    resumed = (tmp_path / "resumed.json").read_bytes()
    assert resumed == (tmp_path / "fresh.json").read_bytes()
