"""The hard meaning's and the measurements' cheaper paths (notes/benchmark-rounds.md, "Cheaper hard
meaning") give the numbers of the plain paths, bit for bit.

Each fast path is cross-checked against the path it replaces: the int64 score and average
products against ``RatArray.bmm``, the causal products on shared rows against the full
product, a feed-forward layer's written columns against the full output, ``reduced``'s
early stop against one gcd over everything, the column run of ``add_columns`` against
adding the full array, the int64 threshold test against Python ints, and the Dyck oracle
per shared prefix against ``Oracle.expected``. The sensitivity tests show that the
comparisons see a wrong sharing.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from strategies import models, to_json_text

import exactattn.engine.hard as hard
import exactattn.engine.ratarray as ratarray
from exactattn import load_model
from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text
from exactattn.engine.hard import CompiledFFN, CompiledModel, Sharing, run_hard
from exactattn.engine.measure import _threshold_diff
from exactattn.engine.ratarray import RatArray
from exactattn.inputs import words_of_length
from exactattn.model import Reference, model_from_raw
from exactattn.model.reference import Oracle


def _same_trace(a, b) -> None:
    """Two hard batches equal as stored: every numerator, denominator, dtype and flag."""

    def ra(x, y):
        assert x.den == y.den and x.num.dtype == y.num.dtype and np.array_equal(x.num, y.num)

    ra(a.x0, b.x0)
    assert a.sharing == b.sharing
    for la, lb in zip(a.layers, b.layers, strict=True):
        ra(la.x_out, lb.x_out)
        for ha, hb_ in zip(la.heads or [], lb.heads or [], strict=True):
            for f in ("q", "k", "v", "scores", "mixed"):
                ra(getattr(ha, f), getattr(hb_, f))
            for f in ("top", "support", "count"):
                x, y = getattr(ha, f), getattr(hb_, f)
                assert x.dtype == y.dtype and np.array_equal(x, y), f
        for za, zb in zip(la.pre or [], lb.pre or [], strict=True):
            ra(za, zb)


def _slow(monkeypatch, cm: CompiledModel) -> None:
    """The plain paths: no int64 fast path in hard.py (its bound tests all fail), one gcd
    over the whole array, feed-forward outputs added in full."""
    monkeypatch.setattr(hard, "INT64_SAFE", 0)
    monkeypatch.setattr(ratarray, "REDUCE_BLOCK", 1 << 60)
    for layer in cm.layers:
        if isinstance(layer, CompiledFFN):
            monkeypatch.setattr(layer, "out_cols", None)


def _fast_and_slow(model, n: int, limit: int = 1024) -> None:
    words = list(itertools.islice(words_of_length(model.alphabet, n), limit))
    fast = run_hard(CompiledModel(model), words, n)
    with pytest.MonkeyPatch.context() as mp:
        cm = CompiledModel(model)
        _slow(mp, cm)
        slow = run_hard(cm, words, n)
    _same_trace(fast, slow)


@pytest.mark.parametrize(
    "name,n",
    [("dyck2", 6), ("dyck1", 8), ("induction_k2", 4), ("rasp_reverse", 4), ("rasp_count", 5)],
)
def test_bundled_models_fast_paths_change_no_bit(name: str, n: int) -> None:
    _fast_and_slow(load_model(ROOT / "models" / f"{name}.json"), n)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_fast_paths_change_no_bit(d) -> None:
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
        for n in (2, 3):
            _fast_and_slow(model, n, 256)
    except (ExactAttnError, OverflowError):
        return


def test_dyck2_takes_the_fast_paths() -> None:
    """The comparisons above are not vacuous: Dyck-2 is shared, has a feed-forward layer
    that writes one column, and scores of width > 1 (the int64 product)."""
    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    ffn = [la for la in cm.layers if isinstance(la, CompiledFFN)]
    assert ffn and ffn[0].out_cols is not None and len(ffn[0].out_cols) == 1
    words = list(words_of_length(model.alphabet, 6))
    hb = run_hard(cm, words, 6)
    assert hb.sharing is not None
    assert any(tr.q.shape[-1] > 1 for lt in hb.layers for tr in lt.heads or [])


def _random_qk(rng: np.random.Generator, N: int, T: int, c: int, G: int, q0: int):
    """q, k of N words, the rows before q0 equal within each group of G words."""
    q = rng.integers(-1000, 1000, (N, T, c))
    k = rng.integers(-1000, 1000, (N, T, c))
    for a in (q, k):
        a.reshape(N // G, G, T, c)[:, :, :q0] = a[::G, None, :q0]
    return RatArray(q, 3), RatArray(k, 5)


@pytest.mark.parametrize("seed", range(6))
def test_scores_match_bmm(seed: int) -> None:
    rng = np.random.default_rng(seed)
    G, T, c = 4, 7, 1 + seed % 4
    q0 = 1 + seed % (T - 1)
    q, k = _random_qk(rng, 4 * G, T, c, G, q0)
    plain = q.bmm(RatArray(np.swapaxes(k.num, 1, 2), k.den))
    for sh in (None, Sharing(G, q0, 1)):
        got = hard._scores(q, k, sh)
        assert got.den == plain.den == 15 and got.num.dtype == plain.num.dtype
        assert np.array_equal(got.num, plain.num)


def test_scores_sharing_is_seen_when_wrong() -> None:
    """Rows that are *not* shared within the group give other scores under a Sharing: the
    comparison with the full product would catch a sharing applied where it does not hold."""
    rng = np.random.default_rng(1)
    q = RatArray(rng.integers(-1000, 1000, (8, 6, 2)), 1)
    k = RatArray(rng.integers(-1000, 1000, (8, 6, 2)), 1)
    full = hard._scores(q, k, None)
    wrong = hard._scores(q, k, Sharing(4, 3, 1))
    assert not np.array_equal(full.num, wrong.num)
    assert np.array_equal(full.num[::4], wrong.num[::4])  # each group's first word is right


@settings(max_examples=200, deadline=None)
@given(
    vals=st.lists(st.integers(-(2**40), 2**40), min_size=0, max_size=300),
    den=st.integers(1, 10**6),
    scale=st.sampled_from([1, 2, 6, 210, 27720]),
)
def test_reduced_early_stop_is_the_full_gcd(vals, den, scale) -> None:
    num = np.array([v * scale for v in vals], dtype=np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ratarray, "REDUCE_BLOCK", 4)  # many blocks even on short arrays
        r = RatArray(num, den * scale).reduced()
    g = math.gcd(den * scale, *(v * scale for v in vals))
    assert r.den == den * scale // g
    assert r.num.tolist() == [v * scale // g for v in vals]


@settings(max_examples=100, deadline=None)
@given(
    cols=st.lists(st.integers(0, 6), min_size=1, max_size=7, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_add_columns_matches_adding_the_full_array(cols, seed) -> None:
    rng = np.random.default_rng(seed)
    a = RatArray(rng.integers(-(10**6), 10**6, (3, 4, 7)), 6)
    part = RatArray(rng.integers(-(10**6), 10**6, (3, 4, len(cols))), 4)
    full = np.zeros((3, 4, 7), dtype=np.int64)
    full[..., cols] = part.num
    want = a + RatArray(full, part.den)
    got = a.add_columns(np.array(cols), part)
    assert got.den == want.den and got.num.dtype == want.num.dtype
    assert np.array_equal(got.num, want.num)
    assert np.array_equal(a.num, RatArray(a.num, 6).num)  # the input is not changed


@pytest.mark.parametrize("t", [Fraction(0), Fraction(1, 2), Fraction(-7, 3), Fraction(5, 27720)])
def test_threshold_diff_int64_matches_python_ints(t: Fraction) -> None:
    rng = np.random.default_rng(0)
    for big in (10**6, 2**40, 2**61):
        num = rng.integers(-big, big, 50)
        vals = RatArray(num, 27720)
        got = _threshold_diff(vals, t)
        want = [int(x) * t.denominator - t.numerator * 27720 for x in num.tolist()]
        assert [int(x) for x in got] == want
        safe = int(np.abs(num).max()) * t.denominator + abs(t.numerator) * 27720 < 2**62
        assert (got.dtype == np.int64) == safe  # the int64 path is taken exactly when safe
    assert _threshold_diff(RatArray(np.array([2**61]), 1), Fraction(1, 4)).dtype == object


def test_dyck_oracle_per_prefix_matches_expected() -> None:
    rng = random.Random(0)
    oracle = Oracle(Reference(kind="dyck", pairs=("()", "[]")), ("(", ")", "[", "]", "x"))
    words = [tuple(rng.choice("()[]x") for _ in range(rng.randrange(0, 9))) for _ in range(3000)]
    words += list(itertools.product("()[]", repeat=6))  # rank order: shared prefixes
    assert oracle.expected_many(words) == [oracle.expected(w) for w in words]
    assert sum(oracle.expected_many(words)) > 10  # some words are accepted


@settings(max_examples=100, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 5), st.integers(1, 6), st.integers(1, 9)),
    out=st.integers(1, 5),
    bits=st.sampled_from([3, 20, 40, 58]),
    seed=st.integers(0, 2**32 - 1),
    strided=st.booleans(),
)
def test_int_matmul_2d_rows_match_python_ints(shape, out, bits, seed, strided) -> None:
    """A stacked int64 operand against a 2-D weight (one 2-D product over all rows) gives
    the integers of the product in Python ints, on contiguous and strided operands."""
    rng = np.random.default_rng(seed)
    hi = 2 ** (bits // 2)
    a = rng.integers(-hi, hi, (shape[0], shape[1] + 1, shape[2]))
    a = a[:, 1:] if strided else a[:, : shape[1]]
    w = rng.integers(-hi, hi, (shape[2], out))
    got = ratarray.int_matmul(a, w)
    want = np.matmul(a.astype(object), w.astype(object))
    assert got.shape == want.shape
    assert [int(x) for x in got.reshape(-1)] == [int(x) for x in want.reshape(-1)]


@pytest.mark.parametrize("seed", range(8))
def test_affine_int64_matches_the_plain_product(seed: int) -> None:
    """The one-pass product over the columns a weight reads, with its bias, scaled to the
    common denominator (and under a sharing, computed on each group's first word) gives the
    integers, denominator and dtype of the plain ``matmul_t`` then ``+``."""
    rng = np.random.default_rng(seed)
    G, T, d, out = 3, 6, 7, 1 + seed % 4
    q0 = 1 + seed % (T - 1)
    xs, _ = _random_qk(rng, 4 * G, T, d, G, q0)
    x = RatArray(xs.num, 2 + seed)
    w = rng.integers(-50, 50, (out, d))
    w[:, rng.random(d) < 0.5] = 0  # columns the weight never reads
    if seed == 0:
        w[:] = 0  # no column at all: the bias alone
    wr = RatArray(w, 3 + 2 * (seed % 3))
    br = RatArray(rng.integers(-50, 50, out), 4 + seed % 2)
    plain = x.matmul_t(wr) + br
    for sh in (None, Sharing(G, q0, 1)):
        got = hard._affine_int64(x, wr, br, sh)
        assert got is not None
        assert got.den == plain.den and got.num.dtype == plain.num.dtype
        assert np.array_equal(got.num, plain.num)


def test_affine_int64_declines_past_the_bound() -> None:
    """Past 2**62 (product or product plus bias) the fused path is not taken, and the plain
    path's Python ints are what _affine returns."""
    x = RatArray(np.full((2, 3, 2), 2**40, dtype=np.int64), 1)
    w = RatArray(np.full((1, 2), 2**21, dtype=np.int64), 1)
    b = RatArray(np.zeros(1, dtype=np.int64), 1)
    assert hard._affine_int64(x, w, b) is None
    got = hard._affine(x, w, b)
    assert got.num.dtype == object and int(got.num[0, 0, 0]) == 2**62


@pytest.mark.parametrize("zero", ["x", "b"])
def test_affine_int64_declines_a_factor_past_int64(zero: str) -> None:
    """A zero input (or bias) makes the product bounds 0 whatever the denominator factor;
    the factor itself (here 10**30, from a bias denominator) must still fit int64, else the
    fused path raised OverflowError (exit 4 on long exact values; found by the CI run)."""
    big = 10**30
    xn = np.zeros((2, 3, 2), dtype=np.int64) if zero == "x" else np.ones((2, 3, 2), np.int64)
    x = RatArray(xn, 1)
    w = RatArray(np.array([[1, 2]], dtype=np.int64), 1)
    bn = np.array([1], np.int64) if zero == "x" else np.zeros(1, np.int64)
    b = RatArray(bn, big) if zero == "x" else RatArray(bn, 1)
    if zero == "b":
        w = RatArray(np.array([[1, 2]], dtype=np.int64), big)  # factor of the bias: big
    assert hard._affine_int64(x, w, b) is None
    got, plain = hard._affine(x, w, b), x.matmul_t(w) + b
    assert got.den == plain.den and np.array_equal(got.num, plain.num)


@pytest.mark.parametrize("seed", range(4))
def test_join_matches_concatenate(seed: int) -> None:
    """_join writes the repeated first rows and the rest straight into one array: the
    array (values and dtype) of repeating and concatenating."""
    rng = np.random.default_rng(seed)
    G, F, R = 2 + seed, 1 + seed % 3, 4 - seed % 3
    cases = [
        (rng.integers(-9, 9, (3, F, 2)), rng.integers(-9, 9, (3 * G, R, 2))),
        (rng.random((3, F, 5)) < 0.5, rng.random((3 * G, R, 5)) < 0.5),
        (rng.integers(-9, 9, (3, F)), rng.integers(-9, 9, (3 * G, R))),
        (rng.integers(-9, 9, (3, F, 2)).astype(object), rng.integers(-9, 9, (3 * G, R, 2))),
    ]
    for first, rest in cases:
        want = np.concatenate([np.repeat(first, G, axis=0), rest], axis=1)
        got = hard._join(first, rest, G)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("rule", ["average", "leftmost", "rightmost"])
def test_attend_running_max_matches_masked_max(rule: str) -> None:
    """_attend's key-by-key running maximum over visible keys gives the argmax sets of the
    masked reduction, rows with no visible key included (nothing on top)."""
    rng = np.random.default_rng(7)
    N, T = 40, 6
    s = rng.integers(-4, 4, (N, T, T))
    vis = rng.random((T, T)) < 0.6
    vis[2] = False  # a row that sees nothing
    v = RatArray(rng.integers(-9, 9, (N, T, 3)), 5)
    top, support, count, _, got_max = hard._attend(s, vis, rule, v)
    rowmax = np.max(s, axis=2, keepdims=True, where=vis[None], initial=np.iinfo(np.int64).min)
    assert got_max.dtype == np.int64 and np.array_equal(got_max, rowmax[..., 0])
    want = vis[None] & (s == rowmax)
    assert np.array_equal(top, want) and not top[:, 2].any()
    assert np.array_equal(support, hard.tie_support(want, rule))
    assert count.dtype == np.int64 and np.array_equal(count, support.sum(axis=2))


def test_embed_matches_the_two_index_gather() -> None:
    """The flat-table embedding gives the rows of table[letter, slot] for every slot."""
    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    n = 5
    words = list(words_of_length(model.alphabet, n))
    x = cm.embed(words, n)
    table = cm._table(n)
    idx = np.array([[cm.token_index[t] for t in w] for w in words])
    if model.bos is not None:
        idx = np.concatenate([np.full((len(words), 1), cm.token_index[model.bos]), idx], axis=1)
    if model.eos is not None:
        idx = np.concatenate([idx, np.full((len(words), 1), cm.token_index[model.eos])], axis=1)
    want = table.num[idx, np.arange(idx.shape[1])[None, :]]
    assert x.den == table.den and x.num.dtype == want.dtype and np.array_equal(x.num, want)


def _argmax_labels_loop(labels, num: np.ndarray, den: int):
    """The definition: per word and position, the unique largest entry's label (None on a
    tie), and the word's smallest winner-minus-runner-up gap (0 at a tie; None with one label)."""
    out_l, out_m = [], []
    for w in range(num.shape[0]):
        row_l, margin = [], None
        for p in range(num.shape[1]):
            vals = [int(v) for v in num[w, p]]
            best = max(vals)
            win = [i for i, v in enumerate(vals) if v == best]
            if len(win) > 1:
                row_l.append(None)
                mg = Fraction(0)
            else:
                row_l.append(labels[win[0]])
                rest = [v for i, v in enumerate(vals) if i != win[0]]
                mg = Fraction(best - max(rest), den) if rest else None
            if mg is not None and (margin is None or mg < margin):
                margin = mg
        out_l.append(row_l)
        out_m.append(margin)
    return out_l, out_m


def test_argmax_labels_int64_is_the_definition() -> None:
    """The batched argmax read-out (int64 numerators) gives the definition's labels and
    margins, with ties, one label, and entries near the int64 bound's 2^61."""
    from exactattn.model import ArgmaxOutput

    rng = np.random.default_rng(11)
    for trial in range(300):
        N, P, r = (int(v) for v in rng.integers(1, 6, 3))
        scale = 2**60 if trial % 10 == 0 else 4
        num = rng.integers(-scale, scale, (N, P, r)).astype(np.int64)
        den = int(rng.integers(1, 9))
        labels = tuple(f"l{i}" for i in range(r))
        out = ArgmaxOutput((), (), labels)
        got = hard._argmax_labels_int64(out, num, den)
        assert got == _argmax_labels_loop(labels, num, den), trial
