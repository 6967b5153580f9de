"""The coarse float tier gives the same bits on every machine (engine/coarse.py;
notes/benchmark-rounds.md,
"Coarse tier: built", determinism): its default products are fixed-order elementwise IEEE
operations, so neither the BLAS kernel nor numpy's CPU dispatch can change which words it
settles. Each run below is a subprocess with another OpenBLAS kernel (``OPENBLAS_CORETYPE``):
a plain numpy matrix product first shows that the kernels really differ on this machine (with
BLAS products the tier's bits differed between them), then the tier's whole FloatBatch, with
the exact first layer and without it, and a chained ``check`` must be byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT
from tiers_vs_arb import assert_meets_arb

from exactattn import model_from_dict
from exactattn.engine.cascade import coarse as co
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import policy as pol
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length

# kernels of OpenBLAS's DYNAMIC_ARCH builds that sum a product in different orders (numpy's
# bundled OpenBLAS 0.3.31 on x86-64: Haswell, Nehalem and Prescott give three different results
# for the canary product below)
CORETYPES = ("Haswell", "Nehalem", "Prescott")

_SCRIPT = r"""
import dataclasses, hashlib, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/tests")
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from models import random_model
from exactattn import model_from_dict
from exactattn.engine.cascade import coarse as co
from exactattn.engine.cascade.interval import tau_enclosures
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length

def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        if a is not None:
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()

rng = np.random.default_rng(0)
a, b = rng.standard_normal((40, 12, 37)), rng.standard_normal((37, 23))
out = {"canary": digest([a @ b])}
for seed, blocks, n in ((0, 4, 8), (1, 3, 7)):
    m = model_from_dict(random_model(d=16, blocks=blocks, heads=2, seed=seed))
    cm = CompiledModel(m)
    taus = tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    hb = run_hard(cm, list(words_of_length(m.alphabet, n)), n)
    for first in (True, False):
        co.EXACT_FIRST = first
        fb = co.certify_coarse(cm, hb, taus)
        fields = [getattr(fb, f.name) for f in dataclasses.fields(fb)]
        out[f"coarse-{seed}-{first}"] = digest(fields)
print(json.dumps(out))
"""


def _env(core: str) -> dict[str, str]:
    env = {**os.environ, "OPENBLAS_CORETYPE": core, "OPENBLAS_NUM_THREADS": "1"}
    for k in ("EXACTATTN_BLAS", "EXACTATTN_COARSE", "EXACTATTN_SHARD_INPUTS"):
        env.pop(k, None)
    return env


def _tier_bits(core: str) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT)], capture_output=True, text=True, env=_env(core)
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _check_bytes(core: str, model: Path, out: Path) -> bytes:
    args = [sys.executable, "-m", "exactattn", "check", str(model), "--min-n", "6"]
    args += ["--max-n", "7", "-q", "--json", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True, env=_env(core))
    assert proc.returncode == 1, proc.stderr  # ε ≤ 1 fails: a finding, not a crash
    return out.read_bytes()


def test_coarse_bits_do_not_depend_on_the_blas_kernel(tmp_path: Path) -> None:
    runs = {core: _tier_bits(core) for core in CORETYPES}
    canaries = {r["canary"] for r in runs.values()}
    if len(canaries) == 1:  # e.g. a numpy without OpenBLAS's DYNAMIC_ARCH kernels
        pytest.skip("OPENBLAS_CORETYPE does not change numpy's matmul bits on this machine")
    first = runs[CORETYPES[0]]
    for core in CORETYPES[1:]:
        for key, val in runs[core].items():
            if key != "canary":
                assert val == first[key], (core, key)
    # the chain: coarse-settled counts and enclosures reported by check
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model
    finally:
        sys.path.pop(0)
    model = tmp_path / "m.json"
    model.write_text(json.dumps(random_model(d=16, blocks=4, heads=2, seed=0)))
    outs = {core: _check_bytes(core, model, tmp_path / f"{core}.json") for core in CORETYPES}
    rec = json.loads(outs[CORETYPES[0]])
    assert sum(length["float_settled"] for length in rec["lengths"]) > 0
    for core in CORETYPES[1:]:
        assert outs[core] == outs[CORETYPES[0]], core


@pytest.mark.parametrize("exact_first", [True, False])
def test_opt_in_blas_products_meet_arb(monkeypatch, exact_first: bool) -> None:
    """The opt-in BLAS variant (``EXACTATTN_BLAS=1``: numpy ``@``/``einsum``, sound in any
    order) still encloses arb's errors and decides read-outs as arb does, on random models at
    n = 4–5, and differs from the default only in last bits (both enclose the same values)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model  # lazy: benchmarks/ is not a package
    finally:
        sys.path.pop(0)

    monkeypatch.setattr(co, "EXACT_FIRST", exact_first)
    decided = 0
    for seed in range(4):
        m = model_from_dict(random_model(d=8 + 4 * (seed % 2), blocks=1 + seed % 3, seed=seed))
        n = 4 + seed % 2
        cm, temps = CompiledModel(m), Temperatures(m, None)
        taus = iv.tau_enclosures(temps.at(n, BASE_PREC))
        hb = run_hard(cm, list(words_of_length(m.alphabet, n))[:40], n)
        with pol.blas_products(True):
            fb = co.certify_coarse(cm, hb, taus)
        with pol.blas_products(False):
            ff = co.certify_coarse(cm, hb, taus)
        assert fb is not None and ff is not None
        assert_meets_arb(cm, hb, fb, temps, fb.read)
        assert (fb.err_lo <= ff.err_hi).all() and (ff.err_lo <= fb.err_hi).all()
        decided += int(fb.read.sum())
    assert decided > 50


@pytest.mark.parametrize("blas", [False, True])
def test_checkpoint_identity_records_the_products(tmp_path: Path, blas: bool) -> None:
    """Shards made with the coarse tier carry ``coarse_version: 3`` (fixed-order products
    unless ``blas``, the words it leaves to the centred tier first): shards of its first
    version (BLAS products always, other bits, no key) and of version 2 (certify_float
    first) are recomputed on resume rather than mixed in."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model  # lazy: benchmarks/ is not a package
    finally:
        sys.path.pop(0)
    model = tmp_path / "m.json"
    model.write_text(json.dumps(random_model(d=16, blocks=4, heads=2, seed=0)))
    env = _env("Haswell")
    if blas:
        env["EXACTATTN_BLAS"] = "1"
    ck = tmp_path / "ck"
    args = [sys.executable, "-m", "exactattn", "check", str(model), "--min-n", "5"]
    args += ["--max-n", "5", "-q", "--checkpoint", str(ck)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    shards = sorted(ck.glob("*-n5/s*.json"))
    assert shards
    for p in shards:
        ident = json.loads(p.read_text())["identity"]
        assert ident["coarse_tier"] is True and ident["blas"] is blas
        assert ident["coarse_version"] == 3
