"""The attention weights of one input, hard beside soft, one row of two heatmaps per head
(``exactattn eval MODEL WORD --plot heads.png``, issue 39): the picture a user would
otherwise draw by hand to see where softmax leaks weight the hard rule does not give.

The hard weights are exact (1/c on the argmax set, the cells say so); the soft weights are
certified arb balls, drawn at their midpoints (a picture, not a certificate: ``eval``'s
tables and ``--json`` results carry the enclosures). Rendering is deterministic (Agg, fixed
salt, no dates); every user string (model name, tokens, head names) is made literal text
(never mathtext).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from flint import arb

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_rendered
from exactattn.core.numbers import frac_str
from exactattn.model import AttentionLayer
from exactattn.report.figures import METADATA, RC, mpl_text
from exactattn.run.evaluate import Evaluation

FORMATS = ("png", "pdf", "svg")
MAX_HEADS = 24
"""Heads drawn at most (one row each); a model with more gets the first ones and a note."""
ANNOTATE = 12
"""Cells are labelled with their weights up to this many positions (else colour only)."""


@dataclass(frozen=True)
class HeadWeights:
    """One head's attention on one input: rows are queries, columns keys."""

    layer: int
    head: int
    rule: str  # the hard rule: average, leftmost, rightmost
    name: str | None
    tau: str | None
    labels: tuple[str, ...]  # "position:token" of each sequence slot
    hard: tuple[tuple[Fraction, ...], ...]
    soft: tuple[tuple[float, ...], ...] | None


def check_plot_path(path: Path) -> None:
    """Refuse a file type matplotlib should not guess (before any work: exit 2)."""
    suffix = path.suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        raise UsageError(
            f"--plot {path}: unknown figure type '{path.suffix}' (fix: end the name in "
            f"{', '.join('.' + f for f in FORMATS)})"
        )


def _mid(x: arb) -> float:
    """A ball's midpoint as a float, for drawing only."""
    return float(x.mid())  # display only: a colour and a 2-digit label


def heads_of(ev: Evaluation) -> list[HeadWeights]:
    """Every attention head of the evaluation, in layer order."""
    m = ev.model
    labels = tuple(f"{m.position_index(j)}:{t}" for j, t in enumerate(ev.tokens))
    out = []
    for li, layer in enumerate(m.layers):
        if not isinstance(layer, AttentionLayer) or ev.hard_attention[li] is None:
            continue
        soft_layer = ev.soft_attention[li] if ev.soft_attention else None
        for hi, rows in enumerate(ev.hard_attention[li]):
            soft = soft_layer[hi] if soft_layer else None
            tau = ev.tau[li][hi] if ev.tau[li] else None
            out.append(
                HeadWeights(
                    layer=li,
                    head=hi,
                    rule=layer.heads[hi].hard,
                    name=layer.heads[hi].name,
                    tau=None if tau is None else f"{_mid(tau):.4g}",
                    labels=labels,
                    hard=tuple(tuple(r) for r in rows),
                    soft=None if soft is None else tuple(tuple(_mid(w) for w in r) for r in soft),
                )
            )
    return out


def _draw(
    ax: Any, weights: Any, labels: tuple[str, ...], title: str, cells: list[list[str]], left: bool
) -> Any:
    n = len(labels)
    im = ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="Blues", interpolation="nearest")
    ax.set_title(title, fontsize=8)
    ticks = list(range(n))
    shown = [mpl_text(s) for s in labels]
    ax.set_xticks(ticks, shown, rotation=90 if n > 4 else 0, fontsize=7)
    ax.set_yticks(ticks, shown if left else [""] * n, fontsize=7)  # the same queries
    ax.set_xlabel("key", fontsize=7)
    if left:
        ax.set_ylabel("query", fontsize=7)
    ax.grid(False)
    if n <= ANNOTATE:
        for i in range(n):
            for j in range(n):
                if cells[i][j]:
                    v = weights[i][j]
                    ax.text(
                        j,
                        i,
                        cells[i][j],
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if v > 0.6 else "black",
                    )
    return im


def attention_figure(ev: Evaluation, path: Path) -> Path:
    """Write the figure of every head of ``ev`` to ``path`` (.png, .pdf or .svg)."""
    check_plot_path(path)
    heads = heads_of(ev)
    if not heads:
        raise UsageError(f"--plot {path}: the model has no attention head to draw")
    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    import matplotlib

    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # lazy: matplotlib costs ≈ 0.5 s to import; only figures need it
    from matplotlib.figure import Figure

    drawn = heads[:MAX_HEADS]
    T = len(ev.tokens)
    side = max(2.4, 0.32 * T + 1.2)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(2 * side + 1.2, side * len(drawn) + 0.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(drawn), 2, squeeze=False)
        for row, h in zip(axes, drawn, strict=True):
            hard = [[float(w) for w in r] for r in h.hard]  # display only: colours
            hard_cells = [[frac_str(w) if w else "" for w in r] for r in h.hard]
            where = f"layer {h.layer} head {h.head}"
            name = f"\n{mpl_text(h.name)}" if h.name else ""
            _draw(row[0], hard, h.labels, f"{where}: hard ({h.rule}){name}", hard_cells, True)
            if h.soft is not None:
                soft_cells = [[f"{w:.2f}" if w >= 0.005 else "" for w in r] for r in h.soft]
                im = _draw(
                    row[1],
                    h.soft,
                    h.labels,
                    f"{where}: softmax, τ = {h.tau}{name}",
                    soft_cells,
                    False,
                )
            else:
                row[1].set_axis_off()
                row[1].text(0.5, 0.5, "soft weights not computed", ha="center", va="center")
                im = None
        title = f"{mpl_text(ev.model.name)} on {mpl_text(' '.join(ev.word))} (n = {len(ev.word)})"
        if len(heads) > len(drawn):
            title += f": first {len(drawn)} of {len(heads)} heads"
        fig.suptitle(title, fontsize=9)
        if im is not None:
            fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.5, label="attention weight")
        suffix = path.suffix.lstrip(".").lower()
        meta = METADATA.get(suffix, {"Date": None, "Creator": None})  # svg: no date either
        write_rendered(path, lambda buf: fig.savefig(buf, format=suffix, metadata=meta))
    return path
