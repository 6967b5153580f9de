"""Oracles: what a model is *meant* to compute, independent of its weights."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from exactattn.logic.ltl import accepts, parse_ltl
from exactattn.model import Reference
from exactattn.model.expr import Expr, parse_expression
from exactattn.rasp.interpret import expected_output, oracle_from_text


@lru_cache(maxsize=8)
def _scale_expr(text: str) -> Expr:
    return parse_expression(text, ("n",))


def dyck_accepts(word: Sequence[str], pairs: Sequence[str]) -> bool:
    """Whether `word` is a well-nested string over the bracket pairs."""
    opening = {p[0]: p[1] for p in pairs}
    closing = {p[1] for p in pairs}
    stack: list[str] = []
    for t in word:
        if t in opening:
            stack.append(opening[t])
        elif t in closing:
            if not stack or stack.pop() != t:
                return False
        else:
            return False
    return not stack


def _dyck_stack(
    word: Sequence[str],
    opening: dict[str, str],
    closing: set[str],
    stack: tuple[str, ...],
) -> tuple[str, ...] | None:
    """The closers still expected after reading ``word`` from ``stack`` (None: not a prefix
    of any well-nested string), as :func:`dyck_accepts` runs it."""
    st = list(stack)
    for t in word:
        if t in opening:
            st.append(opening[t])
        elif t in closing:
            if not st or st.pop() != t:
                return None
        else:
            return None
    return tuple(st)


def _dyck_many(letters: np.ndarray, alphabet: Sequence[str], pairs: Sequence[str]) -> list[bool]:
    """:func:`dyck_accepts` of every row of ``letters`` ((N, n) positions in ``alphabet``),
    one letter position at a time over all rows: the same rules (an opener pushes the
    closer its pair names, the last pair of an opener winning as in the dict; a closer
    must match the top; any other letter rejects; accept on an empty stack)."""
    opening = {p[0]: p[1] for p in pairs}
    closing = {p[1] for p in pairs}
    ids: dict[str, int] = {}
    kind = np.full(len(alphabet), 2, dtype=np.int8)  # 0 open, 1 close, 2 reject
    push = np.zeros(len(alphabet), dtype=np.int64)
    want = np.zeros(len(alphabet), dtype=np.int64)
    for a, t in enumerate(alphabet):
        if t in opening:
            kind[a] = 0
            push[a] = ids.setdefault(opening[t], len(ids) + 1)
        elif t in closing:
            kind[a] = 1
            want[a] = ids.setdefault(t, len(ids) + 1)
    N, n = letters.shape
    rows = np.arange(N)
    stack = np.zeros((N, n + 1), dtype=np.int64)
    depth = np.zeros(N, dtype=np.int64)
    ok = np.ones(N, dtype=bool)
    for p in range(n):
        lt = letters[:, p]
        kd = kind[lt]
        op = kd == 0
        cl = kd == 1
        top = stack[rows, np.maximum(depth - 1, 0)]
        good = cl & (depth > 0) & (top == want[lt])
        ok &= op | good
        stack[rows, depth] = np.where(op, push[lt], stack[rows, depth])
        depth += op
        depth -= good
    return (ok & (depth == 0)).tolist()


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=64)
def _ltl(formula: str, alphabet: tuple[str, ...]) -> Any:

    return parse_ltl(formula, alphabet)


class Oracle:
    """Expected output for a word: accept → bool; argmax → labels; value → vectors.

    ``None`` means the reference says nothing about this word (a ``cases`` reference
    that does not list it); an entry ``None`` inside a list means *undefined there*.
    """

    def __init__(self, ref: Reference, alphabet: tuple[str, ...]) -> None:
        self.ref = ref
        self.alphabet = alphabet

    def expected_many(
        self, words: Sequence[Sequence[str]], letters: np.ndarray | None = None
    ) -> list[Any]:
        """:meth:`expected` of every word, in order (the same values).

        A Dyck reference runs its stack once per distinct prefix (all but the last three
        letters): consecutive words of a batch share it, so most words cost three steps.
        ``letters``: the words as an (N, n) int array of positions in the alphabet (the hard
        meaning has it); then a Dyck reference runs one stack per word as numpy columns.
        """
        r = self.ref
        if r.kind != "dyck":
            return [self.expected(tuple(w)) for w in words]
        assert r.pairs is not None
        if (
            letters is not None
            and letters.ndim == 2
            and letters.shape[0] == len(words)
            and letters.dtype.kind in "iu"
        ):
            return _dyck_many(letters, self.alphabet, r.pairs)
        opening = {p[0]: p[1] for p in r.pairs}
        closing = {p[1] for p in r.pairs}
        memo: dict[tuple[str, ...], tuple[str, ...] | None] = {}
        out = []
        for w in words:
            cut = max(len(w) - 3, 0)
            head = tuple(w[:cut])
            if head in memo:
                stack = memo[head]
            else:
                stack = memo[head] = _dyck_stack(head, opening, closing, ())
            if stack is not None:
                stack = _dyck_stack(w[cut:], opening, closing, stack)
            out.append(stack == ())
        return out

    def expected(self, word: tuple[str, ...]) -> Any:
        r = self.ref
        if r.kind == "cases":
            assert r.cases is not None
            return r.cases.get(word)
        if r.kind == "dyck":
            assert r.pairs is not None
            return dyck_accepts(word, r.pairs)
        if r.kind == "regex":
            assert r.pattern is not None
            return _compiled(r.pattern).fullmatch("".join(word)) is not None
        if r.kind == "ltl":
            assert r.formula is not None
            return bool(accepts(_ltl(r.formula, self.alphabet), word))
        if r.kind == "rasp":
            assert r.program is not None
            out = expected_output(oracle_from_text(r.program), word)
            if r.output_scale is None:
                return out
            # the bounded encoding shows the program's integer k as k·scale(n)
            f = _scale_expr(r.output_scale).eval_exact({"n": len(word)})
            return [tuple(v * f for v in row) for row in out]
        raise ValueError(r.kind)
