"""docs/api.md is a doctest: every example on the page runs, from the repository root, and
prints what the page says (issue 39)."""

from __future__ import annotations

import doctest

from paths import ROOT


def test_every_example_of_the_api_page_runs(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # the page reads models/… as a user in the checkout does
    res = doctest.testfile(
        str(ROOT / "docs" / "api.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        raise_on_error=False,
    )
    assert res.failed == 0, f"{res.failed} of {res.attempted} examples of docs/api.md failed"
    assert res.attempted >= 50  # the page is examples, not prose
