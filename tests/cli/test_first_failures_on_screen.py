"""After a failing ``check`` the first failing inputs are on screen (issue 39): the word, what
the reference expects, the hard and the soft decision, where soft and hard part, and the
``exactattn eval`` command for one of them; ``-q`` still prints the verdict line; a model
without a reference says so in its verdict line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner
from paths import ROOT

from exactattn import evaluate, load_model, model_from_dict
from exactattn.cli import main
from exactattn.cli.show import parting_layer
from exactattn.constructions.catalog import catalog

DYCK1 = ROOT / "models" / "dyck1.json"


def _dyck1(tmp_path: Path, reference: dict | None) -> Path:
    d = json.loads(DYCK1.read_text("utf-8"))
    d.pop("claims", None)
    if reference is None:
        d.pop("reference")
    else:
        d["reference"] = reference
    path = tmp_path / "m.json"
    path.write_text(json.dumps(d), "utf-8")
    return path


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def test_reference_mismatch_names_the_input_and_the_eval_command(tmp_path: Path) -> None:
    # (())…: balanced, but not of the form ()()…: the regex reference rejects "(())"
    m = _dyck1(tmp_path, {"kind": "regex", "pattern": r"(\(\))*"})
    code, out = _run("check", str(m), "--max-n", "4", "--json", str(tmp_path / "r.json"))
    assert code == 1
    lines = out.splitlines()
    i = lines.index("first failing inputs (each length's first ones are in the --json file):")
    assert lines[i + 1] == "  n = 4  '(())': expected reject · hard accept · soft accept"
    assert "hard meaning itself differs from the reference" in lines[i + 2]
    cmd = next(x for x in lines if x.startswith("look at one closely: "))
    assert cmd == f"look at one closely: exactattn eval {shlex.quote(str(m))} '(())'"
    assert lines[-1] == "problems: n=4: reference mismatches hard 1, soft 1"
    # the suggested command runs and shows that input
    argv = shlex.split(cmd.removeprefix("look at one closely: "))[1:]
    code, shown = _run(*argv)
    assert code == 0 and "on ( ( ) )" in shown


def test_disagreement_names_the_layer_where_soft_and_hard_part(tmp_path: Path) -> None:
    """Dyck-1 at τ = 1/n is too warm: '(' is decided differently at n = 1; every layer's
    error (1.36 after layer 1) is printed and the parting layer is the first ≥ 1/2."""
    code, out = _run("check", str(DYCK1), "--max-n", "2", "--tau", "1/n")
    assert code == 1
    lines = out.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("  n = 1  '('"))
    assert lines[i] == "  n = 1  '(': expected reject · hard reject · soft accept"
    part = next(x for x in lines[i + 1 : i + 4] if "part at layer" in x)
    assert "soft and hard part at layer 1 (attention)" in part
    assert "≤ 0 · 1.36 · 1.36 · 1.36 · 1.36" in part
    assert any(x.endswith("--tau 1/n") and "exactattn eval" in x for x in lines)
    # the same facts from the Python API
    ev = evaluate(load_model(DYCK1), ["("], tau="1/n")
    assert (ev.decision, ev.soft_decision, ev.agree, ev.expected) == (False, True, False, False)
    assert parting_layer(ev.layer_errors) == 1


def test_quiet_still_prints_the_verdict_line(tmp_path: Path) -> None:
    m = _dyck1(tmp_path, {"kind": "regex", "pattern": r"(\(\))*"})
    code, out = _run("check", str(m), "--max-n", "4", "-q")
    assert code == 1
    assert out == "problems: n=4: reference mismatches hard 1, soft 1\n"
    code, out = _run("check", str(DYCK1), "--max-n", "3", "-q")
    assert code == 0 and out == "clean: no problem found for n = 1..3\n"


def test_a_model_without_reference_says_so(tmp_path: Path) -> None:
    m = _dyck1(tmp_path, None)
    code, out = _run("check", str(m), "--max-n", "3", "-q")
    assert code == 0
    assert out.startswith("clean: no problem found for n = 1..3 — no reference: what the model ")
    assert "is meant to compute was not checked" in out
    code, out = _run("check", str(m), "--max-n", "3")
    assert code == 0 and out.splitlines()[-1].startswith("clean: no problem found for n = 1..3 — ")


def test_parting_layer_rule() -> None:
    from fractions import Fraction as F

    assert parting_layer([]) is None
    assert parting_layer([(F(0), F(0)), (F(0), F(0))]) is None
    # the first layer whose lower end reaches 1/2
    assert parting_layer([(F(0), F(0)), (F(1, 10), F(1, 5)), (F(1, 2), F(1)), (F(2), F(3))]) == 2
    # below 1/2 everywhere: the layer of the largest error
    assert parting_layer([(F(0), F(1, 100)), (F(1, 10), F(1, 5)), (F(0), F(1, 10))]) == 1


def test_evaluate_decisions_for_argmax_outputs() -> None:
    m = load_model(ROOT / "models" / "induction_k1.json")
    ev = evaluate(m, list("abca"))
    assert ev.decision == ("none", "none", "none", "b")
    assert ev.soft_decision == ev.decision and ev.agree is True
    assert ev.expected == ("none", "none", "none", "b")
    assert model_from_dict(json.loads((ROOT / "models" / "induction_k1.json").read_text()))


# --- build models/claims --check outside the repository (issue 39, point 9) -----------------


def test_build_checks_outside_the_repository_are_usage_errors(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # an empty directory: no models/, no reports/claims/
    for args in (["build", "models", "--check"], ["build", "claims", "--check"]):
        code, out = _run(*args)
        assert code == 2, out
        assert out.startswith(f"error: exactattn {' '.join(args)}: ")
        assert "run it from the repository root" in out and len(out.splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing written


def test_build_checks_in_the_repository_say_one_line(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    code, out = _run("build", "models", "--check")
    count = len(catalog())
    assert code == 0 and out == f"models: every bundled model is up to date ({count} files)\n"
    code, out = _run("build", "claims", "--check")
    assert code == 0 and out == "docs/claims.md is up to date with reports/claims/\n"
