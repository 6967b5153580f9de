"""``exactattn certify MODEL (--n N | --range A..B) [--tau EXPR]``: a certificate, no enumeration.

Exit codes: 0 certified (every requested length), 1 not certified (the bound does not reach
below the margin at some length: the answer, not a crash), 2 bad input (missing or malformed
claims, a leftmost/rightmost head, a bad range), 4 internal error, 130 interrupted before the
answer (nothing written). A Ctrl-C once the answer is found is held: the file and the lines
are written and the exit follows the answer (:class:`~exactattn.cli.common.FinishHold`).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import click
from flint import arb, ctx

from exactattn.certificate.certify import _need_claims, certificate, range_certificate
from exactattn.certificate.enumerated import read_enumeration
from exactattn.certificate.verify import _claim_text
from exactattn.cli.common import Console, FinishHold, refuse_overwrite
from exactattn.cli.progress import progress_bar
from exactattn.core.errors import UsageError
from exactattn.core.jsonio import read_json, write_json_atomic
from exactattn.core.limits import clip
from exactattn.core.numbers import arb_lower_str, decimal_up
from exactattn.model import load_model
from exactattn.model.claimed import UNIQUE_TOP
from exactattn.model.provenance import model_sha256
from exactattn.results.certificate import (
    Certificate,
    CertificateRange,
    RangeRun,
    ball_ends,
    exact_written,
    q_written,
    up_text,
)
from exactattn.results.claims import length_entries, result_model, result_model_sha256
from exactattn.results.settings import TauChoice

console = Console(soft_wrap=True, highlight=False, markup=False)  # user text: no markup
MAX_N = 10**12
MAX_LENGTHS = 1_000_000
"""Default ``--max-lengths`` of ``certify --range``: every length is certified on its own (no
monotonicity is assumed), 0.5 ms to a few ms each (dyck1: 1,000 lengths in 0.5 CPU-s), so a
million lengths is minutes and ``--range 1..10^12`` would have been years (issue 40)."""
DONE = "the answer was already found and the result is complete"


def _range(text: str) -> tuple[int, int]:
    parts = text.split("..")
    if len(parts) != 2 or not all(p.strip().isdigit() and len(p.strip()) <= 13 for p in parts):
        raise UsageError(f"--range: expected A..B with integers 1 <= A <= B, got '{text[:40]}'")
    a, b = int(parts[0]), int(parts[1])
    if not 1 <= a <= b <= MAX_N:
        raise UsageError(f"--range: expected 1 <= A <= B <= {MAX_N}, got {a}..{b}")
    return a, b


@dataclass(frozen=True)
class Checked:
    """What a check result file says about the model's claims: verified by enumeration for
    every n = from_n..``to`` (None: no length), or ``not_used``: why it says nothing."""

    to: int | None
    not_used: str | None = None


def checked_evidence(result_path: str | Path, model: Any) -> Checked:
    """The largest K such that the result file verified, at every n = from_n..K, every claim
    *with the value the model claims now* (a result for an older claim does not count), on
    *this model's content*: the result's ``model_sha256`` must be the model's, or the file
    is not used (a check of other weights says nothing about these), with the reason."""

    data = read_json(str(result_path))
    entries = length_entries(data)
    if entries is None:
        raise UsageError(f"--checked: {result_path} is not an exactattn-result/1 file")
    if result_model(data) != model.name:
        raise UsageError(f"--checked: {result_path} is a result for another model")
    mine, theirs = model_sha256(model), result_model_sha256(data)
    where = _rel(Path(result_path))
    if theirs is None:
        return Checked(
            None,
            f"{where} was not used: it does not name the content of the model it checked "
            "(no model_sha256: written before results carried it); rerun `exactattn check`",
        )
    if theirs != mine:
        return Checked(
            None,
            f"{where} was not used: it checked a model with other content (model_sha256 "
            f"{clip(theirs[:12], 12)}…, this model's {mine[:12]}…), so its enumeration says "
            "nothing about these weights and claims",
        )
    cl = model.claims
    rows = {r.n: r.claims for r in entries}

    def held(n: int) -> bool:
        entry = rows.get(n)
        expected = {c.key: _claim_text(c, n) for c in cl.items()}
        if cl.unique_top is not None:  # H3 was checked too (a result before the claim: no)
            expected[UNIQUE_TOP] = "1"
        return entry is not None and entry.held(expected)

    k = None
    n = cl.from_n
    while n in rows and held(n):
        k, n = n, n + 1
    return Checked(k)


def checked_to(result_path: str | Path, model: Any) -> int | None:
    """:func:`checked_evidence`'s K alone."""
    return checked_evidence(result_path, model).to


def _rel(p: Path) -> str:
    """A path as the user would type it (relative to the working directory when inside it)."""

    try:
        rel = os.path.relpath(p)
    except ValueError:  # another drive (Windows)
        return str(p)
    # outside the working directory "../../x" is no path a user would type: the absolute one
    return str(Path(p).resolve()) if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def known_result(model_path: str, model: Any) -> Path | None:
    """A stored check of a bundled model (reports/claims/<stem>.hard.json next to models/);
    whether it checked *this* content is :func:`checked_evidence`'s question."""
    p = Path(model_path).resolve()
    if p.parent.name != "models":
        return None
    cand = p.parent.parent / "reports" / "claims" / f"{p.stem}.hard.json"
    if not cand.exists():
        return None
    try:
        data = read_json(str(cand))
    except (OSError, ValueError):
        return None
    return cand if result_model(data) == model.name else None


def known_enumeration(model_path: str, tau: TauChoice) -> Path | None:
    """A bundled model's stored own-τ run (reports/claims/<stem>.soft.json next to models/),
    for ``--enumerated``'s default (own τ only; whether it counts is read_enumeration's
    question)."""
    if tau.record_text() is not None:
        return None
    p = Path(model_path).resolve()
    if p.parent.name != "models":
        return None
    cand = p.parent.parent / "reports" / "claims" / f"{p.stem}.soft.json"
    return cand if cand.exists() else None


def _runs(ns: list[int]) -> str:
    """1, 2, 3, 7 -> '1..3, 7'."""
    out: list[str] = []
    for x in sorted(ns):
        if out and out[-1].split("..")[-1] == str(x - 1):
            out[-1] = f"{out[-1].split('..')[0]}..{x}"
        else:
            out.append(str(x))
    return ", ".join(out)


def grid_point_text(k: int, steps: int) -> str:
    """A grid temperature 2^(k/steps) as its exact form and a short decimal: a power of two
    is written exactly (2^-4 = 0.0625), never as an outward-rounded ball end
    (0.0625000000000001); any other grid point as 2^(k/steps) ≈ 6 digits."""
    if k % steps == 0:
        e = k // steps
        if abs(e) <= 30:
            return f"2^{e} = {decimal_up(Fraction(2) ** e, 40)}"
        return f"2^{e}"
    with ctx.workprec(64):
        value = (arb(k) / steps * arb(2).log()).exp()
    return f"2^({k}/{steps}) ≈ {arb_lower_str(value, 6)}"


def print_certificate(c: Certificate) -> None:
    """The human-readable answer: the verdict first, then the chain and the numbers."""
    b = c.body
    head = "certified" if c.certified else "NOT certified"
    if c.certified and c.conditional_on:
        head += " (CONDITIONAL on the claims, below)"
    console.print(f"{c.model}, n = {c.n}, τ = {b.tau}: {head}")
    console.print(f"  {b.verdict.reason}")
    if b.verdict.certified_by:
        console.print(f"  certified by: {b.verdict.certified_by}")
    sc = b.sharp_chain
    if sc is not None:
        console.print(
            f"  Theorem S (per coordinate): read-out moves by ≤ {up_text(sc.readout_bound)} "
            f"(the tails alone: {up_text(sc.tail_only)}; the {sc.dominant} dominates); largest "
            "per-coordinate error after each layer: " + ", ".join(up_text(x) for x in sc.layers)
        )
    for layer in b.layers:
        console.print(
            f"  layer {layer.index} ({layer.kind}): ε ≤ {up_text(layer.error_bound)} "
            "for every input of this length"
        )
    e = b.eps_le_1
    # one verdict per line: the three facts about ε ≤ 1 are separate answers
    console.print("  ε ≤ 1: not needed by Theorem 4(iii)")
    console.print(
        "  ε ≤ 1 certified after every feeding layer: "
        + ("yes" if e.certified_after_every_feeding_layer else "no")
    )
    console.print(
        "  Theorem 4(ii)'s invariant B_(L−1) ≤ 1: "
        + {True: "holds", False: "not certified", None: "n/a (Theorem 4(ii) does not apply)"}[
            e.theorem_4ii_invariant
        ]
    )
    lo, hi = ball_ends(b.tau_theorem)
    console.print(
        f"  largest τ from Theorem 5: τ_thm(n) ∈ [{lo}, {hi}] "
        "(every τ ≤ its lower end certifies this length)"
    )
    g = b.tau_grid
    if g:
        last, fail = g.last_certified, g.first_not_certified
        if last:
            console.print(
                f"  on the grid τ = {g.grid}, warming up from τ_thm(n) (every grid τ on the way "
                "evaluated):"
            )
            console.print(f"    still certified at τ = {grid_point_text(last.k, g.steps)}")
            if fail:
                console.print(f"    first grid τ not certified: {grid_point_text(fail.k, g.steps)}")
        elif fail:
            console.print(
                "  the first grid τ above τ_thm(n), "
                f"{grid_point_text(fail.k, g.steps)}, is not certified"
            )
    k = b.constants
    console.print(
        f"  constants: L = {k.L}, T = {k.T}, m ≤ {k.m}, K = {exact_written(k.K)}, "
        f"X = {q_written(k.X, True)}, C = {exact_written(k.readout_lipschitz)}, "
        f"ε* = {q_written(k.eps_star, False)}"
    )
    if c.checked_in:
        console.print(f"  claims also verified by enumeration in {c.checked_in}")
    if c.checked_not_used:
        console.print(f"  note: {c.checked_not_used}")
    console.print("proof chain:")
    for s in c.proof_chain:
        console.print(f"  {s.step}: {s.statement} [{s.proved_in}]")
    _conditional(c)


def _conditional(c: Certificate | CertificateRange) -> None:
    p = c.provenance
    if p is not None and not p.rederived:
        console.print(
            "CONDITIONAL: this answer assumes the claims "
            + ", ".join(c.conditional_on)
            + f", none of them proved for this file: {p.reason} (a claim counts as proved "
            "only when certify rebuilds the model and finds the same one; docs/certify.md)"
        )
    elif c.conditional_on:
        console.print(
            "CONDITIONAL: this answer assumes the claims "
            + ", ".join(c.conditional_on)
            + ", asserted by the user and not proved"
        )
    else:
        console.print(
            "every claim used is proved (see the proof chain): the model is what "
            f"`build {p.built_by if p else '…'}` produces, rebuilt and compared"
        )


@click.command("certify")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--n", "n", type=int, default=None, help="The length to certify (up to 10^12).")
@click.option("--range", "rng", default=None, help="A..B: every length; the first failure.")
@click.option("--tau", default=None, help="τ(n) for every head, or 'theorem' (τ_thm(n)).")
@click.option(
    "--checked",
    type=click.Path(dir_okay=False),
    default=None,
    help="A check result file: say up to which n the claims were also enumerated.",
)
@click.option(
    "--enumerated",
    type=click.Path(dir_okay=False),
    default=None,
    help="A clean check result of this model at this τ: lengths no chain reaches are "
    "certified by enumeration (default for a bundled model: its stored own-τ run).",
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the JSON here.")
@click.option(
    "--max-lengths",
    type=int,
    default=MAX_LENGTHS,
    show_default=True,
    help="Refuse a --range of more lengths unless --force.",
)
@click.option("--force", is_flag=True, help="Run even if --range has more than --max-lengths.")
def certify_cmd(
    model_path: str,
    n: int | None,
    rng: str | None,
    tau: str | None,
    checked: str | None,
    enumerated: str | None,
    json_out: str | None,
    max_lengths: int = MAX_LENGTHS,
    force: bool = False,
) -> None:
    """Certify every input of length N (or every N in a range) from the model's claims."""

    if (n is None) == (rng is None):
        raise UsageError("give exactly one of --n N and --range A..B")
    if n is not None and not 1 <= n <= MAX_N:
        raise UsageError(f"--n: expected 1 <= N <= {MAX_N}, got {n}")
    if rng is not None:  # the work guard, before the model is read
        lo, hi = _range(rng)
        if hi - lo + 1 > max_lengths and not force:
            raise UsageError(
                f"--range {lo:,}..{hi:,}: {hi - lo + 1:,} lengths, each certified on its own "
                f"(no monotonicity is assumed), more than --max-lengths {max_lengths:,} "
                "(docs/limits.md) (fix: a shorter range, raise --max-lengths, or pass --force)"
            )
    refuse_overwrite(
        [("MODEL", model_path), ("--checked", checked), ("--enumerated", enumerated)],
        [("--json", json_out)],
    )
    model = load_model(model_path)

    _need_claims(model)
    choice = TauChoice.parse(tau)  # --tau, parsed once: a bad expression is exit 2 here
    hold = FinishHold.for_command()  # a Ctrl-C before the answer: exit 130, no file
    source = Path(checked) if checked else known_result(model_path, model)
    if checked is None and source is not None:  # the bundled check it reads
        refuse_overwrite([("the stored check", source)], [("--json", json_out)])
    ev = checked_evidence(source, model) if source is not None else Checked(None)
    k = ev.to
    epath = Path(enumerated) if enumerated else known_enumeration(model_path, choice)
    if enumerated is None and epath is not None:  # the bundled run it reads
        refuse_overwrite([("the stored run", epath)], [("--json", json_out)])
    enum = read_enumeration(epath, model, choice, _rel(epath)) if epath is not None else None
    if n is not None:
        where = _rel(source) if source is not None and k is not None else None
        c = certificate(model, n, choice, checked_to=k, model_path=model_path, enumeration=enum)
        hold.start()  # the answer is found: a Ctrl-C from here is held, the result wins
        c = c.with_checked_in(where, ev.not_used)
        if json_out:
            write_json_atomic(Path(json_out), c.to_json())
        print_certificate(c)
        if enum is not None and enum.not_used:
            console.print(f"note: {enum.not_used}")
        hold.say_if_hit(DONE)
        sys.exit(0 if c.certified else 1)
    lo, hi = _range(rng or "")
    t0 = time.monotonic()
    with progress_bar(f"certify n = {lo}..{hi}", hi - lo + 1) as update:
        r = range_certificate(
            model, lo, hi, choice, checked_to=k, enumeration=enum, progress=update
        )
    hold.start()
    seconds = round(time.monotonic() - t0, 1)
    where = _rel(source) if source is not None and k is not None else None
    r = replace(r, run=RangeRun(seconds, k, where, ev.not_used))
    if json_out:
        write_json_atomic(Path(json_out), r.to_json())
    f = r.first_failure
    if f is None:
        console.print(
            f"{model.name}, τ = {r.tau}: certified for every n = {lo}..{hi} "
            f"({r.evaluated} lengths evaluated, {seconds} s)"
        )
    else:
        console.print(
            f"{model.name}, τ = {r.tau}: first length not certified: n = {f.n} "
            f"({f.reason}); certified for n = {lo}..{f.n - 1}"
            if f.n > lo
            else f"{model.name}, τ = {r.tau}: not certified already at n = {lo} ({f.reason})"
        )
    e = r.enumerated
    if e is not None and e.lengths:
        console.print(
            f"  certified by enumeration ({e.file}) for n = {_runs(list(e.lengths))}; "
            "every other length by a chain"
        )
    if ev.not_used:
        console.print(f"note: {ev.not_used}")
    if enum is not None and enum.not_used:
        console.print(f"note: {enum.not_used}")
    _conditional(r)
    hold.say_if_hit(DONE)
    sys.exit(0 if f is None else 1)
