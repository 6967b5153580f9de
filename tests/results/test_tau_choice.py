"""--tau is parsed once into a TauChoice; the API and the CLI give byte-identical results."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn import load_model, run_check
from exactattn.cli import main
from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_json_atomic
from exactattn.model.expr import constant_expression, parse_expression
from exactattn.results.settings import CheckSettings, TauChoice


def test_parse_kinds_and_record_text() -> None:
    assert TauChoice.parse(None) == TauChoice.model()
    assert TauChoice.parse(None).record_text() is None
    assert TauChoice.parse("theorem").is_theorem
    assert TauChoice.parse("theorem").record_text() == "theorem"
    c = TauChoice.parse("1/(n+1)")
    assert c.kind == "override" and c.expr is not None and c.record_text() == "1/(n+1)"
    assert c.expr.eval_exact({"n": 3}) == Fraction(1, 4)
    with pytest.raises(UsageError, match="--tau: bad expression 'n\\^'"):
        TauChoice.parse("n^")


def test_theorem_value_is_the_parsed_constant() -> None:
    q = Fraction(12345678901234567, 2**70)
    c = TauChoice.theorem().at_theorem_value(q)
    parsed = parse_expression(c.expr.text, ("n",))  # type: ignore[union-attr]
    assert c.expr == parsed == constant_expression(q)
    assert c.expr.text == "12345678901234567/1180591620717411303424"  # type: ignore[union-attr]
    assert c.expr.eval_exact({"n": 9}) == q  # type: ignore[union-attr]
    assert c.record_text() == "theorem"  # the record says how τ was chosen, not its value


def test_settings_round_trip() -> None:
    s = CheckSettings(2, 5, TauChoice.parse("1/n"), False, True, False, True)
    d = s.to_json()
    assert list(d) == [
        "min_n", "max_n", "tau_override", "hard_only", "bounds", "find_tau", "float_filter"
    ]  # fmt: skip
    assert d["tau_override"] == "1/n"
    assert CheckSettings.from_json(d) == s
    odd = CheckSettings.from_json({**d, "tau_override": "import os"})
    assert odd.tau.record_text() == "import os" and odd.tau.expr is None


@pytest.mark.parametrize(
    ("model", "tau", "extra", "kw"),
    [
        # the same request without --bounds: the CLI sets nothing run_check would not (it
        # recorded settings.bounds true for --tau theorem while run_check recorded false)
        ("models/induction_k1.json", "theorem", [], {}),
        ("models/ltl_counting_temperature.json", "1/(n+1)", [], {}),
        ("models/induction_k1.json", "theorem", ["--bounds"], {"bounds": True}),
    ],
)
def test_api_and_cli_give_the_same_bytes(
    model: str, tau: str, extra: list[str], kw: dict[str, bool], tmp_path: Path
) -> None:
    out = tmp_path / "cli.json"
    res = CliRunner().invoke(
        main,
        [
            "check",
            str(ROOT / model),
            "--max-n",
            "3",
            "--tau",
            tau,
            *extra,
            "-q",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code in (0, 1, 3), res.output
    m = load_model(ROOT / model)
    by_choice = run_check(m, max_n=3, tau=TauChoice.parse(tau), **kw)
    by_text = run_check(m, max_n=3, tau=tau, **kw)
    dump = lambda r: json.dumps(r.to_json(), indent=2, ensure_ascii=False)  # noqa: E731
    assert dump(by_choice) == dump(by_text)
    api = tmp_path / "api.json"
    write_json_atomic(api, by_choice.to_json())  # as the CLI writes it
    assert out.read_bytes() == api.read_bytes()  # the same request, the same bytes
    cli = json.loads(out.read_text(encoding="utf-8"))
    assert cli["settings"]["tau_override"] == tau
