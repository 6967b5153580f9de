"""The third round of the cheaper hard meaning (notes/benchmark-rounds.md, "Cheaper hard meaning"):
each shortcut against the computation it replaces.

* column bounds carried by ``RatArray.add_columns``/``reduced`` and set by the embedding are
  the true per-column maxima (and ``bound()`` the true maximum) of every activation;
* the row-wise γ scan (``measure._gap_rows``, from the trace's row maxima) finds the gap
  and the first witness of the element-wise argmin, and declines near int64's end;
* ``row_counts`` is the boolean row sum; the vectorised Dyck oracle is ``dyck_accepts``;
  letters read by one string join are the per-letter lookup's.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from strategies import models, to_json_text

import exactattn.engine.measure as measure
from exactattn import load_model
from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text
from exactattn.engine.hard import CompiledModel, row_counts, run_hard
from exactattn.engine.measure import LengthAccumulator, _gap_part
from exactattn.engine.ratarray import RatArray, _maxabs
from exactattn.inputs import words_of_length
from exactattn.model import model_from_raw
from exactattn.model.reference import Oracle, _dyck_many, dyck_accepts

LOWEST = np.iinfo(np.int64).min


def _true_cols(a: np.ndarray) -> list[int]:
    flat = a.reshape(-1, a.shape[-1])
    return [_maxabs(flat[:, c]) for c in range(flat.shape[1])]


def _check_bounds(hb) -> int:
    """Every activation's carried column bounds and bound are the true ones; returns how
    many activations carried column bounds (so a test sees they were used)."""
    carried = 0
    for x in hb.activations:
        if x._cols is not None:
            carried += 1
            assert x._cols.tolist() == _true_cols(x.num)
        assert x.bound() == _maxabs(x.num)
    return carried


@pytest.mark.parametrize(
    "name,n",
    [("dyck2", 6), ("dyck1", 8), ("induction_k2", 4), ("rasp_reverse", 4), ("rasp_count", 5)],
)
def test_bundled_column_bounds_are_the_true_maxima(name: str, n: int) -> None:
    model = load_model(ROOT / "models" / f"{name}.json")
    words = list(itertools.islice(words_of_length(model.alphabet, n), 1024))
    carried = _check_bounds(run_hard(CompiledModel(model), words, n))
    if name == "dyck2":
        assert carried == 6  # x0 and all five layers carry them


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_column_bounds_are_the_true_maxima(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        for n in (2, 3):
            words = list(itertools.islice(words_of_length(model.alphabet, n), 256))
            _check_bounds(run_hard(CompiledModel(model), words, n))
    except (ExactAttnError, OverflowError):
        return


@settings(max_examples=100, deadline=None)
@given(
    cols=st.lists(st.integers(0, 6), min_size=1, max_size=7, unique=True),
    dens=st.sampled_from([(6, 6), (6, 4), (1, 7), (35, 5)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_add_columns_and_reduced_carry_column_bounds(cols, dens, seed) -> None:
    rng = np.random.default_rng(seed)
    num = rng.integers(-(10**6), 10**6, (3, 4, 7)) * 6
    a = RatArray(num, dens[0], cols=np.array(_true_cols(num), dtype=np.int64))
    part = RatArray(rng.integers(-(10**6), 10**6, (3, 4, len(cols))) * 3, dens[1])
    got = a.add_columns(np.array(cols), part)
    assert got._cols is not None and got._cols.tolist() == _true_cols(got.num)
    assert got.bound() == _maxabs(got.num)
    red = got.reduced()
    assert red.bound() == _maxabs(red.num)
    if red._cols is not None:
        assert red._cols.tolist() == _true_cols(red.num)
    assert a._cols.tolist() == _true_cols(a.num)  # the input's own bounds are not changed


def _attend_like(s: np.ndarray, vis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rowmax = np.max(s, axis=2, where=vis[None], initial=LOWEST)
    return vis[None] & (s == rowmax[..., None]), rowmax


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shape=st.tuples(st.integers(1, 6), st.integers(1, 5), st.integers(1, 6)),
    spread=st.sampled_from([3, 1000, 2**60, 2**62 - 1]),
    step=st.sampled_from([1, 4]),
    row0=st.sampled_from([0, 3]),
)
def test_gap_rows_match_the_elementwise_argmin(seed, shape, spread, step, row0) -> None:
    """Ties in the smallest gap across rows and keys included (small spreads), and scores
    whose differences leave int64 (then the row-wise route declines)."""
    rng = np.random.default_rng(seed)
    N, R, T = shape
    s = rng.integers(-spread, spread, (N, R, T), dtype=np.int64)
    vis = rng.random((R, T)) < 0.7
    top, rowmax = _attend_like(s, vis)
    fast = _gap_part(s, top, vis, step, row0, rowmax)
    plain = _gap_part(s, top, vis, step, row0, None)
    assert fast == plain


def test_gap_rows_decline_past_int64() -> None:
    s = np.array([[[2**61, -(2**61), 0]]], dtype=np.int64)
    vis = np.ones((1, 3), dtype=bool)
    top, rowmax = _attend_like(s, vis)
    cand = vis[None] & ~top
    assert measure._gap_rows(s, cand, np.array([[True]]), rowmax) is None
    assert _gap_part(s, top, vis, 1, 0, rowmax) == (2, 1, (2**61, 0, 0, 2))


def test_gap_scan_uses_the_row_maxima_on_dyck2() -> None:
    """The whole γ record of Dyck-2 is the same with and without the trace's row maxima."""
    model = load_model(ROOT / "models" / "dyck2.json")
    n = 7
    words = list(words_of_length(model.alphabet, n))
    hb = run_hard(CompiledModel(model), words, n)
    assert all(tr.rowmax is not None for lt in hb.layers for tr in lt.heads or [])
    oracle = Oracle(model.reference, model.alphabet)
    kinds = [la.kind for la in model.layers]
    a = LengthAccumulator(model, n, oracle, len(model.layers))
    a.add_hard(hb, first_rank=0)
    for lt in hb.layers:
        for tr in lt.heads or []:
            tr.rowmax = None
    b = LengthAccumulator(model, n, oracle, len(model.layers))
    b.add_hard(hb, first_rank=0)
    assert repr(a.to_record(None, kinds, {})) == repr(b.to_record(None, kinds, {}))
    assert a.gap.value is not None


@settings(max_examples=100, deadline=None)
@given(shape=st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(0, 300)))
def test_row_counts_is_the_row_sum(shape) -> None:
    a = np.random.default_rng(sum(shape)).random(shape) < 0.5
    got = row_counts(a)
    assert got.dtype == np.int64 and np.array_equal(got, a.sum(axis=-1))


@settings(max_examples=200, deadline=None)
@given(
    alphabet=st.lists(st.sampled_from("()[]{}ab|"), min_size=1, max_size=6, unique=True),
    pairs=st.lists(
        st.tuples(st.sampled_from("()[]{}ab|"), st.sampled_from("()[]{}ab|")).map("".join),
        min_size=1,
        max_size=3,
    ),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 9),
)
def test_dyck_many_is_dyck_accepts(alphabet, pairs, seed, n) -> None:
    """Openers that are closers too, an opener in two pairs (the last wins), letters in
    no pair, closers outside the alphabet."""
    rng = np.random.default_rng(seed)
    letters = rng.integers(0, len(alphabet), (60, n))
    words = [tuple(alphabet[i] for i in row) for row in letters.tolist()]
    assert _dyck_many(letters, alphabet, pairs) == [dyck_accepts(w, pairs) for w in words]


def test_dyck_oracle_with_letters_matches_expected() -> None:
    model = load_model(ROOT / "models" / "dyck2.json")
    oracle = Oracle(model.reference, model.alphabet)
    words = list(words_of_length(model.alphabet, 8))
    letters = CompiledModel(model).letters(words, 8)
    assert oracle.expected_many(words, letters) == [oracle.expected(w) for w in words]


def test_letters_by_one_join_match_the_lookup() -> None:
    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 5))
    want = np.array([[cm.token_index[t] for t in w] for w in words], dtype=np.int64)
    got = cm._letters_by_char(words, 5)
    assert got is not None and got.dtype == np.int64 and np.array_equal(got, want)
    # a word of another length, a letter outside the alphabet, a two-character token:
    # the one-join route declines (and the lookup names the bad letter)
    assert cm._letters_by_char(words[:3] + [("(",) * 4], 5) is None
    assert cm._letters_by_char(words[:3] + [("(",) * 4 + ("x",)], 5) is None
    assert cm._letters_by_char(words[:3] + [("(",) * 3 + ("()", "")], 5) is None
    with pytest.raises(KeyError):
        cm.letters(words[:3] + [("(",) * 4 + ("x",)], 5)
