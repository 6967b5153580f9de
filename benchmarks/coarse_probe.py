"""The coarse float tier (engine/cascade/coarse.py, issue 25): its measurement and arb check.

This was the prototype of the tier (notes/benchmark-rounds.md, "Coarse tier"); its ``--vector``
computation
(one radius per entry) moved into ``exactattn/engine/cascade/coarse.py`` unchanged, and the
check runs it first where its rule turns it on (engine/cascade/chain.py). The per-row variants
measured on the way ("How it got there" in notes/benchmark-rounds.md) are in this file's history
(git log).

A run prints the float64 baseline and the coarse pass (alternated, best of ``--reps``), the
share it settles (``settle_dominated`` as in the check), the centred tier on the rest (as
engine/cascade/chain.py runs it) and, for the A/B, the chain before it (certify_float, then the
centred tier on what that leaves), and the chain without the coarse tier (certify_float on all
words, centred on what it leaves), all CPU seconds in one process; and it compares the coarse
enclosures and read-outs with certify_float's. ``--arb-check``: enclosures and decided
read-outs against arb on random and bundled models (tests/tiers_vs_arb.py's ``assert_meets_arb``).

    python benchmarks/coarse_probe.py [--reps 9] [--model random|random3|ltl|models/dyck2.json]
        [--n 12]
    python benchmarks/coarse_probe.py --arb-check [--arb-random 200]   # ≈ 5 s / 25 s
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn.engine.cascade.coarse import certify_coarse  # noqa: E402
from exactattn.engine.hard import CompiledModel  # noqa: E402


def arb_check(n_random: int = 6, n_bundled: int = 5, limit: int = 300, extra: int = 0) -> None:
    """The probe's enclosures and decided read-outs against arb (tests/tiers_vs_arb.py), word
    by word: random models at n_random, every bundled model with an accept read-out."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiers_vs_arb import assert_meets_arb, random_benchmark_model

    from exactattn import load_model
    from exactattn.engine.cascade.interval import tau_enclosures
    from exactattn.engine.hard import run_hard
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import words_of_length

    cases = [
        (f"random seed {sd}, {bl} blocks", random_benchmark_model(sd, blocks=bl), n)
        for sd, bl, n in (
            (0, 4, n_random),
            (1, 3, n_random),
            (2, 4, n_random - 1),
            (3, 2, n_random),
        )
    ]
    cases += [(p.stem, load_model(p), n_bundled) for p in sorted((ROOT / "models").glob("*.json"))]
    # more random models: seeds 100.., 2–4 blocks, n = 4–5 (every word)
    cases += [
        (
            f"random seed {100 + i}, {2 + i % 3} blocks",
            random_benchmark_model(100 + i, 2 + i % 3),
            4 + i % 2,
        )
        for i in range(extra)
    ]
    for name, m, n in cases:
        cm = CompiledModel(m)
        temps = Temperatures(m, None)
        taus = tau_enclosures(temps.at(n, BASE_PREC))
        hb = run_hard(cm, list(words_of_length(m.alphabet, n))[:limit], n)
        cr = certify_coarse(cm, hb, taus)
        if cr is None:
            print(f"{name}: declined (not an accept read-out)")
            continue
        B = len(hb.words)
        assert_meets_arb(cm, hb, cr, temps, cr.read)
        print(f"{name} n={n}: {B} words meet arb, {int(cr.read.sum())} read-outs decided")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default="random", help="random, random3, ltl or a path")
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--vector", action="store_true", help="(the only variant now; accepted)")
    ap.add_argument("--arb-check", action="store_true", help="only: enclosures against arb")
    ap.add_argument("--arb-random", type=int, default=0, help="--arb-check: more random models")
    args = ap.parse_args()
    if args.arb_check:
        arb_check(extra=args.arb_random)
        return
    from float_baseline import FloatModel

    from exactattn import load_model, model_from_dict
    from exactattn.engine.cascade.batch import take_batch
    from exactattn.engine.cascade.centred import certify_centred
    from exactattn.engine.cascade.chain import second_tier, settle_dominated
    from exactattn.engine.cascade.float64 import certify_float
    from exactattn.engine.cascade.interval import tau_enclosures
    from exactattn.engine.hard import run_hard
    from exactattn.engine.temperature import BASE_PREC, Temperatures
    from exactattn.inputs import batches, words_of_length
    from exactattn.run.shard import BATCH
    from models import random_model

    if args.model == "random":
        m = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
    elif args.model == "random3":  # bench_softfloat.py's second random model
        m = model_from_dict(random_model(d=16, blocks=3, heads=2, seed=1))
    elif args.model == "ltl":  # bench_softfloat.py's deep LTL model (12 layers)
        from bench_softfloat import DEEP_LTL

        from exactattn.constructions.ltl import compile_ltl

        m = model_from_dict(compile_ltl(DEEP_LTL, ("a", "b")))
    else:
        m = load_model(args.model)
    n = args.n
    cm = CompiledModel(m)
    taus = tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    fm = FloatModel(m, n)
    chunks = list(batches(words_of_length(m.alphabet, n), BATCH))
    hbs = [run_hard(cm, c, n) for c in chunks]

    def best(f) -> float:
        ts = []
        for _ in range(args.reps):
            t0 = time.process_time()
            f()
            ts.append(time.process_time() - t0)
        return min(ts)

    # the baseline and the pass alternate, so that a change of the machine's load hits both
    tb, tc = [], []
    for _ in range(args.reps):
        t0 = time.process_time()
        for c in chunks:
            fm.forward(c)
        t1 = time.process_time()
        for hb in hbs:
            certify_coarse(cm, hb, taus)
        tb.append(t1 - t0)
        tc.append(time.process_time() - t1)
    t_base, t_coarse = min(tb), min(tc)
    L = len(m.layers)
    lower = np.zeros(L)
    total = settled = bad = 0
    t_all = t_rest = t_f = t_c = t_c0 = 0.0
    by_f64 = by_c = by_cen = 0
    fin_layer = np.zeros(L)
    for hb in hbs:
        B = len(hb.words)
        cr = certify_coarse(cm, hb, taus)
        if cr is None:
            print("the probe declines this model (not an accept read-out)")
            return
        no = np.zeros(B, dtype=bool)
        ok = settle_dominated(cr, no, cr.underflowed(), list(lower))  # as cascade/chain.py
        total += B
        settled += int(ok.sum())
        fin_layer += np.isfinite(cr.err_hi).sum(axis=0)
        t_all += best(lambda hb=hb: certify_float(cm, hb, taus))
        ff = certify_float(cm, hb, taus)
        # both certified: the enclosures must meet, and decided read-outs agree
        bad += int((cr.err_lo > ff.err_hi).sum() + (ff.err_lo > cr.err_hi).sum())
        both = cr.read & ff.read
        bad += int((cr.accept[both] != ff.accept[both]).sum())
        idx = np.flatnonzero(~ok)
        if idx.size:
            hr = take_batch(hb, idx)
            got = list(lower) if not ok.any() else np.maximum(lower, cr.err_lo[ok].max(axis=0))
            # the chain on the rest, as cascade/chain.py runs it: the centred tier first, the
            # coarse lower ends as thresholds
            t_rest += best(lambda hr=hr: certify_centred(cm, hr, taus))
            fz = certify_centred(cm, hr, taus)
            under = fz.underflowed()
            okz = settle_dominated(fz, fz.settled & ~under, under, list(got), (cr.err_lo,))
            by_cen += int(okz.sum())
            # the chain before (certify_float, then the centred tier on what it leaves)
            t_f += best(lambda hr=hr: certify_float(cm, hr, taus))
            fr = certify_float(cm, hr, taus)
            under = fr.underflowed()
            ok2 = settle_dominated(fr, fr.settled & ~under, under, list(got), (cr.err_lo,))
            by_f64 += int(ok2.sum())
            if not ok2.all():
                t_c += best(
                    lambda hr=hr, fr=fr, ok2=ok2: second_tier(
                        cm, hr, fr, ~ok2, taus, certify_centred
                    )
                )
                fc = second_tier(cm, hr, fr, ~ok2, taus, certify_centred)
                under = fc.underflowed()
                todo = fc.settled & ~under & ~ok2
                ok3 = settle_dominated(fc, ok2 | todo, under, list(got), (cr.err_lo, fr.err_lo))
                by_c += int(ok3.sum()) - int(ok2.sum())
        # today's chain without the coarse pass, for the A/B: certify_float on all, centred
        under = ff.underflowed()
        ok0 = settle_dominated(ff, ff.settled & ~under, under, list(lower))
        if not ok0.all():
            t_c0 += best(
                lambda hb=hb, ff=ff, ok0=ok0: second_tier(cm, hb, ff, ~ok0, taus, certify_centred)
            )
        good = ff.settled
        if good.any():
            lower = np.maximum(lower, ff.err_lo[good].max(axis=0))
    print(f"model {args.model} n={n}, {total} words; the coarse tier (engine/coarse.py)")
    print(
        f"float64 baseline {t_base:.3f} s; coarse pass {t_coarse:.3f} s ({t_coarse / t_base:.2f}x)"
    )
    print(
        f"certify_float on all words {t_all:.3f} s ({t_all / t_base:.2f}x); the centred tier "
        f"on the words the coarse pass leaves {t_rest:.3f} s"
    )
    print(f"settled by the coarse pass: {settled} of {total} ({settled / total:.2%})")
    print(
        "words with a finite coarse upper end, per layer:",
        " ".join(f"{f / total:.0%}" for f in fin_layer),
    )
    left = total - settled
    print(
        f"of the rest ({left}): the centred tier settles {by_cen}; left to double-double/arb: "
        f"{left - by_cen}"
    )
    print(
        f"(before: certify_float settled {by_f64} ({t_f:.3f} s), the centred tier {by_c} more "
        f"({t_c:.3f} s); left: {left - by_f64 - by_c})"
    )
    print(
        f"chain (coarse + centred on the rest, cascade/chain.py): "
        f"{(t_coarse + t_rest) / t_base:.2f}x float64; before (coarse + certify_float + "
        f"centred): {(t_coarse + t_f + t_c) / t_base:.2f}x; without the coarse tier "
        f"(certify_float on all, centred on what it leaves: {t_c0:.3f} s): "
        f"{(t_all + t_c0) / t_base:.2f}x"
    )
    print(f"enclosures not meeting certify_float's / read-outs disagreeing: {bad}")


if __name__ == "__main__":
    main()
