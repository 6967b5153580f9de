"""The per-length entry of ``exactattn-result/1`` (and of a checkpoint shard), read once.

:class:`LengthEntry` is the one parse of a per-length dict: every key of the shape, its
value exactly as written (text stays text, witness objects stay the same objects), checked
for its JSON type, :data:`ABSENT` when the file does not have the key, and the keys this
version does not know kept in ``extra``. :meth:`LengthRecord.to_json
<exactattn.results.LengthRecord.to_json>` writes the shape; :data:`LENGTH_KEYS` lists it.

Two typed readers are built on this parse, because they answer different questions:

* :meth:`LengthRecord.from_json <exactattn.results.LengthRecord.from_json>` (checkpoint
  shards): exact values to *merge* — Fractions, exact dyadic endpoints (``"m*2^e"``), witnesses
  with their order keys rebuilt from the alphabet. Every field must be present. A record
  cannot hold a result file's decimal text: an endpoint like ``"0.0123"`` becomes a dyadic
  point rounded outward, which writes back as different text.
* :class:`LengthView <exactattn.results.views.LengthView>` (reports, the terminal, the claims
  ledger): any file, older or hand-made, shown *as written* — the decimal text of the file,
  ABSENT for what an older version did not write, and no alphabet needed.

Merging the two would make reports re-print values (other bytes) or records carry text, so
they stay two views of one parse. A malformed entry raises ``ValueError`` naming the key
(reports: exit 2 naming the length; checkpoints: the shard is recomputed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Absent:
    """A key the file does not have (shown as an em dash; ``None`` is a written null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent()

LENGTH_KEYS = (
    "n",
    "inputs",
    "gamma",
    "gamma_witness",
    "x_max",
    "tau",
    "layers",
    "invariant",
    "disagreements",
    "first_disagreement",
    "first_disagreement_detail",
    "undecided",
    "first_undecided",
    "min_margin",
    "accepted",
    "reference_mismatches",
    "reference_compared",
    "reference_undefined",
    "first_reference_mismatch",
    "precision_bits",
    "reference_compared_positions",
    "hard_ties",
    "float_settled",
    "bounds",
    "tau_star",
)
"""Every key of the per-length shape this version writes, in the writer's order (``bounds``
and ``tau_star`` only with ``--bounds``/``--find-tau``). Other keys of an entry are
extensions (``claims``, ``compiler_gap_bound``) kept in :attr:`LengthEntry.extra`."""

_COUNTS = (
    "inputs",
    "disagreements",
    "undecided",
    "accepted",
    "reference_compared",
    "reference_undefined",
    "precision_bits",
    "reference_compared_positions",
    "float_settled",
)
_TEXTS = ("gamma", "x_max", "min_margin", "invariant")
_OBJECTS = (
    "gamma_witness",
    "tau",
    "reference_mismatches",
    "first_reference_mismatch",
    "hard_ties",
    "bounds",
)
_WORDS = ("first_disagreement", "first_undecided")


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "…"


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _expect(ok: bool, where: str, what: str, x: Any) -> None:
    """Raise ``ValueError`` naming the field unless ``ok``."""
    if not ok:
        raise ValueError(f"{where}: expected {what}, got {_show(x)}")


def _opt_str(x: Any, where: str) -> None:
    _expect(x is None or isinstance(x, str), where, "a string or null", x)


def _opt_obj(x: Any, where: str) -> None:
    _expect(x is None or isinstance(x, dict), where, "an object or null", x)


def _check(key: str, x: Any) -> None:
    """The JSON type of one written value (None and ABSENT pass: absent or null)."""
    if x is None or x is ABSENT:
        return
    if key in _COUNTS:
        _expect(_is_int(x), key, "an integer or null", x)
    elif key in _TEXTS:
        _opt_str(x, key)
    elif key in _OBJECTS:
        _opt_obj(x, key)
    elif key in _WORDS:
        ok = isinstance(x, list) and all(isinstance(t, str) for t in x)
        _expect(ok, key, "a list of tokens or null", x)


@dataclass(frozen=True)
class HeadEntry:
    """One head of one layer as written (``max_top`` is ABSENT in older files)."""

    index: int
    gamma: str | None
    max_nontop: Any
    max_top: Any
    tau: dict[str, Any] | None

    @staticmethod
    def parse(h: Any, where: str) -> HeadEntry:
        _expect(isinstance(h, dict), where, "an object", h)
        index, gamma, tau = h.get("index"), h.get("gamma"), h.get("tau")
        _expect(_is_int(index), f"{where}.index", "an integer", index)
        _opt_str(gamma, f"{where}.gamma")
        _opt_obj(tau, f"{where}.tau")
        return HeadEntry(
            index, gamma, h.get("max_nontop", ABSENT), h.get("max_top", ABSENT), tau or None
        )


@dataclass(frozen=True)
class LayerEntry:
    """One layer of one length as written (``heads`` None: the key is absent, an FFN)."""

    index: int
    kind: Any  # a string, or ABSENT
    activation_max: str | None
    error: dict[str, Any] | None
    error_witness: dict[str, Any] | None
    heads: tuple[HeadEntry, ...] | None

    @staticmethod
    def parse(e: Any, where: str) -> LayerEntry:
        _expect(isinstance(e, dict), where, "an object", e)
        index, kind, act = e.get("index"), e.get("kind", ABSENT), e.get("activation_max")
        _expect(_is_int(index), f"{where}.index", "an integer", index)
        _expect(kind is ABSENT or isinstance(kind, str), f"{where}.kind", "a string", kind)
        _opt_str(act, f"{where}.activation_max")
        for k in ("error", "error_witness"):
            _opt_obj(e.get(k), f"{where}.{k}")
        heads = None
        if "heads" in e:
            _expect(isinstance(e["heads"], list), f"{where}.heads", "a list", e["heads"])
            heads = tuple(
                HeadEntry.parse(h, f"{where}.heads[{i}]") for i, h in enumerate(e["heads"])
            )
        return LayerEntry(index, kind, act, e.get("error"), e.get("error_witness"), heads)


@dataclass(frozen=True)
class LengthEntry:
    """One per-length entry as written: each field the written value (ABSENT: no such key)."""

    n: int
    inputs: Any
    gamma: Any
    gamma_witness: Any
    x_max: Any
    tau: Any
    layers: tuple[LayerEntry, ...]
    invariant: Any
    disagreements: Any
    first_disagreement: Any
    first_disagreement_detail: Any
    undecided: Any
    first_undecided: Any
    min_margin: Any
    accepted: Any
    reference_mismatches: Any
    reference_compared: Any
    reference_undefined: Any
    first_reference_mismatch: Any
    precision_bits: Any
    reference_compared_positions: Any
    hard_ties: Any
    float_settled: Any
    bounds: Any
    tau_star: Any
    has_layers: bool = True  # whether the entry has a ``layers`` key
    extra: dict[str, Any] = field(default_factory=dict)  # keys not in LENGTH_KEYS, in order
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def parse(d: Any) -> LengthEntry:
        """Check the JSON types of a per-length dict and keep every value as written."""
        _expect(isinstance(d, dict), "a length's entry", "an object", d)
        if "n" not in d:
            raise KeyError("n")
        _expect(_is_int(d["n"]), "n", "an integer", d["n"])
        values = {k: d.get(k, ABSENT) for k in LENGTH_KEYS if k not in ("n", "layers")}
        for k, v in values.items():
            _check(k, v)
        rm = values["reference_mismatches"]
        if isinstance(rm, dict):
            for side in ("hard", "soft"):
                x = rm.get(side)
                _expect(x is None or _is_int(x), f"reference_mismatches.{side}", "an integer", x)
        layers = d.get("layers", [])
        _expect(isinstance(layers, list), "layers", "a list", layers)
        return LengthEntry(
            n=d["n"],
            layers=tuple(LayerEntry.parse(e, f"layers[{i}]") for i, e in enumerate(layers)),
            has_layers="layers" in d,
            extra={k: v for k, v in d.items() if k not in LENGTH_KEYS},
            raw=d,
            **values,
        )

    def required(self, key: str) -> Any:
        """A value a record needs (checkpoints): ABSENT raises ``KeyError``."""
        v = getattr(self, key)
        if v is ABSENT or (key == "layers" and not self.has_layers):
            raise KeyError(key)
        return v

    def value(self, key: str) -> Any:
        """A value that may be absent, as None (a record's optional fields)."""
        v = getattr(self, key)
        return None if v is ABSENT else v
