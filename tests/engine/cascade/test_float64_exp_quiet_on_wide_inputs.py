"""mr_exp / mr_expm1 make an infinite radius by dividing by a False mask; that division sat
outside np.errstate and emitted 'RuntimeWarning: divide by zero' in tests."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from exactattn.engine.cascade.interval import mr_exp, mr_expm1


@pytest.mark.parametrize("fn", [mr_exp, mr_expm1])
def test_wide_input_gives_an_infinite_radius_without_a_warning(fn) -> None:  # noqa: ANN001
    m = np.array([0.5, 0.5, -2.0, 3.0])
    r = np.array([0.0, 2.0, 1.5, 1.0])  # r > 1 at positions 1 and 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mid, rad = fn((m, r))
    assert np.isinf(rad[1]) and rad[1] > 0 and np.isinf(rad[2]) and rad[2] > 0
    assert np.isfinite(rad[3])  # r = 1 is still a finite radius
    assert np.isfinite(rad[0]) and 0 < rad[0] < 1e-12  # a point input stays tight
    assert mid[0] == pytest.approx(np.exp(0.5) - (fn is mr_expm1))
