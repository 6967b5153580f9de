"""Damaged, foreign, tampered and shared checkpoints (issue 27, item 8).

A resume must never trust a shard file it cannot verify and never crash on one: each kind of
damage below is recomputed, said so in one stderr line, and the result is byte-identical to a
fresh run. A second run on a directory in use exits 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import dumps
from exactattn.model import load_model
from exactattn.model.provenance import model_sha256
from exactattn.run.check import run_check
from exactattn.run.executors import Checkpoint, InProcess, fingerprint

MODEL = ROOT / "models" / "dyck2.json"
SETTINGS = {"max_n": 4}


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXACTATTN_SHARD_INPUTS", "16")  # n = 4: 256 inputs in 16 shards


def _run(ck_dir: Path | None, notices: list[str] | None = None) -> str:
    model = load_model(MODEL)
    ck = None
    if ck_dir is not None:
        fp = fingerprint(model_sha256(model), SETTINGS)
        ck = Checkpoint(ck_dir, fp, notice=(notices.append if notices is not None else None))
    try:
        return dumps(run_check(model, max_n=4, executor=InProcess(ck)).to_json())
    finally:
        if ck is not None:
            ck.close()


def _shard_dir(ck: Path, n: int) -> Path:
    (d,) = [p for p in ck.iterdir() if p.is_dir() and p.name.endswith(f"-n{n}")]
    return d


def _redigest(data: dict) -> None:
    """What a careless editor would do: fix the digest after changing the record."""
    text = json.dumps(
        [data["identity"], data["record"]], sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    data["sha256"] = hashlib.sha256(text.encode()).hexdigest()


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


DAMAGE = {
    "empty object": lambda d4, d3: (d4 / "s0.json").write_text("{}"),
    "binary garbage": lambda d4, d3: (d4 / "s1.json").write_bytes(bytes(range(256)) * 3),
    "truncated": lambda d4, d3: (d4 / "s2.json").write_text((d4 / "s2.json").read_text()[:100]),
    "deep nesting": lambda d4, d3: (d4 / "s3.json").write_text("[" * 100_000),
    "another length": lambda d4, d3: (d4 / "s4.json").write_text((d3 / "s0.json").read_text()),
    "duplicated shard": lambda d4, d3: (d4 / "s5.json").write_text((d4 / "s6.json").read_text()),
    "edited inputs": lambda d4, d3: _edit(
        d4 / "s7.json", lambda d: d["record"].__setitem__("inputs", 1055)
    ),
    "edited inputs, digest redone": lambda d4, d3: _edit(
        d4 / "s8.json", lambda d: (d["record"].__setitem__("inputs", 1055), _redigest(d))
    ),
    "old format (bare record)": lambda d4, d3: (d4 / "s10.json").write_text(
        json.dumps(json.loads((d4 / "s10.json").read_text())["record"])
    ),
    "record not an object": lambda d4, d3: _edit(
        d4 / "s11.json", lambda d: d.__setitem__("record", [1, 2])
    ),
    "empty file": lambda d4, d3: (d4 / "s12.json").write_text(""),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_shard_is_recomputed(kind: str, tmp_path: Path, small_shards: None) -> None:
    fresh = _run(None)
    ck = tmp_path / "ck"
    assert _run(ck) == fresh
    DAMAGE[kind](_shard_dir(ck, 4), _shard_dir(ck, 3))
    notices: list[str] = []
    resumed = _run(ck, notices)
    assert resumed == fresh
    assert len(notices) == 1 and "recomputing 1 shard(s) of n=4" in notices[0], notices
    assert "\n" not in notices[0]
    # the recomputed shard was stored again, verified: a second resume says nothing
    notices.clear()
    assert _run(ck, notices) == fresh
    assert notices == []


def test_shard_copied_over_another_is_not_trusted(tmp_path: Path, small_shards: None) -> None:
    """The audit's case: a copied shard made the replaced inputs go unchecked, 'clean'."""
    fresh = _run(None)
    ck = tmp_path / "ck"
    _run(ck)
    d4 = _shard_dir(ck, 4)
    for i in range(1, 16):
        (d4 / f"s{i}.json").write_text((d4 / "s0.json").read_text())
    notices: list[str] = []
    assert _run(ck, notices) == fresh
    assert "recomputing 15 shard(s)" in notices[0] and "12 more" in notices[0]
    assert json.loads(fresh)["lengths"][-1]["inputs"] == 256


def test_every_shard_file_verifies_and_names_its_identity(
    tmp_path: Path, small_shards: None
) -> None:
    ck = tmp_path / "ck"
    _run(ck)
    data = json.loads((_shard_dir(ck, 4) / "s3.json").read_text())
    assert data["format"] == "exactattn-shard/1"
    ident = data["identity"]
    assert ident["n"] == 4 and ident["shard"] == {"index": 3, "start": 48, "stop": 64}
    assert ident["model_sha256"] == model_sha256(load_model(MODEL))  # the content digest
    assert ident["max_prec"] > 0 and ident["float_filter"] is True and ident["tau"] is None
    text = json.dumps(
        [ident, data["record"]], sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    assert data["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_damaged_manifest_is_exit_2_not_a_crash(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    Checkpoint(ck, fingerprint("m", SETTINGS)).close()
    for bad in (b"\xff\xfe garbage", b"[" * 50_000, b"{}", b'{"format": 3}'):
        (ck / "manifest.json").write_bytes(bad)
        with pytest.raises(UsageError, match="--checkpoint"):
            Checkpoint(ck, fingerprint("m", SETTINGS))
    (ck / "manifest.json").unlink()
    Checkpoint(ck, fingerprint("m", SETTINGS)).close()  # the lock was released each time


def test_directory_in_use_is_refused_in_process(tmp_path: Path) -> None:
    first = Checkpoint(tmp_path / "ck", fingerprint("m", SETTINGS))
    try:
        with pytest.raises(UsageError, match="in use by another run"):
            Checkpoint(tmp_path / "ck", fingerprint("m", SETTINGS))
    finally:
        first.close()
    Checkpoint(tmp_path / "ck", fingerprint("m", SETTINGS)).close()


def test_second_run_on_a_held_directory_exits_2(tmp_path: Path) -> None:
    """Another process holds the lock: the CLI says so in one line, exit 2, writes nothing;
    a leftover lock file of a finished (or killed) run does not block."""
    ck = tmp_path / "ck"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from exactattn.run.executors import Checkpoint, fingerprint;"
            f"c = Checkpoint({str(ck)!r}, fingerprint('x', {{}}));"
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        args = [sys.executable, "-m", "exactattn", "check", str(MODEL), "--max-n", "2", "-q"]
        out = tmp_path / "r.json"
        proc = subprocess.run(
            [*args, "--checkpoint", str(ck), "--json", str(out)], capture_output=True, text=True
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().count("\n") == 0
        assert "in use by another run" in proc.stderr and not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died (SIGKILL): its lock went with it; the stale lock file does not block,
    # but the holder's manifest (another model) is refused as before
    proc = subprocess.run(
        [*args, "--checkpoint", str(ck), "--json", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "different job" in proc.stderr, proc.stderr
    os.unlink(ck / "manifest.json")
    proc = subprocess.run(
        [*args, "--checkpoint", str(ck), "--json", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------------------
# issue 37: the four switches of LengthJob (float_filter, dd_tier, centred_tier, coarse_tier,
# blas) became one cascade Policy; checkpoints made before must still resume

# SHA-256 of the 33 identities below, as main 16ffea5 wrote them (json.dumps of each, in the
# order a shard file stores its keys), with the same switches given as LengthJob's booleans
IDENTITIES_16FFEA5 = "acbf60c9f884320454aba4a98a5d75753408dfc6c87e3093a0a4b725d8b23bd9"
OLD_CHECKPOINT = ROOT / "tests" / "data" / "checkpoint_16ffea5"  # Dyck-1, n ≤ 4, main 16ffea5
# SHA-256 of models/dyck1.json's text at 16ffea5 (`git show 16ffea5:models/dyck1.json`)
DYCK1_TEXT_16FFEA5 = "f34dd9af0b5c8dfb58bda7016a9c73745f9556263a2785036f2f42d6cdae3946"


def test_shard_identities_are_byte_identical_to_before_the_policy(tmp_path: Path) -> None:
    """Every combination of the cascade's switches gives the shard identity main 16ffea5 gave
    the same switches, byte for byte (key order included): a resumed run finds its shards."""
    import itertools

    from exactattn.engine.cascade.policy import Policy
    from exactattn.inputs import Shard
    from exactattn.run.shard import LengthJob

    model = load_model(ROOT / "models" / "dyck1.json")
    fp = {"model_sha256": "m", "settings": {"max_n": 4}, "shard_inputs": 4096, "exactattn": "v"}
    ck = Checkpoint(tmp_path / "ck", fp)
    try:
        out = []
        for ff, dd, ce, co, bl in itertools.product([False, True], repeat=5):
            policy = Policy(floats=ff, coarse=co, centred=ce, dd=dd, blas=bl)
            job = LengthJob(model, 4, None, False, policy=policy)
            out.append(json.dumps(ck.identity(job, Shard(4, 1, 16, 32))))
        job = LengthJob(model, 4, None, True, policy=Policy())
        out.append(json.dumps(ck.identity(job, Shard(4, 0, 0, 16))))
    finally:
        ck.close()
    assert hashlib.sha256("\n".join(out).encode()).hexdigest() == IDENTITIES_16FFEA5


def test_a_checkpoint_made_before_the_policy_resumes(tmp_path: Path) -> None:
    """The shard files main 16ffea5 wrote (tests/data/checkpoint_16ffea5: Dyck-1, n ≤ 4, the
    default switches) load as verified records, none rejected, each the record computed now."""
    import shutil

    from exactattn.core.jsonio import read_json
    from exactattn.engine.cascade.policy import Policy
    from exactattn.inputs import Shard
    from exactattn.model import model_from_dict
    from exactattn.run.shard import LengthJob, check_shard

    d = tmp_path / "ck"
    shutil.copytree(OLD_CHECKPOINT, d)
    path = ROOT / "models" / "dyck1.json"
    fp = read_json(d / "manifest.json")["fingerprint"]
    # the manifest names models/dyck1.json by its text's SHA-256 at 16ffea5; since issue 41 a
    # checkpoint names the model's content digest, and the file gained built_by: a new run on
    # this directory is refused (exit 2), but its shards, read with their own manifest, verify
    assert fp["model_sha256"] == DYCK1_TEXT_16FFEA5
    # the model as it was then: without Theorem S's claims (issue 35), whose measurement a
    # record of today's model carries as ``chain_measured``
    raw = json.loads(path.read_text(encoding="utf-8"))
    for key in ("coordinate_ranges", "head_profiles"):
        del raw["claims"][key]
    model = model_from_dict(raw)
    files = sorted(d.glob("*-n*/s*.json"))
    assert len(files) == 4
    ck = Checkpoint(d, fp)
    try:
        for f in files:
            ident = json.loads(f.read_text())["identity"]
            s = ident["shard"]
            shard = Shard(ident["n"], s["index"], s["start"], s["stop"])
            job = LengthJob(model, ident["n"], None, False, policy=Policy())
            rec = ck.load(job, shard)
            assert rec is not None, ck.rejected
            assert rec.to_json(exact=True) == check_shard(job, shard).to_json(exact=True)
        assert ck.rejected == []
    finally:
        ck.close()
