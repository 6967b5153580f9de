"""The ``claims`` a compiled RASP model carries (proofs/claims.md, Proposition R).

``exactattn certify`` needs, for every length n, a lower bound on γ(n), an upper bound on the
embedding's largest entry x_max(n), a lower bound on the read-out margin μ(n) and, because
B-RASP attention compiles to leftmost/rightmost heads, that each such head's top is unique
(H3). The compiler knows all four by construction:

* γ(n): the minimum of its per-head bounds (``gap.py``; Lemmas R1–R4 of proofs/rasp-gaps.md);
  a model whose heads have no lower score at all gets the vacuous bound 1;
* x_max(n): from the range of every embedding coordinate it allocates over positions 0..n
  (``EMBED_BOUNDS``; token coordinates are 0/1): the largest is ``pos_sq`` = i² ≤ n²;
* μ(n): the read-out is an affine form of coordinates whose hard value is a Boolean 0/1
  (Lemmas R1, R5): 1/2 for ``accept`` (threshold 1/2), 1 for a Boolean ``output`` (argmax of
  (1 − y, y)); an integer ``output`` is a ``value`` read-out, which has no margin;
* H3: every select head has all its scores distinct (Lemma R1), so its top is unique;
* every layer's activations (optional claim ``activation_upper``): every coordinate the compiler
  allocates has a range a·n + b it proves by interval analysis (or holds a square ≤ n²), and a
  coordinate is written once into a zero slot, so max_ℓ ‖x^(ℓ)‖∞ ≤ max(n², a*·n + b*).

The bounded encoding (``--embedding bounded``; Proposition RB of proofs/claims.md) has the
same five claims with constants where the unbounded one has powers of n: x_max(n) ≤ 1 (every
position expression lies in [0, 1]) and every activation ≤ max(1, max over integer coordinates
of max(a, b)), since an integer k with |k| ≤ a·n + b is held as k/(n+1) and
(a·n + b)/(n+1) ≤ max(a, b). It does not carry Theorem S's claims (``chain_claims``,
Proposition R(f)): those are proved for the unbounded encoding only, so a bounded model is
certified by the global chain.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from exactattn.model.claimed import UNIQUE_TOP
from exactattn.model.expr import parse_expression

__all__ = [
    "BOUNDED_EMBED_BOUNDS",
    "EMBED_BOUNDS",
    "PROFILES",
    "PROOF",
    "activation_bound",
    "activation_bound_scaled",
    "chain_claims",
    "claims_for",
    "x_max_bound",
]

Range = tuple[tuple[int, int], tuple[int, int]]  # ((l0, l1), (h0, h1)): l0·n + l1 ≤ v ≤ h0·n + h1

PROOF = "proofs/claims.md"

#: the position expressions the compiler embeds (in i, n; positions i = 0 (BOS) .. n) and an
#: upper bound on |value| for every n ≥ 1 (Proposition R(b), checked by proofs/check_claims.py)
EMBED_BOUNDS: dict[str, str] = {
    "i": "n",
    "i^2": "n^2",
    "1/(i+1)": "1",
    "n": "n",
    "i/(n+1)": "1",
}
#: every bound above is at most this one for every n ≥ 1 (1 ≤ n ≤ n²)
X_MAX = "n^2"
#: the bounded encoding's position expressions, each in [0, 1] at every i = 0..n, n ≥ 1
#: (Proposition RB(b))
BOUNDED_EMBED_BOUNDS: dict[str, str] = {
    "i/(n+1)": "1",
    "i^2/(n+1)^2": "1",
    "1/(i+1)": "1",
    "n/(n+1)": "1",
    "1/(n+1)": "1",
    "1/(n+1)^2": "1",
}


def x_max_bound(position_exprs: list[str]) -> str | None:
    """The x_max(n) claim for an embedding with these position expressions (tokens 0/1), or
    None when some expression is not one Proposition R(b) covers (then no claims)."""
    if all(e in BOUNDED_EMBED_BOUNDS for e in position_exprs):
        return "1"
    if any(e not in EMBED_BOUNDS for e in position_exprs):
        return None
    return X_MAX


def activation_bound(ranges: list[Range], squares: bool) -> str:
    """An upper bound on |entry| of every coordinate at every layer, as an expression in n.

    Each range gives |v| ≤ a·n + b with a = max(|l0|, |h0|), b = max(|l1|, |h1|), for n ≥ 1
    (Proposition R(e)); the bound is the maximum of these forms (and n² when a coordinate
    holds a square), leaving out a form another one dominates and, with squares, a form with
    a ≤ 2 and a + b ≤ 1, which is ≤ n² for every n ≥ 1.
    """
    forms = {(max(abs(l0), abs(h0)), max(abs(l1), abs(h1))) for (l0, l1), (h0, h1) in ranges}
    keep = sorted(
        f
        for f in forms
        if not any(g != f and g[0] >= f[0] and g[1] >= f[1] for g in forms)
        and not (squares and f[0] <= 2 and f[0] + f[1] <= 1)
    )
    texts = ["n^2"] if squares else []
    for a, b in keep:
        lin = "n" if a == 1 else f"{a}*n"
        texts.append(f"{lin} + {b}" if a and b else lin if a else str(b))
    if not texts:
        return "0"
    return texts[0] if len(texts) == 1 else f"max({', '.join(texts)})"


def activation_bound_scaled(ranges: list[Range]) -> str:
    """The bounded encoding's activation bound, a constant (Proposition RB(e)).

    ``ranges``: the integer coordinates' ranges l0·n + l1 ≤ k ≤ h0·n + h1; each holds k/(n+1)
    with |k/(n+1)| ≤ (a·n + b)/(n+1) ≤ max(a, b), a = max(|l0|, |h0|), b = max(|l1|, |h1|);
    every other coordinate (0/1, the embedding's fractions, shares, squares) lies in [0, 1].
    """
    top = max([1, *(max(abs(x) for pair in r for x in pair) for r in ranges)])
    return str(top)


def _statement(part: str, why: str, prop: str = "R") -> dict[str, str]:
    return {"file": PROOF, "statement": f"Proposition {prop}({part}): {why}"}


def claims_for(
    gap_bound: str,
    position_exprs: list[str],
    output_kind: str,
    unique_heads: bool,
    activation: str | None = None,
    *,
    bounded: bool = False,
) -> dict[str, Any] | None:
    """The ``claims`` object of a compiled model (None: a part is not covered by the proof).

    ``gap_bound``: the compiler's model bound (``"inf"`` when no head has a lower score);
    ``output_kind``: ``accept``, ``argmax`` (a Boolean per position) or ``value``;
    ``unique_heads``: the model has leftmost/rightmost (select) heads;
    ``activation``: the bound on every layer's activations (``activation_bound``), if known;
    ``bounded``: the bounded encoding (Proposition RB, Lemmas RB1–RB6).
    """
    x_max = x_max_bound(position_exprs)
    if x_max is None or bounded != (x_max == "1"):
        return None
    gamma = "1" if gap_bound == "inf" else gap_bound
    # the bound must be a positive expression in n (1/(n + 1)^k or 1)
    if parse_expression(gamma, ("n",)).eval_exact({"n": 1}) <= Fraction(0):
        return None
    prop, lem = ("RB", "RB") if bounded else ("R", "R")
    gaps = "Lemmas RB1–RB6" if bounded else "Lemmas R1–R4"
    out: dict[str, Any] = {
        "gamma_lower": {
            "expr": gamma,
            "justification": _statement("a", f"min over heads of {gaps}, rasp-gaps.md", prop),
        },
        "x_max_upper": {
            "expr": x_max,
            "justification": _statement("b", "embedding coordinates over positions 0..n", prop),
        },
    }
    margin = {"accept": "1/2", "argmax": "1"}.get(output_kind)
    if margin is not None:
        out["margin_lower"] = {
            "expr": margin,
            "justification": _statement("c", f"a Boolean read-out, Lemmas {lem}1 and R5", prop),
        }
    elif output_kind != "value":
        return None
    if activation is not None:
        out["activation_upper"] = {
            "expr": activation,
            "justification": _statement("e", "coordinate ranges by interval analysis", prop),
        }
    if unique_heads:
        out[UNIQUE_TOP] = {
            "justification": _statement("d", f"select scores are distinct, Lemma {lem}1", prop),
        }
    out["from_n"] = 1
    return out


# --------------------------------------------------------------------------- Theorem S

#: the score profile (gap, step, keys per rank) of each compiled primitive (Proposition R(f),
#: from Lemmas R1–R3 of proofs/rasp-gaps.md); count-mean heads have no lower score
PROFILES: dict[str, tuple[str, str, int]] = {
    "select": ("1/(n+1)", "1/(n+1)", 1),
    "count-lookup": ("1/(n+1)", "2/(n+1)", 2),
    "square-lookup": ("1", "2", 2),
}


def _lin(a: int, b: int) -> str:
    """a·n + b as an expression text."""
    if not a:
        return str(b)
    t = "n" if a == 1 else "-n" if a == -1 else f"{a}*n"
    return t if not b else f"{t} + {b}" if b > 0 else f"{t} - {-b}"


def chain_claims(
    coords: list[str],
    ranges: dict[str, Range],
    types: dict[str, str],
    squares: set[str],
    embedded: set[str],
    heads: list[tuple[int, int, str]],
) -> dict[str, Any]:
    """The claims of Theorem S (proofs/07-sharp-chain.md) for a compiled model (Proposition
    R(f) of proofs/claims.md): each coordinate's interval from the compiler's range analysis
    (an integer for Booleans and integers, [0, n²] for a square), widened to 0 for every
    coordinate a layer writes (its slot holds 0 before), ``one`` = 1; and each head's profile
    (``heads``: (layer, head, primitive))."""
    out: dict[str, Any] = {}
    for c in coords:
        if c == "one":
            out[c] = {"min": "1", "max": "1", "integer": True}
            continue
        if c in squares:
            lo, hi = "0", "n^2"
        else:
            (l0, l1), (h0, h1) = ranges[c]
            lo, hi = _lin(l0, l1), _lin(h0, h1)
            if c not in embedded:
                lo, hi = f"min({lo}, 0)", f"max({hi}, 0)"
        entry: dict[str, Any] = {"min": lo, "max": hi}
        if types.get(c) in ("bool", "int"):
            entry["integer"] = True
        out[c] = entry
    profiles = [
        {
            "layer": li,
            "head": hi,
            "gap": PROFILES[kind][0],
            "step": PROFILES[kind][1],
            "per_rank": PROFILES[kind][2],
            "unique": True,
        }
        for li, hi, kind in heads
        if kind in PROFILES
    ]
    return {
        "coordinate_ranges": {
            "ranges": out,
            "justification": _statement("f", "the compiler's coordinate ranges"),
        },
        "head_profiles": {
            "heads": profiles,
            "justification": _statement("f", "score profiles of Lemmas R1–R3, rasp-gaps.md"),
        },
    }
