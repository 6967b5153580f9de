"""Bad model files through the CLI: one test per class of bad input.

Each run is ``python -m exactattn check MODEL --max-n 2 --json OUT`` and must end with exit
code 2, a single clear message on stderr (no traceback) that names the JSON path and says
how to fix it, and no OUT file.  The models are mutations of the spec's worked example.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT, TESTS

BASE = json.loads((TESTS / "data" / "mean_a_position.json").read_text())


def run_cli(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess, Path]:
    model = tmp_path / "model.json"
    model.write_text(text)
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactattn",
            "check",
            str(model),
            "--max-n",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    return proc, out


def assert_rejected(tmp_path: Path, text: str, *needles: str) -> str:
    proc, out = run_cli(tmp_path, text)
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, err)
    assert not out.exists(), "an output file was written for a rejected model"
    assert "Traceback" not in err
    assert err.strip(), "no message on stderr"
    # one message (it may wrap): no more than a few lines, and the fix is named
    assert len(err.strip().splitlines()) <= 4, err
    assert "fix" in err.lower(), f"the message does not say how to fix it: {err}"
    flat = " ".join(err.split())
    for needle in needles:
        assert needle in flat, f"{needle!r} not in {err!r}"
    return flat


def mutated(**changes) -> dict:
    d = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            del node[last]
        else:
            node[last] = value
    return d


DELETE = object()
RAW = "@@RAW@@"


def with_raw_number(d: dict, literal: str) -> str:
    """JSON text of d where the string RAW is replaced by a bare JSON literal."""
    return json.dumps(d).replace(f'"{RAW}"', literal)


def test_valid_base_model_is_accepted(tmp_path):
    """The unmutated model passes, so each rejection below is caused by its mutation."""
    proc, out = run_cli(tmp_path, json.dumps(BASE))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["format"] == "exactattn-result/1"


def test_not_json(tmp_path):
    assert_rejected(tmp_path, '{"format": "exactattn/1", "name": ', "JSON")


def test_missing_key(tmp_path):
    assert_rejected(tmp_path, json.dumps(mutated(d=DELETE)), "'d'")


def test_wrong_shape(tmp_path):
    d = mutated()
    d["layers"][0]["heads"][0]["query"] = [[0, 1, 0]]  # 3 entries, d = 4
    assert_rejected(tmp_path, json.dumps(d), "layers[0].heads[0].query")


def test_unknown_token_in_embedding(tmp_path):
    d = mutated()
    d["embedding"]["token"]["z"] = [0, 0, 0, 0]
    assert_rejected(tmp_path, json.dumps(d), "embedding.token", "z")


def test_unknown_token_in_cases(tmp_path):
    d = mutated(reference={"kind": "cases", "cases": [{"input": ["a", "z"], "output": True}]})
    assert_rejected(tmp_path, json.dumps(d), "reference.cases[0].input[1]")


@pytest.mark.parametrize("literal", ["1e400", "NaN", "Infinity", "-Infinity"])
def test_unusable_numbers(tmp_path, literal):
    d = mutated()
    d["layers"][0]["heads"][0]["value"][0][2] = RAW
    assert_rejected(tmp_path, with_raw_number(d, literal), "layers[0].heads[0].value[0][2]")


def test_name_outside_the_grammar(tmp_path):
    d = mutated()
    d["embedding"]["position"][1] = "__import__('os')"
    assert_rejected(tmp_path, json.dumps(d), "embedding.position[1]")


def test_exponent_too_large(tmp_path):
    d = mutated()
    d["embedding"]["position"][0] = "2^(10^9)"
    assert_rejected(tmp_path, json.dumps(d), "embedding.position[0]")


def test_temperature_not_positive_at_a_checked_n(tmp_path):
    """2 - n is 1 at n = 1 and 0 at n = 2 (checked: --max-n 2)."""
    d = mutated(temperature="2-n")
    assert_rejected(tmp_path, json.dumps(d), "temperature", "n = 2")


def test_head_temperature_not_positive(tmp_path):
    d = mutated()
    d["layers"][0]["heads"][0]["temperature"] = "-1/n"
    assert_rejected(tmp_path, json.dumps(d), "layers[0].heads[0].temperature")


def test_position_divides_by_zero(tmp_path):
    """1/(i-1) is undefined at i = 1 (the first input symbol)."""
    d = mutated()
    d["embedding"]["position"][3] = "1/(i-1)"
    assert_rejected(tmp_path, json.dumps(d), "embedding.position[3]", "i = 1")


@pytest.mark.parametrize("text", ["(i/2)^(1/2)", "2^(1/2)", "sqrt(i)"])
def test_position_irrational(tmp_path, text):
    d = mutated()
    d["embedding"]["position"][2] = text
    assert_rejected(tmp_path, json.dumps(d), "embedding.position[2]")


def test_position_undefined_only_at_a_later_n(tmp_path):
    """1/(n-2) is fine at n = 1 and undefined at n = 2: the model is rejected as a whole (no
    partial result file for n = 1)."""
    d = mutated()
    d["embedding"]["position"][3] = "1/(n-2)"
    assert_rejected(tmp_path, json.dumps(d), "embedding.position[3]", "n = 2")
