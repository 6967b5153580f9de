"""Progress bars for the long commands (``check``, ``certify --range``, ``precision``,
``search``): rich, on stderr, with an ETA, and only when stderr is a terminal.

Why here: every long command shows its progress the same way, and nothing of it reaches
stdout or a pipe (``exactattn certify … --range 1..100000 | tee log`` keeps a clean log;
a bar written to a file is noise). The engines take plain callbacks (``progress(done,
total)``, or ``progress(stage, done, total)`` for ``check``); these helpers turn them into a
bar, or into nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from exactattn.cli.common import err_console

Update = Callable[..., None]


def shown(quiet: bool = False) -> bool:
    """Whether a bar is drawn: not ``--quiet``, and stderr is a terminal (not a pipe or file)."""
    return not quiet and err_console.is_terminal and not err_console.is_dumb_terminal


def _bar() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,  # the bar goes when the work is done: the answer stays alone
    )


@contextmanager
def progress_bar(description: str, total: int | None, quiet: bool = False) -> Iterator[Any]:
    """A bar of ``total`` steps: yields ``update(done, total=None, description=None)``, or
    None when no bar is shown (the engines then skip the calls)."""
    if not shown(quiet):
        yield None
        return
    with _bar() as prog:
        task = prog.add_task(description, total=total)

        def update(done: int, total: int | None = None, description: str | None = None) -> None:
            prog.update(task, completed=done)
            if total is not None:
                prog.update(task, total=total)
            if description is not None:
                prog.update(task, description=description)

        yield update


@contextmanager
def check_progress(total: int | None, quiet: bool = False) -> Iterator[Any]:
    """``check``'s bar: yields ``progress(stage, done, stage_total)`` (see ``run_check``).

    Stages ``n=K`` (every input of length K) fill one bar over the whole job (``total``
    inputs); any other stage (``τ* n=K …``: the ``--find-tau`` probes, whose number is not
    known in advance) gets a second bar of its own, with the ETA of the current probe.
    """
    if not shown(quiet):
        yield None
        return
    with _bar() as prog:
        main = prog.add_task("checking", total=total)
        side: list[Any] = []
        offsets: dict[str, int] = {}
        base = [0]  # where the next length starts on the main bar

        def progress(stage: str, done: int, stage_total: int) -> None:
            if stage.startswith("n="):
                if stage not in offsets:
                    offsets[stage] = base[0]
                    base[0] += stage_total
                prog.update(main, completed=offsets[stage] + done, description=stage)
                return
            if not side:
                side.append(prog.add_task(stage, total=stage_total))
            prog.update(side[0], completed=done, total=stage_total, description=stage)

        yield progress
