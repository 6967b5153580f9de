"""Claims in model files, their verification by `check`, and `exactattn certify` (issue 23).

Hand-derived values: Dyck-2 has γ(n) = 1/(n+1), x_max(n) = (n+1)², μ(n) = 1/2 (proofs/claims.md,
Proposition D); every certified error bound must be ≥ the measured error after every layer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT

from exactattn.certificate.certify import Prepared, certificate, certify_length, certify_range
from exactattn.core.errors import ExactAttnError, ModelError
from exactattn.core.numbers import arb_endpoints
from exactattn.model import load_model, model_from_dict
from exactattn.run.check import run_check

# the bundled models: every builder emits proved claims (issue 23), the RASP compiler too
# (proofs/claims.md, Proposition R)
MODELS = sorted((ROOT / "models").glob("*.json"))
IDS = [p.stem for p in MODELS]


def _max_n(path: Path, default: int) -> int:
    """Smaller lengths for the larger models (4 symbols or many layers) in the default run."""
    if path.stem in ("rasp_dyck2", "rasp_anbn"):
        return min(default, 4)
    return default


def cli(*args: str) -> subprocess.CompletedProcess:
    """``exactattn ARGS`` in this process (a subprocess costs a second of imports per call)."""
    import os

    from click.testing import CliRunner

    from exactattn.cli import main

    old = os.getcwd()
    os.chdir(ROOT)
    try:
        r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, r.stderr)


def test_cli_as_a_subprocess() -> None:
    """The command as users run it (module entry point, exit code, stdout)."""
    p = subprocess.run(
        # τ = 1/10 at n = 3: no chain certifies it (τ_cert(3) = 0.0341) and no stored
        # enumeration is at that τ (the own τ is certified, n = 3 by enumeration)
        [sys.executable, "-m", "exactattn", "certify", "models/dyck1.json", "--n", "3"]
        + ["--tau", "1/10"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert p.returncode == 1 and "NOT certified" in p.stdout


def dyck1() -> dict:
    return json.loads((ROOT / "models" / "dyck1.json").read_text())


# ---------------------------------------------------------------- the format


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda c: c.pop("margin_lower"), "claims: missing required key 'margin_lower'"),
        (lambda c: c["gamma_lower"].update(expr="1/(n+"), "claims.gamma_lower.expr"),
        (lambda c: c["gamma_lower"].update(expr="__import__('os')"), "claims.gamma_lower.expr"),
        (
            lambda c: c["x_max_upper"].update(justification={"file": "../etc", "statement": "x"}),
            "claims.x_max_upper.justification.file",
        ),
        (lambda c: c["x_max_upper"].update(justification="trust me"), "claims.x_max_upper"),
        (lambda c: c.update(gamma_low={}), "claims.gamma_low: unknown key"),
        (lambda c: c["margin_lower"].pop("expr"), "claims.margin_lower: missing required key"),
    ],
)
def test_malformed_claims_name_the_json_path(edit, path: str) -> None:
    d = dyck1()
    edit(d["claims"])
    with pytest.raises(ModelError) as exc:
        model_from_dict(d)
    assert path in str(exc.value)


def test_bad_claims_exit_2_and_write_nothing(tmp_path: Path) -> None:
    d = dyck1()
    d["claims"]["gamma_lower"]["expr"] = "1/(n+"
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    out = tmp_path / "c.json"
    p = cli("certify", str(f), "--n", "5", "--json", str(out))
    assert p.returncode == 2, p.stderr
    assert "claims.gamma_lower.expr" in p.stderr
    assert not out.exists()


def test_missing_claims_exit_2_with_the_fix(tmp_path: Path) -> None:
    d = dyck1()
    del d["claims"]
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    p = cli("certify", str(f), "--n", "5")
    assert p.returncode == 2
    assert "claims" in p.stderr and "fix:" in p.stderr


def test_leftmost_head_gets_no_certificate(tmp_path: Path) -> None:
    d = dyck1()
    d["layers"][0]["heads"][0]["hard"] = "leftmost"
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    p = cli("certify", str(f), "--n", "5", "--tau", "theorem")
    assert p.returncode == 2
    assert "H3" in p.stderr and "leftmost" in p.stderr


# ---------------------------------------------------------------- check verifies the claims


@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_bundled_claims_hold_on_every_enumerated_length(path: Path) -> None:
    model = load_model(path)
    assert model.claims is not None
    assert not model.claims.conditional  # the builders prove every claim
    res = run_check(
        model, max_n=_max_n(path, 6 if "induction" not in path.stem else 5), hard_only=True
    )
    for rec in res.lengths:
        cl = rec.extra["claims"]
        assert cl["violations"] == 0 and cl["undecided"] == 0, (rec.n, cl)
        assert all(v["status"] == "holds" for v in cl["claims"].values())
    assert res.exit_code() == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_bundled_claims_hold_slow(path: Path) -> None:
    model = load_model(path)
    res = run_check(model, max_n=8 if len(model.alphabet) <= 3 else 7, hard_only=True)
    assert all(r.extra["claims"]["violations"] == 0 for r in res.lengths)


def test_dyck2_claims_are_tight() -> None:
    """The measured values equal the claims exactly (γ = 1/(n+1), x_max = (n+1)², μ = 1/2)."""
    res = run_check(load_model(ROOT / "models" / "dyck2.json"), max_n=4, hard_only=True)
    for rec in res.lengths:
        n = rec.n
        c = rec.extra["claims"]["claims"]
        assert c["gamma_lower"] == {
            "claim": f"1/{n + 1}",
            "measured": f"1/{n + 1}",
            "status": "holds",
        }
        assert c["x_max_upper"]["measured"] == str((n + 1) ** 2) == c["x_max_upper"]["claim"]
        assert c["margin_lower"]["measured"] == "1/2"


def test_false_claims_are_findings(tmp_path: Path) -> None:
    d = dyck1()
    d["claims"]["gamma_lower"]["expr"] = "1/(n+1) + 1/1000"  # false by 1/1000
    d["claims"]["x_max_upper"]["expr"] = "n^2"  # false: x_max = (n+1)^2
    d["claims"]["margin_lower"] = {"expr": "2/3", "justification": "user"}  # μ = 1/2
    f = tmp_path / "false.json"
    f.write_text(json.dumps(d))
    out = tmp_path / "r.json"
    p = cli("check", str(f), "--max-n", "3", "--hard-only", "-q", "--json", str(out))
    assert p.returncode == 1, p.stderr
    data = json.loads(out.read_text())
    det = {x["claim"]: x for x in data["lengths"][2]["claims"]["violation_details"]}
    assert det["gamma_lower"]["measured"] == "1/4" and det["gamma_lower"]["n"] == 3
    assert det["gamma_lower"]["claimed"] == "γ(n) ≥ 251/1000"
    assert det["gamma_lower"]["witness"] == ["(", "(", "("]
    assert det["x_max_upper"]["measured"] == "16" and det["x_max_upper"]["claimed"].endswith("9")
    w = det["x_max_upper"]["witness"]
    assert len(w) == 3  # an input of length 3 attaining x_max: check it
    assert det["margin_lower"]["measured"] == "1/2" and len(det["margin_lower"]["witness"]) == 3
    assert (
        "n=3: claim gamma_lower (γ(n) ≥ 251/1000) fails: measured 1/4" in data["verdict"]["summary"]
    )


def test_an_almost_true_claim_passes() -> None:
    d = dyck1()
    d["claims"]["gamma_lower"]["expr"] = "1/(n+1) - 1/10^9"
    res = run_check(model_from_dict(d), max_n=3, hard_only=True)
    assert res.exit_code() == 0


# ---------------------------------------------------------------- certify


def test_dyck2_at_65536_theorem_tau_is_certified_with_the_chain() -> None:
    p = cli("certify", "models/dyck2.json", "--n", "65536", "--tau", "theorem")
    assert p.returncode == 0, p.stderr
    assert "certified" in p.stdout.splitlines()[0] and "NOT" not in p.stdout
    for step in ("Proposition D(a)", "Lemma G", "Theorem 4(iii)", "Corollary 5", "Theorem 5"):
        assert step in p.stdout, step
    assert "every claim used is proved" in p.stdout


def test_dyck2_own_tau_is_the_honest_answer() -> None:
    """At its own τ Dyck-2 is certified by the per-coordinate chain (Theorem S, issue 35)
    from n = 4 on; at n = 3 only by the stored enumeration, and the output says why the
    chains do not reach it (the dominant term); without that enumeration it is not certified."""
    p = cli("certify", "models/dyck2.json", "--n", "65536")
    assert p.returncode == 0, p.stdout
    assert "per coordinate (Theorem S) the read-out moves by" in p.stdout
    p = cli("certify", "models/dyck2.json", "--n", "3")
    assert p.returncode == 0, p.stdout
    assert "certified by enumeration (reports/claims/dyck2.soft.json)" in p.stdout
    assert (
        "the chains alone" in p.stdout and "not certified below the claimed margin 1/2" in p.stdout
    )
    assert "nor the per-coordinate chain's read-out bound" in p.stdout
    assert "propagation dominates" in p.stdout
    # a hard-only run certifies nothing: the chains' own verdict stands
    p = cli(
        "certify", "models/dyck2.json", "--n", "3", "--enumerated", "reports/claims/dyck2.hard.json"
    )
    assert p.returncode == 1, p.stdout
    assert "NOT certified" in p.stdout and "propagation dominates" in p.stdout


def test_certificate_values_dyck2() -> None:
    m = load_model(ROOT / "models" / "dyck2.json")
    c = certificate(m, 65536, "theorem").to_json()
    assert c["format"] == "exactattn-certificate/1"
    assert c["claims_at_n"] == {
        "gamma_lower": "1/65537",
        "x_max_upper": str(65537**2),
        "margin_lower": "1/2",
    }
    assert c["constants"]["T"] == 65538 and c["constants"]["m"] == 65537
    assert c["constants"]["eps_star"] == "1/4"
    assert c["layers"][0]["error_bound"] == "0"  # constant scores: no lower score, exact
    assert c["eps_le_1"]["theorem_4ii_invariant"] is True
    # Theorem 5: at τ ≤ τ_thm the paper chain gives ε_L ≤ ε* = 1/4
    assert Fraction(c["paper_chain"]["layers"][-1]) <= Fraction(1, 4)
    assert c["conditional_on"] == []


def test_user_claims_make_the_answer_conditional(tmp_path: Path) -> None:
    d = dyck1()
    d["claims"]["margin_lower"]["justification"] = "user"
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    p = cli("certify", str(f), "--n", "1000000000", "--tau", "theorem")
    assert p.returncode == 0, p.stderr
    assert "CONDITIONAL" in p.stdout and "margin_lower" in p.stdout


def test_range_own_tau_and_theorem_tau() -> None:
    # own τ: n ≤ 3 only by the stored enumeration (reports/claims/dyck2.soft.json), the rest
    # by Theorem S; without the enumeration n = 1 is not certified
    p = cli("certify", "models/dyck2.json", "--range", "1..40")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "certified for every n = 1..40" in p.stdout
    assert "certified by enumeration (reports/claims/dyck2.soft.json) for n = 1..3" in p.stdout
    m = load_model(ROOT / "models" / "dyck2.json")
    own = certify_range(m, 1, 40)
    assert own["first_failure"]["n"] == 1 and own["certified_through"] == 0
    r = certify_range(m, 1, 300, "theorem")
    assert r["first_failure"] is None and r["certified_through"] == 300 and r["evaluated"] == 300


@pytest.mark.slow
def test_range_dyck2_theorem_to_100000() -> None:
    p = cli("certify", "models/dyck2.json", "--range", "1..100000", "--tau", "theorem")
    assert p.returncode == 0 and "certified for every n = 1..100000" in p.stdout


def test_range_rejects_bad_text() -> None:
    for bad in ("5..1", "0..3", "a..b", "1-5"):
        p = cli("certify", "models/dyck2.json", "--range", bad)
        assert p.returncode == 2, bad


def _agrees(path: Path, max_n: int, theorem: bool) -> None:
    """Certified error bound ≥ the measured maximum after every layer, every n ≤ max_n, at
    the same τ (the model's own, or the exact lower end of τ_thm(n))."""
    model = load_model(path)
    prep = Prepared.of(model)
    for n in range(model.claims.from_n, max_n + 1):
        tau = certify_length(prep, n, "theorem").tau_exact if theorem else None
        c = certify_length(prep, n, tau).to_json()
        rec = run_check(model, max_n=n, min_n=n, tau=tau, bounds=True).lengths[0]
        assert rec.bounds is not None
        for li, layer in enumerate(rec.layers):
            bound = Fraction(c["layers"][li]["error_bound"])
            err = layer.error
            assert err is not None and err.lower is not None
            assert arb_endpoints(err.lower)[0] <= bound, (path.stem, n, li, err.lower, bound)
            # Theorem S's largest per-coordinate bound after the layer (proofs/07) too
            sharp = Fraction(c["sharp_chain"]["layers"][li])
            assert arb_endpoints(err.lower)[0] <= sharp, (path.stem, n, li, err.lower, sharp)
            # the same Theorem 3(b) chain fed the measured x_in, gaps and counts (check
            # --bounds) can only be smaller: the claims bound what check measures
            written = rec.bounds.layers[li].bound
            measured_chain = None if written is None else written.to_json()
            if measured_chain is not None:
                assert Fraction(measured_chain) <= bound * (1 + Fraction(1, 10**9)), (
                    path.stem,
                    n,
                    li,
                    measured_chain,
                    bound,
                )


# the two slowest models (≈ 6–7 s each) run under -m slow only, where the test below takes
# every model further; by default each kind keeps a model (rasp_anbn, induction_k1, …)
CERT_SLOW = ("rasp_dyck2", "induction_k2")


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in CERT_SLOW else p for p in MODELS],
    ids=IDS,
)
def test_certificate_is_above_the_measured_error(path: Path) -> None:
    if path.stem.startswith("rasp_"):  # the compiled programs: n ≤ 6 at τ_thm (Dyck-2 n ≤ 4)
        _agrees(path, 5 if path.stem == "rasp_dyck2" else 6, False)
        _agrees(path, 4 if path.stem == "rasp_dyck2" else 6, True)
        return
    _agrees(path, 4 if "induction" in path.stem or "counting" in path.stem else 6, False)
    _agrees(path, 3, True)


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_certificate_is_above_the_measured_error_slow(path: Path) -> None:
    # every n ≤ 10 at the model's own τ (the line), n ≤ 6 at τ_thm(n); the compiled
    # Dyck-2 (17 layers, 4 symbols) to n ≤ 6 at its own τ
    own = 6 if path.stem == "rasp_dyck2" else 10
    _agrees(path, own, False)
    _agrees(path, 6, True)


def test_certificate_report_md_and_tex(tmp_path: Path) -> None:
    cj = tmp_path / "c.json"
    p = cli("certify", "models/dyck2.json", "--n", "100", "--tau", "theorem", "--json", str(cj))
    assert p.returncode == 0
    for suffix in ("md", "tex"):
        out = tmp_path / f"c.{suffix}"
        q = cli("report", str(cj), "-o", str(out))
        assert q.returncode == 0, q.stderr
        text = out.read_text()
        assert "Proposition D(a)" in text and "Lemma G" in text


def test_exactattn_error_is_usage() -> None:
    assert issubclass(ModelError, ExactAttnError)


def test_checked_result_file_says_up_to_which_n(tmp_path: Path) -> None:
    r = tmp_path / "r.json"
    p = cli("check", "models/dyck2.json", "--max-n", "3", "--hard-only", "-q", "--json", str(r))
    assert p.returncode == 0, p.stderr
    q = cli("certify", "models/dyck2.json", "--n", "1000", "--tau", "theorem", "--checked", str(r))
    assert q.returncode == 0, q.stderr
    # γ, x_max, μ, coordinate_ranges, head_profiles
    assert q.stdout.count("also checked by enumeration for n ≤ 3") == 5
    other = cli("certify", "models/dyck1.json", "--n", "10", "--checked", str(r))
    assert other.returncode == 2 and "another model" in other.stderr


def test_range_json_and_first_failure(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # own τ without a usable enumeration (a hard-only run certifies nothing): n = 1 fails
    hard = "reports/claims/dyck1.hard.json"
    args = ("--range", "1..50", "--enumerated", hard, "--json", str(out))
    p = cli("certify", "models/dyck1.json", *args)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "not certified already at n = 1" in p.stdout
    data = json.loads(out.read_text())
    assert data["format"] == "exactattn-certificate/1"
    assert data["first_failure"]["n"] == 1 and data["certified_through"] == 0
    assert data["evaluated"] == 1
    assert data["certified_by_enumeration"]["lengths"] == []


def test_bundled_models_know_their_enumerated_lengths() -> None:
    """reports/claims/dyck1.hard.json verified the claims for n = 1..14 (the ledger's run)."""
    p = cli("certify", "models/dyck1.json", "--n", "100", "--tau", "theorem")
    assert p.returncode == 0
    assert "also checked by enumeration for n ≤ 14" in p.stdout
    assert "reports/claims/dyck1.hard.json" in p.stdout


def test_a_result_for_another_claim_does_not_count(tmp_path: Path) -> None:
    r = tmp_path / "r.json"
    assert (
        cli(
            "check", "models/dyck1.json", "--max-n", "3", "--hard-only", "-q", "--json", str(r)
        ).returncode
        == 0
    )
    d = dyck1()
    d["claims"]["gamma_lower"]["expr"] = "1/(2*n+2)"  # weaker, true, but not what was checked
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    q = cli("certify", str(f), "--n", "10", "--tau", "theorem", "--checked", str(r))
    assert q.returncode == 0
    assert "also checked by enumeration" not in q.stdout


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.integers(), max_size=3))
)
def test_any_claim_text_is_accepted_or_refused_with_its_path(text: object) -> None:
    """Whatever a file holds in a claim, loading either succeeds or names the JSON path."""
    d = dyck1()
    d["claims"]["gamma_lower"]["expr"] = text
    try:
        m = model_from_dict(d)
    except ModelError as exc:
        assert str(exc).startswith("claims.gamma_lower")
    else:
        assert m.claims.gamma_lower.expr.text == str(text)


def test_fuzz_claims_and_certify_never_crash(tmp_path: Path) -> None:
    """Random claims, lengths, ranges and τ through the CLI in-process: exit 0, 1 or 2, never a
    traceback or exit 4; exit 2 is one `error: …` line and writes no file."""
    import random

    from fuzzing import run_case

    rng = random.Random(23)
    exprs = [
        "1/(n+1)", "n", "0", "-1", "1/0", "log(n-1)", "exp(-n)", "sqrt(n)", "2^(10^6)",
        "1/(n+1)^3", "floor(log(n))", "10^300", "1/10^300", "max(n, 1/2)", "3/n", "", "n^n",
    ]  # fmt: skip
    taus = [None, "theorem", "1/n", "0", "-1", "1/(n^2*log(n+1))", "exp(-n)", "n", "bad("]
    for case in range(40):
        d = dyck1()
        key = rng.choice(["gamma_lower", "x_max_upper", "margin_lower"])
        d["claims"][key]["expr"] = rng.choice(exprs)
        if rng.random() < 0.2:
            d["claims"][key]["justification"] = rng.choice(
                ["user", "", {"file": "proofs/x.md"}, {"file": "/abs", "statement": "s"}, 3]
            )
        if rng.random() < 0.1:
            d["claims"]["from_n"] = rng.choice([0, 2, "x", 10**20])
        wd = tmp_path / f"c{case}"
        wd.mkdir()
        (wd / "m.json").write_text(json.dumps(d))
        args = ["certify", str(wd / "m.json"), "--json", str(wd / "out.json")]
        if rng.random() < 0.3:
            lo = rng.choice([1, 2, 5])
            args += ["--range", f"{lo}..{lo + rng.choice([0, 3, 30])}"]
        else:
            args += ["--n", str(rng.choice([1, 2, 7, 1000, 10**9, 0]))]
        t = rng.choice(taus)
        if t is not None:
            args += ["--tau", t]
        o = run_case("certify", args, wd, timeout=60)
        assert o.traceback is None and not o.timed_out, (args, o.traceback)
        assert o.code in (0, 1, 2), (args, o.code, o.stderr)
        if o.code == 2:
            assert o.stderr.startswith("error: ") and o.stderr.count("\n") <= 1, o.stderr
            assert not o.out_exists, args
        else:
            assert json.loads(o.out_text or "{}")["format"] == "exactattn-certificate/1"


def test_check_prints_where_the_claims_held() -> None:
    p = cli("check", "models/dyck1.json", "--max-n", "3", "--hard-only")
    assert p.returncode == 0
    assert "claims (γ(n) ≥ 1/(n+1), x_max(n) ≤ (n+1)^2, μ(n) ≥ 1/2): hold at n = 1..3" in p.stdout


def test_tau_grid_above_tau_thm() -> None:
    """The grid search warms up from τ_thm(n): every listed grid τ certified, the next not."""
    from flint import arb

    m = load_model(ROOT / "models" / "dyck2.json")
    prep = Prepared.of(m)
    c = certify_length(prep, 65536, "theorem").to_json()
    g = c["tau_grid"]
    last, fail = g["last_certified"]["k"], g["first_not_certified"]["k"]
    assert fail == last + 1
    t_thm = Fraction(c["tau_theorem_lower"])
    for k in range(last - 3, last + 1):
        t = (arb(k) / 8 * arb(2).log()).exp()
        assert t > arb(t_thm.numerator) / t_thm.denominator
        assert certify_length(prep, 65536, brief=True, tau_ball=t).certified
    t = (arb(fail) / 8 * arb(2).log()).exp()
    assert not certify_length(prep, 65536, brief=True, tau_ball=t).certified
    # at n = 65536 the one-number chain reaches 8.43e-8, between τ_thm = 2.35e-8 and the own
    # τ = 2.75e-7; Theorem S reaches 4.01e-7, past the own τ (and fails at 4.37e-7)
    assert Fraction(275, 10**9) < Fraction(g["last_certified"]["tau"]["upper"])
    assert Fraction(g["last_certified"]["tau"]["upper"]) < Fraction(41, 10**8)


def test_certificate_report_escapes_user_strings(tmp_path: Path) -> None:
    d = dyck1()
    d["name"] = "x|*_$&#{}<b>"
    d["claims"]["margin_lower"]["justification"] = {"file": "proofs/a_b.md", "statement": "L|$<i>"}
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    cj = tmp_path / "c.json"
    assert (
        cli("certify", str(f), "--n", "10", "--tau", "theorem", "--json", str(cj)).returncode == 0
    )
    assert cli("report", str(cj), "-o", str(tmp_path / "c.md")).returncode == 0
    assert cli("report", str(cj), "-o", str(tmp_path / "c.tex")).returncode == 0
    md = (tmp_path / "c.md").read_text()
    assert "<b>" not in md and "<i>" not in md and "x\\|" in md
    tex = (tmp_path / "c.tex").read_text()
    assert "x\\textbar{}" in tex and "\\$" in tex and "L\\textbar{}\\$" in tex
    assert "$<" not in tex


def test_range_messages_with_and_without_enumerated_lengths(tmp_path: Path) -> None:
    """A range certified with no enumerated length ends exit 0 (it used to crash, exit 4, on
    the missing failure); one that fails after enumerated lengths names the failure too."""
    p = cli("certify", "models/rasp_count.json", "--range", "1..4")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "certified for every n = 1..4" in p.stdout and "by enumeration" not in p.stdout
    # the stored own-τ run cut to n ≤ 2: n = 1, 2 by enumeration, n = 3 fails (Theorem S
    # starts at n = 4 on Dyck-2)
    d = json.loads((ROOT / "reports" / "claims" / "dyck2.soft.json").read_text("utf-8"))
    d["lengths"] = [r for r in d["lengths"] if r["n"] <= 2]
    d["settings"]["max_n"] = 2
    short = tmp_path / "short.json"
    short.write_text(json.dumps(d, ensure_ascii=False), "utf-8")
    p = cli("certify", "models/dyck2.json", "--range", "1..5", "--enumerated", str(short))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "first length not certified: n = 3" in p.stdout and "certified for n = 1..2" in p.stdout
    assert "for n = 1..2; every other length by a chain" in p.stdout
