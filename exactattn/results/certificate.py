"""The ``exactattn-certificate/1`` records: Theorems 3–5 at one length, or over a range.

Typed and exact until the JSON writer: rationals are ``Fraction`` (written as short exact
text or, when huge, a decimal rounded the safe way), certified values are arb balls written
outward. A record read back from a file holds the written text (``str``) instead, so
``from_json(d).to_json() == d``. Only this module spells the certificate's keys; the
producer is :mod:`exactattn.certificate.certify`, the readers ``exactattn certify`` and
:mod:`exactattn.report.certificate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from flint import arb

from exactattn.core.numbers import arb_interval, arb_upper_str, frac_str
from exactattn.model.claimed import q_text

CERT_FORMAT = "exactattn-certificate/1"

Up = arb | str
"""A certified value written as its outward upper end (``str``: as read from a file)."""
Ball = arb | tuple[str, str]
"""A certified value written as [lower, upper] (``tuple``: the two ends as read)."""
Q = Fraction | str
"""An exact rational (``str``: as read)."""


def up_text(x: Up) -> str:
    """A certified value's written upper end."""
    return x if isinstance(x, str) else arb_upper_str(x)


_up = up_text


def _ball(x: Ball) -> dict[str, str]:
    if isinstance(x, tuple):
        return {"lower": x[0], "upper": x[1]}
    return arb_interval(x)


def _ball_in(d: dict[str, str]) -> tuple[str, str]:
    return d["lower"], d["upper"]


def ball_upper(x: Ball) -> str:
    """The written upper end of a ball (what the terminal and the reports show)."""
    return _ball(x)["upper"]


def ball_ends(x: Ball) -> tuple[str, str]:
    """The written [lower, upper] of a ball."""
    b = _ball(x)
    return b["lower"], b["upper"]


def q_written(x: Q, up: bool) -> str:
    """A rational as written: exact when short, else a decimal rounded ``up`` or down."""
    return x if isinstance(x, str) else q_text(x, up)


def exact_written(x: Q) -> str:
    """A rational as written exactly ("p/q")."""
    return x if isinstance(x, str) else frac_str(x)


def _q(x: Q | None, up: bool) -> str | None:
    if x is None or isinstance(x, str):
        return x
    return q_text(x, up)


def _frac(x: Q) -> str:
    return x if isinstance(x, str) else frac_str(x)


@dataclass(frozen=True)
class ProofStep:
    """One step of the argument and where it is proved."""

    step: str
    statement: str
    proved_in: str

    def to_json(self) -> dict[str, str]:
        return {"step": self.step, "statement": self.statement, "proved_in": self.proved_in}

    @staticmethod
    def from_json(d: dict[str, str]) -> ProofStep:
        return ProofStep(d["step"], d["statement"], d["proved_in"])


#: what certified a length (``certified_by``): the per-coordinate chain (Theorem S), the
#: one-number chain (Theorems 3(b), 4(iii)), the paper-shaped one (Theorem 4(ii)), or a stored
#: exhaustive check of the same model at the same τ ("enumeration", with its file)
BY_SHARP = "Theorem S (per-coordinate chain)"
BY_3B = "Theorem 3(b) + 4(iii) (one-number chain)"
BY_4II = "Theorem 4(ii)"
BY_ENUMERATION = "enumeration"


@dataclass(frozen=True)
class LengthVerdict:
    """Whether every input of length n is certified, and why (``--range``'s unit);
    ``certified_by`` says which argument did (None when not certified)."""

    n: int
    certified: bool
    reason: str
    certified_by: str | None = None

    @property
    def status(self) -> str:
        return "certified" if self.certified else "not certified"

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "status": self.status,
            "reason": self.reason,
            "certified_by": self.certified_by,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> LengthVerdict:
        return LengthVerdict(d["n"], d["status"] == "certified", d["reason"], d.get("certified_by"))


@dataclass(frozen=True)
class SharpHead:
    """One head in Theorem S at n: σ (how far its scores moved), the tail R at σ = 0, the
    profile's first gap a, τ, which weight bound was used ("mass" = S3(b), "tanh" = S3(a),
    "flat") and its factor (the soft mass off the top, or ½‖p̃ − h‖₁)."""

    layer: int
    head: int
    option: str
    sigma: Up
    tail: Up | None
    gap: Q | None
    tau: Up
    factor: Up | None

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "head": self.head,
            "option": self.option,
            "sigma": _up(self.sigma),
            "tail": None if self.tail is None else _up(self.tail),
            "gap": None if self.gap is None else _q(self.gap, False),
            "tau": _up(self.tau),
            "factor": None if self.factor is None else _up(self.factor),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> SharpHead:
        return SharpHead(
            d["layer"],
            d["head"],
            d["option"],
            d["sigma"],
            d["tail"],
            d["gap"],
            d["tau"],
            d["factor"],
        )


@dataclass(frozen=True)
class SharpChain:
    """Theorem S at n (proofs/07-sharp-chain.md): the read-out bound (S6), the same chain with
    every score perturbation's effect on the weights removed (``tail_only``), which term
    dominates ("tail": the error the tails make with exact scores; "propagation": how much
    the score perturbations add), the largest per-coordinate error after each layer, and
    the heads."""

    readout_bound: Up
    tail_only: Up
    dominant: str
    layers: tuple[Up, ...]
    heads: tuple[SharpHead, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "readout_bound": _up(self.readout_bound),
            "tail_only": _up(self.tail_only),
            "dominant": self.dominant,
            "layers": [_up(x) for x in self.layers],
            "heads": [h.to_json() for h in self.heads],
        }

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> SharpChain | None:
        if d is None:
            return None
        return SharpChain(
            d["readout_bound"],
            d["tail_only"],
            d["dominant"],
            tuple(d["layers"]),
            tuple(SharpHead.from_json(h) for h in d["heads"]),
        )


@dataclass(frozen=True)
class GridPoint:
    """A grid temperature τ = 2^(k/steps); ``reason`` why it fails (first failure only)."""

    k: int
    tau: Ball
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"k": self.k, "tau": _ball(self.tau)}
        if self.reason is not None:
            d["reason"] = self.reason
        return d

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> GridPoint | None:
        if d is None:
            return None
        return GridPoint(d["k"], _ball_in(d["tau"]), d.get("reason"))


GRID_NOTE = (
    "each listed grid τ from τ_thm(n) up to last_certified was evaluated and "
    "certified; nothing between grid points is claimed"
)


@dataclass(frozen=True)
class TauGrid:
    """The warm-up from τ_thm(n) on the grid τ = 2^(k/steps)."""

    steps: int
    last_certified: GridPoint | None
    first_not_certified: GridPoint | None

    @property
    def grid(self) -> str:
        return f"2^(k/{self.steps})"

    def to_json(self) -> dict[str, Any]:
        last, fail = self.last_certified, self.first_not_certified
        return {
            "grid": self.grid,
            "last_certified": None if last is None else last.to_json(),
            "first_not_certified": None if fail is None else fail.to_json(),
            "note": GRID_NOTE,
        }

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> TauGrid | None:
        if d is None:
            return None
        steps = int(d["grid"].removeprefix("2^(k/").removesuffix(")"))
        last = GridPoint.from_json(d["last_certified"])
        return TauGrid(steps, last, GridPoint.from_json(d["first_not_certified"]))


@dataclass(frozen=True)
class ClaimsAtN:
    """The claimed bounds evaluated at n (γ and μ rounded down, x_max up when huge)."""

    gamma_lower: Q
    x_max_upper: Q
    margin_lower: Q | None

    def to_json(self) -> dict[str, Any]:
        return {
            "gamma_lower": _q(self.gamma_lower, False),
            "x_max_upper": _q(self.x_max_upper, True),
            "margin_lower": _q(self.margin_lower, False),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ClaimsAtN:
        return ClaimsAtN(d["gamma_lower"], d["x_max_upper"], d["margin_lower"])


@dataclass(frozen=True)
class Constants:
    """L, T, m, the paper's K, X, the read-out constant C, ε* and Lemma G's input bounds."""

    L: int
    T: int
    m: int
    K: Q
    X: Q
    readout_lipschitz: Q
    eps_star: Q
    layer_input_bounds: tuple[Q, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "L": self.L,
            "T": self.T,
            "m": self.m,
            "K": _frac(self.K),
            "X": _q(self.X, True),
            "readout_lipschitz": _frac(self.readout_lipschitz),
            "eps_star": _q(self.eps_star, False),
            "layer_input_bounds": [_q(x, True) for x in self.layer_input_bounds],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Constants:
        return Constants(
            d["L"],
            d["T"],
            d["m"],
            d["K"],
            d["X"],
            d["readout_lipschitz"],
            d["eps_star"],
            tuple(d["layer_input_bounds"]),
        )


@dataclass(frozen=True)
class LayerBound:
    """Theorem 3(b)'s error bound after one layer, for every input of length n."""

    index: int
    kind: str
    error_bound: Up

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "error_bound": _up(self.error_bound)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> LayerBound:
        return LayerBound(d["index"], d["kind"], d["error_bound"])


@dataclass(frozen=True)
class EpsLe1:
    """Where ε ≤ 1 is known: after every feeding layer; Theorem 4(ii)'s invariant."""

    certified_after_every_feeding_layer: bool
    theorem_4ii_invariant: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "theorem_4iii_needs_it": False,
            "certified_after_every_feeding_layer": self.certified_after_every_feeding_layer,
            "theorem_4ii_invariant": self.theorem_4ii_invariant,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> EpsLe1:
        return EpsLe1(d["certified_after_every_feeding_layer"], d["theorem_4ii_invariant"])


@dataclass(frozen=True)
class PaperChain:
    """Theorem 4(ii): B_ℓ = b Σ_{k<ℓ} a^k with one τ for every head (or why it does not apply)."""

    applies: bool
    why: str | None = None
    a: Up | None = None
    b: Up | None = None
    layers: tuple[Up, ...] = ()
    invariant: bool | None = None  # B_{L−1} ≤ 1

    def to_json(self) -> dict[str, Any]:
        if not self.applies:
            return {"applies": False, "why": self.why}
        assert self.a is not None and self.b is not None
        return {
            "applies": True,
            "a": _up(self.a),
            "b": _up(self.b),
            "layers": [_up(x) for x in self.layers],
            "invariant_B_L_minus_1_le_1": self.invariant,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> PaperChain:
        if not d["applies"]:
            return PaperChain(False, d["why"])
        return PaperChain(
            True,
            None,
            d["a"],
            d["b"],
            tuple(d["layers"]),
            d["invariant_B_L_minus_1_le_1"],
        )


TAU_THEOREM_NOTE = "Theorem 5: every τ ≤ τ_thm(n) certifies length n"


@dataclass(frozen=True)
class LengthCertificate:
    """Everything :func:`exactattn.certificate.certify.certify_length` derives at n."""

    verdict: LengthVerdict
    tau_grid: TauGrid | None
    tau: str  # the temperature as the user reads it
    tau_exact: str | None  # the exact τ to hand to ``check --tau`` (theorem mode), or --tau
    tau_values: tuple[tuple[Ball, ...] | None, ...]  # per layer, per head
    claims_at_n: ClaimsAtN
    constants: Constants
    layers: tuple[LayerBound, ...]
    eps_le_1: EpsLe1
    paper_chain: PaperChain
    final_error_bound: Up
    tau_theorem: Ball
    tau_theorem_lower: Q
    sharp_chain: SharpChain | None = None

    def to_json(self) -> dict[str, Any]:
        g = self.tau_grid
        return {
            **self.verdict.to_json(),
            "tau_grid": None if g is None else g.to_json(),
            "tau": self.tau,
            "tau_exact": self.tau_exact,
            "tau_values": [
                None if row is None else [_ball(t) for t in row] for row in self.tau_values
            ],
            "claims_at_n": self.claims_at_n.to_json(),
            "constants": self.constants.to_json(),
            "layers": [x.to_json() for x in self.layers],
            "eps_le_1": self.eps_le_1.to_json(),
            "paper_chain": self.paper_chain.to_json(),
            "final_error_bound": _up(self.final_error_bound),
            "tau_theorem": _ball(self.tau_theorem),
            "tau_theorem_lower": _q(self.tau_theorem_lower, False),
            "tau_theorem_note": TAU_THEOREM_NOTE,
            "sharp_chain": None if self.sharp_chain is None else self.sharp_chain.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> LengthCertificate:
        return LengthCertificate(
            LengthVerdict.from_json(d),
            TauGrid.from_json(d["tau_grid"]),
            d["tau"],
            d["tau_exact"],
            tuple(
                None if row is None else tuple(_ball_in(t) for t in row) for row in d["tau_values"]
            ),
            ClaimsAtN.from_json(d["claims_at_n"]),
            Constants.from_json(d["constants"]),
            tuple(LayerBound.from_json(x) for x in d["layers"]),
            EpsLe1.from_json(d["eps_le_1"]),
            PaperChain.from_json(d["paper_chain"]),
            d["final_error_bound"],
            _ball_in(d["tau_theorem"]),
            d["tau_theorem_lower"],
            SharpChain.from_json(d.get("sharp_chain")),
        )


@dataclass(frozen=True)
class Provenance:
    """Whether the claims' ``proofs/`` citations are about this model: its content digest
    (``model_sha256``), the builder its ``built_by`` names (None: none recorded), whether
    ``certify`` rebuilt it and found the same model (``rederived``), and why not (``reason``)."""

    model_sha256: str
    built_by: str | None
    rederived: bool
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "model_sha256": self.model_sha256,
            "built_by": self.built_by,
            "rederived": self.rederived,
            "reason": self.reason,
        }

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> Provenance | None:
        """None for a certificate written before provenance was recorded."""
        if d is None:
            return None
        return Provenance(d["model_sha256"], d["built_by"], d["rederived"], d["reason"])


@dataclass(frozen=True)
class Certificate:
    """A whole ``exactattn-certificate/1`` document for one length."""

    model: str
    model_path: str | None
    claims: dict[str, Any]  # the model file's claims object, as the model format writes it
    conditional_on: tuple[str, ...]
    checked_to: int | None  # claims also verified by enumeration for n ≤ this
    proof_chain: tuple[ProofStep, ...]
    body: LengthCertificate
    checked_in: str | None = None  # the result file that did (``exactattn certify``)
    says_where_checked: bool = False  # whether ``checked_in`` is written (the CLI writes it)
    provenance: Provenance | None = None  # None only in files written before it existed
    checked_not_used: str | None = None  # why a result file found was not trusted

    @property
    def n(self) -> int:
        return self.body.verdict.n

    @property
    def certified(self) -> bool:
        return self.body.verdict.certified

    def with_checked_in(self, path: str | None, not_used: str | None = None) -> Certificate:
        return replace(self, checked_in=path, says_where_checked=True, checked_not_used=not_used)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": CERT_FORMAT,
            "model": self.model,
            "model_path": self.model_path,
            "claims": self.claims,
            "conditional_on": list(self.conditional_on),
            **({"provenance": self.provenance.to_json()} if self.provenance else {}),
            "checked_by_enumeration_to": self.checked_to,
            "proof_chain": [s.to_json() for s in self.proof_chain],
            **self.body.to_json(),
        }
        if self.says_where_checked:
            d["checked_in"] = self.checked_in
        if self.checked_not_used is not None:
            d["checked_not_used"] = self.checked_not_used
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Certificate:
        return Certificate(
            d["model"],
            d["model_path"],
            d["claims"],
            tuple(d["conditional_on"]),
            d["checked_by_enumeration_to"],
            tuple(ProofStep.from_json(s) for s in d["proof_chain"]),
            LengthCertificate.from_json(d),
            d.get("checked_in"),
            "checked_in" in d,
            Provenance.from_json(d.get("provenance")),
            d.get("checked_not_used"),
        )


@dataclass(frozen=True)
class RangeRun:
    """What ``exactattn certify --range`` adds: time taken and where the claims were checked."""

    seconds: float
    checked_to: int | None
    checked_in: str | None
    checked_not_used: str | None = None  # why a result file found was not trusted


@dataclass(frozen=True)
class EnumeratedLengths:
    """Which lengths of a range a stored exhaustive check certified (not a chain): the file,
    the lengths, and why the file certified nothing when it did not (issue 35)."""

    file: str | None
    lengths: tuple[int, ...] = ()
    not_used: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "lengths": list(self.lengths), "not_used": self.not_used}

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> EnumeratedLengths | None:
        if d is None:
            return None
        return EnumeratedLengths(d["file"], tuple(d["lengths"]), d["not_used"])


@dataclass(frozen=True)
class CertificateRange:
    """Every n of a range evaluated (no monotonicity assumed) up to the first failure."""

    model: str
    lo: int
    hi: int
    tau: str
    evaluated: int
    first_failure: LengthVerdict | None
    claims: dict[str, Any]
    conditional_on: tuple[str, ...]
    proof_chain: tuple[ProofStep, ...]
    run: RangeRun | None = None
    provenance: Provenance | None = None  # None only in files written before it existed
    enumerated: EnumeratedLengths | None = None

    @property
    def certified_through(self) -> int:
        f = self.first_failure
        return f.n - 1 if f is not None else self.hi

    def to_json(self) -> dict[str, Any]:
        f = self.first_failure
        d: dict[str, Any] = {
            "format": CERT_FORMAT,
            "model": self.model,
            "range": [self.lo, self.hi],
            "tau": self.tau,
            "evaluated": self.evaluated,
            "first_failure": None if f is None else f.to_json(),
            "certified_through": self.certified_through,
            "claims": self.claims,
            "conditional_on": list(self.conditional_on),
            **({"provenance": self.provenance.to_json()} if self.provenance else {}),
            "proof_chain": [s.to_json() for s in self.proof_chain],
            "certified_by_enumeration": None
            if self.enumerated is None
            else self.enumerated.to_json(),
        }
        if self.run is not None:
            d["seconds"] = self.run.seconds
            d["checked_by_enumeration_to"] = self.run.checked_to
            d["checked_in"] = self.run.checked_in
            if self.run.checked_not_used is not None:
                d["checked_not_used"] = self.run.checked_not_used
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CertificateRange:
        f = d["first_failure"]
        lo, hi = d["range"]
        run = None
        if "seconds" in d:
            run = RangeRun(
                d["seconds"],
                d["checked_by_enumeration_to"],
                d["checked_in"],
                d.get("checked_not_used"),
            )
        return CertificateRange(
            d["model"],
            lo,
            hi,
            d["tau"],
            d["evaluated"],
            None if f is None else LengthVerdict.from_json(f),
            d["claims"],
            tuple(d["conditional_on"]),
            tuple(ProofStep.from_json(s) for s in d["proof_chain"]),
            run,
            Provenance.from_json(d.get("provenance")),
            EnumeratedLengths.from_json(d.get("certified_by_enumeration")),
        )


@dataclass(frozen=True)
class GridSummary:
    """One length of the claims ledger's comparison (issue 35): at the model's own τ the
    verdict (and who certified it), the own τ, and the τ grid (the last certified grid τ is
    τ_cert(n))."""

    n: int
    own: LengthVerdict
    own_tau: Up
    grid: TauGrid | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "own": self.own.to_json(),
            "own_tau": _up(self.own_tau),
            "tau_grid": None if self.grid is None else self.grid.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> GridSummary:
        return GridSummary(
            d["n"],
            LengthVerdict.from_json(d["own"]),
            d["own_tau"],
            TauGrid.from_json(d["tau_grid"]),
        )

    def cert_text(self) -> str | None:
        """τ_cert(n) as written (the last certified grid τ's upper end), None without one."""
        g = self.grid
        if g is None or g.last_certified is None:
            return None
        return ball_upper(g.last_certified.tau)


def certificate_from_json(d: Any) -> Certificate | CertificateRange:
    """A certificate file's record; a ``UsageError``-worthy ``ValueError`` when incomplete."""
    if not isinstance(d, dict) or d.get("format") != CERT_FORMAT:
        raise ValueError("not an exactattn-certificate/1 file")
    try:
        return CertificateRange.from_json(d) if "range" in d else Certificate.from_json(d)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a complete exactattn-certificate/1 file ({e!r:.80})") from None


def steps(items: Sequence[tuple[str, str, str]]) -> tuple[ProofStep, ...]:
    """Proof steps from (step, statement, proved_in) triples."""
    return tuple(ProofStep(*t) for t in items)


def ledger_certify_json(own: Any, theorem: Any, grid: list[GridSummary]) -> dict[str, Any]:
    """reports/claims/<stem>.certify.json: the claims ledger's ranges at the own τ and at
    τ_thm(n), and the per-n comparison (issue 35)."""
    return {"own": own, "theorem": theorem, "grid": [g.to_json() for g in grid]}


def ledger_grid(data: Any) -> list[Any]:
    """The per-n comparison entries of a stored ledger certify file ([] when absent)."""
    return data.get("grid", []) if isinstance(data, dict) else []
