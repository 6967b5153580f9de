"""The Markdown report: GitHub-flavoured tables, PNG figures beside the file."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from exactattn.report import closed, fmt
from exactattn.report.data import ReportData, non_monotone_lines, tau_star_brackets
from exactattn.report.escape import _MD_SPECIAL, _visible, plain  # noqa: F401  (re-exported)
from exactattn.report.fmt import Bracket, Frac, Interval, Num, Shown, Special

NOTATION = (
    "Certified values are enclosures with outward-rounded endpoints: `0.2689[4,5]` means the "
    "value lies in [0.26894, 0.26895], `3.296[8,9]e-7` means [3.2968e-7, 3.2969e-7], and "
    "`[a, b]` is an explicit interval; only digits the enclosure supports are printed. Exact "
    "rationals are printed as fractions; † marks an exact rational too long to print, shown by "
    "an enclosure instead. γ(n) = ∞ means no score is strictly below its maximum."
)


ALT = {
    "gamma": "γ(n) against n on log–log axes",
    "error": "certified per-layer error against n",
    "tau": "τ*_dec(n) and τ*_inv(n) against τ_thm(n)",
}


def value(shown: Shown) -> str:
    """Render a formatted number for Markdown."""
    v = shown.value
    if isinstance(v, Num):
        text = ("-" if v.neg else "") + v.mant + ("" if v.exp is None else f"e{v.exp}")
    elif isinstance(v, Bracket):
        text = f"{v.head}[{v.a},{v.b}]" + ("" if v.exp is None else f"e{v.exp}")
    elif isinstance(v, Interval):
        text = f"[{value(Shown(v.lo))}, {value(Shown(v.hi))}]"
    elif isinstance(v, Frac):
        text = ("-" if v.neg else "") + f"{v.p}/{v.q}"
    else:
        assert isinstance(v, Special)
        text = {"inf": "∞", "-inf": "-∞", "none": "—"}[v.kind]
    return text + ("†" if shown.dagger else "")


def link_target(file: str) -> str:
    """A relative file name as a link target (spaces and parentheses percent-encoded)."""
    return quote(file, safe="/._-~")


def code(text: str) -> str:
    """A code span that survives backticks and table pipes in token names."""
    text = _visible(text).replace("|", "\\|")
    run, longest = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(text: str) -> str:
    return text.replace("|", "\\|") if "`" not in text else text


def table(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _witness_input(tokens: list[str] | None) -> str:
    return "—" if tokens is None else code(fmt.word(tokens))


def summary_lines(data: ReportData) -> list[str]:
    info, settings = data.info, data.settings
    lines = [f"- **Model:** {code(data.model)}"]
    if info.get("alphabet") is not None:
        alpha = ", ".join(code(t) for t in info["alphabet"])
        extra = []
        for key, name in (("bos", "BOS"), ("eos", "EOS")):
            extra.append(f"{name} {code(info[key])}" if info.get(key) else f"no {name}")
        if info.get("d") is not None:
            extra.append(f"width d = {info['d']}")
        lines.append(f"- **Alphabet:** {alpha}; " + "; ".join(extra))
    if data.layers:
        parts = "; ".join(f"layer {layer.index}: {plain(layer.label)}" for layer in data.layers)
        lines.append(f"- **Layers:** {len(data.layers)} ({parts})")
    if info.get("output"):
        lines.append(f"- **Output:** {plain(str(info['output']))}")
    lo, hi = data.n_range
    lines.append(
        f"- **Lengths:** n = {lo} … {hi}, every input of each length "
        f"({data.total_inputs} inputs in all)"
    )
    temp = settings.get("tau_override") or info.get("temperature")
    if temp is not None:
        how = "overridden on the command line" if settings.get("tau_override") else "the model's"
        lines.append(f"- **Temperature:** τ(n) = {code(str(temp))} ({how})")
    if data.has_bounds:
        lines.append("- **Bounds:** proved per-layer bounds included (`--bounds`)")
    ok, label, text = data.verdict_line()
    mark = ("✅ " if ok is True else "❌ " if ok is False else "") + plain(label)
    text = plain(text)
    lines.append(f"- **Verdict:** {mark}: {text}" if mark else f"- **Verdict:** {text}")
    return lines


def lengths_table(data: ReportData) -> list[str]:
    header = ["n", "inputs", "γ(n)", "x_max(n)"]
    if data.layers:
        names = ", ".join(str(ly.index) for ly in data.layers)
        header.append(f"max\\|x\\| after layer{'s' if len(data.layers) > 1 else ''} {names}")
    header += ["τ(n)", "disagreements", "min margin"]
    if data.has_reference:
        header.append("reference mismatches hard / soft")
    if data.has_undecided:
        header.append("undecided")
    rows = []
    for row in data.rows:
        gamma = (
            fmt.Shown(Special("inf")) if row.get("gamma") is None else fmt.rational(row["gamma"])
        )
        cells = [
            str(row["n"]),
            str(row.get("inputs", "—")),
            value(gamma),
            value(fmt.rational(row.get("x_max"))),
        ]
        if data.layers:
            maxes = []
            for layer in data.layers:
                entry = data.layer_entry(row, layer.index)
                act = None if entry is None else entry.get("activation_max")
                maxes.append(value(fmt.rational(act)))
            cells.append(", ".join(maxes))
        cells += [
            value(fmt.certified(row.get("tau"))),
            str(row.get("disagreements", "—")),
            value(fmt.rational(row.get("min_margin"))),
        ]
        if data.has_reference:
            cells.append(_reference(row))
        if data.has_undecided:
            cells.append(str(row.get("undecided", "—")))
        rows.append(cells)
    right = {0, 1} | {header.index("disagreements")}
    return table(header, rows, right)


def _reference(row: dict[str, Any]) -> str:
    ref = row.get("reference_mismatches")
    if ref is None:
        return "—"
    text = f"{ref.get('hard', '—')} / {ref.get('soft', '—')}"
    undefined = row.get("reference_undefined")
    if undefined:
        text += f" ({undefined} undefined)"
    return text


def errors_table(data: ReportData) -> list[str]:
    header = ["n"]
    for layer in data.layers:
        header.append(f"ε_{layer.index}(n)")
        if data.has_bounds:
            header += [f"bound_{layer.index}(n)", f"ε_{layer.index}/bound"]
    header.append("ε ≤ 1")
    if data.has_bounds:
        header.append("violations")
    rows = []
    for row in data.rows:
        cells = [str(row["n"])]
        for layer in data.layers:
            entry = data.layer_entry(row, layer.index)
            cells.append(value(fmt.certified(None if entry is None else entry.get("error"))))
            if data.has_bounds:
                bound = data.bound_entry(row, layer.index) or {}
                cells.append(value(fmt.upper(bound.get("bound"))))
                cells.append(value(fmt.upper(bound.get("measured_over_bound"))))
        cells.append(str(row.get("invariant", "—")))
        if data.has_bounds:
            cells.append(str((row.get("bounds") or {}).get("violations", "—")))
        rows.append(cells)
    return table(header, rows, {0})


def witness_table(data: ReportData) -> list[str]:
    header = ["n", "γ(n) attained at", "ε_ℓ(n) attained at", "first disagreement"]
    rows = []
    for row in data.rows:
        gw = row.get("gamma_witness")
        if gw is None:
            gamma = "—"
        else:
            gamma = (
                f"{_witness_input(gw.get('input'))}: layer {gw.get('layer')}, head "
                f"{gw.get('head')}, query {gw.get('query')}, key {gw.get('top_key')} (top) vs "
                f"{gw.get('other_key')}"
            )
        errs = []
        for layer in data.layers:
            entry = data.layer_entry(row, layer.index) or {}
            ew = entry.get("error_witness")
            if ew is not None:
                errs.append(
                    f"L{layer.index}: {_witness_input(ew.get('input'))} @ {ew.get('position')}"
                )
        first = row.get("first_disagreement")
        rows.append([str(row["n"]), gamma, "; ".join(errs) or "—", _witness_input(first)])
    return table(header, rows, {0})


def temperatures_table(data: ReportData) -> list[str]:
    rows = []
    for row in data.rows:
        theorem = (row.get("bounds") or {}).get("tau_theorem")
        dec, inv = tau_star_brackets(row.get("tau_star"))
        rows.append(
            [
                str(row["n"]),
                value(fmt.certified(row.get("tau"))),
                value(fmt.certified(theorem)),
                value(fmt.search_bracket(dec)),
                value(fmt.search_bracket(inv)),
            ]
        )
    return table(["n", "τ(n) used", "τ_thm(n)", "τ*_dec(n)", "τ*_inv(n)"], rows, {0})


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
    lines = non_monotone_lines(data.rows)
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
        fit_sentence = (
            f"Dashed: the closed form {code('γ(n) = ' + str(gamma_form['expression']))}, "
            f"fitted on n ∈ {{{fmt.runs(gamma_form['fitted_on'])}}} and verified exactly on "
            f"n ∈ {{{fmt.runs(gamma_form['verified_on'])}}}."
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
        "gamma": "γ(n), exact, on log–log axes; ∞ (no strict gap) is marked at the top edge. "
        + fit_sentence,
        "error": "Upper ends of the certified per-layer errors ε_ℓ(n) on a log axis"
        + (", with the proved bounds (dashed)" if data.has_bounds else "")
        + "; an exact zero is marked at the bottom edge.",
    }
    if data.has_figure_tau:
        captions["tau"] = (
            "Temperatures on a log axis (lower ends of the brackets and enclosures): τ*_dec(n), "
            "the largest grid temperature found to keep every decision, and τ*_inv(n), the "
            "largest found to keep also ε ≤ 1 where the proof needs it, against τ_thm(n), the "
            "temperature the theorem guarantees."
        )
    return captions


def compiler_gap_lines(data: ReportData) -> list[str]:
    """Compiled RASP models: measured γ(n) beside the compiler's bound (issue 22)."""
    rows = [(r["n"], r["compiler_gap_bound"]) for r in data.rows if r.get("compiler_gap_bound")]
    if not rows:
        return []
    expr = code(str(rows[0][1].get("expression")))
    body = [
        [
            str(n),
            code(str(g.get("measured") or "∞")),
            code(str(g.get("bound") or "∞")),
            "holds" if g.get("holds") else f"**violated** ({len(g.get('violations') or [])})",
        ]
        for n, g in rows
    ]
    return [
        "## Compiler gap bound",
        "",
        f"The compiler's lower bound γ(n) ≥ {expr} (proofs/rasp-gaps.md) beside the measured "
        "γ(n); a bound above a measured gap (of the model or of one head) is a problem.",
        "",
        *table(["n", "measured γ(n)", "bound", "status"], body, {0}),
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
        lines += ["## Closed forms", ""] + closed.markdown(data.closed_forms, code) + [""]
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
