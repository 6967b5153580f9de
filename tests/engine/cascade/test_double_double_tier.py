"""The double-double tier (engine/cascade/dd.py, proofs/double_double.md): every operation
encloses the exact value (checked with Fractions and 400-bit arb), each rounding allowance
is needed (lowering it makes the same inputs fail: rows DD1–DD4 of the mutation table in
proofs/README.md), and the tier's per-word error enclosures meet arb's on bundled and random
models; a check with the tier settles more words and agrees with the arb-only path."""

from __future__ import annotations

import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import arb, ctx
from paths import ROOT
from tiers_vs_arb import assert_meets_arb, random_benchmark_model

from exactattn import load_model, model_from_dict, run_check
from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade import dd as dt
from exactattn.engine.cascade.dd import DD_PREC, certify_dd
from exactattn.engine.cascade.interval import tau_enclosures
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.temperature import Temperatures
from exactattn.inputs import words_of_length


def _val(a: dt.DD, i: int) -> tuple[Fraction, Fraction]:
    return Fraction(float(a[0][i])) + Fraction(float(a[1][i])), Fraction(float(a[2][i]))


def _point(vals: list[Fraction]) -> dt.DD:
    """Point intervals h + l = v (rounded), radius the exact residue (rounded up)."""
    hs, ls, rs = zip(*(dt.frac_dd(v) for v in vals), strict=True)
    return np.array(hs), np.array(ls), np.array(rs)


def _samples(rng: random.Random, k: int, lo: int, hi: int) -> list[Fraction]:
    return [
        Fraction(rng.choice([-1, 1]) * rng.randint(1, 2**120), 2**120)
        * Fraction(2) ** rng.randint(lo, hi)
        for _ in range(k)
    ]


def _violations(op, exact, lo: int = -40, hi: int = 40, cancel: bool = False, k: int = 400) -> int:
    rng = random.Random(5)
    xs = _samples(rng, k, lo, hi)
    ys = _samples(rng, k, lo, hi)
    if cancel:  # y ≈ −x: the sum keeps only the low parts
        ys = [-x * (1 + Fraction(rng.randint(-(2**20), 2**20), 2**100)) for x in xs]
    a, b = _point(xs), _point(ys)
    with np.errstate(all="ignore"):
        got = op(a, b)
    bad = 0
    for i in range(k):
        # the inputs are enclosures: the exact result of any point inside must be enclosed;
        # check the centres (their radius is ≤ 2^-160 relative, far below the allowances)
        xa, _ = _val(a, i)
        yb, _ = _val(b, i)
        m, r = _val(got, i)
        if abs(exact(xa, yb) - m) > r:
            bad += 1
    return bad


CASES = [
    ("add", dt.dd_add, lambda x, y: x + y, {}),
    ("add_cancel", dt.dd_add, lambda x, y: x + y, {"cancel": True}),
    ("mul", dt.dd_mul, lambda x, y: x * y, {}),
    ("mul_tiny", dt.dd_mul, lambda x, y: x * y, {"lo": -560, "hi": -500}),
]


@pytest.mark.parametrize("name,op,exact,kw", CASES)
def test_ops_enclose_exact(name, op, exact, kw) -> None:
    assert _violations(op, exact, **kw) == 0


def test_rounding_allowances_are_needed(monkeypatch) -> None:
    """DD1/DD2: without the u-terms of dd_add and dd_mul (U → 0), or with them halved,
    exact sums and products fall outside; DD3: without ETA, underflowing products do."""
    with monkeypatch.context() as mp:
        mp.setattr(dt, "U", 0.0)
        assert _violations(dt.dd_add, lambda x, y: x + y) > 0
        assert _violations(dt.dd_mul, lambda x, y: x * y) > 0
    with monkeypatch.context() as mp:
        mp.setattr(dt, "U", dt.U / 64)
        assert _violations(dt.dd_mul, lambda x, y: x * y) > 0
    with monkeypatch.context() as mp:
        mp.setattr(dt, "ETA", 0.0)
        assert _violations(dt.dd_mul, lambda x, y: x * y, lo=-560, hi=-500) > 0


def _rat_violations(nums: np.ndarray, den: int) -> int:
    got = dt.rat_dd(nums, den)
    assert got is not None
    bad = 0
    for i, v in enumerate(nums.tolist()):
        m, r = _val(got, i)
        bad += abs(Fraction(v, den) - m) > r
    return bad


def test_rational_conversion_encloses(monkeypatch) -> None:
    """rat_dd (Lemma C) on int64 numerators up to 2^62 and odd denominators; DD4: without
    its 2^-51 allowance (RAT_ERR → 0) the same numbers are not enclosed."""
    rng = np.random.default_rng(3)
    nums = rng.integers(-(2**62), 2**62, size=300, dtype=np.int64)
    for den in (3, 7 * 2**20 + 1, 2**52 - 1, 12):
        assert _rat_violations(nums, den) == 0
    small = (nums >> 12).astype(np.float64)  # < 2^50: one piece, Lemma C itself
    for err, want in ((dt.RAT_ERR, 0), (0.0, 1)):
        with monkeypatch.context() as mp:
            mp.setattr(dt, "RAT_ERR", err)
            got = dt.small_rat_dd(small, 3.0)
        bad = 0
        for i, v in enumerate(small.tolist()):
            m, r = _val(got, i)
            bad += abs(Fraction(int(v), 3) - m) > r
        assert (bad > 0) == bool(want)
    # Python-integer numerators and denominators ≥ 2^53 (hard scores of deep models)
    big = np.array([int(v) * 2**41 + 12345 for v in nums[:100].tolist()] + [0, 1, -1], dtype=object)
    for arr, den in ((big, 3), (big, 2**77 + 1), (nums[:50], 2**60 - 1)):
        got = dt.rat_dd(arr, den)
        assert got is not None
        for i, v in enumerate(arr.tolist()):
            m, r = _val(got, i)
            assert abs(Fraction(int(v), den) - m) <= r
            assert r <= abs(Fraction(int(v), den)) / 2**100 + Fraction(2) ** -990
    assert dt.rat_dd(np.array([2**700], dtype=object), 3) is None


def test_recip_encloses() -> None:
    rng = random.Random(7)
    zs = [Fraction(rng.randint(2**60, 2**70), 2**60) for _ in range(300)]
    z = _point(zs)
    z = (z[0], z[1], z[2] + np.array([0.0, 1e-25] * 150))
    got = dt.dd_recip(z)
    for i, zv in enumerate(zs):
        m, r = _val(got, i)
        zr = Fraction(float(z[2][i]))
        for e in (-zr, 0, zr):  # 1/z is monotone: the ends and the centre
            assert abs(1 / (zv + e) - m) <= r
    bad = dt.dd_recip((np.array([1.0, -1.0]), np.zeros(2), np.array([2.0, 0.0])))
    assert np.isinf(bad[2]).all()  # not certainly positive: infinite radius


def test_exp_encloses_arb() -> None:
    """dd_exp against 400-bit arb on arguments from −720 to 1, with and without radius."""
    rng = random.Random(11)
    xs = [Fraction(rng.randint(-(720 * 2**40), 2**40), 2**40) for _ in range(300)]
    xs += [Fraction(0), Fraction(-1, 3), Fraction(1, 7), Fraction(-699), Fraction(-700)]
    x = _point(xs)
    rad = np.array([0.0, 2.0**-80] * (len(xs) // 2) + [0.0] * (len(xs) % 2))
    x = (x[0], x[1], x[2] + rad)
    with np.errstate(all="ignore"):
        got = dt.dd_exp(x)
    saved = ctx.prec
    ctx.prec = 400
    try:
        for i, xv in enumerate(xs):
            m, r = _val(got, i)
            assert math.isfinite(float(r))
            xr = Fraction(float(x[2][i]))
            for e in (-xr, xr):  # exp is monotone: the ends of the argument interval
                t = arb(xv.numerator) / xv.denominator + arb(e.numerator) / e.denominator
                elo, ehi = arb_endpoints(t.exp())
                assert m - r <= elo and ehi <= m + r, (xv, e)
            if xv > -600:  # far from the underflow range (ETA): a tight enclosure
                assert r <= abs(m) * ((1 + abs(xv)) / 2**96 + 2 * xr)  # k·ln2: ∝ |x|
    finally:
        ctx.prec = saved


def test_taylor_remainder_constant() -> None:
    """DD5 (Lemma E): REM bounds the degree-10 Taylor remainder of e^ρ, |ρ| ≤ 2^-9, exactly;
    a smaller constant (2^-125) would not."""
    rho = Fraction(1, 2**9)
    bound = rho**11 / math.factorial(11) * Fraction(1002, 1000)  # e^ρ < 1.002
    assert bound <= Fraction(dt.REM)
    assert bound > Fraction(1, 2**125)
    assert dt.SQUARINGS == 8 and dt.RHO_MAX == 2.0**-9
    # |x − k ln 2| ≤ ln2/2 + slack, so |ρ| = |x − k ln 2|/2^8 < 2^-9 with room for the radius
    assert Fraction(0.35) / 2**dt.SQUARINGS < Fraction(dt.RHO_MAX)


_random_model = random_benchmark_model


def _against_arb(model, n: int, limit: int = 64) -> int:
    """Per word and layer, the tier's [lo, hi] of max|δ| meets arb's; returns how many
    words the tier settled. Every decided read-out equals arb's."""
    cm = CompiledModel(model)
    temps = Temperatures(model, None)
    words = list(words_of_length(model.alphabet, n))[:limit]
    hb = run_hard(cm, words, n)
    fb = certify_dd(cm, hb, tau_enclosures(temps.at(n, DD_PREC)))
    assert_meets_arb(cm, hb, fb, temps, fb.settled)
    return int(fb.settled.sum())


@pytest.mark.parametrize(
    "name,n", [("dyck2", 4), ("induction_k2", 4), ("ltl_since_until_temperature", 4)]
)
def test_bundled_models_meet_arb(name: str, n: int) -> None:
    _against_arb(load_model(ROOT / "models" / f"{name}.json"), n)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_models_meet_arb(seed: int) -> None:
    assert _against_arb(_random_model(seed), 6) > 0


def test_wide_but_finite_radii_are_kept() -> None:
    """The guard gives an infinite radius only past MAXV (not past 1): δ of ≈ 10^4 with a radius
    above 1 still decides read-outs with a wide margin. On the 4-block random benchmark model
    (where such radii occur from layer 6 on) the tier still meets arb word by word, and it
    settles words there (it settled none while radii above 1 were made infinite)."""
    big = (np.array([3.0e4]), np.array([1e-12]), np.array([7.5]))
    assert dt.guard(big)[2][0] == 7.5
    assert np.isinf(dt.guard((np.array([1.0]), np.array([0.0]), np.array([2.0**301])))[2][0])
    # a straddling ReLU whose upper end passes MAXV: infinite, not a midpoint past MAXV
    h, _, r = dt._relu((np.array([0.0, 0.0]), np.array([0.0, 0.0]), np.array([2.0**300, 3.0])))
    assert np.isinf(r[0]) and h[0] == 0.0
    assert Fraction(h[1]) - Fraction(r[1]) <= 0 and Fraction(h[1]) + Fraction(r[1]) >= 3
    model = _random_model(0, blocks=4)
    _against_arb(model, 8, limit=256)
    cm = CompiledModel(model)
    taus = tau_enclosures(Temperatures(model, None).at(8, DD_PREC))
    hb = run_hard(cm, list(words_of_length(model.alphabet, 8)), 8)
    read = certify_dd(cm, hb, taus).read
    assert read is not None and read.sum() == 256  # every read-out decided
    orig = dt.guard

    def old_guard(a):  # the former rule: a radius above 1 became infinite
        h, lo, r = orig(a)
        return h, lo, np.where(r > 1.0, np.inf, r)

    dt.guard = old_guard
    try:
        assert certify_dd(cm, hb, taus).read.sum() < 200
    finally:
        dt.guard = orig


def test_check_with_tier_agrees_with_arb_only(monkeypatch) -> None:
    """A random model the float64 tier mostly cannot settle: with the double-double tier the
    check settles more words without arb, and every exact field and verdict is the arb-only
    path's (the error enclosures overlap)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cascade_patch import set_policy
    from test_float_filter_changes_only_last_digits import _check

    set_policy(monkeypatch, centred=False)  # this tier alone after float64
    model = _random_model(2)
    with_dd = run_check(model, max_n=5, min_n=5).to_json()
    set_policy(monkeypatch, dd=False)
    without = run_check(model, max_n=5, min_n=5).to_json()
    assert with_dd["lengths"][0]["float_settled"] > without["lengths"][0]["float_settled"]
    set_policy(monkeypatch, dd=True)
    _check(model, 5, min_n=5)


@pytest.mark.slow
def test_random_models_meet_arb_many() -> None:
    """1,000 random models (2–3 blocks, d 8–16, seeds 0..999) at n = 4."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import random_model

    for seed in range(1000):
        d = 8 + (seed % 3) * 4
        m = model_from_dict(random_model(d=d, blocks=2 + seed % 2, heads=2, seed=seed))
        _against_arb(m, 4, limit=16)


def test_tier_bits_do_not_depend_on_the_batch() -> None:
    """A word's double-double numbers depend only on that word: the same bits alone, in a
    batch, or in another order (elementwise operations in a fixed order)."""
    model = _random_model(1)
    n = 5
    cm = CompiledModel(model)
    taus = tau_enclosures(Temperatures(model, None).at(n, DD_PREC))
    words = list(words_of_length(model.alphabet, n))
    whole = certify_dd(cm, run_hard(cm, words, n), taus)
    order = list(range(len(words)))[::-1]
    rev = certify_dd(cm, run_hard(cm, [words[i] for i in order], n), taus)
    for b, i in enumerate(order):
        assert rev.err_lo[b].tobytes() == whole.err_lo[i].tobytes()
        assert rev.err_hi[b].tobytes() == whole.err_hi[i].tobytes()
    for i in (0, 7, 31):
        one = certify_dd(cm, run_hard(cm, [words[i]], n), taus)
        assert one.err_hi[0].tobytes() == whole.err_hi[i].tobytes()
        assert bool(one.settled[0]) == bool(whole.settled[i])


def test_jobs_1_and_2_identical_with_tier(monkeypatch) -> None:
    """Byte-identical check JSON with 1 and 2 processes on a model the tier settles."""
    from exactattn.core.jsonio import dumps
    from exactattn.run.executors import Processes

    monkeypatch.setenv("EXACTATTN_SHARD_INPUTS", "8")
    model = _random_model(2)
    one = dumps(run_check(model, max_n=5, min_n=5).to_json())
    pool = Processes(2)
    try:
        two = dumps(run_check(model, max_n=5, min_n=5, executor=pool).to_json())
    finally:
        pool.close()
    assert one == two


def test_beyond_float_range_is_infinite_not_a_crash() -> None:
    """Weights, biases or 1/τ past the float range give an infinite radius (the overflow
    rule), never an OverflowError; nothing is decided from them."""
    assert dt.frac_dd(Fraction(-(5**700))) == (0.0, 0.0, math.inf)
    assert dt.frac_dd(Fraction(2**1100, 3))[2] == math.inf
    assert dt.inv_tau_dd(Fraction(1, 2**1100), Fraction(1, 2**1099))[2] == math.inf
    assert dt.inv_tau_dd(Fraction(0), Fraction(1))[2] == math.inf
    h, lo, r = dt.frac_dd(Fraction(1, 2**1100))  # underflow: a tiny enclosure, not zero width
    assert (
        Fraction(h) + Fraction(lo) - Fraction(r)
        <= Fraction(1, 2**1100)
        <= Fraction(h) + Fraction(lo) + Fraction(r)
    )


def test_exact_ties_skip_the_tier(monkeypatch) -> None:
    """tracr's sort_unique leaves 18 of its 81 inputs with an undecided read-out at a position
    whose exact hard scores tie: they skip the double-double tier (it cannot decide an exact
    tie) and go straight to arb; the check's results are the same with and without the tier."""
    import json

    from cascade_patch import set_policy

    from exactattn.engine.cascade import chain
    from exactattn.engine.cascade.chain import second_tier
    from exactattn.engine.cascade.float64 import certify_float
    from exactattn.engine.hard import read_output
    from exactattn.engine.temperature import BASE_PREC
    from exactattn.importers.tracr import import_tracr

    lib = ROOT / "tests" / "data" / "tracr_lib"
    model = model_from_dict(import_tracr(lib / "lib_sort_unique.npz", lib / "lib_sort_unique.json"))
    n = int(json.loads((lib / "lib_sort_unique.json").read_text())["max_seq_len"])
    cm = CompiledModel(model)
    temps = Temperatures(model, None)
    hb = run_hard(cm, list(words_of_length(model.alphabet, n)), n)
    fb = certify_float(cm, hb, tau_enclosures(temps.at(n, BASE_PREC)))
    assert fb.tie is not None
    assert int((~fb.settled).sum()) == 18
    assert np.array_equal(fb.tie, ~fb.settled)
    num = read_output(model, hb.activations[-1], n).values.num.astype(object)
    best = num.max(axis=2)
    tied = (np.array(num == best[:, :, None], dtype=bool).sum(axis=2) > 1).any(axis=1)
    assert tied[fb.tie].all()  # a tie word has an exact tie in the hard read-out
    dtaus = tau_enclosures(temps.at(n, DD_PREC))
    # the tier itself settles none of them: skipping it changes nothing but time
    full = certify_dd(cm, hb, dtaus)
    assert not full.settled[fb.tie].any()
    calls = []
    monkeypatch.setattr(chain, "certify_dd", lambda *a: calls.append(a))
    assert second_tier(cm, hb, fb, ~fb.settled, dtaus) is fb
    assert calls == []
    monkeypatch.undo()
    with_dd = run_check(model, max_n=n, min_n=n).to_json()
    set_policy(monkeypatch, dd=False)
    assert run_check(model, max_n=n, min_n=n).to_json() == with_dd
