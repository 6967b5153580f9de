"""Markdown and LaTeX renderings of an ``exactattn-certificate/1`` file (``exactattn report``).

Every string that came from a model file (its name, claim expressions, justifications) is
escaped with the report room's escapers, so a hostile name cannot inject markup.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_text_atomic
from exactattn.report.latex import PACKAGES
from exactattn.report.latex import text as tex_escape
from exactattn.report.markdown import plain as md_escape
from exactattn.results.certificate import (
    Certificate,
    CertificateRange,
    ball_ends,
    ball_upper,
    certificate_from_json,
    up_text,
)

Cert = Certificate | CertificateRange


def _lines(c: Cert, esc: Any) -> list[tuple[str, str]]:
    """(label, text) pairs shared by both formats; every text already escaped."""
    out: list[tuple[str, str]] = []
    if isinstance(c, CertificateRange):
        f = c.first_failure
        verdict = (
            f"certified for every n = {c.lo}..{c.hi}"
            if f is None
            else f"first length not certified: n = {f.n} ({esc(str(f.reason))})"
        )
        out.append(("verdict", verdict))
        out.append(("τ", esc(str(c.tau))))
        out.append(("lengths evaluated", str(c.evaluated)))
    else:
        b = c.body
        out.append(("verdict", f"{esc(str(b.verdict.status))}: {esc(str(b.verdict.reason))}"))
        out.append(("n", str(c.n)))
        out.append(("τ", esc(str(b.tau))))
        for layer in b.layers:
            out.append(
                (
                    f"error bound after layer {layer.index} ({layer.kind})",
                    up_text(layer.error_bound),
                )
            )
        lo, hi = ball_ends(b.tau_theorem)
        out.append(("τ_thm(n) (Theorem 5)", f"[{lo}, {hi}]"))
        g = b.tau_grid
        if g is not None and g.last_certified is not None:
            out.append(("last grid τ certified (2^(k/8))", ball_upper(g.last_certified.tau)))
        if g is not None and g.first_not_certified is not None:
            out.append(("first grid τ not certified", ball_upper(g.first_not_certified.tau)))
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
    e = md_escape
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
    e = tex_escape
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
        try:
            c = certificate_from_json(c)
        except ValueError:
            raise UsageError("not a complete exactattn-certificate/1 file") from None
    text = certificate_markdown(c) if kind == "md" else certificate_latex(c)
    write_text_atomic(out, text)
    return out
