"""The code's bound formulas (exactattn/bounds.py) against the truth on the extremal witnesses.

The other check_*.py scripts verify the *theorems* with their own copies of the formulas; this
one feeds the witnesses of proofs/witnesses.py (whose true errors are computed by a direct
simulator or a closed form cross-checked against it) to the functions the engine uses, so a
wrong constant in exactattn/bounds.py fails here. EXACTATTN_BOUNDS_PY=<path> loads a copy of
bounds.py instead (the mutation tests in tests/test_proofs.py do that).

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
from exactattn.numbers import arb_endpoints  # noqa: E402

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
    (1, 2, 3, 8), (F(1), F(3), F(100)), (F(1), F(10), F(10**4)), (1, 10, 10**6),
    (F(1), F(1, 100), F(1, 10**9)), (F(1), F(1, 1000)),
):  # fmt: skip
    t = B.tau_theorem(L, K, X, g, m, es)
    hi = mpq(arb_endpoints(t)[0])  # the ball's lower end: the certified temperature
    for shrink in (1, 3):
        val = B_L(L, mpq(K), mpq(X), m, mpq(g), hi / shrink)
        check(
            val <= mpq(es) * (1 + mp.mpf(10) ** -40), f"B_L(τ_thm) <= ε* at {(L, K, X, m, g, es)}"
        )
        n += 1
    worst_t = max(worst_t, B_L(L, mpq(K), mpq(X), m, mpq(g), hi) / mpq(es))
    # theorem_bound is B_L (an upper bound on it, certified)
    tb = B.theorem_bound(L, K, X, g, m, F(1, 2), unconditional=True)
    if tb is not None:
        check(
            up(tb) >= B_L(L, mpq(K), mpq(X), m, mpq(g), mp.mpf(1) / 2) * (1 - TOL), "theorem_bound"
        )
# L = 1: B_1(τ_thm) = K X m e^{−Λ} = ε* exactly, so the ratio must reach 1
check(worst_t >= mp.mpf("0.999"), f"τ_thm attained at L = 1: max B_L(τ_thm)/ε* = {worst_t}")
ok(f"tau_theorem: B_L(τ) <= ε* at τ_thm and τ_thm/3 on {n} points; max ratio {mp.nstr(worst_t, 6)}")

finish("check_bounds_code")
