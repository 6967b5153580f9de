"""Checks for proofs/rasp-gaps.md (Lemmas R1–R5: the RASP compiler's primitives and gaps;
Lemmas RB1–RB7: the bounded encoding, integers held as k/(n+1)).

Run: python3 proofs/check_rasp_gaps.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import sympy as sp
from checklib import check, finish, ok

Q, K, c, j, i, a = sp.symbols("Q K c j i a", integer=True)


def relu(x):
    return max(x, 0)


# ---------------------------------------------------------------- R1: select
check(sp.expand(2 * Q * K - K**2 - (Q**2 - (Q - K) ** 2)) == 0, "2QK - K^2 = Q^2 - (Q-K)^2")
ok("equality score 2QK − K² = Q² − (Q − K)²")

rng = random.Random(1)
for n in range(1, 7):
    keys = range(n + 1)
    worst = None
    for _ in range(400):
        P = [rng.choice([-3, -2, -1, 0]) for _ in keys]
        for sigma in (1, -1):
            s = [Fraction(P[k]) + Fraction(sigma * k, n + 1) for k in keys]
            top = max(s)
            check(s.count(top) == 1, f"R1 unique max n={n}")
            gap = min(top - x for x in s if x != top)
            worst = gap if worst is None else min(worst, gap)
            check(gap >= Fraction(1, n + 1), f"R1 gap >= 1/(n+1) at n={n}")
            sat = [k for k in keys if P[k] == 0]
            if sat:
                want = max(sat) if sigma == 1 else min(sat)
                check(s.index(top) == want, f"R1 chooses the {('right', 'left')[sigma < 0]}most")
    check(worst == Fraction(1, n + 1), f"R1 bound attained at n={n}")
ok("R1: select scores P_j ± j/(n+1) have a unique max, gap >= 1/(n+1), attained (n <= 6)")


def mobius(g, m):
    coef = dict(g)
    for t in range(m):
        for bits in sorted(coef):
            if bits[t]:
                coef[bits] -= coef[bits[:t] + (0,) + bits[t + 1 :]]
    return coef


for m in range(1, 5):
    for _ in range(30):
        g = {bits: rng.choice([0, -1]) for bits in itertools.product((0, 1), repeat=m)}
        coef = mobius(g, m)
        for x in itertools.product((0, 1), repeat=m):
            val = sum(cf * all(x[t] for t in range(m) if S[t]) for S, cf in coef.items())
            check(val == g[x], "multilinear expansion reproduces f - 1")
        check(all(isinstance(v, int) for v in coef.values()), "integer coefficients")
ok("R1: the Möbius coefficients of f − 1 are integers and reproduce it on {0,1}^m (m <= 4)")

# ---------------------------------------------------------------- R2: count lookup
share = c / (i + 1)
score = 2 * share * j - j**2 / (i + 1)
check(sp.simplify(score - (c**2 - (c - j) ** 2) / (i + 1)) == 0, "count lookup score identity")
for n in range(1, 9):
    for ii in range(n + 1):
        for cc in range(ii + 1):
            s = [Fraction(2 * cc * jj, ii + 1) - Fraction(jj * jj, ii + 1) for jj in range(ii + 1)]
            top = max(s)
            check(s.index(top) == cc and s.count(top) == 1, "R2 max at j = count")
            if ii:
                g = min(top - x for x in s if x != top)
                check(g >= Fraction(1, n + 1), "R2 gap >= 1/(n+1)")
                check(g >= Fraction(1, ii + 1), "R2 gap >= 1/(i+1)")
ok("R2: count lookup reads c exactly, gap >= 1/(i+1) >= 1/(n+1) (n <= 8)")

# ---------------------------------------------------------------- R3: square lookup
check(sp.expand(2 * a * j - j**2 - (a**2 - (a - j) ** 2)) == 0, "square lookup identity")
for n in range(1, 9):
    for aa in range(n + 1):
        s = [2 * aa * jj - jj * jj for jj in range(n + 1)]
        top = max(s)
        check(s.index(top) == aa and s.count(top) == 1, "R3 max at j = a")
        if n:
            check(min(top - x for x in s if x != top) >= 1, "R3 gap >= 1")
ok("R3: square lookup reads a² exactly, gap >= 1 (n <= 8)")

# ---------------------------------------------------------------- R5: gadgets
for d in range(-6, 7):
    check(relu(d) - relu(d - 1) == (d > 0), "d > 0")
    check(relu(d + 1) - relu(d) == (d >= 0), "d >= 0")
    check(relu(d + 1) - 2 * relu(d) + relu(d - 1) == (d == 0), "d == 0")
    check(relu(d) - relu(d - 1) + relu(-d) - relu(-d - 1) == (d != 0), "d != 0")
for x, y in itertools.product(range(-5, 6), repeat=2):
    check(relu(x) - relu(-x) - relu(x - y) == min(x, y), "min")
    check(relu(x) - relu(-x) + relu(y - x) == max(x, y), "max")
    check(relu(x) + relu(-x) == abs(x), "abs")
for bits in itertools.product((0, 1), repeat=3):
    x, y, z = bits
    check(relu(x + y + z - 2) == (x and y and z), "and")
    check(relu(x + y) - relu(x + y - 1) == (x or y), "or")
    check(relu(x - y) + relu(y - x) == (x != y), "xor")
    check(relu(x + y - 1) + relu(1 - x - y) == (x == y), "xnor")
    check(relu(z + x - 1) + relu(y - z) == (x if z else y), "ite")
    check(relu(x - z) == (x and not z), "clear at BOS")
ok("R5: every position-wise gadget is exact on integers / Booleans")

# ================================================================ the bounded encoding, N = n + 1
# ---------------------------------------------------------------- RB1: select
for n in range(1, 7):
    N = n + 1
    keys = range(n + 1)
    for eq, (tie, level) in {
        True: (Fraction(1, N**3), Fraction(1, N**2)),
        False: (Fraction(1, N), Fraction(1)),
    }.items():
        worst = None
        for _ in range(300):
            # integer penalties: (Q − K)² over N² with an equality, (f − 1) − bos (integers) always
            P = [
                -rng.choice([0, 0, 1, 2]) - (rng.choice([0, 1, 4, 9]) * level if eq else 0)
                for _ in keys
            ]
            P = [Fraction(x) if not eq else x for x in P]
            for sigma in (1, -1):
                sc = [P[k] + sigma * k * tie for k in keys]
                top = max(sc)
                check(sc.count(top) == 1, f"RB1 unique max n={n} eq={eq}")
                gap = min(top - x for x in sc if x != top)
                worst = gap if worst is None else min(worst, gap)
                check(gap >= tie, f"RB1 gap >= {tie} at n={n}")
                sat = [k for k in keys if P[k] == 0]
                if sat:
                    want = max(sat) if sigma == 1 else min(sat)
                    check(sc.index(top) == want, "RB1 chooses the program's key")
        check(worst == tie, f"RB1 bound {tie} attained at n={n} (eq={eq})")
    check(Fraction(1, N**2) - Fraction(n, N**3) == Fraction(1, N**3), "RB1 1/N² − n/N³ = 1/N³")
Nn, Qb, Kb = sp.symbols("N Q_b K_b", positive=True)
check(
    sp.expand(2 * (Qb / Nn) * (Kb / Nn) - (Kb / Nn) ** 2 - (Qb**2 - (Qb - Kb) ** 2) / Nn**2) == 0,
    "RB1 2Q̃K̃ − K̃² = (Q² − (Q − K)²)/N²",
)
ok(
    "RB1: select levels 1/N² apart with an equality, tie-break j/N³: gap ≥ 1/N³ (else 1/N), "
    "attained"
)

# ---------------------------------------------------------------- RB2: count lookup
ib = sp.Symbol("i", nonnegative=True)
share_b = c / ((ib + 1) * Nn)
score_b = 2 * share_b * (j / Nn) - (1 / (ib + 1)) * (j / Nn) ** 2
check(
    sp.simplify(score_b - (c**2 - (c - j) ** 2) / ((ib + 1) * Nn**2)) == 0,
    "RB2 count lookup score (c² − (c − j)²)/((i+1)N²)",
)
for n in range(1, 9):
    N = n + 1
    u = Fraction(1, N)
    for bb, bos in itertools.product((0, 1), repeat=2):
        check(relu(bb - bos + u - 1) == bb * (1 - bos) * u, "RB2 b″ = unit·b·(1 − bos)")
    worst = None
    for ii in range(n + 1):
        for cc in range(ii + 1):
            sh = Fraction(cc, (ii + 1) * N)
            sc = [
                2 * sh * Fraction(jj, N) - Fraction(1, ii + 1) * Fraction(jj * jj, N * N)
                for jj in range(ii + 1)
            ]
            top = max(sc)
            check(sc.index(top) == cc and sc.count(top) == 1, "RB2 max at j = count")
            if ii:
                g = min(top - x for x in sc if x != top)
                check(g >= Fraction(1, (ii + 1) * N * N), "RB2 gap >= 1/((i+1)N²)")
                worst = g if worst is None else min(worst, g)
    check(worst == Fraction(1, N**3), f"RB2 gap exactly 1/N³ at n={n}")
ok("RB2: b″ = b(1 − bos)/N; the lookup reads count/N, gap 1/((i+1)N²), exactly 1/N³ (n <= 8)")

# ---------------------------------------------------------------- RB3: square lookup
for n in range(1, 9):
    N = n + 1
    worst = None
    for kk in range(-n, n + 1):
        al = relu(Fraction(kk, N)) + relu(Fraction(-kk, N))
        check(al == Fraction(abs(kk), N), "RB3 α = |K|/N")
        sc = [2 * al * Fraction(jj, N) - Fraction(jj * jj, N * N) for jj in range(n + 1)]
        top = max(sc)
        check(sc.index(top) == abs(kk) and sc.count(top) == 1, "RB3 max at j = |K|")
        check(Fraction(sc.index(top) ** 2, N * N) == Fraction(kk * kk, N * N), "RB3 reads K²/N²")
        g = min(top - x for x in sc if x != top)
        worst = g if worst is None else min(worst, g)
    check(worst == Fraction(1, N**2), f"RB3 gap exactly 1/N² at n={n}")
ok("RB3: square lookup reads K²/N², gap exactly 1/N² (n <= 8)")

# ---------------------------------------------------------------- RB5: homogeneous gadgets
for N in range(2, 10):
    u = Fraction(1, N)
    for x, y in itertools.product(range(-5, 6), repeat=2):
        X, Y = Fraction(x, N), Fraction(y, N)
        check(relu(X) + relu(-X) == Fraction(abs(x), N), "RB5 abs(k/N) = |k|/N")
        check(relu(X) - relu(-X) - relu(X - Y) == Fraction(min(x, y), N), "RB5 min")
        check(relu(X) - relu(-X) + relu(Y - X) == Fraction(max(x, y), N), "RB5 max")
    for bb in (0, 1):
        check(relu(bb + u - 1) == bb * u, "RB5 int(b) held as unit·b")
ok("RB5: abs, min, max act on k/N exactly (homogeneous, no bias); int(b) = ReLU(b + unit − 1)")

# ---------------------------------------------------------------- RB6: compare heads
for n in range(1, 7):
    N = n + 1
    for d in range(-6, 7):
        ge = {}
        for k in (0, 1):
            s_other = Fraction(2 * d - 2 * k + 1, N)  # every key j ≥ 1; BOS scores 0
            vals = [0] + [1] * n  # one − bos
            scores = [Fraction(0)] + [s_other] * n
            top = max(scores)
            chosen = [jj for jj, x in enumerate(scores) if x == top]
            ge[k] = Fraction(sum(vals[jj] for jj in chosen), len(chosen))
            check(ge[k] == (d >= k), f"RB6 [d ≥ {k}] at d = {d}, n = {n}")
            check(abs(s_other) >= Fraction(1, N), "RB6 gap >= 1/N")
            if d in (k - 1, k):
                check(abs(s_other) == Fraction(1, N), "RB6 gap 1/N attained")
        check(ge[0] - ge[1] == (d == 0) and 1 - ge[0] + ge[1] == (d != 0), "RB6 == and !=")
        check(ge[1] == (d > 0), "RB6 >")
ok("RB6: compare heads give [d ≥ 0], [d ≥ 1] exactly; ==, !=, > from them; gap exactly 1/N")

# ---------------------------------------------------------------- RB7: optimality of the lookup
cs, nn = sp.symbols("c n", integer=True, nonnegative=True)
tested = 0
check(sp.simplify(sp.summation(2 * cs + 1, (cs, 0, nn - 1)) - nn**2) == 0, "RB7 Σ(2c+1) = n²")
for n in range(1, 9):
    N = n + 1
    al = Fraction(1, N)  # the last query's scale 1/(i+1)
    phi = [2 * al * Fraction(jj, N * N) for jj in range(n + 1)]
    psi = [-al * Fraction(jj * jj, N * N) for jj in range(n + 1)]
    D = Fraction(1, N**3)
    check(phi[n] - phi[0] == 2 * n * D and psi[0] - psi[n] == n * n * D, "RB7 attained by ours")
    # any sequences with the argmax property obey both inequalities: parabolas with noise
    for _ in range(200):
        ph = [Fraction(2 * jj) + Fraction(rng.randint(-20, 20), 100) for jj in range(n + 1)]
        ps = [Fraction(-jj * jj) + Fraction(rng.randint(-20, 20), 100) for jj in range(n + 1)]
        gaps = []
        for cc in range(n + 1):
            sc = [cc * ph[jj] + ps[jj] for jj in range(n + 1)]
            top = max(sc)
            if sc.index(top) != cc or sc.count(top) != 1:
                break
            if n:
                gaps.append(min(top - x for x in sc if x != top))
        else:
            if gaps:
                D = min(gaps)
                check(ph[n] - ph[0] >= 2 * n * D, "RB7 φ(n) − φ(0) ≥ 2nΔ")
                check(ps[0] - ps[n] >= n * n * D, "RB7 ψ(0) − ψ(n) ≥ n²Δ")
                tested += 1
    # the stated upper bound √2/(N n²) is above ours 1/N³ by √2·N²/n² ≤ 3.2 for n ≥ 2
    if n >= 2:
        check(2 * Fraction(N**4, n**4) <= Fraction(1024, 100), "RB7 factor √2·N²/n² ≤ 3.2")
check(tested >= 500, f"RB7 enough random lookups with the argmax property ({tested})")
ok(
    f"RB7: lookups c·φ + ψ need φ-range ≥ 2nΔ, ψ-range ≥ n²Δ ({tested} random ones); "
    "ours attains both"
)

finish("check_rasp_gaps")
