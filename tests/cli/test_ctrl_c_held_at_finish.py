"""``precision``, ``search`` and ``certify`` under a Ctrl-C injected at exact points: the rule
``check`` follows (tests/fuzz/test_signals_during_jobs.py, end) with the same hold (``FinishHold``).

Before the work is done a Ctrl-C is an interrupt: exit 130; ``precision`` keeps the lengths
saved so far, ``search`` and ``certify`` write nothing. Once it is done (every length run, the
answer found), the complete result wins: the file is written whole, the exit follows the
result and one line says the interrupt was ignored.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from paths import ROOT

import exactattn.cli.certify as certify_module
import exactattn.cli.extra as extra_module
import exactattn.run.search as search_module
from exactattn.cli import main
from exactattn.model import load_model
from exactattn.run.precision import sweep_family, sweep_words

DYCK1 = ROOT / "models" / "dyck1.json"
PRECISION = ["precision", str(DYCK1), "--max-n", "3", "--dtype", "float64"]
SEARCH = ["search", str(DYCK1), "--n", "4", "--objective", "margin", "--budget", "5"]
CERTIFY = ["certify", str(DYCK1), "--n", "4", "--tau", "1"]  # τ = 1: not certified
IGNORED = "interrupt ignored:"


def _ctrl_c() -> None:
    """Ctrl-C to this process, as a terminal sends it (delivered before the next bytecode)."""
    os.kill(os.getpid(), signal.SIGINT)


def _run(args: list[str], out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(main, [*args, "--json", str(out)])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    assert "Traceback" not in res.output, res.output
    return res.exit_code, res.output


def _writes(monkeypatch: pytest.MonkeyPatch, module: Any, at: Callable[[int], bool]) -> None:
    """The module's ``write_json_atomic``, with a Ctrl-C just after the k-th write if ``at(k)``."""
    real = module.write_json_atomic
    count = [0]

    def write(path: Path, data: dict) -> None:
        real(path, data)
        count[0] += 1
        if at(count[0]):
            _ctrl_c()

    monkeypatch.setattr(module, "write_json_atomic", write)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, bytes]]:
    """Each command's uninterrupted exit code and file."""
    tmp = tmp_path_factory.mktemp("clean")
    out = {}
    for name, args in (("precision", PRECISION), ("search", SEARCH), ("certify", CERTIFY)):
        code, output = _run(args, tmp / f"{name}.json")
        assert IGNORED not in output
        out[name] = (code, (tmp / f"{name}.json").read_bytes())
    assert out["precision"][0] == 0 and out["certify"][0] == 1  # dyck1: no flip; τ = 1 too large
    return out


# --- precision: 3 lengths, a save after each (writes 1–3), then the final save (write 4) ---


@pytest.mark.parametrize("k", [3, 4])
def test_precision_ctrl_c_in_the_last_saves_keeps_the_complete_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean: dict, k: int
) -> None:
    """The last length's save (3) and the final save (4) come after every length is run."""
    _writes(monkeypatch, extra_module, lambda i: i == k)
    code, output = _run(PRECISION, tmp_path / "p.json")
    assert (code, (tmp_path / "p.json").read_bytes()) == clean["precision"], output
    assert "interrupt ignored: every length was already run" in output
    assert "no flip at the lengths run" in output  # the table too


def test_precision_ctrl_c_while_printing_keeps_the_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean: dict
) -> None:
    real = extra_module.print_precision

    def printing(runs: Any) -> None:
        _ctrl_c()
        real(runs)

    monkeypatch.setattr(extra_module, "print_precision", printing)
    code, output = _run(PRECISION, tmp_path / "p.json")
    assert (code, (tmp_path / "p.json").read_bytes()) == clean["precision"], output
    assert IGNORED in output


def test_precision_ctrl_c_before_the_last_length_is_exit_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the second length's save: exit 130, the file keeps the two finished lengths."""
    _writes(monkeypatch, extra_module, lambda i: i == 2)
    code, output = _run(PRECISION, tmp_path / "p.json")
    assert code == 130 and "interrupted" in output and IGNORED not in output, output
    data = json.loads((tmp_path / "p.json").read_text())
    assert [e["n"] for e in data["lengths"]] == [1, 2]


@pytest.mark.parametrize("families", [False, True])
def test_sweeps_call_on_complete_once_before_the_last_save(families: bool) -> None:
    """The hold starts once every length is run and before that last length is saved."""
    model = load_model(DYCK1)
    events: list[str] = []

    def on_length(runs: list) -> None:
        events.append(f"save {max(e.n for e in runs[0].lengths)}")

    kw: dict[str, Any] = {
        "certified": False,
        "on_length": on_length,
        "on_complete": lambda: events.append("complete"),
    }
    taus = [("model", None)]
    if families:
        sweep_family(model, ["nested"], [2, 4], ["float64"], taus, **kw)
        assert events == ["save 2", "complete", "save 4"]
    else:
        words = {n: [("(",) * n] for n in (1, 2)}
        sweep_words(model, words, ["float64"], taus, **kw)
        assert events == ["save 1", "complete", "save 2"]


# --- search and certify: the work, then one write ---


def _late(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    """``module.name`` runs to its end, then a Ctrl-C arrives before it returns."""
    real = getattr(module, name)

    def late(*a: Any, **k: Any) -> Any:
        res = real(*a, **k)
        _ctrl_c()
        return res

    monkeypatch.setattr(module, name, late)


@pytest.mark.parametrize(
    ("command", "args", "module"),
    [("search", SEARCH, extra_module), ("certify", CERTIFY, certify_module)],
)
def test_ctrl_c_in_the_final_save_keeps_the_answer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean: dict,
    command: str,
    args: list,
    module: Any,
) -> None:
    _writes(monkeypatch, module, lambda i: i == 1)
    code, output = _run(args, tmp_path / "r.json")
    assert (code, (tmp_path / "r.json").read_bytes()) == clean[command], output
    assert f"{IGNORED} the {'search' if command == 'search' else 'answer'}" in output


@pytest.mark.parametrize(
    ("args", "module", "name"),
    [(SEARCH, search_module, "run_search"), (CERTIFY, certify_module, "certificate")],
)
def test_ctrl_c_before_the_answer_is_exit_130_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list, module: Any, name: str
) -> None:
    _late(monkeypatch, module, name)
    code, output = _run(args, tmp_path / "r.json")
    assert code == 130 and "interrupted" in output and IGNORED not in output, output
    assert not (tmp_path / "r.json").exists()


def test_certify_range_ctrl_c_in_the_final_save_keeps_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _writes(monkeypatch, certify_module, lambda i: i == 1)
    code, output = _run(
        ["certify", str(DYCK1), "--range", "1..3", "--tau", "1"], tmp_path / "r.json"
    )
    assert code == 1 and "not certified already at n = 1" in output, output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["first_failure"]["n"] == 1
    assert IGNORED in output
