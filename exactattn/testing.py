"""pytest-friendly assertions for your own regression tests.

::

    from exactattn.testing import assert_faithful, assert_gap

    def test_my_model_is_faithful():
        assert_faithful("models/my_model.json", max_n=6)      # every input, n = 1..6

    def test_my_model_gap():
        assert_gap("models/my_model.json", n=4, expected="1/5")

Each assertion runs the same exhaustive, exact check as ``exactattn check`` and raises
:class:`AssertionError` with a message that names the length, the input and the numbers, so a
failing test says what broke without rerunning anything. Bad models or arguments raise
:class:`~exactattn.core.errors.ExactAttnError` (a broken test setup, not a failed property).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from exactattn.core.errors import UsageError
from exactattn.core.numbers import frac_str
from exactattn.model import Model, load_model, model_from_dict
from exactattn.results import LengthRecord, disagreement_decisions
from exactattn.results.views import GammaWitness, witness_input
from exactattn.run.check import CheckResult, run_check

__all__ = ["assert_bounds_hold", "assert_faithful", "assert_gap"]

ModelLike = Model | str | Path | dict


def _model(model: ModelLike) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, dict):
        return model_from_dict(model)
    if isinstance(model, (str, Path)):
        return load_model(model)
    raise UsageError(f"expected a Model, a path or a model dict, got {type(model).__name__}")


def _word(tokens: Any) -> str:
    return "'" + " ".join(tokens) + "'" if tokens else "?"


def _describe_length(r: LengthRecord) -> list[str]:
    """What went wrong at one length, in words (an empty list when nothing did)."""
    n = r.n
    out = []
    if r.disagreements:
        fd = r.first_disagreement
        hard, soft = disagreement_decisions(fd)
        out.append(
            f"n = {n}: {r.disagreements} input(s) decided differently by soft and hard "
            f"attention; first {_word(None if fd is None else witness_input(fd.data))}: hard "
            f"{hard!r}, soft {soft!r}"
        )
    invariant = r.invariant()
    if invariant == "fails":
        out.append(f"n = {n}: the certified error exceeds 1 before the last layer (ε ≤ 1 fails)")
    ref = r.reference
    if ref is not None and (ref.hard or ref.soft):
        first = None if ref.first is None else witness_input(ref.first.data)
        out.append(
            f"n = {n}: reference mismatches: hard {ref.hard}, soft {ref.soft}; first {_word(first)}"
        )
    if r.undecided or invariant == "undecided":
        fu = r.first_undecided
        out.append(
            f"n = {n}: {r.undecided or 0} comparison(s) could not be certified "
            f"(first input {_word(None if fu is None else witness_input(fu.data))}); this is "
            "not a proof of failure"
        )
    return out


def assert_faithful(
    model: ModelLike,
    max_n: int,
    tau: str | None = None,
    *,
    min_n: int | None = None,
) -> CheckResult:
    """Soft attention (at the model's τ, or ``tau``) decides every input like hard attention.

    Checks every input of length ``min_n..max_n``: no disagreement, ε ≤ 1 where the lemma needs
    it, no reference mismatch, nothing left undecided. Returns the result for further checks.
    """
    m = _model(model)
    result = run_check(m, max_n=max_n, min_n=min_n, tau=tau)
    if result.interrupted:
        raise AssertionError(f"{m.name}: the check was interrupted")
    problems = [p for r in result.lengths for p in _describe_length(r)]
    if problems:
        where = f" at τ = {tau}" if tau else ""
        raise AssertionError(
            f"{m.name} is not faithful{where}:\n  "
            + "\n  ".join(problems[:10])
            + (f"\n  … and {len(problems) - 10} more" if len(problems) > 10 else "")
        )
    return result


def assert_bounds_hold(
    model: ModelLike,
    max_n: int,
    tau: str | None = None,
    *,
    min_n: int | None = None,
) -> CheckResult:
    """The certified error after every layer is within the proved bound (proofs/), every n.

    A violation would mean a bug in the bounds or the engine: the message names n, the layer,
    the measured error and the bound.
    """
    m = _model(model)
    result = run_check(m, max_n=max_n, min_n=min_n, tau=tau, bounds=True)
    problems = []
    for r in result.lengths:
        b = r.bounds
        if b is not None and b.violations:
            errs = {layer.index: layer.error for layer in r.layers}
            for e in b.layers:
                err = errs.get(e.index)
                meas = None if err is None else err.interval().upper_text()
                bound = None if e.bound is None else e.bound.to_json()
                ratio = None if e.measured_over_bound is None else e.measured_over_bound.to_json()
                problems.append(
                    f"n = {r.n}, layer {e.index}: measured error ≤ {meas}, "
                    f"bound {bound}, measured/bound {ratio}"
                )
        if r.invariant() == "fails":
            problems.append(f"n = {r.n}: ε ≤ 1 fails, so the per-layer lemma does not apply")
    if problems:
        raise AssertionError(f"{m.name}: proved bounds violated:\n  " + "\n  ".join(problems))
    return result


def assert_gap(model: ModelLike, n: int, expected: Fraction | int | str | None) -> None:
    """The exact score gap γ(n) equals ``expected`` (``None``: no head has two distinct scores).

    ``expected`` may be a Fraction, an int or a string such as ``"1/5"``.
    """
    m = _model(model)
    if expected is not None and not isinstance(expected, (Fraction, int, str)):
        raise UsageError(
            f"expected must be a Fraction, int, 'p/q' string or None, not {expected!r}"
        )
    want = None if expected is None else Fraction(expected)
    result = run_check(m, max_n=n, min_n=n, hard_only=True)
    r = result.lengths[0]
    got = r.gamma
    if got != want:
        gw = r.gamma_witness
        w = None if gw is None else GammaWitness.from_json(gw.data)
        witness = (
            f" (witness: input {_word(w.input)}, layer {w.layer} head "
            f"{w.head}, query {w.query}, top key {w.top_key} vs key "
            f"{w.other_key})"
            if w is not None
            else ""
        )
        show = "none (no head has two distinct scores)" if got is None else frac_str(got)
        raise AssertionError(
            f"{m.name}: γ({n}) = {show}{witness}, expected "
            f"{'none' if want is None else frac_str(want)}"
        )
