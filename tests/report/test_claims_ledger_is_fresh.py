"""The claims ledger docs/claims.md is what `python -m exactattn.report.claims` renders from the
stored results in reports/claims/, and those results are what the configured runs produce."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from paths import ROOT

from exactattn.bounds.closedforms import closed_forms
from exactattn.core.numbers import parse_decimal
from exactattn.report import claims
from exactattn.results.bounds import TauStarRecord
from exactattn.results.sequences import values_of_rows


def test_ledger_is_current() -> None:
    """Fails when docs/claims.md differs from a fresh rendering (run the command it names)."""
    assert claims.build(ROOT, verify=True), (
        "docs/claims.md is stale: run `python -m exactattn.report.claims`"
        " (or `exactattn build claims`)"
    )


def test_stored_results_match_the_configured_runs() -> None:
    runs = claims.load_runs(ROOT)
    for stem, kinds in claims.RUNS.items():
        for kind, kwargs in kinds.items():
            assert kind in runs.get(stem, {}), f"missing {claims.data_path(ROOT, stem, kind)}"
            res = runs[stem][kind]
            s = res["settings"]
            assert s["max_n"] == kwargs["max_n"] and s["min_n"] == 1, (stem, kind)
            assert s["hard_only"] == kwargs.get("hard_only", False), (stem, kind)
            assert s["bounds"] == kwargs.get("bounds", False), (stem, kind)
            assert s["find_tau"] == kwargs.get("find_tau", False), (stem, kind)
            assert (s["tau_override"] == "theorem") == kwargs.get("tau_theorem", False)
            assert not res["interrupted"]


def test_stored_closed_forms_match_the_code() -> None:
    """The closed forms in the stored results are what closedforms.py computes today."""
    runs = claims.load_runs(ROOT)
    for stem in ("dyck1", "ltl_counting_temperature", "induction_k2", "dyck1_unit"):
        for kind, res in runs[stem].items():
            assert res["closed_forms"] == closed_forms(values_of_rows(res["lengths"])), (stem, kind)


def test_ledger_numbers() -> None:
    """Spot checks of what the ledger says, recomputed from the stored results."""
    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    hard = runs["dyck1"]["hard"]["closed_forms"]
    assert hard["gamma"]["expression"] == "1/(n + 1)" and max(hard["gamma"]["verified_on"]) == 14
    assert "`1/(n + 1)` (fitted n = 1, 2; verified exactly n = 3..14)" in text
    # τ*/τ_thm at n = 3 for Dyck-1 from the raw strings
    row = next(r for r in runs["dyck1"]["soft"]["lengths"] if r["n"] == 3)
    inv = row["tau_star"]["invariant"]  # the τ*_inv column
    t_lo, t_hi = Fraction(inv["lower"]), Fraction(inv["upper"])
    lo = t_lo / Fraction(row["bounds"]["tau_theorem"]["upper"])
    hi = t_hi / Fraction(row["bounds"]["tau_theorem"]["lower"])
    assert f"3: {claims.short(lo, False)}–{claims.short(hi, True)}" in text
    assert 1 < lo < hi
    # every claim of the ledger has a row
    for c in claims.CLAIMS:
        assert f"| {c.paper} | {c.statement} |" in text
    assert "not as stated" in text  # Cor 17 and S-RASP say why


def test_tau_star_shapes_in_the_ledger() -> None:
    old = {"tau_star": {"lower": "2", "upper": "3", "grid": "2^(k/8)"}}
    new = {
        "tau_star": {
            "decisions": {"lower": "2", "upper": "4"},
            "invariant": {"lower": "5/2", "upper": "3"},
        }
    }
    open_top = {"tau_star": {"lower": "65536", "upper": None}}

    def star(row: dict) -> object:
        ts = row["tau_star"]
        return claims.tau_star(TauStarRecord.from_json(ts) if ts else None)

    assert star(old) == (Fraction(2), Fraction(3))
    assert star(new) == (Fraction(2), Fraction(3))
    assert star(open_top) == (Fraction(65536), None)
    assert star({"tau_star": None}) is None


def test_check_mode_detects_staleness(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / claims.DATA_DIR).mkdir(parents=True)
    for p in (ROOT / claims.DATA_DIR).glob("dyck1.*.json"):
        (tmp_path / claims.DATA_DIR / p.name).write_text(p.read_text("utf-8"), "utf-8")
    assert claims.main(["--root", str(tmp_path)]) == 0
    assert claims.main(["--root", str(tmp_path), "--check"]) == 0
    path = tmp_path / claims.LEDGER
    path.write_text(path.read_text("utf-8").replace("1/(n + 1)", "1/n"), "utf-8")
    assert claims.main(["--root", str(tmp_path), "--check"]) == 1


@pytest.mark.slow
def test_stored_results_are_reproduced(tmp_path: Path) -> None:
    """Rerun every configured check (several minutes) and compare with reports/claims/."""
    (tmp_path / "models").symlink_to(ROOT / "models")
    claims.rerun(tmp_path)
    for stem, kinds in claims.RUNS.items():
        for kind in kinds:
            fresh = json.loads(claims.data_path(tmp_path, stem, kind).read_text("utf-8"))
            stored = json.loads(claims.data_path(ROOT, stem, kind).read_text("utf-8"))
            assert fresh == stored, (stem, kind)


# --- issue 24: every trend and verdict sentence agrees with the stored numbers ----------------


def _steps(points: list[tuple[int, Fraction, Fraction]]) -> list[str]:
    """Independent of claims.trend_text: 'up', 'down' or 'open' per consecutive pair."""
    out = []
    for (_, lo0, hi0), (_, lo1, hi1) in zip(points, points[1:], strict=False):
        out.append("up" if lo1 > hi0 else "down" if hi1 < lo0 else "open")
    return out


def _agrees(sentence: str, steps: list[str]) -> bool:
    """The words of a generated trend sentence against the independently decided steps."""
    if "rises at every step" in sentence:
        return set(steps) == {"up"}
    if "falls at every step" in sentence:
        return set(steps) == {"down"}
    if "is not monotone" in sentence:
        return "up" in steps and "down" in steps
    if "never rises" in sentence:
        return "up" not in steps and "down" in steps
    if "never falls" in sentence:
        return "down" not in steps and "up" in steps
    if "has no certified trend" in sentence:
        return set(steps) == {"open"}
    return len(steps) == 0


def test_trend_text_cases() -> None:
    F = Fraction
    up = [(1, F(1), F(2)), (2, F(3), F(4)), (3, F(5), F(6))]
    assert claims.trend_text(up) == "rises at every step from n = 1 to 3"
    assert claims.trend_text(up[::-1]).startswith("falls at every step")
    zig = [(1, F(1), F(2)), (2, F(3), F(4)), (3, F(1), F(2))]
    assert claims.trend_text(zig).startswith("is not monotone from n = 1 to 3")
    # end points alone would say "falls"; the middle step is a rise
    ends = [(1, F(10), F(11)), (2, F(20), F(21)), (3, F(1), F(2))]
    assert "is not monotone" in claims.trend_text(ends)
    flat = [(1, F(1), F(3)), (2, F(2), F(4))]
    assert claims.trend_text(flat).startswith("has no certified trend")


def _brackets(soft: dict, which: str) -> list[tuple[int, Fraction, Fraction]]:
    out = []
    for r in soft["lengths"]:
        part = r["tau_star"][which]
        t = r["bounds"]["tau_theorem"]
        if part["upper"] is None or part["lower"] is None:
            continue
        out.append(
            (
                r["n"],
                Fraction(part["lower"]) / Fraction(t["upper"]),
                Fraction(part["upper"]) / Fraction(t["lower"]),
            )
        )
    return out


def test_every_ratio_sentence_matches_the_data() -> None:
    """For every model and both τ* (columns τ*_inv and τ*_dec of the second table): the
    sentence's trend is what the certified brackets say, step by step."""
    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    for stem in claims.RUNS:
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{stem}` |"))
        cells = [c.strip() for c in row.split("|")]
        inv_cell, dec_cell = cells[6], cells[7]
        soft = runs[stem]["soft"]
        for which, cell in (("invariant", inv_cell), ("decisions", dec_cell)):
            pts = _brackets(soft, which)
            assert _agrees(cell, _steps(pts)), (stem, which, cell, _steps(pts))
            for n, lo, hi in pts:
                assert f"{n}: {claims.short(lo, False)}–{claims.short(hi, True)}" in cell


def test_dyck2_tau_dec_column_is_separate() -> None:
    """The issue's example: τ*_dec/τ_thm for Dyck-2 spans 91–269, τ*_inv/τ_thm 52–99."""
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `dyck2` |"))
    assert "5: 247–270" in row.split("|")[7] and "5: 51.9–56.7" in row.split("|")[6]


def _layer_errors(result: dict, kind: str) -> dict[int, list[tuple[Fraction, Fraction]]]:
    out: dict[int, list[tuple[Fraction, Fraction]]] = {}
    for r in result["lengths"]:
        for layer in r["layers"]:
            if layer["kind"] == kind and layer["error"] is not None:
                e = layer["error"]
                out.setdefault(r["n"], []).append((Fraction(e["lower"]), Fraction(e["upper"])))
    return out


def test_lemma6_sentence_matches_the_data() -> None:
    """Lemma 6: the printed maximum is an upper bound on every stored attention error, is
    below e^(−3) as printed, and each model's trend sentence is what the data say."""
    import re

    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| Lemma 6 |"))
    m = re.search(r"τ = 1/n: ([0-9.]+) < e\^\(−3\) = ([0-9.]+)…", row)
    assert m, row
    shown, e3 = Fraction(m.group(1)), Fraction(m.group(2))
    assert shown < e3 <= Fraction(4978706836786394, 10**17)
    for stem in ("ltl_prev_next_temperature", "ltl_since_until_temperature",
                 "ltl_counting_temperature"):  # fmt: skip
        errs = _layer_errors(runs[stem]["soft"], "attention")
        assert all(hi <= shown for v in errs.values() for _, hi in v)
        pts = [(n, max(lo for lo, _ in v), max(hi for _, hi in v)) for n, v in sorted(errs.items())]
        sentence = row.split(f"`{stem}`")[-1].split(";")[0]
        assert _agrees(sentence, _steps(pts)), (stem, sentence, _steps(pts))
    # the reading: at the own τ the largest error grows at every step toward e^(−3)
    assert "`ltl_prev_next_temperature` rises at every step" in row


def test_lemma9_sentence_matches_the_data() -> None:
    """Lemma 9: 0 is claimed only for the own-τ runs (every FFN error's upper end is 0
    there); the τ_thm runs have a positive bound, which the sentence states."""
    import re

    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| Lemma 9 |"))
    stems = [s for s in claims.RUNS if s.startswith("ltl_")]
    own = [hi for s in stems for v in _layer_errors(runs[s]["soft"], "ffn").values() for _, hi in v]
    thm = [hi for s in stems for v in _layer_errors(runs[s]["thm"], "ffn").values() for _, hi in v]
    assert max(own) == 0 and "at the own τ runs 0" in row
    m = re.search(r"at the τ_thm runs ≤ ([0-9.e-]+)", row)
    assert m and max(thm) > 0 and max(thm) <= Fraction(parse_decimal(m.group(1)))


def test_thm26_sentence_names_its_tau() -> None:
    """Thm 26: "clean on k of N" counts the stored τ_thm verdicts, and each ε ≤ 1 sentence
    names the τ whose runs it summarises (both read from the stored invariant states)."""
    runs = claims.load_runs(ROOT)
    text = (ROOT / claims.LEDGER).read_text("utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| Thm 26 |"))
    clean = sum(runs[s]["thm"]["verdict"]["status"] == "clean" for s in claims.RUNS)
    assert f"clean on {clean} of {len(claims.RUNS)} models" in row
    for kind, label in (("thm", "at τ_thm"), ("soft", "at the own τ")):
        holds = all(
            r.get("invariant") in ("holds", None)
            for s in claims.RUNS
            for r in runs[s][kind]["lengths"]
        )
        assert (f"{label} ε ≤ 1 certified after every layer" in row) == holds
