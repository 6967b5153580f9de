"""Two versions of the float64 tier in one process, alternated on the same hard batches.

On a shared machine single benchmark runs move by ±20–30%; alternating an old copy of the
cascade (``exactattn/engine/cascade`` of another revision, benchmarks/cascade_versions.py) and
the current one in one process, on the same words, next to the uncertified float64 pass, and
keeping the best of several rounds is the steadier measure (notes/benchmark-rounds.md, "Cheaper
float64 tier").

    git archive main exactattn/engine/cascade | tar -x -C /tmp/old
    python benchmarks/ab_softfloat_random.py /tmp/old/exactattn/engine/cascade \
        [--reps 7] [--n 12] [--batch 2048]

Both versions run in the same process, so they share process-wide settings (the allocator
tuning ``EXACTATTN_MALLOC``); the rows measure the code, not the setting.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cascade_versions import current, load  # noqa: E402
from float_baseline import FloatModel  # noqa: E402

from exactattn import model_from_dict  # noqa: E402
from exactattn.engine.hard import CompiledModel, run_hard  # noqa: E402
from exactattn.engine.temperature import BASE_PREC, Temperatures  # noqa: E402
from exactattn.inputs import batches, words_of_length  # noqa: E402
from models import random_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("old", type=Path, help="an old copy of exactattn/engine/cascade")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--batch", type=int, default=2048)
    args = ap.parse_args()
    old, new = load(args.old), current()

    m = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
    cm = CompiledModel(m)
    n = args.n
    taus = new.tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    hbs = [run_hard(cm, ch, n) for ch in batches(words_of_length(m.alphabet, n), args.batch)]
    fm = FloatModel(m, n)

    def base() -> float:
        t0 = time.process_time()
        for ch in batches(words_of_length(m.alphabet, n), args.batch):
            fm.forward(ch)
        return time.process_time() - t0

    def tier(mod: object) -> float:
        t0 = time.process_time()
        for hb in hbs:
            mod.certify_float(cm, hb, taus)  # type: ignore[attr-defined]
        return time.process_time() - t0

    got: dict[str, list[float]] = {"float64": [], "old": [], "new": []}
    for _ in range(args.reps):
        got["float64"].append(base())
        got["old"].append(tier(old))
        got["new"].append(tier(new))
    b = {k: min(v) for k, v in got.items()}
    print(
        f"random d16 4×(2 heads + ffn), n = {n}, {sum(len(h.words) for h in hbs)} words, "
        f"best of {args.reps} (CPU s): float64 {b['float64']:.3f}  old {b['old']:.3f}  "
        f"new {b['new']:.3f}  new/old {b['new'] / b['old']:.3f}  "
        f"old/float64 {b['old'] / b['float64']:.2f}×  new/float64 {b['new'] / b['float64']:.2f}×"
    )


if __name__ == "__main__":
    main()
