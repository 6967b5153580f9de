"""Byte-for-byte fingerprint of whole checks (``run_check``'s result JSON), to compare two
versions of the code.

``compare_softfloat.py`` fingerprints the float tiers' batches; this one the results a user
sees: ``run_check`` (docs/api.md) on every program of tests/data/tracr_lib (``lib_*``, n up to
its max_seq_len, with its reference where it has one) and on a few bundled models at small n,
each result's JSON (``to_json``, keys sorted) saved whole, compared byte for byte.

    python benchmarks/compare_check.py --save before.json     # on the old code
    python benchmarks/compare_check.py --check before.json    # on the new code

``--ignore float_settled,precision_bits`` leaves those per-length keys out of the comparison
(a change that moves words between the float tiers and arb changes them by design: they say
which path certified the inputs). Exit code 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exactattn import load_model, model_from_dict, run_check  # noqa: E402
from exactattn.importers.tracr import import_tracr  # noqa: E402

TRACR = ROOT / "tests" / "data" / "tracr_lib"
# bundled models and the largest n compared (seconds each, not minutes)
BUNDLED = {
    "dyck1": 6,
    "dyck2": 4,
    "induction_k1": 4,
    "ltl_counting_temperature": 6,
    "ltl_since_until_positions": 5,
    "rasp_count_bounded": 5,
    "rasp_reverse_bounded": 4,
    "rasp_majority": 5,
}


def cases() -> list[tuple[str, object, int]]:
    """(name, model, max_n) of every check compared."""
    out: list[tuple[str, object, int]] = []
    for p in sorted(TRACR.glob("lib_*.json")):
        if not p.with_suffix(".npz").exists():
            continue
        n = int(json.loads(p.read_text())["max_seq_len"])
        out.append((f"tracr/{p.stem}", model_from_dict(import_tracr(p.with_suffix(".npz"), p)), n))
    for name, n in BUNDLED.items():
        out.append((name, load_model(ROOT / "models" / f"{name}.json"), n))
    return out


def fingerprint(only: set[str] | None) -> dict[str, str]:
    res: dict[str, str] = {}
    for name, model, n in cases():
        if only and not any(o in name for o in only):
            continue
        res[name] = json.dumps(run_check(model, max_n=n).to_json(), sort_keys=True)
    return res


def _without(text: str, ignore: set[str]) -> object:
    data = json.loads(text)
    for entry in data.get("lengths", []):
        for k in ignore:
            entry.pop(k, None)
    return json.dumps(data, sort_keys=True)


def _diff(a: str, b: str) -> list[str]:
    """The per-length keys (or top-level keys) that differ."""
    ja, jb = json.loads(a), json.loads(b)
    out = [k for k in sorted(set(ja) | set(jb)) if k != "lengths" and ja.get(k) != jb.get(k)]
    for la, lb in zip(ja.get("lengths", []), jb.get("lengths", []), strict=False):
        out += [
            f"n={la.get('n')} {k}: {la.get(k)!r} -> {lb.get(k)!r}"[:300]
            for k in sorted(set(la) | set(lb))
            if la.get(k) != lb.get(k)
        ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    ap.add_argument("--ignore", default="", help="per-length keys left out (comma-separated)")
    ap.add_argument("--only", default="", help="cases whose name contains one of these")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s} or None
    ignore = {s for s in args.ignore.split(",") if s}
    t0 = time.process_time()
    res = fingerprint(only)
    took = time.process_time() - t0
    if args.save:
        args.save.write_text(json.dumps(res, indent=0, sort_keys=True))
        print(f"{len(res)} checks saved to {args.save} ({took:.1f} s CPU)")
        return 0
    ref = json.loads(args.check.read_text())
    bad = []
    for k, v in res.items():
        if k not in ref:
            continue
        if ref[k] == v or (ignore and _without(ref[k], ignore) == _without(v, ignore)):
            if ref[k] != v:
                print(f"same but for {sorted(ignore)}: {k}: " + "; ".join(_diff(ref[k], v)))
            continue
        bad.append(k)
        print(f"DIFFERENT: {k}")
        for line in _diff(ref[k], v)[:12]:
            print("   ", line)
    missing = [k for k in ref if k not in res and not (only and not any(o in k for o in only))]
    for k in missing:
        print("MISSING:", k)
    print(
        f"{len(res)} checks compared, {len(bad)} different, {len(missing)} missing "
        f"({took:.1f} s CPU)"
    )
    return 1 if bad or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
