"""Measured errors against proved bounds on whole networks (issue 24): the helpers of
tests/bounds/test_wrong_bound_formulas_are_caught.py and the seeded adversarial search whose
best finds are kept in tests/data/bound_search_witnesses.json.

Every measured error comes from the engine's certified arb pass (``run_check``); a ratio is
the *lower* end of the certified measured error over the bound (so a ratio above 1 is a
certified violation, and the true ratio is at least the one reported). Two bounds are held
against each network:

* ``chain``: what ``check --bounds`` reports after every layer (Theorem 3(b), composed);
* ``thm4``: Theorem 4's B_ℓ = b(a^ℓ − 1)/(a − 1) from the paper-shaped constants K, X, γ, m
  (``bounds.theorem_bound``), at a constant rational τ ≤ 1, for every ℓ ≤ L where the
  invariant B_{ℓ−1} ≤ 1 holds.

Regenerate the stored witnesses: ``python tests/bound_search.py --write`` (seeded: same file).
"""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from exactattn import bounds as B
from exactattn import model_from_dict, run_check
from exactattn.core.errors import ModelError
from exactattn.core.numbers import arb_endpoints, decimal_up, parse_decimal

DATA = Path(__file__).resolve().parent / "data" / "bound_search_witnesses.json"
TAUS = ("1", "1/2", "1/4")


def _f(text: str | None) -> Fraction | None:
    return None if text is None else Fraction(parse_decimal(text))


def exact_tau(text: str, n: int) -> Fraction | None:
    """A constant rational τ, or 1/n; None for any other schedule (Theorem 4 is then not
    evaluated: B_ℓ is not monotone in τ, so it needs the exact τ)."""
    if text.strip() == "1/n":
        return Fraction(1, n)
    try:
        return Fraction(text)
    except ValueError:
        return None


def ratios(model: dict, max_n: int) -> dict[str, Any]:
    """Largest measured/bound of both bounds over n ≤ max_n and every layer, and the number
    of certified violations (measured lower end above the bound)."""
    res = run_check(model_from_dict(model), max_n=max_n, bounds=True).to_json()
    best = {"chain": Fraction(0), "thm4": Fraction(0), "violations": 0, "thm4_layers": 0}
    for e in res["lengths"]:
        bd = e["bounds"]
        best["violations"] += bd["violations"]
        for item, layer in zip(bd["layers"], e["layers"], strict=True):
            err = layer["error"]
            if item["bound"] is None or err is None:
                continue
            bnd = _f(item["bound"])
            assert bnd is not None
            if bnd > 0:
                best["chain"] = max(best["chain"], _f(err["lower"]) / bnd)
        c = bd["constants"]
        tau = exact_tau(model["temperature"], e["n"])
        if tau is None or tau > 1:
            continue
        for ell, layer in enumerate(e["layers"], start=1):
            err = layer["error"]
            tb = B.theorem_bound(ell, _f(c["K"]), _f(c["x_max"]), _f(c["gamma"]), c["m"], tau)
            if tb is None or err is None:
                continue
            bnd = arb_endpoints(tb)[1]
            best["thm4_layers"] += 1
            if _f(err["lower"]) > bnd:
                best["violations"] += 1
            if bnd > 0:
                best["thm4"] = max(best["thm4"], _f(err["lower"]) / bnd)
    return best


# ------------------------------------------------------------------ random small networks
VALS = (-1, 0, 0, 1, 1, 2)


def _mat(rng: random.Random, r: int, c: int) -> list[list[int]]:
    return [[rng.choice(VALS) for _ in range(c)] for _ in range(r)]


def random_network(rng: random.Random) -> dict:
    """d ∈ {1, 2}, tokens a, b, 1–3 layers (attention with 1–2 average-hard heads, or a
    one-hidden-layer FFN), τ ∈ {1, 1/2, 1/4}."""
    d = rng.choice((1, 2))
    layers: list[dict] = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.75 or not layers:
            heads = []
            for _ in range(rng.choice((1, 1, 2))):
                heads.append(
                    {
                        "query": _mat(rng, d, d),
                        "key": _mat(rng, d, d),
                        "value": _mat(rng, d, d),
                        "mask": rng.choice(("none", "leq")),
                    }
                )
            layers.append({"kind": "attention", "heads": heads})
        else:
            layers.append(
                {
                    "kind": "ffn",
                    "hidden": [{"weight": _mat(rng, d, d), "bias": [0] * d}],
                    "output": {"weight": _mat(rng, d, d), "bias": [0] * d},
                }
            )
    return {
        "format": "exactattn/1",
        "name": "search",
        "alphabet": ["a", "b"],
        "d": d,
        "embedding": {
            "token": {
                "a": [rng.choice((1, 2, -1)) for _ in range(d)],
                "b": [rng.choice((-1, 0, 1)) for _ in range(d)],
            }
        },  # fmt: skip
        "temperature": rng.choice(TAUS),
        "layers": layers,
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [1] * d,
            "bias": 0,
            "threshold": "1/3",
        },  # fmt: skip
    }


def _tweak(rng: random.Random, model: dict) -> dict:
    """One random entry of one weight matrix (or the embedding, or τ) changed."""
    m = json.loads(json.dumps(model))
    r = rng.random()
    if r < 0.1:
        m["temperature"] = rng.choice(TAUS)
        return m
    if r < 0.25:
        tok = rng.choice(("a", "b"))
        vec = m["embedding"]["token"][tok]
        vec[rng.randrange(len(vec))] = rng.choice((-2, -1, 0, 1, 2))
        return m
    layer = rng.choice(m["layers"])
    if layer["kind"] == "attention":
        mat = rng.choice(layer["heads"])[rng.choice(("query", "key", "value"))]
    else:
        mat = rng.choice((layer["hidden"][0]["weight"], layer["output"]["weight"]))
    row = rng.choice(mat)
    row[rng.randrange(len(row))] = rng.choice((-2, -1, 0, 1, 2))
    return m


def search(seed: int, starts: int, steps: int, max_n: int = 3) -> list[dict]:
    """Random starts, then hill-climbing on measured/bound; returns the best network of each
    kind (chain, thm4) with its ratios. Raises AssertionError on any violation."""
    rng = random.Random(seed)
    best: dict[str, tuple[Fraction, dict]] = {
        "chain": (Fraction(-1), {}),
        "thm4": (Fraction(-1), {}),
    }

    def score(m: dict) -> dict[str, Any]:
        r = ratios(m, max_n)
        assert r["violations"] == 0, ("bound violated", m)
        for k in best:
            if r[k] > best[k][0]:
                best[k] = (r[k], m)
        return r

    for _ in range(starts):
        score(random_network(rng))
    for kind in ("chain", "thm4"):
        cur_r, cur = best[kind]
        for _ in range(steps):
            cand = _tweak(rng, cur)
            try:
                r = score(cand)
            except ModelError:  # a tweak the format rejects is skipped, never a crash
                continue
            if r[kind] >= cur_r:
                cur_r, cur = r[kind], cand
    return [
        {
            "kind": k,
            "max_n": max_n,
            "ratio": str(v[0]),
            "ratio_approx": decimal_up(v[0], 6),
            "model": v[1],
        }  # fmt: skip
        for k, v in best.items()
    ]


def main() -> None:
    if "--write" not in sys.argv:
        print(json.dumps(search(24, 30, 40), indent=1))
        return
    found = search(24, 30, 40)
    DATA.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {DATA}: " + ", ".join(f"{w['kind']} {w['ratio_approx']}" for w in found))


if __name__ == "__main__":
    main()
