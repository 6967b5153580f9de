"""Tests of exactattn.bounds: closed forms, tightness, and a property test against the truth.

The truth is computed here, independently of the engine: hard attention with Fraction, softmax
with mpmath at 50 digits. A bound may never be below the true error (up to 1e-40 of 50-digit
rounding in the *measured* value; the bound itself is a certified arb upper end).
"""

from __future__ import annotations

from fractions import Fraction as F

import mpmath as mp
import pytest
from flint import arb
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from exactattn.bounds import (
    attention_head_constants,
    attention_layer_bound,
    attention_layer_constants,
    decision_certified,
    ffn_constants,
    ffn_layer_bound,
    paper_K,
    paper_K_unconditional,
    paper_layer_bound,
    readout_lipschitz,
    recursion_bound,
    score_to_query_key,
    softmax_hardmax_l1,
    softmax_lipschitz_l1,
    tau_theorem,
    theorem_bound,
    ziggurat_offtarget,
)

mp.mp.dps = 50
SLACK = mp.mpf(10) ** -40


def to_mp(x: arb | F | int) -> mp.mpf:
    """Exact conversion: an arb point (its upper end) or a Fraction to mpf."""
    if isinstance(x, arb):
        man, exp = x.upper().man_exp()
        return mp.ldexp(mp.mpf(int(man)), int(exp))
    f = F(x)
    return mp.mpf(f.numerator) / f.denominator


def softmax(s: list[mp.mpf], tau: mp.mpf) -> list[mp.mpf]:
    top = max(s)
    e = [mp.exp((x - top) / tau) for x in s]
    z = mp.fsum(e)
    return [x / z for x in e]


# ------------------------------------------------------------------ closed forms


def test_head_constants_by_hand() -> None:
    """Q = [1 0], K = [0 2], b_q = 1: QᵀK = [[0,2],[0,0]] so β = 2; Kᵀb_q = (0,2): β_q = 2;
    V = [[1,1],[0,1]], O = I: row gains (2, 1); value bias (3, -1) only in growth."""
    h = attention_head_constants(
        [[F(1), F(0)]],
        [F(1)],
        [[F(0), F(2)]],
        [F(5)],
        [[F(1), F(1)], [F(0), F(1)]],
        [F(3), F(-1)],
        None,
    )
    assert (h.beta, h.beta_bias_q, h.row_gain, h.row_bias) == (
        F(2),
        F(2),
        (F(2), F(1)),
        (F(3), F(1)),
    )
    c = attention_layer_constants([h])
    # K = max(max_r 1 + g_r(1 + 3β + β_q), max_r 2 g_r) = max(1 + 2·9, 4) = 19
    assert paper_K(c) == 19
    assert paper_K_unconditional(c) == 19  # 3β + β_q = 8 >= 2 already
    assert c.growth == (F(3), F(3))


def test_output_matrix_and_score_form() -> None:
    """O·V is what counts (row norms of the product), and the score form is (Aᵀ, I)."""
    q, k = score_to_query_key([[F(1), F(2)], [F(0), F(-1)]])
    assert q == [[F(1), F(0)], [F(2), F(-1)]] and k == [[F(1), F(0)], [F(0), F(1)]]
    h = attention_head_constants(q, None, k, None, [[F(1), F(-1)]], None, [[F(2)], [F(0)]])
    assert h.beta == 4 and h.beta_bias_q == 0 and h.row_gain == (F(4), F(0))
    c = attention_layer_constants([h])
    assert paper_K(c) == max(1 + 4 * (1 + 12), 8)


def test_unconditional_constant_is_larger_when_beta_small() -> None:
    h = attention_head_constants([[F(1, 10)]], None, [[F(1)]], None, [[F(1)]], None, None)
    c = attention_layer_constants([h])
    assert paper_K(c) == max(1 + 1 * (1 + F(3, 10)), 2)
    assert paper_K_unconditional(c) == 1 + 1 * (1 + 2)


def test_attention_bound_closed_form() -> None:
    """One head, d = 1, g = 1, β = 1, β_q = 0, x_in = 1, ε, τ, gap γ, m non-max keys:
    E = ε + (ε + min(2, 2tanh(σ/(2τ)) + 2mq/(1+mq))), σ = ε(2 + ε)."""
    h = attention_head_constants([[F(1)]], None, [[F(1)]], None, [[F(1)]], None, None)
    c = attention_layer_constants([h])
    eps, tau, gap, m = F(1, 100), F(1, 4), F(1), 3
    got = to_mp(attention_layer_bound(c, F(1), eps, tau, [gap], [m]))
    e, t = to_mp(eps), to_mp(tau)
    mq = m * mp.exp(-1 / t)
    want = e + e + min(2, 2 * mp.tanh(e * (2 + e) / (2 * t)) + 2 * mq / (1 + mq))
    assert want <= got <= want * (1 + mp.mpf(10) ** -12)
    # ε = 0 and no lower score: exact simulation, bound 0
    assert attention_layer_bound(c, F(1), F(0), tau, [None], [0]) == 0
    # per-head temperatures are accepted
    per_head = attention_layer_bound(c, F(1), eps, [tau], [gap], [m])
    assert per_head is not None and to_mp(per_head) == got


def test_ffn_constants_and_bound() -> None:
    """Λ_F = ‖|W2||W1|‖∞ <= ‖W2‖∞‖W1‖∞; here |W1| = [[1,1],[2,0]], |W2| = [[1,1],[0,1]]."""
    c = ffn_constants(
        [([[F(1), F(-1)], [F(2), F(0)]], [F(1), F(0)])], ([[F(1), F(-1)], [F(0), F(1)]], None)
    )
    assert c.lipschitz == 4 and c.lipschitz_norm_product == 4
    got = to_mp(ffn_layer_bound(c, F(1, 10)))
    assert mp.mpf(1) / 2 <= got < mp.mpf(1) / 2 + mp.mpf(10) ** -15
    assert paper_K(c) == 5
    # the product of absolute matrices can be much smaller than the product of norms
    c2 = ffn_constants([([[F(1), F(0)], [F(0), F(1)]], None)], ([[F(1), F(0)], [F(0), F(0)]], None))
    assert c2.lipschitz == 1 and c2.lipschitz_norm_product == 1
    c3 = ffn_constants([([[F(1), F(0)], [F(0), F(1)]], None)], ([[F(0), F(1)], [F(1), F(0)]], None))
    assert c3.lipschitz == 1
    c4 = ffn_constants([([[F(1), F(1)], [F(0), F(0)]], None)], ([[F(0), F(1)], [F(1), F(0)]], None))
    assert c4.lipschitz == 2 and c4.lipschitz_norm_product == 2


def test_ffn_lipschitz_tight() -> None:
    """x ↦ x + ReLU(x) on x > 0 moves by exactly 2ε = (1 + Λ_F)ε."""
    c = ffn_constants([([[F(1)]], None)], ([[F(1)]], None))
    assert c.lipschitz == 1
    x, e = F(1), F(1, 8)
    measured = (x + e + max(x + e, 0)) - (x + max(x, 0))
    assert to_mp(measured) == to_mp(ffn_layer_bound(c, e))


def test_leftmost_rightmost_need_singletons() -> None:
    for rule in ("leftmost", "rightmost"):
        h = attention_head_constants([[F(1)]], None, [[F(1)]], None, [[F(1)]], None, None, rule)
        c = attention_layer_constants([h])
        assert attention_layer_bound(c, F(1), F(0), F(1), [F(1)], [1]) is None
        assert attention_layer_bound(c, F(1), F(0), F(1), [F(1)], [1], [False]) is None
        b = attention_layer_bound(c, F(1), F(0), F(1), [F(1)], [1], [True])
        avg = attention_layer_bound(
            attention_layer_constants(
                [attention_head_constants([[F(1)]], None, [[F(1)]], None, [[F(1)]], None, None)]
            ),
            F(1),
            F(0),
            F(1),
            [F(1)],
            [1],
        )
        assert b is not None and b == avg


def test_invalid_inputs() -> None:
    h = attention_head_constants([[F(1)]], None, [[F(1)]], None, [[F(1)]], None, None)
    c = attention_layer_constants([h])
    with pytest.raises(ValueError):
        attention_layer_bound(c, F(1), F(0), F(0), [F(1)], [1])  # τ = 0
    with pytest.raises(ValueError):
        attention_layer_bound(c, F(1), F(0), F(1), [F(1), F(1)], [1])  # lengths
    with pytest.raises(TypeError):
        attention_head_constants([[1.0]], None, [[F(1)]], None, [[F(1)]], None, None)
    with pytest.raises(ValueError):
        tau_theorem(2, F(2), F(1), F(1), 3, F(2))  # ε* > 1


# ------------------------------------------------------------------ Theorems 1, 2, 6 helpers


def test_softmax_hardmax_identity_is_tight() -> None:
    """Theorem 1: one maximum, m = 4 keys exactly γ lower, τ = γ/2: measured/bound >= 1/2,
    both for the 2(m)e^{-γ/τ} form and (=1) for the sharper 2mq/(1+mq) form."""
    s = [mp.mpf(0)] + [mp.mpf(-1)] * 4
    tau = mp.mpf(1) / 2
    p = softmax(s, tau)
    measured = abs(p[0] - 1) + mp.fsum(p[1:])
    coarse = 2 * 4 * mp.exp(-1 / tau)
    assert measured / coarse >= mp.mpf(1) / 2
    sharp = to_mp(softmax_hardmax_l1(4, F(1), F(1, 2)))
    assert measured <= sharp and measured / sharp > 1 - mp.mpf(10) ** -14
    assert softmax_hardmax_l1(3, None, F(1)) == 0


def test_attention_layer_bound_is_attained() -> None:
    """ε = 0, one head, d = 1, keys x = (1, -1) seen by query x = 1 (scores 1, -1, gap 2):
    the true error 2R/(1+R) equals the Theorem 3(b) bound."""
    h = attention_head_constants([[F(1)]], None, [[F(1)]], None, [[F(1)]], None, None)
    c = attention_layer_constants([h])
    tau = F(1, 2)
    p = softmax([mp.mpf(1), mp.mpf(-1)], to_mp(tau))
    err = abs(p[0] - p[1] - 1)
    bound = to_mp(attention_layer_bound(c, F(1), F(0), tau, [F(2)], [1]))
    assert err <= bound and err / bound > 1 - mp.mpf(10) ** -14


def test_softmax_lipschitz_tight() -> None:
    """Theorem 2: s = (0, θ), s' = (2θ, θ) (equivalently Δs = (θ, −θ)) attains 2tanh(θ/2)."""
    for theta in (F(1, 1000), F(1), F(6)):
        t = to_mp(theta)
        p, p2 = softmax([mp.mpf(0), t], mp.mpf(1)), softmax([2 * t, t], mp.mpf(1))
        dist = mp.fsum(abs(a - b) for a, b in zip(p, p2, strict=True))
        bound = to_mp(softmax_lipschitz_l1(theta, F(1)))
        assert dist <= bound
        assert dist / bound > 1 - mp.mpf(10) ** -12
        assert bound <= t + mp.mpf(10) ** -15  # <= ‖Δs‖∞/τ


def test_ziggurat_bound() -> None:
    c, tau = F(1), F(1, 2)
    q = mp.exp(-2)
    assert abs(to_mp(ziggurat_offtarget(c, tau)) - q) < mp.mpf(10) ** -14
    for n in (1, 5, 50):
        s = [mp.mpf(0)] + [-mp.mpf(r) for r in range(1, n + 1)]
        mass = 1 - softmax(s, to_mp(tau))[0]
        exact = to_mp(ziggurat_offtarget(c, tau, count=n))
        assert mass <= exact and mass / exact > 1 - mp.mpf(10) ** -12
        assert exact <= to_mp(ziggurat_offtarget(c, tau))


# ------------------------------------------------------------------ Theorems 4, 5


def test_recursion_closed_form() -> None:
    a, b = F(3), F(1, 100)
    for aa, want in ((a, b * (a**4 - 1) / (a - 1)), (F(1), 4 * b)):
        got = to_mp(recursion_bound(aa, b, 4))
        assert to_mp(want) <= got <= to_mp(want) * (1 + mp.mpf(10) ** -14)
    assert recursion_bound(a, b, 0) == 0


@pytest.mark.parametrize("L", [1, 2, 3, 6])
@pytest.mark.parametrize("gamma", [F(1), F(1, 100), F(1, 10**6)])
@pytest.mark.parametrize("eps_star", [F(1), F(1, 1000)])
def test_tau_theorem_reaches_target(L: int, gamma: F, eps_star: F) -> None:
    """Every τ <= τ_thm (lower end of the ball) gives a certified B_L <= ε*; the invariant
    B_{L-1} <= 1 then holds so theorem_bound does not return None."""
    K, x, m = F(7), F(3), 20
    tau = tau_theorem(L, K, x, gamma, m, eps_star)
    lo = tau.lower()
    assert 0 < lo <= 1
    for shrink in (1, 3, 1000):
        for uncond in (False, True):
            b = theorem_bound(L, K, x, gamma, m, lo / shrink, unconditional=uncond)
            assert b is not None and b <= arb(eps_star.numerator) / eps_star.denominator


def test_tau_theorem_trivial_cases() -> None:
    assert tau_theorem(3, F(5), F(2), None, 10, F(1, 10)) == 1
    assert tau_theorem(3, F(5), F(2), F(1), 0, F(1, 10)) == 1
    # Λ <= 0: tiny constants, τ = 1
    assert tau_theorem(1, F(1), F(1), F(1), 1, F(1)) == 1


def test_theorem_bound_invariant_guard() -> None:
    """With τ far too large the conditional theorem refuses (B_{L-1} > 1 possible)."""
    assert theorem_bound(4, F(10), F(10), F(1, 1000), 100, F(1)) is None
    assert theorem_bound(4, F(10), F(10), F(1, 1000), 100, F(1), unconditional=True) is not None
    assert theorem_bound(2, F(1), F(1), F(1), 1, F(2)) is None  # τ > 1


def test_paper_layer_bound_hypotheses() -> None:
    assert paper_layer_bound(F(3), F(2), F(2), F(1, 2), F(1), 4) is None  # ε > 1
    assert paper_layer_bound(F(3), F(2), F(2), F(1, 2), F(1), 4, unconditional=True) is not None
    assert paper_layer_bound(F(3), F(2), F(1, 2), F(2), F(1), 4) is None  # τ > 1
    got = to_mp(paper_layer_bound(F(3), F(2), F(1, 2), F(1, 2), F(1), 4))
    want = 3 * 2 * (4 * mp.exp(-2) + 2 * mp.mpf(1) / 2 / (mp.mpf(1) / 2))
    assert want <= got <= want * (1 + mp.mpf(10) ** -12)


def test_readout_and_decisions() -> None:
    assert readout_lipschitz("accept", [F(1), F(-2)]) == 3
    assert readout_lipschitz("argmax", [[F(1), F(0)], [F(0), F(1)], [F(1), F(1)]]) == 2
    assert readout_lipschitz("argmax", [[F(1), F(0)]]) == 0
    assert readout_lipschitz("value", [[F(1), F(-3)], [F(2), F(0)]]) == 4
    assert decision_certified(F(1, 10), F(3), F(1, 2))
    assert not decision_certified(F(1, 6), F(3), F(1, 2))  # 3·(1/6) = 1/2, not < 1/2
    assert not decision_certified(F(0), F(3), F(0))  # zero margin never certifies


# ------------------------------------------------------------------ property test (Theorem 3b)

MASKS = {
    "none": lambda i, j: True,
    "leq": lambda i, j: j <= i,
    "lt": lambda i, j: j < i,
    "geq": lambda i, j: j >= i,
    "gt": lambda i, j: j > i,
}
small = st.sampled_from([F(-2), F(-1), F(-1, 2), F(0), F(0), F(1, 3), F(1), F(1), F(2)])


def _mv(w: list[list], v: list) -> list:
    return [sum((a * b for a, b in zip(row, v, strict=True)), v[0] * 0) for row in w]


@st.composite
def layers(draw: st.DrawFn) -> dict:
    """A random small attention layer with its hard input, perturbation, τ and ε."""
    d = draw(st.integers(1, 3))
    T = draw(st.integers(1, 5))
    heads = []
    for _ in range(draw(st.integers(1, 2))):
        k = draw(st.integers(1, 2))
        e = draw(st.integers(1, 2))
        use_o = draw(st.booleans())
        heads.append(
            {
                "Q": [[draw(small) for _ in range(d)] for _ in range(k)],
                "K": [[draw(small) for _ in range(d)] for _ in range(k)],
                "bq": [draw(small) for _ in range(k)] if draw(st.booleans()) else [F(0)] * k,
                "bk": [draw(small) for _ in range(k)] if draw(st.booleans()) else [F(0)] * k,
                "V": [[draw(small) for _ in range(d)] for _ in range(e if use_o else d)],
                "bv": [draw(small) for _ in range(e if use_o else d)],
                "O": [[draw(small) for _ in range(e)] for _ in range(d)] if use_o else None,
                "mask": draw(st.sampled_from(sorted(MASKS))),
                "rule": draw(st.sampled_from(["average", "average", "leftmost", "rightmost"])),
            }
        )
    X = [[draw(small) for _ in range(d)] for _ in range(T)]
    eps = draw(st.sampled_from([F(0), F(1, 1000), F(1, 10), F(1, 2), F(1), F(3)]))
    E = [[eps * F(draw(st.integers(-4, 4)), 4) for _ in range(d)] for _ in range(T)]
    tau = draw(st.sampled_from([F(1, 20), F(1, 5), F(1, 2), F(1), F(3)]))
    return {"heads": heads, "X": X, "E": E, "eps": eps, "tau": tau, "d": d}


def _head(hd: dict, X: list, i: int, tau: mp.mpf | None) -> tuple[list, dict]:
    """Output at query i (hard if tau is None) and statistics of the hard scores."""
    vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
    d = len(X[0])
    zero = F(0) if tau is None else mp.mpf(0)
    if not vis:
        return [zero] * d, {"low": [], "single": True}
    q = [a + b for a, b in zip(_mv(hd["Q"], X[i]), hd["bq"], strict=True)]
    s = [
        sum(a * (b + c) for a, b, c in zip(q, _mv(hd["K"], X[j]), hd["bk"], strict=True))
        for j in vis
    ]
    top = max(s)
    arg = [j for j, x in zip(vis, s, strict=True) if x == top]
    stats = {"low": [top - x for x in s if x != top], "single": len(arg) == 1}
    if tau is None:
        rule = hd["rule"]
        if rule == "leftmost":
            w = {arg[0]: F(1)}
        elif rule == "rightmost":
            w = {arg[-1]: F(1)}
        else:
            w = {j: F(1, len(arg)) for j in arg}
    else:
        w = dict(zip(vis, softmax(s, tau), strict=True))
    acc = [zero] * len(hd["V"])
    for j, wj in w.items():
        v = [a + b for a, b in zip(_mv(hd["V"], X[j]), hd["bv"], strict=True)]
        acc = [a + wj * b for a, b in zip(acc, v, strict=True)]
    out = acc if hd["O"] is None else _mv(hd["O"], acc)
    return out, stats


@settings(max_examples=350, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_attention_bound_never_exceeded(case: dict) -> None:
    heads, X, E, d = case["heads"], case["X"], case["E"], case["d"]
    T = len(X)
    Xt = [[to_mp(a + b) for a, b in zip(X[p], E[p], strict=True)] for p in range(T)]
    tau = to_mp(case["tau"])
    err = mp.mpf(0)
    gaps: list[F | None] = [None] * len(heads)
    nonmax = [0] * len(heads)
    single = [True] * len(heads)
    for i in range(T):
        hard = list(X[i])
        soft = list(Xt[i])
        for h, hd in enumerate(heads):
            out, stats = _head(hd, X, i, None)
            hard = [a + b for a, b in zip(hard, out, strict=True)]
            soft = [a + b for a, b in zip(soft, _head(hd, Xt, i, tau)[0], strict=True)]
            if stats["low"]:
                g = min(stats["low"])
                gaps[h] = g if gaps[h] is None else min(gaps[h], g)
            nonmax[h] = max(nonmax[h], len(stats["low"]))
            single[h] = single[h] and stats["single"]
        err = max(err, max(abs(to_mp(a) - b) for a, b in zip(hard, soft, strict=True)))
    c = attention_layer_constants(
        [
            attention_head_constants(
                hd["Q"], hd["bq"], hd["K"], hd["bk"], hd["V"], hd["bv"], hd["O"], hd["rule"]
            )
            for hd in heads
        ]
    )
    x_in = max(abs(v) for row in X for v in row)
    bound = attention_layer_bound(c, x_in, case["eps"], case["tau"], gaps, nonmax, single)
    needs_single = any(
        hd["rule"] != "average" and not s for hd, s in zip(heads, single, strict=True)
    )
    if needs_single:
        event("no bound: leftmost/rightmost head with a tie at the top")
        assert bound is None
        return
    assert bound is not None
    assert err <= to_mp(bound) + SLACK, (err, bound)
    if not bound > 0:
        event("checked, bound 0 (exact simulation)")
        return
    ratio = err / to_mp(bound)
    low = mp.floor(ratio * 10) / 10
    event(f"checked, measured/bound in [{mp.nstr(low, 2)}, {mp.nstr(low + mp.mpf(1) / 10, 2)})")
    assert c.width == d


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3),
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.data(),
)
def test_ffn_bound_never_exceeded(d: int, widths: list[int], data: st.DataObject) -> None:
    dims = [d, *widths]
    hidden = [
        (
            [[data.draw(small) for _ in range(dims[k])] for _ in range(dims[k + 1])],
            [data.draw(small) for _ in range(dims[k + 1])],
        )
        for k in range(len(widths))
    ]
    out = ([[data.draw(small) for _ in range(dims[-1])] for _ in range(d)], [data.draw(small)] * d)
    eps = data.draw(st.sampled_from([F(0), F(1, 7), F(1), F(5)]))
    x0 = [data.draw(small) for _ in range(d)]
    x1 = [a + eps * F(data.draw(st.integers(-3, 3)), 3) for a in x0]

    def f(x: list[F]) -> list[F]:
        z = x
        for w, b in hidden:
            z = [max(a + c, F(0)) for a, c in zip(_mv(w, z), b, strict=True)]
        return [a + c + e for a, c, e in zip(x, _mv(out[0], z), out[1], strict=True)]

    err = max(abs(a - b) for a, b in zip(f(x0), f(x1), strict=True))
    c = ffn_constants(hidden, out)
    assert to_mp(err) <= to_mp(ffn_layer_bound(c, eps))
    assert c.lipschitz is not None and c.lipschitz_norm_product is not None
    assert c.lipschitz <= c.lipschitz_norm_product
    # Lemma G (activation growth), exact
    alpha, cc = c.growth
    assert max(abs(v) for v in f(x0)) <= alpha * max(abs(v) for v in x0) + cc
