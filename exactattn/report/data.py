"""A read-only view of an ``exactattn-result/1`` dict that tolerates absent extensions.

The writers and the figures read the result only through this view, so "is there a bound?",
"which layers exist?" and the γ fit are decided once and shown identically in every format.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from exactattn.bounds.closedforms import closed_forms
from exactattn.core.errors import UsageError
from exactattn.report.closed import values, verified
from exactattn.report.fmt import PowerFit, parse_decimal, parse_rational
from exactattn.results import RESULT_FORMAT
from exactattn.results.bounds import (
    BoundsRecord,
    CertifiedBall,
    LayerBound,
    TauBracket,
    TauStarRecord,
    tau_star_brackets,
)
from exactattn.results.claims import GapBoundEntry
from exactattn.results.sequences import GAMMA, ClosedForm, LengthValues, closed_form_records
from exactattn.results.settings import CheckSettings
from exactattn.results.views import (
    ABSENT,
    LayerInfo,
    LayerView,
    LengthView,
    ModelInfo,
    ResultView,
    VerdictView,
    format_of,
)


@dataclass(frozen=True)
class LayerBoundView:
    """One layer's proved bound and measured/bound as written (upper ends)."""

    record: LayerBound

    @property
    def bound_text(self) -> str | None:
        return None if self.record.bound is None else self.record.bound.to_json()

    @property
    def ratio_text(self) -> str | None:
        r = self.record.measured_over_bound
        return None if r is None else r.to_json()


@dataclass
class ReportData:
    """Everything the writers need, read once from the result through results/ (typed views,
    extensions defaulted when absent)."""

    result: dict[str, Any]
    model: str
    rows: list[LengthView]
    layers: list[LayerInfo]
    info: ModelInfo = field(default_factory=ModelInfo)
    settings: CheckSettings = field(default_factory=lambda: CheckSettings(0, 0))
    verdict: VerdictView | None = None
    _closed: dict[str, Any] | None = None

    @property
    def slug(self) -> str:
        """The model name reduced to label-safe characters (LaTeX labels, file names)."""
        return re.sub(r"[^A-Za-z0-9]+", "-", self.model).strip("-") or "model"

    @property
    def ns(self) -> list[int]:
        return [row.n for row in self.rows]

    @property
    def n_range(self) -> tuple[int, int]:
        return self.settings.min_n, self.settings.max_n

    @property
    def temperature(self) -> tuple[str | None, bool]:
        """(τ(n) as written, whether it was overridden on the command line)."""
        override = self.settings.tau.record_text()
        return (override or self.info.temperature), bool(override)

    @property
    def total_inputs(self) -> int:
        return sum(0 if row.inputs is ABSENT else int(row.inputs) for row in self.rows)

    @property
    def has_bounds(self) -> bool:
        return any(row.bounds is not None for row in self.rows)

    @property
    def has_tau_star(self) -> bool:
        return any(row.tau_star is not None for row in self.rows)

    @property
    def has_tau_theorem(self) -> bool:
        return any(self.tau_theorem_of(row) is not None for row in self.rows)

    @property
    def has_reference(self) -> bool:
        return any(row.reference is not None for row in self.rows)

    @property
    def has_undecided(self) -> bool:
        return any(row.undecided is not ABSENT for row in self.rows)

    @property
    def has_figure_tau(self) -> bool:
        return self.has_tau_star or self.has_tau_theorem

    def layer_entry(self, row: LengthView, index: int) -> LayerView | None:
        return row.layer(index)

    def bounds_of(self, row: LengthView) -> BoundsRecord | None:
        """The length's proved bounds (a typed record)."""
        return row.bounds

    def tau_star_record(self, row: LengthView) -> TauStarRecord | None:
        """The length's τ* record (a flat bracket of older results is read as τ*_inv)."""
        return row.tau_star

    def tau_star_of(self, row: LengthView) -> tuple[TauBracket | None, TauBracket | None]:
        """(τ*_dec, τ*_inv) brackets of one length."""
        return tau_star_brackets(self.tau_star_record(row))

    def tau_theorem_of(self, row: LengthView) -> CertifiedBall | None:
        b = self.bounds_of(row)
        return None if b is None else b.tau_theorem

    def bound_entry(self, row: LengthView, index: int) -> LayerBoundView | None:
        b = self.bounds_of(row)
        lb = None if b is None else b.layer(index)
        return None if lb is None else LayerBoundView(lb)

    def compiler_gap_rows(self) -> list[tuple[int, GapBoundEntry]]:
        """(n, compiler gap bound) of the lengths that have one (compiled RASP models)."""
        return [(r.n, r.compiler_gap) for r in self.rows if r.compiler_gap is not None]

    def verdict_line(self) -> tuple[bool | None, str, str]:
        """(ok, label, text): the engine's verdict, or one derived from the rows when absent."""
        if self.verdict is not None:
            ok = self.verdict.ok
            label = self.verdict.status or {True: "ok", False: "not ok"}.get(ok, "")  # type: ignore[arg-type]
            return ok, str(label), self.verdict.summary
        holds = all(row.invariant == "holds" for row in self.rows)
        agree = all(row.disagreements in (0, ABSENT) for row in self.rows)
        refs = [row.reference for row in self.rows if row.reference is not None]
        matches = all(r.hard in (0, ABSENT) and r.soft in (0, ABSENT) for r in refs)
        parts = [
            "the ε ≤ 1 invariant "
            + ("holds at every n" if holds else "is not certified at some n"),
            "hard and soft " + ("agree on every input" if agree else "disagree on some input"),
        ]
        if self.has_reference:
            parts.append("both match the reference" if matches else "the reference is not met")
        text = "no verdict in the result file; derived: " + ", ".join(parts)
        ok = holds and agree and matches
        return ok, "ok" if ok else "not ok", text

    def tau_star_rows(self) -> list[tuple[int, TauStarRecord | None]]:
        """(n, τ* record) of every length."""
        return [(row.n, row.tau_star) for row in self.rows]

    @property
    def legacy_tau_star(self) -> bool:
        """Whether some length holds the single flat τ* bracket written before the split."""
        return any(ts is not None and ts.legacy for _, ts in self.tau_star_rows())

    @property
    def has_tau_scan(self) -> bool:
        """Whether the τ* searches checked the grid below their lower ends (results written
        before the monotonicity scan existed did not)."""
        return any(
            b is not None and b.non_monotone is not None
            for _, ts in self.tau_star_rows()
            for b in tau_star_brackets(ts)
        )

    @property
    def tau_grid(self) -> str | None:
        """The grid τ*(n) was searched on (``2^(k/8)``), when the result says."""
        for _, ts in self.tau_star_rows():
            if ts is not None and ts.grid:
                return str(ts.grid)
        return None

    @property
    def closed_forms(self) -> dict[str, Any]:
        """The result's ``closed_forms``; computed from the rows for results without one."""
        if self._closed is None:
            self._closed = closed_forms([LengthValues.from_row(r.entry) for r in self.rows])
        return self._closed

    def gamma_closed_form(self) -> ClosedForm | None:
        """γ's verified closed form (it replaces the float power fit), or None."""

        rec = closed_form_records(self.closed_forms).get(GAMMA)
        if rec is None or not verified(rec):
            return None
        # a result file is input: draw the form only where it reproduces the rows it names
        named = set(rec.fitted_on) | set(rec.verified_on)
        rows = {r.n: r.gamma for r in self.rows if r.n in named}
        got = dict(values(rec, sorted(rows)))
        for n, g in rows.items():
            if g is None or got.get(n) != parse_rational(g):
                return None
        return rec

    def gamma_fit(self) -> PowerFit | None:
        """Fit c·n^(−k) to γ over the n where γ is finite and positive (needs two such n)."""
        points = []
        for row in self.rows:
            if row.gamma is None:
                continue
            gamma = parse_rational(row.gamma)
            if gamma > 0 and row.n > 0:
                x = math.log10(row.n)  # display only
                y = math.log10(gamma.numerator) - math.log10(gamma.denominator)  # display only
                points.append((row.n, x, y))
        if len({p[0] for p in points}) < 2:
            return None
        mx = sum(p[1] for p in points) / len(points)
        my = sum(p[2] for p in points) / len(points)
        sxx = sum((p[1] - mx) ** 2 for p in points)
        sxy = sum((p[1] - mx) * (p[2] - my) for p in points)
        slope = sxy / sxx
        return PowerFit(log10_c=my - slope * mx, k=-slope, ns=tuple(p[0] for p in points))


def non_monotone_lines(rows: Sequence[tuple[int, TauStarRecord | None]]) -> list[str]:
    """One plain sentence per length and bracket whose search found τ* not monotone (grid τ
    bad below the bracket's lower end, or good above its upper end), with a witness; the
    result file lists every such τ. Shared by the terminal and both report formats.
    ``rows``: (n, the length's τ* record)."""
    out = []
    for n, ts in rows:
        for name, b in zip(("τ*_dec", "τ*_inv"), tau_star_brackets(ts), strict=True):
            found = (b.non_monotone if b is not None else None) or ()
            bad = [f for f in found if not f.good_above]
            good = [f for f in found if f.good_above]
            parts = []
            if bad:
                assert b is not None
                f = bad[-1]  # the one closest to the lower end
                why = f.why
                word = (why.input if why is not None else None) or ()
                text = "".join(word) if all(len(t) == 1 for t in word) else " ".join(word)
                layer = None if why is None else why.layer
                where = f" after layer {layer}" if layer is not None else ""
                span = (
                    f"τ = {f.tau}"
                    if len(bad) == 1
                    else (f"{len(bad)} grid τ from {bad[0].tau} to {f.tau}")
                )
                reason = None if why is None else why.reason
                parts.append(
                    f"bad below its lower end {b.lower} at {span} "
                    f"(witness at τ = {f.tau}: {reason}{where} on input '{text}')"
                )
            if good:
                assert b is not None
                taus = (
                    "τ = " + ", ".join(str(f.tau) for f in good)
                    if len(good) <= 3
                    else f"{len(good)} grid values from {good[0].tau} to {good[-1].tau}"
                )
                parts.append(f"good above its upper end {b.upper} at {taus}")
            if parts:
                out.append(f"n = {n}: {name} is not monotone: " + "; ".join(parts) + ".")
    return out


def load(result: dict[str, Any]) -> ReportData:
    """Check the format tag and build the view; raises UsageError naming what is wrong."""
    if not isinstance(result, dict):
        raise UsageError("a result must be a JSON object in format exactattn-result/1")
    if format_of(result) != RESULT_FORMAT:
        raise UsageError(f"format: expected {RESULT_FORMAT!r}, got {format_of(result)!r}")
    view = ResultView.from_json(result)
    rows = list(view.lengths)
    if view.info.layers:
        layers = list(view.info.layers)
    else:
        seen: dict[int, str] = {}
        for row in rows:
            for entry in row.layers:
                seen.setdefault(entry.index, entry.kind)
        layers = [LayerInfo(i, kind) for i, kind in sorted(seen.items())]
    for row in rows:  # validate certified strings early, with a useful message
        for entry in row.layers:
            err = entry.error
            if err is not None:
                try:
                    if err.missing:
                        raise KeyError(err.missing)
                    parse_decimal(err.lower), parse_decimal(err.upper)  # type: ignore[arg-type]
                except (KeyError, ValueError) as exc:
                    raise UsageError(
                        f"lengths[n={row.n}].layers[{entry.index}].error: {exc}"
                    ) from None
    return ReportData(
        result=result,
        model=view.model,
        rows=rows,
        layers=layers,
        info=view.info,
        settings=view.settings,
        verdict=view.verdict,
        _closed=view.closed_forms,
    )
