"""Induction heads (basic and iterated) as compiled since/until formulas.

Task (Sanford, Hsu & Telgarsky's k-hop induction head): with 1-based positions,
``find(i)`` is the largest j with 2 ≤ j ≤ i and w_{j−1} = w_i — the position right after
the most recent earlier occurrence of the current token — or 0 if there is none, and
``find(0) = 0``. The output at i is w_{find^k(i)}, or the default label when
find^k(i) = 0.

Why compile it through LTL: "the token at find(i) satisfies G" is the since/until formula
``⋁_a a ∧ ((Y a ∧ G) ∨ (¬Y a ∧ (¬Y a S (Y a ∧ G))))`` (the latest position j ≤ i where
``Y a`` holds, with a = w_i, satisfies G). Iterating it k times from G = b gives one
formula per output label, and the LTL compiler's proved bounds (docs/constructions.md)
apply unchanged. The reference ``cases`` come from :func:`induction_labels`, a direct
implementation that shares nothing with the formulas.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from exactattn.constructions.ltl import SCHEMES, compile_formulas
from exactattn.constructions.ltl import claims as ltl_claims
from exactattn.logic.ltl import (
    MAX_FORMULA_DEPTH,
    And,
    Atom,
    Formula,
    Not,
    Or,
    Prev,
    Since,
    format_ltl,
    formula_depth,
)
from exactattn.model.provenance import stamp

MAX_CASES = 100_000
"""Most reference cases (every word up to max_n) a built model may list (docs/limits.md):
ten symbols at the default max_n = 8 asked for 10^8 cases and ran out of memory."""


def default_label(alphabet: Sequence[str]) -> str:
    """``"none"``, or a bracketed variant if the alphabet already uses it."""
    label = "none"
    while label in alphabet:
        label = f"<{label}>"
    return label


def induction_labels(word: Sequence[str], hops: int = 1, none: str = "none") -> list[str]:
    """The k-hop induction-head output at every position, by direct search."""

    def find(i: int) -> int:
        if i == 0:
            return 0
        for j in range(i, 1, -1):
            if word[j - 2] == word[i - 1]:
                return j
        return 0

    out = []
    for i in range(1, len(word) + 1):
        t = i
        for _ in range(hops):
            t = find(t)
        out.append(word[t - 1] if t else none)
    return out


def _or_all(fs: list[Formula]) -> Formula:
    out = fs[0]
    for f in fs[1:]:
        out = Or(out, f)
    return out


def hop_formula(g: Formula, alphabet: Sequence[str]) -> Formula:
    """``g`` holds at find(i) (and find(i) ≠ 0).

    ``⋁_a (a ∧ Y a ∧ g) ∨ (a ∧ ¬Y a ∧ (¬Y a S (Y a ∧ g)))``: the disjuncts exclude each
    other, and as one flat disjunction of conjunctions it costs two ReLU levels.
    """
    parts: list[Formula] = []
    for a in alphabet:
        ya = Prev(Atom(a))
        parts.append(And(And(Atom(a), ya), g))
    for a in alphabet:
        ya = Prev(Atom(a))
        parts.append(And(And(Atom(a), Not(ya)), Since(Not(ya), And(ya, g))))
    return _or_all(parts)


def induction_formulas(alphabet: Sequence[str], hops: int) -> dict[str, Formula]:
    """Label b → the formula "the output at i is b"."""
    return {b: f for (k, b), f in _hop_table(alphabet, hops).items() if k == hops}


def _hop_table(alphabet: Sequence[str], hops: int) -> dict[tuple[int, str], Formula]:
    """(k, b) → "hop_k outputs b", for 1 ≤ k ≤ hops (each built on the one before)."""
    table: dict[tuple[int, str], Formula] = {}
    for b in alphabet:
        g: Formula = Atom(b)
        for k in range(1, hops + 1):
            g = hop_formula(g, alphabet)
            table[(k, b)] = g
    return table


def build_induction(
    alphabet: Sequence[str],
    hops: int = 1,
    max_n: int = 8,
    scheme: str = "temperature",
) -> dict:
    """A format-1 model with an argmax read-out computing the k-hop induction head."""
    if hops < 1:
        raise ValueError("hops must be at least 1")
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}: use one of {', '.join(SCHEMES)}")
    alphabet = list(alphabet)
    cases_wanted = 0
    for n in range(1, max_n + 1):  # stops past the limit: max_n may be huge
        cases_wanted += len(alphabet) ** n
        if cases_wanted > MAX_CASES:
            raise ValueError(
                f"the reference would list every word up to max_n = {max_n}: more than the "
                f"limit of {MAX_CASES:,} cases (docs/limits.md) (fix: lower --max-n)"
            )
    # cheap lower bounds first (building deep formulas is slow): every hop nests the formula
    # deeper, and one hop is a disjunction of 2|alphabet| conjunctions
    if hops > MAX_FORMULA_DEPTH or 2 * len(alphabet) > MAX_FORMULA_DEPTH:
        raise ValueError(
            f"{hops} hop(s) over {len(alphabet)} symbols need LTL formulas nested more than "
            f"{MAX_FORMULA_DEPTH} operators deep, the limit (docs/limits.md) "
            "(fix: use fewer hops or a smaller alphabet)"
        )
    none = default_label(alphabet)
    table = _hop_table(alphabet, hops)
    formulas = {b: table[(hops, b)] for b in alphabet}
    depth = formula_depth(formulas[alphabet[0]])  # every label's formula has the same shape
    if depth > MAX_FORMULA_DEPTH:
        raise ValueError(
            f"{hops} hop(s) over {len(alphabet)} symbols need LTL formulas nested {depth} "
            f"operators deep, more than the limit of {MAX_FORMULA_DEPTH} (docs/limits.md) "
            "(fix: use fewer hops or a smaller alphabet)"
        )
    # short coordinate names: the formulas are exponentially long when printed in full
    abbrev = {f: f"hop{k}[{b}]" for (k, b), f in table.items()}
    model, coords = compile_formulas(formulas, alphabet, scheme, abbrev)
    d = model["d"]
    true = model["coordinates"].index("true")
    rows: list[list[int | str]] = []
    none_row: list[int | str] = [0] * d
    none_row[true] = 1
    for b in alphabet:
        row: list[int | str] = [0] * d
        k = coords[b]
        if k is not None:
            row[k] = 1
            none_row[k] = -1
        rows.append(row)
    rows.append(none_row)
    cases: list[dict[str, Any]] = []
    for n in range(1, max_n + 1):
        for word in itertools.product(alphabet, repeat=n):
            cases.append({"input": list(word), "output": induction_labels(word, hops, none)})
    what = "induction head" if hops == 1 else f"{hops}-hop induction head"
    pe = (
        "τ = 1/n, bounded position embeddings"
        if scheme == "temperature"
        else ("τ = 1, unbounded position embeddings")
    )
    model = {
        "format": "exactattn/1",
        "name": f"induction-k{hops}-{scheme}",
        "description": (
            f"The {what} over {{{', '.join(alphabet)}}}: at each position, the token at "
            f"find^{hops}(i), where find(i) is the position after the most recent earlier "
            f"occurrence of the token at i ('{none}' if there is none). Compiled by "
            f"exactattn.constructions.ltl from one since/until formula per label ({scheme} scheme, "
            f"{pe}); see docs/constructions.md."
        ),
        **{k: v for k, v in model.items() if k != "format"},
        "output": {
            "kind": "argmax",
            "weight": rows,
            "bias": [0] * (len(alphabet) + 1),
            "labels": [*alphabet, none],
        },
        "reference": {"kind": "cases", "cases": cases},
        "claims": {**ltl_claims(scheme, "1"), **model["claims"]},
        "meta": {
            "construction": "exactattn.constructions.induction",
            "scheme": scheme,
            "hops": hops,
            "formulas": {
                f"hop{k}[{b}]": format_ltl(f, {g: n for g, n in abbrev.items() if g != f})
                for (k, b), f in table.items()
            },
            "reference_max_n": max_n,
        },
    }
    args = dict(alphabet=alphabet, hops=hops, max_n=max_n, scheme=scheme)  # noqa: C408
    return stamp(model, "induction", args)


def catalog() -> dict[str, dict]:
    """File stem → model dict: induction heads k = 1 and k = 2 on {a, b, c}."""
    return {f"induction_k{k}": build_induction(["a", "b", "c"], hops=k, max_n=8) for k in (1, 2)}
