"""The float filter changes only what docs/model-format.md says it may: the last digits of
certified error enclosures (and so their witnesses, within the enclosures' width, and
`measured_over_bound`) and `precision_bits`/`float_settled`. Every exact quantity, count,
decision and verdict is the arb-only path's, and the two enclosures of every error overlap
(both contain it)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from paths import ROOT
from strategies import models, to_json_text

from exactattn import load_model, run_check
from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text, parse_decimal
from exactattn.model import model_from_raw

MAY_DIFFER = {"error", "error_witness", "precision_bits", "float_settled", "measured_over_bound"}


def _compare(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [f"{path}: {a!r} != {b!r}"]
        out = []
        for k in a:
            if k in MAY_DIFFER or (path == ".settings" and k == "float_filter"):
                continue
            if path == ".closed_forms" and k.startswith("error_layer_"):
                continue  # brackets resting on the error enclosures
            out += _compare(a[k], b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _compare(x, y, path)]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _overlap(a: dict, b: dict) -> bool:
    if "inf" in (a["upper"], b["upper"]):
        return True
    lo = max(parse_decimal(a["lower"]), parse_decimal(b["lower"]))
    return lo <= min(parse_decimal(a["upper"]), parse_decimal(b["upper"]))


def _check(model, max_n: int, **kw) -> None:
    fast = run_check(model, max_n=max_n, **kw).to_json()
    slow = run_check(model, max_n=max_n, float_filter=False, **kw).to_json()
    assert _compare(slow, fast) == []
    for rf, rs in zip(fast["lengths"], slow["lengths"], strict=True):
        for lf, ls in zip(rf["layers"], rs["layers"], strict=True):
            assert _overlap(lf["error"], ls["error"]), (rf["n"], lf["index"])


@pytest.mark.parametrize("name", ["dyck2", "ltl_since_until_temperature", "induction_k2"])
def test_bundled_models_agree_with_arb_only(name: str) -> None:
    _check(load_model(ROOT / "models" / f"{name}.json"), 4, bounds=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_agree_with_arb_only(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        _check(model, 3)
    except ExactAttnError:
        return


def test_loose_words_no_one_reports_skip_arb(monkeypatch) -> None:
    """A badly conditioned model (the random-model benchmark): words whose loose float
    enclosure sits below a reported lower end are settled without arb (chain.settle_dominated),
    and the result still agrees with the arb-only path, every reported error to 1e-6."""
    from cascade_patch import set_policy

    from exactattn import model_from_dict
    from exactattn.engine.cascade import chain

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from models import random_model

    set_policy(monkeypatch, centred=False)  # it would settle these words itself
    model = model_from_dict(random_model())
    with_dom = run_check(model, max_n=6, min_n=6).to_json()
    with monkeypatch.context() as mp:
        mp.setattr(chain, "settle_dominated", lambda fb, settled, under, lower, *k: settled)
        without = run_check(model, max_n=6, min_n=6).to_json()
    assert with_dom["lengths"][0]["float_settled"] > without["lengths"][0]["float_settled"]
    _check(model, 6, min_n=6)
    for layer in with_dom["lengths"][0]["layers"]:
        lo, hi = parse_decimal(layer["error"]["lower"]), parse_decimal(layer["error"]["upper"])
        assert hi - lo <= hi * Fraction(1, 10**6) * 2  # decimals are rounded outward


def test_dominated_rule() -> None:
    """chain.settle_dominated settles exactly the decided, non-underflowed words whose every layer
    is tight or has its upper end strictly below a reported lower end."""
    import numpy as np

    from exactattn.engine.cascade.batch import FloatBatch
    from exactattn.engine.cascade.chain import settle_dominated

    # words: A settled (lo 1.0 in layer 0); B loose, hi 0.9 < 1.0; C loose, hi 1.0 (not
    # strictly below); D loose below but undecided; E loose below but underflowed; F loose in
    # layer 1 only, below the earlier-reported lower end 0.5 there
    lo = np.array([[1.0, 0.1], [0.5, 0.1], [0.5, 0.1], [0.5, 0.1], [0.5, 0.1], [0.2, 0.3]])
    hi = np.array([[1.0, 0.1], [0.9, 0.1], [1.0, 0.1], [0.9, 0.1], [0.9, 0.1], [0.2, 0.45]])
    tight = np.array([[1, 1], [0, 1], [0, 1], [0, 1], [0, 1], [1, 0]], dtype=bool)
    decided = np.array([1, 1, 1, 0, 1, 1], dtype=bool)
    fb = FloatBatch(
        settled=decided & tight.all(axis=1),
        err_lo=lo,
        err_hi=hi,
        err_row=np.zeros((6, 2), dtype=np.int64),
        decided=decided,
        tight=tight,
    )
    under = np.array([0, 0, 0, 0, 1, 0], dtype=bool)
    got = settle_dominated(fb, fb.settled & ~under, under, [0.0, 0.5])
    assert got.tolist() == [True, True, False, False, False, True]
    # with no earlier lower end in layer 1, F's 0.45 is above A's 0.1 there: not settled
    got = settle_dominated(fb, fb.settled & ~under, under, [0.0, 0.0])
    assert got.tolist() == [True, True, False, False, False, False]
