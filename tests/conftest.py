"""Shared test set-up: fixtures for the repository's paths (tests/paths.py) and hypothesis profiles.

Tests read only files inside the repository (``ROOT``); fixtures that other tools
produced live in ``tests/data/`` with a note on how they were made.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings
from paths import DATA, MODELS

# A test runner started in the background of a script (``cmd &``, nohup) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler; the Ctrl-C tests inject
# SIGINT and check the handlers the commands leave behind, as a terminal user would see them.
# Run them as from a terminal (children then start with the default disposition too).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# "default": what CI runs; "long": many more examples, for a deliberate long run
# (HYPOTHESIS_PROFILE=long python -m pytest ...).
settings.register_profile("default", deadline=None)
settings.register_profile("long", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def models_dir() -> Path:
    return MODELS


@pytest.fixture
def data_dir() -> Path:
    return DATA
