"""Hard ties are not flips (issue 17): where the hard meaning makes no decision, the soft
meaning cannot disagree with it; flips at decided positions still make the verdict fail."""

from __future__ import annotations

from paths import ROOT

from exactattn import load_model, run_check


def test_worked_example_zero_margin_inputs_are_hard_ties() -> None:
    """mean_a_position: 13 inputs with n ≤ 5 read out exactly at the threshold 1/2
    (docs/model-format.md); they are hard ties, the margin there is 0 (the spec's rule)."""
    model = load_model(ROOT / "exactattn" / "examples" / "mean_a_position.json")
    data = run_check(model, max_n=5).to_json()
    ties = [r["hard_ties"] for r in data["lengths"]]
    assert [t["positions"] for t in ties] == [t["inputs"] for t in ties]
    assert sum(t["inputs"] for t in ties) == 13
    assert all(r["min_margin"] == "0" for r in data["lengths"] if r["hard_ties"]["inputs"])
    first = next(t["first"] for t in ties if t["first"])
    assert first["soft"] is False  # the soft read-out is exactly 1/2 too: a reject
    assert data["verdict"]["status"] == "clean"


def test_a_genuine_flip_still_fails() -> None:
    """Dyck-2 at τ = 10: softmax averages everything and flips decisions (exit 1)."""
    model = load_model(ROOT / "models" / "dyck2.json")
    res = run_check(model, max_n=2, tau="10")
    data = res.to_json()
    assert sum(r["disagreements"] for r in data["lengths"]) > 0
    assert res.exit_code() == 1
