"""The proofs' machine checks: every proofs/check_*.py must pass (they include the adversarial
searches and the extremal witnesses), the mutation table's wrong constants must make them fail,
and the .tex must compile."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PROOFS = ROOT / "proofs"
CHECKS = sorted(PROOFS.glob("check_*.py"))
sys.path.insert(0, str(PROOFS))
from mutations import MUTATIONS, Mutation, run  # noqa: E402

# the default run: the mutations the issue lists, and one wrong constant of each script's own
# theorem; the whole table runs under -m slow
DEFAULT = (
    *("L1", "L2", "L3", "L4", "L12", "H1", "S1", "M1", "T1", "Z1", "C1", "C2", "C4", "C16"),
    *("C3", "C20", "C22", "C23", "C24"),  # issue 24: formulas the suite used to miss
    "P1",  # issue 23: the claims proofs
    "P2",  # the RASP compiler's x_max claim, caught by check on the compiled programs
    "R1",  # issue 22: the RASP compiler's gap lemmas
    "RC0",  # Proposition C: the compiler is correct (the check's own identity)
    "RC2",  # ... and a wrong weight in compile.py itself (the select tie-break)
    "SC1",  # issue 35: Theorem S in the code (the top-set mass exponent)
    "SC5",  # ... and the FFN case split's linear-regime test
    "RCB1",  # issue 36: the bounded encoding's compare head (threshold on, not between, integers)
)


def test_there_are_checks() -> None:
    """Guard against a silent glob miss (a renamed directory would make every test vacuous)."""
    assert len(CHECKS) >= 6, CHECKS


@pytest.mark.parametrize("script", CHECKS, ids=[p.stem for p in CHECKS])
def test_check_script(script: Path) -> None:
    """Each script exits 0 only if every symbolic identity and numeric spot check holds."""
    env = dict(os.environ, PYTHONPATH=str(PROOFS.parent))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=PROOFS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "all checks passed" in proc.stdout
    assert "FAIL" not in proc.stdout


def test_rasp_compiler_weights() -> None:
    """proofs/check_rasp_compiler.py against the compiler of the package under test: each lemma
    of Proposition C on the weights it emits (rows RC1–RC17 run this on a mutated compile.py;
    the message is the first failed check)."""
    env = dict(os.environ, PYTHONPATH=str(PROOFS.parent))
    proc = subprocess.run(
        [sys.executable, "check_rasp_compiler.py"],
        cwd=PROOFS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    fails = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL: ")]
    assert proc.returncode == 0 and not fails, (fails or [proc.stdout[-2000:] + proc.stderr])[0]
    assert "check_rasp_compiler: all checks passed" in proc.stdout


def test_tex_compiles(tmp_path: Path) -> None:
    """proofs/exactattn-bounds.tex is standalone: two pdflatex runs, no errors, no bad refs."""
    if shutil.which("pdflatex") is None:
        pytest.skip(
            "pdflatex not installed (apt-get install texlive-latex-base "
            "texlive-latex-recommended to enable this test)"
        )
    src = PROOFS / "exactattn-bounds.tex"
    shutil.copy(src, tmp_path / src.name)
    for _ in range(2):
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", src.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-4000:]
    log = (tmp_path / "exactattn-bounds.log").read_text(errors="replace")
    assert (tmp_path / "exactattn-bounds.pdf").stat().st_size > 0
    assert "There were undefined references" not in log
    assert "LaTeX Warning: Reference" not in log


# proofs/*.md files whose statements the .tex restates; each named statement needs a counterpart
TEX_COVERS = ("claims.md", "exact-zero.md", "rasp-compiler.md")


def _md_statements(name: str) -> dict[str, list[str]]:
    """Named statements of a proofs/*.md file: from its `## Proposition X` / `## Lemma X` headings
    (with the `**(a)**` item letters of the statement) and from its row in proofs/README.md."""
    found: dict[str, list[str]] = {}
    text = (PROOFS / name).read_text()
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    for part in parts:
        head = re.match(r"(Proposition|Lemma) (\w+)", part)
        if head:
            statement = part.split("*Proof.*")[0]
            found[f"{head[1]} {head[2]}"] = re.findall(r"\*\*\((\w+)\)\*\*", statement)
    row = next(
        line for line in (PROOFS / "README.md").read_text().splitlines() if f"[{name}]" in line
    )
    result = row.split("|")[2]
    kind = re.match(r"\s*(Proposition|Lemma)s? ", result)
    assert kind, row
    for key in re.findall(r"\b([A-Z]\w*)\b", result[kind.end() :]):
        found.setdefault(f"{kind[1]} {key}", [])
    return found


def _tex_statement(tex: str, what: str, name: str) -> str | None:
    """The LaTeX environment whose title says `<what> of \\texttt{<name>}`, or None."""
    kind = what.split()[0].lower()
    pattern = (
        rf"\\begin\{{{kind}\}}\[[^\]]*{re.escape(what)} of\s+\\texttt\{{{re.escape(name)}\}}\]"
        rf"(.*?)\\end\{{{kind}\}}"
    )
    m = re.search(pattern, tex, flags=re.S)
    return m[1] if m else None


def test_tex_restates_every_named_statement() -> None:
    """Every Proposition/Lemma of claims.md, exact-zero.md and rasp-compiler.md is in the .tex
    (titled `Proposition X of claims.md`, labelled, with the same items, listed under Machine
    checks)."""
    tex = (PROOFS / "exactattn-bounds.tex").read_text()
    checks = tex.split(r"\section{Machine checks}")[1]
    seen = 0
    for name in TEX_COVERS:
        for what, items in _md_statements(name).items():
            body = _tex_statement(tex, what, name)
            assert body is not None, f"{what} of proofs/{name} is missing from exactattn-bounds.tex"
            label = re.match(r"\s*\\label\{([^}]+)\}", body)
            assert label, f"{what}: no \\label right after the title"
            assert re.findall(r"\\item\[\((\w+)\)\]", body) == items, what
            if name == "claims.md":
                assert f"\\ref{{{label[1]}}}" in checks, f"{what} not listed under Machine checks"
            seen += 1
    assert seen >= 3  # D, L, Z: guards against a parse that silently finds nothing


def _check_mutation(mut: Mutation) -> None:
    rc, first = run(mut)
    if mut.false:
        assert rc == 1, f"{mut.key} ({mut.what}) not caught by {mut.check}: rc {rc}, {first}"
    elif mut.false is False:
        assert rc == 0, f"{mut.key} ({mut.what}) is documented as still true but fails: {first}"
    else:
        assert rc in (0, 1), f"{mut.key}: the check crashed: {first}"


@pytest.mark.parametrize("key", DEFAULT)
def test_mutation_caught(key: str) -> None:
    """A wrong constant makes its check exit 1 (a FAIL line, not a crash)."""
    (mut,) = [m for m in MUTATIONS if m.key == key]
    assert mut.false
    _check_mutation(mut)


@pytest.mark.slow
@pytest.mark.parametrize("mut", MUTATIONS, ids=[m.key for m in MUTATIONS])
def test_mutation_table(mut: Mutation) -> None:
    """The whole table: false variants caught, still-true variants pass, open ones run."""
    _check_mutation(mut)


def test_every_check_has_a_caught_mutation_in_the_default_run() -> None:
    """Each check_*.py fails on a wrong constant of its own theorem in the default run."""
    covered = {m.check for m in MUTATIONS if m.key in DEFAULT} - {None}
    assert covered == {p.name for p in CHECKS}, covered ^ {p.name for p in CHECKS}


def test_mutation_table_in_readme() -> None:
    """Every mutation is listed in proofs/README.md, each edit applies to the current source."""
    readme = (PROOFS / "README.md").read_text()
    for m in MUTATIONS:
        assert f"| {m.key} |" in readme, m.key
        path = PROOFS.parent / m.file if m.file.startswith("exactattn/") else PROOFS / m.file
        assert path.read_text().count(m.old) == 1, m.key


@pytest.mark.slow
def test_layer_perturbation_big_search() -> None:
    """Theorem 3's adversarial search with 5x the layers and 2x the steps of the default."""
    env = dict(
        os.environ,
        PYTHONPATH=str(PROOFS.parent),
        PROOFS_SEARCH_LAYERS="600",
        PROOFS_SEARCH_STEPS="80",
        PROOFS_FFN_COUNT="600",
    )
    proc = subprocess.run(
        [sys.executable, "check_layer_perturbation.py"],
        cwd=PROOFS,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "all checks passed" in proc.stdout
