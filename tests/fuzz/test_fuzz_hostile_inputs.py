"""Fuzz suite (default run): hostile model files, result files, --tau strings, damaged
checkpoints and bad --dask addresses via the CLI (with and without -q, sometimes --jobs 2),
and issue 40's surfaces (tests/fuzzing.py: NEW_KINDS and NEW_KINDS_2).

Each case runs ``exactattn …`` in-process (tests/fuzzing.py) and must keep the contract: exit
code 0/1/2/3 (never 4, never a traceback); exit 2 is one line ``error: <path>: …`` with no
output file; exit 0/1/3 leaves a result file whose verdict matches. The long run (≥ 100,000
cases) is ``python tests/fuzz_long.py 100000`` (docs/testing.md).
"""

from __future__ import annotations

import json
import random
import tempfile
from fractions import Fraction
from pathlib import Path

import fuzzing as F
import pytest
import strategies as S
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(kind: str, seed: int, base: dict | None = None) -> F.Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        rng = random.Random(seed)
        kind, args = F.make_case(rng, Path(tmp), base=base, kind=kind, big=False)
        undo = F.stub_figures() if kind == "report" and seed % 10 else None
        try:
            o = F.run_case(kind, args, Path(tmp), timeout=60)
        finally:
            if undo:
                undo()
        assert not F.problems(o), (F.problems(o), args, o.stderr[-500:])
        return o


@SETTINGS
@given(st.integers(0, 2**32))
def test_mutated_bundled_models(seed: int) -> None:
    _check("model", seed)


@SETTINGS
@given(S.models(), st.integers(0, 2**32))
def test_mutated_random_models(model: dict, seed: int) -> None:
    base = json.loads(S.to_json_text(model))
    _check("model", seed, base=base)


@SETTINGS
@given(st.integers(0, 2**32))
def test_mutated_result_files(seed: int) -> None:
    _check("report", seed)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 2**32))
def test_tau_strings(seed: int) -> None:
    _check("tau", seed)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(0, 2**32))
def test_damaged_checkpoints(seed: int) -> None:
    """Resume from a damaged, foreign or held checkpoint: the fresh run's bytes, or exit 2."""
    _check("checkpoint", seed)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.integers(0, 2**32))
def test_bad_cluster_addresses(seed: int) -> None:
    _check("dask", seed)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(F.NEW_KINDS)), st.integers(0, 2**32))
def test_issue_40_surfaces(kind: str, seed: int) -> None:
    """Certificate, precision and search files through report; an output naming an input;
    symlinked or FIFO checkpoint parts; deep and oversized RASP programs; oversize inputs."""
    _check(kind, seed)


@pytest.mark.parametrize("kind", sorted(F.NEW_KINDS_2))
@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32))
def test_issue_40_remaining_surfaces(kind: str, seed: int) -> None:
    """A tampered model beside a genuine check result; outputs into a FIFO, a device or a
    full disk; export beside planted temporary names; weights past the dtype's range."""
    _check(kind, seed)


def test_dtype_overflow_oracle_agrees_with_numpy() -> None:
    """The f16 kind's expectation (exact threshold) against numpy's own rounding."""
    import numpy as np

    for v in (65504, 65519, 65520, -65520, 10**5, 3 * 10**38, 4 * 10**38, "1/65536"):
        for dtype, np_dtype in (("float16", np.float16), ("float32", np.float32)):
            with np.errstate(over="ignore"):
                inf = bool(np.isinf(np.array(float(Fraction(v))).astype(np_dtype)))
            assert F._dtype_overflows(v, dtype) == inf, (v, dtype)
    assert not F._dtype_overflows(2**128 - 2**120, "bfloat16")
    assert F._dtype_overflows(2**128 - 2**119, "bfloat16")


def test_remaining_kinds_oracle_catches_breaks(tmp_path: Path) -> None:
    """The second part's contracts: trusted output of a tampered model, a replaced device, a
    changed planted file, a temporary file left, two documents through a FIFO, a half file."""

    def probs(code: int, case: dict, stdout: str = "", text: str | None = None, **extra: object):
        o = F.Outcome("x", ["certify"], code, "", text is not None, text)
        o.extra = {"case": {"workdir": str(tmp_path), **case}, "stdout": stdout, **extra}
        o.extra["after"] = F._state(o.extra["case"])
        return F.problems(o)

    tampered = {"stdout_forbid": ["also checked by enumeration"], "untrusted": True}
    tampered["stdout_require"] = ["CONDITIONAL"]
    said = "x; also checked\n by  enumeration for n ≤ 14"
    assert any("says" in p for p in probs(0, tampered, said))
    assert any("does not say" in p for p in probs(0, tampered, "every claim"))
    assert probs(0, tampered, "CONDITIONAL: …") == []
    trusted = '{"checked_by_enumeration_to": 14, "checked_in": "r.json"}'
    assert any("trusted" in p for p in probs(0, tampered, "CONDITIONAL", trusted))
    (tmp_path / "dev").write_text("now a file")
    assert any("device was replaced" in p for p in probs(0, {"chardev": [str(tmp_path / "dev")]}))
    planted = {str(tmp_path / "dev"): ["file", "0" * 64]}
    assert any("planted" in p for p in probs(0, {"planted": planted}))
    (tmp_path / ".out.json.abc.tmp").write_text("{")
    assert any("temporary" in p for p in probs(2, {"no_temp": True}))
    (tmp_path / ".out.json.abc.tmp").unlink()
    fifo = {"fifo_read": "fifo.json"}
    assert any("2 documents" in p for p in probs(0, fifo, **{"fifo docs": ["{}", "{}"]}))
    assert any("not JSON" in p for p in probs(0, fifo, **{"fifo docs": ["{"]}))
    assert probs(0, fifo, **{"fifo docs": ["{}"]}) == []
    (tmp_path / "out.json").write_text('{"a": ')
    whole = {"outputs_whole": [str(tmp_path / "out.json")]}
    assert any("half-written" in p for p in probs(0, whole))
    assert any("outputs were written" in p for p in probs(2, whole))


def test_contract_checker_catches_breaks() -> None:
    """The oracle itself: a traceback, exit 4, a two-line exit 2 and a lying file all count."""
    ok = F.Outcome("model", ["check"], 2, "error: d: bad (fix: x)\n", False, None)
    assert F.problems(ok) == []
    assert F.problems(F.Outcome("model", ["check"], 4, "internal error", False, None))
    assert F.problems(F.Outcome("model", ["check"], 2, "error: a\nb\n", False, None))
    assert F.problems(F.Outcome("model", ["check"], 2, "error: d: x\n", True, "{}"))
    lying = json.dumps({"verdict": {"status": "clean"}})
    assert F.problems(F.Outcome("model", ["check"], 1, "", True, lying))
    assert F.problems(F.Outcome("model", ["check"], None, "", False, None, timed_out=True))
    # without -q the estimate's line comes first: still one error line
    est = "m: 14 inputs (n = 1..3, alphabet of 2); estimated under a second\nerror: d: x\n"
    assert F.problems(F.Outcome("model", ["check"], 2, est, False, None)) == []
    # a bad address that is accepted, a resume that differs from a fresh run
    dask = F.Outcome("dask", ["check"], 0, "", True, lying, extra={"case": {"expect_exit": 2}})
    assert any("where 2 is due" in p for p in F.problems(dask))
    resumed = F.Outcome("checkpoint", ["check"], 0, "", True, lying, extra={"expected": "{}"})
    assert any("differs from a fresh run" in p for p in F.problems(resumed))
    refused = F.Outcome("checkpoint", ["check"], 2, "error: --checkpoint x: y\n", False, None)
    assert any("refused, not recomputed" in p for p in F.problems(refused))
    # reports: a live TeX primitive or raw HTML written by `report` counts
    assert F.report_injections("out.tex", "a \\input{/etc/passwd}")
    assert not F.report_injections("out.tex", "% \\input{/etc/passwd}")
    assert not F.report_injections("out.tex", "\\textbackslash{}input")
    assert F.report_injections("out.md", "x <img src=x onerror=alert(1)> y")
    assert not F.report_injections("out.md", "x \\<img src=x\\> `<s>`")
    assert F.report_injections("out.md", "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n")
    # issue 40: an input changed, a write through a symlink, a FIFO replaced
    case = {"unchanged": {"/m": "abc"}, "empty": ["/e"], "special": ["/f"]}
    after = {"/m": "abd", "/e": ["s0.json"], "/f": False}
    broken = F.Outcome("samepath", ["check"], 2, "error: x: y\n", False, None)
    broken.extra = {"case": case, "after": after}
    assert len(F.problems(broken)) == 3
    broken.extra = {"case": case, "after": {"/m": "abc", "/e": [], "/f": True}}
    assert F.problems(broken) == []


def test_pdflatex_check_catches_a_read(tmp_path: Path) -> None:
    """The fuzz's pdflatex oracle: a report that opens a file outside itself counts."""
    import shutil

    import pytest

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed")
    secret = tmp_path / "elsewhere.tex"
    secret.write_text("hello\n")
    work = tmp_path / "w"
    work.mkdir()
    body = "\\documentclass{article}\\begin{document}%s\\end{document}\n"
    (work / "out.tex").write_text(body % "fine")
    assert F.pdflatex_problems(work, work / "out.tex") == []
    (work / "out.tex").write_text(body % f"\\input{{{secret}}}")
    assert any("outside the report" in p for p in F.pdflatex_problems(work, work / "out.tex"))
