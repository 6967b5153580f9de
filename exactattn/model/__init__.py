"""The model room: types (``types``), reading and validating files (``load``), and the
expression language (``expr``). ``exactattn.model`` re-exports the first two."""

from exactattn.model.load import (
    TOP_KEYS,
    FloatTakenExactly,
    load_model,
    model_from_dict,
    model_from_raw,
)
from exactattn.model.types import (
    DEFAULT_VALUE_TOLERANCE,
    HARD_RULES,
    MASKS,
    AcceptOutput,
    ArgmaxOutput,
    AttentionLayer,
    FFNLayer,
    Head,
    Layer,
    Mat,
    Model,
    Output,
    PositionEmbedding,
    Reference,
    ValueOutput,
    Vec,
)

__all__ = [
    "AcceptOutput",
    "ArgmaxOutput",
    "AttentionLayer",
    "DEFAULT_VALUE_TOLERANCE",
    "FFNLayer",
    "FloatTakenExactly",
    "HARD_RULES",
    "Head",
    "Layer",
    "MASKS",
    "Mat",
    "Model",
    "Output",
    "PositionEmbedding",
    "Reference",
    "TOP_KEYS",
    "ValueOutput",
    "Vec",
    "load_model",
    "model_from_dict",
    "model_from_raw",
]
