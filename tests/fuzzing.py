"""The fuzzer behind tests/fuzz/test_fuzz_hostile_inputs.py and tests/fuzz_long.py: hostile
inputs, run in-process.

Three kinds of case, each a CLI invocation run in this process (``main(args)``, so a case
costs milliseconds, not a Python start-up):

* ``model``: a valid model file (bundled test model or a random one), mutated — keys deleted,
  values swapped for hostile ones (huge or malformed numbers, Unicode digits, lone surrogates,
  deep nesting, empty or control-character names, impossible positions), keys duplicated,
  or the JSON text itself cut or corrupted — then ``check`` (and sometimes ``eval``);
* ``report``: a valid result file, mutated the same way, then ``report``;
* ``tau``: ``check`` of a valid model with a random ``--tau`` string;
* ``checkpoint``: a ``check --checkpoint DIR`` of a valid model, its shard files then damaged
  (emptied, garbage, cut, copied over each other or from another length, edited, nested deep,
  the manifest or the lock file spoiled, or the directory held by another run), then the
  same command again: it must resume to the bytes of a fresh run, or exit 2;
* ``dask``: ``check --dask ADDRESS`` with a malformed or unreachable address: exit 2;
* ``report`` also runs result files with hostile ``closed_forms`` (keys and fields), and
  checks that the Markdown/LaTeX written holds no live ``\\input`` or raw HTML.

``check`` cases run with and without ``-q`` (the paths differ: without it the estimate
runs and the table is printed) and sometimes with ``--jobs 2``.

:func:`run_case` returns an :class:`Outcome`; :func:`problems` lists what breaks the contract:
exit code in {0, 1, 2, 3} (never 4, never a traceback), exit 2 with one line ``error: …`` that
names a path, no output file on exit 2, and an output file whose verdict matches exit 0/1/3.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASE_MODEL = json.loads((ROOT / "tests" / "data" / "mean_a_position.json").read_text())
BASE_RESULT = json.loads((ROOT / "tests" / "data" / "result_small.json").read_text())
DYCK1 = json.loads((ROOT / "models" / "dyck1.json").read_text())


def _with_closed_forms(result: Any) -> Any:
    from exactattn.bounds.closedforms import closed_forms
    from exactattn.results.sequences import values_of_rows

    return {**result, "closed_forms": closed_forms(values_of_rows(result["lengths"]))}


BASE_RESULT_CF = _with_closed_forms(BASE_RESULT)
DASK_ADDRESSES = [
    "nonsense",
    "",
    "tcp://",
    "http://example.com:8786",
    "https://x:1",
    "inproc://",
    "tls://",
    "ucx://",
    "ucx://127.0.0.1:8786",
    "localhost",
    "example.invalid",
    ":::",
    "[::1]",
    "tcp://127.0.0.1:0",
    "tcp://127.0.0.1:70000",
    "tcp://127.0.0.1:1",
    "tls://127.0.0.1:1",
    "ws://127.0.0.1:1",
    "tcp://[::1]:1",
    "tcp://:1",
]

SURROGATE = "\ud800"
HOSTILE_STRINGS = [
    "",
    " ",
    " 1 ",
    "1/-2",
    "1/0",
    "١/٢",
    "１",
    "1e400",
    "1e-400",
    "0x10",
    "1_000",
    "+1",
    "-0",
    "1/2/3",
    "NaN",
    "inf",
    "x" * 300,
    "a\nb",
    "\\input{/etc/passwd}",
    "$x$",
    "<s>",
    "last",
    "first",
    "bos",
    "eos",
    "leq",
    "average",
    "i/n",
    "1/(n-2)",
    "log(n)",
    "exp(n)",
    "n^1024",
    "(" * 60 + "1" + ")" * 60,
    "a S b",
    "X" * 3 + " a",
    "9" * 5000,
    "1/" + "3" * 4500,
    SURROGATE,
    "a" + SURROGATE,
]
RAW_LITERALS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    "1e400",
    "1E-999",
    "1" + "0" * 100,
    "9" * 5000,
    "0.5",
    "-1",
    "2",
    "3",
    "true",
    "null",
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    '"\\ud800"',
    '"\\u0000"',
]
TAU_PARTS = [
    "n",
    "1",
    "2",
    "3",
    "1/2",
    "0",
    "-1",
    "0.5",
    "1e-3",
    "+",
    "-",
    "*",
    "/",
    "^",
    "**",
    "(",
    ")",
    "log(",
    "exp(",
    "sqrt(",
    "min(",
    "max(",
    "floor(",
    "ceil(",
    "mod(",
    ",",
    "i",
    "x",
    " ",
    "theorem",
    "١",
    "__import__",
    "'",
    "\\",
    "1e400",
    "n^99",
]


class CaseTimeout(BaseException):
    """A case ran past its time limit (a BaseException, so no handler in exactattn eats it)."""


@dataclass
class Outcome:
    kind: str
    args: list[str]
    code: int | None
    stderr: str
    out_exists: bool
    out_text: str | None
    timed_out: bool = False
    traceback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------ mutations


def _paths(x: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON tree (dict keys and list indices)."""
    out = [prefix]
    if isinstance(x, dict):
        for k, v in x.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out += _paths(v, (*prefix, i))
    return out


def _get(x: Any, path: tuple) -> Any:
    for p in path:
        x = x[p]
    return x


RAW = "@@RAW{}@@"


def mutate_tree(
    tree: Any, rng: random.Random, n_mut: int, big: bool = True
) -> tuple[Any, dict[str, str]]:
    """Apply ``n_mut`` structural mutations; returns the tree and raw JSON literals to splice.

    ``big=False`` leaves out valid-but-huge weights (10^6), whose soft check is correct but
    can take a minute (the default test run has no time for it).
    """
    tree = json.loads(json.dumps(tree))
    raws: dict[str, str] = {}
    for _ in range(n_mut):
        paths = [p for p in _paths(tree) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = _get(tree, path[:-1])
        last = path[-1]
        op = rng.random()
        if op < 0.15 and isinstance(parent, dict):
            del parent[last]
        elif op < 0.45:
            parent[last] = rng.choice(HOSTILE_STRINGS)
        elif op < 0.65:
            key = RAW.format(len(raws))
            raws[key] = rng.choice(RAW_LITERALS)
            parent[last] = key
        elif op < 0.75 and isinstance(parent, list):
            if rng.random() < 0.5 and parent:
                parent.pop(rng.randrange(len(parent)))
            else:
                parent.append(json.loads(json.dumps(rng.choice(parent))) if parent else 0)
        elif op < 0.85:
            # a plausible but wrong number: 0, 1, a big or negative int
            parent[last] = rng.choice(
                [0, 1, -1, 2, "1/3", "-1/2"] + ([10**6, 10**7] if big else [])
            )
        else:
            if isinstance(parent, dict) and rng.random() < 0.5:
                parent[rng.choice(["x-ext", "mask", "name", "kind", "typo", "\u00e9"])] = 1
            else:
                parent[last] = {"kind": rng.choice(["attention", "ffn", "accept", "?"])}
    return tree, raws


def tree_text(tree: Any, raws: dict[str, str], rng: random.Random) -> str:
    """JSON text of ``tree`` with raw literals spliced in, sometimes a duplicated key or a cut."""
    text = json.dumps(tree, ensure_ascii=rng.random() < 0.5)
    for key, lit in raws.items():
        text = text.replace(f'"{key}"', lit)
    r = rng.random()
    if r < 0.05 and text.endswith("}"):
        text = text[:-1] + ', "name": "dup"}'  # a duplicate top-level key (name is required)
    elif r < 0.08:
        text = text[: rng.randrange(len(text))]
    elif r < 0.11:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["\x00", "\\", '"', "]", "\u2028", "١", SURROGATE]) + text[i:]
    return text


def random_tau(rng: random.Random) -> str:
    if rng.random() < 0.3:  # a well-formed expression of moderate size
        a, b = rng.randint(1, 9), rng.randint(1, 3)
        return rng.choice(
            [
                f"1/n^{b}",
                f"{a}/(n+{b})",
                f"1/({a}*n*log(n+1))",
                f"exp(-{a})",
                f"min(1, {a}/n)",
                f"1/sqrt(n+{b})",
                f"{a}/{b}",
                f"floor(n/{b})+1",
                f"mod(n,{b})+1",
                f"n-{a}",
            ]
        )
    return "".join(rng.choice(TAU_PARTS) for _ in range(rng.randint(1, 8)))


# ------------------------------------------------------------------------------ running


def _base_models(rng: random.Random) -> Any:
    return json.loads(json.dumps(rng.choice([BASE_MODEL, BASE_MODEL, DYCK1])))


CASE_FILE = "case_env.json"
"""Per-case settings beside the files (environment, a held checkpoint, the expected result)."""


def _flags(rng: random.Random) -> list[str]:
    """``-q`` or not (the estimate and the table run only without it), sometimes ``--jobs 2``."""
    return (["-q"] if rng.random() < 0.5 else []) + (["--jobs", "2"] if rng.random() < 0.05 else [])


def make_case(
    rng: random.Random, workdir: Path, base: Any = None, kind: str | None = None, big: bool = True
) -> tuple[str, list[str]]:
    """Write the files of one random case into ``workdir``; return (kind, CLI args)."""
    kind = kind or rng.choices(KINDS, weights=WEIGHTS)[0]
    out = str(workdir / "out.json")
    (workdir / CASE_FILE).unlink(missing_ok=True)
    if kind in NEW_KINDS or kind in NEW_KINDS_2:  # issue 40's surfaces (below)
        _clean(workdir)
        return kind, {**NEW_KINDS, **NEW_KINDS_2}[kind](rng, workdir, big)
    if kind == "report":
        result = BASE_RESULT_CF if rng.random() < 0.5 else BASE_RESULT
        tree, raws = mutate_tree(result, rng, rng.randint(1, 4), big)
        if "closed_forms" in tree and isinstance(tree["closed_forms"], dict) and rng.random() < 0.6:
            hostile_closed_forms(tree["closed_forms"], rng)
        (workdir / "r.json").write_text(
            tree_text(tree, raws, rng), encoding="utf-8", errors="surrogatepass"
        )
        fmt = rng.choice(["md", "tex"])
        return kind, ["report", str(workdir / "r.json"), "-o", str(workdir / f"out.{fmt}")]
    if kind == "checkpoint":
        return kind, checkpoint_case(rng, workdir)
    if kind == "dask":
        (workdir / "m.json").write_text(json.dumps(_base_models(rng)), encoding="utf-8")
        addr = rng.choice(DASK_ADDRESSES)
        if rng.random() < 0.3 and addr:
            i = rng.randrange(len(addr) + 1)
            addr = (
                addr[:i] + rng.choice([":", "/", "[", "]", "x", "0", " ", "\x00", "@"]) + addr[i:]
            )
        _write_case(workdir, env={"EXACTATTN_DASK_TIMEOUT": "0.5"}, expect_exit=2)
        return kind, ["check", str(workdir / "m.json"), "--max-n", "2", "--dask", addr]
    model = base if base is not None else _base_models(rng)
    max_n = rng.choice(["1", "2", "2", "3"])
    if kind == "tau":
        (workdir / "m.json").write_text(json.dumps(model), encoding="utf-8")
        return kind, [
            "check",
            str(workdir / "m.json"),
            "--max-n",
            max_n,
            *_flags(rng),
            "--json",
            out,
            "--tau",
            random_tau(rng),
        ]
    tree, raws = mutate_tree(model, rng, rng.randint(1, 3), big)
    (workdir / "m.json").write_text(
        tree_text(tree, raws, rng), encoding="utf-8", errors="surrogatepass"
    )
    if rng.random() < 0.15:
        word = rng.choice(["a", "ab", "(", "()", "a b", "z", "", "aaaa"])
        return kind, ["eval", str(workdir / "m.json"), word]
    return kind, ["check", str(workdir / "m.json"), "--max-n", max_n, *_flags(rng), "--json", out]


def hostile_closed_forms(cf: dict[str, Any], rng: random.Random) -> None:
    """Hostile keys and fields in a result's ``closed_forms`` (issue 27: they reached TeX raw)."""
    for _ in range(rng.randint(1, 3)):
        if not cf or rng.random() < 0.3:
            cf[rng.choice(HOSTILE_STRINGS)] = rng.choice(
                [{"expression": None, "reason": rng.choice(HOSTILE_STRINGS)}, {}, None, "x"]
            )
            continue
        key = rng.choice(list(cf))
        rec = cf[key]
        if rng.random() < 0.3:
            cf[rng.choice(HOSTILE_STRINGS) + rng.choice(["", "error_layer_0", key])] = cf.pop(key)
        elif isinstance(rec, dict):
            field_ = rng.choice(
                ["reason", "c_lower", "c_upper", "a", "b", "shape", "expression", "valid_from"]
                + ["fitted_on", "verified_on", "on", "kind", "form", "lengths", "exceptions"]
            )
            rec[field_] = rng.choice(
                HOSTILE_STRINGS + ["inf", "1e9999999", "-1/0", [10**9], [-1], {"kind": "x"}]
            )


_DAMAGE = [
    "empty object",
    "garbage",
    "cut",
    "copy same length",
    "copy other length",
    "edit record",
    "deep",
    "empty file",
    "delete",
    "directory",
    "manifest",
    "lock garbage",
    "hold",
    "old format",
]


def checkpoint_case(rng: random.Random, workdir: Path) -> list[str]:
    """Run a valid check with --checkpoint, damage the directory, return the resume's args."""
    import shutil

    from exactattn.cli import main

    model = rng.choice([BASE_MODEL, DYCK1])
    (workdir / "m.json").write_text(json.dumps(model), encoding="utf-8")
    ck = workdir / "ck"
    shutil.rmtree(ck, ignore_errors=True)
    env = {"EXACTATTN_SHARD_INPUTS": rng.choice(["1", "2", "3"])}
    args = ["check", str(workdir / "m.json"), "--max-n", rng.choice(["2", "3"])]
    args += rng.choice([[], [], ["--arb-only"], ["--hard-only"]]) + ["--checkpoint", str(ck)]
    expect = workdir / "expect.json"
    with _environ(env), contextlib.redirect_stdout(io.StringIO()):
        with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
            main.main(
                args=[*args, "-q", "--json", str(expect)],
                prog_name="exactattn",
                standalone_mode=True,
            )
    shards = sorted(ck.glob("*/s*.json"))
    refuse = False
    hold = False
    for _ in range(rng.randint(1, 3)):
        what = rng.choice(_DAMAGE)
        if not shards:
            break
        f = rng.choice(shards)
        if not f.is_file():  # made a directory by an earlier damage
            continue
        shards = [g for g in shards if g.is_file()]
        if what == "empty object":
            f.write_text("{}")
        elif what == "garbage":
            f.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))))
        elif what == "cut" and f.exists() and f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
            f.write_text(text[: rng.randrange(max(1, len(text)))])
        elif what == "copy same length":
            same = [g for g in shards if g.parent == f.parent and g != f and g.is_file()]
            if same:
                f.write_bytes(rng.choice(same).read_bytes())
        elif what == "copy other length":
            other = [g for g in shards if g.parent != f.parent and g.is_file()]
            if other:
                f.write_bytes(rng.choice(other).read_bytes())
        elif what == "edit record" and f.is_file():
            try:
                data = json.loads(f.read_text())
                tree, raws = mutate_tree(data, rng, 1, big=False)
                f.write_text(tree_text(tree, raws, rng), errors="surrogatepass")
            except (ValueError, RecursionError):  # an earlier damage made it unreadable
                pass
        elif what == "deep":
            f.write_text("[" * 50_000)
        elif what == "empty file":
            f.write_text("")
        elif what == "delete" and f.is_file():
            f.unlink()
        elif what == "directory" and f.is_file():
            f.unlink()
            f.mkdir()
        elif what == "manifest":
            (ck / "manifest.json").write_bytes(rng.choice([b"{}", b"\xff", b"[", b'{"format":1}']))
            refuse = True
        elif what == "lock garbage":
            (ck / "lock").write_bytes(b"\xff" * 10)
        elif what == "hold":
            hold = True
        elif what == "old format" and f.is_file():
            try:
                f.write_text(json.dumps(json.loads(f.read_text())["record"]))
            except (ValueError, KeyError, TypeError, RecursionError):
                pass
    _write_case(
        workdir,
        env=env,
        expect="expect.json" if expect.exists() else None,
        hold=str(ck) if hold else None,
        may_refuse=refuse or hold,
        expect_exit=2 if hold else None,
    )
    return [*args, *_flags(rng), "--json", str(workdir / "out.json")]


def _write_case(workdir: Path, **settings: Any) -> None:
    (workdir / CASE_FILE).write_text(json.dumps(settings))


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Any:
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


class _Aside:
    """What runs beside a case (issue 40's second part): a reader draining a FIFO output, a
    second export of the same file in a thread, a file-size limit (a full disk), stubbed
    figures, and a wall-clock limit (a write blocked on a FIFO uses no CPU time)."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.case = case
        self.docs: list[bytes] = []
        self.errors: list[str] = []
        self.threads: list[Any] = []
        self.stopping = False
        self.undo: list[Any] = []

    def start(self) -> None:
        import threading

        c = self.case
        if c.get("stub_figures"):
            self.undo.append(stub_figures())
        if c.get("fifo_read"):
            self.threads.append(threading.Thread(target=self._drain, daemon=True))
        if c.get("concurrent_export"):
            self.threads.append(threading.Thread(target=self._export, daemon=True))
        for t in self.threads:
            t.start()
        if c.get("fsize") is not None:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (c["fsize"], hard))
            self.undo.append(lambda: signal.signal(signal.SIGXFSZ, old))
            self.undo.append(lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard)))
        if c.get("wall"):
            old_alarm = signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, c["wall"])
            self.undo.append(lambda: signal.signal(signal.SIGALRM, old_alarm))
            self.undo.append(lambda: signal.setitimer(signal.ITIMER_REAL, 0))

    def stop(self) -> None:
        import stat
        import time

        for undo in reversed(self.undo):
            undo()
        self.undo = []
        self.stopping = True
        fifo = self.case.get("fifo_read")
        if fifo and not (os.path.exists(fifo) and stat.S_ISFIFO(os.lstat(fifo).st_mode)):
            # replaced (a break the state check reports): its reader waits on the old FIFO
            self.threads = self.threads[1:]
        elif fifo:
            for _ in range(200):  # wake the reader waiting in open() (it may be between opens)
                try:
                    os.close(os.open(self.case["fifo_read"], os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    if not self.threads[0].is_alive():
                        break
                    time.sleep(0.01)
                    continue
                self.threads[0].join(0.5)
                if not self.threads[0].is_alive():
                    break
        for t in self.threads:
            t.join(120)
            if t.is_alive():
                self.errors.append("a thread beside the case did not finish")

    def _drain(self) -> None:
        while not self.stopping:
            with open(self.case["fifo_read"], "rb") as f:
                data = f.read()
            if data:
                self.docs.append(data)

    def _export(self) -> None:
        try:
            from exactattn.export.torch import export_torch, save
            from exactattn.model import load_model

            spec = self.case["concurrent_export"]
            model = load_model(spec["model"])
            for _ in range(2):
                save(export_torch(model, 16, "float32"), Path(spec["out"]))
        except BaseException as exc:  # noqa: BLE001 - reported as a problem of the case
            self.errors.append(f"the other export failed: {exc!r}"[:300])

    def found(self, code: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {"aside errors": self.errors}
        if self.case.get("fifo_read"):
            out["fifo docs"] = [d.decode("utf-8", errors="replace") for d in self.docs]
        if self.case.get("loads") and code == 0:
            out["loads"] = _loads(Path(self.case["loads"]))
        return out


def _loads(path: Path) -> str:
    """ "ok" when an exported file loads as exactattn wrote it, else why not."""
    try:
        import torch

        if path.is_symlink() or not path.is_file():
            return "not a regular file"
        torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - the reason is the finding
        return repr(exc)[:200]
    return "ok"


def run_case(kind: str, args: list[str], workdir: Path, timeout: float = 20.0) -> Outcome:
    """Run ``exactattn ARGS`` in this process, capturing exit code and stderr.

    ``timeout`` is in CPU seconds of this process; a case past it counts as a hang.
    """
    from exactattn.cli import main

    for name in os.listdir(workdir):
        if name.startswith("out"):
            os.unlink(workdir / name)
    case = json.loads((workdir / CASE_FILE).read_text()) if (workdir / CASE_FILE).exists() else {}
    held = None
    if case.get("hold"):  # another run holds the checkpoint directory
        from exactattn.run.executors import DirectoryLock

        with contextlib.suppress(Exception):
            held = DirectoryLock(Path(case["hold"]))
    case["workdir"] = str(workdir)
    err, out = io.StringIO(), io.StringIO()
    code: int | None = None
    timed_out = False
    tb = None
    aside = _Aside(case)  # a FIFO's reader, another export, a file-size limit, stubbed figures
    # CPU time, not wall time: on a loaded machine a 3 s case can take 30 s of wall time
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        aside.start()
        with (
            _environ(case.get("env") or {}),
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(out),
        ):
            try:
                main.main(args=args, prog_name="exactattn", standalone_mode=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except CaseTimeout:
        timed_out = True
    except BaseException:  # noqa: BLE001 - anything escaping the CLI is a finding
        import traceback

        tb = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
        aside.stop()
        if held is not None:
            held.release()
    out_json = workdir / "out.json"
    extra: dict[str, Any] = {"case": case, "after": _state(case), "stdout": out.getvalue()}
    extra.update(aside.found(code))
    if case.get("expect"):
        extra["expected"] = (workdir / case["expect"]).read_text(encoding="utf-8")
    if args and args[0] == "report":
        extra["reports"] = {
            p.name: p.read_text(encoding="utf-8", errors="replace")
            for p in workdir.iterdir()
            if p.name.startswith("out.")
            and p.suffix in (".md", ".tex")
            or p.name == "out-fragment.tex"
        }
    return Outcome(
        kind=kind,
        args=args,
        code=code,
        stderr=err.getvalue(),
        out_exists=out_json.exists(),
        out_text=out_json.read_text(encoding="utf-8") if out_json.exists() else None,
        timed_out=timed_out,
        traceback=tb,
        extra=extra,
    )


# "error: <JSON path or file>: <what> (fix: <how>)"; CLI options and inputs name themselves
_PATHISH = re.compile(r"^error: .{1,200}?: |^error: --\w|^error: input symbol|^error: n = ")


def problems(o: Outcome) -> list[str]:
    """Ways an outcome breaks the contract (an empty list when it keeps it)."""
    out = []
    if o.timed_out:
        return ["hang (per-case timeout)"]
    if o.traceback:
        return ["exception escaped the CLI: " + o.traceback.strip().splitlines()[-1]]
    if "Traceback" in o.stderr:
        out.append("traceback on stderr")
    if o.code not in (0, 1, 2, 3):
        out.append(f"exit code {o.code}: {o.stderr.strip()[:300]}")
    if o.code == 2:
        lines = o.stderr.strip().splitlines()
        if len(lines) > 1 and _ESTIMATE.search(lines[0]):  # without -q: "M: N inputs …" first
            lines = lines[1:]
        # usage errors too are one line naming the command (click's Usage/Try/Error form was
        # accepted here until the CLI printed them as every other bad input)
        if len(lines) != 1:
            out.append(f"exit 2 with {len(lines)} lines: {o.stderr[:300]!r}")
        elif not _PATHISH.match(lines[0]):
            out.append(f"exit 2 message does not name a path: {lines[0][:300]!r}")
        if len(o.stderr) > 1000:
            out.append(f"exit 2 message of {len(o.stderr)} characters")
        if o.out_exists:
            out.append("exit 2 but an output file was written")
    # (a check whose result goes into a FIFO or a device is the special kind's)
    if o.code in (0, 1, 3) and o.args[0] == "check" and o.kind != "special":
        if not o.out_exists:
            out.append("finished check wrote no result file")
        else:
            status = json.loads(o.out_text or "{}").get("verdict", {}).get("status")
            want = {0: "clean", 1: "problems", 3: "undecided"}[o.code]
            if status != want:
                out.append(f"exit {o.code} but the result file says {status!r}")
    case = o.extra.get("case") or {}
    if case.get("expect_exit") is not None and o.code != case["expect_exit"]:
        out.append(f"exit {o.code} where {case['expect_exit']} is due: {o.stderr.strip()[:300]}")
    if o.kind == "checkpoint" and o.code == 2 and not case.get("may_refuse"):
        out.append(f"a damaged shard refused, not recomputed: {o.stderr.strip()[:300]}")
    expected = o.extra.get("expected")
    if expected is not None and o.code in (0, 1, 3) and o.out_text != expected:
        out.append("resumed from a damaged checkpoint: result differs from a fresh run")
    for name, text in (o.extra.get("reports") or {}).items():
        out += [f"{name}: {p}" for p in report_injections(name, text)]
    out += _state_problems(case, o.extra.get("after") or {})
    out += _aside_problems(o, case)
    return out


def _aside_problems(o: Outcome, case: dict[str, Any]) -> list[str]:
    """The contracts of the kinds of issue 40's second part (see their makers)."""
    out = []
    if case.get("expect_exit_in") is not None and o.code not in case["expect_exit_in"]:
        out.append(f"exit {o.code} where one of {case['expect_exit_in']} is due: {o.stderr[:300]}")
    said = " ".join(str(o.extra.get("stdout") or "").split())
    out += [f"the output says {s!r}" for s in case.get("stdout_forbid") or [] if s in said]
    if o.code in (0, 1):
        need = case.get("stdout_require") or []
        out += [f"the output does not say {s!r}" for s in need if s not in said]
    if case.get("untrusted") and o.out_text:
        doc = json.loads(o.out_text)
        if doc.get("checked_by_enumeration_to") is not None or doc.get("checked_in"):
            out.append("a result of other content trusted in the certificate")
        if (doc.get("provenance") or {}).get("rederived"):
            out.append("an edited model counted as re-derived")
    for err in o.extra.get("aside errors") or []:
        out.append(f"beside the case: {err}")
    docs = o.extra.get("fifo docs")
    if docs is not None and o.code in (0, 1, 3):
        if len(docs) != 1:
            out.append(f"{len(docs)} documents through the FIFO, not 1")
        elif case["fifo_read"].endswith(".json"):
            try:
                json.loads(docs[0])
            except ValueError:
                out.append("the document through the FIFO is not JSON")
    whole = case.get("outputs_whole")
    if whole is not None and o.code == 2:
        left = sorted(p.name for p in Path(case["workdir"]).iterdir() if p.name.startswith("out"))
        if left:
            out.append(f"exit 2 but outputs were written: {left}")
    elif whole is not None and o.code in (0, 1, 3):
        for p in whole:
            if not Path(p).is_file():
                out.append(f"exit {o.code} without its output {Path(p).name}")
            elif p.endswith(".json"):
                try:
                    json.loads(Path(p).read_text(encoding="utf-8"))
                except ValueError:
                    out.append(f"a half-written output: {Path(p).name}")
    if o.extra.get("loads") not in (None, "ok"):
        out.append(f"the exported file does not load: {o.extra['loads']}")
    return out


_ESTIMATE = re.compile(r": [0-9,]+ inputs \(n = ")
_TEX_LIVE_BAD = ("\\input", "\\openin", "\\read", "\\write", "\\csname", "^^", "\\catcode")


def report_injections(name: str, text: str) -> list[str]:
    """User text that a written report would execute: a TeX primitive on a live line, or raw
    HTML / a stray table pipe in Markdown (the payloads come from HOSTILE_STRINGS)."""
    found = []
    if name.endswith(".tex"):
        for line in text.splitlines():
            m = re.search(r"(?<!\\)%", line)
            live = line if m is None else line[: m.start()]
            for bad in _TEX_LIVE_BAD:
                if bad in live:
                    found.append(f"live {bad} in TeX: {line[:200]!r}")
    else:
        from markdown_it import MarkdownIt

        html = MarkdownIt("commonmark").enable("table").render(text)
        for tag in set(re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html)):
            if tag.lstrip("/") not in _MD_TAGS:
                found.append(f"raw HTML <{tag}> in Markdown")
        for img in re.findall(r"<img[^>]*>", html):  # only the report's own figures
            if not re.fullmatch(
                r'<img src="[^"<>]*-(gamma|error|tau)\.png" alt="[^"<>]*" ?/?>', img
            ):
                found.append(f"an image the report did not make: {img[:100]}")
        # a table's lines keep their column count (HTML drops extra cells: count the source)
        widths: set[int] = set()
        for line in [*text.splitlines(), ""]:
            if line.startswith("|"):
                widths.add(len(re.findall(r"(?<!\\)\|", line)))
                continue
            if len(widths) > 1:
                found.append("a table row with a column too many or too few")
            widths = set()
    return found[:3]


def pdflatex_problems(workdir: Path, tex: Path) -> list[str]:
    """Compile a written report with ``pdflatex -no-shell-escape -recorder``: it must compile,
    and every file TeX opened must be the report's own (``out*`` beside it) or TeX's."""
    import shutil
    import subprocess

    if shutil.which("pdflatex") is None:
        return []
    cmd = ["pdflatex", "-no-shell-escape", "-recorder", "-interaction=nonstopmode"]
    try:
        run = subprocess.run(
            [*cmd, "-halt-on-error", tex.name], cwd=workdir, capture_output=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return ["pdflatex ran past 120 s"]
    out = [] if run.returncode == 0 else [f"pdflatex failed (exit {run.returncode})"]
    fls = tex.with_suffix(".fls")
    opened = [
        line[6:]
        for line in (fls.read_text(errors="replace") if fls.exists() else "").splitlines()
        if line.startswith("INPUT ")
    ]
    for p in opened:
        path = Path(p) if p.startswith("/") else workdir / p
        own = path.resolve().parent == workdir.resolve() and path.name.startswith("out")
        if not (
            own or p.startswith(("/usr/share/", "/etc/texmf/", "/var/lib/texmf/")) or "/texmf" in p
        ):
            out.append(f"pdflatex read a file outside the report: {p[:200]}")
    return out


_MD_TAGS = {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "table", "thead", "tbody"}
_MD_TAGS |= {"tr", "th", "td", "img", "br", "ol"}  # ol: a certificate's proof chain


def stub_figures() -> Any:
    """Skip matplotlib in most report cases (it dominates their time); returns an undo."""
    import exactattn.report as rep

    real = rep.write_figures
    rep.write_figures = lambda data, stem, suffix: []  # type: ignore[assignment]

    def undo() -> None:
        rep.write_figures = real  # type: ignore[assignment]

    return undo


# ------------------------------------------------------------------------------ issue 40
# Surfaces of the hostile pass of issue 40: certificate, precision and search files through
# `report`; an output path naming an input (also by a symlink, a hard link or another
# spelling); checkpoint parts that are symlinks or FIFOs; deep and oversized RASP programs
# (also as a model's reference); oversize inputs and malformed options of eval, export,
# precision --inputs, certify --range and search.

DATA = ROOT / "tests" / "data"
_GENERATED: dict[str, Any] = {}


def _quiet_cli(args: list[str]) -> int | None:
    """Run the CLI in-process with its output swallowed; the exit code."""
    from exactattn.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main.main(args=args, prog_name="exactattn", standalone_mode=True)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 0
    return 0


def generated_bases() -> dict[str, Any]:
    """Valid certificate, precision and search documents to mutate (made once, in-process)."""
    if _GENERATED:
        return _GENERATED
    import tempfile
    from dataclasses import replace

    from exactattn.certificate.certify import certificate, range_certificate
    from exactattn.model import load_model
    from exactattn.results.certificate import RangeRun

    dyck1 = load_model(ROOT / "models" / "dyck1.json")
    _GENERATED["certificate"] = certificate(dyck1, 6, "theorem", checked_to=14).to_json()
    run = RangeRun(0.1, 14, "reports/claims/dyck1.hard.json")
    _GENERATED["certificate range"] = replace(
        range_certificate(dyck1, 1, 3, None), run=run
    ).to_json()
    mean = str(DATA / "mean_a_position.json")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = {
            "precision": ["precision", mean, "--max-n", "2", "--dtype", "float16"],
            "precision family": [
                "precision",
                str(ROOT / "models" / "dyck1.json"),
                "--family",
                "nested",
                "--family",
                "alternating",
                "--n",
                "40",
                "--dtype",
                "float16",
                "--dtype",
                "float32",
            ],  # fmt: skip
            "search": ["search", mean, "--n", "5", "--objective", "error"],
            "search margin": ["search", mean, "--n", "4", "--objective", "margin"],
        }
        for name, args in jobs.items():
            path = Path(tmp) / "doc.json"
            _quiet_cli([*args, "--json", str(path)])
            _GENERATED[name] = json.loads(path.read_text(encoding="utf-8"))
    return _GENERATED


_NAMES = ("r.json", "m.json", "m.md", "d.json", "w.txt", "p.rasp", "in.txt", "victim.txt", "x.pt")
_NAMES += ("params.npz", "meta.json", "elsewhere", "ck", "sub", "fifo", "c.json", "models")
_NAMES += ("reports", "x.pt.tmp")


def _clean(workdir: Path) -> None:
    """Remove what an earlier case of these kinds left (links, FIFOs, folders)."""
    import shutil

    for p in workdir.iterdir():
        temp = p.name.startswith(".") and p.name.endswith(".tmp")
        if p.name in _NAMES or temp or p.name.startswith(("link-", "hard-", "sub", "dev-", "fifo")):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


def _digest(path: Path) -> str | None:
    import hashlib

    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _state(case: dict[str, Any]) -> dict[str, Any]:
    """What the oracle looks at after a run: the files that must be unchanged, the folders
    that must stay empty, the special files that must stay special."""
    import stat

    out: dict[str, Any] = {}
    for p in case.get("unchanged") or {}:
        out[p] = _digest(Path(p))
    for p in case.get("empty") or []:
        out[p] = sorted(x.name for x in Path(p).iterdir()) if Path(p).is_dir() else None
    for p in case.get("special") or []:
        try:
            out[p] = stat.S_ISFIFO(os.lstat(p).st_mode)
        except OSError:
            out[p] = None
    for p in case.get("chardev") or []:
        try:
            out[p] = stat.S_ISCHR(os.lstat(p).st_mode)
        except OSError:
            out[p] = None
    for p in case.get("planted") or {}:
        out[p] = _entry(Path(p)) if os.path.lexists(p) else None
    if case.get("no_temp") and case.get("workdir"):
        out["temporary files"] = sorted(
            x.name
            for x in Path(case["workdir"]).iterdir()
            if x.name.endswith(".tmp") and str(x) not in (case.get("planted") or {})
        )
    for p in case.get("absent") or []:
        out[p] = os.path.lexists(p)
    return out


def _state_problems(case: dict[str, Any], after: dict[str, Any]) -> list[str]:
    found = []
    for p, digest in (case.get("unchanged") or {}).items():
        if after.get(p) != digest:
            found.append(f"an input was changed: {Path(p).name}")
    for p in case.get("empty") or []:
        if after.get(p) != []:
            found.append(f"written through a symlink into {Path(p).name}: {after.get(p)}")
    for p in case.get("special") or []:
        if after.get(p) is not True:
            found.append(f"a FIFO was replaced: {Path(p).name}")
    for p in case.get("chardev") or []:
        if after.get(p) is not True:
            found.append(f"a device was replaced: {Path(p).name}")
    for p, entry in (case.get("planted") or {}).items():
        if after.get(p) != entry:
            found.append(f"a planted file was changed: {Path(p).name} {entry} -> {after.get(p)}")
    if after.get("temporary files"):
        found.append(f"temporary files left: {after['temporary files']}")
    for p in case.get("absent") or []:
        if after.get(p):
            found.append(f"written although refused: {Path(p).name}")
    return found


def _hostile_strings(tree: Any, rng: random.Random) -> None:
    """Hostile text (HTML, TeX) into one to three string leaves of a document."""
    paths = [p for p in _paths(tree) if p and isinstance(_get(tree, p), str) and p[-1] != "format"]
    for _ in range(rng.randint(1, 3)):
        if paths:
            p = rng.choice(paths)
            _get(tree, p[:-1])[p[-1]] = rng.choice(_PAYLOADS)


_PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "\\input{/etc/passwd}",
    "$x$ \\def\\y{} ^^5c _ & # ~ %",
    "a|b` ``` | <script>",
    "](http://evil.example) ![i](http://evil.example/i.png)",
    "\n# heading\n",
    "1" * 500,
    "x" * 3000,
]


def _document_case(names: list[str]) -> Any:
    def make(rng: random.Random, workdir: Path, big: bool) -> list[str]:
        doc = json.loads(json.dumps(generated_bases()[rng.choice(names)]))
        if rng.random() < 0.6:
            _hostile_strings(doc, rng)
        if rng.random() < 0.7:
            doc, raws = mutate_tree(doc, rng, rng.randint(1, 3), big)
        else:
            raws = {}
        text = tree_text(doc, raws, rng)
        (workdir / "r.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        fmt = rng.choice(["md", "tex"])
        return ["report", str(workdir / "r.json"), "-o", str(workdir / f"out.{fmt}")]

    return make


def _samepath_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """An output that names an input: exit 2, the input unchanged."""
    import shutil

    m, mmd, d = workdir / "m.json", workdir / "m.md", workdir / "d.json"
    for target in (m, mmd):
        target.write_text((DATA / "mean_a_position.json").read_text())
    d.write_text((ROOT / "models" / "dyck1.json").read_text())
    (workdir / "r.json").write_text((DATA / "result_small.json").read_text())
    (workdir / "w.txt").write_text("ab\nba\n")
    (workdir / "p.rasp").write_text((ROOT / "models" / "rasp" / "majority.rasp").read_text())
    shutil.copy(DATA / "tracr" / "length.npz", workdir / "params.npz")
    shutil.copy(DATA / "tracr" / "length.json", workdir / "meta.json")
    r_md = workdir / "sub-r.md"  # a result file named like a report
    r_md.write_text((DATA / "result_small.json").read_text())
    w = str(workdir)
    cases = [
        (m, ["check", str(m), "--max-n", "2", "-q", "--json", "OUT"]),
        (mmd, ["check", str(mmd), "--max-n", "2", "--report", "OUT"]),
        (d, ["certify", str(d), "--n", "3", "--json", "OUT"]),
        (m, ["precision", str(m), "--max-n", "2", "--json", "OUT"]),
        (workdir / "w.txt", ["precision", str(m), "--inputs", f"{w}/w.txt", "--json", "OUT"]),
        (m, ["search", str(m), "--n", "3", "--objective", "margin", "--json", "OUT"]),
        (workdir / "p.rasp", ["build", "rasp", f"{w}/p.rasp", "-q", "-o", "OUT"]),
        (r_md, ["report", str(r_md), "-o", "OUT"]),
        (m, ["export", "torch", str(m), "-o", "OUT"]),
        (m, ["export", "transformer-lens", str(m), "-o", "OUT"]),
        (workdir / "meta.json",
         ["import", "tracr", f"{w}/params.npz", f"{w}/meta.json", "-o", "OUT"]),
    ]  # fmt: skip
    victim, args = rng.choice(cases)
    spelling = rng.choice(["same", "dots", "symlink", "hard link"])
    if spelling == "same":
        out = victim
    elif spelling == "dots":
        (workdir / "sub").mkdir(exist_ok=True)
        out = workdir / "sub" / ".." / victim.name
    elif spelling == "symlink":
        out = workdir / f"link-{victim.name}"
        out.symlink_to(victim)
    else:
        out = workdir / f"hard-{victim.name}"
        os.link(victim, out)
    _write_case(workdir, expect_exit=2, unchanged={str(victim): _digest(victim)})
    return [str(out) if a == "OUT" else a for a in args]


def _symlink_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """A checkpoint whose lock, manifest, shard folder or shard file is a symlink or FIFO."""
    import shutil

    model = rng.choice([BASE_MODEL, DYCK1])
    (workdir / "m.json").write_text(json.dumps(model), encoding="utf-8")
    ck = workdir / "ck"
    env = {"EXACTATTN_SHARD_INPUTS": rng.choice(["1", "2"])}
    args = ["check", str(workdir / "m.json"), "--max-n", "2", "--checkpoint", str(ck)]
    with _environ(env):
        _quiet_cli([*args, "-q", "--json", str(workdir / "expect.json")])
    victim = workdir / "victim.txt"
    victim.write_text("precious\n")
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    what = rng.choice(["lock link", "lock fifo", "manifest fifo", "folder link", "shard link"])
    settings: dict[str, Any] = {"env": env, "unchanged": {str(victim): _digest(victim)}}
    settings["empty"] = [str(elsewhere)]
    if what == "lock link":
        (ck / "lock").unlink(missing_ok=True)
        (ck / "lock").symlink_to(victim)
        settings["expect_exit"] = 2
    elif what in ("lock fifo", "manifest fifo"):
        name = "lock" if what == "lock fifo" else "manifest.json"
        (ck / name).unlink(missing_ok=True)
        os.mkfifo(ck / name)
        settings["expect_exit"] = 2
    elif what == "folder link":
        folder = rng.choice(sorted(p for p in ck.iterdir() if p.is_dir()))
        shutil.rmtree(folder)
        folder.symlink_to(elsewhere, target_is_directory=True)
        settings["expect_exit"] = 2
    else:
        shard = rng.choice(sorted(ck.glob("*/s*.json")))
        victim.write_bytes(shard.read_bytes())  # a valid shard behind the link: still refused
        settings["unchanged"] = {str(victim): _digest(victim)}
        shard.unlink()
        shard.symlink_to(victim)
        settings["expect"], settings["expect_exit"] = "expect.json", 0  # recomputed
    _write_case(workdir, **settings)
    return [*args, *_flags(rng), "--json", str(workdir / "out.json")]


_RASP_OPS = [("+", "int", "int(x)", "y > 3"), ("-", "int", "int(x)", "y > 3"),
             ("or", "bool", "x", "y"), ("and", "bool", "x", "y")]  # fmt: skip


def _rasp_chain(rng: random.Random) -> str:
    op, kind, term, out = rng.choice(_RASP_OPS)
    k = rng.choice([2, 50, 150, 199, 200, 201, 300, 500, 2000])
    return (
        f'alphabet "a" "b"\nbool x = token == "a"\n'
        f"{kind} y = {f' {op} '.join([term] * k)}\naccept {out}\n"
    )


def _rasp_program(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        return _rasp_chain(rng)
    if r < 0.5:  # many definitions in one layer (19+ made a layer name the loader refused)
        k = rng.choice([5, 19, 40])
        name = rng.choice(["v", "w" * rng.choice([30, 120, 250])])
        defs = "\n".join(f"bool {name}{j} = c > {j}" for j in range(k))
        ors = " or ".join(f"{name}{j}" for j in range(k))
        return f'alphabet "a" "b"\nint c = psum(int(token == "a"))\n{defs}\naccept {ors}\n'
    if r < 0.6:  # chained attends: small, or past the size limit (refused before building)
        k = rng.choice([3, 8, 300, 480])
        defs = ['bool a0 = token == "a"'] + [
            f"bool a{j} = attend leftmost j < i where a{j - 1}[j] value a{j - 1}[j] default false"
            for j in range(1, k)
        ]
        return 'alphabet "a" "b"\n' + "\n".join(defs) + f"\naccept a{k - 1}\n"
    # a bundled program, its text damaged
    src = rng.choice(sorted((ROOT / "models" / "rasp").glob("*.rasp"))).read_text()
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(src) + 1)
        op = rng.random()
        if op < 0.4:
            src = src[:i] + src[i + 1 :]
        elif op < 0.8:
            src = src[:i] + rng.choice(_RASP_BITS) + src[i:]
        else:
            lines = src.splitlines()
            j = rng.randrange(len(lines))
            src = "\n".join([*lines[: j + 1], lines[j], *lines[j + 1 :]]) + "\n"
    return src


_RASP_BITS = ["(", ")", " + ", " or ", " not ", "\t", "\n", "\n  ", '"', "x", "1" * 40, "[j]",
              "attend", "psum(", "int(", "==", "\u2028", "\x00", " if ", "#", "\\"]  # fmt: skip


def _deeprasp_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    src = _rasp_program(rng)
    if rng.random() < 0.3:  # the program as a model's reference, read by check or eval
        m = json.loads((ROOT / "models" / "rasp_majority.json").read_text())
        chain = "int z = " + " + ".join(["as"] * rng.choice([10, 199, 250, 600]))
        m["reference"]["program"] = m["reference"]["program"].replace(
            "accept as", chain + "\naccept as"
        )
        (workdir / "m.json").write_text(json.dumps(m), encoding="utf-8")
        if rng.random() < 0.3:
            return ["eval", str(workdir / "m.json"), "ab"]
        out = str(workdir / "out.json")
        return ["check", str(workdir / "m.json"), "--max-n", "2", "-q", "--json", out]
    (workdir / "p.rasp").write_text(src, encoding="utf-8", errors="surrogatepass")
    return ["build", "rasp", str(workdir / "p.rasp"), "-q", "-o", str(workdir / "out.json")]


def _oversize_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    m = workdir / "m.json"
    m.write_text(json.dumps(rng.choice([BASE_MODEL, DYCK1])), encoding="utf-8")
    out = str(workdir / "out.json")
    what = rng.choice(["eval", "export", "precision", "certify", "search tau", "export tau"])
    if what == "eval":
        n = rng.choice([20, 400, 6_000, 100_000])
        return ["eval", str(m), "".join(rng.choice("ab()") for _ in range(n))]
    if what == "export":
        n = rng.choice(["0", "10001", "1000000000", "-5"])
        return ["export", "torch", str(m), "-o", str(workdir / "x.pt"), "--n", n, "--json", out]
    if what == "precision":
        data = rng.choice([
            b"ab\nb\xffa\n", b"\xfe\xff", b"ab\n" * 50, b"a" * 5_000 + b"\n", b"\n\n",
            b"ab\nzz\n", b"()\n" * 3, "ab\u2028ba\n".encode(),
        ])  # fmt: skip
        (workdir / "in.txt").write_bytes(data)
        max_inputs = rng.choice(["10", "1000000"])
        return ["precision", str(m), "--inputs", str(workdir / "in.txt"), "--dtype", "float32",
                "--max-inputs", max_inputs, "--json", out]  # fmt: skip
    if what == "certify":
        rng_text = rng.choice(["1..1000000000000", "1..1000001", "5..2", "1..10", "0..3"])
        dyck = workdir / "d.json"
        dyck.write_text((ROOT / "models" / "dyck1.json").read_text())
        return ["certify", str(dyck), "--range", rng_text, "--tau", "theorem", "--json", out]
    if what == "search tau":
        tau = rng.choice(["0", "-1", "n-5", "1/(n-5)", "0*n"])
        obj = rng.choice(["margin", "gamma", "error"])
        return ["search", str(m), "--n", "5", "--objective", obj, "--tau", tau, "--json", out]
    tau = rng.choice(["0", "-n"])
    dtype = rng.choice(["float16", "float32"])
    return ["export", "torch", str(m), "-o", str(workdir / "x.pt"), "--tau", tau, "--dtype", dtype]


# ------------------------------------------------------------------------------ issue 40, rest
# The surfaces of issue 40 the kinds above left out: a tampered model beside a genuine check
# result (item 5), outputs into a FIFO or a character device (item 3), export's temporary
# names (item 4), a full disk (item 7: a copy of /dev/full, or a file-size limit), float
# overflow in export (item 8).

_TAMPER_STEMS = ("dyck1", "dyck2", "induction_k1")
_TRUSTED = ("also checked by enumeration", "claims also verified by enumeration")
_PROVED = "every claim used is proved"


def _number_leaves(tree: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every number in a model's weights (ints and exact strings)."""
    from fractions import Fraction

    out = []
    for p in _paths(tree.get("layers")):
        if not p:
            continue
        v = _get(tree["layers"], p)
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            continue
        try:
            Fraction(v)
        except (ValueError, ZeroDivisionError):
            continue
        out.append((_get(tree["layers"], p[:-1]), p[-1]))
    return out


def _tampered_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """A bundled model edited after `build` (a weight, a claim) or only re-documented, next
    to the genuine stored check of the original (the bundled lookup) or given as --checked:
    an edit of content is never "also checked by enumeration", and is CONDITIONAL."""
    from fractions import Fraction

    stem = rng.choice(_TAMPER_STEMS)
    (workdir / "models").mkdir()
    (workdir / "reports" / "claims").mkdir(parents=True)
    genuine_text = (ROOT / "reports" / "claims" / f"{stem}.hard.json").read_text()
    (workdir / "reports" / "claims" / f"{stem}.hard.json").write_text(genuine_text)
    genuine = json.loads(genuine_text)
    d = json.loads((ROOT / "models" / f"{stem}.json").read_text())
    edits = rng.sample(["weight", "claim", "doc", "layout", "mutate"], rng.randint(1, 2))
    changed = False  # content changed by construction
    raws: dict[str, str] = {}
    if "weight" in edits:
        container, key = rng.choice(_number_leaves(d))
        container[key] = str(Fraction(container[key]) + rng.choice([1, -1, Fraction(1, 3)]))
        changed = True
    if "claim" in edits:
        # a scalar claim (Theorem S's coordinate_ranges / head_profiles have no expr)
        key = rng.choice(sorted(k for k, v in d["claims"].items() if "expr" in v))
        e = d["claims"][key]["expr"]
        d["claims"][key]["expr"] = rng.choice([f"({e})/256", f"256*({e})", f"({e})+1"])
        changed = True
    if "doc" in edits:
        d["description"] = rng.choice(_PAYLOADS + ["edited"])
    if "layout" in edits:
        d = dict(reversed(list(d.items())))
    if "mutate" in edits:
        d, raws = mutate_tree(d, rng, 1, big=False)
    text = json.dumps(d, indent=rng.choice([None, 1, 4]))
    for k, lit in raws.items():
        text = text.replace(f'"{k}"', lit)
    model = workdir / "models" / f"{stem}.json"
    model.write_text(text, encoding="utf-8", errors="surrogatepass")
    digest = _model_digest(model)
    same = digest is not None and digest == genuine["model_sha256"] and not changed
    settings: dict[str, Any] = {"expect_exit_in": [0, 1, 2]}
    args = ["certify", str(model), "--n", rng.choice(["5", "50"]), "--tau", "theorem"]
    checked = rng.random() < 0.5
    if checked:
        (workdir / "r.json").write_text(genuine_text)
        args += ["--checked", str(workdir / "r.json")]
    if digest is not None and not same:  # loads, other content: not trusted, not proved
        settings["stdout_forbid"] = [*_TRUSTED, _PROVED]
        settings["stdout_require"] = ["CONDITIONAL"]
        settings["untrusted"] = True
    elif same and edits in (["doc"], ["layout"], ["doc", "layout"], ["layout", "doc"]):
        # the same content, only documented or laid out otherwise: still the checked model
        settings["stdout_require"] = [_PROVED] + (["also checked by enumeration"] * checked)
    _write_case(workdir, **settings)
    return [*args, "--json", str(workdir / "out.json")]


def _model_digest(path: Path) -> str | None:
    """The content digest of a model file, or None when it does not load (exit 2 is due)."""
    from exactattn.model import load_model
    from exactattn.model.provenance import model_sha256

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return model_sha256(load_model(path))
    except Exception:  # noqa: BLE001 - any refusal: the CLI must refuse it too (exit 2)
        return None


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _write_inputs(workdir: Path) -> dict[str, Path]:
    """The valid inputs the output-side kinds write from."""
    files = {
        "m": workdir / "m.json",
        "d": workdir / "d.json",
        "r": workdir / "r.json",
        "c": workdir / "c.json",
        "p": workdir / "p.rasp",
    }
    files["m"].write_text((DATA / "mean_a_position.json").read_text())
    files["d"].write_text((ROOT / "models" / "dyck1.json").read_text())
    files["r"].write_text((DATA / "result_small.json").read_text())
    files["c"].write_text(json.dumps(generated_bases()["certificate"]))
    files["p"].write_text((ROOT / "models" / "rasp" / "majority.rasp").read_text())
    return files


def _output_commands(f: dict[str, Path], out: str, suffix: str) -> list[list[str]]:
    """Commands of valid inputs that write one file ``out`` (a .json, or .md/.tex)."""
    m, d = str(f["m"]), str(f["d"])
    if suffix in (".md", ".tex"):
        cmds = [["report", str(f["c"]), "-o", out], ["report", str(f["r"]), "-o", out]]
        if suffix == ".md":
            cmds.append(["check", m, "--max-n", "2", "-q", "--report", out])
        return cmds
    return [
        ["check", m, "--max-n", "2", "-q", "--json", out],
        ["precision", m, "--max-n", "2", "--dtype", "float32", "--json", out],
        ["search", m, "--n", "3", "--objective", "margin", "--json", out],
        ["certify", d, "--n", "5", "--tau", "theorem", "--json", out],
        ["build", "rasp", str(f["p"]), "-q", "-o", out],
    ]


def _special_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """--json/-o/--report into a FIFO (a reader thread drains it) or, as root, a copy of the
    null device: written through, still the FIFO or the device, one whole document each."""
    import stat

    f = _write_inputs(workdir)
    suffix = rng.choice([".json", ".json", ".md", ".tex"])
    as_root = os.geteuid() == 0
    node = workdir / (("dev-null" if as_root and rng.random() < 0.5 else "fifo") + suffix)
    settings: dict[str, Any] = {"expect_exit_in": [0, 1, 3], "no_temp": True, "wall": 120}
    if node.name.startswith("dev-"):
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        settings["chardev"] = [str(node)]
    else:
        os.mkfifo(node)
        settings["special"] = [str(node)]
        settings["fifo_read"] = str(node)
    args = rng.choice(_output_commands(f, str(node), suffix))
    settings["stub_figures"] = rng.random() < 0.9
    _write_case(workdir, **settings)
    return args


def _fulldisk_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """A full disk: the output is a copy of /dev/full (as root; every write fails with
    ENOSPC), or files may not grow past a random size (RLIMIT_FSIZE: EFBIG). Exit 2 leaves
    no output and no temporary file; a run that fits leaves whole files."""
    import stat

    f = _write_inputs(workdir)
    suffix = rng.choice([".json", ".json", ".md", ".tex"])
    settings: dict[str, Any] = {"no_temp": True, "stub_figures": rng.random() < 0.8}
    if os.geteuid() == 0 and rng.random() < 0.4:
        node = workdir / f"dev-full{suffix}"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        args = rng.choice(_output_commands(f, str(node), suffix))
        if args[0] == "check" and "--report" in args and rng.random() < 0.5:
            args += ["--json", str(workdir / "out.json")]  # the pair: both or neither
        settings.update(chardev=[str(node)], expect_exit=2, outputs_whole=[])
        _write_case(workdir, **settings)
        return args
    out = str(workdir / f"out{suffix}")
    cmds = _output_commands(f, out, suffix)
    if suffix == ".json" and _has("torch"):
        cmds.append(["export", "torch", str(f["m"]), "-o", str(workdir / "out.pt")])
    args = rng.choice(cmds)
    if args[0] == "check" and "--report" in args:
        args += ["--json", str(workdir / "out.json")]
    limit = rng.choice([0, 1, 100, 1_000, 4_000, 20_000, 100_000, 1_000_000, 10**8])
    settings.update(
        fsize=limit, outputs_whole=[a for a in args if a.startswith(str(workdir / "out"))]
    )
    settings["expect_exit_in"] = [0, 1, 3] if limit >= 10**8 else [0, 1, 2, 3]
    _write_case(workdir, **settings)
    return args


def _exporttmp_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """Export beside a planted temporary name (the old fixed OUT.pt.tmp as a symlink, a file,
    a FIFO; a mkstemp-like name), over an output that is a symlink, or while another export
    writes the same file: planted files untouched, a whole x.pt, no temporary file left."""
    m = workdir / "m.json"
    m.write_text(json.dumps(rng.choice([BASE_MODEL, DYCK1])), encoding="utf-8")
    x = workdir / "x.pt"
    victim = workdir / "victim.txt"
    victim.write_text("precious\n")
    plant = rng.choice(["tmp link", "tmp file", "tmp fifo", "mkstemp name", "out link", "twice"])
    settings: dict[str, Any] = {"unchanged": {str(victim): _digest(victim)}, "no_temp": True}
    settings["wall"] = 60
    tmp = workdir / "x.pt.tmp"
    if plant == "tmp link":
        tmp.symlink_to(victim)
    elif plant == "tmp file":
        tmp.write_text("an old temporary file\n")
    elif plant == "tmp fifo":
        os.mkfifo(tmp)  # (opening it to write would block: the wall-clock limit catches it)
    elif plant == "mkstemp name":
        tmp = workdir / f".x.pt.{rng.choice(['abc', 'x_y7', '00000000'])}.tmp"
        tmp.write_text("someone else's temporary file\n")
    elif plant == "out link":
        x.symlink_to(victim)
    else:  # another export of the same file, in a thread, at the same time
        settings["concurrent_export"] = {"model": str(m), "out": str(x)}
    if tmp.exists() or tmp.is_symlink():
        settings["planted"] = {str(tmp): _entry(tmp)}
    args = ["export", "torch", str(m), "-o", str(x)]
    args += rng.choice([[], ["--dtype", "float16"], ["--json", str(workdir / "out.json")]])
    if _has("torch"):
        settings.update(expect_exit=0, loads=str(x))
    else:  # without the optional extra: one line saying so, nothing written
        settings["expect_exit"] = 2
    _write_case(workdir, **settings)
    return args


def _entry(p: Path) -> list[Any]:
    """What a planted directory entry is (kind and link target or content digest)."""
    import stat

    st = os.lstat(p)
    if stat.S_ISLNK(st.st_mode):
        return ["link", os.readlink(p)]
    if stat.S_ISFIFO(st.st_mode):
        return ["fifo", None]
    return ["file", _digest(p)]


def _dtype_overflows(v: Any, dtype: str) -> bool:
    """Whether the exact value v rounds (nearest, ties to even) to ±inf in dtype: |v| at
    least the largest finite value plus half an ulp (the tie goes to the even inf)."""
    from fractions import Fraction

    emax, p = {"float16": (15, 11), "bfloat16": (127, 8), "float32": (127, 24)}[dtype]
    return abs(Fraction(v)) >= Fraction(2) ** (emax + 1) - Fraction(2) ** (emax - p)


_BIG_WEIGHTS = [65504, -65504, 65519, 65520, -65520, "131039/2", "131040/2", 70000, 10**5,
                10**10, "1/65536", 3 * 10**38, 4 * 10**38, 10**40]  # fmt: skip


def _f16_case(rng: random.Random, workdir: Path, big: bool) -> list[str]:
    """A weight past the dtype's range (float16 tops out at 65,504): export refuses it (exit
    2, nothing written); a weight that rounds to the largest finite value still exports."""
    d = json.loads(json.dumps(BASE_MODEL))
    v = rng.choice(_BIG_WEIGHTS)
    head = d["layers"][0]["heads"][0]
    mat = head[rng.choice(["query", "key", "value"])]
    i = rng.randrange(len(mat))
    mat[i][rng.randrange(len(mat[i]))] = v
    m = workdir / "m.json"
    m.write_text(json.dumps(d), encoding="utf-8")
    dtype = rng.choice(["float16", "float16", "bfloat16", "float32"])
    x, out = workdir / "x.pt", workdir / "out.json"
    if rng.random() < 0.25:  # the same weights through precision: any verdict, never exit 4
        _write_case(workdir, expect_exit_in=[0, 1, 2, 3])
        return ["precision", str(m), "--max-n", "2", "--dtype", dtype, "--json", str(out)]
    args = ["export", "torch", str(m), "-o", str(x), "--dtype", dtype, "--json", str(out)]
    if not _has("torch"):
        _write_case(workdir, expect_exit=2)
    elif _dtype_overflows(v, dtype):
        _write_case(workdir, expect_exit=2, absent=[str(x), str(out)])
    else:
        _write_case(workdir, expect_exit=0, loads=str(x))
    return args


NEW_KINDS_2: dict[str, Any] = {
    "tampered": _tampered_case,
    "special": _special_case,
    "fulldisk": _fulldisk_case,
    "exporttmp": _exporttmp_case,
    "f16": _f16_case,
}


NEW_KINDS: dict[str, Any] = {
    "certreport": _document_case(["certificate", "certificate range"]),
    "runreport": _document_case(["precision", "precision family", "search", "search margin"]),
    "samepath": _samepath_case,
    "symlink": _symlink_case,
    "deeprasp": _deeprasp_case,
    "oversize": _oversize_case,
}
KINDS = ["model", "report", "tau", "checkpoint", "dask", *NEW_KINDS, *NEW_KINDS_2]
WEIGHTS = [6, 3, 1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
REPORT_KINDS = ("report", "certreport", "runreport")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run tests/fuzz_long.py or pytest tests/fuzz/test_fuzz_hostile_inputs.py")
