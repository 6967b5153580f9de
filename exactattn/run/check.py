"""The check: every input of every length, both meanings, all measurements.

This is the Python API that the CLI wraps (``run_check``, ``estimate``). A length is
split into fixed shards (:mod:`exactattn.inputs`); each shard yields a mergeable
:class:`~exactattn.results.LengthRecord`, and the records of a length are merged, so the
result is the same for one process, many processes, a Dask cluster or a resumed run.
Long runs report progress through a callback and keep every finished length (and, with a
checkpoint directory, every finished shard).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exactattn.bounds.closedforms import fit_closed_forms
from exactattn.bounds.compare import bounds_for_length, dyadic_lower, tau_theorem_value
from exactattn.bounds.tau_search import search_tau
from exactattn.certificate.verify import verify_claims
from exactattn.core.errors import ClusterLost, ExactAttnError, UsageError
from exactattn.core.guard import EXIT_CLUSTER_LOST
from exactattn.engine.cascade.policy import current as current_policy
from exactattn.engine.certify import MAX_PREC
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import (
    Shard,
    count_inputs,
    shards_of_length,
    word_of_rank,
)
from exactattn.inputs.work import relative_work, sample_length
from exactattn.model import Model
from exactattn.model.claimed import precheck
from exactattn.results import (
    LengthRecord,
    Verdict,
    merge_lengths,
    result_json,
    verdict_of,
    with_claims,
    with_extras,
    with_gap_bound,
)
from exactattn.results.claims import gap_bound_entry
from exactattn.results.sequences import LengthValues
from exactattn.results.settings import CheckSettings, TauChoice, TauOverride
from exactattn.results.stop import STOPPED_CLUSTER_LOST
from exactattn.run.executors import InProcess
from exactattn.run.shard import (  # noqa: F401  (re-exported: the check's API)
    BATCH,
    LengthJob,
    _compiled,
    check_shard,
)

ProgressFn = Callable[[str, int, int], None]


# ---------------------------------------------------------------------------
# the whole check
# ---------------------------------------------------------------------------


@dataclass
class CheckResult:
    """A check's settings, its per-length records and how it ended: ``interrupted`` is
    Ctrl-C only; ``stopped`` names another early end (a lost ``--dask`` cluster:
    ``"cluster lost"``, with the one-line detail in ``stopped_by``)."""

    model: Model
    settings: CheckSettings
    lengths: list[LengthRecord] = field(default_factory=list)
    interrupted: bool = False
    max_prec: int = MAX_PREC
    complete: bool = False  # every requested length finished (a partial run is never "clean")
    stopped: str | None = None  # an early end that is not Ctrl-C (results.STOP_REASONS)
    stopped_by: str | None = None  # its one-line detail (the terminal's, not the file's)

    def verdict(self) -> Verdict:
        asked = None if self.complete else (self.settings.min_n, self.settings.max_n)
        return verdict_of(
            self.lengths,
            self.max_prec,
            incomplete=asked,
            interrupted=self.interrupted,
            stopped=self.stopped,
        )

    def exit_code(self) -> int:
        """The verdict's code; a lost cluster is 75 (retry, core/guard.py) unless the lengths
        finished before the loss already found a problem: then 1, since a finding stands
        whatever the rest shows (resuming can add problems, never remove one)."""
        v = self.verdict()
        if self.stopped is not None and v.status != "problems":
            return EXIT_CLUSTER_LOST
        return v.exit_code

    def to_json(self) -> dict[str, Any]:
        """The result in format ``exactattn-result/1`` (keys spelled in exactattn.results)."""
        return result_json(
            self.model,
            self.settings,
            self.verdict(),
            self.interrupted,
            self.lengths,
            fit_closed_forms([LengthValues.of(r) for r in self.lengths]),
            self.stopped,
        )


class LengthRangeError(UsageError):
    """--max-n below the smallest length: an argument of the command, shown as click's usage
    errors are (one line naming the command and its --help)."""


def check_request(
    model: Model,
    max_n: int,
    min_n: int | None = None,
    tau: TauChoice | TauOverride | str = None,
    *,
    hard_only: bool = False,
    tau_theorem: bool = False,
) -> tuple[int, TauChoice]:
    """The smallest length and the temperature choice of a request, checked before any input
    is evaluated: the lengths allowed, ``tau`` parsed once, and τ(n) defined and in range at
    both ends (run_check checks every n in between). :func:`run_check` starts here; the CLI
    calls it before its size guard and estimate, so a bad request costs one line and no
    estimate, and is checked in one place."""
    lo = model.min_length if min_n is None else min_n
    if max_n < lo:
        raise LengthRangeError(f"--max-n {max_n} is below the smallest length {lo}")
    for n in (lo, max_n):
        model.check_length(n)
    choice = TauChoice.theorem() if tau_theorem else TauChoice.of(tau)
    if not hard_only and not choice.is_theorem:  # an out-of-range τ: one line, no estimate
        temps = Temperatures(model, choice)
        for n in (lo, max_n):
            temps.at(n, BASE_PREC)
            temps.display(n)
    return lo, choice


def run_check(
    model: Model,
    max_n: int,
    min_n: int | None = None,
    tau: TauChoice | TauOverride | str = None,
    *,
    hard_only: bool = False,
    bounds: bool = False,
    batch: int = BATCH,
    progress: ProgressFn | None = None,
    on_length: Callable[[CheckResult], None] | None = None,
    max_prec: int = MAX_PREC,
    tau_theorem: bool = False,
    find_tau: bool = False,
    executor: Any = None,
    float_filter: bool = True,
    on_complete: Callable[[], None] | None = None,
) -> CheckResult:
    """Check every input of every length in [min_n, max_n].

    ``progress(stage, done, total)`` is called as inputs finish; ``on_length`` after
    each finished length (the CLI writes the JSON there, so an interrupt keeps it).
    ``executor`` (see :mod:`exactattn.run.executors`) runs the shards; default: this process.
    ``float_filter=False`` certifies every input with arb balls (slower; the float filter's
    enclosures are certified too, only their last printed digits differ).
    ``tau`` is a :class:`~exactattn.results.settings.TauChoice` or its text (``"theorem"``,
    an expression in n); ``tau_theorem=True`` is the same as ``tau="theorem"``.
    ``on_complete()`` is called once every length is checked, still inside the run's Ctrl-C
    handling (the CLI holds Ctrl-C from there, so no interrupt falls between the two).
    """
    lo, choice = check_request(
        model, max_n, min_n, tau, hard_only=hard_only, tau_theorem=tau_theorem
    )
    # the theorem's τ is found per length from a hard pass at the model's temperatures
    base = TauChoice.model() if choice.is_theorem else choice
    run = executor if executor is not None else InProcess()
    # the float cascade's tiers for every job of the run: the environment's, as read at import
    # (engine/cascade/policy.py), with the float tiers off for ``float_filter=False``
    policy = current_policy(float_filter)
    result = CheckResult(
        model=model,
        settings=CheckSettings(
            min_n=lo,
            max_n=max_n,
            tau=choice,
            hard_only=hard_only,
            bounds=bounds,
            find_tau=find_tau,
            float_filter=float_filter,
        ),
        max_prec=max_prec,
    )
    # refuse a model that breaks at some checked n before any work (and any file) is done
    # (every temperature in the file, used by a head or not, so no expression is skipped)
    # (every temperature in the file, used by a head or not, so no expression is skipped)
    if model.claims is not None:  # claims usable at every checked n (issue 23)
        precheck(model.claims, lo, max_n)
    for n in range(lo, max_n + 1):
        model.position_vectors(n)
        if not hard_only:
            Temperatures(model, base).at(n, BASE_PREC)
            Temperatures(model, base).display(n)
    try:
        for n in range(lo, max_n + 1):
            temps = Temperatures(model, base)
            job_tau = base
            if choice.is_theorem and not hard_only:
                pre = check_length(LengthJob(model, n, base, True, batch, max_prec, policy), run)
                t_thm, _ = tau_theorem_value(model, pre)
                if t_thm is None:
                    raise UsageError(
                        f"--tau theorem: at n = {n} a leftmost/rightmost head has a tie at the "
                        "top, so no temperature makes softmax reproduce it (proofs/, Thm 3(c))"
                    )
                # the theorem's τ: the exact lower end of τ_thm(n), a constant for this length
                job_tau = choice.at_theorem_value(dyadic_lower(t_thm))
                temps = Temperatures(model, job_tau)
            job = LengthJob(model, n, job_tau, hard_only, batch, max_prec, policy)
            rec = check_length(job, run, progress)
            if model.reference is not None and model.reference.kind == "rasp":
                gb = gap_bound_entry(model, rec)
                if gb is not None:  # the compiler's bound beside measured γ(n) (issue 22)
                    rec = with_gap_bound(rec, gb)
            if (bounds or choice.is_theorem) and not hard_only:
                rec = with_extras(rec, bounds=bounds_for_length(model, rec, temps.at(n, BASE_PREC)))
            if model.claims is not None:  # claimed bounds vs the measured values (issue 23)
                rec = with_claims(rec, verify_claims(model, rec))
            if find_tau and not hard_only:
                rec = with_extras(
                    rec,
                    tau_star=search_tau(
                        model, _compiled(model), n, None, batch, max_prec, progress=progress
                    ),
                )
            result.lengths.append(rec)
            if on_length:
                on_length(result)
        if on_complete:
            on_complete()
    except KeyboardInterrupt:
        result.interrupted = True
    except ClusterLost as exc:  # finished lengths (and checkpointed shards) are kept
        result.stopped = STOPPED_CLUSTER_LOST
        result.stopped_by = str(exc)
    else:
        result.complete = True
    return result


def check_length(job: LengthJob, run: Any, progress: ProgressFn | None = None) -> LengthRecord:
    """Every shard of one length, run by ``run``, merged into the length's record."""
    shards = shards_of_length(len(job.model.alphabet), job.n)
    total = len(job.model.alphabet) ** job.n
    parts = run.map_shards(job, shards, progress, f"n={job.n}", total)
    return merge_lengths([parts[s.index] for s in shards])


# ---------------------------------------------------------------------------
# the size of a job, before it starts
# ---------------------------------------------------------------------------


ESTIMATE_BUDGET = 1.0
"""Seconds the estimate's timed sample may take (it stops at the first batch past this)."""


def estimate(model: Model, min_n: int, max_n: int, hard_only: bool, jobs: int = 1) -> float:
    """Seconds a check should take, from timing a sample of the largest length.

    The sample (up to 2,048 inputs: runs of consecutive ranks aligned as in a shard, so
    prefix sharing works as in the check, spread evenly over the largest length) goes through
    the same code as the check (hard pass, float filter, arb for the rest), after a
    one-input warm-up so one-time costs are not multiplied. It is timed in growing parts (one
    run, then 4×, 16× …) that stop after about ESTIMATE_BUDGET seconds, so the estimate of an
    expensive model (d = 10^6: seconds per input) does not cost as much as the check; the
    largest part timed gives the cost per input (the least per-call overhead, as in the
    check's batches). Smaller lengths are scaled by their inputs and (length/largest
    length)², and the total is divided among the processes. An input too long to time in the
    budget (one-letter alphabets, --max-n 10^5) is replaced by the longest length that is
    not (inputs.work.sample_length), scaled the same way.
    """

    k = len(model.alphabet)
    n = sample_length(len(model.layers), model.d, max_n)
    if n * math.log2(max(k, 1)) > 1000:  # 2^1000 inputs (only with --force): no sample needed
        return math.inf
    total_n = k**n
    run = 1
    while k > 1 and run * k <= min(64, total_n):  # k = 1: one input per length, run 1
        run *= k
    runs = max(1, min(BATCH, total_n) // run)
    starts = sorted({(r * total_n // runs) // run * run for r in range(runs)})
    words = [word_of_rank(model.alphabet, n, a + i) for a in starts for i in range(run)]
    size = len(words)
    job = LengthJob(model, n, None, hard_only)
    try:
        if size > 1:  # warm-up (compile, caches); a one-input sample includes them instead
            check_shard(job, Shard(n, 0, 0, 1), words=words[:1])
        spent, done, step = 0.0, 0, run
        best = (0, 0.0)  # (inputs, seconds) of the largest part timed
        while done < size and (done == 0 or spent < ESTIMATE_BUDGET):
            part = words[done : done + step]
            t0 = time.perf_counter()
            check_shard(job, Shard(n, 0, 0, len(part)), words=part)
            dt = time.perf_counter() - t0
            spent += dt
            done += len(part)
            best = max(best, (len(part), dt))
            step *= 4
    except ExactAttnError:
        return 0.0
    per = best[1] / best[0]
    return per * relative_work(k, min_n, max_n, n) / max(1, jobs)


__all__ = [
    "BATCH",
    "CheckResult",
    "LengthJob",
    "TauChoice",
    "check_length",
    "check_request",
    "check_shard",
    "count_inputs",
    "estimate",
    "run_check",
]
