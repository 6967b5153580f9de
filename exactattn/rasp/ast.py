"""One program representation for B-RASP, B-RASP[pos] and S-RASP (both front ends build it).

A program is a set of named vector definitions (any order; the dependency graph must be
acyclic) plus one output. Expressions are small immutable trees; every node keeps the line
and column it came from so that errors can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "Attend",
    "Bin",
    "Call",
    "Const",
    "Def",
    "Expr",
    "Loc",
    "Not",
    "Output",
    "Program",
    "RaspError",
    "Ref",
    "TokenTest",
    "Ite",
]

MASKS = ("none", "lt", "leq", "gt", "geq")
MASK_TEXT = {"none": "j", "lt": "j < i", "leq": "j <= i", "gt": "j > i", "geq": "j >= i"}


@dataclass(frozen=True)
class Loc:
    """Where a node came from: line and column (1-based); 0, 0 for API-built nodes."""

    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        return f"line {self.line}, column {self.col}" if self.line else "(python api)"


class RaspError(ValueError):
    """A program that is not well formed (or not compilable): one line naming where."""

    def __init__(self, loc: Loc, message: str) -> None:
        self.loc = loc
        self.message = message
        super().__init__(f"{loc}: {message}")


@dataclass(frozen=True)
class Expr:
    loc: Loc = field(default=Loc(), compare=False, kw_only=True)


@dataclass(frozen=True)
class Const(Expr):
    """An integer or Boolean literal."""

    value: bool | int


@dataclass(frozen=True)
class Ref(Expr):
    """A vector read at the query (``side="i"``) or, inside attention, the key (``"j"``).

    ``name`` is a defined vector or a built-in: ``pos`` (the position, 1..n) or ``n``.
    """

    name: str
    side: str = "i"


@dataclass(frozen=True)
class TokenTest(Expr):
    """1 iff the token at ``side`` is one of ``tokens`` (the paper's Q_σ vectors)."""

    tokens: tuple[str, ...]
    side: str = "i"


@dataclass(frozen=True)
class Not(Expr):
    arg: Expr


@dataclass(frozen=True)
class Bin(Expr):
    """Binary operation: and or == != < <= > >= + - *."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call(Expr):
    """Built-in functions: int(b), psum(e), min(a, b), max(a, b), abs(a)."""

    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Ite(Expr):
    """if c then a else b (Booleans)."""

    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Attend(Expr):
    """``choice`` j in mask with ``where`` (score predicate over i and j): ``value`` at the
    chosen j, or ``default`` at i when no visible j satisfies ``where``."""

    choice: str  # "leftmost" | "rightmost"
    mask: str  # one of MASKS
    where: Expr
    value: Expr
    default: Expr


@dataclass(frozen=True)
class Def:
    """``type name = expr`` (type "bool" or "int")."""

    name: str
    type: str
    expr: Expr
    loc: Loc = Loc()
    line_text: str = ""


@dataclass(frozen=True)
class Output:
    """``accept e`` (a Boolean at the last position) or ``output e`` (every position)."""

    kind: str  # "accept" | "output"
    expr: Expr
    loc: Loc = Loc()


@dataclass(frozen=True)
class Program:
    name: str
    alphabet: tuple[str, ...]
    defs: tuple[Def, ...]
    output: Output
    source: str | None = None  # program text when it came from a file

    def def_map(self) -> dict[str, Def]:
        return {d.name: d for d in self.defs}
