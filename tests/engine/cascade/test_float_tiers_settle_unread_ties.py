"""A word whose float read-out is undecided only at hard ties nobody reads is settled by the
float tiers (engine/cascade/chain.py ``_free_ties``, measure.tie_reads_unreported), and the
check's result is the one arb gives it, to the byte, but for the two keys that say which
path ran (``float_settled``, ``precision_bits``).

The soft side of a hard tie is reported, not required: it enters the record only as the tie
witness's ``soft`` and where the reference defines the tied position. ``lib_shift_by`` at
n = 2 and 4 has such words below another word's certified error (they move to the floats);
``lib_sort_unique``'s 18 tie words at n = 4 have the largest error of the length in layers 0
and 1, where arb's enclosure is the reported lower end: they stay with arb (settling them
too changes that lower end in its 12th digit, which the test catches)."""

from __future__ import annotations

import json

import pytest
from paths import ROOT

from exactattn import model_from_dict, run_check
from exactattn.engine.cascade import chain
from exactattn.importers.tracr import import_tracr

LIB = ROOT / "tests" / "data" / "tracr_lib"
PATH_KEYS = ("float_settled", "precision_bits")


def _model(name: str):
    return model_from_dict(import_tracr(LIB / f"{name}.npz", LIB / f"{name}.json"))


def _without_path_keys(res: dict) -> str:
    res = json.loads(json.dumps(res))
    for e in res["lengths"]:
        for k in PATH_KEYS:
            e.pop(k)
    return json.dumps(res, sort_keys=True)


@pytest.mark.parametrize("name, n", [("lib_shift_by", 4), ("lib_sort_unique", 4)])
def test_unread_ties_settled_with_arbs_record(name: str, n: int, monkeypatch) -> None:
    model = _model(name)
    new = run_check(model, max_n=n).to_json()
    monkeypatch.setattr(chain, "_free_ties", lambda cm, acc: None)  # tie words to arb
    old = run_check(model, max_n=n).to_json()
    assert _without_path_keys(new) == _without_path_keys(old)
    got = [e["float_settled"] for e in new["lengths"]]
    was = [e["float_settled"] for e in old["lengths"]]
    inputs = [e["inputs"] for e in new["lengths"]]
    if name == "lib_shift_by":
        # n = 2 and 4: every word by the floats now (2 and 6 tie words left arb)
        assert was == [2, 2, 8, 10] and got == inputs == [2, 4, 8, 16]
        assert [e["precision_bits"] for e in new["lengths"]] == [0, 0, 0, 0]
    else:
        assert got == was == [3, 9, 27, 63]  # the 18 stay with arb (the docstring)


def test_tie_witness_and_rule_are_needed(monkeypatch) -> None:
    """Mutations: settling tie words that are merely tight (not below another word's lower
    end) changes lib_sort_unique's reported error; the rule as it is does not."""
    model = _model("lib_sort_unique")
    monkeypatch.setattr(chain, "_free_ties", lambda cm, acc: None)
    old = _without_path_keys(run_check(model, max_n=4, min_n=4).to_json())
    monkeypatch.undo()
    real = chain.settle_dominated

    def permissive(fb, settled, under, lower, known=(), free=None):
        out = real(fb, settled, under, lower, known, free)
        if free is not None and fb.tie is not None:
            out = out | (fb.tie & free & ~under & fb.tight.all(axis=1))
        return out

    monkeypatch.setattr(chain, "settle_dominated", permissive)
    bad = run_check(model, max_n=4, min_n=4).to_json()
    assert bad["lengths"][0]["float_settled"] == 81
    assert _without_path_keys(bad) != old  # layer 0's lower end: arb's → float64's


def test_witness_and_defined_positions_stay_with_arb() -> None:
    """tie_reads_unreported: every tied word but the record's tie witness (the first, in rank
    order: lib_sort_unique's 1111) and but a word whose reference defines a tied position."""
    from exactattn.engine.hard import CompiledModel, run_hard
    from exactattn.engine.measure import LengthAccumulator
    from exactattn.inputs import words_of_length
    from exactattn.model.reference import Oracle

    model = _model("lib_sort_unique")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 4))
    acc = LengthAccumulator(model, 4, Oracle(model.reference, model.alphabet), len(model.layers))
    acc.add_hard(run_hard(cm, words[:40], 4), first_rank=0)
    free = acc.tie_reads_unreported()
    tied = acc.ties.inputs
    assert acc.ties.witness is not None and acc.ties.witness.key[0] == 0
    assert tied == 40 and not free[0] and free[1:].all()
    acc.add_hard(run_hard(cm, words[40:], 4), first_rank=40)  # the witness is in batch 1
    assert acc.tie_reads_unreported().all()
    # a reference value at a tied position is read (the soft comparison): that word stays
    acc._expected[3] = ["1", "1", "1", "1"]  # noqa: SLF001 (the oracle defines none here)
    free = acc.tie_reads_unreported()
    assert not free[3] and free.sum() == 40
