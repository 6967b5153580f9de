"""Checks for Theorem 4 (depth: recursion, closed form, monotonicity/invariant, the review's
corrections) and Lemma G (hard activation growth).

Run: python3 proofs/check_multilayer.py   (exit status 0 iff every check passes)
"""

# ruff: noqa: B023  (search closures are called within the loop iteration that defines them)
from __future__ import annotations

import random

import mpmath as mp
import sympy as sp
from checklib import check, finish, is_zero, nonneg_poly, ok

a, b, tau, gam, K, X, m = sp.symbols("a b tau gamma K X m", positive=True)
u = sp.symbols("u", nonnegative=True)
ell, k = sp.symbols("ell k", integer=True, nonnegative=True)

# ---------------------------------------------------------------- closed form of B_ℓ
geom = sp.summation(a**k, (k, 0, ell - 1))
closed = b * (a**ell - 1) / (a - 1)
# sympy returns Piecewise((ℓ, a = 1), ((1 − a^ℓ)/(1 − a), otherwise))
branches = dict((cond, expr) for expr, cond in geom.args)
check(branches[sp.Eq(a, 1)] == ell, "Σ_{k<ℓ} 1^k = ℓ")
check(is_zero(b * branches[sp.true] - closed), "Σ_{k<ℓ} a^k = (a^ℓ − 1)/(a − 1), a ≠ 1")
# recursion: a·B_{ℓ−1} + b = B_ℓ, and B_0 = 0
check(is_zero(a * closed.subs(ell, ell - 1) + b - closed), "a B_{ℓ-1} + b = B_ℓ (closed form)")
check(is_zero(closed.subs(ell, 0)), "B_0 = 0")
# a = 1: B_ℓ = ℓ b (limit of the closed form)
check(sp.limit(closed, a, 1) == ell * b, "a -> 1: B_ℓ -> ℓ b")
# monotone: B_{ℓ+1} − B_ℓ = b a^ℓ >= 0
check(is_zero(closed.subs(ell, ell + 1) - closed - b * a**ell), "B_{ℓ+1} - B_ℓ = b a^ℓ")
ok("Theorem 4(ii): B_ℓ = b Σ_{k<ℓ} a^k = b(a^ℓ-1)/(a-1), recursion, B_0 = 0, increasing")

# ---------------------------------------------------------------- Σ_{k<L} a^k <= L a^{L−1} (a >= 1)
for L in range(1, 10):
    s = sum((1 + u) ** j for j in range(L))
    check(nonneg_poly(L * (1 + u) ** (L - 1) - s, [u]), f"L a^(L-1) - Σ a^k >= 0, L={L}")
ok("Σ_{k<L} a^k <= L a^{L-1} for a = 1+u >= 1 (certificates, L = 1..9)")
# a >= 1 under the hypotheses: a = K X²/τ with K >= 1, X >= 1, τ <= 1 (τ = 1/(1+w))
w, kx, xx = sp.symbols("w kx xx", nonnegative=True)
check(nonneg_poly((1 + kx) * (1 + xx) ** 2 * (1 + w) - 1, [kx, xx, w]), "a - 1 >= 0")
ok("a = K X²/τ >= 1 when K >= 1, X >= 1, τ <= 1")

# ---------------------------------------------------------------- general per-layer form
# B_ℓ = a_ℓ B_{ℓ−1} + b_ℓ unrolls to Σ_ℓ b_ℓ Π_{j>ℓ} a_j  (L = 4)
As = sp.symbols("a1:5", positive=True)
Bs = sp.symbols("b1:5", nonnegative=True)
acc = sp.Integer(0)
for j in range(4):
    acc = As[j] * acc + Bs[j]
unrolled = sum(Bs[j] * sp.prod(As[j + 1 :]) for j in range(4))
check(is_zero(acc - unrolled), "unrolled general recursion")
ok("Theorem 4(i): B_L = Σ_ℓ b_ℓ Π_{j>ℓ} a_j (L = 4, symbolic)")

# ---------------------------------------------------------------- the invariant (numeric)
# Theorem 4(i) as stated: if the stated condition holds, the worst sequence allowed by the
# hypothesis (ε_ℓ = a_ℓ ε_{ℓ−1} + b_ℓ when ε_{ℓ−1} <= θ, anything — here 10^6 — otherwise)
# stays below B_ℓ. Per-layer a_ℓ are drawn from [0, 3] (a_ℓ < 1 included: there B_ℓ can
# decrease and the condition must be max_{ℓ<L} B_ℓ <= θ, not B_L <= θ).


def invariant_condition(As: list, Bs: list, theta: mp.mpf) -> bool:
    """Theorem 4(i)'s condition: max_{ℓ<L} B_ℓ <= θ; if every a_ℓ >= 1, B_L <= θ suffices."""
    if all(x >= 1 for x in As):
        return Bs[-1] <= theta
    return max(Bs[:-1]) <= theta


rng = random.Random(4)
mp.mp.dps = 50
n_cond = 0
for trial in range(3000):
    L = rng.randint(1, 8)
    lo = 1 if trial % 2 else 0  # half the trials with every a_ℓ >= 1, half with a_ℓ in [0, 3]
    if lo:
        As = [1 + mp.mpf(rng.random()) * rng.choice([0, 0.01, 1, 10]) for _ in range(L)]
    else:
        As = [mp.mpf(rng.random()) * rng.choice([0.5, 1, 3]) for _ in range(L)]
    Bv = [mp.mpf(rng.random()) * rng.choice([1e-3, 0.1, 1]) for _ in range(L)]
    theta = mp.mpf(rng.choice(["0.05", "0.5", "1", "4"]))
    Bs = [mp.mpf(0)]
    for aj, bj in zip(As, Bv, strict=True):
        Bs.append(aj * Bs[-1] + bj)
    closed = mp.fsum(Bv[k] * mp.fprod(As[k + 1 :]) for k in range(L))
    check(abs(Bs[-1] - closed) <= mp.mpf(10) ** -35 * max(1, closed), "B_L = Σ b_k Π_{j>k} a_j")
    if lo == 1:
        check(all(Bs[i] <= Bs[i + 1] for i in range(L)), "a_ℓ >= 1: B_ℓ nondecreasing")
    if invariant_condition(As, Bs, theta):
        n_cond += 1
        eps = [mp.mpf(0)]
        for aj, bj in zip(As, Bv, strict=True):
            eps.append(aj * eps[-1] + bj if eps[-1] <= theta else mp.mpf(10) ** 6)
        check(
            all(e <= bb * (1 + mp.mpf(10) ** -40) for e, bb in zip(eps, Bs, strict=True)),
            "ε_ℓ <= B_ℓ",
        )
# uniform a >= 1: B_L <= L b a^{L−1}
for _ in range(500):
    L = rng.randint(1, 12)
    aa = 1 + mp.mpf(rng.random()) * rng.choice([0, 0.01, 1, 10])
    bb = mp.mpf(rng.random())
    BL = mp.fsum(bb * aa**k for k in range(L))
    check(BL <= L * bb * aa ** (L - 1) * (1 + mp.mpf(10) ** -40), "B_L <= L b a^{L-1}")
ok(f"Theorem 4(i): worst admissible ε_ℓ <= B_ℓ whenever the condition holds ({n_cond} of 3000)")
# the condition cannot be weakened to B_L <= θ without a_ℓ >= 1: a = (10, 0), b = (1, 0), θ = 1/2
As, Bv, theta = [mp.mpf(10), mp.mpf(0)], [mp.mpf(1), mp.mpf(0)], mp.mpf(1) / 2
Bs = [mp.mpf(0), mp.mpf(1), mp.mpf(0)]
check(not invariant_condition(As, Bs, theta), "a = (10, 0): the condition must fail (B_1 = 1 > θ)")
eps = [mp.mpf(0), mp.mpf(1), mp.mpf(10) ** 6]  # ε_1 = 1 > θ, after which nothing is promised
check(Bs[-1] <= theta and eps[-1] > Bs[-1], "B_L <= θ alone would not suffice")
ok("with some a_ℓ < 1 the invariant needs max_{ℓ<L} B_ℓ <= θ (B = 0, 1, 0 example)")

# ---------------------------------------------------------------- the review's corrections
# b ∝ e^{−γ/τ} with a^{L−1} ∝ τ^{−(L−1)}: L b a^{L−1} -> 0 as τ -> 0+ (L = 3), while the
# misprinted e^{+γ/τ} diverges.
expr_ok = 3 * K * X * m * sp.exp(-gam / tau) * (K * X**2 / tau) ** 2
expr_bad = 3 * K * X * m * sp.exp(gam / tau) * (K * X**2 / tau) ** 2
check(sp.limit(expr_ok, tau, 0, "+") == 0, "e^{-γ/τ} version -> 0")
check(sp.limit(expr_bad, tau, 0, "+") == sp.oo, "e^{+γ/τ} version -> oo")
ok("review minor 2: with e^{+γ/τ} the bound diverges as τ -> 0; e^{-γ/τ} is the right sign")
# ε* >= α n^{−β} gives ln(1/ε*) <= ln(1/α) + β ln n (the direction of the condition)
al, be, n = sp.symbols("alpha beta n", positive=True)
check(
    sp.expand_log(sp.log(1 / (al * n ** (-be))), force=True)
    == sp.expand_log(sp.log(1 / al) + be * sp.log(n), force=True),
    "ln(1/(α n^-β))",
)
ok("review minor 2: ε(n) >= α/n^β (a LOWER bound on ε) is what makes ln(1/ε) = O(log n)")

# ---------------------------------------------------------------- Lemma G: activation growth
# FFN (1–4 hidden layers) and attention layers (every mask, biases, leftmost/rightmost):
# ||X'|| <= α||X|| + c. A greedy search over the hard input (exact) for the largest
# ||X'|| / (α||X|| + c); sign-aligned witnesses attain 1.
from fractions import Fraction  # noqa: E402

from witnesses import ffn, head_constants, layer_out, random_ffn, random_layer  # noqa: E402

F = Fraction


def growth_ffn(Ws: list, bs: list, Wo: list, bo: list) -> tuple[Fraction, Fraction]:
    """(1 + Λ_F, c_F), c_F = max_r (|W_out| u_k + |b_out|)_r, u_l = |W_l| u_{l−1} + |b_l|."""
    lin = [F(1)] * len(Ws[0][0])
    u = [F(0)] * len(Ws[0][0])
    for W, b in zip([*Ws, Wo], [*bs, bo], strict=True):
        lin = [sum((abs(w) * v for w, v in zip(row, lin, strict=True)), F(0)) for row in W]
        u = [
            sum((abs(w) * v for w, v in zip(row, u, strict=True)), F(0)) + abs(c)
            for row, c in zip(W, b, strict=True)
        ]
    return 1 + max(lin), max(u)


def growth_attention(heads: list) -> tuple[Fraction, Fraction]:
    """α_A = max_r(1 + Σ_h g_{h,r}), c_A = max_r Σ_h |(O_h b_{v,h})_r|."""
    cs = [head_constants(hd) for hd in heads]
    d = len(cs[0][2])
    return (
        max(1 + sum(c[2][r] for c in cs) for r in range(d)),
        max(sum(c[3][r] for c in cs) for r in range(d)),
    )


def norm(X: list) -> Fraction:
    return max(abs(v) for row in X for v in row)


def climb(f: object, X: list, steps: int = 30) -> tuple[Fraction, list]:
    best = f(X)
    for _ in range(steps):
        X2 = [list(r) for r in X]
        p, c = rng.randrange(len(X2)), rng.randrange(len(X2[0]))
        X2[p][c] = F(rng.randint(-8, 8), rng.choice([1, 2, 3]))
        r2 = f(X2)
        if r2 >= best:
            best, X = r2, X2
    return best, X


worst = {"ffn": F(0), "attention": F(0)}
for _ in range(150):
    dd, Ws, bs, Wo, bo = random_ffn(rng)
    al, cc = growth_ffn(Ws, bs, Wo, bo)

    def ratio_f(X: list) -> Fraction:
        den = al * norm(X) + cc
        return norm([ffn(X[0], Ws, bs, Wo, bo)]) / den if den else F(0)

    r, _ = climb(ratio_f, [[F(rng.randint(-8, 8), 2) for _ in range(dd)]])
    check(r <= 1, f"Lemma G (FFN): ratio {r}")
    worst["ffn"] = max(worst["ffn"], r)
for _ in range(150):
    heads, X = random_layer(rng)
    al, cc = growth_attention(heads)

    def ratio_a(X: list) -> Fraction:
        den = al * norm(X) + cc
        out = [layer_out(heads, X, i, None) for i in range(len(X))]
        return norm(out) / den if den else F(0)

    r, _ = climb(ratio_a, X)
    check(r <= 1, f"Lemma G (attention): ratio {r}")
    worst["attention"] = max(worst["attention"], r)
# witnesses: positive FFN chain with biases; one head copying a positive value with O b_v > 0
Ws, bs, Wo, bo = [[[F(2)]], [[F(3)]]], [[F(1)], [F(1)]], [[F(1)]], [F(1)]
al, cc = growth_ffn(Ws, bs, Wo, bo)
x0 = F(5)
check(ffn([x0], Ws, bs, Wo, bo)[0] == al * x0 + cc, "Lemma G FFN witness attained")
hd = {
    "Q": [[F(0)]],
    "K": [[F(1)]],
    "bq": [F(0)],
    "bk": [F(0)],
    "V": [[F(2)]],
    "bv": [F(3)],
    "O": [[F(1)]],
    "mask": "none",
    "rule": "average",
}
al, cc = growth_attention([hd])
check(
    layer_out([hd], [[F(4)], [F(4)]], 0, None)[0] == al * 4 + cc,
    "Lemma G attention witness attained",
)
ok(
    "Lemma G on 150 searched FFNs (1-4 hidden layers) and 150 attention layers: max ratio "
    f"{float(worst['ffn']):.6f} / {float(worst['attention']):.6f}; witnesses attain 1"
)

finish("check_multilayer")
