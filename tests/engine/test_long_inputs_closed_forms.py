"""Long inputs (issue 12): one-letter models at n ≥ 1,000, exact, against closed forms.

Models (alphabet {a}, BOS; x = (is_bos, 1, ·, ·)):

* UNIFORM: one causal average head with key 0, so every visible key ties and slot i
  (BOS = slot 0) averages is_bos over slots 0..i: out_i = 1/(i+1) exactly. The common
  denominator of the activations is lcm(1..T) ≈ e^T, which left int64 at n ≈ 43.
* TWO_HEAD: UNIFORM plus a head whose key is 1 − is_bos: the a's win by γ = 1, the hard
  average over them of is_bos is 0, and softmax gives BOS the weight
  1/(1 + i·e^{1/τ}) at slot i ≥ 1. With τ = 1/n the largest error is at slot 1:
  ε(n) = 1/(1 + e^n). The read-out 1/(n+1) + δ > 0 accepts in both meanings.
* TWO_LAYER: UNIFORM, then a head with query out_i, key −out_j: scores −1/((i+1)(j+1)), so
  the last visible key wins and γ(n) = min_i 1/(i(i+1)²) = 1/(n(n+1)²).
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import arb, ctx, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn import model_from_dict, run_check
from exactattn.core.numbers import parse_decimal
from exactattn.engine.hard import CompiledModel, _divide_rows, run_hard
from exactattn.engine.ratarray import RatArray, _scale, int_matmul


def _head(q: list, k: list, v: list, o: list) -> dict:
    return {"query": [q], "key": [k], "value": [v], "output": o, "mask": "leq", "hard": "average"}


UNIFORM = {
    "format": "exactattn/1",
    "name": "uniform-bos",
    "alphabet": ["a"],
    "bos": "<s>",
    "d": 3,
    "embedding": {"token": {"a": [0, 1, 0], "<s>": [1, 1, 0]}, "position": ["0", "0", "0"]},
    "temperature": "1/n",
    "layers": [
        {"kind": "attention", "heads": [_head([0, 1, 0], [0, 0, 0], [1, 0, 0], [[0], [0], [1]])]}
    ],
    "output": {"kind": "accept", "position": "last", "weight": [0, 0, 1], "bias": 0,
               "threshold": 0},
}  # fmt: skip

TWO_HEAD = {
    "format": "exactattn/1",
    "name": "two-head-bos",
    "alphabet": ["a"],
    "bos": "<s>",
    "d": 4,
    "embedding": {"token": {"a": [0, 1, 0, 0], "<s>": [1, 1, 0, 0]}, "position": ["0"] * 4},
    "temperature": "1/n",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                _head([0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [[0], [0], [1], [0]]),
                _head([0, 1, 0, 0], [-1, 1, 0, 0], [1, 0, 0, 0], [[0], [0], [0], [1]]),
            ],
        }
    ],
    "output": {"kind": "accept", "position": "last", "weight": [0, 0, 1, 1], "bias": 0,
               "threshold": 0},
}  # fmt: skip

TWO_LAYER = copy.deepcopy(TWO_HEAD)
TWO_LAYER["name"] = "two-layer-bos"
_MEAN = _head([0, 1, 0, 0], [0] * 4, [1, 0, 0, 0], [[0], [0], [1], [0]])
_LAST = _head([0, 0, 1, 0], [0, 0, -1, 0], [0, 0, 1, 0], [[0], [0], [0], [1]])
TWO_LAYER["layers"] = [{"kind": "attention", "heads": [h]} for h in (_MEAN, _LAST)]
TWO_LAYER["output"]["weight"] = [0, 0, 0, 1]


def test_uniform_exact_at_n_1000() -> None:
    """Every activation equals the closed form (is_bos, 1, 1/(i+1)), exactly."""
    n = 1000
    model = model_from_dict(UNIFORM)
    hb = run_hard(CompiledModel(model), [("a",) * n], n)
    x = hb.activations[-1]
    want = [[Fraction(int(i == 0)), Fraction(1), Fraction(1, i + 1)] for i in range(n + 1)]
    assert x.to_fractions()[0] == want
    # the averages really need lcm(1..T): the engine keeps exactly that, no more
    assert x.den == math.lcm(*range(1, n + 2))
    mixed = hb.layers[0].heads[0].mixed
    assert mixed.to_fractions()[0] == [[Fraction(1, i + 1)] for i in range(n + 1)]


def test_two_head_certified_at_n_1000() -> None:
    """Soft error ε(n) = 1/(1 + e^n) enclosed to 1e-6; γ = 1; the one input is accepted."""
    n = 1000
    res = run_check(model_from_dict(TWO_HEAD), max_n=n, min_n=n).to_json()
    assert res["verdict"]["status"] == "clean"
    entry = res["lengths"][0]
    assert entry["gamma"] == "1" and entry["x_max"] == "1" and entry["accepted"] == 1
    assert entry["min_margin"] == f"1/{n + 1}"
    err = entry["layers"][0]["error"]
    lo, hi = parse_decimal(err["lower"]), parse_decimal(err["upper"])
    with ctx.workprec(200):
        eps = 1 / (1 + arb(n).exp())
        assert arb(fmpq(lo.numerator, lo.denominator)) <= eps
        assert eps <= arb(fmpq(hi.numerator, hi.denominator))
    assert hi - lo <= hi * Fraction(1, 10**6)
    assert entry["precision_bits"] == 96


def test_two_layer_gap_at_n_300() -> None:
    """A later layer that reads the 1/(i+1) averages: γ(n) = 1/(n(n+1)²), hard path exact."""
    n = 300
    res = run_check(model_from_dict(TWO_LAYER), max_n=n, min_n=n, hard_only=True).to_json()
    entry = res["lengths"][0]
    assert entry["gamma"] == f"1/{n * (n + 1) ** 2}"
    assert entry["layers"][1]["activation_max"] == "1"


def test_cli_check_one_letter_n_2000(tmp_path: Path) -> None:
    """`exactattn check` at n = 2,000 on a one-letter model: certified, exit 0."""
    model = tmp_path / "two_head.json"
    model.write_text(json.dumps(TWO_HEAD))
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "exactattn", "check", str(model), "--min-n", "2000",
         "--max-n", "2000", "-q", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(out.read_text())["lengths"][0]
    assert entry["undecided"] == 0 and entry["disagreements"] == 0
    assert entry["layers"][0]["error"]["upper"].endswith("e-869")  # 1/(1+e^2000) ≈ 2.6e-869


@pytest.mark.slow
def test_uniform_cli_n_2000_and_two_layer_n_1000(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for d, n, extra in ((UNIFORM, 2000, []), (TWO_LAYER, 1000, ["--hard-only"])):
        model = tmp_path / "m.json"
        model.write_text(json.dumps(d))
        out = tmp_path / "out.json"
        proc = subprocess.run(
            [sys.executable, "-m", "exactattn", "check", str(model), "--min-n", str(n),
             "--max-n", str(n), "-q", "--json", str(out), *extra],
            capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        entry = json.loads(out.read_text())["lengths"][0]
        if d is TWO_LAYER:
            assert entry["gamma"] == f"1/{n * (n + 1) ** 2}"


# -- the pieces --------------------------------------------------------------------------

big_ints = st.integers(-(2**200), 2**200) | st.integers(-50, 50)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(1, 6),
    cols=st.integers(1, 3),
    big=st.booleans(),
    den=st.integers(1, 10**30),
)
def test_divide_rows_matches_fractions(
    data: st.DataObject, rows: int, cols: int, big: bool, den: int
) -> None:
    ints = big_ints if big else st.integers(-1000, 1000)
    vals = data.draw(st.lists(st.lists(ints, min_size=cols, max_size=cols), min_size=rows,
                              max_size=rows))  # fmt: skip
    counts = data.draw(st.lists(st.integers(0, 60), min_size=rows, max_size=rows))
    vals = [[0] * cols if c == 0 else r for r, c in zip(vals, counts, strict=True)]
    arr = np.array([vals], dtype=object)
    num = arr if any(abs(v) >= 2**62 for r in vals for v in r) else arr.astype(np.int64)
    got = _divide_rows(RatArray(num, den), np.array([counts], dtype=np.int64))
    want = [
        [Fraction(v, den * c) if c else Fraction(0) for v in r]
        for r, c in zip(vals, counts, strict=True)
    ]
    assert got.to_fractions()[0] == want


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 4),
    k=st.integers(1, 4),
    p=st.integers(1, 4),
    bits=st.sampled_from([10, 70, 400, 3000]),
)
def test_int_matmul_big(data: st.DataObject, n: int, k: int, p: int, bits: int) -> None:
    """Every path of int_matmul (BLAS, limbs, FLINT) against Python integers."""
    ints = st.integers(-(2**bits), 2**bits)
    a = data.draw(st.lists(st.lists(ints, min_size=k, max_size=k), min_size=n, max_size=n))
    b = data.draw(st.lists(st.lists(ints, min_size=p, max_size=p), min_size=k, max_size=k))
    want = [[sum(a[i][t] * b[t][j] for t in range(k)) for j in range(p)] for i in range(n)]
    A = np.array(a, dtype=object)
    B = np.array(b, dtype=object)
    if bits < 62:
        A, B = A.astype(np.int64), B.astype(np.int64)
    got = int_matmul(A, B)
    assert [[int(x) for x in row] for row in got] == want


def test_scale_zeros_by_a_huge_factor() -> None:
    """An int64 array of zeros times a factor ≥ 2^63 (the n = 43 crash in read_output)."""
    z = _scale(np.zeros(3, dtype=np.int64), 2**70 + 1)
    assert [int(x) for x in z] == [0, 0, 0]
    y = RatArray(np.zeros((1, 1), dtype=np.int64), 1) + RatArray(np.array([[1]], object), 2**70)
    assert y.to_fractions() == [[Fraction(1, 2**70)]]
