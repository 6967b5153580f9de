"""Tests of the tracr importer (exactattn.importers.tracr).

Three layers of evidence, from the files up:

* structure and exactness: every fixture imports, validates, keeps tracr's float32
  weights exactly and never writes a Python float;
* meaning: a small, independent, sparse Fraction evaluator of format 1 (hard attention
  only, written here) is compared with a Haiku-layout evaluation of the raw arrays
  (``x @ W + b`` on row vectors, heads as column slices) and with RASP's outputs;
* the engine (``run_check`` / ``evaluate``), when it is importable.

Malformed files must raise ``ModelError`` whose path names the file and the key.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import shutil
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from paths import TESTS

from exactattn.core.errors import ModelError
from exactattn.importers.tracr import _rasp_number, import_tracr, write_model

FIXTURES = TESTS / "data" / "tracr"  # see README.md there
NAMES = ["reverse", "length", "frac_prevs", "shuffle_dyck1"]

TIE = "<tie>"
_CACHE: dict[tuple[str, bool], dict[str, Any]] = {}


def imported(name: str, prune: bool = True) -> dict[str, Any]:
    """The imported fixture (cached: tests must not mutate it)."""
    key = (name, prune)
    if key not in _CACHE:
        _CACHE[key] = import_tracr(FIXTURES / f"{name}.npz", FIXTURES / f"{name}.json", prune=prune)
    return _CACHE[key]


def meta_of(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def arrays_of(name: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / f"{name}.npz") as z:
        return {k: z[k] for k in z.files}


def fr(a: np.ndarray) -> np.ndarray:
    """An array of exact Fractions (float32 -> Fraction is exact through as_integer_ratio)."""
    flat = [Fraction(*v.as_integer_ratio()) for v in a.astype(np.float64).ravel().tolist()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(a.shape)


# ---------------------------------------------------------------------------
# an independent hard evaluator of format 1 (the subset the importer writes)


def _q(v: Any) -> Fraction:
    assert not isinstance(v, float), "a Python float in the model"
    return Fraction(v)


class Sparse:
    """A matrix as its nonzero entries per row: tracr weights are mostly zero."""

    def __init__(self, m: list[list[Any]]) -> None:
        self.rows = [[(j, _q(v)) for j, v in enumerate(row) if _q(v) != 0] for row in m]

    def __matmul__(self, x: list[Fraction]) -> list[Fraction]:
        return [sum((w * x[j] for j, w in row), Fraction(0)) for row in self.rows]


def _vec(v: list[Any]) -> list[Fraction]:
    return [_q(x) for x in v]


def _add(a: list[Fraction], b: list[Fraction]) -> list[Fraction]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _visible(mask: str, i: int, T: int) -> list[int]:
    return list(range(T)) if mask == "none" else list(range(i + 1))


class HardEval:
    """Average-hard evaluation of an imported model, one input at a time, in Fractions."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.m = model
        self.layers: list[tuple[str, Any]] = []
        for layer in model["layers"]:
            if layer["kind"] == "attention":
                heads = [
                    (
                        Sparse(h["query"]),
                        _vec(h.get("query_bias", [0] * len(h["query"]))),
                        Sparse(h["key"]),
                        _vec(h.get("key_bias", [0] * len(h["key"]))),
                        Sparse(h["value"]),
                        _vec(h.get("value_bias", [0] * len(h["value"]))),
                        Sparse(h["output"]),
                        h.get("mask", "none"),
                    )
                    for h in layer["heads"]
                ]
                self.layers.append(("attention", heads))
            else:
                (hid,) = layer["hidden"]
                self.layers.append(
                    (
                        "ffn",
                        (
                            Sparse(hid["weight"]),
                            _vec(hid["bias"]),
                            Sparse(layer["output"]["weight"]),
                            _vec(layer["output"]["bias"]),
                        ),
                    )
                )
        out = model["output"]
        self.out_w, self.out_b = Sparse(out["weight"]), _vec(out["bias"])

    def run(self, word: list[str]) -> list[list[list[Fraction]]]:
        """Activations after the embedding and after every layer (BOS at position 0)."""
        emb = self.m["embedding"]
        toks = [self.m["bos"], *word]
        x = [
            _add(_vec(emb["token"][t]), _vec(emb["position"]["table"][p]))
            for p, t in enumerate(toks)
        ]
        trace = [x]
        T = len(toks)
        for kind, params in self.layers:
            if kind == "attention":
                delta = [[Fraction(0)] * len(x[0]) for _ in range(T)]
                for Q, bq, K, bk, V, bv, O, mask in params:
                    qs = [_add(Q @ xi, bq) for xi in x]
                    ks = [_add(K @ xi, bk) for xi in x]
                    vs = [_add(V @ xi, bv) for xi in x]
                    for i in range(T):
                        vis = _visible(mask, i, T)
                        s = {
                            j: sum((a * b for a, b in zip(qs[i], ks[j], strict=True)), Fraction(0))
                            for j in vis
                        }
                        top = max(s.values())
                        M = [j for j in vis if s[j] == top]
                        avg = [
                            sum((vs[j][c] for j in M), Fraction(0)) / len(M)
                            for c in range(len(vs[0]))
                        ]
                        delta[i] = _add(delta[i], O @ avg)
                x = [_add(a, b) for a, b in zip(x, delta, strict=True)]
            else:
                W1, b1, W2, b2 = params
                new = []
                for xi in x:
                    h = [max(v, Fraction(0)) for v in _add(W1 @ xi, b1)]
                    new.append(_add(xi, _add(W2 @ h, b2)))
                x = new
            trace.append(x)
        return trace

    def output(self, word: list[str]) -> list[Any]:
        x = self.run(word)[-1]
        out = []
        for p in range(1, len(word) + 1):
            z = _add(self.out_w @ x[p], self.out_b)
            if self.m["output"]["kind"] == "value":
                out.append(z[0])
            else:
                top = max(z)
                winners = [k for k, v in enumerate(z) if v == top]
                out.append(self.m["output"]["labels"][winners[0]] if len(winners) == 1 else TIE)
        return out


def expected_output(model: dict[str, Any], case: dict[str, Any]) -> list[Any]:
    if model["output"]["kind"] == "value":
        return [None if v is None else Fraction(v) for v in case["output"]]
    return case["output"]


def walk(x: Any, path: str = "$") -> Iterator[tuple[str, Any]]:
    if isinstance(x, dict):
        for k, v in x.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from walk(v, f"{path}[{i}]")
    else:
        yield path, x


# ---------------------------------------------------------------------------
# structure and exactness


@pytest.mark.parametrize("name", NAMES)
def test_fixture_imports_with_the_documented_mapping(name: str) -> None:
    m, meta = imported(name), meta_of(name)
    cfg = meta["config"]
    assert m["format"] == "exactattn/1"
    assert m["alphabet"] == meta["vocab"]
    assert m["bos"] == meta["bos"] == "BOS"
    assert m["d"] == len(meta["residual_labels"])
    assert m["coordinates"] == meta["residual_labels"]
    assert m["temperature"] == f"sqrt({cfg['key_size']})"
    assert m["max_length"] == meta["max_seq_len"]
    assert len(m["embedding"]["position"]["table"]) == meta["max_seq_len"] + 1
    assert set(m["embedding"]["token"]) == {*meta["vocab"], "BOS"}  # no compiler_pad
    kinds = [layer["kind"] for layer in m["layers"]]
    assert kinds == ["attention", "ffn"] * cfg["num_layers"]
    for layer in m["layers"]:
        if layer["kind"] == "attention":
            assert len(layer["heads"]) == cfg["num_heads"]  # heads stay separate
            assert all(h["mask"] == "none" for h in layer["heads"])
    if meta["output_decoding"] is None:
        assert m["output"]["kind"] == "value"
        assert m["output"]["tolerance"] == "1/100"
    else:
        assert m["output"]["kind"] == "argmax"
        assert m["output"]["labels"] == [
            meta["output_decoding"][str(i)] for i in range(len(meta["output_coordinates"]))
        ]
    # the output reads exactly the output coordinates
    for row, coord in zip(m["output"]["weight"], meta["output_coordinates"], strict=True):
        assert [m["coordinates"][j] for j, v in enumerate(row) if v] == [coord]
        assert sum(row) == 1
    cases = m["reference"]["cases"]
    assert len(cases) == len(meta["cases"])
    assert [c["input"] for c in cases] == [c["input"] for c in meta["cases"]]


@pytest.mark.parametrize("name", NAMES)
def test_no_python_float_anywhere_and_json_round_trip(name: str, tmp_path: Path) -> None:
    m = imported(name)
    ratios = 0
    for path, v in walk(m):
        assert not isinstance(v, float), path
        if isinstance(v, str) and re.fullmatch(r"-?\d+/\d+", v):
            assert Fraction(v).denominator > 1, path  # integers are written as ints
            ratios += 1
    assert ratios > 0 or name == "reverse"
    out = tmp_path / f"{name}.json"
    write_model(m, out)
    back = json.loads(out.read_text(), parse_float=lambda s: pytest.fail(f"float {s} in file"))
    assert back == m


@pytest.mark.parametrize("name", NAMES)
def test_engine_validator_accepts_the_import(name: str, tmp_path: Path) -> None:
    from exactattn import model as model_mod

    model = model_mod.model_from_dict(imported(name))
    assert model.d == imported(name)["d"]
    write_model(imported(name), tmp_path / "m.json")
    assert model_mod.load_model(tmp_path / "m.json").name == name


def test_float32_weights_are_kept_exactly() -> None:
    """length's MLP thresholds are float32 roundings (-41.666668): kept as exact dyadics."""
    raw = arrays_of("length")["transformer/layer_0/mlp/linear_1/w"]
    m = imported("length", prune=False)
    hidden = m["layers"][1]["hidden"][0]["weight"]  # (units, d) = W1ᵀ
    r, u = map(int, np.argwhere(np.abs(raw - np.float32(-41.666668)) < 1e-4)[0])
    got = Fraction(hidden[u][r])
    assert got == Fraction(*raw[r, u].item().as_integer_ratio())
    assert got != Fraction(-125, 3) and abs(got + Fraction(125, 3)) < Fraction(1, 10**5)
    assert got.denominator & (got.denominator - 1) == 0  # a power of two: dyadic
    assert isinstance(hidden[u][r], str)


def test_transposes_and_head_slices_by_hand() -> None:
    """One forward step of reverse, Haiku layout (x @ W) against the imported (W x)."""
    a, m = arrays_of("reverse"), imported("reverse", prune=False)
    meta = meta_of("reverse")
    ks = meta["config"]["key_size"]
    enc = meta["input_encoding"]
    toks = ["BOS", "b", "a", "c"]
    X = np.array(
        [
            fr(a["token_embed/embeddings"])[enc[t]] + fr(a["pos_embed/embeddings"])[p]
            for p, t in enumerate(toks)
        ],
        dtype=object,
    )
    ev = HardEval(m)
    assert [list(r) for r in X] == ev.run(["b", "a", "c"])[0]
    base = "transformer/layer_3/attn"  # the reverse head: query weights 50 and 100
    head = m["layers"][6]["heads"][0]
    q_hk = X.dot(fr(a[f"{base}/query/w"])[:, 0:ks])  # (T, ks), row-vector convention
    k_hk = X.dot(fr(a[f"{base}/key/w"])[:, 0:ks])
    Q, K = Sparse(head["query"]), Sparse(head["key"])
    for i in range(len(toks)):
        assert Q @ list(X[i]) == list(q_hk[i])
        assert K @ list(X[i]) == list(k_hk[i])
    scores = q_hk.dot(k_hk.T)
    assert {Fraction(s) for s in scores.ravel()} <= {0, 50, 100}
    # the layer's hard output, computed in Haiku layout, equals the format-1 layer
    x6 = np.array(ev.run(["b", "a", "c"])[6], dtype=object)
    q6 = x6.dot(fr(a[f"{base}/query/w"]))
    k6 = x6.dot(fr(a[f"{base}/key/w"]))
    v6 = x6.dot(fr(a[f"{base}/value/w"]))
    s6 = q6.dot(k6.T)
    att = np.array(
        [[Fraction(int(s == max(row)), list(row).count(max(row))) for s in row] for row in s6],
        dtype=object,
    )
    out_hk = x6 + att.dot(v6).dot(fr(a[f"{base}/linear/w"]))
    assert [list(r) for r in out_hk] == ev.run(["b", "a", "c"])[7]


# ---------------------------------------------------------------------------
# the hard meaning matches RASP (independent evaluator; the engine is tested below)


SHORT = {"reverse": 4, "length": 5, "frac_prevs": 5, "shuffle_dyck1": 4}


@pytest.mark.parametrize("name", NAMES)
def test_hard_meaning_matches_rasp_on_every_defined_position(name: str) -> None:
    m = imported(name)
    ev = HardEval(m)
    checked = 0
    for case in m["reference"]["cases"]:
        if len(case["input"]) > SHORT[name]:
            continue
        got, want = ev.output(case["input"]), expected_output(m, case)
        for g, w in zip(got, want, strict=True):
            if w is not None:
                assert g == w, (case["input"], got, want)
                checked += 1
    assert checked > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_hard_meaning_matches_rasp_on_all_cases(name: str) -> None:
    m = imported(name)
    ev = HardEval(m)
    for case in m["reference"]["cases"]:
        got, want = ev.output(case["input"]), expected_output(m, case)
        assert all(w is None or g == w for g, w in zip(got, want, strict=True)), case


@pytest.mark.parametrize("name", ["reverse", "shuffle_dyck1"])
def test_pruning_changes_nothing(name: str) -> None:
    full, pruned = HardEval(imported(name, prune=False)), HardEval(imported(name))
    for word in (["a", "c", "b"], ["(", ")", ")"], ["c"], [")", "(", "(", ")"]):
        if set(word) <= set(imported(name)["alphabet"]):
            assert full.run(word) == pruned.run(word)


# ---------------------------------------------------------------------------
# a numerical program: exact fractions where tracr prints float32 roundings


def test_frac_prevs_gives_exact_fractions() -> None:
    m = imported("frac_prevs")
    ev = HardEval(m)
    word = ["x", "y", "x", "x", "y", "y"]
    assert ev.output(word) == [
        1,
        Fraction(1, 2),
        Fraction(2, 3),
        Fraction(3, 4),
        Fraction(3, 5),
        Fraction(1, 2),
    ]
    case = next(c for c in meta_of("frac_prevs")["cases"] if c["input"] == word)
    assert case["tracr_float32"][2] != 2 / 3  # tracr's float32 rounding (0.6666666865)
    assert abs(case["tracr_float32"][2] - 0.6666666865) < 1e-9
    ref = next(c for c in m["reference"]["cases"] if c["input"] == word)
    assert ref["output"] == [1, "1/2", "2/3", "3/4", "3/5", "1/2"]
    assert "1/0" in m["description"] and "replaced by the simple fraction" in m["description"]


def test_rasp_number_conversion() -> None:
    assert _rasp_number(Fraction("0.6666666666666666"), 8) == (Fraction(2, 3), "simplified")
    assert _rasp_number(Fraction("0.5"), 8) == (Fraction(1, 2), "exact")
    assert _rasp_number(Fraction("0.1"), 8) == (Fraction(1, 10), "exact")
    assert _rasp_number(Fraction("0.14285714285714285"), 5) == (Fraction(1, 7), "simplified")
    odd = Fraction("0.123456789012345678")
    assert _rasp_number(odd, 8) == (odd, "as_written")
    # the 1e-12 bound is exact: 1/3 + 2e-12 is not replaced
    near = Fraction(1, 3) + Fraction(2, 10**12)
    assert _rasp_number(near, 8)[1] == "as_written"


# ---------------------------------------------------------------------------
# synthetic programs: several heads, biases, causal masks, undefined RASP outputs


def write_fixture(
    tmp: Path, name: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> tuple[Path, Path]:
    npz, js = tmp / f"{name}.npz", tmp / f"{name}.json"
    np.savez(npz, **arrays)
    js.write_text(json.dumps(meta))
    return npz, js


def random_program(seed: int, causal: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A random 2-head, 2-layer tracr-shaped program with every bias nonzero."""
    rng = np.random.default_rng(seed)
    d, H, ks, hid, N = 5, 2, 3, 4, 3

    def w(*shape: int) -> np.ndarray:
        return (rng.integers(-4, 5, size=shape) / rng.choice([1, 2, 3, 8], size=shape)).astype(
            np.float32
        )

    arrays = {"token_embed/embeddings": w(4, d), "pos_embed/embeddings": w(N + 1, d)}
    for k in range(2):
        for p in ("query", "key", "value"):
            arrays[f"transformer/layer_{k}/attn/{p}/w"] = w(d, H * ks)
            arrays[f"transformer/layer_{k}/attn/{p}/b"] = w(H * ks)
        arrays[f"transformer/layer_{k}/attn/linear/w"] = w(H * ks, d)
        arrays[f"transformer/layer_{k}/attn/linear/b"] = w(d)
        arrays[f"transformer/layer_{k}/mlp/linear_1/w"] = w(d, hid)
        arrays[f"transformer/layer_{k}/mlp/linear_1/b"] = w(hid)
        arrays[f"transformer/layer_{k}/mlp/linear_2/w"] = w(hid, d)
        arrays[f"transformer/layer_{k}/mlp/linear_2/b"] = w(d)
    meta = {
        "program": f"random_{seed}",
        "vocab": ["p", "q"],
        "max_seq_len": N,
        "bos": "BOS",
        "compiler_bos_position": 0,
        "input_encoding": {"BOS": 2, "p": 0, "q": 1, "compiler_pad": 3},
        "output_decoding": {"0": "lo", "1": "hi"},
        "categorical_output": True,
        "residual_labels": ["a", "b", "out:lo", "out:hi", "one"],
        "config": {
            "num_heads": H,
            "num_layers": 2,
            "key_size": ks,
            "mlp_hidden_size": hid,
            "layer_norm": False,
            "causal": causal,
            "activation": "relu",
        },
        "output_coordinates": ["out:lo", "out:hi"],
        "cases": [],
    }
    return arrays, meta


def haiku_hard(arrays: dict[str, np.ndarray], meta: dict[str, Any], word: list[str]) -> list:
    """tracr's forward pass in its own layout with average-hard attention, in Fractions."""
    cfg = meta["config"]
    H, ks = cfg["num_heads"], cfg["key_size"]
    A = {k: fr(v) for k, v in arrays.items()}
    toks = [meta["bos"], *word]
    T = len(toks)
    x = np.array(
        [
            A["token_embed/embeddings"][meta["input_encoding"][t]] + A["pos_embed/embeddings"][p]
            for p, t in enumerate(toks)
        ],
        dtype=object,
    )
    trace = [x]
    for k in range(cfg["num_layers"]):
        b = f"transformer/layer_{k}"
        q = x.dot(A[f"{b}/attn/query/w"]) + A[f"{b}/attn/query/b"]
        kk = x.dot(A[f"{b}/attn/key/w"]) + A[f"{b}/attn/key/b"]
        v = x.dot(A[f"{b}/attn/value/w"]) + A[f"{b}/attn/value/b"]
        heads = []
        for h in range(H):
            c = slice(h * ks, (h + 1) * ks)
            s = q[:, c].dot(kk[:, c].T)
            att = np.zeros((T, T), dtype=object) + Fraction(0)
            for i in range(T):
                vis = range(i + 1) if cfg["causal"] else range(T)
                top = max(s[i, j] for j in vis)
                M = [j for j in vis if s[i, j] == top]
                for j in M:
                    att[i, j] = Fraction(1, len(M))
            heads.append(att.dot(v[:, c]))
        x = x + np.concatenate(heads, axis=1).dot(A[f"{b}/attn/linear/w"]) + A[f"{b}/attn/linear/b"]
        trace.append(x)
        pre = x.dot(A[f"{b}/mlp/linear_1/w"]) + A[f"{b}/mlp/linear_1/b"]
        relu = np.vectorize(lambda t: max(t, Fraction(0)), otypes=[object])(pre)
        x = x + relu.dot(A[f"{b}/mlp/linear_2/w"]) + A[f"{b}/mlp/linear_2/b"]
        trace.append(x)
    return [[list(r) for r in t] for t in trace]


@pytest.mark.parametrize("seed,causal", [(1, False), (2, True), (3, True)])
def test_random_multihead_program_equals_haiku_layout(
    seed: int, causal: bool, tmp_path: Path
) -> None:
    arrays, meta = random_program(seed, causal)
    npz, js = write_fixture(tmp_path, "rnd", arrays, meta)
    for prune in (False, True):
        m = import_tracr(npz, js, prune=prune)
        assert m["meta"]["linear_bias"] == 2  # nonzero linear/b, added exactly
        assert {h["mask"] for layer in m["layers"][::2] for h in layer["heads"]} == {
            "leq" if causal else "none"
        }
        ev = HardEval(m)
        for n in (1, 2, 3):
            for word in itertools.product(["p", "q"], repeat=n):
                assert ev.run(list(word)) == haiku_hard(arrays, meta, list(word))


def test_undefined_rasp_positions_are_kept_as_null(tmp_path: Path) -> None:
    meta = meta_of("reverse")
    meta["cases"][5]["expected"][1] = None
    meta["cases"][40]["expected"] = [None] * len(meta["cases"][40]["input"])
    npz = tmp_path / "reverse.npz"
    shutil.copy(FIXTURES / "reverse.npz", npz)
    (tmp_path / "reverse.json").write_text(json.dumps(meta))
    m = import_tracr(npz, tmp_path / "reverse.json")
    cases = m["reference"]["cases"]
    assert len(cases) == len(meta["cases"])  # nothing dropped
    assert cases[5]["output"][1] is None and cases[5]["output"][0] is not None
    assert cases[40]["output"] == [None] * len(cases[40]["input"])
    undefined = 1 + len(cases[40]["input"])
    assert f"{undefined} undefined positions kept as null" in m["description"]


def test_numerical_null_and_bool_outputs(tmp_path: Path) -> None:
    meta = meta_of("frac_prevs")
    meta["cases"][3]["expected"] = [None, True]
    npz = tmp_path / "f.npz"
    shutil.copy(FIXTURES / "frac_prevs.npz", npz)
    (tmp_path / "f.json").write_text(json.dumps(meta))
    m = import_tracr(npz, tmp_path / "f.json")
    assert m["reference"]["cases"][3]["output"] == [None, 1]


# ---------------------------------------------------------------------------
# malformed files: ModelError naming the file and the key


def _broken_npz(tmp: Path, name: str = "reverse", **change: Any) -> tuple[Path, Path]:
    a = arrays_of(name)
    for k, v in change.items():
        k = k.replace("__", "/")
        if v is None:
            del a[k]
        else:
            a[k] = v
    npz = tmp / f"{name}.npz"
    np.savez(npz, **a)
    return npz, FIXTURES / f"{name}.json"


def _raises(npz: Path, js: Path, path: str, *words: str) -> ModelError:
    with pytest.raises(ModelError) as info:
        import_tracr(npz, js)
    err = info.value
    assert err.path == path, str(err)
    for w in words:
        assert w in str(err), str(err)
    assert str(err).startswith(path)
    return err


def test_missing_array(tmp_path: Path) -> None:
    npz, js = _broken_npz(tmp_path, transformer__layer_0__attn__query__w=None)
    _raises(npz, js, "reverse.npz: transformer/layer_0/attn/query/w", "missing")


def test_wrong_shape(tmp_path: Path) -> None:
    npz, js = _broken_npz(
        tmp_path, transformer__layer_2__mlp__linear_1__w=np.zeros((41, 7), np.float32)
    )
    err = _raises(npz, js, "reverse.npz: transformer/layer_2/mlp/linear_1/w", "(41, 7)", "(41, 30)")
    assert err.fix


def test_non_finite_weight(tmp_path: Path) -> None:
    w = arrays_of("reverse")["transformer/layer_3/attn/key/w"].copy()
    w[2, 1] = np.nan
    npz, js = _broken_npz(tmp_path, transformer__layer_3__attn__key__w=w)
    _raises(npz, js, "reverse.npz: transformer/layer_3/attn/key/w", "(2, 1)", "not finite")


def test_unexpected_array_is_not_ignored(tmp_path: Path) -> None:
    npz, js = _broken_npz(tmp_path, transformer__layer_0__ln__scale=np.ones(41, np.float32))
    _raises(npz, js, "reverse.npz: transformer/layer_0/ln/scale", "not part of")


def test_pickled_array_is_refused(tmp_path: Path) -> None:
    npz, js = _broken_npz(tmp_path, pos_embed__embeddings=np.array([{"evil": 1}], dtype=object))
    err = _raises(npz, js, "reverse.npz: pos_embed/embeddings")
    assert "pickle" in str(err).lower()


def test_not_an_npz(tmp_path: Path) -> None:
    bad = tmp_path / "reverse.npz"
    bad.write_bytes(b"this is not a zip archive\n" * 4)
    _raises(bad, FIXTURES / "reverse.json", "reverse.npz", "not a readable .npz")
    buf = io.BytesIO()
    np.save(buf, np.zeros(3))
    bad.write_bytes(buf.getvalue())
    _raises(bad, FIXTURES / "reverse.json", "reverse.npz", "single .npy")
    _raises(tmp_path / "absent.npz", FIXTURES / "reverse.json", "absent.npz", "cannot read")


def _broken_meta(tmp: Path, edit: Any, name: str = "reverse") -> tuple[Path, Path]:
    meta = meta_of(name)
    edit(meta)
    js = tmp / f"{name}.json"
    js.write_text(json.dumps(meta))
    return FIXTURES / f"{name}.npz", js


@pytest.mark.parametrize(
    "edit,path,word",
    [
        (lambda m: m.pop("residual_labels"), "reverse.json: residual_labels", "missing"),
        (lambda m: m["residual_labels"].pop(), "reverse.npz: token_embed/embeddings", "(5, 40)"),
        (
            lambda m: m["config"].update(key_size=6),
            "reverse.npz: transformer/layer_0/attn/query/w",
            "(41, 6)",
        ),
        (
            lambda m: m["config"].update(num_layers=3),
            "reverse.npz: transformer/layer_3/attn/key/b",
            "not part of",
        ),
        (
            lambda m: m["config"].update(layer_norm=True),
            "reverse.json: config.layer_norm",
            "layer normalization",
        ),
        (lambda m: m.update(max_seq_len=6), "reverse.npz: pos_embed/embeddings", "(7, 41)"),
        (lambda m: m["input_encoding"].pop("b"), "reverse.json: input_encoding", "'b'"),
        (
            lambda m: m.update(output_coordinates=["reverse_1:a", "reverse_1:x"]),
            "reverse.json: output_coordinates[1]",
            "residual_labels",
        ),
        (
            lambda m: m.update(output_decoding={"0": "b", "1": "a", "2": "c"}),
            "reverse.json: output_decoding.0",
            "order",
        ),
        (
            lambda m: m.update(output_decoding={"0": "a", "1": "b"}),
            "reverse.json: output_decoding",
            "keys",
        ),
        (
            lambda m: m["cases"][7].update(input=["a", "z"]),
            "reverse.json: cases[7].input[1]",
            "'z'",
        ),
        (
            lambda m: m["cases"][7].update(expected=["a"]),
            "reverse.json: cases[7].expected",
            "2 outputs",
        ),
        (
            lambda m: m["cases"][7].update(expected=["a", "q"]),
            "reverse.json: cases[7].expected[1]",
            "not one of the output labels",
        ),
        (lambda m: m["cases"].append(m["cases"][0]), "reverse.json: cases[363].input", "repeats"),
        (
            lambda m: m["cases"][0].update(input=["a"] * 6),
            "reverse.json: cases[0].input",
            "max_seq_len",
        ),
        (lambda m: m.update(bos="a"), "reverse.json: bos", "also in vocab"),
        (lambda m: m.update(vocab=[]), "reverse.json: vocab", "non-empty"),
    ],
)
def test_malformed_metadata(edit: Any, path: str, word: str, tmp_path: Path) -> None:
    npz, js = _broken_meta(tmp_path, edit)
    _raises(npz, js, path, word)


def test_metadata_not_json(tmp_path: Path) -> None:
    js = tmp_path / "reverse.json"
    js.write_text('{"vocab": ["a", "b"], ')
    _raises(FIXTURES / "reverse.npz", js, "reverse.json", "not valid JSON")
    js.write_text('{"vocab": NaN}')
    _raises(FIXTURES / "reverse.npz", js, "reverse.json", "NaN")


def test_numerical_output_needs_one_coordinate(tmp_path: Path) -> None:
    npz, js = _broken_meta(
        tmp_path, lambda m: m.update(output_coordinates=["frac_prevs_7", "map_9"]), "frac_prevs"
    )
    _raises(npz, js, "frac_prevs.json: output_coordinates", "one coordinate")


def _cli(args: list[str]) -> Any:
    from exactattn import cli

    try:
        return cli.main(args)
    except SystemExit as exc:
        return exc.code


def test_cli_import_exit_code(tmp_path: Path) -> None:
    """`exactattn import tracr`: a good file exits 0, a malformed one exits with code 2."""
    good = tmp_path / "good.json"
    code = _cli(
        [
            "import",
            "tracr",
            str(FIXTURES / "length.npz"),
            str(FIXTURES / "length.json"),
            "-o",
            str(good),
        ]
    )
    assert code in (0, None)
    assert json.loads(good.read_text())["name"] == "length"
    npz, js = _broken_npz(tmp_path, transformer__layer_0__attn__query__w=None)
    assert _cli(["import", "tracr", str(npz), str(js), "-o", str(tmp_path / "m.json")]) == 2
    assert not (tmp_path / "m.json").exists()


# ---------------------------------------------------------------------------
# the engine on imported models


def _engine() -> Any:
    from exactattn import evaluate, model_from_dict, run_check

    return model_from_dict, run_check, evaluate


ENGINE_N = {"reverse": 3, "length": 4, "frac_prevs": 4, "shuffle_dyck1": 3}

# gamma(n) measured on the imported fixtures for n = 1..max_seq_len (docs/tracr.md)
GAMMA = {
    "reverse": ["50"] * 5,
    "length": ["100"] * 8,
    "frac_prevs": ["50"] * 8,
    "shuffle_dyck1": ["50"] * 6 + ["10298525/262144", "22937575/1179648"],
}
# an upper bound on the largest certified soft error (any layer, any position) per fixture
MAX_ERROR = {"reverse": 3e-6, "length": 2e-21, "frac_prevs": 2e-6, "shuffle_dyck1": 3e-3}


def _check_rows(name: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        n = row["n"]
        assert row["inputs"] == len(imported(name)["alphabet"]) ** n
        assert row["gamma"] == GAMMA[name][n - 1], (n, row["gamma"])
        assert row["reference_mismatches"] == {"hard": 0, "soft": 0}, row
        assert row["reference_undefined"] == 0
        assert row["disagreements"] == 0
        assert row["invariant"] == "holds"
        for layer in row["layers"]:
            lo, hi = Decimal(layer["error"]["lower"]), Decimal(layer["error"]["upper"])
            assert 0 <= lo <= hi <= Decimal(MAX_ERROR[name])


@pytest.mark.parametrize("name", NAMES)
def test_engine_check_on_imported_fixtures(name: str) -> None:
    model_from_dict, run_check, _ = _engine()
    res = run_check(model_from_dict(imported(name)), max_n=ENGINE_N[name]).to_json()
    assert [r["n"] for r in res["lengths"]] == list(range(1, ENGINE_N[name] + 1))
    _check_rows(name, res["lengths"])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_engine_check_up_to_max_seq_len(name: str) -> None:
    """The numbers in docs/tracr.md (about 20 s for all four)."""
    model_from_dict, run_check, _ = _engine()
    m = imported(name)
    res = run_check(model_from_dict(m), max_n=m["max_length"]).to_json()
    _check_rows(name, res["lengths"])


def test_engine_evaluates_frac_prevs_exactly() -> None:
    model_from_dict, _, evaluate = _engine()
    ev = evaluate(model_from_dict(imported("frac_prevs")), ["x", "y", "x"])
    assert [Fraction(v[0] if isinstance(v, (list, tuple)) else v) for v in ev.output_hard] == [
        1,
        Fraction(1, 2),
        Fraction(2, 3),
    ]


def test_engine_reports_undefined_reference_positions(tmp_path: Path) -> None:
    model_from_dict, run_check, _ = _engine()
    meta = meta_of("length")
    meta["cases"] = [c for c in meta["cases"] if len(c["input"]) <= 2]
    meta["cases"][2]["expected"][0] = None
    npz = tmp_path / "length.npz"
    shutil.copy(FIXTURES / "length.npz", npz)
    (tmp_path / "length.json").write_text(json.dumps(meta))
    m = import_tracr(npz, tmp_path / "length.json")
    res = run_check(model_from_dict(m), max_n=2).to_json()
    row = next(r for r in res["lengths"] if r["n"] == 2)
    assert row["reference_undefined"] >= 1
    assert row["reference_mismatches"]["hard"] == 0
