"""Theorem S (``proofs/07-sharp-chain.md``): the per-coordinate certificate chain.

Where :func:`exactattn.bounds.attention_layer_bound` (Theorem 3(b)) carries one ‖·‖∞ error and
one activation bound X through every layer, this chain carries, for every coordinate c, an
error bound e_c and the interval (or finite set) of its hard values, and uses for every head
only the coordinates its scores and values actually read:

* scores (S1): a query-side error multiplies the *width* of the key-side form over the keys,
  a key-side error the largest |query-side form| (query-only terms cancel in softmax);
* tail (S2): the head's own score profile (the k-th key below the top is ≥ a + b·⌊(k−1)/r⌋
  below it: a geometric series, no factor m when b > 0);
* weights (S3/S4): either Theorems 1–2 (‖p̃ − h‖₁ ≤ 2tanh(σ/2τ) + 2R/(1+R)), or, when the
  hard values are equal on the argmax set (a unique top, or a value that is a function of
  the score), the soft mass off the argmax set, ≤ e^{2σ/τ}R/(1 + e^{2σ/τ}R): no tanh
  saturation while 2σ stays below the gap;
* FFN layers (S5): affine error forms through the ReLUs, split over the finite hard values
  of the inputs, so that a rounding layer (Theorem 6) restores exact Booleans;
* read-out (S6): the read-out weights times the per-coordinate errors.

Every number is an exact rational or an ``arb`` ball whose upper end is kept (outward); no
float. The plan (:class:`ChainPlan`) holds what does not depend on n and is built once per
model; :func:`sharp_chain` evaluates one length in a few hundred ball operations.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from flint import arb

from exactattn.core.numbers import point_upper, to_arb
from exactattn.model import AcceptOutput, ArgmaxOutput, AttentionLayer, Model

__all__ = [
    "ChainPlan",
    "ChainResult",
    "CoordRange",
    "FFNPlan",
    "HeadDiagnostic",
    "HeadPlan",
    "Profile",
    "ffn_bound",
    "head_bound",
    "hull",
    "profile_tail",
    "sharp_chain",
]

ZERO = Fraction(0)
MAX_CONFIGS = 256  # FFN case split (S5): at most this many joint hard-value assignments
MAX_SET = 8  # a finite hard-value set with more elements is used as its interval
SAT = 10**6  # an exponent above this is "saturated" (the bound is the trivial one)
MEMO_SIZE = 4096  # S5 answers kept per FFN layer

Sparse = tuple[tuple[int, Fraction], ...]


def _up(x: arb) -> arb:
    """The certified upper end of a ball as an exact point (+inf when not finite)."""
    if not x.is_finite():
        return arb.pos_inf()
    return point_upper(x)


def _sparse(row: Sequence[Fraction]) -> Sparse:
    return tuple((c, Fraction(v)) for c, v in enumerate(row) if v)


# --------------------------------------------------------------------------- data at one n


@dataclass(frozen=True, eq=False)
class CoordRange:
    """Hard values of one coordinate at a layer boundary: every value lies in [lo, hi], and
    in ``values`` when that finite set is known (a proved claim, e.g. a Boolean {0, 1}).
    Equality and hash use the exact values (the hash is computed once: ranges are memo keys
    of the chain at every n)."""

    lo: Fraction
    hi: Fraction
    values: tuple[Fraction, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", (self.lo, self.hi, self.values))
        object.__setattr__(self, "_hash", hash(self._key))  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, CoordRange):
            return NotImplemented
        return self._hash == other._hash and self._key == other._key  # type: ignore[attr-defined]

    @property
    def width(self) -> Fraction:
        return self.hi - self.lo

    @staticmethod
    def symmetric(x: Fraction) -> CoordRange:
        return CoordRange(-abs(x), abs(x))

    def join(self, other: CoordRange) -> CoordRange:
        """A range holding the values of both (their hull; the union of two finite sets)."""
        vals = None
        if self.values is not None and other.values is not None:
            vals = tuple(sorted(set(self.values) | set(other.values)))
        return CoordRange(min(self.lo, other.lo), max(self.hi, other.hi), vals)

    def meet(self, other: CoordRange) -> CoordRange:
        """Both ranges hold: their intersection (the finite set kept when either has one)."""
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        vals = self.values if self.values is not None else other.values
        if vals is not None:
            vals = tuple(v for v in vals if lo <= v <= hi)
        if lo > hi:  # contradictory claims: keep the first (a false claim is check's finding)
            return self
        return CoordRange(lo, hi, vals)


@dataclass(frozen=True)
class Profile:
    """A head's score profile at one n (proofs/07-sharp-chain.md, S2): at every query, the
    k-th visible key below the top (sorted by score, the argmax set excluded) is at least
    ``gap + step·⌊(k−1)/per_rank⌋`` below the top score; ``unique``: the argmax set is one key."""

    gap: Fraction
    step: Fraction = ZERO
    per_rank: int = 1
    unique: bool = False


def profile_tail(p: Profile, m: int, tau: arb) -> arb:
    """S2: an upper bound on R = Σ_{j ∉ A} e^{(s_j − M)/τ} for a query with at most m lower
    keys: r·e^{−a/τ}/(1 − e^{−b/τ}) when b > 0, and m·e^{−a/τ} always (the smaller one)."""
    if m <= 0:
        return arb(0)
    first = (-to_arb(p.gap) / tau).exp()
    best = m * first
    if p.step > 0:
        q = (-to_arb(p.step) / tau).exp()
        den = 1 - q
        if den > 0:
            geo = p.per_rank * first / den
            if geo < best:
                best = geo
    return _up(best)


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class HeadPlan:
    """One head's n-independent structure.

    ``brow[c]``: row c of B = QᵀK (sparse); ``bcol[c2]``: column c2 of B; ``w``: Kᵀb_q
    (sparse); ``grows``: the nonzero rows of G = O·V (output coordinate, sparse row);
    ``flat``: B = 0 and Kᵀb_q = 0, so every visible key has the same score in both meanings;
    ``query``/``key``: the coordinates the score reads on each side.
    """

    layer: int
    head: int
    rule: str
    brow: dict[int, Sparse]
    bcol: dict[int, Sparse]
    w: dict[int, Fraction]
    grows: tuple[tuple[int, Sparse], ...]
    flat: bool
    query: tuple[int, ...]
    key: tuple[int, ...]
    # widths W^G_r and W_c for ranges seen before (the same ranges recur at every n)
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @staticmethod
    def of(layer: int, head: int, h) -> HeadPlan:  # type: ignore[no-untyped-def]
        d = len(h.query[0])
        Q, K, V = h.query, h.key, h.value
        k = len(Q)
        brow: dict[int, Sparse] = {}
        bcol: dict[int, list[tuple[int, Fraction]]] = {}
        for c in range(d):
            qc = [Q[a][c] for a in range(k)]
            if not any(qc):
                continue
            row = []
            for c2 in range(d):
                v = sum((qc[a] * K[a][c2] for a in range(k)), ZERO)
                if v:
                    row.append((c2, v))
                    bcol.setdefault(c2, []).append((c, v))
            if row:
                brow[c] = tuple(row)
        w = {}
        for c2 in range(d):
            v = sum((K[a][c2] * h.query_bias[a] for a in range(k)), ZERO)
            if v:
                w[c2] = v
        if h.output is None:
            G = [list(r) for r in V]
        else:
            O = h.output
            G = [
                [sum((O[r][a] * V[a][c] for a in range(len(V))), ZERO) for c in range(d)]
                for r in range(len(O))
            ]
        grows = tuple((r, _sparse(G[r])) for r in range(len(G)) if any(G[r]))
        flat = not brow and not w
        return HeadPlan(
            layer,
            head,
            h.hard,
            brow,
            {c: tuple(v) for c, v in bcol.items()},
            w,
            grows,
            flat,
            tuple(sorted(brow)),
            tuple(sorted(set(bcol) | set(w))),
        )


@dataclass(frozen=True)
class FFNPlan:
    """One FFN layer's n-independent structure: sparse rows per level, the output rows, the
    sign pairs (a unit and its exact negation) of each level and, for levels ≥ 2, the units
    whose pre-activation is a nonnegative combination of ReLU outputs plus a nonnegative bias
    (linear in both meanings)."""

    levels: tuple[tuple[tuple[Sparse, Fraction], ...], ...]
    out: tuple[tuple[int, Sparse, Fraction], ...]  # (coordinate, sparse row over units, bias)
    pairs: tuple[dict[int, int], ...]  # per level: unit -> its negation (both directions)
    nonneg: tuple[frozenset[int], ...]  # per level: units always in the linear regime
    reads: frozenset[int]  # input coordinates level 1 reads
    written: tuple[int, ...] = ()  # output coordinates (rows of W_out that are not zero)
    # S5's answer for inputs seen before (the same errors and ranges recur at every n on a
    # model whose errors do not depend on n): key -> per written coordinate
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @staticmethod
    def of(layer) -> FFNPlan:  # type: ignore[no-untyped-def]
        levels = []
        pairs = []
        nonneg = []
        for k, (W, b) in enumerate(layer.hidden):
            units = tuple((_sparse(row), Fraction(bb)) for row, bb in zip(W, b, strict=True))
            levels.append(units)
            key = {}
            pm: dict[int, int] = {}
            for u, (row, bb) in enumerate(units):
                key.setdefault((row, bb), u)
            for u, (row, bb) in enumerate(units):
                neg = (tuple((c, -v) for c, v in row), -bb)
                v = key.get(neg)
                if row and v is not None and v != u and u not in pm and v not in pm:
                    pm[u], pm[v] = v, u
            pairs.append(pm)
            nn = set()
            if k > 0:
                for u, (row, bb) in enumerate(units):
                    if bb >= 0 and all(v >= 0 for _, v in row):
                        nn.add(u)
            nonneg.append(frozenset(nn))
        Wo, bo = layer.output
        out = tuple(
            (r, _sparse(row), Fraction(bb))
            for r, (row, bb) in enumerate(zip(Wo, bo, strict=True))
            if any(row)
        )
        reads = frozenset(c for row, _ in levels[0] for c, _ in row)
        written = tuple(r for r, _, _ in out)
        return FFNPlan(tuple(levels), out, tuple(pairs), tuple(nonneg), reads, written)


@dataclass(frozen=True)
class ChainPlan:
    """Everything of the chain that does not depend on n, built once per model."""

    d: int
    layers: tuple[tuple[HeadPlan, ...] | FFNPlan, ...]
    readout: tuple[Sparse, ...]  # accept: one row; argmax: the label-difference rows; value
    readout_kind: str

    @staticmethod
    def of(model: Model) -> ChainPlan:
        layers: list[tuple[HeadPlan, ...] | FFNPlan] = []
        for li, layer in enumerate(model.layers):
            if isinstance(layer, AttentionLayer):
                layers.append(tuple(HeadPlan.of(li, hi, h) for hi, h in enumerate(layer.heads)))
            else:
                layers.append(FFNPlan.of(layer))
        o = model.output
        if isinstance(o, AcceptOutput):
            rows: tuple[Sparse, ...] = (_sparse(o.weight),)
            kind = "accept"
        elif isinstance(o, ArgmaxOutput):
            W = o.weight
            rows = tuple(
                _sparse([a - b for a, b in zip(W[i], W[j], strict=True)])
                for i in range(len(W))
                for j in range(i + 1, len(W))
            )
            kind = "argmax"
        else:
            rows = tuple(_sparse(r) for r in o.weight)
            kind = "value"
        return ChainPlan(model.d, tuple(layers), rows, kind)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class HeadDiagnostic:
    """What one head did at this n (for "which term dominates")."""

    layer: int
    head: int
    sigma: arb  # S1: every score moved by ≤ σ from a query constant
    tail: arb | None  # S2: R at σ = 0 (None: flat head)
    gap: Fraction | None  # the profile's first gap a (None: flat)
    tau: arb
    option: str  # "flat", "mass" (S3) or "tanh" (Theorems 1–2)
    offtop: arb | None  # the weight term's factor (soft mass off the top, or t/2)


@dataclass(frozen=True)
class ChainResult:
    """The chain at one n: per-boundary per-coordinate error bounds (exact points; index 0 is
    the embedding), the read-out bound C·ε (largest over the read-out rows), the same chain
    with the score perturbation's effect on the weights removed (``tail_only``), and the
    per-head diagnostics."""

    errors: tuple[tuple[arb, ...], ...]
    readout: arb
    tail_only: arb
    heads: tuple[HeadDiagnostic, ...] = field(default_factory=tuple)

    def layer_max(self, boundary: int) -> arb:
        best = arb(0)
        for e in self.errors[boundary]:
            best = best.max(e)
        return best


# --------------------------------------------------------------------------- S1–S4: heads


def _interval_of(row: Sparse, ranges: Sequence[CoordRange], pad: Sequence[arb] | None) -> tuple:
    """[lo, hi] of Σ_c row_c·x_c over the hard ranges, widened by pad_c on each side (arb)."""
    lo = arb(0)
    hi = arb(0)
    for c, v in row:
        r = ranges[c]
        a, b = to_arb(r.lo), to_arb(r.hi)
        if pad is not None and pad[c] > 0:
            a, b = a - pad[c], b + pad[c]
        va = to_arb(v)
        if v > 0:
            lo, hi = lo + va * a, hi + va * b
        else:
            lo, hi = lo + va * b, hi + va * a
    return lo, hi


def _widths(h: HeadPlan, ranges: Sequence[CoordRange]) -> dict[int, arb]:
    """W^G_r for every written coordinate r (memoized on the ranges the values read)."""
    key = ("G", tuple(ranges[c] for _, row in h.grows for c, _ in row))
    got = h.memo.get(key)
    if got is None:
        got = {
            r: to_arb(sum((abs(v) * ranges[c].width for c, v in row), ZERO)) for r, row in h.grows
        }
        if len(h.memo) < MEMO_SIZE:
            h.memo[key] = got
    return got


def _sigma(h: HeadPlan, ranges: Sequence[CoordRange], e: Sequence[arb]) -> arb:
    """S1: |s̃_ij − s_ij − C_i| ≤ σ for every visible key j (C_i independent of j)."""
    s = arb(0)
    for c in h.query:  # query-side: e_{i,c}·((B x_j)_c − midpoint): half the width
        if e[c] > 0:
            width = sum((abs(v) * ranges[c2].width for c2, v in h.brow[c]), ZERO)
            if width:
                s += e[c] * to_arb(width) / 2
    for c2 in h.key:  # key-side: (Bᵀx̃_i + w)_{c2}·e_{j,c2}
        if e[c2] > 0:
            lo, hi = _interval_of(h.bcol.get(c2, ()), ranges, e)
            wv = to_arb(h.w.get(c2, ZERO))
            lo, hi = lo + wv, hi + wv
            s += abs(lo).max(abs(hi)) * e[c2]
    return _up(s)


def _top_constant(h: HeadPlan, ranges: Sequence[CoordRange], prof: Profile | None) -> bool:
    """The hard output equals the value at any top key: a unique top (claimed), or the score
    reads on the query side only coordinates whose hard value is one constant and every row
    of G is a multiple of the resulting key form (the value is a function of the score)."""
    if prof is not None and prof.unique:
        return True
    if any(ranges[c].lo != ranges[c].hi for c in h.query):
        return False
    # u = Bᵀx_i + w, the same vector at every query
    u: dict[int, Fraction] = dict(h.w)
    for c in h.query:
        x = ranges[c].lo
        for c2, v in h.brow[c]:
            u[c2] = u.get(c2, ZERO) + v * x
    u = {c: v for c, v in u.items() if v}
    if not u:
        return False
    c0, u0 = next(iter(u.items()))
    for _, row in h.grows:
        g = dict(row)
        lam = g.get(c0, ZERO) / u0
        if set(g) - set(u) or any(g.get(c, ZERO) != lam * v for c, v in u.items()):
            return False
    return True


def _head(
    h: HeadPlan,
    ranges: Sequence[CoordRange],
    e: Sequence[arb],
    prof: Profile | None,
    m: int,
    tau: arb,
    unique: bool,
) -> tuple[dict[int, arb], dict[int, arb], HeadDiagnostic]:
    """One head's output error per written coordinate (and its σ = 0 variant)."""
    passes = {}
    widths = _widths(h, ranges)
    for r, row in h.grows:
        p = arb(0)
        for c, v in row:
            if e[c] > 0:
                p += _qa(v) * e[c]
        passes[r] = p
    if h.flat or prof is None:
        out = {r: _up(passes[r]) for r in passes}
        diag = HeadDiagnostic(h.layer, h.head, arb(0), None, None, tau, "flat", None)
        return out, dict(out), diag
    if unique and not prof.unique:
        prof = Profile(prof.gap, prof.step, prof.per_rank, True)
    sigma = _sigma(h, ranges, e)
    R0 = profile_tail(prof, m, tau)
    base0 = _up(R0 / (1 + R0))  # S3 at σ = 0: ½‖p − h‖₁ (Theorem 1)
    # Theorems 1–2: ½‖p̃ − h‖₁ ≤ min(1, tanh(σ/2τ) + R/(1+R))
    half_t = _up((sigma / (2 * tau)).tanh() + base0).min(arb(1))
    factor, option = half_t, "tanh"
    if _top_constant(h, ranges, prof):
        x = 2 * sigma / tau
        if x < SAT:
            Rs = x.exp() * R0
            mass = _up(Rs / (1 + Rs)).min(arb(1))
            if mass < factor:
                factor, option = mass, "mass"
    out = {}
    base = {}
    for r in passes:
        out[r] = _up(passes[r] + factor * widths[r])
        base[r] = _up(passes[r] + base0 * widths[r])
    diag = HeadDiagnostic(h.layer, h.head, sigma, R0, prof.gap, tau, option, factor)
    return out, base, diag


# --------------------------------------------------------------------------- S5: FFN

Form = dict[object, Fraction]  # symbol -> coefficient; symbols: ("x", c) or ("u", id)


def _bound(form: Form, bounds: dict[object, arb]) -> arb:
    s = arb(0)
    for k, v in form.items():
        if v:
            s += _qa(v) * bounds[k]
    return s


def _add(acc: Form, form: Form, k: Fraction) -> None:
    if not k:
        return
    for s, v in form.items():
        acc[s] = acc.get(s, ZERO) + k * v


def _relu_iv(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    return max(lo, ZERO), max(hi, ZERO)


@lru_cache(maxsize=4096)
def _qa(v: Fraction) -> arb:
    """|v| as a ball (memoized: the same few weights recur at every n)."""
    return to_arb(abs(v))


def _live(f: FFNPlan, e: Sequence[arb]) -> tuple[list[set[int]], list[set[int]]]:
    """Per level, the units whose error form may be nonzero (``live``) and the units whose
    hard intervals are needed (the live ones and every unit a needed unit reads)."""
    live: list[set[int]] = []
    for k, units in enumerate(f.levels):
        if k == 0:
            live.append({u for u, (row, _) in enumerate(units) if any(e[c] > 0 for c, _ in row)})
        else:
            prev = live[-1]
            live.append({u for u, (row, _) in enumerate(units) if any(v in prev for v, _ in row)})
    need = [set(x) for x in live]
    for k in range(len(f.levels) - 1, 0, -1):
        for u in need[k]:
            need[k - 1].update(v for v, _ in f.levels[k][u][0])
    return live, need


Lin = dict[int, Fraction]  # a linear form Σ_c a_c e_c in the input error bounds (a_c ≥ 0)


def _lin_eval(lin: Lin, e: Sequence[arb]) -> arb:
    s = arb(0)
    for c, a in lin.items():
        s += _qa(a) * e[c]  # a ≥ 0
    return s


Balls = tuple[tuple[int, arb], ...]  # a Lin with its coefficients as balls, in the same order


def _balls(lin: Lin) -> Balls:
    return tuple((c, _qa(a)) for c, a in lin.items())


def _balls_eval(lin: Balls, e: Sequence[arb]) -> arb:
    """:func:`_lin_eval` of a form stored in the trie (the same operations in the same order,
    so the same ball; the trie is walked millions of times in a ``certify`` τ grid walk)."""
    s = arb(0)
    for c, a in lin:
        s += a * e[c]
    return s


def _lin_add(acc: Lin, lin: Lin, k: Fraction) -> None:
    for c, a in lin.items():
        acc[c] = acc.get(c, ZERO) + k * a


def _ffn_config(
    f: FFNPlan,
    ranges: Sequence[CoordRange],
    e: Sequence[arb],
    assign: dict[int, Fraction],
    live: list[set[int]],
    need: list[set[int]],
) -> dict[int, arb]:
    """S5 for one joint assignment of the split coordinates: the output error per written
    coordinate (residual included), following only the units ``live`` and ``need`` name.

    Every bound is a linear form in the input errors e_c, fixed once the regime of each unit
    is decided (lin / off / ½φ + ξ); the decisions depend on e only through comparisons of
    such forms with the hard intervals. So the forms are derived once per sequence of
    decisions and kept in a trie (``f.memo``): at a later n the walk only evaluates the
    stored forms at the new e, and the symbolic work runs again only for a new decision."""
    reads = sorted({c for u in need[0] for c, _ in f.levels[0][u][0]})
    key = (
        "cfg",
        tuple(c for c in reads if e[c] > 0),
        tuple(sorted(assign.items())),
        tuple(ranges[c] for c in reads if c not in assign),
        tuple(r for r in f.written if e[r] > 0),
    )
    root = f.memo.get(key)
    if root is None:
        root = {}
        if len(f.memo) < MEMO_SIZE:
            f.memo[key] = root
    node = root
    while node:
        if "leaf" in node:
            return {r: _up(_balls_eval(lin, e)) for r, lin in node["leaf"].items()}
        lo, hi, lin = node["test"]
        nxt = node["kids"].get(_decide_balls(lo, hi, _balls_eval(lin, e)))
        if nxt is None:
            break
        node = nxt
    return _ffn_symbolic(f, ranges, e, assign, need, live[-1], root)


def _decide(lo: Fraction, hi: Fraction, E: arb) -> str:
    """S5 step 2 for a unit with an error form: linear, off, or uncertain."""
    return _decide_balls(to_arb(lo), to_arb(hi), E)


def _decide_balls(lo: arb, hi: arb, E: arb) -> str:
    """:func:`_decide` with the hard interval's ends already balls (as the trie keeps them)."""
    if (lo - E) >= 0:
        return "lin"
    if (hi + E) <= 0:
        return "off"
    return "unc"


def _ffn_symbolic(
    f: FFNPlan,
    ranges: Sequence[CoordRange],
    e: Sequence[arb],
    assign: dict[int, Fraction],
    need: list[set[int]],
    top: set[int],
    root: dict,
) -> dict[int, arb]:
    """The affine forms of S5 for one configuration, the bound of every symbol a linear
    form in e; records each decision (and the final forms) in the trie at ``root``."""
    bounds: dict[object, Lin] = {}
    fresh = itertools.count()
    node = root
    prev_forms: dict[int, Form] = {}
    prev_ivs: dict[int, tuple[Fraction, Fraction]] = {}
    for k, units in enumerate(f.levels):
        forms: dict[int, Form] = {}
        ivs: dict[int, tuple[Fraction, Fraction]] = {}
        pm = f.pairs[k]
        shared: dict[int, object] = {}
        for u in sorted(need[k]):
            row, b = units[u]
            form: Form = {}
            lo = hi = b
            if k == 0:
                for c, v in row:
                    if e[c] > 0:
                        sym = ("x", c)
                        bounds[sym] = {c: Fraction(1)}
                        form[sym] = form.get(sym, ZERO) + v
                    x = assign.get(c)
                    if x is not None:
                        lo += v * x
                        hi += v * x
                    else:
                        rc = ranges[c]
                        a, bb = (v * rc.lo, v * rc.hi) if v > 0 else (v * rc.hi, v * rc.lo)
                        lo += a
                        hi += bb
            else:
                for w, v in row:
                    pf = prev_forms.get(w)
                    if pf:
                        _add(form, pf, v)
                    a, bb = prev_ivs[w]
                    a, bb = (v * a, v * bb) if v > 0 else (v * bb, v * a)
                    lo += a
                    hi += bb
            ivs[u] = (max(lo, ZERO), max(hi, ZERO))
            form = {sy: v for sy, v in form.items() if v}
            if not form:
                continue
            if u in f.nonneg[k]:
                forms[u] = form  # linear in both meanings (nonnegative inputs and bias)
                continue
            lin: Lin = {}
            for sy, v in form.items():
                _lin_add(lin, bounds[sy], abs(v))
            d = _decide(lo, hi, _lin_eval(lin, e))
            if "test" not in node:
                node["test"] = (to_arb(lo), to_arb(hi), _balls(lin))
                node["kids"] = {}
            node = node["kids"].setdefault(d, {})
            if d == "lin":
                forms[u] = form
                continue
            if d == "off":
                continue
            # uncertain: ReLU(z + δ) − ReLU(z) = θδ, θ ∈ [0, 1]: ½δ + ξ with |ξ| ≤ ½|δ|;
            # a sign pair (z, −z) shares ξ since ReLU(z) − ReLU(−z) = z in both meanings
            partner = pm.get(u)
            if partner is not None and partner in shared:
                sym = shared[partner]
            else:
                sym = ("u", next(fresh))
                bounds[sym] = {c: a / 2 for c, a in lin.items()}
                if partner is not None:
                    shared[u] = sym
            o: Form = {sy: v / 2 for sy, v in form.items()}
            o[sym] = o.get(sym, ZERO) + 1
            forms[u] = o
        prev_forms, prev_ivs = forms, ivs
    leaf: dict[int, Lin] = {}
    for r, row, _ in f.out:
        form = {}
        if e[r] > 0:
            form[("x", r)] = Fraction(1)
            bounds[("x", r)] = {r: Fraction(1)}
        for u, v in row:
            if u in top:
                pf = prev_forms.get(u)
                if pf:
                    _add(form, pf, v)
        lin = {}
        for sy, v in form.items():
            if v:
                _lin_add(lin, bounds[sy], abs(v))
        if form:
            leaf[r] = lin
    node["leaf"] = {r: _balls(lin) for r, lin in leaf.items()}
    return {r: _up(_lin_eval(lin, e)) for r, lin in leaf.items()}


def _ffn(f: FFNPlan, classes: Sequence[Sequence[CoordRange]], e: Sequence[arb]) -> list[arb]:
    """S5 over every position class (the FFN acts position-wise): the largest bound."""
    key = (
        tuple(tuple(ranges[c] for c in sorted(f.reads)) for ranges in classes),
        tuple(_ekey(e[c]) for c in sorted(f.reads)),
        tuple(_ekey(e[r]) for r in f.written),
    )
    best = f.memo.get(key)
    if best is None:
        best = {}
        for ranges in classes:
            for r, v in _ffn_class(f, ranges, e).items():
                best[r] = v if r not in best else best[r].max(v)
        if len(f.memo) < MEMO_SIZE:
            f.memo[key] = best
    new = list(e)
    for r, v in best.items():
        new[r] = v
    return new


def _ekey(x: arb) -> tuple[int, int, int, int]:
    """An exact point (or ball) as a hashable key: its midpoint and radius, exactly."""
    m, ex = x.mid().man_exp()
    r, rx = x.rad().man_exp()
    return int(m), int(ex), int(r), int(rx)


def _components(f: FFNPlan, noisy: set[int]) -> list[set[int]]:
    """The input coordinates with an error, grouped so that no unit's error form mixes two
    groups: level-1 units sharing an erroneous input, and every unit of a later level with
    all the erroneous units it reads, are in one group (union-find)."""
    parent: dict[object, object] = {}

    def find(x: object) -> object:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]  # type: ignore[index]
            x = parent[x]
        return x

    def union(a: object, b: object) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    live: set[tuple[int, int]] = set()
    for u, (row, _) in enumerate(f.levels[0]):
        cs = [c for c, _ in row if c in noisy]
        for c in cs:
            union(("u", 0, u), ("x", c))
        if cs:
            live.add((0, u))
    for k in range(1, len(f.levels)):
        for u, (row, _) in enumerate(f.levels[k]):
            reads = [v for v, _ in row if (k - 1, v) in live]
            for v in reads:
                union(("u", k, u), ("u", k - 1, v))
            if reads:
                live.add((k, u))
    groups: dict[object, set[int]] = {}
    for c in noisy:
        groups.setdefault(find(("x", c)), set()).add(c)
    return list(groups.values())


def _ffn_class(f: FFNPlan, ranges: Sequence[CoordRange], e: Sequence[arb]) -> dict[int, arb]:
    """S5: per-coordinate errors after an FFN layer for positions whose hard values lie in
    ``ranges``: for each group of erroneous inputs (:func:`_components`) the largest bound over
    its case split, summed over the groups (their error forms share no symbol)."""
    noisy = {c for c in f.reads if e[c] > 0}
    if not noisy:
        return {}  # no input error reaches the FFN: it adds no error
    total: dict[int, arb] = {}
    for group in _components(f, noisy):
        eg = [e[c] if c in group else arb(0) for c in range(len(e))]
        for r, v in _ffn_group(f, ranges, eg).items():
            total[r] = v if r not in total else _up(total[r] + v)
    for r, _, _ in f.out:  # a written coordinate no unit reads keeps its own error too
        if e[r] > 0 and r not in noisy:
            total[r] = _up(total.get(r, arb(0)) + e[r])
    return total


def _ffn_group(f: FFNPlan, ranges: Sequence[CoordRange], e: Sequence[arb]) -> dict[int, arb]:
    """S5 for the inputs with e_c > 0 (one group): the largest bound over the case split."""
    live, need = _live(f, e)
    # split coordinates: finite sets read by a live level-1 unit (a unit with an erroneous
    # input), the erroneous ones first, as many as MAX_CONFIGS allows
    cand: dict[int, bool] = {}
    for u in live[0]:
        for c, _ in f.levels[0][u][0]:
            vals = ranges[c].values
            if vals is not None and 1 < len(vals) <= MAX_SET:
                cand[c] = not e[c] > 0
    split: list[int] = []
    total = 1
    for c in sorted(cand, key=lambda c: (cand[c], c)):
        k = len(ranges[c].values or ())
        if total * k <= MAX_CONFIGS:
            split.append(c)
            total *= k
    best: dict[int, arb] = {}
    for combo in itertools.product(*(ranges[c].values or () for c in split)):
        res = _ffn_config(f, ranges, e, dict(zip(split, combo, strict=True)), live, need)
        for r, v in res.items():
            best[r] = v if r not in best else best[r].max(v)
    return best


# --------------------------------------------------------------------------- the chain


def sharp_chain(
    plan: ChainPlan,
    ranges: Sequence[Sequence[Sequence[CoordRange]]],
    profiles: dict[tuple[int, int], Profile | None],
    m: int,
    taus: Sequence[Sequence[arb] | None],
    unique: dict[tuple[int, int], bool] | None = None,
    diagnose: bool = True,
) -> ChainResult:
    """Theorem S at one length.

    ``ranges[ℓ]``: the hard ranges at boundary ℓ (0 = embedding, ℓ = the output of layer
    ℓ − 1) as position classes: ``ranges[ℓ][k][c]`` holds coordinate c at every position of
    class k (e.g. BOS and the rest); the classes together cover every position;
    ``profiles[(layer, head)]``: the head's profile (None only for a flat head; the caller
    passes the global γ as a profile with step 0 for a head without its own); ``m``: at
    most this many visible keys below the top (T − 1);
    ``taus[ℓ][h]``: each head's τ (certified > 0); ``unique``: heads whose argmax set is a
    singleton by another claim (H3 for leftmost/rightmost heads).
    """
    uq = unique or {}
    d = plan.d
    e: list[arb] = [arb(0)] * d
    base: list[arb] = [arb(0)] * d  # the same chain with σ = 0 in every weight term
    errors = [tuple(e)]
    diags: list[HeadDiagnostic] = []
    hulls: dict[int, list[CoordRange]] = {}  # by the identity of a boundary's classes (alive)
    for li, layer in enumerate(plan.layers):
        classes = ranges[li]
        if isinstance(layer, FFNPlan):
            e = _ffn(layer, classes, e)
            if diagnose:
                base = _ffn(layer, classes, base)
        else:
            row = taus[li]
            assert row is not None
            rg = hulls.get(id(classes))
            if rg is None:
                rg = hulls[id(classes)] = hull(classes)
            new = list(e)
            newb = list(base)
            for h in layer:
                key = (h.layer, h.head)
                if not h.flat and profiles.get(key) is None:
                    raise ValueError(f"head {key}: no profile and scores not constant")
                out, _, diag = _head(
                    h, rg, e, profiles.get(key), m, row[h.head], uq.get(key, False)
                )
                for r, v in out.items():
                    new[r] = _up(new[r] + v)
                if diagnose:  # the tail-only chain: the weight terms at σ = 0
                    _, ob, _ = _head(
                        h, rg, base, profiles.get(key), m, row[h.head], uq.get(key, False)
                    )
                    for r, v in ob.items():
                        newb[r] = _up(newb[r] + v)
                diags.append(diag)
            e = new
            base = newb
        errors.append(tuple(e))
    return ChainResult(
        tuple(errors), _readout(plan, e), _readout(plan, base) if diagnose else arb(0), tuple(diags)
    )


def hull(classes: Sequence[Sequence[CoordRange]]) -> list[CoordRange]:
    """One range per coordinate holding it at every position (the hull of the classes)."""
    out = list(classes[0])
    for cl in classes[1:]:
        out = [a.join(b) for a, b in zip(out, cl, strict=True)]
    return out


def head_bound(
    h: HeadPlan,
    ranges: Sequence[CoordRange],
    e: Sequence[arb],
    prof: Profile | None,
    m: int,
    tau: arb,
    unique: bool = False,
) -> tuple[dict[int, arb], HeadDiagnostic]:
    """S4 for one head: the bound on |ỹ_r − y_r| per written coordinate r (hull ranges)."""
    out, _, diag = _head(h, ranges, e, prof, m, tau, unique)
    return out, diag


def ffn_bound(f: FFNPlan, classes: Sequence[Sequence[CoordRange]], e: Sequence[arb]) -> list[arb]:
    """S5 for one FFN layer: the per-coordinate error bounds after it (residual included)."""
    return _ffn(f, classes, e)


def _readout(plan: ChainPlan, e: Sequence[arb]) -> arb:
    """S6: the largest read-out row's Σ_c |w_c|·e_c (C·ε, per coordinate)."""
    best = arb(0)
    for row in plan.readout:
        s = arb(0)
        for c, v in row:
            if e[c] > 0:
                s += abs(to_arb(v)) * e[c]
        best = best.max(_up(s))
    return best
