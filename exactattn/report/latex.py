"""The LaTeX report: an includable fragment and a standalone document around it.

Tables use booktabs, exact rationals are typeset as fractions, certified values keep their
enclosure (``0.2689{\\scriptstyle[4,5]}`` is [0.26894, 0.26895]; the captions say so), and
figures are PDFs included with graphicx. Only packages from texlive-latex-base and
texlive-latex-recommended are used.
"""

from __future__ import annotations

import re
from pathlib import Path

import exactattn.report.closed as closed
import exactattn.report.fmt as fmt
import exactattn.report.table as table_model
import exactattn.report.tables as tables
from exactattn.core.errors import UsageError
from exactattn.report.data import ReportData, non_monotone_lines
from exactattn.report.escape import _TEXT_ESCAPES, text  # noqa: F401  (re-exported)
from exactattn.report.figures import ERROR_FIG, GAMMA_FIG, TAU_FIG
from exactattn.report.table import Table

PACKAGES = ["amsmath", "booktabs", "graphicx"]

NOTATION = (
    r"Certified values are enclosures with outward-rounded endpoints: "
    r"$0.2689{\scriptstyle[4,5]}$ denotes $[0.26894,\,0.26895]$, "
    r"$3.296{\scriptstyle[8,9]}\times10^{-7}$ denotes "
    r"$[3.2968\times10^{-7},\,3.2969\times10^{-7}]$, and $[a,\,b]$ is an explicit interval; "
    r"only digits the enclosure supports are printed. Exact rationals are typeset as "
    r"fractions; ${}^{\dagger}$ marks an exact rational too long to print, shown by an "
    r"enclosure instead."
)

SAFE_FILE = re.compile(r"[A-Za-z0-9._-]+")


def safe_report_name(path: Path) -> bool:
    """Whether a .tex report at ``path`` gets figure names LaTeX reads safely (``check``
    tests this before the run, so a long run is not lost to the name at the end)."""
    return SAFE_FILE.fullmatch(f"{path.stem}-fragment.tex") is not None


"""Figure file names that \\includegraphics reads literally."""

tt = table_model.tt
math = table_model.tex_math
cell = table_model.tex_value


def _table(t: Table, label: str, caption: str) -> list[str]:
    t.label, t.caption = label, caption
    return table_model.latex(t)


def summary(data: ReportData) -> list[str]:
    info = data.info
    items = [
        r"\item[Model] "
        + tt(data.model)
        + (f"; output {text(str(info.output))}." if info.output else ".")
    ]
    if info.alphabet is not None:
        parts = [", ".join(tt(t) for t in info.alphabet)]
        for tok, name in ((info.bos, "BOS"), (info.eos, "EOS")):
            parts.append(f"{name} {tt(tok)}" if tok else f"no {name}")
        if info.d is not None:
            parts.append(f"width $d = {int(info.d)}$")
        items.append(r"\item[Alphabet] " + "; ".join(parts) + ".")
    if data.layers:
        layers = "; ".join(f"layer {ly.index}: {text(ly.label)}" for ly in data.layers)
        items.append(rf"\item[Layers] {len(data.layers)}: {layers}.")
    lo, hi = data.n_range
    items.append(
        rf"\item[Lengths] $n = {lo},\dots,{hi}$, every input of each length "
        rf"({data.total_inputs} inputs in all)."
    )
    temp, overridden = data.temperature
    if temp is not None:
        how = "overridden on the command line" if overridden else "the model's"
        items.append(rf"\item[Temperature] $\tau(n) = {{}}${tt(str(temp))} ({how}).")
    if data.has_bounds:
        items.append(r"\item[Bounds] proved per-layer bounds included (\texttt{-{}-bounds}).")
    _ok, label, verdict = data.verdict_line()
    items.append(
        r"\item[Verdict] " + (rf"\textbf{{{text(label)}}}: " if label else "") + text(verdict)
    )
    return [r"\begin{description}"] + items + [r"\end{description}"]


def stack(*lines: str) -> str:
    """A header cell on several lines (plain LaTeX, no extra package)."""
    if len(lines) == 1:
        return lines[0]
    return r"\begin{tabular}[b]{@{}c@{}}" + r"\\".join(lines) + r"\end{tabular}"


def lengths_table(data: ReportData) -> list[str]:
    caption = (
        rf"Measured quantities per input length $n$ for {tt(data.model)}, over every input of "
        r"each length. $\gamma(n)$ (the smallest gap below a maximal score; $\infty$ when there "
        r"is none), $x_{\max}(n)$ and the activation maxima are exact; $\tau(n)$ is the "
        r"temperature used; disagreements count inputs the hard and soft meanings classify "
        r"differently; min margin is the smallest hard margin. " + NOTATION
    )
    return _table(tables.lengths(data), f"tab:exactattn-{data.slug}-lengths", caption)


def errors_table(data: ReportData) -> list[str]:
    caption = (
        rf"Certified per-layer error of {tt(data.model)}: $\varepsilon_\ell(n)$ is the maximum "
        r"over inputs and positions of $\|x_{\mathrm{soft}}-x_{\mathrm{hard}}\|_\infty$ after "
        r"layer $\ell$. The status of $\varepsilon\le1$ is certified for every layer that feeds "
        r"another layer (holds, fails, or undecided)."
    )
    if data.has_bounds:
        caption += (
            r" Bounds are the proved per-layer bounds and $\varepsilon_\ell/$bound the measured "
            r"upper end over the bound, both rounded up; violations count layers whose certified "
            r"error exceeds its bound."
        )
    caption += " Enclosures are written as in the table of measured quantities."
    return _table(tables.errors(data), f"tab:exactattn-{data.slug}-errors", caption)


def temperatures_table(data: ReportData) -> list[str]:
    grid = f" on the grid ${_grid_math(data.tau_grid)}$" if data.tau_grid else ""
    caption = (
        rf"Temperatures for {tt(data.model)}: the $\tau(n)$ used, $\tau_{{\mathrm{{thm}}}}(n)$ "
        r"that the proved bounds guarantee (a certified enclosure), and the brackets "
        rf"$\tau^*_{{\mathrm{{dec}}}}(n)$ and $\tau^*_{{\mathrm{{inv}}}}(n)$ from certified "
        rf"searches{grid}, each the first crossing met when warming the model up from its own "
        r"$\tau(n)$: [last temperature found good, next grid temperature, found bad], rounded "
        r"outward. $\tau^*_{\mathrm{dec}}$ asks that every decision agree with the hard "
        r"meaning and none be undecided; $\tau^*_{\mathrm{inv}}$ asks in addition that "
        r"$\varepsilon\le1$ after every layer that feeds another (the per-layer lemma's "
        r"hypothesis). $\infty$ means the search reached its top, $0$ that even its smallest "
        r"temperature failed. Nothing between grid points is certified."
    )
    if data.legacy_tau_star:
        caption += (
            r" This result predates the split into two searches: its single bracket (searched "
            r"from $\tau = 1$, without the monotonicity scan) also required $\varepsilon\le1$, "
            r"so it is shown as $\tau^*_{\mathrm{inv}}$."
        )
    lines = non_monotone_lines(data.tau_star_rows())
    if data.has_tau_scan:
        caption += r" Every grid temperature from a lower end down to the model's $\tau(n)$ was "
        caption += (
            r"checked too; not monotone in $\tau$: " + " ".join(_star_text(x) for x in lines)
            if lines
            else "checked too, and none was found bad."
        )
    label = f"tab:exactattn-{data.slug}-temperatures"
    return _table(tables.temperatures(data), label, caption)


def _star_text(line: str) -> str:
    """A plain-text τ* sentence as LaTeX text, with τ*_dec / τ*_inv set as math."""
    out = text(line.replace("τ*_dec", "TAUSTARDEC").replace("τ*_inv", "TAUSTARINV"))
    return out.replace("TAUSTARDEC", r"$\tau^*_{\mathrm{dec}}$").replace(
        "TAUSTARINV", r"$\tau^*_{\mathrm{inv}}$"
    )


def _grid_math(grid: str) -> str:
    """``2^(k/8)`` as ``2^{k/8}``; anything else verbatim in typewriter."""
    match = re.fullmatch(r"(\d+)\^\(([^()]*)\)", grid)
    if match:
        return match.group(1) + "^{" + match.group(2) + "}"
    return r"\text{" + tt(grid) + "}"


def witness_table(data: ReportData) -> list[str]:
    caption = (
        rf"Witnesses for {tt(data.model)}: the input, layer, head and positions attaining "
        r"$\gamma(n)$; for each layer $\ell$, the input and position attaining "
        r"$\varepsilon_\ell(n)$; the first input the two meanings classify differently. "
        r"Positions count the sequence the transformer sees (BOS at 0, if present)."
    )
    return _table(tables.witnesses(data), f"tab:exactattn-{data.slug}-witnesses", caption)


def closed_forms_tables(data: ReportData) -> list[str]:
    """The verified closed forms of the exact quantities and the brackets of certified ones."""
    exact, brackets = closed.tables(data.closed_forms)
    lines: list[str] = []
    if exact is not None:
        caption = (
            rf"Closed forms for {tt(data.model)}: each was conjectured from the smallest lengths "
            r"listed and then reproduced exactly (as rationals) at every held-back length listed; "
            r"a conjecture the data confirm, not a proof for larger $n$. Where no form verified, "
            r"the row says so and lists the lengths tried."
        )
        lines += _table(exact, f"tab:exactattn-{data.slug}-closed", caption)
    if brackets is not None:
        caption = (
            rf"Brackets for {tt(data.model)}: $c_1\cdot\mathrm{{shape}}(n) \le$ value$(n) \le "
            r"c_2\cdot\mathrm{shape}(n)$ holds, certified, at every listed $n$ (the result's "
            r"enclosures are its only evidence); a description of the checked lengths, not an "
            r"asymptotic proof."
        )
        lines += [""] + _table(brackets, f"tab:exactattn-{data.slug}-brackets", caption)
    return lines


def compiler_gap_table(data: ReportData) -> list[str]:
    """Compiled RASP models: measured γ(n) beside the compiler's bound (issue 22)."""
    t = tables.compiler_gap(data)
    if t is None:
        return []
    expr = tt(fmt.long_digits(str(data.compiler_gap_rows()[0][1].expression)))
    caption = (
        rf"Compiler gap bound for {tt(data.model)}: the compiler's lower bound "
        rf"$\gamma(n) \ge{{}}${expr} (\texttt{{proofs/rasp-gaps.md}}) beside the measured "
        r"$\gamma(n)$; a bound above a measured gap (of the model or of one head) is a problem."
    )
    return _table(t, f"tab:exactattn-{data.slug}-compiler-gap", caption)


def figure_captions(data: ReportData) -> dict[str, str]:
    fit = data.gamma_fit()
    gamma_form = data.gamma_closed_form()
    gamma_tex = None if gamma_form is None else closed.form_latex(gamma_form)
    if gamma_form is not None and gamma_tex is not None:
        fit_sentence = (
            r"Dashed: the closed form $\gamma(n) = "
            + gamma_tex
            + r"$, fitted on $n\in\{"
            + fmt.runs(gamma_form.fitted_on, r",\dots,")
            + r"\}$ and verified exactly on $n\in\{"
            + fmt.runs(gamma_form.verified_on, r",\dots,")
            + r"\}$."
        )
    elif fit is None:
        fit_sentence = r"No power law is fitted (fewer than two $n$ with finite $\gamma$)."
    else:
        ns = fmt.runs(fit.ns, r",\dots,")
        fit_sentence = (
            r"Dashed: least-squares fit of $\log\gamma$ on $\log n$ over $n\in\{" + ns + r"\}$, "
            "$" + fmt.fit_tex(fit) + "$ (floating point, for display only)."
        )
    captions = {
        GAMMA_FIG: rf"$\gamma(n)$ for {tt(data.model)}, exact, on log--log axes; $\infty$ (no "
        r"strict gap) is marked at the top edge. " + fit_sentence,
        ERROR_FIG: rf"Upper ends of the certified per-layer errors $\varepsilon_\ell(n)$ for "
        rf"{tt(data.model)} on a log axis"
        + (", with the proved bounds (dashed)" if data.has_bounds else "")
        + "; an exact zero is marked at the bottom edge.",
    }
    if data.has_figure_tau:
        captions[TAU_FIG] = (
            rf"Temperatures for {tt(data.model)} on a log axis (lower ends of the brackets and "
            r"enclosures): $\tau^*_{\mathrm{dec}}(n)$, the largest grid temperature found to keep "
            r"every decision, and $\tau^*_{\mathrm{inv}}(n)$, the largest found to keep also "
            r"$\varepsilon\le1$ where the proof needs it, against $\tau_{\mathrm{thm}}(n)$, the "
            r"temperature the theorem guarantees."
        )
    return captions


def comment(s: str) -> str:
    """User text inside a ``%`` comment: printable ASCII only, so it cannot end the comment."""
    return "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in s)


def render_fragment(data: ReportData, figures: list[tuple[str, str]]) -> str:
    """The includable fragment; ``figures`` are (name, file name) pairs."""
    for _name, file in figures:
        if not SAFE_FILE.fullmatch(file):
            raise UsageError(
                f"the LaTeX report would include the figure {comment(file)!r}, whose name "
                "LaTeX cannot read safely (fix: name the .tex report with letters, digits, "
                "'.', '_' and '-' only)"
            )
    lines = [
        f"% exactattn report for model {comment(data.model)} (generated; regenerate instead "
        "of editing).",
        "% Include with \\input. Preamble: \\usepackage{" + ",".join(PACKAGES) + "}; figures are",
        "% found relative to the main document: add \\graphicspath{{<dir of this file>/}}.",
        r"\noindent\textbf{exactattn report: " + tt(data.model) + ".}",
    ]
    lines += summary(data)
    lines += [""] + lengths_table(data) + [""] + errors_table(data) + [""]
    if data.has_figure_tau:
        lines += temperatures_table(data) + [""]
    if data.closed_forms:
        lines += closed_forms_tables(data) + [""]
    if data.compiler_gap_rows():
        lines += compiler_gap_table(data) + [""]
    lines += witness_table(data) + [""]
    captions = figure_captions(data)
    for name, file in figures:
        lines += [
            r"\begin{figure}[htbp]",
            r"\centering",
            r"\includegraphics[width=0.75\linewidth]{" + file + "}",
            r"\caption{" + captions[name] + "}",
            rf"\label{{fig:exactattn-{data.slug}-{name}}}",
            r"\end{figure}",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_standalone(data: ReportData, fragment: str) -> str:
    """A complete document around the fragment (compile in the directory holding it)."""
    body = [line for line in fragment.splitlines() if not line.startswith("%")]
    lines = [
        f"% exactattn report for model {comment(data.model)} (generated; regenerate instead "
        "of editing).",
        r"\documentclass[11pt]{article}",
        r"\usepackage[margin=2.2cm]{geometry}",
        r"\usepackage{" + ",".join(PACKAGES) + "}",
        r"\begin{document}",
        r"\section*{exactattn report: " + tt(data.model) + "}",
    ]
    lines += body[1:]  # the fragment's bold heading is replaced by the section title
    lines += [r"\end{document}"]
    return "\n".join(lines) + "\n"
