"""Exports into the stacks people run (issue 26): PyTorch (``export.torch``) and
TransformerLens (``export.transformer_lens``).

Nothing here imports torch at import time: torch and transformer-lens are optional extras
(``pip install 'exactattn[torch]'``), and the core must load without them. The submodules
import them, and are themselves imported only when an export or a torch backend is asked for.
"""

from __future__ import annotations

import importlib.util

from exactattn.core.errors import UsageError

HINTS = {
    "torch": "install the extra: pip install 'exactattn[torch]' (PyTorch 2.13.0, CPU build)",
    "transformer_lens": "install the extra: pip install 'exactattn[transformer-lens]' "
    "(transformer-lens 3.x with PyTorch 2.13.0)",
}


def have(module: str) -> bool:
    """Whether an optional dependency is importable (without importing it)."""
    return importlib.util.find_spec(module) is not None


def require(module: str, what: str) -> None:
    """Refuse, with exit code 2 and the install command, when an extra is absent."""
    if not have(module):
        raise UsageError(
            f"{what} needs the Python package '{module}', which is not installed; "
            f"{HINTS.get(module, HINTS['torch'])}"
        )
