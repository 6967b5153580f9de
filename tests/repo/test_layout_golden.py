"""Results do not depend on where the code lives: `check` output is byte-identical to golden files.

The golden JSON files in tests/golden/layout/ were written by the code *before* the package was
reorganised into stage folders (issue 21). A change that alters any result, even one digit or
one key order, fails here. Regenerate (only for a deliberate change of results) with
`EXACTATTN_UPDATE_GOLDEN=1 python -m pytest tests/repo/test_layout_golden.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT, TESTS

from exactattn.cli import main

GOLDEN = TESTS / "golden" / "layout"

# name → check arguments (model path relative to the repository); each runs in about a second
CASES = {
    "dyck2_n4": ["models/dyck2.json", "--max-n", "4"],
    "ltl_since_until_n4_bounds": [
        "models/ltl_since_until_positions.json",
        "--max-n",
        "4",
        "--bounds",
    ],
    # --bounds: the file was written when `--tau theorem` alone recorded settings.bounds true;
    # the CLI now records what run_check records (issue 37), so the same bytes ask for both
    "induction_k1_n4_theorem": [
        "models/induction_k1.json",
        "--max-n",
        "4",
        "--tau",
        "theorem",
        "--bounds",
    ],
    "dyck1_n4_find_tau": ["models/dyck1.json", "--max-n", "4", "--find-tau"],
    "rasp_dyck1_n4_bounds": ["models/rasp_dyck1.json", "--max-n", "4", "--bounds"],
    "dyck1_n6_bounds_hard_only": ["models/dyck1.json", "--max-n", "6", "--bounds", "--hard-only"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_json_is_byte_identical(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.json"
    args = list(CASES[name])
    args[0] = str(ROOT / args[0])
    res = CliRunner().invoke(main, ["check", *args, "-q", "--json", str(out)])
    assert res.exit_code in (0, 1), res.output
    got = out.read_bytes()
    path = GOLDEN / f"{name}.json"
    if os.environ.get("EXACTATTN_UPDATE_GOLDEN"):
        path.write_bytes(got)
    assert path.exists(), f"missing golden file {path}; run EXACTATTN_UPDATE_GOLDEN=1 pytest"
    assert got == path.read_bytes(), f"{name}: result differs from {path}"
