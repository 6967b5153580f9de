"""Errors that reach the user: each names where the problem is and how to fix it."""

from __future__ import annotations

import re

MAX_MESSAGE = 600
"""Longest error message the tool prints (user text inside it is clipped)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def cap_message(text: str) -> str:
    """One error message: one line (control characters escaped), at most MAX_MESSAGE long."""
    text = _SURROGATE.sub("\ufffd", text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 40] + f"… (message cut, {len(text):,} characters)"
    return text


class ExactAttnError(Exception):
    """Base class for errors the CLI reports with exit code 2."""


class ModelError(ExactAttnError):
    """A model file breaks the format: `path` is the JSON path (``layers[2].heads[0].query``)."""

    def __init__(self, path: str, message: str, fix: str | None = None) -> None:
        self.path = path
        self.message = message
        self.fix = fix
        text = f"{path}: {message}" if path else message
        if fix and "(fix:" not in message:  # a wrapped message may carry its own (issue 40)
            text += f" (fix: {fix})"
        super().__init__(cap_message(text))  # one short line whatever the user text holds


class UsageError(ExactAttnError):
    """A command-line or API argument is unusable."""


class ClusterLost(RuntimeError):
    """The Dask scheduler or every worker went away mid-run (not bad input: the run stops
    as an incomplete, resumable result; finished lengths and checkpointed shards are kept)."""
