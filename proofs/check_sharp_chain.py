"""Checks for Theorem S (proofs/07-sharp-chain.md): the per-coordinate chain.

The first half verifies the theorem with this script's own formulas (S1–S5 written out below,
a direct simulator of hard and soft heads and FFNs at 50 digits); the second half feeds the
same witnesses and searched instances to the code, exactattn/bounds/chain.py (or the copy at
EXACTATTN_CHAIN_PY, which the mutation rows SC1–SC8 of proofs/mutations.py use), and requires
every bound it returns to hold.

Run: python3 proofs/check_sharp_chain.py   (exit status 0 iff every check passes)
"""

# ruff: noqa: B023  (search closures are called within the loop iteration that defines them)
from __future__ import annotations

import importlib.util
import itertools
import os
import random
import sys
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import mpmath as mp
import sympy as sp
from checklib import TOL, check, finish, is_zero, mpq, ok
from witnesses import MASKS, head_out, mv, relu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from flint import arb, ctx  # noqa: E402

from exactattn.core.numbers import arb_endpoints, to_arb  # noqa: E402

_path = os.environ.get("EXACTATTN_CHAIN_PY")
if _path:
    _spec = importlib.util.spec_from_file_location("exactattn_chain_under_test", _path)
    assert _spec is not None and _spec.loader is not None
    C = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = C  # dataclasses look their module up there
    _spec.loader.exec_module(C)
else:
    from exactattn.bounds import chain as C  # noqa: E402

F = Fraction
ctx.prec = 200

# ---------------------------------------------------------------- the formulas under test
# Each constant of Theorem S appears once below; the checks use these functions.


def b_matrix(hd: dict) -> tuple[list[list[Fraction]], list[Fraction]]:
    """B = QᵀK and w = Kᵀb_q."""
    Q, K = hd["Q"], hd["K"]
    d = len(Q[0])
    B = [
        [sum((Q[a][c] * K[a][c2] for a in range(len(Q))), F(0)) for c2 in range(d)]
        for c in range(d)
    ]
    w = [sum((K[a][c2] * hd["bq"][a] for a in range(len(K))), F(0)) for c2 in range(d)]
    return B, w


def g_matrix(hd: dict) -> list[list[Fraction]]:
    V, O = hd["V"], hd["O"]
    d = len(V[0])
    return [
        [sum((O[r][a] * V[a][c] for a in range(len(V))), F(0)) for c in range(d)]
        for r in range(len(O))
    ]


def sigma_s(hd: dict, lo: list, hi: list, e: list) -> Fraction:
    """S1: σ = Σ_c e_c W_c/2 + Σ_c′ U_c′ e_c′."""
    B, w = b_matrix(hd)
    d = len(lo)
    s = F(0)
    for c in range(d):
        Wc = sum(abs(B[c][c2]) * (hi[c2] - lo[c2]) for c2 in range(d))
        s += e[c] * Wc / 2
    for c2 in range(d):
        L = H = w[c2]
        for c in range(d):
            a, b = B[c][c2] * (lo[c] - e[c]), B[c][c2] * (hi[c] + e[c])
            L += min(a, b)
            H += max(a, b)
        s += max(abs(L), abs(H)) * e[c2]
    return s


def tail_s(a: Fraction, b: Fraction, r: int, m: int, tau: mp.mpf) -> mp.mpf:
    """S2: R ≤ r e^{−a/τ}/(1 − e^{−b/τ}) (b > 0), and ≤ m e^{−a/τ}."""
    first = mp.exp(-mpq(a) / tau)
    best = m * first
    if b > 0:
        best = min(best, r * first / (1 - mp.exp(-mpq(b) / tau)))
    return best


def half_t(sig: Fraction, R: mp.mpf, tau: mp.mpf) -> mp.mpf:
    """S3(a): ½‖p̃ − h‖₁ ≤ min(1, tanh(σ/2τ) + R/(1 + R))."""
    return min(mp.mpf(1), mp.tanh(mpq(sig) / (2 * tau)) + R / (1 + R))


def mass_s(sig: Fraction, R: mp.mpf, tau: mp.mpf) -> mp.mpf:
    """S3(b): soft mass off the argmax set ≤ R_σ/(1 + R_σ), R_σ = e^{2σ/τ} R."""
    Rs = mp.exp(2 * mpq(sig) / tau) * R
    return Rs / (1 + Rs)


def head_bound_s(hd, lo, hi, e, prof, m, tau, top_constant) -> list[mp.mpf]:  # noqa: ANN001
    """S4: per output coordinate r, π_r + f·W^G_r (f = t, or min(t, mass) if top-constant)."""
    G = g_matrix(hd)
    d = len(lo)
    out = []
    flat = prof is None
    sig = sigma_s(hd, lo, hi, e)
    if not flat:
        a, b, r, _ = prof
        R = tail_s(a, b, r, m, tau)
        f = half_t(sig, R, tau)
        if top_constant:
            f = min(f, mass_s(sig, R, tau))
    for row in G:
        pi = sum(abs(row[c]) * e[c] for c in range(d))
        WG = sum(abs(row[c]) * (hi[c] - lo[c]) for c in range(d))
        out.append(mpq(pi) + (0 if flat else f * mpq(WG)))
    return out


# ---------------------------------------------------------------- simulator


def head_errors(hd: dict, X: list, D: list, tau: mp.mpf) -> list[mp.mpf]:
    """max over queries of |soft − hard| per output coordinate (X exact, X̃ = X + D)."""
    Xt = [
        [mpq(a) + mp.mpf(b) for a, b in zip(x, dd, strict=True)] for x, dd in zip(X, D, strict=True)
    ]
    best = None
    for i in range(len(X)):
        h = head_out(hd, X, i, None)
        s = head_out(hd, Xt, i, tau)
        errs = [abs(mpq(a) - b) for a, b in zip(h, s, strict=True)]
        best = errs if best is None else [max(u, v) for u, v in zip(best, errs, strict=True)]
    return best


def profile_of(hd: dict, X: list) -> tuple[Fraction, Fraction, int, bool] | None:
    """A profile that holds for these hard inputs (a = the smallest first drop; the largest
    step b valid with r = 1 or 2), None when no query has a lower key; and unique tops."""
    drops: list[list[Fraction]] = []
    single = True
    for i in range(len(X)):
        vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
        if not vis:
            continue
        q = [
            sum((a * b for a, b in zip(row, X[i], strict=True)), F(0)) + bb
            for row, bb in zip(hd["Q"], hd["bq"], strict=True)
        ]
        s = []
        for j in vis:
            k = [
                sum((a * b for a, b in zip(row, X[j], strict=True)), F(0)) + bb
                for row, bb in zip(hd["K"], hd["bk"], strict=True)
            ]
            s.append(sum((a * b for a, b in zip(q, k, strict=True)), F(0)))
        top = max(s)
        single = single and s.count(top) == 1
        low = sorted(top - x for x in s if x < top)
        if low:
            drops.append(low)
    if not drops:
        return None
    a = min(dd[0] for dd in drops)
    best = (a, F(0), 1)
    for r in (1, 2):
        bs = [(dd[k] - a) / ((k) // r) for dd in drops for k in range(len(dd)) if k // r > 0]
        b = min(bs) if bs else F(0)
        if b > 0:
            best = (a, b, r)
            break
    return (*best, single)


# ---------------------------------------------------------------- code under test


def code_head(hd, lo, hi, e, prof, m, tau) -> list[mp.mpf]:  # noqa: ANN001
    """exactattn/bounds/chain.py's S4 for the same head, per output coordinate (0: unwritten)."""
    ns = SimpleNamespace(
        query=hd["Q"],
        key=hd["K"],
        value=hd["V"],
        output=hd["O"],
        query_bias=hd["bq"],
        hard="average",
    )
    plan = C.HeadPlan.of(0, 0, ns)
    ranges = [C.CoordRange(a, b) for a, b in zip(lo, hi, strict=True)]
    pr = None if prof is None else C.Profile(prof[0], prof[1], prof[2], prof[3])
    if plan.flat:
        pr = None
    ee = [to_arb(x) for x in e]
    out, _ = C.head_bound(plan, ranges, ee, pr, m, to_arb_mp(tau), False)
    res = [mp.mpf(0)] * len(hd["O"])
    for r, v in out.items():
        res[r] = mpq(arb_endpoints(v)[1])
    return res


def to_arb_mp(x: mp.mpf) -> arb:
    """A 50-digit mpf as an exact arb point (the code takes τ as a ball)."""
    m_, e_ = mp.mpf(x).man_exp
    return arb((int(m_), int(e_)))


def code_ffn(Ws, bs, Wo, bo, classes, e) -> list[mp.mpf]:  # noqa: ANN001
    ns = SimpleNamespace(hidden=list(zip(Ws, bs, strict=True)), output=(Wo, bo))
    plan = C.FFNPlan.of(ns)
    cl = [[C.CoordRange(lo, hi, vals) for lo, hi, vals in k] for k in classes]
    out = C.ffn_bound(plan, cl, [to_arb(x) for x in e])
    return [mpq(arb_endpoints(v)[1]) for v in out]


def ffn_true(Ws, bs, Wo, bo, x: list, dx: list) -> list[mp.mpf]:  # noqa: ANN001
    """|x̃′ − x′| per coordinate for x̃ = x + dx, exact on Fractions."""

    def run(v: list) -> list:
        z = v
        for W, b in zip(Ws, bs, strict=True):
            z = [relu(a + c) for a, c in zip(mv(W, z), b, strict=True)]
        return [a + c + b_ for a, c, b_ in zip(v, mv(Wo, z), bo, strict=True)]

    h = run(x)
    s = run([a + b for a, b in zip(x, dx, strict=True)])
    return [mpq(abs(a - b)) for a, b in zip(h, s, strict=True)]


# ---------------------------------------------------------------- symbolic: S1, S2, S5

qs = sp.symbols("q0:4")
ks = sp.symbols("k0:4")
Qs = sp.Matrix(2, 2, qs)
Ks = sp.Matrix(2, 2, ks)
bq = sp.Matrix(sp.symbols("bq0:2"))
bk = sp.Matrix(sp.symbols("bk0:2"))
xi, xj, di, dj = (sp.Matrix(sp.symbols(f"{n}0:2")) for n in ("xi", "xj", "di", "dj"))
score = lambda a, b: ((Qs * a + bq).T * (Ks * b + bk))[0]  # noqa: E731
Bs = Qs.T * Ks
ws = Ks.T * bq
lhs = score(xi + di, xj + dj) - score(xi, xj)
rhs = (di.T * Bs * xj)[0] + ((Bs.T * (xi + di) + ws).T * dj)[0] + ((Qs.T * bk).T * di)[0]
check(is_zero(lhs - rhs), "S1: s̃ − s = δ_iᵀBx_j + (Bᵀx̃_i + w)·δ_j + (Qᵀb_k)·δ_i")
ok("S1 score expansion (symbolic Q, K, b_q, b_k, d = k = 2)")

a_, t_, r_ = sp.symbols("a tau r", positive=True)
qv = sp.symbols("q", positive=True)
rho = sp.symbols("rho", integer=True, nonnegative=True)
geo = sp.summation(r_ * sp.exp(-a_ / t_) * qv**rho, (rho, 0, sp.oo))
geo = geo.replace(lambda x: isinstance(x, sp.Piecewise), lambda x: x.args[0][0])  # q < 1
check(is_zero(sp.simplify(geo - r_ * sp.exp(-a_ / t_) / (1 - qv))), "S2: geometric sum")
# grouping: k = 1, 2, … with ρ = ⌊(k − 1)/r⌋ puts exactly r consecutive k in each group
for rr in (1, 2, 3):
    groups = [(k - 1) // rr for k in range(1, 13)]
    check(all(groups.count(g) == rr for g in set(groups)), f"S2 grouping r={rr}")
ok("S2 Σ_ρ r e^{−a/τ} q^ρ = r e^{−a/τ}/(1 − q)")

x_ = sp.symbols("x", nonnegative=True)
check(sp.simplify(sp.diff(x_ / (1 + x_), x_) - 1 / (1 + x_) ** 2) == 0, "S3: d/dx x/(1+x)")
ok("S3 x/(1 + x) is increasing (derivative 1/(1 + x)²)")

# S5: the ReLU pieces (z, φ real): ReLU(z + φ) − ReLU(z) = θφ with θ ∈ [0, 1]; the pair identity
z_, ph = sp.symbols("z phi", real=True)
relu_s = lambda v: sp.Max(v, 0)  # noqa: E731
pair = (relu_s(z_ + ph) - relu_s(z_)) - (relu_s(-z_ - ph) - relu_s(-z_))
for zv, pv in itertools.product([-2, -1, F(-1, 2), 0, F(1, 3), 1, 3], repeat=2):
    check(pair.subs({z_: zv, ph: pv}) == pv, f"S5 pair identity at z={zv}, φ={pv}")
    dlt = relu_s(z_ + ph).subs({z_: zv, ph: pv}) - relu_s(z_).subs({z_: zv})
    check(abs(dlt - F(pv) / 2) <= abs(F(pv)) / 2, f"S5 ½φ + ξ at z={zv}, φ={pv}")
ok("S5 ReLU(z̃) − ReLU(z) = ½φ + ξ with |ξ| ≤ ½|φ|; ReLU(z) − ReLU(−z) = z (pairs share ξ)")

# ---------------------------------------------------------------- witnesses (theorem and code)


def q_head(g: Fraction, L: int) -> tuple[dict, list]:
    """d = 3 (q, k, v): score g·x_{i,q}·x_{j,k}, value v, mask none, 1 + L positions; the
    top key (position 0) has k = 1, v = 0, the others k = 0, v = 1; q = 1 everywhere."""
    hd = {
        "Q": [[F(1), F(0), F(0)]],
        "K": [[F(0), g, F(0)]],
        "bq": [F(0)],
        "bk": [F(0)],
        "V": [[F(0), F(0), F(1)]],
        "bv": [F(0)],
        "O": [[F(0)], [F(0)], [F(1)]],
        "mask": "none",
        "rule": "average",
    }
    X = [[F(1), F(1), F(0)]] + [[F(1), F(0), F(1)] for _ in range(L)]
    return hd, X


# W1: S3(b) attained: the top's key coordinate down by e, every other key up by e
for g, L, e, tau in [
    (F(1), 3, F(1, 10), mp.mpf("0.2")),
    (F(2), 5, F(1, 20), mp.mpf(1)),
    (F(1, 2), 1, F(1, 8), mp.mpf("0.1")),
]:
    hd, X = q_head(g, L)
    lo, hi = [F(1), F(0), F(0)], [F(1), F(1), F(1)]
    ev = [F(0), e, F(0)]
    D = [[mp.mpf(0), -mpq(e), mp.mpf(0)]] + [[mp.mpf(0), mpq(e), mp.mpf(0)] for _ in range(L)]
    err = head_errors(hd, X, D, tau)[2]
    prof = (g, F(0), 1, True)
    bnd = head_bound_s(hd, lo, hi, ev, prof, L, tau, True)[2]
    check(err <= bnd + TOL, f"W1 S3(b) holds g={g} L={L}")
    check(abs(err / bnd - 1) < mp.mpf(10) ** -30, f"W1 S3(b) attained g={g} L={L}: {err / bnd}")
    cb = code_head(hd, lo, hi, ev, prof, L, tau)[2]
    check(err <= cb + TOL, f"code W1: S4 mass bound {cb} < true {err} (g={g}, L={L})")
ok("W1: the top-set mass bound e^{2σ/τ}R/(1 + e^{2σ/τ}R) is attained (ratio 1)")

# W2: the query-side half width: x_{i,q} = −1 at the query, keys k ∈ {0 (top), 1}, δ_q = +e
for e, tau in [(F(1, 10), mp.mpf("0.3")), (F(1, 4), mp.mpf(1))]:
    hd, _ = q_head(F(1), 2)
    X = [[F(-1), F(0), F(0)], [F(-1), F(1), F(1)], [F(-1), F(1), F(1)]]
    lo, hi = [F(-1), F(0), F(0)], [F(-1), F(1), F(1)]
    ev = [e, F(0), F(0)]
    D = [[mpq(e), mp.mpf(0), mp.mpf(0)] for _ in range(3)]
    err = head_errors(hd, X, D, tau)[2]
    prof = (F(1), F(0), 1, True)
    bnd = head_bound_s(hd, lo, hi, ev, prof, 2, tau, True)[2]
    check(err <= bnd + TOL and abs(err / bnd - 1) < mp.mpf(10) ** -30, f"W2 attained: {err / bnd}")
    cb = code_head(hd, lo, hi, ev, prof, 2, tau)[2]
    check(err <= cb + TOL, f"code W2: query-side term too small ({cb} < {err})")
ok("W2: the query-side term e_c·W_c/2 is attained")

# W3: a tie at the top with different values (not top-constant): Theorem 2's tight case
for sig, tau in [(F(1, 1000), mp.mpf(1)), (F(1, 100), mp.mpf("0.5"))]:
    hd = {
        "Q": [[F(1), F(0)]],
        "K": [[F(0), F(1)]],
        "bq": [F(0)],
        "bk": [F(0)],
        "V": [[F(1), F(0)]],
        "bv": [F(0)],
        "O": [[F(0)], [F(1)]],
        "mask": "none",
        "rule": "average",
    }
    # coordinate 0: query 1 / value (keys 0 and 1); coordinate 1: key form 0 at both keys
    X = [[F(1), F(0)], [F(0), F(0)]]
    lo, hi = [F(0), F(0)], [F(1), F(0)]
    ev = [F(0), sig]
    D = [[mp.mpf(0), mpq(sig)], [mp.mpf(0), -mpq(sig)]]
    err = head_errors(hd, X, D, tau)[1]
    far = (F(100), F(0), 1, False)  # no key is below the top: any profile holds
    bnd = head_bound_s(hd, lo, hi, ev, far, 1, tau, False)[1]
    check(err <= bnd + TOL, f"W3 holds σ={sig}")
    check(err / bnd > mp.mpf("0.99"), f"W3 nearly attained σ={sig}: {err / bnd}")
    cb = code_head(hd, lo, hi, ev, far, 1, tau)[1]
    check(err <= cb + TOL, f"code W3: tanh term too small ({cb} < {err})")
ok("W3: the tanh(σ/2τ) term is attained as σ → 0 (a tie with different values)")

# W3b: a constant query, a tie at the top with different values: not top-constant (T2 needs
# every row of G to be a multiple of the key form u)
for sig, tau in [(F(1, 1000), mp.mpf(1))]:
    hd = {
        "Q": [[F(1), F(0), F(0)]],
        "K": [[F(0), F(1), F(0)]],
        "bq": [F(0)],
        "bk": [F(0)],
        "V": [[F(0), F(0), F(1)]],
        "bv": [F(0)],
        "O": [[F(0)], [F(0)], [F(1)]],
        "mask": "none",
        "rule": "average",
    }
    X = [[F(1), F(0), F(1)], [F(1), F(0), F(0)]]
    lo, hi = [F(1), F(0), F(0)], [F(1), F(0), F(1)]
    ev = [F(0), sig, F(0)]
    D = [[mp.mpf(0), mpq(sig), mp.mpf(0)], [mp.mpf(0), -mpq(sig), mp.mpf(0)]]
    err = head_errors(hd, X, D, tau)[2]
    far = (F(100), F(0), 1, False)
    cb = code_head(hd, lo, hi, ev, far, 1, tau)[2]
    check(
        err <= cb + TOL, f"code W3b: a tie with different values is not top-constant ({cb} < {err})"
    )
ok("W3b: T2 needs the value to be a function of the score")

# W10: per_rank r = 2 with equality, many keys: R → 2e^{−a/τ}/(1 − q)
for a, b, L, tau in [(F(1), F(1, 2), 40, mp.mpf(1)), (F(1, 2), F(1, 4), 60, mp.mpf("0.5"))]:
    # score = −drop via a key coordinate holding −drop_j; drops a, a, a + b, a + b, …
    drops = [F(0)] + [a + b * (k // 2) for k in range(L)]
    hd, _ = q_head(F(1), L)
    X = [[F(1), -dd, F(0) if k == 0 else F(1)] for k, dd in enumerate(drops)]
    lo, hi = [F(1), -drops[-1], F(0)], [F(1), F(0), F(1)]
    ev = [F(0)] * 3
    D = [[mp.mpf(0)] * 3 for _ in drops]
    err = head_errors(hd, X, D, tau)[2]
    prof = (a, b, 2, True)
    bnd = head_bound_s(hd, lo, hi, ev, prof, L, tau, True)[2]
    check(
        err <= bnd + TOL and err / bnd > mp.mpf("0.99"), f"W10 r = 2 nearly attained: {err / bnd}"
    )
    cb = code_head(hd, lo, hi, ev, prof, L, tau)[2]
    check(err <= cb + TOL, f"code W10: tail with per_rank 2 too small ({cb} < {err})")
ok("W10: the profile tail r·e^{−a/τ}/(1 − e^{−b/τ}) is attained in the limit (r = 2)")

# W13: value error π_r through a flat head (all values up by e)
hd = {
    "Q": [[F(0), F(0)]],
    "K": [[F(0), F(0)]],
    "bq": [F(0)],
    "bk": [F(0)],
    "V": [[F(2), F(-1)]],
    "bv": [F(0)],
    "O": [[F(1)], [F(0)]],
    "mask": "leq",
    "rule": "average",
}
X = [[F(0), F(1)], [F(1), F(0)], [F(1, 2), F(1, 2)]]
e = [F(1, 10), F(1, 5)]
D = [[mpq(e[0]), -mpq(e[1])] for _ in X]
err = head_errors(hd, X, D, mp.mpf(1))[0]
bnd = head_bound_s(hd, [F(0), F(0)], [F(1), F(1)], e, None, 2, mp.mpf(1), False)[0]
check(abs(err - bnd) < TOL, f"W13 π_r attained: {err} vs {bnd}")
cb = code_head(hd, [F(0), F(0)], [F(1), F(1)], e, None, 2, mp.mpf(1))[0]
check(err <= cb + TOL, f"code W13: value error too small ({cb} < {err})")
ok("W13: the value error Σ_c |G_rc| e_c is attained (flat head)")


# ---------------------------------------------------------------- FFN witnesses (S5)


def one_class(lo_hi_vals: list) -> list:
    return [lo_hi_vals]


e = F(1, 10)
# W4: unit just below the kink (off-test needs sup I + E ≤ 0): x' = x + ReLU(x)
Ws, bs, Wo, bo = [[[F(1)]]], [[F(0)]], [[F(1)]], [F(0)]
x0 = -e / 2
t = ffn_true(Ws, bs, Wo, bo, [x0], [e])[0]
cb = code_ffn(Ws, bs, Wo, bo, one_class([(x0, x0, None)]), [e])[0]
check(t <= cb + TOL, f"code W4: off-test ({cb} < {t})")
# W5: unit just above the kink, x' = x − ReLU(x) (lin-test needs inf I − E ≥ 0)
Wo5 = [[F(-1)]]
x0 = e / 2
t = ffn_true(Ws, bs, Wo5, bo, [x0], [-e])[0]
cb = code_ffn(Ws, bs, Wo5, bo, one_class([(x0, x0, None)]), [e])[0]
check(t <= cb + TOL and abs(t - e / 2) < TOL, f"code W5: lin-test ({cb} < {t})")
# W6: a sign pair at the kink: x' = x − ReLU(x) + ReLU(−x) ≡ 0, error 0
Ws6, bs6, Wo6 = [[[F(1)], [F(-1)]]], [[F(0), F(0)]], [[F(-1), F(1)]]
for x0 in (F(0), F(1, 20), F(-1, 30)):
    cb = code_ffn(Ws6, bs6, Wo6, bo, one_class([(x0, x0, None)]), [e])[0]
    check(cb == 0, f"code W6: a sign pair cancels exactly (x = {x0}: bound {cb})")
# W7: not a pair (the biases are not negated): x' = x − ReLU(x + 1) + ReLU(1 − x), x ∈ [−1, 1]
Ws7, bs7 = [[[F(1)], [F(-1)]]], [[F(1), F(1)]]
t = ffn_true(Ws7, bs7, Wo6, bo, [F(-1)], [e])[0]
cb = code_ffn(Ws7, bs7, Wo6, bo, one_class([(F(-1), F(1), None)]), [e])[0]
check(t <= cb + TOL and abs(t - e) < TOL, f"code W7: a false pair ({cb} < {t})")
# W8: level 2 with a negative bias is not 'linear by nonnegativity': x' = x − ReLU(ReLU(x) − 1)
Ws8, bs8, Wo8 = [[[F(1)]], [[F(1)]]], [[F(0)], [F(-1)]], [[F(-1)]]
t = ffn_true(Ws8, bs8, Wo8, bo, [F(1)], [-e])[0]
cb = code_ffn(Ws8, bs8, Wo8, bo, one_class([(F(1), F(1), None)]), [e])[0]
check(t <= cb + TOL and abs(t - e) < TOL, f"code W8: nonnegativity rule ({cb} < {t})")
# W9: Theorem 6(ii)'s rounding layer on a Boolean, split: error 0 (and without the split > 0)
Ws9 = [[[F(2)], [F(2)], [F(1)], [F(-1)]]]
bs9 = [[F(-1, 2), F(-3, 2), F(0), F(0)]]
Wo9 = [[F(1), F(-1), F(-1), F(1)]]
for x0 in (F(0), F(1)):
    for dx in (e, -e, F(1, 5), -F(1, 5)):
        t = ffn_true(Ws9, bs9, Wo9, bo, [x0], [dx])[0]
        check(t == 0, f"W9 rounding exact at x={x0}, δ={dx}: {t}")
cb = code_ffn(Ws9, bs9, Wo9, bo, one_class([(F(0), F(1), (F(0), F(1)))]), [F(1, 5)])[0]
check(cb == 0, f"code W9: the split rounding layer restores exactly (bound {cb})")
cb = code_ffn(Ws9, bs9, Wo9, bo, one_class([(F(0), F(1), None)]), [F(1, 5)])[0]
check(cb > 0, "code W9: without the split the interval bound is > 0")
ok("S5 witnesses: off/lin tests at the kink, sign pairs, false pairs, nonnegativity, rounding")


# ---------------------------------------------------------------- adversarial search

SMALLQ = [F(v) for v in (-2, -1, 0, 0, 1, 1, 2)] + [F(1, 2), F(-1, 3)]


def random_head(rng: random.Random) -> tuple[dict, list, list, list]:
    d = rng.randint(2, 4)
    T = rng.randint(2, 5)
    k = rng.randint(1, 2)

    def rm(r: int, c: int, dens: float = 0.6) -> list:
        return [
            [rng.choice(SMALLQ) if rng.random() < dens else F(0) for _ in range(c)]
            for _ in range(r)
        ]

    e_out = rng.randint(1, d)
    hd = {
        "Q": rm(k, d),
        "K": rm(k, d),
        "bq": [rng.choice(SMALLQ) if rng.random() < 0.3 else F(0) for _ in range(k)],
        "bk": [rng.choice(SMALLQ) if rng.random() < 0.3 else F(0) for _ in range(k)],
        "V": rm(e_out, d),
        "bv": [rng.choice(SMALLQ) for _ in range(e_out)],
        "O": rm(d, e_out),
        "mask": rng.choice(list(MASKS)),
        "rule": "average",
    }
    lo, hi = [], []
    for _ in range(d):
        a = rng.choice([F(-2), F(-1), F(0), F(0), F(1, 2)])
        w = rng.choice([F(0), F(1), F(2), F(1, 2)])
        lo.append(a)
        hi.append(a + w)
    X = []
    for _ in range(T):
        X.append(
            [
                rng.choice([lo[c], hi[c], lo[c] + (hi[c] - lo[c]) / 2, lo[c] + (hi[c] - lo[c]) / 3])
                for c in range(d)
            ]
        )
    return hd, X, lo, hi


def top_constant(hd: dict, X: list) -> bool:
    """Hard values equal on every argmax set (measured on this input: what T1/T2 guarantee)."""
    for i in range(len(X)):
        vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
        if not vis:
            continue
        q = [
            sum((a * b for a, b in zip(row, X[i], strict=True)), F(0)) + bb
            for row, bb in zip(hd["Q"], hd["bq"], strict=True)
        ]
        sc = {}
        for j in vis:
            kk = [
                sum((a * b for a, b in zip(row, X[j], strict=True)), F(0)) + bb
                for row, bb in zip(hd["K"], hd["bk"], strict=True)
            ]
            sc[j] = sum((a * b for a, b in zip(q, kk, strict=True)), F(0))
        top = max(sc.values())
        vals = {tuple(mv(hd["V"], X[j])) for j in vis if sc[j] == top}
        if len(vals) > 1:
            return False
    return True


rng = random.Random(35)
worst_s, worst_c = mp.mpf(0), mp.mpf(0)
N_SEARCH = int(os.environ.get("SHARP_SEARCH", "60"))
for trial in range(N_SEARCH):
    hd, X, lo, hi = random_head(rng)
    prof = profile_of(hd, X)
    d = len(lo)
    e = [rng.choice([F(0), F(1, 100), F(1, 10), F(1, 3)]) for _ in range(d)]
    tau = mp.mpf(rng.choice(["0.05", "0.2", "1", "3"]))
    m = len(X) - 1
    tc = top_constant(hd, X) and prof is not None and prof[3]
    Bm, w = b_matrix(hd)
    flat = all(v == 0 for row in Bm for v in row) and all(v == 0 for v in w)
    if prof is None and not flat:
        prof = (F(1), F(0), 1, False)  # no lower key anywhere: any profile holds
    use = None if flat else prof
    bnd = head_bound_s(hd, lo, hi, e, use, m, tau, tc)
    cbn = code_head(hd, lo, hi, e, use, m, tau)
    # hill climb on the sign pattern of the perturbation (extremes ±e)
    signs = [[rng.choice([-1, 1, 0]) for _ in range(d)] for _ in X]

    def ratio(sg: list) -> tuple[mp.mpf, mp.mpf]:
        D = [[sg[p][c] * mpq(e[c]) for c in range(d)] for p in range(len(X))]
        errs = head_errors(hd, X, D, tau)
        rs = max(
            (er / b if b > 0 else (mp.inf if er > TOL else 0))
            for er, b in zip(errs, bnd, strict=True)
        )
        rc = max(
            (er / b if b > 0 else (mp.inf if er > TOL else 0))
            for er, b in zip(errs, cbn, strict=True)
        )
        return rs, rc

    best = ratio(signs)
    for _ in range(12):
        p, c = rng.randrange(len(X)), rng.randrange(d)
        old = signs[p][c]
        signs[p][c] = rng.choice([-1, 1, 0])
        r2 = ratio(signs)
        if r2[0] >= best[0]:
            best = r2
        else:
            signs[p][c] = old
    worst_s = max(worst_s, best[0])
    worst_c = max(worst_c, best[1])
    check(best[0] <= 1 + TOL, f"S4 search trial {trial}: error/bound {best[0]}")
    check(best[1] <= 1 + TOL, f"code S4 search trial {trial}: error/bound {best[1]}")
ok(
    f"S4 adversarial search, {N_SEARCH} random heads: max error/bound "
    f"{mp.nstr(worst_s, 4)} (theorem), {mp.nstr(worst_c, 4)} (code)"
)


def random_ffn_case(rng: random.Random) -> tuple:
    d = rng.randint(1, 3)
    widths = [d] + [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]

    def rm(r: int, c: int, dens: float = 0.7) -> list:
        return [
            [rng.choice(SMALLQ) if rng.random() < dens else F(0) for _ in range(c)]
            for _ in range(r)
        ]

    Ws = [rm(widths[k + 1], widths[k]) for k in range(len(widths) - 1)]
    bs = [
        [rng.choice(SMALLQ + [F(-1, 2), F(-3, 2)]) for _ in range(widths[k + 1])]
        for k in range(len(widths) - 1)
    ]
    if rng.random() < 0.5 and len(Ws[0]) >= 2:  # a sign pair in level 1
        Ws[0][1] = [-v for v in Ws[0][0]]
        bs[0][1] = -bs[0][0]
    Wo, bo = rm(d, widths[-1]), [rng.choice(SMALLQ) for _ in range(d)]
    return d, Ws, bs, Wo, bo


worst = mp.mpf(0)
for trial in range(N_SEARCH):
    d, Ws, bs, Wo, bo = random_ffn_case(rng)
    boolean = [rng.random() < 0.5 for _ in range(d)]
    lo = [F(0) if b else rng.choice([F(-1), F(0)]) for b in boolean]
    hi = [F(1) if b else lo[c] + rng.choice([F(0), F(1), F(2)]) for c, b in enumerate(boolean)]
    vals = [(F(0), F(1)) if b else None for b in boolean]
    e = [rng.choice([F(0), F(1, 20), F(1, 5), F(1)]) for _ in range(d)]
    bound = code_ffn(Ws, bs, Wo, bo, [list(zip(lo, hi, vals, strict=True))], e)
    for _ in range(25):
        x = [
            rng.choice([lo[c], hi[c]])
            if boolean[c]
            else rng.choice([lo[c], hi[c], (lo[c] + hi[c]) / 2])
            for c in range(d)
        ]
        dx = [rng.choice([-1, 1, 0, F(1, 2)]) * e[c] for c in range(d)]
        t = ffn_true(Ws, bs, Wo, bo, x, dx)
        for r in range(d):
            if bound[r] > 0:
                worst = max(worst, t[r] / bound[r])
            check(
                t[r] <= bound[r] + TOL,
                f"code S5 search trial {trial}: coordinate {r} error {t[r]} > bound {bound[r]}",
            )
ok(
    f"S5 adversarial search, {N_SEARCH} random FFNs × 25 points: "
    f"max error/bound {mp.nstr(worst, 4)}"
)

finish("check_sharp_chain")
