"""Checks for Theorem 5 (the explicit temperature τ_thm) and its decision corollary.

Run: python3 proofs/check_tau.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import itertools
import random

import mpmath as mp
import sympy as sp
from checklib import check, finish, ok

L, K, X, m, es, gam, u, c = sp.symbols("L K X m epsilon_star gamma u c", positive=True)

# ---------------------------------------------------------------- tangent-line inequality
# g(u) = c u − 1 − ln c − ln u >= 0 for u, c > 0: g(1/c) = 0, g'(1/c) = 0, g'' = 1/u² > 0
gfun = c * u - 1 - sp.log(c) - sp.log(u)
check(sp.simplify(gfun.subs(u, 1 / c)) == 0, "g(1/c) = 0")
check(sp.simplify(sp.diff(gfun, u).subs(u, 1 / c)) == 0, "g'(1/c) = 0")
check(sp.simplify(sp.diff(gfun, u, 2) - 1 / u**2) == 0, "g'' = 1/u^2")
ok("ln u <= c u - 1 - ln c for all u, c > 0 (convex g with minimum 0 at u = 1/c)")

# ---------------------------------------------------------------- the chain for L >= 2
# target: L b a^{L−1} <= ε* with a = K X² u, b = K X m e^{−γu}, u = 1/τ. Its log is
# cond(u) = ln(L K X m/ε*) + (L−1) ln(K X²) + (L−1) ln u − γ u <= 0.
a_ = K * X**2 * u
b_ = K * X * m * sp.exp(-gam * u)
lhs_log = sp.expand_log(sp.log(L * b_ * a_ ** (L - 1) / es), force=True)
cond = sp.log(L * K * X * m / es) + (L - 1) * sp.log(K * X**2) + (L - 1) * sp.log(u) - gam * u
check(sp.simplify(lhs_log - sp.expand_log(cond, force=True)) == 0, "log of L b a^{L-1}/ε*")
# substitute ln u <= c u − 1 − ln c with c = γ/(2(L−1)):
Lam = sp.log(L * K * X * m / es) + (L - 1) * sp.log(2 * (L - 1) * K * X**2 / (sp.E * gam))
cc = gam / (2 * (L - 1))
upper = cond - (L - 1) * sp.log(u) + (L - 1) * (cc * u - 1 - sp.log(cc))
check(
    sp.simplify(sp.expand_log(upper - (Lam - gam * u / 2), force=True)) == 0,
    "cond(u) <= Λ − γu/2",
)
ok("L >= 2: cond(u) <= Λ - γu/2, so u >= 2Λ/γ (and u >= 1) gives L b a^{L-1} <= ε*")
# L = 1: cond is ln(K X m/ε*) − γ u: u >= ln(K X m/ε*)/γ suffices
check(sp.simplify(cond.subs(L, 1) - (sp.log(K * X * m / es) - gam * u)) == 0, "L = 1 case")
ok("L = 1: cond(u) = ln(K X m/ε*) - γu")

# ---------------------------------------------------------------- numeric verification (grid)
mp.mp.dps = 60


def tau_thm(Lv: int, Kv, Xv, mv, gv, ev):
    """Theorem 5's temperature, at 60 digits (independent of exactattn.bounds)."""
    if Lv == 1:
        lam = mp.log(Kv * Xv * mv / ev)
        return mp.mpf(1) if lam <= 0 else min(mp.mpf(1), gv / lam)
    lam = mp.log(Lv * Kv * Xv * mv / ev) + (Lv - 1) * mp.log(
        2 * (Lv - 1) * Kv * Xv**2 / (mp.e * gv)
    )
    return mp.mpf(1) if lam <= 0 else min(mp.mpf(1), gv / (2 * lam))


def B_L(Lv: int, Kv, Xv, mv, gv, tv):
    a = Kv * Xv**2 / tv
    b = Kv * Xv * mv * mp.exp(-gv / tv)
    acc = mp.mpf(0)
    for _ in range(Lv):
        acc = a * acc + b
    return acc


grid = itertools.product(
    [1, 2, 3, 6, 12],
    [1, 3, 100],
    [1, 10, 10**4],
    [1, 10, 10**3, 10**6],
    ["1", "1e-2", "1e-6", "1e-12"],
    ["1", "1e-3", "1e-9"],
)
count = 0
worst = mp.mpf(0)
for Lv, Kv, Xv, mv, gv, ev in grid:
    Kv, Xv, mv, gv, ev = (mp.mpf(v) for v in (Kv, Xv, mv, gv, ev))
    t = tau_thm(Lv, Kv, Xv, mv, gv, ev)
    for shrink in (1, 2, 10, 1000):  # every τ <= τ_thm works, not only τ_thm itself
        val = B_L(Lv, Kv, Xv, mv, gv, t / shrink)
        check(val <= ev * (1 + mp.mpf(10) ** -40), f"B_L <= ε* at {(Lv, Kv, Xv, mv, gv, ev)}")
        count += 1
    worst = max(worst, B_L(Lv, Kv, Xv, mv, gv, t) / ev)
ok(
    f"B_L(τ) <= ε* for τ in {{τ_thm, τ_thm/2, τ_thm/10, τ_thm/1000}} on {count} points; "
    f"max B_L(τ_thm)/ε* = {mp.nstr(worst, 6)}"
)

# ---------------------------------------------------------------- adversarial search
# greedy search in log-space over (K, X, m, γ, ε*) for each L = 1..12 for the largest
# B_L(τ_thm)/ε*; L = 1 attains 1 exactly (B_1(τ_thm) = K X m e^{−Λ} = ε* when τ_thm < 1).
worst_s = mp.mpf(0)
rs = random.Random(7)
for Lv in range(1, 13):
    for _ in range(4):
        p_ = [
            rs.uniform(0, 2),
            rs.uniform(0, 4),
            rs.uniform(0, 6),
            rs.uniform(-12, 0),
            rs.uniform(-9, 0),
        ]

        def val(p_: list, Lv: int = Lv) -> mp.mpf:
            Kv, Xv, mv, gv, ev = (mp.mpf(10) ** v for v in p_)
            mv = mp.mpf(max(1, int(mv)))
            return B_L(Lv, Kv, Xv, mv, gv, tau_thm(Lv, Kv, Xv, mv, gv, ev)) / ev

        best_v = val(p_)
        for _ in range(25):
            p2 = list(p_)
            k = rs.randrange(5)
            p2[k] = min(max(p2[k] + rs.gauss(0, 0.7), (0, 0, 0, -12, -9)[k]), (2, 4, 6, 0, 0)[k])
            v2 = val(p2)
            if v2 >= best_v:
                p_, best_v = p2, v2
        check(best_v <= 1 + mp.mpf(10) ** -40, f"search: B_L(τ_thm) > ε* at L={Lv}, {p_}")
        worst_s = max(worst_s, best_v)
check(worst_s >= mp.mpf("0.999"), f"the search finds the attained L = 1 case ({worst_s})")
ok(f"τ_thm adversarial search (L = 1..12): max B_L(τ_thm)/ε* = {mp.nstr(worst_s, 8)}")

# ---------------------------------------------------------------- asymptotic form
# For n >= 2, m <= n + 1, X >= 1, γ <= 1, ε* >= α n^{−β}:
#   1/τ_thm <= max(1, 2 C0 ln(nX/γ)/γ),
#   C0 = max(0, ln(2LK/α))/ln 2 + (2 + β) + (L−1)(max(0, ln(2(L−1)K/e))/ln 2 + 3).
rng = random.Random(5)
for _ in range(3000):
    Lv = rng.randint(1, 8)
    Kv = mp.mpf(rng.choice([1, 2, 50]))
    al = mp.mpf(rng.choice(["1", "0.5", "1e-3"]))
    be = mp.mpf(rng.choice([0, 1, 3]))
    n = rng.choice([2, 3, 10, 1000, 10**6])
    mv = mp.mpf(rng.randint(1, n + 1))
    Xv = mp.mpf(rng.choice([1, 5, n, n**2]))
    gv = mp.mpf(rng.choice(["1", "0.3", "1e-3"])) / rng.choice([1, n, n**3])
    ev = min(mp.mpf(1), al * mp.mpf(n) ** -be * rng.choice([1, 2, 100]))
    t = tau_thm(Lv, Kv, Xv, mv, gv, ev)
    C0 = (
        max(0, mp.log(2 * Lv * Kv / al)) / mp.log(2)
        + (2 + be)
        + (Lv - 1) * (max(0, mp.log(2 * max(Lv - 1, 1) * Kv / mp.e)) / mp.log(2) + 3)
    )
    rhs = max(mp.mpf(1), 2 * C0 * mp.log(n * Xv / gv) / gv)
    check(1 / t <= rhs * (1 + mp.mpf(10) ** -40), "asymptotic form of 1/τ_thm")
ok("1/τ_thm = O((1/γ) log(n X/γ)) with explicit C0 (3000 random points)")

# ---------------------------------------------------------------- decision corollary
# accept: |ỹ − y| <= ||w||_1 ε; argmax: |(z̃_k − z̃_k') − (z_k − z_k')| <= ||W_k − W_k'||_1 ε
for _ in range(2000):
    d = rng.randint(1, 4)
    W = [[mp.mpf(rng.randint(-3, 3)) / 2 for _ in range(d)] for _ in range(3)]
    xv = [mp.mpf(rng.uniform(-2, 2)) for _ in range(d)]
    eps = mp.mpf(rng.choice(["0", "1e-3", "0.2"]))
    xt = [v + eps * mp.mpf(rng.uniform(-1, 1)) for v in xv]
    z = [mp.fsum(a * b for a, b in zip(row, xv, strict=True)) for row in W]
    zt = [mp.fsum(a * b for a, b in zip(row, xt, strict=True)) for row in W]
    C = max(
        mp.fsum(abs(a - b) for a, b in zip(W[i], W[j], strict=True))
        for i in range(3)
        for j in range(3)
        if i != j
    )
    for i in range(3):
        for j in range(3):
            check(abs((zt[i] - zt[j]) - (z[i] - z[j])) <= C * eps + mp.mpf(10) ** -50, "argmax C")
        check(
            abs(zt[i] - z[i]) <= mp.fsum(abs(a) for a in W[i]) * eps + mp.mpf(10) ** -50, "||w||_1"
        )
    top = max(range(3), key=lambda i: z[i])
    mu = z[top] - max(z[i] for i in range(3) if i != top)
    if C * eps < mu:
        check(max(range(3), key=lambda i: zt[i]) == top, "decision preserved when Cε < μ")
ok("decision corollary: C ε < μ keeps accept/argmax decisions (2000 random read-outs)")

finish("check_tau")
