"""Whole checks, wall and CPU time: `exactattn check MODEL --max-n N --jobs J` (issue 11's goals:
Dyck-2 --max-n 10 in ≤ 1 min and --max-n 12 in ≤ 15 min with --jobs 2 on 2 cores).

Prints, for each N, the wall time, the CPU time of all processes, the inputs per second and the
tool's own estimate printed before the run, so the estimate's error is visible too.

    python benchmarks/bench_check.py [--model models/dyck2.json] [--max-n 8 10] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(model: str, max_n: int, jobs: int) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        t0 = time.perf_counter()
        before = os.times()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "exactattn",
                "check",
                model,
                "--max-n",
                str(max_n),
                "--jobs",
                str(jobs),
                "--force",
                "--json",
                str(out),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    m = re.search(r"([\d,]+) inputs .*estimated ([^\n]*)", proc.stderr)
    inputs = int(m.group(1).replace(",", "")) if m else 0
    return {
        "exit": proc.returncode,
        "inputs": inputs,
        "wall": wall,
        "cpu": cpu,
        "estimate": m.group(2) if m else "?",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="models/dyck2.json")
    ap.add_argument("--max-n", type=int, nargs="+", default=[8, 10])
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    print(f"{'max-n':>5} {'inputs':>12} {'wall':>9} {'cpu':>9} {'inputs/s':>10}  exit  estimate")
    for n in a.max_n:
        r = run(a.model, n, a.jobs)
        rate = r["inputs"] / r["wall"] if r["wall"] else 0
        print(
            f"{n:>5} {r['inputs']:>12,} {r['wall']:>8.1f}s {r['cpu']:>8.1f}s {rate:>10,.0f}"
            f"  {r['exit']:>4}  {r['estimate']}"
        )


if __name__ == "__main__":
    main()
