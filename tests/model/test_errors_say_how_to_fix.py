"""Every bad-input error says how to fix it: "(fix: …)" after the message, naming the JSON path.

22 errors (17 in the tracr importer, 3 in ``claims``, 2 in temperature handling) were raised
without a fix. A static check over every ``ModelError(...)`` in the package, then each of
them triggered where input can reach it.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn.cli import main
from exactattn.core.errors import ModelError
from exactattn.engine.temperature import Temperatures
from exactattn.importers.tracr import import_tracr
from exactattn.model import model_from_dict
from exactattn.model.expr import parse_expression

TRACR = ROOT / "tests" / "data" / "tracr"
EXAMPLE = ROOT / "exactattn" / "examples" / "mean_a_position.json"


def _calls_without_fix(source: str) -> list[int]:
    """Lines of ``ModelError(...)`` calls that give no fix (neither a third argument nor fix=)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name != "ModelError":
            continue
        fix = node.args[2:3] + [k.value for k in node.keywords if k.arg == "fix"]
        if not fix or (isinstance(fix[0], ast.Constant) and fix[0].value is None):
            out.append(node.lineno)
    return out


def test_the_static_check_sees_a_missing_fix() -> None:
    src = 'raise ModelError("p", "m")\nraise ModelError("p", "m", "f")\nModelError("p", "m", None)'
    assert _calls_without_fix(src) == [1, 3]


def test_every_model_error_in_the_package_has_a_fix() -> None:
    missing = []
    for path in sorted((ROOT / "exactattn").rglob("*.py")):
        lines = _calls_without_fix(path.read_text(encoding="utf-8"))
        missing += [f"{path.relative_to(ROOT)}:{n}" for n in lines]
    assert not missing, missing


# ---------------------------------------------------------------------------- tracr metadata


def _meta(name: str = "reverse") -> dict[str, Any]:
    return json.loads((TRACR / f"{name}.json").read_text())


def _set(*keys: Any, value: Any) -> Any:
    def edit(m: dict[str, Any]) -> None:
        for k in keys[:-1]:
            m = m[k]
        m[keys[-1]] = value

    return edit


TRACR_CASES = [
    # (fixture, edit of the metadata, JSON path named, words of the message)
    ("reverse", _set("config", "num_layers", value="four"), "config.num_layers", "integer >= 0"),
    ("reverse", _set("vocab", value=[]), "vocab", "non-empty list"),
    ("reverse", _set("vocab", value=[["a"], "b"]), "vocab[0]", "a token"),
    ("reverse", _set("input_encoding", value=[0, 1]), "input_encoding", "an object"),
    ("reverse", _set("config", value=[]), "config", "an object"),
    ("reverse", _set("config", "causal", value="yes"), "config.causal", "true/false"),
    ("reverse", _set("input_encoding", "a", value=999), "input_encoding.a", "row 999"),
    ("reverse", _set("output_decoding", "0", value=["a"]), "output_decoding.0", "a value"),
    ("reverse", _set("cases", value="all"), "cases", "a list"),
    ("reverse", _set("cases", 0, value={"input": ["a"]}), "cases[0]", "'expected'"),
    ("reverse", _set("cases", 0, "input", value="ab"), "cases[0].input", "max_seq_len"),
    ("reverse", _set("cases", 7, "expected", value="ab"), "cases[7].expected", "outputs"),
    ("reverse", _set("cases", 7, "expected", 0, value=["a"]), "cases[7].expected[0]", "categ"),
    ("frac_prevs", _set("cases", 0, "expected", 0, value="1"), "cases[0].expected[0]", "number"),
]


@pytest.mark.parametrize(("name", "edit", "path", "word"), TRACR_CASES)
def test_tracr_metadata_errors_name_the_path_and_the_fix(
    name: str, edit: Any, path: str, word: str, tmp_path: Path
) -> None:
    meta = _meta(name)
    edit(meta)
    js = tmp_path / f"{name}.json"
    js.write_text(json.dumps(meta))
    with pytest.raises(ModelError) as info:
        import_tracr(TRACR / f"{name}.npz", js)
    text = str(info.value)
    assert info.value.path == f"{name}.json: {path}", text
    assert word in text and "(fix: " in text and info.value.fix, text


def test_tracr_metadata_that_is_not_an_object(tmp_path: Path) -> None:
    js = tmp_path / "reverse.json"
    js.write_text("[1, 2]")
    with pytest.raises(ModelError) as info:
        import_tracr(TRACR / "reverse.npz", js)
    assert str(info.value).startswith("reverse.json: expected a JSON object") and info.value.fix


def test_tracr_array_that_is_not_a_matrix(tmp_path: Path) -> None:
    with np.load(TRACR / "reverse.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["token_embed/embeddings"] = np.zeros(5, np.float32)
    np.savez(tmp_path / "reverse.npz", **arrays)
    with pytest.raises(ModelError) as info:
        import_tracr(tmp_path / "reverse.npz", TRACR / "reverse.json")
    assert info.value.path == "reverse.npz: token_embed/embeddings"
    assert "expected a matrix" in str(info.value) and "(fix: " in str(info.value)


def test_tracr_cli_exit_code_and_one_line(tmp_path: Path) -> None:
    meta = _meta()
    meta["config"]["causal"] = "yes"
    js = tmp_path / "reverse.json"
    js.write_text(json.dumps(meta))
    out = tmp_path / "m.json"
    res = CliRunner().invoke(
        main, ["import", "tracr", str(TRACR / "reverse.npz"), str(js)] + ["-o", str(out)]
    )
    assert res.exit_code == 2, res.output
    assert res.output == (
        "error: reverse.json: config.causal: expected true/false, got str 'yes' (fix: write true "
        "or false (or leave it out: false))\n"
    )
    assert not out.exists()


# ---------------------------------------------------------------------------- claims


def _with_claims(claims: Any) -> dict[str, Any]:
    m = json.loads(EXAMPLE.read_text())
    m["claims"] = claims
    return m


GOOD = {"expr": "1/n", "justification": "user"}


@pytest.mark.parametrize(
    ("claims", "path", "word"),
    [
        ([GOOD], "claims", "expected an object"),
        ({"gamma_lower": GOOD, "x_max_upper": GOOD, "margin_lower": GOOD, "from_n": "two"},
         "claims.from_n", "integer >= 1"),
        ({"gamma_lower": {"expr": ["1/n"], "justification": "user"}, "x_max_upper": GOOD,
          "margin_lower": GOOD}, "claims.gamma_lower.expr", "expression string"),
    ],
)  # fmt: skip
def test_claims_errors_name_the_path_and_the_fix(claims: Any, path: str, word: str) -> None:
    with pytest.raises(ModelError) as info:
        model_from_dict(_with_claims(copy.deepcopy(claims)))
    text = str(info.value)
    assert info.value.path == path and word in text and "(fix: " in text, text


# ---------------------------------------------------------------------------- temperatures


@pytest.mark.parametrize(
    ("tau", "word"),
    [
        ("sqrt(2)^2 - 2 + 0*n", "cannot certify"),  # 0, which no ball can show is not > 0
        ("1/(exp(n) - exp(n))", "cannot be evaluated"),  # no ball shows the divisor is not 0
    ],
)
def test_temperature_errors_name_the_path_and_the_fix(tau: str, word: str) -> None:
    model = model_from_dict(json.loads(EXAMPLE.read_text()))
    temps = Temperatures(model, None)
    expr = parse_expression(tau, ("n",), transcendental=True)
    with pytest.raises(ModelError) as info:
        temps.value(expr, "temperature", 2, 64)
    text = str(info.value)
    assert info.value.path == "temperature" and word in text and "(fix: " in text, text
