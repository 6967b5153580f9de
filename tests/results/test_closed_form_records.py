"""``results.sequences.ClosedForm.form`` is a typed :class:`Form` (exact Fractions), read
strictly by ``Form.from_json`` (exactly what the writer writes: a form read back writes the
same bytes) and tolerantly by ``Form.read`` (None for anything else, shown verbatim)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from paths import ROOT

from exactattn.bounds.closedforms import evaluate_form, fit_closed_forms
from exactattn.results.closedforms import HYPERGEOMETRIC, PARITY, POWER, RATIONAL, Form
from exactattn.results.sequences import ClosedForm, LengthValues, closed_form_records

GOLDEN = sorted((ROOT / "tests" / "golden" / "layout").glob("*.json"))


def _written_forms() -> list[dict]:
    forms = []
    for path in GOLDEN:
        cf = json.loads(path.read_text(encoding="utf-8"), parse_float=str).get("closed_forms")
        forms += [rec["form"] for rec in (cf or {}).values() if rec.get("form") is not None]
    return forms


def test_the_goldens_have_forms_of_several_kinds() -> None:
    kinds = {f["kind"] for f in _written_forms()}
    assert len(_written_forms()) >= 5 and {RATIONAL} <= kinds, kinds


@pytest.mark.parametrize("i", range(len(_written_forms())))
def test_a_written_form_reads_back_to_the_same_bytes(i: int) -> None:
    written = _written_forms()[i]
    form = Form.from_json(written)
    assert json.dumps(form.to_json()) == json.dumps(written)  # key order included


def test_closed_form_holds_a_typed_exact_form() -> None:
    rec = {
        "expression": "(n + 1)/(2*n)",
        "fitted_on": [1, 2, 3],
        "verified_on": [4, 5],
        "form": {"kind": "rational", "num": ["1", "1"], "den": ["0", "2"]},
    }
    cf = ClosedForm.from_json(rec)
    assert isinstance(cf.form, Form) and cf.verified
    assert cf.form.num == (Fraction(1), Fraction(1)) and cf.form.den == (0, Fraction(2))
    assert evaluate_form(cf.form, 3) == Fraction(2, 3)
    assert closed_form_records({"gamma": rec})["gamma"].form == cf.form


def test_fitted_forms_of_every_kind_read_back_to_the_same_bytes() -> None:
    """Forms as the fitter writes them (hypergeometric, parity, rational), read strictly."""
    seqs = {
        "gamma": lambda n: Fraction(math.comb(2 * n, n)),
        "min_margin": lambda n: Fraction(2, n + 1) if n % 2 else Fraction(1, n),
        "accepted": lambda n: Fraction(n * n + 1),
    }
    vals = [LengthValues(n, {k: f(n) for k, f in seqs.items()}) for n in range(1, 13)]
    written = fit_closed_forms(vals).to_json()
    kinds = {k: r["form"]["kind"] for k, r in written.items() if r.get("form")}
    assert kinds == {"gamma": HYPERGEOMETRIC, "min_margin": PARITY, "accepted": RATIONAL}
    for rec in written.values():
        form = ClosedForm.from_json(rec).form
        assert form is not None and json.dumps(form.to_json()) == json.dumps(rec["form"])
    gamma = ClosedForm.from_json(written["gamma"]).form
    assert [evaluate_form(gamma, n) for n in (13, 14)] == [math.comb(26, 13), math.comb(28, 14)]


HAND = {
    "power": {"kind": POWER, "num": ["3/4"], "den": ["1"], "base": "1/2"},
    "hypergeometric": {
        "kind": HYPERGEOMETRIC,
        "start": 1,
        "step": 2,
        "value": "-5/3",
        "num": ["1", "2"],
        "den": ["3"],
    },
    "parity": {
        "kind": PARITY,
        "even": {"kind": RATIONAL, "num": ["1"], "den": ["1"]},
        "odd": None,
    },
}


@pytest.mark.parametrize("name", HAND)
def test_every_kind_round_trips(name: str) -> None:
    d = HAND[name]
    assert json.dumps(Form.from_json(d).to_json()) == json.dumps(d)


BAD = {
    "a decimal coefficient": {"kind": RATIONAL, "num": ["0.5"], "den": ["1"]},
    "a float coefficient": {"kind": RATIONAL, "num": [0.5], "den": ["1"]},
    "a JSON integer": {"kind": RATIONAL, "num": [1], "den": ["1"]},
    "an exponent": {"kind": RATIONAL, "num": ["1e999999"], "den": ["1"]},
    "a zero denominator": {"kind": RATIONAL, "num": ["1/0"], "den": ["1"]},
    "a zero polynomial below": {"kind": RATIONAL, "num": ["1"], "den": ["0", "0"]},
    "no coefficients": {"kind": RATIONAL, "num": [], "den": ["1"]},
    "an unknown kind": {"kind": "eval", "num": ["1"], "den": ["1"]},
    "a base on a rational form": {"kind": RATIONAL, "num": ["1"], "den": ["1"], "base": "2"},
    "a power without base": {"kind": POWER, "num": ["1"], "den": ["1"]},
    "a nested parity": {"kind": PARITY, "even": HAND["parity"], "odd": None},
    "a parity half missing": {"kind": PARITY, "even": None},
    "a step of 3": {**HAND["hypergeometric"], "step": 3},
    "a boolean start": {**HAND["hypergeometric"], "start": True},
    "an unknown key": {"kind": RATIONAL, "num": ["1"], "den": ["1"], "note": "x"},
    "not an object": ["rational"],
}


@pytest.mark.parametrize("name", BAD)
def test_strict_refuses_tolerant_gives_none(name: str) -> None:
    d = BAD[name]
    with pytest.raises((KeyError, TypeError, ValueError)):
        Form.from_json(d)
    assert Form.read(d) is None
    rec = ClosedForm.from_json({"expression": "x", "verified_on": [1], "form": d})
    assert rec.form is None and not rec.verified  # shown verbatim, never evaluated
