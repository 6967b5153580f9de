"""Every stored file in reports/precision/ is read by its format's record and written back
unchanged — the older ``exactattn-precision/1`` files too.

Files written before a key existed (no ``settings.backend`` before issue 26, no
``settings.certified`` in family mode and no per-length ``soft`` before the certified family
pass) are read by the documented rules of ``results.precision.LEGACY``; any other missing
key is an error, never a guess. A folder named ``legacy`` (none today) would be exempt.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from exactattn.core.jsonio import read_json
from exactattn.model import load_model
from exactattn.results.precision import LEGACY, PRECISION_FORMAT, PrecisionResult, legacy_keys
from exactattn.results.search import SEARCH_FORMAT, SearchResult

PREC = ROOT / "reports" / "precision"
FILES = sorted(p for p in PREC.rglob("*.json") if "legacy" not in p.relative_to(PREC).parts)
NAMES = [str(p.relative_to(PREC)) for p in FILES]
# the files here that are not precision results: their own formats, read by their readers
OTHER = {
    "dyck2-unit.json": "exactattn/1",  # the bounded-embedding model the unit sweep ran
    "search-dyck2-1024-gamma.json": SEARCH_FORMAT,
    "search-dyck2-1024-margin.json": SEARCH_FORMAT,
}


def test_the_folder_is_listed() -> None:
    assert len(FILES) >= 25
    assert set(OTHER) <= set(NAMES)


@pytest.mark.parametrize("path", FILES, ids=NAMES)
def test_stored_file_is_read(path: Path) -> None:
    """Read by its record; written back, the same document (whatever its age)."""
    d = read_json(path)
    name = str(path.relative_to(PREC))
    if name in OTHER:
        assert d["format"] == OTHER[name]
        if d["format"] == SEARCH_FORMAT:
            assert SearchResult.from_json(d).to_json() == d
        else:
            assert load_model(path).name == d["name"]
        return
    assert d["format"] == PRECISION_FORMAT
    res = PrecisionResult.from_json(d)
    assert res.to_json() == d
    assert res.legacy == legacy_keys(d) <= set(LEGACY)
    if "backend" in res.legacy:
        assert (res.settings.backend, res.settings.backend_version) == ("numpy", None)
    else:
        assert res.settings.backend_version
    if "certified" in res.legacy:
        assert res.settings.certified is False and res.settings.mode == "family"
    if "soft" in res.legacy:
        assert all(e.soft is None for r in res.runs for e in r.lengths)


def test_the_old_layouts_are_there() -> None:
    """The stored files hold both older layouts (so the rules above are exercised). Every
    stored file predates ``model_sha256`` (issue 41; tests/golden/precision holds the current
    layout)."""
    seen = {
        PrecisionResult.from_json(read_json(p)).legacy
        for p, n in zip(FILES, NAMES, strict=True)
        if n not in OTHER
    }
    old = frozenset({"model_sha256"})
    assert {old, old | {"backend"}, frozenset(LEGACY)} <= seen


def _current() -> dict[str, Any]:
    """A file of the current layout (the stored files under reports/precision/ predate
    ``model_sha256``; the golden file is what `precision --json` writes now)."""
    return read_json(ROOT / "tests" / "golden" / "precision" / "dyck1_n3_float64.json")


def _family_without_certified() -> dict[str, Any]:
    return read_json(PREC / "dyck2-families.json")


def test_current_files_have_no_legacy_keys() -> None:
    assert PrecisionResult.from_json(_current()).legacy == frozenset()


def _no_backend(d: dict[str, Any]) -> None:
    del d["settings"]["backend"]


def _no_certified_in_inputs_mode(d: dict[str, Any]) -> None:
    d["settings"]["mode"] = "inputs"
    del d["settings"]["certified"]


def _soft_in_some_lengths(d: dict[str, Any]) -> None:
    del d["runs"][0]["lengths"][0]["soft"]


@pytest.mark.parametrize(
    "spoil, message",
    [
        (_no_backend, "backend_version without backend"),
        (_no_certified_in_inputs_mode, "no certified in mode 'inputs'"),
        (_soft_in_some_lengths, "soft: in some lengths only"),
    ],
)
def test_other_missing_keys_are_errors(spoil: Any, message: str) -> None:
    """Only the layouts earlier writers left are read: a key missing otherwise is an error."""
    d = copy.deepcopy(_current())
    spoil(d)
    with pytest.raises(ValueError, match=message):
        PrecisionResult.from_json(d)


def test_missing_certified_with_a_certified_error_is_an_error() -> None:
    """No ``certified`` means no certified pass ran: a recorded softmax error contradicts it."""
    d = copy.deepcopy(_family_without_certified())
    assert PrecisionResult.from_json(d).settings.certified is False
    d["runs"][0]["lengths"][0]["softmax_error"] = {"lower": "0", "upper": "1"}
    with pytest.raises(ValueError, match="certified error is recorded"):
        PrecisionResult.from_json(d)


def test_legacy_backend_is_numpy_and_not_written_back() -> None:
    d = _current()
    old = copy.deepcopy(d)
    del old["settings"]["backend"], old["settings"]["backend_version"]
    res = PrecisionResult.from_json(old)
    assert res.settings.backend == "numpy" and res.settings.backend_version is None
    assert res.to_json() == old
    assert "backend" not in res.to_json()["settings"]
    assert PrecisionResult.from_json(d).to_json() == d
