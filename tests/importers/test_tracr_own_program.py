"""Your own RASP program through tracr (issue 39): the commands of docs/tracr.md, "Your own
program", run exactly as written on a program written for this test (not in tracr's
library): compiled with tracr, imported, checked — the imported network's hard and soft
meanings agree with the program's RASP outputs on every input up to its length.

Compiling needs tracr and JAX (not exactattn's dependencies: docs/tracr.md says how to
install them), so the session runs under ``-m slow`` and skips without them. What needs
neither runs by default: the module's refusals, and the page's session parsed.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from doc_sessions import missing_lines, run_step, steps_of
from paths import ROOT

from exactattn.core.errors import UsageError
from exactattn.importers import tracr_compile

PAGE = ROOT / "docs" / "tracr.md"
SECTION = PAGE.read_text("utf-8").split("## Your own program", 1)[1].split("\n## ", 1)[0]

have_tracr = importlib.util.find_spec("tracr") is not None and (
    importlib.util.find_spec("jax") is not None
)


def test_the_page_shows_compile_import_check() -> None:
    steps = steps_of(SECTION)
    assert [s.command.split()[:3] for s in steps] == [
        ["python", "-m", "exactattn.importers.tracr_compile"],
        ["exactattn", "import", "tracr"],
        ["exactattn", "check", "repeated_tokens.json"],
    ]
    assert "clean: no problem found for n = 1..4" in steps[-1].expected


def test_without_tracr_the_compiler_says_how_to_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        tracr_compile, "_tracr", lambda: (_ for _ in ()).throw(UsageError("no tracr"))
    )
    prog = tmp_path / "p.py"
    prog.write_text("def program():\n    return None\n")
    code = tracr_compile.main([str(prog), "--vocab", "a", "--max-seq-len", "2", "-o", "x"])
    assert code == 2


def test_bad_arguments_are_usage_errors(tmp_path: Path, capsys) -> None:
    assert tracr_compile.main(["nope.txt", "--vocab", "a", "--max-seq-len", "2", "-o", "x"]) == 2
    assert "PROGRAM.py[:FUNCTION]" in capsys.readouterr().err
    prog = tmp_path / "p.py"
    prog.write_text("x = 1\n")
    assert (
        tracr_compile.main([f"{prog}:make", "--vocab", "a", "--max-seq-len", "2", "-o", "x"]) == 2
    )
    assert "has no function 'make'" in capsys.readouterr().err
    assert tracr_compile.main([str(prog), "--vocab", ",", "--max-seq-len", "2", "-o", "x"]) == 2
    assert tracr_compile.main([str(prog), "--vocab", "a", "--max-seq-len", "0", "-o", "x"]) == 2


@pytest.mark.slow
@pytest.mark.skipif(
    not have_tracr, reason="needs tracr and JAX (docs/tracr.md, 'Your own program')"
)
def test_the_documented_session_compiles_imports_and_checks(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "docs" / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "docs/examples/repeated_tokens.py", tmp_path / "docs/examples")
    monkeypatch.chdir(tmp_path)
    for step in steps_of(SECTION):
        code, out = run_step(step, tmp_path)
        assert code == step.exit_code, (step.command, out[-3000:])
        assert not missing_lines(step.expected, out), (step.command, out[-3000:])
    meta = json.loads((tmp_path / "build/repeated_tokens.json").read_text("utf-8"))
    # the reference is RASP's own output: every input of length 1..4 over {a, b, c}
    assert len(meta["cases"]) == 3 + 9 + 27 + 81
    case = next(c for c in meta["cases"] if c["input"] == ["a", "b", "a"])
    assert case["expected"] == [True, False, True]
    model = json.loads((tmp_path / "repeated_tokens.json").read_text("utf-8"))
    assert model["reference"]["kind"] == "cases" and len(model["reference"]["cases"]) == 120
