"""Work shared between rows (prefix sharing, hard.Sharing; rows alike, hard.rows_alike)
changes no exact value, decision or verdict, and (rows alike always, prefix sharing on the
bundled models) no bit of a float enclosure either.

Rows before the varying suffix of a group of words are computed once per group when the
model's first layers only look left. The hard traces must be identical to computing every
row of every word; on random models (hypothesis) the float enclosures may differ in their
last bits where batch-level pruning differs (cascade/float64.py, "Determinism"), so there they
must agree on every decision and overlap.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from paths import ROOT
from strategies import models, to_json_text

from exactattn import load_model
from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text, parse_decimal
from exactattn.engine.cascade import attention as att
from exactattn.engine.cascade import batch as fbm
from exactattn.engine.cascade import float64 as f64
from exactattn.engine.cascade import interval as iv
from exactattn.engine.hard import CompiledModel, Sharing, causal_depth, prefix_sharing, run_hard
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length
from exactattn.model import model_from_raw


def _fields(fb: fbm.FloatBatch) -> list[np.ndarray]:
    out = [fb.settled, fb.err_lo, fb.err_hi, fb.err_row]
    return out + [x for x in (fb.accept, fb.labels, fb.within_tol) if x is not None]


def _same_bits(model, n: int, limit: int = 4096, strict: bool = True) -> Sharing | None:
    """Float results with and without prefix sharing: bit for bit (``strict``), or — where
    batch-level pruning may differ between the shared and the full batch (cascade/float64.py,
    "Determinism") — the same decisions and overlapping (both sound) error enclosures."""
    cm = CompiledModel(model)
    words = list(itertools.islice(words_of_length(model.alphabet, n), limit))
    taus = iv.tau_enclosures(Temperatures(model, None).at(n, BASE_PREC))
    hb = run_hard(cm, words, n)
    p = f64.certify_float(cm, hb, taus, share=False)
    q = f64.certify_float(cm, hb, taus, share=True)
    if strict:
        for a, b in zip(_fields(p), _fields(q), strict=True):
            assert a.dtype == b.dtype
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    else:
        both = p.decided & q.decided
        for a, b in ((p.accept, q.accept), (p.labels, q.labels), (p.within_tol, q.within_tol)):
            if a is not None:
                assert np.array_equal(a[both], b[both])
        ok = np.isnan(p.err_hi) | np.isnan(q.err_hi)
        assert (ok | (np.maximum(p.err_lo, q.err_lo) <= np.minimum(p.err_hi, q.err_hi))).all()
    return prefix_sharing(model, words, n, fbm.SUB_BATCH)


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
    assert causal_depth(load_model(ROOT / "models" / f"{name}.json")) == depth


def test_a_batch_out_of_rank_order_is_not_shared() -> None:
    model = load_model(ROOT / "models" / "dyck2.json")
    words = list(words_of_length(model.alphabet, 5))
    assert prefix_sharing(model, words, 5, 384) is not None
    random.Random(3).shuffle(words)
    assert prefix_sharing(model, words, 5, 384) is None


def test_a_non_causal_model_is_not_shared() -> None:
    model = load_model(ROOT / "models" / "ltl_counting_temperature.json")
    words = list(words_of_length(model.alphabet, 5))
    assert prefix_sharing(model, words, 5, 384) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_same_bits(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        for n in (2, 4):
            _same_bits(model, n, limit=512, strict=False)
    except (ExactAttnError, OverflowError):
        return


def _same_trace(a, b) -> None:
    """Two hard batches equal as stored: every numerator, denominator, dtype and flag."""

    def ra(x, y):
        assert x.den == y.den and x.num.dtype == y.num.dtype and np.array_equal(x.num, y.num)

    ra(a.x0, b.x0)
    for la, lb in zip(a.layers, b.layers, strict=True):
        ra(la.x_in, lb.x_in)
        ra(la.x_out, lb.x_out)
        for ha, hb_ in zip(la.heads or [], lb.heads or [], strict=True):
            for f in ("q", "k", "v", "scores", "mixed"):
                ra(getattr(ha, f), getattr(hb_, f))
            for f in ("visible", "top", "support", "count"):
                x, y = getattr(ha, f), getattr(hb_, f)
                assert x.dtype == y.dtype and np.array_equal(x, y), f
        for za, zb in zip(la.pre or [], lb.pre or [], strict=True):
            ra(za, zb)


@pytest.mark.parametrize(
    "name,n",
    [
        ("dyck2", 6),
        ("dyck1", 9),
        # ≈ 7 s: under -m slow; induction_k2's shared check results are compared by default
        # (test_check_results_identical_when_shared)
        pytest.param("induction_k2", 5, marks=pytest.mark.slow),
    ],
)
def test_hard_traces_identical_when_shared(name: str, n: int) -> None:
    model = load_model(ROOT / "models" / f"{name}.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))
    assert prefix_sharing(model, words, n, len(words)) is not None
    _same_trace(run_hard(cm, words, n, share=False), run_hard(cm, words, n))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_same_hard_traces(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        cm = CompiledModel(model)
        for n in (2, 4):
            words = list(itertools.islice(words_of_length(model.alphabet, n), 512))
            _same_trace(run_hard(cm, words, n, share=False), run_hard(cm, words, n))
    except (ExactAttnError, OverflowError):
        return


def _check_json(model, max_n: int, monkeypatch, share: bool) -> dict:
    import exactattn.engine.hard as hard
    from exactattn import run_check

    with monkeypatch.context() as mp:
        if not share:
            mp.setattr(hard, "prefix_sharing", lambda *a, **k: None)
            mp.setattr(f64, "prefix_sharing", lambda *a, **k: None)
        return run_check(model, max_n=max_n).to_json()


@pytest.mark.parametrize("name,max_n", [("dyck2", 6), ("induction_k2", 5), ("dyck1", 8)])
def test_check_results_identical_when_shared(name: str, max_n: int, monkeypatch) -> None:
    """Whole result records (γ witnesses, errors, decisions) do not see the sharing."""
    model = load_model(ROOT / "models" / f"{name}.json")
    assert _check_json(model, max_n, monkeypatch, True) == _check_json(
        model, max_n, monkeypatch, False
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_check_results_identical_when_shared(d) -> None:
    import _pytest.monkeypatch

    mp = _pytest.monkeypatch.MonkeyPatch()
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        a = _check_json(model, 4, mp, True)
    except (ExactAttnError, OverflowError):
        return
    b = _check_json(model, 4, mp, False)
    # exact values, decisions and verdicts equal; float-enclosure last bits may differ
    assert _strip(a) == _strip(b)
    for la, lb in zip(a["lengths"], b["lengths"], strict=True):
        for ea, eb in zip(la["layers"], lb["layers"], strict=True):
            if (
                ea.get("error")
                and eb.get("error")
                and "inf"
                not in (
                    ea["error"]["upper"],
                    eb["error"]["upper"],
                )
            ):
                lo = max(parse_decimal(ea["error"]["lower"]), parse_decimal(eb["error"]["lower"]))
                hi = min(parse_decimal(ea["error"]["upper"]), parse_decimal(eb["error"]["upper"]))
                assert lo <= hi


_LAYOUT = {"error", "error_witness", "precision_bits", "float_settled", "measured_over_bound"}


def _strip(d):
    if isinstance(d, dict):
        return {
            k: _strip(v)
            for k, v in d.items()
            if k not in _LAYOUT and not k.startswith("error_layer_")
        }
    if isinstance(d, list):
        return [_strip(x) for x in d]
    return d


# ---------------------------------------------------------------------------------------
# rows alike: a constant query over the same keys (Dyck-2's "any bad" layer) is one row


def _no_alike(mp) -> None:
    import exactattn.engine.hard as hard
    import exactattn.engine.measure as measure

    mp.setattr(hard, "_same_rows", lambda a: False)
    mp.setattr(att, "rows_alike", lambda tr: False)
    mp.setattr(measure, "rows_alike", lambda tr: False)


def test_dyck2_last_layer_rows_are_alike() -> None:
    from exactattn.engine.hard import rows_alike

    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    hb = run_hard(cm, list(words_of_length(model.alphabet, 4)), 4)
    assert [rows_alike(tr) for lt in hb.layers for tr in lt.heads or []] == [
        False,
        False,
        False,
        True,
    ]


@pytest.mark.parametrize("name,n", [("dyck2", 6), ("ltl_counting_temperature", 5)])
def test_rows_alike_change_no_bit(name: str, n: int, monkeypatch) -> None:
    model = load_model(ROOT / "models" / f"{name}.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))
    taus = iv.tau_enclosures(Temperatures(model, None).at(n, BASE_PREC))
    fast_hb = run_hard(cm, words, n)
    fast = _fields(f64.certify_float(cm, fast_hb, taus))
    fast_json = _check_json(model, n, monkeypatch, True)
    with monkeypatch.context() as mp:
        _no_alike(mp)
        slow_hb = run_hard(cm, words, n)
        slow = _fields(f64.certify_float(cm, slow_hb, taus))
        slow_json = _check_json(model, n, mp, True)
    _same_trace(slow_hb, fast_hb)
    for a, b in zip(slow, fast, strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert slow_json == fast_json


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_rows_alike_change_no_bit(d) -> None:
    import _pytest.monkeypatch

    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        cm = CompiledModel(model)
        words = list(itertools.islice(words_of_length(model.alphabet, 3), 256))
        taus = iv.tau_enclosures(Temperatures(model, None).at(3, BASE_PREC))
        fast_hb = run_hard(cm, words, 3)
        fast = _fields(f64.certify_float(cm, fast_hb, taus))
    except (ExactAttnError, OverflowError):
        return
    mp = _pytest.monkeypatch.MonkeyPatch()
    try:
        _no_alike(mp)
        slow_hb = run_hard(cm, words, 3)
        slow = _fields(f64.certify_float(cm, slow_hb, taus))
    finally:
        mp.undo()
    _same_trace(slow_hb, fast_hb)
    for a, b in zip(slow, fast, strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
