"""Apply notes/test-regroup-plan.tsv: move each test file to its stage folder (issue 37).

Idempotent, so it can be re-run after other branches land on main with new or edited tests:

1. every row whose current path still exists is moved with ``git mv`` to its target (rows
   already applied are skipped; a row whose both ends exist is reported, nothing moved);
2. every test module in a subfolder of ``tests/`` that still builds paths from
   ``Path(__file__)`` gets them from ``tests/paths.py`` instead (``ROOT``, ``TESTS``), since
   its folder is no longer ``tests/``;
3. every reference to an old path (``tests/test_old.py``, ``../tests/test_old.py``) or old
   basename (``test_old.py``) in the repository's text files is rewritten to the new one;
4. test modules left at the top of ``tests/`` that the plan does not know are listed, so a
   row can be added to the TSV, and so are references to ``tests/test_*.py`` files that exist
   nowhere.

Run from anywhere inside the repository: ``python notes/apply_test_regroup.py``
(``--moves-only`` does step 1 alone, to commit pure renames apart from content changes;
``--dry-run`` says what would change and changes nothing). Exit 0 when the tree matches the
plan, 1 when something needs a person (unknown files, conflicts, dangling references).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(
    subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
)
PLAN = ROOT / "notes" / "test-regroup-plan.tsv"
SELF = Path(__file__).resolve()
# text files whose references are rewritten; stored results, goldens and fixtures are data
# and must stay byte-identical, the plan itself keeps the old paths on purpose
TEXT_SUFFIXES = {".md", ".py", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".tex", ".sh"}
TEXT_NAMES = {".ci/run"}
NEVER = ("reports/", "tests/golden/", "notes/test-regroup-plan.tsv")

# Path(__file__) spellings meaning the repository root or tests/ (longest first)
ROOT_SPELLINGS = [
    '__import__("pathlib").Path(__file__).resolve().parent.parent',
    "Path(__file__).resolve().parent.parent",
    "Path(__file__).resolve().parents[1]",
    "Path(__file__).parent.parent",
    "Path(__file__).parents[1]",
]
TESTS_SPELLINGS = ["Path(__file__).resolve().parent", "Path(__file__).parent"]


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def read_plan() -> list[tuple[str, str]]:
    rows = []
    for line in PLAN.read_text("utf-8").splitlines()[1:]:
        if line.strip():
            current, target, _reason = line.split("\t", 2)
            rows.append((current, target))
    return rows


def check_plan(rows: list[tuple[str, str]]) -> list[str]:
    """Targets must be unique paths with unique basenames (folders have no __init__.py)."""
    problems = []
    seen: dict[str, str] = {}
    for current, target in rows:
        name = Path(target).name
        if name in seen and seen[name] != target:
            problems.append(f"basename {name} twice: {seen[name]} and {target}")
        seen[name] = target
        if not target.startswith("tests/") or not current.startswith("tests/"):
            problems.append(f"row outside tests/: {current} -> {target}")
    return problems


def move(rows: list[tuple[str, str]], dry: bool) -> tuple[int, int, list[str]]:
    moved = done = 0
    problems = []
    for current, target in rows:
        if current == target:
            continue
        old, new = ROOT / current, ROOT / target
        if old.exists() and new.exists():
            problems.append(f"both exist, not moved: {current} and {target}")
        elif old.exists():
            print(f"  git mv {current} {target}")
            if not dry:
                new.parent.mkdir(parents=True, exist_ok=True)
                git("mv", current, target)
            moved += 1
        elif new.exists():
            done += 1
        else:
            problems.append(f"neither exists: {current} -> {target}")
    return moved, done, problems


# a module's own folder on sys.path (to import a sibling test module) stays right when moved
OWN_FOLDER = "sys.path.insert(0, str(Path(__file__).resolve().parent))"


def fix_paths(text: str) -> str:
    """Path(__file__) spellings -> ROOT / TESTS from tests/paths.py, import added."""
    used = set()
    text = text.replace(OWN_FOLDER, "\0OWN\0")
    for spelling in ROOT_SPELLINGS:
        if spelling in text:
            text = text.replace(spelling, "ROOT")
            used.add("ROOT")
    for spelling in TESTS_SPELLINGS:
        if spelling in text:
            text = text.replace(spelling, "TESTS")
            used.add("TESTS")
    text = text.replace("\0OWN\0", OWN_FOLDER)
    if not used:
        return text
    # "ROOT = ROOT" left by a module-level definition
    text = re.sub(r"^(ROOT|TESTS) = \1\n", "", text, flags=re.M)
    have = re.search(r"^from paths import (.*)$", text, flags=re.M)
    if have:
        used |= {n.strip() for n in have.group(1).split(",")}
        names = ", ".join(sorted(used))
        return text[: have.start()] + f"from paths import {names}" + text[have.end() :]
    line = f"from paths import {', '.join(sorted(used))}\n"
    future = re.search(r"^from __future__ import .*\n", text, flags=re.M)
    if future:
        return text[: future.end()] + "\n" + line + text[future.end() :]
    doc = re.match(r'\s*(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\')\n', text)
    at = doc.end() if doc else 0
    return text[:at] + "\n" + line + text[at:]


def fix_test_modules(dry: bool) -> list[Path]:
    changed = []
    for path in sorted((ROOT / "tests").glob("*/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/data/", "tests/golden/")):
            continue
        text = path.read_text("utf-8")
        new = fix_paths(text)
        if new != text:
            changed.append(path)
            print(f"  paths from tests/paths.py: {rel}")
            if not dry:
                path.write_text(new, "utf-8")
    if changed and not dry:
        # the added import sorted into place, `Path` dropped where it became unused
        files = [str(p) for p in changed]
        subprocess.run(
            [sys.executable, "-m", "ruff", "check", "-q", "--fix", "--select", "I,F401", *files],
            cwd=ROOT,
            check=False,
        )
        subprocess.run(
            [sys.executable, "-m", "ruff", "format", "-q", *files], cwd=ROOT, check=False
        )
    return changed


def text_files() -> list[Path]:
    out = []
    for rel in git("ls-files").splitlines():
        if rel.startswith(NEVER):
            continue
        if Path(rel).suffix in TEXT_SUFFIXES or rel in TEXT_NAMES:
            path = ROOT / rel
            if path.is_file() and path.resolve() != SELF:
                out.append(path)
    return out


def reference_pattern(current: str) -> re.Pattern[str]:
    stem = re.escape(Path(current).name)
    # (../)* tests/ test_old.py, or a bare test_old.py not part of a longer path or name
    return re.compile(rf"(?<![\w/.-])((?:\.\./)*)(tests/)?{stem}(?![\w.]*\w)")


def module_pattern(current: str) -> re.Pattern[str]:
    """A test module imported by name from another (``from test_old import x``)."""
    return re.compile(
        rf"(?<=\bfrom ){Path(current).stem}(?= import )|(?<=\bimport ){Path(current).stem}\b"
    )


def rewrite_references(rows: list[tuple[str, str]], dry: bool) -> list[Path]:
    renames = [
        (reference_pattern(c), t) for c, t in rows if c != t and Path(c).parent.name == "tests"
    ]
    modules = [(module_pattern(c), Path(t).stem) for c, t in rows if Path(c).stem != Path(t).stem]
    changed = []
    for path in text_files():
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        new = text
        for pattern, target in renames:
            new = pattern.sub(
                lambda m, t=target: m.group(1) + (t if m.group(2) else Path(t).name), new
            )
        if path.suffix == ".py":
            for pattern, stem in modules:
                new = pattern.sub(stem, new)
        if new != text:
            changed.append(path)
            print(f"  references: {path.relative_to(ROOT).as_posix()}")
            if not dry:
                path.write_text(new, "utf-8")
    return changed


def unknown_top_level(rows: list[tuple[str, str]]) -> list[str]:
    known = {c for c, _ in rows}
    return [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "tests").glob("*.py"))
        if p.relative_to(ROOT).as_posix() not in known
    ]


def dangling_references() -> list[str]:
    out = []
    pattern = re.compile(r"(?<![\w.-])tests/(?:[\w-]+/)*test_\w+\.py")
    for path in text_files():
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for m in sorted(set(pattern.findall(text))):
            if not (ROOT / m).exists():
                out.append(f"{path.relative_to(ROOT).as_posix()}: {m}")
    return out


def long_lines(paths: list[Path]) -> list[str]:
    """ruff's E501 on the files just rewritten: a longer path can push a line over the limit."""
    py = sorted({str(p) for p in paths if p.suffix == ".py"})
    if not py:
        return []
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "-q",
            "--select",
            "E501",
            "--output-format",
            "concise",
            *py,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in run.stdout.splitlines() if "E501" in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves-only", action="store_true", help="git mv only, no content change")
    ap.add_argument("--dry-run", action="store_true", help="say what would change")
    args = ap.parse_args()
    rows = read_plan()
    problems = check_plan(rows)
    print(f"plan: {len(rows)} rows ({PLAN.relative_to(ROOT)})")
    moved, done, move_problems = move(rows, args.dry_run)
    problems += move_problems
    print(f"moved {moved}, already in place {done}")
    if not args.moves_only:
        fixed = fix_test_modules(args.dry_run)
        print(f"test modules given tests/paths.py: {len(fixed)}")
        refs = rewrite_references(rows, args.dry_run)
        print(f"files with references rewritten: {len(refs)}")
        if not args.dry_run:
            for line in long_lines(fixed + refs):
                problems.append(f"line over 100 characters after the rewrite: {line}")
            for line in dangling_references():
                problems.append(f"reference to a file that does not exist: {line}")
    for name in unknown_top_level(rows):
        problems.append(f"not in the plan (add a row to {PLAN.name}): {name}")
    for p in problems:
        print(f"NEEDS A PERSON: {p}")
    if not problems:
        print("tests/ matches the plan")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
