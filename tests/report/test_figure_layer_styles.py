"""Every layer of the error figure is drawn distinctly (the colours cycled after 8 layers, so
layers 1 and 9 looked the same). Read from the artists, not from pixels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from exactattn.report import figures
from exactattn.report.data import load


def _key(line: Any) -> tuple:
    """What tells a line apart: colour, marker, and the dash pattern it is drawn with."""
    return (
        line.get_color(),
        line.get_marker(),
        repr(line.get_linestyle()),
        repr(line._dash_pattern),
    )


def test_a_deep_model_draws_every_layer_distinctly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled RASP Dyck-2 result: 17 layers, errors and proved bounds at n = 1..9."""
    result = json.loads((ROOT / "reports" / "rasp" / "rasp_dyck2-max-n-9.json").read_text())
    data = load(result)
    assert len(data.layers) >= 12
    drawn: list[Any] = []
    monkeypatch.setattr(figures, "_save", lambda fig, ax, path: drawn.append(ax) or path)
    figures.error_figure(data, Path("unused.png"))
    (ax,) = drawn
    errors = [ln for ln in ax.get_lines() if "(upper end)" in str(ln.get_label())]
    bounds = [ln for ln in ax.get_lines() if "proved bound" in str(ln.get_label())]
    assert len(errors) >= 12 and len(bounds) >= 12  # layers 0 and 1 are exactly 0 (markers)
    for lines in (errors, bounds):
        keys = [_key(ln) for ln in lines]
        assert len(set(keys)) == len(keys), keys
    by_layer = {str(ln.get_label()).split()[0]: ln for ln in errors}
    third, eleventh = by_layer["L2"], by_layer["L10"]
    assert third.get_color() == eleventh.get_color()  # the 8 colours still cycle …
    assert third.get_marker() != eleventh.get_marker()  # … but the marker tells them apart
    # layers 1-8 keep the old look: filled circles on a solid line, bounds open squares dashed
    assert (third.get_marker(), third.get_linestyle()) == ("o", "-")
    assert (bounds[0].get_marker(), bounds[0].get_linestyle()) == ("s", "--")


def test_styles_are_distinct_for_any_number_of_layers() -> None:
    """Up to the 1,024-layer limit and beyond: no two layers share a (colour, marker, dashes)."""
    styles = [figures.layer_style(k) for k in range(3000)]
    keys = [(s.color, s.marker, repr(s.linestyle)) for s in styles]
    assert len(set(keys)) == len(keys)
    bound_keys = [(s.color, s.bound_marker, repr(s.bound_linestyle)) for s in styles]
    assert len(set(bound_keys)) == len(bound_keys)


def test_exact_zeros_of_layers_sharing_a_colour_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Layers 1 and 9 (indices 0 and 8) both exactly 0: their bottom-edge markers differ."""
    result = json.loads((ROOT / "reports" / "rasp" / "rasp_dyck2-max-n-9.json").read_text())
    for entry in result["lengths"]:
        entry["layers"][8]["error"] = {"lower": "0", "upper": "0"}
    marks: list[tuple[str, str | None, str]] = []
    edge = figures._LogAxis.edge_marker

    def record(self: Any, xs: list, top: bool, label: str, color: str, marker: Any = None) -> None:
        if not top:
            marks.append((color, marker, label))
        edge(self, xs, top, label, color, marker)

    monkeypatch.setattr(figures._LogAxis, "edge_marker", record)
    monkeypatch.setattr(figures, "_save", lambda fig, ax, path: path)
    figures.error_figure(load(result), Path("unused.png"))
    assert len(marks) == 3  # layers 0, 1 and 8
    assert marks[0][0] == marks[2][0] and marks[0][1] != marks[2][1], marks
    assert "colour and marker" in marks[0][2]
