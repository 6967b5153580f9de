"""The long fuzz run: ``python tests/fuzz_long.py COUNT [--seed S] [--timeout SEC]``.

Runs COUNT random hostile cases (see tests/fuzzing.py) in this process, one core, with a
per-case CPU-time limit, and prints the counts: cases by kind, exit codes, contract breaks
(tracebacks, exit 4, hangs, bad exit-2 messages). Failing cases are saved under
``--save DIR`` (default ./fuzz-failures) with their command line, so each can be replayed
with ``exactattn <args>``. Exit status 0 when no case broke the contract.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))

import fuzzing as F  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("count", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="CPU seconds per case")
    ap.add_argument(
        "--figures", type=float, default=0.02, help="share of report cases with figures"
    )
    ap.add_argument("--save", default="fuzz-failures")
    ap.add_argument(
        "--save-slow",
        type=float,
        default=5.0,
        help="also save cases over this many CPU seconds (not a break; for profiling)",
    )
    ap.add_argument("--every", type=int, default=1000, help="print counts every N cases")
    ap.add_argument(
        "--kinds", default=None, help="comma-separated kinds to draw from (default: all)"
    )
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    rng = random.Random(a.seed)
    only = a.kinds.split(",") if a.kinds else None
    if only and not set(only) <= set(F.KINDS):
        ap.error(f"--kinds: unknown {sorted(set(only) - set(F.KINDS))}; known: {F.KINDS}")
    print(f"{a.count:,} cases, seed {a.seed}, kinds {only or F.KINDS}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="exactattn-fuzz-"))
    save = Path(a.save)
    kinds: collections.Counter = collections.Counter()
    codes: collections.Counter = collections.Counter()
    breaks: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    t0 = time.time()
    slowest = (0.0, "")
    compiled = 0
    for i in range(a.count):
        case_rng = random.Random(rng.getrandbits(64))
        kind, args = F.make_case(case_rng, work, kind=only and case_rng.choice(only))
        undo = F.stub_figures() if kind == "report" and case_rng.random() >= a.figures else None
        t = time.process_time()
        try:
            o = F.run_case(kind, args, work, timeout=a.timeout)
        finally:
            if undo:
                undo()
        dt = time.process_time() - t  # CPU seconds, like the per-case limit
        if dt > slowest[0]:
            slowest = (dt, " ".join(args))
        kinds[kind] += 1
        codes["hang" if o.timed_out else ("exc" if o.traceback else o.code)] += 1
        probs = F.problems(o)
        # figures drawn (or none to draw: certificate, precision and search reports, a share
        # of them as of the check reports), so the report compiles as a user would compile it
        drawn = undo is None and (kind == "report" or case_rng.random() < a.figures)
        if kind in F.REPORT_KINDS and drawn and o.code == 0 and args[-1].endswith(".tex"):
            compiled += 1
            probs += F.pdflatex_problems(work, Path(args[-1]))
        for p in probs:
            key = p.split(":")[0][:60]
            breaks[key] += 1
            if key not in examples:
                examples[key] = p
        if probs or dt > a.save_slow:
            dest = save / (f"case{i:07d}" if probs else f"slow{i:07d}")
            dest.mkdir(parents=True, exist_ok=True)
            for f in work.iterdir():
                if f.is_file():
                    shutil.copy(f, dest / f.name)
                elif f.is_dir():  # a checkpoint directory (its environment: case_env.json)
                    shutil.copytree(f, dest / f.name, dirs_exist_ok=True)
            (dest / "case.json").write_text(
                json.dumps(
                    {
                        "args": args,
                        "problems": probs,
                        "cpu_seconds": round(dt, 2),
                        "stderr": o.stderr[-2000:],
                        "traceback": o.traceback,
                    },
                    indent=1,
                    ensure_ascii=True,
                )
            )
        if (i + 1) % a.every == 0 or i + 1 == a.count:
            el = time.time() - t0
            print(
                f"{i + 1:,} cases in {el:,.0f} s; kinds {dict(kinds)}; exit codes "
                f"{dict(codes)}; contract breaks {dict(breaks)}; slowest {slowest[0]:.1f} CPU-s; "
                f"LaTeX reports compiled with pdflatex {compiled}",
                flush=True,
            )
    for k, v in examples.items():
        print(f"example of {k!r}: {v[:400]}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if breaks else 0


if __name__ == "__main__":
    sys.exit(main())
