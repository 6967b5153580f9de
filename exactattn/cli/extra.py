"""CLI commands past enumeration: ``precision`` (dtypes) and ``search`` (long inputs).

Kept apart from :mod:`exactattn.cli` so that module only needs two ``add_command`` lines.
Exit codes: 0 no flip found, 1 a decision flipped (precision) / n.a., 2 bad usage, 130
interrupted (precision keeps the lengths saved so far, marked ``"interrupted": true``; search
writes nothing). A Ctrl-C once the work is done is held and the result wins
(:class:`~exactattn.cli.common.FinishHold`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from exactattn.cli.common import (
    Console,
    FinishHold,
    _exact_cell,
    _restore,
    _snapshot,
    refuse_overwrite,
)
from exactattn.cli.progress import progress_bar
from exactattn.core.errors import ExactAttnError
from exactattn.core.jsonio import is_special, write_json_atomic
from exactattn.core.limits import clip
from exactattn.core.numbers import parse_decimal, short_decimal, short_sci_huge
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length
from exactattn.inputs.families import families_for
from exactattn.inputs.work import WORK_PER_INPUT, input_work, job_too_large, listed_too_large
from exactattn.model import load_model
from exactattn.model.provenance import model_sha256
from exactattn.results.precision import (
    Enclosure,
    PrecisionResult,
    PrecisionRun,
    PrecisionSettings,
    runs_of,
)
from exactattn.results.settings import TauChoice

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


MAX_FAMILY_N = 2**24
"""Longest single input of ``precision --n`` and ``search --n`` (as ``--n-pow2`` allows):
one word of 10^8 symbols ground for minutes (docs/limits.md)."""


def _parse_ns(ns: tuple[int, ...], pow2: str | None) -> list[int]:
    out = list(ns)
    for n in out:
        _check_n(n, "--n")
    if pow2:
        try:
            a, b = (int(v) for v in pow2.split(":"))
        except ValueError:
            raise click.UsageError("--n-pow2 takes A:B, e.g. 2:16 for n = 4 … 65536") from None
        if not 0 <= a <= b <= 24:
            raise click.UsageError("--n-pow2 A:B needs 0 <= A <= B <= 24")
        out += [2**k for k in range(a, b + 1)]
    return sorted(set(out))


def _taus(taus: tuple[str, ...]) -> list[tuple[str, TauChoice]]:
    """Each ``--tau`` with its label, parsed once ("model": the model's; no theorem mode)."""
    if not taus:
        return [("model", TauChoice.model())]
    return [(t, TauChoice.model() if t == "model" else TauChoice.parse(t, False)) for t in taus]


def precision_json(
    model: Any, runs: list[Any], settings: PrecisionSettings, interrupted: bool = False
) -> dict[str, Any]:
    """The exactattn-precision/1 document of the sweeps' runs so far (``interrupted``: not
    every length is run yet, so the file is partial if the process ends here)."""
    return PrecisionResult(
        model.name, settings, runs_of(runs), interrupted, model_sha256=model_sha256(model)
    ).to_json()


def _short(x: Enclosure | None) -> str:
    """An upper end for the terminal: 3 digits rounded up, as in check's table (the JSON keeps
    the outward decimals). A float rounded 0.00141443 to 0.00141, below the certified upper
    end, and 3e-400 to 0."""
    if x is None:
        return "—"
    _, u = x.texts()
    if u in ("inf", "-inf"):
        return u
    return short_sci_huge(u, 3, True) or short_decimal(parse_decimal(u), True)


def _precision_console() -> Console:
    """stdout's console; when piped, one wide enough that no cell is cut or wrapped."""
    if console.is_terminal:
        return console
    return Console(file=sys.stdout, width=100_000, color_system=None, highlight=False)


def _table(title: str, columns: list[tuple[str, bool]]) -> Table:
    """A table whose cells are never cut: no column wraps or ends in '…' (at 80 columns a
    cut τ or error read as another number); headers may take two lines."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=title, title_justify="left")
    for name, right in columns:
        t.add_column(name, justify="right" if right else "left", no_wrap=True, overflow="fold")
    return t


def print_precision(runs: list[PrecisionRun]) -> None:
    """One table per τ (the τ in its title, so the columns fit 80 characters), then the
    certified error split, then one line per (dtype, τ)."""
    out = _precision_console()
    taus = list(dict.fromkeys(r.tau for r in runs))
    for tau_text in taus:
        title = f"τ = {escape(tau_text)}"  # a --tau expression, as the user typed it
        t = _table(
            title,
            [
                ("dtype", False),
                ("n", True),
                ("inputs", True),
                ("flips", True),
                ("first\nflip", False),
                ("cause", False),
                ("‖dtype −\nhard‖", False),
                ("y err", False),
            ],
        )
        split = _table(
            f"error split (upper ends), {title}",
            [
                ("dtype", False),
                ("n", True),
                ("softmax\n(soft−hard)", False),
                ("rounding\n(dtype−soft)", False),
                ("certified\nsoft", False),
            ],
        )
        any_split = False
        for r in runs:
            if r.tau != tau_text:
                continue
            for e in r.lengths:
                ff = e.first_flip
                word, cause = "—", ""
                if ff:  # tokens are the user's strings
                    word = escape("".join(ff.input) if len(ff.input) <= 16 else f"{ff.family}")
                    cause = ff.cause
                t.add_row(
                    r.dtype,
                    str(e.n),
                    str(e.inputs),
                    str(e.flips),
                    word,
                    cause,
                    _short(e.total_error),
                    _short(e.readout_error),
                )
                so = e.soft
                if so or e.softmax_error:
                    any_split = True
                    sos = "—"
                    if so:
                        sos = f"{so.differs_from_hard}/{so.decided} ≠ hard"
                        if so.undecided:
                            sos += f", {so.undecided} undecided"
                    split.add_row(
                        r.dtype, str(e.n), _short(e.softmax_error), _short(e.rounding_error), sos
                    )
        out.print(t)
        if any_split:
            out.print(split)
    for r in runs:
        fn = r.first_flip_n
        out.print(
            f"{r.dtype} at τ = {escape(r.tau)}: "
            + (f"first flip at n = {fn}" if fn is not None else "no flip at the lengths run"),
            highlight=False,
        )


def _check_n(n: int, option: str) -> None:
    if n > MAX_FAMILY_N:
        raise click.UsageError(
            f"{option} {n:,} is longer than the limit of {MAX_FAMILY_N:,} = 2^24 "
            "(fix: a shorter length; docs/limits.md)"
        )


MAX_INPUT_LINE = 4 * MAX_FAMILY_N
"""Longest line of ``precision --inputs`` in characters (read in pieces of this size, so a
file of one endless line is refused, not read into memory)."""


def _read_inputs(
    path: str, sep: str | None, model: Any, max_inputs: int, force: bool
) -> dict[int, list[tuple[str, ...]]]:
    """The inputs of ``precision --inputs FILE`` by length: one per non-empty line, each of
    at most MAX_FAMILY_N symbols of the alphabet, together within ``--max-inputs`` (weighed
    by their work, as ``--max-n``) unless ``--force``; a file that is not UTF-8 is exit 2
    (it was an internal error, exit 4; issue 40)."""
    words_by_n: dict[int, list[tuple[str, ...]]] = {}
    alphabet = set(model.alphabet)
    layers, units, budget = len(model.layers), 0, max(max_inputs, 0) * WORK_PER_INPUT
    try:
        with open(path, encoding="utf-8", newline="") as f:
            ln = 0
            while line := f.readline(MAX_INPUT_LINE + 1):
                ln += 1
                if len(line) > MAX_INPUT_LINE:
                    raise click.UsageError(
                        f"{path}:{ln}: a line of more than {MAX_INPUT_LINE:,} characters "
                        f"(fix: inputs of at most {MAX_FAMILY_N:,} symbols, one per line)"
                    )
                line = line.strip()
                if not line:
                    continue
                w = tuple(t for t in line.split(sep) if t) if sep else tuple(line)
                if len(w) > MAX_FAMILY_N:
                    raise click.UsageError(
                        f"{path}:{ln}: an input of {len(w):,} symbols is longer than the limit "
                        f"of {MAX_FAMILY_N:,} = 2^24 (fix: a shorter input; docs/limits.md)"
                    )
                bad = next((t for t in w if t not in alphabet), None)
                if bad is not None:
                    raise click.UsageError(
                        f"{path}:{ln}: unknown symbol {clip(bad)!r} (fix: inputs use the "
                        f"alphabet: {clip(', '.join(model.alphabet), 200)})"
                    )
                words_by_n.setdefault(len(w), []).append(w)
                units += max(WORK_PER_INPUT, input_work(layers, model.d, len(w)))
                if not force and units > budget:  # refused before the rest is read
                    counts = {n: len(ws) for n, ws in words_by_n.items()}
                    where = f"{path} up to line {ln:,}"
                    raise click.UsageError(
                        listed_too_large(layers, model.d, counts, max_inputs, where) or ""
                    )
    except UnicodeDecodeError:
        raise click.UsageError(
            f"{path}: not UTF-8 text (fix: save the inputs as UTF-8, one per line)"
        ) from None
    if not words_by_n:  # "no flip" over zero inputs would be no answer
        raise click.UsageError(
            f"{path}: no input (every line is empty) (fix: write one input per line)"
        )
    return words_by_n


PRECISION_MAX_INPUTS = 1_000_000
"""Default input limit of ``precision --max-n`` (every input is kept in memory and run in
four dtypes: about 100× the cost of ``check`` per input, docs/limits.md)."""


def _check_range(model: Any, lo: int, hi: int, max_inputs: int, force: bool) -> None:
    """Refuse an empty or unsupported range of lengths, and (without --force) one holding
    more than ``max_inputs`` inputs (long ones weighted by their work), counted by arithmetic
    before any input is built."""

    if hi < lo:
        raise click.UsageError(
            f"--max-n {hi} is below the smallest length {lo}: no length to run "
            "(fix: --max-n at least --min-n)"
        )
    for n in (lo, hi):
        model.check_length(n)
    k = len(model.alphabet)
    # by count, then by work: long inputs weigh L·(n+2)²·d (inputs/work.py)
    too_large = None if force else job_too_large(k, len(model.layers), model.d, lo, hi, max_inputs)
    if too_large:
        raise click.UsageError(too_large)


@click.command("precision")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option(
    "--dtype",
    "dtypes",
    multiple=True,
    type=click.Choice(["float16", "bfloat16", "float32", "float64"]),
    help="IEEE dtype(s) to deploy in (repeatable; default all four).",
)
@click.option("--max-n", type=int, default=None, help="Every input of length min-n..max-n.")
@click.option("--min-n", type=int, default=None, help="With --max-n (default: the model's).")
@click.option(
    "--inputs",
    "inputs_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file of inputs, one per line.",
)
@click.option("--sep", default=None, help="Symbol separator in --inputs lines (default: chars).")
@click.option("--family", "families", multiple=True, help="Input family (repeatable, or 'all').")
@click.option("--n", "ns", multiple=True, type=int, help="Family length(s) (repeatable).")
@click.option("--n-pow2", default=None, help="Family lengths 2^A..2^B, e.g. 2:16.")
@click.option(
    "--tau",
    "taus",
    multiple=True,
    help="Temperature expression in n, or 'model' (repeatable; default: the model's).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the random families (random-balanced).",
)
@click.option(
    "--certified/--no-certified",
    default=True,
    help="Also certify the soft meaning (error split softmax / rounding).",
)
@click.option("--stop-after-flip", is_flag=True, help="Stop a dtype/τ after its first flip.")
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Write the JSON here."
)
@click.option(
    "--max-inputs",
    type=int,
    default=PRECISION_MAX_INPUTS,
    show_default=True,
    help="Refuse --max-n or --inputs with more inputs (weighed by their work) unless --force.",
)
@click.option("--force", is_flag=True, help="Run even past --max-inputs.")
@click.option("-v", "--verbose", is_flag=True, help="Timing per word (families).")
@click.option(
    "--backend",
    type=click.Choice(
        [
            "numpy",
            "torch-eager",
            "torch-sdpa",
            "torch-sdpa-math",
            "torch-sdpa-flash",
            "torch-sdpa-efficient",
        ]
    ),
    default="numpy",
    show_default=True,
    help="Who runs the forward pass: the numpy emulation or PyTorch's kernels (extra 'torch').",
)
def precision_cmd(
    model_path: str,
    dtypes: tuple[str, ...],
    max_n: int | None,
    min_n: int | None,
    inputs_file: str | None,
    sep: str | None,
    families: tuple[str, ...],
    ns: tuple[int, ...],
    n_pow2: str | None,
    taus: tuple[str, ...],
    seed: int,
    certified: bool,
    stop_after_flip: bool,
    json_out: str | None,
    max_inputs: int,
    force: bool,
    verbose: bool,
    backend: str = "numpy",
) -> None:
    """The soft meaning as deployed in IEEE dtypes vs the exact hard meaning.

    Exit 0: no decision flips; 1: some decision flips.
    """

    # lazy: the precision sweep (dtype engines) only for this command (start-up time)
    from exactattn.run.precision import backend_version, sweep_family, sweep_words

    refuse_overwrite([("MODEL", model_path), ("--inputs", inputs_file)], [("--json", json_out)])
    model = load_model(model_path)
    dts = list(dtypes) or ["float16", "bfloat16", "float32", "float64"]
    tl = _taus(taus)
    modes = sum(x is not None and x != () for x in (max_n, inputs_file, families or None))
    if modes != 1:
        raise click.UsageError("give exactly one of --max-n, --inputs FILE, --family NAME")
    settings = PrecisionSettings(
        tuple(dts),
        tuple(t[0] for t in tl),
        seed,
        backend,
        backend_version(backend),
        mode="inputs",
        certified=certified,
    )

    hold = FinishHold.for_command()  # Ctrl-C once every length is run: the result wins
    done = False  # every length run: only then does a save drop the "interrupted" mark
    saved: list[PrecisionResult] = []  # the last save's record (the line an interrupt prints)
    digest = model_sha256(model)

    def complete() -> None:
        nonlocal done
        done = True
        hold.start()

    special = json_out is not None and is_special(json_out)

    def save(runs: list[Any], final: bool = False) -> None:
        with hold.saving():  # a Ctrl-C waits for the file, or is held
            saved[:] = [
                PrecisionResult(model.name, settings, runs_of(runs), not done, model_sha256=digest)
            ]
            # a device or FIFO (--json /dev/stdout) gets one document: the complete one
            if json_out and (final or not special):
                write_json_atomic(Path(json_out), saved[0].to_json())

    log = (lambda s: err_console.print(s, highlight=False)) if verbose else None

    before = _snapshot(json_out)  # exit 2 writes nothing, even after saved lengths
    try:
        if families:
            fams = list(families_for(model)) if "all" in families else list(families)
            nlist = _parse_ns(ns, n_pow2)
            if not nlist:
                raise click.UsageError("--family needs --n N (repeatable) or --n-pow2 A:B")
            settings = replace(settings, mode="family", families=tuple(fams), ns=tuple(nlist))
            with progress_bar("precision (family inputs)", len(fams) * len(nlist)) as update:
                runs = sweep_family(
                    model,
                    fams,
                    nlist,
                    dts,
                    tl,
                    seed,
                    stop_after_flip,
                    on_length=save,
                    log=log,
                    certified=certified,
                    backend=backend,
                    on_complete=complete,
                    progress=update,
                )
        else:
            if inputs_file:
                words_by_n = _read_inputs(inputs_file, sep, model, max_inputs, force)
            else:
                assert max_n is not None
                lo = min_n if min_n is not None else model.min_length
                _check_range(model, lo, max_n, max_inputs, force)
                words_by_n = {n: words_of_length(model.alphabet, n) for n in range(lo, max_n + 1)}
                settings = replace(settings, mode="enumerate", min_n=lo, max_n=max_n)
            with progress_bar("precision (inputs)", None) as update:  # total: the sweep's
                runs = sweep_words(
                    model,
                    words_by_n,
                    dts,
                    tl,
                    certified=certified,
                    on_length=save,
                    log=log,
                    backend=backend,
                    on_complete=complete,
                    progress=update,
                )
        complete()
        save(runs, final=True)
    except (ExactAttnError, click.UsageError, OSError):
        _restore(json_out, before)
        raise
    except KeyboardInterrupt:  # exit 130; the file (if any) keeps the mark of its last save
        if saved and json_out:
            what = saved[0].stop_text() or "interrupted"
            err_console.print(
                f"precision: {what}; {json_out} keeps the lengths saved so far",
                highlight=False,
                markup=False,
            )
        raise
    res = PrecisionResult(model.name, settings, runs_of(runs), model_sha256=digest)
    print_precision(list(res.runs))
    console.print(f"forward pass: {backend} ({settings.backend_version})", highlight=False)
    hold.say_if_hit("every length was already run and the result is complete")
    sys.exit(1 if res.flipped else 0)


@click.command("search")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--n", "n", type=int, required=True, help="Input length.")
@click.option(
    "--objective",
    type=click.Choice(["margin", "error", "gamma"]),
    required=True,
    help="Smallest hard margin, largest certified error, or smallest score gap.",
)
@click.option("--budget", type=int, default=200, show_default=True, help="Inputs evaluated.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--beam", type=int, default=4, show_default=True, help="Candidates kept per step.")
@click.option("--tau", default=None, help="Temperature override (objective error).")
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Write the JSON here."
)
def search_cmd(
    model_path: str,
    n: int,
    objective: str,
    budget: int,
    seed: int,
    beam: int,
    tau: str | None,
    json_out: str | None,
) -> None:
    """Local/beam search for certified witnesses at one length (bounds, not exhaustive)."""

    # lazy: the search only for this command (start-up time)
    from exactattn.run.search import run_search

    refuse_overwrite([("MODEL", model_path)], [("--json", json_out)])
    model = load_model(model_path)
    if beam < 1:
        raise click.UsageError("--beam must be at least 1 (the number of inputs kept per step)")
    _check_n(n, "--n")
    choice = TauChoice.parse(tau, False)
    if tau is not None:  # τ(n) > 0 for every objective (margin and gamma ignore it: say so)
        Temperatures(model, choice).at(n, BASE_PREC)
    hold = FinishHold.for_command()
    with progress_bar(f"search n = {n} ({objective})", budget) as update:
        res = run_search(
            model,
            n,
            objective,
            budget,
            seed,
            beam,
            choice,
            progress=None if update is None else (lambda done, _best: update(done)),
        )
    hold.start()  # the search is done: a Ctrl-C from here is held, the result wins
    if json_out:
        write_json_atomic(Path(json_out), res.to_json())
    w = res.witness
    word = "".join(w.input) if len(w.input) <= 60 else f"{''.join(w.input[:60])}…"
    lo, hi = w.value.texts()  # the written (outward) ends, shortened for the terminal
    console.print(
        f"{model.name} n = {n}, objective {objective}: {res.evaluated} inputs evaluated "
        f"(a search, not an enumeration)\n{res.meaning}\n"
        f"witness {word}\nvalue [{_long(lo)}, {_long(hi)}] "
        f"layer {w.layer} position {w.position}",
        highlight=False,
        markup=False,  # the model name and the witness are the user's strings
        soft_wrap=True,  # lines as written: wrapping depends on a terminal stdout may not be
    )
    hold.say_if_hit("the search was already done and its result is complete")


def _long(text: str) -> str:
    """A value for the terminal: exact rationals past 40 characters as ≈ a 3-digit decimal
    (the --json output keeps every digit; exactattn/cli/common.py, docs/limits.md)."""

    if len(text) <= 40 or "e" in text or text in ("inf", "-inf"):
        return text
    return _exact_cell(text)
