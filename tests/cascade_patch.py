"""Patch a name of the float64 tier in every module that binds it (a test helper).

The float64 tier is several modules of exactattn/engine/cascade/ (interval, weights, the
passes, the read-out, the tier itself); a constant or function of :mod:`.interval` that another
of them imports by name is a binding of its own there. A test that removes a rounding
allowance (sets ``WIDEN`` to 0) or a check (``guard``) must remove it in all of them, as it
did when they were one file, or it would test less than it says.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

# the modules of the float64 tier (what engine/softfloat.py was until issue 37); the coarse,
# centred and double-double tiers keep their own constants (their tests patch them there)
FLOAT64_MODULES = ("interval", "weights", "attention", "ffn", "readout", "batch", "float64")


def patch_everywhere(monkeypatch: pytest.MonkeyPatch, name: str, value: Any) -> int:
    """Set ``name`` to ``value`` in every float64-tier module that has it; how many there."""
    hit = 0
    for short in FLOAT64_MODULES:
        mod = importlib.import_module(f"exactattn.engine.cascade.{short}")
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, value)
            hit += 1
    assert hit, f"no module of the float64 tier has {name}"
    return hit


def set_policy(monkeypatch: pytest.MonkeyPatch, **switches: bool) -> None:
    """What EXACTATTN_COARSE=0, EXACTATTN_CENTRED=0, EXACTATTN_DD=0 or EXACTATTN_BLAS=1 in the
    environment at import would give the jobs made from now on (``policy.DEFAULT``, which
    ``LengthJob`` and ``run_check`` take), on top of what is patched already."""
    from dataclasses import replace

    from exactattn.engine.cascade import policy

    monkeypatch.setattr(policy, "DEFAULT", replace(policy.DEFAULT, **switches))
