"""Text syntax for RASP programs, read by our own parser (a program file never runs code).

Grammar and one worked example per construct: docs/rasp.md. Every error is a ``RaspError``
naming the line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    Output,
    Program,
    RaspError,
    Ref,
    TokenTest,
)
from exactattn.rasp.check import check_program

__all__ = ["parse_program", "MAX_SOURCE"]

MAX_SOURCE = 200_000  # characters; programs are small
MAX_DEPTH = 60  # expression nesting

KEYWORDS = {
    "program", "alphabet", "bool", "int", "accept", "output", "attend", "leftmost",
    "rightmost", "where", "value", "default", "and", "or", "not", "true", "false", "if",
    "then", "else", "token", "in", "psum", "min", "max", "abs", "i", "j", "pos", "n",
}  # fmt: skip

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r]+)|(?P<comment>\#[^\n]*)|(?P<nl>\n)
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<int>[0-9]+)|(?P<str>"(?:[^"\\\n]|\\.)*")
    |(?P<op>==|!=|<=|>=|[<>+\-*()\[\]{},=])""",
    re.VERBOSE,
)


@dataclass
class Tok:
    kind: str  # name int str op nl eof
    text: str
    loc: Loc


def _tokens(src: str) -> list[Tok]:
    out: list[Tok] = []
    line, line_start, pos, depth = 1, 0, 0, 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        loc = Loc(line, pos - line_start + 1)
        if not m:
            raise RaspError(loc, f"unexpected character {src[pos]!r}")
        kind = m.lastgroup or ""
        text = m.group()
        pos = m.end()
        if kind == "nl":
            if depth == 0:
                out.append(Tok("nl", "\n", loc))
            line += 1
            line_start = pos
            continue
        if kind in ("ws", "comment"):
            continue
        if kind == "str":
            text = re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "op" and text in "([{":
            depth += 1
        elif kind == "op" and text in ")]}":
            depth = max(0, depth - 1)
        out.append(Tok(kind, text, loc))
    out.append(Tok("nl", "\n", Loc(line, pos - line_start + 1)))
    out.append(Tok("eof", "", Loc(line, pos - line_start + 1)))
    # an indented line continues the statement above it
    merged: list[Tok] = []
    for k, t in enumerate(out):
        if t.kind == "nl" and k + 1 < len(out):
            nxt = out[k + 1]
            if nxt.kind not in ("nl", "eof") and nxt.loc.col > 1 and merged:
                continue
        merged.append(t)
    return merged


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _tokens(src)
        self.k = 0
        self.depth = 0
        self.lines = src.split("\n")

    # -- token helpers -----------------------------------------------------------------
    @property
    def tok(self) -> Tok:
        return self.toks[self.k]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.kind in ("op", "name") and t.text == text

    def take(self, text: str | None = None, kind: str | None = None, what: str = "") -> Tok:
        t = self.tok
        ok = (text is None or (t.text == text and t.kind in ("op", "name"))) and (
            kind is None or t.kind == kind
        )
        if not ok:
            want = what or (f"'{text}'" if text else kind or "?")
            got = (
                "end of line"
                if t.kind == "nl"
                else "end of file"
                if t.kind == "eof"
                else repr(t.text)
            )
            raise RaspError(t.loc, f"expected {want}, found {got}")
        self.k += 1
        return t

    def name(self, what: str = "a name") -> Tok:
        t = self.take(kind="name", what=what)
        if t.text in KEYWORDS:
            raise RaspError(t.loc, f"'{t.text}' is a keyword; choose another name")
        return t

    # -- program -----------------------------------------------------------------------
    def program(self, default_name: str) -> Program:
        name = default_name
        alphabet: list[str] | None = None
        defs: list[Def] = []
        output: Output | None = None
        while self.tok.kind != "eof":
            t = self.tok
            if t.kind == "nl":
                self.k += 1
                continue
            if self.at("program"):
                self.k += 1
                name = self.take(kind="name", what="a program name").text
            elif self.at("alphabet"):
                self.k += 1
                if alphabet is not None:
                    raise RaspError(t.loc, "the alphabet is given twice")
                alphabet = []
                while self.tok.kind == "str":
                    s = self.take(kind="str")
                    if not s.text or s.text in alphabet:
                        raise RaspError(s.loc, f"alphabet symbol {s.text!r} is empty or repeated")
                    alphabet.append(s.text)
                if not alphabet:
                    raise RaspError(self.tok.loc, 'expected quoted symbols, e.g. alphabet "a" "b"')
            elif self.at("bool") or self.at("int"):
                self.k += 1
                nt = self.name("a vector name")
                self.take("=")
                expr = self.expr()
                defs.append(Def(nt.text, t.text, expr, t.loc, self.lines[t.loc.line - 1].strip()))
            elif self.at("accept") or self.at("output"):
                self.k += 1
                if output is not None:
                    raise RaspError(t.loc, "a program has one output (accept or output)")
                output = Output(t.text, self.expr(), t.loc)
            else:
                raise RaspError(
                    t.loc,
                    f"expected a statement (program, alphabet, bool, int, accept, output), "
                    f"found {t.text!r}",
                )
            if self.tok.kind not in ("nl", "eof"):
                raise RaspError(self.tok.loc, f"unexpected {self.tok.text!r} after the statement")
        end = self.tok.loc
        if alphabet is None:
            raise RaspError(end, 'no alphabet: add a line like alphabet "a" "b"')
        if output is None:
            raise RaspError(end, "no output: add a line 'accept EXPR' or 'output EXPR'")
        return Program(name, tuple(alphabet), tuple(defs), output)

    # -- expressions -------------------------------------------------------------------
    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RaspError(self.tok.loc, f"expression nested deeper than {MAX_DEPTH}")
        try:
            t = self.tok
            if self.at("attend"):
                return self.attend()
            if self.at("if"):
                self.k += 1
                c = self.expr()
                self.take("then")
                a = self.expr()
                self.take("else")
                b = self.expr()
                return Ite(c, a, b, loc=t.loc)
            return self.or_()
        finally:
            self.depth -= 1

    def attend(self) -> Expr:
        t = self.take("attend")
        if not (self.at("leftmost") or self.at("rightmost")):
            raise RaspError(self.tok.loc, "expected leftmost or rightmost after attend")
        choice = self.take().text
        self.take("j", what="'j' (the key position)")
        mask = "none"
        for op, m in (("<", "lt"), ("<=", "leq"), (">", "gt"), (">=", "geq")):
            if self.at(op):
                self.k += 1
                self.take("i", what="'i' (masks compare j with i)")
                mask = m
                break
        self.take("where")
        where = self.expr()
        self.take("value")
        value = self.expr()
        self.take("default")
        default = self.expr()
        return Attend(choice, mask, where, value, default, loc=t.loc)

    def or_(self) -> Expr:
        e = self.and_()
        while self.at("or"):
            t = self.take()
            e = Bin("or", e, self.and_(), loc=t.loc)
        return e

    def and_(self) -> Expr:
        e = self.not_()
        while self.at("and"):
            t = self.take()
            e = Bin("and", e, self.not_(), loc=t.loc)
        return e

    def not_(self) -> Expr:
        if self.at("not"):
            t = self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise RaspError(t.loc, f"expression nested deeper than {MAX_DEPTH}")
            try:
                return Not(self.not_(), loc=t.loc)
            finally:
                self.depth -= 1
        return self.cmp()

    def cmp(self) -> Expr:
        if self.at("token"):
            return self.token_test()
        e = self.sum()
        for op in ("==", "!=", "<=", ">=", "<", ">"):
            if self.at(op):
                t = self.take()
                return Bin(op, e, self.sum(), loc=t.loc)
        return e

    def token_test(self) -> Expr:
        t = self.take("token")
        side = self.index()
        if self.at("in"):
            self.k += 1
            self.take("{")
            toks = [self.take(kind="str", what="a quoted symbol").text]
            while self.at(","):
                self.k += 1
                toks.append(self.take(kind="str", what="a quoted symbol").text)
            self.take("}")
            return TokenTest(tuple(toks), side, loc=t.loc)
        if self.at("==") or self.at("!="):
            op = self.take().text
            s = self.take(kind="str", what="a quoted symbol").text
            test = TokenTest((s,), side, loc=t.loc)
            return test if op == "==" else Not(test, loc=t.loc)
        raise RaspError(self.tok.loc, 'expected == "sym", != "sym" or in {...} after token')

    def index(self) -> str:
        if self.at("["):
            self.k += 1
            if not (self.at("i") or self.at("j")):
                raise RaspError(self.tok.loc, "expected [i] or [j]")
            side = self.take().text
            self.take("]")
            return side
        return "i"

    def sum(self) -> Expr:
        e = self.term()
        while self.at("+") or self.at("-"):
            t = self.take()
            e = Bin(t.text, e, self.term(), loc=t.loc)
        return e

    def term(self) -> Expr:
        e = self.unary()
        while self.at("*"):
            t = self.take()
            e = Bin("*", e, self.unary(), loc=t.loc)
        return e

    def unary(self) -> Expr:
        if self.at("-"):
            t = self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise RaspError(t.loc, f"expression nested deeper than {MAX_DEPTH}")
            try:
                return Bin("-", Const(0, loc=t.loc), self.unary(), loc=t.loc)
            finally:
                self.depth -= 1
        return self.atom()

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "int":
            self.k += 1
            if len(t.text) > 30:
                raise RaspError(t.loc, "integer literal too long")
            return Const(int(t.text), loc=t.loc)
        if self.at("true") or self.at("false"):
            self.k += 1
            return Const(t.text == "true", loc=t.loc)
        if self.at("("):
            self.k += 1
            e = self.expr()
            self.take(")")
            return e
        if self.at("token"):
            return self.token_test()
        if t.kind == "name" and t.text in ("int", "psum", "min", "max", "abs"):
            self.k += 1
            self.take("(")
            args = [self.expr()]
            while self.at(","):
                self.k += 1
                args.append(self.expr())
            self.take(")")
            want = 2 if t.text in ("min", "max") else 1
            if len(args) != want:
                raise RaspError(t.loc, f"{t.text} takes {want} argument(s), got {len(args)}")
            return Call(t.text, tuple(args), loc=t.loc)
        if t.kind == "name" and t.text == "n":
            self.k += 1
            return Ref("n", "i", loc=t.loc)
        if t.kind == "name" and (t.text == "pos" or t.text not in KEYWORDS):
            self.k += 1
            return Ref(t.text, self.index(), loc=t.loc)
        got = "end of line" if t.kind == "nl" else repr(t.text)
        raise RaspError(t.loc, f"expected an expression, found {got}")


def parse_program(src: str, default_name: str = "program") -> Program:
    """Parse program text (see docs/rasp.md); raises RaspError naming line and column."""
    if len(src) > MAX_SOURCE:
        raise RaspError(Loc(1, 1), f"program longer than {MAX_SOURCE:,} characters")
    p = _Parser(src)
    prog = p.program(default_name)

    prog = Program(prog.name, prog.alphabet, prog.defs, prog.output, source=src)
    check_program(prog)
    return prog
