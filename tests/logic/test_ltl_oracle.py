"""The LTL oracle: parser, printer and dynamic-programming evaluator.

The evaluator is checked against a second, deliberately naive implementation that reads
the definitions literally (quantifiers over positions), on random formulas and words.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactattn.logic.ltl import (
    And,
    Atom,
    Compare,
    Const,
    Count,
    Linear,
    LTLSyntaxError,
    Next,
    Not,
    Or,
    Prev,
    Since,
    Until,
    accepts,
    format_ltl,
    parse_ltl,
    truth_values,
)

AB = ("a", "b")
ABC = ("a", "b", "c")


# ---------------------------------------------------------------------------
# a literal reading of the definitions (1-based positions)
# ---------------------------------------------------------------------------


def holds(f, w, i):  # noqa: C901 - one branch per connective, on purpose
    n = len(w)
    if isinstance(f, Const):
        return f.value
    if isinstance(f, Atom):
        return w[i - 1] == f.symbol
    if isinstance(f, Not):
        return not holds(f.arg, w, i)
    if isinstance(f, And):
        return holds(f.left, w, i) and holds(f.right, w, i)
    if isinstance(f, Or):
        return holds(f.left, w, i) or holds(f.right, w, i)
    if isinstance(f, Prev):
        return i > 1 and holds(f.arg, w, i - 1)
    if isinstance(f, Next):
        return i < n and holds(f.arg, w, i + 1)
    if isinstance(f, Since):
        return any(
            holds(f.right, w, j) and all(holds(f.left, w, k) for k in range(j + 1, i))
            for j in range(1, i)
        )
    if isinstance(f, Until):
        return any(
            holds(f.right, w, j) and all(holds(f.left, w, k) for k in range(i + 1, j))
            for j in range(i + 1, n + 1)
        )
    if isinstance(f, Compare):

        def value(lin):
            total = lin.const
            for c, t in lin.terms:
                js = range(i, n + 1) if t.future else range(1, i + 1)
                total += c * sum(holds(t.arg, w, j) for j in js)
            return total

        a, b = value(f.left), value(f.right)
        return {
            "<": a < b,
            "<=": a <= b,
            "=": a == b,
            ">=": a >= b,
            ">": a > b,
            "!=": a != b,
        }[f.op]
    raise TypeError(f)


def formulas(alphabet=AB, max_leaves=8):
    atoms = st.one_of(st.sampled_from([Atom(a) for a in alphabet]), st.builds(Const, st.booleans()))

    def extend(inner):
        count = st.builds(Count, inner, st.booleans())
        lin = st.builds(
            Linear,
            st.lists(st.tuples(st.integers(-2, 2).filter(bool), count), max_size=2).map(tuple),
            st.integers(-2, 2),
        )
        return st.one_of(
            st.builds(Not, inner),
            st.builds(Prev, inner),
            st.builds(Next, inner),
            st.builds(And, inner, inner),
            st.builds(Or, inner, inner),
            st.builds(Since, inner, inner),
            st.builds(Until, inner, inner),
            st.builds(Compare, lin, st.sampled_from(["<", "<=", "=", ">=", ">", "!="]), lin).filter(
                lambda c: c.left.terms or c.right.terms
            ),
        )

    return st.recursive(atoms, extend, max_leaves=max_leaves)


# ---------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------


def test_precedence_unary_tightest_then_su_then_and_then_or():
    f = parse_ltl("!a S Y b & X a | b", AB)
    assert f == Or(And(Since(Not(Atom("a")), Prev(Atom("b"))), Next(Atom("a"))), Atom("b"))


def test_since_until_right_associative():
    assert parse_ltl("a S b U a", AB) == Since(Atom("a"), Until(Atom("b"), Atom("a")))
    assert parse_ltl("(a S b) U a", AB) == Until(Since(Atom("a"), Atom("b")), Atom("a"))


def test_and_or_left_associative():
    assert parse_ltl("a & b & a", AB) == And(And(Atom("a"), Atom("b")), Atom("a"))
    assert parse_ltl("a | b | a", AB) == Or(Or(Atom("a"), Atom("b")), Atom("a"))


def test_counting_comparison():
    f = parse_ltl("2*#[a] - #[b] >= 1", AB)
    assert f == Compare(
        Linear(((2, Count(Atom("a"))), (-1, Count(Atom("b"))))), ">=", Linear((), 1)
    )
    g = parse_ltl("-#>[a S b]*3 + 2 != #[true]", AB)
    assert g == Compare(
        Linear(((-3, Count(Since(Atom("a"), Atom("b")), future=True)),), 2),
        "!=",
        Linear(((1, Count(Const(True))),)),
    )


def test_comparison_nests_anywhere():
    f = parse_ltl("Y (#[a] > 1) S !#[#[b] = 2] <= 3 & b", AB)
    assert isinstance(f, And)
    assert isinstance(f.left, Since)
    assert isinstance(f.left.left, Prev) and isinstance(f.left.left.arg, Compare)
    assert isinstance(f.left.right, Not) and isinstance(f.left.right.arg, Compare)


def test_keywords_are_not_symbols():
    with pytest.raises(LTLSyntaxError):
        parse_ltl("S", AB)
    assert parse_ltl("true & !false", AB) == And(Const(True), Not(Const(False)))


@pytest.mark.parametrize(
    ("text", "offset", "fragment"),
    [
        ("a & c", 4, "unknown symbol 'c'"),
        ("a &", 3, "formula ends"),
        ("(a | b", 6, "expected ')'"),
        ("a b", 2, "unexpected text"),
        ("#[a] + 1", 8, "expected a comparison"),
        ("a $ b", 2, "unexpected character"),
        ("2 * a > 1", 4, "expected a count"),
        ("#[a > 1", 4, "expected ']'"),
    ],
)
def test_syntax_errors_name_text_and_offset(text, offset, fragment):
    with pytest.raises(LTLSyntaxError) as err:
        parse_ltl(text, AB)
    assert err.value.offset == offset
    assert fragment in str(err.value)
    assert f"offset {offset}" in str(err.value)
    assert isinstance(err.value, ValueError)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=200, deadline=None)
@given(formulas())
def test_format_parses_back(f):
    assert parse_ltl(format_ltl(f), AB) == f


# ---------------------------------------------------------------------------
# evaluator
# ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=300, deadline=None)
@given(formulas(ABC), st.lists(st.sampled_from(ABC), min_size=1, max_size=7))
def test_dynamic_programming_matches_the_definitions(f, word):
    expect = [holds(f, word, i) for i in range(1, len(word) + 1)]
    assert truth_values(f, word) == expect
    assert accepts(f, word) == expect[-1]


@pytest.mark.parametrize(
    ("text", "word", "values"),
    [
        ("Y a", "aba", [False, True, False]),
        ("X a", "aba", [False, True, False]),
        ("a S b", "babab", [False, True, True, True, True]),
        ("a S b", "baab", [False, True, True, True]),
        ("a U b", "aab", [True, True, False]),
        ("#[a] >= 2", "abab", [False, False, True, True]),
        ("#>[a] = 1", "abab", [False, True, True, False]),
        ("#[a] - #>[b] >= 0", "ab", [True, True]),
        ("2*#[a] = 3", "aaa", [False, False, False]),
        ("true S a", "ba", [False, False]),
    ],
)
def test_examples(text, word, values):
    assert truth_values(parse_ltl(text, AB), list(word)) == values


def test_acceptance_at_last_position_and_empty_word():
    f = parse_ltl("a", AB)
    assert accepts(f, ["b", "a"])
    assert not accepts(f, ["a", "b"])
    assert not accepts(f, [])
    assert truth_values(f, []) == []


def test_exhaustive_small_words_agree_with_definitions():
    texts = ["Y X a", "!(a S b) | X Y b", "#[a S b] > #>[Y a]", "(a U b) S (#[b] != 1)"]
    for text in texts:
        f = parse_ltl(text, AB)
        for n in range(1, 6):
            for w in itertools.product(AB, repeat=n):
                assert truth_values(f, w) == [holds(f, w, i) for i in range(1, n + 1)]
