"""Program → text in the syntax of ``parse.py`` (fully parenthesized; parse ∘ unparse = id).

Used to record API-built programs as the ``reference`` of compiled models.
"""

from __future__ import annotations

import json

from exactattn.rasp.ast import Attend, Bin, Call, Const, Expr, Ite, Not, Program, Ref, TokenTest

__all__ = ["unparse", "unparse_expr"]

_MASK = {"none": "j", "lt": "j < i", "leq": "j <= i", "gt": "j > i", "geq": "j >= i"}


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def unparse_expr(e: Expr) -> str:
    if isinstance(e, Const):
        if isinstance(e.value, bool):
            return "true" if e.value else "false"
        return str(e.value) if e.value >= 0 else f"(0 - {-e.value})"
    if isinstance(e, Ref):
        if e.name == "n":
            return "n"
        return e.name if e.side == "i" else f"{e.name}[j]"
    if isinstance(e, TokenTest):
        side = "" if e.side == "i" else "[j]"
        return f"(token{side} in {{{', '.join(_q(t) for t in e.tokens)}}})"
    if isinstance(e, Not):
        return f"(not {unparse_expr(e.arg)})"
    if isinstance(e, Bin):
        return f"({unparse_expr(e.left)} {e.op} {unparse_expr(e.right)})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(unparse_expr(a) for a in e.args)})"
    if isinstance(e, Ite):
        return (
            f"(if {unparse_expr(e.cond)} then {unparse_expr(e.then)} else {unparse_expr(e.other)})"
        )
    if isinstance(e, Attend):
        return (
            f"attend {e.choice} {_MASK[e.mask]} where {unparse_expr(e.where)} "
            f"value {unparse_expr(e.value)} default {unparse_expr(e.default)}"
        )
    raise TypeError(type(e).__name__)


def unparse(p: Program) -> str:
    lines = [f"program {p.name}", "alphabet " + " ".join(_q(a) for a in p.alphabet)]
    for d in p.defs:
        lines.append(f"{d.type} {d.name} = {unparse_expr(d.expr)}")
    lines.append(f"{p.output.kind} {unparse_expr(p.output.expr)}")
    return "\n".join(lines) + "\n"
