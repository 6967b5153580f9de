"""One input's soft meaning, certified: precision rises until everything reported is decided.

The soft evaluation itself is :mod:`exactattn.engine.soft` (hard + δ in arb balls); this module
chooses the precision (``flint.ctx.workprec``), asks :mod:`exactattn.engine.measure` for the
read-out verdict, and uses :mod:`exactattn.engine.exactzero` for read-outs that sit exactly on a
threshold, which no precision can settle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb, arb_mat, ctx

from exactattn.engine import exactzero
from exactattn.engine.hard import CompiledModel, HardBatch
from exactattn.engine.measure import LengthAccumulator, SoftVerdict, delta_bounds, tight
from exactattn.engine.soft import WeightCache, run_soft
from exactattn.engine.temperature import BASE_PREC, Temperatures

MAX_PREC = 4096


@dataclass
class SoftResult:
    deltas: list[arb_mat | None]
    verdict: SoftVerdict
    prec: int
    alphas: Any = None
    bounds: list[tuple[arb, arb, int]] | None = None  # per layer: max|δ| lower, upper, row


def certify_word(
    cm: CompiledModel,
    hb: HardBatch,
    b: int,
    acc: LengthAccumulator,
    temps: Temperatures,
    weights: WeightCache,
    base_prec: int = BASE_PREC,
    max_prec: int = MAX_PREC,
    keep_alphas: bool = False,
    at: int | None = None,
) -> SoftResult:
    """Soft meaning of word b; precision doubles until everything reported is decided.
    ``at``: word b's index in the accumulator's batch when ``hb`` is a sub-batch of it."""
    prec = base_prec
    n = hb.n
    while True:
        taus = temps.at(n, prec)
        with ctx.workprec(prec):
            st = run_soft(cm, hb, b, taus, weights, keep_alphas=keep_alphas)
            final = st.deltas[-1] if st.deltas else None
            verdict = acc.soft_verdict(hb, b, final, zero_test(cm, hb, b, st, temps), at)
            ok = verdict.decided
            bnds = [delta_bounds(d) for d in st.deltas]
            if ok:
                for li, (lo, hi, _) in enumerate(bnds):
                    if not tight(lo, hi):
                        ok = False
                        break
                    if li < len(st.deltas) - 1 and not (hi <= 1 or lo > 1):
                        ok = False
                        break
        if ok or prec >= max_prec:
            return SoftResult(st.deltas, verdict, prec, st.alphas, bnds)
        prec = min(prec * 2, max_prec)


def zero_test(cm: CompiledModel, hb: HardBatch, b: int, st: Any, temps: Temperatures) -> Any:
    """An exact equality test for the read-out, when the model's shape allows one."""
    if not exactzero.applicable(hb, st.deltas):
        return None
    li = len(hb.layers) - 1
    heads = cm.layers[li]
    assert isinstance(heads, list)
    taus = temps.rational(li, hb.n, len(heads))
    if taus is None:
        return None
    traces = hb.layers[li].heads

    def test(slot: int, a: Sequence[Fraction], K: Fraction) -> bool:
        return exactzero.readout_is_exactly(heads, traces, taus, b, slot, a, K)

    return test
