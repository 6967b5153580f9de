"""A precision file saved before every length is run says so: ``"interrupted": true``.

The file is saved after each length. Every save before the last length is run carries the
mark (a Ctrl-C, a kill -9 or a crash right after it leaves a partial file), and only the
saves made once every length is run drop it, so a complete file keeps the bytes earlier
versions wrote (tests/golden/precision: written by the code before the mark). Ctrl-C is
injected at exact points as in tests/cli/test_ctrl_c_held_at_finish.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT

import exactattn.cli.extra as extra_module
from exactattn.cli import main
from exactattn.cli.extra import precision_json
from exactattn.core.jsonio import dumps
from exactattn.model import load_model
from exactattn.results.precision import PrecisionResult, PrecisionSettings
from exactattn.run.precision import sweep_words

DYCK1 = ROOT / "models" / "dyck1.json"
GOLDEN = ROOT / "tests" / "golden" / "precision"
ONE = ["precision", str(DYCK1), "--max-n", "3", "--dtype", "float64"]
TWO = [*ONE, "--dtype", "float16"]  # two runs: no flat top-level keys
VERSION = re.compile(r'"backend_version": "[^"]*"')


def _bytes_as_golden(text: str) -> str:
    """The numpy version is the machine's, not the format's."""
    return VERSION.sub('"backend_version": "-"', text)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _writes(monkeypatch: pytest.MonkeyPatch, at: Callable[[int], bool]) -> list[dict]:
    """Every document the command writes, in order; a Ctrl-C just after write k if ``at(k)``."""
    real = extra_module.write_json_atomic
    docs: list[dict] = []

    def write(path: Path, data: dict) -> None:
        real(path, data)
        docs.append(json.loads(Path(path).read_text(encoding="utf-8")))
        if at(len(docs)):
            _ctrl_c()

    monkeypatch.setattr(extra_module, "write_json_atomic", write)
    return docs


def _run(args: list[str], out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(main, [*args, "--json", str(out)])
    assert "Traceback" not in res.output, res.output
    return res.exit_code, res.output


@pytest.mark.parametrize(
    ("args", "golden"), [(ONE, "dyck1_n3_float64.json"), (TWO, "dyck1_n3_float64_float16.json")]
)
def test_a_complete_file_has_no_mark_and_the_bytes_of_before(
    tmp_path: Path, args: list[str], golden: str
) -> None:
    code, output = _run(args, tmp_path / "p.json")
    assert code == 0, output
    text = (tmp_path / "p.json").read_text(encoding="utf-8")
    assert '"interrupted"' not in text
    assert _bytes_as_golden(text) == _bytes_as_golden((GOLDEN / golden).read_text("utf-8"))
    assert PrecisionResult.from_json(json.loads(text)).stop_text() is None


def test_every_save_before_the_last_length_is_run_is_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saves after n = 1 and 2 (a kill -9 there leaves them) are partial; the last length's
    save (after every length is run) and the final save are the complete file."""
    docs = _writes(monkeypatch, lambda k: False)
    code, output = _run(ONE, tmp_path / "p.json")
    assert code == 0, output
    assert [d.get("interrupted") for d in docs] == [True, True, None, None]
    assert [[e["n"] for e in d["lengths"]] for d in docs] == [[1], [1, 2], [1, 2, 3], [1, 2, 3]]
    assert [PrecisionResult.from_json(d).stop_text() for d in docs[:2]] == [
        "interrupted after n = 1",
        "interrupted after n = 2",
    ]
    keys = ["format", "model", "model_sha256", "settings", "interrupted", "runs"]
    assert list(docs[0])[:6] == keys
    assert docs[2] == docs[3] == json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("k", [1, 2])
def test_ctrl_c_leaves_a_file_that_says_it_is_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    out = tmp_path / "[bold]p.json"  # a user string: printed as given, never as markup
    _writes(monkeypatch, lambda i: i == k)
    code, output = _run(ONE, out)
    assert code == 130, output
    text = out.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["interrupted"] is True
    assert [e["n"] for e in data["lengths"]] == list(range(1, k + 1))
    assert f"precision: interrupted after n = {k}; {out} keeps the lengths" in output
    res = PrecisionResult.from_json(data)
    assert res.interrupted and res.last_n == k
    assert dumps(res.to_json()) == text  # read back and written again: the same bytes


def test_ctrl_c_in_a_family_sweep_names_the_last_saved_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _writes(monkeypatch, lambda i: i == 1)
    args = ["precision", str(DYCK1), "--family", "nested", "--n", "2", "--n", "4"]
    code, output = _run([*args, "--dtype", "float64", "--no-certified"], tmp_path / "p.json")
    assert code == 130, output
    data = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert data["interrupted"] is True and [e["n"] for e in data["lengths"]] == [2]
    assert data["settings"]["ns"] == [2, 4]
    assert "interrupted after n = 2;" in output


def test_the_save_of_a_partial_state_carries_the_mark() -> None:
    """``precision_json`` called directly: the sweep's runs after n = 1 and 2 of 1..3."""
    model = load_model(DYCK1)
    runs = sweep_words(
        model, {1: [("(",), (")",)], 2: [("(", ")")]}, ["float64"], [("model", None)], False
    )
    settings = PrecisionSettings(
        ("float64",), ("model",), 0, "numpy", "-", "enumerate", False, min_n=1, max_n=3
    )
    partial = precision_json(model, runs, settings, interrupted=True)
    complete = precision_json(model, runs, settings)
    assert partial.pop("interrupted") is True
    assert "interrupted" not in complete and partial == complete
    back = PrecisionResult.from_json(precision_json(model, runs, settings, interrupted=True))
    assert back.interrupted and back.stop_text() == "interrupted after n = 2"
    empty = PrecisionResult(model.name, settings, (), interrupted=True)
    assert empty.stop_text() == "interrupted before any length finished"
    assert empty.to_json()["interrupted"] is True


@pytest.mark.parametrize(
    "path",
    [
        GOLDEN / "dyck1_n3_float64.json",
        ROOT / "reports" / "precision" / "backends" / "dyck2-nested-numpy.json",
    ],
)
def test_files_without_the_key_still_read(path: Path) -> None:
    """Files written before the mark: complete, and written back byte for byte."""
    text = path.read_text(encoding="utf-8")
    res = PrecisionResult.from_json(json.loads(text))
    assert not res.interrupted and res.stop_text() is None
    assert dumps(res.to_json()) == text
