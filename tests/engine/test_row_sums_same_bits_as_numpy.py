"""engine/rowsum.py: numpy.sum of long mostly-zero rows, bit for bit, from their nonzeros.

The reference is numpy itself: every case builds the dense rows and sums them the way the
dtype emulation does (``(N, b, T).sum(axis=2, keepdims=True)``), then compares the bits.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from exactattn.engine.rowsum import pairwise_tree, row_sums

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float16, BF16, np.float32, np.float64]
LENGTHS = [1, 2, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 136, 255, 257, 1000, 8193]


def _rows(rng: np.random.Generator, dt, T: int, nrows: int) -> np.ndarray:
    """Rows that are zero almost everywhere, magnitudes spread so that summation order
    shows, with ±0 (and whole rows of −0), and now and then ±inf."""
    dense = np.zeros((nrows, T), dtype=dt)
    narrow = dt in (np.float16, BF16)
    for r in range(nrows):
        if rng.random() < 0.15:
            dense[r] = -0.0
        k = int(rng.integers(0, min(T, [1, 2, 3, 12, 300][r % 5]) + 1))
        pos = np.sort(rng.choice(T, k, replace=False))
        mag = rng.integers(-12, 12, k) if narrow else rng.integers(-40, 40, k)
        vals = (rng.random(k) + 0.5) * 2.0**mag * rng.choice([-1.0, 1.0], k)
        if k and rng.random() < 0.2:
            vals[rng.integers(0, k)] = -0.0
        if k and rng.random() < 0.05:
            vals[rng.integers(0, k)] = np.inf
        dense[r, pos] = vals.astype(dt)
    return dense


def _same(a, b) -> bool:
    if np.isnan(float(a)) and np.isnan(float(b)):
        return True
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_row_sums_equal_numpy_sum_bitwise(dt):
    rng = np.random.default_rng(7)
    for T in LENGTHS:
        for _ in range(3):
            dense = _rows(rng, dt, T, 10)
            ref = dense[None].sum(axis=2, keepdims=True)[0, :, 0]
            # pass the nonzeros and the −0 entries; the rest are +0
            sign = np.signbit(dense.astype(np.float32))
            rows, pos = np.nonzero((dense != 0) | sign)
            rest_neg = sign.all(axis=1)
            got = row_sums(dt, T, rows, pos, dense[rows, pos], len(dense), rest_neg)
            for r in range(len(dense)):
                assert _same(ref[r], got[r]), (np.dtype(dt).name, T, r, ref[r], got[r])


def test_row_sums_only_nonzeros_passed_bfloat16_sign_of_zero():
    """bfloat16 sums left to right from the first element: a row of −0 is −0, and the
    caller says so for the elements it does not pass."""
    dense = np.zeros((3, 40), dtype=BF16)
    dense[0] = -0.0
    dense[1] = -0.0
    dense[1, 7] = 0.0  # one +0 among them
    rows = np.array([0, 1], dtype=np.int64)
    pos = np.array([3, 7], dtype=np.int64)
    vals = dense[rows, pos]
    rest = np.array([True, True, False])
    got = row_sums(BF16, 40, rows, pos, vals, 3, rest)
    ref = dense.sum(axis=1)
    assert (
        [np.signbit(float(x)) for x in got]
        == [np.signbit(float(x)) for x in ref]
        == [
            True,
            False,
            False,
        ]
    )


def test_pairwise_tree_is_numpys_split():
    """Leaves cover the row in order, each at most 128 long, split as numpy splits."""

    def leaves(s: int, n: int) -> list[tuple[int, int]]:
        if n <= 128:
            return [(s, n)]
        n2 = n // 2
        n2 -= n2 % 8
        return leaves(s, n2) + leaves(s + n2, n - n2)

    for T in [1, 100, 128, 129, 1000, 65538]:
        starts, sizes, levels = pairwise_tree(T)
        assert list(zip(starts.tolist(), sizes.tolist(), strict=True)) == leaves(0, T)
        internal = sum(len(p) for p, _, _ in levels)
        assert internal == len(starts) - 1
