"""Tiny temperatures (issue 12): τ = 2^-40, 2^-200, 10^-300, 1/n^1024 certify in seconds.

The model ("any-a"): alphabet {a, b} with BOS, x = (is_a, 1, out); one average head, causal,
query 1, key is_a, value is_a written to `out`. Accept iff out > 1/2 at the last position.

Hand derivation. At slot i let k = #a's and m = #others (BOS and b's) among slots 0..i.
Hard: k > 0 ⇒ the a's win (gap γ = 1), out = 1; k = 0 ⇒ every key ties, out = 0 = soft.
Soft: out = kE/(kE + m) with E = e^{1/τ}, so the error is δ = m/(kE + m) ≤ (m/k)·e^{-γ/τ}.
The largest m/k over all words of length n is n/1 (word b^{n-1} a, last slot), so

    ε(n) = max |soft − hard| = n/(e^{1/τ} + n) < (T − 1)·e^{-γ/τ},   T = n + 1,

and every decision agrees (hard margin 1/2 ≫ ε). We check the reported [lower, upper]
against ε(n) in log10 space with arb (the numbers are far below any float).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb, ctx
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn import model_from_dict, run_check
from exactattn.core.numbers import (
    arb_endpoints,
    arb_lower_str,
    arb_upper_str,
    decimal_down,
    decimal_to_arb,
    decimal_up,
    parse_decimal,
    short_sci_huge,
)

ANY_A = {
    "format": "exactattn/1",
    "name": "any-a",
    "alphabet": ["a", "b"],
    "bos": "<s>",
    "d": 3,
    "embedding": {
        "token": {"a": [1, 1, 0], "b": [0, 1, 0], "<s>": [0, 1, 0]},
        "position": ["0", "0", "0"],
    },
    "temperature": "1/n",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [[0, 1, 0]],
                    "key": [[1, 0, 0]],
                    "value": [[1, 0, 0]],
                    "output": [[0], [0], [1]],
                    "mask": "leq",
                    "hard": "average",
                }
            ],
        }
    ],
    "output": {
        "kind": "accept",
        "position": "last",
        "weight": [0, 0, 1],
        "bias": 0,
        "threshold": "1/2",
    },
}

_DEC = re.compile(r"^(?P<m>\d+(?:\.\d+)?)(?:e(?P<e>[+-]?\d+))?$")
PREC = 4000  # enough for (1/τ)·log10(e) with 1/τ = 10^300 to absolute accuracy 2^-2900


def lg(x: arb) -> arb:
    return x.log() / arb(10).log()


def log10_of(text: str) -> arb:
    """log10 of a positive decimal string with an arbitrarily large exponent."""
    m = _DEC.match(text)
    assert m, text
    mant = Fraction(m["m"]) if "." not in m["m"] else parse_decimal(m["m"])
    return lg(arb(mant.numerator)) - lg(arb(mant.denominator)) + arb(int(m["e"] or 0))


def log10_eps(n: int, inv_tau: arb) -> arb:
    """log10 ε(n) = log10 n − log10(e^{1/τ} + n), without forming e^{1/τ}."""
    # log10(E + n) = (1/τ)·log10 e + log10(1 + n e^{-1/τ}); the last term is in [0, n e^{-1/τ}]
    tail = arb(n) * (-inv_tau).exp()
    return lg(arb(n)) - inv_tau / arb(10).log() - lg(1 + tail)


def check_lengths(result: dict, inv_tau_of: dict[int, arb], accurate: set[int]) -> None:
    for entry in result["lengths"]:
        n = entry["n"]
        assert entry["disagreements"] == 0 and entry["undecided"] == 0
        assert entry["accepted"] == 2**n - 1  # hard: every word with an a
        assert entry["gamma"] == "1"
        err = entry["layers"][0]["error"]
        lo, up = err["lower"], err["upper"]
        truth = log10_eps(n, inv_tau_of[n])
        hand = lg(arb(n)) - inv_tau_of[n] / arb(10).log()  # (T − 1)·e^{-γ/τ}
        assert not truth > hand  # ε(n) < (T−1)e^{-γ/τ}, by a margin far below any precision
        # sound: lower ≤ ε(n) ≤ upper
        assert lo == "0" or log10_of(lo) <= truth, (n, lo)
        assert log10_of(up) >= truth, (n, up)
        # the tool's lower end never exceeds the hand bound
        assert lo == "0" or log10_of(lo) < hand
        if n in accurate:
            # arb forms e^{-1/τ} itself: relative width ≤ 1e-6, and upper ≤ hand·(1 + 1e-6)
            assert lo != "0"
            assert log10_of(up) - log10_of(lo) <= arb("1e-6") / arb(10).log()
            assert log10_of(up) <= hand + arb("1e-6") / arb(10).log()
        else:
            # past arb's exponent range at the working precision: [0, tiny] by the rule
            assert lo == "0"
            assert log10_of(up) <= -40
        assert entry["precision_bits"] <= 256, entry["precision_bits"]


@pytest.mark.parametrize(
    ("tau", "inv_tau_text", "accurate"),
    [
        ("1/2^40", "2^40", True),
        ("2^-200", "2^200", False),
        ("10^-300", "10^300", False),
    ],
)
def test_tiny_constant_tau(tau: str, inv_tau_text: str, accurate: bool) -> None:
    model = model_from_dict(ANY_A)
    t0 = time.perf_counter()
    # the arb path forms e^{-1/τ} itself (tight where arb's range allows); the float filter
    # underflows and hands such inputs to arb, so both runs report the same enclosures
    res = run_check(model, max_n=3, tau=tau, float_filter=False).to_json()
    assert time.perf_counter() - t0 < 20
    assert res["verdict"]["status"] == "clean"
    filtered = run_check(model, max_n=3, tau=tau).to_json()
    assert filtered["verdict"]["status"] == "clean"
    base, exp = inv_tau_text.split("^")
    ctx_prec = ctx.prec
    ctx.prec = PREC
    try:
        inv = arb(int(base)) ** int(exp)
        check_lengths(res, dict.fromkeys((1, 2, 3), inv), {1, 2, 3} if accurate else set())
        check_lengths(filtered, dict.fromkeys((1, 2, 3), inv), {1, 2, 3} if accurate else set())
    finally:
        ctx.prec = ctx_prec


def test_tau_n_to_the_minus_1024() -> None:
    """τ(n) = 1/n^1024: τ(1) = 1 is ordinary (tight), τ(2), τ(3) are astronomically small."""
    model = model_from_dict(ANY_A)
    t0 = time.perf_counter()
    res = run_check(model, max_n=3, tau="1/(n^1024)", float_filter=False).to_json()
    assert time.perf_counter() - t0 < 20
    assert res["verdict"]["status"] == "clean"
    ctx_prec = ctx.prec
    ctx.prec = PREC
    try:
        inv = {n: arb(n) ** 1024 for n in (1, 2, 3)}
        check_lengths(res, inv, {1})
        # n = 1: ε = 1/(e + 1) exactly (word "a"), to 15 digits
        err = res["lengths"][0]["layers"][0]["error"]
        exact = 1 / (arb(1).exp() + 1)
        assert arb(Fraction(err["lower"]).numerator) / Fraction(err["lower"]).denominator <= exact
    finally:
        ctx.prec = ctx_prec


def test_cli_tiny_tau_completes(tmp_path: Path) -> None:
    """`exactattn check` at τ = 2^-200 (table and JSON) finishes quickly with exit 0."""
    model = tmp_path / "any_a.json"
    model.write_text(json.dumps(ANY_A))
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for tau in ("2^-200", "exp(-10^6)"):
        proc = subprocess.run(
            [sys.executable, "-m", "exactattn", "check", str(model), "--max-n", "3",
             "--tau", tau, "--json", str(out)],
            capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        res = json.loads(out.read_text())
        assert res["verdict"]["status"] == "clean"
        assert all(e["layers"][0]["error"]["lower"] == "0" for e in res["lengths"])
    proc = subprocess.run(
        [sys.executable, "-m", "exactattn", "eval", str(model), "b a", "--tau", "2^-40"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "e-477511832" in proc.stdout  # ε = 1/(e^{2^40} + 1) ≈ 10^-477511832734.4


# -- the decimal conversion itself ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(-(2**80), 2**80),
    e=st.integers(-300, 300),
    r=st.integers(0, 2**20),
    re_=st.integers(-330, 300),
)
def test_moderate_balls_format_as_before(m: int, e: int, r: int, re_: int) -> None:
    """Ordinary exponents: exactly the old exact conversion (results stay byte-identical)."""
    x = arb((m, e)) + arb((r, re_)) * arb(0, 1)
    if not x.is_finite():
        return
    lo, hi = arb_endpoints(x)
    assert arb_lower_str(x) == decimal_down(lo)
    assert arb_upper_str(x) == decimal_up(hi)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 2**60),
    e=st.integers(-260_000, -70_000) | st.integers(70_000, 200_000),
    neg=st.booleans(),
)
def test_huge_exponents_enclose(m: int, e: int, neg: bool) -> None:
    """Past the exact range the strings still enclose the point (checked exactly)."""
    x = arb((-m if neg else m, e))
    v = arb_endpoints(x)[0]
    lo, hi = parse_decimal(arb_lower_str(x)), parse_decimal(arb_upper_str(x))
    assert lo <= v <= hi
    assert hi - lo <= abs(v) * Fraction(1, 10**13)


def test_short_sci_huge() -> None:
    assert short_sci_huge("5.26150484758597e-188959590818", 3, True) == "5.27e-188959590818"
    assert short_sci_huge("5.26150484758597e-188959590818", 3, False) == "5.26e-188959590818"
    assert short_sci_huge("-9.999e-5000", 3, True) == "-9.99e-5000"
    assert short_sci_huge("-9.999e-5000", 3, False) == "-1e-4999"
    assert short_sci_huge("9.999e-5000", 3, True) == "1e-4999"
    assert short_sci_huge("1.5e-40", 3, True) is None  # ordinary: the exact path


@pytest.mark.parametrize("tau", ["1/2^40", "2^-200"])
def test_bounds_at_tiny_tau(tau: str) -> None:
    """--bounds at tiny τ: the proved bound is formatted and compared without Fractions."""
    res = run_check(model_from_dict(ANY_A), max_n=2, tau=tau, bounds=True).to_json()
    for entry in res["lengths"]:
        b = entry["bounds"]
        assert b["violations"] == 0
        ratio = b["layers"][0]["measured_over_bound"]
        assert ratio is not None and decimal_to_arb(ratio) <= 1


def test_report_reads_tiny_errors(tmp_path: Path) -> None:
    """A result at τ = 2^-64 (error ≈ 10^-8011319160293570763, past Python Decimal's exponent
    range) turns into a Markdown report that prints the error's digits."""
    res = run_check(model_from_dict(ANY_A), max_n=2, tau="2^-64").to_json()
    src = tmp_path / "r.json"
    src.write_text(json.dumps(res))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "exactattn", "report", str(src), "--format", "md",
         "-o", str(tmp_path / "r.md")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    up = res["lengths"][-1]["layers"][0]["error"]["upper"]
    assert up.endswith("e-8011319160293570763")
    assert "e-8011319160293570763" in (tmp_path / "r.md").read_text()


def test_huge_tau_whose_inverse_underflows_float64() -> None:
    """τ = n^991: 1/τ underflows to 0 in float64 at n = 3 (a fuzz case that crashed the float
    filter with ZeroDivisionError, exit 4). The float path must fall back, not divide by 0;
    at τ that large soft attention is uniform, so Dyck-1 disagrees with the hard meaning."""
    from exactattn import load_model, run_check

    res = run_check(load_model(ROOT / "models" / "dyck1.json"), max_n=3, tau="n^991")
    assert res.exit_code() == 1
    n3 = res.to_json()["lengths"][2]
    assert n3["n"] == 3 and n3["disagreements"] == 6
