"""Prefix sharing in the float filter (softfloat.Sharing) changes no bit of any result.

Rows before the varying suffix of a group of words are computed once per group when the
model's first layers only look left; every number must be bit-identical to computing every
row of every word, on the bundled models and on random ones (hypothesis).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import models, to_json_text

import exactattn.engine.softfloat as sf
from exactattn import load_model
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.errors import ExactAttnError
from exactattn.inputs import words_of_length
from exactattn.model import model_from_raw
from exactattn.numbers import load_json_text

ROOT = Path(__file__).resolve().parent.parent


def _fields(fb: sf.FloatBatch) -> list[np.ndarray]:
    out = [fb.settled, fb.err_lo, fb.err_hi, fb.err_row]
    return out + [x for x in (fb.accept, fb.labels, fb.within_tol) if x is not None]


def _same_bits(model, n: int, limit: int = 4096) -> sf.Sharing | None:
    cm = CompiledModel(model)
    words = list(itertools.islice(words_of_length(model.alphabet, n), limit))
    taus = sf.tau_enclosures(Temperatures(model, None).at(n, BASE_PREC))
    hb = run_hard(cm, words, n)
    plain = _fields(sf.certify_float(cm, hb, taus, share=False))
    shared = _fields(sf.certify_float(cm, hb, taus, share=True))
    for a, b in zip(plain, shared, strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    return sf.prefix_sharing(cm, hb, sf.SUB_BATCH)


@pytest.mark.parametrize(
    "name,n,group,q0",
    [("dyck2", 7, 16, 6), ("dyck1", 9, 8, 7), ("induction_k2", 6, 9, 5)],
)
def test_bundled_models_share_and_agree(name: str, n: int, group: int, q0: int) -> None:
    sh = _same_bits(load_model(ROOT / "models" / f"{name}.json"), n)
    assert sh is not None and (sh.group, sh.q0) == (group, q0)


@pytest.mark.parametrize(
    "name,depth",
    [
        ("dyck2", 4),
        ("induction_k2", 6),
        ("ltl_counting_temperature", 0),
        ("ltl_prev_next_positions", 1),
    ],
)
def test_causal_depth(name: str, depth: int) -> None:
    assert sf.causal_depth(load_model(ROOT / "models" / f"{name}.json")) == depth


def test_a_batch_out_of_rank_order_is_not_shared() -> None:
    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 5))
    assert sf.prefix_sharing(cm, run_hard(cm, words, 5), 384) is not None
    random.Random(3).shuffle(words)
    assert sf.prefix_sharing(cm, run_hard(cm, words, 5), 384) is None


def test_a_non_causal_model_is_not_shared() -> None:
    model = load_model(ROOT / "models" / "ltl_counting_temperature.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 5))
    assert sf.prefix_sharing(cm, run_hard(cm, words, 5), 384) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_same_bits(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        for n in (2, 4):
            _same_bits(model, n, limit=512)
    except (ExactAttnError, OverflowError):
        return
