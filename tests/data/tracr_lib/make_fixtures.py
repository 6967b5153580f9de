"""Compile tracr's program library into the fixtures of
tests/importers/test_tracr_library_programs.py.

Not run by the tests: it documents how the ``.npz``/``.json`` pairs here were made, and
regenerates them.  It needs tracr and JAX, which exactattn does not; use a separate venv:

    python3.11 -m venv /tmp/tracr-venv
    /tmp/tracr-venv/bin/pip install "jax[cpu]==0.10.2" dm-haiku==0.0.17 chex==0.1.92 \
        einops==0.8.2 networkx==3.6.1 numpy==2.4.6
    git clone https://github.com/google-deepmind/tracr /tmp/tracr-src
    git -C /tmp/tracr-src checkout 9ce2b8c82b6ba10e62e86cf6f390e7536d4fd2cd
    /tmp/tracr-venv/bin/pip install -e .  # exactattn itself: this imports its tracr_compile
    PYTHONPATH=/tmp/tracr-src /tmp/tracr-venv/bin/python tests/data/tracr_lib/make_fixtures.py

What is compiled (see README.md here for the list):

* every program-building function of ``tracr/compiler/lib.py`` (13 ``make_*`` plus
  ``shift_by`` and ``detect_pattern``), with small arguments chosen here (prefix ``lib_``);
* every distinct program of tracr's integration test cases: ``TEST_CASES`` (prefix ``tc_``),
  ``CAUSAL_TEST_CASES`` compiled with ``causal=True`` (prefix ``causal_``) and the four
  programs of ``rasp_to_transformer_integration_test`` (prefix ``it_``); test cases that
  differ only in their input share one program;
* the single-label program ``rasp.categorical(rasp.Map(lambda x: 1, rasp.tokens))``.

Vocabularies are tracr's where a test case gives one; ``max_seq_len`` is lowered where
every input up to tracr's length would be too many (``tracr_max_seq_len`` in the metadata
keeps tracr's value).  ``cases`` lists every input of length 1..max_seq_len with RASP's own
output (``rasp.evaluate``, or ``causal_eval.evaluate`` for causal programs) and tracr's
float32 model's output.  Where RASP raises on an input (a categorical mean over different
values), every expected output of that input is null.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tracr.compiler import compiling, lib
from tracr.rasp import causal_eval, rasp

from exactattn.importers.tracr_compile import (
    ATTENTION,
    flat_params,
    model_config,
    output_coordinates,
    tracr_outputs,
)

jax.config.update("jax_default_matmul_precision", "float32")

OUT = Path(__file__).resolve().parent
TRACR_COMMIT = "9ce2b8c82b6ba10e62e86cf6f390e7536d4fd2cd"
BOS = "BOS"
RAISED: list[list[Any]] = []  # inputs on which the RASP evaluator raised
PACKAGES = ["jax", "jaxlib", "dm-haiku", "chex", "einops", "networkx", "numpy"]

LAYOUT = (
    "x @ W + b with x a row vector (Haiku convention): token_embed/embeddings"
    "[input_encoding[token]] + pos_embed/embeddings[position], position 0 is BOS; each layer "
    "is attention then MLP (linear_1, relu, linear_2), both residual; no layer norm; the "
    "output is read from the residual coordinates listed in output_coordinates (labels "
    "'LABEL:value' for a categorical output, the bare 'LABEL' for a numerical one); "
    "categorical outputs decode by argmax over them through output_decoding"
)


@dataclasses.dataclass
class Spec:
    name: str
    build: Callable[[], rasp.SOp]
    vocab: set[Any]
    max_seq_len: int
    source: str
    causal: bool = False
    tracr_max_seq_len: int | None = None  # tracr's own value when lowered here


ABCD = {"a", "b", "c", "d"}
PAREN5 = {"a", "b", "c", "(", ")"}
NUM4 = {1, 2, 3, 4}


def lib_specs() -> list[Spec]:
    """Every program builder of lib.py, with small arguments of our choosing."""
    S = "tracr/compiler/lib.py:"
    return [
        Spec(
            "lib_length",
            lambda: rasp.categorical(lib.make_length()),
            {"a", "b"},
            5,
            S + "make_length",
        ),
        Spec(
            "lib_reverse",
            lambda: lib.make_reverse(rasp.tokens),
            {"a", "b", "c"},
            4,
            S + "make_reverse(tokens)",
        ),
        Spec(
            "lib_pair_balance",
            lambda: lib.make_pair_balance(rasp.tokens, "(", ")"),
            {"(", ")"},
            6,
            S + 'make_pair_balance(tokens, "(", ")")',
        ),
        Spec(
            "lib_shuffle_dyck1",
            lambda: lib.make_shuffle_dyck(pairs=["()"]),
            {"(", ")"},
            6,
            S + 'make_shuffle_dyck(["()"])',
        ),
        Spec(
            "lib_shuffle_dyck2",
            lib.make_shuffle_dyck2,
            {"(", ")", "{", "}"},
            4,
            S + "make_shuffle_dyck2",
        ),
        Spec("lib_hist", lib.make_hist, {"a", "b", "c"}, 4, S + "make_hist"),
        Spec(
            "lib_sort_unique",
            lambda: lib.make_sort_unique(rasp.tokens, rasp.tokens),
            {1, 2, 3},
            4,
            S + "make_sort_unique(tokens, tokens)",
        ),
        Spec(
            "lib_sort",
            lambda: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=4, min_key=1),
            {1, 2, 3},
            4,
            S + "make_sort(tokens, tokens, max_seq_len=4, min_key=1)",
        ),
        Spec(
            "lib_sort_freq",
            lambda: lib.make_sort_freq(max_seq_len=4),
            {1, 2, 3},
            4,
            S + "make_sort_freq(4)",
        ),
        Spec(
            "lib_frac_prevs",
            lambda: lib.make_frac_prevs(rasp.tokens == "a"),
            {"a", "b"},
            6,
            S + 'make_frac_prevs(tokens == "a")',
        ),
        Spec(
            "lib_shift_by",
            lambda: lib.shift_by(1, rasp.tokens),
            {"a", "b"},
            5,
            S + "shift_by(1, tokens)",
        ),
        Spec(
            "lib_detect_pattern",
            lambda: lib.detect_pattern(rasp.tokens, "ab"),
            {"a", "b"},
            5,
            S + 'detect_pattern(tokens, "ab")',
        ),
        Spec(
            "lib_count_less_freq",
            lambda: lib.make_count_less_freq(2),
            {"a", "b", "c"},
            4,
            S + "make_count_less_freq(2)",
        ),
        Spec(
            "lib_count",
            lambda: lib.make_count(rasp.tokens, "a"),
            {"a", "b", "c"},
            4,
            S + 'make_count(tokens, "a")',
        ),
        Spec(
            "lib_nary_sequencemap",
            lambda: lib.make_nary_sequencemap(
                lambda x, y, z: x + y - z, rasp.tokens, rasp.tokens, rasp.indices
            ),
            {1, 2},
            3,
            S + "make_nary_sequencemap(x + y - z, tokens, tokens, indices)",
        ),
    ]


def universal_specs(prefix: str, causal: bool) -> list[Spec]:
    """test_cases.UNIVERSAL_TEST_CASES (distinct programs)."""
    S = "tracr/compiler/test_cases.py:" + ("CAUSAL_TEST_CASES" if causal else "TEST_CASES")
    return [
        Spec(
            prefix + "frac_prevs_1",
            lambda: lib.make_frac_prevs(rasp.tokens == "l"),
            {"h", "e", "l", "o"},
            4,
            S + "[frac_prevs_1]",
            causal,
            5,
        ),
        Spec(
            prefix + "frac_prevs_2",
            lambda: lib.make_frac_prevs(rasp.tokens == "("),
            PAREN5,
            4,
            S + "[frac_prevs_2]",
            causal,
            10,
        ),
        Spec(
            prefix + "frac_prevs_3",
            lambda: lib.make_frac_prevs(rasp.tokens == ")"),
            PAREN5,
            4,
            S + "[frac_prevs_3]",
            causal,
            10,
        ),
        Spec(
            prefix + "shift_by_one",
            lambda: lib.shift_by(1, rasp.tokens),
            ABCD,
            4,
            S + "[shift_by_one]",
            causal,
            5,
        ),
        Spec(
            prefix + "shift_by_two",
            lambda: lib.shift_by(2, rasp.tokens),
            ABCD,
            4,
            S + "[shift_by_two]",
            causal,
            5,
        ),
        Spec(
            prefix + "detect_pattern_a",
            lambda: lib.detect_pattern(rasp.tokens, "a"),
            ABCD,
            4,
            S + "[detect_pattern_a]",
            causal,
            5,
        ),
        Spec(
            prefix + "detect_pattern_ab",
            lambda: lib.detect_pattern(rasp.tokens, "ab"),
            {"a", "b"},
            5,
            S + "[detect_pattern_ab, _ab_2, _ab_3]",
            causal,
        ),
        Spec(
            prefix + "detect_pattern_abc",
            lambda: lib.detect_pattern(rasp.tokens, "abc"),
            {"a", "b", "c"},
            5,
            S + "[detect_pattern_abc]",
            causal,
            6,
        ),
    ]


def test_case_specs() -> list[Spec]:
    """test_cases.TEST_CASES (non-causal), one program per group of cases."""
    S = "tracr/compiler/test_cases.py:TEST_CASES"
    return universal_specs("tc_", False) + [
        Spec(
            "tc_reverse",
            lambda: lib.make_reverse(rasp.tokens),
            ABCD,
            4,
            S + "[reverse_1..4]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_length_categorical",
            lambda: rasp.categorical(lib.make_length()),
            ABCD,
            3,
            S + "[length_categorical_1..3]",
        ),
        Spec(
            "tc_length_numerical",
            lambda: rasp.numerical(lib.make_length()),
            ABCD,
            3,
            S + "[length_numerical_1..3]",
        ),
        Spec(
            "tc_pair_balance",
            lambda: lib.make_pair_balance(rasp.tokens, "(", ")"),
            PAREN5,
            4,
            S + "[pair_balance_1]",
            tracr_max_seq_len=10,
        ),
        Spec(
            "tc_shuffle_dyck2",
            lambda: lib.make_shuffle_dyck(pairs=["()", "{}"]),
            {"(", ")", "{", "}"},
            4,
            S + "[shuffle_dyck2_1..3]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_shuffle_dyck3",
            lambda: lib.make_shuffle_dyck(pairs=["()", "{}", "[]"]),
            {"(", ")", "{", "}", "[", "]"},
            3,
            S + "[shuffle_dyck3_1..3]",
            tracr_max_seq_len=6,
        ),
        Spec("tc_hist", lib.make_hist, ABCD, 4, S + "[hist]", tracr_max_seq_len=5),
        Spec(
            "tc_sort_unique_1",
            lambda: lib.make_sort_unique(vals=rasp.tokens, keys=rasp.tokens),
            NUM4,
            4,
            S + "[sort_unique_1]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_sort_unique_2",
            lambda: lib.make_sort_unique(vals=rasp.tokens, keys=1 - rasp.indices),
            ABCD,
            4,
            S + "[sort_unique_2]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_sort_1",
            lambda: lib.make_sort(vals=rasp.tokens, keys=rasp.tokens, max_seq_len=5, min_key=1),
            NUM4,
            4,
            S + "[sort_1, sort_3]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_sort_2",
            lambda: lib.make_sort(
                vals=rasp.tokens, keys=1 - rasp.indices, max_seq_len=5, min_key=1
            ),
            ABCD,
            4,
            S + "[sort_2]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_sort_freq",
            lambda: lib.make_sort_freq(max_seq_len=5),
            NUM4,
            4,
            S + "[sort_freq]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_count_less_freq_categorical",
            lambda: lib.make_count_less_freq(n=2),
            ABCD,
            4,
            S + "[make_count_less_freq_categorical_1, _2]",
            tracr_max_seq_len=6,
        ),
        Spec(
            "tc_count_less_freq_numerical",
            lambda: rasp.numerical(lib.make_count_less_freq(n=2)),
            ABCD,
            4,
            S + "[make_count_less_freq_numerical_1, _2]",
            tracr_max_seq_len=6,
        ),
        Spec(
            "tc_count",
            lambda: lib.make_count(rasp.tokens, "a"),
            {"a", "b", "c"},
            5,
            S + "[make_count_1..3]",
            tracr_max_seq_len=8,
        ),
        Spec(
            "tc_nary_sequencemap_1",
            lambda: lib.make_nary_sequencemap(
                lambda x, y, z: x + y - z, rasp.tokens, rasp.tokens, rasp.indices
            ),
            {1, 2, 3},
            4,
            S + "[make_nary_sequencemap_1]",
            tracr_max_seq_len=5,
        ),
        Spec(
            "tc_nary_sequencemap_2",
            lambda: lib.make_nary_sequencemap(
                lambda x, y, z: x * y / z, rasp.indices, rasp.indices, rasp.tokens
            ),
            {1, 2, 3},
            3,
            S + "[make_nary_sequencemap_2]",
        ),
    ]


def causal_specs() -> list[Spec]:
    S = "tracr/compiler/test_cases.py:CAUSAL_TEST_CASES"
    return universal_specs("causal_", True) + [
        Spec(
            "causal_selector_width",
            lambda: rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)),
            ABCD,
            4,
            S + "[selector_width]",
            True,
            5,
        ),
    ]


def integration_specs() -> list[Spec]:
    """The four programs of test_rasp_program_and_transformer_produce_same_output."""
    S = "tracr/compiler/rasp_to_transformer_integration_test.py:"
    v = {0, 1, 2}
    return [
        Spec("it_map", lambda: rasp.Map(lambda x: x + 1, rasp.tokens), v, 3, S + "[map]"),
        Spec(
            "it_sequence_map",
            lambda: rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.indices),
            v,
            3,
            S + "[sequence_map, sequence_map_with_same_input]",
        ),
        Spec(
            "it_select_aggregate",
            lambda: rasp.Aggregate(
                rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ),
                rasp.Map(lambda x: 1, rasp.tokens),
            ),
            v,
            3,
            S + "[select_aggregate]",
        ),
        Spec(
            "single_label",
            lambda: rasp.categorical(rasp.Map(lambda x: 1, rasp.tokens)),
            {"a", "b"},
            3,
            "issue 17: a categorical output with a single label",
        ),
    ]


def all_specs() -> list[Spec]:
    return lib_specs() + test_case_specs() + causal_specs() + integration_specs()


# ---------------------------------------------------------------------------


def _value(v: Any) -> Any:
    """A RASP/tracr value as JSON (numpy scalars to Python)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def rasp_outputs(program: rasp.SOp, word: list[Any], causal: bool) -> list[Any]:
    """RASP's own output; all-null where the evaluator raises (an undefined mean)."""
    try:
        out = (causal_eval.evaluate if causal else rasp.evaluate)(program, word)
    except ValueError:
        RAISED.append(word)
        return [None] * len(word)
    return [_value(v) for v in out]


def _kind(expr: rasp.RASPExpr) -> str:
    return "num" if rasp.is_numerical(expr) else "cat"


def features(program: rasp.SOp) -> list[str]:
    """Which tracr compilation features the program's RASP graph uses.

    The MLP kinds follow tracr's ``expr_to_craft_graph``: a Map from categorical to
    numerical, a numerical Map (discretising MLP, to numerical or categorical), a
    categorical Map or SequenceMap (a table), a numerical LinearSequenceMap.
    """
    seen: set[str] = set()
    todo, done = [program], set()
    while todo:
        e = todo.pop()
        if e.label in done:
            continue
        done.add(e.label)
        todo.extend(e.children)
        if isinstance(e, rasp.SelectorWidth):
            seen.add("selector width")
        elif isinstance(e, rasp.Aggregate):
            seen.add(f"{'numerical' if rasp.is_numerical(e) else 'categorical'} aggregate")
        elif isinstance(e, rasp.LinearSequenceMap):
            seen.add("numerical linear sequence map")
        elif isinstance(e, rasp.SequenceMap):
            seen.add("categorical sequence map")
        elif isinstance(e, rasp.Map):
            kinds = (_kind(e.inner), _kind(e))
            seen.add(
                {
                    ("cat", "cat"): "categorical map",
                    ("cat", "num"): "categorical→numerical MLP",
                    ("num", "cat"): "numerical→categorical MLP (discretising)",
                    ("num", "num"): "numerical MLP (discretising)",
                }[kinds]
            )
    return sorted(seen)


def compile_one(spec: Spec) -> dict[str, Any]:
    program = spec.build()
    model = compiling.compile_rasp_to_model(
        program, spec.vocab, spec.max_seq_len, causal=spec.causal, compiler_bos=BOS
    )
    np.savez_compressed(OUT / f"{spec.name}.npz", **flat_params(model))

    enc = model.input_encoder.encoding_map
    categorical, coords, values = output_coordinates(model, program, rasp)
    decoding = None if values is None else {str(i): _value(v) for i, v in enumerate(values)}
    for c in coords:
        assert c in model.residual_labels, (spec.name, c)

    vocab = sorted(spec.vocab)
    cases = []
    for n in range(1, spec.max_seq_len + 1):
        words = [list(w) for w in itertools.product(vocab, repeat=n)]
        outs = tracr_outputs(model, words, BOS, categorical, jnp)
        for w, tracr in zip(words, outs, strict=True):
            cases.append(
                {
                    "input": w,
                    "expected": rasp_outputs(program, w, spec.causal),
                    "tracr_float32": [_value(v) for v in tracr],
                }
            )

    meta = {
        "program": spec.name,
        "source": spec.source,
        "tracr_commit": TRACR_COMMIT,
        "tracr_max_seq_len": spec.tracr_max_seq_len,
        "vocab": vocab,
        "max_seq_len": spec.max_seq_len,
        "bos": BOS,
        "compiler_bos_position": 0,
        "input_encoding": {str(k): v for k, v in enc.items()},
        "output_decoding": decoding,
        "categorical_output": categorical,
        "residual_labels": list(model.residual_labels),
        "config": model_config(model),
        "attention": ATTENTION,
        "output_label": program.label,
        "output_coordinates": coords,
        "layout": LAYOUT,
        "cases": cases,
    }
    write_meta(OUT / f"{spec.name}.json", meta)
    return meta


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """One line per key and per case (small files, readable diffs)."""

    def compact(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))

    head = [f" {json.dumps(k)}: {compact(v)}" for k, v in meta.items() if k != "cases"]
    cases = [f"  {compact(c)}" for c in meta["cases"]]
    text = "{\n" + ",\n".join(head) + ',\n "cases": [\n' + ",\n".join(cases) + "\n ]\n}\n"
    json.loads(text)  # well-formed
    path.write_text(text, encoding="utf-8")


def main(names: list[str]) -> None:
    specs = all_specs()
    assert len({s.name for s in specs}) == len(specs)
    if names[:1] == ["--features"]:  # print the features of each program, compile nothing
        for spec in specs:
            print(f"{spec.name}: {', '.join(features(spec.build()))}")
        return
    rows = []
    for spec in specs:
        if names and spec.name not in names:
            continue
        meta = compile_one(spec)
        cfg = meta["config"]
        undefined = sum(v is None for c in meta["cases"] for v in c["expected"])
        row = (
            f"{spec.name}: vocab {len(meta['vocab'])}, max_seq_len {spec.max_seq_len}, "
            f"layers {cfg['num_layers']}, heads {cfg['num_heads']}, "
            f"d {len(meta['residual_labels'])}, cases {len(meta['cases'])}, "
            f"undefined positions {undefined}, RASP raised on {len(RAISED)} input(s)"
        )
        RAISED.clear()
        print(row, flush=True)
        rows.append(row)
    versions = {p: importlib.metadata.version(p) for p in PACKAGES}
    head = subprocess.run(
        ["git", "-C", str(Path(lib.__file__).parents[2]), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    where = head or "not a git checkout, cannot tell"
    print(
        f"tracr commit: {where} (fixtures record {TRACR_COMMIT}); python {sys.version.split()[0]}"
    )
    print(json.dumps(versions))


if __name__ == "__main__":
    main(sys.argv[1:])
