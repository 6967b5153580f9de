"""The whole check's JSON on the benchmark models, for byte-identity checks of speed changes.

Runs ``run_check`` (docs/api.md) on Dyck-2 and the two random benchmark models
(benchmarks/models.py, as benchmarks/bench_softfloat.py builds them) for n = 1..max_n and
writes each result's JSON (core/jsonio.dumps, as ``check --json`` writes it) into one file;
run it on the old and the new code and compare the files byte for byte (``cmp``), or pass
``--check OLD`` to compare with a saved file here.

    python benchmarks/check_fingerprint.py --save F [--max-n 8]
    python benchmarks/check_fingerprint.py --check F [--max-n 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn import load_model, model_from_dict, run_check  # noqa: E402
from exactattn.core.jsonio import dumps  # noqa: E402
from models import random_model  # noqa: E402


def fingerprint(max_n: int) -> str:
    """Every model's check result as JSON text, one block per model."""
    models = [
        ("dyck2", load_model(ROOT / "models" / "dyck2.json")),
        ("random", model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))),
        ("random3", model_from_dict(random_model(d=16, blocks=3, heads=2, seed=1))),
    ]
    parts = []
    for name, model in models:
        result = run_check(model, max_n=max_n)
        parts.append(f"== {name}\n{dumps(result.to_json())}\n")
        print(f"{name}: exit {result.exit_code()}", file=sys.stderr)
    return "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-n", type=int, default=8)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--check", type=Path)
    args = ap.parse_args()
    text = fingerprint(args.max_n)
    if args.save:
        args.save.write_text(text, encoding="utf-8")
        return
    old = args.check.read_text(encoding="utf-8")
    if old == text:
        print("identical")
        return
    print("DIFFERENT")
    sys.exit(1)


if __name__ == "__main__":
    main()
