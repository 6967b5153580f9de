"""Bit-for-bit fingerprint of the certified float path, to compare two versions of the code.

For every bundled model (models/*.json, n = 1..6), every program of tests/data/tracr_lib (at
max_seq_len and max_seq_len − 1) and the random benchmark model (benchmarks/models.py, n = 1..8:
deep, wide, and the model the float64 tier leaves most words of), in batches of 7 and of 2048
words, with and without row sharing (``run_hard``/``certify_float`` ``share``), this computes
:func:`certify_float` and :func:`second_tier` (on every word: the double-double tier is run even
where float64 settled, so its whole path is fingerprinted) and records a SHA-256 of every
:class:`FloatBatch` field (dtype, shape and bytes). A speed-up of the float64 or double-double
tier (exactattn/engine/cascade/) must leave every digest unchanged.

    python benchmarks/compare_softfloat.py --save before.json     # on the old code
    python benchmarks/compare_softfloat.py --check before.json    # on the new code

``--quick`` skips the double-double tier in batches of 7 (about 40 s of CPU instead of 140 s).
Exit code 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn import load_model, model_from_dict  # noqa: E402
from exactattn.engine.cascade.batch import FloatBatch  # noqa: E402
from exactattn.engine.cascade.chain import second_tier  # noqa: E402
from exactattn.engine.cascade.dd import DD_PREC  # noqa: E402
from exactattn.engine.cascade.float64 import certify_float  # noqa: E402
from exactattn.engine.cascade.interval import tau_enclosures  # noqa: E402
from exactattn.engine.hard import CompiledModel, run_hard  # noqa: E402
from exactattn.engine.temperature import BASE_PREC, Temperatures  # noqa: E402
from exactattn.importers.tracr import import_tracr  # noqa: E402
from exactattn.inputs import batches, words_of_length  # noqa: E402
from models import random_model  # noqa: E402

TRACR = ROOT / "tests" / "data" / "tracr_lib"


def digest(fb: FloatBatch) -> dict[str, str | None]:
    """One SHA-256 per field (dtype, shape and bytes)."""
    out: dict[str, str | None] = {}
    for name, v in sorted(vars(fb).items()):
        if v is None:
            out[name] = None
            continue
        a = np.ascontiguousarray(v)
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
        out[name] = h.hexdigest()[:20]
    return out


def cases() -> list[tuple[str, object, list[int]]]:
    """(name, model, lengths) of every model compared."""
    out = []
    for p in sorted((ROOT / "models").glob("*.json")):
        out.append((p.stem, load_model(p), list(range(1, 7))))
    for p in sorted(TRACR.glob("*.json")):
        if not p.with_suffix(".npz").exists():
            continue
        n = int(json.loads(p.read_text())["max_seq_len"])
        m = model_from_dict(import_tracr(p.with_suffix(".npz"), p))
        out.append((f"tracr/{p.stem}", m, sorted({max(1, n - 1), n})))
    out.append(("random", model_from_dict(random_model()), list(range(1, 9))))
    return out


def fingerprint(batch_sizes: list[int], dd_sizes: list[int]) -> dict[str, object]:
    res: dict[str, object] = {}
    for name, model, lengths in cases():
        cm = CompiledModel(model)
        temps = Temperatures(model, None)
        for n in lengths:
            taus = tau_enclosures(temps.at(n, BASE_PREC))
            dtaus = tau_enclosures(temps.at(n, DD_PREC))
            for bs in batch_sizes:
                for share in (True, False):
                    for i, chunk in enumerate(batches(words_of_length(model.alphabet, n), bs)):
                        key = f"{name} n={n} batch={bs} share={share} #{i}"
                        hb = run_hard(cm, chunk, n, share=share)
                        try:
                            fb = certify_float(cm, hb, taus, share=share)
                        except OverflowError:
                            res[key] = "OverflowError"
                            continue
                        res[key] = digest(fb)
                        if bs not in dd_sizes:
                            continue
                        try:
                            fb2 = second_tier(cm, hb, fb, np.ones(len(chunk), bool), dtaus)
                        except OverflowError:
                            res[key + " dd"] = "OverflowError"
                            continue
                        res[key + " dd"] = digest(fb2)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    ap.add_argument(
        "--quick", action="store_true", help="no double-double tier in batches of 7 (5× faster)"
    )
    args = ap.parse_args()
    t0 = time.process_time()
    res = fingerprint([7, 2048], [2048] if args.quick else [7, 2048])
    took = time.process_time() - t0
    if args.save:
        args.save.write_text(json.dumps(res, indent=0, sort_keys=True))
        print(f"{len(res)} results saved to {args.save} ({took:.1f} s CPU)")
        return 0
    ref = json.loads(args.check.read_text())
    bad = [k for k in res if ref.get(k) != res[k]]
    missing = [
        k
        for k in ref
        if k not in res and not (args.quick and "batch=7 " in k and k.endswith(" dd"))
    ]
    for k in bad[:20]:
        print("DIFFERENT:", k, ref.get(k), res[k])
    for k in missing[:20]:
        print("MISSING:", k)
    print(
        f"{len(res)} results compared, {len(bad)} different, {len(missing)} missing "
        f"({took:.1f} s CPU)"
    )
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
