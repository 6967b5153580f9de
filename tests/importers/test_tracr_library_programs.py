"""tracr's whole program library as a regression suite (issue 17).

Every program of ``tracr/compiler/lib.py`` and of tracr's integration test cases, compiled by
``tests/data/tracr_lib/make_fixtures.py`` (tracr commit in every fixture's metadata), is
imported with :func:`exactattn.importers.tracr.import_tracr` and checked against RASP's own
outputs, which tracr's interpreter computed independently of the compiled weights:

* default run: the hard meaning equals RASP at every defined position of every input up to
  the program's ``max_seq_len``; hard argmax ties occur only where RASP is undefined; at small
  n, every position where the hard meaning decides is decided the same way by the soft meaning
  (certified), value outputs stay within tolerance, and ε ≤ 1 holds before the last layer;
* ``-m slow``: the same soft checks on every input up to ``max_seq_len``.

Programs where RASP is undefined somewhere (``shift_by``, ``detect_pattern``, ``sort_unique``
with duplicate keys) compile to an all-zero output there: a hard tie, not a flip.  Their
verdict test checks that hard ties are reported apart from flips (issue 17).
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from functools import cache
from typing import Any

import pytest
from paths import TESTS

from exactattn import evaluate, model_from_dict, run_check
from exactattn.importers.tracr import import_tracr
from exactattn.model import Model

DATA = TESTS / "data" / "tracr_lib"
TRACR_COMMIT = "9ce2b8c82b6ba10e62e86cf6f390e7536d4fd2cd"

LIB = [
    "lib_length",
    "lib_reverse",
    "lib_pair_balance",
    "lib_shuffle_dyck1",
    "lib_shuffle_dyck2",
    "lib_hist",
    "lib_sort_unique",
    "lib_sort",
    "lib_sort_freq",
    "lib_frac_prevs",
    "lib_shift_by",
    "lib_detect_pattern",
    "lib_count_less_freq",
    "lib_count",
    "lib_nary_sequencemap",
]
UNIVERSAL = [
    "frac_prevs_1",
    "frac_prevs_2",
    "frac_prevs_3",
    "shift_by_one",
    "shift_by_two",
    "detect_pattern_a",
    "detect_pattern_ab",
    "detect_pattern_abc",
]
TEST_CASES = [f"tc_{u}" for u in UNIVERSAL] + [
    "tc_reverse",
    "tc_length_categorical",
    "tc_length_numerical",
    "tc_pair_balance",
    "tc_shuffle_dyck2",
    "tc_shuffle_dyck3",
    "tc_hist",
    "tc_sort_unique_1",
    "tc_sort_unique_2",
    "tc_sort_1",
    "tc_sort_2",
    "tc_sort_freq",
    "tc_count_less_freq_categorical",
    "tc_count_less_freq_numerical",
    "tc_count",
    "tc_nary_sequencemap_1",
    "tc_nary_sequencemap_2",
]
CAUSAL = [f"causal_{u}" for u in UNIVERSAL] + ["causal_selector_width"]
OTHER = ["it_map", "it_sequence_map", "it_select_aggregate", "single_label"]
NAMES = LIB + TEST_CASES + CAUSAL + OTHER

# Programs whose RASP output is undefined (null) somewhere: there tracr writes no output
# value, so the hard argmax is a tie.
UNDEFINED = {
    "lib_shift_by",
    "lib_detect_pattern",
    "lib_sort_unique",
    "tc_sort_unique_1",
    *(
        f"{p}_{u}"
        for p in ("tc", "causal")
        for u in ("shift_by_one", "shift_by_two", "detect_pattern_ab", "detect_pattern_abc")
    ),
}

SOFT_WORDS = 40
"""The default run checks the soft meaning on all inputs of length 1..n for the largest n
with at most this many inputs (n = 4 for 2 tokens, 3 for 3, 2 for 4 to 6; 3 for shift_by(2))."""


@cache
def meta(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


@cache
def imported(name: str) -> dict[str, Any]:
    """The imported model dict (cached: tests must not mutate it)."""
    return import_tracr(DATA / f"{name}.npz", DATA / f"{name}.json")


@cache
def model(name: str) -> Model:
    return model_from_dict(imported(name))


def reference(name: str) -> dict[tuple[str, ...], list[Any]]:
    """RASP's outputs as the importer converted them (labels, or exact numbers)."""
    return {tuple(c["input"]): c["output"] for c in imported(name)["reference"]["cases"]}


def soft_n(name: str) -> int:
    k = len(imported(name)["alphabet"])
    n = 3 if "shift_by_two" in name else 1  # below 3, shift_by(2) is undefined everywhere
    while n < imported(name)["max_length"] and sum(k**i for i in range(1, n + 2)) <= SOFT_WORDS:
        n += 1
    return n


def nulls_by_length(name: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in meta(name)["cases"]:
        n = len(c["input"])
        out[n] = out.get(n, 0) + sum(v is None for v in c["expected"])
    return out


# ---------------------------------------------------------------------------
# the fixture set


def test_every_program_is_there_and_small() -> None:
    on_disk = {p.stem for p in DATA.glob("*.npz")}
    assert on_disk == set(NAMES)
    assert {p.stem for p in DATA.glob("*.json")} == set(NAMES)
    total = sum(p.stat().st_size for p in DATA.iterdir())
    assert total < 4_000_000, total
    for name in NAMES:
        m = meta(name)
        assert m["program"] == name
        assert m["tracr_commit"] == TRACR_COMMIT
        assert m["config"]["causal"] is name.startswith("causal_")
        k, n = len(m["vocab"]), m["max_seq_len"]
        assert len(m["cases"]) == sum(k**i for i in range(1, n + 1))  # every input
    assert {n for n in NAMES if any(nulls_by_length(n).values())} == UNDEFINED


# ---------------------------------------------------------------------------
# the hard meaning equals RASP at every defined position (every input, every length)


@pytest.mark.parametrize("name", NAMES)
def test_hard_meaning_equals_rasp(name: str) -> None:
    m = model(name)
    res = run_check(m, max_n=m.max_length, hard_only=True).to_json()
    rows = res["lengths"]
    assert [r["n"] for r in rows] == list(range(1, m.max_length + 1))
    nulls = nulls_by_length(name)
    for r in rows:
        assert r["inputs"] == len(m.alphabet) ** r["n"]
        assert r["reference_mismatches"]["hard"] == 0, r["first_reference_mismatch"]
        assert r["reference_undefined"] == nulls.get(r["n"], 0)
    positions = sum(len(c["expected"]) for c in meta(name)["cases"])
    assert sum(nulls.values()) < positions  # something is compared


# ---------------------------------------------------------------------------
# the soft meaning at small n, position by position


def soft_checks(name: str, max_n: int) -> dict[str, int]:
    """Check every input of length 1..max_n with `evaluate`; return counts.

    Asserts: hard ties exactly where RASP is undefined; where the hard meaning decides, the
    soft meaning decides the same label (value outputs: within tolerance); ε ≤ 1 before the
    last layer (certified upper bounds).
    """
    m, ref = model(name), reference(name)
    counts = {"inputs": 0, "decided": 0, "hard_ties": 0, "soft_at_ties": 0}
    for n in range(1, max_n + 1):
        for word in itertools.product(m.alphabet, repeat=n):
            ev = evaluate(m, word)
            exp = ref[word]
            counts["inputs"] += 1
            for _lo, hi in ev.errors[:-1]:
                assert hi <= 1, (word, hi)  # ε ≤ 1 (arb: True only when certified)
            if m.output.kind == "value":
                assert ev.output_soft.within_tol is True, word
                for row, e in zip(ev.output_hard, exp, strict=True):
                    assert e is None or row == [Fraction(e)], (word, ev.output_hard, exp)
                counts["decided"] += n
                continue
            soft = ev.output_soft.value
            for p, (h, s, e) in enumerate(zip(ev.output_hard, soft, exp, strict=True)):
                if h is None:
                    assert e is None, (word, p, "hard tie at a defined position")
                    counts["hard_ties"] += 1
                    counts["soft_at_ties"] += s is not None
                else:
                    assert e is not None, (word, p, "RASP undefined, yet tracr writes an output")
                    assert h == e, (word, p, h, e)
                    assert s == h, (word, p, "soft", s, "hard", h)
                    counts["decided"] += 1
    return counts


def check_clean(name: str, max_n: int) -> None:
    """The checker's own per-length summary: nothing to report (programs without ties).

    ``disagreements == 0`` means the soft labels equal the hard labels at every position of
    every input (value outputs: within tolerance), and ``undecided == 0`` that each was
    certified.
    """
    res = run_check(model(name), max_n=max_n)
    rows = res.to_json()["lengths"]
    assert [r["n"] for r in rows] == list(range(1, max_n + 1))
    for r in rows:
        assert r["invariant"] == "holds"
        assert r["disagreements"] == 0, r["first_disagreement"]
        assert r["undecided"] == 0, r["first_undecided"]
        assert r["reference_mismatches"] == {"hard": 0, "soft": 0}
    assert res.exit_code() == 0


@pytest.mark.parametrize("name", NAMES)
def test_soft_meaning_at_small_n(name: str) -> None:
    n = soft_n(name)
    if name not in UNDEFINED:
        check_clean(name, n)
        return
    c = soft_checks(name, n)
    assert c["inputs"] == sum(len(model(name).alphabet) ** i for i in range(1, n + 1))
    assert c["decided"] > 0 and c["hard_ties"] > 0


def test_undefined_positions_are_hard_ties() -> None:
    """shift_by(1) on 'ab': RASP gives [None, 'a']; tracr's output at position 1 is all zero."""
    ev = evaluate(model("lib_shift_by"), ["a", "b"])
    assert ev.output_hard == [None, "a"]
    assert reference("lib_shift_by")[("a", "b")] == [None, "a"]
    ev = evaluate(model("tc_detect_pattern_ab"), ["a", "b", "a"])
    assert ev.output_hard == [None, "True", "False"]
    ev = evaluate(model("tc_sort_unique_1"), ["2", "2"])
    assert reference("tc_sort_unique_1")[("2", "2")] == ["2", None]
    assert ev.output_hard == ["2", None]


@pytest.mark.parametrize("name", sorted(UNDEFINED))
def test_undefined_output_programs_are_clean(name: str) -> None:
    """Hard ties where RASP is undefined are not flips: the verdict is clean (exit 0), and
    every hard tie is reported, each one where the reference is undefined."""
    res = run_check(model(name), max_n=soft_n(name))
    assert res.exit_code() == 0, res.verdict()
    data = res.to_json()
    ties = [r["hard_ties"] for r in data["lengths"]]
    assert sum(t["positions"] for t in ties) > 0
    for r, t in zip(data["lengths"], ties, strict=True):
        assert t["expected"] == t["positions"] == r["reference_undefined"]
        assert r["disagreements"] == 0 and r["undecided"] == 0


@pytest.mark.parametrize("name", ["single_label", "it_select_aggregate"])
def test_single_label_output_has_no_margin(name: str) -> None:
    assert imported(name)["output"]["labels"] == ["1"]
    res = run_check(model(name), max_n=2).to_json()
    for r in res["lengths"]:
        assert r["min_margin"] is None, r["min_margin"]


# ---------------------------------------------------------------------------
# full lengths


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_soft_meaning_up_to_max_seq_len(name: str) -> None:
    m = model(name)
    if name not in UNDEFINED:
        check_clean(name, m.max_length)
        return
    c = soft_checks(name, m.max_length)
    assert c["inputs"] == len(meta(name)["cases"])
    for r in run_check(m, max_n=m.max_length).to_json()["lengths"]:
        assert r["invariant"] == "holds"
        assert r["reference_mismatches"]["hard"] == 0
