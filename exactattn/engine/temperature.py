"""Temperatures: τ(n) of every head, as certified balls or exact rationals.

A head's temperature is the ``--tau`` override, else its own ``temperature``, else the
model's. Values are checked to be defined and positive at every n they are asked for; a
bad τ(n) is a model error (exit 2) reported before any work is done.
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb, ctx

from exactattn.core.errors import ModelError
from exactattn.model import AttentionLayer, Model
from exactattn.model.expr import Expr, ExprError, LimitError, UndecidedError
from exactattn.results.settings import TauChoice, TauOverride

BASE_PREC = 96

TAU_EXPONENT_LIMIT = 2**21
"""Every τ(n) lies in [2^-2,097,152, 2^2,097,152] (about 10^±631,306; docs/limits.md): its
exact dyadic ends stay small enough (a few hundred KB) for the float filter and the bounds,
which convert them to fractions. Tiny τ inside the range (e^(-10^6) included) take the
usual cheap path (tests/engine/test_tiny_temperatures_certify_quickly.py)."""


def parse_tau(text: str | None) -> TauOverride:
    """A --tau override: an expression in n (``None`` keeps the model's; no "theorem" word:
    :meth:`TauChoice.parse` with ``theorem=False``, for commands that take an expression)."""
    return TauChoice.parse(text, theorem=False).expr


class Temperatures:
    """τ(n) of every head as certified balls, per precision; refuses τ(n) ≤ 0."""

    def __init__(self, model: Model, override: TauChoice | TauOverride) -> None:
        self.model = model
        # a choice's expression (None: the model's own; the theorem's is fixed per length)
        self.override = override.expr if isinstance(override, TauChoice) else override
        self._cache: dict[tuple[int, int], list[list[arb] | None]] = {}

    def expr_for(self, li: int, hi: int) -> tuple[Expr, str]:
        """The expression in force for head ``hi`` of layer ``li`` and its JSON path."""
        if self.override is not None:
            return self.override, "--tau"
        layer = self.model.layers[li]
        assert isinstance(layer, AttentionLayer)
        h = layer.heads[hi]
        if h.temperature is not None:
            return h.temperature, f"layers[{li}].heads[{hi}].temperature"
        return self.model.temperature, "temperature"

    def value(self, expr: Expr, path: str, n: int, prec: int) -> arb:
        try:
            v = expr.eval_arb({"n": n}, prec)
        except LimitError as exc:
            raise ModelError(
                path,
                f"τ({n}) = '{expr.text}' is beyond a size limit: {exc}",
                f"temperatures must lie in [2^-{TAU_EXPONENT_LIMIT:,}, 2^{TAU_EXPONENT_LIMIT:,}] "
                "(docs/limits.md)",
            ) from None
        except UndecidedError as exc:
            raise ModelError(
                path,
                f"τ({n}) cannot be evaluated: {exc}",
                "write the temperature so that no divisor, log or floor argument in it sits "
                "where ball arithmetic cannot decide (like 1/(exp(n) - exp(n))), or pass --tau",
            ) from None
        except ExprError as exc:
            raise ModelError(
                path,
                f"τ({n}) = '{expr.text}' is undefined at n = {n}: {exc}",
                "use a temperature defined for every checked n (or raise --min-n); every "
                "temperature in the file is checked, even one no head uses",
            ) from None
        if v > 0:
            limit = arb(2) ** TAU_EXPONENT_LIMIT
            if v * limit < 1 or v > limit:
                raise ModelError(
                    path,
                    f"τ({n}) = '{expr.text}' ≈ {v.mid().str(3, radius=False)} is outside "
                    f"[2^-{TAU_EXPONENT_LIMIT:,}, 2^{TAU_EXPONENT_LIMIT:,}], the limit on "
                    "temperatures (docs/limits.md)",
                    "use a temperature in that range (errors at τ = 2^-2,097,152 are already "
                    "about e^(-2^2,097,152))",
                )
            return v
        if v <= 0:
            raise ModelError(
                path,
                f"τ({n}) = '{expr.text}' is not positive at n = {n}",
                "temperatures must be > 0 for every checked n",
            )
        raise ModelError(
            path,
            f"cannot certify τ({n}) > 0 for '{expr.text}'",
            "use a temperature that is clearly positive at every checked n (not one equal to 0 "
            "in a way ball arithmetic cannot see, like sqrt(2)^2 - 2), or pass --tau",
        )

    def at(self, n: int, prec: int) -> list[list[arb] | None]:
        """Per layer: None (FFN) or every head's τ(n) as a ball at ``prec`` bits."""
        key = (n, prec)
        if key not in self._cache:
            out: list[list[arb] | None] = []
            for li, layer in enumerate(self.model.layers):
                if isinstance(layer, AttentionLayer):
                    row = []
                    for hi in range(len(layer.heads)):
                        e, path = self.expr_for(li, hi)
                        with ctx.workprec(prec):
                            row.append(self.value(e, path, n, prec))
                    out.append(row)
                else:
                    out.append(None)
            self._cache[key] = out
        return self._cache[key]

    def display(self, n: int) -> arb:
        """The model-level τ(n) shown in reports (the override or the default)."""
        e = self.override if self.override is not None else self.model.temperature
        with ctx.workprec(BASE_PREC):
            return self.value(e, "--tau" if self.override else "temperature", n, BASE_PREC)

    def rational(self, li: int, n: int, count: int) -> list[Fraction] | None:
        """The heads' τ(n) of layer ``li`` as exact rationals, or None when one is not."""
        out = []
        for hi in range(count):
            expr, _ = self.expr_for(li, hi)
            try:
                t = expr.eval_exact({"n": n})
            except ExprError:
                return None
            if t <= 0:
                return None
            out.append(t)
        return out
