"""Print the table of docs/tracr.md ("tracr's program library") from the fixtures here.

Not run by the tests.  Needs only exactattn:

    PYTHONPATH=. python tests/data/tracr_lib/table.py [NAME ...]

For every program: import it, time ``run_check`` up to ``max_seq_len`` (both meanings), and
count, position by position with ``evaluate``, where the hard meaning decides and whether
the soft meaning decides the same way.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from decimal import Decimal
from pathlib import Path

from exactattn import evaluate, model_from_dict, run_check
from exactattn.importers.tracr import import_tracr

DATA = Path(__file__).resolve().parent


def row(name: str) -> str:
    meta = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    md = import_tracr(DATA / f"{name}.npz", DATA / f"{name}.json")
    m = model_from_dict(md)
    t0 = time.perf_counter()
    res = run_check(m, max_n=m.max_length)
    secs = time.perf_counter() - t0
    rows = res.to_json()["lengths"]
    defined = sum(v is not None for c in meta["cases"] for v in c["expected"])
    hard_bad = sum(r["reference_mismatches"]["hard"] for r in rows)
    invariant = {r["invariant"] for r in rows}
    eps = max(Decimal(la["error"]["upper"]) for r in rows for la in r["layers"][:-1])
    decided = agree = ties = picked = 0
    for n in range(1, m.max_length + 1):
        for w in itertools.product(m.alphabet, repeat=n):
            ev = evaluate(m, w)
            if m.output.kind == "value":
                decided += n
                agree += n if ev.output_soft.within_tol is True else 0
                continue
            for h, s in zip(ev.output_hard, ev.output_soft.value, strict=True):
                if h is None:
                    ties += 1
                    picked += s is not None
                else:
                    decided += 1
                    agree += s == h
    cfg = meta["config"]
    vocab = "{" + ",".join(str(v) for v in meta["vocab"]) + "}"
    causal = " (causal)" if cfg["causal"] else ""
    k = 0 if m.output.kind == "value" else len(md["output"]["labels"])
    out = "value" if not k else f"{k} label{'s' if k > 1 else ''}"
    hard = f"{defined - hard_bad}/{defined}" if hard_bad else f"all {defined}"
    soft = f"{agree}/{decided}" + (
        f"; {ties} hard ties (soft picks a label at {picked})" if ties else ""
    )
    largest = f"≤ {eps:.2e}" if eps else "0"
    inv = ("holds" if invariant == {"holds"} else "/".join(sorted(invariant))) + f", {largest}"
    return (
        f"| `{name}`{causal} | {vocab} | {meta['max_seq_len']} | "
        f"{cfg['num_layers']}×{cfg['num_heads']} | {m.d} | {out} | {hard} | {soft} | {inv} | "
        f"{res.verdict().status} | {secs:.1f} s |"
    )


def main(names: list[str]) -> None:
    names = names or sorted(p.stem for p in DATA.glob("*.npz"))
    print(
        "| program | vocab | max_seq_len | layers×heads | d | output | hard = RASP "
        "(defined positions) | soft = hard (positions hard decides) | ε ≤ 1 (largest ε "
        "before the last layer) | verdict today | check time |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        print(row(name), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
