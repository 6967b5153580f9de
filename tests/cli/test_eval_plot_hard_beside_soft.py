"""``exactattn eval MODEL WORD --plot heads.png`` (issue 39): every head's attention weights,
hard beside soft, in one figure; user strings are literal text in it."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn import evaluate, load_model, model_from_dict
from exactattn.cli import main
from exactattn.report.attention import attention_figure, heads_of


def test_plot_is_written_with_every_head(tmp_path: Path) -> None:
    out = tmp_path / "heads.png"
    res = CliRunner().invoke(
        main, ["eval", str(ROOT / "models/dyck1.json"), "(())", "--plot", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ev = evaluate(load_model(ROOT / "models/dyck1.json"), list("(())"))
    heads = heads_of(ev)
    assert [(h.layer, h.head) for h in heads] == [(0, 0), (1, 0), (2, 0), (4, 0)]
    # the hard panel is the exact average-hard weights: query 3 (the first ')') of layer 0
    # averages over BOS and the two '('
    assert heads[0].hard[3][:4] == (Fraction(1, 3),) * 3 + (Fraction(0),)
    # the soft panel is the certified weights' midpoints: each row sums to 1 (or 0: no key)
    for h in heads:
        for row in h.soft:
            assert abs(sum(row) - 1) < 1e-9 or sum(row) == 0


def test_plot_refuses_an_unknown_type_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "heads.gif"
    res = CliRunner().invoke(
        main, ["eval", str(ROOT / "models/dyck1.json"), "()", "--plot", str(out)]
    )
    assert res.exit_code == 2
    assert "unknown figure type '.gif'" in res.output and not out.exists()


@pytest.mark.parametrize("suffix", ["svg", "pdf"])
def test_user_strings_are_literal_in_the_figure(tmp_path: Path, suffix: str) -> None:
    """A token '$\\frac{$' and a model name '$\\sqrt{$' are broken mathtext: matplotlib
    refuses to draw them unless they are made literal text, as every user string is."""
    d = json.loads((ROOT / "exactattn/examples/mean_a_position.json").read_text("utf-8"))
    tok = "$\\frac{$"
    d["name"] = "m$\\sqrt{$"
    d["alphabet"] = [tok, "b"]
    d["embedding"]["token"] = {
        tok: [1, 1, 0, 0],
        "b": [0, 1, 0, 0],
        "<s>": [0, 1, 0, 0],
    }
    ev = evaluate(model_from_dict(d), [tok, "b"])
    path = attention_figure(ev, tmp_path / f"h.{suffix}")
    assert len(path.read_bytes()) > 1000
