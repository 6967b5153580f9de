"""Engine vs a deliberately naive evaluator, in one process; prints the ratios.

Naive baseline: per-scalar ``fractions.Fraction`` for the hard meaning and per-scalar
``mpmath`` (at the engine's base precision, not certified) for the soft meaning, one input
at a time — the straightforward way to write it (the test suite's reference evaluator).
The naive side is timed on a sample of inputs per length and scaled to the full count.

    python benchmarks/bench_engine.py [--max-n 10] [--sample 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mpmath  # noqa: E402
import reference_evaluator as ref  # noqa: E402

from exactattn import model_from_dict, run_check  # noqa: E402
from exactattn.engine.temperature import BASE_PREC  # noqa: E402
from models import random_model  # noqa: E402


def naive_pass(model: ref.Model, tokens: list[str], soft: bool) -> None:
    """One meaning of one input, scalar by scalar (hard: Fraction, soft: mpmath)."""
    n = len(tokens)
    seq = model.sequence(tokens)
    positions = [p for p, _ in seq]
    xs = model.embed(tokens)
    if soft:
        xs = [[mpmath.mpf(v.numerator) / v.denominator for v in row] for row in xs]
    for layer in model.layers:
        if layer.kind == "attention":
            new = [list(r) for r in xs]
            for head in layer.heads:
                s = ref.scores(head, xs)
                v = ref.values(head, xs)
                tau = model.tau(head, n)
                for a, i in enumerate(positions):
                    vis = ref.visible(head.mask, i, positions)
                    if not vis:
                        continue
                    w = (
                        ref._soft_weights(s[a], vis, tau)
                        if soft
                        else ref.hard_weights(head, s[a], vis)
                    )
                    mix = ref._soft_mix(w, v)
                    add = mix if head.output is None else ref._matvec(head.output, mix)
                    new[a] = ref._vadd(new[a], add)
            xs = new
        else:
            xs = [ref._ffn(layer, x) for x in xs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-n", type=int, default=10)
    ap.add_argument("--sample", type=int, default=3, help="naive inputs timed per length")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    mpmath.mp.prec = BASE_PREC
    d = random_model(d=16, blocks=4, heads=2, seed=args.seed)
    model = model_from_dict(d)
    rmodel = ref.Model(ref.load_text(json.dumps(d)))
    ns = range(1, args.max_n + 1)
    total_inputs = sum(2**n for n in ns)
    print(
        f"model: width 16, 4 blocks (attention with 2 heads + FFN), alphabet {{a, b}}, "
        f"n = 1..{args.max_n}: {total_inputs} inputs"
    )

    t0 = time.perf_counter()
    run_check(model, max_n=args.max_n, hard_only=True)
    engine_hard = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_check(model, max_n=args.max_n)
    engine_both = time.perf_counter() - t0
    engine_soft = max(engine_both - engine_hard, 1e-9)

    naive_hard = naive_soft = 0.0
    for n in ns:
        words = list(itertools.islice(itertools.product("ab", repeat=n), args.sample))
        for soft in (False, True):
            t0 = time.perf_counter()
            for w in words:
                naive_pass(rmodel, list(w), soft)
            per = (time.perf_counter() - t0) / len(words)
            if soft:
                naive_soft += per * 2**n
            else:
                naive_hard += per * 2**n
    print(f"{'path':<6} {'engine (s)':>12} {'naive (s, scaled)':>19} {'ratio':>9}")
    for name, e, nv in (("hard", engine_hard, naive_hard), ("soft", engine_soft, naive_soft)):
        print(f"{name:<6} {e:>12.3f} {nv:>19.1f} {nv / e:>8.0f}×")
    print(
        f"(engine soft includes certification to 1e-6 relative; naive soft is uncertified "
        f"mpmath at {BASE_PREC} bits; Fraction baseline: {Fraction.__module__})"
    )


if __name__ == "__main__":
    main()
