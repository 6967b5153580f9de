"""The soft meaning as deployed: IEEE float16 / bfloat16 / float32 / float64 arithmetic.

Why: exact arithmetic says whether the *mathematics* of a construction works; users run
it in a dtype. This module evaluates the same weights the way a deployed model does and
compares with the exact hard meaning (and, where enumerable, the certified soft one).

The arithmetic model (documented in docs/finite-precision.md; the tests replay it with an
independent full-matrix implementation and get the same bits):

* every weight, every embedding row x⁰_p = token + position (the exact sum, as one
  stored table) and τ(n) is rounded once to the dtype (nearest, ties to even; τ via its
  float64 value);
* every elementwise operation is one IEEE operation in the dtype (numpy's float16 and
  ml_dtypes' bfloat16 compute in float32 and round, which is exact rounding for + − × ÷);
* a product x·W is summed left to right over the inner index (bias added last); the score
  q_i·k_j likewise; logits are ``s / τ``; softmax subtracts the row maximum over the visible
  keys, takes ``exp``, sums with ``numpy.sum`` (pairwise) and divides; the head output is
  ``numpy.sum(α_ij · v_jc)`` over j; heads are added to the residual in order;
* a query with no visible key gets output 0 (as the hard and certified meanings do).
"""

from __future__ import annotations

import math
import time as _t
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, ctx

from exactattn.core.errors import UsageError
from exactattn.core.numbers import arb_endpoints_outward
from exactattn.engine.certify import certify_word
from exactattn.engine.diagnosis import (  # noqa: F401  (re-exported: precision's API)
    diagnose,
    error_enclosure,
    flipped,
    relative_error,
)
from exactattn.engine.dtypes import (  # noqa: E402,F401  (re-exported: precision's API)
    BACKENDS,
    BLOCK_ENTRIES,
    DFFN,
    DTYPE_NAMES,
    DHead,
    DtypeModel,
    DtypeRun,
    HeadBlock,
    _f64,
    _frac_vec,
    _skippable,
    dtype_decisions,
    dtype_of,
    embed_dtype,
    finfo,
    head_block,
    proj,
    rat_to_dtype,
    round_exact,
    rows_to_dtype,
    run_head_dtype,
    run_numpy,
)
from exactattn.engine.hard import (
    CompiledModel,
    accept_decisions,
    argmax_labels,
    read_output,
    run_hard,
)
from exactattn.engine.longinput import LongHard, RowRat, hard_output, run_hard_long
from exactattn.engine.longsoft import certify_long, labels_differ, rounding_enclosure, soft_differs
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.ratarray import RatArray
from exactattn.engine.soft import WeightCache
from exactattn.engine.temperature import Temperatures
from exactattn.export import require
from exactattn.inputs import batches
from exactattn.inputs.families import family_word
from exactattn.model import AcceptOutput, ArgmaxOutput, Model
from exactattn.model.reference import Oracle
from exactattn.results.precision import (  # noqa: F401  (PRECISION_FORMAT re-exported)
    PRECISION_FORMAT,
    Diagnosis,
    Enclosure,
    FirstFlip,
    PrecisionLength,
    PrecisionRun,
    SoftCounts,
    plain_output,
)
from exactattn.results.settings import TauChoice, TauOverride


def backend_version(backend: str) -> str:
    """The library doing the forward pass, with its version (named in every report)."""
    if backend == "numpy":
        return f"numpy {np.__version__}"

    require("torch", f"--backend {backend}")
    # lazy: torch, an optional extra
    import torch  # optional extra, only for the torch backends

    return f"torch {torch.__version__}"


def run_dtype(
    dm: DtypeModel,
    x0: np.ndarray,
    n: int,
    tau_override: TauOverride = None,
    block: int | None = None,
) -> DtypeRun:
    """The deployed soft meaning of a batch of words of length n (numpy or PyTorch)."""
    if dm.backend != "numpy":  # PyTorch's kernels do the forward pass, same rounded weights
        from exactattn.export.torch import run_torch  # lazy: torch, an optional extra

        kernel = dm.backend.removeprefix("torch-")
        return DtypeRun(run_torch(dm, x0, n, kernel, tau_override), dm.taus(n, tau_override))
    return run_numpy(dm, x0, n, tau_override, block)


# ---------------------------------------------------------------------------
# one long input, every dtype
# ---------------------------------------------------------------------------


@dataclass
class SingleResult:
    word: tuple[str, ...]
    n: int
    dtype: str
    hard: Any
    margin: Fraction
    dtype_output: Any
    flip: bool
    error: tuple[float, float]  # ‖dtype − hard‖∞ after the last layer (enclosure)
    cause: Diagnosis | None


def evaluate_long(
    model: Model,
    word: Sequence[str],
    dtypes: Sequence[str],
    tau_override: TauOverride = None,
    cm: CompiledModel | None = None,
    lh: LongHard | None = None,
    diagnose_flips: bool = True,
    backend: str = "numpy",
) -> list[SingleResult]:
    """One input of any length: exact hard meaning (streaming) and each dtype's soft meaning."""

    word = tuple(word)
    n = len(word)
    model.check_length(n)
    for i, t in enumerate(word):
        if t not in model.alphabet:
            raise UsageError(f"input symbol {i + 1} '{t}' is not in the alphabet")
    cm = cm or CompiledModel(model)
    lh = lh or run_hard_long(cm, word)
    hard, margin = hard_output(model, lh)
    res = []
    for name in dtypes:
        dm = DtypeModel(cm, name, backend)
        x0 = embed_dtype(dm, lh.acts[0])
        run = run_dtype(dm, x0, n, tau_override)
        out = dtype_decisions(dm, run.acts[-1], n)[0]
        tie = isinstance(model.output, AcceptOutput) and margin == 0
        flip = flipped(model, hard, out, tie)
        lo, hi, _ = error_enclosure(run.acts[-1][0], lh.acts[-1])
        cause = diagnose(dm, run, 0, lh) if flip and diagnose_flips else None
        res.append(SingleResult(word, n, name, hard, margin, out, flip, (lo, hi), cause))
    return res


# ---------------------------------------------------------------------------
# sweeps: enumerated inputs, input files, families
# ---------------------------------------------------------------------------

LONG_N = 40  # listed inputs longer than this use the streaming evaluators (longsoft.ARB_MAX_N)


def readout_value(dm: DtypeModel, x: np.ndarray, n: int) -> np.ndarray | None:
    """The accept read-out y (before the threshold) in the dtype, per word; None otherwise."""
    m = dm.model
    out = m.output
    if not isinstance(out, AcceptOutput):
        return None
    slot = m.accept_slot(n)
    with np.errstate(all="ignore"):
        y = proj(x[:, slot, :], _frac_vec(out.weight, dm.dt)[None, :], _frac_vec([out.bias], dm.dt))
    return y[:, 0]


def hard_readout(model: Model, lh: LongHard) -> Fraction | None:
    out = model.output
    if not isinstance(out, AcceptOutput):
        return None
    slot = model.accept_slot(lh.n)
    x = lh.acts[-1]
    return sum((w * x.fraction(slot, c) for c, w in enumerate(out.weight)), Fraction(0)) + out.bias


@dataclass
class _Tally:
    """One length of a run while inputs are folded in (mutable; ``record`` freezes it)."""

    n: int
    inputs: int = 0
    flips: int = 0
    first_flip: FirstFlip | None = None
    rounding_error: Enclosure | None = None
    softmax_error: Enclosure | None = None
    total_error: Enclosure | None = None
    readout_error: Enclosure | None = None
    soft: list[int] | None = None  # decided, undecided, differs_from_hard

    def record(self) -> PrecisionLength:
        so = self.soft
        return PrecisionLength(
            self.n,
            self.inputs,
            self.flips,
            self.first_flip,
            self.rounding_error,
            self.softmax_error,
            self.total_error,
            self.readout_error,
            None if so is None else SoftCounts(*so),
        )

    def count_soft(self, diff: bool | None) -> None:
        """One certified soft decision (``None``: undecided)."""
        if self.soft is None:
            self.soft = [0, 0, 0]
        if diff is None:
            self.soft[1] += 1
        else:
            self.soft[0] += 1
            self.soft[2] += int(diff)

    def soft_of_flip(self, word: Sequence[str], diff: bool | None, value: Any) -> None:
        """The certified soft output of the first flip's input, once."""
        ff = self.first_flip
        if ff is not None and ff.input == tuple(word) and not ff.soft_known:
            out = "undecided" if diff is None else value
            self.first_flip = replace(ff, soft_known=True, soft_output=out)


class RunAcc:
    """One (dtype, τ) run over many lengths, folded input by input; ``record()`` is the
    run's typed record (results/precision.py)."""

    def __init__(self, dtype: str, tau_label: str) -> None:
        self.dtype = dtype
        self.tau = tau_label
        self.tallies: list[_Tally] = []
        self.first_flip_n: int | None = None
        self.stopped = False

    def entry(self, n: int) -> _Tally:
        if not self.tallies or self.tallies[-1].n != n:
            self.tallies.append(_Tally(n))
        return self.tallies[-1]

    @property
    def lengths(self) -> tuple[PrecisionLength, ...]:
        return tuple(t.record() for t in self.tallies)

    def record(self) -> PrecisionRun:
        return PrecisionRun(self.dtype, self.tau, self.first_flip_n, self.lengths)


def record_word(
    acc: RunAcc,
    model: Model,
    dm: DtypeModel,
    run: DtypeRun,
    b: int,
    word: tuple[str, ...],
    lh_factory: Any,
    hard: Any,
    dtype_out: Any,
    hard_y: Fraction | None,
    dtype_y: Any,
    final_hard: RowRat | RatArray,
    label: str | None = None,
    tau_override: TauOverride = None,
) -> None:
    """Fold one evaluated word into the run's entry for its length."""
    n = len(word)
    e = acc.entry(n)
    e.inputs += 1
    lo, hi, _ = error_enclosure(run.acts[-1][b], final_hard)
    e.total_error = Enclosure.max_of(e.total_error, lo, hi)
    if hard_y is not None and dtype_y is not None:
        yv = float(dtype_y)
        if math.isfinite(yv):
            diff = abs(Fraction(yv) - hard_y)
            e.readout_error = Enclosure.max_of(e.readout_error, diff, diff)
        else:
            e.readout_error = Enclosure.max_of(e.readout_error, math.inf, math.inf)
    o = model.output
    tie = isinstance(o, AcceptOutput) and hard_y is not None and hard_y == o.threshold
    if not flipped(model, hard, dtype_out, tie):
        return
    e.flips += 1
    if acc.first_flip_n is None:
        acc.first_flip_n = n
    if e.first_flip is not None:
        return
    lh = lh_factory()
    cause = diagnose(dm, run, b, lh)
    # replay: the witness alone, in a fresh run (a run of one word already is that run)
    if run.acts[-1].shape[0] > 1:
        x0 = embed_dtype(dm, lh.acts[0])
        alone = run_dtype(dm, x0, n, tau_override)
        replay = dtype_decisions(dm, alone.acts[-1], n)[0]
    else:
        replay = dtype_out
    replayed = bool(flipped(model, hard, replay, tie))
    e.first_flip = FirstFlip(tuple(word), label, hard, dtype_out, cause, replayed)


def _record_soft(
    acc: RunAcc, model: Model, n: int, hard: Any, ls: Any, a: np.ndarray, lh: LongHard
) -> None:
    """Fold the certified soft meaning of one long word into the run's entry for n:
    softmax_error (certified soft − hard), rounding_error (dtype − certified soft) and the
    certified soft decision."""

    e = acc.entry(n)
    lo, hi, _ = ls.layer_error[-1] if ls.layer_error else (0.0, 0.0, 0)
    e.softmax_error = Enclosure.max_of(e.softmax_error, lo, hi)
    if ls.delta is not None:
        rlo, rhi = rounding_enclosure(a, lh.acts[-1], ls.delta)
    elif ls.arb_delta is not None or ls.method == "arb":
        num, den = lh.acts[-1].common()
        rlo, rhi = _rounding_enclosure(a, num, den, ls.arb_delta, ls.arb_prec)
    else:
        rlo, rhi = math.inf, math.inf
    e.rounding_error = Enclosure.max_of(e.rounding_error, rlo, rhi)
    diff = soft_differs(model, hard, ls)
    e.count_soft(diff)
    e.soft_of_flip(lh.word, diff, ls.output)


def _record_verdict(
    e: _Tally, model: Model, word: tuple[str, ...], hard: Any, verdict: Any
) -> None:
    """The certified soft decision of an enumerated word (the check's SoftVerdict)."""
    out = model.output
    diff: bool | None
    if not verdict.decided:
        diff = None
    elif isinstance(out, AcceptOutput):
        diff = verdict.value != hard
    elif isinstance(out, ArgmaxOutput):
        diff = bool(labels_differ(hard, verdict.value, None))
    else:
        diff = verdict.within_tol is False
    e.count_soft(diff)
    e.soft_of_flip(word, diff, verdict.value)


def _long_word(
    model: Model,
    cm: CompiledModel,
    word: tuple[str, ...],
    dms: dict[str, DtypeModel],
    runs: dict[tuple[str, str], RunAcc],
    taus: Sequence[tuple[str, TauChoice | TauOverride]],
    certified: bool,
    label: str | None,
    log: Any,
) -> None:
    """One word of any length: the exact hard meaning once (streaming), the certified soft
    meaning once per τ, every (dtype, τ) run."""

    n = len(word)
    t0 = _t.time()
    lh = run_hard_long(cm, word)
    hard, _ = hard_output(model, lh)
    hy = hard_readout(model, lh)
    name = label or "input"
    if log:
        log(f"n={n} {name}: exact hard {_t.time() - t0:.1f}s, hard={plain_output(hard)}")
    soft: dict[str, Any] = {}
    for (d, tl), acc in runs.items():
        if acc.stopped:
            continue
        texpr = TauChoice.override_expr(next(t[1] for t in taus if t[0] == tl), "precision")
        if certified and tl not in soft:
            t0 = _t.time()
            soft[tl] = certify_long(cm, lh, texpr)
            if log:
                ls = soft[tl]
                state = plain_output(ls.output) if ls.decided else "undecided"
                log(
                    f"  certified soft τ={tl}: {_t.time() - t0:.1f}s ({ls.method}), "
                    f"soft={state}, max|soft−hard| ≤ {ls.layer_error[-1][1]:.3g}"
                )
        t0 = _t.time()
        dm = dms[d]
        run = run_dtype(dm, embed_dtype(dm, lh.acts[0]), n, texpr)
        out = dtype_decisions(dm, run.acts[-1], n)[0]
        y = readout_value(dm, run.acts[-1], n)
        record_word(
            acc,
            model,
            dm,
            run,
            0,
            word,
            lambda lh=lh: lh,
            hard,
            out,
            hy,
            None if y is None else y[0],
            lh.acts[-1],
            label=label,
            tau_override=texpr,
        )
        if certified:
            _record_soft(acc, model, n, hard, soft[tl], run.acts[-1][0], lh)
        if log:
            ff = acc.tallies[-1].first_flip
            log(
                f"  {d:8s} τ={tl}: {_t.time() - t0:.1f}s "
                f"{'FLIP ' + ff.cause if ff and ff.input == word else 'ok'}"
            )


def sweep_family(
    model: Model,
    families: Sequence[str],
    ns: Sequence[int],
    dtypes: Sequence[str],
    taus: Sequence[tuple[str, TauChoice | TauOverride]],
    seed: int = 0,
    stop_after_flip: bool = False,
    on_length: Any = None,
    log: Any = None,
    certified: bool = True,
    backend: str = "numpy",
    on_complete: Callable[[], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[RunAcc]:
    """Family inputs at each n: the exact hard meaning once per word, the certified soft
    meaning once per (word, τ) (``certified``), every (dtype, τ) run. ``on_length``,
    ``on_complete`` and ``progress`` (words done, words in all) as in :func:`sweep_words`."""

    cm = CompiledModel(model)
    dms = {d: DtypeModel(cm, d, backend) for d in dtypes}
    runs = {(d, t[0]): RunAcc(d, t[0]) for t in taus for d in dtypes}
    total = len(ns) * len(families)
    done = 0
    for n in ns:
        model.check_length(n)
        for fam in families:
            word = family_word(model, fam, n, seed)
            if all(r.stopped for r in runs.values()):
                break
            _long_word(model, cm, word, dms, runs, taus, certified, fam, log)
            done += 1
            if progress is not None:
                progress(done, total)
        for acc in runs.values():
            if stop_after_flip and acc.first_flip_n is not None:
                acc.stopped = True
        if on_complete and n == ns[-1]:
            on_complete()
        if on_length:
            on_length(list(runs.values()))
    return list(runs.values())


def sweep_words(
    model: Model,
    words_by_n: dict[int, Any],
    dtypes: Sequence[str],
    taus: Sequence[tuple[str, TauChoice | TauOverride]],
    certified: bool = True,
    on_length: Any = None,
    batch: int = 2048,
    log: Any = None,
    backend: str = "numpy",
    on_complete: Callable[[], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[RunAcc]:
    """Enumerated (or listed) inputs, batched: exact hard via run_hard, certified soft via
    the check's certify_word (error split), each dtype batched. Lengths past
    ``LONG_N`` (the batched engine's bound) go one word at a time through the streaming
    exact and certified evaluators instead.

    ``on_length(runs)`` is called after each length (the CLI saves the file there);
    ``on_complete()`` once every length is run, just before the last length's
    ``on_length``: the CLI holds Ctrl-C from there, so the file that has every length is
    never written beside exit 130, and its saves before then say ``"interrupted": true``.
    ``progress(done, total)`` counts inputs (every τ and dtype of an input done)."""

    cm = CompiledModel(model)
    weights = WeightCache(cm)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    dms = {d: DtypeModel(cm, d, backend) for d in dtypes}
    runs = {(d, t[0]): RunAcc(d, t[0]) for t in taus for d in dtypes}
    out_spec = model.output
    last = max(words_by_n, default=None)
    k = len(model.alphabet)  # an enumeration is an iterator: its size by arithmetic
    total = sum(len(ws) if isinstance(ws, Sized) else k**n for n, ws in words_by_n.items())
    done = 0
    for n, words in sorted(words_by_n.items()):
        model.check_length(n)
        if n > LONG_N:
            for w in words:
                _long_word(model, cm, tuple(w), dms, runs, taus, certified, None, log)
                done += 1
                if progress is not None:
                    progress(done, total)
            if on_complete and n == last:
                on_complete()
            if on_length:
                on_length(list(runs.values()))
            continue
        for chunk in batches(iter(words), batch):
            hb = run_hard(cm, chunk, n)
            hy_all = read_output(model, hb.activations[-1], n)
            if isinstance(out_spec, AcceptOutput):
                dec, _ = accept_decisions(model, hy_all.values)
                hard_out = [bool(v) for v in dec]
                hard_y = [hy_all.values.fraction(i) for i in range(len(chunk))]
            elif isinstance(out_spec, ArgmaxOutput):
                hard_out, _ = argmax_labels(model, hy_all.values)
                hard_y = [None] * len(chunk)
            else:
                hard_out = hy_all.values.to_fractions()
                hard_y = [None] * len(chunk)
            final = hb.activations[-1]
            for ti, (tl, choice) in enumerate(taus):
                texpr = TauChoice.override_expr(choice, "precision")
                soft_deltas: list[Any] = [None] * len(chunk)
                if certified:
                    temps = Temperatures(model, texpr)
                    la = LengthAccumulator(model, n, oracle, len(model.layers))
                    la.add_hard(hb)
                    for b in range(len(chunk)):
                        if progress is not None and b % 16 == 0:  # the certified part is slow
                            progress(done + (ti * len(chunk) + b) // len(taus), total)
                        sr = certify_word(cm, hb, b, la, temps, weights)
                        soft_deltas[b] = (
                            sr.deltas[-1] if sr.deltas else None,
                            sr.prec,
                            sr.bounds,
                            sr.verdict,
                        )
                for d in dtypes:
                    acc = runs[(d, tl)]
                    dm = dms[d]
                    run = run_dtype(dm, rat_to_dtype(hb.x0, dm.dt), n, texpr)
                    outs = dtype_decisions(dm, run.acts[-1], n)
                    ys = readout_value(dm, run.acts[-1], n)
                    for b, w in enumerate(chunk):
                        record_word(
                            acc,
                            model,
                            dm,
                            run,
                            b,
                            tuple(w),
                            lambda w=w: run_hard_long(cm, w),
                            hard_out[b],
                            outs[b],
                            hard_y[b],
                            None if ys is None else ys[b],
                            RatArray(final.num[b], final.den),
                            tau_override=texpr,
                        )
                        if certified and soft_deltas[b] is not None:
                            delta, p, bnds, verdict = soft_deltas[b]
                            e = acc.entry(n)
                            lo_s, hi_s, _ = bnds[-1] if bnds else (arb(0), arb(0), 0)
                            slo, _ = arb_endpoints_outward(lo_s)  # tiny τ: e^(-e^700)
                            _, shi = arb_endpoints_outward(hi_s)
                            e.softmax_error = Enclosure.max_of(
                                e.softmax_error, max(slo, Fraction(0)), shi
                            )
                            rlo, rhi = _rounding_enclosure(
                                run.acts[-1][b], final.num[b], final.den, delta, p
                            )
                            e.rounding_error = Enclosure.max_of(e.rounding_error, rlo, rhi)
                            _record_verdict(e, model, tuple(w), hard_out[b], verdict)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        if on_complete and n == last:
            on_complete()
        if on_length:
            on_length(list(runs.values()))
    return list(runs.values())


def _rounding_enclosure(
    a: np.ndarray, hnum: np.ndarray, hden: int, delta: Any, prec: int
) -> tuple[Fraction | float, Fraction | float]:
    """‖dtype − certified soft‖∞ = ‖a − (hard + δ)‖∞ as a certified enclosure."""

    a64 = a.astype(np.float64)
    if not np.isfinite(a64).all():
        return math.inf, math.inf
    T, d = a64.shape
    best_lo: Fraction = Fraction(0)
    best_hi: Fraction = Fraction(0)
    with ctx.workprec(max(prec, 128)):
        for i in range(T):
            for c in range(d):
                v = (
                    arb(Fraction(float(a64[i, c])).numerator)
                    / Fraction(float(a64[i, c])).denominator
                    - arb(int(hnum[i, c])) / hden
                )
                if delta is not None:
                    v = v - delta[i, c]
                lo, hi = arb_endpoints_outward(abs(v))
                best_lo = max(best_lo, lo)
                best_hi = max(best_hi, hi)
    return best_lo, best_hi
