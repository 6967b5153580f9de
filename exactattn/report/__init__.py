"""Reports a researcher can paste into a paper: Markdown or LaTeX, with figures.

``write_report(result, path)`` reads an ``exactattn-result/1`` dict and writes

* ``.md``: ``PATH`` plus PNG figures ``<stem>-gamma.png``, ``<stem>-error.png`` and, when the
  result has τ*(n) or τ_thm(n), ``<stem>-tau.png``, beside it;
* ``.tex``: ``PATH`` (a standalone document), ``<stem>-fragment.tex`` (to ``\\input`` into a
  paper) and the same figures as PDF.

The text files depend only on the result (no dates, versions or absolute paths), so committed
reports can be compared with regenerated ones; the figures are deterministic as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import all_or_nothing, write_text_atomic
from exactattn.report import latex, markdown
from exactattn.report.data import ReportData, load
from exactattn.report.figures import ERROR_FIG, GAMMA_FIG, TAU_FIG, figure_names, write_figures

__all__ = ["FORMATS", "render", "report_files", "write_report"]

#: Report formats by file suffix.
FORMATS = {".md": "md", ".markdown": "md", ".tex": "tex"}
_FIGURE_SUFFIX = {"md": "png", "tex": "pdf"}
FIGURES = (GAMMA_FIG, ERROR_FIG, TAU_FIG)


def _format_of(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in _FIGURE_SUFFIX:
            raise UsageError(f"report format must be 'md' or 'tex', got {fmt!r}")
        return fmt
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise UsageError(
            f"cannot tell the report format from {path.name!r} (fix: use a .md or .tex file "
            "name, or `exactattn report --format md|tex`)"
        ) from None


def _fragment_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}-fragment.tex")


def report_files(path: Path, fmt: str | None = None) -> list[Path]:
    """Every file a report at ``path`` may write (the main file, the LaTeX fragment, each
    figure), so a command can refuse one that is also an input before any work."""
    path = Path(path)
    kind = _format_of(path, fmt)
    stem = path.with_name(path.stem)
    figures = [stem.with_name(f"{stem.name}-{n}.{_FIGURE_SUFFIX[kind]}") for n in FIGURES]
    return [path, *([_fragment_path(path)] if kind == "tex" else []), *figures]


def render(result: dict[str, Any], path: Path, fmt: str | None = None) -> dict[Path, str]:
    """The text files :func:`write_report` would write (figures excluded), by path.

    For checking committed reports against a regeneration without touching the disk.
    """
    path = Path(path)
    kind = _format_of(path, fmt)
    data = load(result)
    return _render(data, path, kind)


def _render(data: ReportData, path: Path, kind: str) -> dict[Path, str]:
    suffix = _FIGURE_SUFFIX[kind]
    figures = [(name, f"{path.stem}-{name}.{suffix}") for name in figure_names(data)]
    if kind == "md":
        return {path: markdown.render(data, figures)}
    fragment = latex.render_fragment(data, figures)
    return {path: latex.render_standalone(data, fragment), _fragment_path(path): fragment}


def write_report(result: dict[str, Any], path: Path, fmt: str | None = None) -> list[Path]:
    """Write the report for ``result`` to ``path`` and return every file written.

    ``fmt`` is ``"md"`` or ``"tex"``; None takes it from the suffix of ``path``. The main file
    comes first, then the LaTeX fragment (tex), then the figures. Raises
    :class:`~exactattn.core.errors.UsageError` for an unknown format or a malformed result.
    """
    path = Path(path)
    kind = _format_of(path, fmt)
    data = load(result)
    texts = _render(data, path, kind)  # everything rendered before the first file is written
    written = []
    with all_or_nothing():  # the report and its figures appear together, or none (full disk)
        for target, content in texts.items():
            write_text_atomic(target, content)
            written.append(target)
        stem = path.with_name(path.stem)
        written += [file for _name, file in write_figures(data, stem, _FIGURE_SUFFIX[kind])]
    return written
