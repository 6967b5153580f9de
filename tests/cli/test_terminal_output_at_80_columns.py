"""Terminal details a new user trips over (issue 39, point 10): at 80 columns no cell of
``eval`` or ``precision`` is cut and no interval is broken across lines; grid temperatures
that are powers of two print exactly; the expression parser lists only the functions allowed
where the name was written; LTL's G/F get a hint and ``build ltl --help`` the grammar;
``certify`` prints one verdict per line."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from paths import ROOT
from rich.console import Console

from exactattn import evaluate, load_model
from exactattn.cli import extra, main
from exactattn.cli.certify import grid_point_text
from exactattn.cli.show import show_evaluation
from exactattn.logic.ltl import LTLSyntaxError, parse_ltl
from exactattn.model.expr import ExprError, parse_expression
from exactattn.results.precision import PrecisionResult

INTERVAL = re.compile(r"\[[-0-9.e]+, [-0-9.e]+\]")


def _console(width: int) -> Console:
    return Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115


def _intervals_whole(text: str) -> None:
    """Every '[' that starts an interval closes on the same line."""
    for line in text.splitlines():
        for m in re.finditer(r"\[[-0-9]", line):
            assert "]" in line[m.start() :], line


@pytest.mark.parametrize("model", ["dyck1", "induction_k1"])
def test_eval_at_80_columns_cuts_nothing(model: str) -> None:
    m = load_model(ROOT / "models" / f"{model}.json")
    word = "(())" if model == "dyck1" else "abca"
    ev = evaluate(m, list(word))
    con = _console(80)
    show_evaluation(ev, con)
    text = con.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    _intervals_whole(text)
    # every coordinate name and every error interval is there, whole
    for name in m.coordinates or []:
        assert re.search(rf"[┃ ]{re.escape(name)}[┃ ]", text), name
    assert len(re.findall(r"‖soft − hard‖∞ ∈ \[", text)) == len(m.layers)


def test_precision_table_at_80_columns_cuts_nothing(monkeypatch) -> None:
    res = PrecisionResult.from_json(
        json.loads((ROOT / "tests/golden/precision/dyck1_n3_float64_float16.json").read_text())
    )
    con = _console(80)
    monkeypatch.setattr(extra, "console", con)
    monkeypatch.setattr(extra, "_precision_console", lambda: con)
    extra.print_precision(list(res.runs))
    text = con.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for r in res.runs:
        assert f"τ = {r.tau}" in text


def test_grid_temperatures_print_exactly() -> None:
    assert grid_point_text(-32, 8) == "2^-4 = 0.0625"
    assert grid_point_text(0, 8) == "2^0 = 1"
    assert grid_point_text(-31, 8) == "2^(-31/8) ≈ 0.0681567"  # 0.0625 · 2^(1/8) = 0.06815…
    assert "0000000" not in grid_point_text(-8 * 20, 8)


def test_certify_one_verdict_per_line() -> None:
    res = CliRunner().invoke(
        main, ["certify", str(ROOT / "models/dyck1.json"), "--n", "3", "--tau", "theorem"]
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "  ε ≤ 1 certified after every feeding layer: yes" in lines
    assert "  Theorem 4(ii)'s invariant B_(L−1) ≤ 1: holds" in lines
    assert any(x.startswith("    still certified at τ = 2^(") for x in lines)
    assert any(x.startswith("    first grid τ not certified: 2^(") for x in lines)
    for x in lines:
        assert x.count(": yes") + x.count(": holds") + x.count("not certified") <= 1, x


def test_unknown_name_lists_only_the_functions_allowed_there() -> None:
    with pytest.raises(ExprError) as e:
        parse_expression("foo(i)", ("i", "n"))
    msg = str(e.value)
    assert "functions allowed here: ceil, floor, max, min, mod)" in msg
    listed = msg.split("functions allowed here: ")[1].split(")")[0].split(", ")
    assert not {"exp", "log", "sqrt"} & set(listed)
    with pytest.raises(ExprError) as e:
        parse_expression("foo(n)", ("n",), transcendental=True)
    assert "ceil, exp, floor, log, max, min, mod, sqrt" in str(e.value)


@pytest.mark.parametrize(("op", "says"), [("G", "#[!φ] = 0"), ("F", "#[φ] >= 1")])
def test_ltl_g_and_f_get_a_hint(op: str, says: str) -> None:
    with pytest.raises(LTLSyntaxError) as e:
        parse_ltl(f"{op} a", ["a", "b"])
    assert says in str(e.value) and "exactattn build ltl --help" in str(e.value)
    with pytest.raises(LTLSyntaxError) as e:  # a plain unknown letter gets no hint
        parse_ltl("c", ["a", "b"])
    assert "fix" not in str(e.value)
    # the hint's formula is what it says: G a ⇔ no position without a
    res = CliRunner().invoke(main, ["build", "ltl", f"{op} a", "--alphabet", "a,b"])
    assert res.exit_code == 2 and says in res.output


def test_the_hinted_formulas_mean_g_and_f() -> None:
    from exactattn.logic.ltl import accepts

    g, f = parse_ltl("#[!a] = 0", ["a", "b"]), parse_ltl("#[a] >= 1", ["a", "b"])
    for word in ["a", "aa", "ab", "ba", "bb", "aba", "bbb"]:
        assert accepts(g, tuple(word)) == all(c == "a" for c in word)
        assert accepts(f, tuple(word)) == ("a" in word)


def test_build_ltl_help_shows_the_grammar() -> None:
    res = CliRunner().invoke(main, ["build", "ltl", "--help"])
    assert res.exit_code == 0
    for line in ("temp    := unary (('S' | 'U') temp)?", "count   := '#[' formula ']'"):
        assert line in res.output
    assert "There is no G or F" in res.output
