"""bounds and τ* are typed records (results/bounds.py): exact until the writer, and a record
read back writes the same bytes."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from flint import arb
from paths import ROOT

from exactattn import load_model, run_check
from exactattn.bounds.closedforms import closed_forms
from exactattn.results import LengthRecord
from exactattn.results.bounds import (
    BoundsRecord,
    CertifiedEnd,
    GridTau,
    TauStarRecord,
    grid_value,
)
from exactattn.results.sequences import LengthValues, values_of_rows


@pytest.fixture(scope="module")
def dyck1() -> tuple:
    model = load_model(ROOT / "models" / "dyck1.json")
    return model, run_check(model, max_n=3, bounds=True, find_tau=True)


def _bytes(x: object) -> str:
    return json.dumps(x, indent=2, ensure_ascii=False)


def test_records_are_typed_and_exact(dyck1: tuple) -> None:
    model, res = dyck1
    rec = res.lengths[-1]
    assert isinstance(rec.bounds, BoundsRecord) and isinstance(rec.tau_star, TauStarRecord)
    c = rec.bounds.constants
    assert c is not None and isinstance(c.K, Fraction) and c.L == len(model.layers)
    assert c.gamma == rec.gamma and c.x_max >= rec.x_max
    assert isinstance(rec.bounds.eps_star, Fraction) and rec.bounds.eps_star > 0
    t = rec.bounds.tau_theorem
    assert t is not None and isinstance(t.lower.value, arb)  # the ball, not its text
    dec = rec.tau_star.decisions
    assert dec is not None and dec.lower is not None and dec.lower.k is not None
    # a grid τ is the exact rational its 12-digit text says
    assert dec.lower.value == Fraction(dec.lower.to_json())
    assert grid_value(8) == 2 and GridTau(4).to_json() == "1.41421356237"


def test_round_trip_writes_the_same_bytes(dyck1: tuple) -> None:
    model, res = dyck1
    for row in res.to_json()["lengths"]:
        b = BoundsRecord.from_json(row["bounds"])
        assert _bytes(b.to_json()) == _bytes(row["bounds"])
        ts = TauStarRecord.from_json(row["tau_star"])
        assert _bytes(ts.to_json()) == _bytes(row["tau_star"])
        back = LengthRecord.from_json(row, model.alphabet)
        assert _bytes(back.to_json()["bounds"]) == _bytes(row["bounds"])
        assert _bytes(back.to_json()["tau_star"]) == _bytes(row["tau_star"])


def test_closed_forms_from_records_equal_those_from_the_file(dyck1: tuple) -> None:
    _, res = dyck1
    data = res.to_json()
    typed = closed_forms([LengthValues.of(r) for r in res.lengths])
    assert typed == data["closed_forms"] == closed_forms(values_of_rows(data["lengths"]))
    v = LengthValues.of(res.lengths[0])
    assert v.exact["gamma"] == res.lengths[0].gamma  # the Fraction itself, no text between


def test_certified_end_rounds_outward_only_when_written() -> None:
    third = arb(1) / 3
    up, down = CertifiedEnd(third), CertifiedEnd(third, up=False)
    assert Fraction(up.to_json()) > Fraction(1, 3) > Fraction(down.to_json())
    assert CertifiedEnd(Fraction(1, 3), digits=6).to_json() == "0.333334"
    read = CertifiedEnd.from_json("0.333334")
    point = read.point()
    assert read.to_json() == "0.333334" and point is not None
    assert point >= arb(333334) / 10**6  # the point is the decimal, rounded up
    assert CertifiedEnd.from_json("inf").point() is None
