"""Mutation table for the proofs' checks: each entry replaces one constant or term of a bound
formula (in a check script, or in exactattn/bounds/: __init__.py, compare.py or tau_search.py) by a
wrong one, in a temporary copy, and runs the checks that should notice: for a check script,
that script; for bounds.py, proofs/check_bounds_code.py and then the default-suite tests named
in ``tests`` (pytest in a temporary copy of the repository); for the other engine files, those
tests. tests/repo/test_proofs_machine_checks.py requires every "false" mutation to make some
check fail (exit 1 with a FAIL line, never a crash); "true" mutations only loosen a bound
(reason given) and are not required to fail. Run `python3 proofs/mutations.py` to print the
table of proofs/README.md (`python3 proofs/mutations.py C20 B1` runs only those rows).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROOFS = Path(__file__).resolve().parent
ROOT = PROOFS.parent
BOUNDS = "exactattn/bounds/__init__.py"
CHAIN = "exactattn/bounds/chain.py"  # Theorem S: checked by check_sharp_chain.py on a copy
CHAIN_TESTS = ("tests/certificate/test_sharp_chain_certifies_own_tau.py",)
BCHECK = "exactattn/bounds/compare.py"
TSEARCH = "exactattn/bounds/tau_search.py"
# the default-suite tests that hold bounds.py's formulas against certified witnesses
WITNESS_TESTS = (
    "tests/bounds/test_wrong_bound_formulas_are_caught.py",
    "tests/bounds/test_bound_formulas.py",
)
COARSE = "exactattn/engine/cascade/coarse.py"
COARSE_TESTS = "tests/engine/cascade/test_coarse_tier_sound.py"
HFILTER = "exactattn/engine/hardfilter.py"
HF_TESTS = "tests/engine/test_hard_filter_sound.py::"
ENGINE_TESTS = (
    "tests/bounds/test_wrong_bound_formulas_are_caught.py",
    "tests/bounds/test_bounds_hold_on_measured_errors.py",
)


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (which must occur exactly once in ``file``) by ``new``."""

    key: str
    file: str  # a proofs/ script name, or BOUNDS
    old: str
    new: str
    what: str
    false: bool | None = True  # True: must be caught; False: still true; None: not known
    note: str = ""  # why a mutation stays true, or what is known when it is open
    tests: tuple[str, ...] = ()  # pytest targets run on a repository copy after the script

    @property
    def check(self) -> str | None:
        """The check script that is run on the mutant (None: only ``tests``)."""
        if self.file == BOUNDS:
            return "check_bounds_code.py"
        if self.file == CHAIN:
            return SC
        return None if self.file.startswith("exactattn/") else self.file


LP = "check_layer_perturbation.py"
SC = "check_sharp_chain.py"
SIGMA = "return eps * ((2 * x_in + eps) * beta + betaq)"
X_TAU = "    x = _arb(max(Fraction(1), _q(x_max)))\n    k = _arb(max(Fraction(1), _q(K)))\n    ga ="
X_NOTE = (
    "caught against the theorem as stated (X = max(1, x_max)); no model is known on which the "
    "mutant is numerically false: from ε_0 = 0 every error term carries the factor x"
)
PIN_NOTE = (
    "caught by hand-derived values of the constant (tests/bounds/test_bound_formulas.py); "
    "a smaller C only "
    "warms τ_thm, and no model is known on which that flips a decision"
)
CONST_NOTE = (
    "caught against Theorem 5's hypotheses (its constants must hold for every layer); τ_thm "
    "is so conservative that no model is known on which the mutant's τ_thm flips a decision"
)
C_SIGMA = "sigma = eps * ((2 * xa + eps) * _arb(h.beta) + _arb(h.beta_bias_q))"

MUTATIONS: list[Mutation] = [
    # ---- Theorem 3, the check script's own formulas
    Mutation("L1", LP, "return max(2, w) if uncond else w", "return w", "K′ without max{2,·}"),
    Mutation(
        "L2", LP, "mp.tanh(sig / (2 * tau))", "mp.tanh(sig / (4 * tau))", "tanh argument halved"
    ),
    Mutation(
        "L3",
        LP,
        SIGMA,
        "return eps * ((x_in + eps) * beta + betaq)",
        "σ: x_in for 2x_in",
        note="also the step-1 witness: osc(s̃ − s) = 2σ exactly exceeds 2σ′",
    ),
    Mutation("L4", LP, SIGMA, "return eps * ((2 * x_in + eps) * beta)", "σ: β_q dropped"),
    Mutation("L5", LP, SIGMA, "return eps * ((2 * x_in) * beta + betaq)", "σ: ε² term dropped"),
    Mutation("L6", LP, "return 2 * mp.tanh(", "return mp.tanh(", "factor 2 of 2tanh dropped"),
    Mutation("L7", LP, "return 2 * m * q / (1 + m * q)", "return m * q / (1 + m * q)", "ρ halved"),
    Mutation(
        "L8",
        LP,
        "return min(mp.mpf(2), lip_h",
        "return min(mp.mpf(1), lip_h",
        "min{2,·} → min{1,·}",
    ),
    Mutation(
        "L9",
        LP,
        "eps + mp.fsum(mpq(g[r]) * (eps + x_in * t)",
        "mp.fsum(mpq(g[r]) * (eps + x_in * t)",
        "(b): residual ε dropped",
    ),
    Mutation(
        "L10",
        LP,
        "eps + mp.fsum(mpq(g[r]) * (eps + x_in * t)",
        "eps + mp.fsum(mpq(g[r]) * (x_in * t)",
        "(b): g_r·ε term dropped",
    ),
    Mutation(
        "L11",
        LP,
        "w = 3 * beta + betaq",
        "w = 2 * beta + betaq",
        "K: 3β → 2β",
        note="the proof's slack identity fails; no numeric counterexample to (a) itself is known",
    ),
    Mutation("L12", LP, "c2 = max(2 * sum(", "c2 = max(sum(", "K: c₂ = 2Σg → Σg"),
    Mutation("L13", LP, "c1 = max(1 + sum(", "c1 = max(sum(", "K: the 1 of c₁ dropped"),
    Mutation(
        "L14",
        LP,
        "return K * X * (m * q + X * eps / tau)",
        "return K * X * (m * q + eps / tau)",
        "(a): X² → X",
    ),
    Mutation(
        "L15",
        LP,
        "    for W in [*Ws, Wo]:\n        vec = [",
        "    for W in Ws:\n        vec = [",
        "Λ_F without W_out",
    ),
    Mutation("L16", LP, "return (1 + lam) * eps", "return lam * eps", "(d): 1 + Λ_F → Λ_F"),
    Mutation(
        "L17",
        LP,
        "mp.tanh(sig / (2 * tau))",
        "mp.tanh(sig / tau)",
        "tanh argument doubled",
        note="(b) alone would stay true (it only grows), but (b) <= (a′), a step of the proof of "
        "(a), fails",
    ),
    Mutation(
        "L18",
        LP,
        "return max(2, w) if uncond else w",
        "return max(3, w) if uncond else w",
        "K′ with max{3,·}",
        false=False,
        note="K′ only grows",
    ),
    # ---- Theorem S (the per-coordinate chain): the check's own formulas, then the code
    Mutation(
        "SC0",
        SC,
        "Rs = mp.exp(2 * mpq(sig) / tau) * R",
        "Rs = mp.exp(mpq(sig) / tau) * R",
        "S3(b): e^{2σ/τ} → e^{σ/τ}",
    ),
    Mutation(
        "SC1",
        CHAIN,
        "x = 2 * sigma / tau",
        "x = sigma / tau",
        "S3(b) in the code: e^{2σ/τ} → e^{σ/τ}",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC2",
        CHAIN,
        "s += e[c] * to_arb(width) / 2",
        "s += e[c] * to_arb(width) / 4",
        "S1: the query side's half width → a quarter",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC3",
        CHAIN,
        "geo = p.per_rank * first / den",
        "geo = first / den",
        "S2: the factor r (keys per rank) dropped",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC4",
        CHAIN,
        "if (hi + E) <= 0:",
        "if hi <= 0:",
        "S5: a unit is 'off' when its hard value alone is ≤ 0",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC5",
        CHAIN,
        "if (lo - E) >= 0:",
        "if lo >= 0:",
        "S5: a unit is 'linear' when its hard value alone is ≥ 0",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC6",
        CHAIN,
        "neg = (tuple((c, -v) for c, v in row), -bb)",
        "neg = (tuple((c, -v) for c, v in row), bb)",
        "S5: sign pairs matched without negating the bias",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC7",
        CHAIN,
        "if bb >= 0 and all(v >= 0 for _, v in row):",
        "if all(v >= 0 for _, v in row):",
        "S5: the nonnegativity rule without b ≥ 0",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC8",
        CHAIN,
        "half_t = _up((sigma / (2 * tau)).tanh() + base0).min(arb(1))",
        "half_t = _up((sigma / (4 * tau)).tanh() + base0).min(arb(1))",
        "S3(a): tanh(σ/2τ) → tanh(σ/4τ)",
        tests=CHAIN_TESTS,
    ),
    Mutation(
        "SC9",
        CHAIN,
        "        if set(g) - set(u) or any(g.get(c, ZERO) != lam * v for c, v in u.items()):\n"
        "            return False\n",
        "",
        "T2: top-constant without the value being a function of the score",
        tests=CHAIN_TESTS,
    ),
    # ---- Theorems 1, 2, 4, 5, 6 and Lemma G, the check scripts' own formulas
    Mutation(
        "H1",
        "check_softmax_hardmax.py",
        "check(dist <= 2 * mq / (1 + mq) + TOL",
        "check(dist <= mq / (1 + mq) + TOL",
        "Thm 1: 2mq/(1+mq) → mq/(1+mq)",
    ),
    Mutation(
        "S1",
        "check_softmax_lipschitz.py",
        "check(dist <= 2 * mp.tanh(om / 4) + TOL",
        "check(dist <= 2 * mp.tanh(om / 8) + TOL",
        "Thm 2: tanh(Ω/4) → tanh(Ω/8)",
    ),
    Mutation(
        "S2",
        "check_softmax_lipschitz.py",
        "check(dist <= sup / tau + TOL",
        "check(dist <= sup / (2 * tau) + TOL",
        "Thm 2: Lipschitz constant 1 → 1/2",
    ),
    Mutation(
        "M1",
        "check_multilayer.py",
        "    if all(x >= 1 for x in As):\n        return Bs[-1] <= theta",
        "    if True:\n        return Bs[-1] <= theta",
        "Thm 4(i): B_L ≤ θ without a_ℓ ≥ 1",
    ),
    Mutation(
        "M2",
        "check_multilayer.py",
        "max(1 + sum(c[2][r] for c in cs) for r in range(d))",
        "max(sum(c[2][r] for c in cs) for r in range(d))",
        "Lemma G: α_A without the residual 1",
    ),
    Mutation(
        "M3",
        "check_multilayer.py",
        "+ abs(c)\n",
        "\n",
        "Lemma G: c_F without the biases",
    ),
    Mutation(
        "T1",
        "check_tau.py",
        "min(mp.mpf(1), gv / (2 * lam))",
        "min(mp.mpf(1), gv / lam)",
        "τ_thm: factor 2 dropped (L ≥ 2)",
    ),
    Mutation(
        "T2",
        "check_tau.py",
        "(mp.e * gv)",
        "(mp.e**2 * gv)",
        "Λ: −1 → −2 per layer",
    ),
    Mutation(
        "T3",
        "check_tau.py",
        "(mp.e * gv)",
        "(gv)",
        "Λ: the −1 dropped",
        false=False,
        note="Λ grows, so τ_thm shrinks, and every τ ≤ τ_thm works",
    ),
    Mutation(
        "T4",
        "check_tau.py",
        "mp.log(Lv * Kv * Xv * mv / ev)",
        "mp.log(Kv * Xv * mv / ev)",
        "Λ: ln L dropped",
    ),
    Mutation(
        "Z1",
        "check_rounding_ziggurat.py",
        "per * qv / (1 - qv + per * qv) + TOL",
        "per * qv / (1 + per * qv) + TOL",
        "Thm 6: kq/(1−q+kq) → kq/(1+kq)",
    ),
    Mutation(
        "P1",
        "check_claims.py",
        '("L(b) (i+1)/n <= 2", 2 - (i + 1) / n,',
        '("L(b) (i+1)/n <= 2", 1 - (i + 1) / n,',
        "Prop. L(b): (i+1)/n ≤ 2 → ≤ 1",
    ),
    # ---- the compiled RASP models' claims (proofs/claims.md, Proposition R)
    Mutation(
        "P2",
        "exactattn/constructions/rasp_claims.py",
        'X_MAX = "n^2"',
        'X_MAX = "n"',
        "Prop. R(b): the compiler's x_max claim n² → n (a factor n dropped)",
        tests=("tests/rasp/test_rasp_compiled_claims.py::test_claims_hold_and_x_max_is_tight",),
    ),
    Mutation(
        "P4",
        "exactattn/constructions/rasp_claims.py",
        'texts = ["n^2"] if squares else []',
        "texts = []",
        "Prop. R(e): the activation bound forgets the squares (p², K² ≤ n²)",
        tests=("tests/rasp/test_rasp_compiled_claims.py::test_claims_hold_and_x_max_is_tight",),
    ),
    Mutation(
        "P3",
        "check_claims.py",
        '"i^2": Pn * (n + p),',
        '"i^2": Pn * n,',
        "Prop. R(b): slack of p² ≤ n² without its factor (n + p)",
    ),
    # ---- exactattn/bounds/__init__.py (checked by check_bounds_code.py)
    Mutation("C1", BOUNDS, "w = max(w, Fraction(2))", "w = w", "K′ without max{2,·}"),
    Mutation(
        "C2",
        BOUNDS,
        "lip = 2 * (sigma / (2 * taus[k])).tanh()",
        "lip = 2 * (sigma / (4 * taus[k])).tanh()",
        "tanh argument halved",
    ),
    Mutation(
        "C3",
        BOUNDS,
        C_SIGMA,
        "sigma = eps * ((xa + eps) * _arb(h.beta) + _arb(h.beta_bias_q))",
        "σ: x_in for 2x_in",
        note="the C3 model: score diag(3, −4), inputs ±(1, 1), perturbation ±(ε, −ε), ε = 1/10, "
        "τ = 1: error 1.5085 > 1.1725",
    ),
    Mutation(
        "C4",
        BOUNDS,
        C_SIGMA,
        "sigma = eps * ((2 * xa + eps) * _arb(h.beta))",
        "σ: β_q dropped",
    ),
    Mutation(
        "C5", BOUNDS, "return _up(2 * mq / (1 + mq))", "return _up(mq / (1 + mq))", "ρ halved"
    ),
    Mutation("C6", BOUNDS, ".min(arb(2)))", ".min(arb(1)))", "min{2,·} → min{1,·}"),
    Mutation(
        "C7",
        BOUNDS,
        "row = row + _arb(g) * (eps + xa * ts[k])",
        "row = row + _arb(g) * (xa * ts[k])",
        "(b): g_r·ε dropped",
    ),
    Mutation(
        "C8", BOUNDS, "        row = eps\n", "        row = arb(0)\n", "(b): residual ε dropped"
    ),
    Mutation(
        "C9",
        BOUNDS,
        "w = 3 * h.beta + h.beta_bias_q",
        "w = 2 * h.beta + h.beta_bias_q",
        "K: 3β → 2β",
        false=None,
        note="caught only by a value pin (paper_K = 13 on three identical heads, the formula "
        "as proved); no model is known on which (a) with 2β is numerically false, but the "
        "proof's slack identity fails without 3β (row L11 is caught)",
    ),
    Mutation("C10", BOUNDS, "s2 += 2 * h.row_gain[r]", "s2 += h.row_gain[r]", "K: c₂ = 2Σg → Σg"),
    Mutation(
        "C11", BOUNDS, "        s1 = Fraction(1)\n", "        s1 = Fraction(0)\n", "K: the 1 of c₁"
    ),
    Mutation(
        "C12",
        BOUNDS,
        "return _up(_arb(_q(K)) * x * (b + x * eps / t))",
        "return _up(_arb(_q(K)) * x * (b + eps / t))",
        "(a): X² → X",
    ),
    Mutation(
        "C13",
        BOUNDS,
        "return _up((1 + _arb(c.lipschitz)) * _eps_upper(eps_in))",
        "return _up(_arb(c.lipschitz) * _eps_upper(eps_in))",
        "(d): 1 + Λ_F → Λ_F",
    ),
    Mutation(
        "C14",
        BOUNDS,
        "    lin = _absmatvec(wo, lin)\n",
        "",
        "Λ_F without W_out",
    ),
    Mutation(
        "C15",
        BOUNDS,
        "alpha = max(1 + sum((h.row_gain[r]",
        "alpha = max(sum((h.row_gain[r]",
        "Lemma G: α_A without the 1",
    ),
    Mutation(
        "C16", BOUNDS, "        factor = 2\n", "        factor = 1\n", "τ_thm: factor 2 dropped"
    ),
    Mutation(
        "C17",
        BOUNDS,
        "(2 * (L - 1) * k * x * x / ga).log() - 1)",
        "(2 * (L - 1) * k * x * x / ga).log() - 2)",
        "Λ: −1 → −2",
    ),
    Mutation(
        "C18",
        BOUNDS,
        "(2 * (L - 1) * k * x * x / ga).log() - 1)",
        "(2 * (L - 1) * k * x * x / ga).log())",
        "Λ: the −1 dropped",
        false=False,
        note="Λ grows, so τ_thm shrinks",
    ),
    Mutation(
        "C19",
        BOUNDS,
        "lam = (L * k * x * m / _arb(es)).log()",
        "lam = (k * x * m / _arb(es)).log()",
        "Λ: ln L dropped",
    ),
    # ---- issue 24: formulas check --bounds and --tau theorem use that used to pass every test
    Mutation(
        "C20",
        BOUNDS,
        "row = row + _arb(g) * (eps + xa * ts[k])",
        "row = row.max(eps + _arb(g) * (eps + xa * ts[k]))",
        "(b): Σ over heads → max over heads",
        note="two identical heads, inputs ±1, ε = 0, τ = 1: error 0.4768 > 0.2384",
    ),
    Mutation(
        "C21",
        BOUNDS,
        "            s1 += h.row_gain[r] * (1 + w)\n            s2 += 2 * h.row_gain[r]\n",
        "            s1 = max(s1, 1 + h.row_gain[r] * (1 + w))\n"
        "            s2 = max(s2, 2 * h.row_gain[r])\n",
        "K: Σ over heads → max over heads",
        note="three identical heads: error 0.7152 > 5e^{−2} = 0.677",
    ),
    Mutation(
        "C22",
        BOUNDS,
        "(2 * (L - 1) * k * x * x / ga).log() - 1)",
        "(2 * (L - 1) * k * x / ga).log() - 1)",
        "τ_thm: X² → X in Λ",
        note="L = 10, K = 1, X = 10⁴, m = 1, γ = 1, ε* = 1: B_L(τ) = 2.26 ε*",
    ),
    Mutation(
        "C23",
        BOUNDS,
        "not recursion_bound(a, b, L - 1) <= 1",
        "not recursion_bound(a, b, L - 2) <= 1",
        "Thm 4 guard: B_{L−1} ≤ 1 → B_{L−2} ≤ 1",
        note="K = X = m = 1, γ = 1/2, τ = 1, L = 3: B_1 = 0.61 ≤ 1 < B_2 = 1.21, so Theorem "
        "3(a) (ε ≤ 1) does not apply to the last layer; without ε ≤ 1, (a) with K is false "
        "(row C1's witness, ε = 30)",
    ),
    Mutation(
        "C24",
        BOUNDS,
        "        return None\n    x = _arb(max(Fraction(1), _q(x_max)))",
        "        return None\n    x = _arb(_q(x_max))",
        "(a): X = x_max, not max(1, x_max)",
        note="a V = 0 layer, x_max = 1/10, ε = 1/2: error 0.5 > 0.103",
    ),
    Mutation(
        "C25",
        BOUNDS,
        "    x = _arb(max(Fraction(1), _q(x_max)))\n    k = _arb(max(Fraction(1), _q(K)))\n    a =",
        "    x = _arb(_q(x_max))\n    k = _arb(max(Fraction(1), _q(K)))\n    a =",
        "Thm 4 (theorem_bound): X = x_max, not max(1, x_max)",
        note=X_NOTE,
    ),
    Mutation(
        "C26",
        BOUNDS,
        X_TAU,
        "    x = _arb(_q(x_max))\n    k = _arb(max(Fraction(1), _q(K)))\n    ga =",
        "τ_thm: X = x_max, not max(1, x_max)",
        note=X_NOTE,
    ),
    Mutation(
        "C27",
        BOUNDS,
        "return sum((abs(_q(v)) for v in weight), Fraction(0))  # type: ignore[arg-type]",
        "return max(abs(_q(v)) for v in weight)  # type: ignore[arg-type]",
        "read-out constant (accept): ‖w‖₁ → max_k abs(w_k)",
        note=PIN_NOTE,
    ),
    Mutation(
        "C28",
        BOUNDS,
        "for j in range(i + 1, len(w)):",
        "for j in range(i + 2, len(w)):",
        "read-out constant (argmax): adjacent label pairs skipped",
        note=PIN_NOTE,
    ),
    Mutation(
        "C29",
        BOUNDS,
        '    if kind == "value":\n        return _opnorm_inf(w)',
        '    if kind == "value":\n        return max(max(abs(x) for x in row) for row in w)',
        "read-out constant (value): ‖W‖_∞ → max abs(W_ij)",
        note=PIN_NOTE,
    ),
    # ---- exactattn/bounds/compare.py: how check --bounds composes the layers
    Mutation(
        "B1",
        BCHECK,
        "        x_in = le.activation_max\n",
        "",
        "chain: every layer's x_in = the embedding's x_max",
        tests=ENGINE_TESTS,
    ),
    Mutation(
        "B2",
        BCHECK,
        "eps = bound if bound is not None and bound.is_finite() else None",
        "eps = arb(0) if bound is not None and bound.is_finite() else None",
        "chain: input error reset to 0 at every layer",
        tests=ENGINE_TESTS,
    ),
    Mutation(
        "B3",
        BCHECK,
        "x_max=max(xs, default=Fraction(1)),",
        "x_max=rec.x_max,",
        "τ_thm: X = the embedding's x_max, not every attention input's",
        tests=ENGINE_TESTS,
        note=CONST_NOTE,
    ),
    Mutation(
        "B4",
        BCHECK,
        "K = max((B.paper_K(c) for c in cs), default=Fraction(1))",
        "K = B.paper_K(cs[0])",
        "τ_thm: K of the first layer, not the max over layers",
        tests=ENGINE_TESTS,
        note=CONST_NOTE,
    ),
    # ---- exactattn/engine/cascade/blas.py: the a priori bound of BLAS products (issue 25)
    Mutation(
        "BL1",
        "exactattn/engine/cascade/blas.py",
        "g = _up(gamma(k) * GAMMA_SCALE)",
        "g = _up(gamma(max(k // 2, 1)) * GAMMA_SCALE)",
        "BLAS product radius: γ_k → γ_{k/2} (proofs/blas_bound.md, Lemma 1)",
        tests=("tests/engine/cascade/test_blas_products_enclose.py",),
    ),
    Mutation(
        "BL2",
        "exactattn/engine/cascade/blas.py",
        "GAMMA_SCALE = Fraction(1)",
        "GAMMA_SCALE = Fraction(9, 10)",
        "BLAS product radius: γ_k → 0.9·γ_k",
        tests=("tests/engine/cascade/test_blas_products_enclose.py",),
    ),
    # ---- exactattn/engine/cascade/dd.py: the double-double tier (proofs/double_double.md)
    Mutation(
        "DD1",
        "exactattn/engine/cascade/dd.py",
        "U = 2.0**-53  # unit roundoff",
        "U = 2.0**-56  # unit roundoff",
        "double-double add/mul rounding allowance: u → u/8 (Lemmas A, M)",
        tests=("tests/engine/cascade/test_double_double_tier.py",),
    ),
    Mutation(
        "DD2",
        "exactattn/engine/cascade/dd.py",
        "ETA = 2.0**-1000  #",
        "ETA = 0.0  #",
        "double-double absolute allowance (underflow): ETA → 0 (Lemma R, fact D)",
        tests=("tests/engine/cascade/test_double_double_tier.py",),
    ),
    Mutation(
        "DD3",
        "exactattn/engine/cascade/dd.py",
        "RAT_ERR = 2.0**-51  #",
        "RAT_ERR = 2.0**-60  #",
        "exact rational → double-double: 2^-51 → 2^-60 (Lemma C)",
        tests=("tests/engine/cascade/test_double_double_tier.py",),
    ),
    Mutation(
        "DD4",
        "exactattn/engine/cascade/dd.py",
        "REM = 2.0**-123  #",
        "REM = 2.0**-126  #",
        "exp: Taylor remainder 2^-123 → 2^-126 (Lemma E)",
        tests=("tests/engine/cascade/test_double_double_tier.py",),
    ),
    Mutation(
        "DD5",
        "exactattn/engine/cascade/dd.py",
        "rho = np.abs(f2) * (1 + U) + np.abs(f1) * U + d[2]",
        "rho = d[2]",
        "reciprocal: residual |1 − Z·Y| dropped (Lemma Q)",
        tests=("tests/engine/cascade/test_double_double_tier.py",),
    ),
    # ---- exactattn/engine/cascade/centred.py: the centred tier (proofs/centred_softmax.md)
    Mutation(
        "CT1",
        "exactattn/engine/cascade/centred.py",
        "ROW_U = 2.0**-52  #",
        "ROW_U = 2.0**-55  #",
        "centred tier: key sum allowance 2u → u/4 per term (Lemma S)",
        tests=("tests/engine/cascade/test_centred_tier.py",),
    ),
    Mutation(
        "CT2",
        "exactattn/engine/cascade/centred.py",
        "dd = iv.sub((dm, dr), (dm[rows, t][:, None], dr[rows, t][:, None]))",
        "dd = (dm, dr)",
        "centred tier: the centre's perturbation δs_t dropped from x_j − x_t (Lemma C)",
        tests=("tests/engine/cascade/test_centred_tier.py",),
    ),
    Mutation(
        "CT3",
        "exactattn/engine/cascade/centred.py",
        "FAR = -800.0  #",
        "FAR = -10.0  #",
        "centred tier: weights below e^FAR taken as [0, TINY] from −800 → −10 (Lemma C)",
        tests=("tests/engine/cascade/test_centred_tier.py",),
    ),
    # ---- exactattn/engine/cascade/readout.py: the two-label argmax read-out
    Mutation(
        "SF1",
        "exactattn/engine/cascade/readout.py",
        "dr1 = (gr[1] + gr[0]) * (1 + WIDEN) + np.abs(dm1) * WIDEN",
        "dr1 = gr[1] + gr[0]",
        "two-label read-out: rounding allowance of δ_1 − δ_0 dropped (not the general path's)",
        tests=("tests/engine/cascade/test_float64_readout_allowance.py",),
        note=(
            "caught by the decisions of the general path, _label_decisions; no unsound claim is "
            "known: add's own WIDEN and from_rat's CONV slack cover dr1's rounding"
        ),
    ),
    # ---- exactattn/engine/cascade/chain.py: settle_dominated (notes/benchmark-rounds.md, "The
    # random model's last third")
    Mutation(
        "SD1",
        "exactattn/engine/cascade/chain.py",
        "below = fb.err_hi < thr[None, :]",
        "below = fb.err_hi <= thr[None, :]",
        "dominance: upper end strictly below a lower end → at most equal to it",
        tests=("tests/engine/cascade/test_settle_dominated.py",),
    ),
    Mutation(
        "SD2",
        "exactattn/engine/cascade/chain.py",
        "got = rep if not out.any() else np.maximum(rep, fb.err_lo[out].max(axis=0))",
        "got = thr",
        "open ε ≤ 1: certain failure read from lower ends of words that go to arb",
        tests=("tests/engine/cascade/test_settle_dominated.py",),
    ),
    # ---- exactattn/engine/cascade/coarse.py: the coarse tier's allowances (proofs/coarse_tier.md)
    Mutation(
        "CO1",
        COARSE,
        "SAFE = 1.0 + 2.0**-20  #",
        "SAFE = 1.0  #",
        "coarse tier: SAFE = 1 + 2^-20 → 1 on every radius (all lemmas)",
        tests=(COARSE_TESTS,),
        note=(
            "caught against the proof as stated (its rounding count) and by Lemma L's rounding "
            "term; the roundings SAFE covers are a few u of a radius, below what any model "
            "here shows against arb"
        ),
    ),
    Mutation(
        "CO2",
        COARSE,
        "ETA = 2.0**-1000  #",
        "ETA = 0.0  #",
        "coarse tier: underflow allowance ETA → 0 (Lemma L)",
        tests=(COARSE_TESTS,),
    ),
    Mutation(
        "CO3",
        COARSE,
        "CONV = 2.0**-50  #",
        "CONV = 0.0  #",
        "coarse tier: conversion allowance of exact rationals → 0 (Lemma H)",
        tests=(COARSE_TESTS,),
    ),
    Mutation(
        "CO4",
        COARSE,
        "(Fraction(gamma(d + 1)) + Fraction(U)) * (1 + Fraction(U))",
        "Fraction(gamma(d + 1)) * (1 + Fraction(U))",
        "coarse tier: linear maps' rounding allowance γ_{d+1} + u → γ_{d+1} (Lemma L)",
        tests=(COARSE_TESTS,),
    ),
    Mutation(
        "CO5",
        COARSE,
        "MARGIN = 1.0 + 2.0**-18  #",
        "MARGIN = 1.0  #",
        "coarse tier: domination margin 1 + 2^-18 → 1 (the domination theorem)",
        tests=(COARSE_TESTS,),
    ),
    Mutation(
        "CO6",
        COARSE,
        "w += 1024.0 * _P52",
        "w += 1023.0 * _P52",
        "coarse tier: exp bound without its factor 2 (margin ln 2, Lemma E)",
        tests=(COARSE_TESTS,),
        note="caught against Lemma E as stated (the margin Lemma A uses for its roundings)",
    ),
    Mutation(
        "CO7",
        COARSE,
        "        off = np.where(big, 1.0, off)",
        "        pass",
        "coarse tier: off-key mass not set to 1 where fl(ŝ·c) may overflow (Lemma A)",
        tests=(COARSE_TESTS,),
    ),
    # ---- exactattn/engine/hardfilter.py: the hard filter's allowances (proofs/hard_filter.md)
    Mutation(
        "HF1",
        HFILTER,
        "    thr = (2.0 * SAFE) * rho  #",
        "    thr = 0.0 * rho  #",
        "hard filter: a score gap above 0 taken as certain (Lemma HA without 2ρ)",
        tests=(HF_TESTS + "test_cancellation_is_not_decided_by_the_filter",),
    ),
    Mutation(
        "HF2",
        HFILTER,
        "    rho = c * (hd.gc * mq * mk + mq * rk + rq * (mk + rk)) * SAFE + ETA",
        "    rho = 0.0 * mq + ETA",
        "hard filter: the scores' radius without its terms (Lemma HD)",
        tests=(HF_TESTS + "test_cancellation_is_not_decided_by_the_filter",),
    ),
    Mutation(
        "HF3",
        HFILTER,
        "CONV = 2.0**-50  #",
        "CONV = 0.0  #",
        "hard filter: conversion allowance of exact rationals → 0 (Lemma HE)",
        tests=(HF_TESTS + "test_lemma_he_conversion",),
    ),
    Mutation(
        "HF4",
        HFILTER,
        "(Fraction(gamma(d + 1)) + Fraction(U)) * (1 + Fraction(U))",
        "Fraction(gamma(d + 1)) * (1 + Fraction(U))",
        "hard filter: linear maps' rounding allowance γ_{d+1} + u → γ_{d+1} (Lemma HL)",
        tests=(HF_TESTS + "test_lemma_hl_needs_the_extra_u",),
    ),
    Mutation(
        "HF5",
        HFILTER,
        "    same = (keys[kw] == kt[:, None, :]).all(axis=2)",
        "    same = (keys[kw] == kt[:, None, :]).any(axis=2)",
        "hard filter: a tie confirmed on one coordinate of the exact keys (Lemma HT)",
        tests=(HF_TESTS + "test_a_near_tie_of_different_keys_is_not_confirmed",),
    ),
    # ---- exactattn/bounds/tau_search.py: the invariant of τ*_inv
    Mutation(
        "TS1",
        TSEARCH,
        "for li, (lo, hi, _row) in enumerate(bounds[:-1]):",
        "for li, (lo, hi, _row) in enumerate(bounds[:-2]):",
        "τ*_inv: invariant ε ≤ 1 not checked after layer L−1",
        tests=(
            "tests/bounds/test_wrong_bound_formulas_are_caught.py",
            "tests/bounds/test_critical_temperatures.py",
        ),
    ),
    # ---- issue 22: the RASP compiler's gap lemmas (proofs/rasp-gaps.md)
    Mutation(
        "R1",
        "check_rasp_gaps.py",
        "Fraction(sigma * k, n + 1)",
        "Fraction(sigma * k, n)",
        "Lemma R1: tie-break j/(n+1) → j/n",
    ),
    Mutation(
        "R2",
        "check_rasp_gaps.py",
        "relu(d + 1) - 2 * relu(d) + relu(d - 1) == (d == 0)",
        "relu(d + 1) - relu(d) + relu(d - 1) == (d == 0)",
        "Lemma R5: [d = 0] without the factor 2",
    ),
    # ---- proofs/rasp-compiler.md (Proposition C): the compiler's emitted weights
    Mutation(
        "RC0",
        "check_rasp_compiler.py",
        "- bos + sigma * j / (n + 1)",
        "- bos + sigma * j / n",
        "Lemma C6 (the check's own (★)): tie-break j/(n+1) → j/n",
    ),
    Mutation(
        "RC1",
        "exactattn/constructions/rasp_compile.py",
        "{0: 1, 1: -2, 2: 1}",
        "{0: 1, 1: -1, 2: 1}",
        "Lemma C3: the == gadget's middle output −2 → −1",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC2",
        "exactattn/constructions/rasp_compile.py",
        'score += [(one, self.pos_frac, 1 if e.choice == "rightmost" else -1)]',
        'score += [(one, self.pos_frac, -1 if e.choice == "rightmost" else 1)]',
        "Lemma C6: tie-break sign swapped (rightmost picks the leftmost key)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC3",
        "exactattn/constructions/rasp_compile.py",
        'return self.ffn("and", [(tot, -(m - 1))], {0: 1}, "bool", b01)',
        'return self.ffn("and", [(tot, -(m - 2))], {0: 1}, "bool", b01)',
        "Lemma C3: the and gadget's bias −(m−1) → −(m−2)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC4",
        "exactattn/constructions/rasp_compile.py",
        "score += self.bil(Aff({}, 1), Aff({self.bos: 1}), -1, one)",
        "score += self.bil(Aff({}, 1), Aff({self.bos: 1}), 0, one)",
        "Lemma C6: the BOS key is not penalised",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC5",
        "exactattn/constructions/rasp_compile.py",
        "[(share, self.pos, 2), (self.inv, self.pos_sq, -1)]",
        "[(share, self.pos, 2), (self.inv, self.pos_sq, -2)]",
        "Lemma C4: count lookup score −j²/(i+1) → −2j²/(i+1)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC6",
        "exactattn/constructions/rasp_compile.py",
        'return self.ffn("ge", [(d, 1), (d, 0)], {0: 1, 1: -1}, "bool", b01)',
        'return self.ffn("ge", [(d, 0), (d, -1)], {0: 1, 1: -1}, "bool", b01)',
        "Lemma C3: the ≥ gadget's biases shifted (it becomes >)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC7",
        "exactattn/constructions/rasp_compile.py",
        "[(Aff({b: 1, self.bos: -1}), 0)]",
        "[(Aff({b: 1}), 0)]",
        "Lemma C4: BOS not cleared before counting",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC8",
        "exactattn/constructions/rasp_compile.py",
        "self.bil(a, Aff({self.pos: 1}), 2, self.one)",
        "self.bil(a, Aff({self.pos: 1}), 1, self.one)",
        "Lemma C5: square lookup score 2|K|·j → |K|·j",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC9",
        "exactattn/constructions/rasp_compile.py",
        'Not(AffNode(ret["bos"].key(), "bool")),',
        'AffNode(ret["bos"].key(), "bool"),',
        "Lemma C6: the check accepts a chosen BOS key",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC10",
        "exactattn/constructions/rasp_compile.py",
        "if not (h0 <= 1 and h0 + h1 <= 1 and -l0 <= 1 and -l0 - l1 <= 1):",
        "if not (h0 <= 1 and h0 + h1 <= 2 and -l0 <= 1 and -l0 - l1 <= 1):",
        "Lemma C5: square lookup allowed for a key up to n + 1",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC11",
        "exactattn/constructions/rasp_compile.py",
        '"ite", [(c + a, -1), (b - c, 0)]',
        '"ite", [(c + a, 0), (b - c, 0)]',
        "Lemma C3: the if/then/else gadget's bias −1 → 0",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC12",
        "exactattn/constructions/rasp_compile.py",
        "out = Aff({self.pos: arg.const})",
        "out = Aff({})",
        "Lemma C4: psum forgets the literal's c₀·i",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC13",
        "exactattn/constructions/rasp_compile.py",
        "score += self.bil(Q, K, 2, one)",
        "score += self.bil(Q, K, 1, one)",
        "Lemma C6: equality score 2QK → QK",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC14",
        "exactattn/constructions/rasp_compile.py",
        "{0: 1, 1: -1, 2: -1}",
        "{0: 1, 1: 1, 2: -1}",
        "Lemma C3: min gadget's ReLU(−x) sign flipped",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC15",
        "exactattn/constructions/rasp_compile.py",
        'subst[x] = ret[f"k{k}"]',
        "subst[x] = kaff[k]",
        "Lemma C6: the check reads a key atom at the query, not at the chosen key",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC16",
        "exactattn/constructions/rasp_compile.py",
        "c[bits] -= c[bits[:t] + (0,) + bits[t + 1 :]]",
        "c[bits] += c[bits[:t] + (0,) + bits[t + 1 :]]",
        "Lemma C6: Möbius transform sign (wrong multilinear coefficients of f − 1)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RC17",
        "exactattn/constructions/rasp_compile.py",
        'got = self.attention("sel", score, values, e.mask, e.choice, info, vtypes, detail)',
        'got = self.attention("sel", score, values, "none", e.choice, info, vtypes, detail)',
        "Lemma C6: the select head ignores the program's mask",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB1",
        "exactattn/constructions/rasp_compile.py",
        "q = self.phys(d.scale(2) - Aff({}, 2 * k - 1))",
        "q = self.phys(d.scale(2) - Aff({}, 2 * k))",
        "Lemma CB3b: the compare head's threshold on the integer (ties at d = k), not half-way",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB2",
        "exactattn/constructions/rasp_compile.py",
        '{"ge": {one: 1, bos: -1}}',
        '{"ge": {one: 1}}',
        "Lemma CB3b: the compare head's value forgets −bos (BOS reads 1)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB3",
        "exactattn/constructions/rasp_compile.py",
        'return ge0 - ge1 if op == "==" else Aff({}, 1) - ge0 + ge1',
        'return ge1 - ge0 if op == "==" else Aff({}, 1) - ge0 + ge1',
        "Lemma CB3b: [d = 0] as [d ≥ 1] − [d ≥ 0]",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB4",
        "exactattn/constructions/rasp_compile.py",
        '"scale", [(Aff({b: 1, self.unit: 1}), -1)]',
        '"scale", [(Aff({b: 1, self.unit: 1}), 0)]',
        "Lemma CB2: a scaled Boolean ReLU(b + unit) (bias −1 dropped)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB5",
        "exactattn/constructions/rasp_compile.py",
        "return out + Aff({self.unit: a.const}) if a.const else out",
        "return out + Aff({self.one: a.const}) if a.const else out",
        "Lemma CB2: a physical form's constant on `one` (unscaled), not on `unit`",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB6",
        "exactattn/constructions/rasp_compile.py",
        "[(Aff({b: 1, self.bos: -1, self.unit: 1}), -1)]",
        "[(Aff({b: 1, self.unit: 1}), -1)]",
        "Lemma CB4: BOS not cleared before counting",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB7",
        "exactattn/constructions/rasp_compile.py",
        "[(share, self.pos_frac, 2), (self.inv, self.pos_sq, -1)]",
        "[(share, self.pos_frac, 1), (self.inv, self.pos_sq, -1)]",
        "Lemma CB4: count lookup score 2·share·j/N → share·j/N",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB8",
        "exactattn/constructions/rasp_compile.py",
        'score += [(self.unit_sq, self.pos_frac, 1 if e.choice == "rightmost" else -1)]',
        'score += [(self.unit, self.pos_frac, 1 if e.choice == "rightmost" else -1)]',
        "Lemma CB6: an equality select's tie-break j/N² (does not fit in one level 1/N²)",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB9",
        "exactattn/constructions/rasp_compile.py",
        "(unit, pos, -2 * a * c)",
        "(unit, pos, -a * c)",
        "Lemma CB5: K̃² for K = a·pos + c with the cross term 2ac → ac",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RCB10",
        "exactattn/constructions/rasp_compile.py",
        'self.unit_sq = self._embed_pos("unit_sq", "1/(n+1)^2", "frac", b01)',
        'self.unit_sq = self._embed_pos("unit_sq", "1/(n+1)^3", "frac", b01)',
        "Lemma CB1: the embedding's unit_sq = 1/N³",
        tests=("tests/repo/test_proofs_machine_checks.py::test_rasp_compiler_weights",),
    ),
    Mutation(
        "RB1",
        "check_rasp_gaps.py",
        "True: (Fraction(1, N**3), Fraction(1, N**2)),",
        "True: (Fraction(1, N**2), Fraction(1, N**2)),",
        "Lemma RB1: an equality select's tie-break j/N² (the level spacing)",
    ),
    Mutation(
        "RB2",
        "check_rasp_gaps.py",
        "- Fraction(1, ii + 1) * Fraction(jj * jj, N * N)",
        "- Fraction(1, ii + 1) * Fraction(jj * jj, N)",
        "Lemma RB2: count lookup key j²/N (not j²/N²)",
    ),
    Mutation(
        "RB3",
        "check_rasp_gaps.py",
        'check(worst == Fraction(1, N**2), f"RB3 gap exactly 1/N² at n={n}")',
        'check(worst == Fraction(1, N**3), f"RB3 gap exactly 1/N² at n={n}")',
        "Lemma RB3: square lookup gap claimed 1/N³ (it is 1/N²)",
    ),
    Mutation(
        "RB4",
        "check_rasp_gaps.py",
        "s_other = Fraction(2 * d - 2 * k + 1, N)",
        "s_other = Fraction(2 * d - 2 * k, N)",
        "Lemma RB6: compare score 2(d − k)/N (ties at d = k)",
    ),
    Mutation(
        "RB5",
        "check_rasp_gaps.py",
        "psi[0] - psi[n] == n * n * D",
        "psi[0] - psi[n] == (n * n + 1) * D",
        "Lemma RB7: the ψ-range bound n²Δ → (n² + 1)Δ",
    ),
]


def _apply(mut: Mutation, target: Path) -> None:
    text = target.read_text()
    if text.count(mut.old) != 1:
        raise ValueError(f"{mut.key}: {mut.old!r} occurs {text.count(mut.old)} times")
    target.write_text(text.replace(mut.old, mut.new))


def _run_script(mut: Mutation, timeout: float) -> tuple[int, str]:
    """The mutation's check script on a mutated copy (fail-fast)."""
    assert mut.check is not None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "proofs"
        shutil.copytree(PROOFS, work, ignore=shutil.ignore_patterns("__pycache__", "*.tex"))
        env = dict(os.environ, PROOFS_FAIL_FAST="1", PYTHONPATH=str(ROOT))
        if mut.file == BOUNDS:
            target = Path(tmp) / "bounds.py"
            shutil.copy(ROOT / BOUNDS, target)
            env["EXACTATTN_BOUNDS_PY"] = str(target)
        elif mut.file == CHAIN:
            target = Path(tmp) / "chain.py"
            shutil.copy(ROOT / CHAIN, target)
            env["EXACTATTN_CHAIN_PY"] = str(target)
        else:
            target = work / mut.file
        _apply(mut, target)
        proc = subprocess.run(
            [sys.executable, str(work / mut.check)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    lines = proc.stdout.splitlines()
    fails = [ln[len("FAIL: ") :] for ln in lines if ln.startswith("FAIL: ")]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not fails):
        # a crash (traceback) is not a caught mutation
        return 4, (proc.stderr.strip().splitlines() or ["?"])[-1]
    return proc.returncode, fails[0] if fails else (lines[-1] if lines else "")


def _run_tests(mut: Mutation, targets: tuple[str, ...], timeout: float) -> tuple[int, str]:
    """pytest (default suite, stop at the first failure) on a copy of the repository whose
    ``mut.file`` is mutated; the copy's package is the one imported (checked)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        skip = shutil.ignore_patterns("__pycache__", "*.tex", "*.pdf", "*.png")
        for d in ("exactattn", "tests", "proofs", "models", "benchmarks"):  # tests' random models
            shutil.copytree(ROOT / d, work / d, ignore=skip)
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        _apply(mut, work / mut.file)
        env = dict(os.environ, PYTHONPATH=str(work), COLUMNS="300")  # untruncated FAILED lines
        where = subprocess.run(
            [sys.executable, "-c", "import exactattn; print(exactattn.__file__)"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not where.startswith(str(work)):
            return 4, f"the copy is not the package imported ({where})"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *targets],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    lines = proc.stdout.splitlines()
    failed = [ln for ln in lines if ln.startswith("FAILED ")]
    if proc.returncode == 0:
        return 0, ""
    if proc.returncode == 1 and failed:
        return 1, failed[0][len("FAILED ") :]
    return 4, (lines[-1] if lines else "?")


def run(mut: Mutation, timeout: float = 600) -> tuple[int, str]:
    """Apply one mutation in temporary copies and run its checks: the check script (if any),
    then, if it passed, the tests (bounds.py rows: WITNESS_TESTS by default). Returns the
    exit code (0 passes, 1 caught, 4 crash) and the first failing check, prefixed with the
    script or test that failed. Still-true rows run only the script: value-pinned tests would
    flag any change, also a harmless loosening."""
    rc, first = 0, ""
    if mut.check is not None:
        rc, first = _run_script(mut, timeout)
        if rc != 0:
            return rc, f"`{mut.check}`: {first}"
    targets = mut.tests or (WITNESS_TESTS if mut.file == BOUNDS else ())
    if targets and mut.false is not False:
        rc, first = _run_tests(mut, targets, timeout)
        if rc != 0:
            return rc, f"`{first.split(' - ')[0]}`" + (
                f": {first.split(' - ', 1)[1]}" if " - " in first else ""
            )
    return rc, first


def main() -> None:
    """Print the Markdown mutation table (runs every mutation; about a minute)."""
    keys = set(sys.argv[1:])
    print("| id | file | mutation | check that fails (first failure) |")
    print("| --- | --- | --- | --- |")
    for mut in MUTATIONS:
        if keys and mut.key not in keys:
            continue
        rc, first = run(mut)
        where = mut.file if mut.file.startswith("exactattn/") else f"proofs/{mut.file}"
        if rc == 1:
            short = re.sub(r"(\d\.\d{4})\d+", r"\1…", first)[:120].replace("|", "\\|")
            res = short + (f" ({mut.note})" if mut.note else "")
        elif rc == 0 and mut.false is False:
            res = f"passes — still true: {mut.note}"
        elif rc == 0 and mut.false is None:
            res = f"passes — {mut.note}"
        elif rc == 0:
            res = "**NOT CAUGHT**"
        else:
            res = f"error {rc}: {first}"
        what = mut.what.replace("|", "\\|")
        print(f"| {mut.key} | `{where}` | {what} | {res} |")


if __name__ == "__main__":
    main()
