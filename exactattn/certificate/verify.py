"""``check`` holds a model's claims against what it measured at each enumerated length.

A claim that fails at an enumerated n is a finding (exit 1): the record names n, the witness
input and both numbers. A claim given by a transcendental expression whose ball cannot be
compared with the exact measured value is reported as undecided (exit 3), never guessed.
"""

from __future__ import annotations

import hashlib
import itertools
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.numbers import arb_endpoints, frac_str
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.model import AttentionLayer, Model
from exactattn.model.claimed import (
    CLAIM_MEANING,
    CLAIM_SYMBOL,
    COORD_RANGES,
    HEAD_PROFILES,
    UNIQUE_TOP,
    ModelClaim,
    ProfileClaim,
    RangeClaim,
    claim_exact,
    claim_value,
    expr_ends,
    profile_at,
    q_text,
    range_at,
)
from exactattn.results import LengthRecord, claim_problems  # noqa: F401  (re-exported)
from exactattn.results.chainstats import CoordStats
from exactattn.results.claims import (
    ClaimItem,
    ClaimsEntry,
    ClaimViolation,
    head_witness,
    layer_witness,
    length_entries,
    profile_witness,
    range_witness,
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
        record(cl.activation_upper, acts[worst], False, layer_witness(worst - 1))
    if cl.unique_top is not None:
        items[UNIQUE_TOP], bad = _unique_top(model, rec)
        if bad is not None:
            details.append(bad)
    if cl.coordinate_ranges is not None:
        item, bads, und = _coordinate_ranges(model, rec)
        items[COORD_RANGES] = item
        details.extend(bads)
        undecided += und
    if cl.head_profiles is not None:
        item, bads, und = _head_profiles(model, rec)
        items[HEAD_PROFILES] = item
        details.extend(bads)
        undecided += und
    return ClaimsEntry(True, undecided, items, tuple(details))


# --------------------------------------------------------------------------- Theorem S claims


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def ranges_text(model: Model, n: int) -> str:
    """The ``coordinate_ranges`` claim at n as one short text (what ``--checked`` compares):
    how many ranges, and a digest of their values at n."""
    cr = model.claims.coordinate_ranges
    parts = [
        f"{blk}:{r.coordinate}:{frac_str(a)}:{frac_str(b)}:{int(r.integer)}"
        for blk, rs in (("ranges", cr.ranges), ("bos", cr.bos))
        for r in rs
        for a, b in [range_at(r, n, blk)]
    ]
    return f"{len(parts)} ranges (sha256 {_digest(parts)})"


def profiles_text(model: Model, n: int) -> str:
    """The ``head_profiles`` claim at n as one short text (like :func:`ranges_text`)."""
    hp = model.claims.head_profiles
    parts = []
    for k, h in enumerate(hp.heads):
        g, st = profile_at(h, n, k)
        parts.append(
            f"{h.layer}:{h.head}:{frac_str(g)}:{frac_str(st)}:{h.per_rank}:{int(h.unique)}"
        )
    return f"{len(parts)} profiles (sha256 {_digest(parts)})"


def _range_status(r: RangeClaim, n: int, blk: str, s: CoordStats) -> str:
    """holds / fails / undecided for one coordinate's measured [min, max] and integrality."""
    p = f"claims.{COORD_RANGES}.{blk}.{r.key}"
    lo_lo, lo_hi = expr_ends(r.lo, n, f"{p}.min", prec=256)
    hi_lo, hi_hi = expr_ends(r.hi, n, f"{p}.max", prec=256)
    if s.lo < lo_lo or s.hi > hi_hi or (r.integer and not s.integer):
        return "fails"
    if s.lo < lo_hi or s.hi > hi_lo:
        return "undecided"
    return "holds"


def _coordinate_ranges(
    model: Model, rec: LengthRecord
) -> tuple[ClaimItem, list[ClaimViolation], int]:
    cr = model.claims.coordinate_ranges
    n = rec.n
    text = ranges_text(model, n)
    st = rec.chain
    if st is None:  # nothing measured (a record without the measurement): cannot hold
        return ClaimItem(text, "not measured", "undecided"), [], 1
    overridden = {r.coordinate for r in cr.bos}
    checks = [(r, "ranges", "rest") for r in cr.ranges]
    checks += [(r, "ranges", "bos") for r in cr.ranges if r.coordinate not in overridden]
    checks += [(r, "bos", "bos") for r in cr.bos]
    bad: list[tuple[RangeClaim, str, str, CoordStats]] = []
    und = 0
    for r, blk, cls in checks:
        s = st.coord(r.coordinate, cls)
        if s is None:
            continue  # no position of this class (a model without BOS)
        status = _range_status(r, n, blk, s)
        if status == "fails":
            bad.append((r, blk, cls, s))
        elif status == "undecided":
            und += 1
    if not bad:
        return (
            ClaimItem(
                text,
                "inside" if not und else f"{und} undecided",
                "holds" if not und else "undecided",
            ),
            [],
            und,
        )
    details = []
    for r, blk, cls, s in bad[:3]:  # the first few, each with a witness input
        a, b = range_at(r, n, blk)
        where = "at BOS" if cls == "bos" else "at the positions after BOS"
        details.append(
            ClaimViolation(
                COORD_RANGES,
                n,
                f"{SYMBOL[COORD_RANGES]} [{q_text(a, False)}, {q_text(b, True)}]"
                + (" ∩ ℤ" if r.integer else "")
                + f" for {r.key} ({where})",
                f"[{frac_str(s.lo)}, {frac_str(s.hi)}]"
                + ("" if s.integer else ", not all integers"),
                _range_witness(model, n, r, blk, cls),
                CLAIM_MEANING[COORD_RANGES],
            )
        )
    item = ClaimItem(text, f"{len(bad)} outside", "fails")
    return item, details, und


def _head_profiles(model: Model, rec: LengthRecord) -> tuple[ClaimItem, list[ClaimViolation], int]:
    hp = model.claims.head_profiles
    n = rec.n
    text = profiles_text(model, n)
    st = rec.chain
    if st is None:
        return ClaimItem(text, "not measured", "undecided"), [], 1
    details = []
    und = 0
    heads = {
        (li, hi): h for li, layer in enumerate(rec.layers) for hi, h in enumerate(layer.heads or ())
    }
    for k, h in enumerate(hp.heads):
        p = f"claims.{HEAD_PROFILES}.heads[{k}]"
        g_lo, g_hi = expr_ends(h.gap, n, f"{p}.gap", prec=256)
        s_lo, s_hi = expr_ends(h.step, n, f"{p}.step", prec=256)
        drops = st.head(h.layer, h.head) or ()
        fail_at = None
        for j, dk in enumerate(drops):
            rank = j // h.per_rank
            if dk < g_lo + s_lo * rank:  # certainly below the claimed drop
                fail_at = j + 1
                break
            if dk < g_hi + s_hi * rank:
                und += 1
                break
        hr = heads.get((h.layer, h.head))
        top_bad = h.unique and hr is not None and hr.max_top > 1
        if fail_at is None and not top_bad:
            continue
        if fail_at is not None:
            rank = (fail_at - 1) // h.per_rank
            claimed = (
                f"the {fail_at}-th key below the top ≥ {q_text(g_lo + s_lo * rank, False)} below it"
            )
            measured: Fraction | str = drops[fail_at - 1]
        else:
            claimed = "a unique top key"
            measured = f"{hr.max_top} keys at the top"
        details.append(
            ClaimViolation(
                HEAD_PROFILES,
                n,
                f"layer {h.layer}, head {h.head}: {claimed}",
                measured,
                _profile_witness(model, n, h, g_lo, s_lo, fail_at),
                CLAIM_MEANING[HEAD_PROFILES],
            )
        )
    status = "fails" if details else "undecided" if und else "holds"
    measured_text = f"{len(details)} heads violate" if details else "every listed head"
    return ClaimItem(text, measured_text, status), details, und


def _words(model: Model, n: int, limit: int):  # type: ignore[no-untyped-def]
    """The first inputs of length n in enumeration order, in batches."""
    it = itertools.islice(itertools.product(model.alphabet, repeat=n), limit)
    while True:
        chunk = list(itertools.islice(it, 512))
        if not chunk:
            return
        yield chunk


def _range_witness(model: Model, n: int, r: RangeClaim, blk: str, cls: str) -> Any:
    """The first input (enumeration order, up to MARGIN_WITNESS_SEARCH) where the coordinate
    leaves its claimed range: the input, the layer boundary, the position and the value."""
    a, b = range_at(r, n, blk)
    cm = CompiledModel(model)
    bos = model.bos is not None
    for chunk in _words(model, n, MARGIN_WITNESS_SEARCH):
        hb = run_hard(cm, chunk, n, share=False)
        for li, act in enumerate(hb.activations):
            col = act.num[:, :, r.coordinate]
            rows = range(col.shape[1])
            for w in range(col.shape[0]):
                for p in rows:
                    if bos and (p == 0) != (cls == "bos"):
                        continue
                    v = Fraction(int(col[w, p]), act.den)
                    if v < a or v > b or (r.integer and v.denominator != 1):
                        return range_witness(list(chunk[w]), r.key, li - 1, p, frac_str(v))
    return None


def _profile_witness(
    model: Model, n: int, h: ProfileClaim, gap: Fraction, step: Fraction, k: int | None
) -> Any:
    """The first input (enumeration order) whose head (layer, head) breaks the profile at
    some query: the input, the query, k and the k-th drop (or the size of a tied top)."""
    cm = CompiledModel(model)
    for chunk in _words(model, n, MARGIN_WITNESS_SEARCH):
        hb = run_hard(cm, chunk, n, share=False)
        tr = hb.layers[h.layer].heads[h.head]
        s, den = tr.scores.num, tr.scores.den
        for w in range(s.shape[0]):
            for i in range(s.shape[1]):
                vis = [j for j in range(s.shape[2]) if tr.visible[i, j]]
                if not vis:
                    continue
                top = max(int(s[w, i, j]) for j in vis)
                tops = sum(1 for j in vis if int(s[w, i, j]) == top)
                drops = sorted(
                    Fraction(top - int(s[w, i, j]), den) for j in vis if int(s[w, i, j]) != top
                )
                for j, dk in enumerate(drops):
                    if dk < gap + step * (j // h.per_rank):
                        return profile_witness(list(chunk[w]), i, j + 1, frac_str(dk))
                if h.unique and tops > 1:
                    return profile_witness(list(chunk[w]), i, None, str(tops))
    return None


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
