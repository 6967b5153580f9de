"""Time and peak memory of ONE long input: exact hard meaning (streaming) + dtype runs, and
optionally the certified soft pass (engine/longsoft.py); with ``--compare``, the candidate
paths (engine/sparsehead.py, the default from n = 512) against the dense blocks they replace,
in the same process, as ratios.

    python benchmarks/bench_long_input.py                 # n = 2^12, 2^14, 2^16, float32
    python benchmarks/bench_long_input.py --pow 12 --pow 14 --dtype float64
    python benchmarks/bench_long_input.py --pow 10 --pow 12 --soft   # + certified soft pass
    python benchmarks/bench_long_input.py --pow 12 --soft-only       # hard + certified soft
    python benchmarks/bench_long_input.py --model models/rasp_dyck2.json --pow 12 --pow 13 \\
        --compare --dtype float32 --dtype bfloat16 --dtype float64   # dense / candidate

Each length runs in its own subprocess so that its peak resident memory (ru_maxrss) is its
own. The input is the ``nested`` family word (deepest nesting; ``--family`` for another),
model's own τ (``--tau`` for another). Times are CPU seconds of the process (user + sys) and
wall seconds; on a shared machine the wall clock is an upper bound and the CPU ratio is the
number to read. ``--compare`` checks that both paths give the same bits (the exact values
and every dtype activation) and prints the pairs scored and kept by the float filter.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _clock() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, time.perf_counter()


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    c, w = _clock()
    return round(c - t0[0], 2), round(w - t0[1], 2)


def one(
    n: int,
    dtypes: list[str],
    model_path: str,
    family: str,
    tau: str | None,
    soft: bool,
    dtype_run: bool,
    compare: bool,
) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from exactattn import load_model
    from exactattn.engine import sparsehead
    from exactattn.engine.diagnosis import diagnose, flipped
    from exactattn.engine.dtypes import run_numpy
    from exactattn.engine.hard import CompiledModel
    from exactattn.engine.longinput import hard_output, run_hard_long
    from exactattn.inputs.families import family_word
    from exactattn.results.settings import TauChoice
    from exactattn.run.precision import DtypeModel, dtype_decisions, embed_dtype, run_dtype

    texpr = None if tau is None else TauChoice.parse(tau, False).expr
    model = load_model(model_path)
    cm = CompiledModel(model)
    w = family_word(model, family, n, 0)
    res: dict[str, Any] = {"n": n, "model": model.name, "family": family}
    # warm-up (imports, BLAS, first calls) on a short word, both paths, every dtype
    ws = family_word(model, family, 600, 0)
    lw = run_hard_long(cm, ws)
    for d in dtypes if dtype_run else []:
        dm = DtypeModel(cm, d)
        for sp in (True, False):
            run_numpy(dm, embed_dtype(dm, lw.acts[0]), len(ws), texpr, sparse=sp)
    t0 = _clock()
    lh = run_hard_long(cm, w)
    hard, margin = hard_output(model, lh)
    res["exact_hard"] = _since(t0)
    res["hard"] = hard
    if compare:
        t0 = _clock()
        dense = run_hard_long(cm, w, sparse=False)
        res["exact_hard_dense"] = _since(t0)
        res["exact_same"] = all(
            a.num.astype(object).tolist() == b.num.astype(object).tolist()
            and a.den.astype(object).tolist() == b.den.astype(object).tolist()
            for a, b in zip(lh.acts, dense.acts, strict=True)
        )
    res["dtypes"] = {}
    if dtype_run:
        for d in dtypes:
            dm = DtypeModel(cm, d)
            x0 = embed_dtype(dm, lh.acts[0])
            sparsehead.STATS.update(visible=0, scored=0, kept=0, rowsurv=0)
            t0 = _clock()
            run = run_dtype(dm, x0, n, texpr)
            out = dtype_decisions(dm, run.acts[-1], n)[0]
            rd: dict[str, Any] = {"time": _since(t0), "output": out}
            st = dict(sparsehead.STATS)
            if st["visible"]:
                rd["scored_share"] = round(st["scored"] / st["visible"], 4)
                rd["kept_share"] = round(st["kept"] / st["visible"], 6)
            if flipped(model, hard, out, margin == 0):
                t0 = _clock()
                rd["cause"] = diagnose(dm, run, 0, lh).cause
                rd["diagnose"] = _since(t0)
            if compare:
                t0 = _clock()
                dr = run_numpy(dm, x0, n, texpr, sparse=False)
                rd["time_dense"] = _since(t0)
                rd["same"] = all(
                    a.tobytes() == b.tobytes() for a, b in zip(run.acts, dr.acts, strict=True)
                )
            res["dtypes"][d] = rd
    if soft:
        from exactattn.engine.longsoft import certify_long

        t0 = _clock()
        ls = certify_long(cm, lh, texpr)
        res["soft"] = _since(t0)
        res["soft_output"] = ls.output if ls.decided else "undecided"
        res["soft_error_upper"] = ls.layer_error[-1][1]
    res["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return res


def _ratio(dense: list[float], fast: list[float]) -> str:
    return f"{dense[0] / max(fast[0], 1e-9):.1f}x"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pow", type=int, action="append", help="log2 n (repeatable)")
    ap.add_argument("--dtype", action="append", help="dtype (repeatable; default float32)")
    ap.add_argument("--model", default=str(ROOT / "models" / "dyck2.json"))
    ap.add_argument("--family", default="nested")
    ap.add_argument("--tau", default=None, help="τ expression in n (default: the model's)")
    ap.add_argument("--soft", action="store_true", help="also time the certified soft pass")
    ap.add_argument("--soft-only", action="store_true", help="hard + certified soft, no dtype")
    ap.add_argument("--compare", action="store_true", help="dense blocks vs candidates, ratios")
    ap.add_argument("--json", type=Path, default=None, help="also write every record here")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    soft = a.soft or a.soft_only
    dtypes = a.dtype or ["float32"]
    if a.child is not None:
        r = one(a.child, dtypes, a.model, a.family, a.tau, soft, not a.soft_only, a.compare)
        print(json.dumps(r))
        return
    pows = a.pow or [12, 14, 16]
    print(f"model {a.model}, family {a.family}, τ {a.tau or 'model'}; times: (CPU s, wall s)")
    records = []
    for p in pows:
        cmd = [sys.executable, __file__, "--child", str(2**p), "--model", a.model]
        cmd += ["--family", a.family] + sum((["--dtype", d] for d in dtypes), [])
        cmd += (["--tau", a.tau] if a.tau else []) + (["--soft"] if a.soft else [])
        cmd += (["--soft-only"] if a.soft_only else []) + (["--compare"] if a.compare else [])
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        d = json.loads(r.stdout.strip().splitlines()[-1])
        records.append(d)
        line = f"n={d['n']:>6}  exact hard {tuple(d['exact_hard'])}"
        if a.compare:
            dh = d["exact_hard_dense"]
            line += f" dense {tuple(dh)} = {_ratio(dh, d['exact_hard'])}"
            line += "" if d["exact_same"] else "  VALUES DIFFER"
        print(line, flush=True)
        for name, rd in d["dtypes"].items():
            line = f"          {name:9s} {tuple(rd['time'])} output={rd['output']}"
            if "cause" in rd:
                line += f" flip ({rd['cause']}, diagnosis {tuple(rd['diagnose'])})"
            if "scored_share" in rd:
                line += f" scored {rd['scored_share']:.3f} kept {rd['kept_share']:.5f} of pairs"
            if a.compare:
                line += f" dense {tuple(rd['time_dense'])} = {_ratio(rd['time_dense'], rd['time'])}"
                line += "" if rd["same"] else "  BITS DIFFER"
            print(line, flush=True)
        if soft:
            print(
                f"          certified soft {tuple(d['soft'])} output={d['soft_output']}"
                f" max|soft-hard| <= {d['soft_error_upper']:.4g}",
                flush=True,
            )
        print(f"          peak RSS {d['peak_rss_mib']} MiB", flush=True)
    if a.json:
        a.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
