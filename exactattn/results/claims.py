"""Two per-length entries of ``exactattn-result/1``: the model's claims held against what
``check`` measured (``claims``), and a compiled RASP program's gap bounds (``compiler_gap_bound``).

Typed records, exact until written: measured values are ``Fraction``; claimed values are
the text the claim evaluates to (exact when short). ``LengthRecord.extra`` keeps the written
entry; :func:`length_entries` reads a result file's entries back as records. Only this
module spells these entries' keys; :mod:`exactattn.certificate.verify` and
:mod:`exactattn.constructions.rasp_gap` build them, ``exactattn certify --checked`` and the check's
summary lines read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactattn.constructions.rasp_gap import bound_at
from exactattn.core.numbers import frac_str

RESULT_FORMAT = "exactattn-result/1"


def _q(x: Fraction | str | None) -> str | None:
    if x is None or isinstance(x, str):
        return x
    return frac_str(x)


def _gap_q(x: Fraction | str | None) -> str | None:
    """The gap bound entry's rationals: "p" or "p/q" (as the compiler's gap module has always
    written them)."""
    if x is None or isinstance(x, str):
        return x
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def witness_input(w: Any) -> Any:
    """The input of a check witness (``results.Witness``; its data is a JSON-ready dict)."""
    if w is None:
        return None
    data = w.data
    return data.get("input") if isinstance(data, dict) else data


def head_witness(layer: int, head: int) -> dict[str, int]:
    """A claim violation's witness that is a head, not an input (``unique_top``)."""
    return {"layer": layer, "head": head}


def layer_witness(after: int) -> dict[str, int]:
    """An ``activation_upper`` violation's witness: the layer after which (−1: embedding)."""
    return {"after_layer": after}


def range_witness(word: list[str], coordinate: str, after: int, position: int, value: str) -> dict:
    """A ``coordinate_ranges`` violation's witness: the input, where and the value there."""
    return {
        "input": word,
        "coordinate": coordinate,
        "after_layer": after,
        "position": position,
        "value": value,
    }


def profile_witness(word: list[str], query: int, k: int | None, what: str) -> dict:
    """A ``head_profiles`` violation's witness: the input and query, and either the k-th
    drop (``k`` given, ``what`` the drop) or the size of a tied top (``k`` None)."""
    if k is None:
        return {"input": word, "query": query, "top_keys": int(what)}
    return {"input": word, "query": query, "k": k, "drop": what}


@dataclass(frozen=True)
class ClaimItem:
    """One claim at n: what it says there, what was measured, holds / fails / undecided."""

    claim: str
    measured: Fraction | str | None  # None: nothing to hold (γ = ∞, no margin measured)
    status: str

    def to_json(self) -> dict[str, Any]:
        return {"claim": self.claim, "measured": _q(self.measured), "status": self.status}

    @staticmethod
    def from_json(d: dict[str, Any]) -> ClaimItem:
        return ClaimItem(d["claim"], d["measured"], d["status"])


@dataclass(frozen=True)
class ClaimViolation:
    """A claim that fails at an enumerated n: both numbers and the witness input."""

    claim: str  # the claim's key (gamma_lower, x_max_upper, margin_lower)
    n: int
    claimed: str
    measured: Fraction | str
    witness: Any  # the input (a list of symbols), or None when none was exhibited
    meaning: str

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "n": self.n,
            "claimed": self.claimed,
            "measured": _q(self.measured),
            "witness": self.witness,
            "meaning": self.meaning,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ClaimViolation:
        return ClaimViolation(
            d["claim"], d["n"], d["claimed"], d["measured"], d["witness"], d["meaning"]
        )


@dataclass(frozen=True)
class ClaimsEntry:
    """The ``claims`` entry of one length: does the claim range apply, and what held."""

    applies: bool
    undecided: int = 0
    items: dict[str, ClaimItem] = field(default_factory=dict)  # by claim key, claim order
    violation_details: tuple[ClaimViolation, ...] = ()
    violation_count: int | None = None  # as read from a file (else the details' count)

    @property
    def violations(self) -> int:
        vc = self.violation_count
        return len(self.violation_details) if vc is None else vc

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "applies": self.applies,
            "violations": self.violations,
            "undecided": self.undecided,
        }
        if self.applies:
            d["claims"] = {k: v.to_json() for k, v in self.items.items()}
            d["violation_details"] = [v.to_json() for v in self.violation_details]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> ClaimsEntry:
        items = d.get("claims") or {}
        return ClaimsEntry(
            bool(d.get("applies")),
            d.get("undecided") or 0,
            {k: ClaimItem.from_json(v) for k, v in items.items()},
            tuple(ClaimViolation.from_json(v) for v in d.get("violation_details", [])),
            d["violations"],
        )

    def held(self, expected: dict[str, str]) -> bool:
        """Every claim of ``expected`` (key → the claim's text at n) held, none undecided,
        and the entry was made for those very claims (a result for an older claim fails)."""
        if self.violations or self.undecided:
            return False
        for key, text in expected.items():
            it = self.items.get(key)
            if it is None or it.status != "holds" or it.claim != text:
                return False
        return True


@dataclass(frozen=True)
class HeadGapBound:
    """One head's compiler bound at n beside its measured gap."""

    layer: int
    head: int
    bound: Fraction | str | None
    measured: Fraction | str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "head": self.head,
            "bound": _gap_q(self.bound),
            "measured": _gap_q(self.measured),
        }


@dataclass(frozen=True)
class GapViolation:
    """A bound above a measured gap: the model's γ(n) (``head`` None) or one head's."""

    head: tuple[int, int] | None
    bound: Fraction | str | None
    measured: Fraction | str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "head": None if self.head is None else list(self.head),
            "bound": _gap_q(self.bound),
            "measured": _gap_q(self.measured),
        }


@dataclass(frozen=True)
class GapBoundEntry:
    """The ``compiler_gap_bound`` entry of one length (a compiled RASP program).

    Built by :func:`gap_bound_entry` (exact values), read back strictly by :meth:`from_json`
    (``certify --checked``) and tolerantly by :meth:`read` (reports and the terminal: the
    written texts, ``stated_holds`` as the file says)."""

    expression: str | None
    bound: Fraction | str | None
    measured: Fraction | str | None
    violations: tuple[GapViolation, ...]
    heads: tuple[HeadGapBound, ...]
    stated_holds: bool | None = None  # None: computed from the violations

    @property
    def holds(self) -> bool:
        return not self.violations if self.stated_holds is None else self.stated_holds

    def to_json(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "bound": _gap_q(self.bound),
            "measured": _gap_q(self.measured),
            "holds": self.holds,
            "violations": [v.to_json() for v in self.violations],
            "heads": [h.to_json() for h in self.heads],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> GapBoundEntry:
        vs = tuple(
            GapViolation(None if v["head"] is None else tuple(v["head"]), v["bound"], v["measured"])
            for v in d["violations"]
        )
        heads = tuple(
            HeadGapBound(h["layer"], h["head"], h["bound"], h["measured"]) for h in d["heads"]
        )
        return GapBoundEntry(d["expression"], d["bound"], d["measured"], vs, heads)

    @staticmethod
    def read(d: Any) -> GapBoundEntry | None:
        """A result file's entry for a report, from any JSON without an exception: None when
        it is not a non-empty object; values are the written texts (a falsy value reads as
        None: ∞), malformed violations and heads read as absent parts."""
        if not isinstance(d, dict) or not d:
            return None
        e = d.get("expression")
        vs = d.get("violations")
        hs = d.get("heads")
        return GapBoundEntry(
            None if e is None else str(e),
            _gap_text(d.get("bound")),
            _gap_text(d.get("measured")),
            tuple(_read_violation(v) for v in vs) if isinstance(vs, list) else (),
            tuple(
                HeadGapBound(
                    h["layer"], h["head"], _gap_text(h.get("bound")), _gap_text(h.get("measured"))
                )
                for h in (hs if isinstance(hs, list) else [])
                if isinstance(h, dict)
                and isinstance(h.get("layer"), int)
                and isinstance(h.get("head"), int)
            ),
            bool(d.get("holds")),
        )


def _gap_text(x: Any) -> str | None:
    return str(x) if x else None


def _read_violation(v: Any) -> GapViolation:
    """A written violation, tolerantly (the count is what reports show)."""
    if not isinstance(v, dict):
        return GapViolation(None, None, None)
    h = v.get("head")
    ok = isinstance(h, list) and len(h) == 2 and all(isinstance(x, int) for x in h)
    head = (h[0], h[1]) if ok else None
    return GapViolation(head, _gap_text(v.get("bound")), _gap_text(v.get("measured")))


def gap_bound_entry(model: Any, rec: Any) -> GapBoundEntry | None:
    """The compiler's bounds at this length beside the measured gaps (``check``; None for
    a model that is not a compiled RASP program with gap bounds).

    ``holds`` is False when a bound is above the measured γ(n) (or a head's measured gap):
    the compiler's lemma failed on this model, a finding (exit 1). Exact rationals throughout.
    """
    ref = model.reference
    if ref is None or ref.kind != "rasp" or ref.gap_bound is None:
        return None
    n = rec.n
    violations: list[GapViolation] = []
    b = bound_at(ref.gap_bound, n)
    if b is not None and rec.gamma is not None and rec.gamma < b:
        violations.append(GapViolation(None, b, rec.gamma))
    heads = []
    for li, hi, expr in ref.head_gap_bounds:
        hb = bound_at(expr, n)
        layer = rec.layers[li]
        g = layer.heads[hi].gamma if layer.heads is not None else None
        heads.append(HeadGapBound(li, hi, hb, g))
        if hb is not None and g is not None and g < hb:
            violations.append(GapViolation((li, hi), hb, g))
    return GapBoundEntry(ref.gap_bound, b, rec.gamma, tuple(violations), tuple(heads))


@dataclass(frozen=True)
class LengthEntries:
    """What a result file says at one length about claims and compiler gap bounds."""

    n: int
    claims: ClaimsEntry | None
    gap_bound: GapBoundEntry | None


def _entry(row: dict[str, Any], key: str, parse: Any) -> Any:
    v = row.get(key)
    if not isinstance(v, dict):
        return None
    try:
        return parse(v)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # a malformed entry holds nothing


def length_entries(data: Any, model_name: str | None = None) -> list[LengthEntries] | None:
    """The claims and gap-bound entries of a check result's lengths (malformed entries read
    as absent); None when ``data`` is not an ``exactattn-result/1`` document (for
    ``model_name``, when given)."""
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        return None
    if model_name is not None and data.get("model") != model_name:
        return None
    out = []
    for row in data.get("lengths", []):
        if not isinstance(row, dict) or not isinstance(row.get("n"), int):
            continue
        out.append(
            LengthEntries(
                row["n"],
                _entry(row, "claims", ClaimsEntry.from_json),
                _entry(row, "compiler_gap_bound", GapBoundEntry.from_json),
            )
        )
    return out


def result_model(data: Any) -> str | None:
    """The model name of a JSON document that has one (a result file's ``model``)."""
    m = data.get("model") if isinstance(data, dict) else None
    return m if isinstance(m, str) else None


def result_model_sha256(data: Any) -> str | None:
    """The content digest of the model a JSON document was made of (``model_sha256``; None in
    files written before results carried it)."""
    h = data.get("model_sha256") if isinstance(data, dict) else None
    return h if isinstance(h, str) else None
