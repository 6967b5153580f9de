"""Checks for Theorem 6 (δ = 1/4 rounding FFN; geometric-tier "ziggurat" lemma).

Run: python3 proofs/check_rounding_ziggurat.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath as mp
import sympy as sp
from checklib import TOL, check, finish, ok, softmax

t = sp.symbols("t", nonnegative=True)


def relu(z: sp.Expr) -> sp.Expr:
    return sp.Max(0, z)


def r(x: sp.Expr) -> sp.Expr:
    return relu(2 * x - sp.Rational(1, 2)) - relu(2 * x - sp.Rational(3, 2))


# ---------------------------------------------------------------- (i) the three pieces
# x = 1/4 − t (t >= 0): both ReLUs are 0; x = 3/4 + t: r = 1; x = 1/4 + s, s in [0, 1/2]: 2x − 1/2
check(sp.simplify(r(sp.Rational(1, 4) - t)) == 0, "r = 0 on (-inf, 1/4]")
check(sp.simplify(r(sp.Rational(3, 4) + t)) == 1, "r = 1 on [3/4, inf)")
s_ = sp.symbols("s", nonnegative=True)
mid = r(sp.Rational(1, 4) + s_ * sp.Rational(1, 2) / (1 + s_))  # covers [1/4, 3/4)
check(
    sp.simplify(mid - (2 * (sp.Rational(1, 4) + s_ / (2 * (1 + s_))) - sp.Rational(1, 2))) == 0,
    "r = 2x - 1/2 on [1/4, 3/4)",
)
ok("r(x) = 0 for x <= 1/4, 2x - 1/2 on [1/4, 3/4], 1 for x >= 3/4 (symbolic)")
# exact Fraction sweep of the two claimed windows
rr = lambda x: max(2 * x - Fraction(1, 2), 0) - max(2 * x - Fraction(3, 2), 0)  # noqa: E731
for k in range(-1000, 1001):
    x = Fraction(k, 4000)  # [-1/4, 1/4]
    check(rr(x) == 0 and rr(1 + x) == 1, f"window at {x}")
ok("exactly 0 on [-1/4, 1/4] and exactly 1 on [3/4, 5/4] (2001 exact points each)")

# ---------------------------------------------------------------- (ii) as a residual FFN layer
# hidden W1 = (2, 2, 1, −1)ᵀ on coordinate c, b1 = (−1/2, −3/2, 0, 0), W_out = (1, −1, −1, 1),
# so x_c + f(x)_c = x_c + r(x_c) − ReLU(x_c) + ReLU(−x_c) = r(x_c).
x = sp.symbols("x", real=True)
f = relu(2 * x - sp.Rational(1, 2)) - relu(2 * x - sp.Rational(3, 2)) - relu(x) + relu(-x)
for piece in (-t, t):
    check(sp.simplify((x + f).subs(x, piece) - r(piece)) == 0, f"residual rounding at x={piece}")
ok("residual FFN x + f(x) replaces coordinate c by r(x_c) (ReLU(x) - ReLU(-x) = x)")

# ---------------------------------------------------------------- (iii) ziggurat
q, kk = sp.symbols("q k", positive=True)
rk = sp.symbols("r", integer=True, positive=True)
N = sp.symbols("N", integer=True, positive=True)
S_inf = sp.summation(q**rk, (rk, 1, sp.oo))
# sympy: Piecewise((q/(1 − q), |q| < 1), ...)
check(sp.simplify(S_inf.args[0][0] - q / (1 - q)) == 0, "Σ_{r>=1} q^r = q/(1-q)")
S = q / (1 - q)
check(sp.simplify(S / (1 + S) - q) == 0, "S/(1+S) = q for S = q/(1-q)")
Sk = kk * q / (1 - q)
check(sp.simplify(Sk / (1 + Sk) - kk * q / (1 - q + kk * q)) == 0, "k per rank: kq/(1-q+kq)")
SN = sp.summation(q**rk, (rk, 1, N))
SN_closed = q * (1 - q**N) / (1 - q)
check(sp.simplify(SN.args[1][0] - SN_closed) == 0, "Σ_{r=1}^N q^r")
check(
    sp.simplify(SN_closed / (1 + SN_closed) - q * (1 - q**N) / (1 - q ** (N + 1))) == 0,
    "finite N: q(1-q^N)/(1-q^{N+1})",
)
# q(1 − q^N)/(1 − q^{N+1}) <= q  ⇔  1 − q^N <= 1 − q^{N+1}  ⇔  q^{N+1} <= q^N (0 < q < 1)
ok("ziggurat: off-target mass <= S/(1+S) = q (k = 1), kq/(1-q+kq), finite-N exact form")

rng = random.Random(6)
for _ in range(800):
    n = rng.randint(1, 200)
    c = mp.mpf(rng.choice([1, 2, 5])) / rng.choice([1, 2, 10])
    tau = mp.mpf(rng.choice([1, 2])) / rng.choice([1, 3, 10])
    per = rng.choice([1, 1, 2, 3])
    ranks = [1 + (j // per) for j in range(n)]
    rng.shuffle(ranks)
    tight = rng.random() < 0.3
    s = [mp.mpf(0)] + [-c * rk_ - (0 if tight else mp.mpf(rng.random()) * 3) for rk_ in ranks]
    mass = 1 - softmax(s, tau)[0]
    qv = mp.exp(-c / tau)
    check(mass <= per * qv / (1 - qv + per * qv) + TOL, "ziggurat bound (k per rank)")
    if per == 1:
        check(mass <= qv + TOL, "ziggurat bound q")
        fin = qv * (1 - qv**n) / (1 - qv ** (n + 1))
        check(mass <= fin + TOL, "finite-N bound")
        if tight:
            check(abs(mass - fin) <= TOL, "finite-N bound attained")
    # second tier: N' extra positions at most Δ below
    extra = rng.randint(0, 30)
    Delta = mp.mpf(rng.choice([1, 3]))
    s2 = s + [-Delta - mp.mpf(rng.random()) for _ in range(extra)]
    mass2 = 1 - softmax(s2, tau)[0]
    S2 = per * qv / (1 - qv) + extra * mp.exp(-Delta / tau)
    check(mass2 <= S2 / (1 + S2) + TOL, "two-tier bound")
ok("ziggurat bounds on 800 random instances (n up to 201), finite-N bound attained when tight")

finish("check_rounding_ziggurat")
