"""Claims of compiled RASP programs (proofs/claims.md, Proposition R) and the ``unique_top`` claim.

Hand-derived values: every compiled model's embedding has x_max(n) = n² exactly (`pos_sq` at the
last position, Proposition R(b)); the γ claim is the compiler's bound 1/(n+1); the margin is 1/2
for `accept` and 1 for a Boolean `output`. The models are compiled here from the program sources
(not read from models/), so a change to the compiler's claims is seen by these tests.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn.certificate.certify import certificate, certify_range
from exactattn.constructions.rasp_bundled import catalog
from exactattn.constructions.rasp_claims import activation_bound, x_max_bound
from exactattn.core.errors import ModelError, UsageError
from exactattn.model import model_from_dict
from exactattn.run.check import run_check

# the unbounded compilations (Proposition R); the bounded ones are
# tests/rasp/test_rasp_bounded_embedding.py's
COMPILED = {k: v for k, v in catalog().items() if not k.endswith("_bounded")}
STEMS = sorted(COMPILED)
MARGIN = {"accept": "1/2", "argmax": "1"}


def _max_n(stem: str) -> int:
    return 3 if stem in ("rasp_dyck2", "rasp_anbn") else 5


def test_every_bundled_program_has_claims() -> None:
    assert len(STEMS) == 8
    for stem, m in COMPILED.items():
        cl = m["claims"]
        assert cl["gamma_lower"]["expr"] == "1/(n + 1)", stem
        assert cl["x_max_upper"]["expr"] == "n^2", stem
        assert cl["activation_upper"]["expr"] == "n^2", stem
        assert cl.get("margin_lower", {}).get("expr") == MARGIN.get(m["output"]["kind"]), stem
        hards = {h.get("hard", "average") for lay in m["layers"] for h in lay.get("heads", [])}
        assert ("unique_top" in cl) == bool(hards - {"average"}), stem
        for c in cl.values():
            if isinstance(c, dict):
                assert c["justification"]["file"] == "proofs/claims.md"
                assert c["justification"]["statement"].startswith("Proposition R(")


@pytest.mark.parametrize("stem", STEMS)
def test_claims_hold_and_x_max_is_tight(stem: str) -> None:
    """check verifies each claim at every n; the x_max claim n² is attained (R(b) is tight)."""
    model = model_from_dict(COMPILED[stem])
    assert model.claims is not None and not model.claims.conditional
    res = run_check(model, max_n=_max_n(stem), hard_only=True)
    for rec in res.lengths:
        cl = rec.extra["claims"]
        bad = [f"{x['claimed']} fails, measured {x['measured']}" for x in cl["violation_details"]]
        assert not bad, f"n={rec.n}: {'; '.join(bad)}"
        assert cl["undecided"] == 0, (stem, rec.n, cl)
        items = cl["claims"]
        assert items["x_max_upper"]["measured"] == str(rec.n**2) == items["x_max_upper"]["claim"]
        assert items["gamma_lower"]["claim"] == f"1/{rec.n + 1}"
        # Proposition R(e): no layer's activation exceeds n² (attained by pos_sq)
        assert items["activation_upper"] == {
            "claim": str(rec.n**2),
            "measured": str(rec.n**2),
            "status": "holds",
        }
        if "margin_lower" in items:  # a Boolean read-out: the margin is exactly the claim
            assert items["margin_lower"]["measured"] == items["margin_lower"]["claim"]
        if "unique_top" in items:
            assert items["unique_top"]["measured"] == "1"
    assert res.exit_code() == 0


def test_a_wrong_compiled_claim_is_caught_by_check() -> None:
    d = copy.deepcopy(COMPILED["rasp_dyck1"])
    d["claims"]["x_max_upper"]["expr"] = "n"  # a factor n dropped: x_max(n) = n²
    d["claims"]["gamma_lower"]["expr"] = "2/(n + 1)"  # twice the proved bound
    d["claims"]["activation_upper"]["expr"] = "n^2 - 1"  # pos_sq = n² at the last position
    res = run_check(model_from_dict(d), max_n=3, hard_only=True)
    assert res.exit_code() == 1
    rec = res.lengths[2]
    det = {x["claim"]: x for x in rec.extra["claims"]["violation_details"]}
    assert det["x_max_upper"]["measured"] == "9" and det["x_max_upper"]["claimed"] == "x_max(n) ≤ 3"
    assert det["gamma_lower"]["measured"] == "1/4"
    assert det["activation_upper"]["measured"] == "9"
    assert det["activation_upper"]["claimed"] == "max_ℓ ‖x^(ℓ)‖∞ ≤ 8"
    # n = 1: x_max 1 ≤ 1 holds; γ and the activation bound 0 do not
    assert res.lengths[0].extra["claims"]["violations"] == 2


def test_a_false_unique_top_claim_is_caught() -> None:
    """A leftmost head with constant scores ties at the top: unique_top fails, naming the head."""
    d = json.loads((ROOT / "models" / "dyck1.json").read_text())
    d["layers"][0]["heads"][0]["hard"] = "leftmost"
    d["claims"]["unique_top"] = {"justification": "user"}
    res = run_check(model_from_dict(d), max_n=2, hard_only=True)
    assert res.exit_code() == 1
    det = res.lengths[1].extra["claims"]["violation_details"]
    assert [x["claim"] for x in det] == ["unique_top"]
    assert det[0]["witness"] == {"layer": 0, "head": 0} and Fraction(det[0]["measured"]) > 1


def test_unique_top_lets_certify_use_leftmost_heads_and_is_conditional_when_asserted() -> None:
    d = json.loads((ROOT / "models" / "dyck1.json").read_text())
    d["layers"][1]["heads"][0]["hard"] = "leftmost"
    with pytest.raises(UsageError, match="H3"):
        certificate(model_from_dict(d), 10, "theorem")
    d["claims"]["unique_top"] = {"justification": "user"}
    c = certificate(model_from_dict(d), 10, "theorem")
    # an edited model is not re-derived (issue 41): every claim is conditional, unique_top too
    assert c.conditional_on == (
        "gamma_lower",
        "x_max_upper",
        "margin_lower",
        "unique_top",
        "coordinate_ranges",
        "head_profiles",
    )
    assert c.provenance is not None and not c.provenance.rederived
    assert any(s.step == "claim unique_top" for s in c.proof_chain)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({}, "claims.unique_top: missing required key 'justification'"),
        ({"justification": "user", "expr": "1"}, "claims.unique_top.expr: unknown key"),
        ("yes", "claims.unique_top: expected an object"),
        ({"justification": "trust me"}, "claims.unique_top.justification"),
    ],
)
def test_malformed_unique_top_names_the_json_path(value: object, path: str) -> None:
    d = copy.deepcopy(COMPILED["rasp_dyck1"])
    d["claims"]["unique_top"] = value
    with pytest.raises(ModelError) as exc:
        model_from_dict(d)
    assert path in str(exc.value)


def test_compiled_dyck2_is_certified_at_every_length_with_the_chain() -> None:
    m = model_from_dict(COMPILED["rasp_dyck2"])
    c = certificate(m, 65536, "theorem").to_json()
    assert c["status"] == "certified" and c["conditional_on"] == []
    assert c["claims_at_n"] == {
        "gamma_lower": "1/65537",
        "x_max_upper": str(65536**2),
        "margin_lower": "1/2",
    }
    # Proposition R(e) bounds every layer's input by n², far below Lemma G's recursion
    assert c["constants"]["X"] == str(65536**2)
    assert set(c["constants"]["layer_input_bounds"]) == {str(65536**2)}
    steps = {s["step"]: s["proved_in"] for s in c["proof_chain"]}
    assert steps["claim unique_top"].startswith("proofs/claims.md, Proposition R(d)")
    assert steps["claim gamma_lower"].startswith("proofs/claims.md, Proposition R(a)")
    r = certify_range(m, 1, 200, "theorem")
    assert r["first_failure"] is None and r["certified_through"] == 200


def test_value_output_has_no_margin_and_is_certified() -> None:
    m = model_from_dict(COMPILED["rasp_count"])
    assert m.claims is not None and m.claims.margin_lower is None
    assert certificate(m, 1000, "theorem").to_json()["status"] == "certified"


def test_an_embedding_the_proof_does_not_cover_gets_no_x_max_claim() -> None:
    assert x_max_bound(["i", "i^2", "n"]) == "n^2"
    assert x_max_bound(["i", "i^3"]) is None


def test_activation_bound_by_hand() -> None:
    """|v| ≤ max(|l0|, |h0|)·n + max(|l1|, |h1|); dominated forms and those ≤ n² dropped."""
    b01, pos, wide = ((0, 0), (0, 1)), ((0, 0), (1, 0)), ((-2, 0), (1, 3))
    assert activation_bound([b01, pos], True) == "n^2"
    assert activation_bound([b01, pos], False) == "max(1, n)"
    assert activation_bound([b01, pos, wide], True) == "max(n^2, 2*n + 3)"
    assert activation_bound([((-3, 0), (0, 0))], False) == "3*n"
    assert activation_bound([], False) == "0"


def test_certify_without_the_activation_claim_uses_lemma_g() -> None:
    d = copy.deepcopy(COMPILED["rasp_dyck2"])
    del d["claims"]["activation_upper"]
    c = certificate(model_from_dict(d), 65536, "theorem").to_json()
    assert c["status"] == "certified" and Fraction(c["constants"]["X"]) > 10**17


def test_checked_by_enumeration_needs_the_unique_top_entries(tmp_path: Path) -> None:
    """`certify --checked` counts a length only if every claim, unique_top included, held."""
    from click.testing import CliRunner

    from exactattn.cli import main

    r = tmp_path / "r.json"
    model = str(ROOT / "models" / "rasp_dyck1.json")
    run = CliRunner().invoke(
        main, ["check", model, "--max-n", "3", "--hard-only", "-q", "--json", str(r)]
    )
    assert run.exit_code == 0, run.output
    args = ["certify", model, "--n", "1000", "--tau", "theorem", "--checked", str(r)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0 and "also checked by enumeration for n ≤ 3" in out.stdout
    data = json.loads(r.read_text())
    for rec in data["lengths"]:
        del rec["claims"]["claims"]["unique_top"]
    r.write_text(json.dumps(data))
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0 and "also checked by enumeration" not in out.stdout


def test_certificate_of_a_compiled_program_renders(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from exactattn.cli import main

    cj = tmp_path / "c.json"
    model = str(ROOT / "models" / "rasp_reverse.json")
    run = CliRunner().invoke(
        main, ["certify", model, "--n", "50", "--tau", "theorem", "--json", str(cj)]
    )
    assert run.exit_code == 0, run.output
    for suffix in ("md", "tex"):
        out = tmp_path / f"c.{suffix}"
        assert CliRunner().invoke(main, ["report", str(cj), "-o", str(out)]).exit_code == 0
        text = out.read_text()
        assert "unique" in text and "Proposition R(d)" in text and "activation" in text


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.none(),
        st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    )
)
def test_any_new_claim_value_is_accepted_or_refused_with_its_path(value: object) -> None:
    for key in ("unique_top", "activation_upper"):
        d = copy.deepcopy(COMPILED["rasp_dyck1"])
        d["claims"][key] = value
        try:
            model_from_dict(d)
        except ModelError as exc:
            assert str(exc).startswith(f"claims.{key}"), str(exc)


def test_a_program_without_heads_gets_vacuous_claims_and_a_certificate() -> None:
    """Token tests only: no layer at all, γ claim the vacuous 1, soft = hard at every τ."""
    from exactattn.constructions.rasp_compile import compile_program
    from exactattn.rasp.parse import parse_program

    text = 'alphabet "a" "b"\nbool isa = token == "a"\noutput isa\n'
    d = compile_program(parse_program(text, "nohead")).model
    assert d["layers"] == [] and d["claims"]["gamma_lower"]["expr"] == "1"
    assert "unique_top" not in d["claims"]
    m = model_from_dict(d)
    assert run_check(m, max_n=4, hard_only=True).exit_code() == 0
    c = certificate(m, 10**6, "theorem").to_json()
    assert c["status"] == "certified" and c["final_error_bound"] == "0"
    # check --bounds and --tau theorem on it (a max over no layers once crashed, exit 4)
    res = run_check(m, max_n=3, bounds=True, tau="theorem")
    assert res.exit_code() == 0
    assert [r.tau.lower for r in res.lengths] == [arb(1)] * 3  # τ_thm = 1: soft = hard
