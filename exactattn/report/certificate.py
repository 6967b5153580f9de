"""Markdown and LaTeX renderings of an ``exactattn-certificate/1`` file (``exactattn report``).

Every string that came from a model file (its name, claim expressions, justifications) is
escaped with the report room's escapers, so a hostile name cannot inject markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_text_atomic
from exactattn.report.latex import PACKAGES
from exactattn.report.latex import text as tex_escape
from exactattn.report.markdown import plain as md_escape


def _lines(c: dict[str, Any], esc: Any) -> list[tuple[str, str]]:
    """(label, text) pairs shared by both formats; every text already escaped."""
    out: list[tuple[str, str]] = []
    if "range" in c:
        f = c.get("first_failure")
        lo, hi = c["range"]
        verdict = (
            f"certified for every n = {lo}..{hi}"
            if f is None
            else f"first length not certified: n = {f['n']} ({esc(f['reason'])})"
        )
        out.append(("verdict", verdict))
        out.append(("τ", esc(str(c["tau"]))))
        out.append(("lengths evaluated", str(c["evaluated"])))
    else:
        out.append(("verdict", f"{esc(c['status'])}: {esc(c['reason'])}"))
        out.append(("n", str(c["n"])))
        out.append(("τ", esc(str(c["tau"]))))
        for layer in c["layers"]:
            out.append(
                (
                    f"error bound after layer {layer['index']} ({layer['kind']})",
                    layer["error_bound"],
                )
            )
        t = c["tau_theorem"]
        out.append(("τ_thm(n) (Theorem 5)", f"[{t['lower']}, {t['upper']}]"))
        g = c.get("tau_grid") or {}
        if g.get("last_certified"):
            out.append(("last grid τ certified (2^(k/8))", g["last_certified"]["tau"]["upper"]))
        if g.get("first_not_certified"):
            out.append(("first grid τ not certified", g["first_not_certified"]["tau"]["upper"]))
    return out


def certificate_markdown(c: dict[str, Any]) -> str:
    e = md_escape
    rows = ["| | |", "| --- | --- |"] + [f"| {e(k)} | {v} |" for k, v in _lines(c, e)]
    chain = [
        f"{i}. **{e(s['step'])}**: {e(s['statement'])} — {e(s['proved_in'])}"
        for i, s in enumerate(c["proof_chain"], 1)
    ]
    cond = (
        "**Conditional** on the claims "
        + ", ".join(e(k) for k in c["conditional_on"])
        + ", asserted by the user and not proved."
        if c["conditional_on"]
        else "Every claim used is proved."
    )
    return "\n".join(
        [
            f"# Certificate: {e(c['model'])}",
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


def certificate_latex(c: dict[str, Any]) -> str:
    e = tex_escape
    rows = [f"{e(k)} & {v} \\\\" for k, v in _lines(c, e)]
    chain = [
        f"\\item \\textbf{{{e(s['step'])}}}: {e(s['statement'])} --- {e(s['proved_in'])}"
        for s in c["proof_chain"]
    ]
    cond = (
        "\\textbf{Conditional} on the claims "
        + ", ".join(e(k) for k in c["conditional_on"])
        + ", asserted by the user and not proved."
        if c["conditional_on"]
        else "Every claim used is proved."
    )
    return "\n".join(
        [
            "\\documentclass[11pt]{article}",
            "\\usepackage{" + ",".join(PACKAGES) + "}",
            "\\begin{document}",
            f"\\section*{{Certificate: {e(c['model'])}}}",
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


def write_certificate_report(c: dict[str, Any], out: Path, fmt: str | None) -> Path:
    """Write the rendering chosen by ``fmt`` or the suffix of ``out``."""

    kind = fmt or ("tex" if out.suffix == ".tex" else "md" if out.suffix == ".md" else None)
    if kind is None:
        raise UsageError(f"{out}: give --format md|tex or a .md/.tex path")
    if not isinstance(c.get("proof_chain"), list) or not isinstance(c.get("model"), str):
        raise UsageError("not a complete exactattn-certificate/1 file")
    text = certificate_markdown(c) if kind == "md" else certificate_latex(c)
    write_text_atomic(out, text)
    return out
