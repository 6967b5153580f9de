"""Typed readers of the witness objects a result holds (JSON data inside the records).

A :class:`~exactattn.results.Witness` keeps its JSON data as written (so results round-trip
byte for byte); renderers, the terminal and :mod:`exactattn.testing` read it through these
views instead of spelling its keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _word(x: Any) -> tuple[str, ...] | None:
    return None if x is None else tuple(str(t) for t in x)


@dataclass(frozen=True)
class GammaWitness:
    """Where γ(n) is attained: the input, layer, head, query and the two keys."""

    input: tuple[str, ...] | None
    layer: Any
    head: Any
    query: Any
    top_key: Any
    other_key: Any

    @staticmethod
    def from_json(d: dict[str, Any]) -> GammaWitness:
        return GammaWitness(
            _word(d.get("input")),
            d.get("layer"),
            d.get("head"),
            d.get("query"),
            d.get("top_key"),
            d.get("other_key"),
        )


@dataclass(frozen=True)
class PositionWitness:
    """An input and a position in it (where a layer's error is attained, a hard tie …)."""

    input: tuple[str, ...] | None
    position: Any

    @staticmethod
    def from_json(d: dict[str, Any]) -> PositionWitness:
        return PositionWitness(_word(d.get("input")), d.get("position"))


def witness_input(data: Any) -> tuple[str, ...] | None:
    """The input a witness names: its ``input`` field, or the data itself when it is the
    input (``first_undecided``)."""
    if isinstance(data, dict):
        return _word(data.get("input"))
    return _word(data)


def decisions(detail: Any) -> tuple[Any, Any]:
    """(hard, soft) decisions of a disagreement's detail (JSON data; None when absent)."""
    if not isinstance(detail, dict):
        return None, None
    return detail.get("hard"), detail.get("soft")
