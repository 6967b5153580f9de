"""The repository stands alone: the architecture document names exactly the modules that
exist, every module says what its room is, every link in README and docs resolves, and no
test or document points outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from paths import ROOT

PKG = ROOT / "exactattn"


def _modules() -> set[str]:
    return {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")}


def test_architecture_names_exactly_the_modules() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)`", doc))
    assert named == _modules(), (sorted(_modules() - named), sorted(named - _modules()))


def test_every_module_starts_with_a_docstring() -> None:
    missing = [
        m
        for m in sorted(_modules())
        if ast.get_docstring(ast.parse((PKG / m).read_text(encoding="utf-8"))) is None
    ]
    assert not missing


def _links(md: Path) -> list[str]:
    text = md.read_text(encoding="utf-8")
    return [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t]


def test_links_in_readme_and_docs_resolve() -> None:
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _links(md):
            if not (md.parent / target).exists():
                broken.append(f"{md.relative_to(ROOT)} → {target}")
    assert not broken


def test_no_absolute_or_outside_paths() -> None:
    pattern = re.compile(r"/work/|/root/|\.\./shared|/home/")
    hits = []
    for folder in ("exactattn", "tests", "docs", "benchmarks", "proofs"):
        for p in (ROOT / folder).rglob("*"):
            if p.suffix in (".py", ".md", ".tex") and p.name != Path(__file__).name:
                for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                    if pattern.search(line):
                        hits.append(f"{p.relative_to(ROOT)}:{i}")
    assert not hits
