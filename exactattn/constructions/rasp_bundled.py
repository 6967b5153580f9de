"""The bundled programs: models/rasp/<stem>.rasp compiled to models/rasp_<stem>.json, and with
bounded embeddings (``--embedding bounded``) to models/rasp_<stem>_bounded.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exactattn.constructions.rasp_compile import compile_program
from exactattn.rasp.parse import parse_program

PROGRAMS = Path(__file__).resolve().parent.parent.parent / "models" / "rasp"


def program_paths() -> list[Path]:
    return sorted(PROGRAMS.glob("*.rasp")) if PROGRAMS.is_dir() else []


def catalog() -> dict[str, dict[str, Any]]:
    """Every bundled program's model, by models/ stem (nothing when the sources are absent):
    ``rasp_<stem>`` (unbounded) and ``rasp_<stem>_bounded``."""

    out = {}
    for path in program_paths():
        prog = parse_program(path.read_text(encoding="utf-8"), path.stem)
        out[f"rasp_{path.stem}"] = compile_program(prog).model
        out[f"rasp_{path.stem}_bounded"] = compile_program(prog, "bounded").model
    return out
