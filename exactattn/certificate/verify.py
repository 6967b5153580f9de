"""``check`` holds a model's claims against what it measured at each enumerated length.

A claim that fails at an enumerated n is a finding (exit 1): the record names n, the witness
input and both numbers. A claim given by a transcendental expression whose ball cannot be
compared with the exact measured value is reported as undecided (exit 3), never guessed.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.numbers import arb_endpoints
from exactattn.engine.hard import CompiledModel
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.model import AttentionLayer, Model
from exactattn.model.claimed import (
    CLAIM_MEANING,
    CLAIM_SYMBOL,
    UNIQUE_TOP,
    ModelClaim,
    claim_exact,
    claim_value,
    q_text,
)
from exactattn.results import LengthRecord, claim_problems  # noqa: F401  (re-exported)
from exactattn.results.claims import (
    ClaimItem,
    ClaimsEntry,
    ClaimViolation,
    head_witness,
    length_entries,
    witness_input,
)

MARGIN_WITNESS_SEARCH = 200_000  # inputs tried to exhibit a margin below a false claim

SYMBOL = CLAIM_SYMBOL  # the claims' names are the model format's (model/claimed.py)


def _compare(c: ModelClaim, n: int, measured: Fraction, lower: bool) -> str:
    """'holds', 'fails' or 'undecided': measured ≥ claim (``lower``) or measured ≤ claim."""
    ex = claim_exact(c, n)
    if ex is not None:
        good = measured >= ex if lower else measured <= ex
        return "holds" if good else "fails"
    lo, hi = arb_endpoints(claim_value(c, n, prec=256))
    if lower:
        return "holds" if measured >= hi else "fails" if measured < lo else "undecided"
    return "holds" if measured <= lo else "fails" if measured > hi else "undecided"


def _claim_text(c: ModelClaim, n: int) -> str:
    ex = claim_exact(c, n)
    if ex is not None:
        return q_text(ex, up=c.key == "x_max_upper")
    v: arb = claim_value(c, n, prec=256)
    return v.str(10, radius=False)


def x_max_witness(model: Model, n: int) -> list[str]:
    """An input of length n whose embedding has the largest |entry| (built, not searched)."""
    pos = model.position_vectors(n)
    first = model.first_input_position()
    best: tuple[Fraction, int, str] | None = None
    for p, vec in enumerate(pos):
        if model.bos is not None and p == 0:
            toks = [model.bos]
        elif model.eos is not None and p == len(pos) - 1:
            toks = [model.eos]
        else:
            toks = list(model.alphabet)
        for t in toks:
            v = max(abs(a + b) for a, b in zip(model.token_embedding[t], vec, strict=True))
            if best is None or v > best[0]:
                best = (v, p, t)
    word = [model.alphabet[0]] * n
    assert best is not None
    _, p, t = best
    if t in model.alphabet and first <= p < first + n:
        word[p - first] = t
    return word


def margin_witness(model: Model, n: int, below: Fraction) -> tuple[list[str], Fraction] | None:
    """The first input (enumeration order) whose hard margin is < ``below``, if one is found
    among the first MARGIN_WITNESS_SEARCH inputs (only run when a claim already failed)."""

    cm = CompiledModel(model)  # only after a claim failed: compiling once more is cheap
    for k, word in enumerate(itertools.product(model.alphabet, repeat=n)):
        if k >= MARGIN_WITNESS_SEARCH:
            return None
        _, mg = hard_output(model, run_hard_long(cm, word))
        if mg < below:
            return list(word), mg
    return None


def verify_claims(model: Model, rec: LengthRecord) -> ClaimsEntry:
    """The ``claims`` entry of one length of a result file (docs/model-format.md)."""
    cl = model.claims
    assert cl is not None
    n = rec.n
    if n < cl.from_n:
        return ClaimsEntry(False)
    details: list[ClaimViolation] = []
    items: dict[str, ClaimItem] = {}
    undecided = 0

    def record(c: ModelClaim, measured: Fraction | None, lower: bool, witness: Any) -> None:
        nonlocal undecided
        if measured is None:  # γ = ∞ (no lower score) or no margin measured: nothing to hold
            items[c.key] = ClaimItem(_claim_text(c, n), None, "holds")
            return
        status = _compare(c, n, measured, lower)
        items[c.key] = ClaimItem(_claim_text(c, n), measured, status)
        if status == "fails":
            w = witness() if callable(witness) else witness
            details.append(
                ClaimViolation(
                    c.key,
                    n,
                    f"{SYMBOL[c.key]} {_claim_text(c, n)}",
                    measured if w is None or not isinstance(w, tuple) else w[1],
                    w[0] if isinstance(w, tuple) else w,
                    CLAIM_MEANING[c.key],
                )
            )
        elif status == "undecided":
            undecided += 1

    record(cl.gamma_lower, rec.gamma, True, witness_input(rec.gamma_witness))
    record(cl.x_max_upper, rec.x_max, False, lambda: x_max_witness(model, n))
    if cl.margin_lower is not None:
        claimed = claim_exact(cl.margin_lower, n)
        below = (
            claimed if claimed is not None else arb_endpoints(claim_value(cl.margin_lower, n))[1]
        )

        def mw() -> Any:
            hit = margin_witness(model, n, below)
            return hit if hit is not None else None

        record(cl.margin_lower, rec.min_margin, True, mw)
    if cl.activation_upper is not None:  # every layer's output and the embedding
        acts = [rec.x_max, *(layer.activation_max for layer in rec.layers)]
        worst = max(range(len(acts)), key=lambda k: acts[k])
        record(cl.activation_upper, acts[worst], False, {"after_layer": worst - 1})
    if cl.unique_top is not None:
        items[UNIQUE_TOP], bad = _unique_top(model, rec)
        if bad is not None:
            details.append(bad)
    return ClaimsEntry(True, undecided, items, tuple(details))


def _unique_top(model: Model, rec: LengthRecord) -> tuple[ClaimItem, ClaimViolation | None]:
    """H3 at this length: the largest argmax set of any leftmost/rightmost head is ≤ 1 key.

    The witness is the first such head with a tie at the top (layer, head); the hard engine
    records the size of the largest argmax set per head, not the input."""
    worst, where = 0, None
    for li, layer in enumerate(model.layers):
        if not isinstance(layer, AttentionLayer):
            continue
        hs = rec.layers[li].heads or ()
        for hi, h in enumerate(layer.heads):
            if h.hard != "average" and hs[hi].max_top > worst:
                worst, where = hs[hi].max_top, head_witness(li, hi)
    item = ClaimItem("1", str(worst), "holds" if worst <= 1 else "fails")
    if worst <= 1:
        return item, None
    bad = ClaimViolation(
        UNIQUE_TOP,
        rec.n,
        f"{SYMBOL[UNIQUE_TOP]} 1 key",
        str(worst),
        where,
        CLAIM_MEANING[UNIQUE_TOP],
    )
    return item, bad


def summary_line(model: Model, data: dict[str, Any]) -> str:
    """One line under the check table: the claims and where they held (or failed)."""
    cl = model.claims
    assert cl is not None
    text = ", ".join(f"{SYMBOL[c.key]} {c.expr.text}" for c in cl.items())
    if cl.unique_top is not None:
        text += ", unique top (H3)"
    rows = [(r.n, r.claims) for r in length_entries(data) or [] if r.claims is not None]
    applied = [n for n, e in rows if e.applies]
    bad = [n for n, e in rows if e.violations]
    und = [n for n, e in rows if e.undecided]
    if not applied:
        return f"claims ({text}): not applicable below n = {cl.from_n}"
    if bad:
        return f"claims ({text}): FAIL at n = {', '.join(map(str, bad))}"
    if und:
        return f"claims ({text}): undecided at n = {', '.join(map(str, und))}"
    return f"claims ({text}): hold at n = {min(applied)}..{max(applied)}"
