"""How a run ended early: the result file's ``stopped`` value (``interrupted`` is Ctrl-C).

A run whose ``--dask`` cluster went away is no Ctrl-C: its file keeps ``"interrupted":
false`` and says ``"stopped": "cluster lost"`` (docs/model-format.md). Files of finished runs
have no ``stopped`` key, so their bytes are those of earlier versions.
"""

from __future__ import annotations

STOPPED_CLUSTER_LOST = "cluster lost"
"""The ``stopped`` value of a run whose ``--dask`` cluster was lost mid-run."""

STOP_REASONS = (STOPPED_CLUSTER_LOST,)
"""Every ``stopped`` value this version writes."""


def stop_text(interrupted: bool, stopped: str | None) -> str | None:
    """How an unfinished run ended, in words for summaries and reports (None: it did not
    end early). A value this version does not know is shown as plain ``stopped``."""
    if stopped == STOPPED_CLUSTER_LOST:
        return "stopped: its Dask cluster was lost, rerun to resume"
    if stopped is not None:
        return "stopped"
    return "interrupted" if interrupted else None


def stop_label(interrupted: bool, stopped: str | None) -> str | None:
    """The short form for tables: ``interrupted``, ``stopped: cluster lost`` or ``stopped``."""
    if stopped is not None:
        return f"stopped: {STOPPED_CLUSTER_LOST}" if stopped == STOPPED_CLUSTER_LOST else "stopped"
    return "interrupted" if interrupted else None
