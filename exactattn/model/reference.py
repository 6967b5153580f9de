"""Oracles: what a model is *meant* to compute, independent of its weights."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from exactattn.logic.ltl import accepts, parse_ltl
from exactattn.model import Reference
from exactattn.rasp.interpret import expected_output, oracle_from_text


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

    def expected_many(self, words: Sequence[Sequence[str]]) -> list[Any]:
        """:meth:`expected` of every word, in order (the same values).

        A Dyck reference runs its stack once per distinct prefix (all but the last three
        letters): consecutive words of a batch share it, so most words cost three steps.
        """
        r = self.ref
        if r.kind != "dyck":
            return [self.expected(tuple(w)) for w in words]
        assert r.pairs is not None
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
            return expected_output(oracle_from_text(r.program), word)
        raise ValueError(r.kind)
