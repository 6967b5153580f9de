"""One parse of the per-length entry (``results/entry.py``) under its two readers:
``LengthRecord.from_json`` (checkpoints: exact values to merge) and ``LengthView`` (reports:
the text as written). Both see the same validated fields and refuse the same malformed
entries; why there are two readers is shown here too (a record re-prints a result file's
decimals, a view keeps them)."""

from __future__ import annotations

import json

import pytest
from paths import ROOT

from exactattn.model import load_model
from exactattn.results import LengthRecord
from exactattn.results.entry import ABSENT, LENGTH_KEYS, LengthEntry
from exactattn.results.views import ABSENT as VIEW_ABSENT
from exactattn.results.views import LengthView
from exactattn.run.check import run_check

GOLDEN = sorted((ROOT / "tests" / "golden" / "layout").glob("*.json"))


def _rows() -> list[tuple[str, list[str], dict]]:
    out = []
    for path in GOLDEN:
        data = json.loads(path.read_text(encoding="utf-8"))
        out += [(path.name, data["model_info"]["alphabet"], row) for row in data["lengths"]]
    return out


def test_both_readers_parse_through_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = LengthEntry.parse

    def counting(d: object) -> LengthEntry:
        calls.append(1)
        return real(d)

    monkeypatch.setattr(LengthEntry, "parse", staticmethod(counting))
    _, alphabet, row = _rows()[0]
    LengthRecord.from_json(row, alphabet)
    assert len(calls) == 1
    LengthView.from_json(row)
    assert len(calls) == 2
    assert ABSENT is VIEW_ABSENT  # one "absent" for both


def test_the_keys_are_the_writer_s() -> None:
    """LENGTH_KEYS is the writer's shape, in its order; every other key is an extension."""
    seen: set[str] = set()
    for _, _, row in _rows():
        known = [k for k in row if k in LENGTH_KEYS]
        assert known == [k for k in LENGTH_KEYS if k in row]  # the writer's order
        assert set(LENGTH_KEYS) - {"bounds", "tau_star"} <= set(row)
        seen |= set(row) - set(LENGTH_KEYS)
        assert LengthEntry.parse(row).extra == {k: row[k] for k in row if k not in LENGTH_KEYS}
    assert seen == {"claims", "compiler_gap_bound"}  # the RASP model's extensions


MALFORMED = {
    "disagreements": ("5", "disagreements: expected an integer or null"),
    "inputs": (True, "inputs: expected an integer or null"),
    "gamma": (0.5, "gamma: expected a string or null"),
    "first_undecided": ("ab", "first_undecided: expected a list of tokens or null"),
    "gamma_witness": ([1], "gamma_witness: expected an object or null"),
    "layers": ({"index": 0}, "layers: expected a list"),
    "reference_mismatches": ({"hard": "0", "soft": 0}, "reference_mismatches.hard"),
}


@pytest.mark.parametrize("key", MALFORMED)
def test_a_malformed_entry_is_refused_alike_by_both_readers(key: str) -> None:
    """The same message from both readers (they used to take ``"disagreements": "5"``
    as it came: the report printed it, a resumed checkpoint summed a string)."""
    _, alphabet, row = _rows()[0]
    value, message = MALFORMED[key]
    bad = {**row, key: value}
    with pytest.raises(ValueError, match=message):
        LengthView.from_json(bad)
    with pytest.raises(ValueError, match=message):
        LengthRecord.from_json(bad, alphabet)


def test_a_layer_with_a_text_index_is_refused_alike() -> None:
    _, alphabet, row = _rows()[0]
    bad = {**row, "layers": [{**row["layers"][0], "index": "0"}] + row["layers"][1:]}
    for read in (LengthView.from_json, lambda d: LengthRecord.from_json(d, alphabet)):
        with pytest.raises(ValueError, match=r"layers\[0\]\.index: expected an integer"):
            read(bad)


def test_checkpoint_entries_round_trip_exactly() -> None:
    """The record's reader: exact endpoints (m*2^e) and witnesses read back to the same bytes."""
    model = load_model(ROOT / "models" / "dyck1.json")
    for rec in run_check(model, max_n=3).lengths:
        written = rec.to_json(exact=True)
        back = LengthRecord.from_json(json.loads(json.dumps(written)), model.alphabet)
        assert json.dumps(back.to_json(exact=True)) == json.dumps(written)
        assert back == rec


def test_why_reports_read_views() -> None:
    """A record re-prints a result file's decimal enclosures (a decimal read back is a
    dyadic point rounded outward), so a report reading records would show other text; the
    view keeps the file's text."""
    changed = 0
    for _, alphabet, row in _rows():
        view = LengthView.from_json(row)
        for written, layer in zip(row["layers"], view.layers, strict=True):
            if written["error"] is not None:
                assert (layer.error.lower, layer.error.upper) == (
                    written["error"]["lower"],
                    written["error"]["upper"],
                )
        back = LengthRecord.from_json(row, alphabet).to_json()
        changed += json.dumps(back) != json.dumps(row)
    assert changed > 0


def test_an_older_entry_reads_with_absent_fields() -> None:
    """A view tolerates what older versions did not write; a record needs it."""
    _, alphabet, row = _rows()[0]
    old = {k: v for k, v in row.items() if k not in ("inputs", "invariant", "float_settled")}
    view = LengthView.from_json(old)
    assert view.inputs is ABSENT and view.invariant is ABSENT
    with pytest.raises(KeyError):
        LengthRecord.from_json(old, alphabet)
