"""Certified float path vs an uncertified float64 forward pass; prints the ratio (goal ≤ 3×).

For each benchmark (Dyck-2 at n = 8 by default, a random model, a deep compiled LTL model with
12 layers, and every program of tracr's library from tests/data/tracr_lib at its max_seq_len,
repeated until 4,096 inputs were timed), in one process:

* baseline: benchmarks/float_baseline.py, plain float64 numpy softmax, all inputs;
* certified: exactattn.engine.hard.run_hard (and the exact read-out, which the check's
  LengthAccumulator.add_hard reads and certify_float then reuses) + the coarse tier
  (exactattn.engine.cascade.coarse, where its rule turns it on: all inputs, then settle_dominated)
  + exactattn.engine.cascade.float64.certify_float on the inputs it leaves (all inputs without it;
  where the coarse tier ran, the centred tier instead), in batches of the check's size, then
  the centred float64 tier and the double-double tier (second_tier) on what the tiers before
  them left, as exactattn.engine.cascade.chain chains them (the
  fractions the check settles without arb are printed per tier — tight words and loose ones
  below a reported lower end; the rest goes to arb);
* arb: the existing per-word path (certify.certify_word) on a sample, scaled to all inputs.

Times are CPU seconds (``time.process_time``), so the ratios stay meaningful on a shared
machine; each time is the median of ``--reps`` runs (3 by default: on an idle machine single
runs of the small models moved by up to 1.6×, e.g. a tracr program at 2.5×, 4.2× and 2.6×).

    python benchmarks/bench_softfloat.py [--n 8] [--random-n 12] [--sample 200] [--batch 2048]
        [--only dyck2,random,random3,ltl,tracr] [--reps 3]

"by coarse" is the share of inputs the coarse tier settles (engine/cascade/coarse.py; "—": its
rule keeps it off; EXACTATTN_COARSE=0 turns it off), "by f64" the share the float64 filter settles
of the rest, "by c" the share the centred float64 tier (engine/cascade/centred.py;
EXACTATTN_CENTRED=0 turns it off) settles of the rest, "by dd" the share the double-double tier
(engine/cascade/dd.py; EXACTATTN_DD=0 turns it off) settles of
what is left then; the rest goes to arb ("left (est.)": its estimated time; "arb (est.)": arb
for every input).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from float_baseline import FloatModel  # noqa: E402

from exactattn import load_model, model_from_dict  # noqa: E402
from exactattn.constructions.ltl import compile_ltl  # noqa: E402
from exactattn.engine.cascade.batch import take_batch  # noqa: E402
from exactattn.engine.cascade.centred import certify_centred  # noqa: E402
from exactattn.engine.cascade.chain import second_tier, settle_dominated  # noqa: E402
from exactattn.engine.cascade.coarse import certify_coarse, coarse_pays  # noqa: E402
from exactattn.engine.cascade.dd import DD_PREC  # noqa: E402
from exactattn.engine.cascade.float64 import certify_float  # noqa: E402
from exactattn.engine.cascade.interval import tau_enclosures  # noqa: E402
from exactattn.engine.cascade.policy import current as current_policy  # noqa: E402
from exactattn.engine.certify import certify_word  # noqa: E402
from exactattn.engine.hard import CompiledModel, read_output, run_hard  # noqa: E402
from exactattn.engine.measure import LengthAccumulator  # noqa: E402
from exactattn.engine.soft import WeightCache  # noqa: E402
from exactattn.engine.temperature import BASE_PREC, Temperatures  # noqa: E402
from exactattn.importers.tracr import import_tracr  # noqa: E402
from exactattn.inputs import batches, words_of_length  # noqa: E402
from exactattn.run.check import BATCH  # noqa: E402
from models import random_model  # noqa: E402

TRACR = ROOT / "tests" / "data" / "tracr_lib"
TRACR_LIB = sorted(p.stem for p in TRACR.glob("lib_*.json"))
DEEP_LTL = "Y (a S (b & Y (a U (b S Y a))))"  # 6 attention + 6 feed-forward layers


def median_row(runs: list[dict]) -> dict:
    """One row from repeated runs: every time the median over the runs (the shares and
    counts do not depend on the run: the tiers are deterministic)."""
    out = dict(runs[0])
    for key in ("base", "hard", "flt", "co", "ct", "dd", "arb"):
        out[key] = statistics.median(r[key] for r in runs)
    out["reps"] = len(runs)
    return out


def bench_once(name: str, model, n: int, batch: int, sample: int, min_inputs: int = 0) -> dict:
    cm = CompiledModel(model)
    total = len(model.alphabet) ** n
    reps = max(1, -(-min_inputs // total))  # tiny programs: repeat so the times mean something
    fm = FloatModel(model, n)
    temps = Temperatures(model, None)
    taus = tau_enclosures(temps.at(n, BASE_PREC))
    dtaus = tau_enclosures(temps.at(n, DD_PREC))

    t0 = time.process_time()
    for _ in range(reps):
        for chunk in batches(words_of_length(model.alphabet, n), batch):
            fm.forward(chunk)
    base = (time.process_time() - t0) / reps

    hard = flt = 0.0
    settled = 0
    spent = {"co": 0.0, "c": 0.0, "dd": 0.0}  # CPU time of the coarse and the later tiers
    won = {"co": 0, "c": 0, "dd": 0}  # words each of them settled
    lower = [0.0] * len(model.layers)  # reported lower error ends so far, as in the check
    policy = current_policy()  # the check's switches (EXACTATTN_COARSE, _CENTRED, _DD)
    coarse_on = policy.coarse and coarse_pays(cm, n)  # the check's rule (cascade/chain.py)
    for chunk in batches(words_of_length(model.alphabet, n), batch):
        t0 = time.process_time()
        for _ in range(reps):
            hb = run_hard(cm, chunk, n)
            read_output(model, hb.activations[-1], n)  # the check's add_hard reads it here
        t1 = time.process_time()
        hard += (t1 - t0) / reps
        # the coarse tier on every word, then the rest as a sub-batch (cascade/chain.py)
        known: list[np.ndarray] = []
        if coarse_on:
            for _ in range(reps):
                fc = certify_coarse(cm, hb, taus)
            spent["co"] += (time.process_time() - t1) / reps
            assert fc is not None
            none = np.zeros(len(chunk), dtype=bool)
            okc = settle_dominated(fc, none, fc.underflowed(), lower)
            won["co"] += int(okc.sum())
            known.append(fc.err_lo)
            if okc.any():  # their lower ends enter the record
                lower = np.maximum(lower, fc.err_lo[okc].max(axis=0))
            if okc.all():
                continue
            if okc.any():
                hb = take_batch(hb, np.flatnonzero(~okc))
        # after the coarse tier the centred tier comes first, certify_float not at all
        # (cascade/chain.py, _float_chain): its time and share count as the centred tier's
        centred_first = coarse_on and policy.centred
        first = certify_centred if centred_first else certify_float
        t1 = time.process_time()
        for _ in range(reps):
            fb = first(cm, hb, taus)
        t2 = time.process_time()
        # what the check settles: tight words, and loose ones below a reported lower end
        under = fb.underflowed()
        ok = settle_dominated(fb, fb.settled & ~under, under, lower, tuple(known))
        if centred_first:
            spent["c"] += (t2 - t1) / reps
            won["c"] += int(ok.sum())
        else:
            flt += (t2 - t1) / reps
            settled += int(ok.sum())
        # the centred tier (unless it came first), then the double-double tier, each on what
        # the tiers before it left (as in cascade/chain.py); each tier's time and share is timed
        # on its own
        for on, tier_taus, tier, which in (
            (policy.centred and not centred_first, taus, certify_centred, "c"),
            (policy.dd, dtaus, None, "dd"),
        ):
            if not on or ok.all():
                continue
            t3 = time.process_time()
            for _ in range(reps):
                fb2 = second_tier(cm, hb, fb, ~ok, tier_taus, tier)
            spent[which] += (time.process_time() - t3) / reps
            known.append(fb.err_lo)
            under = fb2.underflowed()
            todo = fb2.settled & ~under & ~ok
            ok2 = settle_dominated(fb2, ok | todo, under, lower, tuple(known))
            won[which] += int(ok2.sum()) - int(ok.sum())
            fb, ok = fb2, ok2
        good = fb.settled & ~under
        if good.any():
            lower = np.maximum(lower, fb.err_lo[good].max(axis=0, initial=0.0))

    words = list(itertools.islice(words_of_length(model.alphabet, n), min(sample, total)))
    hb = run_hard(cm, words, n)
    acc = LengthAccumulator(model, n, None, len(model.layers))
    acc.add_hard(hb)
    wc = WeightCache(cm)
    t0 = time.process_time()
    for b in range(len(words)):
        certify_word(cm, hb, b, acc, temps, wc)
    arb_s = (time.process_time() - t0) / len(words) * total
    return dict(
        name=name,
        n=n,
        inputs=total,
        base=base,
        hard=hard,
        flt=flt,
        coarse_on=coarse_on,
        settled_co=won["co"] / total,
        co=spent["co"],
        settled=settled / total,
        settled_ct=won["c"] / total,
        settled_dd=won["dd"] / total,
        ct=spent["c"],
        dd=spent["dd"],
        arb=arb_s,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=8, help="Dyck-2 length")
    ap.add_argument("--random-n", type=int, default=12, help="random-model length")
    ap.add_argument("--sample", type=int, default=200, help="arb-path words timed")
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--ltl-n", type=int, default=12, help="deep LTL model length")
    ap.add_argument(
        "--only", default="dyck2,random,random3,ltl,tracr", help="comma-separated groups"
    )
    ap.add_argument("--reps", type=int, default=3, help="runs per model; each time is the median")
    args = ap.parse_args()
    only = set(args.only.split(","))
    rows = []

    def bench(*a, **k) -> dict:  # noqa: ANN002, ANN003  (bench_once's arguments)
        return median_row([bench_once(*a, **k) for _ in range(max(1, args.reps))])

    if "dyck2" in only:
        dyck = load_model(ROOT / "models" / "dyck2.json")
        rows.append(bench("dyck2", dyck, args.n, args.batch, args.sample))
    if "random" in only:
        rnd = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
        rows.append(
            bench("random d16 4×(attn 2 heads + ffn)", rnd, args.random_n, args.batch, args.sample)
        )
    if "random3" in only:  # shallower: what double-double settles (float64 settles ~3%)
        rnd3 = model_from_dict(random_model(d=16, blocks=3, heads=2, seed=1))
        rows.append(bench("random d16 3×(…) seed 1", rnd3, args.random_n, args.batch, args.sample))
    if "ltl" in only:
        ltl = model_from_dict(compile_ltl(DEEP_LTL, ("a", "b")))
        rows.append(bench(f"LTL {DEEP_LTL} (12 layers)", ltl, args.ltl_n, args.batch, args.sample))
    if "tracr" in only:
        for name in TRACR_LIB:
            raw = import_tracr(TRACR / f"{name}.npz", TRACR / f"{name}.json")
            n = int(json.loads((TRACR / f"{name}.json").read_text())["max_seq_len"])
            m = model_from_dict(raw)
            rows.append(bench(f"tracr {name}", m, n, args.batch, args.sample, min_inputs=4096))
    print(
        f"{'model':<44} {'n':>3} {'inputs':>8} {'float64':>8} {'hard':>7} {'coarse':>7} "
        f"{'f64 tier':>8} {'c tier':>7} {'dd tier':>7} {'by coarse':>9} {'by f64':>7} {'by c':>7} "
        f"{'by dd':>7} {'arb left':>8} "
        f"{'arb (est.)':>10} "
        f"{'left (est.)':>11} {'cert+hard/f64':>13} {'cert/f64':>9} {'µs/in':>6}"
    )
    for r in rows:
        cert = r["co"] + r["flt"] + r["ct"] + r["dd"]
        both = r["hard"] + cert
        left = 1 - r["settled_co"] - r["settled"] - r["settled_ct"] - r["settled_dd"]
        by_co = f"{r['settled_co']:>9.2%}" if r["coarse_on"] else f"{'—':>9}"
        print(
            f"{r['name']:<44} {r['n']:>3} {r['inputs']:>8,} {r['base']:>7.3f}s {r['hard']:>6.3f}s "
            f"{r['co']:>6.3f}s {r['flt']:>7.3f}s {r['ct']:>6.3f}s {r['dd']:>6.3f}s {by_co} "
            f"{r['settled']:>7.2%} "
            f"{r['settled_ct']:>7.2%} {r['settled_dd']:>7.2%} "
            f"{left:>8.2%} {r['arb']:>9.1f}s {r['arb'] * left:>10.1f}s "
            f"{both / r['base']:>12.1f}× {cert / r['base']:>8.1f}× "
            f"{both / r['inputs'] * 1e6:>6.1f}"
        )
    print(
        "float64: uncertified numpy softmax forward pass (benchmarks/float_baseline.py); "
        "hard: exact run_hard; coarse: the coarse tier (engine/coarse.py) on all inputs where its "
        "rule turns it on; f64 tier: certify_float (certified δ, all layers, read-out) on the "
        "inputs the coarse tier left; "
        "c tier: the centred float64 tier (second_tier with certify_centred) on the words "
        "float64 left (where the coarse tier ran: on the words it left, no f64 tier); "
        "dd tier: the double-double tier on the words both left; "
        "by coarse / by f64 / by c / by dd: share of inputs settled without arb by each tier; "
        "arb left: the rest; "
        "arb (est.): per-word certify_word on a sample, scaled to all inputs; left (est.): "
        "scaled to the words left; cert: all four float tiers; µs/in: hard + cert. per input.\n"
        "All times are CPU seconds of this process (time.process_time: the machine is shared, "
        "so wall time would measure the other tenants; numpy/BLAS threads are included), each "
        f"the median of {max(1, args.reps)} runs."
    )


if __name__ == "__main__":
    main()
