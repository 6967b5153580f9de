"""The LaTeX report: an includable fragment and a standalone document around it.

Tables use booktabs, exact rationals are typeset as fractions, certified values keep their
enclosure (``0.2689{\\scriptstyle[4,5]}`` is [0.26894, 0.26895]; the captions say so), and
figures are PDFs included with graphicx. Only packages from texlive-latex-base and
texlive-latex-recommended are used.
"""

from __future__ import annotations

import re
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.report import closed, fmt
from exactattn.report.data import ReportData, non_monotone_lines, tau_star_brackets
from exactattn.report.escape import _TEXT_ESCAPES, text  # noqa: F401  (re-exported)
from exactattn.report.fmt import Bracket, Frac, Interval, Num, Shown, Special

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
"""Figure file names that \\includegraphics reads literally."""

_TT_CHARS = set("\\{}$&#^_%~")


def tt(s: str) -> str:
    """Typewriter text: ASCII specials by their slot in the typewriter font (which has them)."""
    out = []
    for ch in s:
        if ch in _TT_CHARS:
            out.append("{\\char" + str(ord(ch)) + "}")
        elif ch in "<>|":
            out.append(ch)
        else:
            out.append(text(ch))
    return r"\texttt{" + "".join(out) + "}"


def math(shown: Shown) -> str:
    """A formatted number in math mode (without the dollars)."""
    v = shown.value
    if isinstance(v, Num):
        out = ("-" if v.neg else "") + _sci(v.mant, v.exp)
    elif isinstance(v, Bracket):
        body = v.head + r"{\scriptstyle[" + v.a + "," + v.b + "]}"
        out = body if v.exp is None else body + rf"\times10^{{{v.exp}}}"
    elif isinstance(v, Interval):
        out = "[" + math(Shown(v.lo)) + r",\," + math(Shown(v.hi)) + "]"
    elif isinstance(v, Frac):
        out = ("-" if v.neg else "") + rf"\tfrac{{{v.p}}}{{{v.q}}}"
    else:
        assert isinstance(v, Special)
        out = {"inf": r"\infty", "-inf": r"-\infty", "none": r"\text{---}"}[v.kind]
    return out + (r"^{\dagger}" if shown.dagger else "")


def _sci(mant: str, exp: int | None) -> str:
    if exp is None:
        return mant
    if mant == "1":
        return rf"10^{{{exp}}}"
    return rf"{mant}\times10^{{{exp}}}"


def cell(shown: Shown) -> str:
    """A table cell: the value in math mode, or an em dash when absent."""
    if isinstance(shown.value, Special) and shown.value.kind == "none":
        return "---"
    return "$" + math(shown) + "$"


def _table(
    label: str, caption: str, colspec: str, head: list[str], rows: list[list[str]]
) -> list[str]:
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{" + caption + "}",
        r"\label{" + label + "}",
        r"\vspace{0.5ex}",
        r"\small",
        r"\renewcommand{\arraystretch}{1.2}",
        r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
        r"\begin{tabular}{" + colspec + "}",
        r"\toprule",
    ]
    lines += head
    lines.append(r"\midrule")
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}}", r"\end{table}"]
    return lines


def summary(data: ReportData) -> list[str]:
    info, settings = data.info, data.settings
    items = [
        r"\item[Model] "
        + tt(data.model)
        + (f"; output {text(str(info['output']))}." if info.get("output") else ".")
    ]
    if info.get("alphabet") is not None:
        parts = [", ".join(tt(t) for t in info["alphabet"])]
        for key, name in (("bos", "BOS"), ("eos", "EOS")):
            parts.append(f"{name} {tt(info[key])}" if info.get(key) else f"no {name}")
        if info.get("d") is not None:
            parts.append(f"width $d = {int(info['d'])}$")
        items.append(r"\item[Alphabet] " + "; ".join(parts) + ".")
    if data.layers:
        layers = "; ".join(f"layer {ly.index}: {text(ly.label)}" for ly in data.layers)
        items.append(rf"\item[Layers] {len(data.layers)}: {layers}.")
    lo, hi = data.n_range
    items.append(
        rf"\item[Lengths] $n = {lo},\dots,{hi}$, every input of each length "
        rf"({data.total_inputs} inputs in all)."
    )
    temp = settings.get("tau_override") or info.get("temperature")
    if temp is not None:
        how = "overridden on the command line" if settings.get("tau_override") else "the model's"
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
    head = [r"$n$", "inputs", r"$\gamma(n)$", r"$x_{\max}(n)$"]
    colspec = "rrll"
    if data.layers:
        names = ", ".join(str(ly.index) for ly in data.layers)
        plural = "layers" if len(data.layers) > 1 else "layer"
        head.append(stack(r"$\max|x|$ after", f"{plural} {names}"))
        colspec += "l"
    head += [r"$\tau(n)$", stack("dis-", "agreements"), stack("min", "margin")]
    colspec += "lrl"
    if data.has_reference:
        head.append(stack("reference", "hard / soft"))
        colspec += "c"
    if data.has_undecided:
        head.append(stack("un-", "decided"))
        colspec += "r"
    rows = []
    for row in data.rows:
        gamma = Shown(Special("inf")) if row.get("gamma") is None else fmt.rational(row["gamma"])
        cells = [
            str(row["n"]),
            str(row.get("inputs", "---")),
            cell(gamma),
            cell(fmt.rational(row.get("x_max"))),
        ]
        if data.layers:
            maxes = []
            for layer in data.layers:
                entry = data.layer_entry(row, layer.index)
                maxes.append(
                    cell(fmt.rational(None if entry is None else entry.get("activation_max")))
                )
            cells.append(", ".join(maxes))
        cells += [
            cell(fmt.certified(row.get("tau"))),
            str(row.get("disagreements", "---")),
            cell(fmt.rational(row.get("min_margin"))),
        ]
        if data.has_reference:
            cells.append(_reference(row))
        if data.has_undecided:
            cells.append(str(row.get("undecided", "---")))
        rows.append(cells)
    caption = (
        rf"Measured quantities per input length $n$ for {tt(data.model)}, over every input of "
        r"each length. $\gamma(n)$ (the smallest gap below a maximal score; $\infty$ when there "
        r"is none), $x_{\max}(n)$ and the activation maxima are exact; $\tau(n)$ is the "
        r"temperature used; disagreements count inputs the hard and soft meanings classify "
        r"differently; min margin is the smallest hard margin. " + NOTATION
    )
    return _table(
        f"tab:exactattn-{data.slug}-lengths", caption, colspec, [" & ".join(head) + r" \\"], rows
    )


def _reference(row: dict[str, Any]) -> str:
    ref = row.get("reference_mismatches")
    if ref is None:
        return "---"
    out = f"{ref.get('hard', '---')} / {ref.get('soft', '---')}"
    if row.get("reference_undefined"):
        out += f" ({row['reference_undefined']} undefined)"
    return out


def errors_table(data: ReportData) -> list[str]:
    per = 3 if data.has_bounds else 1
    colspec = "r" + "l" * (per * len(data.layers)) + "l" + ("r" if data.has_bounds else "")
    head: list[str] = []
    if data.has_bounds:
        groups, rules = [""], []
        for k, layer in enumerate(data.layers):
            first = 2 + per * k
            groups.append(rf"\multicolumn{{3}}{{c}}{{layer {layer.index} ({text(layer.kind)})}}")
            rules.append(rf"\cmidrule(lr){{{first}-{first + 2}}}")
        groups += ["", ""]
        head.append(" & ".join(groups) + r" \\")
        head.append("".join(rules))
        cols = [r"$n$"]
        for layer in data.layers:
            i = layer.index
            cols += [rf"$\varepsilon_{{{i}}}(n)$", "bound", rf"$\varepsilon_{{{i}}}/$bound"]
        cols += [r"$\varepsilon\le1$", "violations"]
    else:
        cols = (
            [r"$n$"]
            + [rf"$\varepsilon_{{{ly.index}}}(n)$ ({text(ly.kind)})" for ly in data.layers]
            + [r"$\varepsilon\le1$"]
        )
    head.append(" & ".join(cols) + r" \\")
    rows = []
    for row in data.rows:
        cells = [str(row["n"])]
        for layer in data.layers:
            entry = data.layer_entry(row, layer.index)
            cells.append(cell(fmt.certified(None if entry is None else entry.get("error"))))
            if data.has_bounds:
                bound = data.bound_entry(row, layer.index) or {}
                cells.append(cell(fmt.upper(bound.get("bound"))))
                cells.append(cell(fmt.upper(bound.get("measured_over_bound"))))
        cells.append(text(str(row.get("invariant", "---"))))
        if data.has_bounds:
            cells.append(str((row.get("bounds") or {}).get("violations", "---")))
        rows.append(cells)
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
    return _table(f"tab:exactattn-{data.slug}-errors", caption, colspec, head, rows)


def temperatures_table(data: ReportData) -> list[str]:
    rows = []
    for row in data.rows:
        theorem = (row.get("bounds") or {}).get("tau_theorem")
        dec, inv = tau_star_brackets(row.get("tau_star"))
        rows.append(
            [
                str(row["n"]),
                cell(fmt.certified(row.get("tau"))),
                cell(fmt.certified(theorem)),
                cell(fmt.search_bracket(dec)),
                cell(fmt.search_bracket(inv)),
            ]
        )
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
    lines = non_monotone_lines(data.rows)
    if data.has_tau_scan:
        caption += r" Every grid temperature from a lower end down to the model's $\tau(n)$ was "
        caption += (
            r"checked too; not monotone in $\tau$: " + " ".join(_star_text(x) for x in lines)
            if lines
            else "checked too, and none was found bad."
        )
    head = [
        r"$n$ & $\tau(n)$ used & $\tau_{\mathrm{thm}}(n)$ & $\tau^*_{\mathrm{dec}}(n)$ & "
        r"$\tau^*_{\mathrm{inv}}(n)$ \\"
    ]
    return _table(f"tab:exactattn-{data.slug}-temperatures", caption, "rllll", head, rows)


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
    rows = []
    for row in data.rows:
        gw = row.get("gamma_witness")
        if gw is None:
            gamma = "---"
        else:
            gamma = (
                f"{tt(fmt.word(gw.get('input')))}: layer {gw.get('layer')}, head {gw.get('head')}, "
                f"query {gw.get('query')}, key {gw.get('top_key')} (top) vs {gw.get('other_key')}"
            )
        errs = []
        for layer in data.layers:
            ew = (data.layer_entry(row, layer.index) or {}).get("error_witness")
            if ew is not None:
                errs.append(
                    f"{layer.index}: {tt(fmt.word(ew.get('input')))} at {ew.get('position')}"
                )
        first = row.get("first_disagreement")
        rows.append(
            [
                str(row["n"]),
                gamma,
                "; ".join(errs) or "---",
                "---" if first is None else tt(fmt.word(first)),
            ]
        )
    caption = (
        rf"Witnesses for {tt(data.model)}: the input, layer, head and positions attaining "
        r"$\gamma(n)$; for each layer $\ell$, the input and position attaining "
        r"$\varepsilon_\ell(n)$; the first input the two meanings classify differently. "
        r"Positions count the sequence the transformer sees (BOS at 0, if present)."
    )
    head = [
        r"$n$ & $\gamma(n)$ attained at & $\varepsilon_\ell(n)$ attained at ($\ell$: input "
        r"at position) & first disagreement \\"
    ]
    return _table(f"tab:exactattn-{data.slug}-witnesses", caption, "rlll", head, rows)


def closed_forms_tables(data: ReportData) -> list[str]:
    """The verified closed forms of the exact quantities and the brackets of certified ones."""
    exact_rows, bracket_rows = closed.latex_rows(data.closed_forms, tt, text)
    lines: list[str] = []
    if exact_rows:
        caption = (
            rf"Closed forms for {tt(data.model)}: each was conjectured from the smallest lengths "
            r"listed and then reproduced exactly (as rationals) at every held-back length listed; "
            r"a conjecture the data confirm, not a proof for larger $n$. Where no form verified, "
            r"the row says so and lists the lengths tried."
        )
        head = [r"quantity & closed form & fitted on $n$ & verified on $n$ & remark \\"]
        lines += _table(f"tab:exactattn-{data.slug}-closed", caption, "lllll", head, exact_rows)
    if bracket_rows:
        caption = (
            rf"Brackets for {tt(data.model)}: $c_1\cdot\mathrm{{shape}}(n) \le$ value$(n) \le "
            r"c_2\cdot\mathrm{shape}(n)$ holds, certified, at every listed $n$ (the result's "
            r"enclosures are its only evidence); a description of the checked lengths, not an "
            r"asymptotic proof."
        )
        head = [r"quantity & $[c_1,\,c_2]\cdot$ shape & on $n$ \\"]
        lines += [""] + _table(
            f"tab:exactattn-{data.slug}-brackets", caption, "lll", head, bracket_rows
        )
    return lines


def figure_captions(data: ReportData) -> dict[str, str]:
    fit = data.gamma_fit()
    gamma_form = data.gamma_closed_form()
    gamma_tex = None if gamma_form is None else closed.form_latex(gamma_form)
    if gamma_form is not None and gamma_tex is not None:
        fit_sentence = (
            r"Dashed: the closed form $\gamma(n) = "
            + gamma_tex
            + r"$, fitted on $n\in\{"
            + fmt.runs(gamma_form["fitted_on"], r",\dots,")
            + r"\}$ and verified exactly on $n\in\{"
            + fmt.runs(gamma_form["verified_on"], r",\dots,")
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
        "gamma": rf"$\gamma(n)$ for {tt(data.model)}, exact, on log--log axes; $\infty$ (no "
        r"strict gap) is marked at the top edge. " + fit_sentence,
        "error": rf"Upper ends of the certified per-layer errors $\varepsilon_\ell(n)$ for "
        rf"{tt(data.model)} on a log axis"
        + (", with the proved bounds (dashed)" if data.has_bounds else "")
        + "; an exact zero is marked at the bottom edge.",
    }
    if data.has_figure_tau:
        captions["tau"] = (
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
