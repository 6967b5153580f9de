"""Markdown and LaTeX renderings of an ``exactattn-certificate/1`` file (``exactattn report``).

A file's dict is validated first (:func:`~exactattn.results.resultfile.validate_certificate`:
exit 2 naming the JSON path), and every field printed — names, claim expressions,
justifications, reasons and the numbers too — goes through the report room's escapers, so a
hand-edited file cannot inject markup (issue 40: an ``error_bound`` of ``<img onerror>`` reached
the Markdown raw, a ``tau_theorem`` end of ``\\input{/etc/passwd}`` the LaTeX). Numbers of more
than 100 digits are abbreviated as in the check report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_text_atomic
from exactattn.report.escape import plain as md_escape
from exactattn.report.escape import text as tex_escape
from exactattn.report.fmt import long_digits
from exactattn.report.latex import PACKAGES
from exactattn.results.certificate import (
    Certificate,
    CertificateRange,
    ball_ends,
    ball_upper,
    certificate_from_json,
    up_text,
)
from exactattn.results.resultfile import validate_certificate

Cert = Certificate | CertificateRange


def _escaper(escape: Callable[[str], str]) -> Callable[[object], str]:
    """Every value printed, numbers too (a file may hold anything), long digit runs cut."""
    return lambda x: escape(long_digits(str(x)))


def _lines(c: Cert, esc: Callable[[object], str]) -> list[tuple[str, str]]:
    """(label, text) pairs shared by both formats; every text already escaped."""
    out: list[tuple[str, str]] = []
    if isinstance(c, CertificateRange):
        f = c.first_failure
        verdict = (
            f"certified for every n = {esc(c.lo)}..{esc(c.hi)}"
            if f is None
            else f"first length not certified: n = {esc(f.n)} ({esc(f.reason)})"
        )
        out.append(("verdict", verdict))
        out.append(("τ", esc(c.tau)))
        out.append(("lengths evaluated", esc(c.evaluated)))
    else:
        b = c.body
        out.append(("verdict", f"{esc(b.verdict.status)}: {esc(b.verdict.reason)}"))
        out.append(("n", esc(c.n)))
        out.append(("τ", esc(b.tau)))
        for layer in b.layers:
            out.append(
                (
                    f"error bound after layer {layer.index} ({layer.kind})",
                    esc(up_text(layer.error_bound)),
                )
            )
        lo, hi = ball_ends(b.tau_theorem)
        out.append(("τ_thm(n) (Theorem 5)", f"[{esc(lo)}, {esc(hi)}]"))
        g = b.tau_grid
        if g is not None and g.last_certified is not None:
            last = ball_upper(g.last_certified.tau)
            out.append((f"last grid τ certified ({g.grid})", esc(last)))
        if g is not None and g.first_not_certified is not None:
            out.append(("first grid τ not certified", esc(ball_upper(g.first_not_certified.tau))))
    return out


def _conditional(c: Cert, e: Callable[[str], str], word: str) -> str:
    """The closing sentence: which claims the answer assumes and why (escaped by ``e``)."""
    p = c.provenance
    keys = ", ".join(e(k) for k in c.conditional_on)
    if p is not None and not p.rederived:
        why = e(p.reason or "the model is not re-derived")
        return f"{word} on the claims {keys}: none is proved for this file ({why})."
    if c.conditional_on:
        return f"{word} on the claims {keys}, asserted by the user and not proved."
    return "Every claim used is proved."


def certificate_markdown(c: Cert) -> str:
    e = _escaper(md_escape)
    rows = ["| | |", "| --- | --- |"] + [f"| {e(k)} | {v} |" for k, v in _lines(c, e)]
    chain = [
        f"{i}. **{e(s.step)}**: {e(s.statement)} — {e(s.proved_in)}"
        for i, s in enumerate(c.proof_chain, 1)
    ]
    cond = _conditional(c, e, "**Conditional**")
    return "\n".join(
        [
            f"# Certificate: {e(c.model)}",
            "",
            *rows,
            "",
            "## Proof chain",
            "",
            *chain,
            "",
            cond,
            "",
        ]
    )


def certificate_latex(c: Cert) -> str:
    e = _escaper(tex_escape)
    rows = [f"{e(k)} & {v} \\\\" for k, v in _lines(c, e)]
    chain = [
        f"\\item \\textbf{{{e(s.step)}}}: {e(s.statement)} --- {e(s.proved_in)}"
        for s in c.proof_chain
    ]
    cond = _conditional(c, e, "\\textbf{Conditional}")
    return "\n".join(
        [
            "\\documentclass[11pt]{article}",
            "\\usepackage{" + ",".join(PACKAGES) + "}",
            "\\begin{document}",
            f"\\section*{{Certificate: {e(c.model)}}}",
            "\\begin{tabular}{ll}",
            *rows,
            "\\end{tabular}",
            "\\subsection*{Proof chain}",
            "\\begin{enumerate}",
            *chain,
            "\\end{enumerate}",
            cond,
            "\\end{document}",
            "",
        ]
    )


def write_certificate_report(c: Cert | dict[str, Any], out: Path, fmt: str | None) -> Path:
    """Write the rendering chosen by ``fmt`` or the suffix of ``out`` (a file's dict is read
    into its record first)."""

    kind = fmt or ("tex" if out.suffix == ".tex" else "md" if out.suffix == ".md" else None)
    if kind is None:
        raise UsageError(f"{out}: give --format md|tex or a .md/.tex path")
    if isinstance(c, dict):
        validate_certificate(c)  # exit 2 naming the JSON path; then the record reads it
        c = certificate_from_json(c)
    text = certificate_markdown(c) if kind == "md" else certificate_latex(c)
    write_text_atomic(out, text)
    return out
