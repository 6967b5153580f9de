"""The temperature a check runs at, as one typed value from the API to the record.

``--tau`` (or ``run_check(tau=...)``) is parsed once, here, into a :class:`TauChoice`: the
model's own temperatures, an override expression in n, or the theorem's τ_thm(n). The
engines take the choice (``TauChoice.expr``: the expression replacing every head's
temperature, ``None`` for the model's own), and the record's settings write it back as the
text the user gave (``settings.tau_override``), so the JSON bytes do not depend on how the
choice was made.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

from exactattn.core.errors import UsageError
from exactattn.model.expr import Expr, ExprError, constant_expression, parse_expression

THEOREM = "theorem"
"""The ``--tau`` word for the theorem's temperature (Theorem 5, per length)."""

TauKind = Literal["model", "override", "theorem"]

TauOverride: TypeAlias = Expr | None
"""The temperature below a :class:`TauChoice`, as the engines take it: the expression every
head runs at (``None``: each head's own, else the model's). ``TauChoice.expr`` and
:meth:`TauChoice.override_expr` give it; every engine, export and sweep signature spells it
this one way."""


@dataclass(frozen=True)
class TauChoice:
    """Which temperature every head runs at.

    ``kind`` is ``"model"`` (each head's own, else the model's), ``"override"`` (``expr`` for
    every head) or ``"theorem"`` (τ_thm(n), found per length: ``expr`` is then ``None`` until
    :meth:`at_theorem_value` fixes it for one length).
    """

    kind: TauKind = "model"
    expr: Expr | None = None
    unparsed: str | None = None  # read from a result file: an override we cannot parse

    @staticmethod
    def model() -> TauChoice:
        return TauChoice("model")

    @staticmethod
    def override(expr: Expr) -> TauChoice:
        return TauChoice("override", expr)

    @staticmethod
    def theorem() -> TauChoice:
        return TauChoice("theorem")

    @staticmethod
    def parse(text: str | None, theorem: bool = True) -> TauChoice:
        """The ``--tau`` text: ``None`` (the model's), ``"theorem"``, or an expression in n
        (``theorem`` False: commands without a theorem mode read the word as an expression,
        which it is not)."""
        if text is None:
            return TauChoice.model()
        if theorem and text == THEOREM:
            return TauChoice.theorem()
        if text.strip() == THEOREM:  # eval, search, precision: one input or a float pass
            raise UsageError(
                "--tau theorem: this command has no theorem mode (τ_thm(n) is proved from every "
                "input of a length) (fix: `exactattn check --max-n N --bounds` or `exactattn "
                "certify` prints τ_thm(n); give its value here)"
            )
        try:
            return TauChoice.override(parse_expression(text, ("n",), transcendental=True))
        except ExprError as exc:
            raise UsageError(f"--tau: bad expression '{text}': {exc}") from None

    @staticmethod
    def of(tau: TauChoice | TauOverride | str) -> TauChoice:
        """Any accepted form of ``tau`` (a choice, a parsed expression, text, None)."""
        if isinstance(tau, TauChoice):
            return tau
        if isinstance(tau, Expr):
            return TauChoice.override(tau)
        return TauChoice.parse(tau)

    @property
    def is_theorem(self) -> bool:
        return self.kind == "theorem"

    @staticmethod
    def override_expr(tau: TauChoice | TauOverride, command: str) -> TauOverride:
        """The expression an engine runs at, for a command without a theorem mode (None: the
        model's temperatures); a theorem choice is refused, never run at the model's."""
        if not isinstance(tau, TauChoice):
            return tau
        if tau.is_theorem:
            raise UsageError(f"{command} has no --tau theorem mode; give an expression in n")
        return tau.expr

    def at_theorem_value(self, value: Fraction) -> TauChoice:
        """The theorem's choice at one length: the exact constant ``value`` for every head."""
        return TauChoice("theorem", constant_expression(value))

    def record_text(self) -> str | None:
        """``settings.tau_override`` of the result: None, the expression, or "theorem"."""
        if self.kind == "theorem":
            return THEOREM
        if self.unparsed is not None:
            return self.unparsed
        return self.expr.text if self.expr is not None else None

    @staticmethod
    def from_record(text: str | None) -> TauChoice:
        """Read ``settings.tau_override`` back (the inverse of :meth:`record_text`)."""
        return TauChoice.parse(text)


@dataclass(frozen=True)
class CheckSettings:
    """What a check was asked to do (``settings`` of ``exactattn-result/1``)."""

    min_n: int
    max_n: int
    tau: TauChoice = TauChoice()
    hard_only: bool = False
    bounds: bool = False
    find_tau: bool = False
    float_filter: bool = True

    def to_json(self) -> dict[str, object]:
        return {
            "min_n": self.min_n,
            "max_n": self.max_n,
            "tau_override": self.tau.record_text(),
            "hard_only": self.hard_only,
            "bounds": self.bounds,
            "find_tau": self.find_tau,
            "float_filter": self.float_filter,
        }

    @staticmethod
    def from_json(d: dict[str, object], lo: int = 0, hi: int = 0) -> CheckSettings:
        """Read ``settings`` back; an absent key takes its default (``lo``/``hi``: the lengths
        the file holds, for files written before the key existed)."""
        tau = d.get("tau_override")
        mn, mx = d.get("min_n", lo), d.get("max_n", hi)
        return CheckSettings(
            min_n=mn if isinstance(mn, int) else lo,
            max_n=mx if isinstance(mx, int) else hi,
            tau=_recorded_tau(tau if isinstance(tau, str) else None),
            hard_only=bool(d.get("hard_only", False)),
            bounds=bool(d.get("bounds", False)),
            find_tau=bool(d.get("find_tau", False)),
            float_filter=bool(d.get("float_filter", True)),
        )


def _recorded_tau(text: str | None) -> TauChoice:
    """A recorded override; one that does not parse (a file from elsewhere) keeps its text
    to be shown, and runs nothing."""
    try:
        return TauChoice.from_record(text)
    except UsageError:
        return TauChoice("override", None, text)
