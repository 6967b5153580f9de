"""exactattn: check, exactly, when softmax attention simulates hard attention.

The Python API that the CLI wraps::

    from exactattn import load_model, evaluate, run_check
    model = load_model("model.json")
    result = run_check(model, max_n=8)
    result.to_json()
"""

from exactattn.core.guard import start_of_command_line

start_of_command_line()  # before the heavy imports below: a Ctrl-C among them is exit 130

from exactattn.core.errors import ExactAttnError, ModelError, UsageError  # noqa: E402
from exactattn.model import FloatTakenExactly, Model, load_model, model_from_dict  # noqa: E402
from exactattn.results import LengthRecord, Verdict, merge_lengths  # noqa: E402
from exactattn.run.check import CheckResult, estimate, run_check  # noqa: E402
from exactattn.run.evaluate import Evaluation, evaluate  # noqa: E402

__all__ = [
    "CheckResult",
    "Evaluation",
    "ExactAttnError",
    "FloatTakenExactly",
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
