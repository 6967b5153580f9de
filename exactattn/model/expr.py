"""A tiny, closed expression language for position embeddings and temperatures.

Model files are data, never code: expressions are tokenized and parsed here by a
recursive-descent parser over a fixed grammar, so no user text ever reaches ``eval``.
Values are exact (``Fraction``) wherever they are rational; irrational values
(``sqrt``, ``log``, ``exp``, allowed only in temperatures) are certified ``flint.arb``
balls. Nothing passes through binary floating point.

Grammar (``^`` and ``**`` are the same operator, right-associative, binding tighter
than unary minus, so ``-2^2 = -4``)::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "/") unary)*
    unary := ("-" | "+") unary | power
    power := atom (("^" | "**") unary)?
    atom  := NUMBER | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from flint import arb, ctx, fmpq

from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import frac_str

__all__ = [
    "Expr",
    "ExprError",
    "NotRationalError",
    "UndecidedError",
    "parse_expression",
]

MAX_TEXT = 10_000  # characters; keeps parsing and evaluation cheap and bounded
MAX_DEPTH = 50  # nesting of parentheses / unary signs / powers / calls
MAX_LITERAL_DIGITS = 1_000
MAX_LITERAL_EXPONENT = 300
MAX_POWER_EXPONENT = 1024
MAX_BITS = 200_000  # refuse rationals whose numerator or denominator is larger
MAX_EXP_ARGUMENT = 2**20
"""Largest |x| in exp(x): e^(2^20) is already 2^1,512,775; exp(-exp(20)) = 2^-(7·10^8) made
the check's exact conversions take minutes and gigabytes (issue 27), and a further exp
would need an exponent of 7·10^8 bits."""

TRANSCENDENTAL = frozenset({"sqrt", "log", "exp"})
_ARITY: dict[str, tuple[int, int | None]] = {
    "sqrt": (1, 1),
    "log": (1, 1),
    "exp": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "mod": (2, 2),
    "min": (1, None),
    "max": (1, None),
}


class ExprError(ExactAttnError, ValueError):
    """Bad expression text or an undefined value; the message names the offending text."""


class NotRationalError(ExprError):
    """An exact evaluation met an irrational value (``sqrt(2)``, ``log(3)``, ``exp(1)``)."""


class LimitError(ExprError):
    """A value beyond a documented size limit (``exp`` of more than ±2^20; docs/limits.md)."""


class UndecidedError(ExprError):
    """A ball evaluation cannot make a decision (floor, division, ...) at this precision."""


# --------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class _Node:
    """Common node data: source span (for messages), variables used, transcendental flag."""

    start: int
    end: int
    names: frozenset[str]
    trans: bool


@dataclass(frozen=True)
class _Num(_Node):
    value: Fraction


@dataclass(frozen=True)
class _Var(_Node):
    name: str


@dataclass(frozen=True)
class _Neg(_Node):
    arg: _Node


@dataclass(frozen=True)
class _Sum(_Node):
    """n-ary so that long chains do not make deep trees; ``signs[k]`` is '+' or '-'."""

    signs: tuple[str, ...]
    terms: tuple[_Node, ...]


@dataclass(frozen=True)
class _Prod(_Node):
    """n-ary, left to right; ``ops[k]`` is '*' or '/' (``ops[0]`` is always '*')."""

    ops: tuple[str, ...]
    factors: tuple[_Node, ...]


@dataclass(frozen=True)
class _Pow(_Node):
    base: _Node
    exponent: _Node


@dataclass(frozen=True)
class _Call(_Node):
    fn: str
    args: tuple[_Node, ...]


def _meta(kids: Collection[_Node]) -> tuple[frozenset[str], bool]:
    names: frozenset[str] = frozenset().union(*(k.names for k in kids))
    return names, any(k.trans for k in kids)


# --------------------------------------------------------------------------- lexer

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|[-+*/^(),])
    """,
    re.VERBOSE,
)
_LITERAL = re.compile(r"([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "name", "op", "end", or "bad" (text is then the error message)
    text: str
    start: int


def _parse_error(text: str, message: str, offset: int) -> ExprError:
    return ExprError(f"{message} at offset {offset} in expression {text!r}")


def _literal_value(text: str, lit: str, start: int) -> Fraction:
    """Exact value of a decimal literal, e.g. '0.1' is 1/10, never a binary double."""
    m = _LITERAL.fullmatch(lit)
    assert m is not None  # the token regex only admits this shape
    whole, frac, exp = m.group(1), m.group(2) or "", m.group(3)
    if len(whole) + len(frac) > MAX_LITERAL_DIGITS:
        raise _parse_error(
            text, f"number {lit[:20]!r}... has more than {MAX_LITERAL_DIGITS} digits", start
        )
    e = 0
    if exp is not None:
        digits = exp.lstrip("+-").lstrip("0")
        if len(digits) > 4 or int(exp) < -MAX_LITERAL_EXPONENT or int(exp) > MAX_LITERAL_EXPONENT:
            raise _parse_error(
                text,
                f"exponent of number {lit!r} is outside -{MAX_LITERAL_EXPONENT}.."
                f"{MAX_LITERAL_EXPONENT}",
                start,
            )
        e = int(exp)
    mantissa = int(whole + frac or "0")
    scale = e - len(frac)
    if scale >= 0:
        return Fraction(mantissa * 10**scale)
    return Fraction(mantissa, 10**-scale)


def _tokenize(text: str) -> list[_Token]:
    """Tokens up to the first unreadable spot, which becomes a "bad" token: the parser
    reports it only when it gets there, so ``__import__('os')`` is blamed on the name."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            tokens.append(_Token("bad", f"unexpected character {text[pos]!r}", pos))
            return tokens
        kind = m.lastgroup
        assert kind is not None
        nxt = text[m.end()] if m.end() < len(text) else ""
        if kind == "num" and (nxt.isalnum() or nxt in ("_", ".")):
            bad = re.match(r"[0-9A-Za-z_.]+", text[pos:])
            assert bad is not None
            tokens.append(_Token("bad", f"malformed number {bad.group(0)!r}", pos))
            return tokens
        if kind != "ws":
            tokens.append(_Token(kind, m.group(0), pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


# --------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over the token list; depth is bounded so input cannot overflow."""

    def __init__(self, text: str, variables: frozenset[str], transcendental: bool) -> None:
        self.text = text
        self.variables = variables
        self.transcendental = transcendental
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0

    def peek(self) -> _Token:
        tok = self.tokens[self.pos]
        if tok.kind == "bad":
            raise _parse_error(self.text, tok.text, tok.start)
        return tok

    def at_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text in ops

    def take(self) -> _Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def error(self, message: str, tok: _Token | None = None) -> ExprError:
        tok = tok or self.peek()
        return _parse_error(self.text, message, tok.start)

    def unexpected(self, wanted: str) -> ExprError:
        tok = self.peek()
        if tok.kind == "end":
            return self.error(f"expression ends early (expected {wanted})")
        return self.error(f"unexpected {tok.text!r} (expected {wanted})")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression is nested more than {MAX_DEPTH} levels deep")

    def parse(self) -> _Node:
        if self.peek().kind == "end":
            raise _parse_error(self.text, "empty expression", 0)
        node = self.expr()
        if self.peek().kind != "end":
            raise self.unexpected("an operator or the end of the expression")
        return node

    def expr(self) -> _Node:
        terms = [self.term()]
        signs = ["+"]
        while self.at_op("+", "-"):
            signs.append(self.take().text)
            terms.append(self.term())
        if len(terms) == 1:
            return terms[0]
        return _Sum(terms[0].start, terms[-1].end, *_meta(terms), tuple(signs), tuple(terms))

    def term(self) -> _Node:
        factors = [self.unary()]
        ops = ["*"]
        while self.at_op("*", "/"):
            ops.append(self.take().text)
            factors.append(self.unary())
        if len(factors) == 1:
            return factors[0]
        return _Prod(factors[0].start, factors[-1].end, *_meta(factors), tuple(ops), tuple(factors))

    def unary(self) -> _Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("+", "-"):
            self.take()
            self.enter()
            arg = self.unary()
            self.depth -= 1
            if tok.text == "+":
                return replace(arg, start=tok.start)
            return _Neg(tok.start, arg.end, arg.names, arg.trans, arg)
        return self.power()

    def power(self) -> _Node:
        base = self.atom()
        if self.at_op("^", "**"):
            self.take()
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return _Pow(base.start, exponent.end, *_meta((base, exponent)), base, exponent)
        return base

    def atom(self) -> _Node:
        tok = self.peek()
        if tok.kind == "num":
            self.take()
            value = _literal_value(self.text, tok.text, tok.start)
            return _Num(tok.start, tok.start + len(tok.text), frozenset(), False, value)
        if tok.kind == "name":
            return self.name()
        if tok.kind == "op" and tok.text == "(":
            self.take()
            self.enter()
            inner = self.expr()
            self.depth -= 1
            close = self.peek()
            if close.kind != "op" or close.text != ")":
                raise self.unexpected(f"')' to close '(' at offset {tok.start}")
            self.take()
            return replace(inner, start=tok.start, end=close.start + 1)
        raise self.unexpected("a number, a variable, a function call or '('")

    def name(self) -> _Node:
        tok = self.take()
        name = tok.text
        if name not in _ARITY and name not in self.variables:
            allowed = ", ".join(sorted(self.variables)) or "none"
            # only the functions this context takes (exp/log/sqrt: temperatures only)
            funcs = sorted(f for f in _ARITY if self.transcendental or f not in TRANSCENDENTAL)
            raise self.error(
                f"unknown name {name!r} (variables allowed here: {allowed}; functions allowed "
                f"here: {', '.join(funcs)})",
                tok,
            )
        if name in TRANSCENDENTAL and not self.transcendental:
            raise self.error(f"function {name!r} is allowed only in temperatures, not here", tok)
        is_call = self.at_op("(")
        if name in _ARITY:
            if not is_call:
                raise self.error(f"function {name!r} needs arguments in parentheses", tok)
            return self.call(tok)
        if is_call:
            raise self.error(f"variable {name!r} is not a function", tok)
        return _Var(tok.start, tok.start + len(name), frozenset({name}), False, name)

    def call(self, name_tok: _Token) -> _Node:
        fn = name_tok.text
        self.take()  # "("
        self.enter()
        args = [self.expr()]
        while self.at_op(","):
            self.take()
            args.append(self.expr())
        self.depth -= 1
        close = self.peek()
        if close.kind != "op" or close.text != ")":
            raise self.unexpected(f"',' or ')' to close {fn}(")
        self.take()
        lo, hi = _ARITY[fn]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}"
            raise self.error(f"{fn}() takes {want} argument(s), got {len(args)}", name_tok)
        names, trans = _meta(args)
        return _Call(
            name_tok.start, close.start + 1, names, trans or fn in TRANSCENDENTAL, fn, tuple(args)
        )


# --------------------------------------------------------------------------- evaluation

Value = Fraction | arb


def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _floor(q: Fraction) -> int:
    return q.numerator // q.denominator


def _exact_sqrt(q: Fraction) -> Fraction | None:
    """sqrt of a reduced rational is rational iff numerator and denominator are squares."""
    rn, rd = math.isqrt(q.numerator), math.isqrt(q.denominator)
    if rn * rn == q.numerator and rd * rd == q.denominator:
        return Fraction(rn, rd)
    return None


def _to_arb(v: Value) -> arb:
    if isinstance(v, Fraction):
        return arb(fmpq(v.numerator, v.denominator))
    return v


class _Evaluator:
    """One evaluation: the environment, the mode, and message context."""

    def __init__(self, text: str, env: Mapping[str, Fraction], prec: int | None) -> None:
        self.text = text
        self.env = env
        self.prec = prec

    # ---- messages

    def fail(self, cls: type[ExprError], message: str, node: _Node) -> ExprError:
        sub = self.text[node.start : node.end]
        where = f" in {sub!r}" if sub == self.text else f" in {sub!r} (part of {self.text!r})"
        vals = ", ".join(f"{k}={self.env[k]}" for k in sorted(self.env))
        at = f" at {vals}" if vals else ""
        extra = f" with {self.prec}-bit balls" if cls is UndecidedError else ""
        return cls(f"{message}{where}{at}{extra}")

    def sized(self, q: Fraction, node: _Node) -> Fraction:
        if _bits(q) > MAX_BITS:
            raise self.fail(ExprError, f"value is too large (more than {MAX_BITS} bits)", node)
        return q

    # ---- exact

    def exact(self, node: _Node) -> Fraction:
        if isinstance(node, _Num):
            return node.value
        if isinstance(node, _Var):
            return self.env[node.name]
        if isinstance(node, _Neg):
            return -self.exact(node.arg)
        if isinstance(node, _Sum):
            total = Fraction(0)
            for sign, term in zip(node.signs, node.terms, strict=True):
                v = self.exact(term)
                total = self.sized(total + v if sign == "+" else total - v, node)
            return total
        if isinstance(node, _Prod):
            acc = self.exact(node.factors[0])
            for op, factor in zip(node.ops[1:], node.factors[1:], strict=True):
                v = self.exact(factor)
                if op == "*":
                    acc = acc * v
                elif v == 0:
                    raise self.fail(ExprError, "division by zero", node)
                else:
                    acc = acc / v
                acc = self.sized(acc, node)
            return acc
        if isinstance(node, _Pow):
            return self.power(self.exact(node.base), self.exponent(node), node)
        if isinstance(node, _Call):
            return self.exact_call(node)
        raise AssertionError(f"unknown node {node!r}")

    def exponent(self, node: _Pow) -> int:
        """Exponents are exact integers of bounded size, checked before any power is taken.

        Exact mode lets NotRationalError through (the caller may retry with balls)."""
        e = self.exact(node.exponent) if self.prec is None else self.ball(node.exponent)
        if not isinstance(e, Fraction):
            raise self.fail(ExprError, f"exponent must be an integer, got the ball {e}", node)
        if e.denominator != 1:
            raise self.fail(ExprError, f"exponent must be an integer, got {e}", node)
        if abs(e) > MAX_POWER_EXPONENT:
            shown = str(e) if _bits(e) < 64 else f"about 2^{e.numerator.bit_length()}"
            raise self.fail(
                ExprError, f"exponent too large ({shown}; at most {MAX_POWER_EXPONENT})", node
            )
        return e.numerator

    def power(self, base: Fraction, e: int, node: _Node) -> Fraction:
        if base == 0 and e < 0:
            raise self.fail(ExprError, "division by zero (0 to a negative power)", node)
        if (_bits(base) - 1) * abs(e) > MAX_BITS:
            raise self.fail(ExprError, f"value is too large (more than {MAX_BITS} bits)", node)
        return base**e

    def exact_call(self, node: _Call) -> Fraction:
        fn = node.fn
        args = [self.exact(a) for a in node.args]
        if fn == "min":
            return min(args)
        if fn == "max":
            return max(args)
        x = args[0]
        if fn == "floor":
            return Fraction(_floor(x))
        if fn == "ceil":
            return Fraction(-_floor(-x))
        if fn == "mod":
            b = args[1]
            if b == 0:
                raise self.fail(ExprError, "mod by zero", node)
            return self.sized(x - b * _floor(x / b), node)
        if fn == "sqrt":
            if x < 0:
                raise self.fail(ExprError, f"sqrt of a negative number ({x})", node)
            r = _exact_sqrt(x)
            if r is None:
                raise self.fail(NotRationalError, f"value is irrational (sqrt of {x})", node)
            return r
        if fn == "log":
            if x <= 0:
                raise self.fail(ExprError, f"log of a number <= 0 ({x})", node)
            if x != 1:
                raise self.fail(NotRationalError, f"value is irrational (log of {x})", node)
            return Fraction(0)
        if fn == "exp":
            if x != 0:
                raise self.fail(NotRationalError, f"value is irrational (exp of {x})", node)
            return Fraction(1)
        raise AssertionError(fn)

    # ---- balls

    def ball(self, node: _Node) -> Value:
        """A Fraction where the value is known exactly, else a certified arb enclosure."""
        if not node.trans:
            return self.exact(node)
        if isinstance(node, _Neg):
            return -self.ball(node.arg)
        if isinstance(node, _Sum):
            total: Value = Fraction(0)
            for sign, term in zip(node.signs, node.terms, strict=True):
                total = self.combine(total, self.ball(term), sign, node)
            return total
        if isinstance(node, _Prod):
            acc = self.ball(node.factors[0])
            for op, factor in zip(node.ops[1:], node.factors[1:], strict=True):
                acc = self.combine(acc, self.ball(factor), op, node)
            return acc
        if isinstance(node, _Pow):
            e = self.exponent(node)
            base = self.ball(node.base)
            if isinstance(base, Fraction):
                return self.power(base, e, node)
            if e == 0:
                return Fraction(1)
            if e < 0:
                base = self.combine(Fraction(1), base, "/", node)
            return _to_arb(base) ** abs(e)
        if isinstance(node, _Call):
            return self.ball_call(node)
        raise AssertionError(f"unknown node {node!r}")

    def combine(self, a: Value, b: Value, op: str, node: _Node) -> Value:
        if isinstance(a, Fraction) and isinstance(b, Fraction):
            if op == "/" and b == 0:
                raise self.fail(ExprError, "division by zero", node)
            ops: dict[str, Callable[[Fraction, Fraction], Fraction]] = {
                "+": Fraction.__add__,
                "-": Fraction.__sub__,
                "*": Fraction.__mul__,
                "/": Fraction.__truediv__,
            }
            return self.sized(ops[op](a, b), node)
        x, y = _to_arb(a), _to_arb(b)
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if not (y > 0 or y < 0):
            if y.is_exact() and y.is_zero():
                raise self.fail(ExprError, "division by zero", node)
            raise self.fail(UndecidedError, f"cannot tell whether the divisor {y} is 0", node)
        return x / y

    def decide_floor(self, x: Value, node: _Node, what: str) -> Fraction:
        if isinstance(x, Fraction):
            return Fraction(_floor(x))
        k = x.floor().unique_fmpz()
        if k is None:
            raise self.fail(UndecidedError, f"cannot decide {what} of {x}", node)
        return Fraction(int(k))

    def ball_call(self, node: _Call) -> Value:
        fn = node.fn
        args = [self.ball(a) for a in node.args]
        if fn in ("min", "max"):
            return self.extremum(args, fn == "min")
        x = args[0]
        if fn == "floor":
            return self.decide_floor(x, node, "floor")
        if fn == "ceil":
            return -self.decide_floor(-x, node, "ceil")
        if fn == "mod":
            b = args[1]
            if isinstance(b, Fraction) and b == 0:
                raise self.fail(ExprError, "mod by zero", node)
            q = self.combine(x, b, "/", node)
            k = self.decide_floor(q, node, "mod")
            return self.combine(x, self.combine(b, k, "*", node), "-", node)
        if isinstance(x, Fraction):
            if fn == "sqrt" and x >= 0:
                root = _exact_sqrt(x)
                if root is not None:
                    return root
            if fn == "log" and x == 1:
                return Fraction(0)
            if fn == "exp" and x == 0:
                return Fraction(1)
        y = _to_arb(x)
        if fn == "exp":
            if not abs(y) <= MAX_EXP_ARGUMENT:
                raise self.fail(
                    LimitError,
                    f"exp of a number beyond ±{MAX_EXP_ARGUMENT:,} (= 2^20; here "
                    f"{y.mid().str(5, radius=False)})",
                    node,
                )
            return y.exp()
        if fn == "sqrt":
            if y < 0:
                raise self.fail(ExprError, f"sqrt of a negative number ({y})", node)
            if not y >= 0:
                raise self.fail(UndecidedError, f"cannot tell whether {y} is >= 0", node)
            return y.sqrt()
        if fn == "log":
            if y <= 0:
                raise self.fail(ExprError, f"log of a number <= 0 ({y})", node)
            if not y > 0:
                raise self.fail(UndecidedError, f"cannot tell whether {y} is > 0", node)
            return y.log()
        raise AssertionError(fn)

    @staticmethod
    def extremum(args: list[Value], smallest: bool) -> Value:
        """min/max are continuous: keep an argument that provably wins (it may be exact),
        otherwise return a ball enclosing the extremum; no decision is needed."""
        balls = [_to_arb(a) for a in args]
        for k, a in enumerate(balls):
            if all(k == j or (a <= b if smallest else a >= b) for j, b in enumerate(balls)):
                return args[k]
        acc = balls[0]
        for b in balls[1:]:
            acc = acc.min(b) if smallest else acc.max(b)
        return acc


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class Expr:
    """A parsed expression; build with :func:`parse_expression`. Equality and hash use the text."""

    text: str
    _root: _Node = field(repr=False, compare=False)

    def __str__(self) -> str:
        return self.text

    def variables(self) -> frozenset[str]:
        """The variables the expression actually uses (a subset of those allowed)."""
        return self._root.names

    def is_rational_valued(self) -> bool:
        """False if sqrt/log/exp occurs anywhere (their values may be irrational)."""
        return not self._root.trans

    def _env(self, env: Mapping[str, int | Fraction]) -> dict[str, Fraction]:
        out: dict[str, Fraction] = {}
        for name in sorted(self._root.names):
            if name not in env:
                raise ExprError(f"no value for variable {name!r} in {self.text!r}")
            v = env[name]
            if isinstance(v, bool) or not isinstance(v, (int, Fraction)):
                raise TypeError(
                    f"variable {name!r} must be an int or Fraction (exact), got {type(v).__name__}"
                )
            out[name] = Fraction(v)
        return out

    def eval_exact(self, env: Mapping[str, int | Fraction]) -> Fraction:
        """The exact value; NotRationalError if an irrational value occurs on the way
        (so ``sqrt(2)^2`` is refused too), ExprError on an undefined value."""
        return _Evaluator(self.text, self._env(env), None).exact(self._root)

    def eval_arb(self, env: Mapping[str, int | Fraction], prec: int) -> arb:
        """A certified enclosure at ``prec`` bits; rational sub-expressions are computed
        exactly and rounded once. The global flint precision is restored afterwards."""
        if isinstance(prec, bool) or not isinstance(prec, int) or prec < 2:
            raise TypeError(f"prec must be an int >= 2, got {prec!r}")
        values = self._env(env)
        with ctx.workprec(prec):
            out = _to_arb(_Evaluator(self.text, values, prec).ball(self._root))
        if not out.is_finite():
            raise UndecidedError(
                f"the enclosure of {self.text!r} is not finite ({out}) with {prec}-bit balls"
            )
        return out


def _precheck(text: str, node: _Node) -> _Node:
    """Fold variable-free rational sub-expressions to numbers, so constant mistakes
    (``1/0``, ``2^(10^9)``, ``2^(1/2)``, ``mod(n, 0)``) fail at parse time, not mid-check."""
    ev = _Evaluator(text, {}, None)
    if not node.names:
        try:
            value = ev.exact(node)
        except NotRationalError:
            pass  # irrational constants such as sqrt(12) are fine in temperatures
        else:
            return node if node.trans else _Num(node.start, node.end, frozenset(), False, value)
    if isinstance(node, _Neg):
        return replace(node, arg=_precheck(text, node.arg))
    if isinstance(node, _Sum):
        return replace(node, terms=tuple(_precheck(text, t) for t in node.terms))
    if isinstance(node, _Prod):
        prod = replace(node, factors=tuple(_precheck(text, f) for f in node.factors))
        for op, f in zip(prod.ops, prod.factors, strict=True):
            if op == "/" and isinstance(f, _Num) and f.value == 0:
                raise ev.fail(ExprError, "division by zero", prod)
        return prod
    if isinstance(node, _Pow):
        pw = replace(node, base=_precheck(text, node.base), exponent=_precheck(text, node.exponent))
        if not pw.exponent.names and not pw.exponent.trans:
            ev.exponent(pw)
        return pw
    if isinstance(node, _Call):
        call = replace(node, args=tuple(_precheck(text, a) for a in node.args))
        if call.fn == "mod" and isinstance(call.args[1], _Num) and call.args[1].value == 0:
            raise ev.fail(ExprError, "mod by zero", call)
        return call
    return node


def constant_expression(value: Fraction) -> Expr:
    """The exact constant ``value`` as an expression, its text as results write rationals
    (what parsing that text gives after constant folding, without the round trip)."""
    text = frac_str(value)
    return Expr(text, _Num(0, len(text), frozenset(), False, Fraction(value)))


def parse_expression(
    text: str, variables: Collection[str], *, transcendental: bool = False
) -> Expr:
    """Parse ``text`` allowing only ``variables``; sqrt/log/exp need ``transcendental``
    (temperatures). Raises ExprError naming the offending text and its offset."""
    if not isinstance(text, str):
        raise ExprError(f"an expression must be a string, got {type(text).__name__} {text!r}")
    if len(text) > MAX_TEXT:
        raise ExprError(f"expression is longer than {MAX_TEXT} characters: {text[:40]!r}...")
    try:
        root = _Parser(text, frozenset(variables), transcendental).parse()
        return Expr(text, _precheck(text, root))
    except RecursionError:  # a safety net; MAX_DEPTH should stop nesting long before
        raise ExprError(f"expression is nested too deeply: {text[:40]!r}") from None
