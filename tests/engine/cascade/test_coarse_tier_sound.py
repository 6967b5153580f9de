"""Soundness of the coarse float tier (exactattn/engine/cascade/coarse.py; proofs/coarse_tier.md).

Each lemma of the proof against exact arithmetic on hand-made inputs where its allowance is
needed, the tier's enclosures and decided read-outs against arb (tests/tiers_vs_arb.py) on the
bundled models and on random models, and the range the proof assumes (the tier declines outside
it). The allowance tests fail when the allowance is removed or lowered in the source (mutation
rows CO1–CO7 of proofs/README.md)."""

from __future__ import annotations

import sys
from fractions import Fraction as F

import numpy as np
import pytest
from tiers_vs_arb import ROOT, assert_meets_arb

from exactattn import load_model, model_from_dict
from exactattn.core.numbers import arb_endpoints
from exactattn.engine.cascade import coarse as co
from exactattn.engine.cascade.interval import tau_enclosures
from exactattn.engine.certify import certify_word
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length

U = F(1, 2**53)


def _random_dict(seed: int, blocks: int = 3, d: int = 16) -> dict:
    """benchmarks/models.py's random model (2 heads per block) as a dict."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model  # lazy: benchmarks/ is not a package
    finally:
        sys.path.pop(0)
    return random_model(d=d, blocks=blocks, heads=2, seed=seed)


def _run(m, n: int, limit: int | None = None):
    """(cm, hb, temps, the coarse FloatBatch or None) on the first ``limit`` words of length n."""
    cm = CompiledModel(m)
    temps = Temperatures(m, None)
    taus = tau_enclosures(temps.at(n, BASE_PREC))
    words = list(words_of_length(m.alphabet, n))[:limit]
    hb = run_hard(cm, words, n)
    return cm, hb, temps, co.certify_coarse(cm, hb, taus)


def _ident_head(d: int, q: int, k: int, v: int) -> co._Head:
    """A head on d coordinates whose query, key and value are the coordinates q, k, v (T = 2,
    every key visible, no output map)."""

    def row(c: int) -> tuple[tuple[F, ...], ...]:
        return (tuple(F(int(i == c)) for i in range(d)),)

    return co._Head(
        co._Lin.of(row(q), None),
        co._Lin.of(row(k), None),
        co._Lin.of(row(v), None),
        None,
        np.ones((2, 2), dtype=bool),
        np.zeros((2, 2)),
        np.ones(2, dtype=bool),
        1,
    )


# ---------------------------------------------------------------------------------------------
# The soundness fixes (proofs/coarse_tier.md, "Soundness fixes")


def test_score_overflow_takes_the_off_key_mass_as_one() -> None:
    """Lemma A with x̂ = fl(ŝ·c) overflowing: key 1's computed argument is −inf (ŝ_01·2 <
    −2^1024) while ρ is finite, so the exp bound gave 2^-1022 for a key whose true weight is
    ≈ 1 (the true key scores, inside the radii, put key 1 2^1014 above key 0). The row's
    enclosure v̂_0 ± (R_v + 2^-1021·spread) then missed the true output ≈ v_1 = 2^500; the
    fix takes the off-key mass as 1 where the per-word score bound may reach 2^1020."""
    hd = _ident_head(3, 0, 1, 2)
    eps = 2.0**-10
    x = np.array([[[2.0**512, -(1 - eps) * 2.0**511, 0.0], [0.0, -(1 + eps) * 2.0**511, 2.0**500]]])
    r = np.abs(x) * co.CONV + co.ETA
    r[0, :, 1] = 1.5 * eps * 2.0**511  # true keys −(1 + ε/2)·2^511 and −(1 − ε/2)·2^511
    xn = np.abs(x).max(axis=(1, 2))[:, None]
    with np.errstate(all="ignore"):
        mix, _, rmix = co._head(hd, x, xn, r, 2.0, 2.0, 0.0)  # τ = 1/2 exactly
    # exact: α_1 = 1/(1 + e^{−2^1014}), so row 0's output is 2^500·α_1 ≥ 2^500·(1 − 2^-100)
    assert np.isfinite(rmix[0, 0, 0])
    assert F(mix[0, 0, 0]) + F(rmix[0, 0, 0]) >= F(2) ** 500 * (1 - F(1, 2**100))


def test_subnormal_weight_is_outside_lemma_L_and_declined() -> None:
    """A weight below 2^-1022 rounds with an absolute error (here 2^-1076 → 0): Lemma L's
    relative allowance misses y = 2^1000·2^-1076 = 2^-76 by far; the tier declines such
    models."""
    lin = co._Lin.of(((F(2) ** -1076,),), None)
    x = np.array([[[2.0**1000]]])
    y, _, rad = lin(x, np.array([[2.0**1000]]), np.abs(x) * co.CONV + co.ETA)
    assert y[0, 0, 0] == 0.0 and F(rad[0, 0, 0]) < F(2) ** -76  # the miss, without the range
    assert not co._in_range(((F(2) ** -1076, F(1)),))
    assert co._in_range(((F(2) ** -1022, F(0)),))
    assert not co._in_range(((F(0),) * (co.MAX_DIM + 1),))

    spec = _random_dict(5, blocks=1, d=4)
    spec["layers"][0]["heads"][0]["query"][0][0] = f"1/{2**1076}"
    assert _run(model_from_dict(spec), 3)[3] is None
    assert _run(model_from_dict(_random_dict(5, blocks=1, d=4)), 3)[3] is not None


def test_tiny_temperature_is_declined() -> None:
    """τ < 2^-50: the scores' absolute underflow errors times 1/τ may exceed ETA (Lemma D)."""
    m = model_from_dict(_random_dict(5, blocks=1, d=4))
    cm = CompiledModel(m)
    hb = run_hard(cm, list(words_of_length(m.alphabet, 3)), 3)
    taus = tau_enclosures(Temperatures(m, None).at(3, BASE_PREC))
    assert co.certify_coarse(cm, hb, taus) is not None
    tiny = [None if row is None else [(F(1, 2**51), F(1, 2**51))] * len(row) for row in taus]
    assert co.certify_coarse(cm, hb, tiny) is None


# ---------------------------------------------------------------------------------------------
# Hand-derived cases and the allowances (each fails when its allowance is removed: rows CO1–CO7)


def _lin_case(w, x: float, b=None, r: float = 0.0) -> tuple[F, F, F]:
    """One linear map y = w·x + b on one exact float input x ± r: (ŷ, radius, exact y)."""
    lin = co._Lin.of((tuple(w),), None if b is None else (b,))
    X = np.array([[list(x) if isinstance(x, tuple) else [x]]], dtype=np.float64)
    y, _, rad = lin(X, np.abs(X).max(axis=(1, 2))[:, None], np.full(X.shape, r))
    exact = sum((F(xi) * wi for xi, wi in zip(X[0, 0], w, strict=True)), F(0)) + (b or 0)
    return F(y[0, 0, 0]), F(rad[0, 0, 0]), exact


def test_linear_map_needs_the_extra_u() -> None:
    """Lemma L's allowance (γ_{d+1} + u)(1 + u): the weight, the product, the bias and the sum
    round in one direction here (found by a seeded search), an error of 2.57u·(|xw| + |b|)
    against a radius of ≈ 3u·(|xw| + |b|); with γ_{d+1} alone (≈ 2u, row CO4) it misses."""
    w = F(1267227208755797877, 1152921504607236860)
    b = F(836794654979, 17592186044490)
    y, rad, exact = _lin_case([w], float.fromhex("0x1.ede25d4d1fd61p+0"), b)
    err = abs(y - exact)
    assert err <= rad
    assert err > F(85, 100) * rad  # the allowance is nearly attained
    assert err > F(257, 100) * U * (abs(exact - b) + b)


def test_hand_derived_one_linear_map() -> None:
    """y = x/3 at x = 1: fl(1/3) = (2^54 − 1)/(3·2^54), so the error is exactly 2^-54/3 = u/6;
    the radius is g·fl↑(1/3)·1 + ETA with g = fl↑((γ_2 + u)(1 + u)·SAFE) ≈ 3u, i.e. ≈ u:
    it covers the error, six times over, and is not looser than that."""
    y, rad, exact = _lin_case([F(1, 3)], 1.0)
    assert y == F(2**54 - 1, 3 * 2**54)
    assert exact - y == F(1, 3 * 2**54)
    g = co.gamma(2)
    assert F(g) == co.iv.float_up(F(2) * U / (1 - 2 * U))
    assert U <= rad <= U * (1 + F(1, 2**18))
    assert 5 * (exact - y) < rad < 7 * (exact - y)


def test_linear_map_rounding_term_covers_its_own_roundings() -> None:
    """Lemma L: g·(‖W‖∞·max|x̂| + max|b|) is computed in five roundings (norm·xn, + bmax,
    × g, + ETA, + R·|W|ᵀ), so g must exceed the exact (γ_{d+1} + u)(1 + u) by (1 + u)^5 (the
    proof's inequality; it is far below what a test can show numerically). In float
    arithmetic 1 + u is 1.0: the factor must be in g itself."""
    for d in (1, 2, 3, 16, 100, 4096):
        lin = co._Lin.of((tuple(F(1) for _ in range(d)),), None)
        need = (F(co.gamma(d + 1)) + U) * (1 + U) * (1 + U) ** 5
        assert F(lin.g) >= need, d


def test_linear_map_underflow_needs_eta() -> None:
    """Products below 2^-1075 round to 0: x = (2^-500, 2^-500), w = (2^-600, 2^-600) gives
    ŷ = 0 against y = 2^-1099, and the rounding term g·‖W‖∞·max|x̂| underflows too; only
    ETA (row CO2) covers the error."""
    y, rad, exact = _lin_case([F(2) ** -600] * 2, (2.0**-500, 2.0**-500))
    assert y == 0 and exact == F(2) ** -1099
    assert abs(y - exact) <= rad


def _ffn_only(x0: str, b: str):
    """d = 1, one FFN layer that adds the bias b: soft = hard exactly, so δ = 0 in every word."""
    return model_from_dict(
        {
            "format": "exactattn/1",
            "name": "ffn-bias",
            "alphabet": ["a"],
            "bos": "<s>",
            "d": 1,
            "embedding": {"token": {"a": [x0], "<s>": [x0]}, "position": ["0"]},
            "temperature": "1",
            "layers": [
                {
                    "kind": "ffn",
                    "hidden": [{"weight": [[0]], "bias": [0]}],
                    "output": {"weight": [[0]], "bias": [b]},
                }
            ],
            "output": {
                "kind": "accept",
                "position": "last",
                "weight": [1],
                "bias": 0,
                "threshold": 0,
            },
        }
    )


def test_conversion_allowance_is_needed() -> None:
    """Lemma H: x0 = 1/3 and the bias 1/3072 round so that fl(fl(1/3) + fl(1/3072)) and
    fl(1/3 + 1/3072) differ by an ulp, while δ = 0 exactly: the lower end stays 0 only with
    the conversion allowance (CONV = 0, row CO3, certifies a lower end of 1.8e-17)."""
    m = _ffn_only("1/3", "1/3072")
    cm, hb, temps, fb = _run(m, 2)
    assert fb is not None and fb.read.all()
    assert (fb.err_lo == 0).all() and (fb.err_hi > 0).all()
    assert_meets_arb(cm, hb, fb, temps, fb.read)


def test_safe_covers_the_radius_roundings() -> None:
    """SAFE against the proof's count: at most 64 roundings of non-negative terms along any
    radius computation (a K-head sum: K + 3), a non-negative BLAS product (1 − γ_k) with
    k ≤ 2^20, and the surplus 1 + 2^-21 that Lemma A takes from ρ (row CO1: SAFE = 1)."""
    gk = F(co.gamma(2**20))
    assert F(co.SAFE) >= (1 + F(1, 2**21)) * (1 + U) ** 64 / (1 - gk)
    assert F(co.SAFE) / (1 + U) ** 4 >= 1 + F(1, 2**21)  # ρ's |ŝ| term: one SAFE, 4 roundings


def test_exp_bound_lemma_E() -> None:
    """Lemma E: _exp_up(y) ∈ [2^-1022, 1] and ≥ min(1, e^Y) for every Y ≤ y + ln 2 − u|y| −
    2^-44 (certified with mpmath at 60 digits), on a grid including the floats nearest to
    −k·ln 2, where Schraudolph's bits are exact powers of two and the margin ln 2 is all that
    covers the truncation (row CO6 drops it)."""
    import mpmath  # lazy: only this test

    mpmath.mp.dps = 60
    ln2 = mpmath.log(2)
    ys = [float(-k * ln2) for k in range(0, 1030, 7)]
    ys += [float(-k * ln2) * (1 + 2.0**-52) for k in range(1, 1030, 11)]
    ys += list(np.linspace(-750.0, 2.0, 997)) + [-1e-300, -0.0, 0.0, 1e300, -1e300]
    with np.errstate(over="ignore"):
        v = co._exp_up(np.array(ys))
    assert ((v >= 2.0**-1022) & (v <= 1.0)).all()
    for y, vy in zip(ys, v, strict=True):
        bound = mpmath.mpf(y) + ln2 - mpmath.mpf(2) ** -53 * abs(y) - mpmath.mpf(2) ** -44
        assert mpmath.mpf(float(vy)) >= min(mpmath.mpf(1), mpmath.exp(bound)), y
    special = co._exp_up(np.array([np.nan, -np.inf, np.inf]))
    assert list(special) == [1.0, 2.0**-1022, 1.0]


# ---------------------------------------------------------------------------------------------
# The tier against arb: every layer's [err_lo, err_hi] meets arb's, decided read-outs agree


def _against_arb(
    m, n: int, limit: int | None = None, margin: bool = True
) -> tuple[int, int, int] | None:
    """The tier on the first ``limit`` words of length n against arb; (words, decided
    read-outs, positive lower ends), or None where the tier declines the model. With
    ``margin``, also every upper end ≥ MARGIN·(arb's lower end): the proof's e ≤ err_hi/MARGIN,
    which the domination argument uses (row CO5; the enclosures are within 1 + 2^-20 of arb's
    on these models, so MARGIN = 1 fails)."""
    cm, hb, temps, fb = _run(m, n, limit)
    if fb is None:
        return None
    assert not fb.tight.any() and not fb.settled.any()
    assert (fb.err_lo <= fb.err_hi).all()
    assert_meets_arb(cm, hb, fb, temps, fb.read)
    if margin:
        acc = LengthAccumulator(m, hb.n, None, len(m.layers))
        acc.add_hard(hb)
        wc = WeightCache(cm)
        for b in range(len(hb.words)):
            sr = certify_word(cm, hb, b, acc, temps, wc)
            for li, (alo, _ahi, _row) in enumerate(sr.bounds):
                a_lo = arb_endpoints(alo)[0]
                assert F(fb.err_hi[b, li]) >= a_lo * (1 + F(1, 2**18)), (hb.words[b], li)
    return len(hb.words), int(fb.read.sum()), int((fb.err_lo > 0).sum())


BUNDLED = sorted(p.name for p in (ROOT / "models").glob("*.json"))


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_models_meet_arb(name: str) -> None:
    """Every bundled model with an accept read-out (the others are declined) at n = 4."""
    m = load_model(ROOT / "models" / name)
    got = _against_arb(m, 4, limit=24)
    accept = getattr(m.output, "kind", None) == "accept"
    assert (got is not None) == accept, name
    if got is not None:
        assert got[1] > 0, name  # the tier decides read-outs: the comparison can fail


@pytest.mark.parametrize("exact_first", [True, False])
def test_random_models_meet_arb(monkeypatch, exact_first: bool) -> None:
    """The random benchmark model family (seeds 0–11, 1–3 blocks, d 8 or 12) at n = 4–5, the
    first layer from the exact hard scores (Lemma H) or computed (Lemmas L, D): the tier decides
    read-outs and gives positive lower ends, all meeting arb."""
    monkeypatch.setattr(co, "EXACT_FIRST", exact_first)
    decided = positive = 0
    for seed in range(12):
        got = _against_arb(
            model_from_dict(_random_dict(seed, blocks=1 + seed % 3, d=8 + 4 * (seed % 2))),
            4 + seed % 2,
            limit=40,
        )
        assert got is not None
        decided += got[1]
        positive += got[2]
    assert decided > 200 and positive > 200


@pytest.mark.slow
def test_random_models_meet_arb_many() -> None:
    """1,000 random models (1–3 blocks, d 8–16, seeds 1000..1999) at n = 4 (every word)."""
    decided = 0
    for seed in range(1000, 2000):
        m = model_from_dict(_random_dict(seed, blocks=1 + seed % 3, d=8 + (seed % 3) * 4))
        got = _against_arb(m, 4, margin=False)
        assert got is not None
        decided += got[1]
    assert decided > 5000
