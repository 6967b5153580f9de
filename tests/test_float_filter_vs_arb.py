"""The float filter changes only what docs/model-format.md says it may: the last digits of
certified error enclosures (and so their witnesses among exact ties, `measured_over_bound`)
and `precision_bits`/`float_settled`. Every exact quantity, count, decision and verdict is
the arb-only path's, and the two enclosures of every error overlap (both contain it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import models, to_json_text

from exactattn import load_model, run_check
from exactattn.errors import ExactAttnError
from exactattn.model import model_from_raw
from exactattn.numbers import load_json_text, parse_decimal

ROOT = Path(__file__).resolve().parent.parent
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
