"""Focused tests for modules that no test imported (issue 21): certificate.verify,
cli.certify, cli.extra, cli.common, report.certificate, report.escape, results.claims,
core.limits, core.guard. Real values, each checked against an independent computation.
"""

from __future__ import annotations

import copy
import itertools
import json
import signal
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import click
import pytest
from paths import ROOT

from exactattn.certificate.certify import certificate, range_certificate
from exactattn.certificate.verify import (
    _compare,
    margin_witness,
    summary_line,
    verify_claims,
    x_max_witness,
)
from exactattn.cli.certify import _range, checked_to, known_result
from exactattn.cli.common import _exact_cell
from exactattn.cli.extra import _check_range, _parse_ns, _taus
from exactattn.core.errors import ModelError, UsageError
from exactattn.core.guard import EXIT_BAD_INPUT, bad_input, deferred_interrupt
from exactattn.core.limits import check_tree, clip, dedup_pairs
from exactattn.engine.hard import CompiledModel
from exactattn.engine.longinput import hard_output, run_hard_long
from exactattn.model import load_model, model_from_dict
from exactattn.report.certificate import certificate_latex, certificate_markdown
from exactattn.report.escape import plain, text
from exactattn.results.claims import (
    ClaimsEntry,
    GapBoundEntry,
    GapViolation,
    HeadGapBound,
    length_entries,
)
from exactattn.results.settings import TauChoice
from exactattn.run.check import run_check

DYCK1 = ROOT / "models" / "dyck1.json"


def _dyck1(**claims: str) -> dict:
    d = json.loads(DYCK1.read_text(encoding="utf-8"))
    for k, expr in claims.items():
        d["claims"][k]["expr"] = expr
    return d


# ---------------------------------------------------------------------------- certificate.verify


def _embedding_max(model, word) -> Fraction:
    """max |x⁰| of one input, from the model's token and position tables (by hand)."""
    n = len(word)
    pos = model.position_vectors(n)
    toks = ([model.bos] if model.bos is not None else []) + list(word)
    toks += [model.eos] if model.eos is not None else []
    return max(
        abs(a + b)
        for t, p in zip(toks, pos, strict=True)
        for a, b in zip(model.token_embedding[t], p, strict=True)
    )


def test_x_max_witness_reaches_the_measured_x_max() -> None:
    """The built witness's embedding reaches x_max(n) that check measured over every input."""
    model = load_model(DYCK1)
    for n in (3, 5):
        rec = run_check(model, max_n=n, min_n=n, hard_only=True).lengths[0]
        w = x_max_witness(model, n)
        assert len(w) == n and _embedding_max(model, w) == rec.x_max


def test_margin_witness_is_the_first_input_below() -> None:
    """The first input in enumeration order whose hard margin is below the bound."""
    model = load_model(DYCK1)
    cm = CompiledModel(model)
    n, below = 4, Fraction(1)
    word, mg = margin_witness(model, n, below)
    assert mg < below and hard_output(model, run_hard_long(cm, tuple(word)))[1] == mg
    for w in itertools.product(model.alphabet, repeat=n):
        if list(w) == word:
            break
        assert hard_output(model, run_hard_long(cm, w))[1] >= below
    assert margin_witness(model, n, Fraction(0)) is None  # margins are never negative


def test_a_false_claim_is_a_violation_with_its_witness() -> None:
    """γ(n) ≥ 1/n is false for Dyck-1 (γ(4) = 1/5 < 1/4): one violation naming the input
    whose gap is the measured γ(4); the true claims hold."""
    model = model_from_dict(_dyck1(gamma_lower="1/n"))
    rec = run_check(model, max_n=4, min_n=4, hard_only=True).lengths[0]
    assert rec.gamma == Fraction(1, 5)
    e = verify_claims(model, rec)
    assert isinstance(e, ClaimsEntry) and e.applies and e.violations == 1
    (v,) = e.violation_details
    assert (v.claim, v.n, v.claimed, v.measured) == ("gamma_lower", 4, "γ(n) ≥ 1/4", rec.gamma)
    lh = run_hard_long(CompiledModel(model), tuple(v.witness), want_gap=True)
    assert min(h.gap for h in lh.heads.values() if h.gap is not None) == Fraction(1, 5)
    assert e.items["x_max_upper"].status == "holds" and e.items["margin_lower"].status == "holds"
    assert ClaimsEntry.from_json(e.to_json()).to_json() == e.to_json()
    c = model.claims
    assert _compare(c.gamma_lower, 4, Fraction(1, 4), True) == "holds"
    assert _compare(c.gamma_lower, 4, Fraction(1, 5), True) == "fails"
    assert _compare(c.x_max_upper, 4, Fraction(16), False) == "holds"  # (n+1)² = 25
    assert _compare(c.x_max_upper, 4, Fraction(26), False) == "fails"


def test_summary_line_names_the_lengths() -> None:
    good = load_model(DYCK1)
    data = run_check(good, max_n=4).to_json()
    assert summary_line(good, data).endswith("hold at n = 1..4")
    bad = model_from_dict(_dyck1(gamma_lower="1/n"))
    data = run_check(bad, max_n=3, hard_only=True).to_json()
    assert summary_line(bad, data).endswith("FAIL at n = 1, 2, 3")


# ---------------------------------------------------------------------------- cli.certify


def test_range_parsing() -> None:
    assert _range("1..5") == (1, 5) and _range(" 7 .. 7 ") == (7, 7)
    for bad in ("5..1", "0..3", "1..", "a..b", "1...3", "1..10000000000000"):
        with pytest.raises(UsageError):
            _range(bad)


def test_checked_to_needs_this_model_and_these_claims(tmp_path: Path) -> None:
    model = load_model(DYCK1)
    data = run_check(model, max_n=5, hard_only=True).to_json()
    f = tmp_path / "r.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    assert checked_to(f, model) == 5
    # the claim changed since: a result for the old claim counts for nothing
    assert checked_to(f, model_from_dict(_dyck1(margin_lower="1/3"))) is None
    # a length whose entry says a claim failed stops the run of verified lengths
    d2 = copy.deepcopy(data)
    d2["lengths"][3]["claims"]["claims"]["x_max_upper"]["status"] = "fails"
    f.write_text(json.dumps(d2), encoding="utf-8")
    assert checked_to(f, model) == 3
    other = dict(data, model="someone else")
    f.write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(UsageError, match="another model"):
        checked_to(f, model)
    f.write_text(json.dumps({"format": "exactattn-precision/1"}), encoding="utf-8")
    with pytest.raises(UsageError, match="not an exactattn-result/1 file"):
        checked_to(f, model)
    assert known_result(str(DYCK1), model) == ROOT / "reports" / "claims" / "dyck1.hard.json"
    assert known_result(str(f), model) is None


# ---------------------------------------------------------------------------- cli.extra, common


def test_precision_option_parsing() -> None:
    assert _parse_ns((3, 8), "2:4") == [3, 4, 8, 16]
    assert _parse_ns((), None) == []
    for bad in ("4", "4:2", "a:b", "0:25"):
        with pytest.raises(click.UsageError):
            _parse_ns((), bad)
    with pytest.raises(click.UsageError, match="2\\^24"):
        _parse_ns((2**24 + 1,), None)
    assert _taus(()) == [("model", TauChoice.model())]  # each --tau parsed once, typed
    (label, tau), (m, own) = _taus(("1/n", "model"))
    assert label == "1/n" and tau.kind == "override" and tau.expr.text == "1/n"
    assert (m, own) == ("model", TauChoice.model())
    with pytest.raises(UsageError, match="this command has no theorem mode"):
        _taus(("theorem",))  # precision has no theorem mode
    model = load_model(DYCK1)
    _check_range(model, 1, 10, 2**11 - 2, force=False)  # 2 + 4 + … + 1024 = 2046 inputs
    with pytest.raises(click.UsageError, match="2,046"):
        _check_range(model, 1, 10, 2**11 - 3, force=False)
    _check_range(model, 1, 10, 1, force=True)
    with pytest.raises(click.UsageError, match="below the smallest length"):
        _check_range(model, 5, 4, 10, force=False)


def test_exact_cell_shortens_only_long_rationals() -> None:
    assert _exact_cell("1/3") == "1/3"
    assert _exact_cell("1/1" + "0" * 50) == "≈1e-50"
    assert _exact_cell("-2/3" + "0" * 45) == "≈-6.66e-46"  # toward zero: −6.666…e-46


# ---------------------------------------------------------------------------- report


def test_certificate_renderings_escape_the_model_name() -> None:
    d = _dyck1()
    d["name"] = "evil_*name* <script>"
    model = model_from_dict(d)
    c = certificate(model, 20, "theorem")
    md = certificate_markdown(c)
    assert md.startswith("# Certificate: evil\\_\\*name\\* \\<script\\>\n")
    assert "| verdict | certified: " in md and "| n | 20 |" in md
    # γ, x_max, margin and Theorem S's coordinate ranges and head profiles: D(a)–D(e)
    assert md.count("Proposition D") == 5 and "Every claim used is proved." in md
    tex = certificate_latex(c)
    assert "\\section*{Certificate: evil\\_*name* \\textless{}script\\textgreater{}}" in tex
    r = range_certificate(model, 1, 3, "theorem")
    assert "| verdict | certified for every n = 1..3 |" in certificate_markdown(r)
    user = _dyck1()
    user["claims"]["margin_lower"]["justification"] = "user"
    cu = certificate(model_from_dict(user), 5, "theorem")
    # an edited model (here a justification) is not what `build dyck` makes: nothing is
    # proved for it, every claim is conditional, and the reason is escaped (issue 41)
    md = certificate_markdown(cu)
    keys = "gamma\\_lower, x\\_max\\_upper, margin\\_lower, coordinate\\_ranges, head\\_profiles"
    assert f"**Conditional** on the claims {keys}: none is proved for this file (" in md
    assert 'claims.margin\\_lower.justification (the file has "user"' in md


def test_escapes() -> None:
    assert text("a_b%&$#{}~^\\ é\n") == (
        "a\\_b\\%\\&\\$\\#\\{\\}\\~{}\\^{}\\textbackslash{} [U+00E9][U+000A]"
    )
    assert plain("*x* [l](u) <b>|#") == "\\*x\\* \\[l\\](u) \\<b\\>\\|\\#"
    assert plain("a\nb") == "a\\\\nb"  # a newline never starts a line: \n, its \ escaped


# ---------------------------------------------------------------------------- results.claims


def test_gap_bound_entry_with_a_violation() -> None:
    g = GapBoundEntry(
        "1/(n + 1)",
        Fraction(1, 5),
        Fraction(1, 6),
        (GapViolation(None, Fraction(1, 5), Fraction(1, 6)),),
        (HeadGapBound(0, 0, Fraction(1, 5), Fraction(1, 6)), HeadGapBound(1, 0, None, None)),
    )
    d = g.to_json()
    assert d["holds"] is False and d["violations"] == [
        {"head": None, "bound": "1/5", "measured": "1/6"}
    ]
    assert d["heads"][1] == {"layer": 1, "head": 0, "bound": None, "measured": None}
    assert GapBoundEntry.from_json(d).to_json() == d
    ok = replace(g, violations=())
    assert ok.holds and ok.to_json()["holds"] is True
    data = {
        "format": "exactattn-result/1",
        "lengths": [
            {"n": 4, "compiler_gap_bound": d, "claims": {"applies": True}},  # malformed claims
            {"n": "5"},
        ],
    }
    (e,) = length_entries(data)
    assert e.n == 4 and e.claims is None and e.gap_bound is not None
    assert not e.gap_bound.holds
    assert length_entries({"format": "exactattn-search/1"}) is None


# ---------------------------------------------------------------------------- core


def test_limits() -> None:
    dup = dedup_pairs([("a", 1), ("b", 2), ("a", 3)])
    assert dup == {"a": 3, "b": 2} and dup.duplicate == "a"
    with pytest.raises(ModelError, match="a"):
        check_tree({"x": dup}, "model")
    assert clip("x" * 70) == "x" * 60 + "… (70 characters)"
    assert clip("a\nb") == "a\\nb"
    deep: dict = {}
    cur = deep
    for _ in range(100):
        cur["k"] = {}
        cur = cur["k"]
    with pytest.raises(ModelError):
        check_tree(deep, "model")


def test_guard_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        bad_input("no such file")
    assert e.value.code == EXIT_BAD_INPUT == 2 and "no such file" in capsys.readouterr().err
    with pytest.raises(KeyboardInterrupt), deferred_interrupt():
        signal.raise_signal(signal.SIGINT)  # held until the block ends


# ---------------------------------------------------------------------------- engine


def test_exact_zero_of_the_worked_example() -> None:
    """mean_a_position at τ = 1/2: on "ab" the soft read-out is (e²/2 + 1)/(e² + 2) = 1/2,
    exactly the threshold (no ball decides that; Lindemann–Weierstrass does); on "bb" every
    score ties and soft = hard = 1/2; on "aa" soft = (3e²/2)/(2e² + 1) ≠ 3/4 = hard."""
    import numpy as np

    from exactattn.engine import exactzero
    from exactattn.engine.hard import run_hard
    from exactattn.engine.temperature import Temperatures

    m = load_model(ROOT / "exactattn" / "examples" / "mean_a_position.json")
    cm = CompiledModel(m)
    words = [("a", "b"), ("a", "a"), ("b", "b"), ("b", "a")]
    hb = run_hard(cm, words, 2)
    li = len(hb.layers) - 1
    assert exactzero.applicable(hb, [None])
    heads, traces = cm.layers[li], hb.layers[li].heads
    taus = Temperatures(m, None).rational(li, 2, len(heads))
    assert taus == [Fraction(1, 2)]
    slot, out = m.accept_slot(2), m.output
    x = hb.activations[-1]
    got = []
    for b in range(len(words)):
        y = out.bias + sum(w * x.fraction((b, slot, c)) for c, w in enumerate(out.weight))
        K = y - out.threshold  # hard read-out − threshold; soft − threshold = K + a·δ
        got.append((y, exactzero.readout_is_exactly(heads, traces, taus, b, slot, out.weight, K)))
    half = Fraction(1, 2)
    assert got == [(half, True), (Fraction(3, 4), False), (half, True), (Fraction(1), False)]
    # off by any nonzero constant, "ab" is no longer exactly at the threshold
    assert not exactzero.readout_is_exactly(heads, traces, taus, 0, slot, out.weight, half / 50)
    assert np.isfinite(float(taus[0]))


def test_dtype_rounding_and_error_enclosure() -> None:
    """Nearest, ties to even, in float16 (ulp 2^-12 near 1/3, 2 near 2048): 1/3 → 1365/4096,
    2049 → 2048, 2051 → 2052;
    ‖(0.5, 0.25) − (1/3, 1/4)‖∞ = 1/6 is enclosed within 2e-15 (without the allowance the
    float64 difference 0.5 − fl(1/3) is above 1/6)."""
    import numpy as np

    from exactattn.engine.diagnosis import error_enclosure
    from exactattn.engine.dtypes import rat_to_dtype
    from exactattn.engine.ratarray import RatArray

    r = RatArray(np.array([[1, 2049 * 3, 2051 * 3]], dtype=np.int64), 3)
    got = rat_to_dtype(r, np.float16)
    assert [Fraction(float(v)) for v in got[0]] == [Fraction(1365, 4096), 2048, 2052]
    lo, hi, row = error_enclosure(
        np.array([[0.5, 0.25]], dtype=np.float16), RatArray(np.array([[4, 3]]), 12)
    )
    assert Fraction(lo) <= Fraction(1, 6) <= Fraction(hi) and 0 < hi - lo < 2e-15 and row == 0


# ---------------------------------------------------------------------------- model, rasp, root


def test_claim_values() -> None:
    from exactattn.core.numbers import arb_endpoints
    from exactattn.model.claimed import claim_exact, claim_value, q_text

    c = model_from_dict(_dyck1(x_max_upper="log(n)")).claims
    assert claim_exact(c.gamma_lower, 4) == Fraction(1, 5)
    assert claim_exact(c.x_max_upper, 4) is None  # transcendental: a ball, never a guess
    lo, hi = arb_endpoints(claim_value(c.x_max_upper, 4))
    # log 4 = 1.38629436111989057…
    assert Fraction(138629436111989, 10**14) < lo <= hi < Fraction(138629436111990, 10**14)
    assert hi - lo < Fraction(1, 10**30)
    huge = Fraction(10**2000, 3)  # no printable exact value: a decimal rounded the safe way
    assert q_text(huge, True) == "3.33333333333334e1999"
    assert q_text(huge, False) == "3.33333333333333e1999"
    assert q_text(Fraction(1, 3), True) == "1/3"


def test_bundled_rasp_programs_compile_to_the_bundled_models() -> None:
    from exactattn.constructions.rasp_bundled import catalog

    cat = catalog()
    files = sorted(p.stem for p in (ROOT / "models").glob("rasp_*.json"))
    assert sorted(cat) == files and len(files) == 16  # 8 programs, unbounded and bounded
    for stem, model in cat.items():
        assert model == json.loads((ROOT / "models" / f"{stem}.json").read_text(encoding="utf-8"))


def test_version_and_python_dash_m() -> None:
    import re
    import subprocess
    import sys

    from exactattn.core.version import __version__

    meta = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"$', meta, re.M).group(1) == __version__
    p = subprocess.run(
        [sys.executable, "-m", "exactattn", "--version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout.strip() == f"python -m exactattn, version {__version__}"
