"""Exact rational arrays: integer numerators over one common positive denominator.

Why this shape: a layer's work is a few matrix products over *all* inputs of one
length at once. With one denominator per array, a product of rationals is a product
of integers, and integers can be multiplied by BLAS in float64 *exactly* whenever a
bound proves every partial sum stays below 2**53 (see ``notes/arith-bench.md``:
~39 000× faster than Fraction). When the bound fails we fall back to int64, and
past 2**62 to Python integers (numpy ``object`` arrays): always exact, only slower.
Argmax sets and ReLU signs are read off the numerators, since the denominator is
positive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpz_mat

FLOAT_EXACT = 2**53
INT64_SAFE = 2**62


def _maxabs(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    if a.dtype == object:
        return int(max(abs(int(a.max())), abs(int(a.min()))))
    return int(max(abs(int(a.max())), abs(int(a.min()))))


def _narrow(a: np.ndarray) -> np.ndarray:
    """Store as int64 when every entry fits, else as Python ints."""
    if a.dtype == np.int64:
        return a
    if a.dtype == object:
        m = _maxabs(a)
        return a.astype(np.int64) if m < INT64_SAFE else a
    if a.dtype == np.float64:
        return a.astype(np.int64)
    return a.astype(np.int64)


def _widen(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == object else a.astype(object)


SMALL_INNER = 32
"""Up to this inner dimension, a product against a 2-D weight is done in int64 directly
(numpy's integer matmul: exact below 2**62, and faster than two float conversions)."""


def int_matmul(
    a: np.ndarray, b: np.ndarray, ma: int | None = None, mb: int | None = None
) -> np.ndarray:
    """Exact integer matmul (numpy broadcasting rules), choosing the fastest exact path.

    ``ma``/``mb`` are max |a| and max |b| when the caller knows them (no pass to find them).
    Inner dimension 1: a broadcast product. Small enough: int64 or one float64 BLAS product
    (exact by the bound). Larger: both operands are split into signed limbs so that every
    limb product is again exact in float64, and the partial products are recombined exactly
    ("multi-limb BLAS"). Python-int object arithmetic is used only for the final
    recombination when the result needs > 62 bits.
    """
    inner = max(a.shape[-1], 1)
    ma = _maxabs(a) if ma is None else ma
    mb = _maxabs(b) if mb is None else mb
    if ma == 0 or mb == 0:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return np.zeros(shape, dtype=np.int64)
    bound = ma * mb * inner
    if a.dtype != object and b.dtype != object:
        if bound < INT64_SAFE and a.shape[-1] == 1:
            return a.astype(np.int64, copy=False) * b.astype(np.int64, copy=False)
        if bound < INT64_SAFE and b.ndim == 2 and inner <= SMALL_INNER:
            a64, b64 = a.astype(np.int64, copy=False), b.astype(np.int64, copy=False)
            if a64.ndim > 2:
                # one 2-D product over all rows: numpy's stacked int64 matmul of small
                # blocks costs up to twice as much; the same integers
                rows = np.ascontiguousarray(a64).reshape(-1, a64.shape[-1])
                return np.matmul(rows, b64).reshape(a64.shape[:-1] + (b64.shape[-1],))
            return np.matmul(a64, b64)
        if bound < FLOAT_EXACT:
            r = np.matmul(a.astype(np.float64), b.astype(np.float64))
            return r.astype(np.int64)
    budget = 52 - inner.bit_length()  # limb bits of a + limb bits of b
    ba, bb = ma.bit_length(), mb.bit_length()
    if bb <= budget // 2:
        sb, sa = bb, budget - bb
    elif ba <= budget // 2:
        sa, sb = ba, budget - ba
    else:
        sa = sb = budget // 2
    if bound >= INT64_SAFE and -(-ba // sa) * -(-bb // sb) > FLINT_LIMB_PRODUCTS:
        return _flint_matmul(a, b)
    la = _limbs(a, sa, ba)
    lb = _limbs(b, sb, bb)
    groups: dict[int, np.ndarray] = {}
    for i, al in enumerate(la):
        for j, bl in enumerate(lb):
            c = np.matmul(al, bl).astype(np.int64)  # exact: |c| < 2**52
            shift = sa * i + sb * j
            groups[shift] = groups[shift] + c if shift in groups else c
    # each group is a sum of < 2**52-sized terms: few of them, so int64 holds it
    if bound < INT64_SAFE:
        out = np.zeros_like(next(iter(groups.values())))
        for shift, g in groups.items():
            out += g << shift
        return out
    out = None
    for shift in sorted(groups, reverse=True):
        g = groups[shift].astype(object)
        term = g * (1 << shift) if shift else g
        out = term if out is None else out + term
    assert out is not None
    return _narrow(out)


FLINT_LIMB_PRODUCTS = 16
"""Past this many limb products (both operands big, e.g. over lcm(1..T)), FLINT's fmpz_mat
multiplies faster than limbs recombined in Python ints."""


def _flint_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact big-integer matmul (numpy broadcasting), one FLINT fmpz_mat product per batch."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    A = np.broadcast_to(a, batch + a.shape[-2:])
    B = np.broadcast_to(b, batch + b.shape[-2:])
    n, k = a.shape[-2:]
    p = b.shape[-1]
    out = np.empty(batch + (n, p), dtype=object)
    for idx in np.ndindex(*batch):
        fa = fmpz_mat(n, k, [int(x) for x in A[idx].reshape(-1).tolist()])
        fb = fmpz_mat(k, p, [int(x) for x in B[idx].reshape(-1).tolist()])
        prod = (fa * fb).entries()
        out[idx] = np.array([int(x) for x in prod], dtype=object).reshape(n, p)
    return _narrow(out)


def _limbs(a: np.ndarray, bits: int, total_bits: int) -> list[np.ndarray]:
    """Signed float64 limbs l_k with a = Σ l_k · 2**(bits·k), each |l_k| < 2**bits."""
    count = max(1, -(-total_bits // bits))
    if count == 1:
        return [a.astype(np.float64)]
    sign = np.sign(a)
    mag = np.abs(a)
    mask = (1 << bits) - 1
    out = []
    for k in range(count):
        part = (mag >> (bits * k)) & mask
        out.append((part * sign).astype(np.float64))
    return out


def _scale(a: np.ndarray, s: int, ma: int | None = None) -> np.ndarray:
    if s == 1:
        return a
    if a.dtype != object and s < INT64_SAFE:
        if (_maxabs(a) if ma is None else ma) * s < INT64_SAFE:
            return a * np.int64(s)
    return _widen(a) * s


def _add(a: np.ndarray, b: np.ndarray, ma: int | None = None, mb: int | None = None) -> np.ndarray:
    if a.dtype != object and b.dtype != object:
        ma = _maxabs(a) if ma is None else ma
        mb = _maxabs(b) if mb is None else mb
        if ma + mb < INT64_SAFE:
            return a + b
    return _narrow(_widen(a) + _widen(b))


REDUCE_BLOCK = 4096
"""First block of entries :meth:`RatArray.reduced` takes a gcd over before it looks at the
rest (in blocks growing ×4): the same gcd, found early when it is 1."""


class RatArray:
    """``num / den`` with ``num`` an integer ndarray (int64 or object) and ``den > 0``."""

    __slots__ = ("num", "den", "_bound", "_cols")

    def __init__(
        self,
        num: np.ndarray,
        den: int = 1,
        bound: int | None = None,
        cols: np.ndarray | None = None,
    ) -> None:
        """``bound``: max |num| when the caller knows it (never a guess: it must hold).
        ``cols``: int64 (last-axis length,), max |num| of each last-axis column, when the
        caller knows them exactly (then ``bound`` is their maximum): what lets
        :meth:`add_columns` find the result's bound from the columns it writes alone."""
        assert den > 0
        self.num = num
        self.den = int(den)
        self._bound: int | None = bound
        self._cols = cols
        if cols is not None and bound is None:
            self._bound = int(cols.max()) if cols.size else 0

    def bound(self) -> int:
        """max |num|, computed once (RatArrays are never changed in place)."""
        if self._bound is None:
            self._bound = _maxabs(self.num)
        return self._bound

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_fractions(cls, values: Any) -> RatArray:
        """From a (nested) sequence of Fractions, with the lcm of the denominators."""
        arr = np.array(values, dtype=object)
        flat = arr.reshape(-1).tolist()
        # each distinct value object once: a wide model (d = 10^6) has millions of entries
        # but few distinct Fractions (the loader shares one object per literal)
        ids = list(map(id, flat))
        uniq = {i: Fraction(x) for i, x in dict(zip(ids, flat, strict=True)).items()}
        den = math.lcm(1, *{x.denominator for x in uniq.values()})
        scaled = {i: int(x.numerator) * (den // int(x.denominator)) for i, x in uniq.items()}
        num = np.empty(len(flat), dtype=object)
        num[:] = list(map(scaled.__getitem__, ids))
        return cls(_narrow(num.reshape(arr.shape)), den)

    @classmethod
    def zeros(cls, shape: Sequence[int]) -> RatArray:
        return cls(np.zeros(tuple(shape), dtype=np.int64), 1)

    # -- access --------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.num.shape

    def __getitem__(self, idx: Any) -> RatArray:
        return RatArray(self.num[idx], self.den)

    def fraction(self, idx: Any) -> Fraction:
        return Fraction(int(self.num[idx]), self.den)

    def to_fractions(self) -> Any:
        """Nested lists of Fractions (for the API and for tests)."""
        return _nested(self.num, self.den)

    def max_abs(self) -> Fraction:
        return Fraction(self.bound(), self.den)

    # -- arithmetic ----------------------------------------------------------------
    def matmul_t(self, w: RatArray) -> RatArray:
        """``self @ w.T`` for a 2-D weight ``w`` of shape (out, in)."""
        return RatArray(int_matmul(self.num, w.num.T, self.bound(), w.bound()), self.den * w.den)

    def bmm(self, other: RatArray) -> RatArray:
        """Batched ``self @ other`` (numpy matmul broadcasting)."""
        prod = int_matmul(self.num, other.num, self.bound(), other.bound())
        return RatArray(prod, self.den * other.den)

    def __add__(self, other: RatArray) -> RatArray:
        ma, mb = self.bound(), other.bound()
        if self.den == other.den:
            return RatArray(_add(self.num, other.num, ma, mb), self.den)
        den = math.lcm(self.den, other.den)
        fa, fb = den // self.den, den // other.den
        return RatArray(
            _add(_scale(self.num, fa, ma), _scale(other.num, fb, mb), ma * fa, mb * fb), den
        )

    def add_columns(self, cols: np.ndarray, part: RatArray) -> RatArray:
        """``self`` + P, where P is ``part`` in last-axis columns ``cols`` and 0 elsewhere:
        the same numerators, denominator and dtype as adding the full array P."""
        ma, mb = self.bound(), part.bound()
        den = math.lcm(self.den, part.den)
        fa, fb = den // self.den, den // part.den
        a = _scale(self.num, fa, ma)
        b = _scale(part.num, fb, mb)
        if a.dtype != object and b.dtype != object and ma * fa + mb * fb < INT64_SAFE:
            out = a.copy() if a is self.num else a
            c = np.asarray(cols)
            if (
                c.ndim == 1
                and c.size
                and c.dtype.kind in "iu"
                and out.flags.c_contiguous
                and b.shape == out.shape[:-1] + (c.size,)
                and len(set(c.tolist())) == c.size  # (a repeated column is added once)
            ):
                # column by column over all rows (long strided loops; a block of a few
                # columns runs numpy's inner loop once per row): the same sums
                flat, add = out.reshape(-1, out.shape[-1]), b.reshape(-1, b.shape[-1])
                known = self._cols is not None
                new = (
                    (self._cols * np.int64(fa) if fa != 1 else self._cols.copy()) if known else None
                )
                for j, col in enumerate(c.tolist()):
                    if new is None:
                        flat[:, col] += add[:, j]
                        continue
                    # the column's sum in a contiguous temporary, whose max |·| (the
                    # column's new bound) is then read from cache, not the strided array
                    tmp = flat[:, col] + add[:, j]
                    flat[:, col] = tmp
                    new[col] = max(abs(int(tmp.max())), abs(int(tmp.min()))) if tmp.size else 0
                return RatArray(out, den, cols=new)
            else:
                out[..., cols] += b
            return RatArray(out, den, cols=self._written_cols(out, c, fa))
        out = _widen(a).copy()
        out[..., cols] = out[..., cols] + _widen(b)
        return RatArray(_narrow(out), den)

    def _written_cols(self, out: np.ndarray, cols: np.ndarray, fa: int) -> np.ndarray | None:
        """The column bounds of ``out`` = self·fa with columns ``cols`` rewritten: known
        ones scaled by fa (exact: max |x·fa| = fa·max |x|), the rewritten ones measured —
        a pass over 1–3 columns instead of the whole array. None when self's are unknown."""
        if self._cols is None or out.dtype == object or out.ndim < 1:
            return None
        new = self._cols * np.int64(fa) if fa != 1 else self._cols.copy()
        flat = out.reshape(-1, out.shape[-1])
        for col in np.unique(cols).tolist():
            part = flat[:, col]
            new[col] = max(abs(int(part.max())), abs(int(part.min()))) if part.size else 0
        return new

    def relu(self) -> RatArray:
        return RatArray(
            np.maximum(self.num, 0)
            if self.num.dtype != object
            else np.where(self.num > 0, self.num, 0).astype(object),
            self.den,
        )

    def scale_rows(self, factors: np.ndarray, extra_den: int) -> RatArray:
        """Multiply by integer ``factors`` (broadcast) and divide by ``extra_den``."""
        f = factors
        if self.num.dtype != object and f.dtype != object:
            if _maxabs(self.num) * _maxabs(f) < INT64_SAFE:
                return RatArray(self.num * f, self.den * extra_den)
        return RatArray(_narrow(_widen(self.num) * _widen(f)), self.den * extra_den)

    def reduced(self) -> RatArray:
        """Divide numerators and denominator by their gcd (keeps numbers small)."""
        if self.den == 1:
            return self
        g = self.den
        flat = self.num.reshape(-1)
        if flat.dtype != object:
            # block by block, stopping once the gcd with the denominator is 1 (an array
            # already in lowest terms, the usual case, is settled by its first entries)
            # (a while loop: ``range(0, size, step)`` fixes its stride at the first block,
            # so the growing blocks overlapped and a gcd > 1 cost a quadratic number of gcds)
            s, step = 0, REDUCE_BLOCK
            while s < flat.size:
                g = math.gcd(g, int(np.gcd.reduce(flat[s : s + step])))
                if g == 1:
                    return self
                s += step
                step *= 4
        else:
            for x in flat:
                g = math.gcd(g, int(x))
                if g == 1:
                    break
        if g <= 1:
            return self
        small = self.num.dtype != object and g <= np.iinfo(np.int64).max
        num = self.num // g if small else _narrow(self.num.astype(object) // g)
        # g divides every numerator: max |x/g| = max |x|/g, column by column too
        num = _narrow(num)
        if self._cols is not None and num.dtype == np.int64:
            return RatArray(num, self.den // g, cols=self._cols // np.int64(g))
        bound = None if self._bound is None else self._bound // g
        return RatArray(num, self.den // g, bound=bound)


def _nested(num: np.ndarray, den: int) -> Any:
    if not isinstance(num, np.ndarray) or num.ndim == 0:  # object arrays yield plain ints
        return Fraction(int(num), den)
    return [_nested(x, den) for x in num]


def join_groups(first: RatArray, rest: RatArray, group: int) -> RatArray:
    """Axis-1 rows: ``first[g]`` (repeated for the ``group`` words of group g), then ``rest``.

    Returned in lowest terms with int64 numerators where they fit — the one representation
    of these numbers, so it equals what computing every row at once gives.
    """
    den = math.lcm(first.den, rest.den)
    a = _scale(first.num, den // first.den)
    b = _scale(rest.num, den // rest.den)
    if a.dtype != b.dtype:
        a, b = _widen(a), _widen(b)
    num = np.concatenate([np.repeat(a, group, axis=0), b], axis=1)
    return RatArray(_narrow(num), den).reduced()
