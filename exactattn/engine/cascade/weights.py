"""A model's weights for the float tiers: sparse float rows, and the linear maps that apply them.

Converted once per compiled model (:func:`float_weights`): every nonzero weight as a float
within u of the exact rational (the sums' allowance ``(K + 2)·SUM_U`` covers it), checked to
lie in [2^-100, 2^100] (``FloatWeights.ok``; otherwise no word is settled), and each
feed-forward layer's weights also as integer rows (:class:`IntFFN`) for the exact linear
tracking of :func:`exactattn.engine.cascade.ffn.ffn_linear`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.engine.cascade.interval import (
    MR,
    SUM_U,
    TINY,
    WEIGHT_MAX,
    WEIGHT_MIN,
    Cols,
    add,
    guard,
    stack_floats,
)
from exactattn.engine.hard import CompiledFFN, CompiledModel
from exactattn.engine.ratarray import RatArray
from exactattn.model import AcceptOutput

Sparse = list[list[tuple[int, float]]]  # per output row: (input column, weight)


def _sparse(w: RatArray) -> tuple[Sparse, bool]:
    """Nonzero weights per output row as floats; False when one is outside the safe range."""
    rows: Sparse = []
    ok = True
    for a in range(w.shape[0]):
        row = []
        for c in range(w.shape[1]):
            v = int(w.num[a, c])
            if v:
                f = float(Fraction(v, w.den))
                if not WEIGHT_MIN <= abs(f) <= WEIGHT_MAX:
                    ok = False
                row.append((c, f))
        rows.append(row)
    return rows, ok


def lin(cols: Cols, rows: Sparse) -> Cols:
    """out[a] = Σ_c W[a, c]·cols[c], fixed order; absent columns stay absent.

    Two or more output rows are computed at once (stacked columns; step j adds every
    row's j-th term): the same elementwise operations, so the same bits (a weight ±1
    multiplies instead of copying or negating: equal values; only a nan's sign could differ,
    and no result reads it)."""
    if not cols:
        return {}
    k = (len(cols) + 3) * SUM_U  # ≥ (K + 1)·u for the sum, + u for each float weight
    plan = lin_plan(cols, rows)
    if len(plan) >= 2:
        m, r = lin_stack(cols, plan, k)
        return {a: (m[i], r[i]) for i, (a, _) in enumerate(plan)}
    R: dict[int, np.ndarray] = {}
    out: Cols = {}
    for a, terms in plan:
        m = r = None
        fresh = False  # m, r are arrays of our own (may be added to in place)
        for c, w in terms:
            cm, cr = cols[c]
            if c not in R:
                R[c] = cr + np.abs(cm) * k
            if w == 1.0:
                tm, tr = cm, R[c]
            elif w == -1.0:
                tm, tr = -cm, R[c]
            else:
                tm, tr = cm * w, R[c] * abs(w)
            if m is None:
                m, r = tm, tr
            elif fresh:
                m += tm
                r += tr
            else:
                m, r, fresh = m + tm, r + tr, True
        assert m is not None and r is not None
        r = r * (1 + k)
        out[a] = (m, guard(m, np.maximum(r, np.minimum(r * 2.0**300, TINY))))
    return out


LinPlan = list[tuple[int, list[tuple[int, float]]]]  # (output row, its terms (column, w))


def lin_plan(cols: Cols, rows: Sparse) -> LinPlan:
    """The output rows :func:`lin` computes, with their terms on the columns present."""
    plan = []
    for a, row in enumerate(rows):
        terms = [(c, w) for c, w in row if c in cols]
        if terms:
            plan.append((a, terms))
    return plan


def lin_stack(cols: Cols, plan: LinPlan, k: float) -> MR:
    """:func:`lin` for many output rows at once, stacked in plan order (see there)."""
    used, steps = _lin_steps(plan)
    Cm = stack_floats([cols[c][0] for c in used])
    Cr = stack_floats([cols[c][1] for c in used])
    Rc = Cr + np.abs(Cm) * k
    extra = (1,) * (Cm.ndim - 1)
    m = r = None
    for sel, ci, w, aw in steps:
        w = w.reshape((-1,) + extra)
        aw = aw.reshape((-1,) + extra)
        if ci is None:  # every stacked column in order: no gather (the same elements)
            tm, tr = Cm * w, Rc * aw
        else:
            tm, tr = Cm[ci] * w, Rc[ci] * aw
        if m is None or r is None:  # j = 0: every row has a first term
            m, r = tm, tr
        elif sel is None:  # every row has a j-th term
            m += tm
            r += tr
        else:
            m[sel] = m[sel] + tm
            r[sel] = r[sel] + tr
    assert m is not None and r is not None
    r *= 1 + k
    return m, guard(m, np.maximum(r, np.minimum(r * 2.0**300, TINY)))


_LIN_STEPS: dict[tuple[Any, ...], tuple[list[int], list[Any]]] = {}


def _lin_steps(plan: LinPlan) -> tuple[list[int], list[Any]]:
    """The columns :func:`lin_stack` stacks and, per step j, the rows with a j-th term
    (None: all), their stacked columns (None: all, in order) and weights |w|, memoised by
    the plan's value (a pure function of it: never stale; cleared beyond 256 plans)."""
    key = tuple((a, tuple(t)) for a, t in plan)
    got = _LIN_STEPS.get(key)
    if got is None:
        if len(_LIN_STEPS) > 256:
            _LIN_STEPS.clear()
        used = sorted({c for _, terms in plan for c, _ in terms})
        pos = {c: i for i, c in enumerate(used)}
        steps: list[Any] = []
        for j in range(max(len(t) for _, t in plan)):
            sel = [i for i, (_, t) in enumerate(plan) if len(t) > j]
            ci = [pos[plan[i][1][j][0]] for i in sel]
            w = np.array([plan[i][1][j][1] for i in sel])
            aw = np.abs(w)
            w.flags.writeable = False
            aw.flags.writeable = False
            steps.append(
                (
                    None if len(sel) == len(plan) else sel,
                    None if ci == list(range(len(used))) else ci,
                    w,
                    aw,
                )
            )
        got = _LIN_STEPS[key] = (used, steps)
    return got


def add_cols(a: Cols, b: Cols) -> Cols:
    out = dict(a)
    for c, v in b.items():
        out[c] = add(out[c], v) if c in out else v
    return out


class IntFFN:
    """A feed-forward layer's weights as integer rows, for exact linear tracking.

    ``ok`` is False when a coefficient of the composed linear map could reach 2^52
    (then the generic column path is used).
    """

    def __init__(self, layer: CompiledFFN) -> None:
        self.hidden: list[tuple[list[list[tuple[int, int]]], int]] = []
        self.ok = True
        bound = 1  # bound of |numerator| of any coefficient so far (den = product of dens)
        for w, _b in layer.hidden:
            rows = [
                [(c, int(w.num[h, c])) for c in range(w.shape[1]) if w.num[h, c]]
                for h in range(w.shape[0])
            ]
            self.hidden.append((rows, int(w.den)))
            width = max((sum(abs(v) for _, v in r) for r in rows), default=0)
            bound *= max(width, 1)
        wo = layer.out[0]
        self.out = [
            [(c, int(wo.num[a, c])) for c in range(wo.shape[1]) if wo.num[a, c]]
            for a in range(wo.shape[0])
        ]
        self.out_den = int(wo.den)
        # the first hidden layer's integer combinations depend only on which δ columns are
        # present (ffn_linear): computed once per set of columns, per model
        self.plans: dict[tuple[Any, ...], Any] = {}
        den = self.out_den
        for _, dn in self.hidden:
            den *= dn
        width = max((sum(abs(v) for _, v in r) for r in self.out), default=0)
        if bound * max(width, 1) + den >= 2**52 or den >= 2**52:
            self.ok = False


class FloatWeights:
    """A model's weights as sparse float rows (converted once per model)."""

    def __init__(self, cm: CompiledModel) -> None:
        self.ok = True
        self.layers: list[Any] = []
        for layer in cm.layers:
            if isinstance(layer, list):
                heads = []
                for ch in layer:
                    h = {}
                    for name in ("Q", "K", "V", "O"):
                        ra = getattr(ch, name)
                        if ra is None:
                            h[name] = None
                            continue
                        h[name], ok = _sparse(ra)
                        self.ok &= ok
                    heads.append(h)
                self.layers.append(heads)
            else:
                assert isinstance(layer, CompiledFFN)
                hidden = []
                for w, _b in layer.hidden:
                    rows, ok = _sparse(w)
                    self.ok &= ok
                    hidden.append(rows)
                rows, ok = _sparse(layer.out[0])
                self.ok &= ok
                self.layers.append((hidden, rows, IntFFN(layer)))
        out = cm.model.output
        if isinstance(out, AcceptOutput):
            W = RatArray.from_fractions([list(out.weight)])
        else:
            W = RatArray.from_fractions(out.weight)
        self.out, ok = _sparse(W)
        self.ok &= ok


_CACHE: dict[int, tuple[CompiledModel, FloatWeights]] = {}


def float_weights(cm: CompiledModel) -> FloatWeights:
    got = _CACHE.get(id(cm))
    if got is None or got[0] is not cm:
        got = _CACHE[id(cm)] = (cm, FloatWeights(cm))
    return got[1]
