"""The compiler's lower bound on each head's gap γ(n), an exact expression in n.

One bound per compiled primitive (the lemmas, with their proofs, are in proofs/rasp-gaps.md
and checked by proofs/check_rasp_gaps.py). Positions are 0 (BOS) .. n; every value the
compiler stores is an exact integer (Booleans 0/1, counts in [0, n], keys in [−n, n]).

* ``select`` (B-RASP attention): score = (integer penalty, 0 on keys satisfying the
  predicate, ≤ −1 elsewhere) ± j/(n+1). Two keys differ either in the integer part (by ≥ 1,
  while the tie-break differs by ≤ n/(n+1)) or only in the tie-break (by ≥ 1/(n+1)):
  γ ≥ 1/(n+1).
* ``count-lookup`` (S-RASP prefix sum, integer read-back): score (c² − (c − j)²)/(i+1) over
  keys j ≤ i with the count c ∈ [0, i]: the runner-up is ≥ 1/(i+1) ≥ 1/(n+1) below.
* ``square-lookup`` (K² of an integer key |K| ≤ n): score a² − (a − j)² over j = 0..n,
  a = |K| ∈ [0, n], integers: γ ≥ 1.
* ``count-mean``: a zero query; every visible score ties, so the head constrains nothing.

``--embedding bounded`` (every integer k held as k/(n+1), positions as i/(n+1); Lemmas
RB1–RB6 of proofs/rasp-gaps.md) has its own table, ``PRIMITIVE_BOUND_BOUNDED``: the integer
levels of a score shrink by 1/(n+1)² wherever an integer enters squared, so the count lookup
and the select with an integer equality fall to 1/(n+1)³ (the paper's Θ(1/n³)), the square
lookup to 1/(n+1)², while a Boolean select and the new ``compare`` head (an integer
comparison, done by attention because a ReLU layer with n-free weights cannot magnify a
1/(n+1) step to a 0/1 one) keep 1/(n+1).
"""

from __future__ import annotations

from fractions import Fraction

from exactattn.model.expr import parse_expression

__all__ = ["PRIMITIVE_BOUND", "PRIMITIVE_BOUND_BOUNDED", "bound_at", "min_bound"]

PRIMITIVE_BOUND: dict[str, str | None] = {
    "select": "1/(n + 1)",
    "count-lookup": "1/(n + 1)",
    "square-lookup": "1",
    "count-mean": None,
}

#: the bounded encoding's bounds (Lemmas RB1–RB6): ``select-eq`` is a select head whose
#: ``where`` has an integer equality K[j] == Q[i]; ``compare`` an integer comparison head
PRIMITIVE_BOUND_BOUNDED: dict[str, str | None] = {
    "select": "1/(n + 1)",
    "select-eq": "1/(n + 1)^3",
    "count-lookup": "1/(n + 1)^3",
    "square-lookup": "1/(n + 1)^2",
    "compare": "1/(n + 1)",
    "count-mean": None,
}


def bound_at(expr: str | None, n: int) -> Fraction | None:
    """The bound's exact value at length n (None: no constraint, γ may be ∞)."""
    if expr is None or expr == "inf":
        return None
    return parse_expression(expr, ("n",)).eval_exact({"n": n})


def min_bound(bounds: list[str | None]) -> str:
    """The model's bound: the smallest of its heads' bounds (for every n ≥ 1)."""
    real = [b for b in bounds if b is not None]
    if not real:
        return "inf"
    # each bound is 1/(n + 1)^k, k = 0..3: ordered the same way at every n ≥ 1, so comparing
    # them at n = 1 and n = 2 decides
    return min(real, key=lambda b: (bound_at(b, 1), bound_at(b, 2)))


def _s(q: Fraction | None) -> str | None:
    if q is None:
        return None
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"
