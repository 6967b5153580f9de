"""Where things are, for tests in any subfolder of tests/ (issue 37's stage folders).

pytest puts tests/ on ``sys.path`` (it holds ``conftest.py``; the subfolders have no
``__init__.py``), so every test module imports these by bare name: ``from paths import ROOT``.
Build paths from here, never from ``Path(__file__)``: a test's folder says nothing about
where the repository is once tests move between stage folders.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
MODELS = ROOT / "models"
