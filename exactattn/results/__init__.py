"""The result record: the one owner of the ``exactattn-result/1`` schema.

Every measurement of a check lives here as a typed record holding exact values
(``Fraction`` for hard quantities, exact dyadic endpoints for certified ones). Only this
module knows the JSON key names; everything else builds, merges or reads records.

Records *merge*: :func:`merge_lengths` is associative and commutative, and its outcome
does not depend on how the inputs of a length were split into parts or in which order the
parts are merged. Counts add, maxima and minima combine, and every witness carries an
order key (the input's rank in the enumeration order first) so that ties are broken the
same way whichever part saw them first. That is what lets shards, processes and resumed
runs produce byte-identical results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.numbers import (
    arb_lower_str,
    arb_upper_str,
    decimal_to_arb,
    frac_str,
    parse_rational,
)
from exactattn.model import AttentionLayer, Model
from exactattn.model.provenance import model_sha256
from exactattn.results.bounds import BoundsRecord, TauStarRecord
from exactattn.results.chainstats import CHAIN_KEY, ChainStats
from exactattn.results.closedforms import ClosedForms
from exactattn.results.entry import ABSENT, LengthEntry
from exactattn.results.settings import CheckSettings
from exactattn.results.stop import stop_text
from exactattn.results.views import decisions

RESULT_FORMAT = "exactattn-result/1"

# ---------------------------------------------------------------------------
# order of inputs
# ---------------------------------------------------------------------------


def input_rank(alphabet: Sequence[str], word: Sequence[str]) -> int:
    """Position of ``word`` among all words of its length, in enumeration order.

    Inputs are enumerated lexicographically in the order the alphabet is listed, so the
    rank is the word read as a number in base |alphabet|.
    """
    index = {a: i for i, a in enumerate(alphabet)}
    k = len(alphabet)
    r = 0
    for t in word:
        r = r * k + index[t]
    return r


def _parse_q(text: str | None) -> Fraction | None:
    """A rational written by :func:`frac_str` (``"1/6"``, ``"-2"``)."""
    if text is None:
        return None
    return parse_rational(text, "result", max_exponent=None)


def _same(a: arb | None, b: arb | None) -> bool:
    """Equality of exact points where ``None`` is +∞."""
    if a is None or b is None:
        return a is None and b is None
    return bool(a == b)


def _q(x: Fraction | None) -> str | None:
    return None if x is None else frac_str(x)


def _min_opt(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _add_opt(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


def first_of(a: Witness | None, b: Witness | None) -> Witness | None:
    """The witness with the smaller order key (either may be absent)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a.key <= b.key else b


# ---------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Witness:
    """A JSON-ready description of where something happened, with its order key.

    ``key`` orders witnesses of the same kind (smaller wins) and is not written out.
    """

    key: tuple[Any, ...]
    data: Any


def disagreement_decisions(w: Witness | None) -> tuple[Any, Any]:
    """(hard, soft) decisions of a first-disagreement witness, as JSON data (None, None
    without one)."""
    if w is None:
        return None, None
    return decisions(w.data["detail"])


def point_str(p: arb) -> str:
    """An exact point (a dyadic m·2^e) as text that reads back exactly: ``"m*2^e"``."""
    m, e = p.mid().man_exp()
    return f"{int(m)}*2^{int(e)}" if int(m) else "0"


def parse_point(text: str, up: bool) -> arb:
    """Read an endpoint back: exact ``"m*2^e"``, or a decimal (rounded outward to a point)."""
    if "*2^" in text:
        m, e = text.split("*2^")
        return arb((int(m), int(e)))
    ball = decimal_to_arb(text)
    return arb(ball.upper() if up else ball.lower())


@dataclass(frozen=True)
class Interval:
    """A certified real ``[lower, upper]``: exact dyadic points (radius-0 ``arb``), ``upper``
    ``None`` for +∞. Points, not Fractions: an error of e^(-2^40) is an ordinary dyadic
    whose Fraction would have a 10^12-bit denominator."""

    lower: arb
    upper: arb | None

    def lower_text(self) -> str:
        """The lower end as a result writes it (rounded down)."""
        return arb_lower_str(self.lower)

    def upper_text(self) -> str:
        """The upper end as a result writes it (rounded up; ``inf`` for +∞)."""
        return arb_upper_str(self.upper) if self.upper is not None else "inf"

    def to_json(self, exact: bool = False) -> dict[str, str]:
        """Outward-rounded decimals; ``exact`` keeps the exact endpoints (checkpoints)."""
        if exact:
            return {
                "lower": point_str(self.lower),
                "upper": point_str(self.upper) if self.upper is not None else "inf",
            }
        return {
            "lower": arb_lower_str(self.lower),
            "upper": arb_upper_str(self.upper) if self.upper is not None else "inf",
        }

    @staticmethod
    def from_json(d: dict[str, str]) -> Interval:
        up = d["upper"]
        return Interval(
            parse_point(d["lower"], False), None if up == "inf" else parse_point(up, True)
        )


def _max_upper(a: arb | None, b: arb | None) -> arb | None:
    """max of two exact upper ends where ``None`` is +∞."""
    if a is None or b is None:
        return None
    return a if a >= b else b


@dataclass(frozen=True)
class ErrorRecord:
    """max ‖soft − hard‖∞ after one layer over the inputs seen: lower/upper ends, witness.

    The witness is the first input (in enumeration order) attaining the largest upper end.
    """

    lower: arb  # exact points
    upper: arb | None  # None: +∞ (an enclosure that is not finite)
    witness: Witness | None

    def merge(self, other: ErrorRecord) -> ErrorRecord:
        lower = self.lower if self.lower >= other.lower else other.lower
        upper = _max_upper(self.upper, other.upper)
        cands = [r.witness for r in (self, other) if r.witness is not None and r.upper == upper]
        wit = None
        for w in cands:
            wit = first_of(wit, w)
        return ErrorRecord(lower, upper, wit)

    def interval(self) -> Interval:
        return Interval(self.lower, self.upper)


@dataclass(frozen=True)
class HeadRecord:
    """One attention head's hard measurements at one length."""

    index: int
    gamma: Fraction | None
    max_nontop: int
    max_top: int
    tau: Interval | None

    def merge(self, other: HeadRecord) -> HeadRecord:
        return HeadRecord(
            self.index,
            _min_opt(self.gamma, other.gamma),
            max(self.max_nontop, other.max_nontop),
            max(self.max_top, other.max_top),
            self.tau if self.tau is not None else other.tau,
        )


@dataclass(frozen=True)
class LayerRecord:
    """One layer at one length: largest activation, certified error, heads."""

    index: int
    kind: str
    activation_max: Fraction
    error: ErrorRecord | None  # None when the soft meaning was not evaluated
    heads: tuple[HeadRecord, ...] | None  # attention layers only

    def merge(self, other: LayerRecord) -> LayerRecord:
        if self.error is None:
            err = other.error
        elif other.error is None:
            err = self.error
        else:
            err = self.error.merge(other.error)
        heads = self.heads
        if self.heads is not None and other.heads is not None:
            heads = tuple(a.merge(b) for a, b in zip(self.heads, other.heads, strict=True))
        return LayerRecord(
            self.index, self.kind, max(self.activation_max, other.activation_max), err, heads
        )


@dataclass(frozen=True)
class HardTies:
    """Output positions where the hard meaning itself makes no decision.

    An argmax tie, or an accept read-out exactly at its threshold. These are not flips:
    the soft meaning cannot disagree with a decision that was never made. ``expected``
    counts the positions where the reference also marks the output undefined.
    """

    positions: int = 0
    inputs: int = 0
    expected: int = 0
    witness: Witness | None = None  # first input with a hard tie

    def merge(self, other: HardTies) -> HardTies:
        return HardTies(
            self.positions + other.positions,
            self.inputs + other.inputs,
            self.expected + other.expected,
            first_of(self.witness, other.witness),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "positions": self.positions,
            "inputs": self.inputs,
            "expected": self.expected,
            "first": self.witness.data if self.witness else None,
        }


@dataclass(frozen=True)
class ReferenceRecord:
    """Comparison with the model's reference (oracle)."""

    hard: int = 0
    soft: int | None = 0  # None when the soft meaning was not evaluated
    compared: int = 0  # inputs the reference has an answer for
    compared_positions: int = 0  # output positions compared (argmax/value outputs)
    undefined: int = 0  # output positions the reference marks undefined
    first: Witness | None = None  # first mismatch: hard ones before soft ones, then by input

    def merge(self, other: ReferenceRecord) -> ReferenceRecord:
        return ReferenceRecord(
            self.hard + other.hard,
            _add_opt(self.soft, other.soft),
            self.compared + other.compared,
            self.compared_positions + other.compared_positions,
            self.undefined + other.undefined,
            first_of(self.first, other.first),
        )


@dataclass(frozen=True)
class LengthRecord:
    """Every measurement of one length n (or of a part of its inputs).

    ``soft`` says whether the soft meaning was evaluated; the soft fields are then
    counts (else ``None``). ``bounds`` and ``tau_star`` are computed on a whole length
    after merging (typed records of :mod:`exactattn.results.bounds`).
    """

    n: int
    inputs: int
    soft: bool
    x_max: Fraction
    gamma: Fraction | None
    gamma_witness: Witness | None
    tau: Interval | None
    layers: tuple[LayerRecord, ...]
    disagreements: int | None
    first_disagreement: Witness | None  # data: {"input": [...], "detail": {...}}
    undecided: int | None
    first_undecided: Witness | None
    min_margin: Fraction | None
    accepted: int | None
    reference: ReferenceRecord | None
    hard_ties: HardTies | None
    precision_bits: int | None
    float_settled: int | None = None  # inputs the float filter settled (no arb needed)
    bounds: BoundsRecord | None = None
    tau_star: TauStarRecord | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # what verifies the claims of Theorem S (coordinate_ranges, head_profiles); checkpoints
    # only (results/chainstats.py)
    chain: ChainStats | None = None

    # -- derived ------------------------------------------------------------------
    def invariant(self) -> str | None:
        """ε ≤ 1 after every layer that feeds another: holds / fails / undecided."""
        if not self.soft:
            return None
        feeding = [layer.error for layer in self.layers[:-1]]
        if all(e is not None and e.upper is not None and e.upper <= 1 for e in feeding):
            return "holds"
        if any(e is not None and e.lower > 1 for e in feeding):
            return "fails"
        return "undecided"

    # -- merging ------------------------------------------------------------------
    def merge(self, other: LengthRecord) -> LengthRecord:
        """The record of the union of two disjoint sets of inputs of the same length."""
        if (self.n, self.soft, self.tau, len(self.layers)) != (
            other.n,
            other.soft,
            other.tau,
            len(other.layers),
        ):
            raise ValueError("cannot merge records of different lengths or settings")
        if self.bounds is not None or other.bounds is not None or self.tau_star or other.tau_star:
            raise ValueError("bounds and τ* belong to a whole length: merge before computing them")
        g, gw = self.gamma, self.gamma_witness
        if other.gamma is not None and (
            g is None or (other.gamma, other.gamma_witness.key) < (g, gw.key)  # type: ignore[union-attr]
        ):
            g, gw = other.gamma, other.gamma_witness
        ref = None
        if self.reference is not None and other.reference is not None:
            ref = self.reference.merge(other.reference)
        ties = None
        if self.hard_ties is not None and other.hard_ties is not None:
            ties = self.hard_ties.merge(other.hard_ties)
        return LengthRecord(
            n=self.n,
            inputs=self.inputs + other.inputs,
            soft=self.soft,
            x_max=max(self.x_max, other.x_max),
            gamma=g,
            gamma_witness=gw,
            tau=self.tau,
            layers=tuple(a.merge(b) for a, b in zip(self.layers, other.layers, strict=True)),
            disagreements=_add_opt(self.disagreements, other.disagreements),
            first_disagreement=first_of(self.first_disagreement, other.first_disagreement),
            undecided=_add_opt(self.undecided, other.undecided),
            first_undecided=first_of(self.first_undecided, other.first_undecided),
            min_margin=_min_opt(self.min_margin, other.min_margin),
            accepted=_add_opt(self.accepted, other.accepted),
            reference=ref,
            hard_ties=ties,
            precision_bits=(
                None
                if self.precision_bits is None and other.precision_bits is None
                else max(self.precision_bits or 0, other.precision_bits or 0)
            ),
            float_settled=_add_opt(self.float_settled, other.float_settled),
            chain=(
                other.chain
                if self.chain is None
                else self.chain
                if other.chain is None
                else self.chain.merge(other.chain)
            ),
        )

    # -- JSON -----------------------------------------------------------------------
    def to_json(self, exact: bool = False) -> dict[str, Any]:
        """The per-length entry of ``exactattn-result/1``; ``exact`` keeps exact error
        endpoints (used for checkpoints, so that a resumed run merges exact values)."""
        layers = []
        for layer in self.layers:
            entry: dict[str, Any] = {
                "index": layer.index,
                "kind": layer.kind,
                "activation_max": frac_str(layer.activation_max),
            }
            if layer.error is not None:
                entry["error"] = layer.error.interval().to_json(exact)
                entry["error_witness"] = layer.error.witness.data if layer.error.witness else None
            else:
                entry["error"] = None
                entry["error_witness"] = None
            if layer.heads is not None:
                entry["heads"] = [
                    {
                        "index": h.index,
                        "gamma": _q(h.gamma),
                        "max_nontop": h.max_nontop,
                        "max_top": h.max_top,
                        "tau": h.tau.to_json(exact) if h.tau is not None else None,
                    }
                    for h in layer.heads
                ]
            layers.append(entry)
        ref = self.reference
        fd = self.first_disagreement
        res: dict[str, Any] = {
            "n": self.n,
            "inputs": self.inputs,
            "gamma": _q(self.gamma),
            "gamma_witness": self.gamma_witness.data if self.gamma_witness else None,
            "x_max": frac_str(self.x_max),
            "tau": self.tau.to_json(exact) if self.tau is not None else None,
            "layers": layers,
            "invariant": self.invariant(),
            "disagreements": self.disagreements,
            "first_disagreement": fd.data["input"] if fd else None,
            "first_disagreement_detail": fd.data["detail"] if fd else None,
            "undecided": self.undecided,
            "first_undecided": self.first_undecided.data if self.first_undecided else None,
            "min_margin": _q(self.min_margin),
            "accepted": self.accepted,
            "reference_mismatches": (
                {"hard": ref.hard, "soft": ref.soft} if ref is not None else None
            ),
            "reference_compared": ref.compared if ref is not None else None,
            "reference_undefined": ref.undefined if ref is not None else None,
            "first_reference_mismatch": ref.first.data if ref and ref.first else None,
            "precision_bits": self.precision_bits,
            "reference_compared_positions": ref.compared_positions if ref is not None else None,
            "hard_ties": self.hard_ties.to_json() if self.hard_ties is not None else None,
            "float_settled": self.float_settled,
        }
        if self.bounds is not None:
            res["bounds"] = self.bounds.to_json()
        if self.tau_star is not None:
            res["tau_star"] = self.tau_star.to_json()
        for k, v in self.extra.items():
            res.setdefault(k, v)
        if exact and self.chain is not None:
            res[CHAIN_KEY] = self.chain.to_json()
        return res

    @staticmethod
    def from_json(d: dict[str, Any], alphabet: Sequence[str]) -> LengthRecord:
        """Read a per-length entry back (checkpoint shards: exact endpoints); witness order
        keys are rebuilt from the inputs. The dict is parsed once by
        :class:`~exactattn.results.entry.LengthEntry` (which also says why reports read the
        same entry through :class:`~exactattn.results.views.LengthView` instead)."""
        e = LengthEntry.parse(d)

        def rank(word: Sequence[str] | None) -> int:
            return input_rank(alphabet, word) if word is not None else -1

        def present(x: Any, what: str) -> Any:
            if x is ABSENT:
                raise KeyError(what)
            return x

        layers = []
        for entry in e.required("layers"):
            err = None
            if entry.error is not None:
                iv = Interval.from_json(entry.error)
                w = entry.error_witness
                err = ErrorRecord(
                    iv.lower,
                    iv.upper,
                    Witness((rank(w["input"]),), w) if w else None,
                )
            heads = None
            if entry.heads is not None:
                heads = tuple(
                    HeadRecord(
                        h.index,
                        _parse_q(h.gamma),
                        present(h.max_nontop, "max_nontop"),
                        0 if h.max_top is ABSENT else h.max_top,
                        Interval.from_json(h.tau) if h.tau else None,
                    )
                    for h in entry.heads
                )
            layers.append(
                LayerRecord(
                    entry.index,
                    present(entry.kind, "kind"),
                    _parse_q(entry.activation_max),
                    err,
                    heads,
                )
            )
        gw = e.value("gamma_witness")
        soft = e.value("disagreements") is not None
        ref = None
        if e.value("reference_mismatches") is not None:
            rm = e.reference_mismatches
            fr = e.value("first_reference_mismatch")
            ref = ReferenceRecord(
                rm["hard"],
                rm["soft"],
                e.value("reference_compared") or 0,
                e.value("reference_compared_positions") or 0,
                e.value("reference_undefined") or 0,
                Witness((0 if fr["meaning"] == "hard" else 1, rank(fr["input"])), fr)
                if fr
                else None,
            )
        ties = None
        if e.value("hard_ties") is not None:
            t = e.hard_ties
            f = t.get("first")
            ties = HardTies(
                t["positions"],
                t["inputs"],
                t["expected"],
                Witness((rank(f["input"]), f["position"]), f) if f else None,
            )
        fd = e.value("first_disagreement")
        fu = e.value("first_undecided")
        bounds, tau_star = e.value("bounds"), e.value("tau_star")
        return LengthRecord(
            n=e.n,
            inputs=e.required("inputs"),
            soft=soft,
            x_max=_parse_q(e.required("x_max")),  # type: ignore[arg-type]
            gamma=_parse_q(e.required("gamma")),
            gamma_witness=Witness(
                (gw["layer"], gw["head"], rank(gw["input"]), gw["query"], gw["other_key"]), gw
            )
            if gw
            else None,
            tau=Interval.from_json(e.tau) if e.value("tau") else None,
            layers=tuple(layers),
            disagreements=e.value("disagreements"),
            first_disagreement=Witness(
                (rank(fd),), {"input": fd, "detail": e.value("first_disagreement_detail")}
            )
            if fd
            else None,
            undecided=e.value("undecided"),
            first_undecided=Witness((rank(fu),), fu) if fu else None,
            min_margin=_parse_q(e.value("min_margin")),
            accepted=e.value("accepted"),
            reference=ref,
            hard_ties=ties,
            precision_bits=e.value("precision_bits"),
            float_settled=e.value("float_settled"),
            bounds=BoundsRecord.from_json(bounds) if bounds is not None else None,
            tau_star=TauStarRecord.from_json(tau_star) if tau_star else None,
            extra={k: v for k, v in e.extra.items() if k != CHAIN_KEY},
            chain=ChainStats.from_json(e.extra[CHAIN_KEY]) if CHAIN_KEY in e.extra else None,
        )


def merge_lengths(parts: Sequence[LengthRecord]) -> LengthRecord:
    """Merge the records of disjoint parts of one length (any order gives the same record)."""
    if not parts:
        raise ValueError("nothing to merge")
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p)
    return out


def with_gap_bound(rec: LengthRecord, entry: Any) -> LengthRecord:
    """A copy with the compiler's gap bound at this length (``compiler_gap_bound``; a
    :class:`~exactattn.results.claims.GapBoundEntry`)."""
    return replace(rec, extra={**rec.extra, "compiler_gap_bound": entry.to_json()})


def with_claims(rec: LengthRecord, entry: Any) -> LengthRecord:
    """A copy with the model's claims checked at this length (``claims``; a
    :class:`~exactattn.results.claims.ClaimsEntry`)."""
    return replace(rec, extra={**rec.extra, "claims": entry.to_json()})


def with_extras(rec: LengthRecord, **kw: Any) -> LengthRecord:
    """A copy with whole-length results (``bounds``, ``tau_star``) attached."""
    return replace(rec, **kw)


# ---------------------------------------------------------------------------
# verdict and the whole check
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the check concluded: clean, problems or undecided, with a one-line summary."""

    status: str
    summary: str

    @property
    def ok(self) -> bool:
        return self.status == "clean"

    @property
    def exit_code(self) -> int:
        return {"clean": 0, "problems": 1, "undecided": 3, "incomplete": 130}[self.status]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "status": self.status, "summary": self.summary}


UNDECIDED_NOTE = (
    "a soft read-out exactly at its threshold is decided only for rational τ with one final "
    "attention layer (docs/model-format.md)"
)


def verdict_of(
    lengths: Sequence[LengthRecord],
    max_prec: int,
    incomplete: tuple[int, int] | None = None,
    interrupted: bool = False,
    stopped: str | None = None,
) -> Verdict:
    """Problems: flips, ε > 1 where the lemma needs ε ≤ 1, reference mismatches at defined
    positions, bound violations. Undecided: a comparison no precision settled. Hard ties
    are reported but are not problems. ``incomplete`` (the lengths asked for, when the run
    has not finished them all) turns a would-be "clean" into "incomplete": a result file
    never claims more than was checked. A run that ended early (``interrupted``: Ctrl-C;
    ``stopped``: e.g. a lost cluster) says so in every summary, problems included.
    """
    problems = []
    undecided = 0
    first_undecided = None
    for r in lengths:
        if first_undecided is None and r.first_undecided is not None:
            first_undecided = (r.n, " ".join(r.first_undecided.data))
        if r.disagreements:
            problems.append(f"n={r.n}: {r.disagreements} disagreement(s)")
        inv = r.invariant()
        if inv == "fails":
            problems.append(f"n={r.n}: ε ≤ 1 fails")
        ref = r.reference
        if ref is not None and (ref.hard or ref.soft):
            problems.append(f"n={r.n}: reference mismatches hard {ref.hard}, soft {ref.soft}")
        if r.bounds is not None and r.bounds.violations:
            problems.append(f"n={r.n}: {r.bounds.violations} bound violation(s)")
        cl = r.extra.get("claims")
        if isinstance(cl, dict):  # claimed bounds checked at this length (issue 23)
            problems.extend(claim_problems(r.n, cl))
            undecided += cl.get("undecided") or 0
        gb = r.extra.get("compiler_gap_bound")
        if gb and not gb.get("holds", True):
            problems.append(f"n={r.n}: the compiler's gap bound is above the measured gap")
        undecided += r.undecided or 0
        if inv == "undecided":
            undecided += 1
    ended = stop_text(interrupted, stopped) if incomplete is not None else None
    tail = (
        ""
        if ended is None or incomplete is None
        else f" (n = {incomplete[0]}..{incomplete[1]} was asked for and the run was {ended})"
    )
    if problems:
        return Verdict("problems", "; ".join(problems) + tail)
    if undecided:
        where = (
            f" (first: n = {first_undecided[0]}, input '{first_undecided[1]}')"
            if first_undecided
            else ""
        )
        return Verdict(
            "undecided",
            f"{undecided} comparison(s) could not be certified at {max_prec} bits{where}; "
            + UNDECIDED_NOTE
            + tail,
        )
    ns = [r.n for r in lengths]
    rng = f"n = {min(ns)}..{max(ns)}" if ns else "no lengths"
    if incomplete is not None:
        why = ended or "still running or stopped"
        return Verdict(
            "incomplete",
            f"no problem found for {rng}, but n = {incomplete[0]}..{incomplete[1]} was asked "
            f"for and the run was {why}",
        )
    return Verdict("clean", f"no problem found for {rng}")


def result_json(
    model: Model,
    settings: CheckSettings,
    verdict: Verdict,
    interrupted: bool,
    lengths: Sequence[LengthRecord],
    closed_forms: ClosedForms,
    stopped: str | None = None,
) -> dict[str, Any]:
    """A whole check in format ``exactattn-result/1``: the model's description, the
    settings, the verdict and every length (``closed_forms`` as fitted by
    :func:`exactattn.bounds.closedforms.fit_closed_forms`). ``interrupted`` is Ctrl-C only;
    ``stopped`` (one of :data:`STOP_REASONS`) is written only when a run ended early for
    another reason, so files of finished or Ctrl-C'd runs keep their bytes."""
    info_layers: list[dict[str, Any]] = []
    for li, layer in enumerate(model.layers):
        if isinstance(layer, AttentionLayer):
            info_layers.append({"index": li, "kind": "attention", "heads": len(layer.heads)})
        else:
            info_layers.append({"index": li, "kind": "ffn"})
    return {
        "format": RESULT_FORMAT,
        "model": model.name,
        "model_sha256": model_sha256(model),
        "model_info": {
            "description": model.description,
            "alphabet": list(model.alphabet),
            "bos": model.bos,
            "eos": model.eos,
            "d": model.d,
            "layers": info_layers,
            "output": model.output.kind,
            "temperature": settings.tau.record_text() or model.temperature.text,
            "reference": model.reference.kind if model.reference else None,
        },
        "settings": settings.to_json(),
        "verdict": verdict.to_json(),
        "interrupted": interrupted,
        **({"stopped": stopped} if stopped is not None else {}),
        "lengths": [r.to_json() for r in lengths],
        "closed_forms": closed_forms.to_json(),
    }


def claim_problems(n: int, entry: dict[str, Any]) -> list[str]:
    """One line per failed claim, for the verdict: n, the claim, the measured value, the input."""
    lines = []
    for d in entry.get("violation_details", []):
        w = d.get("witness")
        where = f" on input '{' '.join(w)}'" if isinstance(w, list) else ""
        lines.append(
            f"n={n}: claim {d['claim']} ({d['claimed']}) fails: measured {d['measured']}{where}"
        )
    return lines
