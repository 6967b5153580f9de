"""Typed readers of the witness objects a result holds (JSON data inside the records).

A :class:`~exactattn.results.Witness` keeps its JSON data as written (so results round-trip
byte for byte); renderers, the terminal and :mod:`exactattn.testing` read it through these
views instead of spelling its keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.numbers import parse_decimal
from exactattn.results.bounds import BoundsRecord, TauStarRecord
from exactattn.results.claims import GapBoundEntry
from exactattn.results.entry import ABSENT, LayerEntry, LengthEntry
from exactattn.results.extensions import compiler_gap
from exactattn.results.settings import CheckSettings
from exactattn.results.stop import stop_label


def _word(x: Any) -> tuple[str, ...] | None:
    return None if x is None else tuple(str(t) for t in x)


@dataclass(frozen=True)
class GammaWitness:
    """Where γ(n) is attained: the input, layer, head, query and the two keys."""

    input: tuple[str, ...] | None
    layer: Any
    head: Any
    query: Any
    top_key: Any
    other_key: Any

    @staticmethod
    def from_json(d: dict[str, Any]) -> GammaWitness:
        return GammaWitness(
            _word(d.get("input")),
            d.get("layer"),
            d.get("head"),
            d.get("query"),
            d.get("top_key"),
            d.get("other_key"),
        )


@dataclass(frozen=True)
class PositionWitness:
    """An input and a position in it (where a layer's error is attained, a hard tie …)."""

    input: tuple[str, ...] | None
    position: Any

    @staticmethod
    def from_json(d: dict[str, Any]) -> PositionWitness:
        return PositionWitness(_word(d.get("input")), d.get("position"))


def witness_input(data: Any) -> tuple[str, ...] | None:
    """The input a witness names: its ``input`` field, or the data itself when it is the
    input (``first_undecided``)."""
    if isinstance(data, dict):
        return _word(data.get("input"))
    return _word(data)


def decisions(detail: Any) -> tuple[Any, Any]:
    """(hard, soft) decisions of a disagreement's detail (JSON data; None when absent)."""
    if not isinstance(detail, dict):
        return None, None
    return detail.get("hard"), detail.get("soft")


# ---------------------------------------------------------------------------------------------
# a result file read for a report (tolerant of absent extensions)


@dataclass(frozen=True)
class Written:
    """A certified real as the file writes it: outward-rounded ends (None: unbounded)."""

    lower: str | None
    upper: str | None
    missing: str | None = None  # the first end the file does not have at all

    @staticmethod
    def from_json(d: Any) -> Written | None:
        if d is None:
            return None
        lo, hi = d.get("lower"), d.get("upper")
        missing = next((k for k in ("lower", "upper") if k not in d), None)
        return Written(None if lo is None else str(lo), None if hi is None else str(hi), missing)


@dataclass(frozen=True)
class LayerView:
    """One layer of one length: activation maximum, certified error and its witness."""

    index: int
    kind: str
    activation_max: Any  # exact rational text (None: absent)
    error: Written | None
    error_witness: PositionWitness | None

    @staticmethod
    def from_json(d: dict[str, Any]) -> LayerView:
        return LayerView.of(LayerEntry.parse(d, "layer"))

    @staticmethod
    def of(e: LayerEntry) -> LayerView:
        """From the layer's parsed entry (:mod:`exactattn.results.entry`)."""
        ew = e.error_witness
        return LayerView(
            e.index,
            "?" if e.kind is ABSENT else e.kind,
            e.activation_max,
            Written.from_json(e.error),
            None if ew is None else PositionWitness.from_json(ew),
        )


@dataclass(frozen=True)
class ReferenceView:
    """Mismatches with the model's reference (counts as written; ABSENT: not in the file)."""

    hard: Any
    soft: Any
    undefined: Any


@dataclass(frozen=True)
class LengthView:
    """One length of a result file, every field the reports show, typed."""

    n: int
    inputs: Any  # int, or ABSENT
    gamma: Any  # exact rational text; None: ∞ (no gap)
    x_max: Any
    min_margin: Any
    tau: Written | None
    layers: tuple[LayerView, ...]
    invariant: Any  # "holds" / "fails" / "undecided" / None / ABSENT
    disagreements: Any
    undecided: Any
    first_disagreement: tuple[str, ...] | None
    reference: ReferenceView | None
    gamma_witness: GammaWitness | None
    bounds: BoundsRecord | None
    tau_star: TauStarRecord | None
    compiler_gap: GapBoundEntry | None
    entry: dict[str, Any]  # the entry as read (closed forms of files without them)
    tie_positions: int | None = None  # output positions where the hard meaning ties

    def layer(self, index: int) -> LayerView | None:
        return next((x for x in self.layers if x.index == index), None)

    @staticmethod
    def from_json(d: dict[str, Any]) -> LengthView:
        """A per-length entry read for a report, through the one parse of the shape
        (:class:`~exactattn.results.entry.LengthEntry`, which says why records and views
        are two readers of it)."""
        e = LengthEntry.parse(d)
        rm, gw = e.value("reference_mismatches"), e.value("gamma_witness")
        b, ts = e.value("bounds"), e.value("tau_star")
        return LengthView(
            n=e.n,
            inputs=e.inputs,
            gamma=e.value("gamma"),
            x_max=e.value("x_max"),
            min_margin=e.value("min_margin"),
            tau=Written.from_json(e.value("tau")),
            layers=tuple(LayerView.of(x) for x in e.layers),
            invariant=e.invariant,
            disagreements=e.disagreements,
            undecided=e.undecided,
            first_disagreement=_word(e.value("first_disagreement")),
            reference=None
            if rm is None
            else ReferenceView(
                rm.get("hard", ABSENT), rm.get("soft", ABSENT), e.value("reference_undefined")
            ),
            gamma_witness=None if gw is None else GammaWitness.from_json(gw),
            bounds=None if b is None else BoundsRecord.from_json(b),
            tau_star=TauStarRecord.from_json(ts) if ts else None,
            compiler_gap=compiler_gap(d),
            entry=d,
            tie_positions=(e.value("hard_ties") or {}).get("positions"),
        )


@dataclass(frozen=True)
class LayerInfo:
    """A layer of the model as the result describes it."""

    index: int
    kind: str
    heads: int | None = None

    @property
    def label(self) -> str:
        """``attention, 2 heads`` / ``ffn``."""
        if self.heads is None:
            return self.kind
        return f"{self.kind}, {self.heads} head{'s' if self.heads != 1 else ''}"


@dataclass(frozen=True)
class ModelInfo:
    """``model_info``: what the report says about the model (None: not in the file)."""

    alphabet: tuple[str, ...] | None = None
    bos: str | None = None
    eos: str | None = None
    d: int | None = None
    output: str | None = None
    temperature: str | None = None
    layers: tuple[LayerInfo, ...] = ()

    @staticmethod
    def from_json(d: dict[str, Any]) -> ModelInfo:
        layers = tuple(
            LayerInfo(int(e["index"]), str(e.get("kind", "?")), e.get("heads"))
            for e in d.get("layers") or []
        )
        return ModelInfo(
            _word(d.get("alphabet")),
            d.get("bos"),
            d.get("eos"),
            d.get("d"),
            d.get("output"),
            d.get("temperature"),
            layers,
        )


@dataclass(frozen=True)
class VerdictView:
    """The verdict as written (``ok`` may be null)."""

    ok: bool | None
    status: str | None
    summary: str

    @staticmethod
    def from_json(d: dict[str, Any]) -> VerdictView:
        return VerdictView(d.get("ok"), d.get("status"), str(d.get("summary", "")))


@dataclass(frozen=True)
class ResultView:
    """A result file read for a report: the top level typed, lengths sorted by n, closed
    forms as written (None when absent)."""

    format: Any
    model: str
    info: ModelInfo
    settings: CheckSettings
    verdict: VerdictView | None
    lengths: tuple[LengthView, ...]
    closed_forms: dict[str, Any] | None
    interrupted: bool = False  # Ctrl-C
    stopped: str | None = None  # another early end ("cluster lost"; absent in older files)

    @property
    def ended_early(self) -> str | None:
        """How the run ended early, in fixed words (None: it did not): ``interrupted`` or
        ``stopped: cluster lost``. Files of older versions said ``interrupted`` for a lost
        cluster too."""
        return stop_label(self.interrupted, self.stopped)

    @staticmethod
    def from_json(result: dict[str, Any]) -> ResultView:
        rows = sorted(result.get("lengths", []), key=lambda row: row["n"])
        ns = [row["n"] for row in rows]
        v = result.get("verdict")
        return ResultView(
            result.get("format"),
            str(result.get("model", "model")),
            ModelInfo.from_json(result.get("model_info") or {}),
            CheckSettings.from_json(
                result.get("settings") or {}, min(ns) if ns else 0, max(ns) if ns else 0
            ),
            None if v is None else VerdictView.from_json(v),
            tuple(_length_view(row) for row in rows),
            result.get("closed_forms"),
            bool(result.get("interrupted")),
            None if result.get("stopped") is None else str(result["stopped"]),
        )


def _length_view(row: dict[str, Any]) -> LengthView:
    """One length's view; a malformed entry of a hand-made or damaged file is bad input
    (exit 2, naming the length), never a crash (a file ``check`` wrote always reads)."""
    try:
        return LengthView.from_json(row)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        what = f"{type(exc).__name__}: {exc}"
        raise UsageError(
            f"lengths[n={row.get('n')!r}]: malformed entry ({what}); fix: rewrite it with "
            "`exactattn check`, or correct it by docs/model-format.md"
        ) from None


@dataclass(frozen=True)
class FirstFailure:
    """A failing input of one length, as the terminal names it after a ``check`` (issue 39):
    ``kind`` is ``reference`` (a meaning differs from the reference; ``expected`` is the
    reference's output), ``disagreement`` (soft decides unlike hard), ``undecided`` (the soft
    decision could not be certified) or ``invariant`` (ε > 1, or not certified ≤ 1, after
    ``layer``, which feeds another)."""

    n: int
    kind: str
    input: tuple[str, ...]
    expected: Any = None
    layer: int | None = None

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    @property
    def is_invariant(self) -> bool:
        return self.kind == "invariant"


def first_failures(view: ResultView) -> list[FirstFailure]:
    """Every length's first failing inputs, in length order (one per kind and length)."""
    out: list[FirstFailure] = []
    for r in view.lengths:
        e = r.entry
        mm = e.get("first_reference_mismatch")
        if isinstance(mm, dict) and _word(mm.get("input")) is not None:
            out.append(FirstFailure(r.n, "reference", _word(mm["input"]), mm.get("expected")))
        if r.first_disagreement is not None:
            out.append(FirstFailure(r.n, "disagreement", r.first_disagreement))
        fu = witness_input(e.get("first_undecided"))
        if fu is not None:
            out.append(FirstFailure(r.n, "undecided", fu))
        if r.invariant in ("fails", "undecided"):
            for layer in r.layers[:-1]:  # the last layer feeds no other
                w = layer.error_witness
                up = layer.error.upper if layer.error is not None else None
                if w is None or w.input is None or up is None:
                    continue
                if up == "inf" or parse_decimal(up) > 1:
                    out.append(FirstFailure(r.n, "invariant", w.input, layer=layer.index))
                    break
    return out


def format_of(document: Any) -> Any:
    """The ``format`` tag of a JSON document (None when it is not an object or has none)."""
    return document.get("format") if isinstance(document, dict) else None


# ---------------------------------------------------------------------------------------------
# witness data as the engine records it (the JSON a LengthRecord's witnesses write)


def gamma_witness_data(
    word: Any, layer: int, head: int, query: int, top_key: int, other_key: int
) -> dict[str, Any]:
    """Where γ(n) is attained (``gamma_witness``)."""
    return {
        "input": list(word),
        "layer": layer,
        "head": head,
        "query": query,
        "top_key": top_key,
        "other_key": other_key,
    }


def position_witness_data(word: Any, position: int) -> dict[str, Any]:
    """An input and a position (``error_witness``)."""
    return {"input": list(word), "position": position}


def tie_witness_data(word: Any, position: int, soft: Any = None) -> dict[str, Any]:
    """The first hard tie (``hard_ties.first``): input, position, the soft decision there."""
    return {"input": list(word), "position": position, "soft": soft}


def with_tie_soft(data: dict[str, Any], soft: Any) -> dict[str, Any]:
    """A tie witness with the soft decision at its position filled in."""
    return {**data, "soft": soft}


def mismatch_witness_data(word: Any, meaning: str, expected: Any, got: Any) -> dict[str, Any]:
    """The first reference mismatch (``first_reference_mismatch``) of one meaning."""
    return {"input": list(word), "meaning": meaning, "expected": expected, "got": got}


def disagreement_data(word: Any, hard: Any, soft: Any) -> dict[str, Any]:
    """The first disagreement: its input and the two decisions (``…_detail``)."""
    return {"input": list(word), "detail": {"hard": hard, "soft": soft}}
