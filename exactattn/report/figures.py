"""Figures for reports: γ(n) with a power-law fit, per-layer errors, τ*_dec(n) and τ*_inv(n)
against τ_thm(n).

Rendering is deterministic (Agg canvas, fixed hash salt, no dates or software versions in the
files) so regenerated reports do not churn. Values come from exact or certified strings; their
log10 is taken from the digits, so a certified error like 3e-434295 is still placed correctly:
when some value lies outside what a float log axis can show, the axis plots log10 directly and
labels ticks as powers of ten. Values no log axis can show (0, ∞) are drawn as markers at the
axis edge and named in the legend.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactattn.core.jsonio import write_rendered
from exactattn.report.closed import form_latex
from exactattn.report.closed import values as closed_values
from exactattn.report.data import PowerFit, ReportData
from exactattn.report.fmt import fit_tex, parse_decimal, parse_rational

#: Largest |log10| plotted on a native (float) log axis; beyond, the exponent axis is used.
NATIVE_LOG_LIMIT = 300

RC = {
    "svg.hashsalt": "exactattn",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "figure.figsize": (5.0, 3.4),
    "savefig.dpi": 150,
    "savefig.bbox": "standard",
}
METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
}
GAMMA_FIG, ERROR_FIG, TAU_FIG = "gamma", "error", "tau"
"""Figure names (file-name stems, caption keys): γ(n), the per-layer errors, the temperatures."""

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
#: Markers of the per-layer error lines, one per round of COLORS (layers 1–8 are round 0).
MARKERS = ["o", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p", "d"]


@dataclass(frozen=True)
class LayerStyle:
    """How one layer is drawn in the error figure; no two layers share one (issue: layers 1
    and 9 once looked the same, the colours cycled after 8)."""

    color: str
    marker: str  # the error line's (filled)
    bound_marker: str  # the proved bound's (open)
    linestyle: Any  # the error line's: solid, then a dash pattern per round of all pairs
    bound_linestyle: Any


def layer_style(k: int) -> LayerStyle:
    """The style of the k-th layer (k ≥ 0): colour k mod 8; marker by k // 8 (layers 1–8 keep
    the old look: ``o-``, bound ``s--``); past 8 × 12 layers the dash pattern counts rounds, so
    (colour, marker, line style) is distinct for any number of layers."""
    r, j = divmod(k // len(COLORS), len(MARKERS))  # round, marker
    marker = MARKERS[j]
    bound_marker = "s" if j == 0 else marker
    if r == 0:
        return LayerStyle(COLORS[k % len(COLORS)], marker, bound_marker, "-", "--")
    return LayerStyle(
        COLORS[k % len(COLORS)], marker, bound_marker, (0, (6.0, 1.0 + r)), (0, (2.0, 2.0 + r))
    )


class _LogAxis:
    """A y axis for values given as log10: native log scale when floats suffice, else log10
    plotted linearly with 10^k tick labels."""

    def __init__(self, ax: Any, logs: Sequence[float]) -> None:
        # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
        from matplotlib.ticker import FuncFormatter, MaxNLocator

        self.ax = ax
        finite = [v for v in logs if math.isfinite(v)]
        self.native = all(abs(v) <= NATIVE_LOG_LIMIT for v in finite)
        if self.native:
            ax.set_yscale("log")
        else:
            ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"$10^{{{round(v)}}}$"))

    def y(self, log10_value: float) -> float:
        return 10.0**log10_value if self.native else log10_value  # display only

    def edge_marker(
        self, xs: list[float], top: bool, label: str, color: str, marker: str | None = None
    ) -> None:
        """Markers at the top (∞) or bottom (0) edge for values the axis cannot show."""
        if not xs:
            return
        trans = self.ax.get_xaxis_transform()
        y = 0.97 if top else 0.03
        self.ax.scatter(
            xs,
            [y] * len(xs),
            transform=trans,
            marker=marker or ("^" if top else "v"),
            color=color,
            s=28,
            clip_on=False,
            zorder=3,
            label=label if label != "_" else "_nolegend_",
        )


def _n_ticks(ax: Any, ns: list[int], log: bool) -> None:
    """Tick at the checked n (a log-spaced subset when there are many)."""
    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    ticks = sorted(set(ns))
    if len(ticks) > 10:
        if log:
            want = [ticks[0] * (ticks[-1] / ticks[0]) ** (i / 7) for i in range(8)]
        else:
            want = [ticks[0] + (ticks[-1] - ticks[0]) * i / 7 for i in range(8)]
        ticks = sorted({min(ticks, key=lambda n, w=w: abs(n - w)) for w in want})
    lo, hi = min(ns), max(ns)
    if log:
        pad = (hi / lo) ** 0.05 if hi > lo else 1.5
        ax.set_xlim(lo / pad, hi * pad)
    else:
        pad = 0.05 * (hi - lo) if hi > lo else 0.5
        ax.set_xlim(lo - pad, hi + pad)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([str(n) for n in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())


def fit_label(fit: PowerFit) -> str:
    """Mathtext legend text for the fit c·n^(−k)."""
    return rf"fit ${fit_tex(fit)}$"


def gamma_figure(data: ReportData, path: Path, fit: PowerFit | None) -> Path:
    """γ(n) on log–log axes (exact values), ∞ marked at the top, with the fitted power law."""
    fig, ax = _new_figure()
    ns, logs, infinite = [], [], []
    for row in data.rows:
        if row.gamma is None:
            infinite.append(row.n)
            continue
        g = parse_rational(row.gamma)
        if g <= 0:
            continue
        ns.append(row.n)
        logs.append(math.log10(g.numerator) - math.log10(g.denominator))  # display only
    ax.set_xscale("log")
    axis = _LogAxis(ax, logs)
    if ns:
        ax.plot(ns, [axis.y(v) for v in logs], "o", color=COLORS[0], label=r"$\gamma(n)$ (exact)")
    closed_form = data.gamma_closed_form()
    named = [] if closed_form is None else [*closed_form.fitted_on, *closed_form.verified_on]
    closed_pts = [] if closed_form is None else closed_values(closed_form, sorted(named))
    closed_pts = [(n, v) for n, v in closed_pts if v > 0]
    if closed_pts:
        tex = form_latex(closed_form) if closed_form is not None else None
        short = tex and len(tex) <= 80 and r"\underbrace" not in tex  # mathtext has no brace
        name = rf"$\gamma(n) = {tex}$" if short else "closed form"
        logs_cf = [_log10_fraction(v) for _, v in closed_pts]
        ax.plot(
            [p[0] for p in closed_pts],
            [axis.y(v) for v in logs_cf],
            "--",
            color=COLORS[1],
            label=f"{name} (verified closed form)",
        )
    elif fit is not None:
        lo, hi = min(fit.ns), max(fit.ns)
        xs = [lo * (hi / lo) ** (i / 50) for i in range(51)]
        ys = [axis.y(fit.log10_c - fit.k * math.log10(x)) for x in xs]  # display only
        ax.plot(xs, ys, "--", color=COLORS[1], label=fit_label(fit))
    axis.edge_marker(infinite, True, r"$\gamma(n)=\infty$ (no strict gap)", COLORS[2])
    _n_ticks(ax, data.ns, log=True)
    ax.set_xlabel("n (input length)")
    ax.set_ylabel(r"$\gamma(n)$")
    if not ns and not infinite:
        ax.text(0.5, 0.5, "no γ(n) in the result", transform=ax.transAxes, ha="center")
    return _save(fig, ax, path)


def _log10_fraction(q: Any) -> float:
    return math.log10(q.numerator) - math.log10(q.denominator)  # display only


def error_figure(data: ReportData, path: Path) -> Path:
    """Upper ends of the certified per-layer errors against n (log y), with proved bounds."""
    fig, ax = _new_figure()
    series = []
    all_logs: list[float] = []
    for k, layer in enumerate(data.layers):
        err_pts, bound_pts, zeros = [], [], []
        for row in data.rows:
            entry = row.layer(layer.index)
            if entry is not None and entry.error is not None:
                v = parse_decimal(entry.error.upper)  # type: ignore[arg-type]
                if v.is_zero:
                    zeros.append(row.n)
                elif not v.is_inf:
                    err_pts.append((row.n, v.log10()))
            bound = data.bound_entry(row, layer.index)
            if bound is not None and bound.bound_text is not None:
                b = parse_decimal(bound.bound_text)
                if not b.is_zero and not b.is_inf:
                    bound_pts.append((row.n, b.log10()))
        all_logs += [p[1] for p in err_pts + bound_pts]
        series.append((layer_style(k), layer, err_pts, bound_pts, zeros))
    axis = _LogAxis(ax, all_logs)
    many = len(series) > len(COLORS)  # colours repeat: an exact zero takes the layer's marker
    zero_label = r"$\varepsilon_\ell(n) = 0$ exactly (layer " + (
        "colour and marker)" if many else "colour)"
    )
    for k, (style, layer, err_pts, bound_pts, zeros) in enumerate(series):
        name = f"L{layer.index} {_mpl_text(layer.kind)}"
        if err_pts:
            ax.plot(
                [p[0] for p in err_pts],
                [axis.y(p[1]) for p in err_pts],
                marker=style.marker,
                linestyle=style.linestyle,
                color=style.color,
                label=rf"{name}: $\varepsilon$ (upper end)",
            )
        if bound_pts:
            ax.plot(
                [p[0] for p in bound_pts],
                [axis.y(p[1]) for p in bound_pts],
                marker=style.bound_marker,
                linestyle=style.bound_linestyle,
                color=style.color,
                mfc="none",
                label=f"{name}: proved bound",
            )
        if zeros:
            shift = 0.08 * (k - (len(series) - 1) / 2)  # side by side when layers coincide
            marker = style.marker if many else None
            axis.edge_marker([n + shift for n in zeros], False, zero_label, style.color, marker)
            zero_label = "_"
    _n_ticks(ax, data.ns, log=False)
    ax.set_xlabel("n (input length)")
    ax.set_ylabel(r"certified error $\varepsilon_\ell(n)$ (upper end)")
    return _save(fig, ax, path)


def tau_figure(data: ReportData, path: Path) -> Path:
    """τ*_dec(n) and τ*_inv(n) (lower ends of the searched brackets) against τ_thm(n), log y."""
    fig, ax = _new_figure()
    series: dict[str, tuple[list, list]] = {"dec": ([], []), "inv": ([], [])}
    thm = []
    for row in data.rows:
        for name, found in zip(("dec", "inv"), data.tau_star_of(row), strict=True):
            if found is not None and found.lower is not None:
                point = (row.n, parse_decimal(found.lower.to_json()).log10())
                closed, open_ = series[name]
                (closed if found.upper is not None else open_).append(point)
        theorem = data.tau_theorem_of(row)
        if theorem is not None:
            thm.append((row.n, parse_decimal(theorem.lower.to_json()).log10()))
    every = [p[1] for c, o in series.values() for p in c + o] + [p[1] for p in thm]
    axis = _LogAxis(ax, every)
    style = {
        "dec": ("o-", COLORS[0], r"$\tau^*_{\mathrm{dec}}(n)$", -0.06),
        "inv": ("D-", COLORS[2], r"$\tau^*_{\mathrm{inv}}(n)$ ($\varepsilon \leq 1$ too)", 0.06),
    }
    open_label = r"$\tau^* \geq$ this (search reached its top)"
    for name, (closed, open_) in series.items():
        marker, color, label, shift = style[name]
        if closed:
            ax.plot(
                [p[0] for p in closed],
                [axis.y(p[1]) for p in closed],
                marker,
                color=color,
                markersize=9 if name == "dec" else 5,  # equal values stay visible
                label=label,
            )
        if open_:  # side by side when both searches reached the top
            ax.plot(
                [p[0] + shift for p in open_],
                [axis.y(p[1]) for p in open_],
                "^",
                color=color,
                mfc="none",
                label=open_label if closed else label + r" $\geq$ this (search reached its top)",
            )
            if closed:
                open_label = "_nolegend_"
    if thm:
        ax.plot(
            [p[0] for p in thm],
            [axis.y(p[1]) for p in thm],
            "s--",
            color=COLORS[1],
            mfc="none",
            label=r"$\tau_{\mathrm{thm}}(n)$ (theorem, lower end)",
        )
    _n_ticks(ax, data.ns, log=False)
    ax.set_xlabel("n (input length)")
    ax.set_ylabel(r"temperature $\tau$")
    return _save(fig, ax, path)


def _new_figure() -> tuple[Any, Any]:
    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    import matplotlib

    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.add_subplot()
    return fig, ax


def _save(fig: Any, ax: Any, path: Path) -> Path:
    """Save with the legend inside when short, below the axes when it would hide data."""
    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    import matplotlib

    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with matplotlib.rc_context(RC):
        handles = ax.get_legend_handles_labels()[0]
        if len(handles) > 3:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, frameon=False)
        elif handles:
            ax.legend(loc="best")
        FigureCanvasAgg(fig)
        with warnings.catch_warnings(record=True) as failed:
            warnings.simplefilter("always")
            fig.tight_layout()
        legend = ax.get_legend()
        if failed and legend is not None:  # a long legend (many layers) did not fit: grow
            width, height = fig.get_size_inches()
            extra = legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi
            fig.set_size_inches(width, height + extra)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # still too tall: saved as laid out
                fig.tight_layout()
        suffix = path.suffix.lstrip(".")

        write_rendered(
            path, lambda buf: fig.savefig(buf, format=suffix, metadata=METADATA.get(suffix))
        )
    return path


def write_figures(data: ReportData, stem: Path, suffix: str) -> list[tuple[str, Path]]:
    """Write every figure the result supports as ``<stem>-<name>.<suffix>``; (name, path)."""
    fit = data.gamma_fit()
    out = [
        (GAMMA_FIG, gamma_figure(data, _named(stem, GAMMA_FIG, suffix), fit)),
        (ERROR_FIG, error_figure(data, _named(stem, ERROR_FIG, suffix))),
    ]
    if data.has_figure_tau:
        out.append((TAU_FIG, tau_figure(data, _named(stem, TAU_FIG, suffix))))
    return out


def figure_names(data: ReportData) -> list[str]:
    """The figures :func:`write_figures` writes, in order (the writers reference them)."""
    return [GAMMA_FIG, ERROR_FIG] + ([TAU_FIG] if data.has_figure_tau else [])


def mpl_text(s: str) -> str:
    """User text in a figure: literal, never mathtext (``$`` escaped), one line, short."""
    s = "".join(c if c.isprintable() else " " for c in s)[:40]
    return s.replace("\\", "/").replace("$", r"\$")


_mpl_text = mpl_text


def _named(stem: Path, name: str, suffix: str) -> Path:
    return stem.with_name(f"{stem.name}-{name}.{suffix}")
