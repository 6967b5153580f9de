"""Bit-for-bit fingerprint of the long-input evaluators, to compare two versions of the code.

For every bundled model (models/*.json) and the bounded-embedding Dyck-2 of
reports/precision/dyck2-unit.json, on family words (every family of the model) at a spread of
lengths, this records a SHA-256 of

* every exact hard activation of :func:`run_hard_long` (values, not representation: each row's
  reduced numerators and denominator as decimal integers) and each head's facts (support and
  argmax counts, the smallest gap with ``want_gap``);
* every dtype activation of :func:`run_numpy` (dtype, shape and bytes), float16 / bfloat16 /
  float32 / float64, at the model's τ and at τ = 1/(n³ log n);
* the dtype decision, the error enclosure, and the diagnosis of every flip (cause, layer, head,
  query, key, exact gap, message and per-layer errors);

and, on a few longer words (Dyck models, ``nested`` and ``far-error`` at n = 512 … 2048), the
same for float32, bfloat16 and float64. A speed-up of precision's evaluators must leave every
digest unchanged.

    python benchmarks/compare_precision.py --save before.json     # on the old code
    python benchmarks/compare_precision.py --check before.json    # on the new code

``--quick`` skips the longer words. Exit code 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exactattn import load_model  # noqa: E402
from exactattn.engine.diagnosis import diagnose, error_enclosure, flipped  # noqa: E402
from exactattn.engine.dtypes import (  # noqa: E402
    DtypeModel,
    dtype_decisions,
    embed_dtype,
    run_numpy,
)
from exactattn.engine.hard import CompiledModel  # noqa: E402
from exactattn.engine.longinput import hard_output, run_hard_long  # noqa: E402
from exactattn.inputs.families import families_for, family_word  # noqa: E402
from exactattn.results.settings import TauChoice  # noqa: E402

DTYPES = ("float16", "bfloat16", "float32", "float64")
TAUS = ("model", "1/(n^3*log(n))")


def _tau(t: str) -> Any:
    c = TauChoice.model() if t == "model" else TauChoice.parse(t, False)
    return TauChoice.override_expr(c, "precision")


SHORT = (1, 2, 3, 5, 8, 13, 16, 33, 64, 100)
LONG = (512, 1024, 2048)


def _h(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            a = np.ascontiguousarray(p)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(repr(p).encode())
    return h.hexdigest()[:20]


def _rows(x: Any) -> str:
    """The values of a RowRat (representation-independent)."""
    h = hashlib.sha256()
    num = x.num.tolist()
    den = x.den.tolist()
    for r, d in zip(num, den, strict=True):
        h.update((",".join(str(int(v)) for v in r) + "/" + str(int(d)) + ";").encode())
    return h.hexdigest()[:20]


def _models() -> list[tuple[str, Any]]:
    out = [(p.stem, load_model(p)) for p in sorted((ROOT / "models").glob("*.json"))]
    unit = ROOT / "reports" / "precision" / "dyck2-unit.json"
    if unit.exists():
        out.append(("dyck2-unit", load_model(unit)))
    return out


def _families(model: Any, models: list[tuple[str, Any]]) -> tuple[Any, list[str]]:
    """(the model whose families make the words, their names): a model without the Dyck
    families (the compiled RASP Dyck programs) borrows them from a Dyck model over the same
    alphabet, so that its words are the same ``nested`` / ``far-error`` words."""
    fams = families_for(model)
    if "nested" not in fams:
        for _, other in models:
            if "nested" in families_for(other) and list(other.alphabet) == list(model.alphabet):
                return other, list(families_for(other))
    return model, list(fams)


def one_word(model: Any, cm: Any, word: tuple[str, ...], dtypes: Any, gap: bool) -> dict:
    rec: dict[str, Any] = {}
    lh = run_hard_long(cm, word, want_gap=gap)
    rec["hard"] = [_rows(a) for a in lh.acts]
    rec["heads"] = {
        f"{k[0]}.{k[1]}": _h(v.count, v.top_count, str(v.gap), v.gap_row)
        for k, v in sorted(lh.heads.items())
    }
    hard, margin = hard_output(model, lh)
    rec["out"] = repr((hard, margin))
    n = len(word)
    for d in dtypes:
        dm = DtypeModel(cm, d)
        for tau in TAUS:
            if tau != "model" and n < 2:
                continue
            run = run_numpy(dm, embed_dtype(dm, lh.acts[0]), n, _tau(tau))
            out = dtype_decisions(dm, run.acts[-1], n)[0]
            key = f"{d}/{tau}"
            enc = error_enclosure(run.acts[-1][0], lh.acts[-1])
            fl = flipped(model, hard, out, margin == 0)
            diag = None
            if fl:
                dg = diagnose(dm, run, 0, lh)
                diag = repr(dg)
            rec[key] = {
                "acts": _h(*run.acts),
                "scols": repr(sorted(run.scols.items())),
                "taus": repr(run.taus),
                "out": repr(out),
                "enc": repr(enc),
                "diag": diag,
            }
    return rec


def fingerprint(quick: bool, only: set[str] | None = None) -> dict[str, Any]:
    """Every word's digest; ``only``: the models (by name) to fingerprint, the others still
    lend their families."""
    res: dict[str, Any] = {}
    models = _models()
    for name, model in models:
        if only is not None and name not in only:
            continue
        cm = CompiledModel(model)
        src, fams = _families(model, models)
        for fam in fams:
            for n in SHORT:
                if model.max_length is not None and n > model.max_length:
                    continue
                if n < (model.min_length or 1):
                    continue
                w = family_word(src, fam, n, 0)
                res[f"{name}/{fam}/{n}"] = one_word(model, cm, w, DTYPES, gap=True)
        print(f"{name}: done", file=sys.stderr, flush=True)
    if not quick:
        for name, model in models:
            src, fams = _families(model, models)
            if "nested" not in fams or (only is not None and name not in only):
                continue
            cm = CompiledModel(model)
            for fam in ("nested", "far-error"):
                for n in LONG:
                    w = family_word(src, fam, n, 0)
                    t0 = time.time()
                    res[f"{name}/{fam}/{n}"] = one_word(
                        model, cm, w, ("bfloat16", "float32", "float64"), gap=False
                    )
                    print(f"{name}/{fam}/{n}: {time.time() - t0:.1f}s", file=sys.stderr)
    return res


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'new' if k not in a else 'saved'}")
            else:
                _diff(a[k], b[k], f"{path}/{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    ap.add_argument("--quick", action="store_true", help="skip the longer words")
    a = ap.parse_args()
    t0 = time.time()
    if a.save:
        fp = fingerprint(a.quick)
        a.save.write_text(json.dumps(fp, indent=1, sort_keys=True))
        print(f"saved {len(fp)} words in {time.time() - t0:.0f}s")
        return 0
    saved = json.loads(a.check.read_text())
    # models bundled since the save have nothing to compare with: not fingerprinted
    known = {k.split("/")[0] for k in saved}
    skipped = sorted(name for name, _ in _models() if name not in known)
    if skipped:
        print(f"not in the saved file, skipped: {', '.join(skipped)}")
    fp = fingerprint(a.quick, known)
    if a.quick:
        saved = {k: v for k, v in saved.items() if k in fp}
    diffs: list[str] = []
    new = sorted(set(fp) - set(saved))
    if new:
        print(f"{len(new)} words not in the saved file (not compared), e.g. {new[:3]}")
    _diff(saved, {k: v for k, v in fp.items() if k in saved}, "", diffs)
    for d in diffs[:50]:
        print(d)
    print(f"{len(fp)} words, {len(diffs)} different ({time.time() - t0:.0f}s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
