"""Induction heads: the direct implementation, the formulas, and the compiled models."""

from __future__ import annotations

import itertools
import json
import math
from decimal import Decimal

import pytest

from exactattn import model_from_dict, run_check
from exactattn.constructions.induction import (
    build_induction,
    catalog,
    default_label,
    induction_formulas,
    induction_labels,
)
from exactattn.constructions.ltl import SCHEMES
from exactattn.logic.ltl import truth_values

ABC = ("a", "b", "c")
BOUND = Decimal(math.exp(-3)) * Decimal("1.000001")
ZERO = Decimal("1e-30")


@pytest.mark.parametrize(
    ("word", "hops", "labels"),
    [
        ("abab", 1, ["none", "none", "b", "a"]),
        ("abab", 2, ["none", "none", "none", "b"]),
        ("aa", 1, ["none", "a"]),
        ("aa", 2, ["none", "a"]),
        ("abcab", 1, ["none", "none", "none", "b", "c"]),
        ("abcab", 2, ["none", "none", "none", "none", "none"]),
        ("abcabc", 2, ["none"] * 5 + ["b"]),
        ("cabcab", 3, ["none"] * 6),
    ],
)
def test_direct_implementation(word, hops, labels):
    assert induction_labels(list(word), hops) == labels


def test_formulas_match_direct_implementation():
    for hops, max_n in ((1, 6), (2, 6), (3, 5)):
        fs = induction_formulas(ABC, hops)
        for n in range(1, max_n + 1):
            for w in itertools.product(ABC, repeat=n):
                expect = induction_labels(w, hops)
                for b, f in fs.items():
                    assert truth_values(f, w) == [x == b for x in expect], (hops, w, b)


def test_model_shape_and_reference():
    m = build_induction(ABC, hops=2, max_n=3)
    assert m["output"]["kind"] == "argmax"
    assert m["output"]["labels"] == ["a", "b", "c", "none"]
    cases = m["reference"]["cases"]
    assert len(cases) == 3 + 9 + 27
    assert {"input": ["a", "b", "a"], "output": ["none", "none", "none"]} in cases
    assert json.loads(json.dumps(m)) == m
    model_from_dict(m)


def test_default_label_avoids_alphabet():
    assert default_label(["a", "none"]) == "<none>"
    m = build_induction(["a", "none"], max_n=2)
    assert m["output"]["labels"] == ["a", "none", "<none>"]


def test_bad_arguments():
    with pytest.raises(ValueError):
        build_induction(ABC, hops=0)
    with pytest.raises(ValueError):
        build_induction(ABC, scheme="hot")


def check(hops: int, scheme: str, max_n: int) -> None:
    m = build_induction(ABC, hops=hops, max_n=max_n, scheme=scheme)
    res = run_check(model_from_dict(m), max_n=max_n, min_n=1).to_json()
    for entry in res["lengths"]:
        where = f"k={hops} {scheme} n={entry['n']}"
        assert entry["reference_mismatches"] == {"hard": 0, "soft": 0}, where
        assert entry["disagreements"] == 0, where
        for layer in entry["layers"]:
            upper = Decimal(layer["error"]["upper"])
            limit = BOUND if layer["kind"] == "attention" else ZERO
            assert upper <= limit, (where, layer["index"], upper)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("hops", [1, 2])
def test_induction_small_n(hops, scheme):
    check(hops, scheme, 4)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("hops", [1, 2])
def test_induction_up_to_8(hops, scheme):
    check(hops, scheme, 8)


def test_catalog():
    cat = catalog()
    assert set(cat) == {"induction_k1", "induction_k2"}
    for stem, m in cat.items():
        assert m["meta"]["hops"] == int(stem[-1])
        assert len(m["reference"]["cases"]) == sum(3**n for n in range(1, 9))
