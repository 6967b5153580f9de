"""exactattn.testing: the assertions pass on a faithful model and fail with clear messages."""

from __future__ import annotations

from fractions import Fraction

import pytest
from paths import ROOT

from exactattn.core.errors import UsageError
from exactattn.testing import assert_bounds_hold, assert_faithful, assert_gap

DYCK1 = ROOT / "models" / "dyck1.json"


def test_faithful_passes_at_the_models_temperature():
    result = assert_faithful(DYCK1, max_n=4)
    assert [r["n"] for r in result.to_json()["lengths"]] == [1, 2, 3, 4]
    assert result.verdict().status == "clean"


def test_faithful_fails_at_a_high_temperature_naming_n_and_input():
    with pytest.raises(AssertionError) as info:
        assert_faithful(DYCK1, max_n=2, tau="1")
    msg = str(info.value)
    assert "dyck1 is not faithful at τ = 1" in msg
    # at n = 1 the only disagreement is the input "(" (hand-checked: soft accepts it)
    assert "n = 1: 1 input(s) decided differently" in msg
    assert "first '('" in msg
    assert "ε ≤ 1 fails" in msg


def test_gap_matches_the_closed_form():
    # Dyck-1: γ(n) = 1/(n+1) exactly (docs/dyck.md)
    for n in (1, 3, 5):
        assert_gap(DYCK1, n, Fraction(1, n + 1))
    assert_gap(DYCK1, 4, "1/5")


def test_gap_mismatch_message_has_value_and_witness():
    with pytest.raises(AssertionError) as info:
        assert_gap(DYCK1, 3, "1/3")
    msg = str(info.value)
    assert "γ(3) = 1/4" in msg and "expected 1/3" in msg and "witness: input" in msg


def test_bounds_hold_on_a_bundled_model():
    result = assert_bounds_hold(DYCK1, max_n=3)
    assert all(r["bounds"]["violations"] == 0 for r in result.to_json()["lengths"])


def test_model_given_as_a_dict_and_bad_argument():
    import json

    d = json.loads(DYCK1.read_text())
    assert_gap(d, 2, Fraction(1, 3))
    with pytest.raises(UsageError):
        assert_gap(42, 2, 1)  # type: ignore[arg-type]


def test_readme_example_runs():
    """The README's exactattn.testing example is real code that passes."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in readme.split("```python")[1:] if "exactattn.testing" in b]
    assert len(blocks) == 1
    code = blocks[0].split("```")[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)  # the example uses paths relative to the repository
    try:
        namespace["test_dyck1"]()
    finally:
        os.chdir(cwd)
