"""The exact meaning of a program on one input: the oracle compiled models are checked against.

Positions are 1..n; ``pos`` is the position and ``n`` the length. Booleans are Python bools,
integers Python ints (unbounded, exact). Attention: among the visible keys j (the mask) whose
``where`` holds, the leftmost or rightmost; its ``value`` at j, or ``default`` at i if none.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from exactattn.rasp.ast import (
    Attend,
    Bin,
    Call,
    Const,
    Expr,
    Ite,
    Not,
    Program,
    RaspError,
    Ref,
    TokenTest,
)
from exactattn.rasp.check import check_program
from exactattn.rasp.parse import parse_program

__all__ = ["run", "run_vectors", "expected_output", "oracle_from_text"]

_MASK = {
    "none": lambda i, j: True,
    "lt": lambda i, j: j < i,
    "leq": lambda i, j: j <= i,
    "gt": lambda i, j: j > i,
    "geq": lambda i, j: j >= i,
}


def value_at(e: Expr, env: dict[str, list[Any]], word: Sequence[str], i: int, j: int) -> Any:
    """Value of e with query i and key j (1-based)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Ref):
        p = i if e.side == "i" else j
        if e.name == "n":
            return len(word)
        if e.name == "pos":
            return p
        return env[e.name][p - 1]
    if isinstance(e, TokenTest):
        p = i if e.side == "i" else j
        return word[p - 1] in e.tokens
    if isinstance(e, Not):
        return not value_at(e.arg, env, word, i, j)
    if isinstance(e, Bin):
        a = value_at(e.left, env, word, i, j)
        if e.op == "and":
            return a and value_at(e.right, env, word, i, j)
        if e.op == "or":
            return a or value_at(e.right, env, word, i, j)
        b = value_at(e.right, env, word, i, j)
        return {
            "==": lambda: a == b,
            "!=": lambda: a != b,
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
        }[e.op]()
    if isinstance(e, Call):
        if e.fn == "psum":
            return sum(value_at(e.args[0], env, word, k, j) for k in range(1, i + 1))
        xs = [value_at(a, env, word, i, j) for a in e.args]
        if e.fn == "int":
            return int(xs[0])
        return {"min": min, "max": max, "abs": lambda x: abs(x)}[e.fn](*xs)
    if isinstance(e, Ite):
        c = value_at(e.cond, env, word, i, j)
        return value_at(e.then if c else e.other, env, word, i, j)
    raise RaspError(e.loc, f"cannot evaluate {type(e).__name__}")  # pragma: no cover


def run_vectors(prog: Program, word: Sequence[str]) -> dict[str, list[Any]]:
    """Every defined vector on ``word`` (positions 1..n)."""
    n = len(word)
    env: dict[str, list[Any]] = {}
    for d in check_program(prog):
        e = d.expr
        if isinstance(e, Attend):
            vals = []
            for i in range(1, n + 1):
                ks = [
                    j
                    for j in range(1, n + 1)
                    if _MASK[e.mask](i, j) and value_at(e.where, env, word, i, j)
                ]
                if ks:
                    j = ks[0] if e.choice == "leftmost" else ks[-1]
                    vals.append(value_at(e.value, env, word, i, j))
                else:
                    vals.append(value_at(e.default, env, word, i, 0))
            env[d.name] = vals
        else:
            env[d.name] = [value_at(e, env, word, i, 0) for i in range(1, n + 1)]
    return env


def run(prog: Program, word: Sequence[str]) -> Any:
    """The program's output: accept → bool; output → a list (bool or int per position)."""
    env = run_vectors(prog, word)
    n = len(word)
    if prog.output.kind == "accept":
        return bool(value_at(prog.output.expr, env, word, n, 0))
    return [value_at(prog.output.expr, env, word, i, 0) for i in range(1, n + 1)]


def expected_output(prog: Program, word: Sequence[str]) -> Any:
    """The program's output in the shape ``Oracle.expected`` uses for the compiled model:
    accept → bool; a Boolean output → labels "0"/"1"; an integer output → 1-vectors."""
    out = run(prog, word)
    if prog.output.kind == "accept":
        return out

    if out and isinstance(out[0], bool):
        return ["1" if b else "0" for b in out]
    return [(Fraction(v),) for v in out]


@lru_cache(maxsize=32)
def oracle_from_text(text: str) -> Program:
    """Parse a program once per process (references hold the program text)."""

    return parse_program(text)
