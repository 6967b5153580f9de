"""The RASP-style front end: compile rules, and programs checked against direct code."""

from __future__ import annotations

import itertools

import pytest

from exactattn import model_from_dict, run_check
from exactattn.constructions.rasp import Program, ProgramError, build_majority, num


def _majority_cases(alphabet, n):
    return [
        {"input": list(w), "output": 2 * w.count(alphabet[0]) > n}
        for w in itertools.product(alphabet, repeat=n)
    ]


@pytest.mark.parametrize("alphabet", [("a", "b"), ("x", "y", "z")])
def test_majority_matches_direct_count(alphabet):
    d = build_majority(alphabet)
    d["reference"] = {
        "kind": "cases",
        "cases": [c for n in range(1, 6) for c in _majority_cases(alphabet, n)],
    }
    lengths = run_check(model_from_dict(d), max_n=5 if len(alphabet) == 2 else 4).to_json()
    for rec in lengths["lengths"]:
        n = rec["n"]
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert rec["disagreements"] == 0
        assert rec["min_margin"] == "1/2"
        assert rec["gamma"] == f"1/{n + 1}"


def _toy() -> Program:
    p = Program("toy", ["a", "b"], bos="<s>")
    p.constant("one")
    p.indicator("is_a", ["a"])
    p.position("pos", "i")
    return p


def test_prefix_mean_and_exists_compile_to_exact_values():
    """share = #a/(i+1) over BOS..i; exists(a) = 1 iff some a; checked on every input."""
    p = _toy()
    p.prefix_mean("share", {"is_a": 1})
    p.exists("some_a", "is_a", "one")
    # gap 1 with up to n+1 other keys: τ = 1/(4 log(n+2)) leaves mass ≤ (n+1)/(n+2)^4 elsewhere
    d = p.to_model(p.accept({"some_a": 1}, threshold="1/2"), temperature="1/(4*log(n+2))")
    d["reference"] = {"kind": "regex", "pattern": "[ab]*a[ab]*"}
    for rec in run_check(model_from_dict(d), max_n=4).to_json()["lengths"]:
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert rec["gamma"] == "1"  # the exists head; the prefix mean ties everywhere


def test_reading_a_coordinate_in_the_layer_that_writes_it_is_refused():
    p = _toy()
    h = p.head(values={"share": {"is_a": 1}}, mask="leq")
    with pytest.raises(ProgramError, match="written by this layer"):
        p.head(values={"bad": {"share": 1}})
    p.attention(h)
    p.head(values={"ok": {"share": 1}})  # the next layer may read it


def test_coordinates_are_written_once_and_must_exist():
    p = _toy()
    with pytest.raises(ProgramError, match="already exists"):
        p.position("pos", "i^2")
    with pytest.raises(ProgramError, match="unknown coordinate"):
        p.head(values={"x": {"nope": 1}})
    with pytest.raises(ProgramError, match="unknown tokens"):
        p.token("t", {"c": 1})
    with pytest.raises(ProgramError, match="mask"):
        p.head(values={"y": {"pos": 1}}, mask="causal-ish")


def test_pending_heads_must_be_closed():
    p = _toy()
    p.head(values={"share": {"is_a": 1}}, mask="leq")
    with pytest.raises(ProgramError):
        p.ffn([({"pos": 1}, 0)], {"r": {0: 1}})
    with pytest.raises(ProgramError):
        p.to_model({})


def test_numbers_are_exact():
    assert num(3) == 3
    assert num("6/4") == "3/2"
    with pytest.raises(ProgramError):
        num(0.5)  # type: ignore[arg-type]
    with pytest.raises(ProgramError):
        num(True)  # type: ignore[arg-type]
