"""The *truth side* of the layer checks: a direct simulator of hard and soft attention layers
and FFNs, the extremal (witness) instances, and the adversarial search used by the check
scripts. Nothing here evaluates a bound formula: the formulas under test live in the
check_*.py scripts (and in exactattn/bounds/__init__.py), so that a mutated formula meets an
unmutated truth.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction

import mpmath as mp
from checklib import mpq, softmax

MASKS: dict[str, Callable[[int, int], bool]] = {
    "none": lambda i, j: True,
    "leq": lambda i, j: j <= i,
    "lt": lambda i, j: j < i,
    "geq": lambda i, j: j >= i,
    "gt": lambda i, j: j > i,
}
SMALL = [Fraction(v) for v in (-2, -1, -1, 0, 0, 0, 1, 1, 2)] + [Fraction(1, 2), Fraction(-1, 3)]


def mv(w: list[list], v: list) -> list:
    return [sum((a * b for a, b in zip(row, v, strict=True)), type(v[0])(0)) for row in w]


def dot(u: list, v: list) -> object:
    return sum((a * b for a, b in zip(u, v, strict=True)), type(u[0])(0))


def _scores(hd: dict, X: list, i: int, vis: list[int]) -> list:
    q = [a + b for a, b in zip(mv(hd["Q"], X[i]), hd["bq"], strict=True)]
    return [dot(q, [a + b for a, b in zip(mv(hd["K"], X[j]), hd["bk"], strict=True)]) for j in vis]


def head_out(hd: dict, X: list, i: int, tau: mp.mpf | None) -> list:
    """One head's output at query i; tau None = hard (exact Fraction), else softmax (mpf)."""
    vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
    zero = Fraction(0) if tau is None else mp.mpf(0)
    if not vis:
        return [zero] * len(X[0])
    s = _scores(hd, X, i, vis)
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
    """Gap (None = no lower score), max #non-max visible keys, all argmax sets singletons."""
    gap, mnm, single = None, 0, True
    for i in range(len(X)):
        vis = [j for j in range(len(X)) if MASKS[hd["mask"]](i, j)]
        if not vis:
            continue
        s = _scores(hd, X, i, vis)
        top = max(s)
        low = [top - x for x in s if x < top]
        single = single and sum(1 for x in s if x == top) == 1
        mnm = max(mnm, len(low))
        if low:
            gap = min(low) if gap is None else min(gap, min(low))
    return gap, mnm, single


def head_constants(hd: dict) -> tuple[Fraction, Fraction, list[Fraction], list[Fraction]]:
    """β = ‖QᵀK‖_sum, β_q = ‖Kᵀb_q‖₁, row gains g_r = ‖(OV)_r‖₁, |(O b_v)_r| (exact)."""
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
    obv = [
        abs(sum((o * b for o, b in zip(row, hd["bv"], strict=True)), Fraction(0)))
        for row in hd["O"]
    ]
    return beta, betaq, [sum(abs(v) for v in row) for row in Gm], obv


def layer_out(heads: list[dict], X: list, i: int, tau: mp.mpf | None) -> list:
    """x_i + Σ_h y_{h,i} (hard when tau is None)."""
    out = list(X[i])
    for hd in heads:
        out = [a + b for a, b in zip(out, head_out(hd, X, i, tau), strict=True)]
    return out


def layer_error(heads: list[dict], X: list, Xt: list, tau: mp.mpf) -> mp.mpf:
    """dist(X̃′, X′) at 50 digits: X exact (hard), X̃ soft."""
    err = mp.mpf(0)
    for i in range(len(X)):
        hard = layer_out(heads, X, i, None)
        soft = layer_out(heads, Xt, i, tau)
        err = max(err, max(abs(mpq(a) - b) for a, b in zip(hard, soft, strict=True)))
    return err


# ---------------------------------------------------------------- float fast path (search only)


def _fl(m: list) -> list:
    return [[float(v) for v in row] for row in m]


class FloatLayer:
    """The soft layer in binary floats, for the search loop only; every reported instance is
    re-evaluated at 50 digits with :func:`layer_error`."""

    def __init__(self, heads: list[dict], X: list) -> None:
        self.heads = [
            {
                "Q": _fl(h["Q"]),
                "K": _fl(h["K"]),
                "V": _fl(h["V"]),
                "O": _fl(h["O"]),
                "bq": [float(v) for v in h["bq"]],
                "bk": [float(v) for v in h["bk"]],
                "bv": [float(v) for v in h["bv"]],
                "mask": h["mask"],
            }
            for h in heads
        ]
        self.T = len(X)
        self.hard = [[float(v) for v in layer_out(heads, X, i, None)] for i in range(self.T)]
        self.X = [[float(v) for v in row] for row in X]

    def error(self, E: list[list[float]], tau: float) -> float:
        Xt = [[a + b for a, b in zip(x, e, strict=True)] for x, e in zip(self.X, E, strict=True)]
        err = 0.0
        for i in range(self.T):
            out = list(Xt[i])
            for hd in self.heads:
                vis = [j for j in range(self.T) if MASKS[hd["mask"]](i, j)]
                if not vis:
                    continue
                q = [a + b for a, b in zip(mv(hd["Q"], Xt[i]), hd["bq"], strict=True)]
                s = [
                    dot(q, [a + b for a, b in zip(mv(hd["K"], Xt[j]), hd["bk"], strict=True)])
                    for j in vis
                ]
                top = max(s)
                w = [math.exp((x - top) / tau) for x in s]
                z = sum(w)
                acc = [0.0] * len(hd["V"])
                for j, wj in zip(vis, w, strict=True):
                    v = [a + b for a, b in zip(mv(hd["V"], Xt[j]), hd["bv"], strict=True)]
                    acc = [a + wj / z * b for a, b in zip(acc, v, strict=True)]
                out = [a + b for a, b in zip(out, mv(hd["O"], acc), strict=True)]
            err = max(err, max(abs(a - b) for a, b in zip(out, self.hard[i], strict=True)))
        return err


def random_layer(rng: random.Random) -> tuple[list[dict], list[list[Fraction]]]:
    """A small random attention layer (every mask, biases, output maps, leftmost/rightmost heads)
    and a hard input on a small rational grid (so exact ties occur)."""
    T = rng.randint(1, 5)
    dd = rng.randint(1, 3)
    heads = []
    for _ in range(rng.randint(1, 2)):
        kq, e = rng.randint(1, 2), rng.randint(1, 3)
        rm = lambda r, c: [[rng.choice(SMALL) for _ in range(c)] for _ in range(r)]  # noqa: E731
        heads.append(
            {
                "Q": rm(kq, dd),
                "K": rm(kq, dd),
                "bq": [rng.choice(SMALL) for _ in range(kq)],
                "bk": [rng.choice(SMALL) for _ in range(kq)],
                "V": rm(e, dd),
                "bv": [rng.choice(SMALL) for _ in range(e)],
                "O": rm(dd, e),
                "mask": rng.choice(list(MASKS)),
                "rule": rng.choice(["average"] * 3 + ["leftmost", "rightmost"]),
            }
        )
    X = [[rng.choice(SMALL) for _ in range(dd)] for _ in range(T)]
    return heads, X


def hill_climb(
    rng: random.Random,
    layer: FloatLayer,
    dims: tuple[int, int],
    bound: Callable[[float, float], float],
    log_eps: tuple[float, float],
    log_tau: tuple[float, float],
    steps: int,
) -> tuple[float, list[list[float]], float, float]:
    """Maximize error/bound over the perturbation E ∈ [−ε, ε]^{T×d}, ε and τ (log-uniform
    ranges, base 10) by a seeded random start and a greedy local search. Returns
    (best ratio, E as fractions of ε, ε, τ)."""
    T, d = dims

    def ratio(u: list[list[float]], le: float, lt: float) -> float:
        eps, tau = 10.0**le, 10.0**lt
        b = bound(eps, tau)
        err = layer.error([[eps * x for x in row] for row in u], tau)
        if b <= 0:
            return math.inf if err > 1e-12 else 0.0
        return err / b

    u = [[rng.choice((-1.0, 1.0)) for _ in range(d)] for _ in range(T)]
    le, lt = rng.uniform(*log_eps), rng.uniform(*log_tau)
    best = ratio(u, le, lt)
    for _ in range(steps):
        u2 = [row[:] for row in u]
        le2, lt2 = le, lt
        move = rng.random()
        if move < 0.6:
            p, c = rng.randrange(T), rng.randrange(d)
            u2[p][c] = rng.choice((-1.0, 1.0, 0.0, rng.uniform(-1, 1)))
        elif move < 0.8:
            le2 = min(max(le + rng.gauss(0, 0.4), log_eps[0]), log_eps[1])
        else:
            lt2 = min(max(lt + rng.gauss(0, 0.4), log_tau[0]), log_tau[1])
        r2 = ratio(u2, le2, lt2)
        if r2 >= best:
            best, u, le, lt = r2, u2, le2, lt2
    return best, u, 10.0**le, 10.0**lt


# ---------------------------------------------------------------- witness (extremal) layers


def tied_witness(beta: Fraction, betaq: Fraction) -> tuple[list[dict], list, list]:
    """γ = ∞ layer (all hard scores tied, m = 0) whose perturbed scores split: d = 2, one
    average head, s_ij = (β x_{i,2} + β_q) x_{j,2}, value = coordinate 1, x_in = 1.
    With E = ε·((1, 1), (1, −1)) the error is exactly 2ε + tanh(ε(βε + β_q)/τ)."""
    hd = {
        "Q": [[Fraction(0), beta]],
        "K": [[Fraction(0), Fraction(1)]],
        "bq": [betaq],
        "bk": [Fraction(0)],
        "V": [[Fraction(1), Fraction(0)]],
        "bv": [Fraction(0)],
        "O": [[Fraction(1)], [Fraction(0)]],
        "mask": "none",
        "rule": "average",
    }
    X = [[Fraction(1), Fraction(0)], [Fraction(-1), Fraction(0)]]
    U = [[1, 1], [1, -1]]
    return [hd], X, U


def tied_witness_error(beta: mp.mpf, betaq: mp.mpf, eps: mp.mpf, tau: mp.mpf) -> mp.mpf:
    """Closed form of :func:`tied_witness`'s error (cross-checked against the simulator)."""
    return 2 * eps + mp.tanh(eps * (beta * eps + betaq) / tau)


def step1_witness_osc(x: Fraction, eps: Fraction, beta: Fraction, betaq: Fraction) -> Fraction:
    """Oscillation over j of s̃_ij − s_ij for d = 1, Q = β, K = 1, b_q = β_q, keys x_j = ±x
    (the query is x_0 = x), e_0 = +ε, e_1 = −ε. Exact; equals 2ε((2x + ε)β + β_q)."""
    hd = {"Q": [[beta]], "K": [[Fraction(1)]], "bq": [betaq], "bk": [Fraction(0)]}
    X = [[x], [-x]]
    Xt = [[x + eps], [-x - eps]]
    s = _scores(hd, X, 0, [0, 1])
    st = _scores(hd, Xt, 0, [0, 1])
    d = [a - b for a, b in zip(st, s, strict=True)]
    return max(d) - min(d)


def tied_leftmost_errors(tau: mp.mpf) -> list[mp.mpf]:
    """Errors at ε = 0 of leftmost heads whose top score is tied (H3 fails, γ = ∞, m = 0):
    values x_j on positions 0..T−1 with all scores 0; the hard output is x_0, softmax averages."""
    out = []
    for vals in ([1, -1], [1, 0], [1, 0, 0], [1, -1, 0], [1, 1, -1], [1, 0, 0, 0, 0, 0]):
        hd = {
            "Q": [[Fraction(0)]],
            "K": [[Fraction(1)]],
            "bq": [Fraction(0)],
            "bk": [Fraction(0)],
            "V": [[Fraction(1)]],
            "bv": [Fraction(0)],
            "O": [[Fraction(1)]],
            "mask": "none",
            "rule": "leftmost",
        }
        X = [[Fraction(v)] for v in vals]
        Xt = [[mpq(v)] for v in vals]
        out.append(layer_error([hd], X, Xt, tau))
    return out


# ---------------------------------------------------------------- FFNs


def relu(v: object) -> object:
    return v if v > 0 else type(v)(0)


def ffn(x: list, Ws: list, bs: list, Wo: list, bo: list) -> list:
    """x + W_out ReLU(... ReLU(W_1 x + b_1) ...) + b_out (exact on Fractions)."""
    z = x
    for W, b in zip(Ws, bs, strict=True):
        z = [relu(a + c) for a, c in zip(mv(W, z), b, strict=True)]
    return [a + c + b_ for a, c, b_ in zip(x, mv(Wo, z), bo, strict=True)]


def random_ffn(rng: random.Random, depth: tuple[int, int] = (1, 4)) -> tuple:
    """A random residual FFN with 1–4 hidden layers (widths 1–3); exact rational weights."""
    dd = rng.randint(1, 3)
    widths = [dd] + [rng.randint(1, 3) for _ in range(rng.randint(*depth))]
    rm = lambda r, c: [[rng.choice(SMALL) for _ in range(c)] for _ in range(r)]  # noqa: E731
    Ws = [rm(widths[k + 1], widths[k]) for k in range(len(widths) - 1)]
    bs = [[rng.choice(SMALL) for _ in range(widths[k + 1])] for k in range(len(widths) - 1)]
    Wo, bo = rm(dd, widths[-1]), [rng.choice(SMALL) for _ in range(dd)]
    return dd, Ws, bs, Wo, bo


def large_x_witness(beta: Fraction, c: Fraction) -> tuple[list[dict], list, list]:
    """Hard scores tied through the key (key coordinate 0) but the query coordinate is large:
    d = 2, s_ij = β x_{i,1} x_{j,2}, values = coordinate 1 = ±c (x_in = c). With
    E = ε·((1, 1), (1, −1)) the error is exactly 2ε + c·tanh(β(c + ε)ε/τ): it grows like
    β c² ε/τ, which is what the X² of Theorem 3(a) pays for."""
    hd = {
        "Q": [[beta, Fraction(0)]],
        "K": [[Fraction(0), Fraction(1)]],
        "bq": [Fraction(0)],
        "bk": [Fraction(0)],
        "V": [[Fraction(1), Fraction(0)]],
        "bv": [Fraction(0)],
        "O": [[Fraction(1)], [Fraction(0)]],
        "mask": "none",
        "rule": "average",
    }
    X = [[c, Fraction(0)], [-c, Fraction(0)]]
    U = [[1, 1], [1, -1]]
    return [hd], X, U


def large_x_witness_error(beta: mp.mpf, c: mp.mpf, eps: mp.mpf, tau: mp.mpf) -> mp.mpf:
    return 2 * eps + c * mp.tanh(beta * (c + eps) * eps / tau)


def gain_witness(beta: Fraction, g: Fraction, m: int) -> tuple[list[dict], list]:
    """ε = 0, d = 1, Q = β, K = 1, V = g: one key +1 and m keys −1; at query 0 the hard head
    picks +1 and the error is exactly g·2mq/(1 + mq), q = e^{−2β/τ} (γ = 2β). With g = 2 and
    τ small this needs K >= c_2 = 2g of Theorem 3(a); with m = 4 and τ large, t_h > 1."""
    hd = {
        "Q": [[beta]],
        "K": [[Fraction(1)]],
        "bq": [Fraction(0)],
        "bk": [Fraction(0)],
        "V": [[g]],
        "bv": [Fraction(0)],
        "O": [[Fraction(1)]],
        "mask": "none",
        "rule": "average",
    }
    return [hd], [[Fraction(1)]] + [[Fraction(-1)]] * m
