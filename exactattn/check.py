"""The check: every input of every length, both meanings, all measurements.

This is the Python API that the CLI wraps (``run_check``, ``evaluate``). Long runs
report progress through a callback and keep every finished length, so an
interrupted run loses only the length in progress.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from flint import arb, arb_mat

from . import exactzero
from .errors import ModelError, UsageError
from .expr import Expr, ExprError, UndecidedError, parse_expression
from .hard import CompiledModel, HardBatch, read_output, run_hard
from .measure import LengthAccumulator, SoftVerdict, delta_bounds, tight
from .model import AttentionLayer, Model
from .numbers import arb_endpoints, decimal_down, decimal_up, frac_str
from .reference import Oracle
from .soft import WeightCache, precision, run_soft

RESULT_FORMAT = "exactattn-result/1"
BASE_PREC = 96
MAX_PREC = 4096
BATCH = 2048


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


def count_inputs(model: Model, min_n: int, max_n: int) -> int:
    k = len(model.alphabet)
    return sum(k**n for n in range(min_n, max_n + 1))


def words_of_length(model: Model, n: int) -> Iterator[tuple[str, ...]]:
    """Every input of length n, in lexicographic order of the alphabet as listed."""
    return itertools.product(model.alphabet, repeat=n)


def batches(it: Iterator[tuple[str, ...]], size: int) -> Iterator[list[tuple[str, ...]]]:
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


# ---------------------------------------------------------------------------
# temperatures
# ---------------------------------------------------------------------------


def parse_tau(text: str | None) -> Expr | None:
    """A --tau override: an expression in n (``None`` keeps the model's)."""
    if text is None:
        return None
    try:
        return parse_expression(text, ("n",), transcendental=True)
    except ExprError as exc:
        raise UsageError(f"--tau: bad expression '{text}': {exc}") from None


class Temperatures:
    """τ(n) of every head as certified balls, per precision; refuses τ(n) ≤ 0."""

    def __init__(self, model: Model, override: Expr | None) -> None:
        self.model = model
        self.override = override
        self._cache: dict[tuple[int, int], list[list[arb] | None]] = {}

    def expr_for(self, li: int, hi: int) -> tuple[Expr, str]:
        if self.override is not None:
            return self.override, "--tau"
        h = self.model.layers[li].heads[hi]  # type: ignore[union-attr]
        if h.temperature is not None:
            return h.temperature, f"layers[{li}].heads[{hi}].temperature"
        return self.model.temperature, "temperature"

    def value(self, expr: Expr, path: str, n: int, prec: int) -> arb:
        try:
            v = expr.eval_arb({"n": n}, prec)
        except UndecidedError as exc:
            raise ModelError(path, f"τ({n}) cannot be evaluated: {exc}") from None
        except ExprError as exc:
            raise ModelError(
                path,
                f"τ({n}) = '{expr.text}' is undefined at n = {n}: {exc}",
                "use a temperature defined for every checked n (or raise --min-n); every "
                "temperature in the file is checked, even one no head uses",
            ) from None
        if v > 0:
            return v
        if v <= 0:
            raise ModelError(
                path,
                f"τ({n}) = '{expr.text}' is not positive at n = {n}",
                "temperatures must be > 0 for every checked n",
            )
        raise ModelError(path, f"cannot certify τ({n}) > 0 for '{expr.text}'")

    def at(self, n: int, prec: int) -> list[list[arb] | None]:
        key = (n, prec)
        if key not in self._cache:
            out: list[list[arb] | None] = []
            for li, layer in enumerate(self.model.layers):
                if isinstance(layer, AttentionLayer):
                    row = []
                    for hi in range(len(layer.heads)):
                        e, path = self.expr_for(li, hi)
                        with precision(prec):
                            row.append(self.value(e, path, n, prec))
                    out.append(row)
                else:
                    out.append(None)
            self._cache[key] = out
        return self._cache[key]

    def display(self, n: int) -> arb | None:
        """The model-level τ(n) shown in reports (the override or the default)."""
        e = self.override if self.override is not None else self.model.temperature
        with precision(BASE_PREC):
            return self.value(e, "--tau" if self.override else "temperature", n, BASE_PREC)


# ---------------------------------------------------------------------------
# one word, certified with rising precision
# ---------------------------------------------------------------------------


@dataclass
class SoftResult:
    deltas: list[arb_mat | None]
    verdict: SoftVerdict
    prec: int
    alphas: Any = None
    bounds: list[tuple[arb, arb, int]] | None = None  # per layer: max|δ| lower, upper, row


def certify_word(
    cm: CompiledModel,
    hb: HardBatch,
    b: int,
    acc: LengthAccumulator,
    temps: Temperatures,
    weights: WeightCache,
    base_prec: int = BASE_PREC,
    max_prec: int = MAX_PREC,
    keep_alphas: bool = False,
) -> SoftResult:
    """Soft meaning of word b; precision doubles until everything reported is decided."""
    prec = base_prec
    n = hb.n
    while True:
        taus = temps.at(n, prec)
        with precision(prec):
            st = run_soft(cm, hb, b, taus, weights, keep_alphas=keep_alphas)
            final = st.deltas[-1] if st.deltas else None
            verdict = acc.soft_verdict(hb, b, final, _zero_test(cm, hb, b, st, temps))
            ok = verdict.decided
            bnds = [delta_bounds(d) for d in st.deltas]
            if ok:
                for li, (lo, hi, _) in enumerate(bnds):
                    if not tight(lo, hi):
                        ok = False
                        break
                    if li < len(st.deltas) - 1 and not (hi <= 1 or lo > 1):
                        ok = False
                        break
        if ok or prec >= max_prec:
            return SoftResult(st.deltas, verdict, prec, st.alphas, bnds)
        prec = min(prec * 2, max_prec)


def _zero_test(cm: CompiledModel, hb: HardBatch, b: int, st: Any, temps: Temperatures) -> Any:
    """An exact equality test for the read-out, when the model's shape allows one."""
    if not exactzero.applicable(hb, st.deltas):
        return None
    li = len(hb.layers) - 1
    heads = cm.layers[li]
    assert isinstance(heads, list)
    taus = exactzero.rational_taus(temps, li, hb.n, len(heads))
    if taus is None:
        return None
    traces = hb.layers[li].heads

    def test(slot: int, a: Sequence[Fraction], K: Fraction) -> bool:
        return exactzero.readout_is_exactly(heads, traces, taus, b, slot, a, K)

    return test


# ---------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------


@dataclass
class CheckResult:
    model: Model
    settings: dict[str, Any]
    lengths: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    bounds: dict[int, Any] = field(default_factory=dict)
    complete: bool = False  # every requested length finished (a partial run is never "clean")

    def verdict(self) -> dict[str, Any]:
        problems = []
        undecided = 0
        first_undecided = None
        for r in self.lengths:
            if first_undecided is None and r.get("first_undecided"):
                first_undecided = (r["n"], " ".join(r["first_undecided"]))
            if r.get("disagreements"):
                problems.append(f"n={r['n']}: {r['disagreements']} disagreement(s)")
            if r.get("invariant") == "fails":
                problems.append(f"n={r['n']}: ε ≤ 1 fails")
            rm = r.get("reference_mismatches")
            if rm and (rm.get("hard") or rm.get("soft")):
                problems.append(
                    f"n={r['n']}: reference mismatches hard {rm['hard']}, soft {rm['soft']}"
                )
            b = r.get("bounds")
            if b and b.get("violations"):
                problems.append(f"n={r['n']}: {b['violations']} bound violation(s)")
            undecided += r.get("undecided") or 0
            if r.get("invariant") == "undecided":
                undecided += 1
        if problems:
            return {"ok": False, "status": "problems", "summary": "; ".join(problems)}
        if undecided:
            where = (
                f" (first: n = {first_undecided[0]}, input '{first_undecided[1]}')"
                if first_undecided
                else ""
            )
            return {
                "ok": False,
                "status": "undecided",
                "summary": f"{undecided} comparison(s) could not be certified at "
                f"{MAX_PREC} bits{where}; a soft read-out exactly at its threshold is decided "
                "only for rational τ with one final attention layer (docs/format-extensions.md)",
            }
        ns = [r["n"] for r in self.lengths]
        rng = f"n = {min(ns)}..{max(ns)}" if ns else "no lengths"
        if not self.complete:
            asked = f"n = {self.settings.get('min_n')}..{self.settings.get('max_n')}"
            why = "interrupted" if self.interrupted else "still running or stopped"
            return {
                "ok": False,
                "status": "incomplete",
                "summary": f"no problem found for {rng}, but {asked} was asked for "
                f"and the run was {why}",
            }
        return {"ok": True, "status": "clean", "summary": f"no problem found for {rng}"}

    def exit_code(self) -> int:
        v = self.verdict()
        return {"clean": 0, "problems": 1, "undecided": 3, "incomplete": 130}[v["status"]]

    def to_json(self) -> dict[str, Any]:
        m = self.model
        info_layers = []
        for li, layer in enumerate(m.layers):
            if isinstance(layer, AttentionLayer):
                info_layers.append({"index": li, "kind": "attention", "heads": len(layer.heads)})
            else:
                info_layers.append({"index": li, "kind": "ffn"})
        return {
            "format": RESULT_FORMAT,
            "model": m.name,
            "model_info": {
                "description": m.description,
                "alphabet": list(m.alphabet),
                "bos": m.bos,
                "eos": m.eos,
                "d": m.d,
                "layers": info_layers,
                "output": m.output.kind,
                "temperature": self.settings.get("tau_override") or m.temperature.text,
                "reference": m.reference.kind if m.reference else None,
            },
            "settings": self.settings,
            "verdict": self.verdict(),
            "interrupted": self.interrupted,
            "lengths": self.lengths,
        }


ProgressFn = Callable[[str, int, int], None]


def run_check(
    model: Model,
    max_n: int,
    min_n: int | None = None,
    tau: str | Expr | None = None,
    *,
    hard_only: bool = False,
    bounds: bool = False,
    batch: int = BATCH,
    progress: ProgressFn | None = None,
    on_length: Callable[[CheckResult], None] | None = None,
    max_prec: int = MAX_PREC,
    tau_theorem: bool = False,
    find_tau: bool = False,
) -> CheckResult:
    """Check every input of every length in [min_n, max_n].

    ``progress(stage, done, total)`` is called as inputs finish; ``on_length`` after
    each finished length (the CLI writes the JSON there, so an interrupt keeps it).
    """
    lo = model.min_length if min_n is None else min_n
    if max_n < lo:
        raise UsageError(f"--max-n {max_n} is below --min-n {lo}")
    for n in (lo, max_n):
        model.check_length(n)
    override = parse_tau(tau) if isinstance(tau, str) else tau
    cm = CompiledModel(model)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    result = CheckResult(
        model=model,
        settings={
            "min_n": lo,
            "max_n": max_n,
            "tau_override": "theorem"
            if tau_theorem
            else (override.text if override is not None else None),
            "hard_only": hard_only,
            "bounds": bounds,
            "find_tau": find_tau,
        },
    )
    # refuse a model that breaks at some checked n before any work (and any file) is done
    # (every temperature in the file, used by a head or not, so no expression is skipped)
    for n in range(lo, max_n + 1):
        model.position_vectors(n)
        if not hard_only:
            Temperatures(model, override).at(n, BASE_PREC)
            Temperatures(model, override).display(n)
    try:
        for n in range(lo, max_n + 1):
            temps = Temperatures(model, override)
            pre = None
            if tau_theorem and not hard_only:
                from .bounds_check import dyadic_lower, tau_theorem_value

                pre = check_length(model, cm, n, temps, oracle, True, batch, None, max_prec)
                t_thm, _ = tau_theorem_value(model, pre)
                if t_thm is None:
                    raise UsageError(
                        f"--tau theorem: at n = {n} a leftmost/rightmost head has a tie at the "
                        "top, so no temperature makes softmax reproduce it (proofs/, Thm 3(c))"
                    )
                temps = Temperatures(
                    model,
                    parse_expression(frac_str(dyadic_lower(t_thm)), ("n",), transcendental=True),
                )
            entry = check_length(model, cm, n, temps, oracle, hard_only, batch, progress, max_prec)
            if (bounds or tau_theorem) and not hard_only:
                from .bounds_check import bounds_for_length

                entry["bounds"] = bounds_for_length(model, entry, temps.at(n, BASE_PREC))
            if find_tau and not hard_only:
                entry["tau_star"] = search_tau(model, cm, n, oracle, batch, max_prec)
            result.lengths.append(entry)
            if on_length:
                on_length(result)
    except KeyboardInterrupt:
        result.interrupted = True
    else:
        result.complete = True
    return result


class _ProbeFailed(Exception):
    """A τ probe found a failing input; the rest of the length need not be checked."""


def check_length(
    model: Model,
    cm: CompiledModel,
    n: int,
    temps: Temperatures,
    oracle: Oracle | None,
    hard_only: bool,
    batch: int,
    progress: ProgressFn | None,
    max_prec: int,
    stop_on_problem: bool = False,
) -> dict[str, Any]:
    """Every input of length n, both meanings: the spec's per-length result entry.

    With ``stop_on_problem`` (used by the τ search) it raises :class:`_ProbeFailed` at the
    first input that disagrees, stays undecided, or breaks ε ≤ 1 before the last layer.
    """
    weights = WeightCache(cm)
    layer_kinds = [layer.kind for layer in model.layers]
    # temperatures first: a bad τ(n) is a model error, reported before any work
    tau_n = None if hard_only else temps.display(n)
    head_taus: dict[tuple[int, int], Any] = {}
    if not hard_only:
        for li, row in enumerate(temps.at(n, BASE_PREC)):
            for hi, t in enumerate(row or []):
                lo_, hi_ = arb_endpoints(t)
                head_taus[(li, hi)] = {"lower": decimal_down(lo_), "upper": decimal_up(hi_)}
    acc = LengthAccumulator(model, n, oracle, len(model.layers))
    total = len(model.alphabet) ** n
    done = 0
    start_prec = BASE_PREC  # inputs of one length need similar precision
    for chunk in batches(words_of_length(model, n), batch):
        hb = run_hard(cm, chunk, n)
        acc.add_hard(hb)
        if not hard_only:
            for b in range(len(chunk)):
                sr = certify_word(
                    cm, hb, b, acc, temps, weights, base_prec=start_prec, max_prec=max_prec
                )
                start_prec = max(BASE_PREC, sr.prec)
                acc.add_soft(hb, b, sr.bounds, sr.verdict, sr.prec)
                if stop_on_problem and (
                    acc.disagreements
                    or acc.undecided
                    or any(not hi <= 1 for _, hi, _ in sr.bounds[:-1])
                ):
                    raise _ProbeFailed
                if progress and (b % 64 == 63):
                    progress(f"n={n}", done + b + 1, total)
        done += len(chunk)
        if progress:
            progress(f"n={n}", done, total)
    return acc.to_json(tau_n, layer_kinds, head_taus)


TAU_GRID = 8  # τ* is searched on the grid 2^(k/8)


def _ok(entry: dict[str, Any]) -> bool:
    return (
        entry["disagreements"] == 0
        and entry["undecided"] == 0
        and entry["invariant"] in ("holds", None)
    )


def search_tau(
    model: Model,
    cm: CompiledModel,
    n: int,
    oracle: Oracle | None,
    batch: int,
    max_prec: int,
    lo_exp: int = -40 * TAU_GRID,
    hi_exp: int = 16 * TAU_GRID,
) -> dict[str, Any] | None:
    """Certified search for the largest τ = 2^(k/8) at which every decision agrees, nothing is
    undecided and every intermediate error is ≤ 1 (all inputs of length n, every head).

    Returns the largest grid τ found good and the next grid τ found bad (the property need not
    be monotone in τ; the search assumes it is, and reports the bracket it actually saw).
    """
    cache: dict[int, bool] = {}

    def ok(k: int) -> bool:
        if k not in cache:
            t = _grid_tau(k)
            temps = Temperatures(model, parse_expression(t, ("n",), transcendental=True))
            try:
                entry = check_length(
                    model,
                    cm,
                    n,
                    temps,
                    oracle,
                    False,
                    batch,
                    None,
                    max_prec,
                    stop_on_problem=True,
                )
                cache[k] = _ok(entry)
            except _ProbeFailed:
                cache[k] = False
        return cache[k]

    k = 0
    if ok(k):
        step = TAU_GRID
        while k + step <= hi_exp and ok(k + step):
            k += step
        if k + step > hi_exp:
            return {"lower": _grid_tau(k), "upper": None, "grid": "2^(k/8)", "probes": len(cache)}
        good, bad = k, k + step
    else:
        bad = k
        k -= TAU_GRID
        while k >= lo_exp and not ok(k):
            bad = k
            k -= TAU_GRID
        if k < lo_exp:
            return {"lower": None, "upper": _grid_tau(bad), "grid": "2^(k/8)", "probes": len(cache)}
        good = k
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return {
        "lower": _grid_tau(good),
        "upper": _grid_tau(bad),
        "grid": "2^(k/8)",
        "probes": len(cache),
    }


def _grid_tau(k: int) -> str:
    """2^(k/8) rounded down to a rational with 40 significant bits (exact, as text)."""
    q, r = divmod(k, TAU_GRID)
    with precision(64):
        val = arb(2) ** q * (arb(2) ** (arb(r) / TAU_GRID))
        lo = arb_endpoints(val)[0]
    # keep it short: round down to 12 significant decimal digits (an exact decimal literal)
    return decimal_down(lo, 12)


# ---------------------------------------------------------------------------
# one input, for people debugging a construction
# ---------------------------------------------------------------------------


@dataclass
class Evaluation:
    """Both meanings of one input, every layer (index 0 = embedding)."""

    model: Model
    word: tuple[str, ...]
    tokens: list[str]
    hard: list[list[list[Fraction]]]
    soft: list[list[list[arb]]]
    errors: list[tuple[arb, arb]]
    hard_attention: list[list[list[list[Fraction]]] | None]
    soft_attention: list[list[list[list[arb]]] | None]
    output_hard: Any
    output_soft: Any
    soft_decided: bool
    tau: list[list[arb] | None]
    prec: int


def evaluate(model: Model, word: Sequence[str], tau: str | Expr | None = None) -> Evaluation:
    """Both meanings of one input with every intermediate value."""
    word = tuple(word)
    for i, t in enumerate(word):
        if t not in model.alphabet:
            raise UsageError(
                f"input symbol {i + 1} '{t}' is not in the alphabet {list(model.alphabet)}"
            )
    n = len(word)
    model.check_length(n)
    override = parse_tau(tau) if isinstance(tau, str) else tau
    temps = Temperatures(model, override)
    cm = CompiledModel(model)
    weights = WeightCache(cm)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    hb = run_hard(cm, [word], n)
    acc = LengthAccumulator(model, n, oracle, len(model.layers))
    acc.add_hard(hb)
    sr = certify_word(cm, hb, 0, acc, temps, weights, keep_alphas=True)
    hard = [x.to_fractions()[0] for x in hb.activations]
    soft: list[list[list[arb]]] = []
    errors: list[tuple[arb, arb]] = []
    with precision(sr.prec):
        for li, act in enumerate(hard):
            d = None if li == 0 else sr.deltas[li - 1]
            rows = []
            for p, row in enumerate(act):
                rows.append(
                    [
                        arb(v.numerator) / v.denominator + (d[p, k] if d is not None else 0)
                        for k, v in enumerate(row)
                    ]
                )
            soft.append(rows)
            if li:
                lo, hi, _ = delta_bounds(d)
                errors.append((lo, hi))
    hard_att: list[Any] = []
    for lt in hb.layers:
        if lt.heads is None:
            hard_att.append(None)
            continue
        per_head = []
        for tr in lt.heads:
            T = tr.visible.shape[0]
            rows = []
            for i in range(T):
                c = int(tr.count[0, i])
                rows.append(
                    [Fraction(1, c) if c and tr.support[0, i, j] else Fraction(0) for j in range(T)]
                )
            per_head.append(rows)
        hard_att.append(per_head)
    out_hard = acc._hard_repr(0)
    if model.output.kind == "accept":
        out_hard = {
            "value": read_output(model, hb.activations[-1], n).values.fraction(0),
            "accept": acc._hard_decisions[0],
        }
    return Evaluation(
        model=model,
        word=word,
        tokens=model.tokens(word),
        hard=hard,
        soft=soft,
        errors=errors,
        hard_attention=hard_att,
        soft_attention=sr.alphas,
        output_hard=out_hard,
        output_soft=sr.verdict,
        soft_decided=sr.verdict.decided,
        tau=temps.at(n, sr.prec),
        prec=sr.prec,
    )
