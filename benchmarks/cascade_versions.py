"""Two versions of the float cascade in one process, for the A/B benchmarks.

On a shared machine single benchmark runs move by ±20–30%; alternating an old copy of the
cascade and the current one in one process, on the same words, is the steadier measure
(notes/benchmark-rounds.md, "Cheaper float64 tier"). An old copy is a directory holding
``exactattn/engine/cascade`` of another revision:

    git archive REV exactattn/engine/cascade | tar -x -C /tmp/old
    python benchmarks/ab_softfloat.py --old /tmp/old/exactattn/engine/cascade

It is loaded beside the current one as the package ``exactattn.engine._cascade_old`` (its
imports of itself renamed in a temporary copy); everything outside the cascade (the hard
meaning, arb) is the current code's. Both versions share process-wide settings (the
allocator tuning ``EXACTATTN_MALLOC``), so the rows measure the code, not the setting.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

OLD = "exactattn.engine._cascade_old"


def _version(pkg: str) -> SimpleNamespace:
    """What the A/B scripts call, from the package ``pkg`` (a cascade)."""
    chain = importlib.import_module(f"{pkg}.chain")
    dd = importlib.import_module(f"{pkg}.dd")
    f64 = importlib.import_module(f"{pkg}.float64")
    iv = importlib.import_module(f"{pkg}.interval")
    return SimpleNamespace(
        certify_float=f64.certify_float,
        second_tier=chain.second_tier,
        tau_enclosures=iv.tau_enclosures,
        DD_PREC=dd.DD_PREC,
    )


def current() -> SimpleNamespace:
    """This checkout's cascade."""
    return _version("exactattn.engine.cascade")


def load(path: Path) -> SimpleNamespace:
    """The cascade copied at ``path`` (a directory of its modules), as a second package."""
    src = Path(path)
    if not (src / "chain.py").exists():
        raise SystemExit(f"{src} is not a copy of exactattn/engine/cascade (no chain.py)")
    tmp = Path(tempfile.mkdtemp(prefix="cascade_old_")) / "_cascade_old"
    shutil.copytree(src, tmp)
    for f in tmp.glob("*.py"):
        f.write_text(f.read_text().replace("exactattn.engine.cascade", OLD))
    spec = importlib.util.spec_from_file_location(
        OLD, tmp / "__init__.py", submodule_search_locations=[str(tmp)]
    )
    assert spec is not None and spec.loader is not None
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[OLD] = pkg
    spec.loader.exec_module(pkg)
    return _version(OLD)
