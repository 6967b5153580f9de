"""The committed models/ and reports/ are exactly what their commands regenerate."""

from __future__ import annotations

import json

import pytest
from paths import ROOT

from exactattn.cli import model_text
from exactattn.constructions.catalog import catalog
from exactattn.report.regenerate import REPORTS, regenerate


def test_models_are_up_to_date() -> None:
    """`exactattn build models` would not change models/ (and nothing stale lies there)."""
    cat = catalog()
    for name, model in cat.items():
        path = ROOT / "models" / f"{name}.json"
        assert path.exists(), f"models/{name}.json missing: run `exactattn build models`"
        assert path.read_text(encoding="utf-8") == model_text(model), (
            f"models/{name}.json differs from the builder: run `exactattn build models`"
        )
    extra = {p.stem for p in (ROOT / "models").glob("*.json")} - set(cat)
    assert not extra, f"models/ holds files no builder makes: {extra}"


# one report by default, the quickest (ltl_counting_temperature: ≈ 20 s against ≈ 50 and 60 s
# for the other two on the 2-core machine; the same code: run_check with --bounds and
# --find-tau, then the Markdown), the others under -m slow; tests/repo/test_layout_golden.py
# pins dyck2's check output byte for byte by default
FRESH_DEFAULT = ("ltl_counting_temperature",)


@pytest.mark.parametrize(
    "stem",
    [s if s in FRESH_DEFAULT else pytest.param(s, marks=pytest.mark.slow) for s in REPORTS],
)
def test_reports_match_a_fresh_run(stem: str) -> None:
    """`exactattn build reports --check`: rerun a configured check and compare."""
    stale = regenerate(ROOT / "models", ROOT / "reports", verify=True, only=[stem])
    assert not stale, f"reports out of date: {stale} (run `exactattn build reports`)"


def test_reports_cover_dyck2_and_two_ltl_models() -> None:
    assert "dyck2" in REPORTS
    assert sum(k.startswith("ltl_") for k in REPORTS) >= 2
    for stem in REPORTS:
        data = json.loads((ROOT / "reports" / f"{stem}.json").read_text())
        assert data["verdict"]["status"] == "clean", stem
        assert (ROOT / "reports" / f"{stem}.md").exists()
