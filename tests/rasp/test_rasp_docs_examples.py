"""Every worked example of docs/rasp.md: the interpreter gives the documented output, and the
compiled model's hard meaning equals the interpreter on every input up to n = 3."""

from __future__ import annotations

import re

import pytest
from paths import ROOT

from exactattn import model_from_dict, run_check
from exactattn.constructions.rasp_compile import compile_program
from exactattn.rasp import parse_program, run

DOC = ROOT / "docs" / "rasp.md"
BLOCK = re.compile(r"```rasp\n(.*?)```\non `(\w+)`: `([^`]*)`", re.S)
EXAMPLES = BLOCK.findall(DOC.read_text(encoding="utf-8"))


def _shown(out) -> str:
    if isinstance(out, bool):
        return "accept" if out else "reject"
    return " ".join(str(int(v)) for v in out)


def test_the_doc_has_one_example_per_construct():
    assert len(EXAMPLES) >= 15
    text = "".join(src for src, _, _ in EXAMPLES)
    constructs = "psum(|attend leftmost|attend rightmost|j < i|j <= i|j > i|j >= i|if |min(|abs("
    for construct in [*constructs.split("|"), "int(", "pos[j] ==", "accept"]:
        assert construct in text, construct


@pytest.mark.parametrize("src,word,shown", EXAMPLES, ids=[str(k) for k in range(len(EXAMPLES))])
def test_doc_example(src, word, shown):
    prog = parse_program(src, "example")
    assert _shown(run(prog, tuple(word))) == shown
    res = run_check(model_from_dict(compile_program(prog).model), max_n=3, hard_only=True)
    for rec in res.to_json()["lengths"]:
        assert rec["reference_mismatches"]["hard"] == 0
        assert rec["reference_compared"] == 3 ** rec["n"]
