"""The claims ledger docs/claims.md is what `python -m exactattn.claims` renders from the stored
results in reports/claims/, and those results are what the configured runs produce."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from exactattn import claims
from exactattn.closedforms import closed_forms

ROOT = Path(__file__).resolve().parent.parent


def test_ledger_is_current() -> None:
    """Fails when docs/claims.md differs from a fresh rendering (run the command it names)."""
    assert claims.build(ROOT, verify=True), (
        "docs/claims.md is stale: run `python -m exactattn.claims` (or `exactattn build claims`)"
    )


def test_stored_results_match_the_configured_runs() -> None:
    runs = claims.load_runs(ROOT)
    for stem, kinds in claims.RUNS.items():
        for kind, kwargs in kinds.items():
            assert kind in runs.get(stem, {}), f"missing {claims.data_path(ROOT, stem, kind)}"
            res = runs[stem][kind]
            s = res["settings"]
            assert s["max_n"] == kwargs["max_n"] and s["min_n"] == 1, (stem, kind)
            assert s["hard_only"] == kwargs.get("hard_only", False), (stem, kind)
            assert s["bounds"] == kwargs.get("bounds", False), (stem, kind)
            assert s["find_tau"] == kwargs.get("find_tau", False), (stem, kind)
            assert (s["tau_override"] == "theorem") == kwargs.get("tau_theorem", False)
            assert not res["interrupted"]


def test_stored_closed_forms_match_the_code() -> None:
    """The closed forms in the stored results are what closedforms.py computes today."""
    runs = claims.load_runs(ROOT)
    for stem in ("dyck1", "ltl_counting_temperature", "induction_k2", "dyck1_unit"):
        for kind, res in runs[stem].items():
            assert res["closed_forms"] == closed_forms(res["lengths"]), (stem, kind)


def test_ledger_numbers() -> None:
    """Spot checks of what the ledger says, recomputed from the stored results."""
    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    hard = runs["dyck1"]["hard"]["closed_forms"]
    assert hard["gamma"]["expression"] == "1/(n + 1)" and max(hard["gamma"]["verified_on"]) == 14
    assert "`1/(n + 1)` (fitted n = 1, 2; verified exactly n = 3..14)" in text
    # τ*/τ_thm at n = 3 for Dyck-1 from the raw strings
    row = next(r for r in runs["dyck1"]["soft"]["lengths"] if r["n"] == 3)
    ts = row["tau_star"]
    parts = [ts[k] for k in ("decisions", "invariant") if isinstance(ts.get(k), dict)] or [ts]
    t_lo = min(Fraction(p["lower"]) for p in parts)  # the smaller of the two, per end
    t_hi = min(Fraction(p["upper"]) for p in parts if p.get("upper") is not None)
    lo = t_lo / Fraction(row["bounds"]["tau_theorem"]["upper"])
    hi = t_hi / Fraction(row["bounds"]["tau_theorem"]["lower"])
    assert f"3: {claims.short(lo, False)}–{claims.short(hi, True)}" in text
    assert 1 < lo < hi
    # every claim of the ledger has a row
    for c in claims.CLAIMS:
        assert f"| {c.paper} | {c.statement} |" in text
    assert "not as stated" in text  # Cor 17 and S-RASP say why


def test_tau_star_shapes_in_the_ledger() -> None:
    old = {"tau_star": {"lower": "2", "upper": "3", "grid": "2^(k/8)"}}
    new = {
        "tau_star": {
            "decisions": {"lower": "2", "upper": "4"},
            "invariant": {"lower": "5/2", "upper": "3"},
        }
    }
    open_top = {"tau_star": {"lower": "65536", "upper": None}}
    assert claims.tau_star(old) == (Fraction(2), Fraction(3))
    assert claims.tau_star(new) == (Fraction(2), Fraction(3))
    assert claims.tau_star(open_top) == (Fraction(65536), None)
    assert claims.tau_star({"tau_star": None}) is None


def test_check_mode_detects_staleness(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / claims.DATA_DIR).mkdir(parents=True)
    for p in (ROOT / claims.DATA_DIR).glob("dyck1.*.json"):
        (tmp_path / claims.DATA_DIR / p.name).write_text(p.read_text("utf-8"), "utf-8")
    assert claims.main(["--root", str(tmp_path)]) == 0
    assert claims.main(["--root", str(tmp_path), "--check"]) == 0
    path = tmp_path / claims.LEDGER
    path.write_text(path.read_text("utf-8").replace("1/(n + 1)", "1/n"), "utf-8")
    assert claims.main(["--root", str(tmp_path), "--check"]) == 1


@pytest.mark.slow
def test_stored_results_are_reproduced(tmp_path: Path) -> None:
    """Rerun every configured check (several minutes) and compare with reports/claims/."""
    (tmp_path / "models").symlink_to(ROOT / "models")
    claims.rerun(tmp_path)
    for stem, kinds in claims.RUNS.items():
        for kind in kinds:
            fresh = json.loads(claims.data_path(tmp_path, stem, kind).read_text("utf-8"))
            stored = json.loads(claims.data_path(ROOT, stem, kind).read_text("utf-8"))
            assert fresh == stored, (stem, kind)
