"""Model files → validated, exact, immutable models (format ``exactattn/1``).

Every rule of ``docs/model-format.md`` is checked here, once, so the evaluators can
trust their input. Each error names the JSON path and the fix. Extensions of
format 1 that this module accepts are listed in ``docs/model-format.md``.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from exactattn.core.errors import ModelError
from exactattn.core.limits import MAX_HEADS, MAX_LAYERS, MAX_LENGTH, check_name, clip
from exactattn.core.numbers import JsonConstant, JsonNumber, load_json_text, parse_rational
from exactattn.logic.ltl import parse_ltl
from exactattn.model.claimed import parse_claims
from exactattn.model.expr import Expr, ExprError, parse_expression
from exactattn.model.provenance import BUILT_BY, parse_built_by
from exactattn.model.types import (
    DEFAULT_VALUE_TOLERANCE,
    HARD_RULES,
    MASKS,
    AcceptOutput,
    ArgmaxOutput,
    AttentionLayer,
    FFNLayer,
    Head,
    Layer,
    Mat,
    Model,
    Output,
    PositionEmbedding,
    Reference,
    ValueOutput,
    Vec,
)
from exactattn.rasp.ast import RaspError
from exactattn.rasp.check import infer
from exactattn.rasp.interpret import oracle_from_text

TOP_KEYS = {
    "format",
    "name",
    "description",
    "alphabet",
    "bos",
    "eos",
    "d",
    "embedding",
    "layers",
    "temperature",
    "output",
    "reference",
    "min_length",
    "max_length",
    # extensions (docs/model-format.md)
    "coordinates",
    "meta",
    "claims",
    "built_by",
}


def load_model(path: str | Path) -> Model:
    """Read and validate a model file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(
            str(p), f"cannot read the file: {exc.strerror}", "check the path"
        ) from None
    except UnicodeDecodeError:
        raise ModelError(str(p), "is not UTF-8 text", "save the model as UTF-8 JSON") from None
    raw = load_json_text(text, source=str(p))
    return model_from_raw(raw)


class FloatTakenExactly(UserWarning):
    """A model built from Python (or numpy) floats: each float was taken as the exact binary
    rational it is, which is rarely the decimal it was typed as (0.1 is 3602879701896397/2^55)."""


FLOATS_NOTE = "python_floats"
"""Key under ``meta`` where :func:`model_from_dict` records that floats were taken exactly."""


def model_from_dict(d: dict[str, Any]) -> Model:
    """Validate a model given as a Python dict (as built by the builders or in a notebook).

    Numbers may be ``int``, ``Fraction``, ``"p/q"`` strings, numpy arrays and scalars, and
    Python floats. A float is an exact binary rational and is taken **exactly** as that
    rational (``Fraction(0.1)`` = 3602879701896397/36028797018963968, not 1/10), never
    rounded; the model then says so: a :class:`FloatTakenExactly` warning, and
    ``model.source["meta"]["python_floats"]`` (how many, how many are not the decimal they
    print as, and one such float's path and exact value). Write ``Fraction(1, 10)`` or
    ``"1/10"`` for the decimal. NaN and ±∞ are refused.
    """
    floats: list[tuple[str, float]] = []
    raw = _to_raw(d, "$", floats)
    if floats:
        # the example: the first float that is not the decimal it prints as (0.1), if any
        off = [(p, x) for p, x in floats if Fraction(repr(x)) != Fraction(x)]
        path, x = (off or floats)[0]
        q = Fraction(x)
        exact = f"{q.numerator}/{q.denominator}" if q.denominator != 1 else str(q.numerator)
        note = {
            "count": len(floats),
            "not_their_decimal": len(off),
            "note": "Python floats taken exactly as the binary rationals they are, not as "
            "the decimals they print as; write Fraction or 'p/q' strings for decimals",
            "example": {"path": path, "float": repr(x), "exact": exact},
        }
        if isinstance(raw, dict):
            meta = raw.get("meta")
            if meta is None:
                raw["meta"] = {FLOATS_NOTE: note}
            elif isinstance(meta, dict):
                meta[FLOATS_NOTE] = note
        warnings.warn(
            FloatTakenExactly(
                f"{len(floats)} Python float(s) taken exactly as the binary rationals they are; "
                + (
                    f"{len(off)} of them not the decimal it prints as, e.g. {path} = {x!r} is "
                    f"{exact} (write Fraction or 'p/q' strings for decimals)"
                    if off
                    else f"each is the decimal it prints as (e.g. {path} = {x!r} = {exact})"
                )
            ),
            stacklevel=2,
        )
    return model_from_raw(raw)


def _to_raw(x: Any, path: str, floats: list[tuple[str, float]]) -> Any:
    if isinstance(x, (bool, np.bool_)) or x is None:
        return None if x is None else bool(x)
    if isinstance(x, (int, np.integer)):
        return JsonNumber(str(int(x)))
    if isinstance(x, (float, np.floating)):
        where = path.removeprefix("$.")
        if not math.isfinite(float(x)):
            raise ModelError(where, f"{x!r} is not a number a model can hold", "use a finite value")
        num, den = x.as_integer_ratio()  # exact (float16/32/64 are all binary rationals)
        floats.append((where, float(x) if isinstance(x, np.floating) else x))
        return _to_raw(Fraction(num, den), path, floats)
    if isinstance(x, Fraction):
        return (
            JsonNumber(str(x.numerator)) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
        )
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf" and x.dtype != object:
            raise ModelError(
                path.removeprefix("$."),
                f"a numpy array of dtype {x.dtype} is not numbers",
                "use an integer, float or object array of Fractions",
            )
        return _to_raw(x.tolist(), path, floats)  # floats stay floats: taken exactly below
    if isinstance(x, dict):
        return {k: _to_raw(v, f"{path}.{k}", floats) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_raw(v, f"{path}[{i}]", floats) for i, v in enumerate(x)]
    return x


def model_from_raw(raw: Any) -> Model:
    """Validate the output of :func:`exactattn.core.numbers.load_json_text`."""
    r = _Reader()
    return r.model(raw)


class _Reader:
    """Walks the raw JSON tree with a path, so every error can say where it is.

    Literals and expressions are parsed once per distinct text (a model with d = 10^6 writes
    "0" millions of times; parsing each one again made loading it take minutes).
    """

    def __init__(self) -> None:
        self._numbers: dict[str, Fraction] = {}
        self._exprs: dict[tuple[str, tuple[str, ...], bool], Expr] = {}

    # -- primitives ------------------------------------------------------------
    def obj(self, x: Any, path: str, keys: set[str], required: Sequence[str] = ()) -> dict:
        if not isinstance(x, dict):
            raise ModelError(
                path or "model", f"expected an object, got {_kind(x)}", "write a JSON object {…}"
            )
        for k in required:
            if k not in x:
                raise ModelError(path or "model", f"missing required key '{k}'", f'add "{k}"')
        for k in x:
            if k not in keys and not k.startswith("x-"):
                raise ModelError(
                    _join(path, k),
                    f"unknown key '{k}'",
                    f"allowed here: {', '.join(sorted(keys))} (or an 'x-…' extension key)",
                )
        return x

    def string(self, x: Any, path: str) -> str:
        if not isinstance(x, str) or isinstance(x, (JsonNumber, JsonConstant)):
            raise ModelError(
                path, f"expected a string, got {_kind(x)}", "write a JSON string in double quotes"
            )
        return str(x)

    def integer(self, x: Any, path: str, minimum: int | None = None) -> int:
        if not isinstance(x, JsonNumber):
            raise ModelError(
                path, f"expected an integer, got {_kind(x)}", "write a whole number such as 4"
            )
        v = parse_rational(x, path)
        if v.denominator != 1:
            raise ModelError(
                path, f"expected an integer, got {clip(str(x))}", "write a whole number such as 4"
            )
        if minimum is not None and v < minimum:
            raise ModelError(
                path,
                f"must be at least {minimum}, got {clip(str(v))}",
                f"use a value of at least {minimum}",
            )
        if abs(v) > MAX_LENGTH:
            raise ModelError(
                path,
                f"{clip(str(v))} is beyond the limit of {MAX_LENGTH:,} (docs/limits.md)",
                f"use a value of at most {MAX_LENGTH:,}",
            )
        return int(v)

    def number(self, x: Any, path: str) -> Fraction:
        if type(x) is JsonNumber or type(x) is str:  # never a JsonConstant (always an error)
            hit = self._numbers.get(x)
            if hit is None:
                hit = self._numbers[x] = parse_rational(x, path)
            return hit
        return parse_rational(x, path)

    def vector(self, x: Any, path: str, length: int | None, what: str = "") -> Vec:
        if not isinstance(x, list):
            raise ModelError(
                path,
                f"expected a list of numbers{what}, got {_kind(x)}",
                'write a JSON list such as [1, 0, "1/2"]',
            )
        if length is not None and len(x) != length:
            raise ModelError(
                path,
                f"expected {length} numbers{what}, got {len(x)}",
                f"give exactly {length} entries",
            )
        # known literals straight from the cache (no path string per entry: d may be 10^6)
        try:
            got = list(map(self._numbers.get, x))
        except TypeError:  # an unhashable entry (a list or object): read one by one
            got = [None] * len(x)
        for i in [i for i, g in enumerate(got) if g is None]:
            got[i] = self.number(x[i], f"{path}[{i}]")
        return tuple(got)

    def matrix(self, x: Any, path: str, rows: int | None, cols: int | None, what: str) -> Mat:
        if not isinstance(x, list) or not x or not all(isinstance(r, list) for r in x):
            raise ModelError(
                path,
                f"expected a matrix (a non-empty list of rows) {what}, got {_kind(x)}",
                "write a list of rows, e.g. [[1, 0], [0, 1]]",
            )
        if rows is not None and len(x) != rows:
            raise ModelError(
                path, f"expected {rows} rows {what}, got {len(x)}", f"give exactly {rows} rows"
            )
        ncols = cols if cols is not None else len(x[0])
        out = []
        for ri, row in enumerate(x):
            if len(row) != ncols:
                raise ModelError(
                    f"{path}[{ri}]",
                    f"row has {len(row)} entries, expected {ncols} {what}",
                    f"every row of this matrix has {ncols} entries",
                )
            out.append(self.vector(row, f"{path}[{ri}]", ncols))
        return tuple(out)

    # -- model -----------------------------------------------------------------
    def model(self, raw: Any) -> Model:
        top = self.obj(
            raw,
            "",
            TOP_KEYS,
            required=("format", "name", "alphabet", "d", "embedding", "layers", "output"),
        )
        fmt = self.string(top["format"], "format")
        if fmt != "exactattn/1":
            raise ModelError("format", f"unsupported format '{fmt}'", 'use "exactattn/1"')
        name = check_name(self.string(top["name"], "name"), "name", "model name")
        description = self.string(top.get("description", ""), "description")
        alphabet = self.alphabet(top["alphabet"])
        bos = self.special(top, "bos", alphabet)
        eos = self.special(top, "eos", alphabet)
        if bos is not None and bos == eos:
            raise ModelError(
                "eos", "bos and eos must be different tokens", "give eos its own token"
            )
        d = self.integer(top["d"], "d", minimum=1)
        tokens = list(alphabet) + [t for t in (bos, eos) if t is not None]
        token_emb, position = self.embedding(top["embedding"], d, tokens)
        temperature = self.temperature(top.get("temperature", JsonNumber("1")), "temperature")
        layers = self.layers(top["layers"], d)
        min_length = self.integer(top.get("min_length", JsonNumber("1")), "min_length", 1)
        max_length = (
            self.integer(top["max_length"], "max_length", 1) if "max_length" in top else None
        )
        if max_length is not None and max_length < min_length:
            raise ModelError(
                "max_length",
                f"max_length {max_length} is below min_length {min_length}",
                "make max_length >= min_length",
            )
        output = self.output(top["output"], d, bos is not None, eos is not None, max_length)
        if position.kind == "table":
            if max_length is None:
                raise ModelError(
                    "max_length",
                    "a position table needs max_length",
                    'add "max_length": the largest n the table covers',
                )
            need = max_length + 1 + (eos is not None)  # positions 0 .. max_length (+ EOS)
            if len(position.table) < need:
                raise ModelError(
                    "embedding.position.table",
                    f"has {len(position.table)} rows; max_length {max_length} needs {need}",
                    "add rows or lower max_length",
                )
        coordinates = None
        if "coordinates" in top:
            cs = top["coordinates"]
            if not isinstance(cs, list) or len(cs) != d:
                raise ModelError(
                    "coordinates",
                    f"expected a list of {d} names",
                    f"name each of the {d} coordinates once, in order",
                )
            coordinates = tuple(
                check_name(self.string(c, f"coordinates[{i}]"), f"coordinates[{i}]", "name")
                for i, c in enumerate(cs)
            )
        reference = (
            self.reference(top["reference"], alphabet, output, bos, eos)
            if "reference" in top and top["reference"] is not None
            else None
        )
        claims = None
        if "claims" in top:
            shape = tuple(
                len(layer.heads) if isinstance(layer, AttentionLayer) else None for layer in layers
            )
            claims = parse_claims(
                top["claims"], output.kind, min_length, coordinates=coordinates, d=d, heads=shape
            )
        built_by = parse_built_by(top[BUILT_BY]) if BUILT_BY in top else None
        if reference is not None:
            for k, (li, hi, _) in enumerate(reference.head_gap_bounds):
                layer = layers[li] if 0 <= li < len(layers) else None
                if not isinstance(layer, AttentionLayer) or not 0 <= hi < len(layer.heads):
                    raise ModelError(
                        f"reference.head_gap_bounds[{k}]",
                        f"layer {li}, head {hi} is not an attention head of this model",
                        "list only attention heads that exist (layer and head count from 0)",
                    )
        model = Model(
            name=name,
            description=description,
            alphabet=alphabet,
            bos=bos,
            eos=eos,
            d=d,
            token_embedding=token_emb,
            position=position,
            layers=layers,
            temperature=temperature,
            output=output,
            reference=reference,
            min_length=min_length,
            max_length=max_length,
            coordinates=coordinates,
            source=raw,
            claims=claims,
            built_by=built_by,
        )
        return model

    def alphabet(self, x: Any) -> tuple[str, ...]:
        if not isinstance(x, list) or not x:
            raise ModelError(
                "alphabet", "expected a non-empty list of token strings", 'write e.g. ["a", "b"]'
            )
        toks = tuple(
            check_name(self.string(t, f"alphabet[{i}]"), f"alphabet[{i}]", "token")
            for i, t in enumerate(x)
        )
        seen = set()
        for i, t in enumerate(toks):
            if t in seen:
                raise ModelError(
                    f"alphabet[{i}]", f"token '{clip(t)}' appears twice", "list each once"
                )
            seen.add(t)
        return toks

    def special(self, top: dict, key: str, alphabet: tuple[str, ...]) -> str | None:
        if key not in top or top[key] is None:
            return None
        t = check_name(self.string(top[key], key), key, f"{key} token")
        if t in alphabet:
            raise ModelError(
                key, f"'{clip(t)}' is also in the alphabet", f"use a distinct {key} token"
            )
        return t

    def embedding(
        self, x: Any, d: int, tokens: list[str]
    ) -> tuple[dict[str, Vec], PositionEmbedding]:
        e = self.obj(x, "embedding", {"token", "position"}, required=("token",))
        tok = e["token"]
        if not isinstance(tok, dict):
            raise ModelError(
                "embedding.token",
                f"expected an object, got {_kind(tok)}",
                'map every token to its vector, e.g. {"a": [1, 0]}',
            )
        for t in tok:
            if t not in tokens:
                raise ModelError(
                    f"embedding.token.{t}",
                    f"unknown token '{t}'",
                    f"tokens are the alphabet plus bos/eos: {', '.join(tokens)}",
                )
        token_emb = {}
        for t in tokens:
            if t not in tok:
                raise ModelError(
                    "embedding.token", f"no vector for token '{t}'", f'add "{t}": [{d} numbers]'
                )
            token_emb[t] = self.vector(tok[t], f"embedding.token.{t}", d, " (length d)")
        pos = e.get("position")
        if pos is None:
            return token_emb, PositionEmbedding("none")
        if isinstance(pos, dict):
            self.obj(pos, "embedding.position", {"table"}, required=("table",))
            tab = pos["table"]
            if not isinstance(tab, list) or not tab:
                raise ModelError(
                    "embedding.position.table",
                    "expected a non-empty list of rows",
                    "give one row of d numbers per position 0, 1, …",
                )
            table = tuple(
                self.vector(row, f"embedding.position.table[{p}]", d, " (length d)")
                for p, row in enumerate(tab)
            )
            return token_emb, PositionEmbedding("table", table=table)
        if isinstance(pos, list):
            if len(pos) != d:
                raise ModelError(
                    "embedding.position",
                    f"expected {d} expressions (one per coordinate), got {len(pos)}",
                    f"give exactly {d} expressions",
                )
            exprs = tuple(
                self.expression(v, f"embedding.position[{k}]", ("i", "n"), transcendental=False)
                for k, v in enumerate(pos)
            )
            return token_emb, PositionEmbedding("exprs", exprs=exprs)
        raise ModelError(
            "embedding.position",
            f'expected a list of {d} expressions or {{"table": [...]}}, got {_kind(pos)}',
            f'write {d} expressions such as "i/n", a {{"table": …}}, or leave it out',
        )

    def expression(self, x: Any, path: str, variables: Sequence[str], transcendental: bool) -> Expr:
        if isinstance(x, JsonNumber):
            text = str(x)
        elif isinstance(x, str) and not isinstance(x, JsonConstant):
            text = str(x)
        else:
            raise ModelError(
                path,
                f"expected an expression string, got {_kind(x)}",
                'write the expression as a JSON string, e.g. "1/n"',
            )
        key = (text, tuple(variables), transcendental)
        hit = self._exprs.get(key)
        if hit is not None:
            return hit
        try:
            hit = self._exprs[key] = parse_expression(
                text, variables, transcendental=transcendental
            )
            return hit
        except ExprError as exc:
            raise ModelError(
                path,
                f"bad expression '{text}': {exc}",
                "use numbers, "
                + ", ".join(variables)
                + ", + - * / ^, parentheses, min, max, floor, ceil, mod"
                + (", sqrt, log, exp" if transcendental else ""),
            ) from None

    def temperature(self, x: Any, path: str) -> Expr:
        return self.expression(x, path, ("n",), transcendental=True)

    def layers(self, x: Any, d: int) -> tuple[Layer, ...]:
        if not isinstance(x, list):
            raise ModelError(
                "layers",
                f"expected a list of layers, got {_kind(x)}",
                'write a list such as [{"kind": "attention", "heads": […]}]',
            )
        if len(x) > MAX_LAYERS:
            raise ModelError(
                "layers",
                f"{len(x):,} layers are more than the limit of {MAX_LAYERS:,} (docs/limits.md)",
                f"use at most {MAX_LAYERS:,} layers",
            )
        out: list[Layer] = []
        total_heads = 0
        for li, layer in enumerate(x):
            path = f"layers[{li}]"
            if not isinstance(layer, dict):
                raise ModelError(
                    path,
                    f"expected an object, got {_kind(layer)}",
                    'write {"kind": "attention", …} or {"kind": "ffn", …}',
                )
            kind = layer.get("kind")
            if kind == "attention":
                self.obj(layer, path, {"kind", "heads", "name"}, required=("heads",))
                heads = layer["heads"]
                if not isinstance(heads, list) or not heads:
                    raise ModelError(
                        f"{path}.heads",
                        "expected a non-empty list of heads",
                        "give at least one head",
                    )
                total_heads += len(heads)
                if total_heads > MAX_HEADS:
                    raise ModelError(
                        f"{path}.heads",
                        f"the model has {total_heads:,} or more attention heads, more than the "
                        f"limit of {MAX_HEADS:,} in all layers (docs/limits.md)",
                        f"use at most {MAX_HEADS:,} heads (checking costs heads × n² per input)",
                    )
                out.append(
                    AttentionLayer(
                        heads=tuple(
                            self.head(h, f"{path}.heads[{hi}]", d) for hi, h in enumerate(heads)
                        ),
                        name=self.opt_name(layer, path),
                    )
                )
            elif kind == "ffn":
                self.obj(
                    layer, path, {"kind", "hidden", "output", "name"}, required=("hidden", "output")
                )
                hidden = layer["hidden"]
                if not isinstance(hidden, list) or not hidden:
                    raise ModelError(
                        f"{path}.hidden",
                        "expected a non-empty list of {weight, bias}",
                        "give at least one hidden layer",
                    )
                width = d
                hs = []
                for k, h in enumerate(hidden):
                    hp = f"{path}.hidden[{k}]"
                    self.obj(h, hp, {"weight", "bias"}, required=("weight", "bias"))
                    w = self.matrix(
                        h["weight"], f"{hp}.weight", None, width, f"(columns = {width})"
                    )
                    b = self.vector(h["bias"], f"{hp}.bias", len(w), " (one per row of weight)")
                    hs.append((w, b))
                    width = len(w)
                op = f"{path}.output"
                o = self.obj(layer["output"], op, {"weight", "bias"}, required=("weight", "bias"))
                w = self.matrix(o["weight"], f"{op}.weight", d, width, f"(shape ({d}, {width}))")
                b = self.vector(o["bias"], f"{op}.bias", d, " (length d)")
                out.append(
                    FFNLayer(hidden=tuple(hs), output=(w, b), name=self.opt_name(layer, path))
                )
            else:
                raise ModelError(
                    f"{path}.kind",
                    f"unknown layer kind {kind!r}",
                    'use "attention" or "ffn" (format 1 has no other layer kinds)',
                )
        return tuple(out)

    def opt_name(self, x: dict, path: str) -> str | None:
        if "name" not in x:
            return None
        return check_name(self.string(x["name"], f"{path}.name"), f"{path}.name")

    def head(self, x: Any, path: str, d: int) -> Head:
        keys = {
            "query",
            "key",
            "query_bias",
            "key_bias",
            "score",
            "value",
            "value_bias",
            "output",
            "mask",
            "hard",
            "temperature",
            "name",
        }
        h = self.obj(x, path, keys, required=("value",))
        if "score" in h:
            for k in ("query", "key", "query_bias", "key_bias"):
                if k in h:
                    raise ModelError(
                        f"{path}.{k}", "cannot be combined with 'score'", "use one form"
                    )
            A = self.matrix(h["score"], f"{path}.score", d, d, f"(shape ({d}, {d}))")
            Q = tuple(tuple(A[r][c] for r in range(d)) for c in range(d))  # Aᵀ
            K = tuple(tuple(Fraction(int(r == c)) for c in range(d)) for r in range(d))
            zeros = tuple(Fraction(0) for _ in range(d))
            q, bq, k, bk, score_form = Q, zeros, K, zeros, True
        else:
            for k in ("query", "key"):
                if k not in h:
                    raise ModelError(
                        path, f"missing '{k}'", "give query and key, or a score matrix"
                    )
            q = self.matrix(h["query"], f"{path}.query", None, d, f"(shape (k, {d}))")
            k = self.matrix(
                h["key"], f"{path}.key", len(q), d, f"(shape ({len(q)}, {d}) like query)"
            )
            bq = (
                self.vector(h["query_bias"], f"{path}.query_bias", len(q), " (length k)")
                if "query_bias" in h
                else tuple(Fraction(0) for _ in q)
            )
            bk = (
                self.vector(h["key_bias"], f"{path}.key_bias", len(q), " (length k)")
                if "key_bias" in h
                else tuple(Fraction(0) for _ in q)
            )
            score_form = False
        v = self.matrix(h["value"], f"{path}.value", None, d, f"(shape (m, {d}))")
        m = len(v)
        bv = (
            self.vector(h["value_bias"], f"{path}.value_bias", m, " (length m)")
            if "value_bias" in h
            else tuple(Fraction(0) for _ in range(m))
        )
        if "output" in h:
            o: Mat | None = self.matrix(h["output"], f"{path}.output", d, m, f"(shape ({d}, {m}))")
        else:
            if m != d:
                raise ModelError(
                    f"{path}.value",
                    f"has {m} rows but there is no output matrix, so m must equal d = {d}",
                    f'add "output": a ({d}, {m}) matrix',
                )
            o = None
        mask_raw = self.string(h.get("mask", "none"), f"{path}.mask")
        if mask_raw not in MASKS:
            raise ModelError(
                f"{path}.mask", f"unknown mask '{mask_raw}'", "use " + ", ".join(MASKS)
            )
        hard = self.string(h.get("hard", "average"), f"{path}.hard")
        if hard not in HARD_RULES:
            raise ModelError(
                f"{path}.hard", f"unknown hard rule '{hard}'", "use " + ", ".join(HARD_RULES)
            )
        temp = (
            self.temperature(h["temperature"], f"{path}.temperature")
            if "temperature" in h
            else None
        )
        return Head(
            query=q,
            query_bias=bq,
            key=k,
            key_bias=bk,
            value=v,
            value_bias=bv,
            output=o,
            mask=MASKS[mask_raw],
            hard=hard,
            temperature=temp,
            name=self.opt_name(h, path),
            score_form=score_form,
        )

    def check_position(self, pos: str | int, bos: bool, eos: bool, max_length: int | None) -> None:
        """An accept position must exist: "bos"/"eos" need the token, 0 is BOS's slot."""
        path = "output.position"
        if pos == "bos" and not bos:
            raise ModelError(
                path, '"bos" but the model has no BOS token', 'add "bos" or read "first"'
            )
        if pos == "eos" and not eos:
            raise ModelError(
                path, '"eos" but the model has no EOS token', 'add "eos" or read "last"'
            )
        if pos == 0 and not bos:
            raise ModelError(
                path,
                "position 0 is the BOS slot, but the model has no BOS token",
                "positions without BOS start at 1 (w_1); or add a BOS token",
            )
        if isinstance(pos, int) and max_length is not None:
            top = max_length + int(eos)
            if pos > top:
                raise ModelError(
                    path,
                    f"position {pos} is beyond the last slot {top} at max_length {max_length}",
                    f"use a position of at most {top}, or 'last'",
                )

    def output(
        self,
        x: Any,
        d: int,
        top_bos: bool = False,
        top_eos: bool = False,
        max_length: int | None = None,
    ) -> Output:
        if not isinstance(x, dict):
            raise ModelError(
                "output", f"expected an object, got {_kind(x)}", 'write e.g. {"kind": "accept", …}'
            )
        kind = x.get("kind")
        if kind == "accept":
            o = self.obj(
                x,
                "output",
                {"kind", "position", "weight", "bias", "threshold"},
                required=("position", "weight", "threshold"),
            )
            pos_raw = o["position"]
            if isinstance(pos_raw, JsonNumber):
                pos: str | int = self.integer(pos_raw, "output.position", 0)
            else:
                pos = self.string(pos_raw, "output.position")
                if pos not in ("last", "first", "bos", "eos"):
                    raise ModelError(
                        "output.position",
                        f"unknown position '{pos}'",
                        'use "last", "first", "bos", "eos" or an integer',
                    )
            w = self.vector(o["weight"], "output.weight", d, " (length d)")
            b = self.number(o.get("bias", JsonNumber("0")), "output.bias")
            t = self.number(o["threshold"], "output.threshold")
            self.check_position(pos, top_bos, top_eos, max_length)
            return AcceptOutput(position=pos, weight=w, bias=b, threshold=t)
        if kind == "argmax":
            o = self.obj(
                x, "output", {"kind", "weight", "bias", "labels"}, required=("weight", "labels")
            )
            labels_raw = o["labels"]
            if not isinstance(labels_raw, list) or not labels_raw:
                raise ModelError(
                    "output.labels",
                    "expected a non-empty list of label strings",
                    'write e.g. ["yes", "no"]',
                )
            labels = tuple(
                check_name(self.string(v, f"output.labels[{i}]"), f"output.labels[{i}]", "label")
                for i, v in enumerate(labels_raw)
            )
            if len(set(labels)) != len(labels):
                raise ModelError("output.labels", "labels must be distinct", "list each label once")
            w = self.matrix(
                o["weight"], "output.weight", len(labels), d, f"(shape ({len(labels)}, {d}))"
            )
            b = (
                self.vector(o["bias"], "output.bias", len(labels), " (one per label)")
                if "bias" in o
                else tuple(Fraction(0) for _ in labels)
            )
            return ArgmaxOutput(weight=w, bias=b, labels=labels)
        if kind == "value":
            o = self.obj(x, "output", {"kind", "weight", "bias", "tolerance"}, required=("weight",))
            w = self.matrix(o["weight"], "output.weight", None, d, f"(shape (r, {d}))")
            b = (
                self.vector(o["bias"], "output.bias", len(w), " (one per row)")
                if "bias" in o
                else tuple(Fraction(0) for _ in w)
            )
            tol = (
                self.number(o["tolerance"], "output.tolerance")
                if "tolerance" in o
                else DEFAULT_VALUE_TOLERANCE
            )
            if tol < 0:
                raise ModelError("output.tolerance", "must be >= 0", "use a tolerance of 0 or more")
            return ValueOutput(weight=w, bias=b, tolerance=tol)
        raise ModelError(
            "output.kind", f"unknown output kind {kind!r}", "use accept, argmax or value"
        )

    def reference(
        self, x: Any, alphabet: tuple[str, ...], output: Output, bos: str | None, eos: str | None
    ) -> Reference:
        if not isinstance(x, dict):
            raise ModelError(
                "reference",
                f"expected an object, got {_kind(x)}",
                'write e.g. {"kind": "cases", "cases": […]}',
            )
        kind = x.get("kind")
        if kind in ("ltl", "dyck", "regex") and not isinstance(output, AcceptOutput):
            # a language says accept or reject per input; an argmax or value output has no
            # such answer to compare (this used to crash the check with a TypeError)
            raise ModelError(
                "reference.kind",
                f"a {kind} reference defines a language (accept or reject), but output.kind "
                f"is {output.kind!r}",
                "use a cases reference for argmax and value outputs, or an accept output "
                f"for a {kind} reference",
            )
        if kind == "cases":
            o = self.obj(x, "reference", {"kind", "cases"}, required=("cases",))
            cases_raw = o["cases"]
            if not isinstance(cases_raw, list):
                raise ModelError(
                    "reference.cases",
                    "expected a list of {input, output}",
                    'write e.g. [{"input": ["a"], "output": true}]',
                )
            cases: dict[tuple[str, ...], Any] = {}
            for ci, c in enumerate(cases_raw):
                cp = f"reference.cases[{ci}]"
                self.obj(c, cp, {"input", "output"}, required=("input", "output"))
                inp = c["input"]
                if not isinstance(inp, list) or not inp:
                    raise ModelError(
                        f"{cp}.input",
                        "expected a non-empty list of tokens",
                        'write e.g. ["a", "b"]',
                    )
                word = tuple(self.string(t, f"{cp}.input[{i}]") for i, t in enumerate(inp))
                for i, t in enumerate(word):
                    if t not in alphabet:
                        raise ModelError(
                            f"{cp}.input[{i}]",
                            f"unknown token '{t}'",
                            f"inputs use the alphabet: {', '.join(alphabet)}",
                        )
                cases[word] = self.case_output(c["output"], f"{cp}.output", output, len(word))
            return Reference("cases", cases=cases)
        if kind == "ltl":
            o = self.obj(x, "reference", {"kind", "formula"}, required=("formula",))
            formula = self.string(o["formula"], "reference.formula")
            try:
                parse_ltl(formula, alphabet)
            except ValueError as exc:
                raise ModelError(
                    "reference.formula", str(exc), "see docs/constructions.md"
                ) from None
            return Reference("ltl", formula=formula)
        if kind == "dyck":
            o = self.obj(x, "reference", {"kind", "pairs"}, required=("pairs",))
            pairs_raw = o["pairs"]
            if not isinstance(pairs_raw, list) or not pairs_raw:
                raise ModelError(
                    "reference.pairs",
                    'expected a list like ["()", "[]"]',
                    "list each pair as a two-character string",
                )
            pairs = []
            for i, pr in enumerate(pairs_raw):
                s = self.string(pr, f"reference.pairs[{i}]")
                if len(s) != 2 or s[0] not in alphabet or s[1] not in alphabet:
                    raise ModelError(
                        f"reference.pairs[{i}]",
                        f"'{s}' is not two alphabet symbols (opening, closing)",
                        "write each pair as a 2-character string of alphabet tokens",
                    )
                pairs.append(s)
            return Reference("dyck", pairs=tuple(pairs))
        if kind == "regex":
            o = self.obj(x, "reference", {"kind", "pattern"}, required=("pattern",))
            pattern = self.string(o["pattern"], "reference.pattern")
            if any(len(t) != 1 for t in alphabet):
                raise ModelError(
                    "reference",
                    "regex references need single-character tokens",
                    "use a cases reference, or single-character tokens",
                )
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError, ValueError) as exc:
                raise ModelError(
                    "reference.pattern",
                    f"bad regular expression: {clip(str(exc), 120)}",
                    "write a Python regular expression over the alphabet's characters",
                ) from None
            return Reference("regex", pattern=pattern)
        if kind == "rasp":
            return self.rasp_reference(x, alphabet, output)
        raise ModelError(
            "reference.kind",
            f"unknown reference kind {kind!r}",
            "use cases, ltl, dyck, regex or rasp",
        )

    def rasp_reference(self, x: dict, alphabet: tuple[str, ...], output: Output) -> Reference:
        """A RASP program (docs/rasp.md) whose interpreter is the oracle."""

        o = self.obj(
            x,
            "reference",
            {"kind", "program", "gap_bound", "head_gap_bounds", "output_scale"},
            required=("program",),
        )
        text = self.string(o["program"], "reference.program")
        try:
            prog = oracle_from_text(text)
        except RaspError as exc:
            raise ModelError("reference.program", str(exc), "see docs/rasp.md") from None
        if tuple(prog.alphabet) != tuple(alphabet):
            raise ModelError(
                "reference.program",
                "the program's alphabet differs from the model's alphabet",
                "declare the same alphabet, in the same order, in the program",
            )
        want = "accept" if isinstance(output, AcceptOutput) else "output"
        if prog.output.kind != want:
            raise ModelError(
                "reference.program",
                f"the program's output is '{prog.output.kind}' but the model's output is "
                f"{type(output).__name__}",
                "use 'accept' with accept outputs and 'output' with argmax/value outputs",
            )

        def bound(v: Any, path: str) -> str:
            b = self.string(v, path)
            if b != "inf":
                try:
                    parse_expression(b, ("n",))
                except ExprError as exc:
                    raise ModelError(path, str(exc), 'an expression in n, or "inf"') from None
            return b

        int_output = False
        if prog.output.kind == "output":
            types = {d.name: d.type for d in prog.defs}
            t = infer(prog.output.expr, types, prog.alphabet, "i")
            labels = getattr(output, "labels", None)
            rows = len(getattr(output, "weight", ())) if labels is None else 0
            if (t == "bool" and tuple(labels or ()) != ("0", "1")) or (
                t == "int" and (labels is not None or rows != 1)
            ):
                raise ModelError(
                    "reference.program",
                    f"the program outputs {'Booleans' if t == 'bool' else 'integers'}, which "
                    "the model's output cannot show",
                    'use an argmax output with labels ["0", "1"] for Booleans, a one-row '
                    "value output for integers",
                )
            int_output = t == "int"
        gap = None
        if "gap_bound" in o and o["gap_bound"] is not None:
            gap = bound(o["gap_bound"], "reference.gap_bound")
        heads: list[tuple[int, int, str]] = []
        raw = o.get("head_gap_bounds") or []
        if not isinstance(raw, list):
            raise ModelError(
                "reference.head_gap_bounds",
                "expected a list of [layer, head, bound]",
                'write e.g. [[1, 0, "1/(n+1)"]]',
            )
        for k, item in enumerate(raw):
            path = f"reference.head_gap_bounds[{k}]"
            if not isinstance(item, list) or len(item) != 3:
                raise ModelError(
                    path, "expected [layer, head, bound]", 'write e.g. [1, 0, "1/(n+1)"]'
                )
            li = self.integer(item[0], f"{path}[0]", minimum=0)
            hi = self.integer(item[1], f"{path}[1]", minimum=0)
            heads.append((li, hi, bound(item[2], f"{path}[2]")))
        scale = None
        if o.get("output_scale") is not None:
            path = "reference.output_scale"
            scale = self.string(o["output_scale"], path)
            if not int_output:
                raise ModelError(
                    path,
                    "an output scale applies only to an integer output (a one-row value output)",
                    "remove output_scale",
                )
            try:
                parse_expression(scale, ("n",))
            except ExprError as exc:
                raise ModelError(path, str(exc), "an expression in n, e.g. 1/(n+1)") from None
        return Reference(
            "rasp",
            program=text,
            gap_bound=gap,
            head_gap_bounds=tuple(heads),
            output_scale=scale,
        )

    def case_output(self, x: Any, path: str, output: Output, n: int) -> Any:
        if isinstance(output, AcceptOutput):
            if x is None or isinstance(x, bool):
                return x
            raise ModelError(
                path,
                f"expected true, false or null, got {_kind(x)}",
                "write true (accept), false (reject) or null (undefined)",
            )
        if not isinstance(x, list) or len(x) != n:
            raise ModelError(
                path,
                f"expected a list of {n} outputs (one per input position)",
                f"give {n} outputs",
            )
        if isinstance(output, ArgmaxOutput):
            out = []
            for i, v in enumerate(x):
                if v is None:
                    out.append(None)
                    continue
                s = self.string(v, f"{path}[{i}]")
                if s not in output.labels:
                    raise ModelError(
                        f"{path}[{i}]", f"unknown label '{s}'", "use one of output.labels or null"
                    )
                out.append(s)
            return out
        r = len(output.weight)
        vals: list[Vec | None] = []
        for i, v in enumerate(x):
            if v is None:
                vals.append(None)
            elif isinstance(v, list):
                vals.append(self.vector(v, f"{path}[{i}]", r))
            elif r == 1:
                vals.append((self.number(v, f"{path}[{i}]"),))
            else:
                raise ModelError(
                    f"{path}[{i}]", f"expected a vector of {r} numbers", f"give {r} numbers"
                )
        return vals


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(x: Any) -> str:
    if isinstance(x, JsonConstant):
        return str(x)
    if isinstance(x, JsonNumber):
        return f"the number {x}"
    if isinstance(x, dict):
        return "an object"
    if isinstance(x, list):
        return "a list"
    if isinstance(x, bool):
        return "true/false"
    if x is None:
        return "null"
    if isinstance(x, str):
        return f"the string '{clip(x)}'"
    return type(x).__name__
