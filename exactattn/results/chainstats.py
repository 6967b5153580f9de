"""What ``check`` measures to verify the claims of Theorem S (``coordinate_ranges`` and
``head_profiles``): per claimed coordinate and position class, the smallest and largest hard
value over every layer boundary and whether every value is an integer; per claimed head, for
each k the smallest k-th drop below the top score over every query.

The record merges like every measurement (min, max, and; elementwise min of the drops), so
shards and resumed runs give the same result. It is written only into checkpoint shards
(``LengthRecord.to_json(exact=True)``): a result file shows the verdict of each claim in its
``claims`` entry (:mod:`exactattn.results.claims`), not these raw numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactattn.core.numbers import frac_str, parse_rational

__all__ = ["CHAIN_KEY", "ChainStats", "CoordStats"]

CHAIN_KEY = "chain_measured"
CLASSES = ("bos", "rest")


def _q(text: str) -> Fraction:
    return parse_rational(text, "result", max_exponent=None)


@dataclass(frozen=True)
class CoordStats:
    """One coordinate in one position class: min, max, all values integers."""

    lo: Fraction
    hi: Fraction
    integer: bool

    def merge(self, other: CoordStats) -> CoordStats:
        return CoordStats(
            min(self.lo, other.lo), max(self.hi, other.hi), self.integer and other.integer
        )


@dataclass(frozen=True)
class ChainStats:
    """``coords[(coordinate, class)]`` (class "bos" = position 0 when the model has BOS,
    "rest" = every other position) and ``drops[(layer, head)]`` = (d_1, d_2, …), d_k the
    smallest k-th drop (k-th visible key below the top, by score) over the queries seen."""

    coords: tuple[tuple[int, str, CoordStats], ...]
    drops: tuple[tuple[int, int, tuple[Fraction, ...]], ...]

    def merge(self, other: ChainStats) -> ChainStats:
        cs: dict[tuple[int, str], CoordStats] = {(c, k): s for c, k, s in self.coords}
        for c, k, s in other.coords:
            cs[(c, k)] = s if (c, k) not in cs else cs[(c, k)].merge(s)
        ds: dict[tuple[int, int], tuple[Fraction, ...]] = {(a, b): d for a, b, d in self.drops}
        for a, b, d in other.drops:
            mine = ds.get((a, b))
            if mine is None:
                ds[(a, b)] = d
            else:
                n = max(len(mine), len(d))
                ds[(a, b)] = tuple(
                    min(
                        x
                        for x in (mine[i] if i < len(mine) else None, d[i] if i < len(d) else None)
                        if x is not None
                    )
                    for i in range(n)
                )
        return ChainStats(
            tuple((c, k, cs[(c, k)]) for c, k in sorted(cs)),
            tuple((a, b, ds[(a, b)]) for a, b in sorted(ds)),
        )

    def coord(self, c: int, cls: str) -> CoordStats | None:
        for cc, k, s in self.coords:
            if cc == c and k == cls:
                return s
        return None

    def head(self, layer: int, head: int) -> tuple[Fraction, ...] | None:
        for a, b, d in self.drops:
            if (a, b) == (layer, head):
                return d
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "coordinates": [
                {
                    "index": c,
                    "class": k,
                    "min": frac_str(s.lo),
                    "max": frac_str(s.hi),
                    "integer": s.integer,
                }
                for c, k, s in self.coords
            ],
            "heads": [
                {"layer": a, "head": b, "drops": [frac_str(x) for x in d]} for a, b, d in self.drops
            ],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ChainStats:
        coords = tuple(
            (
                int(x["index"]),
                str(x["class"]),
                CoordStats(_q(x["min"]), _q(x["max"]), bool(x["integer"])),
            )
            for x in d["coordinates"]
        )
        drops = tuple(
            (int(x["layer"]), int(x["head"]), tuple(_q(t) for t in x["drops"])) for x in d["heads"]
        )
        for _, k, _ in coords:
            if k not in CLASSES:
                raise ValueError(f"{CHAIN_KEY}: unknown position class {k!r}")
        return ChainStats(coords, drops)
