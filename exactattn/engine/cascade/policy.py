"""Which tiers of the float cascade run, and how: one policy, the environment read here.

A :class:`Policy` is decided where a job is made (the client's environment, read once at
import, as :data:`DEFAULT`), travels with the job to every worker of a run, and is recorded
switch by switch in checkpoint shard identities (``run/executors.py``), so every shard of a
run is computed the same way and a resumed run never mixes shards made under other switches.

Two process-wide settings live here too, since nothing else may read the environment for the
cascade: the BLAS switch in force (:func:`blas_products`, a ContextVar: threads of one Dask
worker running different jobs do not see each other's) and the allocator setting
(:func:`malloc_tuned`, ``EXACTATTN_MALLOC``), which changes no bit, so it is not part of a
job's policy: each process decides it once, at its first certified batch.
"""

from __future__ import annotations

import contextvars
import ctypes
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Policy:
    """The cascade's switches for one job (picklable; docs/scale.md lists them,
    notes/benchmark-rounds.md has each tier's story)."""

    floats: bool = True  # the float tiers at all (False: ``--arb-only``, every word in arb)
    coarse: bool = True  # the coarse tier, where coarse.coarse_pays's rule turns it on
    centred: bool = True  # the centred float64 tier, before double-double
    dd: bool = True  # the double-double tier, before arb
    blas: bool = False  # BLAS score products (and the coarse tier's), Rump's bound
    # the hard meaning's float filter (engine/hardfilter.py), where its rule turns it on: not a
    # tier of the soft meaning, but it changes what the coarse tier reads, so it is a switch
    # of the same job (recorded in checkpoint identities where it runs)
    hard_filter: bool = True

    @staticmethod
    def from_environ(env: Mapping[str, str]) -> Policy:
        """``EXACTATTN_COARSE=0``, ``EXACTATTN_CENTRED=0``, ``EXACTATTN_DD=0`` turn a tier
        off; ``EXACTATTN_BLAS=1`` turns BLAS products on (docs/scale.md);
        ``EXACTATTN_HARDFILTER=0`` turns the hard meaning's float filter off."""
        return Policy(
            coarse=env.get("EXACTATTN_COARSE", "1") != "0",
            centred=env.get("EXACTATTN_CENTRED", "1") != "0",
            dd=env.get("EXACTATTN_DD", "1") != "0",
            blas=env.get("EXACTATTN_BLAS", "") == "1",
            hard_filter=env.get("EXACTATTN_HARDFILTER", "1") != "0",
        )


DEFAULT = Policy.from_environ(os.environ)  # the environment at import (tests replace it)


def current(floats: bool = True) -> Policy:
    """The policy of a job made now: :data:`DEFAULT`, with the float tiers on or off."""
    return DEFAULT if floats else replace(DEFAULT, floats=False)


# the BLAS switch in force for the products being computed: a job sets it for its shards
# (the client's EXACTATTN_BLAS travels with the job's policy); a ContextVar, so threads of one
# Dask worker running different jobs do not see each other's
_BLAS_ON = contextvars.ContextVar("exactattn_blas", default=DEFAULT.blas)


def blas_on() -> bool:
    """Whether BLAS products are in force here (``EXACTATTN_BLAS=1`` or :func:`blas_products`):
    the switch the tiers (interval.outer_sum, the coarse tier) read for their products."""
    return _BLAS_ON.get()


@contextmanager
def blas_products(on: bool) -> Iterator[None]:
    """Compute score perturbations with BLAS (``on``) or in fixed order, inside the block."""
    token = _BLAS_ON.set(on)
    try:
        yield
    finally:
        _BLAS_ON.reset(token)


def _tune_malloc() -> bool:
    """Keep freed array memory in the process (glibc): bit-for-bit nothing changes, but the
    float tier's ~1 MB temporaries stop costing page faults.

    glibc serves allocations above a threshold (128 KiB, raised dynamically) with fresh
    mmap pages and returns heap tops above M_TRIM_THRESHOLD to the system, so nearly every
    temporary of a (1024 words × 13 × 13) batch was first-touch page faults: ≈ 75,000 per
    4,096 words of the random benchmark model, ≈ 20% of the float64 tier's CPU time
    (notes/benchmark-rounds.md, "Cheaper float64 tier"). Arrays below 32 MiB now come from the heap
    and up to 64 MiB of free heap top is kept. Linux/glibc only; ``EXACTATTN_MALLOC=0`` leaves
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
_LONG: list[bool] = []  # [whether applied], once the first long word is certified


def _keep_heap(limit: int) -> bool:
    """Raise glibc's M_TRIM_THRESHOLD to ``limit`` bytes (see :func:`_tune_malloc`)."""
    if os.environ.get("EXACTATTN_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(-1, limit) == 1  # M_TRIM_THRESHOLD


def malloc_tuned_long() -> bool:
    """:func:`malloc_tuned`, and up to 1 GiB of free heap top kept, once per process: a long
    word's blocks (engine/longsoft.py) keep ≈ 40 arrays of 4 MiB alive, ≈ 160 MiB freed at
    the end of each block, so with the 64 MiB limit every block's temporaries were fresh
    pages again (rasp_dyck2_bounded at n = 4,096: 43 s of CPU, 18 s of it system time,
    against 22 s with the limit raised). No bit depends on it."""
    ok = malloc_tuned()
    if not _LONG:
        _LONG.append(_keep_heap(1 << 30) and ok)
    return _LONG[0]


def malloc_tuned() -> bool:
    """:func:`_tune_malloc` once per process, at the first certified batch (not at
    import: a notebook that only builds or loads models keeps its allocator as it was)."""
    if not _MALLOC:
        _MALLOC.append(_tune_malloc())
    return _MALLOC[0]
