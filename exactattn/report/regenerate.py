"""The bundled reports in ``reports/``: which models, which settings (one command rebuilds them).

exactattn build reports            # rerun the checks, rewrite reports/*.json, *.md, *.png
exactattn build reports --check    # verify the committed reports match a fresh run
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exactattn.core.jsonio import write_text_atomic
from exactattn.model import load_model
from exactattn.report import render, write_report
from exactattn.run.check import run_check

# model stem -> run_check keyword arguments
REPORTS: dict[str, dict[str, Any]] = {
    "dyck2": {"max_n": 5, "bounds": True, "find_tau": True},
    "ltl_since_until_temperature": {"max_n": 5, "bounds": True, "find_tau": True},
    "ltl_counting_temperature": {"max_n": 5, "bounds": True, "find_tau": True},
}


def regenerate(
    models_dir: Path, out_dir: Path, verify: bool = False, only: list[str] | None = None
) -> list[str]:
    """Run each configured check; write (or, with ``verify``, compare) JSON and Markdown.

    Returns the names whose committed files differ from the fresh run (empty when all match).
    """

    stale = []
    for stem, kwargs in REPORTS.items():
        if only and stem not in only:
            continue
        model = load_model(models_dir / f"{stem}.json")
        data = run_check(model, **kwargs).to_json()
        json_text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        json_path = out_dir / f"{stem}.json"
        md_path = out_dir / f"{stem}.md"
        if verify:
            texts = render(data, md_path)
            ok = json_path.exists() and json_path.read_text(encoding="utf-8") == json_text
            for p, t in texts.items():
                ok = ok and p.exists() and p.read_text(encoding="utf-8") == t
            if not ok:
                stale.append(stem)
            continue
        out_dir.mkdir(parents=True, exist_ok=True)

        write_text_atomic(json_path, json_text)
        write_report(data, md_path)
    return stale
