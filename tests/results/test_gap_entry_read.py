"""One record for ``compiler_gap_bound``: strict ``from_json`` and tolerant ``read`` agree on
a written entry, and ``read`` survives hostile JSON (reports never crash on it)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from exactattn.results.claims import GapBoundEntry, GapViolation, HeadGapBound
from exactattn.results.extensions import GAP_KEY, compiler_gap

ENTRY = GapBoundEntry(
    "1/(n + 1)",
    Fraction(1, 5),
    Fraction(1, 6),
    (GapViolation(None, Fraction(1, 5), Fraction(1, 6)), GapViolation((1, 0), Fraction(1), None)),
    (HeadGapBound(0, 0, Fraction(1, 5), Fraction(1, 6)), HeadGapBound(1, 0, None, None)),
)


def test_tolerant_read_is_the_strict_record_of_a_written_entry() -> None:
    d = ENTRY.to_json()
    strict, tolerant = GapBoundEntry.from_json(d), GapBoundEntry.read(d)
    assert tolerant is not None and tolerant.to_json() == strict.to_json() == d
    assert tolerant.holds is False and len(tolerant.violations) == 2
    assert tolerant.measured == "1/6" and tolerant.bound == "1/5"
    assert tolerant.violations[1].head == (1, 0)
    ok = GapBoundEntry.read({**d, "violations": [], "holds": True})
    assert ok is not None and ok.holds and compiler_gap({GAP_KEY: d}) == tolerant


@pytest.mark.parametrize(
    "entry",
    [
        None,
        {},
        [],
        "x",
        7,
        {"violations": 5, "heads": "h", "holds": "yes"},
        {"violations": [1, None, {"head": [1]}, {"head": ["a", 2]}], "heads": [{"layer": "0"}]},
        {"expression": ["x"], "bound": {"a": 1}, "measured": 0, "heads": [{"layer": 0, "head": 1}]},
    ],
)
def test_tolerant_read_never_raises(entry: object) -> None:
    g = compiler_gap({GAP_KEY: entry})
    if not isinstance(entry, dict) or not entry:
        assert g is None
        return
    assert g is not None
    assert g.holds == bool(entry.get("holds"))  # what the file states
    vs = entry.get("violations")
    assert len(g.violations) == (len(vs) if isinstance(vs, list) else 0)
    assert all(v.head is None for v in g.violations)
    assert g.measured is None or isinstance(g.measured, str)
