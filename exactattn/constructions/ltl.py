"""Compile LTL with previous/next, since/until and counting into format-1 transformers.

Why the construction looks the way it does (details and proofs: docs/constructions.md and
proofs/constructions.md):

* Every subformula gets one residual coordinate holding its truth value, 0 or 1, and
  0 at the BOS position.
* Boolean connectives are computed exactly by ReLU feed-forward layers.
* Each temporal operator (Y, X, S, U) and each count comparison is one attention head
  whose soft output is within e^{-3} of its hard output, for every n. The feed-forward
  layer that follows rounds it back to an exact 0/1 (δ = 1/4 rounding) and cancels the
  raw value, so after every block the soft and hard activations are equal again and
  errors never accumulate across operators.
* Counts are uniform attention (constant scores), which softmax reproduces exactly.
* The two schemes have the same weights. ``temperature``: bounded position embeddings
  (i/n, …) and τ = 1/n. ``positions``: every position-embedding coordinate multiplied by
  n (i, n, …) and τ = 1. Every score term has exactly one position-embedding factor, so
  the scores of the second scheme are n times those of the first and s/τ is identical:
  both schemes compute the same soft attention weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactattn.core.limits import MAX_NAME
from exactattn.logic.ltl import (
    And,
    Atom,
    Compare,
    Const,
    Count,
    Formula,
    Next,
    Not,
    Or,
    Prev,
    Since,
    Until,
    compare_ints,
    format_ltl,
    normalize,
    parse_ltl,
)
from exactattn.model.claimed import claims_object
from exactattn.model.provenance import stamp

SCHEMES = ("temperature", "positions")
#: effective score spacing (score/τ) of the Y, X, S, U heads: off-target mass ≤ e^{-3}
TIER = 3
#: comparison heads: effective score of the self key is CMP_SCALE·(L − 1/2)
CMP_SCALE = 6
#: comparison heads: effective spacing between consecutive non-BOS keys
CMP_TIER = 3

BOS_COORD = "<bos>"
TRUE_COORD = "true"

# position-embedding coordinates: (temperature-scheme expression, positions-scheme expression);
# the second is n times the first (proofs/constructions.md, Lemma "same weights").
PE = {
    "pe:p": ("i/n", "i"),
    "pe:N": ("min(i,1)", "n*min(i,1)"),
    "pe:kpast": ("min(i,1)*(i+1)/n", "min(i,1)*(i+1)"),
    "pe:kfut": ("min(i,1)*(n-i+1)/n", "min(i,1)*(n-i+1)"),
}


def _num(x: Fraction | int) -> int | str:
    """An exact JSON number: an int, or a "p/q" string."""
    x = Fraction(x)
    return x.numerator if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _mk_not(f: Formula) -> Formula:
    if isinstance(f, Not):
        return f.arg
    if isinstance(f, Const):
        return Const(not f.value)
    return Not(f)


def _conjuncts(f: Formula) -> list[Formula]:
    return [*_conjuncts(f.left), *_conjuncts(f.right)] if isinstance(f, And) else [f]


def operands(f: And | Or) -> list[Formula]:
    """The leaves of a chain of the same connective (one ReLU computes them all at once)."""
    out: list[Formula] = []
    for side in (f.left, f.right):
        if type(side) is type(f):
            out.extend(operands(side))  # type: ignore[arg-type]
        else:
            out.append(side)
    return list(dict.fromkeys(out))


def candidate(f: Since | Until) -> Formula:
    """Positions that stop the search of S/U: ψ ∨ ¬φ (the nearest one decides).

    Simplified when ψ implies ¬φ syntactically (ψ = ¬φ ∧ …): then the candidates are ¬φ,
    and heads searching for the same ¬φ share their scores (e.g. induction heads).
    """
    stop = _mk_not(f.left)
    if stop in _conjuncts(f.right) or f.right == Const(False):
        return stop
    if isinstance(stop, Const) and not stop.value:
        return f.right
    return Or(f.right, stop)


def _const_compare(f: Compare) -> bool | None:
    coeffs, const = normalize(f)
    return compare_ints(const, f.op) if not coeffs else None


# tests [σ·ℓ + κ ≥ 1] for each comparison operator, ℓ = Σ coeff·count, L = ℓ + c0
def _tests(op: str, c0: int) -> tuple[list[tuple[int, int]], int, str]:
    """(tests (σ, κ), shift, how) — the node is r(Σ tests + shift)."""
    ge1 = (1, c0)  # L ≥ 1
    ge0 = (1, c0 + 1)  # L ≥ 0
    le_1 = (-1, -c0)  # −L ≥ 1
    le0 = (-1, -c0 + 1)  # −L ≥ 0
    table = {
        ">": ([ge1], 0, "L > 0"),
        ">=": ([ge0], 0, "L ≥ 0"),
        "<": ([le_1], 0, "L < 0"),
        "<=": ([le0], 0, "L ≤ 0"),
        "=": ([ge0, le0], -1, "L ≥ 0 and L ≤ 0: both tests hold"),
        "!=": ([ge1, le_1], 0, "L ≥ 1 or L ≤ −1: exclusive tests"),
    }
    return table[op]


# ---------------------------------------------------------------------------
# builder
# ---------------------------------------------------------------------------


@dataclass
class _Unit:
    weights: dict[int, Fraction]
    bias: Fraction = Fraction(0)


@dataclass
class _Rounding:
    """A Boolean node restored from raw attention outputs: node = r(Σ raws + shift − bos)."""

    node: Formula
    raws: list[int]
    shift: int


@dataclass
class _Head:
    name: str
    mask: str
    query: list[dict[int, Fraction]]
    key: list[dict[int, Fraction]]
    value: list[dict[int, Fraction]]
    out: list[int]  # residual coordinate written by each value row
    kind: str = "count"  # "temporal" (Y/X/S/U), "test" (a comparison) or "count" (uniform)


@dataclass
class _Block:
    heads: list[_Head] = field(default_factory=list)
    roundings: list[_Rounding] = field(default_factory=list)
    gates: list[Formula] = field(default_factory=list)


class _Compiler:
    def __init__(
        self,
        alphabet: Sequence[str],
        scheme: str,
        abbrev: Mapping[Formula, str] | None = None,
    ) -> None:
        self.abbrev = dict(abbrev or {})
        if scheme not in SCHEMES:
            raise ValueError(f"unknown scheme {scheme!r}: use one of {', '.join(SCHEMES)}")
        if len(set(alphabet)) != len(alphabet) or not alphabet:
            raise ValueError("the alphabet must be a non-empty list of distinct symbols")
        self.alphabet = list(alphabet)
        self.scheme = scheme
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.pe: dict[int, str] = {}
        self.node_coord: dict[Formula, int | None] = {}
        self.count_coord: dict[Count, int] = {}
        self.bos = self.coord(BOS_COORD)
        self.true = self.coord(TRUE_COORD)
        for a in self.alphabet:
            self.node_coord[Atom(a)] = self.coord(a)
        self.node_coord[Const(True)] = self.true
        self.node_coord[Const(False)] = None

    def fmt(self, f: Formula) -> str:
        return format_ltl(f, self.abbrev)

    def coord(self, name: str, fresh: bool = False) -> int:
        """The coordinate called ``name``; ``fresh``: it must be new (one per node)."""
        if fresh and name in self.index:
            raise AssertionError(f"two nodes would share the coordinate name {name!r}")
        if name not in self.index:
            self.index[name] = len(self.names)
            self.names.append(name)
        return self.index[name]

    def pe_coord(self, name: str) -> int:
        k = self.coord(name)
        self.pe[k] = PE[name][0 if self.scheme == "temperature" else 1]
        return k

    def vec(self, node: Formula, scale: Fraction | int = 1) -> dict[int, Fraction]:
        k = self.node_coord[node]
        return {} if k is None else {k: Fraction(scale)}

    # -- analysis ---------------------------------------------------------------
    def deps(self, f: Formula) -> list[Formula]:
        """What computing ``f`` reads: n-ary operands for gates, keys/values for heads."""
        if isinstance(f, (Not, Prev, Next)):
            return [f.arg]
        if isinstance(f, (And, Or)):
            return operands(f)
        if isinstance(f, (Since, Until)):
            return [f.right, candidate(f)]
        if isinstance(f, Compare):
            return [t.arg for t in normalize(f)[0]]
        return []

    def schedule(self, roots: Sequence[Formula]) -> list[_Block]:
        depth: dict[Formula, int] = {}
        order: list[Formula] = []
        count_depth: dict[Count, int] = {}

        def visit(f: Formula) -> int:
            if f in depth:
                return depth[f]
            ds = [visit(g) for g in self.deps(f)]
            m = max(ds, default=0)
            if isinstance(f, (Prev, Next, Since, Until)):
                d = m + 1
            elif isinstance(f, Compare):
                if _const_compare(f) is not None:
                    d = 0
                else:
                    cd = 0
                    for t in normalize(f)[0]:
                        count_depth[t] = depth[t.arg] + 1
                        cd = max(cd, count_depth[t])
                    d = cd + 1
            else:
                d = m
            depth[f] = d
            order.append(f)
            return d

        for r in roots:
            visit(r)
        nblocks = max([*depth.values(), *count_depth.values(), 0]) + 1
        # gates as late as possible: a gate read only by gates of a later block is
        # computed there, inside that block's feed-forward layer, and needs no coordinate
        latest: dict[Formula, int] = {r: nblocks - 1 for r in roots}
        for f in reversed(order):
            if isinstance(f, (Not, And, Or)):
                depth[f] = max(depth[f], latest.get(f, depth[f]))
            for g in self.deps(f):
                bound = depth[f] if isinstance(f, (Not, And, Or)) else depth[f] - 1
                if isinstance(f, Compare):
                    bound = min(count_depth[t] for t in normalize(f)[0] if t.arg == g) - 1
                latest[g] = min(latest.get(g, bound), bound)
        blocks = [_Block() for _ in range(nblocks)]
        self.depth = depth
        self.count_depth = count_depth
        self.order = order
        return blocks

    # -- heads ------------------------------------------------------------------
    def temporal_head(self, f: Prev | Next | Since | Until) -> _Head:
        k = self.coord(self.fmt(f), fresh=True)
        self.node_coord[f] = k
        p = self.pe_coord("pe:p")
        t = Fraction(TIER)
        name = self.fmt(f)
        if isinstance(f, (Prev, Next)):
            sign = 1 if isinstance(f, Prev) else -1
            # effective score ±TIER·j: the nearest visible position wins by geometric tiers
            return _Head(
                name,
                "lt" if sign > 0 else "gt",
                query=[{self.true: sign * t}],
                key=[{p: Fraction(1)}],
                value=[self.vec(f.arg)],
                out=[k],
                kind="temporal",
            )
        big = self.pe_coord("pe:N")
        sign = 1 if isinstance(f, Since) else -1
        # effective score TIER·(n·c_j ± j): candidates first, then the nearest one
        return _Head(
            name,
            "lt" if sign > 0 else "gt",
            query=[{big: t}, {self.true: sign * t}],
            key=[self.vec(candidate(f)), {p: Fraction(1)}],
            value=[self.vec(f.right)],
            out=[k],
            kind="temporal",
        )

    def count_heads(self, counts: list[Count], need_w: bool) -> list[_Head]:
        heads = []
        past = [c for c in counts if not c.future]
        fut = [c for c in counts if c.future]
        if past or need_w:
            value, out = [], []
            for c in past:
                self.count_coord[c] = self.coord(f"#[{self.fmt(c.arg)}]/(i+1)")
                value.append(self.vec(c.arg))
                out.append(self.count_coord[c])
            if need_w:
                value.append({self.bos: Fraction(1)})
                out.append(self.w)
            heads.append(_Head("counts j<=i (uniform)", "leq", [{}], [{}], value, out))
        if fut:
            value, out = [], []
            for c in fut:
                self.count_coord[c] = self.coord(f"#>[{self.fmt(c.arg)}]/(n-i+1)")
                value.append(self.vec(c.arg))
                out.append(self.count_coord[c])
            heads.append(_Head("counts j>=i (uniform)", "geq", [{}], [{}], value, out))
        return heads

    def compare_heads(self, f: Compare) -> tuple[list[_Head], _Rounding]:
        coeffs, c0 = normalize(f)
        tests, shift, _ = _tests(f.op, c0)
        name = self.fmt(f)
        node = self.coord(name, fresh=True)
        self.node_coord[f] = node
        past = {t: a for t, a in coeffs.items() if not t.future}
        fut = {t: a for t, a in coeffs.items() if t.future}
        a_sum = sum(abs(a) for a in past.values())
        b_sum = sum(abs(b) for b in fut.values())
        kpast = self.pe_coord("pe:kpast")
        kfut = self.pe_coord("pe:kfut")
        p = self.pe_coord("pe:p")
        c = Fraction(CMP_SCALE)
        heads, raws = [], []
        for ti, (sigma, kappa) in enumerate(tests):
            raw = node if len(tests) == 1 else self.coord(f"test{ti}: {name}")
            raws.append(raw)
            half = Fraction(kappa) - Fraction(1, 2)
            # slope of the effective score in j stays ≥ CMP_TIER (proofs/constructions.md C.6)
            slope_b = CMP_TIER + c * (a_sum + b_sum + abs(half) / 2)
            q_past: dict[int, Fraction] = {self.w: c * half}
            for t, a in past.items():
                q_past[self.count_coord[t]] = c * sigma * a
            query = [q_past, {self.true: slope_b}, {p: -slope_b}]
            key = [{kpast: Fraction(1)}, {p: Fraction(1)}, {self.true: Fraction(1)}]
            if fut:
                query.append({self.count_coord[t]: c * sigma * b for t, b in fut.items()})
                key.append({kfut: Fraction(1)})
            shift_l = kappa - sigma * c0
            label = f"{'' if sigma > 0 else '-'}L{'' if not shift_l else f'{shift_l:+d}'} >= 1"
            heads.append(
                _Head(
                    f"{name} [test {label}]",
                    "leq",
                    query,
                    key,
                    [{self.true: Fraction(1)}],
                    [raw],
                    "test",
                )
            )
        return heads, _Rounding(f, raws, shift)

    # -- feed-forward -------------------------------------------------------------
    def ffn(self, block: _Block) -> dict[str, Any]:
        """Round the block's raw outputs and compute its gates, exactly (one deep FFN)."""
        levels: list[list[_Unit]] = [[]]  # levels[0] unused: level 0 is the residual
        form: dict[tuple[Any, int], dict[int, Fraction]] = {}
        lvl: dict[Any, int] = {}

        def unit(level: int, weights: dict[int, Fraction], bias: Fraction = Fraction(0)) -> int:
            while len(levels) <= level:
                levels.append([])
            levels[level].append(_Unit({k: v for k, v in weights.items() if v}, bias))
            return len(levels[level]) - 1

        def add(*parts: tuple[Fraction | int, dict[int, Fraction]]) -> dict[int, Fraction]:
            out: dict[int, Fraction] = {}
            for s, f in parts:
                for k, v in f.items():
                    out[k] = out.get(k, Fraction(0)) + Fraction(s) * v
            return {k: v for k, v in out.items() if v}

        def at(key: Any, level: int) -> dict[int, Fraction]:
            """The form of a Boolean (≥ 0) at `level`, lifting it through ReLUs (exact)."""
            if (key, level) in form:
                return form[(key, level)]
            base = lvl[key]
            if level < base:
                raise AssertionError("form requested below its level")
            f = {unit(level, at(key, level - 1)): Fraction(1)}
            form[(key, level)] = f
            return f

        def ready(key: Any, coord: int | None) -> None:
            lvl[key] = 0
            form[(key, 0)] = {} if coord is None else {coord: Fraction(1)}

        ready("true", self.true)
        # rounding: node = r(x), x = Σ raws + shift − bos; r(x) = ReLU(2x−1/2) − ReLU(2x−3/2)
        cancel: dict[int, tuple[int, int]] = {}
        for rd in block.roundings:
            x = {r: Fraction(1) for r in rd.raws}
            x[self.bos] = Fraction(-1)
            two_x = {k: 2 * v for k, v in x.items()}
            h3 = unit(1, two_x, Fraction(2 * rd.shift) - Fraction(1, 2))
            h4 = unit(1, two_x, Fraction(2 * rd.shift) - Fraction(3, 2))
            lvl[rd.node] = 1
            form[(rd.node, 1)] = {h3: Fraction(1), h4: Fraction(-1)}
            for r in rd.raws:
                pos = unit(1, {r: Fraction(1)})
                neg = unit(1, {r: Fraction(-1)})
                cancel[r] = (pos, neg)
        # gates in dependency order
        for g in block.gates:
            for child in self.deps(g):
                if child not in lvl:
                    ready(child, self.node_coord[child])
            if isinstance(g, Not):
                lv = lvl[g.arg]
                lvl[g] = lv
                form[(g, lv)] = add((1, at("true", lv)), (-1, at(g.arg, lv)))
            elif isinstance(g, And):
                ops = operands(g)
                lv = 1 + max(lvl[o] for o in ops)
                # AND of m Booleans: ReLU(Σ x − (m−1)), with "true" so that BOS stays 0
                pre = add(*((1, at(o, lv - 1)) for o in ops), (1 - len(ops), at("true", lv - 1)))
                lvl[g] = lv
                form[(g, lv)] = {unit(lv, pre): Fraction(1)}
            elif isinstance(g, Or):
                ops = operands(g)
                lv = 1 + max(lvl[o] for o in ops)
                # OR of m Booleans: 1 − ReLU(1 − Σ x)
                pre = add((1, at("true", lv - 1)), *((-1, at(o, lv - 1)) for o in ops))
                h = unit(lv, pre)
                lvl[g] = lv
                form[(g, lv)] = add((1, at("true", lv)), (-1, {h: Fraction(1)}))
            else:
                raise AssertionError(f"not a gate: {g!r}")
        outputs: list[Formula] = [rd.node for rd in block.roundings] + [
            g for g in block.gates if g in self.outside
        ]
        depth = max([1, *(lvl[o] for o in outputs)])
        # carry the cancellation units up to the last level (ReLU of a ReLU is itself)
        top_cancel: dict[int, tuple[int, int]] = {}
        for r, (pos, neg) in cancel.items():
            for level in range(2, depth + 1):
                pos = unit(level, {pos: Fraction(1)})
                neg = unit(level, {neg: Fraction(1)})
            top_cancel[r] = (pos, neg)
        finals = {o: at(o, depth) for o in outputs}
        d = len(self.names)
        width = [d] + [len(level) for level in levels[1:]]
        hidden = []
        for level in range(1, depth + 1):
            rows = []
            for u in levels[level]:
                row = [0] * width[level - 1]
                for k, v in u.weights.items():
                    row[k] = _num(v)
                rows.append(row)
            hidden.append({"weight": rows, "bias": [_num(u.bias) for u in levels[level]]})
        out_rows = [[0] * width[depth] for _ in range(d)]

        def put(coord: int, f: dict[int, Fraction]) -> None:
            for k, v in f.items():
                cur = Fraction(out_rows[coord][k]) if out_rows[coord][k] else Fraction(0)
                out_rows[coord][k] = _num(cur + v)

        for o, f in finals.items():
            coord = self.node_coord[o]
            assert coord is not None
            put(coord, f)
        for r, (pos, neg) in top_cancel.items():
            put(r, {pos: Fraction(-1), neg: Fraction(1)})
        names = [self.fmt(rd.node) for rd in block.roundings]
        title = "round " + ", ".join(names) if names else "gates"
        if block.gates and names:
            title += "; gates"
        return {
            "kind": "ffn",
            "name": title,
            "hidden": hidden,
            "output": {"weight": out_rows, "bias": [0] * d},
        }

    # -- assembly -------------------------------------------------------------------
    def compile(self, roots: Sequence[Formula]) -> list[dict[str, Any]]:
        blocks = self.schedule(roots)
        any_count = any(isinstance(f, Compare) and _const_compare(f) is None for f in self.order)
        if any_count:
            self.w = self.coord("1/(i+1)")
        # constant comparisons are constants
        for f in self.order:
            if isinstance(f, Compare) and _const_compare(f) is not None:
                self.node_coord[f] = self.true if _const_compare(f) else None
        # a gate gets a residual coordinate only when something outside its own
        # feed-forward layer reads it: a head, a later block, or the read-out
        outside = set(roots)
        for f in self.order:
            for g in self.deps(f):
                if not isinstance(f, (Not, And, Or)) or self.depth[g] != self.depth[f]:
                    outside.add(g)
        self.outside = outside
        for f in self.order:
            if isinstance(f, (Not, And, Or)) and f in outside:
                self.node_coord[f] = self.coord(self.fmt(f), fresh=True)
        block_counts: dict[int, list[Count]] = {}
        for t, d in self.count_depth.items():
            block_counts.setdefault(d, []).append(t)
        layers: list[dict[str, Any]] = []
        for b, block in enumerate(blocks):
            if b > 0:
                counts = block_counts.get(b, [])
                block.heads.extend(self.count_heads(counts, need_w=(b == 1 and any_count)))
            for f in self.order:
                if self.depth[f] != b:
                    continue
                if isinstance(f, (Prev, Next, Since, Until)):
                    block.heads.append(self.temporal_head(f))
                    block.roundings.append(_Rounding(f, [self.node_coord[f]], 0))  # type: ignore[list-item]
                elif isinstance(f, Compare) and _const_compare(f) is None:
                    heads, rd = self.compare_heads(f)
                    block.heads.extend(heads)
                    block.roundings.append(rd)
                elif isinstance(f, (Not, And, Or)):
                    block.gates.append(f)
        for b, block in enumerate(blocks):
            block.heads = _merge_heads(block.heads)
            if block.heads:
                layers.append({"kind": "attention", "heads": block.heads, "name": f"block {b}"})
            if block.roundings or block.gates:
                layers.append(self.ffn(block))
        return layers

    def head_json(self, h: _Head, d: int) -> dict[str, Any]:
        def mat(rows: list[dict[int, Fraction]]) -> list[list[int | str]]:
            out = []
            for r in rows:
                row: list[int | str] = [0] * d
                for k, v in r.items():
                    row[k] = _num(v)
                out.append(row)
            return out

        output = [[0] * len(h.out) for _ in range(d)]
        for col, coord in enumerate(h.out):
            output[coord][col] = 1
        return {
            "name": label(h.name),
            "mask": h.mask,
            "query": mat(h.query),
            "key": mat(h.key),
            "value": mat(h.value),
            "output": output,
        }


def _freeze(rows: list[dict[int, Fraction]]) -> tuple[tuple[tuple[int, Fraction], ...], ...]:
    return tuple(tuple(sorted(r.items())) for r in rows)


def _merge_heads(heads: list[_Head]) -> list[_Head]:
    """One head per distinct (mask, query, key): e.g. ``Y a`` and ``Y b`` share their scores.

    Merging changes nothing in either meaning (same weights per value row); it only
    makes the model smaller and the check faster.
    """
    groups: dict[Any, _Head] = {}
    for h in heads:
        key = (h.mask, _freeze(h.query), _freeze(h.key))
        if key in groups:
            g = groups[key]
            g.name += "; " + h.name
            g.value = g.value + h.value
            g.out = g.out + h.out
        else:
            groups[key] = _Head(h.name, h.mask, h.query, h.key, list(h.value), list(h.out), h.kind)
    return list(groups.values())


def _bos_token(alphabet: Sequence[str]) -> str:
    tok = "<bos>"
    while tok in alphabet:
        tok = "<" + tok + ">"
    return tok


def compile_formulas(
    outputs: Mapping[str, Formula],
    alphabet: Sequence[str],
    scheme: str = "temperature",
    abbrev: Mapping[Formula, str] | None = None,
) -> tuple[dict[str, Any], dict[str, int | None]]:
    """Layers, embedding etc. computing every formula in ``outputs`` (label → formula).

    Returns the partial model dict (no name/output/reference) and label → coordinate
    (``None`` for a formula that is constantly false). ``abbrev`` gives short coordinate
    names to some subformulas (display only).
    """
    comp = _Compiler(alphabet, scheme, abbrev)
    roots = list(outputs.values())
    layer_specs = comp.compile(roots)
    d = len(comp.names)
    layers = []
    for spec in layer_specs:
        if spec["kind"] == "attention":
            layers.append(
                {
                    "kind": "attention",
                    "name": label(spec["name"]),
                    "heads": [comp.head_json(h, d) for h in spec["heads"]],
                }
            )
        else:
            # the FFN was built when the coordinate list was already complete for its
            # block, but later blocks may have added coordinates: pad to the final d
            layers.append(_pad_ffn(spec, d))
    bos = _bos_token(alphabet)
    token: dict[str, list[int | str]] = {}
    for a in alphabet:
        v: list[int | str] = [0] * d
        v[comp.true] = 1
        v[comp.index[a]] = 1
        token[a] = v
    vb: list[int | str] = [0] * d
    vb[comp.bos] = 1
    token[bos] = vb
    position = [comp.pe.get(k, "0") for k in range(d)]
    model = {
        "format": "exactattn/1",
        "alphabet": list(alphabet),
        "bos": bos,
        "d": d,
        "coordinates": [label(c) for c in comp.names],
        "embedding": {"token": token, "position": position},
        "temperature": "1/n" if scheme == "temperature" else "1",
        "layers": layers,
        "min_length": 1,
    }
    model["claims"] = chain_claims(comp, layer_specs, scheme)
    coords = {label: comp.node_coord[f] for label, f in outputs.items()}
    return model, coords


def chain_claims(comp: _Compiler, layer_specs: list[dict[str, Any]], scheme: str) -> dict:
    """The claims of Theorem S (proofs/07-sharp-chain.md), proved in proofs/claims.md
    (Proposition L(d), L(e)): every coordinate's hard range, and each head's profile.

    Position coordinates have their embedding's range; count coordinates lie in [0, 1];
    every other coordinate holds a Boolean (0/1) at every layer, except that a coordinate a
    head writes holds, at BOS, the head's raw average (in [0, 1]) until it is rounded. The
    Y/X/S/U heads have distinct effective scores spaced by TIER, the comparison heads at most
    two keys within each spacing (C.6); ``unique`` except for X and U, whose BOS query sees
    every key at one score.
    """
    temp = scheme == "temperature"
    unit = "/n" if temp else ""
    bit = {"min": "0", "max": "1", "integer": True}
    pe_range = {
        "pe:p": ("1", False) if temp else ("n", True),
        "pe:N": ("1", True) if temp else ("n", True),
        "pe:kpast": ("(n+1)/n", False) if temp else ("n+1", True),
        "pe:kfut": ("1", False) if temp else ("n", True),
    }
    raws = set()
    for spec in layer_specs:
        if spec["kind"] == "attention":
            for h in spec["heads"]:
                if h.kind != "count":
                    raws.update(h.out)
    counts = set(comp.count_coord.values())
    if hasattr(comp, "w"):
        counts.add(comp.w)
    ranges: dict[str, Any] = {}
    bos: dict[str, Any] = {}
    for k, name in enumerate(comp.names):
        if k in (comp.bos, comp.true):  # <bos> is 1 only at BOS, true everywhere else
            at_bos = int(k == comp.bos)
            ranges[name] = {"min": str(1 - at_bos), "max": str(1 - at_bos), "integer": True}
            bos[name] = {"min": str(at_bos), "max": str(at_bos), "integer": True}
        elif name in pe_range:
            hi, integer = pe_range[name]
            ranges[name] = {"min": "0", "max": hi, **({"integer": True} if integer else {})}
        elif k in counts:
            ranges[name] = {"min": "0", "max": "1"}
        else:
            ranges[name] = dict(bit)
            if k in raws:
                bos[name] = {"min": "0", "max": "1"}
    heads = []
    layer = 0
    for spec in layer_specs:
        if spec["kind"] == "attention":
            for hi, h in enumerate(spec["heads"]):
                if h.kind == "count":
                    continue  # a zero query: no lower score (Lemma R4's uniform head)
                heads.append(
                    {
                        "layer": layer,
                        "head": hi,
                        "gap": f"{TIER}{unit}",
                        "step": f"{TIER}{unit}",
                        "per_rank": 2 if h.kind == "test" else 1,
                        **({"unique": True} if h.mask in ("lt", "leq") else {}),
                    }
                )
        layer += 1
    out: dict[str, Any] = {
        "coordinate_ranges": {
            "ranges": ranges,
            "justification": {"file": "proofs/claims.md", "statement": "Proposition L(d)"},
        },
        "head_profiles": {
            "heads": heads,
            "justification": {"file": "proofs/claims.md", "statement": "Proposition L(e)"},
        },
    }
    if bos:
        out["coordinate_ranges"]["bos"] = bos
        out["coordinate_ranges"] = {
            k: out["coordinate_ranges"][k] for k in ("ranges", "bos", "justification")
        }
    return out


def label(name: str) -> str:
    """A display name the loader accepts (at most MAX_NAME characters): names joined from
    formulas ("round …", merged heads) outgrow it for larger alphabets (issue 41)."""
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _pad_ffn(spec: dict[str, Any], d: int) -> dict[str, Any]:
    hidden = spec["hidden"]
    first = hidden[0]
    rows = [row + [0] * (d - len(row)) for row in first["weight"]]
    new_hidden = [{"weight": rows, "bias": first["bias"]}, *hidden[1:]]
    out = spec["output"]["weight"]
    width = len(out[0]) if out else 0
    out = out + [[0] * width for _ in range(d - len(out))]
    return {
        "kind": "ffn",
        "name": label(spec["name"]),
        "hidden": new_hidden,
        "output": {"weight": out, "bias": [0] * d},
    }


DESCRIPTION = (
    "Compiled by exactattn.constructions.ltl ({scheme} scheme): one residual coordinate per "
    "subformula (0/1, and 0 at BOS); Y/X/S/U are single heads with strict masks whose "
    "effective scores (score/τ) are spaced by 3 so that the nearest wanted position gets "
    "all but e^-3 of the weight; counts are uniform heads (exact under softmax); a "
    "comparison L ≥ 1 is a head that puts the self key at 6(L − 1/2) against BOS at 0; "
    "after every attention layer a ReLU layer rounds each raw Boolean exactly (δ = 1/4) "
    "and cancels the raw value, so soft and hard agree exactly between blocks. {pe}. "
    "See docs/constructions.md."
)


def compile_ltl(formula: str, alphabet: Sequence[str], scheme: str = "temperature") -> dict:
    """A format-1 model accepting exactly the words whose last position satisfies ``formula``."""
    f = parse_ltl(formula, alphabet)
    model, coords = compile_formulas({"accept": f}, alphabet, scheme)
    d = model["d"]
    weight: list[int | str] = [0] * d
    if coords["accept"] is not None:
        weight[coords["accept"]] = 1
    pe = (
        "Bounded position embeddings (i/n, min(i,1), (i+1)/n, (n-i+1)/n) and τ = 1/n"
        if scheme == "temperature"
        else "Unbounded position embeddings (i, n, i+1, n-i+1) and τ = 1"
    )
    model = {
        "format": "exactattn/1",
        "name": f"ltl-{scheme}",
        "description": f"Accept iff {format_ltl(f)} holds at the last position. "
        + DESCRIPTION.format(scheme=scheme, pe=pe),
        **{k: v for k, v in model.items() if k != "format"},
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": weight,
            "bias": 0,
            "threshold": "1/2",
        },
        "reference": {"kind": "ltl", "formula": formula},
        "claims": {**claims(scheme, "1/2"), **model["claims"]},
        "meta": {
            "construction": "exactattn.constructions.ltl",
            "scheme": scheme,
            "formula": format_ltl(f),
            "soft_error_bound_before_rounding": "e^-3 per head (proofs/constructions.md)",
        },
    }
    args = {"formula": formula, "alphabet": list(alphabet), "scheme": scheme}
    return stamp(model, "ltl", args)


def claims(scheme: str, margin: str) -> dict[str, Any]:
    """Bounds for every n, proved in proofs/claims.md (Proposition L, from Theorem C)."""

    temp = scheme == "temperature"
    return claims_object(
        "3/n" if temp else "3",
        "2" if temp else "2*n",
        margin,
        "proofs/claims.md",
        ("Proposition L(a)", "Proposition L(b)", "Proposition L(c)"),
    )


CATALOG_FORMULAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "prev_next": ("Y (a & X b) | Y Y (!a & X !b)", ("a", "b")),
    "since_until": ("(a | b) S (c & Y (a U b))", ("a", "b", "c")),
    "counting": ("#[a] > #[b] & Y (#>[b] >= 2 | a S (2*#[a] - #[c] = 1))", ("a", "b", "c")),
}


def catalog() -> dict[str, dict]:
    """File stem → model dict: the compiled LTL models used in docs and tests."""
    out = {}
    for key, (formula, alphabet) in CATALOG_FORMULAS.items():
        for scheme in SCHEMES:
            m = compile_ltl(formula, alphabet, scheme)
            stem = f"ltl_{key}_{scheme}"
            m["name"] = stem.replace("_", "-")
            out[stem] = m
    return out
