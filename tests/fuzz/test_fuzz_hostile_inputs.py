"""Fuzz suite (default run): hostile model files, result files, --tau strings, damaged
checkpoints and bad --dask addresses via the CLI (with and without -q, sometimes --jobs 2).

Each case runs ``exactattn …`` in-process (tests/fuzzing.py) and must keep the contract: exit
code 0/1/2/3 (never 4, never a traceback); exit 2 is one line ``error: <path>: …`` with no
output file; exit 0/1/3 leaves a result file whose verdict matches. The long run (≥ 100,000
cases) is ``python tests/fuzz_long.py 100000`` (docs/testing.md).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import fuzzing as F
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
