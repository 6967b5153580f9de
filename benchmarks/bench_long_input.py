"""Time and peak memory of ONE long input: exact hard meaning (streaming) + one dtype run,
and optionally the certified soft pass (engine/longsoft.py).

    python benchmarks/bench_long_input.py                 # n = 2^12, 2^14, 2^16, float32
    python benchmarks/bench_long_input.py --pow 12 --pow 14 --dtype float64
    python benchmarks/bench_long_input.py --pow 10 --pow 12 --soft   # + certified soft pass
    python benchmarks/bench_long_input.py --pow 12 --soft-only       # hard + certified soft

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


def one(n: int, dtype: str, model_path: str, soft: bool, dtype_run: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from exactattn import load_model
    from exactattn.engine.hard import CompiledModel
    from exactattn.engine.longinput import hard_output, run_hard_long
    from exactattn.inputs.families import family_word
    from exactattn.run.precision import DtypeModel, dtype_decisions, embed_dtype, run_dtype

    model = load_model(model_path)
    cm = CompiledModel(model)
    w = family_word(model, "nested", n, 0)
    t0 = time.perf_counter()
    lh = run_hard_long(cm, w)
    hard, _ = hard_output(model, lh)
    t1 = time.perf_counter()
    out = None
    if dtype_run:
        dm = DtypeModel(cm, dtype)
        run = run_dtype(dm, embed_dtype(dm, lh.acts[0]), n)
        out = dtype_decisions(dm, run.acts[-1], n)[0]
    t2 = time.perf_counter()
    res = {
        "n": n,
        "dtype": dtype,
        "exact_hard_s": round(t1 - t0, 2),
        "dtype_s": round(t2 - t1, 2) if dtype_run else None,
        "hard": hard,
        "dtype_output": out,
    }
    if soft:
        from exactattn.engine.longsoft import certify_long

        ls = certify_long(cm, lh)
        res["soft_s"] = round(time.perf_counter() - t2, 2)
        res["soft_output"] = ls.output if ls.decided else "undecided"
        res["soft_error_upper"] = ls.layer_error[-1][1]
    res["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pow", type=int, action="append", help="log2 n (repeatable)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--model", default=str(ROOT / "models" / "dyck2.json"))
    ap.add_argument("--soft", action="store_true", help="also time the certified soft pass")
    ap.add_argument("--soft-only", action="store_true", help="hard + certified soft, no dtype")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    soft = a.soft or a.soft_only
    if a.child is not None:
        print(json.dumps(one(a.child, a.dtype, a.model, soft, not a.soft_only)))
        return
    pows = a.pow or [12, 14, 16]
    head = f"{'n':>7} {'exact hard (s)':>15} {a.dtype + ' (s)':>13}"
    if soft:
        head += f" {'cert. soft (s)':>15} {'max|soft-hard| <=':>18}"
    print(head + f" {'peak RSS (MiB)':>15}")
    for p in pows:
        cmd = [sys.executable, __file__, "--child", str(2**p), "--dtype", a.dtype]
        cmd += ["--model", a.model] + (["--soft"] if a.soft else [])
        cmd += ["--soft-only"] if a.soft_only else []
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        d = json.loads(r.stdout.strip().splitlines()[-1])
        line = f"{d['n']:>7} {d['exact_hard_s']:>15} {str(d['dtype_s']):>13}"
        if soft:
            line += f" {d['soft_s']:>15} {d['soft_error_upper']:>18.4g}"
        print(line + f" {d['peak_rss_mib']:>15}", flush=True)


if __name__ == "__main__":
    main()
