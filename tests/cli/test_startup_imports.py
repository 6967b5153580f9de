"""Start-up cost of the command line: `exactattn --help` and `exactattn check --help` load
only what every command needs (numpy, flint, click, rich's console). The heavy or optional
libraries stay lazy (each such import carries a `# lazy: <why>` comment, tests/repo/test_layers.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from paths import ROOT

NEVER_AT_START = (
    "sympy",  # proofs and closed-form fitting only
    "matplotlib",  # report figures only
    "dask",  # --dask only (an optional extra)
    "distributed",
    "torch",  # export / precision --backend torch only
    "transformer_lens",
    "asyncio",  # the --dask scheduler probe only
    "multiprocessing",  # --jobs N only
    "exactattn.run.precision",  # the precision command only
    "exactattn.run.search",  # the search command only
)

PROBE = """
import json, sys
from exactattn.cli import main
args = json.loads(sys.argv[1])
if args is not None:
    try:
        main(args)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(args: list[str] | None) -> set[str]:
    """The modules loaded by `import exactattn.cli` (and `main(args)`), in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "args", [None, ["--help"], ["check", "--help"]], ids=["import", "--help", "check --help"]
)
def test_start_up_does_not_load_heavy_libraries(args: list[str] | None) -> None:
    loaded = _modules_after(args)
    assert "exactattn.cli" in loaded and "numpy" in loaded  # the probe did load the CLI
    heavy = sorted(m for m in loaded if m.split(".")[0] in NEVER_AT_START or m in NEVER_AT_START)
    assert not heavy, f"loaded at start-up (make them lazy with '# lazy: <why>'): {heavy}"
