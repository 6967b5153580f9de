"""The typed records of the precision, search and certificate formats (results/).

Each record is written by its own ``to_json`` and read back by ``from_json``: a document
read back and written again is byte-identical, whatever the producer put in it (exact
rationals, arb balls, float64 enclosure ends, model outputs). The enclosure maximum taken
on exact ends writes what the former maximum of written decimals wrote.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn.certificate.certify import Prepared, certificate, certify_length, range_certificate
from exactattn.cli import main
from exactattn.core.jsonio import dumps
from exactattn.core.numbers import interval_json, parse_decimal
from exactattn.model import load_model
from exactattn.results.certificate import (
    Certificate,
    CertificateRange,
    LengthVerdict,
    certificate_from_json,
)
from exactattn.results.precision import Enclosure, PrecisionResult, plain_output
from exactattn.results.search import SearchResult, SearchValue
from exactattn.run.search import run_search

MODELS = ROOT / "models"


def _same_bytes(doc: dict, back: dict) -> None:
    assert dumps(back) == dumps(doc)


# ---------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    "name,n,objective,budget",
    [
        ("dyck2", 6, "margin", 12),
        ("dyck2", 6, "gamma", 12),
        ("dyck2", 4, "error", 4),
        ("dyck1", 48, "error", 2),  # past the batched bound: float64 enclosure ends
        ("rasp_reverse", 3, "error", 3),  # a value output
    ],
)
def test_search_record_round_trips(name: str, n: int, objective: str, budget: int) -> None:
    model = load_model(MODELS / f"{name}.json")
    res = run_search(model, n, objective, budget=budget, seed=3)
    doc = json.loads(dumps(res.to_json()))
    _same_bytes(doc, SearchResult.from_json(doc).to_json())
    assert doc["format"] == "exactattn-search/1" and doc["witness"]["input"] == list(
        res.witness.input
    )


def test_search_values_are_exact_until_written() -> None:
    """A margin is a Fraction written exactly; +∞ (no gap) is "inf"; an error enclosure
    is written outward from its exact ends."""
    assert SearchValue.point(Fraction(1, 65)).to_json() == {"lower": "1/65", "upper": "1/65"}
    assert SearchValue.point(None).to_json() == {"lower": "inf", "upper": "inf"}
    lo, hi = SearchValue(Fraction(1, 3), Fraction(2, 3)).texts()
    assert (lo, hi) == ("0.333333333333333", "0.666666666666667")
    assert SearchValue(Fraction(0), None).texts() == ("0", "inf")
    model = load_model(MODELS / "dyck2.json")
    res = run_search(model, 5, "margin", budget=8, seed=0)
    assert isinstance(res.witness.value.lower, Fraction)  # exact, not text
    assert res.witness.value.lower == Fraction(1, 2)  # Dyck-2's margin is 1/2 at every n


# ---------------------------------------------------------------------------- certificate


def test_certificate_records_round_trip() -> None:
    m = load_model(MODELS / "dyck2.json")
    for tau in (None, "theorem"):
        c = certificate(m, 100, tau, checked_to=7, model_path="models/dyck2.json")
        for rec in (c, c.with_checked_in("reports/x.json"), c.with_checked_in(None)):
            doc = json.loads(dumps(rec.to_json()))
            back = certificate_from_json(doc)
            assert isinstance(back, Certificate)
            _same_bytes(doc, back.to_json())
    r = range_certificate(load_model(MODELS / "dyck1.json"), 1, 30, "theorem")
    doc = json.loads(dumps(r.to_json()))
    back = certificate_from_json(doc)
    assert isinstance(back, CertificateRange) and back.first_failure is None
    _same_bytes(doc, back.to_json())
    assert doc["certified_through"] == 30 and doc["evaluated"] == 30


def test_certificate_record_holds_exact_values() -> None:
    """Claims at n are exact rationals until written: Dyck-2 at n = 65536 claims
    γ ≥ 1/65537 and x_max ≤ 65537²; the constants' ε* is exactly 1/4."""
    m = load_model(MODELS / "dyck2.json")
    body = certify_length(Prepared.of(m), 65536, "theorem")
    assert not isinstance(body, LengthVerdict)
    assert body.claims_at_n.gamma_lower == Fraction(1, 65537)
    assert body.claims_at_n.x_max_upper == 65537**2
    assert body.constants.eps_star == Fraction(1, 4)
    brief = certify_length(Prepared.of(m), 65536, "theorem", brief=True)
    assert brief == LengthVerdict(65536, True, brief.reason, brief.certified_by)
    assert brief.status == "certified" and brief.certified_by in (
        "Theorem 3(b) + 4(iii) (one-number chain)",
        "Theorem 4(ii)",
    )


def test_incomplete_certificate_file_is_bad_input(tmp_path: Path) -> None:
    m = load_model(MODELS / "dyck1.json")
    doc = certificate(m, 5).to_json()
    del doc["constants"]
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    r = CliRunner().invoke(main, ["report", str(f), "-o", str(tmp_path / "c.md")])
    # the validator of `report` names the missing key and the fix (issue 40)
    assert r.exit_code == 2 and "constants: expected an object" in r.output, r.output
    assert "regenerate the file with `exactattn certify --json`" in r.output
    assert not (tmp_path / "c.md").exists()


# ---------------------------------------------------------------------------- precision


@pytest.mark.parametrize(
    "args",
    [
        ["models/dyck2.json", "--max-n", "4", "--dtype", "float16", "--tau", "1/10000"],
        ["models/dyck1.json", "--max-n", "3", "--min-n", "3", "--dtype", "bfloat16"],
        ["models/rasp_reverse.json", "--max-n", "2", "--dtype", "float16", "--tau", "1/100000"],
        ["models/dyck2.json", "--family", "nested", "--n", "16", "--dtype", "float16"]
        + ["--dtype", "float64", "--tau", "1/(n^3*log(n))", "--tau", "model"],
    ],
)
def test_precision_record_round_trips(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "p.json"
    root = MODELS.parent
    args = [str(root / a) if a.startswith("models/") else a for a in args]
    r = CliRunner().invoke(main, ["precision", *args, "--json", str(out)])
    assert r.exit_code in (0, 1), r.output
    text = out.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert dumps(PrecisionResult.from_json(doc).to_json()) == text


def _old_max(cur: dict[str, str] | None, lo: float | Fraction, hi: float | Fraction) -> dict:
    """The former maximum: on the written decimals, parsed back (run/precision.py before)."""
    new = interval_json(lo, hi)
    if cur is None:
        return new

    def val(s: str) -> Fraction | float:
        return math.inf if s == "inf" else parse_decimal(s)

    return {
        "lower": cur["lower"] if val(cur["lower"]) >= val(new["lower"]) else new["lower"],
        "upper": cur["upper"] if val(cur["upper"]) >= val(new["upper"]) else new["upper"],
    }


_ends = st.one_of(
    st.fractions(min_value=0, max_value=10**6, max_denominator=10**12),
    st.floats(min_value=0, max_value=1e300, allow_nan=False),
    st.just(math.inf),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ends, _ends).map(sorted), min_size=1, max_size=6))
def test_enclosure_maximum_writes_what_the_decimal_maximum_wrote(pairs: list) -> None:
    """Outward rounding is monotone, so the maximum of exact ends, written once, equals
    the maximum of the written decimals (the former string round-trip)."""
    old = None
    new = None
    for lo, hi in pairs:
        old = _old_max(old, lo, hi)
        new = Enclosure.max_of(new, lo, hi)
    assert new is not None and new.to_json() == old


def test_plain_output_writes_exact_text() -> None:
    import numpy as np

    assert plain_output(Fraction(-3, 4)) == "-3/4" and plain_output(Fraction(5)) == "5"
    assert plain_output([[Fraction(1, 2)], [True]]) == [["1/2"], [True]]
    assert plain_output(np.array([[0.5, 0.1]], dtype=np.float16)) == ["0.5", "0.0999755859375"]
