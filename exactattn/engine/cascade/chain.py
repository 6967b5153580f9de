"""The cascade: which float tier settles which word of a batch, and arb for the rest.

``run/shard.py`` asks :class:`Cascade` for the certified soft meaning of each batch of a shard
and nothing more. Per batch (notes/benchmark-rounds.md, "Coarse tier", "Centred tier",
"Double-double tier"), as the job's :class:`~.policy.Policy` allows:

1. the coarse tier (:mod:`.coarse`), where its rule turns it on (:func:`~.coarse.coarse_pays`,
   a function of the model and n): loose certified ends for every word, which settle the words
   :func:`settle_dominated` allows;
2. on the words left, the float64 tier (:mod:`.float64`; after the coarse tier, the centred tier
   in its place), then the centred tier (:mod:`.centred`) and the double-double tier
   (:mod:`.dd`), each on what the tiers before it could not settle (:func:`second_tier`), each
   word's row in the record one tier's;
3. arb (:func:`exactattn.engine.certify.certify_word`) for every word no tier settled.

A tier only moves work between tiers and arb, never changes a result: a word is settled only
when everything reported about it is certain and meets the reporting accuracy, or when its
loose ends are reported by no one (:func:`settle_dominated`). Every decision is a function of
the batch and the lower ends already in the shard's record, so results never depend on
scheduling (byte-identical JSON for any ``--jobs``, Dask, resume).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.cascade.batch import FloatBatch, put_rows, take_batch
from exactattn.engine.cascade.centred import certify_centred
from exactattn.engine.cascade.coarse import certify_coarse, coarse_pays
from exactattn.engine.cascade.dd import DD_PREC, certify_dd
from exactattn.engine.cascade.float64 import certify_float
from exactattn.engine.cascade.interval import tau_enclosures
from exactattn.engine.cascade.policy import Policy, blas_products
from exactattn.engine.cascade.weights import float_weights
from exactattn.engine.certify import MAX_PREC, certify_word
from exactattn.engine.hard import CompiledModel, HardBatch, run_hard
from exactattn.engine.hardfilter import FilterSource, HardFilter
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import BASE_PREC, Temperatures


class Cascade:
    """The certified soft meaning of the batches of one length, in one process (a shard's).

    ``reference``: the model's reference oracle is checked (a value read-out compared with a
    reference needs δy as balls: arb for every word). Made once per shard: it keeps the arb
    path's weights and starting precision (inputs of one shard need similar precision)."""

    def __init__(
        self,
        cm: CompiledModel,
        n: int,
        temps: Temperatures,
        policy: Policy,
        reference: bool,
        max_prec: int = MAX_PREC,
    ) -> None:
        self.cm = cm
        self.n = n
        self.temps = temps
        self.policy = policy
        self.max_prec = max_prec
        self.weights = WeightCache(cm)
        self.start_prec = BASE_PREC
        # the float tiers: value outputs compared with a reference need δy as balls (arb)
        self.floats = policy.floats and not (cm.model.output.kind == "value" and reference)
        self.ftaus: list[Any] = []
        self.dtaus: list[Any] | None = None
        self.coarse = False
        if self.floats:
            self.ftaus = tau_enclosures(temps.at(n, BASE_PREC))
            self.dtaus = tau_enclosures(temps.at(n, DD_PREC)) if policy.dd else None
            self.coarse = policy.coarse and coarse_pays(cm, n)  # a function of (model, n)

    def certify(self, hb: HardBatch, acc: LengthAccumulator) -> None:
        """The soft meaning of every word of ``hb`` into ``acc`` (whose hard meaning it holds):
        the float tiers' rows where they settle a word, arb's for the others. The job's BLAS
        switch holds for the whole batch."""
        with blas_products(self.policy.blas):
            settled = None
            if self.floats:
                fb, settled = _float_chain(
                    self.policy,
                    self.cm,
                    hb,
                    self.ftaus,
                    self.dtaus,
                    acc.error_lower_floats(),
                    self.coarse,
                    _free_ties(self.cm, acc),
                )
                if fb is not None and settled is not None:
                    acc.add_soft_float(hb, fb, settled)
                    acc.float_settled += int(settled.sum())
            for b in range(len(hb.words)):
                if settled is not None and settled[b]:
                    continue
                sr = certify_word(
                    self.cm,
                    hb,
                    b,
                    acc,
                    self.temps,
                    self.weights,
                    base_prec=self.start_prec,
                    max_prec=self.max_prec,
                )
                self.start_prec = max(BASE_PREC, sr.prec)
                acc.add_soft(hb, b, sr.bounds, sr.verdict, sr.prec)

    def certify_filtered(self, hf: HardFilter, acc: LengthAccumulator) -> None:
        """:meth:`certify` of a batch whose hard meaning the hard filter gave
        (engine/hardfilter.py, :meth:`LengthAccumulator.add_filtered` before): the coarse
        tier reads the filter's enclosures (``FilterSource``), and only the words it leaves
        are recomputed exactly, as one sub-batch, for the later tiers and arb. Without the
        coarse tier (it declined the batch) every word is recomputed, and :meth:`certify`
        runs on them."""
        cm = self.cm
        B = hf.B
        subs: dict[str, tuple[np.ndarray, HardBatch]] = {}

        def sub(idx: np.ndarray | None) -> HardBatch:
            got = np.arange(B) if idx is None else idx
            hb = hf.exact(cm, got)
            subs["hb"] = (got, hb)
            return hb

        with blas_products(self.policy.blas):
            fc = None
            if self.floats and self.coarse:
                fc = certify_coarse(cm, hf, self.ftaus, hard=FilterSource(cm, hf))
            if fc is None:
                hb = run_hard(cm, hf.words, hf.n)  # the whole batch, as the exact path has it
                acc.attach_exact(hb)
                self.certify(hb, acc)
                return
            fb, settled = after_coarse(
                self.policy,
                cm,
                fc,
                sub,
                self.ftaus,
                self.dtaus,
                acc.error_lower_floats(),
                _free_ties(cm, acc),
            )
            if fb is not None and settled is not None:
                acc.add_soft_float(hf, fb, settled)
                acc.float_settled += int(settled.sum())
            else:  # numbers beyond float range: arb for every word
                settled = np.zeros(B, dtype=bool)
            left = np.flatnonzero(~settled)
            if not left.size:
                return
            got, hbx = subs.get("hb") or (left, hf.exact(cm, left))
            pos = np.searchsorted(got, left)
            for b, j in zip(left.tolist(), pos.tolist(), strict=True):
                sr = certify_word(
                    cm,
                    hbx,
                    j,
                    acc,
                    self.temps,
                    self.weights,
                    base_prec=self.start_prec,
                    max_prec=self.max_prec,
                    at=b,
                )
                self.start_prec = max(BASE_PREC, sr.prec)
                acc.add_soft(hf, b, sr.bounds, sr.verdict, sr.prec)


def _free_ties(cm: CompiledModel, acc: LengthAccumulator) -> np.ndarray | None:
    """(B,) the words a float tier may settle with a read-out undecided only at hard ties
    (``FloatBatch.tie``): those whose soft labels there enter no field of the record
    (:meth:`LengthAccumulator.tie_reads_unreported`: every tied word but the record's tie
    witness, and none with an expected value at a tied position). arb keeps such a word
    decided too (the soft side of a hard tie is reported, not required) and reports the
    same for it; only what it found at the ties would differ, and nobody reads that. None
    where the float weights are out of range or past float64's (no word is settled then)."""
    try:
        ok = float_weights(cm).ok
    except OverflowError:  # numerators beyond float range, as in _tiers: arb decides
        return None
    return acc.tie_reads_unreported() if ok else None


def _float_chain(
    policy: Policy,
    cm: CompiledModel,
    hb: Any,
    ftaus: list[Any],
    dtaus: list[Any] | None,
    lower: list[float],
    use_coarse: bool,
    free: np.ndarray | None = None,
) -> tuple[FloatBatch | None, np.ndarray | None]:
    """The float tiers on one batch: per word one tier's row and whether it is settled
    ((None, None): arb for the whole batch).

    With ``use_coarse`` (notes/benchmark-rounds.md, "Coarse tier"), :func:`~.coarse.certify_coarse`
    runs on
    every word first and :func:`settle_dominated` settles what its loose ends allow (its upper
    ends already carry the relative margin 1 + 2^-18); the tiers of :func:`_tiers` then run
    on the words left as a sub-batch, with the coarse lower ends of every word of the batch
    as extra thresholds and those of the coarse-settled words in ``lower`` (they enter the
    record). A coarse-settled word keeps its coarse row in the record: see
    :func:`settle_dominated` for why its loose ends never become the reported ones.

    After the coarse tier, the words left skip ``certify_float`` and go to the centred tier
    first (when it is on): the coarse tier runs only where the hard scores are not float64
    numbers (:func:`~.coarse.coarse_pays`), the badly conditioned case where the words it
    leaves are those of large perturbations, which the centred tier settles and
    ``certify_float`` mostly does not (random benchmark model, n = 6–12: the centred tier
    alone settles every word left, ``certify_float`` 1–21 of 2–35 per batch), while each
    call costs ≈ 12 ms of fixed per-layer work on a handful of words (notes/benchmark-rounds.md,
    "Coarse tier: built"). The rule is a function of the policy, the model and n only."""
    fc = certify_coarse(cm, hb, ftaus) if use_coarse else None
    if fc is None:
        return _tiers(policy, cm, hb, ftaus, dtaus, lower, (), free=free)
    return after_coarse(
        policy,
        cm,
        fc,
        lambda idx: hb if idx is None else take_batch(hb, idx),
        ftaus,
        dtaus,
        lower,
        free,
    )


def after_coarse(
    policy: Policy,
    cm: CompiledModel,
    fc: FloatBatch,
    sub: Callable[[np.ndarray | None], HardBatch],
    ftaus: list[Any],
    dtaus: list[Any] | None,
    lower: list[float],
    free: np.ndarray | None = None,
) -> tuple[FloatBatch | None, np.ndarray | None]:
    """:func:`_float_chain` after the coarse tier's results ``fc``: what they settle, then
    the tiers of :func:`_tiers` on the words left, whose exact hard meaning ``sub(idx)`` gives
    (``sub(None)``: every word's)."""
    B = len(fc.settled)
    by_coarse = settle_dominated(fc, np.zeros(B, dtype=bool), fc.underflowed(), lower)
    if by_coarse.all():
        return fc, by_coarse
    first = policy.centred  # the centred tier first (the rule above)
    if not by_coarse.any():
        return _tiers(policy, cm, sub(None), ftaus, dtaus, lower, (fc.err_lo,), first, free)
    idx = np.flatnonzero(~by_coarse)
    got = np.maximum(np.array(lower, dtype=np.float64), fc.err_lo[by_coarse].max(axis=0))
    fb, settled = _tiers(
        policy,
        cm,
        sub(idx),
        ftaus,
        dtaus,
        got.tolist(),
        (fc.err_lo,),
        first,
        None if free is None else free[idx],
    )
    if fb is None or settled is None:  # arb for the words left
        return fc, by_coarse
    out = by_coarse.copy()
    out[idx] = settled
    return put_rows(fc, idx, fb), out


def _tiers(
    policy: Policy,
    cm: CompiledModel,
    hb: Any,
    ftaus: list[Any],
    dtaus: list[Any] | None,
    lower: list[float],
    known0: tuple[np.ndarray, ...],
    centred_first: bool = False,
    free: np.ndarray | None = None,
) -> tuple[FloatBatch | None, np.ndarray | None]:
    """certify_float (``centred_first``: the centred tier instead, the same contract) on every
    word of ``hb``, then the centred tier (unless it ran first) and the double-double tier on
    what the tiers before could not settle; ``known0``: lower ends of an earlier tier
    (thresholds for :func:`settle_dominated`)."""
    try:
        fb = (certify_centred if centred_first else certify_float)(cm, hb, ftaus)
    except OverflowError:  # numerators beyond float range: arb for the batch
        return None, None
    # an error that underflowed to [0, 2^-500] (interval.TINY) says little
    # (tiny τ): arb gives it a real size at no extra cost
    under = fb.underflowed()
    settled = fb.settled & ~under
    if not settled.all():
        settled = settle_dominated(fb, settled, under, lower, known0, free)
    # the centred float64 tier, then the double-double tier, each for what
    # the tiers before it could not settle (None: second_tier's default, dd)
    tiers = [(certify_centred, ftaus)] if policy.centred and not centred_first else []
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
            settled = settle_dominated(fb, settled | todo, under, lower, tuple(known), free)
    return fb, settled


def settle_dominated(
    fb: Any,
    settled: np.ndarray,
    under: np.ndarray,
    lower: list[float],
    known: Sequence[np.ndarray] = (),
    free: np.ndarray | None = None,
) -> np.ndarray:
    """Also settle the words whose loose enclosures are reported by no one
    (notes/benchmark-rounds.md).

    A word is settled here when its read-out is decided, no error underflowed, and per layer
    (a word whose read-out is undecided only at hard ties whose soft side nobody reads,
    ``free``: :func:`_free_ties`, only by the second rule, in every layer):

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
    below = fb.err_hi < thr[None, :]
    covered = (fb.tight | below).all(axis=1)
    read = fb.decided if fb.read is None else fb.read
    cand = read & ~under & covered
    if free is not None and fb.tie is not None:
        # undecided only at ties nobody reads (_free_ties), and below a lower end in every
        # layer: then arb's enclosures of the word (which it would get otherwise) are never
        # the reported ones either, so the record is arb's to the byte (only float_settled
        # and precision_bits say which path ran)
        cand |= fb.tie & free & ~under & below.all(axis=1)
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


def second_tier(
    cm: CompiledModel,
    hb: HardBatch,
    fb: FloatBatch,
    todo: np.ndarray,
    taus: list[list[tuple[Fraction, Fraction]] | None],
    tier: Callable[..., FloatBatch] | None = None,
) -> FloatBatch:
    """``fb`` with the words ``todo`` recomputed by ``tier`` (default :func:`~.dd.certify_dd`;
    also the centred tier, :func:`~.centred.certify_centred`, with the same contract): their
    rows are replaced where the second tier decided the read-out (each row is one tier's
    enclosures, never a mix); the other words keep the float64 tier's rows.

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
    fb2 = (tier or certify_dd)(cm, take_batch(hb, idx), taus)
    assert fb2.read is not None
    use = idx[fb2.read]  # its read-out decided: its rows (settle_dominated may settle it)
    src = np.flatnonzero(fb2.read)
    out = FloatBatch(**{k: (None if v is None else v.copy()) for k, v in vars(fb).items()})
    for name, v in vars(out).items():
        w = getattr(fb2, name)
        if v is not None and w is not None:
            v[use] = w[src]
    return out
