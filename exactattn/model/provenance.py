"""A model's content digest and its ``built_by`` record: what a proof of its claims is about.

A claim justified by ``proofs/`` is a theorem about the model a builder produces, not about
whatever weights sit next to it in a file. So a builder records how it built the model
(``built_by``: the builder, its arguments, our version and the model's digest) and
``exactattn certify`` rebuilds it from that record and compares (exactattn/certificate/
rederive.py). The digest is the one identity of a model's content: result files name it
(``model_sha256``), checkpoints are bound to it, and ``certify --checked`` trusts a result
only for the model it was made of.

The digest is the SHA-256 of :func:`canonical_text`: the model's JSON with keys sorted, no
whitespace, ASCII, every number as its exact text (a JSON number keeps its literal, never a
binary float), and without the keys that change no number and no claim (:data:`NOT_HASHED`).
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactattn.core.errors import ModelError
from exactattn.core.numbers import JsonConstant, JsonNumber
from exactattn.core.version import __version__

BUILT_BY = "built_by"
NOT_HASHED = ("name", "description", "meta", BUILT_BY)
"""Top-level keys that document a model without changing its meaning or claims."""
MAX_BUILDER_NAME = 40
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIX = (
    'write {"builder": "<name>", "args": {…}, "exactattn": "<version>", "model_sha256": "<hex>"} '
    "as `exactattn build` does, or remove built_by (then no claim counts as proved)"
)


def _canon(x: Any, out: list[str], path: str) -> None:
    if x is None or isinstance(x, bool):
        out.append(json.dumps(x))
    elif isinstance(x, JsonConstant):
        out.append(str(x))  # NaN/Infinity: refused by the loader anyway; text, never a float
    elif isinstance(x, JsonNumber):
        out.append(str(x))  # the literal as written: exact
    elif isinstance(x, str):
        out.append(json.dumps(str(x), ensure_ascii=True))
    elif isinstance(x, int):
        out.append(str(x))  # a builder's dict: the literal `json` would write
    elif isinstance(x, Fraction):  # as model_from_dict reads it
        out.append(
            str(x.numerator)
            if x.denominator == 1
            else json.dumps(f"{x.numerator}/{x.denominator}", ensure_ascii=True)
        )
    elif isinstance(x, Mapping):
        out.append("{")
        for i, k in enumerate(sorted(x, key=str)):
            if i:
                out.append(",")
            out.append(json.dumps(str(k), ensure_ascii=True))
            out.append(":")
            _canon(x[k], out, f"{path}.{k}")
        out.append("}")
    elif isinstance(x, (list, tuple)):
        out.append("[")
        for i, v in enumerate(x):
            if i:
                out.append(",")
            _canon(v, out, f"{path}[{i}]")
        out.append("]")
    else:  # a float has already lost exactness; anything else is not JSON
        raise ModelError(path or "model", f"{type(x).__name__} is not exact JSON", "use int or str")


def meaning(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The model without the keys that change no number and no claim (:data:`NOT_HASHED`)."""
    return {k: v for k, v in raw.items() if k not in NOT_HASHED}


def canonical_text(raw: Mapping[str, Any]) -> str:
    """The canonical serialization the digest is taken of (see the module docstring)."""
    out: list[str] = []
    _canon(meaning(raw), out, "")
    return "".join(out)


_DIGESTS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def model_sha256(model: Any) -> str:
    """The content digest of a :class:`~exactattn.model.types.Model` (memoized) or of a raw
    model dict (a file's tree or a builder's dict)."""
    if isinstance(model, Mapping):
        return hashlib.sha256(canonical_text(model).encode("ascii")).hexdigest()
    got = _DIGESTS.get(model)
    if got is None:
        got = _DIGESTS[model] = model_sha256(model.source)
    return got


# --------------------------------------------------------------------------- built_by


@dataclass(frozen=True)
class BuiltBy:
    """``built_by``: ``builder`` (a name ``certify`` knows how to rerun), ``args`` (its
    keyword arguments as JSON), ``version`` (exactattn's), ``model_sha256`` (the digest of
    the model as the builder wrote it)."""

    builder: str
    args: Mapping[str, Any]
    version: str
    model_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "builder": self.builder,
            "args": dict(self.args),
            "exactattn": self.version,
            "model_sha256": self.model_sha256,
        }


def _arg_ok(x: Any, depth: int = 0) -> bool:
    if x is None or isinstance(x, (bool, str)):
        return not isinstance(x, JsonConstant)
    if isinstance(x, list) and depth < 2:
        return all(_arg_ok(v, depth + 1) for v in x)
    return False


def parse_built_by(raw: Any, path: str = BUILT_BY) -> BuiltBy:
    """Validate a ``built_by`` object (ModelError naming the JSON path on any problem).

    Arguments are strings, JSON numbers, booleans, null, or lists of them (two levels)."""
    if not isinstance(raw, Mapping):
        raise ModelError(path, "expected an object", _FIX)
    keys = ("builder", "args", "exactattn", "model_sha256")
    for k in raw:
        if k not in keys and not str(k).startswith("x-"):
            raise ModelError(
                f"{path}.{k}", f"unknown key '{k}'", f"allowed here: {', '.join(keys)}"
            )
    for k in keys:
        if k not in raw:
            raise ModelError(path, f"missing required key '{k}'", _FIX)
    b, args, v, h = raw["builder"], raw["args"], raw["exactattn"], raw["model_sha256"]
    if not isinstance(b, str) or isinstance(b, JsonNumber) or not b or len(b) > MAX_BUILDER_NAME:
        raise ModelError(f"{path}.builder", "expected a builder name", 'e.g. "dyck"')
    if not isinstance(v, str) or isinstance(v, JsonNumber) or not v or len(v) > MAX_BUILDER_NAME:
        raise ModelError(f"{path}.exactattn", "expected a version string", 'e.g. "0.2.0"')
    if not isinstance(h, str) or isinstance(h, JsonNumber) or not _HEX64.fullmatch(str(h)):
        raise ModelError(
            f"{path}.model_sha256", "expected 64 lowercase hex digits", "write the model's SHA-256"
        )
    if not isinstance(args, Mapping):
        raise ModelError(f"{path}.args", "expected an object of keyword arguments", _FIX)
    for k, a in args.items():
        if not _arg_ok(a):
            raise ModelError(
                f"{path}.args.{k}",
                "expected a string, number, boolean, null or a list of them",
                "write the argument as `exactattn build` records it",
            )
    return BuiltBy(str(b), dict(args), str(v), str(h))


def stamp(model: dict[str, Any], builder: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``model`` with its ``built_by`` record (last key): how ``builder`` made it, with which
    keyword ``args`` (JSON values), so ``certify`` can rebuild it. The args are recorded as
    given; a builder option added later is one more entry."""
    body = {k: v for k, v in model.items() if k != BUILT_BY}
    rec = BuiltBy(builder, dict(args), __version__, model_sha256(body))
    return {**body, BUILT_BY: rec.to_json()}
