"""Where shards run: this process, N local processes, or a Dask cluster.

Every executor has one method, ``map_shards(job, shards, progress, stage, total)``,
returning ``{shard.index: LengthRecord}``. Workers send records back as exact JSON
(:meth:`LengthRecord.to_json` with ``exact=True``), the same form a checkpoint stores, so
a record is identical whichever way it travelled. With a :class:`Checkpoint`, finished
shards are stored atomically as they arrive and skipped when the same job runs again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, wait
from pathlib import Path
from typing import Any

from exactattn.core.errors import ClusterLost, ExactAttnError, UsageError
from exactattn.core.guard import deferred_interrupt
from exactattn.core.jsonio import read_json, write_json_atomic
from exactattn.core.limits import clip
from exactattn.core.version import __version__
from exactattn.inputs import Shard, shard_inputs
from exactattn.results import LengthRecord
from exactattn.run.shard import LengthJob, check_shard, hard_filter_start

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


SHARD_FORMAT = "exactattn-shard/1"
LOCK_NAME = "lock"

_HELD: set[str] = set()  # checkpoint directories this process holds (POSIX locks are per process)


def canonical_digest(data: Any) -> str:
    """SHA-256 of the canonical JSON of ``data`` (sorted keys, no spaces, ASCII)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class Checkpoint:
    """A directory of finished shard records for one model, settings and version.

    ``manifest.json`` holds the fingerprint; a directory made for anything else is
    refused, so a resumed run can never mix in records of another job. Each shard file
    carries its identity (the fingerprint's digest, the model's SHA-256, the length, the
    temperature and precision settings, the shard's index and rank range) and a SHA-256 of
    identity and record; a file that is unreadable, foreign or altered is recomputed (and
    said so on stderr), never trusted. The digest guards against damage and mix-ups (a
    shard copied over another, an edited count), not against someone who rewrites both a
    record and its digest on purpose. One run at a time: the directory's ``lock`` file is
    held (a POSIX lock, released when the process ends, even by SIGKILL); a second run on
    it exits 2.
    """

    def __init__(
        self,
        directory: str | Path,
        fingerprint: dict[str, Any],
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.fingerprint = fingerprint
        self.fingerprint_sha256 = canonical_digest(fingerprint)
        self.notice = notice or _stderr_line
        self.rejected: list[tuple[Shard, str]] = []
        self._store_failed = False
        self._lock()
        try:
            self._no_links()
            self._manifest()
        except BaseException:
            self.close()
            raise

    # -- one run at a time ------------------------------------------------------------
    def _lock(self) -> None:
        self._held: DirectoryLock | None = DirectoryLock(self.dir)

    def close(self) -> None:
        """Release the directory (also done by the OS when the process ends)."""
        held = getattr(self, "_held", None)
        if held is not None:
            held.release()
            self._held = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the OS drops the lock anyway
            pass

    def _no_links(self) -> None:
        """Refuse a symlink (or a FIFO, a device) among the directory's entries: the lock,
        the manifest and the shard folders are written and read in place, so a planted link
        was written through (issue 40) and a FIFO hung the read."""
        for entry in sorted(self.dir.iterdir()):
            if entry.name == LOCK_NAME:
                continue  # checked when it was opened (DirectoryLock)
            if entry.is_symlink() or not (entry.is_dir() or entry.is_file()):
                raise UsageError(_not_plain(self.dir, entry))

    def _manifest(self) -> None:
        manifest = self.dir / "manifest.json"
        fingerprint = self.fingerprint
        if manifest.exists():
            try:
                old = read_json(manifest)
            except (OSError, ValueError, ExactAttnError) as exc:
                raise UsageError(
                    f"--checkpoint {self.dir}: unreadable manifest.json ({_short(exc)}); "
                    "delete the directory to start afresh"
                ) from None
            if not isinstance(old, dict) or old.get("format") != CHECKPOINT_FORMAT:
                raise UsageError(f"--checkpoint {self.dir} is not an exactattn checkpoint")
            if old.get("fingerprint") != fingerprint:
                was = old.get("fingerprint")
                was = was if isinstance(was, dict) else {}
                diff = sorted(
                    str(k) for k in set(fingerprint) | set(was) if was.get(k) != fingerprint.get(k)
                )
                raise UsageError(
                    f"--checkpoint {self.dir} was made for a different job (differs in: "
                    f"{', '.join(diff)[:200]}); use another directory or delete this one"
                )
        else:
            write_json_atomic(manifest, {"format": CHECKPOINT_FORMAT, "fingerprint": fingerprint})

    # -- shards ---------------------------------------------------------------------
    def _path(self, job: LengthJob, shard: Shard) -> Path:
        tag = "hard" if job.hard_only else f"soft-{job.tau_text or 'model'}"
        h = hashlib.sha256(tag.encode()).hexdigest()[:12]
        return self.dir / f"{h}-n{shard.n}" / f"s{shard.index}.json"

    def identity(self, job: LengthJob, shard: Shard) -> dict[str, Any]:
        """What a shard file must have been made for (everything its record depends on)."""
        ident = {
            "checkpoint": self.fingerprint_sha256,
            "model_sha256": self.fingerprint.get("model_sha256"),
            "n": shard.n,
            "tau": job.tau_text,
            "hard_only": job.hard_only,
            "max_prec": job.max_prec,
            # the float cascade's switches (job.policy), under the keys they had as four
            # booleans of the job (the same bytes: older checkpoints still resume)
            "float_filter": job.policy.floats,
            "dd_tier": job.policy.dd,
            "centred_tier": job.policy.centred,
            "coarse_tier": job.policy.coarse,
            "blas": job.policy.blas,
            "shard": {"index": shard.index, "start": shard.start, "stop": shard.stop},
        }
        if job.policy.coarse:
            # version 2 of the coarse tier: fixed-order products by default (BLAS ones only
            # with blas); shards of version 1 (BLAS products always, other bits) lack the key
            # and are recomputed (docs/model-format.md); version 3: the words it leaves go to
            # the centred tier first (other bits), so shards of version 2 are recomputed
            ident["coarse_version"] = 3
        if not job.hard_only and hard_filter_start(job) is not None:
            # the hard meaning from the float filter (engine/hardfilter.py): the coarse tier
            # reads its enclosures and the later tiers an exact sub-batch of the words it
            # leaves, so soft enclosures may differ in their last digits from shards made
            # without it (which lack the key and are recomputed); hard-only records do not
            # change (proofs/hard_filter.md, Lemma X)
            ident["hard_filter"] = 1
        return ident

    def load(self, job: LengthJob, shard: Shard) -> LengthRecord | None:
        """The shard's verified record; None when absent or rejected (then in ``rejected``)."""
        p = self._path(job, shard)
        if not p.exists() and not p.is_symlink():
            return None
        why = None
        if p.is_symlink() or p.parent.is_symlink() or not p.is_file():
            self.rejected.append((shard, "not a regular file (a link, a directory or a FIFO)"))
            return None
        try:
            data = read_json(p)
        except RecursionError:
            why = "nested too deeply"
        except (OSError, ValueError, ExactAttnError) as exc:  # UnicodeDecodeError is a ValueError
            why = f"unreadable ({_short(exc)})"
        else:
            why = self._verify(job, shard, data)
        if why is None:
            try:
                rec = _record(job, data["record"])
            except Exception as exc:  # noqa: BLE001 - a shard that fails to parse is recomputed
                why = f"unreadable record ({type(exc).__name__})"
            else:
                if rec.n != shard.n or rec.inputs != shard.size:
                    why = f"its record is of n = {rec.n} with {rec.inputs} inputs"
                else:
                    return rec
        self.rejected.append((shard, why))
        return None

    def _verify(self, job: LengthJob, shard: Shard, data: Any) -> str | None:
        if not isinstance(data, dict) or data.get("format") != SHARD_FORMAT:
            return f"not an {SHARD_FORMAT} file"
        if data.get("identity") != self.identity(job, shard):
            return "made for another shard, length or job"
        record = data.get("record")
        if not isinstance(record, dict):
            return "no record"
        if data.get("sha256") != canonical_digest([data["identity"], record]):
            return "its content does not match its digest (edited or damaged)"
        return None

    def store(self, job: LengthJob, shard: Shard, data: dict[str, Any]) -> None:
        ident = self.identity(job, shard)
        wrapped = {
            "format": SHARD_FORMAT,
            "identity": ident,
            "sha256": canonical_digest([ident, data]),
            "record": data,
        }
        path = self._path(job, shard)
        try:
            if path.parent.is_symlink():  # never written through (a link planted mid-run)
                raise OSError(f"{path.parent.name} is a symbolic link")
            write_json_atomic(path, wrapped, indent=None)
        except OSError as exc:  # a checkpoint saves work; failing to keep a shard loses no result
            if not self._store_failed:
                self.notice(
                    f"warning: --checkpoint {self.dir}: cannot store shards ({_short(exc)}); "
                    "continuing without keeping them"
                )
            self._store_failed = True

    def report_rejected(self, stage: str) -> None:
        """One stderr line for the shards of this length that failed verification."""
        if not self.rejected:
            return
        parts = [f"s{s.index}: {why}" for s, why in self.rejected[:3]]
        more = f"; {len(self.rejected) - 3} more" if len(self.rejected) > 3 else ""
        self.notice(
            f"warning: --checkpoint {self.dir}: recomputing {len(self.rejected)} shard(s) of "
            f"{stage} that failed verification ({'; '.join(parts)}{more})"
        )
        self.rejected = []


class DirectoryLock:
    """A checkpoint directory's ``lock`` file, held by one run.

    A POSIX record lock: the OS drops it when the process ends (even by SIGKILL), so a stale
    lock file never blocks, and forked workers do not inherit it. POSIX locks do not exclude
    the same process, so this process's held directories are remembered as well.
    """

    def __init__(self, directory: Path) -> None:
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"--checkpoint {directory} is a file, not a directory")
        directory.mkdir(parents=True, exist_ok=True)
        self.key = str(directory.resolve())
        busy = f"--checkpoint {directory} is in use by another run (its lock file is held); "
        fix = "wait for that run to finish or use another directory"
        if self.key in _HELD:
            raise UsageError(busy + fix)
        lock = directory / LOCK_NAME
        if lock.is_symlink() or (lock.exists() and not lock.is_file()):
            raise UsageError(_not_plain(directory, lock))
        # O_NOFOLLOW: a link planted between the test and the open is not followed either
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(lock, flags, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise UsageError(_not_plain(directory, lock)) from None
        try:
            # lazy: POSIX only (no fcntl on Windows)
            import fcntl

            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no POSIX locks (Windows): one run at a time is up to the user
            pass
        except OSError:
            os.close(fd)
            raise UsageError(busy + fix) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd: int | None = fd
        _HELD.add(self.key)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the POSIX lock
            self.fd = None
            _HELD.discard(self.key)


def _not_plain(directory: Path, entry: Path) -> str:
    what = "a symbolic link" if entry.is_symlink() else "not a regular file or folder"
    return (
        f"--checkpoint {directory}: {entry.name} is {what}, which a checkpoint never writes "
        "through (fix: remove it, or use another directory)"
    )


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


def _stderr_line(text: str) -> None:

    print(text, file=sys.stderr, flush=True)


def fingerprint(model_sha256: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint must match: the model's content digest (the one identity of a model,
    exactattn.model.provenance.model_sha256, as in result files), the check's settings, our
    version."""

    return {
        "model_sha256": model_sha256,
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
            rec = self.checkpoint.load(job, s) if self.checkpoint else None
            if rec is not None:
                out[s.index] = rec
                done += s.size
            else:
                todo.append(s)
        if self.checkpoint:
            self.checkpoint.report_rejected(stage)
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

    def close(self, kill: bool = False) -> None:
        """Release workers (nothing to release in this process)."""


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

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Processes(_Base):
    """Shards in ``jobs`` local worker processes (started once, reused for every length)."""

    def __init__(self, jobs: int, checkpoint: Checkpoint | None = None) -> None:
        super().__init__(checkpoint)
        self.jobs = jobs
        self._pool: Any = None

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]

        if not todo:
            return
        if self._pool is None:
            # lazy: multiprocessing is only for --jobs N (start-up time of every command)
            import multiprocessing

            # lazy: concurrent.futures.process imports multiprocessing (as above)
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_leave_sigint_to_parent,
            )
        pending: dict[Any, Shard] = {}
        try:
            # the first submits fork the workers; a Ctrl-C inside os.fork's after-fork hooks
            # (logging's lock release) was printed as "Exception ignored" and lost, so the run
            # went on (the signal fuzz, seed 1 at 0.58 s): hold it until the forks are done
            with deferred_interrupt():
                pending = {self._pool.submit(shard_task, job, s): s for s in todo}
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


DASK_SCHEMES = ("tcp", "tls", "ws", "wss")
DASK_MISSING = (
    '--dask needs dask.distributed (fix: in the exactattn checkout, pip install -e ".[dask]")'
)
"""Address schemes a scheduler can be reached by from another process."""


def dask_timeout() -> float:
    """Seconds to wait for a scheduler (connect) or for a worker to appear (no workers).

    ``EXACTATTN_DASK_TIMEOUT`` (default 10): short, so an unreachable address does not hang.
    """
    text = os.environ.get("EXACTATTN_DASK_TIMEOUT", "")
    try:
        value = float(text)
    except ValueError:
        return 10.0
    return value if 0 < value <= 3600 else 10.0


def parse_dask_address(address: str) -> str:
    """A scheduler address ``[tcp://]HOST:PORT`` (or tls/ws/wss), checked before connecting."""

    shown = clip(address or "''", 80)
    fix = "give the scheduler's address as tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786"
    text = address.strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else "tcp"
    if scheme not in DASK_SCHEMES:
        why = (
            "inproc:// addresses exist only inside one Python process"
            if scheme == "inproc"
            else f"the scheme {clip(scheme, 20)!r} is not one exactattn connects by "
            f"(use {', '.join(s + '://' for s in DASK_SCHEMES)})"
        )
        raise UsageError(f"--dask {shown}: {why}; {fix}")
    try:
        # lazy: dask.distributed, an optional extra (≈ 1 s to import)
        from distributed.comm.addressing import parse_address, parse_host_port

        _, loc = parse_address(text if "://" in text else f"tcp://{text}")
        host, port = parse_host_port(loc)
    except ImportError:
        raise UsageError(DASK_MISSING) from None
    except (ValueError, TypeError) as exc:
        why = f"not a scheduler address ({_short(exc)})"
        raise UsageError(f"--dask {shown}: {why}; {fix}") from None
    if not host or not isinstance(port, int) or not 0 < port < 65536:
        raise UsageError(f"--dask {shown}: needs a host and a port from 1 to 65535; {fix}")
    return text if "://" in text else f"tcp://{text}"


class Dask(_Base):
    """Shards on an existing ``dask.distributed`` cluster (the scheduler's address).

    A bad or unreachable address, or a scheduler where no worker joins within
    :func:`dask_timeout` seconds, is exit 2 before any work. A scheduler that dies, a shard
    that kills its workers, or a cluster left without workers for :func:`dask_timeout`
    seconds mid-run raises :class:`ClusterLost`: the run stops as an incomplete result that
    the same command (with ``--checkpoint``) resumes.
    """

    def __init__(self, address: Any, checkpoint: Checkpoint | None = None) -> None:
        super().__init__(checkpoint)
        self._own = not hasattr(address, "submit")
        if not self._own:
            self.client = address
            self.address = str(getattr(getattr(address, "scheduler", None), "address", "client"))
            self._require_workers(dask_timeout())
            return
        try:
            # lazy: dask.distributed, an optional extra (≈ 1 s to import)
            from dask.distributed import Client
        except ImportError:
            raise UsageError(DASK_MISSING) from None
        if not isinstance(address, str):
            raise UsageError(f"--dask expects an address string, got {type(address).__name__}")
        self.address = parse_dask_address(address)
        timeout = dask_timeout()
        self._restore_logs = _quiet_logs()
        try:
            # a failed Client() leaves an object whose __del__ prints a traceback at exit:
            # ask whatever listens there who it is first (one message, a timeout)
            _probe_scheduler(self.address, timeout)
            self.client = Client(self.address, timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - whatever answered there is not a scheduler
            self._restore_logs()

            raise UsageError(
                f"--dask {clip(address, 80)}: cannot connect to a dask scheduler there "
                f"({type(exc).__name__}: {_short(exc)}); check the address and that "
                "`dask scheduler` runs there"
            ) from None
        try:
            self._require_workers(timeout)
        except UsageError:
            self.close()
            raise

    def _require_workers(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a worker: a scheduler that has none is a usage
        error before any work (it used to surface as "lost the cluster mid-run", exit 130)."""
        wait = getattr(self.client, "wait_for_workers", None)
        if wait is None:  # a duck-typed client (tests) has no scheduler to ask
            return
        try:
            wait(1, timeout=timeout)
        except TimeoutError:  # distributed's WorkerStartTimeoutError is one
            raise UsageError(
                f"--dask {clip(self.address, 80)}: the scheduler there has no workers (none "
                f"joined within {timeout:g} s); start workers with `dask worker "
                f"{clip(self.address, 80)}`, or wait longer with EXACTATTN_DASK_TIMEOUT"
            ) from None
        except Exception as exc:  # noqa: BLE001 - the scheduler went away before any work
            if not self._lost(exc):
                raise
            raise UsageError(
                f"--dask {clip(self.address, 80)}: lost the scheduler while waiting for a "
                f"worker ({type(exc).__name__}: {_short(exc)}); check that `dask scheduler` "
                "still runs there"
            ) from None

    def _run(self, job, todo, finished, progress, stage, total, done_now) -> None:  # type: ignore[no-untyped-def]
        if not todo:
            return
        grace = dask_timeout()
        try:
            jf = self.client.scatter(job, broadcast=True)
            pending = {self.client.submit(shard_task, jf, s, pure=False): s for s in todo}
            idle_since = None
            last_look = time.monotonic()
            while pending:
                done = [f for f in pending if f.done()]
                for f in done:
                    s = pending.pop(f)
                    finished(s, f.result())
                if done:
                    idle_since = None
                    continue
                time.sleep(0.05)
                if time.monotonic() - last_look < 1:
                    continue
                last_look = time.monotonic()  # once a second: is anyone still working?
                if self.client.status not in ("running", "connecting"):
                    raise ClusterLost(f"the connection to the scheduler is {self.client.status}")
                workers = self.client.scheduler_info().get("workers") or {}
                if workers:
                    idle_since = None
                    continue
                idle_since = idle_since or last_look
                if last_look - idle_since > grace:
                    raise ClusterLost(f"no worker on the scheduler for {grace:g} s")
        except ClusterLost as exc:
            raise ClusterLost(f"--dask {self.address}: {exc}") from None
        except (KeyboardInterrupt, ExactAttnError):
            raise
        except Exception as exc:  # noqa: BLE001 - a dead scheduler or worker, in any of its forms
            if not self._lost(exc):
                raise
            raise ClusterLost(
                f"--dask {self.address}: lost the cluster mid-run ({type(exc).__name__}: "
                f"{_short(exc)})"
            ) from None

    @staticmethod
    def _lost(exc: BaseException) -> bool:
        """Whether an exception from the cluster means it went away (not a bug in a shard)."""

        name = type(exc).__name__
        return isinstance(exc, (OSError, CancelledError, TimeoutError)) or name in (
            "KilledWorker",
            "CommClosedError",
            "FutureCancelledError",
            "CancelledError",
            "FutureLostError",
            "StreamClosedError",
        )

    def close(self, kill: bool = False) -> None:
        if self._own and getattr(self, "client", None) is not None:
            client, self.client = self.client, None
            try:
                client.close(timeout=2)
            except Exception:  # noqa: BLE001, S110 - closing a dead connection may fail
                pass
            self._restore_logs()


def _probe_scheduler(address: str, timeout: float) -> None:
    """Connect, ask for the peer's identity, and raise unless it is a dask scheduler."""

    # lazy: asyncio (and ssl, sockets with it) is only for --dask (start-up time)
    import asyncio

    # lazy: dask.distributed, an optional extra (≈ 1 s to import)
    from distributed.comm import connect

    # lazy: dask.distributed, an optional extra (≈ 1 s to import)
    from distributed.security import Security

    async def ask() -> Any:
        args = Security().get_connection_args("client")
        comm = await connect(address, timeout=timeout, **args)
        try:
            await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), timeout)
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    reply = asyncio.run(ask())
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise OSError("the peer did not answer as a dask scheduler")


def _quiet_logs() -> Callable[[], None]:
    """Silence distributed's loggers (they print tracebacks of lost connections to stderr
    from a background thread; the CLI says what happened in one line). Returns the undo."""

    # lazy: dask.distributed, an optional extra (≈ 1 s to import)
    import distributed  # noqa: F401 - its loggers exist once it is imported

    loggers = [
        lg
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and name.split(".")[0] in ("distributed", "tornado")
    ]
    old = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True

    def restore() -> None:
        for lg, was in zip(loggers, old, strict=True):
            lg.disabled = was

    return restore


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
    "DirectoryLock",
    "Dask",
    "InProcess",
    "Processes",
    "fingerprint",
    "make_executor",
    "shard_task",
]
