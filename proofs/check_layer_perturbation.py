"""Checks for Theorem 3 (per-layer perturbation: attention layer (a), (a'), (b), (c); FFN (d)).

Run: python3 proofs/check_layer_perturbation.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath as mp
import sympy as sp
from checklib import TOL, check, finish, is_zero, mpq, ok, softmax

# ---------------------------------------------------------------- Step 1: score perturbation
# s̃_ij − s_ij − (Q e_i)·b_k = e_iᵀ B x_j + x̃_iᵀ B e_j + b_qᵀ K e_j,  B = QᵀK  (k = d = 2 symbolic)
d, kk = 2, 2
Q = sp.Matrix(kk, d, lambda r, c: sp.Symbol(f"Q{r}{c}"))
K = sp.Matrix(kk, d, lambda r, c: sp.Symbol(f"K{r}{c}"))
bq = sp.Matrix(kk, 1, lambda r, c: sp.Symbol(f"bq{r}"))
bk = sp.Matrix(kk, 1, lambda r, c: sp.Symbol(f"bk{r}"))
xi = sp.Matrix(d, 1, lambda r, c: sp.Symbol(f"xi{r}"))
xj = sp.Matrix(d, 1, lambda r, c: sp.Symbol(f"xj{r}"))
ei = sp.Matrix(d, 1, lambda r, c: sp.Symbol(f"ei{r}"))
ej = sp.Matrix(d, 1, lambda r, c: sp.Symbol(f"ej{r}"))


def score(x_i: sp.Matrix, x_j: sp.Matrix) -> sp.Expr:
    return ((Q * x_i + bq).T * (K * x_j + bk))[0, 0]


B = Q.T * K
delta = score(xi + ei, xj + ej) - score(xi, xj)
const_in_j = ((Q * ei).T * bk)[0, 0]
rhs = (ei.T * B * xj)[0, 0] + ((xi + ei).T * B * ej)[0, 0] + (bq.T * K * ej)[0, 0]
check(is_zero(delta - const_in_j - rhs), "score perturbation identity")
# the score form s = x_iᵀ A x_j is (Q, K) = (Aᵀ, I)
Am = sp.Matrix(d, d, lambda r, c: sp.Symbol(f"A{r}{c}"))
check(
    is_zero((xi.T * Am * xj)[0, 0] - ((Am.T * xi).T * (sp.eye(d) * xj))[0, 0]),
    "score form A = (Q, K) = (A^T, I)",
)
ok("Step 1: s~_ij - s_ij = const_i + e_i'Bx_j + x~_i'Be_j + b_q'Ke_j (b_k only in const_i)")

# ---------------------------------------------------------------- Step 2: output decomposition
# ỹ − y = G Σ_j p̃_j e_j + Σ_j (p̃_j − h_j) G x_j  when Σ p̃ = Σ h = 1 (3 positions, d = 2)
G = sp.Matrix(d, d, lambda r, c: sp.Symbol(f"G{r}{c}"))
Ob = sp.Matrix(d, 1, lambda r, c: sp.Symbol(f"Obv{r}"))  # O b_v
xs = [sp.Matrix(d, 1, lambda r, c, j=j: sp.Symbol(f"x{j}{r}")) for j in range(3)]
es = [sp.Matrix(d, 1, lambda r, c, j=j: sp.Symbol(f"e{j}{r}")) for j in range(3)]
pt = list(sp.symbols("pt0 pt1")) + [1 - sp.Symbol("pt0") - sp.Symbol("pt1")]
hh = list(sp.symbols("h0 h1")) + [1 - sp.Symbol("h0") - sp.Symbol("h1")]
y_soft = sum((pt[j] * (G * (xs[j] + es[j]) + Ob) for j in range(3)), sp.zeros(d, 1))
y_hard = sum((hh[j] * (G * xs[j] + Ob) for j in range(3)), sp.zeros(d, 1))
decomp = sum((pt[j] * G * es[j] + (pt[j] - hh[j]) * G * xs[j] for j in range(3)), sp.zeros(d, 1))
check(all(is_zero(v) for v in (y_soft - y_hard - decomp)), "output decomposition")
ok("Step 2: y~ - y = G sum p~_j e_j + sum (p~_j - h_j) G x_j; the value bias cancels")

# ---------------------------------------------------------------- Step 3: paper shape (a)
# D = c1 x²ε/τ + c2 x m q − [ε + Σ_h g_h(ε + x(σ_h/τ + 2mq))]  (two heads, one output row)
x, eps, tau, mm, qq = sp.symbols("x epsilon tau m q", positive=True)
g = sp.symbols("g1 g2", nonnegative=True)
be = sp.symbols("beta1 beta2", nonnegative=True)
bqs = sp.symbols("betaq1 betaq2", nonnegative=True)
sig = [eps * ((2 * x + eps) * be[h] + bqs[h]) for h in range(2)]
lhs = eps + sum(g[h] * (eps + x * (sig[h] / tau + 2 * mm * qq)) for h in range(2))
c1 = 1 + sum(g[h] * (1 + 3 * be[h] + bqs[h]) for h in range(2))
c2 = 2 * sum(g)
D = c1 * x**2 * eps / tau + c2 * x * mm * qq - lhs
cert = eps * (1 + sum(g)) * (x**2 / tau - 1) + sum(
    g[h] * x * eps * (be[h] * (x - eps) + bqs[h] * (x - 1)) / tau for h in range(2)
)
check(is_zero(D - cert), "paper-shape slack D equals the certificate")
ok(
    "Step 3(a): slack = ε(1+Σg)(x²/τ−1) + Σ g x ε[β(x−ε)+β_q(x−1)]/τ, each factor >= 0 "
    "when ε <= 1 <= x, τ <= 1"
)
# c1 A + c2 B <= max(c1, c2)(A + B) for A, B >= 0 is immediate; K >= 1 since c1 >= 1.

# ---------------------------------------------------------------- Step 3(a'): every ε >= 0
# For ε > 1: x·min(2, σ/τ) <= 2x <= 2x²ε/τ because xε/τ >= 1; slack 2x(xε/τ − 1):
check(is_zero(2 * x**2 * eps / tau - 2 * x - 2 * x * (x * eps / tau - 1)), "2x²ε/τ − 2x factor")
ok("Step 3(a'): for ε > 1 the capped term x·min(2,σ/τ) <= 2x²ε/τ, so K' works for all ε")

# ---------------------------------------------------------------- numeric spot checks
MASKS = {
    "none": lambda i, j: True,
    "leq": lambda i, j: j <= i,
    "lt": lambda i, j: j < i,
    "geq": lambda i, j: j >= i,
    "gt": lambda i, j: j > i,
}
rng = random.Random(3)
SMALL = [Fraction(v) for v in (-2, -1, -1, 0, 0, 0, 1, 1, 2)] + [Fraction(1, 2), Fraction(-1, 3)]


def rmat(r: int, c: int) -> list[list[Fraction]]:
    return [[rng.choice(SMALL) for _ in range(c)] for _ in range(r)]


def mv(w: list[list], v: list) -> list:
    return [sum((a * b for a, b in zip(row, v, strict=True)), type(v[0])(0)) for row in w]


def dot(u: list, v: list) -> object:
    return sum((a * b for a, b in zip(u, v, strict=True)), type(u[0])(0))


def head_out(hd: dict, X: list, i: int, tau: mp.mpf | None) -> list:
    """One head's output at query i; tau None = hard (exact Fraction), else softmax (mpf)."""
    vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
    zero = Fraction(0) if tau is None else mp.mpf(0)
    if not vis:
        return [zero] * len(X[0])
    q = [a + b for a, b in zip(mv(hd["Q"], X[i]), hd["bq"], strict=True)]
    s = [dot(q, [a + b for a, b in zip(mv(hd["K"], X[j]), hd["bk"], strict=True)]) for j in vis]
    if tau is None:
        top = max(s)
        arg = [j for j, sj in zip(vis, s, strict=True) if sj == top]
        if hd["rule"] == "leftmost":
            w = {arg[0]: Fraction(1)}
        elif hd["rule"] == "rightmost":
            w = {arg[-1]: Fraction(1)}
        else:
            w = {j: Fraction(1, len(arg)) for j in arg}
    else:
        w = dict(zip(vis, softmax(s, tau), strict=True))
    acc = [zero] * len(hd["V"])
    for j, wj in w.items():
        v = [a + b for a, b in zip(mv(hd["V"], X[j]), hd["bv"], strict=True)]
        acc = [a + wj * b for a, b in zip(acc, v, strict=True)]
    return mv(hd["O"], acc)


def head_stats(hd: dict, X: list) -> tuple[Fraction | None, int, bool]:
    """Gap, max #non-max visible keys, and whether every argmax set is a singleton (hard X)."""
    gap, mnm, single = None, 0, True
    for i in range(len(X)):
        vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
        if not vis:
            continue
        q = [a + b for a, b in zip(mv(hd["Q"], X[i]), hd["bq"], strict=True)]
        s = [dot(q, [a + b for a, b in zip(mv(hd["K"], X[j]), hd["bk"], strict=True)]) for j in vis]
        top = max(s)
        low = [top - x for x in s if x < top]
        single = single and sum(1 for x in s if x == top) == 1
        mnm = max(mnm, len(low))
        if low:
            gap = min(low) if gap is None else min(gap, min(low))
    return gap, mnm, single


def constants(hd: dict) -> tuple[Fraction, Fraction, list[Fraction]]:
    Qm, Km = hd["Q"], hd["K"]
    dd = len(Qm[0])
    Bm = [
        [sum((Qm[a][r] * Km[a][c] for a in range(len(Qm))), Fraction(0)) for c in range(dd)]
        for r in range(dd)
    ]
    beta = sum(abs(v) for row in Bm for v in row)
    ktbq = [sum((Km[a][c] * hd["bq"][a] for a in range(len(Km))), Fraction(0)) for c in range(dd)]
    betaq = sum(abs(v) for v in ktbq)
    Gm = [
        [
            sum((hd["O"][r][a] * hd["V"][a][c] for a in range(len(hd["V"]))), Fraction(0))
            for c in range(dd)
        ]
        for r in range(dd)
    ]
    return beta, betaq, [sum(abs(v) for v in row) for row in Gm]


worst_b = mp.mpf(0)
count_a = 0
for trial in range(250):
    T = rng.randint(1, 5)
    dd = rng.randint(1, 3)
    heads = []
    for _ in range(rng.randint(1, 2)):
        kq, e = rng.randint(1, 2), rng.randint(1, 3)
        heads.append(
            {
                "Q": rmat(kq, dd),
                "K": rmat(kq, dd),
                "bq": [rng.choice(SMALL) for _ in range(kq)],
                "bk": [rng.choice(SMALL) for _ in range(kq)],
                "V": rmat(e, dd),
                "bv": [rng.choice(SMALL) for _ in range(e)],
                "O": rmat(dd, e),
                "mask": rng.choice(list(MASKS)),
                "rule": rng.choice(["average"] * 3 + ["leftmost"]),
            }
        )
    X = [[rng.choice(SMALL) for _ in range(dd)] for _ in range(T)]
    eps = Fraction(rng.choice([0, 1, 1, 1, 3]), rng.choice([1, 2, 10, 1000]))
    tau = Fraction(rng.choice([1, 1, 2, 3]), rng.choice([1, 2, 5, 20]))
    E = [[eps * Fraction(rng.randint(-4, 4), 4) for _ in range(dd)] for _ in range(T)]
    Xt = [[mpq(a + b) for a, b in zip(X[p], E[p], strict=True)] for p in range(T)]
    x_in = max(abs(v) for row in X for v in row)
    stats = [head_stats(hd, X) for hd in heads]
    if any(hd["rule"] == "leftmost" and not st[2] for hd, st in zip(heads, stats, strict=True)):
        continue  # Theorem 3(c): no bound; demonstrated separately below
    err = mp.mpf(0)
    for i in range(T):
        hard = list(X[i])
        soft = list(Xt[i])
        for hd in heads:
            hard = [a + b for a, b in zip(hard, head_out(hd, X, i, None), strict=True)]
            soft = [a + b for a, b in zip(soft, head_out(hd, Xt, i, mpq(tau)), strict=True)]
        err = max(err, max(abs(mpq(a) - b) for a, b in zip(hard, soft, strict=True)))
    # formula (b)
    e_, t_, xi_ = mpq(eps), mpq(tau), mpq(x_in)
    consts = [constants(hd) for hd in heads]
    ts = []
    for (beta, betaq, _), (gap, mnm, _) in zip(consts, stats, strict=True):
        sigma = e_ * ((2 * xi_ + e_) * mpq(beta) + mpq(betaq))
        rho = mp.mpf(0)
        if gap is not None and mnm > 0:
            mq = mnm * mp.exp(-mpq(gap) / t_)
            rho = 2 * mq / (1 + mq)
        ts.append(min(mp.mpf(2), 2 * mp.tanh(sigma / (2 * t_)) + rho))
    bound_b = max(
        e_ + mp.fsum(mpq(cs[2][r]) * (e_ + xi_ * t) for cs, t in zip(consts, ts, strict=True))
        for r in range(dd)
    )
    check(err <= bound_b + TOL, f"Theorem 3(b) trial {trial}: err {err} > bound {bound_b}")
    if bound_b > 0:
        worst_b = max(worst_b, err / bound_b)
    # formulas (a) and (a'): X = max(1, x_in), γ = min gap, m = max #non-max
    gaps = [st[0] for st in stats if st[0] is not None]
    Xm = max(mp.mpf(1), xi_)
    mglob = max(st[1] for st in stats)
    b_term = mglob * mp.exp(-mpq(min(gaps)) / t_) if gaps else mp.mpf(0)
    for uncond in (False, True):
        k1 = max(
            1
            + mp.fsum(
                mpq(cs[2][r])
                * (
                    1
                    + (
                        max(mp.mpf(2), 3 * mpq(cs[0]) + mpq(cs[1]))
                        if uncond
                        else 3 * mpq(cs[0]) + mpq(cs[1])
                    )
                )
                for cs in consts
            )
            for r in range(dd)
        )
        k2 = max(2 * mp.fsum(mpq(cs[2][r]) for cs in consts) for r in range(dd))
        Kc = max(k1, k2)
        if tau <= 1 and (uncond or eps <= 1):
            bound_a = Kc * Xm * (b_term + Xm * e_ / t_)
            check(err <= bound_a + TOL, f"Theorem 3(a{'′' if uncond else ''}) trial {trial}")
            check(bound_b <= bound_a + TOL, f"(b) <= (a) trial {trial}")
            count_a += 1
ok(
    f"Theorem 3(b) on random layers (every mask, ties, biases, ε up to 3): max err/bound = "
    f"{mp.nstr(worst_b, 8)}; (a)/(a') checked {count_a} times"
)

# ---------------------------------------------------------------- tightness of (b) at ε = 0
# one head, d = 1, V = O = 1, keys x = (+1 at the max, −1 γ lower): err = 2R/(1+R) = bound
for tau_v in (mp.mpf(1), mp.mpf(1) / 4):
    s = [mp.mpf(1), mp.mpf(0)]  # score = x_j with Q = 1, K = 1, query x_i = 1 -> (1, -1)·1
    p = softmax([mp.mpf(1), mp.mpf(-1)], tau_v)
    err = abs(p[0] * 1 + p[1] * (-1) - 1)
    rr = mp.exp(-2 / tau_v)
    check(abs(err - 2 * rr / (1 + rr)) <= TOL, "tightness of (b) at ε = 0")
ok("Theorem 3(b) is attained at ε = 0 (one head, two keys)")

# ---------------------------------------------------------------- Theorem 3(c): ties + leftmost
# all scores tied (Q = 0): hard leftmost returns v_0 = 1, softmax returns the mean 0, any τ.
for tau_v in (mp.mpf(1), mp.mpf("1e-6"), mp.mpf("1e-30")):
    p = softmax([mp.mpf(0), mp.mpf(0)], tau_v)
    check(abs((p[0] * 1 + p[1] * (-1)) - 1) == 1, "leftmost with ties: error stays 1")
ok("Theorem 3(c): with a tie at the top, leftmost-hard error is 1 for every τ (no bound)")

# ---------------------------------------------------------------- Theorem 3(d): FFN


def ffn(x: list, Ws: list, bs: list, Wo: list, bo: list) -> list:
    """x + W_out ReLU(... ReLU(W_1 x + b_1) ...) + b_out, exact."""
    z = x
    for W, b in zip(Ws, bs, strict=True):
        z = [max(a + b_, type(a)(0)) for a, b_ in zip(mv(W, z), b, strict=True)]
    return [a + c + b_ for a, c, b_ in zip(x, mv(Wo, z), bo, strict=True)]


worst_f = mp.mpf(0)
for _ in range(400):
    dd = rng.randint(1, 3)
    widths = [dd] + [rng.randint(1, 3) for _ in range(rng.randint(1, 3))]
    Ws = [rmat(widths[k + 1], widths[k]) for k in range(len(widths) - 1)]
    bs = [[rng.choice(SMALL) for _ in range(widths[k + 1])] for k in range(len(widths) - 1)]
    Wo, bo = rmat(dd, widths[-1]), [rng.choice(SMALL) for _ in range(dd)]
    eps = Fraction(rng.choice([0, 1, 3]), rng.choice([1, 4, 100]))

    x0 = [rng.choice(SMALL) for _ in range(dd)]
    x1 = [a + eps * Fraction(rng.randint(-4, 4), 4) for a in x0]
    y0, y1 = ffn(x0, Ws, bs, Wo, bo), ffn(x1, Ws, bs, Wo, bo)
    err = max(abs(a - b) for a, b in zip(y0, y1, strict=True))
    vec = [Fraction(1)] * dd
    prod = Fraction(1)
    for W in [*Ws, Wo]:
        vec = [sum((abs(w) * v for w, v in zip(row, vec, strict=True)), Fraction(0)) for row in W]
        prod *= max(sum(abs(w) for w in row) for row in W)
    lam = max(vec)
    check(lam <= prod, "Λ_F <= Π ||W||_∞")
    check(err <= (1 + lam) * eps, "FFN: err <= (1 + Λ_F) ε (exact)")
    if eps:
        worst_f = max(worst_f, mpq(err / ((1 + lam) * eps)))
ok(f"Theorem 3(d) on 400 random FFNs, exact arithmetic; max err/bound = {mp.nstr(worst_f, 8)}")

finish("check_layer_perturbation")
