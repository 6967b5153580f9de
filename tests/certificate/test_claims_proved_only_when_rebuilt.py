"""A claim counts as proved only when `certify` re-derives the model (issue 41; issue 40, item 5).

A model file could cite ``proofs/`` for any claim, and `certify` used to take the citation as a
proof: a false γ "justified" by a proofs/ path was certified unconditionally. Now every builder
records ``built_by`` (exactattn/model/provenance.py) and `certify` rebuilds the model and
compares it in canonical form (exactattn/certificate/rederive.py): an edited weight or claim, a
missing record, an unknown builder make every claim conditional. Results name the model's
content digest, and `certify --checked` trusts a result only for the model it checked.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn.certificate.certify import Prepared, certificate
from exactattn.certificate.rederive import first_difference, rederive
from exactattn.cli import main
from exactattn.constructions.dyck import build_dyck
from exactattn.constructions.induction import build_induction
from exactattn.constructions.ltl import compile_ltl
from exactattn.constructions.rasp_bundled import catalog as rasp_catalog
from exactattn.core.errors import ModelError
from exactattn.core.jsonio import read_json
from exactattn.core.numbers import load_json_text
from exactattn.model import load_model, model_from_dict
from exactattn.model.claimed import UNIQUE_TOP
from exactattn.model.provenance import canonical_text, model_sha256
from exactattn.run.check import run_check

MODELS = sorted((ROOT / "models").glob("*.json"))
IDS = [p.stem for p in MODELS]
LOWER = ("gamma_lower", "margin_lower")  # claims that are lower bounds: false when raised


def run(*args: str, cwd: Path = ROOT) -> Any:
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def raw(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def all_claims(model: Any) -> tuple[str, ...]:
    """Every claim of the model, in the order a certificate lists them (Theorem S's
    ``coordinate_ranges`` and ``head_profiles`` after the scalar ones and ``unique_top``)."""
    cl = model.claims
    keys = [c.key for c in cl.items()]
    keys += [UNIQUE_TOP] if cl.unique_top is not None else []
    keys += ["coordinate_ranges"] if cl.coordinate_ranges is not None else []
    keys += ["head_profiles"] if cl.head_profiles is not None else []
    return tuple(keys)


def unconditional(c: Any) -> bool:
    return not c.conditional_on


# ------------------------------------------------------------------------- the digest


def test_digest_ignores_documentation_and_layout_but_not_one_number() -> None:
    text = (ROOT / "models" / "dyck1.json").read_text(encoding="utf-8")
    base = model_sha256(load_json_text(text))
    d = raw(ROOT / "models" / "dyck1.json")
    assert model_sha256(load_model(ROOT / "models" / "dyck1.json")) == base
    assert model_sha256(d) == base  # a builder's dict (ints) and the file (literals) agree
    same = dict(reversed(list(d.items())), name="x", description="y", meta={"z": 1})
    assert model_sha256(json.loads(json.dumps(same, indent=None))) == base
    assert model_sha256(load_json_text(json.dumps(d, separators=(",", ":")))) == base
    for edit in (
        lambda m: m["layers"][0]["heads"][0]["query"][0].__setitem__(0, 5),
        lambda m: m["claims"]["gamma_lower"].__setitem__("expr", "1/(n+2)"),
        lambda m: m.__setitem__("temperature", "1/(n+2)"),
        lambda m: m["claims"]["margin_lower"].__setitem__("justification", "user"),
    ):
        e = copy.deepcopy(d)
        edit(e)
        assert model_sha256(e) != base
    # a number's text is what the digest sees: "1.0" is not "1" (so never a float on the way)
    assert canonical_text({"d": load_json_text("1.0")}) == '{"d":1.0}'
    assert canonical_text({"d": "1"}) == '{"d":"1"}' != canonical_text({"d": 1})


def test_results_and_checkpoints_name_the_same_digest(tmp_path: Path) -> None:
    model = load_model(ROOT / "models" / "dyck1.json")
    h = model_sha256(model)
    assert run_check(model, max_n=2, hard_only=True).to_json()["model_sha256"] == h
    out = tmp_path / "r.json"
    ck = tmp_path / "ck"
    p = run(
        "check",
        "models/dyck1.json",
        "--max-n",
        "2",
        "-q",
        "--json",
        str(out),
        "--checkpoint",
        str(ck),
    )
    assert p.exit_code == 0, p.output
    assert read_json(out)["model_sha256"] == h
    assert read_json(ck / "manifest.json")["fingerprint"]["model_sha256"] == h
    s = tmp_path / "s.json"
    p = run("search", "models/dyck1.json", "--n", "6", "--objective", "gamma", "--json", str(s))
    assert p.exit_code == 0, p.output
    assert read_json(s)["model_sha256"] == h
    c = tmp_path / "c.json"
    assert (
        run(
            "certify", "models/dyck1.json", "--n", "9", "--tau", "theorem", "--json", str(c)
        ).exit_code
        == 0
    )
    assert read_json(c)["provenance"]["model_sha256"] == h


# ---------------------------------------------------------------- builders and loading


def _induction_cases() -> Iterator[tuple[int, int]]:
    for k in range(1, 6):
        for hops in (1, 2, 3):
            yield k, hops


@pytest.mark.parametrize(("k", "hops"), list(_induction_cases()))
def test_every_induction_model_loads_and_is_rederived(k: int, hops: int) -> None:
    """`build induction --alphabet a,b,c,d` wrote a layer name of 299 characters that its own
    loader refused (names join formulas); every size now loads, and certify rebuilds it."""
    d = build_induction([chr(97 + i) for i in range(k)], hops=hops, max_n=2)
    m = model_from_dict(d)
    assert d["built_by"]["model_sha256"] == model_sha256(m)
    assert rederive(m).rederived


@pytest.mark.parametrize("k", [1, 2, 4, 8, 12])
@pytest.mark.parametrize("scheme", ["temperature", "positions"])
def test_every_ltl_model_loads_and_is_rederived(k: int, scheme: str) -> None:
    al = [f"s{i}" for i in range(k)]
    disj = " | ".join(al)
    d = compile_ltl(f"({disj}) S (Y ({disj}) & {al[-1]})", al, scheme)
    m = model_from_dict(d)
    assert rederive(m).rederived and m.built_by.args["scheme"] == scheme


@pytest.mark.parametrize("pairs", [["()"], ["()", "[]"], ["()", "[]", "{}", "<>"]])
@pytest.mark.parametrize("scale", ["integer", "unit"])
def test_every_dyck_model_loads_and_is_rederived(pairs: list[str], scale: str) -> None:
    m = model_from_dict(build_dyck(pairs, scale=scale))
    assert rederive(m).rederived and m.built_by.builder == "dyck"


def test_every_compiled_program_is_rederived() -> None:
    for stem, d in rasp_catalog().items():
        m = model_from_dict(d)
        r = rederive(m)
        assert r.rederived and r.builder == "rasp", (stem, r.reason)


def test_the_cli_builders_record_how_they_built(tmp_path: Path) -> None:
    cases = {
        "i.json": ["build", "induction", "--alphabet", "a,b,c,d", "--max-n", "2"],
        "l.json": ["build", "ltl", "a S b", "--alphabet", "a,b", "--scheme", "positions"],
        "d.json": ["build", "dyck", "--pairs", "()", "--scale", "unit"],
        "r.json": ["build", "rasp", str(ROOT / "models" / "rasp" / "majority.rasp"), "-q"],
    }
    for name, args in cases.items():
        f = tmp_path / name
        p = run(*args, "-o", str(f))
        assert p.exit_code == 0, p.output
        m = load_model(f)
        r = rederive(m)
        assert r.rederived, (name, r.reason)
    assert load_model(tmp_path / "l.json").built_by.args == {
        "formula": "a S b",
        "alphabet": ["a", "b"],
        "scheme": "positions",
    }
    assert load_model(tmp_path / "r.json").built_by.args == {"name": "majority"}


# -------------------------------------------- every bundled model, edited: never unconditional


def _number_leaves(d: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(container, index) of every number or expression among the weights, embeddings and
    read-out: what an editor could change."""
    out: list[tuple[Any, Any]] = []

    def walk(x: Any, skip: tuple[str, ...] = ("name", "kind", "mask", "hard")) -> None:
        items = x.items() if isinstance(x, dict) else enumerate(x)
        for k, v in items:
            if k in skip:
                continue
            if isinstance(v, (dict, list)):
                walk(v)
            elif isinstance(v, (int, str)) and not isinstance(v, bool):
                out.append((x, k))

    walk(d["layers"])
    walk(d["embedding"])
    walk({k: d["output"][k] for k in ("weight", "bias") if k in d["output"]})
    return out


def _bump(container: Any, key: Any) -> None:
    """Add 1: to an integer, a rational literal ("-1/2"), or an expression ("i/(n+1)")."""
    v = container[key]
    if isinstance(v, int):
        container[key] = v + 1
        return
    try:
        q = Fraction(v) + 1
    except ValueError:
        container[key] = f"({v})+1"
    else:
        container[key] = f"{q.numerator}/{q.denominator}"


@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_an_edited_bundled_model_is_never_certified_unconditionally(path: Path) -> None:
    """Every model in models/: as built, every claim is proved; with one weight changed (three
    places, drawn per model) or one claim made false (each claim, justification kept), every
    claim is conditional, with the reason."""
    model = load_model(path)
    c = certificate(model, 10, "theorem")
    assert unconditional(c) and c.provenance.rederived, c.provenance
    keys = all_claims(model)
    rng = random.Random(path.stem)
    d0 = raw(path)
    edits = []
    for _ in range(3):
        d = copy.deepcopy(d0)
        container, key = rng.choice(_number_leaves(d))
        _bump(container, key)
        edits.append((d, "the model differs from what `build "))
    for cl in model.claims.items():
        d = copy.deepcopy(d0)
        e = d["claims"][cl.key]["expr"]
        d["claims"][cl.key]["expr"] = f"256*({e})" if cl.key in LOWER else f"({e})/256"
        edits.append((d, f"claims.{cl.key}.expr ("))
    for i, (d, why) in enumerate(edits):
        m = model_from_dict(d)
        # what certify decides from (the whole certificate for one weight and one claim edit)
        c = certificate(m, 10, "theorem") if i in (0, 3) else Prepared.of(m)
        assert c.conditional_on == keys and not c.provenance.rederived
        assert why in c.provenance.reason, c.provenance.reason


@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_a_bundled_model_with_a_changed_claim_is_conditional_in_the_output(path: Path) -> None:
    d = raw(path)
    d["claims"]["gamma_lower"]["expr"] = f"256*({d['claims']['gamma_lower']['expr']})"
    f = Path(pytest.importorskip("tempfile").mkdtemp()) / path.name
    try:
        f.write_text(json.dumps(d), encoding="utf-8")
        p = run("certify", str(f), "--n", "10", "--tau", "theorem")
        assert p.exit_code in (0, 1), p.output
        assert "every claim used is proved" not in p.output
        assert "CONDITIONAL: this answer assumes the claims gamma_lower" in p.output
        assert "none of them proved for this file" in p.output
    finally:
        shutil.rmtree(f.parent)


def _false_claim_models() -> Iterator[tuple[str, dict[str, Any], int]]:
    """Models with a false claim that still cites proofs/, as in the issue: (what, model, n at
    which `check` finds the claim false)."""
    d = raw(ROOT / "models" / "dyck1.json")
    for key, expr in (
        ("gamma_lower", "256/(n+1)"),  # γ(n) = 1/(n+1)
        ("x_max_upper", "(n+1)^2/256"),  # x_max(n) = (n+1)²
        ("margin_lower", "128"),  # μ(n) = 1/2
    ):
        e = copy.deepcopy(d)
        e["claims"][key]["expr"] = expr
        yield f"dyck1 {key}", e, 2
    e = copy.deepcopy(d)  # activation_upper below the embedding's largest entry
    e["claims"]["activation_upper"] = {
        "expr": "1",
        "justification": {"file": "proofs/claims.md", "statement": "Proposition D(b)"},
    }
    yield "dyck1 activation_upper", e, 2
    e = copy.deepcopy(d)  # a tie model: the prefix-mean head's scores all tie
    e["layers"][0]["heads"][0]["hard"] = "leftmost"
    e["claims"][UNIQUE_TOP] = {
        "justification": {"file": "proofs/claims.md", "statement": "Proposition R(d)"}
    }
    yield "dyck1 tie with unique_top", e, 2
    f = raw(ROOT / "models" / "rasp_firstlast.json")
    f["claims"]["gamma_lower"]["expr"] = "256"
    yield "rasp_firstlast gamma_lower", f, 2


@pytest.mark.parametrize(
    ("what", "d", "n"), list(_false_claim_models()), ids=[w for w, _, _ in _false_claim_models()]
)
def test_false_claims_citing_proofs_are_conditional_and_check_finds_them(
    what: str, d: dict[str, Any], n: int, tmp_path: Path
) -> None:
    """The issue's kind of model: `check` finds the claim false at small n (exit 1), and
    `certify` no longer says "every claim used is proved" about it."""
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d), encoding="utf-8")
    p = run("check", str(f), "--max-n", str(n), "--hard-only", "-q")
    assert p.exit_code == 1, (what, p.output)
    m = load_model(f)
    c = certificate(m, 10, "theorem")
    assert c.conditional_on == all_claims(m), what
    q = run("certify", str(f), "--n", "10", "--tau", "theorem")
    assert "every claim used is proved" not in q.output
    assert "CONDITIONAL" in q.output


def test_no_record_an_unknown_builder_and_refused_arguments_are_conditional() -> None:
    d = raw(ROOT / "models" / "dyck2.json")
    no = copy.deepcopy(d)
    del no["built_by"]
    assert rederive(model_from_dict(no)).reason == (
        "no builder recorded (the model file has no built_by)"
    )
    other = copy.deepcopy(d)
    other["built_by"]["builder"] = "magic"
    assert "unknown builder 'magic'" in rederive(model_from_dict(other)).reason
    bad = copy.deepcopy(d)
    bad["built_by"]["args"]["pairs"] = ["(("]
    assert "`build dyck` refuses the recorded arguments" in rederive(model_from_dict(bad)).reason
    extra = copy.deepcopy(d)
    extra["built_by"]["args"]["colour"] = "red"
    assert "refuses the recorded arguments" in rederive(model_from_dict(extra)).reason
    wrong = copy.deepcopy(d)  # another builder's recipe: the model differs from its output
    wrong["built_by"]["args"]["pairs"] = ["()"]
    r = rederive(model_from_dict(wrong))
    assert not r.rederived and "differs from what `build dyck` produces" in r.reason
    for m in (no, other, bad, extra, wrong):
        c = certificate(model_from_dict(m), 10, "theorem")
        assert c.conditional_on == (
            "gamma_lower",
            "x_max_upper",
            "margin_lower",
            "coordinate_ranges",
            "head_profiles",
        )


def test_first_difference_names_the_json_path() -> None:
    a = {"layers": [{"heads": [{"key": [[0, 1], [2, 3]]}]}], "d": 2}
    b = copy.deepcopy(a)
    b["layers"][0]["heads"][0]["key"][1][1] = 4
    assert first_difference(a, b) == "layers[0].heads[0].key[1][1] (the file has 3, the builder 4)"
    assert first_difference(a, a) is None
    c = copy.deepcopy(a)
    c["layers"].append({})
    assert first_difference(c, a) == "layers (the file has 2 entries, the builder 1)"


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda b: b.pop("args"), "built_by: missing required key 'args'"),
        (lambda b: b.update(builder=3), "built_by.builder"),
        (lambda b: b.update(model_sha256="xyz"), "built_by.model_sha256"),
        (lambda b: b.update(args={"pairs": {"a": 1}}), "built_by.args.pairs"),
        (lambda b: b.update(colour=1), "built_by.colour: unknown key"),
    ],
)
def test_a_malformed_record_is_refused(edit: Any, path: str) -> None:
    d = raw(ROOT / "models" / "dyck1.json")
    edit(d["built_by"])
    with pytest.raises(ModelError, match=path.replace("(", r"\(")):
        model_from_dict(d)


# ---------------------------------------------------------- --checked bound to the digest


def _tampered(tmp_path: Path) -> Path:
    d = raw(ROOT / "models" / "dyck1.json")
    v = d["layers"][0]["heads"][0]["value"]
    v[0][0] = 7 if v[0][0] != 7 else 8  # any change of content
    f = tmp_path / "dyck1.json"
    f.write_text(json.dumps(d), encoding="utf-8")
    return f


def test_checked_result_of_other_content_is_not_trusted(tmp_path: Path) -> None:
    genuine, forged = tmp_path / "g.json", tmp_path / "f.json"
    tam = _tampered(tmp_path)
    assert (
        run(
            "check",
            "models/dyck1.json",
            "--max-n",
            "3",
            "--hard-only",
            "-q",
            "--json",
            str(genuine),
        ).exit_code
        == 0
    )
    run("check", str(tam), "--max-n", "3", "--hard-only", "-q", "--json", str(forged))
    # the genuine model with the tampered model's result, and the other way round
    for model, result in (("models/dyck1.json", forged), (str(tam), genuine)):
        out = tmp_path / "c.json"
        p = run(
            "certify",
            model,
            "--n",
            "50",
            "--tau",
            "theorem",
            "--checked",
            str(result),
            "--json",
            str(out),
        )
        assert p.exit_code == 0, p.output
        assert "also checked by enumeration" not in p.output
        assert "was not used: it checked a model with other content" in p.output
        c = read_json(out)
        assert c["checked_by_enumeration_to"] is None and c["checked_in"] is None
        assert "other content" in c["checked_not_used"]
    # the matching pair still counts
    p = run(
        "certify", "models/dyck1.json", "--n", "50", "--tau", "theorem", "--checked", str(genuine)
    )
    assert "also checked by enumeration for n ≤ 3" in p.output and "not used" not in p.output
    # a result written before results named their model's digest is not trusted either
    old = read_json(genuine)
    del old["model_sha256"]
    genuine.write_text(json.dumps(old), encoding="utf-8")
    p = run(
        "certify",
        "models/dyck1.json",
        "--range",
        "1..3",
        "--tau",
        "theorem",
        "--checked",
        str(genuine),
    )
    assert "also checked" not in p.output and "no model_sha256" in p.output


def test_the_bundled_lookup_is_bound_to_the_digest(tmp_path: Path) -> None:
    """A tampered models/dyck1.json next to the genuine reports/claims/dyck1.hard.json: the
    stored result is not "also verified by enumeration" for it, and the output says why."""
    (tmp_path / "models").mkdir()
    (tmp_path / "reports" / "claims").mkdir(parents=True)
    shutil.copy(ROOT / "reports" / "claims" / "dyck1.hard.json", tmp_path / "reports" / "claims")
    tam = _tampered(tmp_path / "models")
    p = run("certify", str(tam), "--n", "100", "--tau", "theorem", cwd=tmp_path)
    assert p.exit_code == 0, p.output
    assert "also checked by enumeration" not in p.output
    assert "reports/claims/dyck1.hard.json was not used" in p.output
    assert "CONDITIONAL" in p.output
    ok = run("certify", "models/dyck1.json", "--n", "100", "--tau", "theorem")
    assert "also checked by enumeration for n ≤ 14" in ok.output


# ------------------------------------------------------------------ negative upper bounds


@pytest.mark.parametrize(
    ("key", "expr"), [("x_max_upper", "-1"), ("x_max_upper", "1 - n"), ("activation_upper", "-n")]
)
def test_negative_upper_bounds_are_refused(key: str, expr: str, tmp_path: Path) -> None:
    """|entries| ≤ a negative number is false; it was clamped to 0 and certified."""
    d = raw(ROOT / "models" / "dyck1.json")
    d["claims"][key] = {"expr": expr, "justification": "user"}
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d), encoding="utf-8")
    out = tmp_path / "c.json"
    p = run("certify", str(f), "--n", "5", "--json", str(out))
    assert p.exit_code == 2
    assert f"claims.{key}.expr: the claimed upper bound at n = 5 is " in p.output
    assert "(fix: " in p.output and not out.exists()
    p = run("certify", str(f), "--range", "1..4")
    assert p.exit_code == 2 and f"claims.{key}.expr" in p.output
    d["claims"][key]["expr"] = "0" if key == "activation_upper" else "(n+1)^2"
    f.write_text(json.dumps(d), encoding="utf-8")
    assert run("certify", str(f), "--n", "5").exit_code in (0, 1)  # 0 is a bound, not refused
