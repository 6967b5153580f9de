"""Dyck-k: the construction, its closed-form gap γ(n), and both meanings.

The default run covers n ≤ 6 (Dyck-2 at n = 6 is 4096 strings); the full sweep
n ≤ 10 (Dyck-2 at n = 10 is 4^10 ≈ 1M strings) is
``pytest -m slow tests/constructions/test_dyck_construction.py``.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest

from exactattn import model_from_dict, run_check
from exactattn.constructions.dyck import (
    BOS,
    EOS,
    SCHEDULE_C,
    build_dyck,
    catalog,
    gamma,
    temperature,
)
from exactattn.constructions.rasp import ProgramError
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.model.reference import dyck_accepts

DYCK1 = ["()"]
DYCK2 = ["()", "[]"]


def _lengths(pairs, max_n, *, min_n=1, scale="integer", tau=None, hard_only=False):
    model = model_from_dict(build_dyck(pairs, scale=scale))
    res = run_check(model, max_n=max_n, min_n=min_n, tau=tau, hard_only=hard_only).to_json()
    return res["lengths"]


def _assert_hard(lengths, pairs, scale="integer"):
    """0 reference mismatches, margin 1/2, γ(n) equal to the closed form."""
    k = len(pairs)
    for rec in lengths:
        n = rec["n"]
        assert rec["inputs"] == (2 * k) ** n
        assert rec["reference_mismatches"]["hard"] == 0, rec["n"]
        assert rec["min_margin"] == "1/2"
        assert rec["gamma"] == gamma(n, scale), (n, rec["gamma"])
        if scale == "integer":
            # per head: prefix mean (ties only), lookup, match, exists
            heads = [h["gamma"] for lay in rec["layers"] if "heads" in lay for h in lay["heads"]]
            match = {1: "3/2", 2: "2/3"}.get(n, f"1/{n + 1}")
            assert heads == [None, f"1/{n + 1}", match, "1"], (n, heads)
        # the accepted strings are the Dyck-k words: C(n/2) * k^(n/2) of them
        m = n // 2
        catalan = 0 if n % 2 else _catalan(m) * k**m
        assert rec["accepted"] == catalan


def _catalan(m: int) -> int:
    from math import comb

    return comb(2 * m, m) // (m + 1)


# -- model file ---------------------------------------------------------------------------


def _walk(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)
    else:
        yield x


@pytest.mark.parametrize("scale", ["integer", "unit"])
def test_model_is_exact_json_and_loads(scale):
    d = build_dyck(DYCK2, scale=scale)
    assert not any(isinstance(v, float) for v in _walk(d))
    assert json.loads(json.dumps(d)) == d
    m = model_from_dict(d)
    assert m.d == len(d["coordinates"])
    assert d["reference"] == {"kind": "dyck", "pairs": DYCK2}
    assert d["temperature"] == temperature(scale)
    assert d["output"]["threshold"] == "1/2"


def test_catalog():
    cat = catalog()
    assert cat["dyck1"] == build_dyck(DYCK1)
    assert cat["dyck2"] == build_dyck(DYCK2)
    for d in cat.values():
        model_from_dict(d)


@pytest.mark.parametrize("pairs", [[], ["("], ["(("], ["()", "(]"], [f"{BOS}x"]])
def test_bad_pairs_rejected(pairs):
    with pytest.raises(ProgramError):
        build_dyck(pairs)


# -- layer by layer, against a direct computation -------------------------------------------


def _direct(word, pairs):
    """What each layer should write, from the bracket sequence BOS w EOS."""
    types = {BOS: (0, True), EOS: (0, False)}
    for t, p in enumerate(pairs, start=1):
        types[p[0]] = (t, True)
        types[p[1]] = (t, False)
    seq = [BOS, *word, EOS]
    before = []  # D_{i-1}: depth before position i (BOS counts as an opening)
    depth = 0
    for tok in seq:
        before.append(depth)
        depth += 1 if types[tok][1] else -1
    rows = []
    for i, tok in enumerate(seq):
        ratio = Fraction(before[i], i) if i else Fraction(0)
        g = max(before[i], 0)
        # matching opening: the largest j < i with max(D_{j-1}, 0) closest to g - 1
        cands = list(range(i))
        match = None
        if cands:
            match = max(cands, key=lambda j: (-((max(before[j], 0) - (g - 1)) ** 2), j))
        t, is_open = types[tok]
        m_type = types[seq[match]][0] if match is not None and types[seq[match]][1] else None
        bad = int(not is_open and m_type != t)
        rows.append((ratio, g, match, m_type, bad))
    return rows


@pytest.mark.parametrize("pairs", [DYCK1, DYCK2])
def test_layers_compute_what_the_docs_say(pairs):
    d = build_dyck(pairs)
    model = model_from_dict(d)
    cm = CompiledModel(model)
    col = {c: k for k, c in enumerate(d["coordinates"])}
    k = len(pairs)
    for n in range(1, 5):
        words = list(itertools.product(model.alphabet, repeat=n))
        acts = [a.to_fractions() for a in run_hard(cm, words, n).activations]
        final = acts[-1]
        for w, x in zip(words, final, strict=True):
            direct = _direct(w, pairs)
            any_bad = max(r[4] for r in direct)
            assert any_bad == (not dyck_accepts(w, pairs))
            for i, (ratio, g, _match, m_type, bad) in enumerate(direct):
                row = x[i]
                assert row[col["depth_ratio"]] == ratio
                assert row[col["depth"]] == g
                assert row[col["depth_sq"]] == g * g
                onehot = [row[col[f"match{t}"]] for t in range(k + 1)]
                expect = [int(m_type == t) for t in range(k + 1)]
                assert onehot == expect, (w, i)
                assert row[col["bad"]] == bad
                assert row[col["any_bad"]] == any_bad


# -- hard meaning and γ(n) ----------------------------------------------------------------------


def test_dyck1_hard_and_gamma_n_le_8():
    _assert_hard(_lengths(DYCK1, 8, hard_only=True), DYCK1)


def test_dyck2_hard_and_gamma_n_le_6():
    _assert_hard(_lengths(DYCK2, 6, hard_only=True), DYCK2)


def test_unit_scale_gamma_is_cubic():
    """Bounded embeddings: the same scores divided by (n+1)², so γ(n) = 1/(n+1)³."""
    _assert_hard(_lengths(DYCK2, 4, scale="unit", hard_only=True), DYCK2, scale="unit")


def test_gamma_witness_is_the_lookup_at_eos():
    rec = _lengths(DYCK1, 4, min_n=4, hard_only=True)[0]
    wit = rec["gamma_witness"]
    # the integer lookup (layer 1) at EOS (slot n+1): keys D_n and D_n - 1 differ by 1/(n+1)
    assert wit["layer"] == 1 and wit["query"] == 5
    assert abs(wit["top_key"] - wit["other_key"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("pairs", [DYCK1, DYCK2])
def test_full_hard_sweep_n_le_10(pairs):
    """The documented sweep: 0 mismatches and γ(n) = 1/(n+1) for every n ≤ 10."""
    _assert_hard(_lengths(pairs, 10, hard_only=True), pairs)


# -- soft meaning --------------------------------------------------------------------------------


def test_soft_own_schedule_agrees():
    for rec in _lengths(DYCK2, 4):
        assert rec["disagreements"] == 0
        assert rec["reference_mismatches"]["soft"] == 0
        assert rec["invariant"] == "holds"


def test_soft_paper_schedule_override():
    """--tau 1/(n^3*log(n)) (log 1 = 0, so from n = 2): the integer model agrees."""
    for rec in _lengths(DYCK1, 6, min_n=2, tau="1/(n^3*log(n))"):
        assert rec["disagreements"] == 0
        assert rec["invariant"] == "holds"
    lengths = _lengths(DYCK2, 4, min_n=2, tau="1/(n^3*log(n))")
    assert [r["disagreements"] for r in lengths] == [0, 0, 0]


def test_unit_scale_needs_its_own_schedule():
    """The bounded model has γ = 1/(n+1)³, so 1/(n³ log n) is too warm at n = 2,
    while its own schedule 1/(C (n+1)³ log(n+1)) agrees."""
    warm = _lengths(DYCK2, 2, min_n=2, scale="unit", tau="1/(n^3*log(n))")[0]
    assert warm["disagreements"] > 0
    own = _lengths(DYCK2, 3, min_n=2, scale="unit")
    assert all(r["disagreements"] == 0 for r in own)
    assert SCHEDULE_C == 5
