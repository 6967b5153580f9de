"""Dyck-k as an average-hard attention transformer (format 1), with gap γ(n) = 1/(n+1).

The input is read as ``BOS w EOS`` where BOS is an opening and EOS a closing bracket
of an extra type 0. Then w ∈ Dyck-k iff every closing bracket of ``BOS w EOS``
(EOS included) has a matching opening bracket of its own type: EOS can only match
BOS, which forces every prefix depth ≥ 0 and the final depth 0, and a bracket of w
whose depth goes negative matches BOS, a type mismatch. So one matching pass and
one type check decide the language. Layer by layer (see docs/dyck.md):

1. ``depth_ratio``: uniform strict-causal attention; value +1 on openings (BOS
   included), −1 on closings: D_{i−1}/i, where D_{i−1} is the depth before i.
2. ``depth``: parabolic lookup over positions, score ``(2 D_{i−1} j − j²)/i``, reads
   the integer ``max(D_{i−1}, 0)`` (and its square) as the position j where it peaks.
3. ``match``: score ``−(depth_j − (depth_i − 1))² + j/(n+1)`` over j < i: the nearest
   earlier j whose depth-before equals the depth after i, i.e. the matching
   opening bracket; the value is j's opening type.
4. ``bad`` (FFN): ``Σ_t ReLU(close_t − match_t)``: i closes type t but the match
   does not open type t.
5. ``any_bad``: attention with score ``bad_j`` (exists), read at EOS.

``scale="integer"`` (the default) uses the position embeddings i and i² and has
γ(n) = 1/(n+1) and x_max = (n+1)². ``scale="unit"`` divides every position feature
by n+1 (bounded embeddings, x_max = 1); its scores are exactly the integer model's
divided by (n+1)², so its gap is 1/(n+1)³, the paper's Θ(1/n³) for S-RASP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exactattn.constructions.rasp import Program, ProgramError
from exactattn.model.claimed import claims_object
from exactattn.model.provenance import stamp

__all__ = ["BOS", "EOS", "SCHEDULE_C", "build_dyck", "catalog", "gamma", "temperature"]

BOS = "<bos>"
EOS = "<eos>"
# τ(n) = γ(n) / (SCHEDULE_C · log(n+1)): with weights e^{-γ/τ} = (n+1)^{-SCHEDULE_C} per
# unit of gap; see docs/dyck.md for the choice of the constant.
SCHEDULE_C = 5
SCALES = ("integer", "unit")


def gamma(n: int, scale: str = "integer") -> str:
    """The closed form of γ(n) for this construction, as a 'p/q' string (n ≥ 1)."""
    return f"1/{(n + 1) if scale == 'integer' else (n + 1) ** 3}"


def temperature(scale: str = "integer") -> str:
    """The construction's own schedule τ(n) = γ(n)/(C·log(n+1)) as an expression."""
    power = "(n+1)" if scale == "integer" else "(n+1)^3"
    return f"1/({SCHEDULE_C}*{power}*log(n+1))"


def _check_pairs(pairs: Sequence[str]) -> list[str]:
    pairs = list(pairs)
    if not pairs:
        raise ProgramError("pairs: need at least one bracket pair")
    for p in pairs:
        if not isinstance(p, str) or len(p) != 2 or p[0] == p[1]:
            raise ProgramError(f"pair {p!r}: expected two distinct characters like '()'")
    chars = [c for p in pairs for c in p]
    if len(set(chars)) != len(chars):
        raise ProgramError(f"pairs {pairs}: a bracket character is used twice")
    if BOS in chars or EOS in chars:
        raise ProgramError("pairs: the BOS/EOS token names are reserved")
    return pairs


def build_dyck(pairs: Sequence[str], *, scale: str = "integer", name: str | None = None) -> dict:
    """A format-1 model accepting exactly the well-nested strings over ``pairs``."""
    pairs = _check_pairs(pairs)
    if scale not in SCALES:
        raise ProgramError(f"scale {scale!r} not in {SCALES}")
    k = len(pairs)
    unit = scale == "unit"
    alphabet = [c for p in pairs for c in p]
    name = name or (f"dyck{k}" if not unit else f"dyck{k}-unit")
    p = Program(
        name,
        alphabet,
        bos=BOS,
        eos=EOS,
        description=(
            f"Dyck-{k} over {' '.join(pairs)}: depth by prefix mean, integer depth by "
            f"parabolic lookup, matching by parabolic score with rightmost tie-breaking, "
            f"type check, exists. Scale '{scale}': gamma(n) = "
            f"{'1/(n+1)' if not unit else '1/(n+1)^3'}. Built by exactattn.constructions.dyck."
        ),
    )
    one = p.constant("one")
    opens = [p.indicator(f"open{t}", [BOS if t == 0 else pairs[t - 1][0]]) for t in range(k + 1)]
    closes = [p.indicator(f"close{t}", [EOS if t == 0 else pairs[t - 1][1]]) for t in range(k + 1)]
    scale_div = "" if not unit else "/(n+1)"
    pos = p.position("pos", f"i{scale_div}")
    pos_sq = p.position("pos_sq", f"i^2{scale_div}^2" if unit else "i^2")
    inv_pos = p.position("inv_pos", "1/max(i,1)")
    tie = p.position("tie", "i/(n+1)" if not unit else "i/(n+1)^3")
    unit_step = None
    if unit:
        inv_len = p.position("inv_len", "1/(n+1)")
        # step_j = ±1/(n+1): ReLU(1/(n+1) − 1 + [opening]) is 1/(n+1) or 0 since 1/(n+1) < 1.
        p.ffn(
            [
                ({inv_len: 1, **{o: 1 for o in opens}}, -1),
                ({inv_len: 1, **{c: 1 for c in closes}}, -1),
            ],
            {"step": {0: 1, 1: -1}},
            name="step",
        )
        unit_step = "step"
    # 1. D_{i-1}/i (unit: D_{i-1}/(i(n+1))), exact in both meanings.
    step_value = (
        {unit_step: 1} if unit_step else {**{o: 1 for o in opens}, **{c: -1 for c in closes}}
    )
    p.prefix_mean("depth_ratio", step_value, strict=True)
    # 2. depth_i = max(D_{i-1}, 0) (unit: divided by n+1), and its square.
    p.to_integer("depth", "depth_ratio", inv_pos, pos, pos_sq, square="depth_sq")
    # 3. matching opening bracket: -(depth_j - depth_i + 1)^2 + tie_j over j < i.
    shift = inv_len if unit else one
    p.aggregate(
        values={f"match{t}": {opens[t]: 1} for t in range(k + 1)},
        score=[("depth", "depth", 2), (shift, "depth", -2), (one, "depth_sq", -1), (one, tie, 1)],
        mask="lt",
        name="match",
    )
    # 4. bad_i = 1 iff i closes type t and its match does not open type t.
    p.ffn(
        [({closes[t]: 1, f"match{t}": -1}, 0) for t in range(k + 1)],
        {"bad": {t: 1 for t in range(k + 1)}},
        name="bad",
    )
    # 5. any_bad = 1 iff some position is bad.
    p.exists("any_bad", "bad", one)
    output = p.accept({"any_bad": -1}, bias=1, threshold="1/2", position="eos")
    model = p.to_model(
        output,
        temperature=temperature(scale),
        reference={"kind": "dyck", "pairs": list(pairs)},
        min_length=1,
    )
    model["claims"] = {**claims(scale), **chain_claims(k, scale)}
    return stamp(model, "dyck", {"pairs": list(pairs), "scale": scale})


def claims(scale: str = "integer") -> dict[str, Any]:
    """Bounds for every n, proved in proofs/claims.md (Proposition D)."""

    unit = scale == "unit"
    return claims_object(
        "1/(n+1)^3" if unit else "1/(n+1)",
        "1" if unit else "(n+1)^2",
        "1/2",
        "proofs/claims.md",
        ("Proposition D(a)", "Proposition D(b)", "Proposition D(c)"),
    )


def chain_claims(k: int, scale: str = "integer") -> dict[str, Any]:
    """The claims of Theorem S (proofs/07-sharp-chain.md) for Dyck-k, proved in
    proofs/claims.md (Proposition D(d) and D(e)): every coordinate's hard range at every layer
    and the score profile of each head with lower scores (positions i = 0..n+1)."""

    unit = scale == "unit"
    bit = {"min": "0", "max": "1", "integer": True}
    ranges: dict[str, Any] = {"one": {"min": "1", "max": "1", "integer": True}}
    for t in range(k + 1):
        ranges[f"open{t}"] = dict(bit)
    for t in range(k + 1):
        ranges[f"close{t}"] = dict(bit)
    if unit:
        ranges.update(
            {
                "pos": {"min": "0", "max": "1"},
                "pos_sq": {"min": "0", "max": "1"},
                "inv_pos": {"min": "1/(n+1)", "max": "1"},
                "tie": {"min": "0", "max": "1/(n+1)^2"},
                "inv_len": {"min": "1/(n+1)", "max": "1/(n+1)"},
                "step": {"min": "-1/(n+1)", "max": "1/(n+1)"},
                "depth_ratio": {"min": "-1/(n+1)", "max": "1/(n+1)"},
                "depth": {"min": "0", "max": "1"},
                "depth_sq": {"min": "0", "max": "1"},
            }
        )
    else:
        ranges.update(
            {
                "pos": {"min": "0", "max": "n+1", "integer": True},
                "pos_sq": {"min": "0", "max": "(n+1)^2", "integer": True},
                "inv_pos": {"min": "1/(n+1)", "max": "1"},
                "tie": {"min": "0", "max": "1"},
                "depth_ratio": {"min": "-1", "max": "1"},
                "depth": {"min": "0", "max": "n+1", "integer": True},
                "depth_sq": {"min": "0", "max": "(n+1)^2", "integer": True},
            }
        )
    for t in range(k + 1):
        ranges[f"match{t}"] = dict(bit)
    ranges["bad"] = dict(bit)
    ranges["any_bad"] = dict(bit)
    # layers: [step FFN (unit only)], depth_ratio, depth, match, bad FFN, any_bad
    first = 1 if unit else 0
    g = "1/(n+1)^3" if unit else "1/(n+1)"
    g2 = "2/(n+1)^3" if unit else "2/(n+1)"
    heads = [
        {"layer": first + 1, "head": 0, "gap": g, "step": g2, "per_rank": 2, "unique": True},
        {"layer": first + 2, "head": 0, "gap": g, "step": g, "per_rank": 1, "unique": True},
        {"layer": first + 4, "head": 0, "gap": "1", "step": "0", "per_rank": 1},
    ]
    return {
        "coordinate_ranges": {
            "ranges": ranges,
            "justification": {"file": "proofs/claims.md", "statement": "Proposition D(d)"},
        },
        "head_profiles": {
            "heads": heads,
            "justification": {"file": "proofs/claims.md", "statement": "Proposition D(e)"},
        },
    }


def catalog() -> dict[str, dict[str, Any]]:
    """The committed models: models/<key>.json is ``catalog()[key]``."""
    return {"dyck1": build_dyck(["()"]), "dyck2": build_dyck(["()", "[]"])}
