"""The --max-inputs guard weighs inputs by their work (exactattn/inputs/work.py).

A one-letter alphabet has one input per length, so ``--max-n 1000000`` passed the count guard
and then ground for years (one input of length n costs about L·(n+2)²·d). Now each input counts
as max(1, L·(n+2)²·d / 100,000) inputs; the numbers below are derived by hand from that rule.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import fuzzing as F
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from paths import ROOT

from exactattn.cli import main
from exactattn.inputs.work import (
    SAMPLE_WORK,
    WORK_PER_INPUT,
    input_work,
    job_too_large,
    relative_work,
    sample_length,
    weighted_units,
)
from exactattn.model import load_model, model_from_dict

BASE = json.loads((ROOT / "tests" / "data" / "mean_a_position.json").read_text())
FIX = "(fix: lower --max-n, raise --max-inputs, or pass --force)"


def one_letter() -> dict:
    """mean_a_position with the alphabet {a}: L = 1 layer, d = 4, one input per length."""
    m = copy.deepcopy(BASE)
    m["name"] = "one-letter"
    m["alphabet"] = ["a"]
    del m["embedding"]["token"]["b"]
    return m


def _s(m: int) -> int:
    """Σ_{j=1}^{m} j²."""
    return m * (m + 1) * (2 * m + 1) // 6


def test_one_letter_million_is_refused_with_its_weight() -> None:
    """L·d = 4: 4m² ≥ 100,000 from m = n + 2 = 159 (158² = 24,964 < 25,000 ≤ 159² = 25,281),
    so n = 1..156 weigh 1 each and n = 157..10^6 weigh 4(n+2)²/10^5."""
    assert input_work(1, 4, 156) == 4 * 158**2 < WORK_PER_INPUT <= input_work(1, 4, 157)
    units = 156 * WORK_PER_INPUT + 4 * (_s(1_000_002) - _s(158))
    assert weighted_units(1, 1, 4, 1, 10**6) == units
    weight = -(-units // WORK_PER_INPUT)
    assert weight == 13_333_433_333_683  # ≈ 4·(10^6)³/3 / 10^5
    msg = job_too_large(1, 1, 4, 1, 10**6, 50_000_000)
    assert msg == (
        "--max-inputs: 1,000,000 inputs (n = 1..1,000,000, alphabet of 1) weigh as "
        "13,333,433,333,683 inputs by their work, more than --max-inputs 50,000,000 (an input "
        "of length n costs about L·(n+2)²·d = 4·(n+2)² units with L = 1 layer and d = 4, and "
        f"counts as one input per 100,000 units) {FIX}"
    )


def test_limits_at_the_boundary() -> None:
    """The weighted count is compared exactly: a budget of exactly the weight passes."""
    units = weighted_units(1, 1, 4, 1, 1000)
    budget = -(-units // WORK_PER_INPUT)
    assert units == 156 * WORK_PER_INPUT + 4 * (_s(1002) - _s(158))
    assert job_too_large(1, 1, 4, 1, 1000, budget) is None
    assert "weigh as" in (job_too_large(1, 1, 4, 1, 1000, budget - 1) or "")
    assert job_too_large(1, 1, 4, 1, 1000, 50_000_000) is None  # ≈ 13,400: allowed by default


def test_count_guard_is_unchanged_and_first() -> None:
    """The plain count still decides first, with its old message (2^31 − 2 inputs)."""
    assert job_too_large(2, 5, 16, 1, 30, 50_000_000) == (
        "--max-inputs: 2,147,483,646 inputs (n = 1..30, alphabet of 2) is more than "
        f"--max-inputs 50,000,000 {FIX}"
    )
    huge = job_too_large(1, 1, 4, 1, 10**100, 50_000_000) or ""  # one input per length
    assert huge.startswith(f"--max-inputs: {10**100:,} inputs") and "is more than" in huge
    # short inputs weigh 1: dyck1 (L = 5, d = 16) at n = 24 is 5·26²·16 = 54,080 units
    assert job_too_large(2, 5, 16, 1, 24, 2**25 - 2) is None
    assert "is more than" in (job_too_large(2, 5, 16, 1, 24, 2**25 - 3) or "")


def test_heavy_inputs_of_a_larger_alphabet() -> None:
    """rasp_dyck2's shape (k = 4, L = 17, d = 43): n = 12 costs 17·14²·43 = 143,276 units, so
    its 4^12 inputs weigh 1.43276 each; n ≤ 11 (≤ 17·13²·43 = 123,539) partly weigh 1."""
    want = sum(4**n * max(WORK_PER_INPUT, 17 * 43 * (n + 2) ** 2) for n in range(1, 13))
    assert weighted_units(4, 17, 43, 1, 12) == want
    count = (4**13 - 4) // 3  # 22,369,620 inputs: under a budget of 23,000,000 by count
    assert count == 22_369_620
    msg = job_too_large(4, 17, 43, 1, 12, 23_000_000)
    assert msg is not None and msg.startswith("--max-inputs: 22,369,620 inputs (n = 1..12")
    assert f"weigh as {-(-want // WORK_PER_INPUT):,} inputs by their work" in msg


@given(
    lo=st.integers(1, 400),
    span=st.integers(-2, 400),
    layers=st.integers(1, 40),
    d=st.integers(1, 3000),
)
def test_one_letter_closed_form_matches_the_sum(lo: int, span: int, layers: int, d: int) -> None:
    hi = lo + span
    brute = sum(max(WORK_PER_INPUT, input_work(layers, d, n)) for n in range(lo, hi + 1))
    assert weighted_units(1, layers, d, lo, hi) == brute
    if hi >= lo:
        ratio = relative_work(1, lo, hi, lo)
        assert ratio == pytest.approx(sum((n + 2) ** 2 for n in range(lo, hi + 1)) / (lo + 2) ** 2)


def test_sample_length_keeps_the_estimate_cheap() -> None:
    """The estimate times inputs of at most SAMPLE_WORK units: for L·d = 4 that is n + 2 = 500."""
    assert sample_length(1, 4, 10**6) == 498 and input_work(1, 4, 498) == SAMPLE_WORK
    assert input_work(1, 4, 499) > SAMPLE_WORK
    assert sample_length(1, 4, 300) == 300  # short enough: the largest length itself
    assert sample_length(10**6, 10**6, 50) == 1  # any model: at least n = 1


def test_forced_long_job_gets_a_quick_finite_estimate() -> None:
    """--force on one letter, n ≤ 10^5: the estimate times n = 498 (not one input of length
    10^5, minutes by itself) and scales by Σ(n+2)²/500² ≈ 1.3·10^10 inputs' worth."""
    from exactattn.run.check import estimate

    model = model_from_dict(one_letter())
    t0 = time.process_time()
    secs = estimate(model, 1, 10**5, hard_only=False)
    assert time.process_time() - t0 < 10
    assert relative_work(1, 1, 10**5, 498) == pytest.approx(_s(100_002) / 500**2 - 5 / 500**2)
    assert 1e6 < secs < 1e12, secs  # ≥ 10^-4 s per sampled input: over a week of CPU time


def _write(tmp_path: Path, model: dict) -> Path:
    p = tmp_path / "m.json"
    p.write_text(json.dumps(model), encoding="utf-8")
    return p


def test_precision_refuses_long_one_letter_jobs(tmp_path: Path) -> None:
    """`precision` (cli/extra.py) uses the same guard: exit 2 at once, one line, no file."""
    p = _write(tmp_path, one_letter())
    out = tmp_path / "p.json"
    t0 = time.monotonic()
    res = CliRunner().invoke(
        main,
        ["precision", str(p), "--max-n", "20000", "--max-inputs", "100000", "--json", str(out)],
    )
    assert time.monotonic() - t0 < 10
    assert res.exit_code == 2, res.output
    assert "--max-inputs: 20,000 inputs (n = 1..20,000, alphabet of 1) weigh as" in res.output
    assert "more than --max-inputs 100,000" in res.output and not out.exists()
    # the weight of n = 1..20,000 is about 4·20,002³/3 / 10^5 ≈ 1.07·10^8
    assert f"{-(-weighted_units(1, 1, 4, 1, 20_000) // WORK_PER_INPUT):,} inputs" in res.output


def test_precision_refuses_a_bundled_model_by_work(tmp_path: Path) -> None:
    """rasp_dyck2 up to n = 12: 22,369,620 inputs pass a 23,000,000 count but not its work."""
    model = load_model(ROOT / "models" / "rasp_dyck2.json")
    assert (len(model.alphabet), len(model.layers), model.d) == (4, 17, 43)
    args = ["precision", str(ROOT / "models" / "rasp_dyck2.json"), "--max-n", "12"]
    res = CliRunner().invoke(main, [*args, "--max-inputs", "23000000"])
    assert res.exit_code == 2 and "22,369,620 inputs (n = 1..12, alphabet of 4) weigh as" in (
        res.output
    ), res.output


def test_check_refuses_long_one_letter_jobs(tmp_path: Path) -> None:
    """`check` on one letter, --max-n 10^6: exit 2 at once (it ground for years); a CPU-time
    budget turns a hang into a failure."""
    p = _write(tmp_path, one_letter())
    for extra in ([], ["-q"]):
        o = F.run_case("work", ["check", str(p), "--max-n", "1000000", *extra], tmp_path, 10)
        assert not o.timed_out and o.code == 2, (o.code, o.stderr[-500:])
        assert "weigh as 13,333,433,333,683 inputs by their work" in o.stderr
        assert "pass --force" in o.stderr
