"""The float cascade's switches (engine/cascade/policy.py, issue 37): read from the environment
in one place, once, into one Policy that every job of a run carries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from paths import ROOT

from exactattn.engine.cascade.policy import Policy

SWITCHES = (
    "EXACTATTN_COARSE",
    "EXACTATTN_CENTRED",
    "EXACTATTN_DD",
    "EXACTATTN_BLAS",
    "EXACTATTN_HARDFILTER",
)


def test_environment_values() -> None:
    """ "0" turns a tier off and anything else leaves it on; BLAS products only with "1"."""
    assert Policy.from_environ({}) == Policy(True, True, True, True, False)
    off = {"EXACTATTN_COARSE": "0", "EXACTATTN_CENTRED": "0", "EXACTATTN_DD": "0"}
    assert Policy.from_environ(off) == Policy(floats=True, coarse=False, centred=False, dd=False)
    for value, on in (("1", True), ("", False), ("0", False), ("yes", False), ("true", False)):
        assert Policy.from_environ({"EXACTATTN_BLAS": value}).blas is on
    for value in ("1", "", "no", "false", "00"):
        assert Policy.from_environ({"EXACTATTN_DD": value}).dd
        assert Policy.from_environ({"EXACTATTN_HARDFILTER": value}).hard_filter
    assert not Policy.from_environ({"EXACTATTN_HARDFILTER": "0"}).hard_filter


_SCRIPT = """
import json
from exactattn import load_model
from exactattn.engine.cascade import policy
from exactattn.run.shard import LengthJob
job = LengthJob(load_model({model!r}), 3, None, False)
print(json.dumps([vars(job.policy), policy.blas_on(), vars(policy.current(False))]))
"""


def test_a_job_takes_the_environment_at_import() -> None:
    """In a fresh process with every switch flipped, a job made there carries them all, the
    BLAS switch is in force by default, and ``--arb-only`` turns the float tiers off."""
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env.update(
        EXACTATTN_COARSE="0",
        EXACTATTN_CENTRED="0",
        EXACTATTN_DD="0",
        EXACTATTN_BLAS="1",
        EXACTATTN_HARDFILTER="0",
    )
    code = _SCRIPT.format(model=str(ROOT / "models" / "dyck1.json"))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    job, blas, arb_only = json.loads(out.stdout)
    flipped = {
        "floats": True,
        "coarse": False,
        "centred": False,
        "dd": False,
        "blas": True,
        "hard_filter": False,
    }
    assert job == flipped and blas is True
    assert arb_only == {**flipped, "floats": False}


def test_switches_are_read_in_one_place() -> None:
    """No module but engine/cascade/policy.py reads the cascade's switches from the
    environment (os.environ / os.getenv with their names)."""
    names = "|".join(SWITCHES + ("EXACTATTN_MALLOC",))
    read = re.compile(rf"(environ|getenv)[^\n]*\b({names})\b")
    hits = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "exactattn").rglob("*.py"))
        if read.search(p.read_text("utf-8")) and p.name != "policy.py"
    ]
    assert hits == []
    assert read.search((ROOT / "exactattn" / "engine" / "cascade" / "policy.py").read_text())
