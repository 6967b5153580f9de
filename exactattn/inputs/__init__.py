"""Input enumeration: every word of length n, in a fixed order, split into shards.

Words of length n are enumerated lexicographically in the order the alphabet is listed;
a word's *rank* is its index in that order. A length is split into **shards**: the
words sharing a prefix, i.e. consecutive rank ranges of equal size. The split depends
only on the alphabet size and n (never on the number of processes), so results merged
from shards are the same however the shards are scheduled.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SHARD_INPUTS = 1 << 15
"""Largest shard: lengths with at most this many inputs are one shard.

The split is part of what a result means (each shard carries its working precision from
one input to the next), so it is fixed, not derived from the number of workers. The
environment variable ``EXACTATTN_SHARD_INPUTS`` overrides it (tests, tuning); checkpoints
record it.
"""


def shard_inputs() -> int:
    """The shard size in force (``EXACTATTN_SHARD_INPUTS`` or :data:`SHARD_INPUTS`)."""
    text = os.environ.get("EXACTATTN_SHARD_INPUTS")
    if text and text.isdigit() and int(text) > 0:
        return int(text)
    return SHARD_INPUTS


def count_inputs(alphabet_size: int, min_n: int, max_n: int) -> int:
    """How many inputs a check of lengths min_n..max_n evaluates (geometric sum, exact).

    Can be a number of millions of digits (``--max-n 10**6``): compare it with
    :func:`inputs_exceed` and print it with :func:`count_text`, not ``str``.
    """
    k = alphabet_size
    if max_n < min_n:
        return 0
    if k <= 1:
        return (max_n - min_n + 1) * k
    return (k ** (max_n + 1) - k**min_n) // (k - 1)


_EXACT_BITS = 4_000
"""Counts of at most this many bits are computed (and printed) exactly."""


def _log2_lower(alphabet_size: int, n: int) -> float:
    """A lower bound on log2(k^n), safe against the float rounding of log2 (display only)."""
    return n * math.log2(alphabet_size) * (1 - 1e-12)


def inputs_exceed(alphabet_size: int, min_n: int, max_n: int, limit: int) -> bool:
    """Whether lengths min_n..max_n hold more than ``limit`` inputs, without building a huge
    number: k^max_n alone decides it once its size in bits is far past the limit's."""
    k = alphabet_size
    if k > 1 and max_n >= min_n and _log2_lower(k, max_n) > max(limit, 1).bit_length() + 2:
        return True
    return count_inputs(k, min_n, max_n) > limit


def count_text(alphabet_size: int, min_n: int, max_n: int) -> str:
    """The input count for people: exact with separators, or ``more than 10^E`` (a true lower
    bound, E from k^max_n) when the exact count has more than about 1,200 digits."""
    k = alphabet_size
    if k <= 1 or max_n < min_n or _log2_lower(k, max_n) <= _EXACT_BITS:
        return f"{count_inputs(k, min_n, max_n):,}"
    exp10 = math.floor(max_n * math.log10(k) * (1 - 1e-12))
    return f"more than 10^{exp10:,}"


def words_of_length(alphabet: Sequence[str], n: int) -> Iterator[tuple[str, ...]]:
    """Every input of length n, in enumeration order."""
    return itertools.product(alphabet, repeat=n)


@dataclass(frozen=True)
class Shard:
    """The words of length ``n`` with ranks ``start ≤ rank < stop`` (one shared prefix)."""

    n: int
    index: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def name(self) -> str:
        return f"n{self.n}-s{self.index}"


def shards_of_length(alphabet_size: int, n: int, max_inputs: int | None = None) -> list[Shard]:
    """The fixed split of length n: shards of k^(n−p) words, p the shortest prefix that fits."""
    if max_inputs is None:
        max_inputs = shard_inputs()
    k = alphabet_size
    total = k**n
    if total <= max_inputs or k <= 1:
        return [Shard(n, 0, 0, total)]
    p = 0
    while k ** (n - p) > max_inputs:
        p += 1
    size = k ** (n - p)
    return [Shard(n, i, i * size, (i + 1) * size) for i in range(k**p)]


def words_in(alphabet: Sequence[str], shard: Shard) -> Iterator[tuple[str, ...]]:
    """The words of a shard, in enumeration order (any rank range works)."""
    n, k = shard.n, len(alphabet)
    size = shard.size
    suffix_len = 0
    while k**suffix_len < size:
        suffix_len += 1
    if size and k**suffix_len == size and shard.start % size == 0:
        prefix = word_of_rank(alphabet, n - suffix_len, shard.start // size)
        for rest in itertools.product(alphabet, repeat=suffix_len):
            yield prefix + rest
        return
    digits = [alphabet.index(t) for t in word_of_rank(alphabet, n, shard.start)]
    for _ in range(size):
        yield tuple(alphabet[d] for d in digits)
        p = n - 1
        while p >= 0:
            digits[p] += 1
            if digits[p] < k:
                break
            digits[p] = 0
            p -= 1


def word_of_rank(alphabet: Sequence[str], n: int, rank: int) -> tuple[str, ...]:
    """The word of length n with the given rank."""
    k = len(alphabet)
    out = []
    for _ in range(n):
        rank, r = divmod(rank, k)
        out.append(alphabet[r])
    return tuple(reversed(out))


def batches(it: Iterator[tuple[str, ...]], size: int) -> Iterator[list[tuple[str, ...]]]:
    """Consecutive chunks of at most ``size`` words."""
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk
