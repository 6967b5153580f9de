"""The ``exactattn-precision/1`` records: IEEE dtypes as deployed vs the exact hard meaning.

Typed and exact until the JSON writer: error enclosures hold their exact ends (``Fraction``,
or the float64 enclosure's binary values, ``inf`` when not finite) and are rounded outward
to 6 digits only when written; the maximum over inputs is taken on the exact ends (outward
rounding is monotone, so this writes what a maximum of the written decimals would). Model
outputs (hard, dtype, certified soft) are held as the engines return them and written by
:func:`plain_output`; a record read back from a file holds the written text instead, so
``from_json(d).to_json() == d`` for ``d = json.loads(text)`` (``core.jsonio.read_json`` turns
the diagnostic float ``layer_errors`` into text). Only this module spells the precision
format's keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from exactattn.core.numbers import interval_json

PRECISION_FORMAT = "exactattn-precision/1"

End = Fraction | float | str
"""An exact end of an enclosure (``float``: a binary value or ±inf; ``str``: as read)."""


def plain_output(x: Any) -> Any:
    """A model output as JSON: dtype arrays as float reprs, rationals as "p/q" text."""
    if isinstance(x, np.ndarray):
        return [repr(float(v)) for v in x.reshape(-1)]
    if isinstance(x, Fraction):
        return f"{x.numerator}/{x.denominator}" if x.denominator != 1 else str(x.numerator)
    if isinstance(x, (list, tuple)):
        return [plain_output(v) for v in x]
    return x


def _val(x: End) -> Fraction | float:
    if isinstance(x, str):
        raise TypeError("an enclosure read from a file is not widened")
    return x


@dataclass(frozen=True)
class Enclosure:
    """[lower, upper]: a certified enclosure of a nonnegative error (exact ends)."""

    lower: End
    upper: End

    def widen(self, lo: Fraction | float, hi: Fraction | float) -> Enclosure:
        """The enclosure of the larger of two errors: the larger end on each side."""
        return Enclosure(max(_val(self.lower), lo), max(_val(self.upper), hi))

    @staticmethod
    def max_of(cur: Enclosure | None, lo: Fraction | float, hi: Fraction | float) -> Enclosure:
        return Enclosure(lo, hi) if cur is None else cur.widen(lo, hi)

    def texts(self) -> tuple[str, str]:
        """The written ends (decimals rounded outward, 6 digits; "inf")."""
        if isinstance(self.lower, str) and isinstance(self.upper, str):
            return self.lower, self.upper
        d = interval_json(_val(self.lower), _val(self.upper))
        return d["lower"], d["upper"]

    def to_json(self) -> dict[str, str]:
        lo, hi = self.texts()
        return {"lower": lo, "upper": hi}

    @staticmethod
    def from_json(d: dict[str, str] | None) -> Enclosure | None:
        return None if d is None else Enclosure(d["lower"], d["upper"])


@dataclass(frozen=True)
class Diagnosis:
    """Which operation broke a flipped decision (``cause``), where, and the layer errors."""

    cause: str  # overflow, underflow, absorption, rounding
    layer: int
    detail: str
    head: int | None = None
    query: int | None = None
    key: int | None = None
    top_key: int | None = None
    exact_gap: Fraction | str | None = None  # absorption: exact score difference
    layer_errors: tuple[float, ...] | None = None  # relative error per layer (diagnostic)

    def details_json(self) -> dict[str, Any]:
        """Everything but the cause, in the written order."""
        d: dict[str, Any] = {"layer": self.layer}
        for k, v in (
            ("head", self.head),
            ("query", self.query),
            ("key", self.key),
            ("top_key", self.top_key),
        ):
            if v is not None:
                d[k] = v
        g = self.exact_gap
        if g is not None:
            d["exact_gap"] = g if isinstance(g, str) else f"{g.numerator}/{g.denominator}"
        d["detail"] = self.detail
        if self.layer_errors is not None:
            d["layer_errors"] = list(self.layer_errors)
        return d

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, **self.details_json()}

    @staticmethod
    def from_json(cause: str, d: dict[str, Any]) -> Diagnosis:
        le = d.get("layer_errors")
        return Diagnosis(
            cause,
            d["layer"],
            d["detail"],
            d.get("head"),
            d.get("query"),
            d.get("key"),
            d.get("top_key"),
            d.get("exact_gap"),
            None if le is None else tuple(le),
        )


@dataclass(frozen=True)
class FirstFlip:
    """The first input of a length whose dtype decision differs from the exact hard one."""

    input: tuple[str, ...]
    family: str | None
    hard: Any
    dtype_output: Any
    diagnosis: Diagnosis
    replayed: bool  # the witness alone, in a fresh run, flips too
    soft_known: bool = False  # whether the certified soft output below was evaluated
    soft_output: Any = None  # "undecided" or the certified soft decision

    @property
    def cause(self) -> str:
        return self.diagnosis.cause

    def to_json(self) -> dict[str, Any]:
        d = {
            "input": list(self.input),
            "family": self.family,
            "hard": plain_output(self.hard),
            "dtype_output": plain_output(self.dtype_output),
            "cause": self.diagnosis.cause,
            "diagnosis": self.diagnosis.details_json(),
            "replayed": self.replayed,
        }
        if self.soft_known:
            d["soft_output"] = plain_output(self.soft_output)
        return d

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> FirstFlip | None:
        if d is None:
            return None
        return FirstFlip(
            tuple(d["input"]),
            d["family"],
            d["hard"],
            d["dtype_output"],
            Diagnosis.from_json(d["cause"], d["diagnosis"]),
            d["replayed"],
            "soft_output" in d,
            d.get("soft_output"),
        )


@dataclass(frozen=True)
class SoftCounts:
    """Certified soft decisions of a length: decided, undecided, and how many differ."""

    decided: int = 0
    undecided: int = 0
    differs_from_hard: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "decided": self.decided,
            "undecided": self.undecided,
            "differs_from_hard": self.differs_from_hard,
        }

    @staticmethod
    def from_json(d: dict[str, int] | None) -> SoftCounts | None:
        if d is None:
            return None
        return SoftCounts(d["decided"], d["undecided"], d["differs_from_hard"])


def _enc(x: Enclosure | None) -> dict[str, str] | None:
    return None if x is None else x.to_json()


@dataclass(frozen=True)
class PrecisionLength:
    """One (dtype, τ) run at one length: counts, the first flip, the error enclosures."""

    n: int
    inputs: int = 0
    flips: int = 0
    first_flip: FirstFlip | None = None
    rounding_error: Enclosure | None = None  # ‖dtype − certified soft‖∞
    softmax_error: Enclosure | None = None  # ‖certified soft − hard‖∞
    total_error: Enclosure | None = None  # ‖dtype − hard‖∞
    readout_error: Enclosure | None = None  # |dtype y − hard y| (accept read-out)
    soft: SoftCounts | None = None

    def to_json(self, legacy: frozenset[str] = frozenset()) -> dict[str, Any]:
        ff = self.first_flip
        d = {
            "n": self.n,
            "inputs": self.inputs,
            "flips": self.flips,
            "first_flip": None if ff is None else ff.to_json(),
            "rounding_error": _enc(self.rounding_error),
            "softmax_error": _enc(self.softmax_error),
            "total_error": _enc(self.total_error),
            "readout_error": _enc(self.readout_error),
        }
        if "soft" not in legacy:
            d["soft"] = None if self.soft is None else self.soft.to_json()
        return d

    @staticmethod
    def from_json(d: dict[str, Any], legacy: frozenset[str] = frozenset()) -> PrecisionLength:
        return PrecisionLength(
            d["n"],
            d["inputs"],
            d["flips"],
            FirstFlip.from_json(d["first_flip"]),
            Enclosure.from_json(d["rounding_error"]),
            Enclosure.from_json(d["softmax_error"]),
            Enclosure.from_json(d["total_error"]),
            Enclosure.from_json(d["readout_error"]),
            None if "soft" in legacy else SoftCounts.from_json(d["soft"]),
        )


@dataclass(frozen=True)
class PrecisionRun:
    """One (dtype, τ) run over many lengths."""

    dtype: str
    tau: str  # the temperature's label: "model" or the expression given
    first_flip_n: int | None
    lengths: tuple[PrecisionLength, ...]

    def to_json(self, legacy: frozenset[str] = frozenset()) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "tau": self.tau,
            "first_flip_n": self.first_flip_n,
            "lengths": [e.to_json(legacy) for e in self.lengths],
        }

    @staticmethod
    def from_json(d: dict[str, Any], legacy: frozenset[str] = frozenset()) -> PrecisionRun:
        return PrecisionRun(
            d["dtype"],
            d["tau"],
            d["first_flip_n"],
            tuple(PrecisionLength.from_json(e, legacy) for e in d["lengths"]),
        )


@dataclass(frozen=True)
class PrecisionSettings:
    """What was run: dtypes, temperatures, backend, and which inputs (``mode``)."""

    dtypes: tuple[str, ...]
    taus: tuple[str, ...]
    seed: int
    backend: str
    backend_version: str | None  # None: not recorded (a file from before issue 26, LEGACY)
    mode: str  # family, inputs, enumerate
    certified: bool
    families: tuple[str, ...] = ()  # mode family
    ns: tuple[int, ...] = ()  # mode family
    min_n: int | None = None  # mode enumerate
    max_n: int | None = None  # mode enumerate

    def to_json(self, legacy: frozenset[str] = frozenset()) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dtypes": list(self.dtypes),
            "taus": list(self.taus),
            "seed": self.seed,
        }
        if "backend" not in legacy:
            d["backend"] = self.backend
            d["backend_version"] = self.backend_version
        if self.mode == "family":
            d["families"] = list(self.families)
            d["ns"] = list(self.ns)
        d["mode"] = self.mode
        if self.mode == "enumerate":
            d["min_n"] = self.min_n
            d["max_n"] = self.max_n
        if "certified" not in legacy:
            d["certified"] = self.certified
        return d

    def describe(self) -> str:
        """What was run, in one sentence (the report's settings line)."""
        what = {
            "family": f"families {', '.join(self.families)} at n = {', '.join(map(str, self.ns))}",
            "enumerate": f"every input of length {self.min_n}..{self.max_n}",
            "inputs": "the inputs of a file",
        }.get(self.mode, self.mode)
        version = f" ({self.backend_version})" if self.backend_version else ""
        certified = "; the soft meaning certified" if self.certified else ""
        return (
            f"dtypes {', '.join(self.dtypes)}; τ: {', '.join(self.taus)}; {what}; forward pass "
            f"{self.backend}{version}{certified}."
        )

    @staticmethod
    def from_json(d: dict[str, Any], legacy: frozenset[str] = frozenset()) -> PrecisionSettings:
        """``legacy``: the keys of :data:`LEGACY` the file lacks (their documented values)."""
        backend = ("numpy", None) if "backend" in legacy else (d["backend"], d["backend_version"])
        return PrecisionSettings(
            tuple(d["dtypes"]),
            tuple(d["taus"]),
            d["seed"],
            *backend,
            d["mode"],
            False if "certified" in legacy else d["certified"],
            tuple(d.get("families", ())),
            tuple(d.get("ns", ())),
            d.get("min_n"),
            d.get("max_n"),
        )


@dataclass(frozen=True)
class PrecisionResult:
    """A whole ``exactattn-precision/1`` document (one run: also the flat keys of that run)."""

    model: str
    settings: PrecisionSettings
    runs: tuple[PrecisionRun, ...] = field(default_factory=tuple)
    interrupted: bool = False
    """Saved before every length was run: each save but the complete run's last is marked,
    so a file left by Ctrl-C, a kill or a crash says it is partial. Written only when true
    (``"interrupted": true``), so a complete file keeps the bytes of earlier versions."""
    legacy: frozenset[str] = frozenset()
    """The :data:`LEGACY` keys the file was written without (never by the current writer):
    read as their documented values and left out again by :meth:`to_json`."""
    model_sha256: str | None = None
    """The model's content digest (exactattn.model.provenance); None only with ``legacy``."""

    @property
    def flipped(self) -> bool:
        return any(r.first_flip_n is not None for r in self.runs)

    @property
    def last_n(self) -> int | None:
        """The longest length saved in any run (lengths run in increasing order)."""
        return max((e.n for r in self.runs for e in r.lengths), default=None)

    def stop_text(self) -> str | None:
        """How a partial file ended, in words (None: the run is complete)."""
        if not self.interrupted:
            return None
        n = self.last_n
        return (
            "interrupted before any length finished" if n is None else f"interrupted after n = {n}"
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": PRECISION_FORMAT,
            "model": self.model,
        }
        if "model_sha256" not in self.legacy:
            doc["model_sha256"] = self.model_sha256
        doc["settings"] = self.settings.to_json(self.legacy)
        if self.interrupted:
            doc["interrupted"] = True
        doc["runs"] = [r.to_json(self.legacy) for r in self.runs]
        if len(self.runs) == 1:
            (r,) = self.runs
            doc["dtype"] = r.dtype
            doc["tau"] = r.tau
            doc["lengths"] = [e.to_json(self.legacy) for e in r.lengths]
        return doc

    @staticmethod
    def from_json(d: dict[str, Any]) -> PrecisionResult:
        legacy = legacy_keys(d)
        return PrecisionResult(
            d["model"],
            PrecisionSettings.from_json(d["settings"], legacy),
            tuple(PrecisionRun.from_json(r, legacy) for r in d["runs"]),
            d.get("interrupted", False) is True,  # absent: complete, or written before the mark
            legacy,
            None if "model_sha256" in legacy else d["model_sha256"],
        )


LEGACY = {
    "backend": "settings.backend and settings.backend_version, added by issue 26 "
    "(--backend): absent = the numpy forward pass, the only one before; its version "
    "was not recorded (backend_version None)",
    "certified": "settings.certified in mode family, added with the certified family pass: "
    "absent = false (no certified pass ran; every length's softmax_error and "
    "rounding_error is null)",
    "soft": "each length's soft, added with the certified soft decisions: absent = null "
    "(no decision was counted)",
    "model_sha256": "the model's content digest, added by issue 41: absent = not recorded",
}
"""Keys of ``exactattn-precision/1`` files written before the key existed, and what their
absence means (docs/model-format.md, "Precision files"). A file lacks each of them
everywhere or nowhere; any other missing key is an error, never a guess."""


def legacy_keys(d: dict[str, Any]) -> frozenset[str]:
    """Which :data:`LEGACY` keys the document ``d`` lacks; ``ValueError`` when a key is
    missing in a way no earlier writer left it."""
    s = d["settings"]
    out = set()
    if "model_sha256" not in d:
        out.add("model_sha256")
    if "backend" not in s:
        if "backend_version" in s:
            raise ValueError("settings: backend_version without backend")
        out.add("backend")
    if "certified" not in s:
        if s.get("mode") != "family":
            raise ValueError(f"settings: no certified in mode {s.get('mode')!r}")
        lengths = [e for r in d["runs"] for e in r["lengths"]]
        if any(e["softmax_error"] is not None or e["rounding_error"] is not None for e in lengths):
            raise ValueError("settings: no certified, but a certified error is recorded")
        out.add("certified")
    has_soft = {"soft" in e for r in d["runs"] for e in r["lengths"]}
    if has_soft == {True, False}:
        raise ValueError("soft: in some lengths only")
    if has_soft == {False}:
        out.add("soft")
    return frozenset(out)


def runs_of(runs: Sequence[Any]) -> tuple[PrecisionRun, ...]:
    """Records of the sweeps' accumulators (anything with ``record()``)."""
    return tuple(r.record() for r in runs)
