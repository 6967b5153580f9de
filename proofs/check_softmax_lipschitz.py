"""Checks for Theorem 2 (ℓ∞ → ℓ1 Lipschitz bound of softmax, with its optimal form).

Run: python3 proofs/check_softmax_lipschitz.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import random

import mpmath as mp
import sympy as sp
from checklib import TOL, check, finish, is_zero, l1, ok, softmax

P, k, A, B, th, Om = sp.symbols("P k A B theta Omega", positive=True)

# ---------------------------------------------------------------- monotonicity of A/(A+B)
check(is_zero(sp.diff(A / (A + B), A) - B / (A + B) ** 2), "d/dA A/(A+B) = B/(A+B)^2 >= 0")
check(is_zero(sp.diff(A / (A + B), B) + A / (A + B) ** 2), "d/dB A/(A+B) = -A/(A+B)^2 <= 0")
ok("A/(A+B) is nondecreasing in A and nonincreasing in B")

# ---------------------------------------------------------------- the one-variable maximization
f = P * k / (1 + P * (k - 1)) - P  # upper bound on p'(S) - p(S), k = e^Ω >= 1
fp = sp.diff(f, P)
check(is_zero(fp - (k / (1 + P * (k - 1)) ** 2 - 1)), "f'(P) = k/(1+P(k-1))^2 - 1")
Pstar = 1 / (sp.sqrt(k) + 1)
check(is_zero(fp.subs(P, Pstar)), "f'(P*) = 0 at P* = 1/(sqrt(k)+1)")
fpp = sp.diff(f, P, 2)
check(is_zero(fpp + 2 * k * (k - 1) / (1 + P * (k - 1)) ** 3), "f'' = -2k(k-1)/(1+P(k-1))^3")
fstar = sp.simplify(f.subs(P, Pstar))
check(is_zero(fstar - (sp.sqrt(k) - 1) / (sp.sqrt(k) + 1)), "f(P*) = (sqrt k - 1)/(sqrt k + 1)")
# with k = e^Ω: (e^{Ω/2} - 1)/(e^{Ω/2} + 1) = tanh(Ω/4)
expr = ((sp.exp(Om / 2) - 1) / (sp.exp(Om / 2) + 1) - sp.tanh(Om / 4)).rewrite(sp.exp)
check(sp.simplify(expr) == 0, "(e^{Ω/2}-1)/(e^{Ω/2}+1) = tanh(Ω/4)")
ok("max_P f(P) = tanh(Ω/4) (f concave for k > 1; symbolic)")

# ---------------------------------------------------------------- 2 tanh(θ/2) <= θ, and <= 2
h = th - 2 * sp.tanh(th / 2)
check(
    sp.simplify((sp.diff(h, th) - sp.tanh(th / 2) ** 2).rewrite(sp.exp)) == 0,
    "d/dθ [θ - 2tanh(θ/2)] = tanh(θ/2)^2 >= 0",
)
check(h.subs(th, 0) == 0, "θ - 2tanh(θ/2) = 0 at θ = 0")
check(sp.limit(2 * sp.tanh(th / 2) / th, th, 0, "+") == 1, "2tanh(θ/2)/θ -> 1 as θ -> 0")
ok("2tanh(θ/2) <= min(θ, 2), and the linear constant 1 is optimal (symbolic)")

# ---------------------------------------------------------------- tight construction (exact)
# s = (0, τΩ/2), s' = s + (τΩ, 0): ||p' - p||_1 = 2 tanh(Ω/4) exactly; in ∞-norm form
# s' - s ~ (τΩ/2, -τΩ/2) (same softmax), so θ = Ω/2 and the value is 2 tanh(θ/2).
tau_s, Om_s = sp.symbols("tau Omega_s", positive=True)
p1 = 1 / (1 + sp.exp(Om_s / 2))
p1n = sp.exp(Om_s) / (sp.exp(Om_s) + sp.exp(Om_s / 2))
tight = (2 * (p1n - p1) - 2 * sp.tanh(Om_s / 4)).rewrite(sp.exp)
check(sp.simplify(tight) == 0, "tight example: ||p'-p||_1 = 2 tanh(Ω/4)")
ok("Theorem 2 bound attained for every Ω (two positions; symbolic)")

# ---------------------------------------------------------------- numeric spot checks (50 digits)
rng = random.Random(2)
worst = mp.mpf(0)
for _ in range(3000):
    n = rng.randint(1, 9)
    tau = mp.mpf(rng.choice([1, 2, 5, 10])) / rng.choice([1, 3, 10, 100])
    s = [mp.mpf(rng.gauss(0, 3)) for _ in range(n)]
    scale = mp.mpf(rng.choice(["1e-6", "1e-2", "0.5", "2", "10"]))
    ds = [scale * mp.mpf(rng.uniform(-1, 1)) for _ in range(n)]
    if rng.random() < 0.3:
        ds = [scale * rng.choice([-1, 1]) for _ in range(n)]
    s2 = [x + y for x, y in zip(s, ds, strict=True)]
    dist = l1(softmax(s2, tau), softmax(s, tau))
    sup = max(abs(x) for x in ds)
    om = (max(ds) - min(ds)) / tau
    check(dist <= 2 * mp.tanh(om / 4) + TOL, "||Δp||_1 <= 2tanh(Ω/4)")
    check(dist <= 2 * mp.tanh(sup / (2 * tau)) + TOL, "||Δp||_1 <= 2tanh(||Δs||/(2τ))")
    check(dist <= sup / tau + TOL, "||Δp||_1 <= ||Δs||_∞/τ")
    if om > 0:
        worst = max(worst, dist / (2 * mp.tanh(om / 4)))
ok(f"Theorem 2 on 3000 random instances; max measured/2tanh(Ω/4) = {mp.nstr(worst, 8)}")
for om in [mp.mpf("1e-8"), mp.mpf("0.3"), mp.mpf(4)]:
    s = [mp.mpf(0), om / 2]
    s2 = [om, om / 2]
    dist = l1(softmax(s2, mp.mpf(1)), softmax(s, mp.mpf(1)))
    check(abs(dist - 2 * mp.tanh(om / 4)) <= TOL, "tight example numerically")
ok("tight example attains 2tanh(Ω/4) numerically")

# ---------------------------------------------------------------- adversarial search
# seeded greedy search over (s, Δs) with |V| = 2..6 and τ = 1 (scale invariance) for the largest
# ||Δp||_1 / 2tanh(Ω/4) and ||Δp||_1 / 2tanh(θ/2); the best instances are at 50 digits anyway.
best1, best2 = mp.mpf(0), mp.mpf(0)
for _ in range(60):
    n = rng.randint(2, 6)
    s = [mp.mpf(rng.uniform(-5, 5)) for _ in range(n)]
    ds = [mp.mpf(rng.uniform(-5, 5)) for _ in range(n)]

    def ratios(s: list, ds: list) -> tuple[mp.mpf, mp.mpf]:
        dist = l1(softmax([a + b for a, b in zip(s, ds, strict=True)], mp.mpf(1)), softmax(s, 1))
        om = max(ds) - min(ds)
        th_ = max(abs(x) for x in ds)
        if om == 0:
            return mp.mpf(0), mp.mpf(0)
        return dist / (2 * mp.tanh(om / 4)), dist / (2 * mp.tanh(th_ / 2))

    r = ratios(s, ds)
    for _ in range(40):
        s2, d2 = list(s), list(ds)
        k = rng.randrange(n)
        if rng.random() < 0.5:
            s2[k] += mp.mpf(rng.gauss(0, 1))
        else:
            d2[k] += mp.mpf(rng.gauss(0, 1))
        r2 = ratios(s2, d2)
        if r2[0] >= r[0]:
            s, ds, r = s2, d2, r2
        best2 = max(best2, r2[1])
    check(r[0] <= 1 + TOL, f"Theorem 2 search: ratio {r[0]}")
    check(best2 <= 1 + TOL, f"Theorem 2 (θ form) search: ratio {best2}")
    best1 = max(best1, r[0])
check(best1 >= mp.mpf("0.99"), f"the search approaches the attained bound: {best1}")
ok(
    f"Theorem 2 adversarial search (60 starts x 40 steps): max ||Δp||/2tanh(Ω/4) = "
    f"{mp.nstr(best1, 8)}, max ||Δp||/2tanh(θ/2) = {mp.nstr(best2, 8)}"
)

finish("check_softmax_lipschitz")
