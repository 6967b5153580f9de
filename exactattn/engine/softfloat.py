"""Soft meaning, certified, for a whole batch: float64 midpoint-radius intervals.

Same *hard + δ* formulation as :mod:`exactattn.engine.soft` (read its docstring), but δ is
evaluated for every word of a :class:`~exactattn.engine.hard.HardBatch` at once with numpy,
so a word costs tens of microseconds instead of a millisecond. Every number is an
enclosure ``mid ± rad`` (the real interval [mid − rad, mid + rad]). :func:`certify_float`
says which words the floats settle; the others go to the double-double tier
(:func:`second_tier`, :mod:`exactattn.engine.ddtier`) and what that leaves to the arb path.

Why the enclosures are sound (u = 2^-53, IEEE binary64, round to nearest):

* + − × / are correctly rounded: |fl(x∘y) − x∘y| ≤ u·|fl(x∘y)|, or ≤ 2^-1075 when the
  result underflows. A sum that rounds to zero, or to a subnormal, is exact (Hauser).
  Radii are sums and products of non-negative numbers, so computing them loses at most
  a relative u per operation.
* So each basic operation adds ``WIDEN`` (2^-50 = 8u) times the midpoint magnitude and
  multiplies the radius by (1 + WIDEN); a K-term sum (weights, keys) adds
  (K + 2)·``SUM_U`` (2^-52 = 2u per term) instead, which also covers the float weights
  (within u of the exact rational ones). Exact rationals become floats with relative
  error ≤ 3u < ``CONV`` (2^-50).
* Exact zeros are structural: an entry is exactly 0 iff mid = rad = 0, and every entry
  that may be nonzero has rad ≥ ``TINY`` (2^-500). TINY² is still a normal number, so a
  product of two possibly-nonzero entries has a positive radius, which is raised to TINY
  (:func:`floor_rad`) — far above the ≤ 2^-1074 any underflow loses. Weight sums cannot
  underflow: nonzero weights are checked to lie in [2^-100, 2^100] (otherwise no word is
  settled). So [0, 0] stays [0, 0] exactly where the arb path gets exact zeros (δ = 0
  when all visible scores tie), and an underflowing δ is still enclosed, by [0, ~TINY],
  which meets the reporting rule ``lo = 0, hi ≤ 1e-40``.
* exp and expm1 are our own (:func:`_exp`, :func:`_expm1`), built from correctly rounded
  operations only, so results are bit-identical on every machine (numpy's exp dispatches
  to CPU-specific SIMD kernels) and in every batching. exp: x = (32q + j)·ln2/32 + r,
  |r| ≤ ln2/64 (Cody–Waite, two-float ln2/32), 2^(j/32) from a table of correctly rounded
  values, a degree-6 Taylor polynomial (truncation < 2^-58), ``ldexp``. The reduced r is
  off by ≤ u(|x| + 2), Horner loses ≤ 12u, table entry and product u each: relative error
  ≤ u(|x| + 17). expm1: its Taylor series (degree 16, ≤ 41u) for |x| < 1/4, else exp − 1
  (which magnifies exp's error by ≤ 4.6). The bound we *use* is much larger:
  ``EXP_ERR + EXP_ERR_X·|x|`` = 2^-42 + 2^-46·|x| (tests/test_softfloat.py checks 4× that
  margin against arb), plus 2^-1074 absolutely in the subnormal range (covered by TINY).
* exp(m ± r) lies within exp(m)·(r + r²) of exp(m) for r ≤ 1, and expm1(m ± r) within
  e^m (r + r²) of expm1(m); wider arguments give an infinite radius (not settled).
* Decisions compare floats that are exact endpoints: ``mid > rad`` means mid − rad > 0.
* Overflow. The bounds above are for finite results: past the float range an operation
  returns ±inf (and inf − inf, 0·inf give nan), about whose exact value the error bound
  says nothing. The rule: a midpoint that is not finite has an infinite (or nan) radius.
  add, sub, mul, div and the scalings get it for free (their radii contain |m|·WIDEN);
  where a radius is built from the operands' sizes instead (:func:`outer_sum`,
  :func:`_dot_keys`, :func:`_dot_exact`, :func:`_sum_keys`, :func:`lin`, longsoft's sums) a
  sum can overflow while its radius stays finite — (±inf, finite) is no real interval — so
  :func:`guard` sets the radius to inf there. An infinite enclosure is trivially sound, but
  only if nothing reads a claim out of it, and IEEE comparisons do (inf ≥ inf is true): so
  every test requires a finite midpoint and radius (:func:`finite`) and otherwise answers
  "cannot tell" — the ReLU sign tests (:func:`mr_relu`, the keep/kill tests of the FFNs),
  certain positivity in :func:`div`/:func:`recip`, exp's argument test, :func:`abs_bounds`
  ([0, inf]), the ε ≤ 1 test and all three read-outs (accept, argmax, value). Such a word
  is not settled and goes to arb. tests/test_float_overflow.py: models whose activations
  reach 10^308 decide as ``--arb-only`` does, and do not without these checks.

Tightness (so that words settle, not for soundness):

* Feed-forward layers track every hidden unit's δ as an exact *integer* combination of
  the input δ columns while its ReLU is certainly in its linear (or zero) range, so the
  "rounding gadgets" of the constructions, which subtract a coordinate and add it back,
  give exactly 0 instead of ± the width of δ (:func:`ffn_linear`).
* Σ_j δα_ij = 0, so δα·v is computed as Σ_j δα_ij (v_j − v_ref(i)): keys with the
  reference value drop out exactly.
* Rows whose scores move by ≥ τ use softmax − hard directly, as soft.py does.

Determinism: only elementwise operations; every sum is a Python loop over the small
inner dimension (weights, keys) in a fixed order — no BLAS, no numpy float sums. (The one
exception is opt-in: ``EXACTATTN_BLAS=1`` computes the score perturbations in
:func:`outer_sum` with BLAS and Rump's order-independent bound, proofs/blas_bound.md — sound
in any order, bit-identical for any thread count, but its last bits depend on the BLAS kernel
of the machine; docs/scale.md, "BLAS products".) A word's
numbers do not depend on the order of the batch, but the *last bits* of its enclosures can
depend on which other words share its batch: work is skipped for δ columns that are exactly
zero for the whole batch (a head where nothing moves, an FFN coefficient that vanishes),
and a zero term that is kept still widens a radius by an ulp. The batches of a shard are
fixed by the shard layout (EXACTATTN_SHARD_INPUTS, recorded in checkpoints), so a result
never depends on how shards were scheduled; the bundled models give the same bits in every
batching (tests/test_softfloat.py), and tests/test_results_merge.py allows the difference.
"""

from __future__ import annotations

import contextvars
import ctypes
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, ctx

from exactattn.core.numbers import arb_endpoints
from exactattn.engine.blasprod import mr_matmul, one_thread
from exactattn.engine.ddtier import dd_deltas
from exactattn.engine.ddtier import to_mr as dd_to_mr
from exactattn.engine.hard import (
    CompiledFFN,
    CompiledModel,
    HardBatch,
    HeadTrace,
    LayerTrace,
    Sharing,
    prefix_sharing,
    read_output,
    rows_alike,
)
from exactattn.engine.ratarray import RatArray
from exactattn.model import AcceptOutput, ArgmaxOutput, ValueOutput

WIDEN = 2.0**-50  # relative slack per basic operation (≥ 8u; monkeypatched to 0 by a test)
SUM_U = 2.0**-52  # per-term relative slack of a K-term sum: (K + 2)·SUM_U ≥ (K + 1)·u
TINY = 2.0**-500  # radius floor of every possibly-nonzero entry (TINY² is still normal)
SLACK = 2.0**-30  # relative slack of the exp/expm1 derivative bounds
CONV = 2.0**-50  # relative error bound of an exact rational converted to float (≤ 3u)
EXP_ERR = 2.0**-42  # exp/expm1 relative error bound: constant part
EXP_ERR_X = 2.0**-46  # ... and per unit |x|
WEIGHT_MIN = 2.0**-100
WEIGHT_MAX = 2.0**100
USE_BLAS = os.environ.get("EXACTATTN_BLAS", "") == "1"  # BLAS score products (docs/scale.md)
# the switch in force for the products being computed: a job sets it for its shards (the
# client's EXACTATTN_BLAS travels with the job, so every worker of a run does the same); a
# ContextVar, so threads of one Dask worker running different jobs do not see each other's
_BLAS_ON = contextvars.ContextVar("exactattn_blas", default=USE_BLAS)


def blas_on() -> bool:
    """Whether BLAS products are in force here (``EXACTATTN_BLAS=1`` or :func:`blas_products`):
    the switch other tiers (engine/coarse.py) read for their own products."""
    return _BLAS_ON.get()


@contextmanager
def blas_products(on: bool) -> Iterator[None]:
    """Compute score perturbations with BLAS (``on``) or in fixed order, inside the block."""
    token = _BLAS_ON.set(on)
    try:
        yield
    finally:
        _BLAS_ON.reset(token)


# the rows with large score perturbations (|δs/τ| ≥ 1): softfloat's own direct softmax by
# default; the centred tier (engine/centred.py) computes them in its own sound way
_BIG_ROWS: contextvars.ContextVar[Callable[..., None] | None] = contextvars.ContextVar(
    "exactattn_big_rows", default=None
)


@contextmanager
def big_rows(fn: Callable[..., None]) -> Iterator[None]:
    """Inside the block, attention rows with |δs/τ| ≥ 1 are computed by ``fn(tr, ds, inv_tau,
    big, da)`` (it overwrites δα on the rows ``big``, as :func:`_direct_rows` does)."""
    token = _BIG_ROWS.set(fn)
    try:
        yield
    finally:
        _BIG_ROWS.reset(token)


def _tune_malloc() -> bool:
    """Keep freed array memory in the process (glibc): bit-for-bit nothing changes, but the
    float tier's ~1 MB temporaries stop costing page faults.

    glibc serves allocations above a threshold (128 KiB, raised dynamically) with fresh
    mmap pages and returns heap tops above M_TRIM_THRESHOLD to the system, so nearly every
    temporary of a (1024 words × 13 × 13) batch was first-touch page faults: ≈ 75,000 per
    4,096 words of the random benchmark model, ≈ 20% of the float64 tier's CPU time
    (docs/scale.md, "Cheaper float64 tier"). Arrays below 32 MiB now come from the heap and
    up to 64 MiB of free heap top is kept. Linux/glibc only; ``EXACTATTN_MALLOC=0`` leaves
    the allocator alone. Returns whether the settings were applied."""
    if os.environ.get("EXACTATTN_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    ok = mallopt(m_mmap_threshold, 32 << 20) == 1
    return mallopt(m_trim_threshold, 64 << 20) == 1 and ok


_MALLOC: list[bool] = []  # [whether applied], once the first batch is certified


def malloc_tuned() -> bool:
    """:func:`_tune_malloc` once per process, at the first :func:`certify_float` (not at
    import: a notebook that only builds or loads models keeps its allocator as it was)."""
    if not _MALLOC:
        _MALLOC.append(_tune_malloc())
    return _MALLOC[0]


TIGHT_REL_F = float(np.nextafter(1e-6, 0))  # < 1e-6 exactly
ZERO_UPPER_F = float(np.nextafter(1e-40, 0))  # < 1e-40 exactly
assert Fraction(TIGHT_REL_F) < Fraction(1, 10**6) and Fraction(ZERO_UPPER_F) < Fraction(1, 10**40)

MR = tuple[np.ndarray, np.ndarray]  # (mid, rad)
Cols = dict[int, MR]  # δ as columns: absent = exactly zero for every word and slot


# ---------------------------------------------------------------------------------------
# exp / expm1, deterministic
# ---------------------------------------------------------------------------------------

_LN2 = Fraction(
    "0.6931471805599453094172321214581765680755001343602552541206800094933936219696947156"
)
_C_HI = float(_LN2 / 32)  # ln 2 / 32, split in two floats (Cody–Waite)
_C_LO = float(_LN2 / 32 - Fraction(_C_HI))
_INV_C = float(32 / _LN2)
_EXP_C = [float(Fraction(1, math.factorial(i))) for i in range(7)]  # 1/i!, i = 0..6
_EXPM1_C = [float(Fraction(1, math.factorial(i + 1))) for i in range(16)]  # 1/(i+1)!


def _pow2_32() -> np.ndarray:
    """2^(j/32), j = 0..31, correctly rounded (from 120-bit arb balls)."""
    saved = ctx.prec
    ctx.prec = 120
    try:
        vals = []
        for j in range(32):
            lo, hi = arb_endpoints(arb(2) ** (arb(j) / 32))
            f = float((lo + hi) / 2)
            assert abs(Fraction(f) - (lo + hi) / 2) <= Fraction(f) * Fraction(1, 2**52)
            vals.append(f)
    finally:
        ctx.prec = saved
    return np.array(vals)


_EXP_TAB = _pow2_32()


def _exp(x: np.ndarray) -> np.ndarray:
    """e^x within EXP_ERR + EXP_ERR_X·|x| relative (2^-1074 absolute when subnormal).

    x = (32q + j)·ln2/32 + r with |r| ≤ ln2/64; e^x = 2^q · 2^(j/32) · p(r), p the degree-6
    Taylor polynomial (truncation < 2^-58). Errors: r is off by ≤ u(|x| + 2), Horner loses
    ≤ 12u, the table entry and the product u each: ≤ u(|x| + 17) ≪ the bound used.

    Every x ≤ −760 (−inf too) is clipped to −760 first, so its result is that of −760
    (``_EXP_LOW``, 0): where most entries are that low (the weights of far-from-top keys)
    only the others go through the polynomial — the same bits, fewer operations."""
    if x.size >= 4096:
        low = x <= -760.0
        nlow = int(np.count_nonzero(low))
        if nlow * 4 >= x.size:
            out = np.full(x.shape, _EXP_LOW)
            if nlow < x.size:
                keep = ~low
                out[keep] = _exp_all(x[keep])
            return out
    return _exp_all(x)


def _exp_all(x: np.ndarray) -> np.ndarray:
    """:func:`_exp`, entry by entry."""
    xc = np.clip(x, -760.0, 720.0)
    kf = np.rint(xc * _INV_C)
    r = (xc - kf * _C_HI) - kf * _C_LO
    p = np.full_like(r, _EXP_C[-1])
    for c in reversed(_EXP_C[:-1]):
        p *= r
        p += c
    k = np.where(np.isnan(kf), 0.0, kf).astype(np.int64)  # kf is finite or nan (clipped)
    p *= _EXP_TAB[k & 31]
    return np.ldexp(p, (k >> 5).astype(np.int32))


_EXP_LOW = float(_exp_all(np.array([-760.0]))[0])  # _exp of every x ≤ −760


def _expm1(x: np.ndarray) -> np.ndarray:
    """e^x − 1 with the same relative error bound as :func:`_exp`; expm1(0) = 0 exactly."""
    small = np.abs(x) < 0.25
    all_small = bool(small.all())
    xs = x if all_small else np.where(small, x, 0.0)
    p = np.full_like(xs, _EXPM1_C[-1])
    for c in reversed(_EXPM1_C[:-1]):
        p *= xs
        p += c
    p *= xs
    if all_small:
        return p
    return np.where(small, p, _exp(x) - 1.0)


def _err(m: np.ndarray) -> np.ndarray:
    return EXP_ERR + EXP_ERR_X * np.abs(m)


# ---------------------------------------------------------------------------------------
# midpoint-radius arithmetic
# ---------------------------------------------------------------------------------------


def guard(m: Any, r: Any) -> Any:
    """The overflow rule: where a midpoint is not finite (±inf or nan), the radius is +inf.

    Needed wherever a radius is built from the operands' sizes rather than from the computed
    midpoint (sums of products, weighted sums): such a midpoint can overflow to ±inf while
    the radius stays finite, and (±inf, finite) is not a real interval."""
    fin = np.isfinite(m)
    if fin.all():
        return r
    return np.where(fin, r, np.inf)


def finite(a: MR) -> np.ndarray:
    """Where an enclosure is a real interval (finite midpoint and radius): the only places a
    sign test or a read-out may decide anything; elsewhere the answer is "cannot tell"."""
    return np.isfinite(a[0]) & np.isfinite(a[1])


def _nzfloor(ra: np.ndarray | float, rb: np.ndarray | float) -> Any:
    """TINY where both operands may be nonzero (rad ≥ TINY), else 0."""
    return np.minimum(np.minimum(ra, rb), TINY)


def add(a: MR, b: MR) -> MR:
    m = a[0] + b[0]
    return m, (a[1] + b[1]) * (1 + WIDEN) + np.abs(m) * WIDEN


def sub(a: MR, b: MR) -> MR:
    m = a[0] - b[0]
    return m, (a[1] + b[1]) * (1 + WIDEN) + np.abs(m) * WIDEN


def mul(a: MR, b: MR) -> MR:
    am, ar = a
    bm, br = b
    m = am * bm
    r = (np.abs(am) * br + ar * np.abs(bm) + ar * br) * (1 + WIDEN) + np.abs(m) * WIDEN
    return m, r + _nzfloor(ar, br)


def div(a: MR, b: MR) -> MR:
    """a / b; an infinite radius where b is not certainly positive."""
    am, ar = a
    bm, br = b
    m = am / bm
    low = bm - br
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (ar + np.abs(m) * br) * (1 + WIDEN) / low * (1 + WIDEN) + np.abs(m) * WIDEN
    r = np.where(finite(b) & (bm > br), r, np.inf)
    return m, guard(m, r + np.minimum(ar, TINY))


def floor_rad(r: np.ndarray) -> np.ndarray:
    """Raise every positive radius to at least TINY (zero stays zero)."""
    return np.maximum(r, np.minimum(r * 2.0**600, TINY))


def outer_sum(pairs: list[tuple[MR, MR]], kqw: bool = False) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array (the score perturbations δs);
    with ``kqw`` laid out [key, query, word] (j, i, B) instead (the same numbers).

    Fixed-order elementwise sums by default (bit-identical on every machine); with
    ``EXACTATTN_BLAS=1`` one BLAS product per word with Rump's a priori bound (sound for any
    summation order, but its last bits depend on the BLAS kernel: docs/scale.md)."""
    if _BLAS_ON.get():
        m, r = _outer_sum_blas(pairs)
        if kqw:
            return np.ascontiguousarray(m.transpose(1, 2, 0)), np.ascontiguousarray(
                r.transpose(1, 2, 0)
            )
        return m, r
    return _outer_sum_fixed(pairs, kqw)


def _outer_sum_fixed(pairs: list[tuple[MR, MR]], kqw: bool = False) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array, fixed order, one radius bound.

    Rounding: each product and the running sum lose ≤ n·u·Σ|x_m y_m| (n terms), covered
    by ρ|y_m| in the radius; the radius arithmetic loses ≤ 4n·u relative, covered by (1 + ρ').

    Computed as (j, i, B) arrays — the word axis innermost, so that every broadcast product
    runs over long contiguous rows rather than rows of a dozen queries — and transposed
    once at the end (elementwise: the same bits)."""
    n = len(pairs)
    rho = (n + 2) * SUM_U
    m = r = t1 = t2 = None
    for x, y in pairs:
        xm = np.ascontiguousarray(x[0].T)[None]  # (1, i, B)
        xr = np.ascontiguousarray(x[1].T)[None]
        y0 = np.ascontiguousarray(y[0].T)  # (j, B)
        y1r = np.ascontiguousarray(y[1].T)
        aym = np.abs(y0)
        ym = y0[:, None, :]  # (j, 1, B)
        y1 = (y1r + rho * aym)[:, None, :]
        y2 = (aym + y1r)[:, None, :]
        if m is None or r is None or t1 is None or t2 is None:
            m = xm * ym
            r = np.abs(xm) * y1
            t1 = xr * y2
            r += t1
            t2 = np.empty_like(t1)
        else:  # the same operations into two scratch arrays (no temporaries)
            np.multiply(xm, ym, out=t1)
            m += t1
            np.multiply(np.abs(xm), y1, out=t1)
            np.multiply(xr, y2, out=t2)
            t1 += t2
            r += t1
    assert m is not None and r is not None
    r *= 1 + (4 * n + 4) * SUM_U
    r = guard(m, floor_rad(r))
    if kqw:
        return m, r
    return np.ascontiguousarray(m.transpose(2, 0, 1)), np.ascontiguousarray(r.transpose(2, 0, 1))


def _outer_sum_blas(pairs: list[tuple[MR, MR]]) -> MR:
    """Σ_t x_t[b, i]·y_t[b, j] as a key-major (B, j, i) array: one BLAS product per word.

    The midpoint is numpy's matmul in whatever order BLAS sums; the radius is the a priori
    bound of :func:`exactattn.engine.blasprod.mr_matmul` (proofs/blas_bound.md): γ_n for the
    midpoint (n terms, any order), the propagated radii, all rounded up. Tighter than the
    fixed-order bound it replaced ((n + 2)·2u per term), and ~ one pass instead of n."""
    ym = np.stack([y[0] for _, y in pairs], axis=2)  # (B, j, t)
    yr = np.stack([y[1] for _, y in pairs], axis=2)
    xm = np.stack([x[0] for x, _ in pairs], axis=1)  # (B, t, i)
    xr = np.stack([x[1] for x, _ in pairs], axis=1)
    with one_thread():  # midpoint bits independent of the BLAS thread count
        m, r = mr_matmul((ym, yr), (xm, xr))
    return m, guard(m, floor_rad(r))


def _stack(xs: list[np.ndarray]) -> np.ndarray:
    """np.stack(xs) of equal-shape float arrays (np.array: the same copy, less overhead)."""
    return np.array(xs, dtype=np.float64)


STACK_MAX = 1 << 16  # arrays up to this size are stacked to share passes (fewer calls)


def _seq_sum(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """x[…, 0, …] + x[…, 1, …] + …, over ``axis``, added left to right (not numpy's
    pairwise sum). ``x`` may stack several arrays on a leading axis: one pass sums them all."""
    if not axis:
        s = x[0].copy()
        for j in range(1, x.shape[0]):
            s += x[j]
        return s
    # x[:, …, j] by a fixed index prefix (views: the same elements in the same order as
    # np.moveaxis, without its per-call axis normalisation)
    pre = (slice(None),) * axis
    s = x[pre + (0,)].copy()
    for j in range(1, x.shape[axis]):
        s += x[pre + (j,)]
    return s


def _dot_keys(a: MR, b: MR) -> MR:
    """Σ_j a[:, j]·b[:, j] (axis 1, in a fixed order; one radius bound for the sum)."""
    T = a[0].shape[1]
    rho = (T + 2) * SUM_U
    abm = np.abs(b[0])
    shape = np.broadcast(a[0], b[0]).shape
    if math.prod(shape) > STACK_MAX:
        pr = np.abs(a[0]) * (b[1] + rho * abm)
        pr += a[1] * (abm + b[1])
        sm, sr = _seq_sum(a[0] * b[0]), _seq_sum(pr)
    else:
        P = np.empty((2,) + shape)
        np.multiply(a[0], b[0], out=P[0])
        np.multiply(np.abs(a[0]), b[1] + rho * abm, out=P[1])
        P[1] += a[1] * (abm + b[1])
        sm, sr = _seq_sum(P, 2)
    sr *= 1 + (T + 4) * SUM_U
    return sm, guard(sm, floor_rad(sr))


def _rat_mid(num: np.ndarray, den: int) -> np.ndarray:
    """num/den as floats (the midpoints of :func:`from_rat`)."""
    if den & (den - 1) == 0 and den < 2**900:
        return num.astype(np.float64) * (1.0 / den)
    return num.astype(np.float64) / float(den)


def _dot_weight(a: MR, den: int) -> np.ndarray:
    """Q with |Σ_j a_j·x_j − Σ_j fl(a_m,j·x_j)| ≤ Σ_j |x_j|·Q_j for x exact rationals over
    den given by their float midpoints (rad |x|·c_v, as from_rat)."""
    T = a[0].shape[1]
    c_v = CONV + 2.0 * TINY * den
    rho = (T + 2) * SUM_U
    q = np.abs(a[0]) * (c_v + rho)
    q += a[1] * (1 + c_v)
    return q


def _dot_exact(am: np.ndarray, xm: np.ndarray, q: np.ndarray) -> MR:
    """Σ_j a[:, j]·x[:, j] for x exact (see :func:`_dot_weight`), fixed order."""
    T = am.shape[1]
    shape = np.broadcast(am, xm).shape
    if math.prod(shape) > STACK_MAX:
        pr = np.abs(xm)
        pr *= q
        sm, sr = _seq_sum(am * xm), _seq_sum(pr)
    else:
        P = np.empty((2,) + shape)
        np.multiply(am, xm, out=P[0])
        np.abs(xm, out=P[1])
        P[1] *= q
        sm, sr = _seq_sum(P, 2)
    sr *= 1 + (T + 4) * SUM_U
    return sm, guard(sm, floor_rad(sr))


def _sum_keys(a: MR) -> MR:
    """Σ over axis 1 in a fixed order."""
    m, r = a
    if m.size > STACK_MAX:  # large: no copies (see _sum_keys_x)
        k = (m.shape[1] + 2) * SUM_U
        sm, sr, sa = _seq_sum(m), _seq_sum(r), _seq_sum(np.abs(m))
        return sm, guard(sm, sr * (1 + k) + sa * k)
    X = np.empty((3,) + m.shape)
    X[0] = m
    X[1] = r
    np.abs(m, out=X[2])
    return _sum_keys_x(X)


def _sum_keys_x(X: np.ndarray) -> MR:
    """:func:`_sum_keys` of (m, r) given stacked as X = [m, r, |m|] (3, B, keys, …)."""
    if X[0].size <= STACK_MAX:  # small: one pass over the three stacked arrays
        sm, sr, sa = _seq_sum(X, 2)
    else:  # large: three passes over contiguous slices cost less than strided ones
        sm, sr, sa = _seq_sum(X[0]), _seq_sum(X[1]), _seq_sum(X[2])
    m = X[0]
    # rounding of the midpoint sum ≤ (T − 1)·u·Σ|m|; of the radius sum ≤ (T − 1)·u·Σr
    k = (m.shape[1] + 2) * SUM_U
    return sm, guard(sm, sr * (1 + k) + sa * k)


def mr_exp(a: MR) -> MR:
    m, r = a
    mid = _exp(m)
    rad = mid * (r + r * r + 2 * _err(m)) * (1 + SLACK) + TINY
    with np.errstate(divide="ignore"):  # dividing by False is the point: no RuntimeWarning
        return mid, rad / ((r <= 1.0) & np.isfinite(m))  # r > 1, nan or m ±inf: infinite radius


def mr_expm1(a: MR) -> MR:
    m, r = a
    mid = _expm1(m)
    am = np.abs(mid)
    rad = ((1 + am) * (r + r * r) * (1 + SLACK) + 2 * _err(m) * am) * (1 + WIDEN)
    rad = rad + np.minimum(r, TINY)
    with np.errstate(divide="ignore"):  # dividing by False is the point: no RuntimeWarning
        return mid, rad / ((r <= 1.0) & np.isfinite(m))  # r > 1, nan or m ±inf: infinite radius


def mr_relu(a: MR) -> MR:
    """max(x, 0) on the interval."""
    m, r = a
    lo = np.maximum(m - r, 0.0)
    hi = np.maximum(m + r, 0.0)
    mid = (lo + hi) * 0.5
    rad = ((hi - lo) * 0.5 + (np.abs(m) + r) * WIDEN) * (1 + WIDEN) + np.minimum(r, TINY)
    # certainly ≥ 0: x itself; certainly ≤ 0: exactly 0 (exact comparisons of finite floats)
    fin = finite(a)
    nonneg = fin & (m >= r)
    nonpos = fin & (-m >= r)
    mid = np.where(nonneg, m, np.where(nonpos, 0.0, mid))
    rad = np.where(nonneg, r, np.where(nonpos, 0.0, rad))
    return mid, guard(mid, np.where(fin, rad, np.inf))


def abs_bounds(a: MR) -> tuple[np.ndarray, np.ndarray]:
    """Certified lower and upper bounds of |x| (floats, exact as reals); [0, inf] where the
    enclosure is not finite (the overflow rule)."""
    m, r = a
    am = np.abs(m)
    hi = (am + r) * (1 + CONV)
    lo = np.maximum(am - r, 0.0) * (1 - CONV)
    fin = finite(a)
    if not fin.all():
        lo = np.where(fin, lo, 0.0)
        hi = np.where(fin, hi, np.inf)
    return lo, hi


def from_rat(num: np.ndarray, den: int) -> MR:
    """An exact rational array (numerators over one denominator) as an enclosure."""
    if den & (den - 1) == 0 and den < 2**900:
        # exact scaling by a power of 2 of integers (no floating-point exception can occur;
        # an integer beyond float range raises OverflowError in astype): no errstate needed,
        # which was half of this function's cost on small arrays
        m = num.astype(np.float64) * (1.0 / den)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            m = num.astype(np.float64) / float(den)
    if den < 2**400:
        # |m| ≥ (1 − u)/den when num ≠ 0, so |m|·2·TINY·den ≥ TINY there (0 where num = 0)
        return m, np.abs(m) * (CONV + 2.0 * TINY * den)
    nz = (num != 0) if num.dtype != object else np.array(num != 0, dtype=bool)
    return m, np.abs(m) * CONV + nz * TINY


def _rat_float(f: np.ndarray, den: int) -> MR:
    """:func:`from_rat` of numerators given as their correctly rounded floats ``f`` (what
    ``num.astype(np.float64)`` gives: the same operations on the same floats, so the same
    bits; num ≠ 0 exactly where f ≠ 0)."""
    if den & (den - 1) == 0 and den < 2**900:
        m = f * (1.0 / den)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            m = f / float(den)
    if den < 2**400:
        return m, np.abs(m) * (CONV + 2.0 * TINY * den)
    return m, np.abs(m) * CONV + (f != 0) * TINY


def _score_limbs(tr: HeadTrace) -> tuple[list[np.ndarray], int] | None:
    """The hard score numerators of a head exactly, as int64 limbs: s = Σ_n c[n]·2^(b·n).

    Scores are q·kᵀ over q.den·k.den (hard.run_head builds them so), and when they need more
    than 62 bits they are Python integers, whose subtraction and conversion to float cost
    ~100 times a float operation per entry. q and k are int64: split into signed b-bit limbs,
    every limb product and its sum over the inner dimension are exact int64 (|c[n]| < 2^60,
    so gaps of two scores stay below 2^61). None when the trace is not of that form or the
    numbers do not fit (then the Python-integer path is used)."""
    q, k = tr.q.num, tr.k.num
    if q.dtype != np.int64 or k.dtype != np.int64 or tr.scores.den != tr.q.den * tr.k.den:
        return None
    A = q.shape[-1]
    if not q.size or not k.size or not 0 < A <= 4096:
        return None
    b = (60 - (3 * A).bit_length()) // 2  # 3 limb pairs per power at most: 3·A·2^(2b) ≤ 2^60
    limbs = []
    for x in (q, k):
        lo, hi = int(x.min()), int(x.max())
        if lo <= -(2**62) or hi >= 2**62:
            return None
        n = max(1, -(-max(-lo, hi).bit_length() // b))
        if n > 3:
            return None
        ax = np.abs(x)
        neg = x < 0
        parts = []
        for i in range(n):
            p = (ax >> (b * i)) & ((1 << b) - 1)
            parts.append(np.where(neg, -p, p))  # signed digits: x = Σ parts[i]·2^(b·i)
        limbs.append(parts)
    ql, kl = limbs
    kT = [p.swapaxes(-1, -2) for p in kl]
    c: list[np.ndarray | None] = [None] * (len(ql) + len(kl) - 1)
    for i, qp in enumerate(ql):
        for j, kp in enumerate(kT):
            prod = np.matmul(qp, kp)  # exact: |Σ| ≤ A·2^(2b) per pair
            c[i + j] = prod if c[i + j] is None else c[i + j] + prod  # type: ignore[operator]
    return [x for x in c if x is not None], b


def _limbs_float(c: list[np.ndarray], b: int, owned: bool = False) -> np.ndarray | None:
    """float(Σ_n c[n]·2^(b·n)) correctly rounded (half to even, as Python's float(int)), for
    int64 limbs with |c[n]| < 2^61 and b ≤ 29; None when the value could need more than 63
    bits above 2^(2b) (then the caller converts Python integers).

    The limbs are normalised (c[n] in [0, 2^b) below the top one; the sign from the top) and
    |X| is cut to a 59–60-bit window W = ⌊|X|/2^t⌋ with a sticky last bit (W | [remainder ≠ 0],
    "round to odd"): W has ≥ 6 bits below the 53 kept, so rounding W·2^t to nearest gives
    the nearest float to |X| (the int64 → float64 conversion rounds to nearest even).
    ``owned``: the arrays of ``c`` are the caller's to change (else they are copied)."""
    mask = (1 << b) - 1
    c = [x if owned and x.dtype == np.int64 else x.astype(np.int64, copy=True) for x in c]
    while len(c) < 3:
        c.append(np.zeros_like(c[0]))
    N = len(c)

    def norm() -> None:
        for i in range(N - 1):
            c[i + 1] += c[i] >> b  # floor: c[i] − 2^b·carry ∈ [0, 2^b)
            c[i] &= mask

    norm()
    neg = c[-1] < 0
    sign = None
    if neg.any():
        sign = 1 - 2 * neg.astype(np.int64)  # ±1 (a product: a masked ufunc is much slower)
        for x in c:
            x *= sign
        norm()
    if int(c[-1].max(initial=0)) >= 2 ** (62 - b * (N - 3)):
        return None
    L = c[0] + (c[1] << b)  # < 2^(2b)
    P = c[2].copy()  # |X| = P·2^(2b) + L, P < 2^62
    for i in range(3, N):
        P += c[i] << (b * (i - 2))
    e = np.frexp(P.astype(np.float64))[1].astype(np.int64)  # bit length of P, or one more
    t = np.clip(e + 2 * b - 60, 0, 2 * b)
    W = (P << (2 * b - t)) | (L >> t)  # < 2^60
    W |= (L & ((np.int64(1) << t) - 1)) != 0
    f = np.ldexp(W.astype(np.float64), t.astype(np.int32))
    if sign is not None:
        f *= sign  # exact: f ≠ 0 where X < 0
    return f


def frac_mr(q: Fraction) -> tuple[float, float]:
    """A Fraction as a scalar enclosure."""
    m = float(q)
    if q == 0:
        return 0.0, 0.0
    return m, abs(m) * CONV + TINY


def float_down(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) <= q else float(np.nextafter(f, -np.inf))


def float_up(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def tau_enclosures(taus: list[list[arb] | None]) -> list[list[tuple[Fraction, Fraction]] | None]:
    """Temperatures.at(n, prec) arb balls as exact (lo, hi) Fractions per head."""
    return [None if row is None else [arb_endpoints(t) for t in row] for row in taus]


_INV_TAU: dict[tuple[Fraction, Fraction], MR] = {}
_INV_TAU_ID: dict[int, tuple[Fraction, Fraction, MR]] = {}


def inv_tau(lo: Fraction, hi: Fraction) -> MR:
    """1/τ for lo ≤ τ ≤ hi as a scalar enclosure (memoised: exact arithmetic on the same
    temperatures was a fixed cost of every batch and head)."""
    mine = _INV_TAU_ID.get(id(lo))  # the same objects again (no Fraction hashing)
    if mine is not None and mine[0] is lo and mine[1] is hi:
        return mine[2]
    got = _INV_TAU.get((lo, hi))
    if got is None:
        if len(_INV_TAU) > 4096:
            _INV_TAU.clear()
        got = _INV_TAU[(lo, hi)] = _inv_tau(lo, hi)
    if len(_INV_TAU_ID) > 4096:
        _INV_TAU_ID.clear()
    _INV_TAU_ID[id(lo)] = (lo, hi, got)  # holds lo and hi: their ids are not reused
    return got


def _inv_tau(lo: Fraction, hi: Fraction) -> MR:
    """1/τ for lo ≤ τ ≤ hi as a scalar enclosure, from exact arithmetic (lo ≤ 0: infinite)."""
    if lo <= 0:
        return np.float64(0.0), np.float64(np.inf)
    a = float_down(1 / hi)
    b = float_up(1 / lo)
    m = float((Fraction(a) + Fraction(b)) / 2)
    r = float_up(max(Fraction(b) - Fraction(m), Fraction(m) - Fraction(a)))
    return np.float64(m), np.float64(r + TINY)


# ---------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------

Sparse = list[list[tuple[int, float]]]  # per output row: (input column, weight)


def _sparse(w: RatArray) -> tuple[Sparse, bool]:
    """Nonzero weights per output row as floats; False when one is outside the safe range."""
    rows: Sparse = []
    ok = True
    for a in range(w.shape[0]):
        row = []
        for c in range(w.shape[1]):
            v = int(w.num[a, c])
            if v:
                f = float(Fraction(v, w.den))
                if not WEIGHT_MIN <= abs(f) <= WEIGHT_MAX:
                    ok = False
                row.append((c, f))
        rows.append(row)
    return rows, ok


def lin(cols: Cols, rows: Sparse) -> Cols:
    """out[a] = Σ_c W[a, c]·cols[c], fixed order; absent columns stay absent.

    Two or more output rows are computed at once (stacked columns; step j adds every
    row's j-th term): the same elementwise operations, so the same bits (a weight ±1
    multiplies instead of copying or negating: equal values; only a nan's sign could differ,
    and no result reads it)."""
    if not cols:
        return {}
    k = (len(cols) + 3) * SUM_U  # ≥ (K + 1)·u for the sum, + u for each float weight
    plan = _lin_plan(cols, rows)
    if len(plan) >= 2:
        m, r = _lin_stack(cols, plan, k)
        return {a: (m[i], r[i]) for i, (a, _) in enumerate(plan)}
    R: dict[int, np.ndarray] = {}
    out: Cols = {}
    for a, terms in plan:
        m = r = None
        fresh = False  # m, r are arrays of our own (may be added to in place)
        for c, w in terms:
            cm, cr = cols[c]
            if c not in R:
                R[c] = cr + np.abs(cm) * k
            if w == 1.0:
                tm, tr = cm, R[c]
            elif w == -1.0:
                tm, tr = -cm, R[c]
            else:
                tm, tr = cm * w, R[c] * abs(w)
            if m is None:
                m, r = tm, tr
            elif fresh:
                m += tm
                r += tr
            else:
                m, r, fresh = m + tm, r + tr, True
        assert m is not None and r is not None
        r = r * (1 + k)
        out[a] = (m, guard(m, np.maximum(r, np.minimum(r * 2.0**300, TINY))))
    return out


LinPlan = list[tuple[int, list[tuple[int, float]]]]  # (output row, its terms (column, w))


def _lin_plan(cols: Cols, rows: Sparse) -> LinPlan:
    """The output rows :func:`lin` computes, with their terms on the columns present."""
    plan = []
    for a, row in enumerate(rows):
        terms = [(c, w) for c, w in row if c in cols]
        if terms:
            plan.append((a, terms))
    return plan


_OFF: dict[int, np.ndarray] = {}


def _off_diagonal(n: int) -> np.ndarray:
    """~eye(n) (read only)."""
    got = _OFF.get(n)
    if got is None:
        got = _OFF[n] = ~np.eye(n, dtype=bool)
        got.flags.writeable = False
    return got


def _lin_stack(cols: Cols, plan: LinPlan, k: float) -> MR:
    """:func:`lin` for many output rows at once, stacked in plan order (see there)."""
    used, steps = _lin_steps(plan)
    Cm = _stack([cols[c][0] for c in used])
    Cr = _stack([cols[c][1] for c in used])
    Rc = Cr + np.abs(Cm) * k
    extra = (1,) * (Cm.ndim - 1)
    m = r = None
    for sel, ci, w, aw in steps:
        w = w.reshape((-1,) + extra)
        aw = aw.reshape((-1,) + extra)
        if ci is None:  # every stacked column in order: no gather (the same elements)
            tm, tr = Cm * w, Rc * aw
        else:
            tm, tr = Cm[ci] * w, Rc[ci] * aw
        if m is None or r is None:  # j = 0: every row has a first term
            m, r = tm, tr
        elif sel is None:  # every row has a j-th term
            m += tm
            r += tr
        else:
            m[sel] = m[sel] + tm
            r[sel] = r[sel] + tr
    assert m is not None and r is not None
    r *= 1 + k
    return m, guard(m, np.maximum(r, np.minimum(r * 2.0**300, TINY)))


_LIN_STEPS: dict[tuple[Any, ...], tuple[list[int], list[Any]]] = {}


def _lin_steps(plan: LinPlan) -> tuple[list[int], list[Any]]:
    """The columns :func:`_lin_stack` stacks and, per step j, the rows with a j-th term
    (None: all), their stacked columns (None: all, in order) and weights |w|, memoised by
    the plan's value (a pure function of it: never stale; cleared beyond 256 plans)."""
    key = tuple((a, tuple(t)) for a, t in plan)
    got = _LIN_STEPS.get(key)
    if got is None:
        if len(_LIN_STEPS) > 256:
            _LIN_STEPS.clear()
        used = sorted({c for _, terms in plan for c, _ in terms})
        pos = {c: i for i, c in enumerate(used)}
        steps: list[Any] = []
        for j in range(max(len(t) for _, t in plan)):
            sel = [i for i, (_, t) in enumerate(plan) if len(t) > j]
            ci = [pos[plan[i][1][j][0]] for i in sel]
            w = np.array([plan[i][1][j][1] for i in sel])
            aw = np.abs(w)
            w.flags.writeable = False
            aw.flags.writeable = False
            steps.append(
                (
                    None if len(sel) == len(plan) else sel,
                    None if ci == list(range(len(used))) else ci,
                    w,
                    aw,
                )
            )
        got = _LIN_STEPS[key] = (used, steps)
    return got


def add_cols(a: Cols, b: Cols) -> Cols:
    out = dict(a)
    for c, v in b.items():
        out[c] = add(out[c], v) if c in out else v
    return out


class FloatWeights:
    """A model's weights as sparse float rows (converted once per model)."""

    def __init__(self, cm: CompiledModel) -> None:
        self.ok = True
        self.layers: list[Any] = []
        for layer in cm.layers:
            if isinstance(layer, list):
                heads = []
                for ch in layer:
                    h = {}
                    for name in ("Q", "K", "V", "O"):
                        ra = getattr(ch, name)
                        if ra is None:
                            h[name] = None
                            continue
                        h[name], ok = _sparse(ra)
                        self.ok &= ok
                    heads.append(h)
                self.layers.append(heads)
            else:
                assert isinstance(layer, CompiledFFN)
                hidden = []
                for w, _b in layer.hidden:
                    rows, ok = _sparse(w)
                    self.ok &= ok
                    hidden.append(rows)
                rows, ok = _sparse(layer.out[0])
                self.ok &= ok
                self.layers.append((hidden, rows, _IntFFN(layer)))
        out = cm.model.output
        if isinstance(out, AcceptOutput):
            W = RatArray.from_fractions([list(out.weight)])
        else:
            W = RatArray.from_fractions(out.weight)
        self.out, ok = _sparse(W)
        self.ok &= ok


_CACHE: dict[int, tuple[CompiledModel, FloatWeights]] = {}


def float_weights(cm: CompiledModel) -> FloatWeights:
    got = _CACHE.get(id(cm))
    if got is None or got[0] is not cm:
        got = _CACHE[id(cm)] = (cm, FloatWeights(cm))
    return got[1]


# ---------------------------------------------------------------------------------------
# layers
# ---------------------------------------------------------------------------------------


def _columns(ra: RatArray, want: Any) -> dict[int, MR]:
    """Columns ``want`` of an exact array as enclosures (elementwise: the bits of converting
    the whole array, without converting the columns nobody reads)."""
    return {c: from_rat(ra.num[..., c], ra.den) for c in want}


def _rows(delta: Cols, a: int, b: int) -> Cols:
    """Rows a..b−1 of every column of δ (views)."""
    if not delta or (a == 0 and b == next(iter(delta.values()))[0].shape[1]):
        return delta
    return {c: (m[:, a:b], r[:, a:b]) for c, (m, r) in delta.items()}


def _exact_col_sums(
    DA: np.ndarray, xm: np.ndarray, c_v: float, T: int
) -> tuple[np.ndarray, np.ndarray]:
    """Σ_j δα_j·(v_j − v_ref) over the keys for exact value columns, with radii: δα as
    (mid, rad) ``DA`` (2, j, i, B), the value differences' rounded quotients ``xm`` (E, j, i, B)
    within ``c_v`` relative (_dot_weight's bound, then _dot_exact's products and key sums).
    Both the plain and the shared head use it; returns (E, i, B) midpoints and radii."""
    q = np.abs(DA[0]) * (c_v + (T + 2) * SUM_U)  # _dot_weight
    q += DA[1] * (1 + c_v)
    P = np.empty((2,) + xm.shape)  # _dot_exact: products and their radii, then key sums
    np.multiply(DA[0], xm, out=P[0])
    np.abs(xm, out=P[1])
    P[1] *= q
    tm, tr_ = _seq_sum(P, 2)  # (E, i, B) each
    tr_ *= 1 + (T + 4) * SUM_U
    return tm, guard(tm, floor_rad(tr_))


def _head(
    tr: HeadTrace, rule: str, delta: Cols, inv_tau: MR, hw: dict[str, Any], q0: int = 0
) -> Cols:
    """One head's contribution to δ (already through its output matrix).

    ``tr`` may hold only the query rows q0..q0+R−1 (:func:`_query_rows`), with every key;
    ``delta`` always holds every row. The result has the trace's query rows.
    Attention arrays are stored key-major, A[b, j, i] (key j, query i), so that sums over
    the keys are sums of contiguous (B, ·) slices in a fixed order; every entry is computed
    by the same operations in the same order whatever R is, so its bits do not depend on it.
    """
    B, R, T = tr.top.shape  # R query rows (q0..q0+R−1), T keys
    dq = lin(_rows(delta, q0, q0 + R), hw["Q"])
    vis_same = _visibility(tr.visible)[0]
    if (
        R > 1
        and not dq
        and vis_same
        and bool((tr.q.num[:, 0] == tr.q.num[:, 1]).all())  # a cheap first test
        and rows_alike(tr)
    ):
        # every query row has the same hard query, no δ on it and the same visible keys
        # (a constant query over all positions: "is there a bad position?"): every row
        # computes the same numbers, so compute one and copy it
        one = _head(_query_rows(tr, 0, 1), rule, delta, inv_tau, hw, q0)
        return {c: (np.repeat(m, R, axis=1), np.repeat(r, R, axis=1)) for c, (m, r) in one.items()}
    dk = lin(delta, hw["K"])
    dv = lin(delta, hw["V"])
    ds: MR | None = None
    if dq or dk:
        # δs_ij = Σ_a dq_ia (k_ja + dk_ja) + q_ia dk_ja, as fused outer products
        qc = _columns(tr.q, dk)  # q_a is read where dk_a ≠ 0, k_a where dq_a ≠ 0
        kc = _columns(tr.k, dq)
        pairs: list[tuple[MR, MR]] = []
        for a in range(tr.q.num.shape[-1]):
            if a in dq:
                pairs.append((dq[a], add(kc[a], dk[a]) if a in dk else kc[a]))
            if a in dk:
                pairs.append((qc[a], dk[a]))
        ds = outer_sum(pairs, kqw=True)  # (j, i, B)
    # The δ formulas run laid out [key, query, word] (j, i, B), as _head_free: a sum over the
    # keys adds contiguous blocks and a per-query factor broadcasts over the leading axis,
    # so numpy's inner loops run over the batch, not over a query row's few entries
    # (elementwise operations and key sums in the same order: the same bits).
    top_q = tr.top  # (B, i, j)
    topk = np.ascontiguousarray(top_q.transpose(2, 1, 0))  # (j, i, B)
    visb, visfk = _visibility_keys(tr.visible, B)
    restk = visb & ~topk
    has_rest = bool(restk.any())
    nA_i = top_q.sum(axis=2)
    if ds is None and not dv and not has_rest and (rule == "average" or nA_i.max(initial=0) <= 1):
        return {}  # every visible key ties at the top and nothing moved: exactly hard
    big: np.ndarray | None = None
    if ds is not None:
        # large perturbations (|δs/τ| ≥ 1 somewhere in the row, as in soft.py): the δ
        # formulas overflow or cancel; softmax − hard is computed directly for those rows
        a = np.abs(ds[0])
        a += ds[1]
        a *= visfk
        amax = a.max(axis=0)  # (i, B), exact in any order (nan propagates, as np.maximum)
        bigk = amax * inv_tau[0] >= 1.0
        bigk |= ~np.isfinite(amax)
        if bigk.any():
            big = np.ascontiguousarray(bigk.T)  # (B, i)
    s = tr.scores.num  # (B, i, j)
    # Python-integer (or near-int64-limit) scores: gaps from exact limbs (_score_limbs)
    wide = s.dtype == object or bool(s.size and int(np.abs(s).max()) >= 2**61)
    limbs: tuple[list[np.ndarray], int] | None = None
    if ds is not None and wide:
        limbs = _score_limbs(tr)
    # (B, i): the first top key of every query (0 if none); every top key holds the row's
    # maximum of the visible scores, so it is read there
    first = np.argmax(top_q, axis=2)
    sden = tr.scores.den
    dak: MR | None = None  # δα laid out (j, i, B)
    dab: MR | None = None  # δα laid out (B, j, i)
    if big is None:
        dak = _delta_alpha(
            topk, restk, has_rest, s, wide, limbs, sden, tr.support, visfk, ds,
            first, nA_i, inv_tau, rule,
        )  # fmt: skip
        da = dak
    else:
        # _direct_rows overwrites every entry of the big rows: the δ formulas run on the
        # other rows only, gathered into one (keys, rows, 1) batch (every entry is computed
        # by the same operations, elementwise or along its own row: the same bits)
        assert ds is not None
        ds = (  # (B, j, i), as the big rows' tiers read it
            np.ascontiguousarray(ds[0].transpose(2, 0, 1)),
            np.ascontiguousarray(ds[1].transpose(2, 0, 1)),
        )
        da = dab = (np.zeros((B, T, R)), np.zeros((B, T, R)))
        if not big.all():
            bs, is_ = np.nonzero(~big)
            tq = top_q[bs, is_]  # (K, T)
            tk = np.ascontiguousarray(tq.T)[:, :, None]  # (T, K, 1)
            vT = np.ascontiguousarray(tr.visible[is_].T)[:, :, None]
            rest_c = vT & ~tk
            ds_c = (ds[0][bs, :, is_].T[:, :, None], ds[1][bs, :, is_].T[:, :, None])
            limbs_c = None if limbs is None else ([c[bs, is_][None] for c in limbs[0]], limbs[1])
            dm, dr = _delta_alpha(
                tk, rest_c, bool(rest_c.any()), s[bs, is_][None], wide, limbs_c, sden,
                tr.support[bs, is_][None], vT.astype(np.float64), ds_c,
                first[bs, is_][None], nA_i[bs, is_][None], inv_tau, rule,
            )  # fmt: skip
            dab[0][bs, :, is_] = dm[:, :, 0].T
            dab[1][bs, :, is_] = dr[:, :, 0].T
        hook = _BIG_ROWS.get()  # the centred tier's rows (engine/centred.py), if set
        if hook is not None:
            hook(tr, ds, inv_tau, big, da)
        else:
            if limbs is None and s.dtype == object:
                limbs = _score_limbs(tr)
            _direct_rows(tr, ds, inv_tau, big, da, limbs)
    # Σ_j α_hard_ij δv_j + Σ_j δα_ij (v_j + δv_j)
    nv = tr.v.num.shape[-1]
    out: Cols = {}
    da_nz = bool(da[1].any())
    jref = first
    vden = tr.v.den
    exact: dict[int, MR] = {}
    ex = [c for c in range(nv) if c not in dv] if da_nz and vden < 2**400 else []
    if ex:
        # Σ_j δα_ij = 0, so Σ_j δα_ij vv_j = Σ_j δα_ij (vv_j − v_ref(i)) with v_ref(i) the
        # hard value of row i's first top key: equal values cancel exactly, not ± width.
        # Columns without δv: exact hard differences, rad = |vd|·c_v, so the radius of every
        # product is |vd_j|·Q_j with Q shared by all of them; all such columns at once
        # (a last axis, elementwise: the bits of column by column)
        # Laid out [column, key, query, word] as in _head_free (the words innermost: numpy's
        # inner loops run over the batch, not over a query row's few entries), the numbers
        # of _dot_weight and _dot_exact, elementwise and summed over the keys in the same
        # order: the same bits.
        vn = tr.v.num if len(ex) == nv else tr.v.num[..., ex]  # (B, j, E)
        E = len(ex)
        vk = np.ascontiguousarray(vn.transpose(2, 1, 0))  # (E, j, B)
        vref = np.take(vk.reshape(E, T * B), jref.T * B + np.arange(B), axis=1)  # (E, i, B)
        dn = vk[:, :, None, :] - vref[:, None, :, :]  # (E, j, i, B)
        xm = _rat_mid(dn, vden)
        if dak is None:
            assert dab is not None
            DA = np.empty((2, T, R, B))
            DA[0] = dab[0].transpose(1, 2, 0)
            DA[1] = dab[1].transpose(1, 2, 0)
        else:
            DA = dak
        tm, tr_ = _exact_col_sums(DA, xm, CONV + 2.0 * TINY * vden, T)
        for e, c in enumerate(ex):
            exact[c] = (tm[e].T, tr_[e].T)  # (B, i) views
    supT = inv = None  # the hard weights' pieces, the same for every value column
    for c in range(nv):
        acc: MR | None = None
        if c in dv:
            dm, dr = dv[c]
            if supT is None or inv is None:
                cnt = tr.count.astype(np.float64)
                supT = tr.support.transpose(0, 2, 1).astype(np.float64)
                inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)
            sm, sr = _sum_keys((supT * dm[:, :, None], supT * dr[:, :, None]))
            acc = mul((sm, sr), (inv, np.abs(inv) * CONV))
        if da_nz:
            t = exact.get(c)
            if t is None:
                vn1 = tr.v.num[..., c]
                vref1 = np.take_along_axis(vn1, jref, axis=1)  # (B, i)
                vd = from_rat(vn1[:, :, None] - vref1[:, None, :], vden)  # (B, j, i)
                if c in dv:
                    vd = add(vd, (dv[c][0][:, :, None], dv[c][1][:, :, None]))
                if dab is None:  # _dot_keys reads δα as (B, j, i)
                    assert dak is not None
                    dab = (
                        np.ascontiguousarray(dak[0].transpose(2, 0, 1)),
                        np.ascontiguousarray(dak[1].transpose(2, 0, 1)),
                    )
                t = _dot_keys(dab, vd)
            acc = t if acc is None else add(acc, t)
        if acc is not None:
            out[c] = acc
    if hw["O"] is not None:
        out = lin(out, hw["O"])
    return out


def _delta_alpha(
    top: np.ndarray,
    rest: np.ndarray,
    has_rest: bool,
    s: np.ndarray,
    wide: bool,
    limbs: tuple[list[np.ndarray], int] | None,
    sden: int,
    support: np.ndarray,
    visf: np.ndarray,
    ds: MR | None,
    first: np.ndarray,
    nA_i: np.ndarray,
    inv_tau: MR,
    rule: str,
) -> MR:
    """δα of a head by the δ formulas, laid out [key, query, word] (T, R, B), for
    :func:`_head`: top/rest (T, R, B) the hard top and other visible keys, s the hard score
    numerators (B, R, T) over ``sden`` (``wide``: Python integers or near the int64 limit;
    ``limbs``: the same exactly, :func:`_score_limbs`), support (B, R, T), visf the
    visibility as floats (broadcasting to (T, R, B)), ds the score perturbations (T, R, B)
    (None: none), first (B, R) the first top key of every query, nA_i its number of top
    keys."""
    T, R, B = top.shape
    # u = expm1(δs/τ) on the top keys, w = exp((δs − g)/τ) on the other visible keys
    # (g = max s − s ≥ 0, exact), computed only where needed, into one array
    shape = (T, R, B)
    UW = np.zeros((3, T * R * B))  # u/w: midpoints, radii, |midpoints| (for the key sums)
    uw_m, uw_r = UW[0], UW[1]
    if ds is not None:
        it = np.flatnonzero(top)
        um, ur = mr_expm1(mul((ds[0].reshape(-1)[it], ds[1].reshape(-1)[it]), inv_tau))
        uw_m[it] = um
        uw_r[it] = ur
    if has_rest:
        ir = np.flatnonzero(rest)
        gf: np.ndarray | None = None  # the gaps' numerators as floats, from limbs
        if wide:
            jj, qq, bb = np.unravel_index(ir, shape)
            if limbs is not None:
                # exact int64 limbs of smax − s, converted as Python's float(int) would
                cs, lb = limbs
                gl = []
                for c in cs:
                    cmax = np.take_along_axis(c, first[:, :, None], axis=2)[:, :, 0]
                    gl.append(cmax[bb, qq] - c[bb, qq, jj])
                gf = _limbs_float(gl, lb, owned=True)
            if gf is None:
                # Python integers: subtract only where needed (the visible non-top keys)
                so = s if s.dtype == object else s.astype(object)
                smax = np.take_along_axis(so, first[:, :, None], axis=2)[:, :, 0]
                gnum = smax[bb, qq] - so[bb, qq, jj]
        else:
            sk = np.ascontiguousarray(s.transpose(2, 1, 0))  # (j, i, B)
            at = _flat_grid(R, B)[0]
            smax = np.take(sk, first.T * (R * B) + at)  # (i, B): the row maxima
            gnum = (smax - sk).reshape(-1)[ir]  # max s − s (sk may be a view of s)
        if ds is None and sden < 2**400 and inv_tau[0] > 0:  # 1/τ may underflow to 0
            wm, wr = _gap_weights(gnum, sden, inv_tau)
        else:
            g = from_rat(gnum, sden) if gf is None else _rat_float(gf, sden)
            if ds is None:
                X = (-g[0], g[1])
            else:
                X = sub((ds[0].reshape(-1)[ir], ds[1].reshape(-1)[ir]), g)
            wm, wr = mr_exp(mul(X, inv_tau))
        uw_m[ir] = wm
        uw_r[ir] = wr
    np.abs(UW[0], out=UW[2])
    X = UW.reshape((3,) + shape)
    uw_m, uw_r = X[0], X[1]
    # U + R, (R, B): _sum_keys_x over the leading key axis (the same sums in the same order)
    if X[0].size <= STACK_MAX:  # small: one pass over the three stacked arrays
        sm, sr, sa = _seq_sum(X, 1)
    else:  # large: three passes over contiguous slices cost less than strided ones
        sm, sr, sa = _seq_sum(X[0], 0), _seq_sum(X[1], 0), _seq_sum(X[2], 0)
    kk = (T + 2) * SUM_U
    UR = (sm, guard(sm, sr * (1 + kk) + sa * kk))
    nA = nA_i.T.astype(np.float64)  # (R, B) exact small integers
    safe = np.maximum(nA, 1.0)  # nA where nA > 0, else 1
    # a query that sees nothing has δα = 0; Z = 1 there keeps the arithmetic finite
    Z = add((safe, 0.0), UR)  # type: ignore[arg-type]
    iz = _recip(Z)  # _head runs under the chunk's errstate
    if rule == "average":
        topf = top.astype(np.float64)
        mm = UR[0] / safe
        mean = (mm, UR[1] / safe * (1 + WIDEN) + np.abs(mm) * WIDEN + np.minimum(UR[1], TINY))
        numer = sub((uw_m, uw_r), (mean[0] * topf, mean[1] * topf))
    else:
        sup = support.transpose(2, 1, 0)
        # kstar: u − (nA − 1) − U − R; other tops: 1 + u
        base = sub((nA - 1.0, np.zeros_like(nA)), (-UR[0], UR[1]))  # nA − 1 + U + R
        kst = sub((uw_m, uw_r), base)
        one_u = (uw_m + 1.0, uw_r * (1 + WIDEN) + np.abs(uw_m + 1.0) * WIDEN)
        numer = (np.where(sup, kst[0], one_u[0]), np.where(sup, kst[1], one_u[1]))
        numer = (np.where(top, numer[0], uw_m), np.where(top, numer[1], uw_r))
    dm, dr = _scale_rows(numer, iz)
    dm *= visf
    dr *= visf
    return dm, dr


_GAPW: dict[tuple[Any, ...], MR] = {}


_VIS: dict[tuple[Any, ...], tuple[bool, np.ndarray, np.ndarray]] = {}


def _visibility(vis: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
    """For a visibility mask (R, T): whether all its rows are equal, and its transpose
    (1, T, R) as bool and as float (read only), memoised by the mask's value."""
    key = (vis.shape, vis.tobytes())
    got = _VIS.get(key)
    if got is None:
        if len(_VIS) > 256:
            _VIS.clear()
        visT = np.ascontiguousarray(vis.T)[None]
        visf = visT.astype(np.float64)
        visT.flags.writeable = False
        visf.flags.writeable = False
        same = bool(vis.shape[0] == 0 or (vis == vis[:1]).all())
        got = _VIS[key] = (same, visT, visf)
    return got


def _gap_weights(gnum: np.ndarray, sden: int, inv_tau: MR) -> MR:
    """exp(−g/τ) for exact gaps g = gnum/sden > 0 (no score perturbation), as enclosures.

    Every entry is an elementwise function of its gap alone, so it is computed once per
    distinct value: over the range of the (int64) gaps when it is short, memoised by that
    range, τ's enclosure and the rounding constants (a pure function of them: no state of a
    model or batch); then gathered. The same bits as computing every entry."""
    if gnum.dtype == np.int64 and gnum.size:
        lo = int(gnum.min())
        hi = int(gnum.max())
        if hi - lo < 256:  # a short range: every value in it, indexed by gnum − lo
            vals: tuple[int, ...] | None = (lo, hi)
            at: np.ndarray | None = gnum - lo
            grid = np.arange(lo, hi + 1)
        else:  # two values (the usual case beyond), else none of this
            is_hi = gnum == hi
            vals = (lo, hi, 2) if bool((is_hi | (gnum == lo)).all()) else None
            at = is_hi.astype(np.intp)
            grid = np.array([lo, hi], dtype=np.int64)
        if vals is not None:
            key = (vals, sden, float(inv_tau[0]), float(inv_tau[1]), _consts())
            got = _GAPW.get(key)
            if got is None:
                if len(_GAPW) > 4096:
                    _GAPW.clear()
                got = _GAPW[key] = _gap_weights_all(grid, sden, inv_tau)
            return got[0][at], got[1][at]
    return _gap_weights_all(gnum, sden, inv_tau)


def _consts() -> tuple[float, ...]:
    """The rounding constants (tests set them to 0: memoised results must follow)."""
    return (WIDEN, SUM_U, TINY, SLACK, CONV, EXP_ERR, EXP_ERR_X)


def _gap_weights_all(gnum: np.ndarray, sden: int, inv_tau: MR) -> MR:
    """exp(−g/τ) for exact gaps g = gnum/sden > 0, entry by entry (see :func:`_gap_weights`).

    E = −g/τ: |E − m| ≤ |m|·(c_g + ρ_τ(1 + c_g))·(1 + W) + |m|·W."""
    gm = _rat_mid(gnum, sden)
    c_g = CONV + 2.0 * TINY * sden
    rho_t = float(inv_tau[1]) / float(inv_tau[0])
    kk = (c_g + rho_t * (1 + c_g)) * (1 + WIDEN) * (1 + WIDEN) + 2 * WIDEN
    em = gm * (-float(inv_tau[0]))
    return mr_exp((em, em * (-kk) + TINY))


def recip(z: MR) -> MR:
    """1/z for z certainly positive (an infinite radius elsewhere)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _recip(z)


def _recip(z: MR) -> MR:
    """:func:`recip` for callers already under ``np.errstate`` (the chunk loop)."""
    zm, zr = z
    m = 1.0 / zm
    low = zm - zr
    r = zr * m / low * (1 + WIDEN) ** 2 + m * WIDEN
    return m, guard(m, r / (finite(z) & (zm > zr)))  # not certainly positive: infinite radius


def _scale_rows(a: MR, s: MR) -> MR:
    """a[j, i, b]·s[i, b] (s a per-query factor, broadcasting over the keys)."""
    sm, sr = s
    m = a[0] * sm
    am = np.abs(a[0])
    r = am * sr
    r += a[1] * (np.abs(sm) + sr)
    r *= 1 + WIDEN
    r += np.abs(m) * WIDEN
    return m, floor_rad(r)


def _direct_rows(
    tr: HeadTrace,
    ds: MR,
    inv_tau: MR,
    big: np.ndarray,
    da: MR,
    limbs: tuple[list[np.ndarray], int] | None = None,
) -> None:
    """Overwrite δα on the queries flagged ``big`` by softmax((s + δs)/τ) − hard weights.

    ``limbs``: the hard scores as :func:`_score_limbs` gives them (converted from those
    instead of from Python integers: the same floats)."""
    bi, ii = np.nonzero(big)
    vis = tr.visible[ii]  # (K, j)
    K, T = vis.shape
    R = big.shape[1]
    # only the visible entries (row-major, 1-D): the others end as exact zeros, so every
    # operation of softmax − hard runs on these alone (elementwise, or per row after a
    # scatter into (K, j) zeros: the same arrays, the same bits)
    iv = None if vis.all() else np.flatnonzero(vis)
    if iv is None:
        row = np.repeat(np.arange(K), T)
        col = np.tile(np.arange(T), K)
    else:
        row = iv // T
        col = iv - row * T
    # each entry's position in query-major (B, i, j) arrays and in key-major (B, j, i) ones:
    # one flat gather each, not a (K, j) gather and then the visible entries
    e_q = (bi * R + ii)[row] * T + col
    e_k = (bi[row] * T + col) * R + ii[row]

    def pick(x: np.ndarray) -> np.ndarray:  # x (B, i, j)
        return x.reshape(-1)[e_q]

    def spread(x: np.ndarray, fill: float) -> np.ndarray:
        if iv is None:
            return x.reshape(K, T)
        out = np.full((K, T), fill)
        out.reshape(-1)[iv] = x
        return out

    sf = None
    if limbs is not None:
        sf = _limbs_float([pick(c) for c in limbs[0]], limbs[1], owned=True)
    if sf is None:
        s = from_rat(pick(tr.scores.num), tr.scores.den)
    else:
        s = _rat_float(sf, tr.scores.den)
    es = mul(add(s, (ds[0].reshape(-1)[e_k], ds[1].reshape(-1)[e_k])), inv_tau)
    shift = spread(es[0], -np.inf).max(axis=1)  # any float will do
    shift = np.where(np.isfinite(shift), shift, 0.0)[row]
    x = sub(es, (shift, np.zeros_like(shift)))
    ws = mr_exp(x)
    Z = _sum_keys((spread(ws[0], 0.0), spread(ws[1], 0.0)))
    alpha = div(ws, (Z[0][row], Z[1][row]))
    cnt = tr.count[bi, ii].astype(np.float64)
    inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1.0), 0.0)[row]
    h = np.where(pick(tr.support), inv, 0.0)
    d = sub(alpha, (h, h * CONV))
    da[0][bi, :, ii] = spread(d[0], 0.0)
    da[1][bi, :, ii] = spread(d[1], 0.0)


def ffn_generic(pre: PreCols, delta: Cols, hidden: list[Sparse], out_rows: Sparse) -> Cols:
    """A feed-forward layer's δ column by column (when ffn_linear's integers would overflow)."""
    dh = delta
    for k, rows in enumerate(hidden):
        dz = lin(dh, rows)
        nxt: Cols = {}
        for c, d in dz.items():
            zpos, zneg, zm = pre(k, c)
            val = add(zm, d)
            rz = (np.where(zpos, zm[0], 0.0), np.where(zpos, zm[1], 0.0))
            gen = sub(mr_relu(val), rz)
            fin = finite(val)  # an overflowed sign test cannot tell
            keep = ~zneg & fin & (val[0] >= val[1])
            kill = (~zpos & fin & (-val[0] >= val[1])) | (d[1] == 0)
            m = np.where(keep, d[0], np.where(kill, 0.0, gen[0]))
            r = np.where(keep, d[1], np.where(kill, 0.0, gen[1]))
            nxt[c] = (m, r)
        dh = nxt
    return add_cols(delta, lin(dh, out_rows))


class _IntFFN:
    """A feed-forward layer's weights as integer rows, for exact linear tracking.

    ``ok`` is False when a coefficient of the composed linear map could reach 2^52
    (then the generic column path is used).
    """

    def __init__(self, layer: CompiledFFN) -> None:
        self.hidden: list[tuple[list[list[tuple[int, int]]], int]] = []
        self.ok = True
        bound = 1  # bound of |numerator| of any coefficient so far (den = product of dens)
        for w, _b in layer.hidden:
            rows = [
                [(c, int(w.num[h, c])) for c in range(w.shape[1]) if w.num[h, c]]
                for h in range(w.shape[0])
            ]
            self.hidden.append((rows, int(w.den)))
            width = max((sum(abs(v) for _, v in r) for r in rows), default=0)
            bound *= max(width, 1)
        wo = layer.out[0]
        self.out = [
            [(c, int(wo.num[a, c])) for c in range(wo.shape[1]) if wo.num[a, c]]
            for a in range(wo.shape[0])
        ]
        self.out_den = int(wo.den)
        # the first hidden layer's integer combinations depend only on which δ columns are
        # present (ffn_linear): computed once per set of columns, per model
        self.plans: dict[tuple[Any, ...], Any] = {}
        den = self.out_den
        for _, dn in self.hidden:
            den *= dn
        width = max((sum(abs(v) for _, v in r) for r in self.out), default=0)
        if bound * max(width, 1) + den >= 2**52 or den >= 2**52:
            self.ok = False


PreCols = Callable[[int, int], tuple[np.ndarray, np.ndarray, MR]]
# (hidden layer k, unit h) -> (z > 0, z < 0, enclosure of z): the exact pre-activations of a
# feed-forward layer, however they are stored (one denominator here, per-row in longsoft).
# It may also have ``block(k, units)``: the same for many units at once, unit-major.


class _RatPre:
    """PreCols of pre-activations stored as RatArrays (one denominator each): converted once
    per hidden layer (elementwise: the same bits as unit by unit) and kept unit-major, so
    that :meth:`block` gathers the units a feed-forward layer needs in one operation."""

    def __init__(self, pre: list[RatArray]) -> None:
        self.pre = pre
        self.full: dict[int, tuple[np.ndarray, np.ndarray, MR]] = {}

    def _get(self, k: int) -> tuple[np.ndarray, np.ndarray, MR]:
        got = self.full.get(k)
        if got is None:
            zn = self.pre[k].num
            m, r = from_rat(zn, self.pre[k].den)
            ax = (zn.ndim - 1,) + tuple(range(zn.ndim - 1))  # unit axis first (views)
            got = self.full[k] = (
                np.array(zn > 0, bool).transpose(ax),
                np.array(zn < 0, bool).transpose(ax),
                (m.transpose(ax), r.transpose(ax)),
            )
        return got

    def __call__(self, k: int, h: int) -> tuple[np.ndarray, np.ndarray, MR]:
        zpos, zneg, (m, r) = self._get(k)
        return zpos[h], zneg[h], (m[h], r[h])

    def block(self, k: int, units: np.ndarray) -> tuple[np.ndarray, np.ndarray, MR]:
        zpos, zneg, (m, r) = self._get(k)
        return zpos[units], zneg[units], (m[units], r[units])


def rat_pre(pre: list[RatArray]) -> PreCols:
    """PreCols of pre-activations stored as RatArrays (one denominator each)."""
    return _RatPre(pre)


def _pre_block(pre: PreCols, k: int, units: np.ndarray) -> tuple[np.ndarray, np.ndarray, MR]:
    """``pre`` of many units at once, unit-major (stacked when ``pre`` has no ``block``)."""
    block = getattr(pre, "block", None)
    if block is not None:
        return block(k, units)  # type: ignore[no-any-return]
    got = [pre(k, int(h)) for h in units]
    return (
        np.stack([g[0] for g in got]),
        np.stack([g[1] for g in got]),
        (np.stack([g[2][0] for g in got]), np.stack([g[2][1] for g in got])),
    )


@dataclass
class _Terms:
    """Integer combinations under construction: entry t = Σ w·E[e] over its terms (t, e, w);
    every entry belongs to one δ column, and a unit lists its entries in the order their
    columns first appear (the order of the fixed-order sum :func:`_fold` computes)."""

    t: list[int]
    e: list[int]
    w: list[int]
    col: list[int]  # δ column (position) of every new entry
    plan: Any = None  # combine's indices, once the terms are complete (see combine)
    steps: Any = None  # the same as per-term steps (see combine)

    def add(self, seen: dict[int, int], entries: list[int], w: int, ecol: list[int]) -> None:
        """w·(an input unit's entries) into the unit being built (``seen``: column -> entry)."""
        for e in entries:
            p = ecol[e]
            t = seen.get(p)
            if t is None:
                t = seen[p] = len(self.col)
                self.col.append(p)
            self.t.append(t)
            self.e.append(e)
            self.w.append(w)

    def combine(self, E: np.ndarray) -> np.ndarray:
        """The new entries' integer arrays (exact: every |sum| < 2^52 by _IntFFN.ok)."""
        extra = (1,) * (E.ndim - 1)
        plan = self.plan
        if plan is None:
            plan = self.plan = self._plan()
        e, w, starts = plan
        if starts is None:  # one term per entry, in order (the usual case)
            return E[e] * w.reshape((-1,) + extra)
        # terms grouped by entry (integer sums: any order is exact): every entry's first
        # term, then the k-th terms of the entries that have one, added in place (most
        # entries have one term: no product array of every term, no reduceat)
        steps = self.steps
        if steps is None:
            steps = self.steps = self._steps(e, w, starts)
        (e0, w0), rest = steps[0], steps[1:]
        out = E[e0]
        out *= w0.reshape((-1,) + extra)
        for sel, ek, wk in rest:
            t = E[ek]
            t *= wk.reshape((-1,) + extra)
            out[sel] += t
        return out

    @staticmethod
    def _steps(e: list[int], w: np.ndarray, starts: list[int]) -> list[Any]:
        """combine's plan as steps: (first terms' entries, weights), then per k ≥ 1 (the
        entries with a k-th term, that term's entries, weights)."""
        ends = starts[1:] + [len(e)]
        cnt = [b - a for a, b in zip(starts, ends, strict=True)]
        steps: list[Any] = [([e[a] for a in starts], w[starts])]
        for k in range(1, max(cnt)):
            sel = [t for t, c in enumerate(cnt) if c > k]
            at = [starts[t] + k for t in sel]
            steps.append((np.asarray(sel, np.intp), [e[a] for a in at], w[at]))
        return steps

    def _plan(self) -> tuple[list[int], np.ndarray, list[int] | None]:
        """combine's gather indices and weights (terms are only added before it)."""
        n = len(self.col)
        if self.t == list(range(n)):
            return list(self.e), np.asarray(self.w, np.int64), None
        order = sorted(range(len(self.t)), key=self.t.__getitem__)
        ts = [self.t[i] for i in order]
        w = np.asarray([self.w[i] for i in order], np.int64)
        starts = [i for i in range(len(ts)) if i == 0 or ts[i] != ts[i - 1]]
        return [self.e[i] for i in order], w, starts


def _any_rows(x: np.ndarray) -> list[bool]:
    """Per entry of axis 0: is any element nonzero."""
    return x.reshape(len(x), -1).any(axis=1).tolist() if len(x) else []


def _scaled_res(rs: MR, w: int, den: int) -> MR:
    """A residual enclosure times w/den (residuals hold values, not numerators)."""
    rm, rr = rs
    f = float(Fraction(w, den))
    return rm * f, rr * abs(f) * (1 + WIDEN) + np.abs(rm * f) * WIDEN


def _gather(
    rows: list[list[tuple[int, int]]],
    firsts: list[int],
    lin_of: dict[int, list[int]],
    res_of: dict[int, MR],
    E: np.ndarray,
    ecol: list[int],
    wden: int,
    memo: dict[Any, Any] | None = None,
    key: Any = None,
) -> tuple[list[int], list[list[int]], list[MR | None], np.ndarray, np.ndarray]:
    """The units Σ_i w_i·(input unit i) of a layer (``rows``; ``firsts``: an entry of E to put
    first with weight 1, or −1): their integer entries, exactly, and residuals; returns the
    active units (a nonzero entry or a residual), their entries in order, their residuals,
    the entry arrays and the entries' δ columns.

    ``memo`` (with no residuals): a dict owned by the layer's weights, keyed by ``key``,
    which must determine ``rows``, ``firsts``, ``lin_of`` and ``ecol``; it keeps the
    combinations' structure (which entries, weights and columns: no arrays of a batch), so
    only the integer products are computed again."""
    if memo is not None and not res_of:
        got = memo.get(key)
        if got is None:
            if len(memo) > 256:
                memo.clear()
            t = _Terms([], [], [], [])
            cands0: list[list[int]] = []
            for row, first in zip(rows, firsts, strict=True):
                seen0: dict[int, int] = {}
                if first >= 0:
                    t.add(seen0, [first], 1, ecol)
                for i, w in row:
                    li = lin_of.get(i)
                    if li is not None:
                        t.add(seen0, li, w, ecol)
                cands0.append(list(seen0.values()))
            got = memo[key] = (t, cands0, np.asarray(t.col, np.intp))
        t, cands0, col_arr = got
        E2 = t.combine(E) if t.col else E[:0]
        nz = _any_rows(E2)
        act = []
        orders = []
        for a, cand in enumerate(cands0):
            order = [x for x in cand if nz[x]]
            if order:
                act.append(a)
                orders.append(order)
        return act, orders, [None] * len(act), E2, col_arr
    terms = _Terms([], [], [], [])
    cands: list[list[int]] = []
    ress: list[MR | None] = []
    tt, te, tw, tcol = terms.t, terms.e, terms.w, terms.col
    for row, first in zip(rows, firsts, strict=True):
        seen: dict[int, int] = {}
        if first >= 0:
            terms.add(seen, [first], 1, ecol)
        res: MR | None = None
        for i, w in row:
            li = lin_of.get(i)
            if li is not None:  # terms.add, inlined (this loop is the layer's Python cost)
                for e in li:
                    p = ecol[e]
                    t_ = seen.get(p)
                    if t_ is None:
                        t_ = seen[p] = len(tcol)
                        tcol.append(p)
                    tt.append(t_)
                    te.append(e)
                    tw.append(w)
            if res_of:
                rs = res_of.get(i)
                if rs is not None:
                    t = _scaled_res(rs, w, wden)
                    res = t if res is None else add(res, t)
        cands.append(list(seen.values()))
        ress.append(res)
    E2 = terms.combine(E) if terms.col else E[:0]
    nz = _any_rows(E2)  # an entry that is zero for every word is dropped (it would widen)
    act: list[int] = []
    orders: list[list[int]] = []
    act_res: list[MR | None] = []
    for a, (cand, res) in enumerate(zip(cands, ress, strict=True)):
        order = [t for t in cand if nz[t]]
        if order or res is not None:
            act.append(a)
            orders.append(order)
            act_res.append(res)
    return act, orders, act_res, E2, np.asarray(terms.col, np.intp)


def _fold(
    res: list[MR | None], orders: list[list[int]], E: np.ndarray, ecol: np.ndarray, den: int, D: MR
) -> MR:
    """Per unit a: res[a] (if any) + Σ_t (E[t]/den)·δ[col(t)] over its entries t in order,
    for every unit at once: step j adds every unit's j-th term by the same elementwise
    :func:`add` and :func:`mul` as a unit-by-unit fold, so the bits are the same.

    The units are taken longest first, so that the units with a j-th term are a prefix
    (views, added in place: no gathers and scatters), and put back in order at the end."""
    na = len(orders)
    shape = D[0].shape[1:]
    if den >= 2**400 or not E.size:
        return _fold_plain(res, orders, E, ecol, den, D)
    lens = [len(o) for o in orders]
    perm = sorted(range(na), key=lambda a: -lens[a])  # stable
    m = np.empty((na,) + shape)
    r = np.empty((na,) + shape)
    for i, a in enumerate(perm):
        if not lens[a]:
            ra = res[a]
            assert ra is not None
            m[i] = ra[0]
            r[i] = ra[1]
    with_res = [i for i, a in enumerate(perm) if lens[a] and res[a] is not None]
    for j in range(max(lens)):
        nj = sum(1 for x in lens if x > j)
        ent = [orders[a][j] for a in perm[:nj]]
        cp = ecol[ent]
        Ej = E if ent == list(range(len(E))) else E[ent]
        if len(cp) == len(D[0]) and cp.tolist() == list(range(len(cp))):
            Dj = D  # every δ column, in order: no gather (the same elements)
        else:
            Dj = (D[0][cp], D[1][cp])
        if j == 0:
            _ratmul_into(Ej, den, Dj, m[:nj], r[:nj])
            for i in with_res:  # res + the first term, as add(res, term)
                ra = res[perm[i]]
                assert ra is not None
                m[i], r[i] = add(ra, (m[i], r[i]))
        else:
            tm = np.empty((nj,) + shape)
            tr = np.empty((nj,) + shape)
            _ratmul_into(Ej, den, Dj, tm, tr)
            _add_into(m[:nj], r[:nj], tm, tr)
    if perm != list(range(na)):
        inv = np.empty(na, np.intp)
        inv[perm] = np.arange(na)
        m, r = m[inv], r[inv]
    return m, r


def _ratmul_into(Ej: np.ndarray, den: int, Dj: MR, m: np.ndarray, r: np.ndarray) -> None:
    """mul(from_rat(Ej, den), Dj) into m, r (den < 2^400): the same operations on the same
    operands (× and + commute exactly), without temporaries."""
    am = Ej.astype(np.float64)
    if den & (den - 1) == 0 and den < 2**900:
        am *= 1.0 / den
    else:
        am /= float(den)
    bm, br = np.broadcast_to(Dj[0], m.shape), np.broadcast_to(Dj[1], m.shape)
    aam = np.abs(np.broadcast_to(am, m.shape))
    ar = aam * (CONV + 2.0 * TINY * den)  # from_rat's radius
    np.multiply(am, bm, out=m)
    np.multiply(aam, br, out=r)  # |am|·br
    t = np.abs(bm)
    t *= ar
    r += t  # + ar·|bm|
    np.multiply(ar, br, out=t)
    r += t  # + ar·br
    r *= 1 + WIDEN
    np.abs(m, out=t)
    t *= WIDEN
    r += t
    np.minimum(ar, br, out=t)  # _nzfloor
    np.minimum(t, TINY, out=t)
    r += t


def _add_into(m: np.ndarray, r: np.ndarray, bm: np.ndarray, br: np.ndarray) -> None:
    """(m, r) = add((m, r), (bm, br)) in place (the same operations)."""
    m += bm
    r += br
    r *= 1 + WIDEN
    t = np.abs(m)
    t *= WIDEN
    r += t


def _fold_plain(
    res: list[MR | None], orders: list[list[int]], E: np.ndarray, ecol: np.ndarray, den: int, D: MR
) -> MR:
    """:func:`_fold` with gathers (and any denominator)."""
    na = len(orders)
    shape = D[0].shape[1:]
    have = [r is not None for r in res]
    m = np.empty((na,) + shape)
    r = np.empty((na,) + shape)
    for a, ra in enumerate(res):
        if ra is not None:
            m[a] = ra[0]
            r[a] = ra[1]
    for j in range(max(len(o) for o in orders)):
        sel = [a for a in range(na) if len(orders[a]) > j]
        ent = [orders[a][j] for a in sel]
        cp = ecol[ent]
        Ej = E if ent == list(range(len(E))) else E[ent]  # every entry, in order: no gather
        if len(cp) == len(D[0]) and cp.tolist() == list(range(len(cp))):
            Dj = D  # every δ column, in order: no gather (the same elements)
        else:
            Dj = (D[0][cp], D[1][cp])
        tm, tr = mul(from_rat(Ej, den), Dj)
        old = [i for i, a in enumerate(sel) if have[a]]
        if not old and len(sel) == na:
            m, r = tm, tr
        elif len(old) == na:  # every unit has a sum and a j-th term: no gathers
            m, r = add((m, r), (tm, tr))
        elif not old:
            m[sel] = tm
            r[sel] = tr
        else:
            sa = [sel[i] for i in old]
            m[sa], r[sa] = add((m[sa], r[sa]), (tm[old], tr[old]))
            new = [i for i, a in enumerate(sel) if not have[a]]
            if new:
                sn = [sel[i] for i in new]
                m[sn] = tm[new]
                r[sn] = tr[new]
        for a in sel:
            have[a] = True
    return m, r


def ffn_linear(pre: PreCols, delta: Cols, ints: _IntFFN, shape: tuple[int, ...]) -> Cols:
    """A feed-forward layer, tracking δ of every hidden unit as an exact integer
    combination of the input δ columns (plus an enclosure where a ReLU is undecided).

    Why: constructions subtract a coordinate and add it back through ReLUs in their
    linear range ("rounding gadgets"); interval arithmetic alone would turn δ − δ = 0
    into ± the width of δ. With exact coefficients it is exactly 0.

    All units of a hidden layer are computed at once, unit-major: the integer coefficients
    exactly, each unit's sum in its fixed order (:func:`_fold`), the ReLU tests elementwise —
    the numbers of a unit-by-unit loop bit for bit, in a few dozen numpy operations per
    layer instead of ~15 per unit. A unit keeps a δ column's coefficient only where it is
    nonzero for some word (a zero term would still widen a radius by an ulp).
    """
    if not delta:
        return {}
    cols = sorted(delta)
    C = len(cols)
    D = (_stack([delta[c][0] for c in cols]), _stack([delta[c][1] for c in cols]))
    E = np.ones((C,) + shape, dtype=np.int64)  # integer coefficient entries, over den
    ecol = list(range(C))  # the δ column (position in cols) of every entry
    lin_of: dict[int, list[int]] = {c: [p] for p, c in enumerate(cols)}  # unit -> entries
    res_of: dict[int, MR] = {}  # unit -> enclosure where its ReLU was undecided
    den = 1
    plans = getattr(ints, "plans", None) if math.prod(shape) else None
    for k, (rows, wden) in enumerate(ints.hidden):
        if k == 0 and plans is not None:
            # every entry is a constant w (ones times a weight): kept as (n, 1, …) arrays
            # that broadcast to the same numbers, and the whole plan once per column set
            got = plans.get(tuple(cols))
            if got is None:
                if len(plans) > 256:
                    plans.clear()
                E1 = np.ones((C,) + (1,) * len(shape), dtype=np.int64)
                got = plans[tuple(cols)] = _gather(
                    rows, [-1] * len(rows), lin_of, res_of, E1, ecol, wden
                )
            act, orders, act_res, E2, col2 = got
        else:
            memo = plans if plans is not None and not res_of else None
            key = None
            if memo is not None:
                key = ("h", k, tuple(ecol), tuple((i, tuple(v)) for i, v in lin_of.items()))
            act, orders, act_res, E2, col2 = _gather(
                rows, [-1] * len(rows), lin_of, res_of, E, ecol, wden, memo, key
            )
        den *= wden
        lin_of, res_of = {}, {}
        if not act:
            E, ecol = np.zeros((0,) + shape, np.int64), []
            continue
        dz = _fold(act_res, orders, E2, col2, den, D)
        na = len(act)
        zpos, zneg, zm = _pre_block(pre, k, np.asarray(act, np.intp))
        val = add(zm, dz)
        # relu(z + d) − relu(z) is d when z ≥ 0 and z + d ≥ 0, 0 when both are ≤ 0
        fin = finite(val)  # an overflowed sign test cannot tell
        keep = ~zneg & fin & (val[0] >= val[1])
        kill = (~zpos & fin & (-val[0] >= val[1])) | (dz[1] == 0)
        gen_mask = ~keep & ~kill
        # the coefficients where the ReLU certainly keeps its input
        ents = [t for o in orders for t in o]
        owner = [a for a, o in enumerate(orders) for _ in o]
        E3 = np.where(keep[owner], E2[ents], 0)
        nz3 = _any_rows(E3)
        kept: list[int] = []
        pos = 0
        for a, o in enumerate(orders):
            mine = [pos + i for i in range(len(o)) if nz3[pos + i]]
            pos += len(o)
            if mine:
                lin_of[act[a]] = list(range(len(kept), len(kept) + len(mine)))
                kept.extend(mine)
        E = E3[kept]
        ecol = [int(col2[ents[i]]) for i in kept]
        # the residual: res where kept, relu(z + d) − relu(z) where undecided
        with_res = [a for a in range(na) if act_res[a] is not None]
        if not with_res and not gen_mask.any():
            continue
        r_m = np.zeros((na,) + shape)
        r_r = np.zeros((na,) + shape)
        if with_res:
            for a in with_res:
                rs = act_res[a]
                assert rs is not None
                r_m[a], r_r[a] = rs
            r_m = np.where(keep, r_m, 0.0)
            r_r = np.where(keep, r_r, 0.0)
        if gen_mask.any():
            rz = (np.where(zpos, zm[0], 0.0), np.where(zpos, zm[1], 0.0))
            gen = sub(mr_relu(val), rz)
            r_m = np.where(gen_mask, gen[0], r_m)
            r_r = np.where(gen_mask, gen[1], r_r)
        has = _any_rows(r_r)
        res_of = {act[a]: (r_m[a], r_r[a]) for a in range(na) if has[a]}
    # out[a] = δ[a] + Σ_h Wo[a, h]·(hidden δ_h), over one denominator
    dt = den * ints.out_den
    targets = sorted(set(delta) | {a for a, row in enumerate(ints.out) if row})
    pos_of = {c: p for p, c in enumerate(cols)}

    def out_terms(E: np.ndarray, ecol: list[int], idshape: tuple[int, ...]) -> Any:
        base = len(ecol)
        E_out = np.concatenate([E, np.full((C,) + idshape, dt, np.int64)])  # δ[a]·dt terms
        firsts = [base + pos_of[a] if a in pos_of else -1 for a in targets]
        rows = [ints.out[a] for a in targets]
        memo = plans if plans is not None and not res_of else None
        key = None
        if memo is not None:  # targets and firsts follow from cols
            key = ("o", tuple(cols), tuple(ecol), tuple((i, tuple(v)) for i, v in lin_of.items()))
        return _gather(
            rows, firsts, lin_of, res_of, E_out, ecol + list(range(C)), ints.out_den, memo, key
        )

    if plans is not None and not lin_of and not res_of:
        # every hidden δ vanished (or never started): the layer passes δ through, with
        # constant coefficients — planned once per set of columns, like the first layer
        key = ("out",) + tuple(cols)
        got = plans.get(key)
        if got is None:
            got = plans[key] = out_terms(
                E[:0].reshape((0,) + (1,) * len(shape)), [], (1,) * len(shape)
            )
        act, orders, act_res, E2, col2 = got
    else:
        act, orders, act_res, E2, col2 = out_terms(E, ecol, shape)
    if not act:
        return {}
    m, r = _fold(act_res, orders, E2, col2, dt, D)
    return {targets[a]: (m[i], r[i]) for i, a in enumerate(act)}


# ---------------------------------------------------------------------------------------
# the batch
# ---------------------------------------------------------------------------------------


@dataclass
class FloatBatch:
    """Certified float results for every word of a batch (see :func:`certify_float`)."""

    settled: np.ndarray  # (B,) bool: decided, and every layer's error enclosure tight
    err_lo: np.ndarray  # (B, L) float64
    err_hi: np.ndarray  # (B, L) float64
    err_row: np.ndarray  # (B, L) int64
    accept: np.ndarray | None = None  # (B,) bool
    labels: np.ndarray | None = None  # (B, P) int64, -1 = tie
    within_tol: np.ndarray | None = None  # (B,) bool
    decided: np.ndarray | None = None  # (B,) bool: ε ≤ 1 before the last layer and read-out
    tight: np.ndarray | None = None  # (B, L) bool: the layer's enclosure meets the accuracy
    tie: np.ndarray | None = None  # (B,) bool: read-out undecided only where the hard one ties
    read: np.ndarray | None = None  # (B,) bool: the read-out decided (ε ≤ 1 aside)

    def underflowed(self) -> np.ndarray:
        """(B,) words with an error that underflowed to [0, ≲ TINY] in some layer (tiny τ):
        a true bound that says little, so the check gives them arb, which sizes them."""
        return ((self.err_lo == 0) & (self.err_hi > 0) & (self.err_hi < 1e-140)).any(axis=1)


def _layer_errors(delta: Cols, B: int, T: int, d: int) -> tuple[np.ndarray, ...]:
    """Per word: a lower and an upper bound of max |δ| over rows and columns, and the row of
    the (first) largest upper bound. Every column at once, column-major (C, B, T): the
    bounds are elementwise and maxima exact, so the bits are those of column by column, and
    the first row of the largest bound is the same (a column absent from δ is 0)."""
    if not delta:
        return np.zeros(B), np.zeros(B), np.zeros(B, dtype=np.int64)
    cols = list(delta)
    al, au = abs_bounds((_stack([delta[c][0] for c in cols]), _stack([delta[c][1] for c in cols])))
    lo = np.maximum(np.zeros(B), al.max(axis=(0, 2)))
    top = au.max(axis=0)  # (B, T): nan propagates, as through argmax below
    row = np.argmax(top, axis=1)
    return lo, top.max(axis=1), row.astype(np.int64)


ERR_DEFER = 1 << 13  # pending δ entries up to which layer errors wait to share one pass (small:
# beyond ~64 KB per array the stacked temporaries cost more in memory traffic than they save)


def _errors_into(
    pending: list[tuple[int, Cols]],
    err: tuple[np.ndarray, np.ndarray, np.ndarray],
    B: int,
    T: int,
    d: int,
) -> None:
    """:func:`_layer_errors` of several layers ``(index, δ)`` in one stacked pass, written into
    ``err`` = (err_lo, err_hi, err_row) (left as they are for a layer with no δ: zeros).

    The bounds are elementwise and the per-layer maxima exact (``abs_bounds`` gives no nan
    and no −0: its non-finite entries become [0, inf]), so segment maxima over the stacked
    columns give the bits of layer by layer, and the first row of the largest bound is the
    same. Small batches pay the per-call cost once per call of certify_float, not per layer."""
    pending = [(li, dl) for li, dl in pending if dl]
    if not pending:
        return
    if len(pending) == 1:
        li, dl = pending[0]
        err[0][:, li], err[1][:, li], err[2][:, li] = _layer_errors(dl, B, T, d)
        return
    ms: list[np.ndarray] = []
    rs: list[np.ndarray] = []
    starts: list[int] = []
    for _, dl in pending:
        starts.append(len(ms))
        for m, r in dl.values():
            ms.append(m)
            rs.append(r)
    al, au = abs_bounds((_stack(ms), _stack(rs)))  # (C, B, T)
    ends = starts[1:] + [len(ms)]
    # per layer, the maximum over its columns (contiguous blocks), then over the rows
    lo = np.array([al[a:b].max(axis=0) for a, b in zip(starts, ends, strict=True)]).max(axis=2)
    top = np.array([au[a:b].max(axis=0) for a, b in zip(starts, ends, strict=True)])
    idx = [li for li, _ in pending]
    err[0][:, idx] = np.maximum(lo, 0.0).T
    err[1][:, idx] = top.max(axis=2).T
    err[2][:, idx] = np.argmax(top, axis=2).T


def _tight(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """measure.tight, decided soundly in floats (False when not certainly tight)."""
    fin = np.isfinite(hi) & np.isfinite(lo)
    # (called by _finish, under the chunk's errstate: inf − inf gives nan quietly)
    rel = ((hi - lo) * (1 + 2.0**-50) <= hi * TIGHT_REL_F * (1 - 2.0**-50)) & (hi >= 2.0**-900)
    return fin & ((hi == 0) | ((lo == 0) & (hi <= ZERO_UPPER_F)) | rel)


def _dot_out(delta: Cols, rows: Sparse, slot: int) -> list[MR | None]:
    """Per output row r: Σ_k W[r, k]·δ[slot, k] (None = exactly zero)."""
    sub_cols = {c: (v[0][:, slot], v[1][:, slot]) for c, v in delta.items()}
    got = lin(sub_cols, rows)
    return [got.get(r) for r in range(len(rows))]


SUB_BATCH = 1024  # words per internal chunk: fewer Python-level calls, arrays still small
CHUNK_ENTRIES = 1 << 18  # at most this many (word, query, key) entries per chunk: long inputs
# get chunks of a few words (one at T ≳ 512), so memory stays O(T²) however large the batch


def _ra(x: RatArray, sl: slice) -> RatArray:
    return RatArray(x.num[sl], x.den)


def _slice_trace(h: HeadTrace, sl: slice) -> HeadTrace:
    return HeadTrace(
        q=_ra(h.q, sl),
        k=_ra(h.k, sl),
        v=_ra(h.v, sl),
        scores=_ra(h.scores, sl),
        visible=h.visible,
        top=h.top[sl],
        support=h.support[sl],
        count=h.count[sl],
        mixed=_ra(h.mixed, sl),
    )


def _slice_batch(hb: HardBatch, sl: slice) -> HardBatch:
    """Words ``sl`` of a hard batch (views, no copies)."""
    layers = []
    for lt in hb.layers:
        heads = None
        if lt.heads is not None:
            heads = [_slice_trace(h, sl) for h in lt.heads]
        pre = None if lt.pre is None else [_ra(z, sl) for z in lt.pre]
        layers.append(LayerTrace(lt.kind, _ra(lt.x_in, sl), _ra(lt.x_out, sl), heads, pre))
    return HardBatch(n=hb.n, words=hb.words[sl], x0=_ra(hb.x0, sl), layers=layers)


def _query_rows(tr: HeadTrace, a: int, b: int) -> HeadTrace:
    """The trace restricted to query rows a..b−1, every key kept (views)."""
    return HeadTrace(
        q=RatArray(tr.q.num[:, a:b], tr.q.den),
        k=tr.k,
        v=tr.v,
        scores=RatArray(tr.scores.num[:, a:b], tr.scores.den),
        visible=tr.visible[a:b],
        top=tr.top[:, a:b],
        support=tr.support[:, a:b],
        count=tr.count[:, a:b],
        mixed=RatArray(tr.mixed.num[:, a:b], tr.mixed.den),
    )


def _assemble(first: Cols, rest: Cols, sh: Sharing, B: int, T: int) -> Cols:
    """δ of every row: rows < q0 from each group's first word, the others per word."""
    out: Cols = {}
    q0, G = sh.q0, sh.group
    for c in sorted(set(first) | set(rest)):
        m = np.zeros((B, T))
        r = np.zeros((B, T))
        if c in first:
            m[:, :q0] = np.repeat(first[c][0], G, axis=0)
            r[:, :q0] = np.repeat(first[c][1], G, axis=0)
        if c in rest:
            m[:, q0:] = rest[c][0]
            r[:, q0:] = rest[c][1]
        out[c] = (m, r)
    return out


def certify_float(
    cm: CompiledModel,
    hb: HardBatch,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    share: bool = True,
) -> FloatBatch:
    """δ after every layer for every word of the batch, and the soft read-out, certified.

        ``taus[l]`` is None for a feed-forward layer, else per head an exact (lo, hi) with
        lo ≤ τ ≤ hi. A word is ``settled`` when every reported number meets the reporting
        accuracy, the ε ≤ 1 comparisons before the last layer are decided and the read-out is
        decided; the other words need the arb path. Every word's numbers are computed
        elementwise; the last bits of enclosures can depend on the batch (see the module's
    "Determinism"), never its decisions, exact values or soundness.
    """
    malloc_tuned()
    B = len(hb.words)
    T = hb.x0.shape[1]
    chunk = max(1, min(SUB_BATCH, CHUNK_ENTRIES // (T * T)))
    sh = None
    if share:
        # run_hard found the sharing of the whole batch (max group B): the same answer
        # whenever the batch is one chunk (a group never exceeds B either way); None when
        # it shared nothing (or was told not to: sharing changes no bit, only the time)
        sh = hb.sharing if B <= chunk else prefix_sharing(cm.model, hb.words, hb.n, chunk)
    if sh is not None:
        chunk = chunk // sh.group * sh.group  # groups never straddle two chunks
    if B <= chunk:
        return _certify_chunk(cm, hb, taus, sh)
    parts = [
        _certify_chunk(cm, _slice_batch(hb, slice(i, i + chunk)), taus, sh)
        for i in range(0, B, chunk)
    ]
    return _concat(parts)


def _certify_chunk(
    cm: CompiledModel,
    hb: HardBatch,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    sh: Sharing | None = None,
) -> FloatBatch:
    fw = float_weights(cm)
    B = len(hb.words)
    T = hb.x0.shape[1]
    d = hb.x0.shape[2]
    L = len(cm.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.zeros((B, L))
    err_row = np.zeros((B, L), dtype=np.int64)
    delta: Cols = {}
    err = (err_lo, err_hi, err_row)
    pending: list[tuple[int, Cols]] = []  # layers whose error bounds wait (_errors_into)
    size = 0
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        for li, (layer, lt) in enumerate(zip(cm.layers, hb.layers, strict=True)):
            if isinstance(layer, list):
                assert lt.heads is not None
                row = taus[li]
                assert row is not None
                if sh is not None and li < sh.layers:
                    delta, parts = _shared_layer(
                        lt.heads, layer, row, delta, fw.layers[li], sh, B, T
                    )
                    size = _shared_errors(li, delta, parts, sh, pending, size, err, B, T, d)
                    continue
                total = delta
                for hi_, (ch, tr) in enumerate(zip(layer, lt.heads, strict=True)):
                    it = inv_tau(*row[hi_])
                    contrib = _head_any(tr, ch.head.hard, delta, it, fw.layers[li][hi_])
                    total = add_cols(total, contrib)
                delta = total
            elif sh is not None and li < sh.layers:
                assert lt.pre is not None
                delta, parts = _shared_ffn(lt.pre, delta, fw.layers[li], sh, B, T)
                size = _shared_errors(li, delta, parts, sh, pending, size, err, B, T, d)
                continue
            else:
                assert lt.pre is not None
                hidden, out_rows, ints = fw.layers[li]
                pre = rat_pre(lt.pre)
                if ints.ok:
                    delta = ffn_linear(pre, delta, ints, (B, T))
                else:
                    delta = ffn_generic(pre, delta, hidden, out_rows)
            pending.append((li, delta))
            size += len(delta) * B * T
            if size > ERR_DEFER:
                _errors_into(pending, err, B, T, d)
                pending, size = [], 0
        _errors_into(pending, err, B, T, d)
        return _finish(cm, hb, delta, fw, err_lo, err_hi, err_row)


def _finish(
    cm: CompiledModel,
    hb: HardBatch,
    delta: Cols,
    fw: FloatWeights,
    err_lo: np.ndarray,
    err_hi: np.ndarray,
    err_row: np.ndarray,
) -> FloatBatch:
    """Decisions from the per-layer error enclosures and the last layer's δ (both tiers)."""
    B, L = err_lo.shape
    decided = np.full(B, fw.ok)
    tight = _tight(err_lo, err_hi)  # elementwise: every layer at once
    if L > 1:  # ε ≤ 1 decided before the last layer (every layer at once)
        lo_, hi_ = err_lo[:, :-1], err_hi[:, :-1]
        decided &= ((hi_ <= 1) | ((lo_ > 1) & np.isfinite(lo_))).all(axis=1)
    res = FloatBatch(np.full(B, fw.ok), err_lo, err_hi, err_row)
    _readout(cm, hb, delta, fw, res)  # narrows ``settled`` to decided read-outs
    res.read = res.settled  # the read-out alone (run/shard.py's settle_dominated)
    res.decided = res.read & decided
    res.tight = tight
    res.settled = res.decided & tight.all(axis=1)
    return res


# ---------------------------------------------------------------------------------------
# the second tier: double-double (exactattn.engine.ddtier, proofs/double_double.md)
# ---------------------------------------------------------------------------------------

USE_DD = os.environ.get("EXACTATTN_DD", "1") != "0"  # the double-double tier (docs/scale.md)
DD_PREC = 220  # bits of the temperature balls the second tier reads (τ to ≈ 2^-220)


def take_batch(hb: HardBatch, idx: np.ndarray) -> HardBatch:
    """Words ``idx`` of a hard batch (copies)."""
    layers = []
    for lt in hb.layers:
        heads = None
        if lt.heads is not None:
            heads = [_slice_trace(h, idx) for h in lt.heads]  # type: ignore[arg-type]
        pre = None if lt.pre is None else [_ra(z, idx) for z in lt.pre]  # type: ignore[arg-type]
        layers.append(
            LayerTrace(lt.kind, _ra(lt.x_in, idx), _ra(lt.x_out, idx), heads, pre)  # type: ignore[arg-type]
        )
    words = [hb.words[i] for i in idx.tolist()]
    return HardBatch(n=hb.n, words=words, x0=_ra(hb.x0, idx), layers=layers)  # type: ignore[arg-type]


_take_batch = take_batch  # the old name (benchmarks use it)


def put_rows(fb: FloatBatch, idx: np.ndarray, part: FloatBatch) -> FloatBatch:
    """``fb`` with its rows ``idx`` replaced by every row of ``part`` (a tier's results on
    ``take_batch(hb, idx)``), so that each word's row is one tier's. A field only ``part``
    has gets "no tie" / False / −1 rows elsewhere (as :func:`_concat`); a field only ``fb``
    has keeps its rows (filled likewise at ``idx``)."""
    out = {}
    for name, v in vars(fb).items():
        w = getattr(part, name)
        if v is None and w is None:
            out[name] = None
            continue
        like = v if v is not None else w
        fill = -1 if like.dtype.kind in "iu" else 0
        v = (
            np.full((len(fb.settled),) + like.shape[1:], fill, like.dtype)
            if v is None
            else v.copy()
        )
        v[idx] = fill if w is None else w
        out[name] = v
    return FloatBatch(**out)


def certify_dd(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> FloatBatch:
    """The second float tier on every word of ``hb``: a :class:`FloatBatch` like
    :func:`certify_float`'s, from double-double enclosures of the direct soft forward pass
    (:mod:`exactattn.engine.ddtier`). Sound in the same sense: a word it settles has every
    decision certain and every reported enclosure tight; the rest goes on to arb."""
    B = len(hb.words)
    T = hb.x0.shape[1]
    chunk = max(1, min(SUB_BATCH, CHUNK_ENTRIES // (T * T)))
    parts = [
        _certify_dd_chunk(cm, _slice_batch(hb, slice(i, i + chunk)), taus)
        for i in range(0, B, chunk)
    ]
    return _concat(parts)


def _concat(parts: list[FloatBatch]) -> FloatBatch:
    """The batch of consecutive chunks (both tiers chunk large batches the same way)."""

    def cat(name: str) -> np.ndarray | None:
        xs = [getattr(p, name) for p in parts]
        if all(x is None for x in xs):
            return None
        if any(x is None for x in xs):
            # a part may not know a field: the tie flag, or the read-out of a part the
            # double-double tier gave up on (nothing settled there, so its rows are never
            # read): fill it with "no tie" / False / −1 rows of the others' shape and dtype
            like = next(x for x in xs if x is not None)
            fill = -1 if like.dtype.kind in "iu" else 0
            xs = [
                np.full((len(p.settled),) + like.shape[1:], fill, like.dtype) if x is None else x
                for p, x in zip(parts, xs, strict=True)
            ]
        return np.concatenate(xs)

    return FloatBatch(
        settled=cat("settled"),  # type: ignore[arg-type]
        decided=cat("decided"),
        tight=cat("tight"),
        err_lo=cat("err_lo"),  # type: ignore[arg-type]
        err_hi=cat("err_hi"),  # type: ignore[arg-type]
        err_row=cat("err_row"),  # type: ignore[arg-type]
        accept=cat("accept"),
        labels=cat("labels"),
        within_tol=cat("within_tol"),
        tie=cat("tie"),
        read=cat("read"),
    )


def _certify_dd_chunk(
    cm: CompiledModel, hb: HardBatch, taus: list[list[tuple[Fraction, Fraction]] | None]
) -> FloatBatch:
    fw = float_weights(cm)
    B = len(hb.words)
    T = hb.x0.shape[1]
    d = hb.x0.shape[2]
    L = len(cm.layers)
    err_lo = np.zeros((B, L))
    err_hi = np.full((B, L), np.inf)
    err_row = np.zeros((B, L), dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        deltas = dd_deltas(cm, hb, taus)
        if deltas is None:  # numbers beyond the conversion: nothing settled here
            no = np.zeros(B, dtype=bool)
            return FloatBatch(
                no, err_lo, err_hi, err_row, decided=no, tight=np.zeros((B, L), bool), read=no
            )
        delta: Cols = {}
        for li, cols in enumerate(deltas):
            delta = {c: dd_to_mr(v, TINY) for c, v in enumerate(cols) if v is not None}
            err_lo[:, li], err_hi[:, li], err_row[:, li] = _layer_errors(delta, B, T, d)
        return _finish(cm, hb, delta, fw, err_lo, err_hi, err_row)


def second_tier(
    cm: CompiledModel,
    hb: HardBatch,
    fb: FloatBatch,
    todo: np.ndarray,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    tier: Callable[..., FloatBatch] | None = None,
) -> FloatBatch:
    """``fb`` with the words ``todo`` recomputed by ``tier`` (default :func:`certify_dd`;
    also engine/centred.py's tier, with the same contract): their rows are
    replaced where the second tier decided the read-out (each row is one tier's enclosures,
    never a mix); the other words keep the float64 tier's rows.

    Words whose float64 read-out is undecided only where the exact hard read-out ties
    (``fb.tie``: equal top scores, or exactly the threshold) skip this tier: the soft read-out
    there is a sign of δ differences that are equal by the same symmetry in the typical case,
    and no precision decides an exact tie; they go straight to arb. Skipping a tier only
    moves work to arb, which decides the same results."""
    if fb.tie is not None:
        todo = todo & ~fb.tie
    idx = np.flatnonzero(todo)
    if idx.size == 0:
        return fb
    fb2 = (tier or certify_dd)(cm, _take_batch(hb, idx), taus)
    assert fb2.read is not None
    use = idx[fb2.read]  # its read-out decided: its rows (settle_dominated may settle it)
    src = np.flatnonzero(fb2.read)
    out = FloatBatch(**{k: (None if v is None else v.copy()) for k, v in vars(fb).items()})
    for name, v in vars(out).items():
        w = getattr(fb2, name)
        if v is not None and w is not None:
            v[use] = w[src]
    return out


_GAPX: dict[tuple[Any, ...], np.ndarray] = {}


def _gap_table(vals: tuple[int, ...], grid: np.ndarray, sden: int, inv_tau: MR) -> np.ndarray:
    """:func:`_gap_weights`'s table of exp(−g/τ) for the gaps ``grid`` as a (2, K + 1) array
    [midpoints; radii] with a last (0, 0) entry, so that one gather fills a whole (key,
    query) array, zeros off the non-top visible keys; memoised by the same key (the values,
    τ's enclosure and the rounding constants: a pure function of them)."""
    key = (vals, sden, float(inv_tau[0]), float(inv_tau[1]), _consts())
    got = _GAPX.get(key)
    if got is None:
        if len(_GAPX) > 4096:
            _GAPX.clear()
        wm, wr = _gap_weights_all(grid, sden, inv_tau)
        got = np.zeros((2, len(grid) + 1))
        got[0, :-1] = wm
        got[1, :-1] = wr
        got.flags.writeable = False
        _GAPX[key] = got
    return got


def _rows_equal(q: np.ndarray) -> bool:
    """hard.rows_alike's test of the queries (every row of every word equals its row 0):
    each row equals the next, over rows laid flat (one comparison without broadcasting)."""
    B, R = q.shape[:2]
    if q.dtype == object or R < 2:
        return R < 2 or bool((q == q[:, :1]).all())
    f = q.reshape(B, -1)
    w = f.shape[1] // R
    return bool((f[:, w:] == f[:, :-w]).all())


_FLAT: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _flat_grid(R: int, B: int) -> tuple[np.ndarray, np.ndarray]:
    """(i·B + b, b) over (R, B), read only, memoised by the shape."""
    got = _FLAT.get((R, B))
    if got is None:
        if len(_FLAT) > 256:
            _FLAT.clear()
        at = np.arange(R * B).reshape(R, B)
        at_b = np.broadcast_to(np.arange(B), (R, B)).copy()
        at.flags.writeable = False
        at_b.flags.writeable = False
        got = _FLAT[(R, B)] = (at, at_b)
    return got


_VISK: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}


def _visibility_keys(vis: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    """A visibility mask (R, T) as full [key, query, word] arrays (T, R, B), bool and float
    (read only), memoised by the mask's value and B: a full array multiplies in one
    contiguous pass, where a broadcast runs numpy's inner loop once per (key, query)."""
    key = (vis.shape, vis.tobytes(), B)
    got = _VISK.get(key)
    if got is None:
        if len(_VISK) > 256:
            _VISK.clear()
        R, T = vis.shape
        vb = np.ascontiguousarray(np.broadcast_to(vis.T[:, :, None], (T, R, B)))
        vf = vb.astype(np.float64)
        vb.flags.writeable = False
        vf.flags.writeable = False
        got = _VISK[key] = (vb, vf)
    return got


def _head_free(tr: HeadTrace, rule: str, inv_tau: MR, hw: dict[str, Any]) -> Cols | None:
    """:func:`_head` of an average head with no δ coming in (δ = 0 before the layer: the
    heads of most tracr programs); None where it does not apply (the caller then runs
    :func:`_head`). The same elementwise operations on the same numbers in the same order,
    so the same bits, laid out for small batches:

    * arrays laid out [key, query, word] (``_head`` has [word, key, query]): a sum over the
      keys adds contiguous blocks, a per-query factor broadcasts over the leading axis, the
      value columns lead too ([column, key, query, word]), and every broadcast keeps the
      words innermost — numpy's inner loops run over the batch, not over a query row (or
      two value columns) at a time, which is most of the cost on small batches;
    * the softmax weights of the non-top visible keys are one gather from the gap table
      (:func:`_gap_table`), zeros elsewhere, instead of a scatter into zeros;
    * tests whose answer is known: every weight midpoint lies in [0, 1] (so Σ|m| = Σm, the
      key sums and 1/Z are finite — ``guard`` changes nothing there — and Z ≥ 1);
    * no δ projections (there is no δ)."""
    s = tr.scores.num
    sden, vden = tr.scores.den, tr.v.den
    if (
        rule != "average"
        or s.dtype != np.int64
        or sden >= 2**400
        or vden >= 2**400
        or not inv_tau[0] > 0  # 1/τ may underflow to 0
    ):
        return None
    B, R, T = tr.top.shape
    if R > 1 and _visibility(tr.visible)[0] and _rows_equal(tr.q.num):
        # a constant query (see _head): compute one row and copy it
        one = _head_free(_query_rows(tr, 0, 1), rule, inv_tau, hw)
        if one is None:
            return None
        return {c: (np.repeat(m, R, axis=1), np.repeat(r, R, axis=1)) for c, (m, r) in one.items()}
    top_q = tr.top  # (B, i, j)
    top = np.ascontiguousarray(top_q.transpose(2, 1, 0))  # (j, i, B)
    visb, visf = _visibility_keys(tr.visible, B)
    rest = visb & ~top
    if not rest.any():
        return {}  # every visible key ties at the top and nothing moved: exactly hard
    if s.size and int(np.abs(s).max()) >= 2**61:
        return None
    # the first top key of every query (it holds the row maximum), as flat indices into
    # [key, query, word] arrays: key·R·B + (query·B + word)
    first = np.argmax(top_q, axis=2).T  # (i, B)
    at, at_b = _flat_grid(R, B)
    sk = np.ascontiguousarray(s.transpose(2, 1, 0))  # (j, i, B)
    smax = np.take(sk, first * (R * B) + at)  # (i, B)
    g = smax - sk  # (j, i, B) exact gaps (used where rest)
    gr = g[rest]
    lo = int(gr.min())
    hi = int(gr.max())
    if hi - lo < 256:  # _gap_weights's two tables: a short range, or two values
        tab = _gap_table((lo, hi), np.arange(lo, hi + 1), sden, inv_tau)
        g -= lo
    elif bool(((gr == hi) | (gr == lo)).all()):
        tab = _gap_table((lo, hi, 2), np.array([lo, hi], dtype=np.int64), sden, inv_tau)
        g = g == hi
    else:
        return None
    UW = np.take(tab, np.where(rest, g, tab.shape[1] - 1), axis=1)  # (2, j, i, B)
    uw_m, uw_r = UW[0], UW[1]
    # _sum_keys_x with Σ|m| = Σm (every midpoint ≥ +0) and no guard (the sums are finite)
    sm, sr = _seq_sum(UW, 1)
    k = (T + 2) * SUM_U
    ur_r = sr * (1 + k) + sm * k
    nA = top.sum(axis=0).astype(np.float64)  # (i, B) exact small integers
    safe = np.maximum(nA, 1.0)  # nA where nA > 0, else 1
    # Z = add((safe, 0), UR) and _recip(Z): Z ≥ 1 is finite, so are 1/Z and its guard
    zm = safe + sm
    zr = ur_r * (1 + WIDEN) + zm * WIDEN  # (0 + r): the same number (r ≥ +0), |zm| = zm
    izm = 1.0 / zm
    izr = zr * izm / (zm - zr) * (1 + WIDEN) ** 2 + izm * WIDEN
    izr = izr / (np.isfinite(zr) & (zm > zr))  # not certainly positive: infinite radius
    topf = top.astype(np.float64)
    mm = sm / safe  # ≥ 0: |mm| = mm
    mean_r = ur_r / safe * (1 + WIDEN) + mm * WIDEN + np.minimum(ur_r, TINY)
    nm, nr = sub((uw_m, uw_r), (mm * topf, mean_r * topf))
    # δα = _scale_rows(numer, 1/Z) · visibility, into one stacked array (1/Z > 0: |izm| = izm)
    DA = np.empty((2,) + nm.shape)
    np.multiply(nm, izm, out=DA[0])
    r = np.abs(nm)
    r *= izr
    r += nr * (izm + izr)
    r *= 1 + WIDEN
    r += np.abs(DA[0]) * WIDEN
    np.maximum(r, np.minimum(r * 2.0**600, TINY), out=DA[1])  # floor_rad
    DA *= visf
    if not DA[1].any():
        return {}
    # Σ_j δα_ij (v_j − v_ref(i)), every value column at once (_head's exact columns): the
    # rounding bound of _dot_weight/_dot_exact, [column, key, query, word]
    vn = tr.v.num  # (B, j, E)
    E = vn.shape[-1]
    if not E:
        return {}
    vk = np.ascontiguousarray(vn.transpose(2, 1, 0))  # (E, j, B)
    vref = np.take(vk.reshape(E, T * B), first * B + at_b, axis=1)  # (E, i, B)
    dn = vk[:, :, None, :] - vref[:, None, :, :]  # (E, j, i, B)
    xm = _rat_mid(dn, vden)
    tm, tr_ = _exact_col_sums(DA, xm, CONV + 2.0 * TINY * vden, T)
    out: Cols = {c: (tm[c].T, tr_[c].T) for c in range(E)}  # (B, i) views
    if hw["O"] is None:
        return out
    plan = hw.get(("plan", E))
    if plan is None:
        plan = hw[("plan", E)] = _lin_plan(out, hw["O"])  # which rows: depends on E only
    if len(plan) < 2:
        return lin(out, hw["O"])
    m, r = _lin_stack(out, plan, (E + 3) * SUM_U)  # lin's numbers
    return {a: (m[i], r[i]) for i, (a, _) in enumerate(plan)}


HEAD_FREE_MAX = 1 << 15  # (word, query, key) entries up to which _head_free is used


def _head_any(
    tr: HeadTrace, rule: str, delta: Cols, inv_tau: MR, hw: dict[str, Any], q0: int = 0
) -> Cols:
    """:func:`_head`, by :func:`_head_free` where no δ comes in on a small batch (the same
    bits; on large ones its transposed copies cost more than its shorter loops save)."""
    if not delta and tr.top.size <= HEAD_FREE_MAX:
        got = _head_free(tr, rule, inv_tau, hw)
        if got is not None:
            return got
    return _head(tr, rule, delta, inv_tau, hw, q0)


def _shared_layer(
    traces: list[HeadTrace],
    heads: list[Any],
    row: list[tuple[Fraction, Fraction]],
    delta: Cols,
    hws: list[dict[str, Any]],
    sh: Sharing,
    B: int,
    T: int,
) -> tuple[Cols, tuple[Cols, Cols]]:
    """One attention layer under :class:`Sharing`: the same sums as the plain loop; the δ of
    every row and its compact parts (the firsts' rows before q0, every word's from q0)."""
    q0, G = sh.q0, sh.group
    firsts = slice(0, B, G)
    d_first = {c: (m[firsts], r[firsts]) for c, (m, r) in delta.items()}
    top = _rows(d_first, 0, q0)
    rest = _rows(delta, q0, T)
    for hi_, (ch, tr) in enumerate(zip(heads, traces, strict=True)):
        it = inv_tau(*row[hi_])
        hw = hws[hi_]
        tr_first = _query_rows(_slice_trace(tr, firsts), 0, q0)
        top = add_cols(top, _head_any(tr_first, ch.head.hard, d_first, it, hw, 0))
        rest = add_cols(rest, _head_any(_query_rows(tr, q0, T), ch.head.hard, delta, it, hw, q0))
    return _assemble(top, rest, sh, B, T), (top, rest)


def _shared_errors(
    li: int,
    delta: Cols,
    parts: tuple[Cols, Cols],
    sh: Sharing,
    pending: list[tuple[int, Cols]],
    size: int,
    err: tuple[np.ndarray, np.ndarray, np.ndarray],
    B: int,
    T: int,
    d: int,
) -> int:
    """The error bounds of a layer run under :class:`Sharing` (δ = ``_assemble(*parts)``):
    a large one at once on its compact rows (:func:`_errors_compact`), a small one waits in
    ``pending`` to share a pass (:func:`_errors_into`); the same numbers either way.
    Returns the new pending size."""
    if not delta:
        return size
    if len(delta) * B * T > ERR_DEFER:
        err[0][:, li], err[1][:, li], err[2][:, li] = _errors_compact(*parts, sh, B, T)
        return size
    pending.append((li, delta))
    size += len(delta) * B * T
    if size > ERR_DEFER:
        _errors_into(pending, err, B, T, d)
        pending.clear()
        size = 0
    return size


def _errors_compact(
    top: Cols, rest: Cols, sh: Sharing, B: int, T: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_layer_errors` of ``_assemble(top, rest)`` from the compact rows: abs_bounds
    is elementwise and the maxima exact (it gives no nan), so the rows before q0 are
    bounded once per group and repeated; every word's bounds, its largest upper bound per
    row, and so its first row of the largest, are those of the assembled δ."""
    q0, G = sh.q0, sh.group
    F = len(range(0, B, G))
    cols = sorted(set(top) | set(rest))

    def bounds(part: Cols, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        z = np.zeros(shape)  # a column absent from a part is 0 there (as _assemble fills)
        m = _stack([part[c][0] if c in part else z for c in cols])
        r = _stack([part[c][1] if c in part else z for c in cols])
        return abs_bounds((m, r))  # (C, rows, slots)

    al_t, au_t = bounds(top, (F, q0))
    al_r, au_r = bounds(rest, (B, T - q0))
    up = np.empty((B, T))
    up[:, :q0] = np.repeat(au_t.max(axis=0), G, axis=0)
    up[:, q0:] = au_r.max(axis=0)
    lo = np.maximum(
        np.repeat(al_t.max(axis=(0, 2), initial=0.0), G), al_r.max(axis=(0, 2), initial=0.0)
    )
    lo = np.maximum(np.zeros(B), lo)
    return lo, up.max(axis=1), np.argmax(up, axis=1).astype(np.int64)


def _shared_ffn(
    pre: list[RatArray], delta: Cols, fl: Any, sh: Sharing, B: int, T: int
) -> tuple[Cols, tuple[Cols, Cols]]:
    """A feed-forward layer under :class:`Sharing`: rows before q0 on each group's first
    word only, the other rows on every word, all as one (1, rows) batch, then assembled.

    The same bits as the whole (B, T) batch: every entry is computed from its own row
    elementwise, and the batch-level pruning of :func:`ffn_linear` (which coefficients and
    residuals it keeps) asks only whether something is nonzero for *some* entry; the
    compact rows hold every row of the whole batch — rows before q0 are the same in every
    word of a group (the δ coming in is assembled from the firsts' rows, as
    :func:`_shared_layer` reads it; the exact pre-activations are the same numbers)."""
    if not delta:
        return {}, ({}, {})  # what ffn_linear and ffn_generic give
    q0, G = sh.q0, sh.group
    firsts = slice(0, B, G)
    F = len(range(0, B, G))

    def pack(x: np.ndarray) -> np.ndarray:  # (B, T, …) -> (1, F·q0 + B·(T − q0), …)
        tail = x.shape[2:]
        a = x[firsts, :q0].reshape((F * q0,) + tail)
        return np.concatenate([a, x[:, q0:].reshape((B * (T - q0),) + tail)])[None]

    dc = {c: (pack(m), pack(r)) for c, (m, r) in delta.items()}
    pc = rat_pre([RatArray(pack(z.num), z.den) for z in pre])
    hidden, out_rows, ints = fl
    if ints.ok:
        out = ffn_linear(pc, dc, ints, (1, F * q0 + B * (T - q0)))
    else:
        out = ffn_generic(pc, dc, hidden, out_rows)
    k = F * q0
    top = {c: (m[0, :k].reshape(F, q0), r[0, :k].reshape(F, q0)) for c, (m, r) in out.items()}
    rest = {
        c: (m[0, k:].reshape(B, T - q0), r[0, k:].reshape(B, T - q0)) for c, (m, r) in out.items()
    }
    got = _assemble(top, rest, sh, B, T)
    return {c: got[c] for c in out}, (top, rest)  # in ffn_linear's order


def _label_decisions(
    hard: np.ndarray, den: int, dm: np.ndarray, dr: np.ndarray, off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per [word, slot]: whether exactly one label is not certainly below another (``one``),
    whether every label difference is finite, and that label (``pick``), from the exact
    hard label scores (numerators over ``den``) and their perturbation δ = dm ± dr."""
    if hard.shape[-1] == 2:
        # one pair: s_1 − s_0 by the operations of the general case's entry [0, 1]; its
        # entry [1, 0] is the exact negation with the same radius (round to nearest is
        # symmetric; a zero's sign decides nothing), so the decisions are the same
        hd1 = from_rat(hard[:, :, 1] - hard[:, :, 0], den)
        dm1 = dm[:, :, 1] - dm[:, :, 0]
        dr1 = (dr[:, :, 1] + dr[:, :, 0]) * (1 + WIDEN) + np.abs(dm1) * WIDEN
        d = add(hd1, (dm1, dr1))
        cand0 = ~(d[0] > d[1])  # label 0 not certainly below label 1
        one = cand0 ^ ~(-d[0] > d[1])
        return one, np.isfinite(d[0]) & np.isfinite(d[1]), np.where(cand0, 0, 1)
    return _label_decisions_pairs(hard, den, dm, dr, off)


def _label_decisions_pairs(
    hard: np.ndarray, den: int, dm: np.ndarray, dr: np.ndarray, off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_label_decisions` over every pair (i, j) of labels, [word, slot, i, j]."""
    hd = from_rat(hard[:, :, None, :] - hard[:, :, :, None], den)
    dm2 = dm[:, :, None, :] - dm[:, :, :, None]
    dr2 = (dr[:, :, None, :] + dr[:, :, :, None]) * (1 + WIDEN) + np.abs(dm2) * WIDEN
    diff = add(hd, (dm2, dr2))  # s_j − s_i = hard + sub(dmr[j], dmr[i])
    dominated = ((diff[0] > diff[1]) & off).any(axis=3)
    fin = ((np.isfinite(diff[0]) & np.isfinite(diff[1])) | ~off).all(axis=(2, 3))
    cand = ~dominated
    return cand.sum(axis=2) == 1, fin, np.argmax(cand, axis=2)


def _argmax_two(delta: Cols, fw: FloatWeights, vals: RatArray, slots: Any, res: FloatBatch) -> bool:
    """The argmax read-out of two labels, when δ reaches both output rows or neither (else
    False and nothing done): the general path's numbers and decisions in fewer calls.

    The hard labels from one exact difference h = s_1 − s_0 per slot (unique iff h ≠ 0,
    label 1 iff h > 0); δ's output rows by :func:`_lin_stack` on the full columns (entries are
    elementwise, so selecting the slots afterwards gives the same numbers); then
    :func:`_label_decisions`'s one-pair test: with a = "label 0 certainly below" and b =
    "label 1 certainly below", exactly one candidate is a ^ b and it is label a (as 0/1)."""
    cols = delta
    plan = _lin_plan(cols, fw.out)
    if plan and [a for a, _ in plan] != [0, 1]:
        return False
    num = vals.num  # (B, P, 2)
    small = num.dtype != object and (num.size == 0 or int(np.abs(num).max()) < 2**61)
    numo = num if small else num.astype(object)
    h = numo[:, :, 1] - numo[:, :, 0]  # exact
    uniq = np.asarray(h != 0, dtype=bool)
    up = np.asarray(h > 0, dtype=bool)
    labels = np.where(uniq, up, -1)  # hard labels (int64)
    if not plan:  # δ reaches no output row: the hard labels, nothing undecided
        res.labels = labels
        res.tie = np.zeros(len(num), dtype=bool)
        return True
    gm, gr = _lin_stack(cols, plan, (len(cols) + 3) * SUM_U)  # (2, B, T)
    P = len(slots)
    sel: Any = np.asarray(slots, dtype=np.intp)
    if P and list(slots) == list(range(slots[0], slots[0] + P)):
        sel = slice(slots[0], slots[0] + P)
    gm, gr = gm[:, :, sel], gr[:, :, sel]  # (2, B, P)
    az = (gr == 0).all(axis=0)
    # _label_decisions's pair (1, 0), the same operations
    hd1 = from_rat(h, vals.den)
    dm1 = gm[1] - gm[0]
    dr1 = (gr[1] + gr[0]) * (1 + WIDEN) + np.abs(dm1) * WIDEN
    dm, dr = add(hd1, (dm1, dr1))
    a = dm > dr  # label 0 certainly below label 1
    one = a ^ (-dm > dr)
    fin = np.isfinite(dm) & np.isfinite(dr)
    res.labels = np.where(az, labels, np.where(one, a, -1))
    fail = ~(az | (one & fin))
    failed = fail.any(axis=1)
    res.settled &= ~failed
    # a word with no undecided unique-label slot fails only at ties
    res.tie = failed & ~(fail & uniq).any(axis=1)
    return True


_OFF4: dict[int, np.ndarray] = {}


def _argmax_many(
    delta: Cols, fw: FloatWeights, vals: RatArray, slots: Any, res: FloatBatch
) -> bool:
    """The argmax read-out of three or more labels on a small batch, laid out [label i,
    label j, slot, word] instead of [word, slot, i, j]: the same elementwise operations on
    the same numbers (so the same decisions and labels), but numpy's inner loops run over
    the slots and words, not over one row of labels, and the reductions over labels add
    whole blocks. False (nothing done) where the scores are not int64 below 2^61."""
    num = vals.num  # (B, P, r)
    if num.dtype != np.int64 or (num.size and int(np.abs(num).max()) >= 2**61):
        return False
    plan = _lin_plan(delta, fw.out)
    B, P, nr = num.shape
    H = np.ascontiguousarray(num.transpose(2, 1, 0))  # (r, P, B) exact label scores
    is_best = H == H.max(axis=0)
    uniq = is_best.sum(axis=0) == 1  # (P, B)
    labels = np.where(uniq, np.argmax(is_best, axis=0), -1)  # hard labels (int64)
    if not plan:  # δ reaches no output row: the hard labels, nothing undecided
        res.labels = np.ascontiguousarray(labels.T)
        res.tie = np.zeros(B, dtype=bool)
        return True
    gm, gr = _lin_stack(delta, plan, (len(delta) + 3) * SUM_U)  # (rows, B, T): lin's numbers
    sel: Any = np.asarray(slots, dtype=np.intp)
    if P and list(slots) == list(range(slots[0], slots[0] + P)):
        sel = slice(slots[0], slots[0] + P)
    present = [a for a, _ in plan]
    dm = np.zeros((nr, P, B))  # exact zeros for the rows δ does not reach
    dr = np.zeros((nr, P, B))
    dm[present] = gm[:, :, sel].transpose(0, 2, 1)
    dr[present] = gr[:, :, sel].transpose(0, 2, 1)
    az = (dr == 0).all(axis=0)  # (P, B)
    off = _OFF4.get(nr)
    if off is None:
        off = _OFF4[nr] = _off_diagonal(nr)[:, :, None, None]
    # _label_decisions_pairs at [i, j]: s_j − s_i = hard + sub(δ[j], δ[i])
    hd = from_rat(H[None, :] - H[:, None], vals.den)
    dm2 = dm[None, :] - dm[:, None]
    dr2 = (dr[None, :] + dr[:, None]) * (1 + WIDEN) + np.abs(dm2) * WIDEN
    d0, d1 = add(hd, (dm2, dr2))
    cand = ~((d0 > d1) & off).any(axis=1)  # (i, P, B): label i not certainly below another
    fin = ((np.isfinite(d0) & np.isfinite(d1)) | ~off).all(axis=(0, 1))
    one = cand.sum(axis=0) == 1
    lab = np.where(az, labels, np.where(one, np.argmax(cand, axis=0), -1))
    fail = ~(az | (one & fin))  # (P, B)
    failed = fail.any(axis=0)
    res.settled &= ~failed
    res.labels = np.ascontiguousarray(lab.T)
    # a word with no undecided unique-label slot fails only at ties
    res.tie = failed & ~(fail & uniq).any(axis=0)
    return True


def _readout(
    cm: CompiledModel, hb: HardBatch, delta: Cols, fw: FloatWeights, res: FloatBatch
) -> None:
    model = cm.model
    o = model.output
    n = hb.n
    B = len(hb.words)
    vals = read_output(model, hb.activations[-1], n).values
    if isinstance(o, AcceptOutput):
        slot = model.accept_slot(n)
        t = o.threshold
        num = vals.num.astype(object)
        cnum = num * t.denominator - t.numerator * vals.den
        cden = vals.den * t.denominator
        cpos = np.array(cnum > 0, dtype=bool)
        (dy,) = _dot_out(delta, fw.out, slot)
        if dy is None:
            res.accept = cpos
            res.tie = np.zeros(B, dtype=bool)
            return
        c = from_rat(cnum, cden)
        val = add(c, dy)
        exact0 = dy[1] == 0
        yes = val[0] > val[1]
        no = -val[0] >= val[1]
        fin = np.isfinite(val[0]) & np.isfinite(val[1])
        res.accept = np.where(exact0, cpos, yes)
        ok = exact0 | (fin & (yes | no))
        res.settled &= ok
        res.tie = ~ok & np.array(cnum == 0, dtype=bool)  # exactly at the threshold
        return
    slots = model.output_positions(n)
    num = vals.num  # (B, P, r)
    nr = num.shape[2]
    if isinstance(o, ArgmaxOutput):
        P = len(slots)
        if nr == 2 and B * P <= 1 << 18 and _argmax_two(delta, fw, vals, slots, res):
            return
        if nr > 2 and B * P * nr * nr <= 1 << 20 and _argmax_many(delta, fw, vals, slots, res):
            return
        # int64 differences are exact below 2^62; else Python integers (same floats either way)
        small = num.dtype != object and (num.size == 0 or int(np.abs(num).max()) < 2**61)
        numo = num if small else num.astype(object)
        off = _off_diagonal(nr)  # the pairs i ≠ j
        best = numo.max(axis=2)
        is_best = np.asarray(numo == best[:, :, None], dtype=bool)
        uniq = is_best.sum(axis=2) == 1
        labels = np.where(uniq, np.argmax(is_best, axis=2), -1).astype(np.int64)  # hard labels
        # the output rows at every slot at once (elementwise, so the same bits as slot by slot)
        sel: Any = np.asarray(slots, dtype=np.intp)
        if P and list(slots) == list(range(slots[0], slots[0] + P)):
            sel = slice(slots[0], slots[0] + P)  # consecutive slots: views, not copies
        cols = {c: (v[0][:, sel], v[1][:, sel]) for c, v in delta.items()}
        plan = _lin_plan(cols, fw.out)
        fail_tie = np.zeros(B, dtype=bool)  # an undecided slot (where labels tie, see below)
        fail_other = np.zeros(B, dtype=bool)  # an undecided slot with a unique hard label
        if plan:  # else δ reaches no output row: the hard labels
            # lin's numbers for the rows it reaches (stacked), exact zeros for the others
            gm, gr = _lin_stack(cols, plan, (len(cols) + 3) * SUM_U)
            present = [a for a, _ in plan]
            if present == list(range(nr)):  # every row reached: a view, not a copy
                dm_all, dr_all = gm.transpose(1, 2, 0), gr.transpose(1, 2, 0)  # (B, P, r)
            else:
                dm_all = np.zeros((B, P, nr))  # (B, P, r)
                dr_all = np.zeros((B, P, nr))
                dm_all[:, :, present] = gm.transpose(1, 2, 0)
                dr_all[:, :, present] = gr.transpose(1, 2, 0)
            allzero = (dr_all == 0).all(axis=2)
            # every pair (i, j) of labels at once, [b, p, i, j], over groups of slots that
            # keep the arrays small: the same elementwise operations as one pair at a time
            g = max(1, (1 << 20) // max(1, B * nr * nr))
            for a in range(0, P, g):
                sl = slice(a, a + g)
                hard = numo[:, sl]
                dm, dr = dm_all[:, sl], dr_all[:, sl]
                az = allzero[:, sl]
                one, fin, pick = _label_decisions(hard, vals.den, dm, dr, off)
                lab = np.where(az, labels[:, sl], np.where(one, pick, -1))
                labels[:, sl] = lab
                fail = ~(az | (one & fin))
                failed = fail.any(axis=1)
                res.settled &= ~failed
                # a word with no undecided unique-label slot fails only at ties: its tie
                # flag is "some slot failed" (the same flags as testing the ties apart)
                fail_tie |= failed
                fail_other |= (fail & uniq[:, sl]).any(axis=1)
        res.tie = fail_tie & ~fail_other
        res.labels = labels
        return
    assert isinstance(o, ValueOutput)
    tol_lo = float_down(o.tolerance)
    tol_hi = float_up(o.tolerance)
    within = np.ones(B, dtype=bool)
    unknown = np.zeros(B, dtype=bool)
    outside = np.zeros(B, dtype=bool)
    for p in slots:
        for x in _dot_out(delta, fw.out, p):
            if x is None:
                continue
            lo, hi = abs_bounds(x)  # [0, inf] where not finite: neither ok nor bad
            fin = finite(x)
            ok = fin & (hi <= tol_lo)
            bad = fin & (lo > tol_hi)
            outside |= bad
            unknown |= ~ok & ~bad
    within = ~outside
    res.within_tol = within
    res.settled &= outside | ~unknown
    del nr
