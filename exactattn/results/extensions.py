"""Per-length extensions of ``exactattn-result/1`` written by other stages, read back typed.

``compiler_gap_bound`` (compiled RASP models, issue 22) is written by
:func:`exactattn.rasp.gap.gap_bound_record`; reports read it through :class:`CompilerGap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GAP_KEY = "compiler_gap_bound"


@dataclass(frozen=True)
class CompilerGap:
    """The compiler's gap bound at one length beside the measured γ(n) (exact texts)."""

    expression: str | None
    bound: str | None  # None: ∞
    measured: str | None  # None: ∞
    holds: bool
    violations: int

    @staticmethod
    def from_json(d: dict[str, Any]) -> CompilerGap:
        e, b, m = d.get("expression"), d.get("bound"), d.get("measured")
        return CompilerGap(
            None if e is None else str(e),
            str(b) if b else None,
            str(m) if m else None,
            bool(d.get("holds")),
            len(d.get("violations") or []),
        )


def compiler_gap(row: dict[str, Any]) -> CompilerGap | None:
    """The length's compiler gap bound, when the result has one."""
    g = row.get(GAP_KEY)
    return CompilerGap.from_json(g) if g else None
