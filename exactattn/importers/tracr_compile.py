"""Compile your own RASP program with tracr into the pair ``exactattn import tracr`` reads.

    python -m exactattn.importers.tracr_compile PROGRAM.py:FUNCTION --vocab a,b,c \\
        --max-seq-len 5 -o build/NAME
    exactattn import tracr build/NAME.npz build/NAME.json -o NAME.json
    exactattn check NAME.json --max-n 5

``FUNCTION`` (default ``program``) in the Python file ``PROGRAM.py`` takes no argument and
returns a tracr RASP expression (``tracr.rasp.rasp.SOp``); this module compiles it with
tracr's ``compile_rasp_to_model`` and writes ``NAME.npz`` (every parameter, float32, keyed
``module/param``) and ``NAME.json`` (vocabulary, encodings, residual labels, the
configuration, and — unless ``--no-cases`` — RASP's own output for every input up to
``--max-seq-len``, which becomes the imported model's reference). The layout is the one of
``tests/data/tracr/README.md``; see docs/tracr.md, "Your own program".

It needs tracr and JAX, which exactattn does not: ``pip install -e ".[tracr]"`` brings JAX,
Haiku and tracr's other dependencies from PyPI; tracr itself is not on PyPI and installs from
its repository (docs/tracr.md). Nothing else in exactattn imports this module, and it imports
tracr and JAX only when it runs. PROGRAM.py is Python and runs as such: it is your program
(a model file, by contrast, never runs code).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from exactattn.core.errors import UsageError

ATTENTION = (
    "softmax(q.k / sqrt(key_size)) at temperature 1, as in tracr's Haiku model; scores "
    "already carry tracr's softmax_coldness of 100 in the query weights; each head's "
    "query/key/value/linear weights are the slices [:, h*key_size:(h+1)*key_size] of the "
    "stacked matrices"
)
LAYOUT = (
    "x @ W + b with x a row vector (Haiku convention): token_embed/embeddings"
    "[input_encoding[token]] + pos_embed/embeddings[position], position 0 is BOS; each layer "
    "is attention then MLP (linear_1, relu, linear_2), both residual; no layer norm; the "
    "output is read from the residual coordinates listed in output_coordinates"
)
MAX_CASES = 100_000
"""Inputs whose RASP output is written at most (every input up to --max-seq-len): more is a
usage error naming --no-cases (each case also runs tracr's compiled model once)."""
INSTALL = (
    'in the exactattn checkout: pip install -e ".[tracr]", then tracr itself from its '
    "repository (docs/tracr.md, 'Your own program')"
)


def _tracr() -> tuple[Any, Any, Any, Any]:
    """tracr's modules (and JAX), or a usage error saying how to install them."""
    try:
        import jax  # lazy: JAX is an optional extra, needed only to compile a program
        import jax.numpy as jnp  # lazy: as above
        from tracr.compiler import compiling  # lazy: tracr installs from its repository
        from tracr.rasp import rasp  # lazy: as above
    except ImportError as exc:
        raise UsageError(
            f"compiling with tracr needs '{exc.name}', not installed ({INSTALL})"
        ) from None
    return jax, jnp, compiling, rasp


def _value(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _json(v: Any) -> Any:
    """A RASP value as JSON (a float that is a whole number stays a float: RASP's own)."""
    v = _value(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise UsageError(f"a RASP value of type {type(v).__name__} ({v!r}) cannot be written")


def load_program(spec: str) -> Any:
    """``PATH.py[:FUNCTION]``: the program FUNCTION (default ``program``) returns."""
    path_text, _, func = spec.partition(":")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise UsageError(f"{spec}: expected PROGRAM.py[:FUNCTION] naming a Python file")
    mod_spec = importlib.util.spec_from_file_location(f"_tracr_program_{path.stem}", path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)  # the user's own program: it runs as Python
    fn = getattr(module, func or "program", None)
    if not callable(fn):
        raise UsageError(f"{spec}: {path.name} has no function '{func or 'program'}'")
    return fn()


def flat_params(model: Any) -> dict[str, np.ndarray]:
    """A compiled tracr model's parameters as the ``.npz`` holds them: float32, keyed
    ``module/param``."""
    return {
        f"{module}/{param}": np.asarray(arr, dtype=np.float32)
        for module, params in model.params.items()
        for param, arr in params.items()
    }


def output_coordinates(model: Any, program: Any, rasp: Any) -> tuple[bool, list[str], list | None]:
    """(categorical, the residual labels the output is read from, the output values in index
    order — None for a numerical output): ``LABEL:value`` per value, or the bare ``LABEL``."""
    label = program.label
    if not rasp.is_categorical(program):
        return False, [label], None
    dec = model.output_encoder.encoding_map  # value -> index
    values = sorted(dec, key=dec.__getitem__)
    return True, [f"{label}:{v}" for v in values], values


def tracr_outputs(
    model: Any, words: list[list[Any]], bos: str, categorical: bool, jnp: Any
) -> list[list[Any]]:
    """The compiled model's output on each word (BOS prepended, its position dropped), decoded
    for a categorical output; the words in one forward pass (so all of one length)."""
    enc = model.input_encoder.encoding_map
    toks = jnp.array([[enc[bos]] + [enc[t] for t in w] for w in words])
    out = np.asarray(model.forward(model.params, toks).unembedded_output)
    rows = [row[1:].tolist() for row in out]
    return [model.output_encoder.decode(r) if categorical else r for r in rows]


def model_config(model: Any) -> dict[str, Any]:
    """The metadata's ``config``: tracr's model configuration (ReLU MLPs)."""
    cfg = model.model_config
    return {
        "num_heads": cfg.num_heads,
        "num_layers": cfg.num_layers,
        "key_size": cfg.key_size,
        "mlp_hidden_size": cfg.mlp_hidden_size,
        "layer_norm": cfg.layer_norm,
        "causal": cfg.causal,
        "activation": "relu",
    }


def compile_pair(
    program: Any,
    vocab: set[Any],
    max_seq_len: int,
    stem: str | Path,
    *,
    causal: bool = False,
    bos: str = "BOS",
    mlp_exactness: int = 100,
    cases: bool = True,
    name: str | None = None,
) -> tuple[Path, Path]:
    """Compile ``program`` with tracr and write ``STEM.npz`` and ``STEM.json``; the paths."""
    jax, jnp, compiling, rasp = _tracr()
    jax.config.update("jax_default_matmul_precision", "float32")
    stem = Path(stem)
    count = sum(len(vocab) ** n for n in range(1, max_seq_len + 1))
    if cases and count > MAX_CASES:
        raise UsageError(
            f"{count:,} inputs up to --max-seq-len {max_seq_len} are too many to write RASP's "
            f"output for (at most {MAX_CASES:,}) (fix: --no-cases, or a smaller --max-seq-len)"
        )
    model = compiling.compile_rasp_to_model(
        program,
        vocab,
        max_seq_len,
        causal=causal,
        compiler_bos=bos,
        mlp_exactness=mlp_exactness,
    )
    stem.parent.mkdir(parents=True, exist_ok=True)
    npz = stem.with_suffix(".npz")
    np.savez_compressed(npz, **flat_params(model))

    enc = model.input_encoder.encoding_map
    categorical, coords, values = output_coordinates(model, program, rasp)
    decoding = None if values is None else {str(i): _json(v) for i, v in enumerate(values)}

    ordered = sorted(vocab)
    written = []
    if cases:
        for n in range(1, max_seq_len + 1):
            words = [list(w) for w in itertools.product(ordered, repeat=n)]
            outs = tracr_outputs(model, words, bos, categorical, jnp)
            for w, tracr in zip(words, outs, strict=True):
                try:
                    expected = [_json(v) for v in rasp.evaluate(program, w)]
                except ValueError:  # RASP itself is undefined on this input
                    expected = [None] * len(w)
                written.append(
                    {
                        "input": [_json(t) for t in w],
                        "expected": expected,
                        "tracr_float32": [_json(v) for v in tracr],
                    }
                )
    meta = {
        "program": name or stem.name,
        "source": "exactattn.importers.tracr_compile",
        "vocab": [_json(t) for t in ordered],
        "max_seq_len": max_seq_len,
        "bos": bos,
        "compiler_bos_position": 0,
        "input_encoding": {str(k): v for k, v in enc.items()},
        "output_decoding": decoding,
        "categorical_output": bool(categorical),
        "residual_labels": list(model.residual_labels),
        "config": model_config(model),
        "attention": ATTENTION,
        "output_label": program.label,
        "output_coordinates": coords,
        "layout": LAYOUT,
        "cases": written if cases else None,
    }
    meta_path = stem.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", "utf-8")
    return npz, meta_path


def _vocab(text: str, integers: bool) -> set[Any]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError("--vocab: give the tokens, comma-separated (e.g. a,b,c)")
    if integers:
        try:
            return {int(t) for t in items}
        except ValueError:
            raise UsageError(f"--vocab: --int-vocab needs integers, got {text!r}") from None
    return set(items)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m exactattn.importers.tracr_compile",
        description="Compile a RASP program with tracr into NAME.npz + NAME.json for "
        "`exactattn import tracr` (docs/tracr.md, 'Your own program').",
    )
    ap.add_argument("program", help="PROGRAM.py[:FUNCTION] (default FUNCTION: program)")
    ap.add_argument("--vocab", required=True, help="the input tokens, comma-separated")
    ap.add_argument("--int-vocab", action="store_true", help="the tokens are integers")
    ap.add_argument("--max-seq-len", type=int, required=True, help="longest input")
    ap.add_argument("-o", "--output", required=True, help="STEM: writes STEM.npz, STEM.json")
    ap.add_argument("--causal", action="store_true", help="compile with a causal mask")
    ap.add_argument("--bos", default="BOS", help="the BOS token (default BOS)")
    ap.add_argument("--mlp-exactness", type=int, default=100, help="tracr's (default 100)")
    ap.add_argument("--no-cases", action="store_true", help="write no RASP outputs")
    args = ap.parse_args(argv)
    try:
        if args.max_seq_len < 1:
            raise UsageError("--max-seq-len must be at least 1")
        vocab = _vocab(args.vocab, args.int_vocab)
        program = load_program(args.program)
        npz, meta = compile_pair(
            program,
            vocab,
            args.max_seq_len,
            args.output,
            causal=args.causal,
            bos=args.bos,
            mlp_exactness=args.mlp_exactness,
            cases=not args.no_cases,
        )
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {npz} and {meta}", file=sys.stderr)
    print(f"next: exactattn import tracr {npz} {meta} -o MODEL.json", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
