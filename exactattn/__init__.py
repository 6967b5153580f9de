"""exactattn: check, exactly, when softmax attention simulates hard attention.

The Python API that the CLI wraps::

    from exactattn import load_model, evaluate, run_check
    model = load_model("model.json")
    result = run_check(model, max_n=8)
    result.to_json()
"""

from exactattn.core.errors import ExactAttnError, ModelError, UsageError
from exactattn.model import Model, load_model, model_from_dict
from exactattn.results import LengthRecord, Verdict, merge_lengths
from exactattn.run.check import CheckResult, estimate, run_check
from exactattn.run.evaluate import Evaluation, evaluate

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
from exactattn.core.version import __version__  # noqa: E402,F401
