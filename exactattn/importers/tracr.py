"""Import a tracr-compiled program (Haiku parameters as ``.npz`` + metadata ``.json``).

The result is a format-1 model dict that evaluates exactly the float32 model tracr users
run: every float32 weight is a dyadic rational, kept exactly (never through a binary
float on the way out).  Neither tracr, JAX nor Haiku is needed; numpy reads the arrays.

Layout facts this module relies on (tracr ``assemble.py`` / ``attention.py``):

* Haiku computes ``x @ W + b`` on row vectors, so a format-1 matrix (``y = W x``, shape
  (out, in)) is the transpose of the stored one.
* ``query``/``key``/``value`` weights stack the heads along columns: head ``h`` owns
  columns ``h*key_size:(h+1)*key_size``; the output map ``linear/w`` stacks them along
  rows.  ``linear/b`` is added once per layer.
* Logits are divided by ``sqrt(key_size)``: that is the temperature, not a weight.
* Each tracr layer is an attention block and then an MLP block, both residual; format
  layer ``2k`` is ``transformer/layer_k/attn`` and ``2k+1`` is ``transformer/layer_k/mlp``.
* Position 0 is BOS; ``pos_embed`` row 0 is tracr's zero padding row.

See docs/tracr.md for the mapping decisions and what the imported fixtures measure.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from exactattn.core.errors import ModelError
from exactattn.core.jsonio import write_text_atomic
from exactattn.core.limits import MAX_DEPTH, check_tree, clip, dedup_pairs
from exactattn.core.numbers import MAX_DECIMAL_EXPONENT, MAX_NUMBER_CHARS

Number = int | str
"""A JSON number of the imported model: an int, or a ``"p/q"`` string (never a float)."""

DEFAULT_TOLERANCE = Fraction(1, 100)
"""Value-output tolerance written into numerical models (the engine's default)."""

FLOAT_MATCH = Fraction(1, 10**12)
"""How close a simple fraction must be to a RASP float to stand for it."""

_SAFE_INT = 2**53
"""Larger integers are written as strings so that no JSON reader rounds them."""

_LAYER_KEY = re.compile(r"^transformer/layer_(\d+)/(attn|mlp)/(\w+)/(w|b)$")
_ATTN_PARTS = ("query", "key", "value", "linear")
_MLP_PARTS = ("linear_1", "linear_2")


# ---------------------------------------------------------------------------
# exact numbers


def _num(x: Fraction) -> Number:
    """An exact rational as a JSON value: an int when integral and small, else "p/q"."""
    if x.denominator == 1:
        n = x.numerator
        return n if abs(n) <= _SAFE_INT else str(n)
    return f"{x.numerator}/{x.denominator}"


def _exact(arr: np.ndarray) -> list[Any]:
    """The exact rational value of every entry (nested lists of Fractions).

    float16/32/64 values convert exactly to Python's double, whose
    ``as_integer_ratio`` is exact; integer arrays are exact already.
    """
    if arr.dtype.kind == "f":
        flat = [Fraction(*v.as_integer_ratio()) for v in arr.astype(np.float64).ravel().tolist()]
    else:
        flat = [Fraction(int(v)) for v in arr.ravel().tolist()]
    if arr.ndim == 1:
        return flat
    cols = arr.shape[1]
    return [flat[r * cols : (r + 1) * cols] for r in range(arr.shape[0])]


def _t(m: list[list[Fraction]]) -> list[list[Fraction]]:
    """Transpose (Haiku's row-vector matrices to format 1's column-vector ones)."""
    return [list(col) for col in zip(*m, strict=True)] if m else []


def _jm(m: list[list[Fraction]]) -> list[list[Number]]:
    return [[_num(v) for v in row] for row in m]


def _jv(v: Sequence[Fraction]) -> list[Number]:
    return [_num(x) for x in v]


def _nonzero(v: Sequence[Fraction]) -> bool:
    return any(x != 0 for x in v)


def _sci(x: Fraction, digits: int = 3) -> str:
    """A short decimal rendering of an exact rational (for the description only)."""
    with localcontext() as ctx:
        ctx.prec = digits
        return str(Decimal(x.numerator) / Decimal(x.denominator))


# ---------------------------------------------------------------------------
# reading the two files


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


MAX_MEMBER_BYTES = 256 * 2**20
"""Largest uncompressed array in the archive, as its zip entry declares (docs/limits.md).
tracr's residual streams are at most a few hundred wide: 4096 × 4096 float32 is 64 MiB."""

MAX_ARCHIVE_BYTES = 1024 * 2**20
"""Largest total of the archive's uncompressed arrays (a zip bomb: 1.45 MB → 1.5 GB)."""

MAX_RATIO = 1000
"""Largest compression ratio of an array over RATIO_FROM bytes (deflate's ceiling is about
1,032: only long runs of one byte reach it, which no real weight matrix of that size is)."""

RATIO_FROM = 16 * 2**20


class _MetaNumber(ValueError):
    """A metadata number beyond the limits of model-file numbers."""


_META_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE](?P<exp>[+-]?[0-9]+))?")


def _meta_float(text: str) -> Fraction:
    """A metadata float as the exact rational of its text, within model-file limits
    (``1e999999999`` would build a billion-digit integer: minutes)."""

    m = _META_FLOAT.fullmatch(text)
    exp = m["exp"] if m else None
    if len(text) > MAX_NUMBER_CHARS or (
        exp is not None and (len(exp.lstrip("+-")) > 6 or abs(int(exp)) > MAX_DECIMAL_EXPONENT)
    ):
        raise _MetaNumber(text)
    return Fraction(text)


def _meta_int(text: str) -> int:

    if len(text) > MAX_NUMBER_CHARS:
        raise _MetaNumber(text)
    return int(text)


def _load_meta(meta_path: Path) -> dict[str, Any]:
    """Read the metadata JSON; its floats become exact Fractions of the text as written."""
    where = meta_path.name
    try:
        text = meta_path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"cannot read the file: {exc.strerror or exc}"
        raise ModelError(where, msg, "check the path") from None
    except UnicodeDecodeError:
        raise ModelError(where, "is not UTF-8 text", "pass the metadata .json file") from None
    try:
        meta = json.loads(
            text,
            parse_float=_meta_float,
            parse_int=_meta_int,
            parse_constant=_reject_constant,
            object_pairs_hook=dedup_pairs,  # a repeated key is refused, as in model files
        )
    except _MetaNumber as exc:
        raise ModelError(
            where,
            f"the number {clip(str(exc), 40)} is beyond the limits of model numbers "
            "(4,000 characters, decimal exponents within ±300; docs/limits.md)",
            "pass the metadata tracr wrote (its numbers are small)",
        ) from None
    except RecursionError:
        raise ModelError(
            where,
            f"the JSON is nested deeper than the limit of {MAX_DEPTH} levels (docs/limits.md)",
            "pass the metadata tracr wrote (it is nested 4 levels deep)",
        ) from None
    except json.JSONDecodeError as exc:
        raise ModelError(
            where,
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "pass the metadata .json written next to the .npz",
        ) from None
    except ValueError as exc:
        raise ModelError(where, f"not valid JSON: {exc}", "write finite numbers only") from None
    if not isinstance(meta, dict):
        raise ModelError(
            where,
            "expected a JSON object at the top level",
            'write one object {"vocab": …, "config": …, …} (docs/tracr.md)',
        )

    try:  # depth ≤ 64, strings and keys within limits, no key twice (docs/limits.md)
        check_tree(meta, where)
    except ModelError as exc:  # the file's name in front, like every other metadata error
        path = exc.path if exc.path == where else f"{where}: {exc.path}"
        raise ModelError(path, exc.message, exc.fix) from None
    return meta


def _load_npz(npz_path: Path) -> dict[str, np.ndarray]:
    """Read every array of the archive (no pickles: a params file holds numbers only)."""
    where = npz_path.name
    fix = "pass the .npz written with numpy.savez from tracr's model.params"
    try:
        z = np.load(npz_path, allow_pickle=False)
    except OSError as exc:
        msg = f"cannot read the file: {exc.strerror or exc}"
        raise ModelError(where, msg, "check the path") from None
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelError(where, f"not a readable .npz archive ({exc})", fix) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ModelError(where, "is a single .npy array, not a .npz archive of named arrays", fix)
    out: dict[str, np.ndarray] = {}
    with z:
        _check_sizes(z, where, fix)
        for key in z.files:
            try:
                out[key] = z[key]
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                msg = f"cannot read this array ({exc})"
                raise ModelError(f"{where}: {key}", msg, fix) from None
    return out


def _check_sizes(z: Any, where: str, fix: str) -> None:
    """Refuse oversized arrays before reading any: each entry's declared size and compression
    ratio, then the shape its .npy header declares (a (100000, 100000) header asked numpy
    for 37 GiB). Reading cannot exceed the declared size (zipfile stops there)."""
    total = 0
    names = set(z.zip.namelist())
    for key in z.files:
        name = key if key in names else f"{key}.npy"
        info = z.zip.getinfo(name)
        path = f"{where}: {key}"
        total += info.file_size
        if info.file_size > MAX_MEMBER_BYTES or total > MAX_ARCHIVE_BYTES:
            raise ModelError(
                path,
                f"expands to {info.file_size:,} bytes (all arrays so far: {total:,}); the "
                f"limits are {MAX_MEMBER_BYTES:,} per array and {MAX_ARCHIVE_BYTES:,} in all "
                "(docs/limits.md)",
                fix,
            )
        if info.file_size > RATIO_FROM and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise ModelError(
                path,
                f"is compressed {info.file_size // max(info.compress_size, 1):,}-fold, more "
                f"than the limit of {MAX_RATIO:,} (a zip bomb?)",
                fix,
            )
        try:
            with z.zip.open(name) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                else:  # 3.0 (UTF-8 field names): numpy's reader has no public name for it
                    shape, _, dtype = np.lib.format._read_array_header(f, version)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise ModelError(path, f"cannot read this array's header ({exc})", fix) from None
        entries = 1
        for k in shape:
            entries *= int(k)
        if entries * dtype.itemsize > info.file_size:
            raise ModelError(
                path,
                f"declares shape {tuple(shape)} of {dtype} ({entries * dtype.itemsize:,} "
                f"bytes) but its entry holds {info.file_size:,} bytes",
                fix,
            )


class _Arrays:
    """The archive's arrays, checked one key at a time so errors name file and key."""

    def __init__(self, where: str, arrays: dict[str, np.ndarray]) -> None:
        self.where = where
        self.arrays = arrays
        self.used: set[str] = set()

    def get(self, key: str, shape: tuple[int, ...], why: str) -> list[Any]:
        path = f"{self.where}: {key}"
        if key not in self.arrays:
            fix = f"the archive must hold '{key}' ({why})"
            raise ModelError(path, "missing from the archive", fix)
        a = self.arrays[key]
        self.used.add(key)
        if a.dtype.kind not in "fiu":
            msg = f"has dtype {a.dtype}, expected a real number type"
            raise ModelError(path, msg, "export float32 arrays")
        if a.shape != shape:
            raise ModelError(
                path,
                f"has shape {a.shape}, expected {shape} ({why})",
                "the metadata (config, residual_labels, max_seq_len) and the arrays must agree",
            )
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise ModelError(path, f"entry {bad} is not finite", "export finite weights only")
        return _exact(a)

    def check_all_used(self) -> None:
        extra = sorted(set(self.arrays) - self.used)
        if extra:
            raise ModelError(
                f"{self.where}: {extra[0]}",
                f"is not part of the configured model ({len(extra)} unused key(s))",
                "check config.num_layers and config.layer_norm; exactattn never ignores weights",
            )


class _Meta:
    """Typed access to the metadata with errors that name the file and key."""

    def __init__(self, where: str, meta: dict[str, Any]) -> None:
        self.where = where
        self.meta = meta

    def path(self, key: str) -> str:
        return f"{self.where}: {key}"

    def need(self, key: str) -> Any:
        if key not in self.meta:
            raise ModelError(self.path(key), "missing", f'add "{key}" to the metadata')
        return self.meta[key]

    def integer(self, value: Any, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ModelError(
                self.path(key),
                f"expected an integer >= {minimum}, got {value!r}",
                f"write a whole number >= {minimum}",
            )
        return value

    def strings(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list) or not value:
            raise ModelError(
                self.path(key),
                f"expected a non-empty list, got {_kind(value)}",
                'list the tokens, e.g. ["a", "b"]',
            )
        out = [_token(v, f"{key}[{i}]", self) for i, v in enumerate(value)]
        if len(set(out)) != len(out):
            dup = next(s for s in out if out.count(s) > 1)
            raise ModelError(self.path(key), f"'{dup}' appears twice", "entries must be distinct")
        return out


def _kind(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true/false"
    if isinstance(x, dict):
        return "an object"
    if isinstance(x, list):
        return "a list"
    return f"{type(x).__name__} {x!r}"


def _token(v: Any, key: str, m: _Meta) -> str:
    """A vocabulary entry as a token string (tracr vocabularies may hold ints or bools)."""
    if isinstance(v, (str, int)):  # bool is an int: str(True) == "True" as tracr prints it
        return str(v)
    raise ModelError(
        m.path(key),
        f"expected a token (string or integer), got {_kind(v)}",
        'write each token as a string or an integer, e.g. "a" or 1',
    )


def _label(v: Any) -> str:
    """A categorical value as its label text, the same way for labels and RASP outputs.

    str() as tracr prints values: True -> "True", 3 -> "3"; a JSON decimal (read as a
    Fraction) becomes "p/q", which `_same_label` matches against "0.5"-style labels.
    """
    return str(v)


def _same_label(a: str, b: str) -> bool:
    """Labels match as text, or as numbers written differently ("0.5" and "1/2")."""
    if a == b:
        return True
    try:
        return Fraction(a) == Fraction(b)
    except (ValueError, ZeroDivisionError):
        return False


# ---------------------------------------------------------------------------
# the import


def import_tracr(
    npz_path: str | Path,
    meta_path: str | Path,
    *,
    prune: bool = True,
    tolerance: Fraction = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Build a format-1 model dict from a tracr program's ``.npz`` and metadata ``.json``.

    ``prune`` drops parts that provably contribute nothing in either meaning (all-zero
    heads shrink to one zero dimension, head dimensions and hidden units whose
    contribution is identically 0 go), keeping tracr's layer and head numbering.
    Raises :class:`ModelError` naming the file and key of anything malformed.
    """
    npz_path, meta_path = Path(npz_path), Path(meta_path)
    m = _Meta(meta_path.name, _load_meta(meta_path))
    arrays = _Arrays(npz_path.name, _load_npz(npz_path))

    vocab = m.strings(m.need("vocab"), "vocab")
    bos = _token(m.need("bos"), "bos", m)
    if bos in vocab:
        raise ModelError(m.path("bos"), f"BOS token '{bos}' is also in vocab", "use a fresh token")
    max_len = m.integer(m.need("max_seq_len"), "max_seq_len", 1)
    if m.meta.get("compiler_bos_position", 0) != 0:
        raise ModelError(
            m.path("compiler_bos_position"),
            f"is {m.meta['compiler_bos_position']!r}; exactattn places BOS at position 0",
            "compile with BOS first (tracr's default)",
        )
    labels = m.strings(m.need("residual_labels"), "residual_labels")
    d = len(labels)
    enc = m.need("input_encoding")
    if not isinstance(enc, dict):
        raise ModelError(
            m.path("input_encoding"),
            f"expected an object, got {_kind(enc)}",
            'map each token to its embedding row, e.g. {"a": 1, "BOS": 0}',
        )
    for t in [*vocab, bos]:
        if t not in enc:
            raise ModelError(
                m.path("input_encoding"), f"has no row for token '{t}'", "map every token to a row"
            )
        m.integer(enc[t], f"input_encoding.{t}", 0)

    cfg = m.need("config")
    if not isinstance(cfg, dict):
        raise ModelError(
            m.path("config"),
            f"expected an object, got {_kind(cfg)}",
            "write tracr's model config as an object with num_layers, num_heads, key_size, "
            "mlp_hidden_size",
        )
    n_layers = m.integer(cfg.get("num_layers"), "config.num_layers", 0)
    n_heads = m.integer(cfg.get("num_heads"), "config.num_heads", 1)
    key_size = m.integer(cfg.get("key_size"), "config.key_size", 1)
    hidden = m.integer(cfg.get("mlp_hidden_size"), "config.mlp_hidden_size", 1)
    if cfg.get("layer_norm", False) is not False:
        raise ModelError(
            m.path("config.layer_norm"),
            "layer normalization is not part of format 1",
            "compile with layer_norm=False (tracr's default)",
        )
    if cfg.get("activation", "relu") != "relu":
        raise ModelError(
            m.path("config.activation"),
            f"MLP activation {cfg.get('activation')!r} is not supported",
            "format 1 FFNs use ReLU, as tracr does",
        )
    causal = cfg.get("causal", False)
    if not isinstance(causal, bool):
        raise ModelError(
            m.path("config.causal"),
            f"expected true/false, got {_kind(causal)}",
            "write true or false (or leave it out: false)",
        )
    mask = "leq" if causal else "none"

    # embeddings
    tok = arrays.get(
        "token_embed/embeddings",
        (_rows_of(arrays, "token_embed/embeddings", npz_path), d),
        f"one row per input_encoding entry, d = {d} = len(residual_labels) columns",
    )
    for t in [*vocab, bos]:
        if enc[t] >= len(tok):
            raise ModelError(
                m.path(f"input_encoding.{t}"),
                f"row {enc[t]} does not exist in token_embed/embeddings ({len(tok)} rows)",
                f"use a row below {len(tok)}, or export the embeddings of the same model",
            )
    pos = arrays.get(
        "pos_embed/embeddings",
        (max_len + 1, d),
        f"row 0 for BOS and one per position up to max_seq_len = {max_len}",
    )

    stats = {"heads_zero": 0, "head_dims_dropped": 0, "units_dropped": 0, "linear_bias": 0}
    layers: list[dict[str, Any]] = []
    for k in range(n_layers):
        layers.append(_attention_layer(arrays, k, d, n_heads, key_size, mask, prune, stats))
        layers.append(_mlp_layer(arrays, k, d, hidden, prune, stats))
    arrays.check_all_used()

    output, labels_out = _output(m, labels)
    reference, ref_notes = _reference(m, vocab, max_len, labels_out, output["kind"])
    if output["kind"] == "value":
        output["tolerance"] = _num(tolerance)

    program = str(m.meta.get("program") or npz_path.stem)
    description = _describe(
        program,
        vocab,
        bos,
        max_len,
        n_layers,
        n_heads,
        key_size,
        causal,
        prune,
        stats,
        output,
        ref_notes,
        npz_path.name,
        meta_path.name,
    )
    model: dict[str, Any] = {
        "format": "exactattn/1",
        "name": program,
        "description": description,
        "alphabet": vocab,
        "bos": bos,
        "d": d,
        "coordinates": labels,
        "embedding": {
            "token": {t: _jv(tok[enc[t]]) for t in [*vocab, bos]},
            "position": {"table": _jm(pos)},
        },
        "temperature": f"sqrt({key_size})",
        "layers": layers,
        "output": output,
        "min_length": 1,
        "max_length": max_len,
        "meta": {
            "importer": "exactattn.importers.tracr",
            "source": {"params": npz_path.name, "metadata": meta_path.name},
            "program": program,
            "key_size": key_size,
            "num_heads": n_heads,
            "layer_map": [
                f"transformer/layer_{i // 2}/{'attn' if i % 2 == 0 else 'mlp'}"
                for i in range(len(layers))
            ],
            "pruned": prune,
            **stats,
        },
    }
    if reference is not None:
        model["reference"] = reference
    return model


def _rows_of(arrays: _Arrays, key: str, npz_path: Path) -> int:
    """The row count of a present 2-D array (its width is checked by ``get``)."""
    a = arrays.arrays.get(key)
    if a is None:
        raise ModelError(f"{npz_path.name}: {key}", "missing from the archive", "export all params")
    if a.ndim != 2:
        raise ModelError(
            f"{npz_path.name}: {key}",
            f"has shape {a.shape}, expected a matrix",
            "export the parameters as tracr's compiled model holds them (2-D weights)",
        )
    return int(a.shape[0])


def _attention_layer(
    arrays: _Arrays,
    k: int,
    d: int,
    n_heads: int,
    ks: int,
    mask: str,
    prune: bool,
    stats: dict[str, int],
) -> dict[str, Any]:
    """Split tracr's stacked multi-head weights into format-1 heads (transposed)."""
    base = f"transformer/layer_{k}/attn"
    width = n_heads * ks
    why_in = f"d x num_heads*key_size = {d} x {width}"
    w = {p: arrays.get(f"{base}/{p}/w", (d, width), why_in) for p in ("query", "key", "value")}
    b = {
        p: arrays.get(f"{base}/{p}/b", (width,), f"num_heads*key_size = {width}")
        for p in ("query", "key", "value")
    }
    w_o = arrays.get(f"{base}/linear/w", (width, d), f"num_heads*key_size x d = {width} x {d}")
    b_o = arrays.get(f"{base}/linear/b", (d,), f"d = {d}")

    heads: list[dict[str, Any]] = []
    for h in range(n_heads):
        cols = range(h * ks, (h + 1) * ks)
        q = [[w["query"][r][c] for r in range(d)] for c in cols]  # (ks, d) = W_q[:, cols]ᵀ
        kk = [[w["key"][r][c] for r in range(d)] for c in cols]
        v = [[w["value"][r][c] for r in range(d)] for c in cols]
        bq = [b["query"][c] for c in cols]
        bk = [b["key"][c] for c in cols]
        bv = [b["value"][c] for c in cols]
        o = _t([w_o[c] for c in cols])  # (d, ks) = W_o[cols, :]ᵀ
        if h == 0 and _nonzero(b_o):
            # linear/b is added once per layer.  Σα = 1 over the visible set, which is never
            # empty for masks none/leq, so an extra value coordinate fixed at 1 (weight row
            # 0, bias 1) whose output column is b_o adds b_o exactly in both meanings.
            v.append([Fraction(0)] * d)
            bv.append(Fraction(1))
            for r in range(d):
                o[r].append(b_o[r])
            stats["linear_bias"] += 1
        heads.append(_head(q, kk, v, bq, bk, bv, o, d, mask, prune, stats))
    return {"kind": "attention", "name": base, "heads": heads}


def _head(
    q: list[list[Fraction]],
    k: list[list[Fraction]],
    v: list[list[Fraction]],
    bq: list[Fraction],
    bk: list[Fraction],
    bv: list[Fraction],
    o: list[list[Fraction]],
    d: int,
    mask: str,
    prune: bool,
    stats: dict[str, int],
) -> dict[str, Any]:
    """One format-1 head; with ``prune``, drop dimensions that cannot change anything."""
    if prune:
        # score = Σ_c (q_c·x_i + bq_c)(k_c·x_j + bk_c): a term with an identically-zero
        # factor is 0 for every pair (i, j).
        score_dims = [
            c
            for c in range(len(q))
            if (_nonzero(q[c]) or bq[c] != 0) and (_nonzero(k[c]) or bk[c] != 0)
        ]
        # output = Σ_c O[:, c] (Σα v_c): zero when the column or the value is identically 0.
        value_dims = [
            c
            for c in range(len(v))
            if any(o[r][c] != 0 for r in range(d)) and (_nonzero(v[c]) or bv[c] != 0)
        ]
        dropped = (len(q) - len(score_dims)) + (len(v) - len(value_dims))
        if not score_dims and not value_dims:
            stats["heads_zero"] += 1
        zero = [Fraction(0)] * d
        # keep one zero dimension where none is left (a head needs k, m >= 1)
        q, k, bq, bk = (
            (
                [q[c] for c in score_dims],
                [k[c] for c in score_dims],
                [bq[c] for c in score_dims],
                [bk[c] for c in score_dims],
            )
            if score_dims
            else ([zero], [zero], [Fraction(0)], [Fraction(0)])
        )
        v, bv, o = (
            (
                [v[c] for c in value_dims],
                [bv[c] for c in value_dims],
                [[row[c] for c in value_dims] for row in o],
            )
            if value_dims
            else ([zero], [Fraction(0)], [[Fraction(0)] for _ in range(d)])
        )
        stats["head_dims_dropped"] += dropped - (not score_dims) - (not value_dims)
    head: dict[str, Any] = {"query": _jm(q), "key": _jm(k), "value": _jm(v), "output": _jm(o)}
    if _nonzero(bq):
        head["query_bias"] = _jv(bq)
    if _nonzero(bk):
        head["key_bias"] = _jv(bk)
    if _nonzero(bv):
        head["value_bias"] = _jv(bv)
    head["mask"] = mask
    return head


def _mlp_layer(
    arrays: _Arrays, k: int, d: int, hidden: int, prune: bool, stats: dict[str, int]
) -> dict[str, Any]:
    """tracr's ``linear_2(relu(linear_1(x)))`` as a one-hidden-layer format-1 FFN."""
    base = f"transformer/layer_{k}/mlp"
    w1 = arrays.get(f"{base}/linear_1/w", (d, hidden), f"d x mlp_hidden_size = {d} x {hidden}")
    b1 = arrays.get(f"{base}/linear_1/b", (hidden,), f"mlp_hidden_size = {hidden}")
    w2 = arrays.get(f"{base}/linear_2/w", (hidden, d), f"mlp_hidden_size x d = {hidden} x {d}")
    b2 = arrays.get(f"{base}/linear_2/b", (d,), f"d = {d}")
    units = list(range(hidden))
    if prune:
        # unit u adds relu(w1_u·x + b1_u) * w2_u: identically 0 when w2_u = 0, or when
        # w1_u = 0 and b1_u <= 0 (relu of a non-positive constant).
        units = [
            u
            for u in units
            if _nonzero(w2[u]) and (any(w1[r][u] != 0 for r in range(d)) or b1[u] > 0)
        ]
        stats["units_dropped"] += hidden - max(len(units), 1)
    if units:
        h_w = [[w1[r][u] for r in range(d)] for u in units]  # (units, d) = W1[:, units]ᵀ
        h_b = [b1[u] for u in units]
        o_w = [[w2[u][r] for u in units] for r in range(d)]  # (d, units) = W2[units, :]ᵀ
    else:
        h_w, h_b, o_w = [[Fraction(0)] * d], [Fraction(0)], [[Fraction(0)] for _ in range(d)]
    return {
        "kind": "ffn",
        "name": base,
        "hidden": [{"weight": _jm(h_w), "bias": _jv(h_b)}],
        "output": {"weight": _jm(o_w), "bias": _jv(b2)},
    }


def _output(m: _Meta, labels: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The unembedding tracr does not store: a selection of ``output_coordinates``."""
    coords_raw = m.need("output_coordinates")
    coords = m.strings(coords_raw, "output_coordinates")
    for i, c in enumerate(coords):
        if c not in labels:
            raise ModelError(
                m.path(f"output_coordinates[{i}]"),
                f"'{c}' is not one of residual_labels",
                "output coordinates must name residual coordinates",
            )
    d = len(labels)
    weight = [[int(labels[j] == c) for j in range(d)] for c in coords]
    decoding = m.need("output_decoding")
    categorical = m.meta.get("categorical_output", decoding is not None)
    if categorical != (decoding is not None):
        raise ModelError(
            m.path("output_decoding"),
            f"is {'null' if decoding is None else 'given'} but categorical_output is "
            f"{categorical!r}",
            "a categorical output needs output_decoding; a numerical one has null",
        )
    if decoding is None:
        if len(coords) != 1:
            raise ModelError(
                m.path("output_coordinates"),
                f"a numerical output reads one coordinate, got {len(coords)}",
                "list the single output coordinate",
            )
        return {"kind": "value", "weight": weight, "bias": [0]}, []
    if not isinstance(decoding, dict) or set(decoding) != {str(i) for i in range(len(coords))}:
        raise ModelError(
            m.path("output_decoding"),
            f'expected an object with keys "0" … "{len(coords) - 1}" (one per output coordinate)',
            "map each output coordinate's index to the value it stands for",
        )
    out_labels: list[str] = []
    for i, c in enumerate(coords):
        raw = decoding[str(i)]
        if raw is None or isinstance(raw, (dict, list)):
            raise ModelError(
                m.path(f"output_decoding.{i}"),
                f"expected a value, got {_kind(raw)}",
                "write the coordinate's label: a string, number or true/false",
            )
        lab = _label(raw)
        suffix = c.rsplit(":", 1)[-1] if ":" in c else None
        if suffix is not None and not _same_label(suffix, lab):
            raise ModelError(
                m.path(f"output_decoding.{i}"),
                f"decodes coordinate '{c}' as '{lab}'",
                "output_decoding must follow the order of output_coordinates",
            )
        out_labels.append(lab)
    if len(set(out_labels)) != len(out_labels):
        raise ModelError(
            m.path("output_decoding"),
            "two coordinates decode to the same label",
            "give each output coordinate its own label",
        )
    return {"kind": "argmax", "weight": weight, "bias": [0] * len(coords), "labels": out_labels}, (
        out_labels
    )


def _rasp_number(v: Fraction, max_len: int) -> tuple[Fraction, str]:
    """The simple fraction a RASP float rounds from, if one is within 1e-12 of it.

    RASP computes means in binary floats and prints them, so 2/3 arrives as
    0.6666666666666666.  Tried first: denominators up to max_seq_len (means over
    positions), then up to 10^6.  The check is exact Fraction arithmetic.  Returns the
    value and how it was obtained: "exact" (the text already is that fraction),
    "simplified", or "as_written" (no simple fraction is close; the decimal is kept).
    """
    for bound in (max(max_len, 1), 10**6):
        cand = v.limit_denominator(bound)
        if abs(cand - v) <= FLOAT_MATCH:
            return cand, "exact" if cand == v else "simplified"
    return v, "as_written"


#: One entry of the metadata's ``cases`` (named in fix hints).
_CASE_SHAPE = '{"input": ["a", …], "expected": [output per position]}'


def _reference(
    m: _Meta, vocab: list[str], max_len: int, labels: list[str], kind: str
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """RASP's own outputs as a ``cases`` reference; undefined positions stay null."""
    notes: dict[str, Any] = {
        "cases": 0,
        "positions": 0,
        "undefined": 0,
        "simplified": 0,
        "as_written": 0,
        "tracr_differs": 0,
        "tracr_max_error": None,
        "tracr_checked": 0,
    }
    if "cases" not in m.meta or m.meta["cases"] is None:
        return None, notes
    raw = m.meta["cases"]
    if not isinstance(raw, list):
        raise ModelError(
            m.path("cases"),
            f"expected a list, got {_kind(raw)}",
            f"write a list of {_CASE_SHAPE}, or leave cases out",
        )
    cases: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], int] = {}
    for ci, c in enumerate(raw):
        cp = f"cases[{ci}]"
        if not isinstance(c, dict) or "input" not in c or "expected" not in c:
            raise ModelError(
                m.path(cp), "expected an object with 'input' and 'expected'", f"write {_CASE_SHAPE}"
            )
        inp = c["input"]
        if not isinstance(inp, list) or not 1 <= len(inp) <= max_len:
            raise ModelError(
                m.path(f"{cp}.input"),
                f"expected a list of 1 … {max_len} tokens (max_seq_len), got {_kind(inp)}",
                f"give 1 to {max_len} tokens of vocab",
            )
        word = [_token(t, f"{cp}.input[{i}]", m) for i, t in enumerate(inp)]
        for i, t in enumerate(word):
            if t not in vocab:
                raise ModelError(
                    m.path(f"{cp}.input[{i}]"), f"'{t}' is not in vocab", "use vocabulary tokens"
                )
        if tuple(word) in seen:
            raise ModelError(
                m.path(f"{cp}.input"),
                f"repeats the input of cases[{seen[tuple(word)]}]",
                "list each input once",
            )
        seen[tuple(word)] = ci
        exp = c["expected"]
        if not isinstance(exp, list) or len(exp) != len(word):
            raise ModelError(
                m.path(f"{cp}.expected"),
                f"expected a list of {len(word)} outputs (one per input position)",
                f"give one expected output per input token ({len(word)})",
            )
        out: list[Any] = []
        for p, val in enumerate(exp):
            vp = f"{cp}.expected[{p}]"
            if val is None:
                notes["undefined"] += 1
                out.append(None)
            elif kind == "argmax":
                out.append(_case_label(m, vp, val, labels))
            else:
                x = _case_number(m, vp, val, max_len, notes)
                out.append(_num(x))
        notes["cases"] += 1
        notes["positions"] += len(out)
        if "tracr_float32" in c:
            _compare_tracr(c["tracr_float32"], out, kind, labels, notes)
        cases.append({"input": word, "output": out})
    return {"kind": "cases", "cases": cases}, notes


def _case_label(m: _Meta, path: str, val: Any, labels: list[str]) -> str:
    if isinstance(val, (dict, list)):
        raise ModelError(
            m.path(path),
            f"expected a categorical value, got {_kind(val)}",
            "write one of the output labels (a string, number or true/false)",
        )
    lab = _label(val)
    for known in labels:
        if _same_label(known, lab):
            return known
    raise ModelError(
        m.path(path),
        f"RASP value {val!r} is not one of the output labels {labels}",
        "the metadata's output_decoding must cover every value RASP produces",
    )


def _case_number(m: _Meta, path: str, val: Any, max_len: int, notes: dict[str, Any]) -> Fraction:
    if isinstance(val, bool):
        return Fraction(int(val))
    if isinstance(val, int):
        return Fraction(val)
    if isinstance(val, Fraction):
        x, how = _rasp_number(val, max_len)
        if how != "exact":
            notes[how] += 1
        return x
    raise ModelError(
        m.path(path),
        f"expected a number, true/false or null, got {_kind(val)}",
        "write the expected output value as a number (null: undefined)",
    )


def _compare_tracr(
    got: Any,
    want: list[Any],
    kind: str,
    labels: list[str],
    notes: dict[str, Any],
) -> None:
    """Tally how tracr's own float32 run compares with RASP (reported in the description)."""
    if not isinstance(got, list) or len(got) != len(want):
        return
    for g, w in zip(got, want, strict=True):
        if w is None or g is None:
            continue
        notes["tracr_checked"] += 1
        if kind == "argmax":
            if isinstance(g, (dict, list)) or not _same_label(_label(g), w):
                notes["tracr_differs"] += 1
            continue
        if isinstance(g, (int, Fraction)):  # bool is an int
            err = abs(Fraction(g) - Fraction(w))
            if err:
                notes["tracr_differs"] += 1
                best = notes["tracr_max_error"]
                if best is None or err > best:
                    notes["tracr_max_error"] = err


def _describe(
    program: str,
    vocab: list[str],
    bos: str,
    max_len: int,
    n_layers: int,
    n_heads: int,
    key_size: int,
    causal: bool,
    prune: bool,
    stats: dict[str, int],
    output: dict[str, Any],
    notes: dict[str, Any],
    npz_name: str,
    meta_name: str,
) -> str:
    """Say what was imported and every conversion made, so a report reader can judge it."""
    parts = [
        f"tracr program '{program}' imported from {npz_name} + {meta_name}: vocab "
        f"{vocab}, BOS '{bos}' at position 0, max_seq_len {max_len}, {n_layers} tracr "
        f"layers (each = attention layer + FFN layer here), {n_heads} head(s), "
        f"key_size {key_size}, mask {'leq (causal)' if causal else 'none'}.",
        "Weights are tracr's float32 values as exact dyadic rationals (the float32 model "
        "tracr users run). tracr divides logits by sqrt(key_size): that factor is the "
        f"temperature sqrt({key_size}); the softmax coldness 100 is in the query weights.",
        "The output reads output_coordinates through a selection matrix"
        + (
            f" as argmax over labels {output['labels']}."
            if output["kind"] == "argmax"
            else " as a numerical value."
        ),
    ]
    if stats["linear_bias"]:
        parts.append(
            f"{stats['linear_bias']} layer(s) have a nonzero attn/linear/b, added exactly as an "
            "extra value coordinate of head 0 (value 1, output column = the bias)."
        )
    if prune:
        parts.append(
            f"Pruned, exactly: {stats['heads_zero']} all-zero head(s) kept as one zero "
            f"dimension, {stats['head_dims_dropped']} head dimension(s) and "
            f"{stats['units_dropped']} hidden unit(s) that contribute 0 identically."
        )
    if notes["cases"]:
        ref = (
            f"Reference: RASP's expected outputs for {notes['cases']} inputs "
            f"({notes['positions']} positions; {notes['undefined']} undefined positions kept "
            "as null, reported as undefined, never counted as matches)."
        )
        if output["kind"] == "argmax":
            ref += " Categorical values map to labels through str()."
        else:
            ref += (
                " Numerical values: booleans as 1/0, integers as written, "
                f"{notes['simplified']} decimal(s) replaced by the simple fraction within "
                "1e-12 they round from (denominator <= max_seq_len, else <= 10^6), "
                f"{notes['as_written']} with no such fraction kept exactly as written."
            )
        if notes["tracr_checked"]:
            ref += (
                f" tracr's float32 run differs from RASP at {notes['tracr_differs']} of "
                f"{notes['tracr_checked']} defined positions"
            )
            if notes["tracr_max_error"] is not None:
                ref += f" (largest |difference| {_sci(notes['tracr_max_error'])})"
            ref += "."
        parts.append(ref)
    return " ".join(parts)


def write_model(model: dict[str, Any], out_path: str | Path) -> None:
    """Write an imported model as JSON (numbers are ints and "p/q" strings already)."""
    text = json.dumps(model, indent=1, ensure_ascii=False)

    write_text_atomic(Path(out_path), text + "\n")


__all__ = ["DEFAULT_TOLERANCE", "import_tracr", "write_model"]
