"""The model room: types (``types``), reading and validating files (``load``), and the
expression language (``expr``). ``exactattn.model`` re-exports the first two: every name of
``types.__all__`` and the readers of ``load``."""

from exactattn.model import types
from exactattn.model.load import (
    TOP_KEYS,
    FloatTakenExactly,
    load_model,
    model_from_dict,
    model_from_raw,
)
from exactattn.model.types import *  # noqa: F403 (types.__all__, the one list of model types)

__all__ = [
    "FloatTakenExactly",
    "TOP_KEYS",
    "load_model",
    "model_from_dict",
    "model_from_raw",
]
__all__ += types.__all__
