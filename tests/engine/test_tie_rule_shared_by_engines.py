"""The one hard-attention tie rule (engine.hard.tie_support) that the batch, long-input and
certified long-input engines share (issue 21)."""

from __future__ import annotations

import numpy as np
import pytest

from exactattn.engine.hard import tie_support

TOP = np.array(
    [[False, True, False, True], [False, False, False, False], [True, False, False, False]]
)


@pytest.mark.parametrize(
    ("rule", "want"),
    [
        ("average", [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]),
        ("leftmost", [[0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]),
        ("rightmost", [[0, 0, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]),
    ],
)
def test_tie_rule_rows(rule: str, want: list[list[int]]) -> None:
    """A row with no visible maximum attends nowhere; a unique maximum is kept by every rule."""
    assert tie_support(TOP, rule).astype(int).tolist() == want
    # batched (N, R, T): the same rule row by row
    got = tie_support(np.stack([TOP, TOP[::-1]]), rule).astype(int)
    assert got[0].tolist() == want and got[1].tolist() == want[::-1]


def test_tie_rule_does_not_touch_its_input() -> None:
    top = TOP.copy()
    tie_support(top, "leftmost")
    assert (top == TOP).all()
