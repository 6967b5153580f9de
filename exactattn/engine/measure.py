"""Measurements for one length n, accumulated batch by batch.

Implements the spec's "Measured quantities": γ(n) with its witness, x_max(n), the
per-layer activation maximum, the per-layer certified error with witness, the
ε ≤ 1 invariant, decisions, margins and reference mismatches. Hard quantities are
exact Fractions; soft ones are arb endpoints, turned into outward-rounded
decimals only when the result is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, arb_mat, ctx, fmpq

from exactattn.core.numbers import frac_str, point_lower, point_upper, to_arb
from exactattn.engine.cascade.interval import float_down, float_up
from exactattn.engine.chainmeasure import ChainCollector
from exactattn.engine.hard import (
    CompiledModel,
    HardBatch,
    LayerTrace,
    argmax_least_margin,
    read_output,
    row_counts,
    rows_alike,
)
from exactattn.engine.hardfilter import HardFilter
from exactattn.engine.ratarray import INT64_SAFE
from exactattn.model import AcceptOutput, ArgmaxOutput, AttentionLayer, Model, ValueOutput
from exactattn.model.reference import Oracle
from exactattn.results import (
    ErrorRecord,
    HardTies,
    HeadRecord,
    Interval,
    LayerRecord,
    LengthRecord,
    ReferenceRecord,
    Witness,
    first_of,
    input_rank,
)
from exactattn.results.views import (
    disagreement_data,
    gamma_witness_data,
    mismatch_witness_data,
    position_witness_data,
    tie_witness_data,
    with_tie_soft,
)

TIGHT_REL = arb("1e-6")
ZERO_UPPER = arb("1e-40")


@dataclass
class GapRecord:
    """Smallest score gap seen so far and its order key (layer, head, input, query, key)."""

    value: Fraction | None = None
    witness: dict[str, Any] | None = None
    key: tuple[int, ...] = ()
    max_nontop: int = 0  # largest number of visible non-top keys of one query
    max_top: int = 0  # largest argmax set of one query (1: no ties at the top)


@dataclass
class ErrorState:
    """Largest certified error of one layer so far (arb endpoints) and its witness."""

    lower: arb = field(default_factory=lambda: arb(0))
    upper: arb = field(default_factory=lambda: arb(0))
    witness: dict[str, Any] | None = None
    rank: int = -1


def spec_position(model: Model, slot: int) -> int:
    return model.position_index(slot)


def delta_bounds(delta: arb_mat | None) -> tuple[arb, arb, int]:
    """max |δ| over entries as [lower, upper] exact points, and the row of the upper max."""
    if delta is None:
        return arb(0), arb(0), 0
    cols = delta.ncols()
    ents = delta.entries()
    if not all(map(arb.is_finite, ents)):
        bad = next(i for i, x in enumerate(ents) if not x.is_finite())
        return arb(0), arb.pos_inf(), bad // cols
    ups = list(map(arb.abs_upper, ents))
    hi = max(ups)
    lo = max(map(arb.abs_lower, ents))
    return lo, hi, ups.index(hi) // cols


def tight(lo: arb, hi: arb) -> bool:
    """The spec's reporting accuracy: relative width ≤ 1e-6, or a zero error ≤ 1e-40."""
    if not hi.is_finite():
        return False
    if hi.is_zero():
        return True
    if lo.is_zero() and hi <= ZERO_UPPER:
        return True
    return bool((hi - lo) <= hi * TIGHT_REL)


@dataclass
@dataclass
class SoftVerdict:
    """The soft read-out for one word, decided or not.

    ``decided`` concerns the positions where the hard meaning decides; at hard ties the
    soft label is reported as seen (``None`` for a soft tie or when it is undecided).
    """

    decided: bool
    value: Any  # accept: bool; argmax: list of labels (None = tie); value: None
    within_tol: bool | None = None  # value outputs: |δy| ≤ tolerance (None = undecided)
    delta_y: Any = None
    undecided_at: list[bool] | None = None  # argmax: per output position, soft undecided


class LengthAccumulator:
    """Collects every measurement for one n (or one part of its inputs) across batches.

    Batches must arrive in enumeration order within the part; ``first_rank`` gives the
    enumeration rank of a batch's first word (words of a batch are consecutive), so that
    every witness carries the order key that :mod:`exactattn.results` merges by.
    """

    def __init__(self, model: Model, n: int, oracle: Oracle | None, n_layers: int) -> None:
        self.model = model
        self.n = n
        self.oracle = oracle
        self.inputs = 0
        self.x_max = Fraction(0)
        self.activation_max = [Fraction(0)] * n_layers
        self.gap = GapRecord()
        self.head_gaps: dict[tuple[int, int], GapRecord] = {}
        self.errors = [ErrorState() for _ in range(n_layers)]
        self.disagreements = 0
        self.first_disagreement: Witness | None = None
        self.undecided = 0
        self.first_undecided: Witness | None = None
        self.min_margin: Fraction | None = None
        self.ties = HardTies()
        self.ref = ReferenceRecord()
        self.accepted = 0
        self.max_prec = 0
        self.float_settled = 0
        self.soft_done = False
        # per batch, filled by add_hard, read by add_soft
        self._hard_out: Any = None
        self._hard_decisions: list[Any] = []
        # per word with hard ties (others absent): output positions (indices) with hard ties
        self._tie_at: dict[int, list[int]] = {}
        self._rank0 = 0
        self._ranks: list[int] | None = None
        # per precision: the read-out's weights and tolerance as arb balls (to_arb rounds at
        # the context's precision, so a cached ball is the one to_arb would give there)
        self._out_arbs: dict[int, tuple[list[list[arb | None]], arb | None]] = {}
        self._ref_counts = [0, 0]
        chain = ChainCollector(model)  # the claims of Theorem S, when the model makes them
        self.chain = chain if chain.active else None

    def _read_arbs(self) -> tuple[list[list[arb | None]], arb | None]:
        """The output weights (None where 0) and the value tolerance as ``to_arb`` gives them
        at the current precision, converted once per precision."""
        got = self._out_arbs.get(ctx.prec)
        if got is None:
            o = self.model.output
            W = [o.weight] if isinstance(o, AcceptOutput) else o.weight
            ws = [[to_arb(wk) if wk else None for wk in row] for row in W]
            tol = to_arb(o.tolerance) if isinstance(o, ValueOutput) else None
            got = self._out_arbs[ctx.prec] = (ws, tol)
        return got

    # -- hard ----------------------------------------------------------------------
    def add_hard(self, hb: HardBatch, first_rank: int | None = None) -> None:
        m = self.model
        N = len(hb.words)
        if first_rank is None:  # words in any order: rank each one
            self._ranks = [input_rank(m.alphabet, w) for w in hb.words]
            self._rank0 = 0
        else:
            self._ranks = None
            self._rank0 = first_rank
        self.inputs += N
        self.x_max = max(self.x_max, hb.x0.max_abs())
        if self.chain is not None:
            self.chain.add(hb)
        for li, lt in enumerate(hb.layers):
            self._layer_hard(hb, li, lt)
        x_last = hb.activations[-1]
        out = read_output(m, x_last, self.n)
        self._hard_out = out
        self._hard_decisions = []
        self._tie_at = {}
        o = m.output
        if isinstance(o, AcceptOutput):
            # y − t = (num·q − p·den)/(den·q), decided on integer numerators for the batch
            t = o.threshold
            vals = out.values
            diff = _threshold_diff(vals, t)
            if N:
                acc_flags = diff > 0
                self._hard_decisions = acc_flags.tolist()  # Python bools
                self.accepted += int(acc_flags.sum())
                for b in np.flatnonzero(diff == 0).tolist():
                    self._tie_at[b] = [0]
                self._margin(Fraction(int(np.abs(diff).min()), vals.den * t.denominator))
        elif isinstance(o, ArgmaxOutput):
            labels, least = argmax_least_margin(m, out.values)
            self._hard_decisions = labels
            if least is not None:  # the batch's least margin, then one comparison
                self._margin(least)
            for b in range(N):
                tied = [p for p, lab in enumerate(labels[b]) if lab is None]
                if tied:
                    self._tie_at[b] = tied
        else:
            self._hard_decisions = [None] * N
        self._reference_and_ties(hb)

    def _reference_and_ties(self, hb: HardBatch | HardFilter) -> None:
        """The batch's hard ties and its reference comparison, from the decisions in
        ``_hard_decisions`` and ``_tie_at`` (one entry per word of ``hb``)."""
        o = self.model.output
        N = len(hb.words)
        expected = (
            self.oracle.expected_many(hb.words, hb.letters)
            if self.oracle is not None
            else [None] * N
        )
        self._expected = expected
        if self._tie_at:
            self._note_hard_ties(hb, expected)
        if self.oracle is not None:
            compared = sum(1 for e in expected if e is not None)
            self.ref = replace(self.ref, compared=self.ref.compared + compared)
            self._ref_counts = [0, 0]  # _matches_hard's undefined / compared positions
            if isinstance(o, AcceptOutput):
                # _matches_hard of an accept output only compares: visit the mismatches
                check = [
                    b
                    for b, (e, h) in enumerate(zip(expected, self._hard_decisions, strict=True))
                    if e is not None and not bool(h) == e
                ]
            elif isinstance(o, ArgmaxOutput):
                # _matches_hard's counts and comparisons inline (one pass, no call per word):
                # visit only the mismatches
                und = cmp_ = 0
                check = []
                hard = self._hard_decisions
                for b, e in enumerate(expected):
                    if e is None:
                        continue
                    k = e.count(None)
                    und += k
                    cmp_ += len(e) - k
                    g = hard[b]
                    if g != e and any(x is not None and y != x for y, x in zip(g, e, strict=True)):
                        check.append(b)
                # _matches_hard counts them again below: take its counts off here
                for b in check:
                    k = expected[b].count(None)
                    und -= k
                    cmp_ -= len(expected[b]) - k
                self._ref_counts = [und, cmp_]
            else:
                check = [b for b, e in enumerate(expected) if e is not None]
            for b in check:
                w = hb.words[b]
                exp = expected[b]
                if not self._matches_hard(b, exp):
                    self.ref = replace(
                        self.ref,
                        hard=self.ref.hard + 1,
                        first=first_of(
                            self.ref.first,
                            Witness(
                                (0, self._rank(b)),
                                mismatch_witness_data(
                                    w, "hard", jsonable(exp), jsonable(self._hard_repr(b))
                                ),
                            ),
                        ),
                    )
            und, cmp_ = self._ref_counts
            if und or cmp_:  # the batch's counts at once (one record update, same sums)
                self.ref = replace(
                    self.ref,
                    undefined=self.ref.undefined + und,
                    compared_positions=self.ref.compared_positions + cmp_,
                )

    def add_filtered(
        self, hf: HardFilter, cm: CompiledModel, first_rank: int | None = None
    ) -> None:
        """:meth:`add_hard` of a batch given by the hard filter (engine/hardfilter.py): the
        same record, bit for bit (proofs/hard_filter.md, Lemma X).

        The exact prefix (``hf.pre``) is measured as :meth:`add_hard` measures it. For the
        filtered layers the filter decides the words it calls ok (every argmax, the accept
        decision) and encloses each word's extrema. A word is recomputed exactly
        (``hf.exact_idx``, ``hf.exact_hb``, in rank order) when the filter could not decide
        it, or when it is a candidate for an extremum of the batch: its enclosure reaches
        the best the batch's other enclosures guarantee, and could change the record (a
        largest |activation| above the one recorded; a smallest gap or margin below it).
        Every word that attains an extremum is then exact, with its rank, so values and
        witnesses (the first in rank order, as the exact path finds them) are the exact
        path's."""
        m = self.model
        o = m.output
        assert isinstance(o, AcceptOutput)
        # Theorem S's claims are measured on every word's exact trace, which the filter skips
        # (run/shard.py does not filter such a model)
        assert self.chain is None, "a model with chain claims is not filtered"
        N = hf.B
        pre = hf.pre
        if first_rank is None:  # words in any order: rank each one
            self._ranks = [input_rank(m.alphabet, w) for w in hf.words]
            self._rank0 = 0
        else:
            self._ranks = None
            self._rank0 = first_rank
        self.inputs += N
        self.x_max = max(self.x_max, pre.x0.max_abs())
        # the exact prefix, as add_hard does it
        for li, lt in enumerate(pre.layers):
            self._layer_hard(pre, li, lt)
        ok = hf.ok
        has_ok = bool(ok.any())
        exact = ~ok
        if has_ok:  # the candidates (Lemma X)
            for li, lo in hf.act_lo.items():
                hi = hf.act_hi[li]
                have = float_down(self.activation_max[li])
                exact |= ok & (hi >= float(lo[ok].max())) & (hi > have)
            for key, facts in hf.heads.items():
                bound = float(facts.gap_hi[ok].min())
                cand = ok & np.isfinite(facts.gap_lo) & (facts.gap_lo <= bound)
                rec = self.head_gaps.get(key)
                if rec is not None and rec.value is not None:
                    cand &= facts.gap_lo < float_up(rec.value)
                exact |= cand
            bound = float(hf.margin_hi[ok].min())
            cand = ok & (hf.margin_lo <= bound)
            if self.min_margin is not None:
                cand &= hf.margin_lo < float_up(self.min_margin)
            exact |= cand
        idx = np.flatnonzero(exact)
        hf.exact_idx = idx
        hf.exact_hb = hb = hf.exact(cm, idx) if idx.size else None
        # the filtered layers: the decided words' facts, and the exact words under their ranks
        ranks0 = self._ranks
        self._ranks = [self._rank(int(b)) for b in idx.tolist()]
        for li in range(hf.start, len(m.layers)):
            if hb is not None:
                self.activation_max[li] = max(
                    self.activation_max[li], hb.layers[li].x_out.max_abs()
                )
            layer = m.layers[li]
            if not isinstance(layer, AttentionLayer):
                continue
            for hi_ in range(len(layer.heads)):
                rec = self.head_gaps.setdefault((li, hi_), GapRecord())
                if has_ok:  # the decided words' argmax sets
                    facts = hf.heads[(li, hi_)]
                    rec.max_nontop = max(rec.max_nontop, int(facts.nontop_max[ok].max()))
                    rec.max_top = max(rec.max_top, int(facts.top_max[ok].max()))
                if hb is not None:
                    heads = hb.layers[li].heads
                    assert heads is not None
                    self._gap(hb, li, hi_, heads[hi_], rec)
                self._global_gap(rec)
        self._ranks = ranks0
        # the decisions: the filter's where it decided, the exact ones elsewhere
        self._hard_out = None
        self._tie_at = {}
        decisions = hf.accept & ok
        t = o.threshold
        if hb is not None:
            vals = read_output(m, hb.activations[-1], self.n).values
            diff = _threshold_diff(vals, t)
            decisions[idx] = diff > 0
            for j in np.flatnonzero(diff == 0).tolist():
                self._tie_at[int(idx[j])] = [0]
            self._margin(Fraction(int(np.abs(diff).min()), vals.den * t.denominator))
        self._hard_decisions = decisions.tolist()
        self.accepted += int(decisions.sum())
        self._reference_and_ties(hf)

    def attach_exact(self, hb: HardBatch) -> None:
        """The exact hard meaning of the batch :meth:`add_filtered` took, when the soft side
        needs it for every word after all (the coarse tier declined the batch)."""
        self._hard_out = read_output(self.model, hb.activations[-1], self.n)

    def tie_reads_unreported(self) -> np.ndarray:
        """(B,) the words of the current batch whose soft read-out at their hard ties enters
        no field of the record, so a float tier may leave it undecided there.

        At a hard tie the soft side is reported, not required (:meth:`soft_verdict` keeps such
        a word decided whatever it finds there), and what it finds enters the record in two
        places only: the tie witness's ``soft`` (:meth:`_note_ties`: the first tied word of
        this record, in rank order, already known after the hard pass of its batch) and the
        reference comparison at a tied position whose expected value is defined. Every other
        tied word's soft labels there are read by nobody, whichever path computes them."""
        out = np.zeros(len(self._hard_decisions), dtype=bool)
        if not self._tie_at:
            return out
        w = self.ties.witness
        first = None if w is None else w.key[0]
        accept = isinstance(self.model.output, AcceptOutput)
        for b, tied in self._tie_at.items():
            if self._rank(b) == first:
                continue
            exp = self._expected[b]
            if exp is not None and (accept or any(exp[p] is not None for p in tied)):
                continue
            out[b] = True
        return out

    def _layer_hard(self, hb: HardBatch, li: int, lt: LayerTrace) -> None:
        """One layer's exact measurements: its largest |activation|, its heads' gaps."""
        self.activation_max[li] = max(self.activation_max[li], lt.x_out.max_abs())
        if lt.heads is None:
            return
        for hi_, tr in enumerate(lt.heads):
            rec = self.head_gaps.setdefault((li, hi_), GapRecord())
            self._gap(hb, li, hi_, tr, rec)
            self._global_gap(rec)

    def _global_gap(self, rec: GapRecord) -> None:
        """γ: the smallest head gap, by (value, order key)."""
        if rec.value is not None and (
            self.gap.value is None or (rec.value, rec.key) < (self.gap.value, self.gap.key)
        ):
            self.gap = GapRecord(rec.value, rec.witness, rec.key)

    def _rank(self, b: int) -> int:
        """Enumeration rank of word b of the current batch."""
        return self._ranks[b] if self._ranks is not None else self._rank0 + b

    def _note_hard_ties(self, hb: HardBatch | HardFilter, expected: list[Any]) -> None:
        """:meth:`_note_ties` of the hard pass for every tied word of the batch at once: the
        same sums, and the witness the word-by-word loop ends with (the least (rank, first
        tied position) of the batch, if below the record's)."""
        m = self.model
        accept = isinstance(m.output, AcceptOutput)
        positions = undefined = 0
        best: tuple[int, int] | None = None
        best_b = -1
        slots = None if accept else m.output_positions(self.n)
        for b, tied in self._tie_at.items():
            positions += len(tied)
            exp = expected[b]
            if exp is not None and not accept:
                undefined += sum(1 for p in tied if exp[p] is None)
            pos0 = (
                m.position_index(m.accept_slot(self.n))
                if accept
                else m.position_index(slots[tied[0]])  # type: ignore[index]
            )
            key = (self._rank(b), pos0)
            if best is None or key < best:
                best, best_b = key, b
        t = self.ties
        self.ties = HardTies(
            t.positions + positions, t.inputs + len(self._tie_at), t.expected + undefined, t.witness
        )
        assert best is not None
        if t.witness is None or best < t.witness.key:
            self.ties = replace(
                self.ties, witness=Witness(best, tie_witness_data(hb.words[best_b], best[1]))
            )

    def _note_ties(self, hb: HardBatch, b: int, exp: Any, soft: SoftVerdict | None) -> None:
        """Count word b's hard ties (hard pass) or fill in the soft behaviour of the first."""
        m = self.model
        tied = self._tie_at.get(b, [])
        rank = self._rank(b)
        if isinstance(m.output, AcceptOutput):
            positions = [m.position_index(m.accept_slot(self.n))]
        else:
            slots = m.output_positions(self.n)
            positions = [m.position_index(slots[p]) for p in tied]
        if soft is None:
            undefined = 0
            if exp is not None and not isinstance(m.output, AcceptOutput):
                undefined = sum(1 for p in tied if exp[p] is None)
            self.ties = HardTies(
                self.ties.positions + len(tied),
                self.ties.inputs + 1,
                self.ties.expected + undefined,
                self.ties.witness,
            )
            if self.ties.witness is None or (rank, positions[0]) < self.ties.witness.key:
                self.ties = replace(
                    self.ties,
                    witness=Witness(
                        (rank, positions[0]),
                        tie_witness_data(hb.words[b], positions[0]),
                    ),
                )
            return
        w = self.ties.witness
        if w is None or w.key[0] != rank:
            return
        if isinstance(m.output, AcceptOutput):
            s = "undecided" if soft.undecided_at or not soft.decided else soft.value
        else:
            p = tied[0]
            und = soft.undecided_at[p] if soft.undecided_at else False
            s = "undecided" if und else soft.value[p]
        self.ties = replace(self.ties, witness=Witness(w.key, with_tie_soft(w.data, jsonable(s))))

    def _gap(self, hb: HardBatch, li: int, hi_: int, tr: Any, rec: GapRecord) -> None:
        s = tr.scores.num
        if s.size == 0:
            return
        sh = hb.sharing
        rm = tr.rowmax
        if sh is not None and li < sh.layers:
            # rows before q0 are the same for every word of a group: look at each group's
            # first word there (the first of the group in rank order, as the argmin wants)
            G, q0 = sh.group, sh.q0
            firsts = slice(0, s.shape[0], G)
            parts = [
                _gap_part(
                    s[firsts, :q0],
                    tr.top[firsts, :q0],
                    tr.visible[:q0],
                    G,
                    0,
                    None if rm is None else rm[firsts, :q0],
                ),
                _gap_part(
                    s[:, q0:],
                    tr.top[:, q0:],
                    tr.visible[q0:],
                    1,
                    q0,
                    None if rm is None else rm[:, q0:],
                ),
            ]
        elif rows_alike(tr):  # every row has row 0's scores: row 0 says it all
            parts = [
                _gap_part(
                    s[:, :1], tr.top[:, :1], tr.visible[:1], 1, 0, None if rm is None else rm[:, :1]
                )
            ]
        else:
            parts = [_gap_part(s, tr.top, tr.visible, 1, 0, rm)]
        best = None
        for nontop, tops, found in parts:
            rec.max_nontop = max(rec.max_nontop, nontop)
            rec.max_top = max(rec.max_top, tops)
            if found is not None and (best is None or found < best):
                best = found
        if best is None:
            return
        num, b, i, j = best
        g = Fraction(num, tr.scores.den)
        # the first (input, query, key) attaining the batch minimum: argmin is row-major
        if rec.value is None or g < rec.value:
            top_key = int(np.argmax(tr.top[b, i]))
            m = self.model
            q, o = spec_position(m, int(i)), spec_position(m, int(j))
            rec.value = g
            rec.key = (li, hi_, self._rank(int(b)), q, o)
            rec.witness = gamma_witness_data(hb.words[b], li, hi_, q, spec_position(m, top_key), o)

    def _margin(self, mg: Fraction) -> None:
        if self.min_margin is None or mg < self.min_margin:
            self.min_margin = mg

    def hard_output(self, b: int) -> Any:
        """Word b's hard read-out in the last batch: decision, labels or value rows."""
        return self._hard_repr(b)

    def _hard_repr(self, b: int) -> Any:
        o = self.model.output
        if isinstance(o, ValueOutput):
            vals = self._hard_out.values
            return [[Fraction(int(x), vals.den) for x in row] for row in vals.num[b]]
        return self._hard_decisions[b]

    def _matches_hard(self, b: int, exp: Any) -> bool:
        o = self.model.output
        if isinstance(o, AcceptOutput):
            return bool(self._hard_decisions[b]) == exp
        defined = [p for p, e in enumerate(exp) if e is not None]
        counts = self._ref_counts  # added to the record once per batch (_reference_and_ties)
        counts[0] += len(exp) - len(defined)
        counts[1] += len(defined)
        if isinstance(o, ArgmaxOutput):
            got = self._hard_decisions[b]
            return all(got[p] == exp[p] for p in defined)
        vals = self._hard_out.values
        den = vals.den
        ok = True
        rows = vals.num[b].tolist()
        for p in defined:
            # num/den == e exactly, as integers (both sides in lowest terms or not: the same)
            row = rows[p]
            e = exp[p]
            ok &= len(row) == len(e) and all(
                x * ev.denominator == ev.numerator * den for x, ev in zip(row, e, strict=True)
            )
        return ok

    # -- soft ----------------------------------------------------------------------
    def soft_verdict(
        self,
        hb: HardBatch,
        b: int,
        final_delta: arb_mat | None,
        zero_test: Any = None,
        at: int | None = None,
    ) -> SoftVerdict:
        """The soft read-out of word b, certified, from the final δ.

        ``zero_test(slot, a, K)`` decides exactly whether K + a·δ[slot] = 0 (see
        :mod:`exactattn.engine.exactzero`); it settles ties that no precision can.
        ``at``: the word's index in the batch this accumulator holds the hard meaning of,
        when ``hb`` is a sub-batch of it (the hard filter's exact words); the hard read-out
        values are then ``hb``'s own.
        """
        m = self.model
        o = m.output
        if at is None:
            vals = self._hard_out.values
            at = b
        else:
            vals = read_output(m, hb.activations[-1], self.n).values
        if isinstance(o, AcceptOutput):
            slot = m.accept_slot(self.n)
            y = vals.fraction(b)
            c = y - o.threshold
            if final_delta is None:
                return SoftVerdict(True, c > 0, delta_y=arb(0))
            dy = arb(0)
            for k, wa in enumerate(self._read_arbs()[0][0]):
                if wa is not None:
                    dy += wa * final_delta[slot, k]
            if dy.is_zero():
                return SoftVerdict(True, c > 0, delta_y=dy)
            val = to_arb(c) + dy
            if val > 0:
                return SoftVerdict(True, True, delta_y=dy)
            if val <= 0:
                return SoftVerdict(True, False, delta_y=dy)
            if zero_test is not None and zero_test(slot, o.weight, c):
                return SoftVerdict(True, False, delta_y=dy)  # y_soft = t exactly: reject
            if c == 0:  # a hard tie: the soft side is reported, not required
                return SoftVerdict(True, None, delta_y=dy, undecided_at=[True])
            return SoftVerdict(False, None, delta_y=dy)
        slots = m.output_positions(self.n)
        W = o.weight
        WA, tol = self._read_arbs()
        dY: list[list[arb]] = []
        for p in slots:
            row = []
            for r in range(len(W)):
                acc = arb(0)
                if final_delta is not None:
                    for k, wa in enumerate(WA[r]):
                        if wa is not None:
                            acc += wa * final_delta[p, k]
                row.append(acc)
            dY.append(row)
        if isinstance(o, ArgmaxOutput):
            labels: list[str | None] = []
            decided = True
            und_at: list[bool] = []
            hard_labels = self._hard_decisions[at]
            # the hard rows as numerators over vals.den > 0: the same order and ties as the
            # Fractions, and arb(fmpq(x, den)) is to_arb's ball (fmpq is canonical)
            den = vals.den
            nums = vals.num[b].tolist()
            for pi in range(len(slots)):
                und_at.append(False)
                hard_row = nums[pi]
                dys = dY[pi]
                if all(x.is_zero() for x in dys):
                    best = max(hard_row)
                    win = [i for i, v in enumerate(hard_row) if v == best]
                    labels.append(o.labels[win[0]] if len(win) == 1 else None)
                    continue
                soft_row = [arb(fmpq(hv, den)) + dv for hv, dv in zip(hard_row, dys, strict=True)]
                cands = [
                    i
                    for i, si in enumerate(soft_row)
                    if not any(sj > si for j, sj in enumerate(soft_row) if j != i)
                ]
                if len(cands) == 1:
                    labels.append(o.labels[cands[0]])
                    continue
                labels.append(None)
                tied = zero_test is not None and all(
                    zero_test(
                        slots[pi],
                        [x - y for x, y in zip(W[i], W[j], strict=True)],
                        Fraction(hard_row[i] - hard_row[j], den),
                    )
                    for i in cands
                    for j in cands
                    if i < j
                )
                if not tied:
                    und_at[pi] = True
                    if hard_labels[pi] is not None:
                        decided = False
            return SoftVerdict(decided, labels, delta_y=dY, undecided_at=und_at)
        # value output: within tolerance of hard?
        assert tol is not None
        within: bool | None = True
        for row in dY:
            for x in row:
                if x.abs_upper() <= tol:
                    continue
                if x.abs_lower() > tol:
                    within = False
                elif within is True:
                    within = None
        return SoftVerdict(within is not None, None, within_tol=within, delta_y=dY)

    def add_soft(
        self,
        hb: HardBatch,
        b: int,
        bounds: list[tuple[arb, arb, int]],
        verdict: SoftVerdict,
        prec: int,
    ) -> None:
        """Fold in word b's certified errors (per layer: lower, upper, row) and verdict."""
        self.soft_done = True
        self.max_prec = max(self.max_prec, prec)
        m = self.model
        rank = self._rank(b)
        for li, (lo, hi, row) in enumerate(bounds):
            rec = self.errors[li]
            if lo > rec.lower:
                rec.lower = lo
            if rec.witness is None or hi > rec.upper or (hi == rec.upper and rank < rec.rank):
                if hi > rec.upper:
                    rec.upper = hi
                rec.witness = position_witness_data(hb.words[b], spec_position(m, row))
                rec.rank = rank
        self._soft_decision(hb, b, verdict)

    def error_lower_floats(self) -> list[float]:
        """Each layer's reported lower error end so far, as a float rounded down (≤ it)."""
        out = []
        for rec in self.errors:
            m, e = rec.lower.mid().man_exp()
            m, e = int(m), int(e)
            if m <= 0 or e + m.bit_length() < -1070:
                out.append(0.0)
            elif e + m.bit_length() > 1020:
                out.append(float(np.finfo(np.float64).max))
            else:
                f = float(Fraction(m) * Fraction(2) ** e)  # nearest: step down if above
                out.append(
                    f
                    if Fraction(f) <= Fraction(m) * Fraction(2) ** e
                    else float(np.nextafter(f, 0))
                )
        return out

    def add_soft_float(self, hb: HardBatch, fb: Any, use: np.ndarray) -> None:
        """Fold in the words ``use`` of a batch settled by the float filter, vectorised.

        ``fb`` is a :class:`exactattn.engine.cascade.batch.FloatBatch`: per word and layer,
        certified float64 ends of max |δ| (exact dyadics) and the row of the upper end, plus the
        soft read-out. Per-layer maxima and their first witnesses are found with numpy; only
        the decisions go through the per-word path (which is cheap).
        """
        idx = np.flatnonzero(use)
        if idx.size == 0:
            return
        self.soft_done = True
        m = self.model
        for li, rec in enumerate(self.errors):
            lo = fb.err_lo[idx, li]
            hi = fb.err_hi[idx, li]
            lo_max = arb(float(lo.max()))
            if lo_max > rec.lower:
                rec.lower = lo_max
            top = hi.max()
            # the witness rule (docs/model-format.md): the first word, in rank order, whose
            # enclosure reaches the largest upper end; float and arb enclosures differ in
            # width, so the two paths may name different words within that width
            first = int(idx[int(np.argmax(hi == top))])
            top_a = arb(float(top))
            rank = self._rank(first)
            if rec.witness is None or top_a > rec.upper or (top_a == rec.upper and rank < rec.rank):
                if top_a > rec.upper:
                    rec.upper = top_a
                rec.witness = position_witness_data(
                    hb.words[first], spec_position(m, int(fb.err_row[first, li]))
                )
                rec.rank = rank
        o = m.output
        if isinstance(o, AcceptOutput) and fb.accept is not None:
            # a decided word that agrees with its hard decision, has no hard tie and agrees
            # with the reference changes nothing in _soft_decision: look only at the others
            acc = fb.accept[idx]
            hard = np.array(self._hard_decisions, dtype=bool)[idx]
            plain = np.ones(len(self._hard_decisions), dtype=bool)
            plain[list(self._tie_at)] = False
            plain = plain[idx]
            exp = [self._expected[b] for b in idx.tolist()]
            ref_ok = np.array(
                [e is None or bool(e) == bool(a) for e, a in zip(exp, acc.tolist(), strict=True)]
            )
            idx = idx[~(plain & (acc == hard) & ref_ok)]
        elif isinstance(o, ArgmaxOutput) and fb.labels is not None:
            # the same for labels: no hard tie, each label the hard one where that is decided
            # and the expected one where the reference has one (no disagreement, no mismatch)
            names = o.labels
            rows = fb.labels[idx].tolist()
            keep = []
            hard_all = self._hard_decisions
            for b, row in zip(idx.tolist(), rows, strict=True):
                lab = [names[k] if k >= 0 else None for k in row]
                if lab == hard_all[b] and b not in self._tie_at:
                    # the hard labels everywhere (none tied): only the reference can object
                    exp = self._expected[b]
                    if exp is None or lab == exp:
                        continue
                exp = self._expected[b]
                if (
                    b in self._tie_at
                    or any(
                        h is not None and s != h
                        for s, h in zip(lab, self._hard_decisions[b], strict=True)
                    )
                    or (
                        exp is not None
                        and any(e is not None and s != e for s, e in zip(lab, exp, strict=True))
                    )
                ):
                    keep.append(b)
            idx = np.array(keep, dtype=np.intp)
        for b in idx.tolist():
            if isinstance(o, AcceptOutput):
                v = SoftVerdict(True, bool(fb.accept[b]))
            elif isinstance(o, ArgmaxOutput):
                labels = [o.labels[k] if k >= 0 else None for k in fb.labels[b].tolist()]
                v = SoftVerdict(True, labels, undecided_at=[False] * len(labels))
            else:
                v = SoftVerdict(True, None, within_tol=bool(fb.within_tol[b]))
            self._soft_decision(hb, b, v)

    def _soft_decision(self, hb: HardBatch, b: int, verdict: SoftVerdict) -> None:
        word = list(hb.words[b])
        rank = self._rank(b)
        hard = self._hard_decisions[b]
        o = self.model.output
        tied = self._tie_at.get(b, [])
        if tied:
            self._note_ties(hb, b, self._expected[b], verdict)
        if not verdict.decided:
            self.undecided += 1
            self.first_undecided = first_of(self.first_undecided, Witness((rank,), word))
        elif isinstance(o, ValueOutput):
            if verdict.within_tol is False:
                self._disagree(rank, word, "within tolerance", "outside tolerance")
        elif isinstance(o, AcceptOutput):
            if not tied and verdict.value != hard:
                self._disagree(rank, word, hard, verdict.value)
        elif any(h is not None and s != h for h, s in zip(hard, verdict.value, strict=True)):
            self._disagree(rank, word, hard, verdict.value)
        exp = self._expected[b]
        if self.oracle is not None and exp is not None:
            ok = self._matches_soft(b, exp, verdict)
            if ok is False:
                self.ref = replace(
                    self.ref,
                    soft=(self.ref.soft or 0) + 1,
                    first=first_of(
                        self.ref.first,
                        Witness(
                            (1, rank),
                            mismatch_witness_data(
                                word, "soft", jsonable(exp), jsonable(verdict.value)
                            ),
                        ),
                    ),
                )

    def _disagree(self, rank: int, word: list[str], hard: Any, soft: Any) -> None:
        self.disagreements += 1
        self.first_disagreement = first_of(
            self.first_disagreement,
            Witness((rank,), disagreement_data(word, jsonable(hard), jsonable(soft))),
        )

    def _matches_soft(self, b: int, exp: Any, v: SoftVerdict) -> bool | None:
        o = self.model.output
        if isinstance(o, AcceptOutput):
            if not v.decided or v.value is None:
                return None
            return bool(v.value) == exp
        if isinstance(o, ArgmaxOutput):
            ok: bool | None = True
            for p, (g, e) in enumerate(zip(v.value, exp, strict=True)):
                if e is None:
                    continue
                if g is None and v.undecided_at and v.undecided_at[p]:
                    ok = None if ok else ok
                    continue
                if g != e:
                    ok = False
            return ok
        vals = self._hard_out.values
        den = vals.den
        tol = self._read_arbs()[1]
        ok = True
        rows = vals.num[b].tolist()
        for p, e in enumerate(exp):
            if e is None:
                continue
            row = rows[p]
            for r, ev in enumerate(e):
                # to_arb(num/den − ev): fmpq is canonical, so the same ball
                q = fmpq(row[r] * ev.denominator - ev.numerator * den, den * ev.denominator)
                diff = arb(q) + v.delta_y[p][r]
                if diff.abs_upper() <= tol:
                    continue
                if diff.abs_lower() > tol:
                    ok = False
                elif ok:
                    ok = None
        return ok

    # -- result ----------------------------------------------------------------------
    def to_record(
        self,
        tau: arb | None,
        layer_kinds: list[str],
        head_taus: dict[tuple[int, int], Interval],
    ) -> LengthRecord:
        """The record of the inputs seen (see :mod:`exactattn.results`)."""
        layers = []
        for li, kind in enumerate(layer_kinds):
            err = None
            if self.soft_done:
                st = self.errors[li]
                err = ErrorRecord(
                    point_lower(st.lower),  # at the enclosure's precision: ε > 1 stays > 1
                    point_upper(st.upper) if st.upper.is_finite() else None,
                    Witness((st.rank,), st.witness) if st.witness is not None else None,
                )
            heads = None
            if kind == "attention":
                heads = tuple(
                    HeadRecord(h2, rec.value, rec.max_nontop, rec.max_top, head_taus.get((l2, h2)))
                    for (l2, h2), rec in sorted(self.head_gaps.items())
                    if l2 == li
                )
            layers.append(LayerRecord(li, kind, self.activation_max[li], err, heads))
        soft = self.soft_done
        has_ties = isinstance(self.model.output, (AcceptOutput, ArgmaxOutput))
        return LengthRecord(
            n=self.n,
            inputs=self.inputs,
            soft=soft,
            x_max=self.x_max,
            gamma=self.gap.value,
            gamma_witness=Witness(self.gap.key, self.gap.witness) if self.gap.witness else None,
            tau=_interval(tau) if tau is not None else None,
            layers=tuple(layers),
            disagreements=self.disagreements if soft else None,
            first_disagreement=self.first_disagreement,
            undecided=self.undecided if soft else None,
            first_undecided=self.first_undecided,
            min_margin=self.min_margin,
            accepted=self.accepted if isinstance(self.model.output, AcceptOutput) else None,
            reference=(
                replace(self.ref, soft=self.ref.soft if soft else None)
                if self.oracle is not None
                else None
            ),
            hard_ties=self.ties if has_ties else None,
            precision_bits=self.max_prec if soft else None,
            float_settled=self.float_settled if soft else None,
            chain=self.chain.stats if self.chain is not None else None,
        )


def _gap_part(
    s: np.ndarray,
    top: np.ndarray,
    visible: np.ndarray,
    step: int,
    row0: int,
    rowmax: np.ndarray | None = None,
) -> tuple[int, int, tuple[int, int, int, int] | None]:
    """Score gaps of a block of query rows (word b of the block is word b·step of the batch,
    row i is row0 + i): the largest number of non-top and of top keys, and the smallest gap
    numerator with its first (word, query, key) in row-major order (None: no gap here).

    ``rowmax``: each row's largest visible score (the trace's, from the hard meaning), which
    lets int64 scores take the row-wise route of :func:`_gap_rows`."""
    tops = row_counts(top)
    # top ⊆ visible (the argmax set within V(i)): the non-top visible keys of a row are its
    # visible keys minus its top keys
    cand_counts = visible.sum(axis=1, dtype=np.int64)[None, :] - tops
    nontop = int(cand_counts.max()) if cand_counts.size else 0
    ntop = int(tops.max()) if tops.size else 0
    if nontop <= 0:
        return nontop, ntop, None
    cand = np.greater(visible[None], top)  # visible & ~top, one pass
    if s.dtype != object and rowmax is not None:
        found = _gap_rows(s, cand, cand_counts > 0, rowmax)
        if found is not None:
            num, b, i, j = found
            return nontop, ntop, (num, b * step, i + row0, j)
    if s.dtype == object:
        big = max(abs(int(s.max())), abs(int(s.min()))) * 2 + 1
        topmax = np.where(top, s, -big).max(axis=2, keepdims=True)
        diff = np.where(cand, topmax - s, 2 * big + 1)
    else:
        lo = np.iinfo(np.int64).min
        topmax = np.where(top, s, lo).max(axis=2, keepdims=True)
        # differences of int64 scores may overflow int64: use Python ints when large
        if int(np.abs(s).max()) < 2**61:
            diff = np.where(cand, topmax - s, np.iinfo(np.int64).max)
        else:
            so = s.astype(object)
            to = np.where(top, so, -(2**64)).max(axis=2, keepdims=True)
            diff = np.where(cand, to - so, 2**66)
    flat = int(np.argmin(diff.reshape(-1)))
    b, i, j = np.unravel_index(flat, diff.shape)
    return nontop, ntop, (int(diff[b, i, j]), int(b) * step, int(i) + row0, int(j))


def _gap_rows(
    s: np.ndarray, cand: np.ndarray, has: np.ndarray, rowmax: np.ndarray
) -> tuple[int, int, int, int] | None:
    """The smallest gap rowmax − s over the keys ``cand`` (visible, not top) of int64 scores
    and its first (word, query, key) in row-major order, row by row: a row's smallest gap is
    its top score minus its largest non-top score, the first row attaining the minimum is the
    argmin's row, and its first key with that score the argmin's key — the element-wise
    argmin's answer without the (N, R, T) difference array. None when a difference might
    not fit int64 (then the element-wise route, with Python ints if needed)."""
    lo = np.iinfo(np.int64).min
    sc = np.where(cand, s, lo)
    second = sc[..., 0].copy()
    for j in range(1, sc.shape[-1]):
        np.maximum(second, sc[..., j], out=second)
    top_h, second_h = rowmax[has], second[has]
    if not top_h.size:
        return None
    if max(int(np.abs(top_h).max()), int(np.abs(second_h).max())) >= 2**61:
        return None
    gap = np.where(has, rowmax - np.where(has, second, 0), np.iinfo(np.int64).max)
    flat = int(np.argmin(gap.reshape(-1)))
    b, i = np.unravel_index(flat, gap.shape)
    b, i = int(b), int(i)
    j = int(np.flatnonzero(sc[b, i] == second[b, i])[0])
    return int(gap[b, i]), b, i, j


def _threshold_diff(vals: Any, t: Fraction) -> np.ndarray:
    """Per word, the numerator of y − t over den·q (t = p/q): num·q − p·den. In int64 when
    every value provably fits (the same integers), else in Python ints."""
    num = vals.num
    if num.dtype == np.int64:
        if vals.bound() * t.denominator + abs(t.numerator) * vals.den < INT64_SAFE:
            return num * np.int64(t.denominator) - np.int64(t.numerator * vals.den)
    num = num if num.dtype == object else num.astype(object)
    return num * t.denominator - t.numerator * vals.den


def _interval(x: arb) -> Interval:
    return Interval(arb(x.lower()), arb(x.upper()))


def jsonable(x: Any) -> Any:
    if isinstance(x, Fraction):
        return frac_str(x)
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


__all__ = ["LengthAccumulator", "SoftVerdict", "delta_bounds", "tight"]
