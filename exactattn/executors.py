"""Where shards run: this process, N local processes, or a Dask cluster.

Every executor has one method, ``map_shards(job, shards, progress, stage, total)``,
returning ``{shard.index: LengthRecord}``. Workers send records back as exact JSON
(:meth:`LengthRecord.to_json` with ``exact=True``), the same form a checkpoint stores, so
a record is identical whichever way it travelled. With a :class:`Checkpoint`, finished
shards are stored atomically as they arrive and skipped when the same job runs again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from exactattn.check import LengthJob, check_shard
from exactattn.errors import UsageError
from exactattn.inputs import Shard
from exactattn.jsonio import read_json, write_json_atomic
from exactattn.results import LengthRecord

CHECKPOINT_FORMAT = "exactattn-checkpoint/1"


_FLINT_LOCK = threading.Lock()


def shard_task(job: LengthJob, shard: Shard) -> dict[str, Any]:
    """Run one shard (in whatever process this is) and return its exact record JSON.

    python-flint's working precision is one global per process, so shards in threads of
    one process would change each other's precision: they take turns (parallelism comes
    from processes; start Dask workers with ``--nthreads 1``).
    """
    with _FLINT_LOCK:
        return check_shard(job, shard).to_json(exact=True)


def _record(job: LengthJob, data: dict[str, Any]) -> LengthRecord:
    return LengthRecord.from_json(data, job.model.alphabet)


# ---------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------


class Checkpoint:
    """A directory of finished shard records for one model, settings and version.

    ``manifest.json`` holds the fingerprint; a directory made for anything else is
    refused, so a resumed run can never mix in records of another job.
    """

    def __init__(self, directory: str | Path, fingerprint: dict[str, Any]) -> None:
        self.dir = Path(directory)
        self.fingerprint = fingerprint
        manifest = self.dir / "manifest.json"
        if manifest.exists():
            try:
                old = read_json(manifest)
            except (OSError, ValueError) as exc:
                raise UsageError(f"--checkpoint {self.dir}: unreadable manifest ({exc})") from None
            if not isinstance(old, dict) or old.get("format") != CHECKPOINT_FORMAT:
                raise UsageError(f"--checkpoint {self.dir} is not an exactattn checkpoint")
            if old.get("fingerprint") != fingerprint:
                diff = sorted(
                    k
                    for k in set(fingerprint) | set(old.get("fingerprint") or {})
                    if (old.get("fingerprint") or {}).get(k) != fingerprint.get(k)
                )
                raise UsageError(
                    f"--checkpoint {self.dir} was made for a different job (differs in: "
                    f"{', '.join(diff)}); use another directory or delete this one"
                )
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(manifest, {"format": CHECKPOINT_FORMAT, "fingerprint": fingerprint})

    def _path(self, job: LengthJob, shard: Shard) -> Path:
        tag = "hard" if job.hard_only else f"soft-{job.tau or 'model'}"
        h = hashlib.sha256(tag.encode()).hexdigest()[:12]
        return self.dir / f"{h}-n{shard.n}" / f"s{shard.index}.json"

    def load(self, job: LengthJob, shard: Shard) -> dict[str, Any] | None:
        p = self._path(job, shard)
        if not p.exists():
            return None
        return read_json(p)

    def store(self, job: LengthJob, shard: Shard, data: dict[str, Any]) -> None:
        write_json_atomic(self._path(job, shard), data, indent=None)


def fingerprint(model_text: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint must match: the model file, the check's settings, our version."""
    from exactattn import __version__
    from exactattn.inputs import shard_inputs

    return {
        "model_sha256": hashlib.sha256(model_text.encode("utf-8")).hexdigest(),
        "settings": settings,
        "shard_inputs": shard_inputs(),
        "exactattn": __version__,
    }


# ---------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------


class _Base:
    def __init__(self, checkpoint: Checkpoint | None = None) -> None:
        self.checkpoint = checkpoint

    def map_shards(
        self,
        job: LengthJob,
        shards: Sequence[Shard],
        progress: Callable[[str, int, int], None] | None,
        stage: str,
        total: int,
    ) -> dict[int, LengthRecord]:
        out: dict[int, LengthRecord] = {}
        todo = []
        done = 0
        for s in shards:
            data = self.checkpoint.load(job, s) if self.checkpoint else None
            if data is not None:
                out[s.index] = _record(job, data)
                done += s.size
            else:
                todo.append(s)
        if progress:
            progress(stage, done, total)

        def finished(s: Shard, data: dict[str, Any]) -> None:
            nonlocal done
            if self.checkpoint:
                self.checkpoint.store(job, s, data)
            out[s.index] = _record(job, data)
            done += s.size
            if progress:
                progress(stage, done, total)

        self._run(job, todo, finished, progress, stage, total, lambda: done)
        return out

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]
        raise NotImplementedError


class InProcess(_Base):
    """Shards one after another in this process (with progress inside each shard)."""

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]
        for s in todo:
            base = done_now()
            seen = 0

            def tick(k: int, base: int = base) -> None:
                nonlocal seen
                seen += k
                if progress:
                    progress(stage, base + seen, total)

            finished(s, check_shard(job, s, tick).to_json(exact=True))


def _leave_sigint_to_parent() -> None:
    """Worker initializer: Ctrl-C reaches the whole process group, but only the parent acts
    on it (it stops the workers); a worker would print its own KeyboardInterrupt traceback."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Processes(_Base):
    """Shards in ``jobs`` local worker processes (started once, reused for every length)."""

    def __init__(self, jobs: int, checkpoint: Checkpoint | None = None) -> None:
        super().__init__(checkpoint)
        self.jobs = jobs
        self._pool: Any = None

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        if not todo:
            return
        if self._pool is None:
            import multiprocessing

            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_leave_sigint_to_parent,
            )
        pending = {self._pool.submit(shard_task, job, s): s for s in todo}
        try:
            while pending:
                ready, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in ready:
                    s = pending.pop(f)
                    finished(s, f.result())
        except BaseException:
            self.close(kill=True)
            raise

    def close(self, kill: bool = False) -> None:
        """Stop the workers: let them finish (``kill=False``) or kill them (Ctrl-C, errors).

        Killing leaves the pending futures uncancelled: the pool's manager thread marks them
        failed (BrokenProcessPool) and exits. Cancelling them first made that thread print
        an InvalidStateError traceback (CPython < 3.12 sets an exception on a cancelled
        future there), before our one-line "interrupted" (issue 27, item 10).
        """
        if self._pool is not None:
            pool, self._pool = self._pool, None
            if kill:
                for p in list((getattr(pool, "_processes", None) or {}).values()):
                    p.kill()
                pool.shutdown(wait=True)
            else:
                pool.shutdown(wait=True, cancel_futures=True)


class Dask(_Base):
    """Shards on an existing ``dask.distributed`` cluster (the scheduler's address)."""

    def __init__(self, address: Any, checkpoint: Checkpoint | None = None) -> None:
        super().__init__(checkpoint)
        try:
            from dask.distributed import Client
        except ImportError:
            raise UsageError(
                "--dask needs dask.distributed: pip install 'exactattn[dask]'"
            ) from None
        try:
            self.client = address if hasattr(address, "submit") else Client(address, timeout=30)
        except OSError as exc:
            raise UsageError(f"--dask {address}: cannot reach the scheduler ({exc})") from None

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]
        from dask.distributed import as_completed

        if not todo:
            return
        jf = self.client.scatter(job, broadcast=True)
        futures = {self.client.submit(shard_task, jf, s, pure=False): s for s in todo}
        for f in as_completed(list(futures)):
            finished(futures[f], f.result())

    def close(self, kill: bool = False) -> None:
        pass


def make_executor(
    jobs: int = 1, dask: Any = None, checkpoint: Checkpoint | None = None
) -> InProcess | Processes | Dask:
    """The executor for ``--jobs`` / ``--dask`` (one process by default)."""
    if dask is not None:
        return Dask(dask, checkpoint)
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    if jobs == 1:
        return InProcess(checkpoint)
    return Processes(jobs, checkpoint)


__all__ = [
    "Checkpoint",
    "Dask",
    "InProcess",
    "Processes",
    "fingerprint",
    "make_executor",
    "shard_task",
]
