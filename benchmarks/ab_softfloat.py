"""A/B of two versions of the certified float path in one process, alternating on the same batch.

``bench_softfloat.py`` times each program once per run, and on a shared machine single runs
of unchanged code move by 10–30% on the small tracr programs. This imports an old copy of
the cascade (``exactattn/engine/cascade`` of another revision, benchmarks/cascade_versions.py)
beside this tree's, and for each program times the float64 pass, the old and the new certified path
(``certify_float`` plus the double-double tier on what float64 leaves, as the benchmark does)
on the same words — all words at max_seq_len for tracr programs, the first 2,048 for Dyck-2 at
n = 8 and the 12-layer LTL model at n = 12 — alternating, best of K blocks of R calls (CPU
time of this process).

    git archive main exactattn/engine/cascade | tar -x -C /tmp/old
    python benchmarks/ab_softfloat.py --old /tmp/old/exactattn/engine/cascade [--k 9] [--r 30]
        [lib_shift_by dyck2 ltl …]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_softfloat import DEEP_LTL, TRACR, TRACR_LIB  # noqa: E402
from cascade_versions import current, load  # noqa: E402
from float_baseline import FloatModel  # noqa: E402

from exactattn import load_model, model_from_dict  # noqa: E402
from exactattn.constructions.ltl import compile_ltl  # noqa: E402
from exactattn.engine.hard import CompiledModel, read_output, run_hard  # noqa: E402
from exactattn.engine.temperature import BASE_PREC, Temperatures  # noqa: E402
from exactattn.importers.tracr import import_tracr  # noqa: E402
from exactattn.inputs import words_of_length  # noqa: E402


def _model(name: str):
    if name == "dyck2":
        return load_model(ROOT / "models" / "dyck2.json"), 8
    if name == "ltl":
        return model_from_dict(compile_ltl(DEEP_LTL, ("a", "b"))), 12
    raw = import_tracr(TRACR / f"{name}.npz", TRACR / f"{name}.json")
    return model_from_dict(raw), int(
        json.loads((TRACR / f"{name}.json").read_text())["max_seq_len"]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--old", type=Path, required=True, help="an old copy of exactattn/engine/cascade"
    )
    ap.add_argument("--k", type=int, default=9, help="blocks (the best is kept)")
    ap.add_argument("--r", type=int, default=30, help="calls per block")
    ap.add_argument("names", nargs="*", help="tracr programs, dyck2, ltl (default: tracr)")
    args = ap.parse_args()
    sf_old, sf_new = load(args.old), current()
    for name in args.names or TRACR_LIB:
        model, n = _model(name)
        cm = CompiledModel(model)
        temps = Temperatures(model, None)
        taus = sf_new.tau_enclosures(temps.at(n, BASE_PREC))
        dtaus = sf_new.tau_enclosures(temps.at(n, sf_new.DD_PREC))
        words = list(itertools.islice(words_of_length(model.alphabet, n), 2048))
        hb = run_hard(cm, words, n)
        read_output(model, hb.activations[-1], n)
        fm = FloatModel(model, n)
        k, r = (args.k, args.r) if len(words) <= 256 else (max(2, args.k // 2), 3)

        def cert(sf, hb=hb, cm=cm, taus=taus, dtaus=dtaus):
            fb = sf.certify_float(cm, hb, taus)
            if not fb.settled.all():
                sf.second_tier(cm, hb, fb, ~fb.settled, dtaus)

        fs = {
            "f64": lambda fm=fm, words=words: fm.forward(words),
            "old": lambda: cert(sf_old),
            "new": lambda: cert(sf_new),
        }
        best = dict.fromkeys(fs, float("inf"))
        for f in fs.values():
            f()
        for _ in range(k):
            for key, f in fs.items():
                t0 = time.process_time()
                for _ in range(r):
                    f()
                best[key] = min(best[key], (time.process_time() - t0) / r)
        b = {key: v * 1e6 for key, v in best.items()}
        print(
            f"{name:<22} {len(words):>5} words  f64 {b['f64']:9.1f} µs  "
            f"old {b['old']:9.1f} µs ({b['old'] / b['f64']:.2f}×)  "
            f"new {b['new']:9.1f} µs ({b['new'] / b['f64']:.2f}×)  "
            f"new/old {b['new'] / b['old']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
