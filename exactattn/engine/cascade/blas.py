"""Certified midpoint-radius matrix products through BLAS (Rump's a priori bound).

``mr_matmul((Am, Ar), (Bm, Br))`` encloses every product X·Y with |X − Am| ≤ Ar and
|Y − Bm| ≤ Br (entrywise) by ``(M, R)``: M = fl(Am @ Bm) from numpy's matmul (BLAS, any
summation order, FMA or not), R an upper bound of the midpoint's rounding error plus the
propagated radii, itself computed with one more BLAS product and rounded up by explicit
factors. The lemma and its proof are in proofs/blas_bound.md; in short, with u = 2^-53,
γ_k = k·u/(1 − k·u) and inner dimension k:

    |fl(Am·Bm) − Am·Bm| ≤ γ_k·|Am|·|Bm| + k·2^-1074        (any evaluation order)

so R ≥ |Am|·(Br + γ_k|Bm|) + Ar·(|Bm| + Br) + k·2^-1074 is enough, and R is computed as
fl([|Am|, Ar'] @ [B1; B2])·F with B1 ≥ Br' + γ_k|Bm|, B2 ≥ |Bm| + Br' and F covering the
rounding of that product (γ_2k), of B1/B2 and of the final scaling. The radii are first
lifted to ``TINY`` (2^-500) wherever an entry may be nonzero (A', B'), so that every
entry where anything may be inexact has R ≥ 2^-1001 and the underflow terms (≤ 4k·2^-1074)
are covered by a relative 2^-30 in F; an entry whose terms are all exactly zero gets
M = R = 0 (structural zeros stay exact, as the interval arithmetic (interval.py) needs).

Overflow (interval.py's rule): a non-finite midpoint or radius gets an infinite radius; a
finite midpoint implies that no operation of its sum overflowed (±inf and nan propagate
through + and fma), so the error bound applies to it.

Determinism: the bound holds for every summation order, so soundness never depends on the
BLAS build, kernel or thread count — but the midpoint's last bits can. :func:`one_thread`
pins BLAS to one thread (threadpoolctl) around the callers, so a result does not depend on
OPENBLAS_NUM_THREADS or --jobs; see notes/benchmark-rounds.md ("BLAS products") for what can still
differ between machines with different BLAS kernels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

TINY = 2.0**-500  # the radius floor of interval.py (TINY² is a normal number)
_U = Fraction(1, 2**53)
MAX_K = (
    2**20
)  # inner dimensions up to this size (the underflow argument needs 4k·2^-1074 ≪ 2^-1001)


def _up(q: Fraction) -> float:
    """The smallest float ≥ q (q ≥ 0)."""
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def gamma(k: int) -> Fraction:
    """γ_k = k·u/(1 − k·u) (Higham, Lemma 3.1), exactly."""
    assert 0 < k * _U < Fraction(1, 2)
    return k * _U / (1 - k * _U)


_CONSTS: dict[int, tuple[float, float]] = {}


def constants(k: int) -> tuple[float, float]:
    """(g, F) for inner dimension k: g ≥ γ_k and the final radius factor F (rounded up).

    F ≥ (1 + 2^-30) / ((1 − γ_2k)·(1 − u)^3): 1 − γ_2k for the radius product (inner
    dimension 2k), (1 − u) for B1 (an addition after a product), one for B2, one for the
    final multiplication by F; 2^-30 for the underflow terms (proofs/blas_bound.md).
    """
    got = _CONSTS.get(k)
    if got is None:
        assert 0 < k <= MAX_K
        g = _up(gamma(k) * GAMMA_SCALE)
        f = _up((1 + Fraction(1, 2**30)) / ((1 - gamma(2 * k) * GAMMA_SCALE) * (1 - _U) ** 3))
        got = _CONSTS[k] = (g, f)
    return got


GAMMA_SCALE = Fraction(1)  # 1 in the code; tests lower it to show the bound is needed


def lift(m: np.ndarray, r: np.ndarray) -> np.ndarray:
    """r raised to ≥ TINY wherever the entry may be nonzero (|m| + r > 0); 0 stays 0.

    |m| + r ≥ 2^-1074 there, so (|m| + r)·2^600 ≥ 2^-474 > TINY (inf and nan pass through)."""
    return np.maximum(r, np.minimum((np.abs(m) + r) * 2.0**600, TINY))


def mr_matmul(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(Am ± Ar) @ (Bm ± Br), enclosed: (M, R) with |X·Y − M| ≤ R for every X, Y inside.

    Shapes as numpy's matmul (stacks allowed): A (..., m, k), B (..., k, n)."""
    am, ar = a
    bm, br = b
    k = am.shape[-1]
    assert bm.shape[-2] == k
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        mid = am @ bm
        g, f = constants(k)
        aa = np.abs(am)
        ab = np.abs(bm)
        ar1 = lift(am, ar)
        br1 = lift(bm, br)
        b1 = br1 + ab * g  # ≥ (Br' + γ_k|Bm|)(1 − u)^2 − 2^-1075(1 − u): see the proof
        b2 = ab + br1  # ≥ (|Bm| + Br')(1 − u)
        lhs = np.concatenate([aa, ar1], axis=-1)
        rhs = np.concatenate([b1, b2], axis=-2)
        rad = (lhs @ rhs) * f
        bad = ~(np.isfinite(mid) & np.isfinite(rad))
        if bad.any():
            rad = np.where(bad, np.inf, rad)
    return mid, rad


_CTL = None


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """BLAS limited to one thread inside (threadpoolctl), so midpoint bits cannot depend on
    the thread count; restored afterwards."""
    global _CTL
    try:
        # lazy: threadpoolctl is needed only on the opt-in BLAS path (EXACTATTN_BLAS=1)
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a declared dependency
        yield
        return
    if _CTL is None:
        _CTL = ThreadpoolController()
    with _CTL.limit(limits=1, user_api="blas"):
        yield
