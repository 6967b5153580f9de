"""Command line: a thin shell over the Python API.

Exit codes: 0 clean; 1 a disagreement, invariant failure, reference mismatch or
bound violation was found; 2 bad input or usage; 3 something could not be
certified (undecided); 4 internal error (a bug: short message, traceback with
--debug); 75 a --dask cluster lost mid-run (finished lengths are kept, rerun to resume; 1
instead when they already found a problem); 130 interrupted (finished lengths are kept; a
Ctrl-C once every length is checked is held and the exit follows the result, FinishHold). See
exactattn/core/guard.py.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from exactattn.bounds.closedforms import summary_lines
from exactattn.certificate.verify import summary_line
from exactattn.cli.certify import certify_cmd
from exactattn.cli.common import (  # noqa: F401  (re-exported: tests and extra commands)
    LONG_EXACT,
    Console,
    FinishHold,
    _emit,
    _exact_cell,
    _restore,
    _snapshot,
    err_console,
    ignore_late_ctrl_c,
    refuse_overwrite,
)
from exactattn.cli.export import export_group
from exactattn.cli.extra import precision_cmd, search_cmd
from exactattn.cli.progress import check_progress
from exactattn.cli.rasp import build_rasp_cmd
from exactattn.cli.repo import need_repository
from exactattn.cli.show import failure_lines, show_evaluation
from exactattn.constructions.catalog import catalog
from exactattn.constructions.dyck import build_dyck
from exactattn.constructions.induction import build_induction
from exactattn.constructions.ltl import compile_ltl
from exactattn.core.errors import ExactAttnError
from exactattn.core.guard import (
    _say,
    bad_input,
    end_of_imports,
    internal_error,
    interrupted,
)
from exactattn.core.jsonio import is_special, read_json, write_json_atomic, write_text_atomic
from exactattn.core.limits import cap_message, clip
from exactattn.core.numbers import MAX_INT_DIGITS, parse_decimal, short_decimal, short_sci_huge
from exactattn.importers.tracr import import_tracr as _imp
from exactattn.inputs import count_inputs, count_text
from exactattn.inputs.work import job_too_large
from exactattn.model import load_model
from exactattn.model.provenance import model_sha256
from exactattn.report import report_files, write_report
from exactattn.report.attention import attention_figure, check_plot_path
from exactattn.report.certificate import write_certificate_report
from exactattn.report.claims import main as claims_main
from exactattn.report.data import non_monotone_lines
from exactattn.report.latex import safe_report_name
from exactattn.report.regenerate import regenerate
from exactattn.report.runs import FORMATS as RUN_FORMATS
from exactattn.report.runs import write_run_report
from exactattn.results import RESULT_FORMAT
from exactattn.results.bounds import TauBracket, tau_star_brackets
from exactattn.results.resultfile import validate_result
from exactattn.results.views import ABSENT, ResultView, format_of
from exactattn.run.check import LengthRangeError, check_request, estimate, run_check
from exactattn.run.evaluate import evaluate
from exactattn.run.executors import LOCK_NAME, Checkpoint, fingerprint, make_executor

console = Console()

DEFAULT_MAX_INPUTS = 50_000_000
FEW_INPUTS = 8
"""Jobs of at most this many inputs get no timed estimate (the sample would be the job)."""


def _fail(exc: Exception) -> None:

    bad_input(exc)


_NO_ARGS: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click ≥ 8.2


def _usage_error(exc: click.UsageError) -> NoReturn:
    """A usage error as every other bad input: one line naming the command and the fix, exit
    2 (click prints three: Usage, Try, Error)."""
    if isinstance(exc, _NO_ARGS):  # `exactattn` alone: click's help text, as before
        exc.show()
        sys.exit(exc.exit_code)
    where = exc.ctx.command_path if exc.ctx is not None else "exactattn"
    message = exc.format_message()
    fix = "" if "(fix:" in message else f" (fix: see '{where} --help')"  # one fix, not two
    bad_input(f"{where}: {message}{fix}")


class _Group(click.Group):
    """Every outcome becomes its documented exit code (exactattn/core/guard.py).

    Our errors are one clear message and exit 2; Ctrl-C is 130; an unexpected exception is
    an internal error, exit 4 (never 1, which means "problem found").
    """

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:  # the group's own options (`exactattn --bogus`)
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        end_of_imports()  # Ctrl-C is a KeyboardInterrupt again, handled below
        try:
            return self._invoke(ctx)
        finally:
            ignore_late_ctrl_c()  # the exit code is decided: no death by a late Ctrl-C

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_error(exc)
        except click.ClickException as exc:  # click's other errors: exit 2, message capped
            fmt = exc.format_message
            exc.format_message = lambda: cap_message(fmt())  # type: ignore[method-assign]
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except ExactAttnError as exc:
            bad_input(exc)
        except KeyboardInterrupt:
            interrupted()
        except ValueError as exc:
            if "integer string conversion" not in str(exc):
                internal_error(exc)

            bad_input(  # Python's int/str guard, past the raised limit (exactattn/core/numbers.py)
                f"an exact value of the computation has more than {MAX_INT_DIGITS:,} digits, "
                "the limit on numbers exactattn writes (docs/limits.md) (fix: rescale the "
                "model: smaller weights, fewer layers that multiply, or simpler denominators)"
            )
        except BrokenPipeError:  # `exactattn build … | head`: the reader left, not a bad path
            with contextlib.suppress(OSError, ValueError):  # no more output, not even a flush
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            bad_input(
                "stdout: the reader closed the pipe before the output ended (fix: read the "
                "whole output, or write it to a file with -o)"
            )
        except OSError as exc:  # a path the user gave: unreadable, unwritable, missing, full
            where = f" {exc.filename}" if exc.filename else ""
            full = exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
            fix = "free space on its disk" if full else "check the path and its permissions"
            bad_input(f"cannot use the file{where}: {exc.strerror or exc} (fix: {fix})")
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            internal_error(exc)


@click.group(cls=_Group)
@click.version_option(package_name="exactattn")
@click.option("--debug", is_flag=True, help="Show the traceback of an internal error (exit 4).")
def main(debug: bool) -> None:
    """Check, with exact arithmetic, when softmax attention simulates hard attention."""


# ---------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--max-n", type=int, required=True, help="Largest input length.")
@click.option("--min-n", type=int, default=None, help="Smallest input length (default: model's).")
@click.option("--tau", default=None, help="Temperature τ(n) for every head, e.g. '1/n', 'theorem'.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write results here.")
@click.option("--report", type=click.Path(dir_okay=False), help="Write a .md or .tex report.")
@click.option("--bounds", is_flag=True, help="Compute the proved bounds and τ_thm(n).")
@click.option(
    "--find-tau",
    is_flag=True,
    help="Certified searches for τ*_dec (decisions agree) and τ*_inv (also ε ≤ 1).",
)
@click.option("--hard-only", is_flag=True, help="Skip the soft meaning (γ, x_max, references).")
@click.option("--force", is_flag=True, help="Run even if the job is larger than --max-inputs.")
@click.option(
    "--max-inputs",
    type=int,
    default=DEFAULT_MAX_INPUTS,
    show_default=True,
    help="Refuse larger jobs unless --force.",
)
@click.option("--jobs", "-j", type=int, default=1, show_default=True, help="Local processes.")
@click.option("--dask", default=None, help="Run shards on this dask.distributed scheduler.")
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep finished shards here; the same command resumes from them.",
)
@click.option("--all-layers", is_flag=True, help="Show every layer's error in the table.")
@click.option(
    "--arb-only", is_flag=True, help="Certify every input with arb balls (no float filter)."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or table.")
def check(
    model_path: str,
    max_n: int,
    min_n: int | None,
    tau: str | None,
    json_out: str | None,
    report: str | None,
    bounds: bool,
    find_tau: bool,
    hard_only: bool,
    force: bool,
    max_inputs: int,
    jobs: int,
    dask: str | None,
    checkpoint: str | None,
    all_layers: bool,
    arb_only: bool,
    quiet: bool,
) -> None:
    """Enumerate every input up to --max-n and compare the hard and soft meanings."""

    reports = (
        report_files(Path(report)) if report and Path(report).suffix in (".md", ".tex") else []
    )
    lock = [("--checkpoint", Path(checkpoint) / LOCK_NAME)] if checkpoint else []  # rewritten
    refuse_overwrite(
        [("MODEL", model_path)], [("--json", json_out), *_named("--report", reports), *lock]
    )
    model = load_model(model_path)
    try:  # run_check's own checks, before the estimate (which already evaluates inputs)
        lo, choice = check_request(model, max_n, min_n, tau, hard_only=hard_only)
    except LengthRangeError as exc:  # an argument of this command: one line naming it
        raise click.UsageError(str(exc)) from None
    tau_text = None if choice.is_theorem else tau  # what `eval --tau` takes for a failing input
    ignored = [o for o, on in (("--bounds", bounds), ("--find-tau", find_tau)) if on]
    if hard_only and ignored:  # the result's settings still say they were asked for
        _say(
            f"warning: --hard-only skips the soft meaning, so {' and '.join(ignored)} "
            "compute nothing (the result has no bounds, τ_thm or τ*)"
        )
    k = len(model.alphabet)
    # counted by arithmetic (--max-n 10**6 has a count of 300,000 digits), refused before the
    # estimate, which would build inputs of that length
    # by count, then by work: an input of length n weighs max(1, L·(n+2)²·d / 100,000)
    too_large = (
        None if force else job_too_large(k, len(model.layers), model.d, lo, max_n, max_inputs)
    )
    total_text = count_text(k, lo, max_n)
    if too_large:
        err_console.print(f"[bold red]error:[/] {escape(too_large)}", highlight=False)
        sys.exit(2)
    # the progress bar's total (none for a count too large to print: --force on 2^10^6 inputs)
    total = count_inputs(k, lo, max_n) if total_text[0].isdigit() else None
    if not quiet:  # the estimate runs a sample of inputs: only worth it when it is shown
        # a job of a few inputs (one-letter alphabets: one per length) is not timed: the
        # sample would cost as much as the check itself
        few = total is not None and total <= FEW_INPUTS
        seconds = 0.0 if few else estimate(model, lo, max_n, hard_only, jobs=jobs)
        err_console.print(
            f"[bold]{escape(model.name)}[/]: {total_text} input{'' if total == 1 else 's'} "
            f"(n = {lo}..{max_n}, alphabet of {k}); "
            + ("not timed (a sample would be the whole job)" if few else "estimated ")
            + ("" if few else _fmt_secs(seconds))
            + (
                " before --find-tau, which evaluates each length again at every grid τ between "
                "τ(n) and the brackets (often 30–150 more passes)"
                if find_tau and not hard_only
                else ""
            ),
            highlight=False,
        )
    if report:
        suffix = Path(report).suffix
        if suffix not in (".md", ".tex"):
            raise click.UsageError("--report must end in .md or .tex")
        if suffix == ".tex" and not safe_report_name(Path(report)):
            raise click.UsageError(
                "--report: LaTeX cannot safely read the figure files named after this report "
                "(fix: name the .tex report with letters, digits, '.', '_' and '-' only)"
            )
        _writable_parent(Path(report), "--report")  # before the run, not after it

    hold = FinishHold()  # Ctrl-C once every length is checked: the complete result wins

    special = json_out is not None and is_special(json_out)

    def save(result: Any, final: bool = False) -> None:

        if not json_out or (special and not final):
            return  # a device or FIFO (--json /dev/stdout) gets one document: the last
        with hold.saving():  # a Ctrl-C waits for the file (and its imports), or is held
            write_json_atomic(Path(json_out), result.to_json())

    def checked(progress: Any) -> Any:
        """The run; once every length is checked, Ctrl-C is held (see FinishHold)."""
        res = run_check(
            model,
            max_n=max_n,
            min_n=lo,
            tau=choice,
            hard_only=hard_only,
            bounds=bounds,
            progress=progress,
            on_length=save,
            find_tau=find_tau,
            executor=executor,
            float_filter=not arb_only,
            on_complete=hold.start,  # inside the run's Ctrl-C handling: no gap
        )
        hold.start()  # an interrupted or stopped run: its file is final too
        return res

    settings = {  # the checkpoint's identity (a theorem run always had bounds: kept so)
        "min_n": lo,
        "max_n": max_n,
        "tau": choice.record_text(),
        "hard_only": hard_only,
        "bounds": bounds or choice.is_theorem,
        "find_tau": find_tau,
        "arb_only": arb_only,
    }
    ckpt = None
    executor = make_executor(jobs, dask)  # a bad --dask address: exit 2 before any file
    # exit 2 writes nothing: a later length can still stop the run (--tau theorem at an n
    # with a tie, a value past the digit limit) after earlier lengths were saved, and the
    # file then said "problems" or "undecided" beside exit 2; it gets its old content back
    before = _snapshot(json_out)
    try:
        try:
            try:
                if checkpoint:
                    fp = fingerprint(model_sha256(model), settings)
                    ckpt = executor.checkpoint = Checkpoint(checkpoint, fp)
                try:
                    with check_progress(total, quiet) as progress:
                        result = checked(progress)
                finally:
                    if ckpt is not None:
                        ckpt.close()  # the directory's lock: free for the next run (also on errors)
            finally:
                executor.close()
            save(result, final=True)
            data = result.to_json()
            if not quiet:
                print_table(data, all_layers=all_layers)

                for line in summary_lines(ResultView.from_json(data).closed_forms or {}):
                    console.print(line, highlight=False, soft_wrap=True)
                if result.model.claims is not None:  # issue 23
                    console.print(summary_line(result.model, data), highlight=False, markup=False)
                for line in gap_lines(ResultView.from_json(data)):
                    console.print(line, highlight=False, soft_wrap=True, markup=False)
            if report:
                write_report(data, Path(report))
        except (ExactAttnError, click.UsageError, OSError, ValueError) as exc:
            if not isinstance(exc, ValueError) or "integer string conversion" in str(exc):
                _restore(json_out, before)  # exit 2 (a ValueError here is the digit limit)
            raise
        if result.interrupted:  # Ctrl-C before every length was checked: the file says so
            err_console.print("[yellow]interrupted[/]: finished lengths were kept", highlight=False)
            sys.exit(130)
        code = result.exit_code()
        if result.stopped is not None:  # a lost cluster: one line; 75 (retry), or 1 (a finding)
            _say(
                f"stopped: {result.stopped_by}; finished lengths were kept"
                + (" and finished shards are in --checkpoint: rerun to resume" if ckpt else "")
                + ("; they already show problems (exit 1, see the result)" if code == 1 else "")
            )
            sys.exit(code)
        v = result.verdict()
        style = "green" if v.ok else ("red" if v.status == "problems" else "yellow")
        if not quiet and v.status in ("problems", "undecided"):
            view = ResultView.from_json(data)
            for line in failure_lines(model, view, tau_text, model_path, choice.is_theorem):
                console.print(line, highlight=False, markup=False, soft_wrap=True)
        # the verdict line, also with -q (a script reads the exit code, a person this line)
        console.print(
            f"[bold {style}]{v.status}[/]: {escape(v.summary)}"
            + ("" if model.reference is not None else f" — {escape(NO_REFERENCE)}"),
            highlight=False,
            soft_wrap=True,
        )
        # Ctrl-C after every length was checked: the complete result wins
        hold.say_if_hit("every length was already checked and the result is complete")
        sys.exit(code)
    finally:
        hold.stop()  # in-process callers (tests) get their Ctrl-C back


NO_REFERENCE = (
    'no reference: what the model is meant to compute was not checked (add a "reference" '
    "to the model file: docs/model-format.md, 'Reference')"
)


def _fmt_secs(s: float) -> str:
    if not s < 1e9:  # also inf (a count past float range)
        return "more than 30 years"
    if s < 1:
        return "under a second"
    if s < 120:
        return f"about {s:.0f} s"
    if s < 7200:
        return f"about {s / 60:.0f} min"
    return f"about {s / 3600:.1f} h"


COMPACT_LAYERS = 6
"""Models with more layers show their largest error and its layer (``--all-layers``: each)."""


def _table_console() -> Console:
    """The terminal's console; when piped, one wide enough that nothing is cut."""
    if console.is_terminal:
        return console
    return Console(file=sys.stdout, width=100_000, color_system=None, highlight=False)


def _writable_parent(path: Path, option: str) -> None:
    """Refuse an output path whose directory cannot be made or written, before any work: the
    report is written after the whole run (an unusable path there cost the run and its JSON)."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the writer makes the missing directories below this one
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise click.UsageError(
            f"{option} {path}: cannot write under {parent} (fix: choose a writable directory)"
        )


def print_table(data: dict[str, Any], all_layers: bool = False) -> None:
    """One row per n: the numbers a researcher reads first (errors are certified upper ends)."""

    view = ResultView.from_json(data)
    lengths = view.lengths
    if not lengths:
        return
    n_layers = len(lengths[0].layers)
    compact = n_layers > COMPACT_LAYERS and not all_layers
    has_bounds = any(r.bounds is not None for r in lengths)
    has_tau_star = any(r.tau_star is not None for r in lengths)
    t = Table(
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
        title=escape(f"{view.model}  (τ = {view.info.temperature})"),  # user text
        caption="ε: certified upper end of ‖soft − hard‖∞ after each layer · ε≤1: where the "
        "lemma needs it · dis/und: decisions that differ / stay undecided · tie: hard ties "
        "(not problems) · μ: smallest hard margin · ref: reference mismatches hard/soft"
        + (" · ε max: largest over the layers, at layer L (--all-layers: each)" if compact else "")
        + (
            " · τ* dec/inv: largest grid τ found to keep every decision / also ε ≤ 1 (lower "
            "end of the bracket; † not monotone)"
            if has_tau_star
            else ""
        ),
    )

    def col(name: str) -> None:
        t.add_column(name, justify="right", no_wrap=True, overflow="fold")

    for c in ("n", "inputs", "γ(n)", "x_max"):
        col(c)
    if compact:
        col("ε max")
        col("L")
    else:
        for li in range(n_layers):
            kind = lengths[0].layers[li].kind
            col(f"ε L{li}\n{'attn' if kind == 'attention' else 'ffn'}")
    for c in ("ε≤1", "dis", "und", "tie", "μ", "ref"):
        col(c)
    if has_bounds:
        col("bound\nlast")
        col("τ_thm")
    if has_tau_star:
        col("τ*\ndec")
        col("τ*\ninv")
    for r in lengths:
        errs = []
        if compact:
            best = None
            for layer in r.layers:
                e = layer.error
                if e is None:
                    continue
                up = e.upper or "inf"
                v = None if up == "inf" else parse_decimal(up)
                if best is None or v is None or (best[0] is not None and v > best[0]):
                    if best is None or best[0] is not None:
                        best = (v, layer.index, up)
            errs = [_sci(best[2]), str(best[1])] if best else ["–", "–"]
        else:
            for layer in r.layers:
                e = layer.error
                errs.append(_sci(e.upper or "inf") if e is not None else "–")
        rm = r.reference
        ref = f"{rm.hard}/{rm.soft if rm.soft is not None else '–'}" if rm else "–"
        row = [
            str(r.n),
            f"{r.inputs:,}",
            _exact_cell(r.gamma) if r.gamma else "∞",
            _exact_cell(r.x_max),
            *errs,
            _inv(r.invariant),
            _na(r.disagreements),
            _na(r.undecided),
            _na(r.tie_positions),
            _exact_cell(r.min_margin) if r.min_margin is not None else "–",
            ref,
        ]
        if has_bounds:
            bounds = r.bounds
            last = bounds.layers[-1].bound if bounds is not None and bounds.layers else None
            row.append(_sci(last.to_json()) if last is not None else "–")
            thm = None if bounds is None else bounds.tau_theorem
            row.append(_sci(thm.lower.to_json(), up=False) if thm is not None else "none")
        if has_tau_star:
            row += [_tau_star_cell(b) for b in tau_star_brackets(r.tau_star)]
        t.add_row(*row)
    _table_console().print(t)
    if has_tau_star:
        for line in non_monotone_lines([(r.n, r.tau_star) for r in lengths]):
            console.print(line, highlight=False)


def _tau_star_cell(b: TauBracket | None) -> str:
    """A τ* bracket in one short cell: its lower end (rounded down), ≥ when the search reached
    its top, < when even its bottom failed, † when the scan found it non-monotone."""
    if b is None:
        return "–"
    mark = "†" if b.non_monotone else ""
    if b.lower is None:
        return "<" + _sci(b.upper.to_json(), up=True) + mark if b.upper is not None else "–"
    text = _sci(b.lower.to_json(), up=False)
    return ("≥" if b.upper is None else "") + text + mark


def gap_lines(view: ResultView) -> list[str]:
    """One line per length of a compiled RASP model: measured γ(n) beside the compiler's
    bound (issue 22)."""
    out = []
    for r in view.lengths:
        g = r.compiler_gap
        if g is None:
            continue
        verdict = "holds" if g.holds else f"VIOLATED ({len(g.violations)})"
        out.append(
            f"n = {r.n}: measured γ(n) = {g.measured or '∞'} ≥ compiler bound "
            f"{g.expression} = {g.bound or '∞'}: {verdict}"
        )
    return out


def _inv(state: Any) -> str:
    """The ε ≤ 1 column: yes / NO / ? (– when not evaluated)."""
    return (
        "yes"
        if state == "holds"
        else "NO"
        if state == "fails"
        else "?"
        if state == "undecided"
        else "–"
    )


def _na(x: Any) -> str:
    return "–" if x is None or x is ABSENT else f"{x:,}"


def _sci(s: str | None, up: bool = True) -> str:
    """A certified decimal, short (3 digits), still rounded outward: 9.10e-2."""
    if s is None:
        return "–"
    if s == "inf":
        return "∞"

    huge = short_sci_huge(s, 3, up)
    if huge is not None:
        return huge
    return short_decimal(parse_decimal(s), up)


# ---------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------


@main.command("eval")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("word", metavar="INPUT")
@click.option("--tau", default=None, help="Temperature τ(n) override.")
@click.option(
    "--sep",
    default=None,
    help="Token separator in INPUT (default: per character, or spaces if INPUT contains spaces).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw each head's attention weights, hard beside soft (.png, .pdf or .svg).",
)
def eval_cmd(
    model_path: str, word: str, tau: str | None, sep: str | None, plot: str | None
) -> None:
    """Show one input: activations, attention weights and output, hard and soft."""

    if plot is not None:  # a bad file type or directory: exit 2 before any work
        check_plot_path(Path(plot))
        _writable_parent(Path(plot), "--plot")
    model = load_model(model_path)
    if sep == "":
        raise click.UsageError('--sep "" splits nothing: give a non-empty separator or omit --sep')
    if sep is not None:
        tokens = [t for t in word.split(sep) if t]
    elif " " in word:
        tokens = word.split()
    elif all(len(t) == 1 for t in model.alphabet):
        tokens = list(word)
    else:
        tokens = [word]
    ev = evaluate(model, tokens, tau=tau)
    show_evaluation(ev, _table_console())
    if plot is not None:
        err_console.print(
            f"wrote {attention_figure(ev, Path(plot))}", highlight=False, markup=False
        )


# ---------------------------------------------------------------------------
# build / import / report
# ---------------------------------------------------------------------------


@main.group()
def build() -> None:
    """Compile constructions into model files."""


def _build(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run a builder; its ValueErrors (bad formula, bad pairs) are usage errors (exit 2)."""
    try:
        return fn(*args, **kwargs)
    except ExactAttnError:
        raise
    except ValueError as exc:
        _fail(exc)
        raise  # unreachable


def model_text(model: dict[str, Any]) -> str:
    """Indented JSON, or compact when indentation would make the file huge (big case lists)."""
    text = json.dumps(model, indent=2, ensure_ascii=False) + "\n"
    if len(text) > 1_000_000:
        text = json.dumps(model, separators=(",", ":"), ensure_ascii=False) + "\n"
    return text


@build.command("ltl")
@click.argument("formula")
@click.option("--alphabet", required=True, help="Comma-separated symbols, e.g. a,b,c.")
@click.option(
    "--scheme",
    type=click.Choice(["temperature", "positions"]),
    default="temperature",
    show_default=True,
    help="τ = 1/n with bounded position embeddings, or τ = 1 with unbounded ones.",
)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Model file (default: stdout)."
)
def build_ltl(formula: str, alphabet: str, scheme: str, out: str | None) -> None:
    """Compile an LTL formula (with counting) into a softmax-friendly transformer.

    A word is accepted iff FORMULA holds at its last position (positions 1..n).

    \b
    formula := disj
    disj    := conj ('|' conj)*
    conj    := temp ('&' temp)*
    temp    := unary (('S' | 'U') temp)?         right-associative
    unary   := ('!' | 'Y' | 'X') unary | primary
    primary := 'true' | 'false' | SYMBOL | '(' formula ')' | lin CMP lin
    lin     := ['-'] term (('+' | '-') term)*
    term    := INT ['*' count] | count ['*' INT]
    count   := '#[' formula ']' | '#>[' formula ']'
    CMP     := '<' | '<=' | '=' | '>=' | '>' | '!='

    \b
    a      the symbol at i is a        Y φ    φ at i-1 (false at 1)
    X φ    φ at i+1 (false at n)       #[φ]   how many j <= i have φ
    φ S ψ  some j < i has ψ, and φ at every k with j < k < i
    φ U ψ  some j > i has ψ, and φ at every k with i < k < j
    #>[φ]  how many j >= i have φ

    There is no G or F: at the last position, "φ everywhere" is #[!φ] = 0 and
    "φ somewhere" is #[φ] >= 1. Example: exactattn build ltl '#[a] > #[b]' --alphabet a,b
    """

    _emit(_build(compile_ltl, formula, _split(alphabet), scheme), out)


@build.command("induction")
@click.option("--alphabet", required=True, help="Comma-separated symbols.")
@click.option("--hops", type=int, default=1, show_default=True, help="k: find^k(i).")
@click.option("--max-n", type=int, default=8, show_default=True, help="Reference cases up to n.")
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Model file (default: stdout)."
)
def build_induction_cmd(alphabet: str, hops: int, max_n: int, out: str | None) -> None:
    """Induction head: the token after the most recent earlier occurrence (k hops)."""

    _emit(_build(build_induction, _split(alphabet), hops=hops, max_n=max_n), out)


@build.command("dyck")
@click.option("--pairs", multiple=True, help='Pairs: --pairs "()" "[]" (or repeat --pairs).')
@click.argument("more_pairs", nargs=-1, metavar="[PAIRS]...")
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Model file (default: stdout)."
)
@click.option(
    "--scale",
    type=click.Choice(["integer", "unit"]),
    default="integer",
    show_default=True,
    help="unit: bounded embeddings (positions divided by n+1), gamma(n) = 1/(n+1)^3.",
)
def build_dyck_cmd(
    pairs: tuple[str, ...], more_pairs: tuple[str, ...], out: str | None, scale: str
) -> None:
    """Dyck-k recognizer as an average-hard attention transformer."""

    allp = [*pairs, *more_pairs]
    if not allp:
        raise click.UsageError('give the bracket pairs, e.g. --pairs "()" "[]"')
    _emit(_build(build_dyck, allp, scale=scale), out)


@build.command("models")
@click.option(
    "--dir",
    "directory",
    default="models",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the bundled models are.",
)
@click.option("--check", "verify", is_flag=True, help="Only verify the directory is up to date.")
def build_models(directory: str, verify: bool) -> None:
    """Regenerate every bundled model in models/ (or verify it is current)."""

    d = Path(directory)
    models = catalog()
    if verify:  # outside a checkout there is nothing to compare with: exit 2, not "stale"
        need_repository(
            "build models --check",
            [d / f"{k}.json" for k in models],
            f"the bundled models ({directory}/*.json)",
        )
    stale = []
    for name, model in sorted(models.items()):
        path = d / f"{name}.json"
        text = model_text(model)
        if verify:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
            continue

        write_text_atomic(path, text)
        err_console.print(f"wrote {path}", highlight=False, markup=False)
    _exit_if_stale(stale, "build models")
    if verify:
        err_console.print(
            f"{directory}: every bundled model is up to date ({len(models)} files)",
            highlight=False,
            markup=False,
        )


@build.command("reports")
@click.option(
    "--models",
    "models_dir",
    default="models",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the bundled models are.",
)
@click.option(
    "--out",
    "out_dir",
    default="reports",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the reports go.",
)
@click.option("--check", "verify", is_flag=True, help="Only verify reports/ is up to date.")
@click.option("--only", multiple=True, help="Just these model stems.")
def build_reports(models_dir: str, out_dir: str, verify: bool, only: tuple[str, ...]) -> None:
    """Rerun the checks behind reports/ and rewrite (or verify) the reports."""

    if not verify:  # the reports' JSON files are named like the models
        refuse_overwrite([("--models", models_dir)], [("--out", out_dir)])
    stale = regenerate(Path(models_dir), Path(out_dir), verify=verify, only=list(only) or None)
    _exit_if_stale(stale, "build reports")


def _exit_if_stale(stale: list[str], command: str) -> None:
    """``build … --check`` found files out of date: exit 1 (a finding), naming them and the
    command that rewrites them."""
    if stale:
        err_console.print(
            f"[red]out of date:[/] {', '.join(stale)} (run `exactattn {command}`)",
            highlight=False,
        )
        sys.exit(1)


@build.command("claims")
@click.option("--rerun", is_flag=True, help="Rerun the checks behind reports/claims/ first.")
@click.option("--check", "verify", is_flag=True, help="Only verify docs/claims.md is current.")
def build_claims(rerun: bool, verify: bool) -> None:
    """Regenerate (or verify) the claims ledger docs/claims.md from reports/claims/."""

    root = Path(".")
    need_repository(
        "build claims" + (" --check" if verify else ""),
        [root / "reports" / "claims"],
        "the stored results (reports/claims/)",
    )
    if verify:
        need_repository("build claims --check", [root / "docs" / "claims.md"], "docs/claims.md")
    args = (["--rerun"] if rerun else []) + (["--check"] if verify else [])
    code = claims_main([*args, "--root", "."])
    if code:
        sys.exit(code)
    if verify:
        err_console.print(
            "docs/claims.md is up to date with reports/claims/", highlight=False, markup=False
        )


def _named(option: str, paths: list[Any]) -> list[tuple[str, Any]]:
    """``(option, path)`` for each file an option writes (a report: its figures too)."""
    return [(option, p) for p in paths]


def _split(s: str) -> list[str]:
    return [t.strip() for t in s.split(",") if t.strip()]


@main.group("import")
def import_() -> None:
    """Import models compiled by other tools."""


@import_.command("tracr")
@click.argument("params", type=click.Path(dir_okay=False))
@click.argument("meta", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Model file (default: stdout)."
)
def import_tracr(params: str, meta: str, out: str | None) -> None:
    """A tracr-compiled program (PARAMS.npz, META.json) as an exactattn model.

    From your own RASP program: python -m exactattn.importers.tracr_compile PROGRAM.py
    --vocab a,b --max-seq-len 5 -o build/NAME writes the pair (needs tracr and JAX:
    docs/tracr.md, "Your own program")."""

    refuse_overwrite([("PARAMS", params), ("META", meta)], [("-o", out)])
    _emit(_imp(Path(params), Path(meta)), out)


@main.command()
@click.argument("result_path", metavar="RESULT", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "tex"]),
    default=None,
    help="Markdown or LaTeX (default: from the suffix of -o, .md or .tex).",
)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), required=True, help="R.md or R.tex."
)
def report(result_path: str, fmt: str | None, out: str) -> None:
    """Write a Markdown or LaTeX report of a check, certify, precision or search file."""

    outs = report_files(Path(out), fmt) if Path(out).suffix in (".md", ".tex") or fmt else [out]
    refuse_overwrite([("RESULT", result_path)], _named("-o", outs))
    try:
        data = read_json(result_path)
    except UnicodeDecodeError:
        raise click.UsageError(
            f"{result_path} is not UTF-8 text (result files are UTF-8 JSON)"
        ) from None
    if format_of(data) == "exactattn-certificate/1":  # issue 23
        err_console.print(f"wrote {write_certificate_report(data, Path(out), fmt)}", markup=False)
        return
    if format_of(data) in RUN_FORMATS:  # precision and search files (issue 40)
        err_console.print(f"wrote {write_run_report(data, Path(out), fmt)}", markup=False)
        return
    if format_of(data) != RESULT_FORMAT:
        found = format_of(data)
        what = f"format {clip(str(found))!r}" if isinstance(found, str) else "no format"
        bad_input(  # one line, exit 2
            f"{result_path}: format: the file has {what}; report renders the results of "
            "check (exactattn-result/1), certify (exactattn-certificate/1), precision "
            "(exactattn-precision/1) and search (exactattn-search/1) (fix: give the --json "
            "file of one of these commands)"
        )
    validate_result(data, result_path)
    for p in write_report(data, Path(out), fmt):
        err_console.print(f"wrote {p}", highlight=False, markup=False)


main.add_command(precision_cmd)  # past enumeration, issue 14
main.add_command(search_cmd)
main.add_command(export_group)  # torch/TransformerLens, issue 26


main.add_command(certify_cmd)


build.add_command(build_rasp_cmd)


if __name__ == "__main__":  # pragma: no cover
    main()
