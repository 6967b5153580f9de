"""Static checks shared by both front ends: names, types, sides (i/j), cycles.

The types are ``bool`` and ``int``; a Boolean is never silently an integer (``int(b)``
converts), and a prefix sum needs an integer argument. Definitions may come in any order;
the dependency graph must be acyclic. ``check_program`` returns the definitions in an order
that evaluates every vector after the ones it reads.
"""

from __future__ import annotations

from exactattn.rasp.ast import (
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

__all__ = ["check_program", "depth", "infer", "refs", "BUILTINS", "MAX_EXPR_DEPTH"]

BUILTINS = {"pos": "int", "n": "int"}
MAX_DEFS = 500  # definitions per program (the dependency walk recurses once per definition)
MAX_EXPR_DEPTH = 200
"""Deepest expression tree, a chain ``x + y + z`` counting one level per operator: the checker,
the interpreter and the compiler recurse once or twice per level, and a chain of 500 terms
passed Python's recursion limit (RecursionError, exit 4, also in ``check`` through a model's
reference; issue 40). Parentheses alone nest at most 60 deep (parse.py)."""
_CMP = ("<", "<=", ">", ">=")


def _children(x: Expr) -> list[Expr]:
    """The direct subexpressions of x, left to right."""
    if isinstance(x, Not):
        return [x.arg]
    if isinstance(x, Bin):
        return [x.left, x.right]
    if isinstance(x, Call):
        return list(x.args)
    if isinstance(x, Ite):
        return [x.cond, x.then, x.other]
    if isinstance(x, Attend):
        return [x.where, x.value, x.default]
    return []


def refs(e: Expr) -> list[Ref]:
    """Every vector reference in e (pre-order)."""
    out: list[Ref] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Ref):
            out.append(x)
        stack += reversed(_children(x))
    return out


def depth(e: Expr) -> int:
    """The number of levels of e's tree (a leaf: 1), without recursion."""
    deepest = 0
    stack = [(e, 1)]
    while stack:
        x, k = stack.pop()
        deepest = max(deepest, k)
        stack += [(c, k + 1) for c in _children(x)]
    return deepest


def _shallow(e: Expr, loc: Loc) -> None:
    """Refuse an expression deeper than MAX_EXPR_DEPTH, naming the line it is on."""
    k = depth(e)
    if k > MAX_EXPR_DEPTH:
        raise RaspError(
            loc,
            f"an expression {k} levels deep (limit {MAX_EXPR_DEPTH}; a chain x + y + z "
            "counts one level per operator) (fix: split it into named definitions)",
        )


def int_literal(e: Expr) -> int | None:
    if isinstance(e, Const) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Bin) and e.op == "-" and isinstance(e.left, Const) and e.left.value == 0:
        v = int_literal(e.right)
        return None if v is None else -v
    return None


def infer(e: Expr, types: dict[str, str], alphabet: tuple[str, ...], sides: str) -> str:
    """The type of e; ``sides`` lists the positions e may read ("i", "j" or "ij")."""

    def want(x: Expr, t: str, what: str) -> None:
        got = infer(x, types, alphabet, sides)
        if got == t:
            return
        name = f"'{x.name}'" if isinstance(x, Ref) else "this expression"
        if got == "bool":
            raise RaspError(
                x.loc, f"{name} is a Boolean, used as an integer in {what} (fix: int(...))"
            )
        raise RaspError(
            x.loc, f"{name} is an integer, used as a Boolean in {what} (fix: compare it)"
        )

    if isinstance(e, Const):
        return "bool" if isinstance(e.value, bool) else "int"
    if isinstance(e, Ref):
        if e.name == "n":  # the length is the same at every position
            return "int"
        if e.side not in sides:
            where = "the query position i" if sides == "i" else "the key position j"
            raise RaspError(e.loc, f"'{e.name}[{e.side}]': only {where} can be read here")
        if e.name in BUILTINS:
            return BUILTINS[e.name]
        if e.name not in types:
            raise RaspError(e.loc, f"unknown name '{e.name}'")
        return types[e.name]
    if isinstance(e, TokenTest):
        if e.side not in sides:
            raise RaspError(e.loc, f"token[{e.side}] cannot be read here")
        for s in e.tokens:
            if s not in alphabet:
                raise RaspError(e.loc, f"'{s}' is not in the alphabet")
        return "bool"
    if isinstance(e, Not):
        want(e.arg, "bool", "'not'")
        return "bool"
    if isinstance(e, Bin):
        if e.op in ("and", "or"):
            want(e.left, "bool", f"'{e.op}'")
            want(e.right, "bool", f"'{e.op}'")
            return "bool"
        if e.op in ("==", "!="):
            t = infer(e.left, types, alphabet, sides)
            want(e.right, t, f"'{e.op}'")
            return "bool"
        if e.op in _CMP:
            want(e.left, "int", f"'{e.op}'")
            want(e.right, "int", f"'{e.op}'")
            return "bool"
        want(e.left, "int", f"'{e.op}'")
        want(e.right, "int", f"'{e.op}'")
        if e.op == "*" and int_literal(e.left) is None and int_literal(e.right) is None:
            raise RaspError(e.loc, "'*' multiplies by an integer literal (e.g. 2 * x)")
        return "int"
    if isinstance(e, Call):
        if e.fn == "int":
            got = infer(e.args[0], types, alphabet, sides)
            if got != "bool":
                raise RaspError(
                    e.args[0].loc, "int(...) converts a Boolean; this is already an integer"
                )
            return "int"
        if e.fn == "psum":
            if "j" in sides:
                raise RaspError(e.loc, "psum cannot appear inside attention")
            got = infer(e.args[0], types, alphabet, sides)
            if got == "bool":
                raise RaspError(
                    e.args[0].loc, "prefix sum of a Boolean: convert it first, psum(int(...))"
                )
            return "int"
        for a in e.args:
            want(a, "int", f"{e.fn}(...)")
        return "int"
    if isinstance(e, Ite):
        want(e.cond, "bool", "'if'")
        want(e.then, "bool", "'then' (if/then/else chooses between Booleans)")
        want(e.other, "bool", "'else' (if/then/else chooses between Booleans)")
        return "bool"
    if isinstance(e, Attend):
        raise RaspError(e.loc, "attend is a whole definition: name it (bool x = attend ...)")
    raise RaspError(e.loc, f"unknown expression {type(e).__name__}")  # pragma: no cover


def _def_type(d: Def, types: dict[str, str], alphabet: tuple[str, ...]) -> str:
    e = d.expr
    if isinstance(e, Attend):
        for sub in (e.where, e.value, e.default):
            for r in refs(sub):
                if isinstance(r, Attend):  # pragma: no cover - refs never yields Attend
                    raise RaspError(r.loc, "attention inside attention")
        if infer(e.where, types, alphabet, "ij") != "bool":
            raise RaspError(e.where.loc, "the 'where' predicate must be Boolean")
        t = infer(e.value, types, alphabet, "j")
        td = infer(e.default, types, alphabet, "i")
        if t != td:
            raise RaspError(e.default.loc, f"the default is {td} but the value is {t}")
    else:
        t = infer(e, types, alphabet, "i")
    if t != d.type:
        if t == "bool":
            raise RaspError(
                d.loc, f"'{d.name}' is declared int but its value is a Boolean (fix: int(...))"
            )
        raise RaspError(
            d.loc, f"'{d.name}' is declared bool but its value is an integer (fix: compare it)"
        )
    return t


def check_program(p: Program) -> list[Def]:
    """Check names, types and acyclicity; return the definitions in dependency order."""
    if not p.alphabet:
        raise RaspError(p.output.loc, "the alphabet is empty")
    if len(p.defs) > MAX_DEFS:
        raise RaspError(p.defs[MAX_DEFS].loc, f"more than {MAX_DEFS} definitions")
    for d in p.defs:  # first: every later step recurses over the expressions
        _shallow(d.expr, d.loc)
    _shallow(p.output.expr, p.output.loc)
    types: dict[str, str] = {}
    by_name: dict[str, Def] = {}
    for d in p.defs:
        if d.name in by_name or d.name in BUILTINS:
            raise RaspError(d.loc, f"'{d.name}' is defined twice (or is a built-in)")
        by_name[d.name] = d
        types[d.name] = d.type
    order: list[Def] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(d: Def, path: list[str]) -> None:
        state[d.name] = 1
        for r in refs(d.expr):
            if r.name in BUILTINS:
                continue
            if r.name not in by_name:
                raise RaspError(r.loc, f"unknown name '{r.name}'")
            s = state.get(r.name)
            if s == 1:
                cyc = " -> ".join([*path[path.index(r.name) :], r.name])
                raise RaspError(r.loc, f"cycle: {cyc}")
            if s is None:
                visit(by_name[r.name], [*path, r.name])
        state[d.name] = 2
        order.append(d)

    for d in p.defs:
        if d.name not in state:
            visit(d, [d.name])
    for d in order:
        _def_type(d, types, p.alphabet)
    t = infer(p.output.expr, types, p.alphabet, "i")
    if p.output.kind == "accept" and t != "bool":
        raise RaspError(p.output.expr.loc, "accept needs a Boolean (fix: compare the integer)")
    return order
