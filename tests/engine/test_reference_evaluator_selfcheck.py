"""Self-checks of the slow reference evaluator (tests/reference_evaluator.py).

The reference is only useful if it is right on its own, so it is checked here against the
worked example of the spec (docs/model-format.md, "Worked example"; the model is in
tests/data/mean_a_position.json) and against small hand computations.

About the worked example's "disagreements" column (1 at n = 4, 3 at n = 5): every input of
length <= 5 whose hard output equals the threshold 1/2 has a soft output of *exactly* 1/2
(see ``test_worked_example_zero_margin_inputs_are_exact_ties``), and every other input has a
margin larger than the soft error, so the soft and hard meanings classify every input the
same way: the true count is 0 for n = 1..5.  The tests below assert the values that follow
from the spec's definitions; the README's 1 and 3 are reported to the lead as an error of
the example (they cannot come from exact arithmetic).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import reference_evaluator as R
from paths import TESTS

mp = R.mp  # the reference's 60-digit context

DATA = TESTS / "data"

# n, inputs, gamma, x_max, error after layer 0 (12 significant digits), min margin
WORKED_TABLE = [
    (1, 2, 1, 1, "0.268941421370", 0),
    (2, 4, 1, 1, "0.159760468379", 0),
    (3, 8, 1, 1, "0.0866343289591", 0),
    (4, 16, 1, 1, "0.0426634629009", 0),
    (5, 32, 1, 1, "0.0195550369835", 0),
]


def worked_model() -> R.Model:
    return R.Model(R.load_text((DATA / "mean_a_position.json").read_text()))


@pytest.fixture(scope="module")
def worked_results() -> dict[int, R.LengthResult]:
    m = worked_model()
    return {n: R.check_length(m, n) for n in range(1, 6)}


@pytest.mark.parametrize("n, inputs, gamma, x_max, error, margin", WORKED_TABLE)
def test_worked_example_table(worked_results, n, inputs, gamma, x_max, error, margin):
    r = worked_results[n]
    assert r.inputs == inputs
    assert r.gamma == gamma
    assert r.x_max == x_max
    assert r.min_margin == margin
    assert mp.nstr(r.error[0], 12, strip_zeros=False) == error
    # one layer: the invariant is vacuous
    assert r.invariant == "holds"
    assert r.activation_max == [1]


def test_worked_example_error_closed_form_at_n1(worked_results):
    """n = 1, input "a": hard puts all weight on position 1 (value 1), soft gives e/(1+e) to
    it and 1/(1+e) to BOS (value 0): the error is 1/(1+e)."""
    r = worked_results[1]
    exact = 1 / (1 + mp.e)
    assert abs(r.error[0] - exact) < mp.mpf(10) ** -50
    assert r.error_witness[0] == {"input": ["a"], "position": 1}


def test_worked_example_gamma_witness(worked_results):
    for n in range(1, 6):
        w = worked_results[n].gamma_witness
        # first input in lexicographic order is a^n; query 1 sees BOS (score 0) and 1 (score 1)
        assert w == {
            "input": ["a"] * n,
            "layer": 0,
            "head": 0,
            "query": 1,
            "top_key": 1,
            "other_key": 0,
        }
        assert R.gap_at(worked_model(), w) == 1


def test_worked_example_decisions(worked_results):
    """Soft and hard meanings never classify differently for n <= 5 (see module doc)."""
    for n in range(1, 6):
        r = worked_results[n]
        assert r.disagreements == 0
        assert r.first_disagreement is None
        assert r.reference_mismatches is None


def test_worked_example_zero_margin_inputs_are_exact_ties():
    """For the last query, hard attention averages the values v_j = j/n over the set M of
    a-positions (or over every visible position when there is no a).  Soft attention gives
    weight E = e^{n} to each j in M and 1 to each of the other visible positions O, so the
    soft output is (E*A + B) / (E*|M| + |O|) with A = sum_M v, B = sum_O v.  It equals the
    hard output A/|M| exactly iff B*|M| = A*|O|.  Check that identity (in exact rationals)
    on every input whose hard output is the threshold 1/2, and that the reference agrees."""
    m = worked_model()
    zero_margin = 0
    for n in range(1, 6):
        for w in itertools.product("ab", repeat=n):
            pos = list(range(0, n + 1))
            a_pos = [p for p, c in zip(pos[1:], w, strict=True) if c == "a"]
            M = a_pos or pos
            O = [p for p in pos if p not in M]
            A = sum(Fraction(p, n) for p in M)
            B = sum(Fraction(p, n) for p in O)
            if A / len(M) != Fraction(1, 2):
                continue
            zero_margin += 1
            assert B * len(M) == A * len(O), w
            ev = R.evaluate_input(m, list(w))
            soft_y = R.mpf_of(ev.soft[-1][-1][3])
            assert abs(soft_y - mp.mpf(0.5)) < mp.mpf(10) ** -55
            hard, margin = R.decide(m, ev, "hard")
            assert hard is False and margin == 0
    # b | ab bb | aab bbb | aaab abab babb bbbb | aaaab abbab baabb bbbbb
    assert zero_margin == 13


def test_worked_example_margins_exceed_errors(worked_results):
    """Why no decided disagreement: every nonzero hard margin exceeds the error."""
    m = worked_model()
    for n in range(1, 6):
        for w in R.all_inputs(m, n):
            ev = R.evaluate_input(m, w)
            _, margin = R.decide(m, ev, "hard")
            if margin:
                assert R.mpf_of(margin) > worked_results[n].error[0]


# ------------------------------------------------------------------ hand-computed models


def tiny(layers, output=None, **top):
    d = {
        "format": "exactattn/1",
        "name": "tiny",
        "alphabet": ["a", "b"],
        "d": 2,
        "embedding": {"token": {"a": [1, 0], "b": [0, 1]}},
        "layers": layers,
        "output": output
        or {"kind": "accept", "position": "last", "weight": [1, 0], "bias": 0, "threshold": 0},
    }
    d.update(top)
    if "bos" in top:
        d["embedding"]["token"][top["bos"]] = [0, 0]
    return R.Model(d)


def test_strict_mask_first_position_adds_zero():
    """lt mask without BOS: position 1 sees nothing, so its activation is unchanged."""
    head = {"query": [[0, 0]], "key": [[0, 0]], "value": [[1, 1], [1, 1]], "mask": "lt"}
    m = tiny([{"kind": "attention", "heads": [head]}])
    ev = R.evaluate_input(m, ["a", "b"])
    assert ev.positions == [1, 2]
    assert ev.hard[1][0] == [1, 0]
    assert ev.soft[1][0] == [1, 0]
    # position 2 sees position 1 only: adds V x_1 = (1, 1)
    assert ev.hard[1][1] == [1, 2]
    assert ev.soft[1][1] == [1, 2]


@pytest.mark.parametrize(
    "rule, expected", [("average", Fraction(1, 2)), ("leftmost", 1), ("rightmost", 0)]
)
def test_hard_rules_on_a_tie(rule, expected):
    """Zero query: every score ties; values are coordinate 0 (1 for a, 0 for b)."""
    head = {
        "query": [[0, 0]],
        "key": [[1, 1]],
        "value": [[1, 0]],
        "output": [[0], [1]],
        "hard": rule,
    }
    m = tiny([{"kind": "attention", "heads": [head]}])
    ev = R.evaluate_input(m, ["a", "b"])
    assert ev.hard[1][1][1] == 1 + expected
    # soft: exactly uniform, exactly 1/2, whatever the rule
    assert ev.soft[1][1][1] == Fraction(3, 2)
    assert ev.gaps == []


def test_score_form_equals_query_key_form():
    A = [[1, 2], ["-1/2", 3]]
    h1 = {"score": A, "value": [[1, 0], [0, 1]]}
    # x^T A y = (A^T x) . y
    h2 = {"query": [[1, "-1/2"], [2, 3]], "key": [[1, 0], [0, 1]], "value": [[1, 0], [0, 1]]}
    for w in (["a", "b"], ["b", "b", "a"]):
        e1 = R.evaluate_input(tiny([{"kind": "attention", "heads": [h1]}]), w)
        e2 = R.evaluate_input(tiny([{"kind": "attention", "heads": [h2]}]), w)
        assert e1.hard == e2.hard
        assert [[R.mpf_of(v) for v in r] for r in e1.soft[1]] == [
            [R.mpf_of(v) for v in r] for r in e2.soft[1]
        ]


def test_ffn_relu():
    ffn = {
        "kind": "ffn",
        "hidden": [{"weight": [[1, -1]], "bias": ["-1/2"]}],
        "output": {"weight": [[2], [0]], "bias": [0, "0.25"]},
    }
    m = tiny([ffn])
    ev = R.evaluate_input(m, ["a", "b"])
    # a: relu(1 - 0 - 1/2) = 1/2 -> (1 + 1, 0 + 1/4); b: relu(-3/2) = 0 -> (0, 1 + 1/4)
    assert ev.hard[1] == [[2, Fraction(1, 4)], [0, Fraction(5, 4)]]


def test_two_point_softmax_value():
    """Scores 0 (BOS) and 1 (a) at tau = 1/2: weight on a is e^2/(1+e^2)."""
    head = {"query": [[1, 1]], "key": [[1, 0]], "value": [[1, 0], [0, 0]], "mask": "leq"}
    m = tiny([{"kind": "attention", "heads": [head]}], bos="<s>", temperature="1/2")
    ev = R.evaluate_input(m, ["a"])
    e2 = mp.e**2
    assert ev.hard[1][1] == [2, 0]
    assert abs(ev.soft[1][1][0] - (1 + e2 / (1 + e2))) < mp.mpf(10) ** -55
    assert ev.gaps[0].gap == 1 and ev.gaps[0].query == 1 and ev.gaps[0].other_key == 0


def test_output_positions_and_argmax_ties():
    m = tiny(
        [],
        output={
            "kind": "argmax",
            "weight": [[1, 0], [0, 1], [0, 1]],
            "bias": [0, 0, "-1/3"],
            "labels": ["A", "B", "C"],
        },
    )
    ev = R.evaluate_input(m, ["a", "b"])
    assert R.decide(m, ev, "hard") == (["A", "B"], Fraction(1, 3))
    m = tiny(
        [],
        output={"kind": "argmax", "weight": [[1, 0], [1, 0]], "bias": [0, 0], "labels": ["A", "B"]},
    )
    ev = R.evaluate_input(m, ["a"])
    assert R.decide(m, ev, "hard") == ([R.TIE], 0)
    assert R.decide(m, ev, "soft") == ([R.TIE], None)


@pytest.mark.parametrize(
    "text, i, n, value",
    [
        ("i/n", 2, 3, Fraction(2, 3)),
        ("1/(i+1)", 0, 3, 1),
        ("(-1)^i", 3, 3, -1),
        ("-2^2", 0, 1, -4),
        ("2**-1", 0, 1, Fraction(1, 2)),
        ("mod(i, 2) + floor(i/2) * 10", 5, 9, 21),
        ("ceil(-i/2)", 3, 3, -1),
        ("max(i, n, 2) - min(i, n)", 1, 4, 3),
        ("0.125 + 1e-3", 0, 1, Fraction(63, 500)),
    ],
)
def test_position_expressions(text, i, n, value):
    assert R.eval_position(text, i, n) == value


@pytest.mark.parametrize(
    "text",
    ["sqrt(i)", "sqrt(4)", "log(1)", "__import__('os')", "1/(i-1)", "2^(1/2)", "exp(i)", "i.real"],
)
def test_position_expressions_rejected(text):
    with pytest.raises(R.ReferenceError_):
        R.eval_position(text, 2 if text != "1/(i-1)" else 1, 3)


def test_temperatures():
    assert R.eval_temperature("1/n", 4) == Fraction(1, 4)
    assert abs(R.eval_temperature("1/log(n+1)", 1) - 1 / mp.log(2)) < 1e-50
    assert abs(R.eval_temperature("sqrt(12)", 1) - mp.sqrt(12)) < 1e-50
    with pytest.raises(R.ReferenceError_):
        R.eval_temperature("1-n", 1)


def test_numbers_are_exact_as_written():
    d = R.load_text('{"a": 0.1, "b": 1e-3, "c": 3}')
    assert R.num(d["a"]) == Fraction(1, 10)
    assert R.num(d["b"]) == Fraction(1, 1000)
    assert R.num("3/4") == Fraction(3, 4)
    assert R.num("-0.125") == Fraction(-1, 8)
    assert R.num("25e-2") == Fraction(1, 4)
    for bad in ("abc", "1/2/3", True, None):
        with pytest.raises(R.ReferenceError_):
            R.num(bad)
    with pytest.raises(R.ReferenceError_):
        R.load_text('{"a": NaN}')
