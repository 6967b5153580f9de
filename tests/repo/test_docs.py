"""docs/ is a user guide, notes/ the lab notebook (issue 37).

docs/scale.md stays a short guide (under 400 lines), and no page of docs/ carries a dated run
log: an ISO date, a commit hash, or "kept for the record". Those belong in notes/ (benchmark
rounds, fuzz runs), whose links must resolve like the docs'. Each rule is also run on the
lab notebook itself, so a marker the pattern stopped seeing fails here too.
"""

from __future__ import annotations

import re
from pathlib import Path

from paths import ROOT

DOCS = ROOT / "docs"
NOTES = ROOT / "notes"
SCALE_MAX_LINES = 400  # the guide must stay under this

# what makes a line a dated run-log entry rather than user documentation
DATE = r"\b20\d\d-[01]\d-[0-3]\d\b"  # an ISO date: 2026-12-02
COMMIT = r"\bcommit\s+[0-9a-f]{7,40}\b"  # "commit 26f1b6d"
# a bare abbreviated git hash: 7–12 hex digits with a letter and a digit, standing alone (a
# full 40-digit pin of an upstream version, a digest shortened with "…", is not a run log)
SHORT_HASH = (
    r"(?<![\w/.…-])(?!\d+e\d+(?![\w…]))"  # not a number's exponent (1e999999999)
    r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}(?![\w…])"
)
RECORD = r"kept for the record"
MARKERS = re.compile("|".join(f"(?:{p})" for p in (DATE, COMMIT, SHORT_HASH, RECORD)))


def dated_lines(text: str) -> list[str]:
    """Every run-log marker in ``text``: its line number, the match and the line."""
    return [
        f"{i}: {m.group(0)!r}: {line.strip()[:100]}"
        for i, line in enumerate(text.splitlines(), 1)
        for m in MARKERS.finditer(line)
    ]


def _links(md: Path) -> list[str]:
    text = md.read_text(encoding="utf-8")
    return [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t]


def test_scale_guide_is_short() -> None:
    n = len((DOCS / "scale.md").read_text(encoding="utf-8").splitlines())
    assert n < SCALE_MAX_LINES, (
        f"docs/scale.md has {n} lines (limit {SCALE_MAX_LINES}): keep the user guide short and "
        "put measurements of a round in notes/benchmark-rounds.md"
    )


def test_no_dated_run_logs_in_docs() -> None:
    found = {
        md.name: hits
        for md in sorted(DOCS.glob("*.md"))
        if (hits := dated_lines(md.read_text(encoding="utf-8")))
    }
    assert not found, (
        f"dated run-log lines in docs/ (move them to notes/, keep the current numbers): {found}"
    )


def test_the_rules_catch_the_lab_notebook() -> None:
    """The old docs/scale.md, now notes/benchmark-rounds.md, breaks both rules: the markers
    find its dates, commits and "kept for the record", and it is far over the line limit."""
    text = (NOTES / "benchmark-rounds.md").read_text(encoding="utf-8")
    hits = "\n".join(dated_lines(text))
    for needle in ("'2026-12-02'", "'commit 26f1b6d'", "'8f1ace7'", "'kept for the record'"):
        assert needle in hits, needle
    assert len(text.splitlines()) > SCALE_MAX_LINES
    assert dated_lines((NOTES / "fuzz-runs.md").read_text(encoding="utf-8"))


def test_markers_spare_user_numbers() -> None:
    """Digits, decimals, digests shortened with "…" and a pinned upstream commit are not logs."""
    for ok in (
        "| 10 | 1024 | 42 | 1048576 | 1344 |",
        "0.268941421370 and 0.0000597",
        '"model_sha256": "6999eb24…"',
        "tracr at commit `9ce2b8c82b6ba10e62e86cf6f390e7536d4fd2cd`",
        "the exact value -10922667/262144",
        "numbers 4,000 characters (1e999999999 is refused)",
    ):
        assert not dated_lines(ok), ok
    for bad in (
        "measured 2026-12-02 on the idle machine",
        "on 86259fe, load 1.6",
        "(commit 5cc7708)",
    ):
        assert dated_lines(bad), bad


def test_notes_links_resolve_and_readme_lists_every_note() -> None:
    broken = [
        f"{md.relative_to(ROOT)} → {t}"
        for md in sorted(NOTES.glob("*.md"))
        for t in _links(md)
        if not (md.parent / t).exists()
    ]
    assert not broken
    readme = (NOTES / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in sorted(NOTES.iterdir()) if p.name != "README.md"]
    unlisted = [name for name in unlisted if f"]({name})" not in readme]
    assert not unlisted, f"notes/README.md does not list {unlisted}"
