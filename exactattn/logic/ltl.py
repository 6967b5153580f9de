"""LTL with previous/next, since/until and counting: parser, printer and evaluator.

This module is the oracle for reference kind ``{"kind": "ltl", "formula": ...}``: it
must stay independent of the compiler in :mod:`exactattn.constructions.ltl`, so it evaluates
formulas directly on words by dynamic programming, never through a transformer.

Grammar (loosest binding first)::

    formula := disj
    disj    := conj ('|' conj)*
    conj    := temp ('&' temp)*
    temp    := unary (('S' | 'U') temp)?          # right-associative
    unary   := ('!' | 'Y' | 'X') unary | primary
    primary := 'true' | 'false' | SYMBOL | '(' formula ')' | lin CMP lin
    lin     := ['-'] term (('+' | '-') term)*
    term    := INT ['*' count] | count ['*' INT]
    count   := '#[' formula ']' | '#>[' formula ']'
    CMP     := '<' | '<=' | '=' | '>=' | '>' | '!='

Semantics at position i of a word w_1 … w_n (1-based):

* ``a``: w_i = a;  ``Y φ``: φ at i−1 (false at 1);  ``X φ``: φ at i+1 (false at n);
* ``φ S ψ``: some j < i has ψ at j and φ at every k with j < k < i;
* ``φ U ψ``: some j > i has ψ at j and φ at every k with i < k < j;
* ``#[φ]``: the number of j ≤ i where φ holds; ``#>[φ]``: the number of j ≥ i.

A word is accepted iff the formula holds at its last position (the empty word is
never accepted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KEYWORDS = frozenset({"true", "false", "Y", "X", "S", "U"})

_READ = "this LTL has Y, X, S, U and counting, read at the last position"
MISSING_OPERATORS = {
    "G": f"{_READ}; 'φ at every position' (G φ) is #[!φ] = 0",
    "F": f"{_READ}; 'φ at some position' (F φ) is #[φ] >= 1",
    "H": f"{_READ}; 'φ at every position so far' (H φ) is #[!φ] = 0",
    "O": f"{_READ}; 'φ at some position so far' (O φ) is #[φ] >= 1",
}
"""Hints for operators other LTLs have: a letter not in the alphabet that a user of those
LTLs writes for G/F (future) or H/O (past) gets the formula that says it here."""
COMPARATORS = ("<", "<=", "=", ">=", ">", "!=")


class LTLSyntaxError(ValueError):
    """A formula that does not parse; the message names the offending text and offset."""

    def __init__(self, message: str, text: str, offset: int, hint: str = "") -> None:
        self.text = text
        self.offset = offset
        shown = text[offset : offset + 20] or "end of formula"
        whole = text if len(text) <= 80 else text[:80] + f"… ({len(text):,} characters)"
        super().__init__(f"{message} at offset {offset} ({shown!r}) in {whole!r}{hint}")


# ---------------------------------------------------------------------------
# syntax tree (frozen, hashable: the compiler shares equal subformulas)
# ---------------------------------------------------------------------------


def _cached_hash(cls: type) -> type:
    """Memoize the dataclass hash: formulas built as DAGs (induction heads) are
    exponentially large as trees, and the generated hash walks the tree."""
    generated = cls.__hash__

    def __hash__(self: object) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = generated(self)  # type: ignore[misc]
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self: object) -> dict:
        # string hashes differ between processes: never pickle the cached one
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    return cls


@_cached_hash
@dataclass(frozen=True)
class Const:
    value: bool


@_cached_hash
@dataclass(frozen=True)
class Atom:
    symbol: str


@_cached_hash
@dataclass(frozen=True)
class Not:
    arg: Formula


@_cached_hash
@dataclass(frozen=True)
class And:
    left: Formula
    right: Formula


@_cached_hash
@dataclass(frozen=True)
class Or:
    left: Formula
    right: Formula


@_cached_hash
@dataclass(frozen=True)
class Prev:
    arg: Formula


@_cached_hash
@dataclass(frozen=True)
class Next:
    arg: Formula


@_cached_hash
@dataclass(frozen=True)
class Since:
    left: Formula
    right: Formula


@_cached_hash
@dataclass(frozen=True)
class Until:
    left: Formula
    right: Formula


@_cached_hash
@dataclass(frozen=True)
class Count:
    """``#[arg]`` (``future=False``: j ≤ i) or ``#>[arg]`` (``future=True``: j ≥ i)."""

    arg: Formula
    future: bool = False


@_cached_hash
@dataclass(frozen=True)
class Linear:
    """``Σ coeff·count + const`` as written (terms keep their order for printing)."""

    terms: tuple[tuple[int, Count], ...]
    const: int = 0


@_cached_hash
@dataclass(frozen=True)
class Compare:
    left: Linear
    op: str
    right: Linear


Formula = Const | Atom | Not | And | Or | Prev | Next | Since | Until | Compare


def normalize(cmp: Compare) -> tuple[dict[Count, int], int]:
    """``left − right`` as {count: coefficient} (zeros dropped) and a constant."""
    coeffs: dict[Count, int] = {}
    for sign, side in ((1, cmp.left), (-1, cmp.right)):
        for c, t in side.terms:
            coeffs[t] = coeffs.get(t, 0) + sign * c
    const = cmp.left.const - cmp.right.const
    return {t: c for t, c in coeffs.items() if c != 0}, const


def compare_ints(value: int, op: str) -> bool:
    """Whether ``value op 0``."""
    return {
        "<": value < 0,
        "<=": value <= 0,
        "=": value == 0,
        ">=": value >= 0,
        ">": value > 0,
        "!=": value != 0,
    }[op]


# ---------------------------------------------------------------------------
# tokenizer and parser
# ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<int>\d+)|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>#>\[|#\[|<=|>=|!=|[<>=!&|()\[\]+\-*]))"
)


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) triples, ending with an ``("end", "", len)`` sentinel."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise LTLSyntaxError("unexpected character", text, pos)
        start = m.start(m.lastgroup) if m.lastgroup else pos
        kind = m.lastgroup or "op"
        out.append((kind, m.group(kind), start))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str, alphabet: Sequence[str]) -> None:
        self.text = text
        self.alphabet = set(alphabet)
        self.toks = _tokenize(text)
        self.k = 0

    # helpers -------------------------------------------------------------
    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.k]

    def at(self, *ops: str) -> bool:
        kind, val, _ = self.peek()
        return kind in ("op", "ident") and val in ops

    def take(self) -> tuple[str, str, int]:
        tok = self.toks[self.k]
        self.k += 1
        return tok

    def expect(self, op: str) -> None:
        kind, val, off = self.peek()
        if val != op or kind == "end":
            raise LTLSyntaxError(f"expected {op!r}", self.text, off)
        self.k += 1

    def fail(self, message: str) -> LTLSyntaxError:
        return LTLSyntaxError(message, self.text, self.peek()[2])

    # grammar -------------------------------------------------------------
    def parse(self) -> Formula:
        f = self.disj()
        if self.peek()[0] != "end":
            raise self.fail("unexpected text after the formula")
        return f

    def disj(self) -> Formula:
        f = self.conj()
        while self.at("|"):
            self.take()
            f = Or(f, self.conj())
        return f

    def conj(self) -> Formula:
        f = self.temp()
        while self.at("&"):
            self.take()
            f = And(f, self.temp())
        return f

    def temp(self) -> Formula:
        f = self.unary()
        kind, val, _ = self.peek()
        if kind == "ident" and val in ("S", "U"):
            self.take()
            g = self.temp()
            return Since(f, g) if val == "S" else Until(f, g)
        return f

    def unary(self) -> Formula:
        kind, val, _ = self.peek()
        if kind == "op" and val == "!":
            self.take()
            return Not(self.unary())
        if kind == "ident" and val in ("Y", "X"):
            self.take()
            arg = self.unary()
            return Prev(arg) if val == "Y" else Next(arg)
        return self.primary()

    def primary(self) -> Formula:
        kind, val, off = self.peek()
        if kind == "ident":
            if val in ("true", "false"):
                self.take()
                return Const(val == "true")
            if val in KEYWORDS:
                raise self.fail(f"operator {val!r} where a formula was expected")
            if val not in self.alphabet:
                hint = MISSING_OPERATORS.get(val)
                raise LTLSyntaxError(
                    f"unknown symbol {val!r} (alphabet: {sorted(self.alphabet)})",
                    self.text,
                    off,
                    f" (fix: {hint}; grammar: exactattn build ltl --help)" if hint else "",
                )
            self.take()
            return Atom(val)
        if kind == "op" and val == "(":
            self.take()
            f = self.disj()
            self.expect(")")
            return f
        if kind == "int" or (kind == "op" and val in ("#[", "#>[", "-")):
            return self.comparison()
        if kind == "end":
            raise self.fail("formula ends where a formula was expected")
        raise self.fail(f"unexpected {val!r} where a formula was expected")

    def comparison(self) -> Compare:
        left = self.linear()
        kind, val, _ = self.peek()
        if not (kind == "op" and val in COMPARATORS):
            raise self.fail("expected a comparison (< <= = >= > !=) after a count expression")
        self.take()
        right = self.linear()
        return Compare(left, val, right)

    def linear(self) -> Linear:
        terms: list[tuple[int, Count]] = []
        const = 0
        sign = 1
        if self.at("-"):
            self.take()
            sign = -1
        while True:
            coeff, count = self.term()
            if count is None:
                const += sign * coeff
            else:
                terms.append((sign * coeff, count))
            if self.at("+", "-"):
                sign = 1 if self.take()[1] == "+" else -1
                continue
            return Linear(tuple(terms), const)

    def term(self) -> tuple[int, Count | None]:
        kind, val, _ = self.peek()
        if kind == "int":
            self.take()
            coeff = int(val)
            if self.at("*"):
                self.take()
                return coeff, self.count()
            return coeff, None
        if kind == "op" and val in ("#[", "#>["):
            count = self.count()
            if self.at("*"):
                self.take()
                kind2, val2, _ = self.peek()
                if kind2 != "int":
                    raise self.fail("expected an integer after '*'")
                self.take()
                return int(val2), count
            return 1, count
        raise self.fail("expected an integer or a count #[...] / #>[...]")

    def count(self) -> Count:
        kind, val, _ = self.peek()
        if not (kind == "op" and val in ("#[", "#>[")):
            raise self.fail("expected a count #[...] or #>[...]")
        self.take()
        f = self.disj()
        self.expect("]")
        return Count(f, future=(val == "#>["))


MAX_FORMULA_CHARS = 10_000
MAX_FORMULA_DEPTH = 100  # operators nested in each other (docs/limits.md)
MAX_COUNT_DIGITS = 9  # integers in count comparisons


def parse_ltl(text: str, alphabet: Sequence[str]) -> Formula:
    """Parse ``text``; a symbol not in ``alphabet`` is an :class:`LTLSyntaxError`.

    Formulas longer than MAX_FORMULA_CHARS or nested deeper than MAX_FORMULA_DEPTH are
    refused here, so the evaluator and the compiler (both recursive) never overflow.
    """
    if len(text) > MAX_FORMULA_CHARS:
        raise LTLSyntaxError(
            f"the formula has {len(text):,} characters, more than the limit of "
            f"{MAX_FORMULA_CHARS:,}",
            text[:40],
            0,
        )
    parser = _Parser(text, alphabet)
    for kind, val, off in parser.toks:
        if kind == "int" and len(val) > MAX_COUNT_DIGITS:
            raise LTLSyntaxError(
                f"integer with more than {MAX_COUNT_DIGITS} digits", text[:40], min(off, 40)
            )
    try:
        f = parser.parse()
    except RecursionError:
        f = None
    if f is None or _depth(f) > MAX_FORMULA_DEPTH:
        raise LTLSyntaxError(
            f"the formula is nested more than {MAX_FORMULA_DEPTH} operators deep "
            "(split it into named parts or simplify it)",
            text[:40],
            0,
        )
    return f


def formula_depth(f: Formula) -> int:
    """Operators nested in each other (a built formula must stay within MAX_FORMULA_DEPTH too:
    the compiler recurses)."""
    return _depth(f)


def _depth(f: Formula) -> int:
    """Nesting depth of a formula DAG, computed without recursion."""
    depth: dict[int, int] = {}
    stack: list[tuple[Formula, bool]] = [(f, False)]
    while stack:
        g, done = stack.pop()
        if id(g) in depth:
            continue
        kids = children(g)
        if done:
            depth[id(g)] = 1 + max((depth[id(k)] for k in kids), default=0)
        else:
            stack.append((g, True))
            stack.extend((k, False) for k in kids if id(k) not in depth)
    return depth[id(f)]


# ---------------------------------------------------------------------------
# printing (parseable back to an equal tree)
# ---------------------------------------------------------------------------

_PREC = {Or: 1, And: 2, Since: 3, Until: 3}


def _prec(f: Formula) -> int:
    return _PREC.get(type(f), 4)


def _fmt_linear(lin: Linear, abbrev: Mapping[Formula, str] | None = None) -> str:
    parts: list[str] = []
    for coeff, count in lin.terms:
        inner = format_ltl(count.arg, abbrev)
        body = f"#>[{inner}]" if count.future else f"#[{inner}]"
        mag = abs(coeff)
        text = body if mag == 1 else f"{mag}*{body}"
        parts.append(("- " if coeff < 0 else "+ ") + text)
    if lin.const or not parts:
        parts.append(("- " if lin.const < 0 else "+ ") + str(abs(lin.const)))
    s = " ".join(parts)
    return s[2:] if s.startswith("+ ") else "-" + s[2:]


def format_ltl(f: Formula, abbrev: Mapping[Formula, str] | None = None) -> str:
    """A minimal-parenthesis rendering that :func:`parse_ltl` reads back to ``f``.

    ``abbrev`` names some subformulas (printed as given, e.g. ``hop1[b]``): for display
    only, the result then no longer parses back.
    """
    if abbrev and f in abbrev:
        return abbrev[f]
    if isinstance(f, Const):
        return "true" if f.value else "false"
    if isinstance(f, Atom):
        return f.symbol
    if isinstance(f, (Not, Prev, Next)):
        op = {Not: "!", Prev: "Y ", Next: "X "}[type(f)]
        arg = format_ltl(f.arg, abbrev)
        return op + (arg if _prec(f.arg) >= 4 or (abbrev and f.arg in abbrev) else f"({arg})")
    if isinstance(f, Compare):
        return f"{_fmt_linear(f.left, abbrev)} {f.op} {_fmt_linear(f.right, abbrev)}"
    p = _prec(f)
    sym = {Or: "|", And: "&", Since: "S", Until: "U"}[type(f)]
    left, right = format_ltl(f.left, abbrev), format_ltl(f.right, abbrev)
    named_l = bool(abbrev and f.left in abbrev)
    named_r = bool(abbrev and f.right in abbrev)
    if isinstance(f, (Since, Until)):
        # right-associative: the left operand needs parentheses at equal precedence
        left = left if _prec(f.left) > p or named_l else f"({left})"
        right = right if _prec(f.right) >= p or named_r else f"({right})"
    else:
        # left-associative
        left = left if _prec(f.left) >= p or named_l else f"({left})"
        right = right if _prec(f.right) > p or named_r else f"({right})"
    # a comparison as an operand is bracketed so that its '<' etc. stay readable
    if isinstance(f.left, Compare) and not named_l:
        left = f"({left})"
    if isinstance(f.right, Compare) and not named_r:
        right = f"({right})"
    return f"{left} {sym} {right}"


def subformulas(f: Formula) -> list[Formula]:
    """Every distinct subformula (including those inside counts), children first."""
    seen: dict[Formula, None] = {}

    def visit(g: Formula) -> None:
        if g in seen:
            return
        for child in children(g):
            visit(child)
        seen[g] = None

    visit(f)
    return list(seen)


def children(f: Formula) -> tuple[Formula, ...]:
    """Direct Boolean subformulas (the arguments of counts for a comparison)."""
    if isinstance(f, (Not, Prev, Next)):
        return (f.arg,)
    if isinstance(f, (And, Or, Since, Until)):
        return (f.left, f.right)
    if isinstance(f, Compare):
        return tuple(t.arg for _, t in f.left.terms) + tuple(t.arg for _, t in f.right.terms)
    return ()


# ---------------------------------------------------------------------------
# evaluation by dynamic programming
# ---------------------------------------------------------------------------


def truth_values(f: Formula, word: Sequence[str]) -> list[bool]:
    """The value of ``f`` at positions 1..n of ``word`` (a list of length n)."""
    n = len(word)
    memo: dict[Formula, list[bool]] = {}
    for g in subformulas(f):
        memo[g] = _values(g, word, n, memo)
    return memo[f]


def _values(g: Formula, word: Sequence[str], n: int, memo: dict[Formula, list[bool]]) -> list[bool]:
    if isinstance(g, Const):
        return [g.value] * n
    if isinstance(g, Atom):
        return [w == g.symbol for w in word]
    if isinstance(g, Not):
        return [not v for v in memo[g.arg]]
    if isinstance(g, And):
        return [a and b for a, b in zip(memo[g.left], memo[g.right], strict=True)]
    if isinstance(g, Or):
        return [a or b for a, b in zip(memo[g.left], memo[g.right], strict=True)]
    if isinstance(g, Prev):
        a = memo[g.arg]
        return [False] + a[:-1] if n else []
    if isinstance(g, Next):
        a = memo[g.arg]
        return a[1:] + [False] if n else []
    if isinstance(g, Since):
        phi, psi = memo[g.left], memo[g.right]
        out = [False] * n
        for i in range(1, n):  # 0-based: S at i from psi/phi at i-1 and S at i-1
            out[i] = psi[i - 1] or (phi[i - 1] and out[i - 1])
        return out
    if isinstance(g, Until):
        phi, psi = memo[g.left], memo[g.right]
        out = [False] * n
        for i in range(n - 2, -1, -1):
            out[i] = psi[i + 1] or (phi[i + 1] and out[i + 1])
        return out
    if isinstance(g, Compare):
        coeffs, const = normalize(g)
        total = [const] * n
        for count, c in coeffs.items():
            vals = memo[count.arg]
            if count.future:
                run, seq = 0, [0] * n
                for i in range(n - 1, -1, -1):
                    run += vals[i]
                    seq[i] = run
            else:
                run, seq = 0, [0] * n
                for i in range(n):
                    run += vals[i]
                    seq[i] = run
            for i in range(n):
                total[i] += c * seq[i]
        return [compare_ints(t, g.op) for t in total]
    raise TypeError(f"not a formula: {g!r}")


def accepts(f: Formula, word: Sequence[str]) -> bool:
    """Whether ``f`` holds at the last position of ``word`` (never for the empty word)."""
    if not word:
        return False
    return truth_values(f, word)[-1]
