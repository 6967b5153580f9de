"""Tests for exactattn.model.expr: exact values, certified balls, refusals that name the text."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
from flint import arb, ctx, fmpq
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from exactattn.core.errors import ExactAttnError
from exactattn.model.expr import (
    Expr,
    ExprError,
    NotRationalError,
    UndecidedError,
    parse_expression,
)

POS = ("i", "n")
TEMP = ("n",)


def ev(text: str, **env: int | Fraction) -> Fraction:
    return parse_expression(text, POS).eval_exact(env)


def temp(text: str) -> Expr:
    return parse_expression(text, TEMP, transcendental=True)


def ref(value: Fraction | str | Callable[[], arb]) -> arb:
    """A reference ball far tighter (600 bits) than the balls under test."""
    with ctx.workprec(600):
        if callable(value):
            return value()
        q = Fraction(value)
        return arb(fmpq(q.numerator, q.denominator))


def encloses(ball: arb, value: Fraction | str | Callable[[], arb]) -> bool:
    with ctx.workprec(600):
        return bool(ball.contains(ref(value)))


# --------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", Fraction(3)),
        ("0.1", Fraction(1, 10)),
        ("0.125", Fraction(1, 8)),
        (".5", Fraction(1, 2)),
        ("1e-3", Fraction(1, 1000)),
        ("2.5E+4", Fraction(25000)),
        ("1.5e2", Fraction(150)),
        ("3/4", Fraction(3, 4)),
        ("-2", Fraction(-2)),
        ("1e300", Fraction(10**300)),
        ("1e-300", Fraction(1, 10**300)),
        ("0.30000000000000004", Fraction(30000000000000004, 10**17)),
    ],
)
def test_literals_are_exact(text: str, value: Fraction) -> None:
    got = ev(text)
    assert isinstance(got, Fraction)
    assert got == value


def test_point_one_is_not_a_double() -> None:
    assert ev("0.1") + ev("0.2") == Fraction(3, 10)
    assert ev("0.1") != Fraction(0.1)


# --------------------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2^3^2", 512),
        ("2**3**2", 512),
        ("(2^3)^2", 64),
        ("-2^2", -4),
        ("(-2)^2", 4),
        ("2^-1", Fraction(1, 2)),
        ("2^-2^2", Fraction(1, 16)),
        ("1-2-3", -4),
        ("1-(2-3)", 2),
        ("12/2/3", 2),
        ("12/(2/3)", 18),
        ("1+2*3", 7),
        ("(1+2)*3", 9),
        ("2*3^2", 18),
        ("-3*-2", 6),
        ("+4 - -1", 5),
        ("2--2", 4),
        ("0^0", 1),
        ("  1 +\t2\n", 3),
    ],
)
def test_precedence_and_associativity(text: str, value: int | Fraction) -> None:
    assert ev(text) == Fraction(value)


def test_alternating_sign() -> None:
    e = parse_expression("(-1)^i", POS)
    assert [e.eval_exact({"i": i}) for i in range(6)] == [1, -1, 1, -1, 1, -1]
    assert e.variables() == frozenset({"i"})


def test_i_over_n() -> None:
    e = parse_expression("i/n", POS)
    assert e.variables() == frozenset({"i", "n"})
    assert e.is_rational_valued()
    for i, n in [(0, 1), (1, 3), (2, 4), (7, 5), (-3, 6)]:
        assert e.eval_exact({"i": i, "n": n}) == Fraction(i, n)
    assert e.eval_exact({"i": Fraction(1, 2), "n": 3}) == Fraction(1, 6)


def test_position_expression_with_powers() -> None:
    e = parse_expression("i^2/n - 1/(i+1)", POS)
    for i in range(5):
        for n in range(1, 5):
            assert e.eval_exact({"i": i, "n": n}) == Fraction(i * i, n) - Fraction(1, i + 1)


# --------------------------------------------------------------------------- functions


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("floor(7/2)", 3),
        ("floor(-7/2)", -4),
        ("floor(-3)", -3),
        ("ceil(7/2)", 4),
        ("ceil(-7/2)", -3),
        ("ceil(5)", 5),
        ("mod(7, 3)", 1),
        ("mod(-7, 3)", 2),
        ("mod(7, -3)", -2),
        ("mod(-7, -3)", -1),
        ("mod(7/2, 1)", Fraction(1, 2)),
        ("mod(-1/3, 1)", Fraction(2, 3)),
        ("min(3, 1, 2)", 1),
        ("min(5)", 5),
        ("max(3, 1, 2, -8, 5/2)", 3),
        ("max(-1/2, -1/3)", Fraction(-1, 3)),
        ("min(1, 2) + max(3, 4)", 5),
    ],
)
def test_rational_functions(text: str, value: int | Fraction) -> None:
    assert ev(text) == Fraction(value)


def test_functions_of_variables() -> None:
    e = parse_expression("mod(i, 2) + floor(n/2) + min(i, n, 3)", POS)
    for i in range(-3, 6):
        for n in range(1, 5):
            assert e.eval_exact({"i": i, "n": n}) == i % 2 + n // 2 + min(i, n, 3)


def test_sqrt_exact_when_square() -> None:
    e = temp("sqrt(9/4)")
    assert e.eval_exact({}) == Fraction(3, 2)
    assert not e.is_rational_valued()
    assert e.eval_arb({}, 64).is_exact()
    assert temp("sqrt(n)").eval_exact({"n": 16}) == 4


def test_log_one_and_exp_zero_are_exact() -> None:
    assert temp("log(1)").eval_exact({}) == 0
    assert temp("exp(0)").eval_exact({}) == 1
    assert temp("log(n)").eval_exact({"n": 1}) == 0
    assert temp("exp(n-1)").eval_exact({"n": 1}) == 1


@pytest.mark.parametrize("text", ["sqrt(12)", "sqrt(2)", "log(3)", "exp(1)", "sqrt(2)^2"])
def test_irrational_values_are_refused_in_exact_mode(text: str) -> None:
    with pytest.raises(NotRationalError):
        temp(text).eval_exact({})


def test_not_rational_message_names_subexpression_and_values() -> None:
    with pytest.raises(NotRationalError) as err:
        temp("1/(n^3*log(n))").eval_exact({"n": 2})
    msg = str(err.value)
    assert "log(n)" in msg
    assert "n=2" in msg


# --------------------------------------------------------------------------- balls


def test_sqrt12_ball() -> None:
    before = ctx.prec
    b = temp("sqrt(12)").eval_arb({}, 100)
    assert ctx.prec == before
    assert isinstance(b, arb)
    assert encloses(b, "3.4641016151377545870548926830117")
    assert encloses(b, lambda: arb(12).sqrt())
    assert b.rad() < ref("1e-25")
    assert b.rad() > 0  # irrational, so not exact


def test_temperature_ball_against_hand_value() -> None:
    # 1/(8 ln 2) = 0.18033688011112042591999058512523651717...
    b = temp("1/(n^3*log(n))").eval_arb({"n": 2}, 100)
    assert encloses(b, "0.18033688011112042591999058512523651717")
    assert b.rad() < ref("1e-25")
    assert b > ref("0.180336880111") and b < ref("0.180336880112")
    assert encloses(b, lambda: 1 / (8 * arb(2).log()))


def test_arb_keeps_rationals_exact() -> None:
    b = parse_expression("i/n + 1/4", POS).eval_arb({"i": 1, "n": 4}, 30)
    assert b.is_exact()
    assert b == arb("0.5")
    third = parse_expression("1/3", POS).eval_arb({}, 200)
    assert encloses(third, Fraction(1, 3)) and third.rad() < ref("1e-55")


def test_arb_decisions() -> None:
    assert temp("floor(sqrt(12))").eval_arb({}, 64) == 3
    assert temp("ceil(exp(1))").eval_arb({}, 64) == 3
    assert temp("2^floor(sqrt(12))").eval_arb({}, 64) == 8
    m = temp("mod(exp(1), 1)").eval_arb({}, 80)
    assert encloses(m, lambda: arb(1).exp() - 2) and m.rad() < ref("1e-20")
    assert temp("min(exp(1), 3, 2)").eval_arb({}, 64) == 2
    assert encloses(temp("max(sqrt(2), 1)").eval_arb({}, 64), lambda: arb(2).sqrt())
    assert encloses(temp("log(n)^-2").eval_arb({"n": 2}, 64), lambda: 1 / arb(2).log() ** 2)


def test_arb_min_of_overlapping_balls_is_an_enclosure() -> None:
    b = temp("min(exp(1), exp(1))").eval_arb({}, 64)
    assert encloses(b, lambda: arb(1).exp())


@pytest.mark.parametrize(
    "text",
    [
        "floor(exp(1) - exp(1))",
        "1/(exp(1) - exp(1))",
        "sqrt(exp(1) - exp(1))",
        "mod(1, exp(1) - exp(1))",
    ],
)
def test_arb_undecided(text: str) -> None:
    before = ctx.prec
    with pytest.raises(UndecidedError):
        temp(text).eval_arb({}, 64)
    assert ctx.prec == before


@pytest.mark.parametrize("text", ["exp(10^300)", "exp(-exp(20))", "exp(2^20 + 1/2)"])
def test_exp_argument_limit(text: str) -> None:
    """exp(x) for |x| > 2^20 is refused by name (it used to be undecided, or minutes of work)."""
    from exactattn.model.expr import LimitError

    with pytest.raises(LimitError, match="exp of a number beyond ±1,048,576"):
        temp(text).eval_arb({}, 64)
    assert temp("exp(-2^20)").eval_arb({}, 64) > 0


@pytest.mark.parametrize("text", ["log(1 - sqrt(2))", "sqrt(1 - sqrt(2))", "2^log(3)"])
def test_arb_domain_errors(text: str) -> None:
    with pytest.raises(ExprError) as err:
        temp(text).eval_arb({}, 64)
    assert not isinstance(err.value, UndecidedError)


# --------------------------------------------------------------------------- errors at evaluation


@pytest.mark.parametrize(
    ("text", "env", "fragment"),
    [
        ("1/(n-2)", {"n": 2}, "1/(n-2)"),
        ("i/(n-i)", {"i": 3, "n": 3}, "i/(n-i)"),
        ("mod(i, n-1)", {"i": 3, "n": 1}, "mod(i, n-1)"),
        ("(n-1)^-1", {"n": 1}, "(n-1)^-1"),
    ],
)
def test_division_by_zero(text: str, env: dict[str, int], fragment: str) -> None:
    e = parse_expression(text, POS)
    with pytest.raises(ExprError) as err:
        e.eval_exact(env)
    assert not isinstance(err.value, NotRationalError)
    assert fragment in str(err.value)
    for name, value in env.items():
        assert f"{name}={value}" in str(err.value)
    with pytest.raises(ExprError):
        e.eval_arb(env, 64)


@pytest.mark.parametrize(("text", "n"), [("log(n-1)", 1), ("log(1-n)", 2), ("sqrt(1-n)", 2)])
def test_domain_errors_at_evaluation(text: str, n: int) -> None:
    e = temp(text)
    with pytest.raises(ExprError) as err:
        e.eval_exact({"n": n})
    assert not isinstance(err.value, NotRationalError)
    assert f"n={n}" in str(err.value)
    with pytest.raises(ExprError) as err2:
        e.eval_arb({"n": n}, 64)
    assert not isinstance(err2.value, UndecidedError)


def test_constant_errors_fail_at_parse_time() -> None:
    for text in ["1/0", "log(0)", "sqrt(-1)", "mod(n, 0)", "n/(1-1)", "(1-1)^-1"]:
        with pytest.raises(ExprError):
            temp(text)


def test_missing_variable_and_inexact_values() -> None:
    e = parse_expression("i/n", POS)
    with pytest.raises(ExprError, match="'n'"):
        e.eval_exact({"i": 1})
    with pytest.raises(TypeError):
        e.eval_exact({"i": 1, "n": 0.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        e.eval_arb({"i": 1, "n": 2}, 0)


def test_error_hierarchy() -> None:
    assert issubclass(NotRationalError, ExprError)
    assert issubclass(UndecidedError, ExprError)
    assert issubclass(ExprError, ValueError)
    assert issubclass(ExprError, ExactAttnError)


# --------------------------------------------------------------------------- rejected text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("__import__('os')", "__import__"),
        ("os.system", "'os'"),
        ("n.real", "'.'"),
        ('"abc"', "'\"'"),
        ("2^(10^9)", "exponent too large"),
        ("2^(1/2)", "exponent must be an integer"),
        ("n^(10^9)", "exponent too large"),
        ("sqrt(n)", "only in temperatures"),
        ("log(n)", "only in temperatures"),
        ("exp(n)", "only in temperatures"),
        ("1e400", "1e400"),
        ("1e-400", "1e-400"),
        ("", "empty"),
        ("   ", "empty"),
        ("n +", "ends early"),
        ("(n", "')'"),
        ("n)", "')'"),
        ("x", "'x'"),
        ("[1]", "'['"),
        ("1, 2", "','"),
        ("2n", "'2n'"),
        ("1.2.3", "'1.2.3'"),
        ("n(2)", "not a function"),
        ("floor", "parentheses"),
        ("mod(1)", "mod()"),
        ("floor(1, 2)", "floor()"),
        ("min()", "')'"),
        ("2 ^^ 3", "'^'"),
        ("n; 1", "';'"),
        ("lambda: 1", "'lambda'"),
        ("(2^1024)^1024", "too large"),
        ("-" * 80 + "1", "nested"),
        ("(" * 80 + "1" + ")" * 80, "nested"),
    ],
)
def test_rejected_inputs_name_the_offending_text(text: str, fragment: str) -> None:
    with pytest.raises(ExprError) as err:
        parse_expression(text, POS)
    msg = str(err.value)
    assert fragment in msg
    assert repr(text) in msg or text[:40] in msg


def test_offset_is_reported() -> None:
    with pytest.raises(ExprError, match="offset 4"):
        parse_expression("i + x", POS)
    with pytest.raises(ExprError, match="offset 0"):
        parse_expression("__import__('os')", POS)


def test_only_allowed_variables() -> None:
    with pytest.raises(ExprError, match="'i'"):
        parse_expression("i + 1", TEMP, transcendental=True)
    assert parse_expression("n", TEMP).eval_exact({"n": 7}) == 7


def test_non_string_is_refused() -> None:
    with pytest.raises(ExprError):
        parse_expression(3, POS)  # type: ignore[arg-type]


def test_module_has_no_eval_or_float() -> None:
    from pathlib import Path

    import exactattn.model.expr as mod

    source = Path(mod.__file__).read_text()
    for banned in ["eval(", "exec(", "literal_eval", "sympify", "float("]:
        assert banned not in source.replace("eval_exact(", "").replace("eval_arb(", "")


def test_expr_value_semantics() -> None:
    a = parse_expression("i/n", POS)
    b = parse_expression("i/n", POS)
    assert a == b and hash(a) == hash(b)
    assert str(a) == "i/n" and a.text == "i/n"
    assert parse_expression("1 + 2", POS).variables() == frozenset()


# --------------------------------------------------------------------------- property tests


def _trees(leaves: st.SearchStrategy[int]) -> st.SearchStrategy[object]:
    return st.recursive(
        leaves,
        lambda sub: st.tuples(st.sampled_from("+-*/"), sub, sub),
        max_leaves=12,
    )


def _value(tree: object) -> Fraction:
    if isinstance(tree, int):
        return Fraction(tree)
    assert isinstance(tree, tuple)
    op, a, b = tree
    x, y = _value(a), _value(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        raise ZeroDivisionError
    return x / y


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _full(tree: object) -> str:
    if isinstance(tree, int):
        return f"({tree})" if tree < 0 else str(tree)
    assert isinstance(tree, tuple)
    op, a, b = tree
    return f"({_full(a)} {op} {_full(b)})"


def _minimal(tree: object) -> str:
    """Parentheses only where precedence needs them; negative leaves as bare unary minus."""
    if isinstance(tree, int):
        return str(tree)
    assert isinstance(tree, tuple)
    op, a, b = tree
    left, right = _minimal(a), _minimal(b)
    if isinstance(a, tuple) and _PREC[a[0]] < _PREC[op]:
        left = f"({left})"
    if isinstance(b, tuple) and _PREC[b[0]] <= _PREC[op]:
        right = f"({right})"
    return f"{left}{op}{right}"


@settings(max_examples=150, deadline=None)
@given(_trees(st.integers(-20, 20)))
def test_random_trees_agree_with_fractions(tree: object) -> None:
    try:
        expected = _value(tree)
    except ZeroDivisionError:
        assume(False)
        return
    for text in (_full(tree), _minimal(tree)):
        e = parse_expression(text, POS)
        assert e.eval_exact({}) == expected, text
        ball = e.eval_arb({}, 64)
        assert encloses(ball, expected), text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789in+-*/^().,e ", max_size=25))
def test_garbage_only_raises_expr_error(text: str) -> None:
    try:
        e = parse_expression(text, POS)
        e.eval_exact({"i": 2, "n": 3})
    except ExprError:
        pass


_VOCAB = [
    "0",
    "1",
    "2",
    "0.5",
    "1e3",
    "n",
    "i",
    "+",
    "-",
    "*",
    "/",
    "^",
    "**",
    "(",
    ")",
    ",",
    "sqrt(",
    "log(",
    "exp(",
    "floor(",
    "ceil(",
    "mod(",
    "min(",
    "max(",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_VOCAB), max_size=14), st.integers(1, 4))
def test_token_soup_only_raises_expr_error(tokens: list[str], n: int) -> None:
    """Whatever the text, the only failure is an ExprError; balls are never left non-finite."""
    text = " ".join(tokens)
    try:
        e = parse_expression(text, POS, transcendental=True)
    except ExprError:
        return
    before = ctx.prec
    try:
        e.eval_arb({"i": 2, "n": n}, 64)
    except ExprError:
        pass
    assert ctx.prec == before
    try:
        e.eval_exact({"i": 2, "n": n})
    except ExprError:
        pass
