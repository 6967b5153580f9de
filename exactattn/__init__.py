"""exactattn: check, exactly, when softmax attention simulates hard attention.

The Python API that the CLI wraps::

    from exactattn import load_model, evaluate, run_check
    model = load_model("model.json")
    result = run_check(model, max_n=8)
    result.to_json()
"""

from exactattn.check import CheckResult, estimate, run_check
from exactattn.errors import ExactAttnError, ModelError, UsageError
from exactattn.evaluate import Evaluation, evaluate
from exactattn.model import Model, load_model, model_from_dict
from exactattn.results import LengthRecord, Verdict, merge_lengths

__all__ = [
    "CheckResult",
    "Evaluation",
    "ExactAttnError",
    "Model",
    "ModelError",
    "UsageError",
    "LengthRecord",
    "Verdict",
    "estimate",
    "evaluate",
    "merge_lengths",
    "load_model",
    "model_from_dict",
    "run_check",
]
__version__ = "0.2.0"
