"""Size limits on every JSON file exactattn reads (documented in docs/limits.md).

A hostile or broken file must end in one clear message naming the JSON path, never in a
RecursionError, a 200 KB message or a silently dropped duplicate key. ``load_json_text``
calls :func:`check_tree` on every parsed file; the model reader adds the per-field limits.
"""

from __future__ import annotations

from typing import Any

from exactattn.core.errors import (  # noqa: F401  (cap_message, MAX_MESSAGE: re-exported)
    _SURROGATE,
    MAX_MESSAGE,
    ModelError,
    cap_message,
)

MAX_DEPTH = 64
"""Deepest nesting of JSON arrays/objects (models need about 7, result files about 8)."""

MAX_STRING = 100_000
"""Longest string anywhere in a file (descriptions, formulas, patterns)."""

MAX_KEY = 256
"""Longest object key."""

MAX_NAME = 256
"""Longest name, token, label, coordinate name or BOS/EOS token."""


class _DuplicateKey(dict):
    """An object that had a repeated key (reported with its path by :func:`check_tree`)."""

    duplicate: str = ""


def dedup_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that remembers the first repeated key instead of dropping it."""
    out: dict[str, Any] = {}
    dup = None
    for k, v in pairs:
        if k in out and dup is None:
            dup = k
        out[k] = v
    if dup is None:
        return out
    marked = _DuplicateKey(out)
    marked.duplicate = dup
    return marked


def clip(text: str, limit: int = 60) -> str:
    """A user string shortened and made printable for an error message."""
    text = _SURROGATE.sub("\ufffd", text)
    text = text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _join(path: str, key: str) -> str:
    key = clip(key, 40) if len(key) <= 40 else clip(key[:40], 40) + "…"
    return f"{path}.{key}" if path else key


def check_tree(tree: Any, source: str) -> None:
    """Refuse deep nesting, long strings/keys, duplicate keys and lone surrogates (iteratively)."""
    stack: list[tuple[Any, str, int]] = [(tree, "", 1)]
    while stack:
        x, path, depth = stack.pop()
        where = path or source
        if isinstance(x, dict):
            if depth > MAX_DEPTH:
                _too_deep(where)
            if isinstance(x, _DuplicateKey):
                raise ModelError(
                    _join(path, x.duplicate),
                    f"the key '{clip(x.duplicate, 40)}' appears twice in one object",
                    "keep one of them (JSON readers disagree on which one wins)",
                )
            for k, v in x.items():
                _check_string(k, _join(path, k), MAX_KEY, "key")
                stack.append((v, _join(path, k), depth + 1))
        elif isinstance(x, list):
            if depth > MAX_DEPTH:
                _too_deep(where)
            # a list of scalars (a row of a wide matrix: 10^6 numbers) is checked as a whole;
            # only a bad string (then named by its index) or a container gets its own visit
            leaves = [v for v in x if isinstance(v, str)]
            if leaves and (
                max(map(len, leaves)) > MAX_STRING or _SURROGATE.search("".join(leaves))
            ):
                for i, v in enumerate(x):
                    if isinstance(v, str):
                        _check_string(v, f"{path}[{i}]", MAX_STRING, "string")
            if len(leaves) < len(x):
                for i, v in enumerate(x):
                    if isinstance(v, (dict, list)):
                        stack.append((v, f"{path}[{i}]", depth + 1))
        elif isinstance(x, str):
            _check_string(x, where, MAX_STRING, "string")


def _too_deep(where: str) -> None:
    raise ModelError(
        where if len(where) <= 60 else where[:60] + "…",
        f"the JSON is nested deeper than the limit of {MAX_DEPTH} levels (docs/limits.md)",
        "flatten the file; model and result files need fewer than 10 levels",
    )


def _check_string(s: str, path: str, limit: int, what: str) -> None:
    if len(s) > limit:
        raise ModelError(
            path,
            f"a {what} of {len(s):,} characters is longer than the limit of {limit:,} "
            "(docs/limits.md)",
            f"shorten it to at most {limit:,} characters",
        )
    if _SURROGATE.search(s):
        raise ModelError(
            path,
            f"the {what} '{clip(s, 40)}' holds a lone UTF-16 surrogate (not a character)",
            "use valid Unicode text (surrogates only come in pairs, as one \\u escape each)",
        )


def check_name(s: str, path: str, what: str = "name") -> str:
    """Names, tokens and labels: non-empty, at most MAX_NAME characters, no control chars."""
    if not s:
        raise ModelError(path, f"the {what} is empty", f"give a non-empty {what}")
    if len(s) > MAX_NAME:
        raise ModelError(
            path,
            f"a {what} of {len(s):,} characters is longer than the limit of {MAX_NAME}",
            f"shorten it to at most {MAX_NAME} characters",
        )
    if any(not c.isprintable() for c in s):
        raise ModelError(
            path,
            f"the {what} '{clip(s, 40)}' holds a control character (newline, tab, …)",
            f"use printable characters only in a {what}",
        )
    return s


MAX_LENGTH = 1_000_000
"""Largest d, min_length, max_length or integer position a model may give."""

MAX_LAYERS = 1_024
"""Most layers a model may have (compiled LTL formulas of 100 operators need about 200)."""

MAX_HEADS = 1_024
"""Most attention heads in all layers together (bundled models have at most 8, compiled LTL
formulas about 100). Work grows with heads × n² per input: a 6,000-head model took 31–70
CPU-s and 1.5 GB for 14 inputs (issue 27)."""
