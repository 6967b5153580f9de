"""BLAS midpoint-radius products (exactattn/engine/cascade/blas.py) against exact Fractions.

The lemma is in proofs/blas_bound.md. Containment is checked on random, cancellation-heavy,
huge/tiny and subnormal matrices and on interval operands; an adversarial product whose
rounding error reaches (k − 1)/k of γ_k·|A||B| shows that the γ_k factor is needed (with it
halved, containment fails); and the midpoint bits do not depend on the BLAS thread count.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import strategies as S
import test_float64_tier_vs_arb as tsf
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn import load_model
from exactattn.core.errors import ExactAttnError
from exactattn.engine.cascade import blas as bp
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import policy as pol
from exactattn.engine.temperature import BASE_PREC, Temperatures

U = 2.0**-53


def exact_product(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    k = len(b)
    return [
        [sum((r[t] * b[t][j] for t in range(k)), Fraction(0)) for j in range(len(b[0]))] for r in a
    ]


def frac(x: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(v) for v in row] for row in x.tolist()]


def contains(mid: np.ndarray, rad: np.ndarray, exact: list[list[Fraction]]) -> bool:
    for i, row in enumerate(exact):
        for j, e in enumerate(row):
            m, r = float(mid[i, j]), float(rad[i, j])
            if not (np.isfinite(m) and np.isfinite(r)):
                if np.isinf(r) or np.isnan(r):
                    continue  # an infinite radius contains everything
                return False
            if abs(Fraction(m) - e) > Fraction(r):
                return False
    return True


def point(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x, np.zeros_like(x)


def check_points(a: np.ndarray, b: np.ndarray) -> None:
    mid, rad = bp.mr_matmul(point(a), point(b))
    assert contains(mid, rad, exact_product(frac(a), frac(b)))


def test_random_and_scaled() -> None:
    rng = np.random.default_rng(0)
    for k in (1, 2, 3, 7, 16, 33):
        for scale in (1.0, 2.0**-600, 2.0**500, 2.0**-1060):
            a = rng.standard_normal((4, k)) * scale
            b = rng.standard_normal((k, 5))
            check_points(a, b)


def test_cancellation_heavy() -> None:
    """x + y − x with |x| ≫ |y|: the float midpoint loses y; the bound must cover it."""
    rng = np.random.default_rng(1)
    for k in (3, 8, 31):
        a = rng.standard_normal((5, k))
        a[:, 0] = 2.0**60
        a[:, 1] = -(2.0**60)
        b = rng.standard_normal((k, 4))
        b[0] = b[1] = 1.0 + 2.0**-30
        check_points(a, b)
        # an exactly cancelling pair plus tiny terms
        a2 = np.concatenate([a, -a], axis=1)
        b2 = np.concatenate([b, b * (1 + 2.0**-52)], axis=0)
        check_points(a2, b2)


def test_subnormals_and_extremes() -> None:
    tiny = np.array([5e-324, -5e-324, 2.0**-1050, 2.0**-1022, -(2.0**-1030), 0.0])
    a = np.array([tiny, tiny[::-1], np.array([1e300, -1e300, 1e-300, 3.0, 2.0**1000, 0.0])])
    b = np.array(
        [tiny, np.ones(6), tiny[::-1] * 2.0**900, -tiny, tiny * 2.0**1000 * 2.0**74, np.ones(6)]
    ).T
    check_points(a, b)
    check_points(a.T.copy(), a.copy())


def test_interval_operands_contain_every_product() -> None:
    rng = np.random.default_rng(2)
    for k in (2, 9):
        am = rng.standard_normal((3, k))
        ar = np.abs(rng.standard_normal((3, k))) * 1e-3
        bm = rng.standard_normal((k, 4))
        br = np.abs(rng.standard_normal((k, 4))) * 1e-5
        mid, rad = bp.mr_matmul((am, ar), (bm, br))
        for _ in range(10):
            # exact points inside the intervals (endpoints and interior points)
            sa = rng.choice([-1, 0, 1], size=am.shape)
            sb = rng.choice([-1, 0, 1], size=bm.shape)
            x = [
                [Fraction(am[i, t]) + int(sa[i, t]) * Fraction(ar[i, t]) for t in range(k)]
                for i in range(3)
            ]
            y = [
                [Fraction(bm[t, j]) + int(sb[t, j]) * Fraction(br[t, j]) for j in range(4)]
                for t in range(k)
            ]
            assert contains(mid, rad, exact_product(x, y))


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    st.integers(1, 12),
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=144, max_size=144
    ),
)
def test_hypothesis_points(k: int, vals: list[float]) -> None:
    v = np.array(vals)
    a = v[: 3 * k].reshape(3, k)
    b = v[72 : 72 + 2 * k].reshape(k, 2)
    mid, rad = bp.mr_matmul(point(a), point(b))
    assert contains(mid, rad, exact_product(frac(a), frac(b)))


def adversarial(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows (1, u(1 + 2^-40), …): each sequential addition rounds up by about u."""
    a = np.full((4, k), U * (1 + 2.0**-40))
    a[:, 0] = 1.0
    return a, np.ones((k, 4))


def adversarial_contained() -> list[bool]:
    out = []
    for k in (16, 64, 200):
        a, b = adversarial(k)
        mid, rad = bp.mr_matmul(point(a), point(b))
        out.append(contains(mid, rad, exact_product(frac(a), frac(b))))
    return out


def test_adversarial_needs_gamma_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sound with γ_k; with γ_k halved (≈ γ_{k/2}) the same products are not contained —
    so lowering the bound's factor makes this test fail."""
    a, b = adversarial(64)
    err = abs(Fraction(float((a @ b)[0, 0])) - exact_product(frac(a), frac(b))[0][0])
    if err < 40 * Fraction(U):
        pytest.skip("this BLAS does not sum the adversarial row sequentially")
    assert all(adversarial_contained())
    monkeypatch.setattr(bp, "GAMMA_SCALE", Fraction(1, 2))
    monkeypatch.setattr(bp, "_CONSTS", {})
    assert not any(adversarial_contained())


def test_structural_zeros_and_overflow() -> None:
    a = np.array([[0.0, 1.0], [0.0, 0.0]])
    b = np.array([[3.0, 0.0], [0.0, 0.0]])
    mid, rad = bp.mr_matmul(point(a), point(b))
    assert (mid == 0).all() and (rad == 0).all()  # every term is an exact zero
    a = np.array([[1e300, 1e300]])
    b = np.array([[1e10], [1e10]])
    mid, rad = bp.mr_matmul(point(a), point(b))
    assert np.isinf(mid[0, 0]) and np.isinf(rad[0, 0])
    # a finite midpoint whose radius overflows
    mid, rad = bp.mr_matmul((np.array([[1.0, -1.0]]), np.array([[1e308, 1e308]])), point(b))
    assert np.isinf(rad[0, 0])


_BITS = """
import hashlib, json, sys
import numpy as np
sys.path.insert(0, {root!r})
from exactattn.engine.cascade import blas as bp
rng = np.random.default_rng(5)
a = rng.standard_normal((300, 400)); b = rng.standard_normal((400, 300))
s = rng.standard_normal((64, 14, 40)); t = rng.standard_normal((64, 40, 14))
h = hashlib.sha256()
with bp.one_thread():
    big = bp.mr_matmul((a, abs(a) * 1e-9), (b, abs(b) * 1e-9))
    for x in big + bp.mr_matmul((s, abs(s)), (t, 0 * t)):
        h.update(np.ascontiguousarray(x).tobytes())
print(h.hexdigest())
"""


def test_thread_count_does_not_change_bits() -> None:
    code = _BITS.format(root=str(ROOT))
    digests = []
    for n in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.append(out.stdout.strip())
    assert digests[0] == digests[1]
    assert json.dumps(digests) and hashlib  # both ran


def test_check_json_identical_across_blas_threads(tmp_path: Path) -> None:
    """Whole checks (float filter with BLAS score products, arb for the rest) write the same
    bytes with one and two BLAS threads; and without BLAS products only the last bits of
    float enclosures may differ (here: the same verdicts and decisions)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import random_model

    model = tmp_path / "random.json"
    model.write_text(json.dumps(random_model(d=8, blocks=2, heads=2, seed=3)))
    outs = []
    verdicts = []
    for n, blas in (("1", "1"), ("2", "1"), ("2", "0")):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, EXACTATTN_BLAS=blas)
        out = tmp_path / f"r{n}{blas}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "exactattn",
                "check",
                str(model),
                "--max-n",
                "5",
                "--tau",
                "1/n",
                "--json",
                str(out),
                "-q",
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        outs.append(hashlib.sha256(out.read_bytes()).hexdigest())
        verdicts.append(json.loads(out.read_text())["verdict"])
    assert outs[0] == outs[1]
    assert verdicts[0] == verdicts[2]


# ----------------------------------------------------------------------------------------
# the float filter with BLAS score products (EXACTATTN_BLAS=1) against arb


@pytest.mark.parametrize("name", ["dyck2", "ltl_since_until_temperature", "induction_k2"])
def test_filter_with_blas_contains_arb(name: str) -> None:
    model = load_model(ROOT / "models" / f"{name}.json")
    with pol.blas_products(True):
        settled, total = tsf.compare(model, tsf.BUNDLED[name])
    assert settled == total


def _blas_sweep(d: dict) -> None:
    """One random model (tests/strategies.py) at every length, BLAS score products, vs arb."""
    model = tsf._random_model(d)
    assume(model is not None)
    with pol.blas_products(True):
        for n in range(max(1, model.min_length), S.MAX_N + 1):
            try:
                model.check_length(n)
                Temperatures(model, None).at(n, BASE_PREC)
            except ExactAttnError:
                return
            tsf.compare(model, n)


@settings(max_examples=40, **tsf.SETTINGS)
@given(S.models())
def test_filter_with_blas_random_models(d: dict) -> None:
    _blas_sweep(d)


@pytest.mark.slow
@settings(max_examples=1000, **tsf.SETTINGS)
@given(S.models())
def test_filter_with_blas_random_models_many(d: dict) -> None:
    """The issue's soundness sweep: 1,000 random models with BLAS score products vs arb."""
    _blas_sweep(d)


def test_blas_scores_are_enclosed_in_fixed_order_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both δs enclosures contain the true δs, so they intersect; the BLAS radius (γ_n) is
    never wider than the fixed-order one ((n + 2)·2u per term) by more than the floor."""
    rng = np.random.default_rng(7)
    B, R, T, n = 6, 5, 7, 9
    pairs = []
    for _ in range(n):
        x = (rng.standard_normal((B, R)), np.abs(rng.standard_normal((B, R))) * 1e-12)
        y = (rng.standard_normal((B, T)), np.abs(rng.standard_normal((B, T))) * 1e-12)
        pairs.append((x, y))
    m1, r1 = iv._outer_sum_fixed(pairs)
    m2, r2 = iv._outer_sum_blas(pairs)
    assert m1.shape == m2.shape == (B, T, R)
    assert (np.abs(m1 - m2) <= r1 + r2).all()
    assert (r2 <= r1 * (1 + 2.0**-20)).all()


def test_the_blas_switch_travels_with_the_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A job made with BLAS products uses them in every shard whatever the worker's own
    environment says, and a checkpoint records the choice (resuming with the other choice
    recomputes rather than mixing bits)."""
    from dataclasses import replace

    from exactattn.run.executors import Checkpoint, fingerprint
    from exactattn.run.shard import LengthJob, Shard, check_shard

    def job(blas: bool) -> LengthJob:
        return LengthJob(model, 4, None, False, policy=replace(pol.current(), blas=blas))

    calls: list[int] = []
    real = iv._outer_sum_blas

    def spy(pairs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(pairs)

    monkeypatch.setattr(iv, "_outer_sum_blas", spy)
    model = load_model(ROOT / "models" / "dyck2.json")
    shard = Shard(4, 0, 0, 16)
    off = check_shard(job(False), shard)
    assert calls == []
    on = check_shard(job(True), shard)
    assert calls and pol.blas_on() is pol.DEFAULT.blas  # restored after the shard
    assert on.to_json() == off.to_json()  # Dyck-2: the same reported values either way
    ck = Checkpoint(tmp_path / "ck", fingerprint("dyck2", {}))
    try:
        ids = [ck.identity(job(b), shard) for b in (False, True)]
    finally:
        ck.close()
    assert ids[0]["blas"] is False and ids[1]["blas"] is True
    assert {k: v for k, v in ids[0].items() if k != "blas"} == {
        k: v for k, v in ids[1].items() if k != "blas"
    }
