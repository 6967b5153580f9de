"""Certified (python-flint arb) truth for the witnesses that kill wrong bound formulas.

proofs/witnesses.py simulates layers at 50 digits (mpmath), which is evidence, not proof. The
witnesses here decide "measured error > mutated bound" and "measured error <= true bound" with
ball arithmetic: every comparison used by a check is certified (an undecided comparison
counts as a failure of the check, never as a pass). Nothing here evaluates a bound formula.

A head is the dict of proofs/witnesses.py: Q, bq, K, bk, V, bv, O (Fraction matrices), mask
(any of witnesses.MASKS), rule (average, or leftmost/rightmost with singleton argmax sets).
A layer maps x_i to x_i + Σ_h O_h(V_h Σ_j w_ij x_j + b_v).
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb, ctx, fmpq

F = Fraction
PREC = 256  # bits; every witness error is a ball of radius far below the margins used


def q2a(x: Fraction | int) -> arb:
    """An exact rational as an arb ball (exact when dyadic, else a tight enclosure)."""
    f = Fraction(x)
    return arb(fmpq(f.numerator, f.denominator))


def _mv(w: list, v: list) -> list:
    return [sum((a * b for a, b in zip(row, v, strict=True)), type(v[0])(0)) for row in w]


def _visible(mask: str, i: int, n: int) -> list[int]:
    from witnesses import MASKS

    return [j for j in range(n) if MASKS[mask](i, j)]


def _head_hard(hd: dict, X: list[list[Fraction]], i: int) -> list[Fraction]:
    vis = _visible(hd["mask"], i, len(X))
    q = [a + b for a, b in zip(_mv(hd["Q"], X[i]), hd["bq"], strict=True)]
    s = []
    for j in vis:
        k = [a + b for a, b in zip(_mv(hd["K"], X[j]), hd["bk"], strict=True)]
        s.append(sum((a * b for a, b in zip(q, k, strict=True)), F(0)))
    acc = [F(0)] * len(hd["V"])
    if not vis:
        return _mv(hd["O"], [F(0)] * len(hd["V"]))
    top = max(s)
    arg = [j for j, sj in zip(vis, s, strict=True) if sj == top]
    if hd["rule"] == "leftmost":
        arg = arg[:1]
    elif hd["rule"] == "rightmost":
        arg = arg[-1:]
    for j in arg:
        acc = [a + b / len(arg) for a, b in zip(acc, _mv(hd["V"], X[j]), strict=True)]
    acc = [a + b for a, b in zip(acc, hd["bv"], strict=True)]
    return _mv(hd["O"], acc)


def _head_soft(hd: dict, X: list[list[arb]], i: int, tau: arb) -> list[arb]:
    vis = _visible(hd["mask"], i, len(X))
    if not vis:
        return [arb(0)] * len(hd["O"])
    Q = [[q2a(v) for v in row] for row in hd["Q"]]
    K = [[q2a(v) for v in row] for row in hd["K"]]
    q = [a + q2a(b) for a, b in zip(_mv(Q, X[i]), hd["bq"], strict=True)]
    s = []
    for j in vis:
        k = [a + q2a(b) for a, b in zip(_mv(K, X[j]), hd["bk"], strict=True)]
        s.append(sum((a * b for a, b in zip(q, k, strict=True)), arb(0)))
    e = [(sj / tau).exp() for sj in s]
    z = sum(e, arb(0))
    V = [[q2a(v) for v in row] for row in hd["V"]]
    acc = [arb(0)] * len(hd["V"])
    for j, ej in zip(vis, e, strict=True):
        acc = [a + ej / z * b for a, b in zip(acc, _mv(V, X[j]), strict=True)]
    acc = [a + q2a(b) for a, b in zip(acc, hd["bv"], strict=True)]
    O = [[q2a(v) for v in row] for row in hd["O"]]
    return _mv(O, acc)


def layer_error(
    heads: list[dict], X: list[list[Fraction]], Xt: list[list[Fraction]], tau: Fraction
) -> arb:
    """Certified max_i ‖soft layer(X̃)_i − hard layer(X)_i‖_∞ (a ball)."""
    with ctx.workprec(PREC):
        Xa = [[q2a(v) for v in row] for row in Xt]
        t = q2a(tau)
        best = arb(0)
        for i in range(len(X)):
            # the residual difference x̃_i − x_i is exact; only the heads are balls
            hard = [-a for a in X[i]]
            soft = [q2a(a - b) for a, b in zip(Xt[i], X[i], strict=True)]
            for hd in heads:
                hard = [a + b for a, b in zip(hard, _head_hard(hd, X, i), strict=True)]
                soft = [a + b for a, b in zip(soft, _head_soft(hd, Xa, i, t), strict=True)]
            for a, b, x in zip(soft, hard, X[i], strict=True):
                best = best.max(abs(a - q2a(b + x)))
        return best


def head(Q: list, K: list, V: list, O: list, mask: str = "none") -> dict:
    """A head dict with zero biases (shapes taken from the matrices)."""
    return {
        "Q": Q, "bq": [F(0)] * len(Q), "K": K, "bk": [F(0)] * len(K), "V": V,
        "bv": [F(0)] * len(V), "O": O, "mask": mask, "rule": "average",
    }  # fmt: skip


# ------------------------------------------------------------------ the issue-24 witnesses
ONE = [[F(1)]]
EPS_C3, X_V0, EPS_V0 = F(1, 10), F(1, 10), F(1, 2)


def two_heads_witness(h: int = 2) -> tuple[list[dict], list, list]:
    """h identical heads, d = 1, Q = K = V = O = 1, inputs (1, −1), no perturbation: each head
    misses 1 − tanh(1/τ) at each position, and the heads add up (Σ over heads is tight)."""
    X = [[F(1)], [F(-1)]]
    return [head(ONE, ONE, ONE, ONE) for _ in range(h)], X, X


def c3_witness(eps: Fraction = EPS_C3) -> tuple[list[dict], list, list]:
    """Score matrix diag(3, −4) (Q = diag(3, −4), K = I), V = [[1, 0]], O = [[1], [0]], hard
    inputs (1, 1), (−1, −1) (γ = 2, m = 1, x_in = 1), perturbation ((+ε, −ε), (−ε, +ε)):
    the query's score moves by 2·x_in·β-order, which σ with x_in (not 2x_in) misses."""
    hd = head(
        [[F(3), F(0)], [F(0), F(-4)]],
        [[F(1), F(0)], [F(0), F(1)]],
        [[F(1), F(0)]],
        [[F(1)], [F(0)]],
    )
    X = [[F(1), F(1)], [F(-1), F(-1)]]
    Xt = [[F(1) + eps, F(1) - eps], [F(-1) - eps, F(-1) + eps]]
    return [hd], X, Xt


def v0_witness(x: Fraction = X_V0, eps: Fraction = EPS_V0) -> tuple[list[dict], list, list]:
    """A V = 0 layer (the residual carries the error unchanged: error = ε exactly) with hard
    inputs ±x (x < 1): a bound scaled by x_max instead of max(1, x_max) goes below ε."""
    hd = head(ONE, ONE, [[F(0)]], ONE)
    X = [[x], [-x]]
    Xt = [[x + eps], [-x + eps]]
    return [hd], X, Xt


def recursion(a: arb, b: arb, L: int) -> arb:
    """B_L = Σ_{k<L} a^k b as a ball (Theorem 4(ii)), evaluated by Horner."""
    acc = arb(0)
    for _ in range(L):
        acc = a * acc + b
    return acc


def theorem_B(L: int, K: Fraction, X: Fraction, m: int, g: Fraction, tau: arb) -> arb:
    """B_L at τ with a = K X²/τ, b = K X m e^{−γ/τ} (K, X already ≥ 1), as a ball."""
    with ctx.workprec(PREC):
        k, x = q2a(K), q2a(X)
        return recursion(k * x * x / tau, k * x * m * (-q2a(g) / tau).exp(), L)
