"""Checks for Theorem 1 (softmax vs average-hardmax) and Lemma 0 (zero-sum weights).

Run: python3 proofs/check_softmax_hardmax.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath as mp
import sympy as sp
from checklib import TOL, ahardmax, check, finish, is_zero, l1, mpq, nonneg_poly, ok, softmax

# ---------------------------------------------------------------- Theorem 1(i): the identity
a, R, m, q = sp.symbols("a R m q", positive=True)
# on A: |1/a − 1/(a+R)| = R/(a(a+R)) (nonnegative), a of them; off A: the softmax mass R/(a+R)
on_a = 1 / a - 1 / (a + R)
check(is_zero(on_a - R / (a * (a + R))), "1/a - 1/(a+R) = R/(a(a+R))")
check(is_zero(a * on_a + R / (a + R) - 2 * R / (a + R)), "a(1/a-1/(a+R)) + R/(a+R) = 2R/(a+R)")
ok("Theorem 1(i) identity ||p-h||_1 = 2R/(|A|+R) (symbolic)")

# ---------------------------------------------------------------- Theorem 1(ii): the bounds
# f(R) = 2R/(a+R) is increasing in R: f' = 2a/(a+R)^2 > 0
check(is_zero(sp.diff(2 * R / (a + R), R) - 2 * a / (a + R) ** 2), "d/dR 2R/(a+R) = 2a/(a+R)^2")
# a >= 1: 2R/(a+R) <= 2R/(1+R);  write a = 1 + u, u >= 0
u = sp.symbols("u", nonnegative=True)
Rn = sp.symbols("Rn", nonnegative=True)
check(
    nonneg_poly(2 * Rn / (1 + Rn) - 2 * Rn / (1 + u + Rn), [u, Rn]),
    "2R/(1+R) - 2R/(a+R) >= 0 for a >= 1",
)
check(nonneg_poly(2 * Rn - 2 * Rn / (1 + Rn), [Rn]), "2R - 2R/(1+R) >= 0")
ok("Theorem 1(ii) chain 2R/(a+R) <= 2mq/(a+mq) <= 2mq/(1+mq) <= 2mq (symbolic)")

# ---------------------------------------------------------------- Theorem 1(iii): tightness
# all m non-max scores at exactly M - γ: R = m q, and (2R/(1+R)) / (2R) = 1/(1+R)
ratio = (2 * m * q / (1 + m * q)) / (2 * m * q)
check(is_zero(ratio - 1 / (1 + m * q)), "tight case ratio = 1/(1+mq)")
ok("Theorem 1(iii) tight: measured/(2mq) = 1/(1+mq) >= 1/2 when mq <= 1 (symbolic)")

# ---------------------------------------------------------------- Lemma 0: zero-sum weights
# |Σ w_j z_j| <= (||w||_1 / 2)(max z - min z) when Σ w_j = 0.  Spot checks (exact, Fraction).
rng = random.Random(1)
for _ in range(2000):
    k = rng.randint(1, 7)
    w = [Fraction(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(k)]
    w[-1] -= sum(w)
    z = [Fraction(rng.randint(-20, 20), rng.randint(1, 4)) for _ in range(k)]
    lhs = abs(sum(x * y for x, y in zip(w, z, strict=True)))
    rhs = sum(abs(x) for x in w) / 2 * (max(z) - min(z))
    check(lhs <= rhs, f"Lemma 0 on w={w}, z={z}")
ok("Lemma 0 (zero-sum weights) on 2000 exact random instances")

# ---------------------------------------------------------------- numeric spot checks (50 digits)
worst = mp.mpf(0)
for _ in range(2000):
    size = rng.randint(1, 12)
    top = Fraction(rng.randint(-3, 3))
    k = rng.randint(1, size)
    gap = Fraction(rng.choice([1, 2, 5, 10]), rng.choice([1, 3, 10, 100]))
    s = [top] * k + [
        top - gap - Fraction(rng.randint(0, 50), rng.choice([1, 7])) for _ in range(size - k)
    ]
    rng.shuffle(s)
    tau = mpq(Fraction(rng.choice([1, 3, 1, 2]), rng.choice([1, 3, 10, 100])))
    sm = [mpq(x) for x in s]
    p, h = softmax(sm, tau), ahardmax(s)
    dist = l1(p, h)
    rr = mp.fsum(mp.exp((x - mpq(top)) / tau) for x in sm if x != mpq(top))
    check(abs(dist - 2 * rr / (k + rr)) <= TOL, "identity 2R/(a+R) numerically")
    mq = (size - k) * mp.exp(-mpq(gap) / tau)
    check(dist <= 2 * mq / (1 + mq) + TOL, "bound 2mq/(1+mq)")
    check(dist <= 2 * (size - k) * mp.exp(-mpq(gap) / tau) + TOL, "bound 2(m-|A|)e^{-γ/τ}")
    if mq > 0:
        worst = max(worst, dist / (2 * mq / (1 + mq)))
ok(f"Theorem 1 on 2000 random score vectors (ties included); max measured/bound = {worst}")

# constructed tight case: one maximum, m others exactly γ lower, m e^{-γ/τ} <= 1
s = [mp.mpf(0)] + [mp.mpf(-1)] * 4
tau = mp.mpf(1) / 2
dist = l1(softmax(s, tau), ahardmax(s))
bound = 2 * 4 * mp.exp(-2)
check(dist / bound >= mp.mpf(1) / 2, "tight case measured/bound >= 1/2")
check(abs(dist - 2 * 4 * mp.exp(-2) / (1 + 4 * mp.exp(-2))) <= TOL, "tight case equals 2mq/(1+mq)")
ok(f"tight case: measured/(2 m e^(-γ/τ)) = {mp.nstr(dist / bound, 12)} >= 1/2")

finish("check_softmax_hardmax")
