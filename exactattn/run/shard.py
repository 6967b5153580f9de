"""One shard of one length: both meanings of its inputs, measured into a mergeable record.

Below :mod:`exactattn.run.check` (which chains the lengths) and :mod:`exactattn.run.executors`
(which decides where shards run), so both import it and neither imports the other's caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flint import arb

from exactattn.engine import centred, coarse, softfloat
from exactattn.engine.centred import certify_centred
from exactattn.engine.certify import MAX_PREC, certify_word
from exactattn.engine.coarse import certify_coarse, coarse_pays
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.softfloat import (
    DD_PREC,
    FloatBatch,
    certify_float,
    put_rows,
    second_tier,
    take_batch,
    tau_enclosures,
)
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import Shard, batches, words_in
from exactattn.model import Model
from exactattn.model.expr import Expr
from exactattn.model.reference import Oracle
from exactattn.results import Interval, LengthRecord
from exactattn.results.settings import TauChoice

BATCH = 2048


@dataclass(frozen=True)
class LengthJob:
    """Everything a worker needs to check shards of one length (picklable)."""

    model: Model
    n: int
    tau: TauChoice | Expr | None  # the temperature, parsed once (None: the model's)
    hard_only: bool
    batch: int = BATCH
    max_prec: int = MAX_PREC
    float_filter: bool = True  # settle what float64 enclosures can; arb for the rest
    # the double-double tier between float64 and arb: decided where the job is made (the
    # client's EXACTATTN_DD), so every worker of a run does the same, and recorded in
    # checkpoint shard identities
    dd_tier: bool = field(default_factory=lambda: softfloat.USE_DD)
    # BLAS score products (EXACTATTN_BLAS=1, off by default): the client's choice, likewise
    blas: bool = field(default_factory=lambda: softfloat.USE_BLAS)
    # the centred float64 tier before double-double (EXACTATTN_CENTRED=0 turns it off): the
    # client's choice, likewise
    centred_tier: bool = field(default_factory=lambda: centred.USE_CENTRED)
    # the coarse float tier before float64 (EXACTATTN_COARSE=0 turns it off; where it runs
    # is coarse.coarse_pays's rule): the client's choice, likewise
    coarse_tier: bool = field(default_factory=lambda: coarse.USE_COARSE)

    @property
    def tau_expr(self) -> Expr | None:
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


def check_shard(
    job: LengthJob,
    shard: Shard,
    progress: Callable[[int], None] | None = None,
    words: Sequence[tuple[str, ...]] | None = None,
) -> LengthRecord:
    """Both meanings of every input of one shard: its mergeable record.

    ``words`` replaces the shard's own inputs (a sample, for :func:`estimate`; its witnesses'
    ranks are then meaningless). The job's BLAS switch holds for the whole shard.
    """
    with softfloat.blas_products(job.blas):
        return _check_shard(job, shard, progress, words)


def _check_shard(
    job: LengthJob,
    shard: Shard,
    progress: Callable[[int], None] | None,
    words: Sequence[tuple[str, ...]] | None,
) -> LengthRecord:
    model, n = job.model, job.n
    cm = _compiled(model)
    temps = Temperatures(model, job.tau_expr)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    weights = WeightCache(cm)
    layer_kinds = [layer.kind for layer in model.layers]
    tau_n = None if job.hard_only else temps.display(n)
    head_taus: dict[tuple[int, int], Interval] = {}
    if not job.hard_only:
        for li, row in enumerate(temps.at(n, BASE_PREC)):
            for hi, t in enumerate(row or []):
                head_taus[(li, hi)] = Interval(arb(t.lower()), arb(t.upper()))
    acc = LengthAccumulator(model, n, oracle, len(model.layers))
    start_prec = BASE_PREC  # inputs of one shard need similar precision
    rank = shard.start
    # the float filter: value outputs compared with a reference need δy as balls (arb path)
    use_float = (
        job.float_filter
        and not job.hard_only
        and not (model.output.kind == "value" and oracle is not None)
    )
    if use_float:
        ftaus = tau_enclosures(temps.at(n, BASE_PREC))
        dtaus = tau_enclosures(temps.at(n, DD_PREC)) if job.dd_tier else None
        use_coarse = job.coarse_tier and coarse_pays(cm, n)  # a function of (model, n)
    source = iter(words) if words is not None else words_in(model.alphabet, shard)
    for chunk in batches(source, job.batch):
        hb = run_hard(cm, chunk, n)
        acc.add_hard(hb, first_rank=rank)
        if not job.hard_only:
            settled = None
            if use_float:
                fb, settled = _float_chain(
                    job, cm, hb, ftaus, dtaus, acc.error_lower_floats(), use_coarse
                )
                if fb is not None and settled is not None:
                    acc.add_soft_float(hb, fb, settled)
                    acc.float_settled += int(settled.sum())
            for b in range(len(chunk)):
                if settled is not None and settled[b]:
                    continue
                sr = certify_word(
                    cm, hb, b, acc, temps, weights, base_prec=start_prec, max_prec=job.max_prec
                )
                start_prec = max(BASE_PREC, sr.prec)
                acc.add_soft(hb, b, sr.bounds, sr.verdict, sr.prec)
        rank += len(chunk)
        if progress:
            progress(len(chunk))
    return acc.to_record(tau_n, layer_kinds, head_taus)


def _float_chain(
    job: LengthJob,
    cm: CompiledModel,
    hb: Any,
    ftaus: list[Any],
    dtaus: list[Any] | None,
    lower: list[float],
    use_coarse: bool,
) -> tuple[FloatBatch | None, np.ndarray | None]:
    """The float tiers on one batch: per word one tier's row and whether it is settled
    ((None, None): arb for the whole batch).

    With ``use_coarse`` (docs/scale.md, "Coarse tier"), :func:`coarse.certify_coarse` runs on
    every word first and :func:`settle_dominated` settles what its loose ends allow (its upper
    ends already carry the relative margin 1 + 2^-18); the tiers of :func:`_tiers` then run
    on the words left as a sub-batch, with the coarse lower ends of every word of the batch
    as extra thresholds and those of the coarse-settled words in ``lower`` (they enter the
    record). A coarse-settled word keeps its coarse row in the record: see
    :func:`settle_dominated` for why its loose ends never become the reported ones.

    After the coarse tier, the words left skip ``certify_float`` and go to the centred tier
    first (when it is on): the coarse tier runs only where the hard scores are not float64
    numbers (:func:`coarse.coarse_pays`), the badly conditioned case where the words it
    leaves are those of large perturbations, which the centred tier settles and
    ``certify_float`` mostly does not (random benchmark model, n = 6–12: the centred tier
    alone settles every word left, ``certify_float`` 1–21 of 2–35 per batch), while each
    call costs ≈ 12 ms of fixed per-layer work on a handful of words (docs/scale.md,
    "Coarse tier: built"). The rule is a function of the job, the model and n only."""
    fc = certify_coarse(cm, hb, ftaus) if use_coarse else None
    if fc is None:
        return _tiers(job, cm, hb, ftaus, dtaus, lower, ())
    B = len(hb.words)
    by_coarse = settle_dominated(fc, np.zeros(B, dtype=bool), fc.underflowed(), lower)
    if by_coarse.all():
        return fc, by_coarse
    first = job.centred_tier  # the centred tier first (the rule above)
    if not by_coarse.any():
        return _tiers(job, cm, hb, ftaus, dtaus, lower, (fc.err_lo,), first)
    idx = np.flatnonzero(~by_coarse)
    got = np.maximum(np.array(lower, dtype=np.float64), fc.err_lo[by_coarse].max(axis=0))
    fb, settled = _tiers(
        job, cm, take_batch(hb, idx), ftaus, dtaus, got.tolist(), (fc.err_lo,), first
    )
    if fb is None or settled is None:  # arb for the words left
        return fc, by_coarse
    out = by_coarse.copy()
    out[idx] = settled
    return put_rows(fc, idx, fb), out


def _tiers(
    job: LengthJob,
    cm: CompiledModel,
    hb: Any,
    ftaus: list[Any],
    dtaus: list[Any] | None,
    lower: list[float],
    known0: tuple[np.ndarray, ...],
    centred_first: bool = False,
) -> tuple[FloatBatch | None, np.ndarray | None]:
    """certify_float (``centred_first``: the centred tier instead, the same contract) on every
    word of ``hb``, then the centred tier (unless it ran first) and the double-double tier on
    what the tiers before could not settle; ``known0``: lower ends of an earlier tier
    (thresholds for :func:`settle_dominated`)."""
    try:
        fb = (certify_centred if centred_first else certify_float)(cm, hb, ftaus)
    except OverflowError:  # numerators beyond float range: arb for the batch
        return None, None
    # an error that underflowed to [0, 2^-500] (softfloat.TINY) says little
    # (tiny τ): arb gives it a real size at no extra cost
    under = fb.underflowed()
    settled = fb.settled & ~under
    if not settled.all():
        settled = settle_dominated(fb, settled, under, lower, known0)
    # the centred float64 tier, then the double-double tier, each for what
    # the tiers before it could not settle (None: second_tier's default, dd)
    tiers = [(certify_centred, ftaus)] if job.centred_tier and not centred_first else []
    tiers += [] if dtaus is None else [(None, dtaus)]
    known: list[np.ndarray] = list(known0)  # earlier tiers' certified lower ends
    for tier, ttaus in tiers:
        if settled.all():
            break
        try:
            fb2 = second_tier(cm, hb, fb, ~settled, ttaus, tier)
        except OverflowError:  # numbers beyond float range: arb for these
            fb2 = None
        if fb2 is not None:
            known.append(fb.err_lo)  # still certified lower ends (thresholds)
            fb = fb2
            under = fb.underflowed()
            todo = fb.settled & ~under & ~settled
            settled = settle_dominated(fb, settled | todo, under, lower, tuple(known))
    return fb, settled


def settle_dominated(
    fb: Any,
    settled: np.ndarray,
    under: np.ndarray,
    lower: list[float],
    known: Sequence[np.ndarray] = (),
) -> np.ndarray:
    """Also settle the words whose loose enclosures are reported by no one (docs/scale.md).

    A word is settled here when its read-out is decided, no error underflowed, and per layer:

    * its enclosure is tight, or its upper end is below a certified *lower* end of some word
      of the same length: ``lower`` (reported so far in the shard), or any row of ``fb`` or
      of ``known`` (other certified (B, L) lower ends of this batch, e.g. the float64 tier's
      under the double-double one), settled or not. If hi_v < lo_w ≤ e_w then v is not the
      word of largest error, and since every word ends in the record (floats or arb) with an
      upper end ≥ e_w > hi_v, v's upper end is never the reported one nor its witness; the
      reported upper end stays a tight word's, so the interval keeps its 1e-6 accuracy;
    * before the last layer, its ε ≤ 1 test is decided, or the length's ε > 1 there is
      already certain from a lower end > 1 *that enters the record*: ``lower`` or a word
      settled here (a fixpoint, since settling raises it). ε ≤ 1 is a property of the
      length's maximum (``LengthRecord.invariant``), so it then fails whatever this word's
      error is; lower ends of unsettled words are not used for this (arb may report a
      narrower-than-1 lower end for them only at its precision cap, but we take no chance).

    Words settled on the coarse tier's loose ends (:func:`_float_chain`) keep their rows in
    the record, as every word settled here does. Their upper end is never the reported one
    (above). Their lower end lo_v enters the record's maximum: sound (lo_v ≤ e_v ≤ the
    length's largest error) and never widening; and it is not the reported lower end
    whenever the word w of largest error in the shard (e_w ≥ lo_x for the threshold's word
    x, which is in the shard) is reported with a relative width below 3.8e-6 — a tight
    float64 enclosure (width < 1e-6·hi) or arb's at the reporting accuracy: the coarse upper
    ends carry the margin 1 + 2^-18, so lo_v ≤ hi_v/(1 + 2^-18) < thr/(1 + 2^-18) ≤
    e_w(1 − 3.8e-6) < lo_w. Only beside an enclosure wider than that (arb at its precision
    cap) can a coarse lower end become the reported one: a sound, narrower lower end. Its
    use for ε > 1 above needs it in the record, which it is.

    Everything is a function of this batch and ``lower``: independent of scheduling.
    """
    L = fb.err_lo.shape[1]
    rep = np.array(lower, dtype=np.float64)
    thr = rep.copy()
    for lo in (fb.err_lo, *known):
        if len(lo):
            thr = np.maximum(thr, np.where(np.isfinite(lo), lo, 0.0).max(axis=0))
    covered = (fb.tight | (fb.err_hi < thr[None, :])).all(axis=1)
    read = fb.decided if fb.read is None else fb.read
    cand = read & ~under & covered
    lo_, hi_ = fb.err_lo[:, : L - 1], fb.err_hi[:, : L - 1]
    eps = (hi_ <= 1) | ((lo_ > 1) & np.isfinite(lo_))
    out = settled.copy()
    while True:
        got = rep if not out.any() else np.maximum(rep, fb.err_lo[out].max(axis=0))
        fails = got[: L - 1] > 1  # ε > 1 after this layer: certain for the length
        new = out | (cand & (eps | fails[None, :]).all(axis=1))
        if (new == out).all():
            return new
        out = new
