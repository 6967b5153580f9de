"""Issue 24: the verdict and trend sentences of docs/finite-precision.md and the README's numbers
agree with the stored result files they cite (reports/precision, reports/claims,
reports/scale). Each test recomputes the number from the file and looks for the sentence."""

from __future__ import annotations

import json
import re
from fractions import Fraction

from flint import arb, ctx
from paths import ROOT

from exactattn.core.numbers import arb_endpoints, decimal_up, parse_decimal

PREC = ROOT / "reports" / "precision"
FP = (ROOT / "docs" / "finite-precision.md").read_text("utf-8")
README = (ROOT / "README.md").read_text("utf-8")
FLIP_FILES = (
    "dyck2-families.json",
    "dyck2-32768-float32.json",
    "dyck2-65536-float32.json",
    "dyck2-65536-float32-n3.json",
)


def fixed(x: Fraction, places: int, up: bool) -> str:
    """x with ``places`` decimals, rounded up or down (exact)."""
    scaled = x * 10**places
    k = (
        -((-scaled.numerator) // scaled.denominator)
        if up
        else scaled.numerator // scaled.denominator
    )
    return f"{k // 10**places}.{k % 10**places:0{places}d}"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _float32_flips() -> dict[tuple[int, str], dict]:
    """(n, τ) → the first float32 flip's diagnosis, over every stored Dyck-2 run."""
    out: dict[tuple[int, str], dict] = {}
    for name in FLIP_FILES:
        d = json.loads((PREC / name).read_text("utf-8"))
        for run in d["runs"]:
            if run["dtype"] != "float32":
                continue
            for length in run["lengths"]:
                ff = length.get("first_flip")
                if ff and ff.get("cause") == "absorption":
                    out[(length["n"], run["tau"])] = ff["diagnosis"]
    return out


def _tau(n: int, which: str) -> arb:
    with ctx.workprec(128):
        if which == "model":  # models/dyck2.json: 1/(5(n+1) log(n+1))
            return 1 / (5 * (n + 1) * arb(n + 1).log())
        assert which == "1/(n^3*log(n))", which
        return 1 / (arb(n) ** 3 * arb(n).log())


def _logit(detail: str) -> Fraction:
    m = re.search(r"logits are ([0-9.e+]+) and", detail)
    assert m, detail
    return parse_decimal(m.group(1))


def test_float32_flip_lengths() -> None:
    """The verdict: float32 (unfused, §2) first flips at 2^13 at both τ, and the 2^15 and 2^16
    runs flip; at 2^16 the exact hard meaning accepts and float32 rejects."""
    flips = _float32_flips()
    assert min(n for n, _ in flips) == 8192
    assert {t for n, t in flips if n == 8192} == {"model", "1/(n^3*log(n))"}
    assert {n for n, _ in flips} == {8192, 32768, 65536}
    for name in ("dyck2-65536-float32.json", "dyck2-65536-float32-n3.json"):
        ff = json.loads((PREC / name).read_text("utf-8"))["runs"][0]["lengths"][0]["first_flip"]
        assert ff["family"] == "nested" and ff["hard"] is True and ff["dtype_output"] is False
    flat = _flat(FP)
    assert "**Answer: no.** float32 rejects the well-nested `nested` word of length 2^16" in flat
    assert "**float32 first flips a decision at n = 8,192 = 2^13" in flat


def test_certified_soft_at_2e16() -> None:
    """The certified soft meaning accepts the 2^16 word with ‖soft − hard‖∞ ≤ 1.65·10⁻²⁴."""
    d = json.loads((PREC / "dyck2-65536-float32-certified.json").read_text("utf-8"))
    length = d["runs"][0]["lengths"][0]
    assert length["soft"] == {"decided": 1, "undecided": 0, "differs_from_hard": 0}
    assert length["first_flip"]["soft_output"] is True
    up = parse_decimal(length["softmax_error"]["upper"])
    shown = decimal_up(up, 3)  # 1.66e-24: a "≤" must round up
    assert shown == "1.66e-24" and "‖soft − hard‖∞ ≤ 1.66·10⁻²⁴" in _flat(FP)
    # the 2^13 and 2^15 certified passes: ≤ 5.42·10⁻²⁰ and ≤ 5.30·10⁻²³, rounded up
    d = json.loads((PREC / "dyck2-nested-float32-certified.json").read_text("utf-8"))
    ups = {ln["n"]: parse_decimal(ln["softmax_error"]["upper"]) for ln in d["runs"][0]["lengths"]}
    assert ups[8192] <= Fraction("5.42e-20") < ups[8192] * Fraction(1001, 1000)
    assert ups[32768] <= Fraction("5.30e-23") < ups[32768] * Fraction(1003, 1000)
    assert "≤ 5.42·10⁻²⁰, ≤ 5.30·10⁻²³ and ≤ 1.66·10⁻²⁴" in _flat(FP)
    assert "has not been run" not in FP.split("## 5.")[1].split("```")[0]


def test_absorption_arithmetic() -> None:
    """1/D² against 2⁻²⁴ and the exact logit difference in float32 ulps, recomputed from the
    stored witnesses (D = the top key, the exact gap 1/D, τ of the run, the float32 logit's
    binade), must be the ranges the text states."""
    flips = _float32_flips()
    assert len(flips) == 6
    ratios, ulps, ds = [], [], []
    own_big = {}
    for (n, which), dg in flips.items():
        D = dg["top_key"]
        assert Fraction(dg["exact_gap"]) == Fraction(1, D)
        ds.append(D)
        ratios.append(Fraction(2**24, D * D))
        logit = _logit(dg["detail"])
        e = logit.numerator.bit_length() - logit.denominator.bit_length()
        while Fraction(2) ** e > logit:
            e -= 1
        while Fraction(2) ** (e + 1) <= logit:
            e += 1
        with ctx.workprec(128):
            diff = arb(1) / D / _tau(n, which) / arb(2) ** (e - 23)
        lo, hi = arb_endpoints(diff)
        ulps.append((lo, hi))
        if which == "model" and n in (32768, 65536):
            own_big[n] = (lo, hi)
    flat = _flat(FP)
    d_lo, d_hi = min(ds), max(ds)
    assert f"D = {d_lo:,} … {d_hi:,}" in flat
    r = f"{fixed(min(ratios), 2, False)}–{fixed(max(ratios), 2, True)} × 2⁻²⁴"
    assert r in flat, r
    assert min(ratios) > 1  # so "not below 2⁻²⁴" is the true reading
    u_lo, u_hi = min(lo for lo, _ in ulps), max(hi for _, hi in ulps)
    u = f"{fixed(u_lo, 2, False)}–{fixed(u_hi, 2, True)} ulp"
    assert u in flat, u
    assert min(lo for lo, _ in ulps) < 1 < max(hi for _, hi in ulps)
    a, b = own_big[32768], own_big[65536]
    assert a[0] > 1 and b[0] > 1
    assert f"({fixed(a[0], 2, False)} and {fixed(b[0], 2, False)} ulp)" in flat


def test_search_witness_word() -> None:
    """§3: the stored n = 1,024 γ and margin witnesses are `(`^1024, gap 1/1025, margin 1/2."""
    g = json.loads((PREC / "search-dyck2-1024-gamma.json").read_text("utf-8"))["witness"]
    m = json.loads((PREC / "search-dyck2-1024-margin.json").read_text("utf-8"))["witness"]
    for w in (g, m):
        assert list(w["input"]) == ["("] * 1024
    assert g["value"] == {"lower": "1/1025", "upper": "1/1025"}
    assert m["value"]["upper"] == "1/2"
    flat = _flat(FP)
    assert "returns the word `(`^1024" in flat and "returns the `nested` word" not in flat


def test_readme_float_settled() -> None:
    """README: the float filter settles all Dyck-2 inputs at the model's own τ only; at
    τ_thm, n = 5, the stored run sends 96 of 1,024 to arb."""
    runs = {
        k: json.loads((ROOT / "reports" / "claims" / f"dyck2.{k}.json").read_text("utf-8"))
        for k in ("soft", "thm")
    }
    assert all(r["float_settled"] == r["inputs"] for r in runs["soft"]["lengths"])
    n5 = next(r for r in runs["thm"]["lengths"] if r["n"] == 5)
    arb_words = n5["inputs"] - n5["float_settled"]
    assert (n5["inputs"], arb_words) == (1024, 96)
    assert f"{arb_words} of {n5['inputs']:,} go to arb" in _flat(README)
    assert "all of Dyck-2's inputs;" not in README


def test_readme_float_filter_ratio() -> None:
    """README's float-filter ratios are the ones in the stored benchmark output."""
    text = (ROOT / "reports" / "scale" / "bench_softfloat.txt").read_text("utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("dyck2"))
    both, cert = re.findall(r"([0-9.]+)×", row)[-2:]  # cert+hard/f64, cert/f64
    flat = _flat(README)
    assert f"{cert}× the CPU time of an uncertified numpy float64 forward pass" in flat
    assert f"{both}× with the exact hard meaning" in flat
    rnd = next(ln for ln in text.splitlines() if ln.startswith("random"))
    assert f"it is {re.findall(r'([0-9.]+)×', rnd)[-1]}×" in flat
    for stale in ("1.3× the CPU", "2.4× with", "1.2× an uncertified"):
        assert stale not in flat, stale


def test_readme_stored_dyck2_runs() -> None:
    """The README's stored Dyck-2 verdicts: n ≤ 10 and n ≤ 12 certified clean at the model's
    τ (1.4 M and 22.4 M inputs), the n ≤ 12 wall time as its stored timing file says."""
    for max_n, inputs in ((10, 1_398_100), (12, 22_369_620)):
        d = json.loads(
            (ROOT / "reports" / "scale" / f"dyck2-max-n-{max_n}.json").read_text("utf-8")
        )
        assert d["verdict"]["status"] == "clean" and d["settings"]["max_n"] == max_n
        assert sum(r["inputs"] for r in d["lengths"]) == inputs
        assert all(r["disagreements"] == 0 and r["undecided"] == 0 for r in d["lengths"])
        assert d["settings"]["tau_override"] is None  # the model's own τ
    d12 = json.loads((ROOT / "reports" / "scale" / "dyck2-max-n-12.json").read_text("utf-8"))
    assert all(r["float_settled"] == r["inputs"] for r in d12["lengths"])
    timing = (ROOT / "reports" / "scale" / "dyck2-max-n-12.time").read_text("utf-8")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):(\d+)", timing)
    assert wall is not None and int(wall[1]) * 60 + int(wall[2].split(".")[0]) <= 360  # the goal
    shown = f"{wall[1]} min {int(wall[2].split('.')[0])} s"
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", timing))
    flat = _flat(README)
    assert "every input n ≤ 12 at the model's τ, certified, clean" in flat
    assert f"**{shown}** ({round(cpu)} s of CPU" in flat
    assert "this repository backs no verdict at n = 11, 12" not in flat
    assert "every one certified, exit 0: clean) **12.3 minutes**" not in flat
