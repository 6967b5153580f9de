"""torch and transformer-lens are optional extras (issue 26): the core never imports them, and
without them the export commands and torch backends say how to install them (exit 2).
These tests run with or without the extras."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import exactattn.export as export
from exactattn.cli import main

MODELS = Path(__file__).resolve().parent.parent / "models"


def test_core_never_imports_torch() -> None:
    code = (
        "import sys, exactattn, exactattn.cli, exactattn.run.precision, exactattn.export, "
        "exactattn.cli.export, exactattn.run.check\n"
        "print(sorted(m for m in ('torch', 'transformer_lens') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "args",
    [
        ["export", "torch", str(MODELS / "dyck1.json"), "-o", "x.pt"],
        ["export", "transformer-lens", str(MODELS / "dyck1.json"), "-o", "x.pt"],
        ["precision", str(MODELS / "dyck1.json"), "--max-n", "2", "--backend", "torch-eager"],
    ],
)
def test_missing_extra_is_exit_2_with_the_install_command(monkeypatch, tmp_path, args) -> None:
    monkeypatch.setattr(export, "have", lambda module: False)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "pip install 'exactattn[torch]'" in r.output  # torch is required first
    assert not (tmp_path / "x.pt").exists()
