"""The Python front end (tracr style) builds the same programs as the text syntax."""

from __future__ import annotations

import itertools

import pytest

from exactattn import model_from_dict, run_check
from exactattn.constructions.rasp_compile import compile_program
from exactattn.rasp import RaspError
from exactattn.rasp import api as r
from exactattn.rasp.parse import parse_program


def _dyck2():
    opn = r.token_in("(", "[").named("open")
    rnd = r.token_in("(", ")").named("round")
    depth = r.psum(r.to_int(opn) - r.to_int(~opn)).named("depth")
    sel = r.select("rightmost", "j<i", opn.at_j & (depth.at_j == depth + 1))
    found = r.aggregate(sel, True, default=False).named("found")
    same = r.aggregate(sel, rnd.at_j, default=False).named("same")
    bad = ((depth < 0) | (~opn & (~found | (same != rnd)))).named("bad")
    any_bad = r.aggregate(r.select("leftmost", "none", bad.at_j), True, default=False)
    return r.program("dyck2", ["(", ")", "[", "]"], accept=~any_bad & (depth == 0))


def _oracle(w):
    stack = []
    for t in w:
        if t in "([":
            stack.append(")" if t == "(" else "]")
        elif not stack or stack.pop() != t:
            return False
    return not stack


def test_api_dyck2_means_dyck2_and_compiles():
    prog = _dyck2()
    for n in range(1, 6):
        for w in itertools.product("()[]", repeat=n):
            assert r.run(prog, w) == _oracle(w), w
    # the recorded source parses back to the same meaning
    again = parse_program(prog.source or "")
    assert all(r.run(again, w) == _oracle(w) for w in itertools.product("()[]", repeat=4))
    res = run_check(model_from_dict(compile_program(prog).model), max_n=4, hard_only=True).to_json()
    assert all(x["reference_mismatches"]["hard"] == 0 for x in res["lengths"])
    assert [x["gamma"] for x in res["lengths"]] == ["1/2", "1/3", "1/4", "1/5"]


def test_api_errors():
    with pytest.raises(ValueError, match="mask"):
        r.select("leftmost", "j<<i", True)
    with pytest.raises(ValueError, match="exactly one"):
        r.program("p", ["a"])
    with pytest.raises(TypeError):
        bool(r.position > 1)
    b = r.token_eq("a")
    with pytest.raises(RaspError, match="Boolean, used as an integer"):
        r.program("p", ["a", "b"], output=r.psum(b + 1))
