"""A Python front end in the style of tracr's ``rasp`` (for notebooks); it builds the same
program representation as the text syntax.

    from exactattn.rasp import api as r
    opn = r.token_in("(", "[").named("open")
    depth = r.psum(r.to_int(opn) - r.to_int(~opn)).named("depth")
    sel = r.select("rightmost", "j<i", opn.at_j & (depth.at_j == depth + 1))
    found = r.aggregate(sel, True, default=False).named("found")
    prog = r.program("demo", ["(", ")", "[", "]"], accept=found)

Vectors combine with ``& | ~`` (Booleans), ``+ - *`` (integers; ``*`` by a literal) and
comparisons; ``x.at_j`` reads x at the key inside a selector. ``r.run(prog, word)`` is the
interpreter; the compiler is ``exactattn.constructions.rasp_compile.compile_program`` (a stage
above the language: the language never imports the compiler).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exactattn.rasp.ast import (
    Attend,
    Bin,
    Call,
    Const,
    Def,
    Expr,
    Ite,
    Not,
    Output,
    Program,
    RaspError,
    Ref,
    TokenTest,
)
from exactattn.rasp.check import check_program
from exactattn.rasp.interpret import run as _run
from exactattn.rasp.unparse import unparse

__all__ = [
    "V", "aggregate", "if_", "length", "max_", "min_", "abs_", "position",
    "program", "psum", "run", "select", "to_int", "token_eq", "token_in",
]  # fmt: skip

_ids = itertools.count(1)
_MASKS = {"none": "none", "j": "none", "j<i": "lt", "j<=i": "leq", "j>i": "gt", "j>=i": "geq"}


def _flip(e: Expr, side: str) -> Expr:
    if isinstance(e, Ref):
        return Ref(e.name, side) if e.name != "n" else e
    if isinstance(e, TokenTest):
        return TokenTest(e.tokens, side)
    if isinstance(e, Not):
        return Not(_flip(e.arg, side))
    if isinstance(e, Bin):
        return Bin(e.op, _flip(e.left, side), _flip(e.right, side))
    if isinstance(e, Call):
        if e.fn == "psum":
            raise RaspError(e.loc, "name a prefix sum (.named) before reading it at j")
        return Call(e.fn, tuple(_flip(a, side) for a in e.args))
    if isinstance(e, Ite):
        return Ite(_flip(e.cond, side), _flip(e.then, side), _flip(e.other, side))
    return e


@dataclass(frozen=True, eq=False)
class V:
    """A vector expression with its type and the definitions it depends on."""

    expr: Expr
    type: str
    deps: tuple[Def, ...] = ()

    # -- naming ---------------------------------------------------------------------------
    def named(self, name: str) -> V:
        """Make this vector a named definition (it then appears once in the program)."""
        d = Def(name, self.type, self.expr)
        return V(Ref(name), self.type, (*self.deps, d))

    @property
    def at_j(self) -> V:
        """This vector read at the key position j (inside a selector)."""
        return V(_flip(self.expr, "j"), self.type, self.deps)

    # -- operators ------------------------------------------------------------------------
    def _bin(self, op: str, other: Any, t: str) -> V:
        o = lift(other)
        return V(Bin(op, self.expr, o.expr), t, (*self.deps, *o.deps))

    def __and__(self, o: Any) -> V:
        return self._bin("and", o, "bool")

    def __rand__(self, o: Any) -> V:
        return lift(o)._bin("and", self, "bool")

    def __or__(self, o: Any) -> V:
        return self._bin("or", o, "bool")

    def __ror__(self, o: Any) -> V:
        return lift(o)._bin("or", self, "bool")

    def __invert__(self) -> V:
        return V(Not(self.expr), "bool", self.deps)

    def __add__(self, o: Any) -> V:
        return self._bin("+", o, "int")

    def __radd__(self, o: Any) -> V:
        return lift(o)._bin("+", self, "int")

    def __sub__(self, o: Any) -> V:
        return self._bin("-", o, "int")

    def __rsub__(self, o: Any) -> V:
        return lift(o)._bin("-", self, "int")

    def __mul__(self, o: Any) -> V:
        return self._bin("*", o, "int")

    def __rmul__(self, o: Any) -> V:
        return lift(o)._bin("*", self, "int")

    def __neg__(self) -> V:
        return lift(0)._bin("-", self, "int")

    def __eq__(self, o: Any) -> V:  # type: ignore[override]
        return self._bin("==", o, "bool")

    def __ne__(self, o: Any) -> V:  # type: ignore[override]
        return self._bin("!=", o, "bool")

    def __lt__(self, o: Any) -> V:
        return self._bin("<", o, "bool")

    def __le__(self, o: Any) -> V:
        return self._bin("<=", o, "bool")

    def __gt__(self, o: Any) -> V:
        return self._bin(">", o, "bool")

    def __ge__(self, o: Any) -> V:
        return self._bin(">=", o, "bool")

    def __bool__(self) -> bool:
        raise TypeError("a RASP vector has no truth value here; use & | ~ and if_()")

    __hash__ = object.__hash__


def lift(x: Any) -> V:
    if isinstance(x, V):
        return x
    if isinstance(x, bool):
        return V(Const(x), "bool")
    if isinstance(x, int):
        return V(Const(x) if x >= 0 else Bin("-", Const(0), Const(-x)), "int")
    raise TypeError(f"cannot use {type(x).__name__} in a RASP program")


def token_in(*tokens: str) -> V:
    """1 at positions whose token is one of ``tokens``."""
    return V(TokenTest(tuple(tokens)), "bool")


def token_eq(token: str) -> V:
    return token_in(token)


position = V(Ref("pos"), "int")
length = V(Ref("n"), "int")


def to_int(b: V) -> V:
    return V(Call("int", (b.expr,)), "int", b.deps)


def psum(x: V) -> V:
    """Σ_{j ≤ i} x_j (an integer vector; convert Booleans with to_int)."""
    return V(Call("psum", (x.expr,)), "int", x.deps)


def min_(a: Any, b: Any) -> V:
    a, b = lift(a), lift(b)
    return V(Call("min", (a.expr, b.expr)), "int", (*a.deps, *b.deps))


def max_(a: Any, b: Any) -> V:
    a, b = lift(a), lift(b)
    return V(Call("max", (a.expr, b.expr)), "int", (*a.deps, *b.deps))


def abs_(a: V) -> V:
    return V(Call("abs", (a.expr,)), "int", a.deps)


def if_(c: V, a: Any, b: Any) -> V:
    a, b = lift(a), lift(b)
    return V(Ite(c.expr, a.expr, b.expr), "bool", (*c.deps, *a.deps, *b.deps))


@dataclass(frozen=True)
class Selector:
    choice: str
    mask: str
    where: V


def select(choice: str, mask: str, where: V | bool) -> Selector:
    """``choice`` ∈ leftmost/rightmost; ``mask`` ∈ none, j<i, j<=i, j>i, j>=i."""
    if choice not in ("leftmost", "rightmost"):
        raise ValueError(f"choice {choice!r}: use leftmost or rightmost")
    m = _MASKS.get(mask.replace(" ", ""))
    if m is None:
        raise ValueError(f"mask {mask!r}: use none, j<i, j<=i, j>i or j>=i")
    return Selector(choice, m, lift(where))


def aggregate(sel: Selector, value: Any, default: Any) -> V:
    """The value at the chosen key (read it with ``.at_j``), or ``default`` at i if none."""
    v, d = lift(value), lift(default)
    e = Attend(sel.choice, sel.mask, sel.where.expr, v.expr, d.expr)
    name = f"attn{next(_ids)}"
    deps = (*sel.where.deps, *v.deps, *d.deps)
    return V(Ref(name), v.type, (*deps, Def(name, v.type, e)))


def program(
    name: str, alphabet: Sequence[str], *, accept: V | None = None, output: V | None = None
) -> Program:
    """The program computing ``accept`` (at the last position) or ``output`` (everywhere)."""
    if (accept is None) == (output is None):
        raise ValueError("give exactly one of accept= or output=")
    out = accept if accept is not None else output
    assert out is not None
    defs: dict[str, Def] = {}
    for d in out.deps:
        if d.name in defs and defs[d.name] != d:
            raise RaspError(d.loc, f"two different vectors are named '{d.name}'")
        defs[d.name] = d
    prog = Program(
        name,
        tuple(alphabet),
        tuple(defs.values()),
        Output("accept" if accept is not None else "output", out.expr),
    )

    check_program(prog)
    return Program(prog.name, prog.alphabet, prog.defs, prog.output, source=unparse(prog))


def run(prog: Program, word: Sequence[str]) -> Any:

    return _run(prog, word)
