"""How sensitive the random benchmark model's soft meaning is to a relative change of τ
(issue 25, notes/benchmark-rounds.md "The random model's last third").

For the words whose decisions the float64 tier leaves open (read-out or ε ≤ 1), the soft
meaning is computed in arb (certified, 192 bits) at τ and at τ·(1 ± η) for η = 2^-53 (one
rounding of τ = 1/n to binary64) and η = 2^-106 (to double-double): the certified read-out
value y_soft − t, the layer errors max|δ|, and how far each moves relative to itself. A
computation that rounds τ (or any quantity of the same conditioning) to p bits can at best
return the exact answer for data perturbed by 2^-p (backward stability), so a read-out whose
sign flips, or an error that moves by more than the 1e-6 reporting accuracy, under η = 2^-p is
out of reach of every backward-stable p-bit computation for that word.

    python benchmarks/conditioning_random.py [--n 12] [--limit 0]
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from flint import arb, ctx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn import model_from_dict  # noqa: E402
from exactattn.engine.cascade.float64 import certify_float  # noqa: E402
from exactattn.engine.cascade.interval import tau_enclosures  # noqa: E402
from exactattn.engine.hard import CompiledModel, read_output, run_hard  # noqa: E402
from exactattn.engine.measure import delta_bounds  # noqa: E402
from exactattn.engine.soft import WeightCache, run_soft  # noqa: E402
from exactattn.engine.temperature import BASE_PREC, Temperatures  # noqa: E402
from exactattn.inputs import batches, words_of_length  # noqa: E402
from models import random_model  # noqa: E402

PREC = 192


def _ratio(a: arb, b: arb) -> float:
    """|a − b| / |b| as a float (midpoints; the balls are ≈ 2^-150 relative here)."""
    bm = abs(float(b.mid()))
    return abs(float((a - b).mid())) / bm if bm else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--limit", type=int, default=0, help="at most this many words (0: all)")
    args = ap.parse_args()
    model = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
    n = args.n
    cm = CompiledModel(model)
    temps = Temperatures(model, None)
    wc = WeightCache(cm)
    taus = temps.at(n, PREC)
    ftaus = tau_enclosures(temps.at(n, BASE_PREC))
    slot = model.accept_slot(n)
    w = model.output.weight
    t = model.output.threshold
    L = len(model.layers)
    rows = []
    for chunk in batches(words_of_length(model.alphabet, n), 2048):
        hb = run_hard(cm, chunk, n)
        fb = certify_float(cm, hb, ftaus)
        left = np.flatnonzero(~fb.decided)  # a decision float64 leaves open
        vals = read_output(model, hb.activations[-1], n).values
        for b in left.tolist():
            c = Fraction(int(vals.num[b]), vals.den) - t
            got = {}
            for eta in (0, 53, 106):
                with ctx.workprec(PREC):
                    f = arb(1) if eta == 0 else None
                    res = []
                    for sgn in (1,) if eta == 0 else (1, -1):
                        f = arb(1) + sgn * arb(2) ** -eta if eta else arb(1)
                        tt = [None if r is None else [x * f for x in r] for r in taus]
                        st = run_soft(cm, hb, b, tt, wc)
                        dy = sum(
                            (arb(wk.numerator) / wk.denominator * st.deltas[-1][slot, k])
                            for k, wk in enumerate(w)
                            if wk
                        )
                        y = arb(c.numerator) / c.denominator + dy
                        errs = [delta_bounds(d)[1] for d in st.deltas]
                        res.append((y, errs))
                    got[eta] = res
            y0, e0 = got[0][0]
            row = {"y": float(y0.mid())}
            for eta in (53, 106):
                ys = [y for y, _ in got[eta]]
                row[f"flip{eta}"] = any((y > 0) != (y0 > 0) for y in ys)
                row[f"dy{eta}"] = max(_ratio(y, y0) for y in ys)
                row[f"de{eta}"] = [max(_ratio(e[k], e0[k]) for _, e in got[eta]) for k in range(L)]
            rows.append(row)
            if args.limit and len(rows) >= args.limit:
                break
        if args.limit and len(rows) >= args.limit:
            break
    N = len(rows)
    print(
        f"random d16 4×(attn 2 heads + ffn) seed 0, n = {n}: "
        f"{N} words with a decision float64 leaves open"
    )
    print(f"arb at {PREC} bits, τ·(1 ± η)")
    print()
    print(
        f"{'η':<8}{'read-out flips':>16}{'|Δy|/|y| median':>18}{'max':>10}   "
        "layers with a relative error change > 1e-6 (words)"
    )
    for eta in (53, 106):
        flips = sum(r[f"flip{eta}"] for r in rows)
        dys = np.array([r[f"dy{eta}"] for r in rows])
        over = [sum(r[f"de{eta}"][k] > 1e-6 for r in rows) for k in range(L)]
        print(
            f"2^-{eta:<5}{flips:>16}{np.median(dys):>18.3g}{dys.max():>10.3g}   "
            + " ".join(f"L{k}:{v}" for k, v in enumerate(over))
        )
    print()
    print("median relative change of the layer errors, per layer:")
    for eta in (53, 106):
        med = [np.median([r[f"de{eta}"][k] for r in rows]) for k in range(L)]
        print(f"  η = 2^-{eta}: " + " ".join(f"{m:.2g}" for m in med))


if __name__ == "__main__":
    main()
