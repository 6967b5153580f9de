"""τ*_dec and τ*_inv (``check --find-tau``): every bracket end is confirmed by evaluating the
model at that τ, and the issue's independent measurement on Dyck-2 at n = 4 is reproduced.

The confirmations use ``run_check(..., tau=<that τ>)`` for the one length searched, so they
check what the search claims (good at the lower end, bad at the upper end, and each
non-monotone finding bad) without going through the search code; the Dyck-2 witnesses are
also checked with the independent reference evaluator (tests/reference_evaluator.py).
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import reference_evaluator as R
from paths import ROOT

from exactattn import evaluate, load_model, run_check
from exactattn.bounds.tau_search import HI_EXP, LO_EXP, _bracket, grid_floor, grid_tau
from exactattn.core.numbers import parse_decimal
from exactattn.report.data import non_monotone_lines
from exactattn.results.bounds import TauStarRecord, tau_star_brackets

MODELS = sorted(p.stem for p in (ROOT / "models").glob("*.json"))


@cache
def model(stem: str) -> Any:
    return load_model(ROOT / "models" / f"{stem}.json")


@cache
def searched(stem: str, n: int) -> dict[str, Any]:
    entry = run_check(model(stem), max_n=n, min_n=n, find_tau=True).to_json()["lengths"][0]
    return entry["tau_star"]


@cache
def at(stem: str, n: int, tau: str) -> dict[str, Any]:
    """The plain check of length n at one τ (no search)."""
    return run_check(model(stem), max_n=n, min_n=n, tau=tau).to_json()["lengths"][0]


def dec_good(e: dict[str, Any]) -> bool:
    return e["disagreements"] == 0 and e["undecided"] == 0


def inv_good(e: dict[str, Any]) -> bool:
    return dec_good(e) and e["invariant"] == "holds"


GOOD = {"decisions": dec_good, "invariant": inv_good}


def confirm(stem: str, n: int) -> dict[str, Any]:
    """Every end of both brackets, and every non-monotone finding, re-evaluated."""
    ts = searched(stem, n)
    assert ts["grid"] == "2^(k/8)" and ts["probes"] > 0
    model_tau = run_check(model(stem), max_n=n, min_n=n).to_json()["lengths"][0]["tau"]
    for which, good in GOOD.items():
        b = ts[which]
        lo, hi = b["lower"], b["upper"]
        assert lo is not None or hi is not None
        if lo is not None:
            k = grid_floor(parse_decimal(lo))
            assert grid_tau(k) == lo, "the lower end is a grid value"
            assert good(at(stem, n, lo)), f"{stem} n={n} {which}: lower end {lo} is not good"
            # the scan reached the model's own τ(n)
            assert parse_decimal(b["scanned_down_to"]) <= parse_decimal(model_tau["lower"])
        if hi is not None:
            k = grid_floor(parse_decimal(hi))
            assert grid_tau(k) == hi
            if lo is not None:
                assert grid_floor(parse_decimal(lo)) == k - 1, "adjacent grid values"
            assert not good(at(stem, n, hi)), f"{stem} n={n} {which}: upper end {hi} is good"
            confirm_witness(stem, hi, b["upper_witness"])
        else:
            assert grid_floor(parse_decimal(lo)) == HI_EXP
        odd = b["non_monotone"]
        for f in odd[:1] + odd[1:][-1:]:  # the first and the last (each costs a full check)
            if f["found"] == "bad below lower":
                assert parse_decimal(f["tau"]) < parse_decimal(lo)
                assert not good(at(stem, n, f["tau"]))
                confirm_witness(stem, f["tau"], f)
            else:
                assert f["found"] == "good above upper"
                assert good(at(stem, n, f["tau"]))
    # an invariant-good τ is decision-good: the brackets are ordered when both are closed
    d, i = ts["decisions"], ts["invariant"]
    if d["lower"] is not None and i["lower"] is not None and not d["non_monotone"]:
        assert parse_decimal(i["lower"]) <= parse_decimal(d["lower"])
    return ts


def confirm_witness(stem: str, tau: str, why: dict[str, Any]) -> None:
    """The witness input really fails at τ, for the reason given."""
    ev = evaluate(model(stem), why["input"], tau=tau)
    reason = why["reason"]
    if reason == "disagreement":
        assert ev.soft_decided
        if model(stem).output.kind == "value":
            assert ev.output_soft.within_tol is False
        else:
            hard = ev.output_hard["accept"] if isinstance(ev.output_hard, dict) else ev.output_hard
            assert ev.output_soft.value != hard
    elif reason == "undecided":
        assert not ev.soft_decided
    elif reason == "error > 1":
        assert ev.errors[why["layer"]][0] > 1
    else:
        assert reason == "error ≤ 1 undecided"
        lo, hi = ev.errors[why["layer"]]
        assert not hi <= 1 and not lo > 1


# --- the grid and the bracket search ------------------------------------------------------


def test_grid_values_are_exact_roundings_down() -> None:
    assert [grid_tau(k) for k in (-16, -8, 0, 8, 16)] == ["0.25", "0.5", "1", "2", "4"]
    assert grid_tau(4) == "1.41421356237"  # √2 = 1.414213562373…, rounded down
    assert grid_tau(-28) == "0.0883883476483"  # 2^-3.5 = 0.08838834764831…
    assert grid_floor(Fraction(1, 2)) == -8
    assert grid_floor(Fraction(1, 2) - Fraction(1, 10**15)) == -9
    assert grid_floor(Fraction(2485, 100000)) == -43  # dyck2's τ(4) ≈ 0.02485


@pytest.mark.parametrize("t", [-300, -29, -28, -1, 0, 5, 100])
def test_bracket_finds_a_monotone_threshold(t: int) -> None:
    calls: list[int] = []

    def pred(k: int) -> bool:
        calls.append(k)
        return k <= t

    assert _bracket(pred, 0) == (t, t + 1)
    assert len(calls) == len(set(calls)) and len(calls) <= 45


def test_bracket_ends_of_the_range() -> None:
    assert _bracket(lambda k: True, 0) == (HI_EXP, None)
    assert _bracket(lambda k: False, 0) == (None, LO_EXP)
    assert _bracket(lambda k: k <= HI_EXP - 1, 0) == (HI_EXP - 1, HI_EXP)


def test_a_legacy_flat_bracket_is_the_invariant_one() -> None:
    """The search before the split also required ε ≤ 1: its bracket is τ*_inv."""
    flat = {"lower": "0.0883883476483", "upper": "0.0963881765879", "grid": "2^(k/8)"}
    rec = TauStarRecord.from_json(flat)
    dec, inv = tau_star_brackets(rec)
    assert dec is None and inv is not None and rec.legacy
    assert (str(inv.lower), str(inv.upper)) == (flat["lower"], flat["upper"])
    assert inv.lower.value == Fraction("0.0883883476483")  # type: ignore[union-attr]
    assert rec.to_json() == flat
    assert tau_star_brackets(None) == (None, None)


# --- the bundled models ---------------------------------------------------------------------


@pytest.mark.parametrize("stem", MODELS)
def test_both_brackets_confirmed_on_bundled_models(stem: str) -> None:
    ts = confirm(stem, 2)
    assert set(ts) >= {"grid", "probes", "decisions", "invariant"}


def test_dyck2_n4_the_issue_measurement() -> None:
    """Issue 16: the old bracket [0.0884, 0.0964] is the invariant's; the decisions still
    agree at 0.0964 … 0.2 (where the per-layer error is 1.007 … 2.60) and first differ between
    0.2 and 0.3."""
    ts = confirm("dyck2", 4)
    inv, dec = ts["invariant"], ts["decisions"]
    assert (inv["lower"], inv["upper"]) == ("0.0883883476483", "0.0963881765879")
    assert inv["upper_witness"]["reason"] == "error > 1"
    assert (dec["lower"], dec["upper"]) == ("0.210224103813", "0.229251010801")
    assert dec["upper_witness"]["reason"] == "disagreement"
    assert dec["non_monotone"] == [] and inv["non_monotone"] == []
    errors = []
    for tau in ("0.0963881765879", "0.125", "0.15", "0.2"):
        e = at("dyck2", 4, tau)
        assert e["disagreements"] == 0 and e["undecided"] == 0 and e["invariant"] == "fails"
        errors.append(parse_decimal(e["layers"][1]["error"]["upper"]))
    assert Fraction(1007, 1000) < errors[0] < Fraction(1008, 1000)
    assert Fraction(26, 10) < errors[-1] < Fraction(261, 100)
    assert at("dyck2", 4, "0.3")["disagreements"] > 0
    # the independent evaluator (60-digit mpmath, its own JSON reader) on the witnesses
    ref = reference_model("dyck2", dec["upper"])
    w = R.evaluate_input(ref, dec["upper_witness"]["input"])
    assert R.decide(ref, w, "soft")[0] != R.decide(ref, w, "hard")[0]
    ref = reference_model("dyck2", inv["upper"])
    w = R.evaluate_input(ref, inv["upper_witness"]["input"])
    assert R.error_at(w, 1, 5) > 1
    ref = reference_model("dyck2", inv["lower"])
    assert R.error_at(R.evaluate_input(ref, list("((((")), 1, 5) < 1


@pytest.mark.slow
def test_dyck2_n4_decision_lower_end_by_the_reference() -> None:
    """All 256 inputs agree at τ*_dec's lower end in the independent evaluator too."""
    ts = searched("dyck2", 4)
    r = R.check_length(reference_model("dyck2", ts["decisions"]["lower"]), 4)
    assert r.disagreements == 0 and r.undecided == 0 and r.invariant == "fails"


def test_a_non_monotone_invariant_is_reported() -> None:
    """ltl_counting_temperature at n = 3: warming up from τ(3) = 1/3, ε ≤ 1 first stops being
    certifiable at τ = 0.841 (the error after layer 4 is 1 to within 1e-14 at the 4096-bit cap:
    it sits exactly at the threshold), yet from τ = 2.38 on it is certified ≤ 1 again; the
    decisions never change up to 2^16."""
    ts = confirm("ltl_counting_temperature", 3)
    inv, dec = ts["invariant"], ts["decisions"]
    assert (inv["lower"], inv["upper"]) == ("0.771105412703", "0.840896415253")
    w = inv["upper_witness"]
    assert w["reason"] == "error ≤ 1 undecided" and w["layer"] == 4
    assert parse_decimal(w["error"]["lower"]) <= 1 <= parse_decimal(w["error"]["upper"])
    assert (dec["lower"], dec["upper"]) == ("65536", None) and dec["non_monotone"] == []
    found = inv["non_monotone"]
    assert found and all(f["found"] == "good above upper" for f in found)
    assert found[0]["tau"] == "2.37841423"
    lines = non_monotone_lines([(3, TauStarRecord.from_json(ts))])
    assert len(lines) == 1 and lines[0].startswith("n = 3: τ*_inv is not monotone: good above")


def reference_model(stem: str, tau: str) -> Any:
    """The model file, read by the reference evaluator, with every head at temperature τ."""
    d = json.loads((ROOT / "models" / f"{stem}.json").read_text(encoding="utf-8"))
    d["temperature"] = tau
    for layer in d["layers"]:
        for head in layer.get("heads", []):
            head.pop("temperature", None)
    m = R.load_text(json.dumps(d))
    return m if isinstance(m, R.Model) else R.Model(m)


def test_the_cli_shows_both_and_writes_the_shape(tmp_path: Path) -> None:
    """`check --find-tau`: exit 0, both brackets in the JSON, both columns in the table."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["COLUMNS"] = "220"
    proc = subprocess.run(
        [sys.executable, "-m", "exactattn", "check", str(ROOT / "models" / "dyck1.json")]
        + ["--min-n", "2", "--max-n", "2", "--find-tau", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    ts = json.loads(out.read_text(encoding="utf-8"))["lengths"][0]["tau_star"]
    assert ts["invariant"]["lower"] == "0.229251010801" and ts["invariant"]["upper"] == "0.25"
    assert ts["decisions"]["lower"] == "0.771105412703"
    assert "dec" in proc.stdout and "inv" in proc.stdout
    assert "0.229" in proc.stdout and "0.771" in proc.stdout


def test_a_legacy_result_renders_its_bracket_as_tau_inv() -> None:
    """A result written before the split: the flat bracket appears under τ*_inv, τ*_dec is —."""
    from exactattn.report.data import load
    from exactattn.report.markdown import temperatures_note, temperatures_table

    result = json.loads((ROOT / "tests" / "data" / "result_small.json").read_text("utf-8"))
    for row in result["lengths"]:
        ts = row.get("tau_star")
        if ts:
            row["tau_star"] = {**ts["invariant"], "grid": ts["grid"], "probes": ts["probes"]}
            for key in ("upper_witness", "scanned_down_to", "non_monotone"):
                row["tau_star"].pop(key, None)
    data = load(result)
    table = temperatures_table(data)
    assert table[0] == "| n | τ(n) used | τ_thm(n) | τ*_dec(n) | τ*_inv(n) |"
    assert table[3].endswith("| — | [0.136313, 0.148651] |")
    note = temperatures_note(data)
    assert "shown as τ*_inv" in note and "checked too" not in note
