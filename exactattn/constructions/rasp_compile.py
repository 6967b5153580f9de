"""Compile a RASP program to an exactattn/1 model (hard attention, exact in the hard meaning).

Back end: ``exactattn.constructions.rasp.Program`` (named coordinates, fresh writes, readiness
checked). Every value lives in its own coordinate as an exact integer (Booleans are 0/1):

* token tests, ``pos`` (i), ``pos_sq`` (i²), ``inv_pos`` (1/(i+1)), ``len`` (n), ``one`` and
  ``bos`` are embedding coordinates (a BOS token sits at position 0);
* linear integer/Boolean expressions (+, −, literal ·, ``not``, ``int(b)``) stay affine forms
  over coordinates and cost nothing; every other position-wise operation is one ReLU unit
  group in an FFN layer, exact on integers (docs/rasp.md lists each gadget);
* ``psum`` of an affine form in Booleans is Σ c_k·count(b_k) + c_0·i, each count by two
  average-hard heads (uniform causal mean, then a parabolic lookup, gap 1/(i+1));
* ``attend`` is one leftmost/rightmost head whose integer score is 0 on the keys satisfying
  ``where`` and ≤ −1 elsewhere (gap ≥ 1), then an FFN that checks the chosen key really
  satisfies ``where`` and falls back to the default otherwise.

Which program line each head implements is its ``name``; ``gap.py`` gives each head's bound.

``embedding="bounded"`` (``exactattn build rasp --embedding bounded``) compiles the same
program with every embedding entry and every activation bounded by a constant: an integer k is
held as k/(n+1) (``pos_frac`` = i/(n+1) is ``pos``, ``len_frac`` = n/(n+1) is ``n``, ``unit``
= 1/(n+1) is the literal 1), a count is read back as count/(n+1) (the mean head averages
unit·b), integer comparisons are attention heads (``compare``: a ReLU layer with n-free
weights cannot turn a 1/(n+1) step into a 0/1 one), and squares are i²/(n+1)². The rates:
proofs/rasp-gaps.md, Lemmas RB1–RB6; the correctness proof: proofs/rasp-compiler.md,
Proposition CB.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field, replace
from typing import Any

from exactattn.constructions.rasp import Program as Builder
from exactattn.constructions.rasp import ProgramError
from exactattn.constructions.rasp_claims import (
    activation_bound,
    activation_bound_scaled,
    chain_claims,
    claims_for,
)
from exactattn.constructions.rasp_gap import PRIMITIVE_BOUND, PRIMITIVE_BOUND_BOUNDED, min_bound
from exactattn.core.limits import MAX_HEADS, MAX_LAYERS, MAX_NAME, MAX_STRING, clip
from exactattn.model.provenance import stamp
from exactattn.rasp.ast import (
    MASK_TEXT,
    Attend,
    Bin,
    Call,
    Const,
    Def,
    Expr,
    Ite,
    Loc,
    Not,
    Program,
    RaspError,
    Ref,
    TokenTest,
)
from exactattn.rasp.check import check_program, infer, int_literal, refs
from exactattn.rasp.interpret import value_at
from exactattn.rasp.unparse import unparse

__all__ = ["compile_program", "HeadInfo", "Compiled", "EMBEDDINGS"]

MAX_ATOMS = 8  # Boolean atoms in one attention predicate (truth table of 2^8 rows)
MAX_MODEL_NUMBERS = 2_000_000
"""Most numbers (weights, biases, embedding entries) a compiled model may hold, counted from
the lowered program before the dense model is built (issue 40): the format's matrices are d
wide, so a chain of k attends holds about 130·k² numbers (120 attends: 1.9 million, a 38 MB
file, 430 MB and 7 CPU-s to build; 480: 30 million and a MemoryError at 3.9 GB). The bundled
programs hold at most 7,400."""
BOS = "<bos>"
#: the integer encodings: exact integers (i, i², n in the stream) or k/(n+1) (bounded)
EMBEDDINGS = ("unbounded", "bounded")


class Aff:
    """An affine form Σ c·coord + const with integer coefficients."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[str, int] | None = None, const: int = 0) -> None:
        self.terms = {k: v for k, v in (terms or {}).items() if v}
        self.const = const

    def __add__(self, o: Aff) -> Aff:
        t = dict(self.terms)
        for k, v in o.terms.items():
            t[k] = t.get(k, 0) + v
        return Aff(t, self.const + o.const)

    def scale(self, c: int) -> Aff:
        return Aff({k: c * v for k, v in self.terms.items()}, c * self.const)

    def __sub__(self, o: Aff) -> Aff:
        return self + o.scale(-1)

    def key(self) -> tuple:
        return (tuple(sorted(self.terms.items())), self.const)

    def with_one(self, one: str) -> dict[str, int]:
        """The form as coordinate coefficients, the constant on the ``one`` coordinate."""
        t = dict(self.terms)
        if self.const:
            t[one] = t.get(one, 0) + self.const
        return t


@dataclass(frozen=True)
class AffNode(Expr):
    """Internal leaf: an already-lowered affine form (bool or int)."""

    aff_key: tuple
    type: str


@dataclass
class HeadInfo:
    """What one compiled head implements and the compiler's lower bound on its gap."""

    line: int
    definition: str
    primitive: str  # select | count-mean | count-lookup | square-lookup | compare (bounded)
    bound: str | None  # expression in n; None: uniform head (every score ties)
    layer: int = -1
    head: int = -1


@dataclass
class _Op:
    slot: int
    kind: str  # attention | ffn
    head: dict[str, Any] | None = None
    units: list[tuple[dict[str, int], int]] = field(default_factory=list)
    outputs: dict[str, dict[int, int]] = field(default_factory=dict)
    info: HeadInfo | None = None
    label: str = ""
    loc: Loc = field(default_factory=Loc)  # the program line it implements (size errors)


@dataclass
class Compiled:
    model: dict[str, Any]
    heads: list[HeadInfo]
    gap_bound: str  # min over heads, an expression in n


class _Compiler:
    def __init__(self, prog: Program, embedding: str = "unbounded") -> None:
        self.prog = prog
        self.bounded = embedding == "bounded"
        self.bounds = PRIMITIVE_BOUND_BOUNDED if self.bounded else PRIMITIVE_BOUND
        self.order = check_program(prog)
        self.types = {d.name: d.type for d in prog.defs}
        self.embed_token: dict[str, tuple[str, ...]] = {}
        self.embed_pos: dict[str, str] = {}
        self.ready: dict[str, int] = {}
        self.ctype: dict[str, str] = {}
        self.crange: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        self.ops: list[_Op] = []
        self.memo: dict[tuple, Aff] = {}
        self.def_aff: dict[str, Aff] = {}
        self.counter = 0
        self.overrides: dict[tuple, tuple[tuple[int, int], tuple[int, int]]] = {}
        # coordinates holding a square (p², K²): ≤ n², not an (a·n + b) range (claims.py)
        self.squares: set[str] = set()
        self.cur: Def | None = None
        self.bos_token = BOS
        while self.bos_token in prog.alphabet:  # a BOS token that is not an input symbol
            self.bos_token += "'"
        self.token_coord: dict[tuple[str, ...], str] = {}
        self.one = self._embed_tok("one", tuple([*prog.alphabet, self.bos_token]), "bool")
        self.bos = self._embed_tok("bos", (self.bos_token,), "bool")
        if self.bounded:
            self._embed_bounded()
            return
        self.pos = self._embed_pos("pos", "i", "int", ((0, 0), (1, 0)))
        self.pos_sq = self._embed_pos("pos_sq", "i^2", "int", ((0, 0), (0, 0)))
        self.squares.add(self.pos_sq)
        self.inv = self._embed_pos("inv_pos", "1/(i+1)", "frac", ((0, 0), (0, 1)))
        self.len = self._embed_pos("len", "n", "int", ((1, 0), (1, 0)))
        self.pos_frac = self._embed_pos("pos_frac", "i/(n+1)", "frac", ((0, 0), (0, 1)))

    def _embed_bounded(self) -> None:
        """Bounded: an ``int`` coordinate holds k/(n+1) for the integer k its range bounds
        (``pos``: i, ``len``: n); ``frac`` coordinates hold what their expression says."""
        b01 = ((0, 0), (0, 1))
        self.pos = self._embed_pos("pos_frac", "i/(n+1)", "int", ((0, 0), (1, 0)))
        self.pos_frac = self.pos  # the tie-break j/(n+1) reads it too
        self.pos_sq = self._embed_pos("pos_frac_sq", "i^2/(n+1)^2", "frac", b01)
        self.inv = self._embed_pos("inv_pos", "1/(i+1)", "frac", b01)
        self.len = self._embed_pos("len_frac", "n/(n+1)", "int", ((1, 0), (1, 0)))
        self.unit = self._embed_pos("unit", "1/(n+1)", "frac", b01)
        self.unit_sq = self._embed_pos("unit_sq", "1/(n+1)^2", "frac", b01)

    # -- coordinates ---------------------------------------------------------------------
    def _embed_tok(self, name: str, toks: tuple[str, ...], t: str) -> str:
        self.embed_token[name] = toks
        self.ready[name] = 0
        self.ctype[name] = t
        self.crange[name] = ((0, 0), (0, 1))
        return name

    def _embed_pos(self, name: str, expr: str, t: str, rng: tuple) -> str:
        self.embed_pos[name] = expr
        self.ready[name] = 0
        self.ctype[name] = t
        self.crange[name] = rng
        return name

    def _fresh(self, hint: str) -> str:
        self.counter += 1
        base = self.cur.name if self.cur is not None else "out"
        return f"{_fit(base, 200)}.{hint}{self.counter}"  # unique by the counter

    def _loc(self) -> Loc:
        return self.cur.loc if self.cur is not None else self.prog.output.loc

    def _err(self, loc: Loc, msg: str) -> RaspError:
        return RaspError(loc, f"{msg} (not supported by the compiler; the interpreter runs it)")

    def _ready_of(self, combos: list[dict[str, int]]) -> int:
        return max([0, *(self.ready[c] for combo in combos for c in combo)])

    def _range(self, a: Aff) -> tuple[tuple[int, int], tuple[int, int]]:
        """Bounds (a·n + b) on the value over positions 0..n, any n ≥ 1 (conservative).

        Forms with a known range of their own (prefix sums) are looked up first, so that
        2·count(b) − i is known to lie in [−n, n] rather than [−n, 2n].
        """
        tk = tuple(sorted(a.terms.items()))
        for sign in (1, -1):
            k = tuple((c, sign * v) for c, v in tk)
            if k in self.overrides:
                (l0, l1), (h0, h1) = self.overrides[k]
                if sign == 1:
                    return (l0, l1 + a.const), (h0, h1 + a.const)
                return (-h0, -h1 + a.const), (-l0, -l1 + a.const)
        lo = [0, a.const]
        hi = [0, a.const]
        for c, k in a.terms.items():
            (l0, l1), (h0, h1) = self.crange[c]
            if k > 0:
                lo = [lo[0] + k * l0, lo[1] + k * l1]
                hi = [hi[0] + k * h0, hi[1] + k * h1]
            else:
                lo = [lo[0] + k * h0, lo[1] + k * h1]
                hi = [hi[0] + k * l0, hi[1] + k * l1]
        return (lo[0], lo[1]), (hi[0], hi[1])

    def ffn(
        self, hint: str, units: list[tuple[Aff, int]], out: dict[int, int], t: str, rng: tuple
    ) -> Aff:
        """One new coordinate = Σ out[k]·ReLU(units[k]) (memoized)."""
        key = ("ffn", tuple((u.key(), b) for u, b in units), tuple(sorted(out.items())))
        if key in self.memo:
            return self.memo[key]
        # the unit's constant goes to the bias, not to the `one` coordinate
        raw = [({k: v for k, v in u.terms.items()}, u.const + b) for u, b in units]
        r = self._ready_of([c for c, _ in raw])
        slot = r if r % 2 == 1 else r + 1
        name = self._fresh(hint)
        self.ops.append(
            _Op(
                slot,
                "ffn",
                units=raw,
                outputs={name: dict(out)},
                label=self._label(),
                loc=self._loc(),
            )
        )
        self.ready[name] = slot + 1
        self.ctype[name] = t
        self.crange[name] = rng
        a = Aff({name: 1})
        self.memo[key] = a
        return a

    def _label(self) -> str:
        d = self.cur
        return f"line {d.loc.line} ({_fit(d.name, 100)})" if d is not None else "output"

    def attention(
        self,
        hint: str,
        score: list[tuple[str, str, int]],
        values: dict[str, dict[str, int]],
        mask: str,
        hard: str,
        info: HeadInfo,
        types: dict[str, tuple[str, tuple]],
        detail: str = "",
    ) -> dict[str, str]:
        """One head; returns output name per value key."""
        reads = [{a: 1, b: 1} for a, b, _ in score] + list(values.values())
        r = self._ready_of(reads)
        slot = r if r % 2 == 0 else r + 1
        names = {k: self._fresh(f"{hint}_{k}") for k in values}
        head = {
            "score": score,
            "values": {names[k]: v for k, v in values.items()},
            "mask": mask,
            "hard": hard,
            "name": _fit(f"{self._label()}: {info.primitive}" + (f" {detail}" if detail else "")),
        }
        self.ops.append(_Op(slot, "attention", head=head, info=info, loc=self._loc()))
        for k, nm in names.items():
            self.ready[nm] = slot + 1
            self.ctype[nm], self.crange[nm] = types[k]
        return names

    @staticmethod
    def bil(q: Aff, k: Aff, c: int, one: str) -> list[tuple[str, str, int]]:
        """Score terms for c·q(i)·k(j) with affine q, k (constants on ``one``)."""
        qt = q.with_one(one)
        kt = k.with_one(one)
        return [(a, b, c * x * y) for a, x in qt.items() for b, y in kt.items() if c * x * y]

    # -- expressions ---------------------------------------------------------------------
    def low(self, e: Expr, subst: dict[Expr, Aff] | None = None) -> Aff:
        subst = subst or {}
        if subst and e in subst:
            return subst[e]
        if isinstance(e, AffNode):
            return Aff(dict(e.aff_key[0]), e.aff_key[1])
        if isinstance(e, Const):
            return Aff({}, int(e.value))
        if isinstance(e, Ref):
            if e.side != "i":
                raise self._err(e.loc, "a key reference outside attention")
            if e.name == "n":
                return Aff({self.len: 1})
            if e.name == "pos":
                return Aff({self.pos: 1})
            return self.def_aff[e.name]
        if isinstance(e, TokenTest):
            toks = tuple(sorted(set(e.tokens)))
            name = self.token_coord.get(toks)
            if name is None:
                name = _fit(
                    "token in {" + ", ".join(json.dumps(t, ensure_ascii=False) for t in toks) + "}",
                    200,
                )
                while name in self.ready:
                    name += "'"
                self.token_coord[toks] = self._embed_tok(name, toks, "bool")
            return Aff({name: 1})
        if isinstance(e, Not):
            return Aff({}, 1) - self.low(e.arg, subst)
        if isinstance(e, Ite):
            c, a, b = (self.low(x, subst) for x in (e.cond, e.then, e.other))
            return self.ffn(
                "ite", [(c + a, -1), (b - c, 0)], {0: 1, 1: 1}, "bool", ((0, 0), (0, 1))
            )
        if isinstance(e, Call):
            if e.fn == "int":
                return self.low(e.args[0], subst)
            if e.fn == "psum":
                return self.psum(e)
            xs = [self.low(a, subst) for a in e.args]
            r0 = self._range(xs[0])
            r1 = self._range(xs[-1])
            if self.bounded:  # ReLU is positively homogeneous: the gadgets act on k/(n+1)
                xs = [self.phys(x) for x in xs]
            if e.fn == "abs":
                (l0, l1), (h0, h1) = r0
                hi = (max(abs(l0), abs(h0)), max(abs(l1), abs(h1)))
                return self.ffn(
                    "abs", [(xs[0], 0), (xs[0].scale(-1), 0)], {0: 1, 1: 1}, "int", ((0, 0), hi)
                )
            a, b = xs
            lo = tuple(map(min, r0[0], r1[0]))
            hi = tuple(map(max, r0[1], r1[1]))
            if e.fn == "min":  # a − ReLU(a − b)
                return self.ffn(
                    "min",
                    [(a, 0), (a.scale(-1), 0), (a - b, 0)],
                    {0: 1, 1: -1, 2: -1},
                    "int",
                    (lo, hi),
                )
            return self.ffn(
                "max", [(a, 0), (a.scale(-1), 0), (b - a, 0)], {0: 1, 1: -1, 2: 1}, "int", (lo, hi)
            )
        if isinstance(e, Bin):
            if e.op in ("+", "-"):
                a, b = self.low(e.left, subst), self.low(e.right, subst)
                return a + b if e.op == "+" else a - b
            if e.op == "*":
                lit = int_literal(e.left)
                other = e.right
                if lit is None:
                    lit, other = int_literal(e.right), e.left
                return self.low(other, subst).scale(int(lit or 0))
            if e.op in ("and", "or"):
                items = self._flatten(e, e.op)
                xs = [self.low(x, subst) for x in items]
                tot = Aff()
                for x in xs:
                    tot = tot + x
                m = len(xs)
                b01 = ((0, 0), (0, 1))
                if e.op == "and":
                    return self.ffn("and", [(tot, -(m - 1))], {0: 1}, "bool", b01)
                return self.ffn("or", [(tot, 0), (tot, -1)], {0: 1, 1: -1}, "bool", b01)
            lt = self._type(e.left)
            a, b = self.low(e.left, subst), self.low(e.right, subst)
            b01 = ((0, 0), (0, 1))
            if lt == "bool" and e.op in ("==", "!="):
                if e.op == "!=":
                    return self.ffn("xor", [(a - b, 0), (b - a, 0)], {0: 1, 1: 1}, "bool", b01)
                return self.ffn(
                    "xnor", [(a + b, -1), (Aff({}, 1) - a - b, 0)], {0: 1, 1: 1}, "bool", b01
                )
            d = a - b
            if self.bounded:
                return self.compare(d, e.op)
            if e.op == "==":
                return self.ffn("eq", [(d, 1), (d, 0), (d, -1)], {0: 1, 1: -2, 2: 1}, "bool", b01)
            if e.op == "!=":
                nd = d.scale(-1)
                return self.ffn(
                    "ne",
                    [(d, 0), (d, -1), (nd, 0), (nd, -1)],
                    {0: 1, 1: -1, 2: 1, 3: -1},
                    "bool",
                    b01,
                )
            if e.op in ("<", "<="):
                d = d.scale(-1)  # b − a
            if e.op in (">", "<"):  # d > 0
                return self.ffn("gt", [(d, 0), (d, -1)], {0: 1, 1: -1}, "bool", b01)
            return self.ffn("ge", [(d, 1), (d, 0)], {0: 1, 1: -1}, "bool", b01)  # d ≥ 0
        raise self._err(e.loc, f"cannot lower {type(e).__name__}")

    @staticmethod
    def _flatten(e: Expr, op: str) -> list[Expr]:
        if isinstance(e, Bin) and e.op == op:
            return _Compiler._flatten(e.left, op) + _Compiler._flatten(e.right, op)
        return [e]

    def _type(self, e: Expr) -> str:
        if isinstance(e, AffNode):
            return e.type
        if isinstance(e, Const):
            return "bool" if isinstance(e.value, bool) else "int"
        if isinstance(e, Ref):
            return "int" if e.name in ("pos", "n") else self.types[e.name]
        if isinstance(e, Call):
            return "int"
        if isinstance(e, Bin) and e.op in ("+", "-", "*"):
            return "int"
        return "bool"

    # -- the bounded encoding --------------------------------------------------------------
    def phys(self, a: Aff) -> Aff:
        """Bounded: the coordinates' combination holding k/(n+1) for a program integer form
        holding k (an ``int`` coordinate as it is, a Boolean by its scaled copy, the constant on
        ``unit``); no constant term, so ReLU gadgets on it stay homogeneous."""
        out = Aff()
        for c, k in a.terms.items():
            if self.ctype[c] == "bool":
                out = out + self.scaled(c).scale(k)
            elif self.ctype[c] == "int":
                out = out + Aff({c: k})
            else:  # pragma: no cover - program forms never hold a frac coordinate
                raise AssertionError(f"{c} in an integer form")
        return out + Aff({self.unit: a.const}) if a.const else out

    def scaled(self, b: str) -> Aff:
        """unit·b = ReLU(b + unit − 1) for a 0/1 coordinate b (exact: unit = 1/(n+1) ≤ 1)."""
        return self.ffn("scale", [(Aff({b: 1, self.unit: 1}), -1)], {0: 1}, "int", ((0, 0), (0, 1)))

    def compare(self, d: Aff, op: str) -> Aff:
        """Bounded: the integer comparison d op 0 (d a program form) by ``compare`` heads.

        ``[d ≥ k]`` (k = 0, 1) is one head with score (2d − 2k + 1)/(n+1)·(one_j − bos_j) and
        value one − bos, no mask: BOS scores 0, every other key (2d − 2k + 1)/(n+1), an odd
        multiple of 1/(n+1); so the head averages 1 over the non-BOS keys when d ≥ k and
        reads 0 at BOS otherwise (Lemma RB6: gap ≥ 1/(n+1)).
        """
        if op in ("<", "<="):
            d = d.scale(-1)
        if op in (">", "<"):
            return self._at_least(d, 1)
        if op in (">=", "<="):
            return self._at_least(d, 0)
        ge0, ge1 = self._at_least(d, 0), self._at_least(d, 1)
        return ge0 - ge1 if op == "==" else Aff({}, 1) - ge0 + ge1

    def _at_least(self, d: Aff, k: int) -> Aff:
        q = self.phys(d.scale(2) - Aff({}, 2 * k - 1))
        key = ("compare", q.key())
        if key in self.memo:
            return self.memo[key]
        one, bos = self.one, self.bos
        got = self.attention(
            "cmp",
            self.bil(q, Aff({one: 1, bos: -1}), 1, one),
            {"ge": {one: 1, bos: -1}},
            "none",
            "average",
            HeadInfo(*self._where(), "compare", self.bounds["compare"]),
            {"ge": ("bool", ((0, 0), (0, 1)))},
            f"≥ {k}",
        )
        out = Aff({got["ge"]: 1})
        self.memo[key] = out
        return out

    def _where(self) -> tuple[int, str]:
        d = self.cur
        return (d.loc.line, d.name) if d is not None else (self.prog.output.loc.line, "output")

    # -- prefix sums ---------------------------------------------------------------------
    def count(self, b: str) -> Aff:
        """count_i = #{1 ≤ j ≤ i : b_j = 1} for a Boolean coordinate b."""
        key = ("count", b)
        if key in self.memo:
            return self.memo[key]
        if self.bounded:
            out = self._count_bounded(b)
            self.memo[key] = out
            return out
        masked = self.ffn(
            "nobos", [(Aff({b: 1, self.bos: -1}), 0)], {0: 1}, "bool", ((0, 0), (0, 1))
        )
        d = self.cur
        line = d.loc.line if d else 0
        name = d.name if d else ""
        (mname,) = masked.terms
        share = self.attention(
            "mean",
            [],
            {"share": {mname: 1}},
            "leq",
            "average",
            HeadInfo(line, name, "count-mean", PRIMITIVE_BOUND["count-mean"]),
            {"share": ("frac", ((0, 0), (0, 1)))},
        )["share"]
        cnt = self.attention(
            "lookup",
            [(share, self.pos, 2), (self.inv, self.pos_sq, -1)],
            {"count": {self.pos: 1}},
            "leq",
            "average",
            HeadInfo(line, name, "count-lookup", PRIMITIVE_BOUND["count-lookup"]),
            {"count": ("int", ((0, 0), (1, 0)))},
        )["count"]
        a = Aff({cnt: 1})
        self.memo[key] = a
        return a

    def _count_bounded(self, b: str) -> Aff:
        """count_i/(n+1): the mean of unit·b′ over j ≤ i is count/((i+1)(n+1)); the lookup
        score (count² − (count − j)²)/((i+1)(n+1)²) over keys j ≤ i reads j/(n+1) at
        j = count (Lemma RB2: gap 1/((i+1)(n+1)²) ≥ 1/(n+1)³)."""
        # unit·b·(1 − bos) = ReLU(b − bos + unit − 1) on b, bos ∈ {0, 1}, unit ≤ 1/2
        masked = self.ffn(
            "nobos",
            [(Aff({b: 1, self.bos: -1, self.unit: 1}), -1)],
            {0: 1},
            "frac",
            ((0, 0), (0, 1)),
        )
        line, name = self._where()
        (mname,) = masked.terms
        share = self.attention(
            "mean",
            [],
            {"share": {mname: 1}},
            "leq",
            "average",
            HeadInfo(line, name, "count-mean", self.bounds["count-mean"]),
            {"share": ("frac", ((0, 0), (0, 1)))},
        )["share"]
        cnt = self.attention(
            "lookup",
            [(share, self.pos_frac, 2), (self.inv, self.pos_sq, -1)],
            {"count": {self.pos_frac: 1}},
            "leq",
            "average",
            HeadInfo(line, name, "count-lookup", self.bounds["count-lookup"]),
            {"count": ("int", ((0, 0), (1, 0)))},
        )["count"]
        return Aff({cnt: 1})

    def psum(self, e: Call) -> Aff:
        arg = self.low(e.args[0])
        out = Aff({self.pos: arg.const})
        for c, k in arg.terms.items():
            if self.ctype.get(c) != "bool":
                raise self._err(
                    e.args[0].loc,
                    "psum of an integer that is not a sum of int(Boolean) terms and literals",
                )
            out = out + self.count(c).scale(k)
        # each step lies in [lo, hi] (n-free for an affine form in Booleans): the sum over
        # at most n positions lies in [min(lo, 0)·n, max(hi, 0)·n]
        (l0, l1), (h0, h1) = self._range(arg)
        if l0 == 0 and h0 == 0 and out.const == 0:
            self.overrides[tuple(sorted(out.terms.items()))] = ((min(l1, 0), 0), (max(h1, 0), 0))
        return out

    # -- attention -----------------------------------------------------------------------
    def _flip(self, e: Expr) -> Expr:
        """The key-side expression read as if at i (it is computed at every position)."""
        if isinstance(e, Ref):
            return Ref(e.name, "i", loc=e.loc)
        if isinstance(e, TokenTest):
            return TokenTest(e.tokens, "i", loc=e.loc)
        if isinstance(e, Not):
            return Not(self._flip(e.arg), loc=e.loc)
        if isinstance(e, Bin):
            return Bin(e.op, self._flip(e.left), self._flip(e.right), loc=e.loc)
        if isinstance(e, Call):
            return Call(e.fn, tuple(self._flip(a) for a in e.args), loc=e.loc)
        if isinstance(e, Ite):
            return Ite(self._flip(e.cond), self._flip(e.then), self._flip(e.other), loc=e.loc)
        return e

    @staticmethod
    def _sides(e: Expr) -> set[str]:
        s = {r.side for r in refs(e) if r.name != "n"}
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, TokenTest):
                s.add(x.side)
            for f in ("arg", "left", "right", "cond", "then", "other"):
                if hasattr(x, f):
                    stack.append(getattr(x, f))
            if isinstance(x, Call):
                stack += list(x.args)
        return s

    def _split_linear(self, e: Expr, sign: int, key: list, query: list) -> int:
        """Split an integer expression into key-side and query-side terms; returns const."""
        sides = self._sides(e)
        if not sides or sides == {"i"}:
            query.append((sign, e))
            return 0
        if sides == {"j"}:
            key.append((sign, e))
            return 0
        if isinstance(e, Bin) and e.op in ("+", "-"):
            c = self._split_linear(e.left, sign, key, query)
            return c + self._split_linear(e.right, sign if e.op == "+" else -sign, key, query)
        if isinstance(e, Bin) and e.op == "*":
            lit, other = int_literal(e.left), e.right
            if lit is None:
                lit, other = int_literal(e.right), e.left
            return self._split_linear(other, sign * int(lit or 0), key, query)
        raise self._err(e.loc, "an integer mixing i and j other than by + and −")

    def attend(self, d: Def, e: Attend) -> Aff:
        if self._type(e.value) != "bool":
            raise self._err(e.value.loc, "integer-valued attention")
        items = self._flatten(e.where, "and")
        eqs: list[tuple[Aff, Aff]] = []  # (K at key, Q at query)
        bools: list[Expr] = []
        for it in items:
            if (
                isinstance(it, Bin)
                and it.op == "=="
                and self._type(it.left) == "int"
                and self._sides(it) == {"i", "j"}
            ):
                key: list = []
                query: list = []
                c = self._split_linear(it.left, 1, key, query)
                c += self._split_linear(it.right, -1, key, query)
                K = Aff()
                for s, x in key:
                    K = K + self.low(self._flip(x)).scale(s)
                Q = Aff({}, -c)
                for s, x in query:
                    Q = Q - self.low(x).scale(s)
                if K.terms:
                    eqs.append((K, Q))
                    continue
            bools.append(it)
        # Boolean part: atoms are maximal one-sided subexpressions
        qatoms: list[Expr] = []
        katoms: list[Expr] = []

        def collect(x: Expr) -> None:
            s = self._sides(x)
            if s <= {"i"}:
                if x not in qatoms:
                    qatoms.append(x)
            elif s == {"j"}:
                if x not in katoms:
                    katoms.append(x)
            elif isinstance(x, Not):
                collect(x.arg)
            elif isinstance(x, Bin) and (
                x.op in ("and", "or") or (x.op in ("==", "!=") and self._type(x.left) == "bool")
            ):
                collect(x.left)
                collect(x.right)
            elif isinstance(x, Ite):
                collect(x.cond)
                collect(x.then)
                collect(x.other)
            else:
                raise self._err(
                    x.loc,
                    "a condition mixing i and j (supported: Boolean combinations of one-sided "
                    "conditions, and top-level equalities K[j] == Q[i])",
                )

        for b in bools:
            collect(b)
        if len(qatoms) + len(katoms) > MAX_ATOMS:
            raise self._err(e.where.loc, f"more than {MAX_ATOMS} Boolean atoms in one predicate")
        one = self.one
        score: list[tuple[str, str, int]] = []
        qaff = [self.low(x) for x in qatoms]
        kaff = [self.low(self._flip(x)) for x in katoms]
        if bools:
            formula: Expr = bools[0]
            for b in bools[1:]:
                formula = Bin("and", formula, b, loc=b.loc)
            atoms = qatoms + katoms
            p = len(qatoms)
            g: dict[tuple[int, ...], int] = {}
            for bits in itertools.product((0, 1), repeat=len(atoms)):
                env = {a: Const(bool(v)) for a, v in zip(atoms, bits, strict=True)}
                g[bits] = (1 if self._eval_const(formula, env) else 0) - 1
            # Möbius transform: g = Σ_S c_S Π_{t∈S} x_t
            coef = self._mobius(g, len(atoms))
            for bits, c in coef.items():
                if not c:
                    continue
                A = [k for k in range(p) if bits[k]]
                B = [k - p for k in range(p, len(atoms)) if bits[k]]
                if not B:
                    continue  # the same for every key: the check below handles it
                qa = self._product([qaff[k] for k in A])
                ka = self._product([kaff[k] for k in B])
                score += self.bil(qa, ka, c, one)
        score += self.bil(Aff({}, 1), Aff({self.bos: 1}), -1, one)
        if self.bounded:
            score += self._equality_terms_bounded(eqs, e)
        for K, Q in [] if self.bounded else eqs:
            score += self.bil(Q, K, 2, one)
            score += self.bil(Aff({}, 1), self.square(K, e), -1, one)
        # tie-break: +j/(n+1) (rightmost) or −j/(n+1) (leftmost) makes the chosen key the
        # unique maximum, so softmax approximates it; integer levels stay ≥ 1/(n+1) apart
        if self.bounded and eqs:  # levels 1/(n+1)² apart (Lemma RB1): j/(n+1)³
            score += [(self.unit_sq, self.pos_frac, 1 if e.choice == "rightmost" else -1)]
        else:
            score += [(one, self.pos_frac, 1 if e.choice == "rightmost" else -1)]
        score = self._merge(score)
        values: dict[str, dict[str, int]] = {"one": {one: 1}, "bos": {self.bos: 1}}
        vtypes: dict[str, tuple] = {
            "one": ("bool", ((0, 0), (0, 1))),
            "bos": ("bool", ((0, 0), (0, 1))),
        }
        val = self.low(self._flip(e.value))
        values["value"] = val.with_one(one) or {one: 0}
        vtypes["value"] = ("bool", ((0, 0), (0, 1)))
        for k, ka in enumerate(kaff):
            values[f"k{k}"] = ka.with_one(one) or {one: 0}
            vtypes[f"k{k}"] = ("bool", ((0, 0), (0, 1)))
        for m, (K, _) in enumerate(eqs):
            values[f"e{m}"] = (self.phys(K) if self.bounded else K).with_one(one)
            vtypes[f"e{m}"] = ("int", self._range(K))
        values = {k: {c: x for c, x in v.items() if x} or {one: 0} for k, v in values.items()}
        bound = self.bounds["select-eq" if self.bounded and eqs else "select"]
        info = HeadInfo(d.loc.line, d.name, "select", bound)
        detail = f"{e.choice} {MASK_TEXT[e.mask]}"
        got = self.attention("sel", score, values, e.mask, e.choice, info, vtypes, detail)
        ret = {k: Aff({v: 1}) for k, v in got.items()}
        # the check: the chosen key exists, is not BOS, satisfies `where`
        bits: list[Expr] = [
            AffNode(ret["one"].key(), "bool"),
            Not(AffNode(ret["bos"].key(), "bool")),
        ]
        if bools:
            subst: dict[Expr, Aff] = {}
            for x, a in zip(qatoms, qaff, strict=True):
                subst[x] = a
            for k, x in enumerate(katoms):
                subst[x] = ret[f"k{k}"]
            bits.append(self._subst_formula(formula, subst))
        for m, (_, Q) in enumerate(eqs):
            bits.append(Bin("==", AffNode(ret[f"e{m}"].key(), "int"), AffNode(Q.key(), "int")))
        f: Expr = bits[0]
        for b in bits[1:]:
            f = Bin("and", f, b)
        y = Ite(f, AffNode(ret["value"].key(), "bool"), e.default)
        return self.low(y)

    def _subst_formula(self, formula: Expr, subst: dict[Expr, Aff]) -> Expr:
        if formula in subst:
            a = subst[formula]
            return AffNode(a.key(), "bool")
        if isinstance(formula, Not):
            return Not(self._subst_formula(formula.arg, subst))
        if isinstance(formula, Bin):
            return Bin(
                formula.op,
                self._subst_formula(formula.left, subst),
                self._subst_formula(formula.right, subst),
            )
        if isinstance(formula, Ite):
            return Ite(
                *(
                    self._subst_formula(x, subst)
                    for x in (formula.cond, formula.then, formula.other)
                )
            )
        return formula

    def _eval_const(self, e: Expr, env: dict[Expr, Const]) -> bool:

        if e in env:
            return bool(env[e].value)
        if isinstance(e, Not):
            return not self._eval_const(e.arg, env)
        if isinstance(e, Bin) and e.op in ("and", "or", "==", "!="):
            a, b = self._eval_const(e.left, env), self._eval_const(e.right, env)
            return {"and": a and b, "or": a or b, "==": a == b, "!=": a != b}[e.op]
        if isinstance(e, Ite):
            c = self._eval_const(e.cond, env)
            return self._eval_const(e.then if c else e.other, env)
        return bool(value_at(e, {}, (), 0, 0))

    @staticmethod
    def _mobius(g: dict[tuple[int, ...], int], m: int) -> dict[tuple[int, ...], int]:
        c = dict(g)
        for t in range(m):
            for bits in sorted(c):
                if bits[t] == 1:
                    c[bits] -= c[bits[:t] + (0,) + bits[t + 1 :]]
        return c

    def _product(self, xs: list[Aff]) -> Aff:
        if not xs:
            return Aff({}, 1)
        if len(xs) == 1:
            return xs[0]
        tot = Aff()
        for x in xs:
            tot = tot + x
        return self.ffn("and", [(tot, -(len(xs) - 1))], {0: 1}, "bool", ((0, 0), (0, 1)))

    @staticmethod
    def _merge(score: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        acc: dict[tuple[str, str], int] = {}
        for a, b, c in score:
            acc[(a, b)] = acc.get((a, b), 0) + c
        return [(a, b, c) for (a, b), c in acc.items() if c]

    def _equality_terms_bounded(
        self, eqs: list[tuple[Aff, Aff]], e: Attend
    ) -> list[tuple[str, str, int]]:
        """Σ_m 2·Q̃_m·K̃_m − K̃_m² (x̃ = x/(n+1)): each equality's score, (Q² − (Q − K)²)/(n+1)²."""
        one, unit, pos = self.one, self.unit, self.pos
        out: list[tuple[str, str, int]] = []
        for K, Q in eqs:
            out += self.bil(self.phys(Q), self.phys(K), 2, one)
            if set(K.terms) <= {pos}:  # K = a·pos + c: K̃² = a²·j²/(n+1)² + (2ac·j + c²)/(n+1)²
                a, c = K.terms.get(pos, 0), K.const
                out += [(one, self.pos_sq, -a * a), (unit, pos, -2 * a * c), (unit, unit, -c * c)]
            else:
                (sq,) = self.square(K, e).terms
                out += [(one, sq, -1)]
        return [t for t in out if t[2]]

    def square(self, K: Aff, e: Attend) -> Aff:
        """K² as an affine form: directly for a·pos + c, else by a lookup over positions."""
        if set(K.terms) <= {self.pos}:
            a = K.terms.get(self.pos, 0)
            c = K.const
            return Aff({self.pos_sq: a * a, self.pos: 2 * a * c}, c * c)
        (l0, l1), (h0, h1) = self._range(K)
        # |K| ≤ n at every position 0..n for every n ≥ 1: h0·n + h1 ≤ n and −(l0·n + l1) ≤ n
        if not (h0 <= 1 and h0 + h1 <= 1 and -l0 <= 1 and -l0 - l1 <= 1):
            raise self._err(e.where.loc, "an equality whose key side may leave [−n, n]")
        key = ("square", K.key())
        if key in self.memo:
            return self.memo[key]
        Kp = self.phys(K) if self.bounded else K  # bounded: |K|/(n+1), then K²/(n+1)²
        a = self.ffn("abs", [(Kp, 0), (Kp.scale(-1), 0)], {0: 1, 1: 1}, "int", ((0, 0), (1, 0)))
        d = self.cur
        sq = self.attention(
            "square",
            self.bil(a, Aff({self.pos: 1}), 2, self.one) + [(self.one, self.pos_sq, -1)],
            {"sq": {self.pos_sq: 1}},
            "none",
            "average",
            HeadInfo(
                d.loc.line if d else 0,
                d.name if d else "",
                "square-lookup",
                self.bounds["square-lookup"],
            ),
            {"sq": ("frac", ((0, 0), (0, 1))) if self.bounded else ("int", ((0, 0), (0, 0)))},
        )["sq"]
        if not self.bounded:
            self.squares.add(sq)
        out = Aff({sq: 1})
        self.memo[key] = out
        return out

    # -- program -------------------------------------------------------------------------
    def run(self) -> Compiled:
        for d in self.order:
            self.cur = d
            if isinstance(d.expr, Attend):
                self.def_aff[d.name] = self.attend(d, d.expr)
            else:
                self.def_aff[d.name] = self.low(d.expr)
        self.cur = None
        out_expr = self.prog.output.expr
        out_type = infer(out_expr, self.types, self.prog.alphabet, "i")
        y = self.low(out_expr)
        if self.bounded and out_type == "int":  # the value read-out shows k/(n+1)
            y = self.phys(y)
        return self.emit(y, out_type)

    def bound_size(self) -> int:
        """Refuse, before the dense model is built, one the loader would refuse (more than
        MAX_LAYERS layers or MAX_HEADS heads) or more than MAX_MODEL_NUMBERS numbers, naming
        the program line whose layer crosses the limit; else the number of numbers (an upper
        bound: every weight, bias and embedding entry the model will hold)."""
        d = len(self.embed_token) + len(self.embed_pos)
        d += sum(len(op.head["values"]) if op.head else len(op.outputs) for op in self.ops)
        numbers = (len(self.prog.alphabet) + 2) * d + 2 * d + 2  # embeddings, read-out
        heads = 0
        for layer, s in enumerate(sorted({op.slot for op in self.ops})):
            ops = [op for op in self.ops if op.slot == s]
            if layer == MAX_LAYERS:
                raise RaspError(ops[0].loc, _too_big(f"more than {MAX_LAYERS:,} layers"))
            if s % 2 == 0:
                for op in ops:
                    assert op.head is not None
                    heads += 1
                    if heads > MAX_HEADS:
                        raise RaspError(op.loc, _too_big(f"more than {MAX_HEADS:,} heads"))
                    values = len(op.head["values"])
                    numbers += 2 * max(1, len(op.head["score"])) * d + 2 * values * d
            else:
                units = sum(len(op.units) for op in ops)
                numbers += 2 * units * d + units + d
            if numbers > MAX_MODEL_NUMBERS:
                raise RaspError(
                    ops[0].loc,
                    _too_big(
                        f"about {numbers:,} numbers by this line's layer {layer} (d = {d:,}), "
                        f"more than the limit of {MAX_MODEL_NUMBERS:,}"
                    ),
                )
        return numbers

    def emit(self, y: Aff, out_type: str) -> Compiled:
        prog = self.prog
        self.bound_size()
        desc = f"compiled from the RASP program {_fit(prog.name, 200)!r} (exactattn build rasp)"
        name = _fit(f"rasp_{prog.name}")
        if self.bounded:
            desc = desc[:-1] + " --embedding bounded: every integer k held as k/(n+1))"
            name = _fit(f"rasp_{prog.name}", MAX_NAME - len("_bounded")) + "_bounded"
        b = Builder(name, list(prog.alphabet), bos=self.bos_token, description=desc)
        for name, toks in self.embed_token.items():
            b.indicator(name, toks)
        for name, expr in self.embed_pos.items():
            b.position(name, expr)
        slots = sorted({op.slot for op in self.ops})
        infos: list[HeadInfo] = []
        layer = 0
        for s in slots:
            ops = [op for op in self.ops if op.slot == s]
            if s % 2 == 0:
                heads = []
                for k, op in enumerate(ops):
                    h = op.head
                    assert h is not None and op.info is not None
                    heads.append(
                        b.head(
                            values=h["values"],
                            score=h["score"],
                            mask=h["mask"],
                            hard=h["hard"],
                            name=h["name"],
                        )
                    )
                    op.info.layer, op.info.head = layer, k
                    infos.append(op.info)
                b.attention(*heads, name=f"attention {layer}")
            else:
                units: list[tuple[dict[str, int], int]] = []
                outputs: dict[str, dict[int, int]] = {}
                labels: list[str] = []
                for op in ops:
                    off = len(units)
                    units += op.units
                    for o, combo in op.outputs.items():
                        outputs[o] = {k + off: c for k, c in combo.items()}
                    if op.label not in labels:
                        labels.append(op.label)
                b.ffn(units, outputs, name=_ffn_name(labels))
            layer += 1
        idx = {c: k for k, c in enumerate(b.coords)}
        if prog.output.kind == "accept":
            output = b.accept(y.terms, threshold="1/2", bias=y.const, position="last")
        elif out_type == "bool":
            w0 = [0] * len(idx)
            w1 = [0] * len(idx)
            for c, v in y.terms.items():
                w0[idx[c]] = -v
                w1[idx[c]] = v
            output = {
                "kind": "argmax",
                "weight": [w0, w1],
                "bias": [1 - y.const, y.const],
                "labels": ["0", "1"],
            }
        else:
            w = [0] * len(idx)
            for c, v in y.terms.items():
                w[idx[c]] = v
            output = {"kind": "value", "weight": [w], "bias": [y.const]}
        bound = min_bound([h.bound for h in infos])
        ref: dict[str, Any] = {
            "kind": "rasp",
            "program": prog.source or "",
            "gap_bound": bound,
            "head_gap_bounds": [[h.layer, h.head, h.bound or "inf"] for h in infos],
        }
        if self.bounded and output["kind"] == "value":
            ref["output_scale"] = "1/(n+1)"  # the program's integer k is shown as k/(n+1)
        model = b.to_model(output, temperature=_temperature(bound), reference=ref, min_length=1)
        # proved bounds at every n for `exactattn certify` (proofs/claims.md, Propositions R
        # and RB)
        if self.bounded:
            act = activation_bound_scaled(
                [r for c, r in self.crange.items() if self.ctype[c] == "int"]
            )
        else:
            act = activation_bound(
                [r for c, r in self.crange.items() if c not in self.squares], bool(self.squares)
            )
        claims = claims_for(
            bound,
            list(self.embed_pos.values()),
            output["kind"],
            any(h.primitive == "select" for h in infos),
            act,
            bounded=self.bounded,
        )
        if claims is not None and not self.bounded:
            # Theorem S's claims (Proposition R(f)) are proved for the unbounded encoding only:
            # the bounded one holds an integer k as k/(n+1) and its heads have the profiles
            # of Lemmas RB1–RB6, which Proposition R(f) does not cover
            embedded = set(self.embed_token) | set(self.embed_pos)
            claims.update(
                chain_claims(
                    list(b.coords),
                    self.crange,
                    self.ctype,
                    self.squares,
                    embedded,
                    [(h.layer, h.head, h.primitive) for h in infos],
                )
            )
        if claims is not None:
            model["claims"] = claims
        return Compiled(model, infos, bound)


def _fit(name: str, limit: int = MAX_NAME) -> str:
    """A compiler-made name within the model format's limit (MAX_NAME characters)."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _ffn_name(labels: list[str]) -> str:
    """``ffn: line 3 (x), line 4 (y)``; with many definitions in one layer (19 made a name of
    271 characters, which the loader refused; issue 40), the first ones and the count."""
    name = "ffn: " + ", ".join(labels)
    if len(name) <= MAX_NAME:
        return name
    tail = f", … ({len(labels)} definitions)"
    kept: list[str] = []
    for label in labels:
        if len("ffn: " + ", ".join([*kept, label]) + tail) > MAX_NAME:
            break
        kept.append(label)
    return "ffn: " + ", ".join(kept) + tail


def _too_big(what: str) -> str:
    return (
        f"the compiled model would have {what} (docs/limits.md) (fix: fewer chained attends, "
        "or split the program into smaller ones)"
    )


def _temperature(bound: str) -> str:
    """τ(n) = γ_bound(n) / (8·log(n + 2)): the softmax leak e^(−γ/τ) ≤ (n + 2)^(−8)."""
    if bound == "1/(n + 1)":
        return "1/(8*(n+1)*log(n+2))"
    if bound.startswith("1/(n + 1)^"):  # the bounded encoding: 1/(n + 1)^2, 1/(n + 1)^3
        return f"1/(8*(n+1)^{bound.removeprefix('1/(n + 1)^')}*log(n+2))"
    return "1/(8*log(n+2))"


def compile_program(prog: Program, embedding: str = "unbounded") -> Compiled:
    """Compile a checked program; RaspError (line, column) for what the compiler cannot do.

    ``embedding``: ``"unbounded"`` (every integer exact in the stream, γ ≥ 1/(n+1)) or
    ``"bounded"`` (every entry and activation bounded by a constant, γ ≥ 1/(n+1)³)."""
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding {embedding!r}: expected one of {', '.join(EMBEDDINGS)}")
    if prog.source is None:
        prog = Program(prog.name, prog.alphabet, prog.defs, prog.output, source=unparse(prog))
    if len(prog.source or "") > MAX_STRING:  # the model keeps it as its reference
        raise RaspError(
            Loc(1, 1),
            f"a program of {len(prog.source or ''):,} characters; the model keeps it as its "
            f"reference, a string of at most {MAX_STRING:,} (fix: shorten it, e.g. its comments)",
        )
    for s in prog.alphabet:  # the model's tokens: printable names of at most MAX_NAME
        if len(s) > MAX_NAME or not s.isprintable():
            lines = (prog.source or "").splitlines()
            at = next((k for k, t in enumerate(lines, 1) if t.startswith("alphabet")), 0)
            raise RaspError(
                Loc(at, 1) if at else prog.output.loc,
                f"alphabet symbol {clip(s)!r}: a model token is 1 to {MAX_NAME} printable "
                "characters (fix: a shorter symbol without control characters)",
            )
    try:
        out = _Compiler(prog, embedding).run()
    except ProgramError as exc:  # pragma: no cover - the back end's checks are invariants here
        raise RaspError(prog.output.loc, f"internal compile error: {exc}") from None
    # how it was built (the program itself is reference.program): `certify` recompiles it; the
    # encoding is one more recorded argument (left out for the default: today's files unchanged)
    args: dict[str, Any] = {"name": prog.name}
    if embedding != "unbounded":
        args["embedding"] = embedding
    return replace(out, model=stamp(out.model, "rasp", args))
