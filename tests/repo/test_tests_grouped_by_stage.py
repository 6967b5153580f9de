"""The test suite stays grouped by stage (issue 37; docs/testing.md, "Where a new test goes").

Test modules live in ``tests/<stage>/``, never at the top of ``tests/`` (which holds only the
shared helpers); the folders have no ``__init__.py``, so pytest's default import mode needs every
module's basename to be unique; paths come from ``tests/paths.py``, not from a module's own
place; and every stage folder is one docs/testing.md tells a contributor about.
"""

from __future__ import annotations

import re

from paths import ROOT, TESTS

# test modules allowed at the top of tests/: none (helpers there are not named test_*.py)
KEPT_AT_TOP: frozenset[str] = frozenset()
NOT_TESTS = {"data", "golden", "__pycache__"}


def _modules() -> list:
    return [
        p
        for p in sorted(TESTS.rglob("*.py"))
        if not NOT_TESTS & set(p.relative_to(TESTS).parts[:-1])
    ]


def test_no_test_module_at_the_top_of_tests() -> None:
    top = sorted(p.name for p in TESTS.glob("test_*.py") if p.name not in KEPT_AT_TOP)
    assert not top, (
        f"test modules at the top of tests/: {top}; move each into its stage folder "
        "(docs/testing.md, 'Where a new test goes'; python notes/apply_test_regroup.py after "
        "adding a row to notes/test-regroup-plan.tsv)"
    )


def test_basenames_unique_and_no_package_files() -> None:
    seen: dict[str, str] = {}
    twice = []
    for p in _modules():
        rel = p.relative_to(ROOT).as_posix()
        assert p.name != "__init__.py", f"{rel}: tests/ folders are not packages (docs/testing.md)"
        if p.name in seen:
            twice.append((seen[p.name], rel))
        seen[p.name] = rel
    assert not twice, f"two test files share a basename (pytest cannot import both): {twice}"


def test_paths_come_from_tests_paths() -> None:
    # a module's own folder on sys.path (to import a sibling test module) is the one exception
    own = "sys.path.insert(0, str(Path(__file__).resolve().parent))"
    guess = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents?\b")
    bad = [
        p.relative_to(ROOT).as_posix()
        for p in _modules()
        if p.parent != TESTS and guess.search(p.read_text("utf-8").replace(own, ""))
    ]
    assert not bad, f"build paths with `from paths import ROOT, TESTS` instead: {bad}"


def test_every_stage_folder_is_documented() -> None:
    page = (ROOT / "docs" / "testing.md").read_text("utf-8")
    folders = sorted(
        p.relative_to(ROOT).as_posix()
        for p in TESTS.rglob("*")
        if p.is_dir() and not NOT_TESTS & set(p.relative_to(TESTS).parts)
    )
    missing = [f for f in folders if f"`{f}/`" not in page]
    assert not missing, f"docs/testing.md does not say what goes in {missing}"
