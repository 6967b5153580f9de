"""Lengths certified by a stored exhaustive check (issue 35): "certified by enumeration".

A chain of theorems may not reach the smallest lengths (Dyck-2 at its own τ: n = 1, 2, 3,
where the score perturbation of the matching head exceeds its gap, docs/certify.md), while
``exactattn check`` has evaluated every input there. ``certify`` counts such a length as
certified — and says so separately from "certified by the chain", which it still reports —
only when the result file proves it for *this* model at *this* temperature:

* it is an ``exactattn-result/1`` file of the same model name and the same content
  (``model_sha256``, exactattn/model/provenance.py: weights, temperature and claims);
* it evaluated the soft meaning (not ``--hard-only``) at the same τ choice: the model's own
  temperatures, or the same ``--tau`` expression (never ``theorem``: check resolves τ_thm(n)
  from measured values, certify from the claims);
* the whole run ended clean (verdict ``clean``, not interrupted or stopped);
* at that n it enumerated every input (|Σ|^n of them), with no disagreement, nothing
  undecided and no hard tie.

Anything else — another model's file, other content, another τ, a run that found a problem —
certifies nothing, and the answer says why. A result file is evidence only as far as it is
the output of ``check``: certify checks that it is consistent with this model and τ, not that
nobody edited it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import read_json
from exactattn.model import Model
from exactattn.model.provenance import model_sha256
from exactattn.results import RESULT_FORMAT
from exactattn.results.claims import result_model, result_model_sha256
from exactattn.results.settings import TauChoice
from exactattn.results.views import ResultView, format_of

__all__ = ["Enumeration", "read_enumeration"]


@dataclass(frozen=True)
class Enumeration:
    """The lengths a result file certifies for this model and τ (``lengths``), the file as
    the user named it, and why it certifies nothing when it does not (``not_used``)."""

    file: str
    lengths: frozenset[int]
    not_used: str | None = None


def _none(file: str, why: str) -> Enumeration:
    return Enumeration(file, frozenset(), f"{file} certifies no length: {why}")


def read_enumeration(path: str | Path, model: Model, tau: TauChoice, shown: str) -> Enumeration:
    """The lengths ``path`` certifies by enumeration (see the module docstring); ``shown``
    is how the answer names the file. Exit 2 for a file that is not a result, or of another
    model (a wrong argument); an unusable result of this model is reported, not refused."""
    try:
        data: Any = read_json(str(path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--enumerated: cannot read {shown} ({exc})") from None
    if not isinstance(data, dict) or format_of(data) != RESULT_FORMAT:
        raise UsageError(f"--enumerated: {shown} is not an exactattn-result/1 file")
    if result_model(data) != model.name:
        raise UsageError(f"--enumerated: {shown} is a result for another model")
    theirs = result_model_sha256(data)
    if theirs is None:
        return _none(shown, "it does not name the content of the model it checked")
    if theirs != model_sha256(model):
        return _none(shown, "it checked a model with other content (model_sha256 differs)")
    if tau.is_theorem:
        return _none(shown, "τ_thm(n) is not the same temperature for check and for certify")
    try:
        view = ResultView.from_json(data)
    except UsageError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"--enumerated: {shown} is malformed ({exc!r:.80})") from None
    st = view.settings
    if st.hard_only:
        return _none(shown, "it evaluated the hard meaning only (--hard-only)")
    if st.tau.record_text() != tau.record_text():
        mine = tau.record_text() or "the model's own τ"
        theirs_tau = st.tau.record_text() or "the model's own τ"
        return _none(shown, f"it checked at {theirs_tau}, not at {mine}")
    if view.ended_early is not None or view.verdict is None or view.verdict.status != "clean":
        status = view.ended_early or (view.verdict.status if view.verdict else "no verdict")
        return _none(shown, f"the run did not end clean ({status})")
    k = len(model.alphabet)
    good = set()
    for rec in view.lengths:
        n = rec.n
        if not isinstance(rec.inputs, int) or rec.inputs != k**n:
            continue
        if rec.disagreements != 0 or rec.undecided != 0:
            continue
        if rec.tie_positions not in (None, 0):
            continue
        good.add(n)
    return Enumeration(shown, frozenset(good))
