"""torch and transformer-lens are optional extras (issue 26): the core never imports them, and
without them the export commands and torch backends say how to install them (exit 2).
These tests run with or without the extras."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner
from paths import ROOT

import exactattn.export as export
from exactattn.cli import main

MODELS = ROOT / "models"


def test_core_never_imports_torch() -> None:
    code = (
        "import sys, exactattn, exactattn.cli, exactattn.run.precision, exactattn.export, "
        "exactattn.cli.export, exactattn.run.check\n"
        "print(sorted(m for m in ('torch', 'transformer_lens') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["export", "torch", str(MODELS / "dyck1.json"), "-o", "x.pt"], "torch"),
        (
            ["export", "transformer-lens", str(MODELS / "dyck1.json"), "-o", "x.pt"],
            "transformer-lens",
        ),
        (
            ["precision", str(MODELS / "dyck1.json"), "--max-n", "2", "--backend", "torch-eager"],
            "torch",
        ),
    ],
)
@pytest.mark.parametrize("missing", [{"torch", "transformer_lens"}, {"transformer_lens"}])
def test_missing_extra_is_exit_2_with_the_install_command(
    monkeypatch, tmp_path, args, extra, missing
) -> None:
    """The message names the extra that brings what is missing, with the README's command
    (an editable install of the checkout: exactattn is not on a package index)."""
    monkeypatch.setattr(export, "have", lambda module: module not in missing)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    if extra == "torch" and "torch" not in missing:
        return  # torch is there: those commands run (the extra tests cover them)
    assert r.exit_code == 2, r.output
    assert f'pip install -e ".[{extra}]"' in r.output
    assert "exactattn[" not in r.output.replace('".[', "")  # no index-style install
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.pt").exists()


def test_no_extra_is_pinned_to_one_version() -> None:
    """Extras coexist with the user's stack: lower bounds (and caps), never ``==``: an exact
    torch pin would replace a researcher's own (CUDA) build."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    data = tomllib.loads((MODELS.parent / "pyproject.toml").read_text("utf-8"))
    extras = data["project"]["optional-dependencies"]
    assert {"torch", "transformer-lens"} <= set(extras)
    for name, reqs in extras.items():
        for req in reqs:
            assert "==" not in req and "===" not in req, (name, req)
    assert any(r.startswith("torch>=") for r in extras["torch"])
    assert any(r.startswith("transformer-lens>=") for r in extras["transformer-lens"])
