"""Shared helpers of the proofs/check_*.py scripts (no dependency on the exactattn package).

Every check script is self-contained mathematics: it re-implements what it needs (softmax at 50
digits, average-hard attention over Fraction) so that it verifies the *lemmas*, not the code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from fractions import Fraction

import mpmath as mp
import sympy as sp

mp.mp.dps = 50
TOL = mp.mpf(10) ** -40  # slack for 50-digit rounding in numeric spot checks

_FAILED: list[str] = []


def check(cond: bool, what: str) -> None:
    """Record a failed claim (scripts keep going, then exit 1 at :func:`finish`)."""
    if not cond:
        _FAILED.append(what)
        print(f"FAIL: {what}")
        if os.environ.get("PROOFS_FAIL_FAST"):  # mutation tests: stop at the first failure
            finish("fail-fast")


def is_zero(expr: sp.Expr) -> bool:
    """Symbolic identity: expr simplifies to 0."""
    return sp.simplify(sp.expand(expr)) == 0


def nonneg_poly(expr: sp.Expr, variables: Sequence[sp.Symbol]) -> bool:
    """Positivity certificate: expr = P/Q with P, Q polynomials in the (nonnegative) variables
    whose coefficients are all >= 0, Q not identically 0. Sufficient for expr >= 0."""
    num, den = sp.fraction(sp.together(sp.expand(expr)))
    for part in (num, den):
        poly = sp.Poly(sp.expand(part), *variables)
        if any(c < 0 for c in poly.coeffs()):
            return False
    return sp.expand(den) != 0


def mpq(x: Fraction | int) -> mp.mpf:
    """A Fraction as a 50-digit mpf."""
    f = Fraction(x)
    return mp.mpf(f.numerator) / f.denominator


def softmax(s: Sequence[mp.mpf], tau: mp.mpf) -> list[mp.mpf]:
    """softmax_τ at 50 digits, shifted by the max (stable)."""
    top = max(s)
    e = [mp.exp((x - top) / tau) for x in s]
    z = mp.fsum(e)
    return [x / z for x in e]


def ahardmax(s: Sequence) -> list[Fraction]:
    """Average-hard weights; exact when s is exact."""
    top = max(s)
    a = sum(1 for x in s if x == top)
    return [Fraction(1, a) if x == top else Fraction(0) for x in s]


def to_mp(x: object) -> mp.mpf:
    """mpf from mpf, int or Fraction (Fraction via 50-digit division)."""
    return mpq(x) if isinstance(x, (Fraction, int)) else mp.mpf(x)


def l1(p: Sequence, q: Sequence) -> mp.mpf:
    """ℓ1 distance at 50 digits (entries may be mpf or Fraction)."""
    return mp.fsum(abs(to_mp(a) - to_mp(b)) for a, b in zip(p, q, strict=True))


def ok(message: str) -> None:
    print(f"ok: {message}")


def finish(name: str) -> None:
    """Exit 1 if any check failed (so that tests/repo/test_proofs_machine_checks.py notices)."""
    if _FAILED:
        print(f"{name}: {len(_FAILED)} check(s) FAILED")
        sys.exit(1)
    print(f"{name}: all checks passed")
