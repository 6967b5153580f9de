"""Checks for Theorem 4 (depth: recursion, closed form, monotonicity/invariant, the review's
corrections) and Lemma G (hard activation growth).

Run: python3 proofs/check_multilayer.py   (exit status 0 iff every check passes)
"""

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
# worst case ε_ℓ = a ε_{ℓ−1} + b: if the FINAL bound B_L <= 1 every earlier ε_ℓ <= 1.
rng = random.Random(4)
mp.mp.dps = 50
for _ in range(3000):
    L = rng.randint(1, 12)
    aa = 1 + mp.mpf(rng.random()) * rng.choice([0, 0.01, 1, 10])
    bb = mp.mpf(rng.random()) * rng.choice([1e-9, 1e-3, 0.1, 1])
    seq = [mp.mpf(0)]
    for _ in range(L):
        seq.append(aa * seq[-1] + bb)
    closed_v = L * bb if aa == 1 else bb * (aa**L - 1) / (aa - 1)
    check(abs(seq[-1] - closed_v) <= mp.mpf(10) ** -35 * max(1, closed_v), "closed form numeric")
    check(all(seq[i] <= seq[i + 1] for i in range(L)), "monotone in ℓ")
    if seq[-1] <= 1:
        check(all(v <= 1 for v in seq), "final <= 1 implies all <= 1")
    check(seq[-1] <= L * bb * aa ** (L - 1) * (1 + mp.mpf(10) ** -40), "B_L <= L b a^{L-1}")
ok("invariant: B_L <= 1 keeps every B_ℓ <= 1 (3000 random (a >= 1, b, L))")
# without a >= 1 the sequence need not be monotone: a = 1/2, b = 1 gives B = 0, 1, 3/2, 7/4, ...
# (still increasing) but a_1 = 10, a_2 = 0: B_1 = b, B_2 = b: equal; a_2 < 1 can decrease it:
seq = [0]
for aj, bj in [(10, 1), (0, 0)]:
    seq.append(aj * seq[-1] + bj)
check(seq == [0, 1, 0], "a_ℓ < 1 can make B_ℓ decrease: need max_ℓ B_ℓ, not B_L")
ok("with some a_ℓ < 1 the invariant needs max_{ℓ<L} B_ℓ <= 1 (B = 0, 1, 0 example)")

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
# hard head output: O Σ h_j (V x_j + b_v) = Σ h_j G x_j + O b_v (Σ h = 1): row r bounded by
# g_r·x + |(O b_v)_r|; exact numeric spot check of the FFN affine bound.
from fractions import Fraction  # noqa: E402

for _ in range(500):
    dd = rng.randint(1, 3)
    hw = rng.randint(1, 3)
    W1 = [[Fraction(rng.randint(-3, 3), 2) for _ in range(dd)] for _ in range(hw)]
    b1 = [Fraction(rng.randint(-3, 3), 2) for _ in range(hw)]
    W2 = [[Fraction(rng.randint(-3, 3), 2) for _ in range(hw)] for _ in range(dd)]
    b2 = [Fraction(rng.randint(-3, 3), 2) for _ in range(dd)]
    xv = [Fraction(rng.randint(-8, 8), 3) for _ in range(dd)]
    z = [
        max(sum(w * v for w, v in zip(row, xv, strict=True)) + c, Fraction(0))
        for row, c in zip(W1, b1, strict=True)
    ]
    out = [
        a_ + sum(w * v for w, v in zip(row, z, strict=True)) + c
        for a_, row, c in zip(xv, W2, b2, strict=True)
    ]
    xn = max(abs(v) for v in xv)
    lin = [sum(abs(w) for w in row) for row in W1]
    lin2 = [sum(abs(w) * v for w, v in zip(row, lin, strict=True)) for row in W2]
    aff2 = [
        sum(abs(w) * abs(c) for w, c in zip(row, b1, strict=True)) + abs(c2)
        for row, c2 in zip(W2, b2, strict=True)
    ]
    alpha = 1 + max(lin2)
    cc = max(aff2)
    check(max(abs(v) for v in out) <= alpha * xn + cc, "Lemma G (FFN) exact")
ok("Lemma G: ||x'||_∞ <= (1 + Λ_F)||x||_∞ + c_F on 500 exact random FFNs")

finish("check_multilayer")
