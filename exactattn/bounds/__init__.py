"""Proved error bounds for softmax-vs-hard simulation (statements and proofs in ``proofs/``).

Pure functions, no dependency on the engine. Weights come in as exact ``Fraction`` matrices
(lists of rows) and the constants derived from them stay exact. Anything involving ``exp``,
``log`` or ``tanh`` is computed with python-flint ``arb`` balls and returned as a *certified
upper bound*: an exact point ``arb`` (radius 0) that is >= the real value of the formula for
every point of the input balls. ``None`` means "no bound of this form holds" (see the docstring
of the function returning it). No float is ever produced.

Theorem numbers refer to ``proofs/README.md``:

* Theorem 3(b) -> :func:`attention_layer_bound`, :func:`ffn_layer_bound` (what the engine uses);
* Theorem 3(a) -> :func:`paper_K`, :func:`paper_layer_bound` (the paper-shaped Lemma 25);
* Theorem 4    -> :func:`recursion_bound`, :func:`theorem_bound`;
* Theorem 5    -> :func:`tau_theorem`, :func:`readout_lipschitz`, :func:`decision_certified`;
* Theorems 1, 2, 6 -> :func:`softmax_hardmax_l1`, :func:`softmax_lipschitz_l1`,
  :func:`ziggurat_offtarget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from flint import arb, fmpq

from exactattn.core.numbers import point_upper

Matrix = Sequence[Sequence[Fraction]]
Vector = Sequence[Fraction]

HARD_RULES = ("average", "leftmost", "rightmost")

__all__ = [
    "HARD_RULES",
    "HeadConstants",
    "LayerConstants",
    "attention_head_constants",
    "attention_layer_bound",
    "attention_layer_constants",
    "decision_certified",
    "ffn_constants",
    "ffn_layer_bound",
    "paper_K",
    "paper_K_unconditional",
    "paper_layer_bound",
    "readout_lipschitz",
    "recursion_bound",
    "score_to_query_key",
    "softmax_hardmax_l1",
    "softmax_lipschitz_l1",
    "tau_theorem",
    "theorem_bound",
    "ziggurat_offtarget",
]


# --------------------------------------------------------------------------- exact helpers


def _q(x: Fraction | int) -> Fraction:
    """Exact rational; rejects floats so that no binary rounding sneaks into a constant."""
    if isinstance(x, bool) or not isinstance(x, (Fraction, int)):
        raise TypeError(f"expected Fraction or int, got {type(x).__name__}")
    return Fraction(x)


def _mat(w: Matrix, name: str) -> list[list[Fraction]]:
    rows = [[_q(v) for v in row] for row in w]
    if not rows or not rows[0]:
        raise ValueError(f"{name}: empty matrix")
    if any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(f"{name}: rows of different lengths")
    return rows


def _vec(v: Vector | None, n: int, name: str) -> list[Fraction]:
    if v is None:
        return [Fraction(0)] * n
    out = [_q(x) for x in v]
    if len(out) != n:
        raise ValueError(f"{name}: length {len(out)}, expected {n}")
    return out


def _matmul(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    cols = list(zip(*b, strict=True))
    return [
        [sum((x * y for x, y in zip(row, col, strict=True)), Fraction(0)) for col in cols]
        for row in a
    ]


def _transpose(a: list[list[Fraction]]) -> list[list[Fraction]]:
    return [list(c) for c in zip(*a, strict=True)]


def _absmatvec(a: list[list[Fraction]], v: list[Fraction]) -> list[Fraction]:
    """|A| v for a nonnegative vector v (entrywise absolute value of A)."""
    return [sum((abs(x) * y for x, y in zip(row, v, strict=True)), Fraction(0)) for row in a]


def _row_l1(a: list[list[Fraction]]) -> list[Fraction]:
    return [sum((abs(x) for x in row), Fraction(0)) for row in a]


def _opnorm_inf(a: list[list[Fraction]]) -> Fraction:
    """ℓ∞ operator norm = largest absolute row sum."""
    return max(_row_l1(a))


# --------------------------------------------------------------------------- arb helpers


def _arb(x: arb | Fraction | int) -> arb:
    if isinstance(x, arb):
        return x
    f = _q(x)
    return arb(fmpq(f.numerator, f.denominator))


def _up(x: arb) -> arb:
    """Certified upper end of a ball as an exact point (+inf if the ball is not finite), at the
    ball's own precision (``x.upper()`` alone rounds to the context's 53 bits)."""
    if not x.is_finite():
        return arb.pos_inf()
    return point_upper(x)


def _eps_upper(eps: arb | Fraction | int) -> arb:
    """An input error is used through its upper end, clamped at 0 (every bound is nondecreasing
    in ε, so this is sound for every point of the ball)."""
    e = _up(_arb(eps))
    return e if e > 0 else arb(0)


def _positive(x: arb | Fraction | int, name: str) -> arb:
    a = _arb(x)
    if not a > 0:
        raise ValueError(f"{name} must be certified > 0, got {a}")
    return a


# --------------------------------------------------------------------------- constants


@dataclass(frozen=True)
class HeadConstants:
    """Exact constants of one attention head (Theorem 3).

    ``beta``        β = Σ_ab |(QᵀK)_ab|: how fast a score moves with query/key input errors;
    ``beta_bias_q`` β_q = ‖Kᵀ b_q‖₁: score movement through the query bias (b_k never matters);
    ``row_gain``    g_r = ‖row r of O·V‖₁, r = 0..d−1: output row r per unit of value input;
    ``row_bias``    |(O b_v)_r|: only used for the hard activation growth (the error ignores b_v);
    ``rule``        the hard rule, ``"average"``, ``"leftmost"`` or ``"rightmost"``.
    """

    rule: str
    beta: Fraction
    beta_bias_q: Fraction
    row_gain: tuple[Fraction, ...]
    row_bias: tuple[Fraction, ...]

    @property
    def gain(self) -> Fraction:
        """‖O·V‖_∞ (largest row gain)."""
        return max(self.row_gain, default=Fraction(0))


@dataclass(frozen=True)
class LayerConstants:
    """Exact constants of one layer.

    ``kind``      ``"attention"`` or ``"ffn"``;
    ``width``     d;
    ``heads``     attention: the heads' constants, FFN: None;
    ``lipschitz`` FFN: Λ_F = ‖|W_out|·|W_k|···|W_1|‖_∞ (Theorem 3(d)), attention: None;
    ``lipschitz_norm_product`` FFN: Π‖W‖_∞ ≥ Λ_F (the textbook constant), attention: None;
    ``growth``    (α, c) with ‖x_out‖_∞ ≤ α·‖x_in‖_∞ + c for the *hard* layer (Lemma G).
    """

    kind: str
    width: int
    heads: tuple[HeadConstants, ...] | None
    lipschitz: Fraction | None
    lipschitz_norm_product: Fraction | None
    growth: tuple[Fraction, Fraction]


def score_to_query_key(a: Matrix) -> tuple[list[list[Fraction]], list[list[Fraction]]]:
    """The ``score`` form s = x_iᵀ A x_j as (Q, K) = (Aᵀ, I) (the normalization of the spec)."""
    am = _mat(a, "score")
    d = len(am)
    if len(am[0]) != d:
        raise ValueError("score: matrix must be square (d, d)")
    eye = [[Fraction(int(r == c)) for c in range(d)] for r in range(d)]
    return _transpose(am), eye


def attention_head_constants(
    Q: Matrix,
    bq: Vector | None,
    K: Matrix,
    bk: Vector | None,
    V: Matrix,
    bv: Vector | None,
    O: Matrix | None,
    rule: str = "average",
) -> HeadConstants:
    """Constants of one head; ``O=None`` is the identity. ``bk`` and ``bv`` are only validated:
    they provably do not enter the error bound (softmax and hardmax are shift invariant, and
    weights summing to 1 cancel the value bias)."""
    if rule not in HARD_RULES:
        raise ValueError(f"rule must be one of {HARD_RULES}, got {rule!r}")
    qm, km, vm = _mat(Q, "query"), _mat(K, "key"), _mat(V, "value")
    d = len(qm[0])
    if len(km[0]) != d or len(vm[0]) != d:
        raise ValueError("query, key and value must all have d columns")
    if len(qm) != len(km):
        raise ValueError("query and key must have the same number of rows")
    bqv = _vec(bq, len(qm), "query_bias")
    _vec(bk, len(km), "key_bias")
    bvv = _vec(bv, len(vm), "value_bias")
    if O is None:
        if len(vm) != d:
            raise ValueError("value must be (d, d) when there is no output matrix")
        om = [[Fraction(int(r == c)) for c in range(d)] for r in range(d)]
    else:
        om = _mat(O, "output")
        if len(om) != d or len(om[0]) != len(vm):
            raise ValueError("output must be (d, rows of value)")
    b = _matmul(_transpose(qm), km)
    beta = sum((abs(x) for row in b for x in row), Fraction(0))
    ktbq = [sum((km[a][c] * bqv[a] for a in range(len(km))), Fraction(0)) for c in range(d)]
    beta_q = sum((abs(x) for x in ktbq), Fraction(0))
    g = _matmul(om, vm)
    obv = [abs(sum((x * y for x, y in zip(row, bvv, strict=True)), Fraction(0))) for row in om]
    return HeadConstants(rule, beta, beta_q, tuple(_row_l1(g)), tuple(obv))


def attention_layer_constants(heads: Sequence[HeadConstants]) -> LayerConstants:
    """Constants of an attention layer (heads summed into the residual stream)."""
    hs = tuple(heads)
    if not hs:
        raise ValueError("an attention layer needs at least one head")
    d = len(hs[0].row_gain)
    if any(len(h.row_gain) != d for h in hs):
        raise ValueError("heads of one layer must have the same width d")
    alpha = max(1 + sum((h.row_gain[r] for h in hs), Fraction(0)) for r in range(d))
    c = max(sum((h.row_bias[r] for h in hs), Fraction(0)) for r in range(d))
    return LayerConstants("attention", d, hs, None, None, (alpha, c))


def ffn_constants(
    hidden: Sequence[tuple[Matrix, Vector | None]], out: tuple[Matrix, Vector | None]
) -> LayerConstants:
    """Λ_F = ‖|W_out||W_k|···|W_1|‖_∞ (ReLU is 1-Lipschitz coordinatewise) and the growth."""
    if not hidden:
        raise ValueError("an FFN needs at least one hidden layer")
    mats = [(_mat(w, f"hidden[{k}].weight"), b) for k, (w, b) in enumerate(hidden)]
    d = len(mats[0][0][0])
    lin: list[Fraction] = [Fraction(1)] * d  # |W_k|···|W_1| 1
    aff: list[Fraction] = [Fraction(0)] * d  # bias part of the activation bound
    prod = Fraction(1)
    width = d
    for k, (w, b) in enumerate(mats):
        if len(w[0]) != width:
            raise ValueError(f"hidden[{k}].weight: expected {width} columns")
        bb = _vec(b, len(w), f"hidden[{k}].bias")
        lin = _absmatvec(w, lin)
        aff = [x + abs(y) for x, y in zip(_absmatvec(w, aff), bb, strict=True)]
        prod *= _opnorm_inf(w)
        width = len(w)
    wo = _mat(out[0], "output.weight")
    if len(wo[0]) != width or len(wo) != d:
        raise ValueError(f"output.weight: expected shape ({d}, {width})")
    bo = _vec(out[1], d, "output.bias")
    lin = _absmatvec(wo, lin)
    aff = [x + abs(y) for x, y in zip(_absmatvec(wo, aff), bo, strict=True)]
    prod *= _opnorm_inf(wo)
    lam = max(lin)
    return LayerConstants("ffn", d, None, lam, prod, (1 + lam, max(aff)))


# --------------------------------------------------------------------------- Theorems 1, 2, 6


def softmax_hardmax_l1(m_nonmax: int, gap: Fraction | None, tau: arb | Fraction | int) -> arb:
    """Theorem 1: ‖softmax_τ(s) − ahardmax(s)‖₁ ≤ 2mq/(1 + mq), q = e^{−γ/τ}, when at most m
    visible scores are below the maximum, each by ≥ γ (``gap=None``: none is below → 0)."""
    if m_nonmax < 0:
        raise ValueError("m_nonmax must be >= 0")
    if gap is None or m_nonmax == 0:
        return arb(0)
    g = _q(gap)
    if g <= 0:
        raise ValueError("gap must be > 0 (use None for 'no lower score')")
    t = _positive(tau, "tau")
    mq = m_nonmax * (-_arb(g) / t).exp()
    return _up(2 * mq / (1 + mq))


def softmax_lipschitz_l1(delta: arb | Fraction | int, tau: arb | Fraction | int) -> arb:
    """Theorem 2: ‖softmax_τ(s′) − softmax_τ(s)‖₁ ≤ 2·tanh(‖s′ − s‖_∞ / (2τ)) ≤ ‖s′−s‖_∞/τ."""
    t = _positive(tau, "tau")
    return _up(2 * (_eps_upper(delta) / (2 * t)).tanh())


def ziggurat_offtarget(
    c: Fraction, tau: arb | Fraction | int, per_rank: int = 1, count: int | None = None
) -> arb:
    """Theorem 6(iii): off-target softmax mass when every other position j has a rank r ≥ 1
    (at most ``per_rank`` positions per rank) with s_j ≤ s_* − c·r: ≤ kq/(1 − q + kq),
    q = e^{−c/τ}, for any number of positions; with ``count`` = N positions and k = 1 the
    exact worst case q(1 − q^N)/(1 − q^{N+1})."""
    cc = _q(c)
    if cc <= 0 or per_rank < 1:
        raise ValueError("need c > 0 and per_rank >= 1")
    q = (-_arb(cc) / _positive(tau, "tau")).exp()
    if count is not None:
        if count < 0:
            raise ValueError("count must be >= 0")
        if per_rank == 1:
            return _up(q * (1 - q**count) / (1 - q ** (count + 1)))
    k = arb(per_rank)
    return _up(k * q / (1 - q + k * q))


# --------------------------------------------------------------------------- Theorem 3


def _per_head_taus(tau: arb | Fraction | int | Sequence[arb | Fraction | int], h: int) -> list[arb]:
    if isinstance(tau, (arb, Fraction, int)):
        return [_positive(tau, "tau")] * h
    taus = [_positive(t, f"tau[{k}]") for k, t in enumerate(tau)]
    if len(taus) != h:
        raise ValueError(f"tau: {len(taus)} temperatures for {h} heads")
    return taus


def attention_layer_bound(
    c: LayerConstants,
    x_in: Fraction,
    eps_in: arb | Fraction | int,
    tau: arb | Fraction | int | Sequence[arb | Fraction | int],
    gaps: Sequence[Fraction | None],
    visible_nonmax: Sequence[int],
    argmax_singleton: Sequence[bool] | None = None,
) -> arb | None:
    """Theorem 3(b), valid for every ε ≥ 0: an upper bound on max_i ‖x̃′_i − x′_i‖_∞.

    ``x_in``   bound on the max abs entry of this layer's *hard* input (all positions);
    ``eps_in`` bound on the input error max_i ‖x̃_i − x_i‖_∞ (its upper end is used);
    ``tau``    the temperature (one ball for all heads, or one per head), certified > 0;
    ``gaps[h]`` lower bound on head h's hard gap (max visible score − any lower visible score,
               over all queries), or None when no visible score is below its maximum;
    ``visible_nonmax[h]`` upper bound on the number of visible keys below the maximum, over
               all queries (≤ T − 1);
    ``argmax_singleton[h]`` for leftmost/rightmost heads: True if every argmax set of the hard
               scores is a singleton (then the head equals average-hard). Default: False.

    Returns None when some leftmost/rightmost head is not declared singleton: with ties at the
    top, softmax averages the tied values and no bound that vanishes as τ → 0 exists.
    """
    if c.kind != "attention" or c.heads is None:
        raise ValueError("attention_layer_bound needs attention-layer constants")
    heads = c.heads
    nh = len(heads)
    if len(gaps) != nh or len(visible_nonmax) != nh:
        raise ValueError("gaps and visible_nonmax need one entry per head")
    single = list(argmax_singleton) if argmax_singleton is not None else [False] * nh
    if len(single) != nh:
        raise ValueError("argmax_singleton needs one entry per head")
    x = _q(x_in)
    if x < 0:
        raise ValueError("x_in must be >= 0")
    taus = _per_head_taus(tau, nh)
    eps = _eps_upper(eps_in)
    xa = _arb(x)
    ts: list[arb] = []
    for k, h in enumerate(heads):
        if h.rule != "average" and not single[k]:
            return None
        sigma = eps * ((2 * xa + eps) * _arb(h.beta) + _arb(h.beta_bias_q))
        lip = 2 * (sigma / (2 * taus[k])).tanh()
        rho = softmax_hardmax_l1(visible_nonmax[k], gaps[k], taus[k])
        ts.append((lip + rho).min(arb(2)))
    best = arb(0)
    for r in range(c.width):
        row = eps
        for k, h in enumerate(heads):
            g = h.row_gain[r]
            if g:
                row = row + _arb(g) * (eps + xa * ts[k])
        best = best.max(_up(row))
    return _up(best)


def ffn_layer_bound(c: LayerConstants, eps_in: arb | Fraction | int) -> arb:
    """Theorem 3(d): ε_out ≤ (1 + Λ_F)·ε_in for x ↦ x + FFN(x), every ε_in ≥ 0."""
    if c.kind != "ffn" or c.lipschitz is None:
        raise ValueError("ffn_layer_bound needs FFN constants")
    return _up((1 + _arb(c.lipschitz)) * _eps_upper(eps_in))


def _paper_K(c: LayerConstants, unconditional: bool) -> Fraction:
    if c.kind == "ffn":
        assert c.lipschitz is not None
        return 1 + c.lipschitz
    assert c.heads is not None
    c1 = Fraction(0)
    c2 = Fraction(0)
    for r in range(c.width):
        s1 = Fraction(1)
        s2 = Fraction(0)
        for h in c.heads:
            w = 3 * h.beta + h.beta_bias_q
            if unconditional:
                w = max(w, Fraction(2))
            s1 += h.row_gain[r] * (1 + w)
            s2 += 2 * h.row_gain[r]
        c1, c2 = max(c1, s1), max(c2, s2)
    return max(c1, c2)


def paper_K(c: LayerConstants) -> Fraction:
    """Theorem 3(a): the constant K ≥ 1 with ε_out ≤ K x (m e^{−γ/τ} + x ε/τ) when ε ≤ 1 ≤ x,
    τ ≤ 1. Attention: max(max_r 1 + Σ_h g_hr(1 + 3β_h + β_q,h), max_r 2 Σ_h g_hr); FFN:
    1 + Λ_F. Valid for leftmost/rightmost heads only when their argmax sets are singletons."""
    return _paper_K(c, unconditional=False)


def paper_K_unconditional(c: LayerConstants) -> Fraction:
    """Theorem 3(a′): K′ ≥ K (3β + β_q replaced by max(2, 3β + β_q)) for which the bound of
    3(a) holds for *every* ε ≥ 0, so the depth theorem needs no ε ≤ 1 invariant."""
    return _paper_K(c, unconditional=True)


def paper_layer_bound(
    K: Fraction,
    x_max: Fraction,
    eps_in: arb | Fraction | int,
    tau: arb | Fraction | int,
    gamma: Fraction | None,
    m: int,
    unconditional: bool = False,
) -> arb | None:
    """Theorem 3(a): K·X·(m e^{−γ/τ} + X·ε/τ) with X = max(1, x_max). None when a hypothesis
    is not certified: τ ≤ 1, and ε ≤ 1 unless ``unconditional`` (K must then be K′)."""
    t = _positive(tau, "tau")
    if not t <= 1:
        return None
    eps = _eps_upper(eps_in)
    if not unconditional and not eps <= 1:
        return None
    x = _arb(max(Fraction(1), _q(x_max)))
    b = arb(0) if gamma is None or m == 0 else m * (-_arb(_q(gamma)) / t).exp()
    return _up(_arb(_q(K)) * x * (b + x * eps / t))


# --------------------------------------------------------------------------- Theorem 4


def recursion_bound(a: arb | Fraction | int, b: arb | Fraction | int, L: int) -> arb:
    """Theorem 4(ii): B_L = b Σ_{k<L} a^k (= b(a^L − 1)/(a − 1), = L·b when a = 1), the bound
    on ε_L from ε_ℓ ≤ a ε_{ℓ−1} + b and ε_0 = 0. Evaluated by Horner (no division by a − 1)."""
    if L < 0:
        raise ValueError("L must be >= 0")
    aa, bb = _arb(a), _arb(b)
    acc = arb(0)
    for _ in range(L):
        acc = aa * acc + bb
    return _up(acc)


def _ab(K: Fraction, x_max: Fraction, gamma: Fraction | None, m: int, t: arb) -> tuple[arb, arb]:
    x = _arb(max(Fraction(1), _q(x_max)))
    k = _arb(max(Fraction(1), _q(K)))
    a = k * x * x / t
    b = arb(0) if gamma is None or m == 0 else k * x * m * (-_arb(_q(gamma)) / t).exp()
    return a, b


def theorem_bound(
    L: int,
    K: Fraction,
    x_max: Fraction,
    gamma: Fraction | None,
    m: int,
    tau: arb | Fraction | int,
    unconditional: bool = False,
) -> arb | None:
    """Theorem 4(ii): certified upper bound on ε_L for a depth-L model whose layers all satisfy
    Theorem 3(a) with constant K (K′ if ``unconditional``), activation bound x_max, gap γ and
    at most m non-maximal visible keys. None when the hypotheses are not certified: τ ≤ 1 and,
    unless ``unconditional``, the invariant B_{L−1} ≤ 1 (which implies every ε_ℓ ≤ 1, ℓ < L)."""
    t = _positive(tau, "tau")
    if not t <= 1:
        return None
    a, b = _ab(K, x_max, gamma, m, t)
    if not unconditional and L >= 1 and not recursion_bound(a, b, L - 1) <= 1:
        return None
    return recursion_bound(a, b, L)


# --------------------------------------------------------------------------- Theorem 5


def tau_theorem(
    L: int, K: Fraction, x_max: Fraction, gamma: Fraction | None, m: int, eps_star: Fraction
) -> arb:
    """Theorem 5: a ball containing τ_thm; *every* τ in (0, τ_thm] gives ε_L ≤ ε*, so the lower
    end of the ball is itself a certified temperature.

    ``L`` depth (number of layers, attention and FFN), ``K`` the constant of Theorem 3(a) (max
    over layers; values < 1 are raised to 1), ``x_max`` bound on every attention layer's hard
    input (raised to 1), ``gamma`` the gap (None: no lower score anywhere), ``m`` bound on the
    non-maximal visible keys, ``eps_star`` the target, 0 < ε* ≤ 1.

    τ_thm = 1 if Λ ≤ 0, else min(1, γ/Λ) (L = 1) or min(1, γ/(2Λ)) (L ≥ 2), with
    Λ = ln(L K X m/ε*) + (L − 1)·ln(2(L − 1) K X²/(e γ)).
    """
    if L < 1:
        raise ValueError("L must be >= 1")
    es = _q(eps_star)
    if not 0 < es <= 1:
        raise ValueError("eps_star must be in (0, 1]")
    if gamma is None or m == 0:
        return arb(1)
    g = _q(gamma)
    if g <= 0:
        raise ValueError("gamma must be > 0 (None for no lower score)")
    if m < 0:
        raise ValueError("m must be >= 0")
    x = _arb(max(Fraction(1), _q(x_max)))
    k = _arb(max(Fraction(1), _q(K)))
    ga = _arb(g)
    lam = (L * k * x * m / _arb(es)).log()
    factor = 1
    if L >= 2:
        lam = lam + (L - 1) * ((2 * (L - 1) * k * x * x / ga).log() - 1)
        factor = 2
    one = arb(1)
    if lam <= 0:
        return one
    if lam > 0:
        return (ga / (factor * lam)).min(one)
    # Λ's ball contains 0: τ_thm lies between min(1, γ/(factor·Λ_upper)) and 1.
    low = (ga / (factor * lam.upper())).min(one)
    return low.union(one)


def readout_lipschitz(kind: str, weight: Vector | Matrix) -> Fraction:
    """Theorem 5 (corollary): C such that a final error ε moves the decision quantity by ≤ C ε.

    ``"accept"``: weight is the vector w, C = ‖w‖₁ (y = w·x + b);
    ``"argmax"``: weight is the matrix W, C = max_{k≠k′} ‖W_k − W_k′‖₁ (a difference of two
    scores; 0 with a single label); ``"value"``: C = ‖W‖_∞ (each output entry)."""
    if kind == "accept":
        return sum((abs(_q(v)) for v in weight), Fraction(0))  # type: ignore[arg-type]
    w = _mat(weight, "weight")  # type: ignore[arg-type]
    if kind == "value":
        return _opnorm_inf(w)
    if kind == "argmax":
        best = Fraction(0)
        for i in range(len(w)):
            for j in range(i + 1, len(w)):
                best = max(
                    best, sum((abs(a - b) for a, b in zip(w[i], w[j], strict=True)), Fraction(0))
                )
        return best
    raise ValueError(f"unknown read-out kind {kind!r}")


def decision_certified(eps: arb | Fraction | int, lipschitz: Fraction, margin: Fraction) -> bool:
    """Theorem 5 (corollary): True iff C·ε < μ is certified, which makes every soft decision
    equal the hard one (μ = the smallest hard margin; μ = 0 never certifies)."""
    m = _q(margin)
    return bool(m > 0 and _up(_arb(_q(lipschitz)) * _eps_upper(eps)) < _arb(m))
