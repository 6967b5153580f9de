"""Random models for benchmarks: reproducible, with ties and small rational weights."""

from __future__ import annotations

import random
from typing import Any


def _r(rng: random.Random) -> str | int:
    num = rng.randint(-3, 3)
    den = rng.choice([1, 1, 2, 3, 4])
    return num if den == 1 else f"{num}/{den}"


def _mat(rng: random.Random, rows: int, cols: int, density: float = 0.5) -> list[list[Any]]:
    return [[_r(rng) if rng.random() < density else 0 for _ in range(cols)] for _ in range(rows)]


def random_model(
    d: int = 16,
    blocks: int = 4,
    heads: int = 2,
    k: int = 4,
    seed: int = 0,
    alphabet: tuple[str, ...] = ("a", "b"),
) -> dict[str, Any]:
    """`blocks` × (attention with `heads` heads, then a ReLU FFN), width d, causal masks."""
    rng = random.Random(seed)
    layers: list[dict[str, Any]] = []
    for _ in range(blocks):
        hs = []
        for _ in range(heads):
            hs.append(
                {
                    "query": _mat(rng, k, d, 0.3),
                    "key": _mat(rng, k, d, 0.3),
                    "value": _mat(rng, 2, d, 0.3),
                    "output": _mat(rng, d, 2, 0.3),
                    "mask": rng.choice(["leq", "lt", "none"]),
                    "hard": "average",
                }
            )
        layers.append({"kind": "attention", "heads": hs})
        layers.append(
            {
                "kind": "ffn",
                "hidden": [{"weight": _mat(rng, 8, d, 0.3), "bias": [_r(rng) for _ in range(8)]}],
                "output": {"weight": _mat(rng, d, 8, 0.3), "bias": [0] * d},
            }
        )
    return {
        "format": "exactattn/1",
        "name": f"random-d{d}-b{blocks}-h{heads}-s{seed}",
        "alphabet": list(alphabet),
        "bos": "<s>",
        "d": d,
        "embedding": {
            "token": {t: [_r(rng) for _ in range(d)] for t in [*alphabet, "<s>"]},
            "position": ["i/n", "1/(i+1)"] + ["0"] * (d - 2),
        },
        "temperature": "1/n",
        "layers": layers,
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [1] + [0] * (d - 1),
            "bias": 0,
            "threshold": 0,
        },
    }
