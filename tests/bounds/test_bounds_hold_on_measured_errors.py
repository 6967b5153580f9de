"""Proved bounds against measured errors (issue 5): no violations, tightness, τ_thm works.

A violation (certified measured error above its proved bound) means a bug in the engine or
in the proof; these tests fail on one and never loosen a bound.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from paths import ROOT
from strategies import models, to_json_text

from exactattn import load_model, model_from_dict, run_check
from exactattn.core.numbers import load_json_text, parse_decimal
from exactattn.model import model_from_raw

MODELS = sorted((ROOT / "models").glob("*.json"))
# big bundled models are checked to a smaller n in the default run (the slow run goes to 6)
SMALL_N = {"induction_k1": 4, "induction_k2": 4, "dyck2": 5, "rasp_dyck2": 4}


def _n_for(path: Path, full: bool) -> int:
    return 6 if full else SMALL_N.get(path.stem, 6)


def _assert_no_violation(res: dict) -> None:
    for entry in res["lengths"]:
        b = entry["bounds"]
        assert b["violations"] == 0, (res["model"], entry["n"], b["violation_details"])
        for item, layer in zip(b["layers"], entry["layers"], strict=True):
            if item["bound"] is None or layer["error"] is None:
                continue
            assert parse_decimal(layer["error"]["lower"]) <= parse_decimal(item["bound"])


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_bundled_models_respect_their_bounds(path: Path) -> None:
    model = load_model(path)
    n = min(_n_for(path, False), model.max_length or 99)
    res = run_check(model, max_n=n, bounds=True).to_json()
    _assert_no_violation(res)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(models())
def test_random_models_respect_their_bounds(d: dict) -> None:
    """Issue 5: ≥ 200 random small models, n ≤ 6 (or the model's own max_length)."""
    model = model_from_raw(load_json_text(to_json_text(d)))
    res = run_check(model, max_n=min(6, model.max_length or 6), bounds=True).to_json()
    _assert_no_violation(res)


def _one_head(n_keys_below: int) -> dict:
    """One query sees a top key (score 1) and several keys at score 0, τ = 1; value = indicator
    of the top key, so the error is exactly the softmax mass off the top: R/(1+R)."""
    d = 3
    return {
        "format": "exactattn/1",
        "name": "tight",
        "alphabet": ["a", "b"],
        "bos": "s",
        "d": d,
        "embedding": {"token": {"a": [1, 0, 1], "b": [0, 0, 1], "s": [0, 0, 1]}},
        "temperature": "1",
        "layers": [
            {
                "kind": "attention",
                "heads": [
                    {
                        "query": [[0, 0, 1]],
                        "key": [[1, 0, 0]],
                        "value": [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
                        "mask": "leq",
                    }
                ],
            }
        ],
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [0, 1, 0],
            "bias": 0,
            "threshold": "1/2",
        },
        "x-note": f"{n_keys_below}",
    }


def test_softmax_hardmax_identity_is_tight() -> None:
    """On input a b…b, the last query's top key is position 1 and every other visible key
    is lower by exactly γ = 1: the engine's proved bound must be within a factor 2 of the
    measured error (measured/bound ≥ 1/2), so the bound is not vacuous."""
    model = model_from_dict(_one_head(3))
    res = run_check(model, max_n=4, bounds=True).to_json()
    best = max(
        Fraction(parse_decimal(e["bounds"]["layers"][0]["measured_over_bound"]))
        for e in res["lengths"]
    )
    assert best >= Fraction(1, 2), best
    _assert_no_violation(res)


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_tau_theorem_keeps_every_decision(path: Path) -> None:
    """At τ_thm(n) every input decides like the hard meaning and ε ≤ 1 holds at every layer
    (issue 5). Zero-margin read-outs are decided exactly, so they count too."""
    model = load_model(path)
    n = min(_n_for(path, False), model.max_length or 99)
    res = run_check(model, max_n=n, tau_theorem=True).to_json()
    for entry in res["lengths"]:
        assert entry["disagreements"] == 0, (path.stem, entry["n"], entry["first_disagreement"])
        assert entry["undecided"] == 0, (path.stem, entry["n"], entry["first_undecided"])
        assert all(parse_decimal(layer["error"]["upper"]) <= 1 for layer in entry["layers"]), (
            path.stem,
            entry["n"],
        )
        assert entry["bounds"]["tau_theorem"] is not None


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_bundled_models_full_n6(path: Path) -> None:
    model = load_model(path)
    n = min(6, model.max_length or 99)
    res = run_check(model, max_n=n, bounds=True).to_json()
    _assert_no_violation(res)
    res = run_check(model, max_n=n, tau_theorem=True).to_json()
    assert all(e["disagreements"] == 0 and e["undecided"] == 0 for e in res["lengths"])


def test_result_json_round_trips() -> None:
    """The bounds block is plain JSON (strings and ints), per docs/model-format.md."""
    model = model_from_dict(_one_head(2))
    res = run_check(model, max_n=2, bounds=True).to_json()
    assert json.loads(json.dumps(res)) == res
