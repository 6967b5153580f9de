"""Shared by the float tiers' soundness tests (test_ddtier, test_centred): a float tier's
enclosures against the arb path, word by word and layer by layer."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from exactattn import model_from_dict
from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade.batch import FloatBatch
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import CompiledModel, HardBatch
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import Temperatures

ROOT = Path(__file__).resolve().parent.parent


def random_benchmark_model(seed: int, blocks: int = 3, d: int = 16):
    """benchmarks/models.py's random model (2 heads per block), as a Model."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model  # lazy: benchmarks/ is not a package
    finally:
        sys.path.pop(0)
    return model_from_dict(random_model(d=d, blocks=blocks, heads=2, seed=seed))


def assert_meets_arb(
    cm: CompiledModel,
    hb: HardBatch,
    fb: FloatBatch,
    temps: Temperatures,
    decided: np.ndarray | None,
) -> None:
    """Per word and layer, the tier's [lo, hi] of max|δ| meets arb's (infinite upper ends
    claim nothing), and the accept decision of every word in ``decided`` equals arb's."""
    model = cm.model
    acc = LengthAccumulator(model, hb.n, None, len(model.layers))
    acc.add_hard(hb)
    wc = WeightCache(cm)
    for b, word in enumerate(hb.words):
        sr = certify_word(cm, hb, b, acc, temps, wc)
        assert sr.bounds is not None
        for li, (alo, ahi, _row) in enumerate(sr.bounds):
            lo, hi = float(fb.err_lo[b, li]), float(fb.err_hi[b, li])
            if not math.isfinite(hi):
                continue
            a_lo, _ = arb_endpoints(alo)
            _, a_hi = arb_endpoints(ahi)
            assert Fraction(lo) <= a_hi and a_lo <= Fraction(hi), (word, li, lo, hi)
        if decided is not None and decided[b] and fb.accept is not None and sr.verdict.decided:
            assert bool(fb.accept[b]) == bool(sr.verdict.value), word


def check_bytes(model: Path, n: int, out: Path, env: dict[str, str], *extra: str) -> bytes:
    """The result JSON of ``exactattn check model --min-n n --max-n n`` in a subprocess
    (the determinism tests compare these bytes across --jobs and resumes); the check must
    exit 1 (ε ≤ 1 fails on the random models: a finding, not a crash)."""
    args = [sys.executable, "-m", "exactattn", "check", str(model)]
    args += ["--min-n", str(n), "--max-n", str(n), "-q", "--json", str(out), *extra]
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    return out.read_bytes()
