"""Time and peak memory of ONE long input: exact hard meaning (streaming) + one dtype run.

    python benchmarks/bench_long_input.py                 # n = 2^12, 2^14, 2^16, float32
    python benchmarks/bench_long_input.py --pow 12 --pow 14 --dtype float64

Each length runs in its own subprocess so that its peak resident memory (ru_maxrss) is its
own. The input is the Dyck-2 ``nested`` family word (deepest nesting), model's own τ.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(n: int, dtype: str, model_path: str) -> dict:
    sys.path.insert(0, str(ROOT))
    from exactattn import load_model
    from exactattn.engine.hard import CompiledModel
    from exactattn.engine.longinput import hard_output, run_hard_long
    from exactattn.families import family_word
    from exactattn.precision import DtypeModel, dtype_decisions, embed_dtype, run_dtype

    model = load_model(model_path)
    cm = CompiledModel(model)
    w = family_word(model, "nested", n, 0)
    t0 = time.perf_counter()
    lh = run_hard_long(cm, w)
    hard, _ = hard_output(model, lh)
    t1 = time.perf_counter()
    dm = DtypeModel(cm, dtype)
    run = run_dtype(dm, embed_dtype(dm, lh.acts[0]), n)
    out = dtype_decisions(dm, run.acts[-1], n)[0]
    t2 = time.perf_counter()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "n": n,
        "dtype": dtype,
        "exact_hard_s": round(t1 - t0, 2),
        "dtype_s": round(t2 - t1, 2),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "hard": hard,
        "dtype_output": out,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pow", type=int, action="append", help="log2 n (repeatable)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--model", default=str(ROOT / "models" / "dyck2.json"))
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(one(a.child, a.dtype, a.model)))
        return
    pows = a.pow or [12, 14, 16]
    print(f"{'n':>7} {'exact hard (s)':>15} {a.dtype + ' (s)':>13} {'peak RSS (MiB)':>15}")
    for p in pows:
        r = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(2**p),
                "--dtype",
                a.dtype,
                "--model",
                a.model,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        d = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{d['n']:>7} {d['exact_hard_s']:>15} {d['dtype_s']:>13} {d['peak_rss_mib']:>15}")


if __name__ == "__main__":
    main()
