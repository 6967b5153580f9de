"""When a claim justified by ``proofs/`` counts as proved: ``certify`` can re-derive the model.

The proofs of ``proofs/claims.md`` are about what a builder produces (Propositions D, L, R), so
a model file's citation of them is only as good as the file's claim to *be* that builder's
output. :func:`rederive` reruns the builder named in the file's ``built_by`` record with its
recorded arguments (a compiled RASP model: the compiler on its ``reference.program``) and
compares the result with the file in canonical form (exactattn/model/provenance.py): every
number, every expression, every claim. Equal: the ``proofs/`` justifications stand. Anything
else — no record, an unknown builder, arguments the builder refuses, one entry changed — and
every claim is conditional, whatever its justification says, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exactattn.constructions.dyck import build_dyck
from exactattn.constructions.induction import build_induction
from exactattn.constructions.ltl import compile_ltl
from exactattn.constructions.rasp_compile import compile_program
from exactattn.core.errors import ExactAttnError
from exactattn.core.jsonio import plain
from exactattn.core.limits import clip
from exactattn.core.version import __version__
from exactattn.model import Model
from exactattn.model.claimed import COORD_RANGES, HEAD_PROFILES, UNIQUE_TOP, ModelClaims
from exactattn.model.provenance import canonical_text, meaning, model_sha256
from exactattn.rasp.parse import parse_program


class _Unbuildable(ValueError):
    """The record names a builder whose input is not in the model (e.g. no program)."""


def _rasp(args: dict[str, Any], model: Model) -> dict[str, Any]:
    ref = model.reference
    if ref is None or ref.kind != "rasp" or ref.program is None:
        raise _Unbuildable("the model has no RASP program (reference.program) to recompile")
    name = args.pop("name", "program")
    if not isinstance(name, str):
        raise _Unbuildable("args.name is not a string")
    return compile_program(parse_program(ref.program, name), **args).model


REBUILDERS: dict[str, Callable[[dict[str, Any], Model], dict[str, Any]]] = {
    "dyck": lambda args, model: build_dyck(**args),
    "ltl": lambda args, model: compile_ltl(**args),
    "induction": lambda args, model: build_induction(**args),
    "rasp": _rasp,
}
"""``built_by.builder`` → rebuild from (its recorded keyword arguments, the loaded model):
a new builder option is one more recorded argument, passed through as a keyword."""


@dataclass(frozen=True)
class Rederivation:
    """What ``certify`` found: the model's digest, the builder it names, and whether the
    builder reproduces the file (``reason``: why not)."""

    model_sha256: str
    builder: str | None
    rederived: bool
    reason: str | None


def _show(x: Any) -> str:
    return clip(canonical_text({"v": x})[5:-1], 40) if x is not _MISSING else "nothing"


_MISSING = object()


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The JSON path of the first entry (in canonical order) where ``a`` and ``b`` differ,
    with both values, or None when they are equal in canonical form."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                got, want = a.get(k, _MISSING), b.get(k, _MISSING)
                return f"{p} (the file has {_show(got)}, the builder {_show(want)})"
            d = first_difference(a[k], b[k], p)
            if d is not None:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d is not None:
                return d
        if len(a) != len(b):
            return f"{path} (the file has {len(a)} entries, the builder {len(b)})"
        return None
    if canonical_text({"v": a}) == canonical_text({"v": b}):
        return None
    return f"{path} (the file has {_show(a)}, the builder {_show(b)})"


def rederive(model: Model) -> Rederivation:
    """Rebuild ``model`` from its ``built_by`` record and compare (module docstring)."""
    digest = model_sha256(model)
    bb = model.built_by
    if bb is None:
        return Rederivation(
            digest, None, False, "no builder recorded (the model file has no built_by)"
        )
    fn = REBUILDERS.get(bb.builder)
    if fn is None:
        known = ", ".join(sorted(REBUILDERS))
        return Rederivation(
            digest, bb.builder, False, f"unknown builder '{clip(bb.builder, 40)}' (known: {known})"
        )
    what = f"`build {bb.builder}`"
    try:
        rebuilt = fn(plain(dict(bb.args)), model)
    except (ExactAttnError, ValueError, TypeError, RecursionError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Rederivation(
            digest, bb.builder, False, f"{what} refuses the recorded arguments: {clip(why, 160)}"
        )
    if model_sha256(rebuilt) == digest:  # equal canonical texts (SHA-256: no collision known)
        return Rederivation(digest, bb.builder, True, None)
    where = first_difference(meaning(model.source), meaning(rebuilt)) or "(canonical form)"
    old = ""
    if bb.version != __version__:
        old = f" (built by exactattn {clip(bb.version, 40)}, this is {__version__})"
    return Rederivation(
        digest, bb.builder, False, f"the model differs from what {what} produces{old}: {where}"
    )


def conditional_keys(claims: ModelClaims, red: Rederivation) -> tuple[str, ...]:
    """The claims a certificate is conditional on: the ``"user"`` ones, or every claim when
    the model is not re-derived (then a ``proofs/`` citation proves nothing about it)."""
    if red.rederived:
        return tuple(claims.conditional)
    keys = [c.key for c in claims.items()]
    if claims.unique_top is not None:
        keys.append(UNIQUE_TOP)
    if claims.coordinate_ranges is not None:
        keys.append(COORD_RANGES)
    if claims.head_profiles is not None:
        keys.append(HEAD_PROFILES)
    return tuple(keys)
