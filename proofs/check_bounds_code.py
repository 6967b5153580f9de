"""The code's bound formulas (exactattn/bounds/__init__.py) against the truth on the extremal
witnesses.

The other check_*.py scripts verify the *theorems* with their own copies of the formulas; this
one feeds the witnesses of proofs/witnesses.py (whose true errors are computed by a direct
simulator or a closed form cross-checked against it) to the functions the engine uses, so a
wrong constant in exactattn/bounds/__init__.py fails here. EXACTATTN_BOUNDS_PY=<path> loads a
copy of bounds/__init__.py instead (the mutation tests in
tests/repo/test_proofs_machine_checks.py do that).

Run: python3 proofs/check_bounds_code.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from fractions import Fraction
from pathlib import Path

import mpmath as mp
from arb_witnesses import c3_witness, q2a, theorem_B, two_heads_witness, v0_witness
from arb_witnesses import layer_error as arb_layer_error
from checklib import TOL, check, finish, mpq, ok
from witnesses import (
    ffn,
    gain_witness,
    large_x_witness_error,
    layer_error,
    layer_out,
    tied_witness,
    tied_witness_error,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from exactattn.core.numbers import arb_endpoints  # noqa: E402

_path = os.environ.get("EXACTATTN_BOUNDS_PY")
if _path:
    _spec = importlib.util.spec_from_file_location("exactattn_bounds_under_test", _path)
    assert _spec is not None and _spec.loader is not None
    B = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = B  # dataclasses look their module up there
    _spec.loader.exec_module(B)
else:
    from exactattn import bounds as B  # noqa: E402

F = Fraction


def up(ball: object) -> mp.mpf:
    """Upper end of an arb ball as a 50-digit number (exact dyadic → mpf)."""
    return mpq(arb_endpoints(ball)[1])


def head_consts(hd: dict) -> object:
    return B.attention_head_constants(
        hd["Q"], hd["bq"], hd["K"], hd["bk"], hd["V"], hd["bv"], hd["O"], rule=hd["rule"]
    )


# ---------------------------------------------------------------- Theorem 3(b), (a), (a′) on γ = ∞
# error exactly 2ε + tanh(ε(βε + β_q)/τ), x_in = 1, no lower score (gap None, m = 0)
worst = mp.mpf(0)
for bv, bqv in [(F(1, 1000), F(0)), (F(1, 10), F(0)), (F(0), F(1)), (F(1, 50), F(1, 3))]:
    heads, X, _ = tied_witness(bv, bqv)
    c = B.attention_layer_constants([head_consts(h) for h in heads])
    for ev, tv in itertools.product(
        (F(1, 100), F(1, 2), F(1), F(3), F(30), F(1000)), (F(1, 10), F(1), F(2), F(50))
    ):
        err = tied_witness_error(mpq(bv), mpq(bqv), mpq(ev), mpq(tv))
        b = up(B.attention_layer_bound(c, F(1), ev, tv, [None], [0], [True]))
        check(err <= b + TOL, f"attention_layer_bound: β={bv} β_q={bqv} ε={ev} τ={tv}: {err} > {b}")
        worst = max(worst, err / b)
        if tv <= 1:
            k1 = B.paper_K_unconditional(c)
            a1 = up(B.paper_layer_bound(k1, F(1), ev, tv, None, 0, unconditional=True))
            check(err <= a1 + TOL, f"paper_K_unconditional/paper_layer_bound β={bv} ε={ev} τ={tv}")
            if ev <= 1:
                a0 = up(B.paper_layer_bound(B.paper_K(c), F(1), ev, tv, None, 0))
                check(err <= a0 + TOL, f"paper_K/paper_layer_bound β={bv} ε={ev} τ={tv}")
check(worst >= mp.mpf("0.999"), f"attention_layer_bound nearly attained on γ = ∞: {worst}")
ok(f"attention_layer_bound / paper_K(') on the γ = ∞ witness: max err/bound = {mp.nstr(worst, 8)}")

# ---------------------------------------------------------------- large x_in, gain > 1, t_h > 1
hdx = {
    "Q": [[F(1), F(0)]], "K": [[F(0), F(1)]], "bq": [F(0)], "bk": [F(0)],
    "V": [[F(1), F(0)]], "bv": [F(0)], "O": [[F(1)], [F(0)]], "mask": "none", "rule": "average",
}  # fmt: skip
for cv in (F(10), F(3)):
    c = B.attention_layer_constants([head_consts(hdx)])
    for ev, tv in ((F(1, 1000), F(1)), (F(1, 10), F(1, 2)), (F(1), F(1))):
        err = large_x_witness_error(mp.mpf(1), mpq(cv), mpq(ev), mpq(tv))
        b = up(B.attention_layer_bound(c, cv, ev, tv, [None], [0]))
        check(err <= b + TOL, f"attention_layer_bound, large x_in = {cv}, ε = {ev}")
        a = up(B.paper_layer_bound(B.paper_K(c), cv, ev, tv, None, 0))
        check(err <= a + TOL, f"paper_layer_bound, large x_in = {cv}, ε = {ev}: {err} > {a}")
for bv, gv, m, taus in ((F(1, 10), F(2), 1, (F(1, 100), F(1, 20))), (F(1), F(1), 4, (F(50),))):
    heads, X = gain_witness(bv, gv, m)
    c = B.attention_layer_constants([head_consts(h) for h in heads])
    for tv in taus:
        q = mp.exp(-2 * mpq(bv) / mpq(tv))
        err = mpq(gv) * 2 * m * q / (1 + m * q)
        b = up(B.attention_layer_bound(c, F(1), 0, tv, [2 * bv], [m]))
        check(err <= b + TOL and b - err <= mp.mpf(10) ** -12 * (1 + err), f"gain witness τ={tv}")
        if tv <= 1:
            a = up(B.paper_layer_bound(B.paper_K(c), F(1), 0, tv, 2 * bv, m))
            check(err <= a + TOL, f"paper_K/paper_layer_bound on the gain witness τ={tv}")
ok("large-x_in and gain witnesses: attention_layer_bound, paper_K, paper_layer_bound hold")

# ---------------------------------------------------------------- (b) and Theorem 1 at ε = 0
one = [[F(1)]]
hd0 = {
    "Q": one, "K": one, "bq": [F(0)], "bk": [F(0)], "V": one, "bv": [F(0)], "O": one,
    "mask": "none", "rule": "average",
}  # fmt: skip
c0 = B.attention_layer_constants([head_consts(hd0)])
X0 = [[F(1)], [F(-1)]]
for tv in (F(1), F(1, 4), F(3)):
    err = layer_error([hd0], X0, [[mp.mpf(1)], [mp.mpf(-1)]], mpq(tv))
    b = up(B.attention_layer_bound(c0, F(1), 0, tv, [F(2)], [1]))
    check(err <= b + TOL and b - err <= mp.mpf(10) ** -12, f"(b) attained at ε = 0, τ = {tv}")
    # the paper shape (a): K x (m e^{−γ/τ} + 0), true error 2R/(1+R)
    if tv <= 1:
        a = up(B.paper_layer_bound(B.paper_K(c0), F(1), 0, tv, F(2), 1))
        check(err <= a + TOL, f"paper_layer_bound at ε = 0, τ = {tv}")
# Theorem 1: m keys exactly γ below one maximum: ‖softmax − ahardmax‖₁ = 2mq/(1 + mq)
for m, g, tv in ((1, F(1), F(1)), (4, F(1), F(1, 2)), (50, F(1, 3), F(2))):
    s = [mp.mpf(0)] + [-mpq(g)] * m
    t_ = mpq(tv)
    z = mp.fsum(mp.exp(x / t_) for x in s)
    dist = 2 * (1 - 1 / z)
    b = up(B.softmax_hardmax_l1(m, g, tv))
    check(dist <= b + TOL and b - dist <= mp.mpf(10) ** -12, f"softmax_hardmax_l1 tight m={m}")
ok("attention_layer_bound attained at ε = 0; softmax_hardmax_l1 attained (Theorem 1(iii))")

# ---------------------------------------------------------------- FFN (d) and Lemma G
for Ws, bs, Wo, bo, x0 in (
    ([[[F(1)]]], [[F(0)]], [[F(1)]], [F(0)], F(2)),
    (
        [[[F(2)]], [[F(3)], [F(1)]], [[F(1), F(1)]]],
        [[F(1)], [F(0), F(0)], [F(0)]],
        [[F(2)]],
        [F(1)],
        F(1),
    ),
):  # fmt: skip
    c = B.ffn_constants(list(zip(Ws, bs, strict=True)), (Wo, bo))
    for ev in (F(1, 10), F(7)):
        err = abs(ffn([x0 + ev], Ws, bs, Wo, bo)[0] - ffn([x0], Ws, bs, Wo, bo)[0])
        b = up(B.ffn_layer_bound(c, ev))
        check(mpq(err) <= b + TOL and b - mpq(err) <= mp.mpf(10) ** -12, f"ffn_layer_bound ε={ev}")
    al, cc = c.growth
    check(ffn([x0], Ws, bs, Wo, bo)[0] <= al * x0 + cc, "FFN growth bound")
    check(ffn([x0], Ws, bs, Wo, bo)[0] == al * x0 + cc, "FFN growth attained (positive chain)")
hdg = dict(hd0, Q=[[F(0)]], V=[[F(2)]], bv=[F(3)])
al, cc = B.attention_layer_constants([head_consts(hdg)]).growth
out = layer_out([hdg], [[F(4)], [F(4)]], 0, None)[0]
check(out <= al * 4 + cc and out == al * 4 + cc, "attention growth attained")
ok("ffn_layer_bound and LayerConstants.growth attained on sign-aligned witnesses")

# ---------------------------------------------------------------- Theorems 4(ii), 5: τ_thm
mp.mp.dps = 60


def B_L(L: int, K: mp.mpf, X: mp.mpf, m: int, g: mp.mpf, t: mp.mpf) -> mp.mpf:
    a, b = K * X**2 / t, K * X * m * mp.exp(-g / t)
    acc = mp.mpf(0)
    for _ in range(L):
        acc = a * acc + b
    return acc


worst_t = mp.mpf(0)
n = 0
for L, K, X, m, g, es in itertools.product(
    (1, 2, 3, 8, 10, 12), (F(1), F(3), F(100)), (F(1, 10), F(1), F(10), F(10**4)),
    (1, 10, 10**6),
    (F(1), F(1, 100), F(1, 10**9)), (F(1), F(1, 1000)),
):  # fmt: skip
    t = B.tau_theorem(L, K, X, g, m, es)
    hi = mpq(arb_endpoints(t)[0])  # the ball's lower end: the certified temperature
    for shrink in (1, 3):
        val = B_L(L, mpq(K), mpq(max(X, F(1))), m, mpq(g), hi / shrink)
        check(
            val <= mpq(es) * (1 + mp.mpf(10) ** -40), f"B_L(τ_thm) <= ε* at {(L, K, X, m, g, es)}"
        )
        n += 1
    worst_t = max(worst_t, B_L(L, mpq(K), mpq(max(X, F(1))), m, mpq(g), hi) / mpq(es))
    # theorem_bound is B_L (an upper bound on it, certified)
    tb = B.theorem_bound(L, K, X, g, m, F(1, 2), unconditional=True)
    if tb is not None:
        check(
            up(tb) >= B_L(L, mpq(K), mpq(max(X, F(1))), m, mpq(g), mp.mpf(1) / 2) * (1 - TOL),
            f"theorem_bound >= B_L at L={L} X={X}",
        )
# L = 1: B_1(τ_thm) = K X m e^{−Λ} = ε* exactly, so the ratio must reach 1
check(worst_t >= mp.mpf("0.999"), f"τ_thm attained at L = 1: max B_L(τ_thm)/ε* = {worst_t}")
ok(f"tau_theorem: B_L(τ) <= ε* at τ_thm and τ_thm/3 on {n} points; max ratio {mp.nstr(worst_t, 6)}")

# ---------------------------------------------------------------- issue 24: certified witnesses
# Errors are arb balls (proofs/arb_witnesses.py); "err <= bound" must be *certified* (an
# undecided comparison fails the check). Each witness kills a formula the suite used to miss.


def certified_le(err: object, bound: object) -> bool:
    """err <= bound for every point of the ball err (bound: an exact upper end)."""
    return bound is not None and bool(err <= bound)


def short(x: object) -> str:
    """A ball, an mpf or None as 6 significant digits (for FAIL lines)."""
    if x is None:
        return "None"
    return mp.nstr(x if isinstance(x, mp.mpf) else mpq(arb_endpoints(x)[1]), 6)


def heads_consts(heads: list[dict]) -> object:
    return B.attention_layer_constants([head_consts(h) for h in heads])


# multi-head layers: h identical heads add their errors, so the bound must sum over heads
for h, tv in ((2, F(1)), (2, F(1, 2)), (2, F(2)), (3, F(1))):
    heads, X, Xt = two_heads_witness(h)
    c = heads_consts(heads)
    err = arb_layer_error(heads, X, Xt, tv)
    b = B.attention_layer_bound(c, F(1), 0, tv, [F(2)] * h, [1] * h)
    check(
        certified_le(err, b) and up(b) - up(err) <= mp.mpf(10) ** -12,
        f"attention_layer_bound on {h} identical heads τ={tv}: {short(err)} vs {short(b)}",
    )
    if tv <= 1:
        a = B.paper_layer_bound(B.paper_K(c), F(1), 0, tv, F(2), 1)
        check(certified_le(err, a), f"paper_K/paper_layer_bound on {h} identical heads τ={tv}")
ok("multi-head witnesses (h identical heads, d = 1, inputs ±1): Σ over heads, attained")

# the C3 model: σ needs 2·x_in (error 1.5085 > 1.1725, the bound with x_in)
heads, X, Xt = c3_witness(F(1, 10))
c = heads_consts(heads)
for tv in (F(1), F(1, 2)):
    err = arb_layer_error(heads, X, Xt, tv)
    b = B.attention_layer_bound(c, F(1), F(1, 10), tv, [F(2)], [1])
    check(
        certified_le(err, b),
        f"attention_layer_bound, C3 model ε=1/10 τ={tv}: {short(err)} > {short(b)}",
    )
    a = B.paper_layer_bound(B.paper_K(c), F(1), F(1, 10), tv, F(2), 1)
    check(certified_le(err, a), f"paper_layer_bound on the C3 model τ={tv}: {short(a)}")
ok("C3 model (score diag(3, −4), inputs ±(1, 1), perturbation ±(ε, −ε)): bounds hold")

# a V = 0 layer with x_max = 1/10 < 1: error = ε (the residual); X = max(1, x_max) is needed
heads, X, Xt = v0_witness(F(1, 10), F(1, 2))
c = heads_consts(heads)
err = arb_layer_error(heads, X, Xt, F(1))
b = B.attention_layer_bound(c, F(1, 10), F(1, 2), F(1), [F(1, 50)], [1])
check(certified_le(err, b), f"attention_layer_bound, V = 0 layer x_in=1/10 ε=1/2: {short(b)}")
a = B.paper_layer_bound(B.paper_K(c), F(1, 10), F(1, 2), F(1), F(1, 50), 1)
check(certified_le(err, a), f"paper_layer_bound, V = 0 layer x_max=1/10 ε=1/2: 0.5 > {short(a)}")
a1 = B.paper_layer_bound(B.paper_K_unconditional(c), F(1, 10), F(1, 2), F(1), F(1, 50), 1, True)
check(certified_le(err, a1), "paper_layer_bound (unconditional) on the V = 0 layer")
ok("V = 0 layer with x_max = 1/10: paper_layer_bound >= ε (max(1, x_max))")

# τ_thm at depth 10 and 12, certified: B_L(τ) <= ε* at the ball's lower end (X² in Λ matters)
for L, X in ((10, F(10**4)), (12, F(10**4)), (12, F(1, 10)), (10, F(7))):
    t = B.tau_theorem(L, F(1), X, F(1), 1, F(1))
    lo = arb_endpoints(t)[0]
    val = theorem_B(L, F(1), max(X, F(1)), 1, F(1), q2a(lo))
    check(bool(val <= 1), f"B_L(τ_thm) <= ε* at L={L} K=1 X={X} m=1 γ=1 ε*=1: {short(val)}")
ok("tau_theorem at depths 10 and 12 (X = 10^4, 7, 1/10): B_L(τ_thm) <= ε* certified")

# the invariant guard: theorem_bound (K, not K′) exists iff B_{L−1} <= 1 (certified)
n_guard = n_edge = 0
for L, g, tv, K, X, m in itertools.product(
    range(2, 13), (F(1, 2), F(1), F(2), F(5)), (F(1), F(1, 2)), (F(1), F(2)), (F(1), F(2)), (1, 3)
):
    tb = B.theorem_bound(L, K, X, g, m, tv)
    prev = theorem_B(L - 1, K, X, m, g, q2a(tv))
    prev2 = theorem_B(L - 2, K, X, m, g, q2a(tv))
    if prev > 1:
        check(tb is None, f"theorem_bound needs B_(L-1) <= 1: L={L} γ={g} τ={tv} K={K} X={X} m={m}")
        n_edge += bool(prev2 <= 1)
    elif prev <= 1:
        check(tb is not None, f"theorem_bound exists when B_(L-1) <= 1: L={L} γ={g} τ={tv}")
        if tb is not None:
            check(
                certified_le(theorem_B(L, K, X, m, g, q2a(tv)), tb), f"theorem_bound = B_L, L={L}"
            )
    n_guard += 1
check(n_edge >= 10, f"guard grid has instances with B_(L-2) <= 1 < B_(L-1): {n_edge}")
ok(f"theorem_bound's invariant guard B_(L-1) <= 1 on {n_guard} points ({n_edge} edge cases)")

# ---------------------------------------------------------------- adversarial search (the code)
# Random small layers (proofs/witnesses.random_layer: every mask, biases, output maps, unique
# leftmost/rightmost heads); a seeded float hill-climb over the perturbation, ε and τ for the
# largest error / attention_layer_bound (the code's formula, the one check --bounds uses);
# each search's best instance is re-evaluated with certified arb (floats only steer).
import os  # noqa: E402
import random  # noqa: E402

from witnesses import FloatLayer, head_stats, hill_climb, random_layer  # noqa: E402

N_LAYERS = int(os.environ.get("PROOFS_CODE_SEARCH_LAYERS", "60"))
rng = random.Random(24)
best_ratio, searched = mp.mpf(0), 0
while searched < N_LAYERS:
    heads, X = random_layer(rng)
    stats = [head_stats(hd, X) for hd in heads]
    if any(hd["rule"] != "average" and not st[2] for hd, st in zip(heads, stats, strict=True)):
        continue
    searched += 1
    c = heads_consts(heads)
    x_in = max(abs(v) for row in X for v in row)
    gaps, nonmax = [st[0] for st in stats], [st[1] for st in stats]
    single = [st[2] for st in stats]

    args = (c, x_in, gaps, nonmax, single)

    def code_bound(e: float, t: float, a: tuple = args) -> float:
        b = B.attention_layer_bound(a[0], a[1], F(e), F(t), *a[2:])
        return float(up(b))  # steers the float search only

    _, u, ev, tv = hill_climb(
        rng, FloatLayer(heads, X), (len(X), len(X[0])), code_bound, (-3, 2), (-2, 2), 30
    )
    e_, t_ = F(ev), F(tv)  # exact rationals of the floats the search found
    Xt = [[x + e_ * F(cu) for x, cu in zip(r, ur, strict=True)] for r, ur in zip(X, u, strict=True)]
    err = arb_layer_error(heads, X, Xt, t_)
    b = B.attention_layer_bound(c, x_in, e_, t_, gaps, nonmax, single)
    check(certified_le(err, b), f"attention_layer_bound search: err {short(err)} > {short(b)}")
    if b is not None and up(b) > 0:
        best_ratio = max(best_ratio, up(err) / up(b))
ok(f"adversarial search on the code's (b), {N_LAYERS} layers: max err/bound {short(best_ratio)}")
check(best_ratio >= mp.mpf("0.5"), f"the code search reaches err/bound >= 1/2 ({best_ratio})")

finish("check_bounds_code")
