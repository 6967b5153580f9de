"""The comparison of docs/certify.md (issue 35): per bundled model and n = 1..10, the last grid
temperature the certificate reaches (τ_cert(n), `exactattn certify --n n`), beside the model's
own τ(n) and the critical temperature τ*_dec(n) found by `check --find-tau` (the stored
reports/claims/<stem>.soft.json, where it was run).

    python benchmarks/certify_table.py [--max-n 10] [MODEL_STEM ...]   (prints Markdown)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flint import ctx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exactattn.certificate.certify import Prepared, certify_length  # noqa: E402
from exactattn.core.numbers import arb_upper_str  # noqa: E402
from exactattn.engine.temperature import Temperatures  # noqa: E402
from exactattn.model import load_model  # noqa: E402


def _short(text: str) -> str:
    try:
        x = float(text)  # display only (the certificate itself is exact)
    except ValueError:
        return text
    return f"{x:.3g}"


def tau_star(stem: str) -> dict[int, str]:
    """n → "[lower, upper]" of τ*_dec(n) from the stored --find-tau run (if any)."""
    path = ROOT / "reports" / "claims" / f"{stem}.soft.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text(), parse_float=str)
    out = {}
    for rec in data.get("lengths", []):
        dec = (rec.get("tau_star") or {}).get("decisions") or {}
        lo, hi = dec.get("lower"), dec.get("upper")
        if lo is not None:
            out[rec["n"]] = f"[{_short(lo)}, {_short(hi)}]" if hi else f"≥ {_short(lo)}"
    return out


def row(stem: str, max_n: int) -> list[str]:
    model = load_model(ROOT / "models" / f"{stem}.json")
    prep = Prepared.of(model)
    stars = tau_star(stem)
    cells = []
    for n in range(1, max_n + 1):
        if n < model.claims.from_n:
            cells.append("—")
            continue
        c = certify_length(prep, n)
        g = c.tau_grid
        own = Temperatures(model, None).at(n, 128)
        t_own = next(t for r in own if r is not None for t in r)
        with ctx.workprec(128):
            own_text = _short(arb_upper_str(t_own))
        if g is None or g.last_certified is None:
            cert = "—"
        else:
            up = (
                arb_upper_str(g.last_certified.tau)
                if not isinstance(g.last_certified.tau, tuple)
                else g.last_certified.tau[1]
            )
            cert = _short(up) + (" (top)" if g.last_certified.k >= 128 else "")
        mark = "✓" if c.verdict.certified else "✗"
        cells.append(f"{cert} / {own_text}{mark} / {stars.get(n, '—')}")
    return cells


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=10)
    ap.add_argument("stems", nargs="*")
    a = ap.parse_args()
    stems = a.stems or sorted(p.stem for p in (ROOT / "models").glob("*.json"))
    print("| model | " + " | ".join(f"n = {n}" for n in range(1, a.max_n + 1)) + " |")
    print("| --- |" + " --- |" * a.max_n)
    for stem in stems:
        print(f"| `{stem}` | " + " | ".join(row(stem, a.max_n)) + " |", flush=True)


if __name__ == "__main__":
    main()
