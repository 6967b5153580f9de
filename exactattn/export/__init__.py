"""Exports into the stacks people run (issue 26): PyTorch (``export.torch``) and
TransformerLens (``export.transformer_lens``).

Nothing here imports torch at import time: torch and transformer-lens are optional extras
(``pip install -e ".[torch]"`` in the checkout, as the README installs exactattn), and the
core must load without them. The submodules import them, and are themselves imported only
when an export or a torch backend is asked for.
"""

from __future__ import annotations

import importlib.util

from exactattn.core.errors import UsageError

DEFAULT_DTYPE = "float64"
"""The dtype both exports round the weights to unless told otherwise: float64, the closest to
the exact model (``--dtype float32`` for what a GPU would run; ``precision`` says what it
costs)."""

EXTRAS = {"torch": "torch", "transformer_lens": "transformer-lens"}
"""The extra of pyproject.toml that installs each optional module."""
HINTS = {
    "torch": "PyTorch 2.3 or newer; an existing install, CPU or CUDA, is kept",
    "transformer-lens": "transformer-lens 3.x, with PyTorch",
}


def install_command(extra: str) -> str:
    """The README's install command with ``extra`` (exactattn installs from its checkout)."""
    return f'pip install -e ".[{extra}]"'


def have(module: str) -> bool:
    """Whether an optional dependency is importable (without importing it)."""
    return importlib.util.find_spec(module) is not None


def require(module: str, what: str, extra: str | None = None) -> None:
    """Refuse, with exit code 2 and the install command, when an optional module is absent.

    ``extra``: the extra to name (default: the module's own); ``export transformer-lens``
    names ``transformer-lens`` even when torch is what is missing, since that extra brings
    both."""
    if not have(module):
        extra = extra or EXTRAS.get(module, "torch")
        raise UsageError(
            f"{what} needs the Python package '{module}', which is not installed "
            f"(fix: in the exactattn checkout, {install_command(extra)}: {HINTS[extra]})"
        )
