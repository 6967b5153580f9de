"""The tracr metadata (.json beside the .npz) refuses a repeated key, as model files do: JSON
readers disagree on which one wins, and the importer silently took the last."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import TESTS

from exactattn.cli import main
from exactattn.core.errors import ModelError
from exactattn.importers.tracr import import_tracr

TRACR = TESTS / "data" / "tracr"


def _twice(tmp_path: Path, key: str, value: str) -> Path:
    """reverse.json with ``"key": value,`` written again just before the first ``"key"``."""
    text = (TRACR / "reverse.json").read_text()
    i = text.index(f'"{key}"')
    js = tmp_path / "reverse.json"
    js.write_text(text[:i] + f'"{key}": {value}, ' + text[i:])
    return js


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("num_layers", "7", "reverse.json: config.num_layers"),  # nested, a different value
        ("vocab", '["a", "b", "c"]', "reverse.json: vocab"),  # top level, the same value
    ],
)
def test_repeated_key_is_refused(tmp_path: Path, key: str, value: str, path: str) -> None:
    js = _twice(tmp_path, key, value)
    with pytest.raises(ModelError) as info:
        import_tracr(TRACR / "reverse.npz", js)
    assert info.value.path == path
    assert str(info.value) == (
        f"{path}: the key '{key}' appears twice in one object (fix: keep one of them (JSON "
        "readers disagree on which one wins))"
    )


def test_repeated_key_exits_2_from_the_cli(tmp_path: Path) -> None:
    js = _twice(tmp_path, "num_layers", "7")
    out = tmp_path / "m.json"
    args = ["import", "tracr", str(TRACR / "reverse.npz"), str(js), "-o", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: reverse.json: config.num_layers: the key 'num_layers'")
    assert res.output.count("\n") == 1 and "(fix: " in res.output
    assert not out.exists()


def test_other_tree_limits_name_the_file_too(tmp_path: Path) -> None:
    """check_tree's other refusals (here a key over 256 characters) get the file's name."""
    js = _twice(tmp_path, "vocab", "1")
    js.write_text(js.read_text().replace('"vocab": 1, ', '"' + "k" * 300 + '": 1, ', 1))
    with pytest.raises(ModelError) as info:
        import_tracr(TRACR / "reverse.npz", js)
    assert info.value.path.startswith("reverse.json: kkkk") and "limit of 256" in str(info.value)
