"""The Markdown report: GitHub-flavoured tables, PNG figures beside the file."""

from __future__ import annotations

from urllib.parse import quote

import exactattn.report.closed as closed
import exactattn.report.fmt as fmt
import exactattn.report.table as table_model
import exactattn.report.tables as tables
from exactattn.report.data import ReportData, non_monotone_lines
from exactattn.report.escape import _MD_SPECIAL, _visible, plain  # noqa: F401  (re-exported)
from exactattn.report.figures import ERROR_FIG, GAMMA_FIG, TAU_FIG
from exactattn.report.table import Column, Lit, Table

NOTATION = (
    "Certified values are enclosures with outward-rounded endpoints: `0.2689[4,5]` means the "
    "value lies in [0.26894, 0.26895], `3.296[8,9]e-7` means [3.2968e-7, 3.2969e-7], and "
    "`[a, b]` is an explicit interval; only digits the enclosure supports are printed. Exact "
    "rationals are printed as fractions; † marks an exact rational too long to print, shown by "
    "an enclosure instead. γ(n) = ∞ means no score is strictly below its maximum."
)


ALT = {
    GAMMA_FIG: "γ(n) against n on log–log axes",
    ERROR_FIG: "certified per-layer error against n",
    TAU_FIG: "τ*_dec(n) and τ*_inv(n) against τ_thm(n)",
}


value = table_model.md_value


def code(s: str) -> str:
    """A code span in prose (headings, list items, captions), not in a table cell."""
    return table_model.md_code(s, in_table=False)


def link_target(file: str) -> str:
    """A relative file name as a link target (spaces and parentheses percent-encoded)."""
    return quote(file, safe="/._-~")


def cell(text: str) -> str:
    return text.replace("|", "\\|") if "`" not in text else text


def table(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    """A table of already-Markdown cells (the certificate report; the check report's tables
    go through :mod:`exactattn.report.table`)."""
    right = right or set()
    cols = [Column(Lit(h, ""), "r" if i in right else "l") for i, h in enumerate(header)]
    return table_model.markdown(Table(cols, [[Lit(c, "") for c in r] for r in rows]))


def summary_lines(data: ReportData) -> list[str]:
    info = data.info
    lines = [f"- **Model:** {code(data.model)}"]
    if info.alphabet is not None:
        alpha = ", ".join(code(t) for t in info.alphabet)
        extra = []
        for tok, name in ((info.bos, "BOS"), (info.eos, "EOS")):
            extra.append(f"{name} {code(tok)}" if tok else f"no {name}")
        if info.d is not None:
            extra.append(f"width d = {info.d}")
        lines.append(f"- **Alphabet:** {alpha}; " + "; ".join(extra))
    if data.layers:
        parts = "; ".join(f"layer {layer.index}: {plain(layer.label)}" for layer in data.layers)
        lines.append(f"- **Layers:** {len(data.layers)} ({parts})")
    if info.output:
        lines.append(f"- **Output:** {plain(str(info.output))}")
    lo, hi = data.n_range
    lines.append(
        f"- **Lengths:** n = {lo} … {hi}, every input of each length "
        f"({data.total_inputs} inputs in all)"
    )
    temp, overridden = data.temperature
    if temp is not None:
        how = "overridden on the command line" if overridden else "the model's"
        lines.append(f"- **Temperature:** τ(n) = {code(str(temp))} ({how})")
    if data.has_bounds:
        lines.append("- **Bounds:** proved per-layer bounds included (`--bounds`)")
    ok, label, text = data.verdict_line()
    mark = ("✅ " if ok is True else "❌ " if ok is False else "") + plain(label)
    text = plain(text)
    lines.append(f"- **Verdict:** {mark}: {text}" if mark else f"- **Verdict:** {text}")
    return lines


def lengths_table(data: ReportData) -> list[str]:
    return table_model.markdown(tables.lengths(data))


def errors_table(data: ReportData) -> list[str]:
    return table_model.markdown(tables.errors(data))


def witness_table(data: ReportData) -> list[str]:
    return table_model.markdown(tables.witnesses(data))


def temperatures_table(data: ReportData) -> list[str]:
    return table_model.markdown(tables.temperatures(data))


def temperatures_note(data: ReportData) -> str:
    grid = f" on the grid {code(data.tau_grid)}" if data.tau_grid else ""
    text = (
        "τ_thm(n) is the temperature the proved bounds guarantee (a certified enclosure). "
        f"τ*_dec(n) and τ*_inv(n) come from certified searches{grid}, each the first crossing "
        "met when warming the model up from its own τ(n): [last temperature found good, next "
        "grid temperature, found bad], rounded outward. τ*_dec "
        "asks that every decision agree with the hard meaning and none be undecided (where "
        "softmax stops deciding like hardmax); τ*_inv asks in addition that ε ≤ 1 after every "
        "layer that feeds another (the hypothesis of the per-layer lemma: where the proof "
        "technique stops applying). ∞ means the search reached its top, 0 that even its "
        "smallest temperature failed; — means not computed. Nothing between grid points is "
        "certified."
    )
    if data.legacy_tau_star:
        text += (
            " This result predates the split into two searches: its single bracket (searched "
            "from τ = 1, without the monotonicity scan) also required ε ≤ 1, so it is shown as "
            "τ*_inv."
        )
    lines = non_monotone_lines(data.tau_star_rows())
    if data.has_tau_scan:
        text += (
            " Every grid temperature from a lower end down to the model's τ(n) was checked too"
            + (
                "; not monotone in τ: " + " ".join(_star_plain(x) for x in lines)
                if lines
                else ", and none was found bad."
            )
        )
    return text


def _star_plain(line: str) -> str:
    """A τ* sentence (it quotes a witness input and a reason from the result file) as literal
    Markdown; the names τ*_dec and τ*_inv stay as the report writes them elsewhere."""
    out = plain(line.replace("τ*_dec", "TAUSTARDEC").replace("τ*_inv", "TAUSTARINV"))
    return out.replace("TAUSTARDEC", "τ*_dec").replace("TAUSTARINV", "τ*_inv")


def figure_captions(data: ReportData) -> dict[str, str]:
    """Caption text per figure name, shared in meaning with the LaTeX captions."""
    fit = data.gamma_fit()
    gamma_form = data.gamma_closed_form()
    if gamma_form is not None:
        form = code(fmt.long_digits("γ(n) = " + str(gamma_form.expression)))
        fit_sentence = (
            f"Dashed: the closed form {form}, "
            f"fitted on n ∈ {{{fmt.runs(gamma_form.fitted_on)}}} and verified exactly on "
            f"n ∈ {{{fmt.runs(gamma_form.verified_on)}}}."
        )
    elif fit is None:
        fit_sentence = "No power law is fitted (fewer than two n with finite γ)."
    else:
        ns = fmt.runs(fit.ns)
        fit_sentence = (
            f"Dashed: least-squares fit of log γ on log n over n ∈ {{{ns}}}: "
            f"{fmt.fit_text(fit)} (floating point, for display only)."
        )
    captions = {
        GAMMA_FIG: "γ(n), exact, on log–log axes; ∞ (no strict gap) is marked at the top edge. "
        + fit_sentence,
        ERROR_FIG: "Upper ends of the certified per-layer errors ε_ℓ(n) on a log axis"
        + (", with the proved bounds (dashed)" if data.has_bounds else "")
        + "; an exact zero is marked at the bottom edge.",
    }
    if data.has_figure_tau:
        captions[TAU_FIG] = (
            "Temperatures on a log axis (lower ends of the brackets and enclosures): τ*_dec(n), "
            "the largest grid temperature found to keep every decision, and τ*_inv(n), the "
            "largest found to keep also ε ≤ 1 where the proof needs it, against τ_thm(n), the "
            "temperature the theorem guarantees."
        )
    return captions


def compiler_gap_lines(data: ReportData) -> list[str]:
    """Compiled RASP models: measured γ(n) beside the compiler's bound (issue 22)."""
    t = tables.compiler_gap(data)
    if t is None:
        return []
    expr = code(fmt.long_digits(str(data.compiler_gap_rows()[0][1].expression)))
    return [
        "## Compiler gap bound",
        "",
        f"The compiler's lower bound γ(n) ≥ {expr} (proofs/rasp-gaps.md) beside the measured "
        "γ(n); a bound above a measured gap (of the model or of one head) is a problem.",
        "",
        *table_model.markdown(t),
        "",
    ]


def render(data: ReportData, figures: list[tuple[str, str]]) -> str:
    """The Markdown text; ``figures`` are (name, relative file name) pairs."""
    lines = [f"# exactattn report: {code(data.model)}", ""]
    lines += summary_lines(data)
    lines += ["", "## Measured quantities per length", ""]
    lines += lengths_table(data)
    lines += [
        "",
        "γ(n) and x_max(n) are exact; max|x| after each layer is on the hard activations; τ(n) "
        "is the temperature used; disagreements count inputs the two meanings classify "
        "differently; min margin is the smallest hard margin.",
        "",
    ]
    if data.closed_forms:
        lines += ["## Closed forms", ""] + closed.markdown(data.closed_forms) + [""]
    lines += compiler_gap_lines(data)
    lines += [
        "## Certified per-layer error",
        "",
    ]
    lines += errors_table(data)
    lines += [
        "",
        "ε_ℓ(n) = max over inputs and positions of ‖x_soft − x_hard‖∞ after layer ℓ. "
        "The ε ≤ 1 status is certified for every layer that feeds another layer.",
    ]
    if data.has_bounds:
        lines[-1] += (
            " Bounds are the proved per-layer bounds and ε/bound the measured upper end "
            "over the bound, both rounded up; violations count layers whose certified "
            "error exceeds its bound."
        )
    lines += ["", NOTATION, ""]
    if data.has_figure_tau:
        lines += ["## Temperatures", ""] + temperatures_table(data)
        lines += ["", temperatures_note(data), ""]
    lines += ["## Witnesses", ""]
    lines += witness_table(data)
    lines += ["", "Positions count the sequence the transformer sees (BOS at 0, if present).", ""]
    lines += ["## Figures", ""]
    captions = figure_captions(data)
    for number, (name, file) in enumerate(figures, start=1):
        lines += [
            f"![{ALT[name]}]({link_target(file)})",
            "",
            f"*Figure {number}.* {captions[name]}",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"
