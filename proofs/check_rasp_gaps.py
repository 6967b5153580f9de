"""Checks for proofs/rasp-gaps.md (Lemmas R1–R5: the RASP compiler's primitives and gaps).

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

finish("check_rasp_gaps")
