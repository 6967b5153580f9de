"""Unit tests for the engine's exact and certified building blocks."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn import evaluate, load_model, model_from_dict, run_check
from exactattn.core.errors import ModelError
from exactattn.core.numbers import (
    JsonNumber,
    arb_interval,
    decimal_down,
    decimal_up,
    parse_decimal,
    parse_rational,
)
from exactattn.engine.ratarray import RatArray, int_matmul

EXAMPLE = ROOT / "exactattn" / "examples" / "mean_a_position.json"


# -- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.1", Fraction(1, 10)),
        ("1e-3", Fraction(1, 1000)),
        ("-2.5E+2", Fraction(-250)),
        (".5", Fraction(1, 2)),
        ("3/4", Fraction(3, 4)),
        ("-6/4", Fraction(-3, 2)),
        ("7", 7),
    ],
)
def test_literals_are_exact(text: str, value: Fraction) -> None:
    assert parse_rational(JsonNumber(text), "x") == value


@pytest.mark.parametrize("text", ["1e400", "1e-301", "1/0", "abc", "0x10", "1,5"])
def test_bad_literals_name_the_path(text: str) -> None:
    with pytest.raises(ModelError) as e:
        parse_rational(JsonNumber(text), "layers[0].heads[0].query[1][2]")
    assert "layers[0].heads[0].query[1][2]" in str(e.value)


@given(st.fractions(min_value=-(10**6), max_value=10**6), st.integers(1, 20))
def test_decimal_rounding_is_outward(x: Fraction, digits: int) -> None:
    lo, hi = parse_decimal(decimal_down(x, digits)), parse_decimal(decimal_up(x, digits))
    assert lo <= x <= hi
    if x:
        assert hi - lo <= abs(x) * Fraction(10) ** (1 - digits) * 2


def test_arb_interval_encloses_tiny_values() -> None:
    x = (arb(-1000)).exp()
    iv = arb_interval(x)
    assert iv["lower"].endswith("e-435") and iv["upper"].endswith("e-435")
    assert parse_decimal(iv["lower"]) < parse_decimal(iv["upper"])


# -- exact arithmetic ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 90), st.integers(0, 90), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_int_matmul_is_exact_at_every_size(abits: int, bbits: int, inner: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = np.array(
        [
            [
                int(rng.integers(-(2**20), 2**20)) * 2**abits + int(rng.integers(-9, 9))
                for _ in range(inner)
            ]
            for _ in range(3)
        ],
        dtype=object,
    )
    b = np.array(
        [
            [
                int(rng.integers(-(2**20), 2**20)) * 2**bbits - int(rng.integers(-9, 9))
                for _ in range(4)
            ]
            for _ in range(inner)
        ],
        dtype=object,
    )
    expect = [[sum(a[i, k] * b[k, j] for k in range(inner)) for j in range(4)] for i in range(3)]
    got = int_matmul(a, b)
    assert [[int(x) for x in row] for row in got] == expect
    a64 = a.astype(np.int64) if max(abs(int(x)) for x in a.flat) < 2**62 else None
    if a64 is not None:
        assert [[int(x) for x in row] for row in int_matmul(a64, b)] == expect


def test_ratarray_common_denominator() -> None:
    r = RatArray.from_fractions([[Fraction(1, 3), Fraction(1, 6)], [Fraction(2), Fraction(0)]])
    assert r.den == 6
    assert r.to_fractions() == [[Fraction(1, 3), Fraction(1, 6)], [Fraction(2), Fraction(0)]]
    s = r + RatArray.from_fractions([[Fraction(1, 4)] * 2] * 2)
    assert s.to_fractions()[0] == [Fraction(7, 12), Fraction(5, 12)]


# -- exact-zero decisions ----------------------------------------------------------------


def test_worked_example_ties_are_decided_exactly() -> None:
    """Zero-margin inputs of the worked example have soft output exactly 1/2 (docs)."""
    model = load_model(EXAMPLE)
    res = run_check(model, max_n=6).to_json()
    assert [e["disagreements"] for e in res["lengths"]] == [0] * 6
    assert [e["undecided"] for e in res["lengths"]] == [0] * 6
    ev = evaluate(model, list("aaab"))
    assert ev.soft_decided and ev.output_soft.value is False


def test_nonzero_near_tie_is_not_called_equal() -> None:
    """Same model with threshold moved off a tie: decided by precision, not as a tie."""
    d = json.loads(EXAMPLE.read_text())
    d["output"]["threshold"] = "1/2"
    d["embedding"]["position"] = ["0", "0", "i/n + 1/1000", "0"]
    model = model_from_dict(d)
    res = run_check(model, max_n=4).to_json()
    for e in res["lengths"]:
        assert e["undecided"] == 0


# -- CLI ---------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "exactattn", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_clean_run_exits_0_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = _cli("check", str(EXAMPLE), "--max-n", "3", "--json", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "exactattn-result/1"
    assert [e["gamma"] for e in data["lengths"]] == ["1", "1", "1"]
    assert data["verdict"]["status"] == "clean"


def test_cli_problem_exits_1(tmp_path: Path) -> None:
    """At τ = 100 the soft meaning is nearly uniform: decisions flip somewhere."""
    d = json.loads(EXAMPLE.read_text())
    d["reference"] = {"kind": "regex", "pattern": "b*a"}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(d))
    p = _cli("check", str(path), "--max-n", "3")
    assert p.returncode == 1
    assert "mismatch" in p.stdout


def test_cli_refuses_large_jobs(tmp_path: Path) -> None:
    p = _cli("check", str(EXAMPLE), "--max-n", "30")
    assert p.returncode == 2
    assert "--force" in p.stderr


def test_cli_eval_shows_both_meanings() -> None:
    p = _cli("eval", str(EXAMPLE), "ab")
    assert p.returncode == 0, p.stderr
    assert "attention" in p.stdout and "reject" in p.stdout


def test_cli_build_dyck_accepts_both_pair_forms(tmp_path: Path) -> None:
    """`--pairs "()" "[]"` (the documented form) and repeated --pairs build models/dyck2.json."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert _cli("build", "dyck", "--pairs", "()", "[]", "-o", str(a)).returncode == 0
    assert _cli("build", "dyck", "--pairs", "()", "--pairs", "[]", "-o", str(b)).returncode == 0
    want = json.loads((ROOT / "models" / "dyck2.json").read_text())
    assert json.loads(a.read_text()) == want == json.loads(b.read_text())


def test_add_columns_equals_adding_the_full_array() -> None:
    """RatArray.add_columns gives the numerators, denominator and dtype of the full sum,
    in int64 and past it (Python ints)."""
    import numpy as np

    from exactattn.engine.ratarray import RatArray

    rng = np.random.default_rng(5)
    for big in (1, 2**40, 2**61):
        a = RatArray(rng.integers(-1000, 1000, (3, 4, 6)) * big, 6)
        part = RatArray(rng.integers(-1000, 1000, (3, 4, 2)), 4)
        cols = np.array([1, 4])
        full = np.zeros((3, 4, 6), dtype=np.int64)
        full[..., cols] = part.num
        want = a + RatArray(full, part.den)
        before = a.num.copy()
        got = a.add_columns(cols, part)
        assert got.den == want.den == 12
        assert got.num.dtype == want.num.dtype
        assert np.array_equal(got.num, want.num)
        assert np.array_equal(a.num, before)  # the operand is left alone
