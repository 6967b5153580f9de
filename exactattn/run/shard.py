"""One shard of one length: both meanings of its inputs, measured into a mergeable record.

Below :mod:`exactattn.run.check` (which chains the lengths) and :mod:`exactattn.run.executors`
(which decides where shards run), so both import it and neither imports the other's caller.
The hard meaning is :mod:`exactattn.engine.hard`'s; the certified soft meaning is the float
cascade's (:class:`exactattn.engine.cascade.chain.Cascade`: float tiers, arb for the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flint import arb

from exactattn.engine.cascade.chain import Cascade
from exactattn.engine.cascade.policy import Policy, current
from exactattn.engine.certify import MAX_PREC
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.hardfilter import filter_plan, run_filter
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import Shard, batches, words_in
from exactattn.model import Model
from exactattn.model.reference import Oracle
from exactattn.results import Interval, LengthRecord
from exactattn.results.settings import TauChoice, TauOverride

BATCH = 2048


@dataclass(frozen=True)
class LengthJob:
    """Everything a worker needs to check shards of one length (picklable)."""

    model: Model
    n: int
    tau: TauChoice | TauOverride  # the temperature, parsed once (None: the model's)
    hard_only: bool
    batch: int = BATCH
    max_prec: int = MAX_PREC
    # which tiers of the float cascade run: decided where the job is made (the client's
    # environment, engine/cascade/policy.py), so every worker of a run does the same, and
    # recorded switch by switch in checkpoint shard identities
    policy: Policy = field(default_factory=current)

    @property
    def tau_expr(self) -> TauOverride:
        """The expression every head runs at (None: each head's own temperature)."""
        return self.tau.expr if isinstance(self.tau, TauChoice) else self.tau

    @property
    def tau_text(self) -> str | None:
        """The override as written (checkpoint identities and file names use the text)."""
        expr = self.tau_expr
        return expr.text if expr is not None else None


# ---------------------------------------------------------------------------
# one shard
# ---------------------------------------------------------------------------


_COMPILED: dict[int, tuple[Model, CompiledModel]] = {}


def _compiled(model: Model) -> CompiledModel:
    """One compiled model per model object and process (workers check many shards)."""
    hit = _COMPILED.get(id(model))
    if hit is None or hit[0] is not model:
        _COMPILED.clear()
        hit = (model, CompiledModel(model))
        _COMPILED[id(model)] = hit
    return hit[1]


def hard_filter_start(job: LengthJob) -> int | None:
    """Where the job's shards take the hard meaning from the float filter
    (engine/hardfilter.py) rather than computing it exactly for every word: the first layer
    the filter computes (None: it does not run). It runs where its rule says so
    (:func:`~exactattn.engine.hardfilter.filter_plan`, a function of the model and n), the
    policy allows it, and the soft meaning, if computed, starts with the coarse tier (which
    reads the filter's enclosures). A function of the job only, so every shard and resume of
    a run does the same (checkpoint identities record it)."""
    p = job.policy
    if not p.hard_filter:
        return None
    cl = job.model.claims
    if cl is not None and (cl.coordinate_ranges is not None or cl.head_profiles is not None):
        return None  # Theorem S's claims are measured on every word's exact trace
    if not job.hard_only and not (p.floats and p.coarse):
        return None
    return filter_plan(_compiled(job.model), job.n)


def check_shard(
    job: LengthJob,
    shard: Shard,
    progress: Callable[[int], None] | None = None,
    words: Sequence[tuple[str, ...]] | None = None,
) -> LengthRecord:
    """Both meanings of every input of one shard: its mergeable record.

    ``words`` replaces the shard's own inputs (a sample, for :func:`estimate`; its witnesses'
    ranks are then meaningless).
    """
    model, n = job.model, job.n
    cm = _compiled(model)
    temps = Temperatures(model, job.tau_expr)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    layer_kinds = [layer.kind for layer in model.layers]
    tau_n = None if job.hard_only else temps.display(n)
    head_taus: dict[tuple[int, int], Interval] = {}
    if not job.hard_only:
        for li, row in enumerate(temps.at(n, BASE_PREC)):
            for hi, t in enumerate(row or []):
                head_taus[(li, hi)] = Interval(arb(t.lower()), arb(t.upper()))
    acc = LengthAccumulator(model, n, oracle, len(model.layers))
    soft = None
    if not job.hard_only:
        soft = Cascade(cm, n, temps, job.policy, oracle is not None, job.max_prec)
    rank = shard.start
    source = iter(words) if words is not None else words_in(model.alphabet, shard)
    start = hard_filter_start(job)
    for chunk in batches(source, job.batch):
        if start is not None:
            hf = run_filter(cm, chunk, n, start)
            acc.add_filtered(hf, cm, first_rank=rank)
            if soft is not None:
                soft.certify_filtered(hf, acc)
        else:
            hb = run_hard(cm, chunk, n)
            acc.add_hard(hb, first_rank=rank)
            if soft is not None:
                soft.certify(hb, acc)
        rank += len(chunk)
        if progress:
            progress(len(chunk))
    return acc.to_record(tau_n, layer_kinds, head_taus)
