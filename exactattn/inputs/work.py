"""How much work a range of lengths is, before any input is built (the ``--max-inputs`` guard).

Counting inputs is not enough: a one-letter alphabet has one input per length, so
``--max-n 1000000`` passes an input-count guard, yet one input of length n costs about
L·(n+2)²·d (every layer compares all pairs of the n+2 positions in d coordinates), and the
job would run for years. The guard therefore weighs each input by its work:
an input counts as max(1, L·(n+2)²·d / WORK_PER_INPUT) inputs, and the weighted count must not
pass ``--max-inputs`` without ``--force``. Typical inputs (a few layers, d ≈ 16, n up to
about 30) weigh 1, so the guard reads as before for them.

Measured (docs/limits.md, "Work guard"): 4–27 ns per unit of L·(n+2)²·d for batched short
inputs, 40–150 ns for single long inputs; so the default budget (50,000,000 inputs ×
100,000 units) is between hours and days of CPU time.
"""

from __future__ import annotations

import math

from exactattn.inputs import count_inputs, count_text, inputs_exceed

WORK_PER_INPUT = 100_000
"""Units of work (L·(n+2)²·d) one input may cost before it counts as more than one input;
about an input of length 25 of a 5-layer model of width 16."""

SAMPLE_WORK = 1_000_000
"""Most work of one input the timed estimate samples (longer inputs: a shorter length is
timed and scaled by (n+2)²)."""


def input_work(layers: int, d: int, n: int) -> int:
    """Units of work of one input of length n: L·(n+2)²·d (pairs of positions × width, per
    layer; BOS and EOS counted)."""
    return max(1, layers) * (n + 2) ** 2 * max(1, d)


def _sum_squares(a: int, b: int) -> int:
    """Σ_{m=a}^{b} m² (0 when b < a), exact."""
    if b < a:
        return 0

    def s(m: int) -> int:
        return m * (m + 1) * (2 * m + 1) // 6 if m > 0 else 0

    return s(b) - s(a - 1)


def weighted_units(alphabet_size: int, layers: int, d: int, min_n: int, max_n: int) -> int:
    """Σ over inputs of max(WORK_PER_INPUT, input_work): the job's weighted count times
    WORK_PER_INPUT, exact. Call it only when the plain count is within limits (or k = 1)."""
    k, c = alphabet_size, max(1, layers) * max(1, d)
    if max_n < min_n or k < 1:
        return 0
    if k > 1:
        return sum(
            k**n * max(WORK_PER_INPUT, input_work(layers, d, n)) for n in range(min_n, max_n + 1)
        )
    # one input per length: closed form (max_n can be 10^9 or more)
    first = math.isqrt(-(-WORK_PER_INPUT // c))  # the smallest m with c·m² ≥ WORK_PER_INPUT
    while c * first * first < WORK_PER_INPUT:
        first += 1
    split = max(min_n, first - 2)  # lengths from here on weigh their work
    light = max(0, min(split, max_n + 1) - min_n)
    return WORK_PER_INPUT * light + c * _sum_squares(split + 2, max_n + 2)


def relative_work(alphabet_size: int, min_n: int, max_n: int, sample_n: int) -> float:
    """Σ_{m=min_n}^{max_n} k^m · (m+2)²/(sample_n+2)²: the job in units of one input of length
    ``sample_n`` (the estimate times such inputs). Closed form for k = 1; ∞ past float range."""
    k = alphabet_size
    if max_n < min_n:
        return 0.0
    scale = (sample_n + 2) ** 2
    if k <= 1:
        return _sum_squares(min_n + 2, max_n + 2) / scale
    if max_n * math.log2(k) > 1000:
        return math.inf
    return sum(float(k**m) * (m + 2) ** 2 for m in range(min_n, max_n + 1)) / scale


def sample_length(layers: int, d: int, max_n: int) -> int:
    """The length the estimate times: max_n, or the longest length whose one input costs at
    most SAMPLE_WORK (so timing a sample never costs as much as a long job)."""
    c = max(1, layers) * max(1, d)
    if input_work(layers, d, max_n) <= SAMPLE_WORK:
        return max_n
    return max(1, min(max_n, math.isqrt(SAMPLE_WORK // c) - 2))


def listed_too_large(
    layers: int, d: int, lengths: dict[int, int], max_inputs: int, where: str
) -> str | None:
    """The ``--max-inputs`` refusal for a list of inputs (``lengths``: how many of each
    length), weighed as :func:`job_too_large` weighs a range; None if they fit."""
    count = sum(lengths.values())
    units = sum(k * max(WORK_PER_INPUT, input_work(layers, d, n)) for n, k in lengths.items())
    if units <= max(max_inputs, 0) * WORK_PER_INPUT:
        return None
    weight = -(-units // WORK_PER_INPUT)
    return (
        f"--max-inputs: the {count:,} input{'' if count == 1 else 's'} of {where} (longest "
        f"{max(lengths):,}) weigh{'s' if count == 1 else ''} as {_about(weight)} inputs by "
        "their work, more than "
        f"--max-inputs {max_inputs:,} (an input of length n counts as one input per "
        f"{WORK_PER_INPUT:,} units of L·(n+2)²·d) (fix: fewer or shorter inputs, raise "
        "--max-inputs, or pass --force)"
    )


def _about(x: int) -> str:
    """A large integer for people: exact up to 10^15, else 'about 1.3×10^18'."""
    if x < 10**15:
        return f"{x:,}"
    bits = x.bit_length()
    if bits < 1000:
        mant, exp = f"{float(x):.1e}".split("e")
        return f"about {mant}×10^{int(exp)}"
    return f"more than 10^{math.floor((bits - 1) * math.log10(2)):,}"


def job_too_large(
    alphabet_size: int, layers: int, d: int, min_n: int, max_n: int, max_inputs: int
) -> str | None:
    """The one-line refusal of ``--max-inputs`` (without ``--force``), or None if the job
    fits: first by the count of inputs, then by their work (each input weighs
    max(1, L·(n+2)²·d / WORK_PER_INPUT) inputs)."""
    k = alphabet_size
    span = f"n = {min_n:,}..{max_n:,}, alphabet of {k}"
    fix = "(fix: lower --max-n, raise --max-inputs, or pass --force)"
    if inputs_exceed(k, min_n, max_n, max_inputs):
        return (
            f"--max-inputs: {count_text(k, min_n, max_n)} inputs ({span}) is more than "
            f"--max-inputs {max_inputs:,} {fix}"
        )
    units = weighted_units(k, layers, d, min_n, max_n)
    if units <= max(max_inputs, 0) * WORK_PER_INPUT:
        return None
    count = count_inputs(k, min_n, max_n)
    weight = -(-units // WORK_PER_INPUT)
    c = max(1, layers) * max(1, d)
    return (
        f"--max-inputs: {count:,} input{'' if count == 1 else 's'} ({span}) weigh as "
        f"{_about(weight)} inputs by their work, more than --max-inputs {max_inputs:,} (an "
        f"input of length n costs about L·(n+2)²·d = {c:,}·(n+2)² units with L = {layers} "
        f"layer{'' if layers == 1 else 's'} and d = {d}, and counts as one input per "
        f"{WORK_PER_INPUT:,} units) {fix}"
    )


__all__ = [
    "SAMPLE_WORK",
    "WORK_PER_INPUT",
    "input_work",
    "job_too_large",
    "listed_too_large",
    "relative_work",
    "sample_length",
    "weighted_units",
]
