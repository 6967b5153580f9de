"""RASP programs (issue 22): interpreter = independent oracle, compiled hard meaning =
interpreter, measured γ(n) ≥ the compiler's bound, bad programs rejected with line/column."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from paths import ROOT

from exactattn import load_model, run_check
from exactattn.constructions.rasp_compile import compile_program
from exactattn.constructions.rasp_gap import bound_at
from exactattn.rasp import parse_program, run

SOURCES = ROOT / "models" / "rasp"
STEMS = sorted(p.stem for p in SOURCES.glob("*.rasp"))


# -- independent oracles (plain Python, no RASP) ------------------------------------------


def _dyck(w: tuple[str, ...], pairs: dict[str, str]) -> bool:
    stack: list[str] = []
    for t in w:
        if t in pairs:
            stack.append(pairs[t])
        elif not stack or stack.pop() != t:
            return False
    return not stack


def _anbn(w: tuple[str, ...]) -> bool:
    k = w.count("a")
    return k >= 1 and w == ("a",) * k + ("b",) * k


ORACLES = {
    "dyck1": lambda w: _dyck(w, {"(": ")"}),
    "dyck2": lambda w: _dyck(w, {"(": ")", "[": "]"}),
    "majority": lambda w: w.count("a") > w.count("b"),
    "count": lambda w: [w[: i + 1].count("a") for i in range(len(w))],
    "rotate": lambda w: [w[i - 1] == "a" for i in range(len(w))],  # w[-1] at i = 0
    "reverse": lambda w: [t == "a" for t in reversed(w)],
    "anbn": _anbn,
    "firstlast": lambda w: w[0] == w[-1],
}
LEVEL = {  # the paper's language level each bundled program is written in
    "rotate": "B-RASP",
    "firstlast": "B-RASP",
    "reverse": "B-RASP[pos]",
    "dyck1": "S-RASP",
    "dyck2": "S-RASP",
    "majority": "S-RASP",
    "count": "S-RASP",
    "anbn": "S-RASP",
}


def _prog(stem: str):
    return parse_program((SOURCES / f"{stem}.rasp").read_text(encoding="utf-8"), stem)


def _words(alphabet, max_n):
    for n in range(1, max_n + 1):
        yield from itertools.product(alphabet, repeat=n)


def test_every_bundled_program_has_an_oracle_and_every_level_is_covered():
    assert set(STEMS) == set(ORACLES)
    assert set(LEVEL.values()) == {"B-RASP", "B-RASP[pos]", "S-RASP"}
    assert len(STEMS) >= 8


@pytest.mark.parametrize("stem", STEMS)
def test_interpreter_equals_oracle(stem):
    prog = _prog(stem)
    max_n = 5 if len(prog.alphabet) > 2 else 8
    for w in _words(prog.alphabet, max_n):
        assert run(prog, w) == ORACLES[stem](w), (stem, w)


@pytest.mark.slow
def test_interpreter_equals_oracle_dyck2_n8():
    prog = _prog("dyck2")
    for w in _words(prog.alphabet, 8):
        assert run(prog, w) == ORACLES["dyck2"](w), w


def _hard_check(stem: str, max_n: int) -> dict:
    model = load_model(ROOT / "models" / f"rasp_{stem}.json")
    return run_check(model, max_n=max_n, hard_only=True).to_json()


def _assert_hard_equals_interpreter_and_gap(stem: str, res: dict) -> None:
    compiled = compile_program(_prog(stem))
    k = len(compiled.model["alphabet"])
    for rec in res["lengths"]:
        n = rec["n"]
        assert rec["reference_mismatches"]["hard"] == 0, (stem, n, rec["first_reference_mismatch"])
        assert rec["reference_compared"] == k**n  # every input was compared
        # the model's gap and every head's gap are at least the compiler's bounds
        bound = bound_at(compiled.gap_bound, n)
        if rec["gamma"] is not None:
            assert Fraction(rec["gamma"]) >= bound, (stem, n)
        for h in compiled.heads:
            g = rec["layers"][h.layer]["heads"][h.head]["gamma"]
            b = bound_at(h.bound, n)
            if g is not None and b is not None:
                assert Fraction(g) >= b, (stem, n, h)


@pytest.mark.parametrize("stem", STEMS)
def test_hard_meaning_equals_interpreter_and_gap_bound_holds(stem):
    """Every input up to n = 6 (Dyck-2 too: 5,460 words); n = 8 in the slow run. The bounded
    compilations: tests/rasp/test_rasp_bounded_embedding.py."""
    _assert_hard_equals_interpreter_and_gap(stem, _hard_check(stem, 6))


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_hard_meaning_equals_interpreter_n8(stem):
    _assert_hard_equals_interpreter_and_gap(stem, _hard_check(stem, 8))


def test_dyck2_gap_is_one_over_n_plus_one_and_bound_is_tight():
    """Measured γ(n) = 1/(n + 1) = the compiler's bound (hand-derived: the count lookup at
    the last query, and the select heads' tie-break, are both 1/(n + 1) apart)."""
    res = _hard_check("dyck2", 4)
    assert [r["gamma"] for r in res["lengths"]] == ["1/2", "1/3", "1/4", "1/5"]
    assert res["closed_forms"]["gamma"]["expression"] == "1/(n + 1)"


def test_compiled_models_are_current_and_compile_fast():
    for stem in STEMS:
        t = time.perf_counter()
        model = compile_program(_prog(stem)).model
        assert time.perf_counter() - t < 1.0, stem
        on_disk = json.loads((ROOT / "models" / f"rasp_{stem}.json").read_text())
        assert on_disk == model, stem
        # every head says which program line it implements
        for layer in model["layers"]:
            for head in layer.get("heads", []):
                assert head["name"].startswith("line "), head["name"]


def test_soft_meaning_agrees_on_dyck2_small_n():
    """The soft meaning at the model's τ(n) (γ_bound/(8 log(n+2))) decides like the hard one."""
    model = load_model(ROOT / "models" / "rasp_dyck2.json")
    res = run_check(model, max_n=4).to_json()
    assert res["verdict"]["status"] == "clean"
    for rec in res["lengths"]:
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert rec["invariant"] == "holds"


# -- the CLI ----------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "exactattn", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=900,
    )


def test_build_rasp_cli_writes_the_bundled_model(tmp_path):
    out = tmp_path / "d.json"
    proc = _cli("build", "rasp", str(SOURCES / "dyck1.rasp"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == json.loads(
        (ROOT / "models" / "rasp_dyck1.json").read_text()
    )
    assert "count-lookup, gap ≥ 1/(n + 1)" in proc.stderr


BAD = {
    "unknown name": (
        'alphabet "a" "b"\nbool x = token == "a"\naccept x and y\n',
        3,
        14,
        "unknown name 'y'",
    ),
    "Boolean as integer": (
        'alphabet "a" "b"\nbool x = token == "a"\nint c = x + 1\naccept c > 0\n',
        3,
        9,
        "'x' is a Boolean, used as an integer",
    ),
    "cycle": (
        'alphabet "a" "b"\nbool x = y\nbool y = not x\naccept x\n',
        3,
        14,
        "cycle: x -> y -> x",
    ),
    "psum of a Boolean": (
        'alphabet "a" "b"\nint c = psum(token == "a")\naccept c > 0\n',
        2,
        14,
        "prefix sum of a Boolean",
    ),
    "syntax": ('alphabet "a"\nbool x = (token == "a"\naccept x\n', 3, 1, "expected ')'"),
    "not compilable": (
        'alphabet "a" "b"\nint c = psum(int(token == "a"))\nint d = psum(c)\naccept d > 0\n',
        3,
        14,
        "not supported by the compiler",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_programs_exit_2_with_line_and_column(tmp_path, case):
    text, line, col, what = BAD[case]
    src = tmp_path / "p.rasp"
    src.write_text(text)
    out = tmp_path / "m.json"
    proc = _cli("build", "rasp", str(src), "-o", str(out))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"line {line}, column {col}" in lines[0], lines[0]
    assert what in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.slow
def test_check_dyck2_max_n_8_is_clean(tmp_path):
    out = tmp_path / "r.json"
    proc = _cli(
        "check", "models/rasp_dyck2.json", "--max-n", "8", "--jobs", "2", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    for rec in res["lengths"]:
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert Fraction(rec["gamma"]) >= Fraction(1, rec["n"] + 1)


def test_check_dyck2_cli_small_n(tmp_path):
    out = tmp_path / "r.json"
    proc = _cli("check", "models/rasp_dyck2.json", "--max-n", "3", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert all(r["reference_mismatches"] == {"hard": 0, "soft": 0} for r in res["lengths"])


# -- the compiler's gap bound in `check` ---------------------------------------------------------


def _mutated(tmp_path, edit) -> Path:
    d = json.loads((ROOT / "models" / "rasp_dyck1.json").read_text())
    edit(d["reference"])
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    return p


def test_check_reports_the_bound_beside_measured_gamma():
    res = _hard_check("dyck1", 4)
    for rec in res["lengths"]:
        g = rec["compiler_gap_bound"]
        assert g["expression"] == "1/(n + 1)"
        assert g["bound"] == f"1/{rec['n'] + 1}" == rec["gamma"] == g["measured"]
        assert g["holds"] and g["violations"] == []
        assert [h["bound"] for h in g["heads"]][:2] == [None, f"1/{rec['n'] + 1}"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.update(gap_bound="1"),  # above γ(n) = 1/(n+1)
        lambda r: r["head_gap_bounds"][1].__setitem__(2, "2/(n + 1)"),  # one head's bound
    ],
    ids=["model", "head"],
)
def test_a_bound_above_the_measured_gap_is_a_finding(tmp_path, edit):
    proc = _cli("check", str(_mutated(tmp_path, edit)), "--max-n", "3", "--hard-only")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "VIOLATED" in proc.stdout
    assert "gap bound is above the measured gap" in proc.stdout.replace("\n", " ")


def test_head_gap_bounds_must_name_attention_heads(tmp_path):
    p = _mutated(tmp_path, lambda r: r["head_gap_bounds"][1].__setitem__(0, 0))
    proc = _cli("check", str(p), "--max-n", "2", "--hard-only")
    assert proc.returncode == 2
    assert "reference.head_gap_bounds[1]: layer 0, head 0 is not an attention head" in proc.stderr


def test_eval_shows_which_program_line_each_head_implements():
    proc = _cli("eval", "models/rasp_dyck2.json", "([])")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "line 9 (depth): count-lookup" in text
    assert "line 12 (has_partner): select rightmost j < i" in text


def test_report_shows_the_compiler_gap_bound(tmp_path):
    from exactattn.report import write_report

    res = _hard_check("dyck1", 3)
    paths = write_report(res, tmp_path / "r.md", "md")
    text = paths[0].read_text(encoding="utf-8")
    assert "## Compiler gap bound" in text
    assert "| 3 | `1/4` | `1/4` | holds |" in text


def test_rasp_reference_must_fit_the_output():
    from exactattn import model_from_dict
    from exactattn.core.errors import ModelError

    count = json.loads((ROOT / "models" / "rasp_count.json").read_text())
    rotate = json.loads((ROOT / "models" / "rasp_rotate.json").read_text())
    majority = json.loads((ROOT / "models" / "rasp_majority.json").read_text())
    for model, ref, what in [
        (count, rotate["reference"], "outputs Booleans"),
        (rotate, count["reference"], "outputs integers"),
        (count, majority["reference"], "output is 'accept'"),
        (count, {"kind": "rasp", "program": 'alphabet "a"\noutput pos\n'}, "alphabet differs"),
        (count, {"kind": "rasp", "program": "alphabet 'a'\n"}, "line 1, column 10"),
    ]:
        with pytest.raises(ModelError, match=what):
            model_from_dict({**model, "reference": ref})
