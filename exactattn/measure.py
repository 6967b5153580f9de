"""Measurements for one length n, accumulated batch by batch.

Implements the spec's "Measured quantities": γ(n) with its witness, x_max(n), the
per-layer activation maximum, the per-layer certified error with witness, the
ε ≤ 1 invariant, decisions, margins and reference mismatches. Hard quantities are
exact Fractions; soft ones are arb endpoints, turned into outward-rounded
decimals only when the result is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, arb_mat, fmpq

from .hard import HardBatch, argmax_labels, read_output
from .model import AcceptOutput, ArgmaxOutput, Model, ValueOutput
from .numbers import arb_lower_str, arb_upper_str, frac_str, to_arb
from .reference import Oracle

TIGHT_REL = arb("1e-6")
ZERO_UPPER = arb("1e-40")


@dataclass
class GapRecord:
    value: Fraction | None = None
    witness: dict[str, Any] | None = None
    max_nontop: int = 0  # largest number of visible non-top keys of one query
    max_top: int = 0  # largest argmax set of one query (1: no ties at the top)


@dataclass
class ErrorRecord:
    lower: arb = field(default_factory=lambda: arb(0))
    upper: arb = field(default_factory=lambda: arb(0))
    witness: dict[str, Any] | None = None


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
class SoftVerdict:
    """The soft meaning's read-out for one word, decided or not."""

    decided: bool
    value: Any  # accept: bool; argmax: list of labels (None = tie); value: None
    within_tol: bool | None = None  # value outputs: |δy| ≤ tolerance (None = undecided)
    delta_y: Any = None


class LengthAccumulator:
    """Collects every measurement for one n across batches."""

    def __init__(self, model: Model, n: int, oracle: Oracle | None, n_layers: int) -> None:
        self.model = model
        self.n = n
        self.oracle = oracle
        self.inputs = 0
        self.x_max = Fraction(0)
        self.activation_max = [Fraction(0)] * n_layers
        self.gap = GapRecord()
        self.head_gaps: dict[tuple[int, int], GapRecord] = {}
        self.errors = [ErrorRecord() for _ in range(n_layers)]
        self.disagreements = 0
        self.first_disagreement: list[str] | None = None
        self.first_disagreement_detail: dict[str, Any] | None = None
        self.undecided = 0
        self.first_undecided: list[str] | None = None
        self.min_margin: Fraction | None = None
        self.ref_hard = 0
        self.ref_soft = 0
        self.ref_undefined = 0
        self.ref_compared = 0
        self.first_ref_mismatch: dict[str, Any] | None = None
        self.accepted = 0
        self.max_prec = 0
        self.soft_done = False
        # per batch, filled by add_hard, read by add_soft
        self._hard_out: Any = None

    # -- hard ----------------------------------------------------------------------
    def add_hard(self, hb: HardBatch) -> None:
        m = self.model
        N = len(hb.words)
        self.inputs += N
        self.x_max = max(self.x_max, hb.x0.max_abs())
        for li, lt in enumerate(hb.layers):
            self.activation_max[li] = max(self.activation_max[li], lt.x_out.max_abs())
            if lt.heads is None:
                continue
            for hi_, tr in enumerate(lt.heads):
                rec = self.head_gaps.setdefault((li, hi_), GapRecord())
                self._gap(hb, li, hi_, tr, rec)
                if rec.value is not None and (self.gap.value is None or rec.value < self.gap.value):
                    self.gap = GapRecord(rec.value, rec.witness)
        x_last = hb.activations[-1]
        out = read_output(m, x_last, self.n)
        self._hard_out = out
        self._hard_decisions = []
        o = m.output
        if isinstance(o, AcceptOutput):
            t = o.threshold
            for b in range(N):
                y = out.values.fraction(b)
                acc = y > t
                self.accepted += acc
                self._hard_decisions.append(acc)
                self._margin(abs(y - t))
        elif isinstance(o, ArgmaxOutput):
            labels, margins = argmax_labels(m, out.values)
            self._hard_decisions = labels
            for mg in margins:
                if mg is not None:
                    self._margin(mg)
        else:
            self._hard_decisions = [None] * N
        if self.oracle is not None:
            for b, w in enumerate(hb.words):
                exp = self.oracle.expected(w)
                if exp is None:
                    continue
                self.ref_compared += 1
                if not self._matches_hard(b, exp):
                    self.ref_hard += 1
                    if self.first_ref_mismatch is None:
                        self.first_ref_mismatch = {
                            "input": list(w),
                            "meaning": "hard",
                            "expected": _jsonable(exp),
                            "got": _jsonable(self._hard_repr(b)),
                        }

    def _gap(self, hb: HardBatch, li: int, hi_: int, tr: Any, rec: GapRecord) -> None:
        s = tr.scores.num
        if s.size == 0:
            return
        cand = tr.visible[None] & ~tr.top
        counts = cand.sum(axis=2)
        rec.max_nontop = max(rec.max_nontop, int(counts.max()) if counts.size else 0)
        tops = tr.top.sum(axis=2)
        rec.max_top = max(rec.max_top, int(tops.max()) if tops.size else 0)
        if not cand.any():
            return
        if s.dtype == object:
            big = max(abs(int(s.max())), abs(int(s.min()))) * 2 + 1
            topmax = np.where(tr.top, s, -big).max(axis=2, keepdims=True)
            diff = np.where(cand, topmax - s, 2 * big + 1)
        else:
            lo = np.iinfo(np.int64).min
            topmax = np.where(tr.top, s, lo).max(axis=2, keepdims=True)
            # differences of int64 scores may overflow int64: use Python ints when large
            if int(np.abs(s).max()) < 2**61:
                diff = np.where(cand, topmax - s, np.iinfo(np.int64).max)
            else:
                so = s.astype(object)
                to = np.where(tr.top, so, -(2**64)).max(axis=2, keepdims=True)
                diff = np.where(cand, to - so, 2**66)
        flat = int(np.argmin(diff.reshape(-1)))
        b, i, j = np.unravel_index(flat, diff.shape)
        g = Fraction(int(diff[b, i, j]), tr.scores.den)
        if rec.value is None or g < rec.value:
            top_key = int(np.argmax(tr.top[b, i]))
            m = self.model
            rec.value = g
            rec.witness = {
                "input": list(hb.words[b]),
                "layer": li,
                "head": hi_,
                "query": spec_position(m, int(i)),
                "top_key": spec_position(m, top_key),
                "other_key": spec_position(m, int(j)),
            }

    def _margin(self, mg: Fraction) -> None:
        if self.min_margin is None or mg < self.min_margin:
            self.min_margin = mg

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
        if isinstance(o, ArgmaxOutput):
            got = self._hard_decisions[b]
            ok = True
            for g, e in zip(got, exp, strict=True):
                if e is None:
                    self.ref_undefined += 1
                    continue
                ok &= g == e
            return ok
        vals = self._hard_out.values
        ok = True
        for p, e in enumerate(exp):
            if e is None:
                self.ref_undefined += 1
                continue
            row = [Fraction(int(x), vals.den) for x in vals.num[b, p]]
            ok &= tuple(row) == tuple(e)
        return ok

    # -- soft ----------------------------------------------------------------------
    def soft_verdict(
        self, hb: HardBatch, b: int, final_delta: arb_mat | None, zero_test: Any = None
    ) -> SoftVerdict:
        """The soft read-out of word b, certified, from the final δ.

        ``zero_test(slot, a, K)`` decides exactly whether K + a·δ[slot] = 0 (see
        :mod:`exactattn.exactzero`); it settles ties that no precision can.
        """
        m = self.model
        o = m.output
        vals = self._hard_out.values
        if isinstance(o, AcceptOutput):
            slot = m.accept_slot(self.n)
            y = vals.fraction(b)
            c = y - o.threshold
            if final_delta is None:
                return SoftVerdict(True, c > 0, delta_y=arb(0))
            dy = arb(0)
            for k, wk in enumerate(o.weight):
                if wk:
                    dy += to_arb(wk) * final_delta[slot, k]
            if dy.is_zero():
                return SoftVerdict(True, c > 0, delta_y=dy)
            val = to_arb(c) + dy
            if val > 0:
                return SoftVerdict(True, True, delta_y=dy)
            if val <= 0:
                return SoftVerdict(True, False, delta_y=dy)
            if zero_test is not None and zero_test(slot, o.weight, c):
                return SoftVerdict(True, False, delta_y=dy)  # y_soft = t exactly: reject
            return SoftVerdict(False, None, delta_y=dy)
        slots = m.output_positions(self.n)
        W = o.weight
        dY: list[list[arb]] = []
        for p in slots:
            row = []
            for r in range(len(W)):
                acc = arb(0)
                if final_delta is not None:
                    for k, wk in enumerate(W[r]):
                        if wk:
                            acc += to_arb(wk) * final_delta[p, k]
                row.append(acc)
            dY.append(row)
        if isinstance(o, ArgmaxOutput):
            labels: list[str | None] = []
            decided = True
            for pi in range(len(slots)):
                hard_row = [Fraction(int(x), vals.den) for x in vals.num[b, pi]]
                dys = dY[pi]
                if all(x.is_zero() for x in dys):
                    best = max(hard_row)
                    win = [i for i, v in enumerate(hard_row) if v == best]
                    labels.append(o.labels[win[0]] if len(win) == 1 else None)
                    continue
                soft_row = [to_arb(hv) + dv for hv, dv in zip(hard_row, dys, strict=True)]
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
                        hard_row[i] - hard_row[j],
                    )
                    for i in cands
                    for j in cands
                    if i < j
                )
                if not tied:
                    decided = False
            return SoftVerdict(decided, labels, delta_y=dY)
        # value output: within tolerance of hard?
        tol = to_arb(o.tolerance)
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
        word = list(hb.words[b])
        m = self.model
        for li, (lo, hi, row) in enumerate(bounds):
            rec = self.errors[li]
            if lo > rec.lower:
                rec.lower = lo
            if rec.witness is None or hi > rec.upper:
                if hi > rec.upper:
                    rec.upper = hi
                rec.witness = {"input": word, "position": spec_position(m, row)}
        hard = self._hard_decisions[b]
        o = m.output
        if not verdict.decided:
            self.undecided += 1
            if self.first_undecided is None:
                self.first_undecided = word
        elif isinstance(o, ValueOutput):
            if verdict.within_tol is False:
                self._disagree(word, "within tolerance", "outside tolerance")
        elif verdict.value != hard:
            self._disagree(word, hard, verdict.value)
        if self.oracle is not None:
            exp = self.oracle.expected(hb.words[b])
            if exp is not None:
                ok = self._matches_soft(b, exp, verdict)
                if ok is False:
                    self.ref_soft += 1
                    if self.first_ref_mismatch is None:
                        self.first_ref_mismatch = {
                            "input": word,
                            "meaning": "soft",
                            "expected": _jsonable(exp),
                            "got": _jsonable(verdict.value),
                        }

    def _disagree(self, word: list[str], hard: Any, soft: Any) -> None:
        self.disagreements += 1
        if self.first_disagreement is None:
            self.first_disagreement = word
            self.first_disagreement_detail = {"hard": _jsonable(hard), "soft": _jsonable(soft)}

    def _matches_soft(self, b: int, exp: Any, v: SoftVerdict) -> bool | None:
        o = self.model.output
        if isinstance(o, AcceptOutput):
            if not v.decided:
                return None
            return bool(v.value) == exp
        if isinstance(o, ArgmaxOutput):
            ok: bool | None = True
            for g, e in zip(v.value, exp, strict=True):
                if e is None:
                    continue
                if g is None and not v.decided:
                    ok = None if ok else ok
                    continue
                if g != e:
                    ok = False
            return ok
        vals = self._hard_out.values
        tol = to_arb(o.tolerance)
        ok = True
        for p, e in enumerate(exp):
            if e is None:
                continue
            for r, ev in enumerate(e):
                hv = Fraction(int(vals.num[b, p, r]), vals.den)
                diff = to_arb(hv - ev) + v.delta_y[p][r]
                if diff.abs_upper() <= tol:
                    continue
                if diff.abs_lower() > tol:
                    ok = False
                elif ok:
                    ok = None
        return ok

    # -- result ----------------------------------------------------------------------
    def invariant(self) -> str | None:
        if not self.soft_done:
            return None
        feeding = self.errors[:-1]
        if all(r.upper <= 1 for r in feeding):
            return "holds"
        if any(r.lower > 1 for r in feeding):
            return "fails"
        return "undecided"

    def to_json(self, tau: arb | None, layer_kinds: list[str], head_taus: dict) -> dict[str, Any]:
        m = self.model
        layers = []
        for li, kind in enumerate(layer_kinds):
            entry: dict[str, Any] = {
                "index": li,
                "kind": kind,
                "activation_max": frac_str(self.activation_max[li]),
            }
            if self.soft_done:
                rec = self.errors[li]
                entry["error"] = {
                    "lower": arb_lower_str(rec.lower),
                    "upper": arb_upper_str(rec.upper),
                }
                entry["error_witness"] = rec.witness
            else:
                entry["error"] = None
                entry["error_witness"] = None
            if kind == "attention":
                heads = []
                for (l2, h2), rec in sorted(self.head_gaps.items()):
                    if l2 != li:
                        continue
                    heads.append(
                        {
                            "index": h2,
                            "gamma": frac_str(rec.value) if rec.value is not None else None,
                            "max_nontop": rec.max_nontop,
                            "max_top": rec.max_top,
                            "tau": head_taus.get((l2, h2)),
                        }
                    )
                entry["heads"] = heads
            layers.append(entry)
        res: dict[str, Any] = {
            "n": self.n,
            "inputs": self.inputs,
            "gamma": frac_str(self.gap.value) if self.gap.value is not None else None,
            "gamma_witness": self.gap.witness,
            "x_max": frac_str(self.x_max),
            "tau": _interval(tau) if tau is not None else None,
            "layers": layers,
            "invariant": self.invariant(),
            "disagreements": self.disagreements if self.soft_done else None,
            "first_disagreement": self.first_disagreement,
            "first_disagreement_detail": self.first_disagreement_detail,
            "undecided": self.undecided if self.soft_done else None,
            "first_undecided": self.first_undecided,
            "min_margin": frac_str(self.min_margin) if self.min_margin is not None else None,
            "accepted": self.accepted if isinstance(m.output, AcceptOutput) else None,
            "reference_mismatches": (
                {"hard": self.ref_hard, "soft": self.ref_soft if self.soft_done else None}
                if self.oracle is not None
                else None
            ),
            "reference_compared": self.ref_compared if self.oracle is not None else None,
            "reference_undefined": self.ref_undefined if self.oracle is not None else None,
            "first_reference_mismatch": self.first_ref_mismatch,
            "precision_bits": self.max_prec if self.soft_done else None,
        }
        return res


def _interval(x: arb) -> dict[str, str]:
    return {"lower": arb_lower_str(x), "upper": arb_upper_str(x)}


def _jsonable(x: Any) -> Any:
    if isinstance(x, Fraction):
        return frac_str(x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


__all__ = ["LengthAccumulator", "SoftVerdict", "delta_bounds", "tight", "fmpq"]
