"""``exactattn certify``: Theorems 3–5 of ``proofs/`` at one length N, from the claims alone.

No input is enumerated. The claims of the model file give, for length N, a lower bound γ on
every head's gap, an upper bound X₀ on the embedding and a lower bound μ on the read-out margin.
Lemma G carries X₀ through the layers (a bound on every layer's hard input); Theorem 3(b),
valid for every ε ≥ 0, gives each layer's error bound with at most T − 1 keys below the top
(Theorem 4(iii): ε_ℓ ≤ E_ℓ for *every* input of length N); Theorem 4(ii) gives the paper-shaped
B_ℓ and its ε ≤ 1 invariant; Corollary 5 turns C·ε_L < μ into "every decision is preserved";
Theorem 5 gives τ_thm(N), below which every τ is certified. All numbers are exact rationals or
arb balls rounded outward; nothing is a float.

(H3) is not provable from the numeric claims: a model with a leftmost/rightmost head gets no
certificate (Theorem 3(c): with a tie at the top no temperature works), as ``check --tau
theorem`` refuses at a length where such a head ties — unless its claims include
``unique_top`` (every such head's top score is unique), as the RASP compiler proves
(proofs/claims.md, Proposition R); then each such head equals average-hard attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, overload

from flint import arb, ctx

import exactattn.bounds as B
from exactattn.bounds.chain import ChainResult, HeadDiagnostic
from exactattn.bounds.compare import layer_constants, readout_constant
from exactattn.certificate.enumerated import Enumeration
from exactattn.certificate.rederive import Rederivation, conditional_keys, rederive
from exactattn.certificate.sharp import SharpPlan
from exactattn.core.errors import ModelError, UsageError
from exactattn.core.numbers import arb_endpoints, arb_upper_str, to_arb
from exactattn.engine.temperature import Temperatures
from exactattn.model import AttentionLayer, Model, ValueOutput
from exactattn.model.claimed import (
    CLAIM_MEANING,
    COORD_RANGES,
    HEAD_PROFILES,
    UNIQUE_TOP,
    ModelClaim,
    claim_exact,
    claim_value,
    q_text,
)
from exactattn.results.certificate import (
    BY_3B,
    BY_4II,
    BY_ENUMERATION,
    BY_SHARP,
    CERT_FORMAT,
    Certificate,
    CertificateRange,
    ClaimsAtN,
    Constants,
    EnumeratedLengths,
    EpsLe1,
    GridPoint,
    LayerBound,
    LengthCertificate,
    LengthVerdict,
    PaperChain,
    ProofStep,
    Provenance,
    SharpChain,
    SharpHead,
    TauGrid,
)
from exactattn.results.settings import TauChoice, TauOverride

__all__ = ["CERT_FORMAT", "Prepared", "certificate", "certify_length", "certify_range"]
PREC = 128  # bits of the balls; every reported bound is an outward-rounded upper end

PROOF_FILES = {
    "lemma_g": "proofs/03-layer-perturbation.md",
    "thm3b": "proofs/03-layer-perturbation.md",
    "thm4": "proofs/04-multilayer.md",
    "thm5": "proofs/05-temperature.md",
    "thmS": "proofs/07-sharp-chain.md",
}


def _need_claims(model: Model) -> Any:
    cl = model.claims
    if cl is None:
        raise ModelError(
            "claims",
            "the model has no claimed bounds, so no length can be certified without enumeration",
            'add "claims": {"gamma_lower": {"expr": …, "justification": …}, "x_max_upper": {…}'
            + (', "margin_lower": {…}' if model.output.kind != "value" else "")
            + "} (docs/model-format.md), or rebuild it with `exactattn build`",
        )
    return cl


def refuse_unless_h3(model: Model) -> None:
    """No certificate for leftmost/rightmost heads: (H3) cannot be shown without enumeration,
    unless the claims include ``unique_top`` (then the proof of H3 is the claim's)."""
    if model.claims is not None and model.claims.unique_top is not None:
        return
    for li, layer in enumerate(model.layers):
        if isinstance(layer, AttentionLayer):
            for hi, h in enumerate(layer.heads):
                if h.hard != "average":
                    raise UsageError(
                        f"no certificate: layers[{li}].heads[{hi}] is '{h.hard}'; without "
                        "enumeration nothing shows that its top score is unique (H3), and with a "
                        "tie at the top no temperature makes softmax reproduce it (proofs/, "
                        "Thm 3(c)), as `check --tau theorem` refuses; a proved H3 is the claim "
                        '"unique_top" (docs/model-format.md)'
                    )


@dataclass(frozen=True)
class Prepared:
    """What does not depend on n: constants, read-out constant, H3 checked, claims present,
    and whether the model is what its builder produces (``rederived``: rederive.py)."""

    model: Model
    consts: list[B.LayerConstants]
    K: Fraction
    C: Fraction
    claims: Any
    rederived: Rederivation
    sharp: SharpPlan  # Theorem S's plan (exactattn/certificate/sharp.py)

    @staticmethod
    def of(model: Model) -> Prepared:
        cl = _need_claims(model)
        refuse_unless_h3(model)
        cs = layer_constants(model)
        # a model without layers (a compiled program of token tests only) has K = 1, unused
        K = max((B.paper_K(c) for c in cs), default=Fraction(1))
        return Prepared(
            model, cs, K, readout_constant(model), cl, rederive(model), SharpPlan.of(model)
        )

    @property
    def conditional_on(self) -> tuple[str, ...]:
        return conditional_keys(self.claims, self.rederived)

    @property
    def provenance(self) -> Provenance:
        r = self.rederived
        return Provenance(r.model_sha256, r.builder, r.rederived, r.reason)


def _lower(c: ModelClaim, n: int) -> Fraction:
    ex = claim_exact(c, n)
    return ex if ex is not None else arb_endpoints(claim_value(c, n, PREC))[0]


def _upper(c: ModelClaim, n: int) -> Fraction:
    ex = claim_exact(c, n)
    return ex if ex is not None else arb_endpoints(claim_value(c, n, PREC))[1]


def _taus(model: Model, override: TauOverride, n: int) -> list[list[arb] | None]:

    return Temperatures(model, override).at(n, PREC)


def _u(x: arb) -> str:
    return arb_upper_str(x)


@overload
def certify_length(
    prep: Prepared,
    n: int,
    tau: TauChoice | str | None = None,
    brief: Literal[False] = False,
    tau_ball: arb | None = None,
    enumeration: Enumeration | None = None,
) -> LengthCertificate: ...


@overload
def certify_length(
    prep: Prepared,
    n: int,
    tau: TauChoice | str | None,
    brief: Literal[True],
    tau_ball: arb | None = None,
    enumeration: Enumeration | None = None,
) -> LengthVerdict: ...


@overload
def certify_length(
    prep: Prepared,
    n: int,
    tau: TauChoice | str | None = None,
    *,
    brief: Literal[True],
    tau_ball: arb | None = None,
    enumeration: Enumeration | None = None,
) -> LengthVerdict: ...


def certify_length(
    prep: Prepared,
    n: int,
    tau: TauChoice | str | None = None,
    brief: bool = False,
    tau_ball: arb | None = None,
    enumeration: Enumeration | None = None,
) -> LengthCertificate | LengthVerdict:
    """The certificate for every input of length n (a ``LengthCertificate`` record).

    ``tau``: a :class:`~exactattn.results.settings.TauChoice` or its text: None (the model's
    temperatures), "theorem" (the lower end of τ_thm(n)) or an expression in n;
    ``tau_ball`` (internal): one ball for every head, overriding ``tau``.
    ``brief``: only what ``--range`` and the τ grid need (a ``LengthVerdict``).
    ``enumeration``: a stored exhaustive check of this model at this τ
    (:mod:`exactattn.certificate.enumerated`): a length it covers that no chain certifies is
    "certified by enumeration", said apart from the chains (never at a grid τ).
    """

    choice = TauChoice.of(tau)
    model, cl = prep.model, prep.claims
    if n < cl.from_n:
        raise UsageError(f"the claims hold for n >= {cl.from_n} (claims.from_n), not n = {n}")
    model.check_length(n)
    with ctx.workprec(PREC):
        gamma = _lower(cl.gamma_lower, n)
        if gamma <= 0:
            raise ModelError(
                "claims.gamma_lower.expr",
                f"the claimed lower bound on γ({n}) is {q_text(gamma, False)}, not > 0",
                "a gap bound must be positive where a certificate is asked for",
            )
        x0 = _upper(cl.x_max_upper, n)
        act = _upper(cl.activation_upper, n) if cl.activation_upper is not None else None
        for key, bound in (("x_max_upper", x0), ("activation_upper", act)):
            if bound is not None and bound < 0:  # |entries| ≤ a negative number: false
                raise ModelError(
                    f"claims.{key}.expr",
                    f"the claimed upper bound at n = {n} is {q_text(bound, False)}, below 0",
                    "a bound on absolute values must be >= 0 where a certificate is asked for",
                )
        mu = _lower(cl.margin_lower, n) if cl.margin_lower is not None else None
        T = model.length(n)
        m = T - 1
        # Lemma G: a bound on the hard input of every layer (or the claimed activation bound,
        # when it is smaller)
        x_in = [x0]
        for c in prep.consts:
            a, cc = c.growth
            g = a * x_in[-1] + cc
            x_in.append(g if act is None else min(g, act))
        att = [li for li, layer in enumerate(model.layers) if isinstance(layer, AttentionLayer)]
        X = max([x_in[li] for li in att] + [Fraction(1)])
        L = len(model.layers)
        # ε* as in bounds_check.eps_star (C is computed once, in Prepared)
        C = prep.C
        es = Fraction(1, 2) if mu is None or mu <= 0 or C == 0 else min(mu / C, Fraction(1)) / 2
        tau_thm = (
            (B.tau_theorem(L, prep.K, X, gamma, m, es) if L else arb(1))  # no layer: soft = hard
            if choice.is_theorem or not brief
            else None
        )
        if tau_ball is not None:
            taus = [
                None if not isinstance(layer, AttentionLayer) else [tau_ball] * len(layer.heads)
                for layer in model.layers
            ]
            tau_text = arb_upper_str(tau_ball)
        elif choice.is_theorem:
            assert tau_thm is not None
            t_low = arb_endpoints(tau_thm)[0]
            taus = [  # the exact lower end for every head (no detour through text)
                None
                if not isinstance(layer, AttentionLayer)
                else [to_arb(t_low)] * len(layer.heads)
                for layer in model.layers
            ]
            tau_text = f"theorem (τ_thm({n}) lower end, {arb_upper_str(to_arb(t_low))})"
        else:
            taus = _taus(model, choice.expr, n)
            tau_text = choice.record_text() or model.temperature.text
        out = model.output
        if isinstance(out, ValueOutput):
            limit = to_arb(out.tolerance)
            target = f"the tolerance {q_text(out.tolerance, False)}"
        else:
            assert mu is not None
            limit = to_arb(mu)
            target = f"the claimed margin {q_text(mu, False)}"
        sharp = None
        if brief and not choice.is_theorem:
            # a range or a grid τ: Theorem S first (away from τ_thm the one-number chain does
            # not certify, and it costs a third of Theorem S)
            sharp = prep.sharp.at(n, gamma, x_in, taus, diagnose=False)
            if _sharp_certifies(sharp, out, limit):
                return LengthVerdict(n, True, _sharp_reason(sharp, out, target), BY_SHARP)
        # Theorem 3(b) per layer, Theorem 4(iii): ε_ℓ ≤ E_ℓ for every input of length n
        eps: arb = arb(0)
        chain = []
        for li, c in enumerate(prep.consts):
            if c.kind == "attention":
                hs = c.heads or ()
                row = taus[li]
                assert row is not None
                # a head with QᵀK = 0 and Kᵀb_q = 0 scores every key alike: no lower score
                flat_h = [h.beta == 0 and h.beta_bias_q == 0 for h in hs]
                gaps = [None if f else gamma for f in flat_h]
                nonmax = [0 if f else m for f in flat_h]
                bnd = B.attention_layer_bound(c, x_in[li], eps, row, gaps, nonmax, [True] * len(hs))
                assert bnd is not None  # average heads only (refuse_unless_h3)
            else:
                bnd = B.ffn_layer_bound(c, eps)
            eps = bnd
            chain.append(bnd)
        # Theorem 4(ii): one τ for every head, B_ℓ = b Σ_{k<ℓ} a^k, invariant B_{L−1} ≤ 1
        flat = [t for row in taus if row is not None for t in row]
        same = all(t.mid() == flat[0].mid() and t.rad() == flat[0].rad() for t in flat)
        paper: PaperChain
        b_final: arb | None = None
        if not flat or not same:
            paper = PaperChain(False, "heads have different temperatures")
        elif not flat[0] <= 1:
            paper = PaperChain(False, "τ ≤ 1 is not certified")
        else:
            t = flat[0]
            a_, b_ = B._ab(prep.K, X, gamma, m, t)  # noqa: SLF001 - the same a, b as theorem_bound
            bl = [B.recursion_bound(a_, b_, ell) for ell in range(1, L + 1)]
            inv = L == 1 or bool(bl[L - 2] <= 1)
            paper = PaperChain(True, None, a_, b_, tuple(bl), inv)
            if inv:
                b_final = bl[-1]
        final = chain[-1] if chain else arb(0)
        best = final if b_final is None or not b_final < final else b_final
        feeding_ok = all(bool(e <= 1) for e in chain[:-1])
        # Corollary 5: decisions preserved iff C·ε_L < μ
        moved = to_arb(prep.C) * best
        if isinstance(out, ValueOutput):
            decided = bool(moved <= limit)
            what = f"‖W‖∞·ε_L ≤ {_u(moved)}"
        else:
            assert mu is not None
            decided = B.decision_certified(best, prep.C, mu)
            what = f"C·ε_L ≤ {_u(moved)}"
        by = (BY_4II if b_final is not None and b_final < final else BY_3B) if decided else None
        # Theorem S, the per-coordinate chain (proofs/07-sharp-chain.md): run when the
        # one-number chain does not certify, and always for a full certificate
        sharp_ok = False
        if not brief or (not decided and sharp is None):
            sharp = prep.sharp.at(n, gamma, x_in, taus, diagnose=not brief)
        if sharp is not None:
            sharp_ok = _sharp_certifies(sharp, out, limit)
            if sharp_ok and not decided:
                by = BY_SHARP
        if decided:
            reason = (
                "every output entry moves by at most the tolerance"
                if isinstance(out, ValueOutput)
                else f"{what} < μ ≥ {q_text(mu, False)}: every decision is preserved"
            )
        elif sharp_ok:
            assert sharp is not None
            reason = _sharp_reason(sharp, out, target)
        else:
            assert sharp is not None
            reason = (
                f"{what} is not certified below {target}, nor the per-coordinate chain's "
                f"read-out bound {_u(sharp.readout)} (Theorem S)"
                + (f"; {_dominant(sharp, limit)}" if not brief else "")
            )
        verdict = LengthVerdict(n, decided or sharp_ok, reason, by)
        if (
            not verdict.certified
            and tau_ball is None
            and enumeration is not None
            and n in enumeration.lengths
        ):
            verdict = LengthVerdict(
                n,
                True,
                f"certified by enumeration ({enumeration.file}): every input of length {n} "
                f"was checked at this τ with every decision equal; the chains alone: {reason}",
                f"{BY_ENUMERATION} ({enumeration.file})",
            )
        if brief:
            return verdict
        assert tau_thm is not None
        t_lo = arb_endpoints(tau_thm)[0]
        return LengthCertificate(
            verdict,
            grid_tau(prep, n, t_lo) if not isinstance(out, ValueOutput) else None,
            tau_text,
            q_text(t_low, False) if choice.is_theorem else choice.record_text(),
            tuple(None if row is None else tuple(row) for row in taus),
            ClaimsAtN(gamma, x0, mu),
            Constants(L, T, m, prep.K, X, prep.C, es, tuple(x_in[:-1])),
            tuple(
                LayerBound(li, c.kind, e)
                for li, (c, e) in enumerate(zip(prep.consts, chain, strict=True))
            ),
            EpsLe1(feeding_ok, paper.invariant),
            paper,
            best,
            tau_thm,
            t_lo,
            _sharp_record(sharp, limit) if sharp is not None else None,
        )


def _sharp_certifies(res: ChainResult, out: Any, limit: arb) -> bool:
    """Corollary 5 with Theorem S's read-out bound (S6)."""
    r = res.readout
    return bool(r <= limit) if isinstance(out, ValueOutput) else bool(r < limit)


def _sharp_reason(res: ChainResult, out: Any, target: str) -> str:
    if isinstance(out, ValueOutput):
        return (
            f"per coordinate (Theorem S) every output entry moves by ≤ {_u(res.readout)}, "
            "at most the tolerance"
        )
    return (
        f"per coordinate (Theorem S) the read-out moves by ≤ {_u(res.readout)}, "
        f"below {target}: every decision is preserved"
    )


def _worst_head(res: ChainResult) -> HeadDiagnostic | None:
    """Where propagation breaks the chain: the first head (in layer order) whose scores may
    move by half its gap or more (2σ ≥ a: S3(b) gives nothing there), else the head whose
    weight term grew most over its value at σ = 0 (the tail alone)."""
    for h in res.heads:
        if h.gap is not None and 2 * h.sigma >= to_arb(h.gap):
            return h
    worst, ratio = None, arb(1)
    for h in res.heads:
        if h.tail is None or h.offtop is None:
            continue
        base = h.tail / (1 + h.tail)
        if not base > 0:
            continue
        r = h.offtop / base
        if r > ratio:
            worst, ratio = h, r
    return worst


def _dominant(res: ChainResult, limit: arb) -> str:
    """Which term of Theorem S keeps the read-out bound above the margin (or dominates it)."""
    if res.tail_only >= limit or (res.readout > 0 and 2 * res.tail_only >= res.readout):
        return (
            f"the tails dominate: with exact scores the read-out bound is already "
            f"{_u(res.tail_only)}"
        )
    h = _worst_head(res)
    if h is None:
        return f"propagation dominates (the tails alone give {_u(res.tail_only)})"
    return (
        f"propagation dominates (the tails alone give {_u(res.tail_only)}): at layer "
        f"{h.layer}, head {h.head} the scores move by σ ≤ {_u(h.sigma)}, 2σ/τ ≤ "
        f"{_u(2 * h.sigma / h.tau)} against a gap a/τ = {_u(to_arb(h.gap) / h.tau)}"
    )


def _sharp_record(res: ChainResult, limit: arb) -> SharpChain:
    dom = "tail" if res.tail_only >= limit or 2 * res.tail_only >= res.readout else "propagation"
    return SharpChain(
        res.readout,
        res.tail_only,
        dom,
        tuple(res.layer_max(k) for k in range(1, len(res.errors))),
        tuple(
            SharpHead(h.layer, h.head, h.option, h.sigma, h.tail, h.gap, h.tau, h.offtop)
            for h in res.heads
        ),
    )


GRID_STEPS = 8  # τ = 2^(k/8), as in check --find-tau
GRID_MAX_STEPS = 400  # 2^50 above τ_thm at most
GRID_TOP_K = 16 * GRID_STEPS  # τ = 2^16, the top of check --find-tau's grid


def grid_tau(prep: Prepared, n: int, tau_thm_low: Fraction) -> TauGrid:
    """Warm up from τ_thm(n) on the grid τ = 2^(k/8) while the Theorem 3(b) chain still
    certifies length n at each grid τ: the last such τ and the first that fails.

    Nothing between grid points is certified (the chain is not proved monotone in τ); below
    τ_thm(n) Theorem 5 certifies every τ. Capped at τ = 2^16 (the top of ``check
    --find-tau``'s grid; Theorems 3(b) and S hold at every τ, only Theorem 4(ii) needs τ ≤ 1)
    and at GRID_MAX_STEPS steps.
    """

    with ctx.workprec(PREC):
        lo = to_arb(tau_thm_low)
        # the grid index just below τ_thm: floor of an exact lower end (no float)
        k = math.floor(GRID_STEPS * arb_endpoints(lo.log() / arb(2).log())[0]) - 1
        last: int | None = None
        fail: tuple[int, str] | None = None
        for _ in range(GRID_MAX_STEPS):
            k += 1
            if k > GRID_TOP_K:
                break
            t = (arb(k) / GRID_STEPS * arb(2).log()).exp()
            if not t > lo:
                continue
            r = certify_length(prep, n, brief=True, tau_ball=t)
            assert isinstance(r, LengthVerdict)
            if not r.certified:
                fail = (k, r.reason)
                break
            last = k

        def ball(kk: int) -> arb:
            return (arb(kk) / GRID_STEPS * arb(2).log()).exp()

        return TauGrid(
            GRID_STEPS,
            None if last is None else GridPoint(last, ball(last)),
            None if fail is None else GridPoint(fail[0], ball(fail[0]), fail[1]),
        )


def _proved_in(prep: Prepared, j: Any) -> str:
    """Where a claim is proved: its proofs/ citation only when the model is re-derived."""
    if j.user:
        return "asserted by the user (unproved)"
    if prep.rederived.rederived:
        return f"{j.file}, {j.statement}"
    return f"cites {j.file}, {j.statement}; not proved for this file (the model is not re-derived)"


def proof_chain(prep: Prepared, checked_to: int | None) -> tuple[ProofStep, ...]:
    """The steps of the argument, each with where it is proved."""
    cl = prep.claims
    steps = []
    for c in cl.items():
        text = f"{CLAIM_MEANING[c.key]}: {c.expr.text} for n ≥ {cl.from_n}"
        if checked_to is not None:
            text += f"; also checked by enumeration for n ≤ {checked_to}"
        steps.append(ProofStep(f"claim {c.key}", text, _proved_in(prep, c.justification)))
    if cl.unique_top is not None:
        text = f"{CLAIM_MEANING[UNIQUE_TOP]}, for n ≥ {cl.from_n}"
        if checked_to is not None:
            text += f"; also checked by enumeration for n ≤ {checked_to}"
        steps.append(
            ProofStep(
                f"claim {UNIQUE_TOP}",
                text + "; such a head equals average-hard attention",
                _proved_in(prep, cl.unique_top),
            )
        )
    for key, obj, what in (
        (COORD_RANGES, cl.coordinate_ranges, lambda o: f"{len(o.ranges)} coordinates"),
        (HEAD_PROFILES, cl.head_profiles, lambda o: f"{len(o.heads)} heads"),
    ):
        if obj is not None:
            text = f"{CLAIM_MEANING[key]} ({what(obj)}), for n ≥ {cl.from_n}"
            if checked_to is not None:
                text += f"; also checked by enumeration for n ≤ {checked_to}"
            steps.append(ProofStep(f"claim {key}", text, _proved_in(prep, obj.justification)))
    steps += [
        ProofStep(
            "Theorem S",
            "per coordinate: score perturbation σ per head, profile tail, soft mass off the top "
            "(or Theorems 1–2), affine forms through FFNs split over finite hard values, "
            "read-out Σ|w_c|e_c < μ(n) ⇒ every soft decision equals the hard one",
            PROOF_FILES["thmS"],
        ),
        ProofStep(
            "Lemma G",
            "hard input of layer ℓ ≤ α_ℓ·(bound of layer ℓ−1) + c_ℓ, from x_max"
            + (
                " (the smaller of it and the claimed activation_upper)"
                if cl.activation_upper is not None
                else ""
            ),
            PROOF_FILES["lemma_g"],
        ),
        ProofStep(
            "Theorem 3(b) + Theorem 4(iii)",
            "ε_ℓ ≤ E_ℓ = F_ℓ(E_{ℓ−1}), E_0 = 0, for every input of length n and "
            "every ε (no ε ≤ 1 needed), at most T − 1 keys below the top",
            f"{PROOF_FILES['thm3b']}, {PROOF_FILES['thm4']}",
        ),
        ProofStep(
            "Theorem 4(ii)",
            "ε_L ≤ B_L = b(a^L − 1)/(a − 1), a = K X²/τ, b = K X m e^{−γ/τ}, if B_{L−1} ≤ 1",
            PROOF_FILES["thm4"],
        ),
        ProofStep(
            "Corollary 5",
            "C·ε_L < μ(n) ⇒ every soft decision equals the hard one",
            PROOF_FILES["thm5"],
        ),
        ProofStep(
            "Theorem 5",
            "every τ ≤ τ_thm(n; ε*) gives ε_L ≤ ε* = min(μ/C, 1)/2",
            PROOF_FILES["thm5"],
        ),
    ]
    return tuple(steps)


def certificate(
    model: Model,
    n: int,
    tau: TauChoice | str | None = None,
    checked_to: int | None = None,
    model_path: str | None = None,
    enumeration: Enumeration | None = None,
) -> Certificate:
    """The whole ``exactattn-certificate/1`` record for one length."""
    prep = Prepared.of(model)
    body = certify_length(prep, n, TauChoice.of(tau), enumeration=enumeration)
    assert isinstance(body, LengthCertificate)
    cl = prep.claims
    return Certificate(
        model.name,
        model_path,
        cl.to_json(),
        prep.conditional_on,
        checked_to,
        proof_chain(prep, checked_to),
        body,
        provenance=prep.provenance,
    )


def range_certificate(
    model: Model,
    lo: int,
    hi: int,
    tau: TauChoice | str | None = None,
    checked_to: int | None = None,
    enumeration: Enumeration | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CertificateRange:
    """Every n in [lo, hi], each evaluated (no monotonicity is assumed): the first failure,
    and which lengths were certified by enumeration rather than by a chain.

    ``progress(lengths evaluated, lengths in the range)`` is called after each length."""
    prep = Prepared.of(model)
    choice = TauChoice.of(tau)  # parsed once, not per length
    first_fail = None
    count = 0
    by_enum: list[int] = []
    for n in range(lo, hi + 1):
        r = certify_length(prep, n, choice, brief=True, enumeration=enumeration)
        assert isinstance(r, LengthVerdict)
        count += 1
        if progress is not None:
            progress(count, hi - lo + 1)
        if not r.certified:
            first_fail = r
            break
        if r.certified_by is not None and r.certified_by.startswith(BY_ENUMERATION):
            by_enum.append(n)
    return CertificateRange(
        model.name,
        lo,
        hi,
        choice.record_text() or model.temperature.text,
        count,
        first_fail,
        prep.claims.to_json(),
        prep.conditional_on,
        proof_chain(prep, checked_to),
        provenance=prep.provenance,
        enumerated=EnumeratedLengths(
            None if enumeration is None else enumeration.file,
            tuple(by_enum),
            None if enumeration is None else enumeration.not_used,
        ),
    )


def certify_range(
    model: Model,
    lo: int,
    hi: int,
    tau: TauChoice | str | None = None,
    checked_to: int | None = None,
    enumeration: Enumeration | None = None,
) -> dict[str, Any]:
    """:func:`range_certificate` as its JSON document (report/claims.py stores it; the lead
    drops this once that module takes the record)."""
    return range_certificate(model, lo, hi, tau, checked_to, enumeration).to_json()
