"""The ``claims`` object of a model file: proved (or user-asserted) bounds as expressions in n.

A claim is data, never code: every expression goes through :mod:`exactattn.model.expr`. The
meaning of each key (docs/model-format.md, "claims"), for every n ≥ ``from_n`` the model
supports and every input of length n:

* ``gamma_lower``  γ(n) ≥ value: every hard score strictly below its row's maximum is below it
  by at least the value (the γ(n) that ``check`` measures; heads with no lower score are free);
* ``x_max_upper``  x_max(n) ≤ value: every entry of the initial activations x^(0) (the
  embedding, the x_max(n) that ``check`` measures) is at most the value in absolute value;
* ``margin_lower`` μ(n) ≥ value: the smallest hard read-out margin (``accept``, ``argmax``);
* ``activation_upper`` (optional) every entry of every layer's hard output x^(ℓ), ℓ ≥ 0, is at
  most the value in absolute value (``certify`` takes the smaller of it and Lemma G's bound);
* ``unique_top``   (no expression) every leftmost/rightmost head has a unique maximum visible
  score at every query (the hypothesis H3 of ``proofs/``), so it equals average-hard attention
  and Theorem 3 applies to it; without it ``certify`` refuses such heads.
* ``coordinate_ranges`` (optional; Theorem S, proofs/07-sharp-chain.md) for named coordinates,
  min(n) ≤ x^(ℓ)_{p,c} ≤ max(n) at every layer boundary ℓ ≥ 0 and position p (an integer there
  when ``integer``); a ``bos`` entry replaces the range at the BOS position;
* ``head_profiles`` (optional; Theorem S) for listed heads: at every query, the k-th visible
  key below the top score is at least gap(n) + step(n)·⌊(k − 1)/per_rank⌋ below it, and with
  ``unique`` the top score is attained by one key only.

Each claim carries a ``justification``: ``"user"`` (an assertion; certificates that use it say
they are conditional on it) or ``{"file": "proofs/….md", "statement": "…"}`` (where it is proved).
A citation is parsed here for its shape only: ``certify`` counts it as a proof only for a model
it re-derives from its ``built_by`` record (exactattn/certificate/rederive.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.errors import ModelError
from exactattn.core.numbers import (
    EXACT_BINARY_EXPONENT,
    JsonConstant,
    arb_endpoints,
    arb_is_huge,
    decimal_down,
    decimal_up,
    frac_str,
    to_arb,
)
from exactattn.model.expr import Expr, ExprError, parse_expression

CLAIM_KEYS = ("gamma_lower", "x_max_upper", "margin_lower")
UNIQUE_TOP = "unique_top"  # a claim without an expression: H3 for leftmost/rightmost heads
ACTIVATION = "activation_upper"  # optional: a bound on every layer's hard activations
COORD_RANGES = "coordinate_ranges"  # optional: per-coordinate hard ranges (Theorem S)
HEAD_PROFILES = "head_profiles"  # optional: per-head score profiles (Theorem S)
MAX_PER_RANK = 10**6
DECISION_OUTPUTS = ("accept", "argmax")
MAX_JUSTIFICATION = 300

# what each claim bounds, for messages and reports
CLAIM_MEANING = {
    "gamma_lower": "lower bound on the gap γ(n)",
    "x_max_upper": "upper bound on x_max(n), the largest |entry| of the embedding x^(0)",
    "margin_lower": "lower bound on the hard read-out margin μ(n)",
    ACTIVATION: "upper bound on every layer's hard activations max_ℓ ‖x^(ℓ)‖∞",
    UNIQUE_TOP: "every leftmost/rightmost head has a unique top score at every query (H3)",
    COORD_RANGES: "the hard value of each listed coordinate at every layer lies in its range",
    HEAD_PROFILES: "the k-th key below the top of each listed head is ≥ gap + step·⌊(k−1)/r⌋ below",
}
CLAIM_SYMBOL = {
    "gamma_lower": "γ(n) ≥",
    "x_max_upper": "x_max(n) ≤",
    "margin_lower": "μ(n) ≥",
    ACTIVATION: "max_ℓ ‖x^(ℓ)‖∞ ≤",
    UNIQUE_TOP: "top set of every leftmost/rightmost head ≤",
    COORD_RANGES: "x^(ℓ)_c ∈",
    HEAD_PROFILES: "k-th drop ≥",
}
"""Each claim as a relation, for messages ("γ(n) ≥ 1/(n+1)")."""
_FIX_JUST = 'use "justification": "user" or {"file": "proofs/<file>.md", "statement": "<lemma>"}'


@dataclass(frozen=True)
class Justification:
    """Where a claim is proved: ``file`` and ``statement``, or ``user`` (asserted, unproved)."""

    file: str | None
    statement: str | None

    @property
    def user(self) -> bool:
        return self.file is None

    def to_json(self) -> str | dict[str, str]:
        if self.file is None:
            return "user"
        return {"file": self.file, "statement": self.statement or ""}

    def text(self) -> str:
        return "asserted by the user" if self.file is None else f"{self.file}, {self.statement}"


@dataclass(frozen=True)
class ModelClaim:
    """One bound a model file claims about itself (``claims.gamma_lower`` …), with its
    justification. Not a paper claim: those are ``report.claims.PaperClaim``, the ledger's rows."""

    key: str
    expr: Expr
    justification: Justification

    def to_json(self) -> dict[str, Any]:
        return {"expr": self.expr.text, "justification": self.justification.to_json()}


@dataclass(frozen=True)
class RangeClaim:
    """One coordinate's claimed hard range: min(n) ≤ value ≤ max(n) (an integer if
    ``integer``); ``key`` is the text naming it in the file (a name or an index)."""

    coordinate: int
    key: str
    lo: Expr
    hi: Expr
    integer: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"min": self.lo.text, "max": self.hi.text}
        if self.integer:
            out["integer"] = True
        return out


@dataclass(frozen=True)
class CoordinateRanges:
    """``coordinate_ranges``: ``ranges`` hold at every position, except where ``bos`` gives
    the coordinate another range at the BOS position."""

    ranges: tuple[RangeClaim, ...]
    bos: tuple[RangeClaim, ...]
    justification: Justification

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ranges": {r.key: r.to_json() for r in self.ranges}}
        if self.bos:
            out["bos"] = {r.key: r.to_json() for r in self.bos}
        out["justification"] = self.justification.to_json()
        return out


@dataclass(frozen=True)
class ProfileClaim:
    """One head's claimed score profile (Theorem S, (P))."""

    layer: int
    head: int
    gap: Expr
    step: Expr
    per_rank: int
    unique: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "layer": self.layer,
            "head": self.head,
            "gap": self.gap.text,
            "step": self.step.text,
            "per_rank": self.per_rank,
        }
        if self.unique:
            out["unique"] = True
        return out


@dataclass(frozen=True)
class HeadProfiles:
    """``head_profiles``: one profile per listed head."""

    heads: tuple[ProfileClaim, ...]
    justification: Justification

    def to_json(self) -> dict[str, Any]:
        return {
            "heads": [h.to_json() for h in self.heads],
            "justification": self.justification.to_json(),
        }


@dataclass(frozen=True)
class ModelClaims:
    """The parsed ``claims`` object of a model file, its ``ModelClaim`` items. ``from_n``: the
    claims hold for n ≥ from_n.

    ``items()`` are the claims with an expression; ``unique_top`` (H3, no expression) is kept
    apart, as the justification alone."""

    gamma_lower: ModelClaim
    x_max_upper: ModelClaim
    margin_lower: ModelClaim | None
    from_n: int
    unique_top: Justification | None = None
    activation_upper: ModelClaim | None = None
    coordinate_ranges: CoordinateRanges | None = None
    head_profiles: HeadProfiles | None = None

    def items(self) -> list[ModelClaim]:
        cs = (self.gamma_lower, self.x_max_upper, self.margin_lower, self.activation_upper)
        return [c for c in cs if c]

    @property
    def conditional(self) -> list[str]:
        """Keys whose justification is "user": every certificate is conditional on them."""
        out = [c.key for c in self.items() if c.justification.user]
        if self.unique_top is not None and self.unique_top.user:
            out.append(UNIQUE_TOP)
        if self.coordinate_ranges is not None and self.coordinate_ranges.justification.user:
            out.append(COORD_RANGES)
        if self.head_profiles is not None and self.head_profiles.justification.user:
            out.append(HEAD_PROFILES)
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {c.key: c.to_json() for c in self.items()}
        if self.unique_top is not None:
            out[UNIQUE_TOP] = {"justification": self.unique_top.to_json()}
        if self.coordinate_ranges is not None:
            out[COORD_RANGES] = self.coordinate_ranges.to_json()
        if self.head_profiles is not None:
            out[HEAD_PROFILES] = self.head_profiles.to_json()
        out["from_n"] = self.from_n
        return out


def _text(x: Any) -> str | None:
    """An expression text from the raw JSON (a string or a JSON number), else None."""

    if isinstance(x, str) and not isinstance(x, JsonConstant):
        return str(x)  # a string or the verbatim text of a JSON number
    return None


def _justification(x: Any, path: str) -> Justification:
    if isinstance(x, str) and str(x) == "user":
        return Justification(None, None)
    if not isinstance(x, Mapping):
        raise ModelError(path, f'expected "user" or an object, got {x!r:.60}', _FIX_JUST)
    for k in x:
        if k not in ("file", "statement") and not str(k).startswith("x-"):
            raise ModelError(f"{path}.{k}", f"unknown key '{k}'", "allowed here: file, statement")
    f, s = x.get("file"), x.get("statement")
    if not isinstance(f, str) or not isinstance(s, str) or not str(s).strip():
        raise ModelError(path, 'needs a "file" and a non-empty "statement"', _FIX_JUST)
    f, s = str(f), str(s)
    parts = f.split("/")
    if (
        len(f) > MAX_JUSTIFICATION
        or len(s) > MAX_JUSTIFICATION
        or parts[0] != "proofs"
        or len(parts) < 2
        or any(p in ("", ".", "..") for p in parts)
        or "\\" in f
    ):
        raise ModelError(
            f"{path}.file",
            f"'{f[:60]}' is not a file under proofs/ (or a text is over {MAX_JUSTIFICATION} chars)",
            'give the proof as a relative path such as "proofs/claims.md"',
        )
    return Justification(f, s)


def parse_claims(
    raw: Any,
    output_kind: str,
    min_length: int,
    path: str = "claims",
    coordinates: tuple[str, ...] | None = None,
    d: int | None = None,
    heads: tuple[int | None, ...] | None = None,
) -> ModelClaims:
    """Validate the raw ``claims`` object (ModelError naming the JSON path on any problem).

    ``coordinates`` (names), ``d`` and ``heads`` (per layer, its number of heads, None for an
    FFN) let ``coordinate_ranges`` and ``head_profiles`` be checked against the model."""
    if not isinstance(raw, Mapping):
        raise ModelError(
            path,
            f"expected an object, got {type(raw).__name__}",
            'write {"gamma_lower": {"expr": "<expression in n>", "justification": "user"}, …} '
            "(docs/model-format.md)",
        )
    allowed = (*CLAIM_KEYS, ACTIVATION, UNIQUE_TOP, COORD_RANGES, HEAD_PROFILES, "from_n")
    for k in raw:
        if k not in allowed and not str(k).startswith("x-"):
            raise ModelError(
                f"{path}.{k}", f"unknown key '{k}'", f"allowed here: {', '.join(allowed)}"
            )
    need = ["gamma_lower", "x_max_upper"]
    if output_kind in DECISION_OUTPUTS:
        need.append("margin_lower")
    for k in need:
        if k not in raw:
            why = f" (an '{output_kind}' read-out makes decisions)" if k == "margin_lower" else ""
            raise ModelError(
                path,
                f"missing required key '{k}'{why}",
                f'add "{k}": {{"expr": "<expression in n>", "justification": "user"}}',
            )
    if "margin_lower" in raw and output_kind not in DECISION_OUTPUTS:
        raise ModelError(
            f"{path}.margin_lower",
            f"a '{output_kind}' read-out has no decision margin",
            "remove margin_lower",
        )
    from_n = min_length
    if "from_n" in raw:
        t = _text(raw["from_n"])
        if t is None or not t.isdigit() or int(t) < 1 or len(t) > 12:
            raise ModelError(
                f"{path}.from_n",
                f"expected an integer >= 1, got {raw['from_n']!r:.40}",
                "write the first length the claims hold for, such as 1 or 2",
            )
        from_n = max(int(t), min_length)
    out: dict[str, ModelClaim] = {}
    for k in (*CLAIM_KEYS, ACTIVATION):
        if k not in raw:
            continue
        p = f"{path}.{k}"
        c = raw[k]
        if not isinstance(c, Mapping):
            raise ModelError(
                p, "expected an object", '{"expr": "<expression in n>", "justification": "user"}'
            )
        for kk in c:
            if kk not in ("expr", "justification") and not str(kk).startswith("x-"):
                raise ModelError(
                    f"{p}.{kk}", f"unknown key '{kk}'", "allowed here: expr, justification"
                )
        if "expr" not in c or "justification" not in c:
            missing = "expr" if "expr" not in c else "justification"
            raise ModelError(p, f"missing required key '{missing}'", f'add "{missing}"')
        text = _text(c["expr"])
        if text is None:
            raise ModelError(
                f"{p}.expr",
                "expected an expression string in n",
                'write it as a string, e.g. "1/n"',
            )
        try:
            e = parse_expression(text, ("n",), transcendental=True)
        except ExprError as exc:
            raise ModelError(
                f"{p}.expr",
                f"bad expression '{text[:60]}': {exc}",
                "use numbers, n, + - * / ^, parentheses, min, max, floor, ceil, mod, sqrt, "
                "log, exp",
            ) from None
        out[k] = ModelClaim(k, e, _justification(c["justification"], f"{p}.justification"))
    unique = None
    if UNIQUE_TOP in raw:
        p = f"{path}.{UNIQUE_TOP}"
        c = raw[UNIQUE_TOP]
        fix = '{"justification": "user"} (this claim has no expression)'
        if not isinstance(c, Mapping):
            raise ModelError(p, "expected an object", fix)
        for kk in c:
            if kk != "justification" and not str(kk).startswith("x-"):
                raise ModelError(f"{p}.{kk}", f"unknown key '{kk}'", "allowed here: justification")
        if "justification" not in c:
            raise ModelError(p, "missing required key 'justification'", fix)
        unique = _justification(c["justification"], f"{p}.justification")
    ranges = (
        _coordinate_ranges(raw[COORD_RANGES], f"{path}.{COORD_RANGES}", coordinates, d)
        if COORD_RANGES in raw
        else None
    )
    profiles = (
        _head_profiles(raw[HEAD_PROFILES], f"{path}.{HEAD_PROFILES}", heads)
        if HEAD_PROFILES in raw
        else None
    )
    return ModelClaims(
        out["gamma_lower"],
        out["x_max_upper"],
        out.get("margin_lower"),
        from_n,
        unique,
        out.get(ACTIVATION),
        ranges,
        profiles,
    )


def _keys(x: Any, path: str, allowed: tuple[str, ...], need: tuple[str, ...], fix: str) -> None:
    if not isinstance(x, Mapping):
        raise ModelError(path, f"expected an object, got {type(x).__name__}", fix)
    for k in x:
        if k not in allowed and not str(k).startswith("x-"):
            raise ModelError(
                f"{path}.{k}", f"unknown key '{k}'", f"allowed here: {', '.join(allowed)}"
            )
    for k in need:
        if k not in x:
            raise ModelError(path, f"missing required key '{k}'", fix)


def _expr(x: Any, path: str) -> Expr:
    text = _text(x)
    if text is None:
        raise ModelError(
            path, "expected an expression string in n", 'write it as a string, e.g. "n + 1"'
        )
    try:
        return parse_expression(text, ("n",), transcendental=True)
    except ExprError as exc:
        raise ModelError(
            path,
            f"bad expression '{text[:60]}': {exc}",
            "use numbers, n, + - * / ^, parentheses, min, max, floor, ceil, mod, sqrt, log, exp",
        ) from None


def _bool(x: Any, path: str) -> bool:
    if not isinstance(x, bool):
        raise ModelError(path, f"expected true or false, got {x!r:.40}", "write true or false")
    return x


def _index(x: Any, path: str, limit: int | None, what: str) -> int:
    t = _text(x)
    if t is None or not t.isdigit() or len(t) > 9 or (limit is not None and int(t) >= limit):
        top = "" if limit is None else f" below {limit}"
        raise ModelError(
            path, f"expected {what}, an integer >= 0{top}, got {x!r:.40}", f"give {what}"
        )
    return int(t)


_FIX_RANGES = (
    '{"ranges": {"<coordinate>": {"min": "<expr in n>", "max": "<expr in n>"}}, '
    '"justification": "user"}'
)


def _coordinate_ranges(
    raw: Any, path: str, coordinates: tuple[str, ...] | None, d: int | None
) -> CoordinateRanges:
    _keys(raw, path, ("ranges", "bos", "justification"), ("ranges", "justification"), _FIX_RANGES)
    names = {c: k for k, c in enumerate(coordinates or ())}

    def coord(key: str, p: str) -> int:
        if key in names:
            return names[key]
        if key.isdigit() and len(key) <= 9 and (d is None or int(key) < d):
            return int(key)
        raise ModelError(
            p,
            f"'{key[:60]}' is not a coordinate of this model",
            "use a name from coordinates, or an index",
        )

    def block(x: Any, p: str) -> tuple[RangeClaim, ...]:
        if not isinstance(x, Mapping):
            raise ModelError(p, "expected an object of coordinates", _FIX_RANGES)
        out = []
        seen: set[int] = set()
        for key, v in x.items():
            kp = f"{p}.{key}"
            c = coord(str(key), kp)
            if c in seen:
                raise ModelError(kp, "the coordinate is listed twice", "list each coordinate once")
            seen.add(c)
            _keys(v, kp, ("min", "max", "integer"), ("min", "max"), '{"min": "0", "max": "n"}')
            integer = _bool(v["integer"], f"{kp}.integer") if "integer" in v else False
            lo, hi = _expr(v["min"], f"{kp}.min"), _expr(v["max"], f"{kp}.max")
            out.append(RangeClaim(c, str(key), lo, hi, integer))
        return tuple(out)

    ranges = block(raw["ranges"], f"{path}.ranges")
    bos = block(raw["bos"], f"{path}.bos") if "bos" in raw else ()
    just = _justification(raw["justification"], f"{path}.justification")
    return CoordinateRanges(ranges, bos, just)


_FIX_PROFILES = (
    '{"heads": [{"layer": 1, "head": 0, "gap": "1/(n+1)", "step": "0", "per_rank": 1}], '
    '"justification": "user"}'
)


def _head_profiles(raw: Any, path: str, heads: tuple[int | None, ...] | None) -> HeadProfiles:
    _keys(raw, path, ("heads", "justification"), ("heads", "justification"), _FIX_PROFILES)
    hs = raw["heads"]
    if not isinstance(hs, list):
        raise ModelError(f"{path}.heads", "expected a list of heads", _FIX_PROFILES)
    out = []
    seen: set[tuple[int, int]] = set()
    allowed = ("layer", "head", "gap", "step", "per_rank", "unique")
    for k, h in enumerate(hs):
        p = f"{path}.heads[{k}]"
        _keys(h, p, allowed, ("layer", "head", "gap", "step", "per_rank"), _FIX_PROFILES)
        nl = len(heads) if heads is not None else None
        li = _index(h["layer"], f"{p}.layer", nl, "a layer index")
        nh = heads[li] if heads is not None else None
        if heads is not None and nh is None:
            raise ModelError(
                f"{p}.layer", f"layer {li} is not an attention layer", "list attention heads only"
            )
        hi = _index(h["head"], f"{p}.head", nh, "a head index")
        if (li, hi) in seen:
            raise ModelError(p, f"layer {li}, head {hi} is listed twice", "list each head once")
        seen.add((li, hi))
        r = _index(h["per_rank"], f"{p}.per_rank", MAX_PER_RANK + 1, "keys per rank")
        if r < 1:
            raise ModelError(
                f"{p}.per_rank", "per_rank must be >= 1", "give the keys per rank, >= 1"
            )
        unique = _bool(h["unique"], f"{p}.unique") if "unique" in h else False
        gap, step = _expr(h["gap"], f"{p}.gap"), _expr(h["step"], f"{p}.step")
        out.append(ProfileClaim(li, hi, gap, step, r, unique))
    just = _justification(raw["justification"], f"{path}.justification")
    return HeadProfiles(tuple(out), just)


# --------------------------------------------------------------------------- evaluation


def claim_value(c: ModelClaim, n: int, prec: int = 128) -> arb:
    """The claim at length n as a ball: exact (radius 0) when the expression is rational."""

    try:
        if c.expr.is_rational_valued():
            return to_arb(c.expr.eval_exact({"n": n}))
        v = c.expr.eval_arb({"n": n}, prec)
    except ExprError as exc:
        raise ModelError(
            f"claims.{c.key}.expr", f"undefined at n = {n}: {exc}", "make it defined for every n"
        ) from None
    if arb_is_huge(v):  # its ends would be Fractions with ~2^16+ bit exponents: refuse
        raise ModelError(
            f"claims.{c.key}.expr",
            f"its value at n = {n} lies beyond 2^±{EXACT_BINARY_EXPONENT}, too large or too small "
            "to use as an exact bound",
            "use a bound within that range (a smaller upper or larger lower bound is still true)",
        )
    return v


def precheck(claims: ModelClaims, lo: int, hi: int) -> None:
    """Evaluate every claim at every n in [lo, hi] (n ≥ from_n) before any work is done, so a
    claim undefined or unusable at some length is refused up front (exit 2, nothing written)."""
    for n in range(max(lo, claims.from_n), hi + 1):
        for c in claims.items():
            claim_value(c, n, prec=256)


def claim_exact(c: ModelClaim, n: int) -> Fraction | None:
    """The exact value when the expression is rational, else None."""
    if not c.expr.is_rational_valued():
        return None
    try:
        return c.expr.eval_exact({"n": n})
    except ExprError as exc:
        raise ModelError(
            f"claims.{c.key}.expr", f"undefined at n = {n}: {exc}", "make it defined for every n"
        ) from None


def expr_ends(e: Expr, n: int, path: str, prec: int = 128) -> tuple[Fraction, Fraction]:
    """An expression's value at n as exact ends [lower, upper]: equal when it is rational,
    else the ends of its ball (so a lower bound uses the first, an upper bound the second)."""
    try:
        if e.is_rational_valued():
            v = e.eval_exact({"n": n})
            return v, v
        b = e.eval_arb({"n": n}, prec)
    except ExprError as exc:
        raise ModelError(
            path, f"undefined at n = {n}: {exc}", "make it defined for every n"
        ) from None
    if arb_is_huge(b) or not b.is_finite():
        raise ModelError(
            path,
            f"its value at n = {n} lies beyond 2^±{EXACT_BINARY_EXPONENT}",
            "use a bound within that range",
        )
    return arb_endpoints(b)


def range_at(r: RangeClaim, n: int, block: str = "ranges") -> tuple[Fraction, Fraction]:
    """A coordinate's claimed range at n, rounded outward: (min's lower end, max's upper end)."""
    p = f"claims.{COORD_RANGES}.{block}.{r.key}"
    return expr_ends(r.lo, n, f"{p}.min")[0], expr_ends(r.hi, n, f"{p}.max")[1]


def profile_at(h: ProfileClaim, n: int, k: int) -> tuple[Fraction, Fraction]:
    """A head's claimed (gap, step) at n, rounded down (the claims are lower bounds); ``k`` is
    its index in the list (for messages)."""
    p = f"claims.{HEAD_PROFILES}.heads[{k}]"
    return expr_ends(h.gap, n, f"{p}.gap")[0], expr_ends(h.step, n, f"{p}.step")[0]


def claims_object(
    gamma: str, x_max: str, margin: str | None, file: str, statements: tuple[str, str, str]
) -> dict[str, Any]:
    """The ``claims`` object a builder writes (every claim proved in ``file``)."""
    out: dict[str, Any] = {}
    for key, expr, st in zip(CLAIM_KEYS, (gamma, x_max, margin), statements, strict=True):
        if expr is not None:
            out[key] = {"expr": expr, "justification": {"file": file, "statement": st}}
    return out


def q_text(x: Fraction, up: bool) -> str:
    """An exact "p/q" when it is short, else a decimal rounded the safe way (``up`` for upper
    bounds): a claim such as n^1000 at n = 10^9 has no printable exact value (Python refuses
    str() of integers over 4300 digits)."""

    if x.numerator.bit_length() + x.denominator.bit_length() <= 4000:
        return frac_str(x)
    return (decimal_up if up else decimal_down)(x)
