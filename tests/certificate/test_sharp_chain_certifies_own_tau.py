"""Theorem S, the per-coordinate chain (proofs/07-sharp-chain.md; issue 35).

* sound: on every bundled model, at its own τ, every per-coordinate bound after every layer is
  ≥ the certified error of that coordinate measured by evaluating every input (n ≤ 3 by
  default, further under -m slow);
* exact values derived by hand (Dyck-2's first lookup, the LTL models' exact restoration);
* the claims it needs: parsed with their JSON paths, held by ``check`` on every enumerated
  length, and a false one is exit 1 naming n and a witness input;
* the memoized FFN case split answers as a fresh one does.
"""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb, ctx
from paths import ROOT

from exactattn.bounds.chain import ChainPlan, CoordRange, Profile, profile_tail, sharp_chain
from exactattn.certificate.certify import Prepared, certify_length
from exactattn.certificate.sharp import SharpPlan
from exactattn.constructions.dyck import build_dyck
from exactattn.core.errors import ModelError
from exactattn.core.numbers import arb_endpoints, to_arb
from exactattn.engine.temperature import Temperatures
from exactattn.model import load_model, model_from_dict
from exactattn.model.claimed import expr_ends
from exactattn.run.check import run_check
from exactattn.run.evaluate import evaluate

ALL_MODELS = sorted((ROOT / "models").glob("*.json"))
#: the bundled models with Theorem S's claims: every one but the bounded RASP encodings
#: (``--embedding bounded``), which Proposition R(f) does not cover
MODELS = [p for p in ALL_MODELS if not p.stem.endswith("_bounded")]
IDS = [p.stem for p in MODELS]
SLOW_MODELS = ("rasp_dyck2", "induction_k2")


def _sharp(model, n: int):  # type: ignore[no-untyped-def]
    """Theorem S at n and the model's own τ, with Lemma G's bounds as certify computes them."""
    prep = Prepared.of(model)
    cl = model.claims
    with ctx.workprec(128):
        gamma = expr_ends(cl.gamma_lower.expr, n, "g")[0]
        x0 = expr_ends(cl.x_max_upper.expr, n, "x")[1]
        xs = [x0]
        for c in prep.consts:
            a, cc = c.growth
            xs.append(a * xs[-1] + cc)
        taus = Temperatures(model, None).at(n, 128)
        return prep.sharp.at(n, gamma, xs, taus)


def _measured(model, n: int) -> list[list[Fraction]]:  # type: ignore[no-untyped-def]
    """Per boundary (after each layer) and coordinate: the largest certified lower end of
    |soft − hard| over every input and position (a lower bound on the true error)."""
    L, d = len(model.layers), model.d
    best = [[Fraction(0)] * d for _ in range(L + 1)]
    for w in itertools.product(model.alphabet, repeat=n):
        ev = evaluate(model, list(w))
        with ctx.workprec(ev.prec):
            for li in range(1, L + 1):
                for hrow, srow in zip(ev.hard[li], ev.soft[li], strict=True):
                    for c in range(d):
                        diff = srow[c] - to_arb(hrow[c])
                        lo = arb_endpoints(abs(diff))[0]
                        if lo > best[li][c]:
                            best[li][c] = lo
    return best


def _sound_per_coordinate(path: Path, ns: range) -> None:
    model = load_model(path)
    for n in ns:
        if n < model.claims.from_n:
            continue
        res = _sharp(model, n)
        meas = _measured(model, n)
        for li in range(1, len(model.layers) + 1):
            for c in range(model.d):
                bound = arb_endpoints(res.errors[li][c])[1]
                assert meas[li][c] <= bound, (path.stem, n, li - 1, c, meas[li][c], bound)


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW_MODELS else p for p in MODELS],
    ids=IDS,
)
def test_bound_per_coordinate_is_above_the_measured_error(path: Path) -> None:
    _sound_per_coordinate(path, range(1, 4 if "induction" not in path.stem else 3))


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_bound_per_coordinate_slow(path: Path) -> None:
    _sound_per_coordinate(path, range(1, 6 if "dyck2" not in path.stem else 5))


def test_dyck2_first_lookup_by_hand() -> None:
    """Layer 1 of Dyck-2 (`depth`) at the own τ: exact inputs (layer 0 is flat), so σ = 0 and
    the depth error is the soft mass off the top, R/(1 + R) with R = 2q/(1 − q²),
    q = e^{−1/((n+1)τ)} = (n+1)^{−5}, times the width n + 1 of `pos`; depth_sq: (n+1)²."""
    model = load_model(ROOT / "models" / "dyck2.json")
    c = model.coordinates
    for n in (4, 9, 100):
        res = _sharp(model, n)
        with ctx.workprec(200):
            q = arb(n + 1) ** -5
            R = 2 * q / (1 - q * q)
            mass = R / (1 + R)
            for name, width in (("depth", n + 1), ("depth_sq", (n + 1) ** 2)):
                got = res.errors[2][c.index(name)]
                want = mass * width
                assert abs(got - want) < want * arb(10) ** -20, (n, name, got, want)


def test_ltl_and_induction_restore_exactly() -> None:
    """Theorem C through S5's case split: the read-out error bound is exactly 0 at every n."""
    for stem in ("ltl_since_until_temperature", "ltl_counting_positions", "induction_k1"):
        model = load_model(ROOT / "models" / f"{stem}.json")
        for n in (1, 2, 7, 1000):
            assert _sharp(model, n).readout == 0, (stem, n)


def test_profile_tail_closed_form() -> None:
    """S2: r e^{−a/τ}/(1 − e^{−b/τ}) for b > 0, m e^{−a/τ} otherwise, the smaller one."""
    with ctx.workprec(128):
        t = arb(1) / 3
        got = profile_tail(Profile(Fraction(1), Fraction(1, 2), 2), 100, t)
        want = 2 * (-arb(3)).exp() / (1 - (-arb(3) / 2).exp())
        assert abs(got - want) < arb(10) ** -30
        assert profile_tail(Profile(Fraction(1), Fraction(0), 1), 7, t) >= 7 * (-arb(3)).exp()
        # with few keys m e^{−a/τ} is smaller than the geometric series
        got = profile_tail(Profile(Fraction(1), Fraction(1, 100), 1), 2, t)
        assert abs(got - 2 * (-arb(3)).exp()) < arb(10) ** -30


def test_memoized_case_split_answers_as_a_fresh_one() -> None:
    """The trie of S5 decisions and the memo of FFN answers change no bound: a plan that has
    seen many lengths gives, at each n, the exact bounds of a plan built for that n alone."""
    model = load_model(ROOT / "models" / "rasp_dyck1.json")
    warm = SharpPlan.of(model)
    T = Temperatures(model, None)
    with ctx.workprec(128):
        for n in (3, 40, 7, 41, 3, 1):
            x = [Fraction(10**30)] * (len(model.layers) + 1)
            g = Fraction(1, n + 1)
            a = warm.at(n, g, x, T.at(n, 128))
            b = SharpPlan.of(model).at(n, g, x, T.at(n, 128))
            for ea, eb in zip(a.errors, b.errors, strict=True):
                assert all(u == v for u, v in zip(ea, eb, strict=True)), n


def test_ranges_beyond_the_claims_use_lemma_g() -> None:
    """A coordinate without a range claim gets the symmetric bound of its boundary."""
    d = build_dyck(["()"])
    del d["claims"]["coordinate_ranges"]["ranges"]["depth_sq"]
    model = model_from_dict(d)
    sp = SharpPlan.of(model)
    rs = sp.ranges(3, [Fraction(7), Fraction(9)])
    k = model.coordinates.index("depth_sq")
    assert rs[0][0][k] == CoordRange(Fraction(-7), Fraction(7))
    assert rs[1][0][k] == CoordRange(Fraction(-9), Fraction(9))
    assert rs[1][0][model.coordinates.index("depth")] == CoordRange(
        Fraction(0), Fraction(4), tuple(Fraction(v) for v in range(5))
    )


def test_a_plan_without_profiles_uses_gamma() -> None:
    """Without head_profiles every non-flat head gets (γ, 0, 1): tail (T − 1)·e^{−γ/τ}."""
    d = build_dyck(["()", "[]"])
    del d["claims"]["head_profiles"]
    model = model_from_dict(d)
    sp = SharpPlan.of(model)
    prof = sp.profiles_at(5, Fraction(1, 6))
    assert prof[(0, 0)] is None  # depth_ratio: a zero query, flat
    assert prof[(1, 0)] == Profile(Fraction(1, 6))
    with ctx.workprec(128):
        plan = ChainPlan.of(model)
        res = sharp_chain(
            plan,
            sp.ranges(5, [Fraction(36)] * 6),
            prof,
            6,
            Temperatures(model, None).at(5, 128),
        )
    assert res.readout > 0


# --------------------------------------------------------------------------- the claims


def _dyck() -> dict:
    return build_dyck(["()", "[]"])


CR, HP = "claims.coordinate_ranges", "claims.head_profiles"
BAD = [
    (("coordinate_ranges", "ranges"), ("nope", {"min": "0", "max": "1"}), f"{CR}.ranges.nope"),
    (("coordinate_ranges", "ranges", "pos"), ("max", "n+"), f"{CR}.ranges.pos.max"),
    (("coordinate_ranges", "ranges", "pos"), ("integer", "yes"), f"{CR}.ranges.pos.integer"),
    (("coordinate_ranges",), ("justification", None), CR),
    (("head_profiles", "heads", 0), ("layer", 3), f"{HP}.heads[0].layer"),
    (("head_profiles", "heads", 0), ("head", 1), f"{HP}.heads[0].head"),
    (("head_profiles", "heads", 0), ("per_rank", 0), f"{HP}.heads[0].per_rank"),
    (("head_profiles", "heads", 0), ("gap", "log("), f"{HP}.heads[0].gap"),
    (("head_profiles",), ("extra", 1), f"{HP}.extra"),
]


@pytest.mark.parametrize(("where", "change", "path"), BAD)
def test_bad_chain_claims_name_their_json_path(where: tuple, change: tuple, path: str) -> None:
    d = _dyck()
    obj = d["claims"]
    for k in where:
        obj = obj[k]
    key, value = change
    if value is None:
        del obj[key]
    else:
        obj[key] = value
    with pytest.raises(ModelError) as e:
        model_from_dict(d)
    assert e.value.path == path, e.value


def test_a_head_listed_twice_is_refused() -> None:
    d = _dyck()
    hs = d["claims"]["head_profiles"]["heads"]
    hs.append(dict(hs[0]))
    with pytest.raises(ModelError) as e:
        model_from_dict(d)
    assert e.value.path == f"{HP}.heads[3]"


def test_the_claims_round_trip() -> None:
    d = _dyck()
    model = model_from_dict(d)
    got = model.claims.to_json()
    assert got["coordinate_ranges"] == json.loads(json.dumps(d["claims"]["coordinate_ranges"]))
    assert got["head_profiles"] == d["claims"]["head_profiles"]


def test_which_bundled_models_make_the_chain_claims() -> None:
    """Every bundled model makes Theorem S's claims except the bounded RASP encodings, which
    keep Proposition RB's claims only (the compiler does not emit R(f)'s for them)."""
    for path in ALL_MODELS:
        cl = json.loads(path.read_text(encoding="utf-8"))["claims"]
        has = {"coordinate_ranges", "head_profiles"} <= set(cl)
        assert has == (path in MODELS), path.stem
        assert not ({"coordinate_ranges", "head_profiles"} & set(cl)) or has, path.stem
    assert len(MODELS) >= 18 and len(ALL_MODELS) - len(MODELS) >= 8


def test_bundled_chain_claims_hold_on_every_enumerated_length() -> None:
    """check verifies coordinate_ranges and head_profiles (hard meaning, n ≤ 4 or 5)."""
    for path in MODELS:
        n = 3 if path.stem in SLOW_MODELS else 5
        data = run_check(load_model(path), max_n=n, hard_only=True).to_json()
        for rec in data["lengths"]:
            items = rec["claims"]["claims"]
            for key in ("coordinate_ranges", "head_profiles"):
                assert items[key]["status"] == "holds", (path.stem, rec["n"], items[key])
        assert data["verdict"]["status"] == "clean", (path.stem, data["verdict"])


def test_false_chain_claims_are_findings_with_witnesses() -> None:
    """A range or profile that fails at an enumerated n is exit 1 naming n and an input."""
    d = _dyck()
    d["claims"]["coordinate_ranges"]["ranges"]["depth"]["max"] = "n"  # true max: n + 1
    d["claims"]["head_profiles"]["heads"][1]["step"] = "2/(n+1)"  # true k-th drop: k/(n+1)
    data = run_check(model_from_dict(d), max_n=4, hard_only=True).to_json()
    assert data["verdict"]["status"] == "problems"
    det = {
        (v["claim"], v["n"]): v for r in data["lengths"] for v in r["claims"]["violation_details"]
    }
    rng = det[("coordinate_ranges", 3)]
    assert rng["measured"] == "[0, 4]" and rng["witness"]["coordinate"] == "depth"
    assert rng["witness"]["value"] == "4" and rng["witness"]["input"] == ["(", "(", "("]
    prof = det[("head_profiles", 4)]
    assert prof["measured"] == "2/5"  # the second key below the top: 2/5 < 1/5 + 2/5
    w = prof["witness"]
    assert w["k"] == 2 and w["drop"] == "2/5" and len(w["input"]) == 4
    assert ("head_profiles", 3) not in det  # at n = 3 the drops 1/4, 3/4, 7/4 do hold


def test_a_false_unique_top_in_a_profile_is_a_finding() -> None:
    d = _dyck()
    d["claims"]["head_profiles"]["heads"][2]["unique"] = True  # any_bad: ties at the top
    data = run_check(model_from_dict(d), max_n=2, hard_only=True).to_json()
    v = data["lengths"][-1]["claims"]["violation_details"][0]
    assert v["claim"] == "head_profiles" and "unique" in v["claimed"]
    assert v["witness"]["top_keys"] >= 2


# --------------------------------------------------------------------------- certify


def test_certify_says_which_chain_certified() -> None:
    prep = Prepared.of(load_model(ROOT / "models" / "dyck2.json"))
    c = certify_length(prep, 4).to_json()
    assert c["status"] == "certified" and c["certified_by"] == "Theorem S (per-coordinate chain)"
    s = c["sharp_chain"]
    assert Fraction(s["readout_bound"]) < Fraction(1, 2) and s["dominant"] in (
        "tail",
        "propagation",
    )
    assert len(s["layers"]) == 5 and [h["option"] for h in s["heads"]][0] == "flat"
    t = certify_length(prep, 4, "theorem").to_json()
    assert t["certified_by"] in ("Theorem 3(b) + 4(iii) (one-number chain)", "Theorem 4(ii)")
    bad = certify_length(prep, 3).to_json()
    assert bad["status"] == "not certified" and bad["certified_by"] is None
    assert "propagation dominates" in bad["reason"] and "layer 4, head 0" in bad["reason"]


def test_certify_ranges_at_the_own_tau() -> None:
    from exactattn.certificate.certify import certify_range

    for stem, lo in (("dyck2", 4), ("rasp_dyck2", 1), ("ltl_counting_temperature", 1)):
        r = certify_range(load_model(ROOT / "models" / f"{stem}.json"), lo, lo + 60)
        assert r["first_failure"] is None, (stem, r["first_failure"])
    r = certify_range(load_model(ROOT / "models" / "dyck2.json"), 1, 10)
    assert r["first_failure"]["n"] == 1


def test_an_edited_claim_changes_the_certificate() -> None:
    """The chain uses the claims as given: a wider range makes the bound larger."""
    d = _dyck()
    e = copy.deepcopy(d)
    e["claims"]["coordinate_ranges"]["ranges"]["depth"]["max"] = "2*(n+1)"
    a = _sharp(model_from_dict(d), 6).readout
    b = _sharp(model_from_dict(e), 6).readout
    assert b > a
