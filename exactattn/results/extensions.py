"""Per-length extensions of ``exactattn-result/1`` written by other stages, read back typed.

``compiler_gap_bound`` (compiled RASP models, issue 22) is written by
:func:`exactattn.results.claims.gap_bound_entry`; reports read it through
:meth:`exactattn.results.claims.GapBoundEntry.read` (the same record ``certify --checked``
reads strictly).
"""

from __future__ import annotations

from typing import Any

from exactattn.results.claims import GapBoundEntry

GAP_KEY = "compiler_gap_bound"


def compiler_gap(row: dict[str, Any]) -> GapBoundEntry | None:
    """The length's compiler gap bound, when the result has one (any JSON: never raises)."""
    return GapBoundEntry.read(row.get(GAP_KEY))
