"""Errors that reach the user: each names where the problem is and how to fix it."""

from __future__ import annotations


class ExactAttnError(Exception):
    """Base class for errors the CLI reports with exit code 2."""


class ModelError(ExactAttnError):
    """A model file breaks the format: `path` is the JSON path (``layers[2].heads[0].query``)."""

    def __init__(self, path: str, message: str, fix: str | None = None) -> None:
        self.path = path
        self.message = message
        self.fix = fix
        text = f"{path}: {message}" if path else message
        if fix:
            text += f" (fix: {fix})"
        from exactattn.limits import cap_message

        super().__init__(cap_message(text))  # one short line whatever the user text holds


class UsageError(ExactAttnError):
    """A command-line or API argument is unusable."""


class ClusterLost(RuntimeError):
    """The Dask scheduler or every worker went away mid-run (not bad input: the run stops
    as an incomplete, resumable result; finished lengths and checkpointed shards are kept)."""
