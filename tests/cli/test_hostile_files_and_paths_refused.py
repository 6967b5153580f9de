"""Issue 40's hostile pass, one regression per finding (each failed on main 16ffea5).

1. ``report`` on a certificate file validated nothing: ``<img onerror>`` reached the Markdown,
   ``\\input{/etc/passwd}`` the LaTeX, and a wrong field type was exit 4.
2. An output path naming an input (also via a symlink, a hard link or another spelling)
   overwrote the input.
3. ``--json`` on a special file (``/dev/null`` as root, a FIFO) replaced it by a regular file.
4. A checkpoint's ``lock`` or shard folder that is a symlink was written through; ``export``
   wrote a fixed ``OUT.pt.tmp``.
6. RASP: long operator chains crashed the checker (RecursionError, exit 4); compiler-made
   layer names passed the loader's 256-character limit; the model size was not bounded.
7. Guards: ``eval`` of a long input, ``export --n 1e9``, ``precision --inputs``, ``certify
   --range`` work, a report on a full disk.
8. Minor: float16 overflow in ``export``, ``search --tau 0``, malformed messages.

Every case runs the CLI in-process (tests/fuzzing.py) and asserts the exit code, the one-line
message naming the path, and the files left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import fuzzing as F
import pytest
from paths import ROOT

MODEL = ROOT / "tests" / "data" / "mean_a_position.json"
DYCK1 = ROOT / "models" / "dyck1.json"


def run(tmp_path: Path, args: list[str], timeout: float = 120) -> F.Outcome:
    return F.run_case("model", [str(a) for a in args], tmp_path, timeout=timeout)


def one_line_exit_2(o: F.Outcome, needle: str) -> None:
    assert o.code == 2, (o.code, o.stderr)
    assert F.problems(o) == [], F.problems(o)
    assert len(o.stderr.strip().splitlines()) == 1, o.stderr
    assert needle in o.stderr, o.stderr


# ---------------------------------------------------------------------------- 1. certificates


@pytest.fixture(scope="module")
def certificates() -> dict[str, Any]:
    """A one-length and a range certificate of dyck1 (τ theorem: certified)."""
    from dataclasses import replace

    from exactattn.certificate.certify import certificate, range_certificate
    from exactattn.model import load_model
    from exactattn.results.certificate import RangeRun

    model = load_model(DYCK1)
    one = certificate(model, 6, "theorem", checked_to=14, model_path="models/dyck1.json")
    rng = replace(range_certificate(model, 2, 4, "theorem"), run=RangeRun(0.1, None, None))
    return {"one": one.to_json(), "range": rng.to_json()}


def _report(tmp_path: Path, doc: Any, suffix: str) -> F.Outcome:
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    return run(tmp_path, ["report", tmp_path / "r.json", "-o", tmp_path / f"out.{suffix}"])


def _set(doc: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    x = doc
    for p in path[:-1]:
        x = x[p]
    x[path[-1]] = value
    return doc


HOSTILE = ["<img src=x onerror=alert(1)>", "\\input{/etc/passwd}", "a|b\n# h", "x" * 3000]

#: (which certificate, JSON path) of every string a reader may have edited
STRING_FIELDS = [
    ("one", ("model",)),
    ("one", ("reason",)),
    ("one", ("tau",)),
    ("one", ("layers", 0, "kind")),
    ("one", ("proof_chain", 0, "step")),
    ("one", ("proof_chain", 1, "statement")),
    ("one", ("proof_chain", 2, "proved_in")),
    ("one", ("conditional_on",)),
    ("range", ("model",)),
    ("range", ("tau",)),
    ("range", ("proof_chain", 0, "statement")),
]


@pytest.mark.parametrize("which, path", STRING_FIELDS)
@pytest.mark.parametrize("suffix", ["md", "tex"])
def test_certificate_report_escapes_every_string(
    tmp_path: Path, certificates: dict[str, Any], which: str, path: tuple, suffix: str
) -> None:
    for payload in HOSTILE:
        value = [payload] if path == ("conditional_on",) else payload
        o = _report(tmp_path, _set(certificates[which], path, value), suffix)
        assert o.code in (0, 2), (o.code, o.stderr)
        assert F.problems(o) == [], (payload, F.problems(o))
        if o.code == 0 and payload != "x" * 3000:
            text = (tmp_path / f"out.{suffix}").read_text(encoding="utf-8")
            assert F.report_injections(f"out.{suffix}", text) == []
            assert "onerror=alert(1)>" not in text.replace("\\>", "").replace("\\textgreater{}", "")
            assert suffix == "md" or "\\input{" not in text


#: (which, JSON path, hostile value, what the message names): every number and structure
#: the record reads; on main these were printed raw (numbers) or crashed (exit 4)
TYPED_FIELDS = [
    ("one", ("layers", 0, "error_bound"), "<img src=x onerror=alert(1)>", "layers[0].error_bound"),
    ("one", ("tau_theorem", "lower"), "\\input{/etc/passwd}", "tau_theorem.lower"),
    ("one", ("tau_theorem", "upper"), "0", "tau_theorem: lower end"),
    ("one", ("tau_grid", "last_certified", "tau", "upper"), "<b>", "last_certified.tau.upper"),
    ("one", ("tau_grid", "grid"), "2^(k/<b>)", "tau_grid.grid"),
    ("one", ("proof_chain", 0, "step"), 5, "proof_chain[0].step"),
    ("one", ("proof_chain",), {"a": 1}, "proof_chain: expected a list"),
    ("one", ("layers",), 5, "layers: expected a list"),
    ("one", ("layers", 0, "index"), "0", "layers[0].index"),
    ("one", ("n",), "<b>", "n: expected an integer"),
    ("one", ("n",), 10**13, "n: 10000000000000 is beyond the limit"),
    ("one", ("model",), ["x"], "model: expected a string"),
    ("one", ("status",), "maybe", "status: expected 'certified' or 'not certified'"),
    ("one", ("constants", "K"), [1], "constants.K"),
    ("one", ("constants", "L"), "5", "constants.L"),
    ("one", ("claims_at_n",), None, "claims_at_n: expected an object"),
    ("one", ("eps_le_1", "theorem_4ii_invariant"), "yes", "eps_le_1.theorem_4ii_invariant"),
    ("one", ("paper_chain", "applies"), "yes", "paper_chain.applies"),
    ("one", ("tau_values", 0), "x", "tau_values[0]"),
    ("one", ("final_error_bound",), None, "final_error_bound"),
    ("one", ("conditional_on",), "abc", "conditional_on: expected a list"),
    ("range", ("range",), ["<img>", 2], "range[0]"),
    ("range", ("range",), [5, 2], "range[1]: expected an integer >= 5"),
    ("range", ("first_failure",), {"n": {"a": 1}}, "first_failure.n"),
    ("range", ("evaluated",), "<b>", "evaluated"),
    ("range", ("seconds",), "<b>", "seconds"),
    # issue 41's keys (merged later; the long fuzz, seeds 2040-2041, found them unchecked)
    ("one", ("provenance",), 0, "provenance: expected an object"),
    ("one", ("provenance", "rederived"), "yes", "provenance.rederived: expected true or false"),
    ("range", ("provenance", "model_sha256"), None, "provenance.model_sha256"),
    ("range", ("provenance", "reason"), ["<b>"], "provenance.reason"),
    ("one", ("checked_not_used",), 5, "checked_not_used: expected a string"),
]


@pytest.mark.parametrize("which, path, value, needle", TYPED_FIELDS)
def test_certificate_report_refuses_wrong_types(
    tmp_path: Path, certificates: dict[str, Any], which: str, path: tuple, value: Any, needle: str
) -> None:
    o = _report(tmp_path, _set(certificates[which], path, value), "md")
    one_line_exit_2(o, needle)
    assert "exactattn certify --json" in o.stderr
    assert not (tmp_path / "out.md").exists()


def test_certificate_report_refuses_missing_keys(
    tmp_path: Path, certificates: dict[str, Any]
) -> None:
    for which, key in [
        ("one", "tau_grid"),
        ("one", "checked_by_enumeration_to"),
        ("range", "first_failure"),
    ]:
        doc = json.loads(json.dumps(certificates[which]))
        del doc[key]
        one_line_exit_2(_report(tmp_path, doc, "md"), f"{key}: missing")


@pytest.mark.parametrize("which", ["one", "range"])
def test_certificate_report_of_a_real_certificate(
    tmp_path: Path, certificates: dict[str, Any], which: str
) -> None:
    o = _report(tmp_path, certificates[which], "tex")
    assert o.code == 0, o.stderr
    tex = (tmp_path / "out.tex").read_text()
    assert "\\section*{Certificate: dyck1}" in tex
    if which == "one":
        assert "error bound after layer 4 (attention)" in tex


# ---------------------------------------------------------------------------- 2. output = input


def _program(tmp_path: Path) -> Path:
    p = tmp_path / "p.rasp"
    p.write_text((ROOT / "models" / "rasp" / "majority.rasp").read_text())
    return p


def _cases(tmp_path: Path) -> list[tuple[str, Path, list[Any]]]:
    """(name, the input that must survive, args with OUT where the output goes)."""
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    mmd = tmp_path / "m.md"  # a model file named like the report asked for
    mmd.write_text(MODEL.read_text())
    d = tmp_path / "d.json"
    d.write_text(DYCK1.read_text())
    r = tmp_path / "r.md"  # a result file named like the report asked for
    r.write_text((ROOT / "tests" / "data" / "result_small.json").read_text())
    words = tmp_path / "w.txt"
    words.write_text("ab\nba\n")
    prog = _program(tmp_path)
    return [
        ("check --json", m, ["check", m, "--max-n", "2", "-q", "--json", "OUT"]),
        ("check --report", mmd, ["check", mmd, "--max-n", "2", "-q", "--report", "OUT"]),
        ("certify --json", d, ["certify", d, "--n", "3", "--json", "OUT"]),
        ("precision --json", m, ["precision", m, "--max-n", "2", "--json", "OUT"]),
        ("precision --inputs", words, ["precision", m, "--inputs", words, "--json", "OUT"]),
        ("search --json", m, ["search", m, "--n", "3", "--objective", "margin", "--json", "OUT"]),
        ("build rasp -o", prog, ["build", "rasp", prog, "-q", "-o", "OUT"]),
        ("report -o", r, ["report", r, "-o", "OUT"]),
        ("export torch -o", m, ["export", "torch", m, "-o", "OUT"]),
        (
            "export torch --json",
            m,
            ["export", "torch", m, "-o", tmp_path / "x.pt", "--json", "OUT"],
        ),
        ("export transformer-lens -o", m, ["export", "transformer-lens", m, "-o", "OUT"]),
    ]


@pytest.mark.parametrize("spelling", ["same", "relative", "symlink", "hard link"])
def test_output_equal_to_an_input_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for name, victim, args in _cases(tmp_path):
        out: Any = {
            "same": victim,
            "relative": f"./sub/../{victim.name}",
            "symlink": tmp_path / f"link-{victim.name}",
            "hard link": tmp_path / f"hard-{victim.name}",
        }[spelling]
        if spelling == "symlink" and not os.path.lexists(out):
            out.symlink_to(victim)
        if spelling == "hard link" and not out.exists():
            os.link(victim, out)
        before = victim.read_bytes()
        listing = sorted(p.name for p in tmp_path.iterdir())
        o = run(tmp_path, [out if a == "OUT" else a for a in args])
        assert o.code == 2, (name, spelling, o.code, o.stderr)
        assert "which it would overwrite" in o.stderr, (name, o.stderr)
        assert len(o.stderr.strip().splitlines()) == 1, o.stderr
        assert victim.read_bytes() == before, name
        assert sorted(p.name for p in tmp_path.iterdir()) == listing, name


def test_report_figures_and_fragment_may_not_overwrite_the_result(tmp_path: Path) -> None:
    """``report r-fragment.tex -o r.tex`` would write the fragment over its input."""
    src = tmp_path / "r-fragment.tex"
    src.write_text((ROOT / "tests" / "data" / "result_small.json").read_text())
    o = run(tmp_path, ["report", src, "-o", tmp_path / "r.tex"])
    one_line_exit_2(o, "-o " + str(tmp_path / "r-fragment.tex"))
    assert json.loads(src.read_text())["format"] == "exactattn-result/1"


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    out = tmp_path / "x.md"
    o = run(tmp_path, ["check", m, "--max-n", "2", "-q", "--json", out, "--report", out])
    one_line_exit_2(o, "the same file as the output --json")
    assert not out.exists()


def test_build_reports_into_the_models_folder_is_refused(tmp_path: Path) -> None:
    o = run(tmp_path, ["build", "reports", "--models", tmp_path, "--out", tmp_path])
    one_line_exit_2(o, "which it would overwrite")


# ---------------------------------------------------------------------------- 3. special files


class FifoReader:
    """Reads every document written into a FIFO until stopped (a writer never blocks)."""

    def __init__(self, path: Path) -> None:
        self.path, self.docs, self.stopping = path, [], False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stopping:
            with open(self.path, "rb") as f:
                data = f.read()
            if data:
                self.docs.append(data)

    def stop(self) -> list[bytes]:
        self.stopping = True
        fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)  # wakes the waiting reader
        os.close(fd)
        self.thread.join(30)
        return self.docs


def test_json_into_a_fifo_writes_through_it(tmp_path: Path) -> None:
    """Also one document, the last: per-length saves into a FIFO (``--json /dev/stdout``
    through a pipe) would be several JSON documents in a row."""
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (
        ["check", m, "--max-n", "3", "-q", "--json", fifo],
        ["precision", m, "--max-n", "3", "--dtype", "float32", "--json", fifo],
        ["search", m, "--n", "3", "--objective", "margin", "--json", fifo],
    ):
        reader = FifoReader(fifo)
        o = run(tmp_path, args)
        docs = reader.stop()
        assert o.code == 0, o.stderr
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not a regular file
        assert len(docs) == 1, docs
        doc = json.loads(docs[0])
        assert doc["model"] == "mean-a-position" and not doc.get("interrupted")
        if args[0] == "check":
            assert doc["verdict"]["status"] == "clean"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_json_into_a_character_device_keeps_the_device(tmp_path: Path) -> None:
    """As root, ``--json /dev/null`` replaced /dev/null by a regular file: here a copy of the
    null device in tmp_path stands in for it (the real one is never touched)."""
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    dev, dev_md = tmp_path / "null", tmp_path / "null.md"
    for node in (dev, dev_md):
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    for args in (
        ["check", m, "--max-n", "2", "-q", "--json", dev],
        ["search", m, "--n", "3", "--objective", "margin", "--json", dev],
        ["check", m, "--max-n", "2", "-q", "--report", dev_md],
    ):
        o = run(tmp_path, args)
        assert o.code == 0, o.stderr
        assert stat.S_ISCHR(os.lstat(dev).st_mode) and stat.S_ISCHR(os.lstat(dev_md).st_mode)
    # exit 2 after lengths were saved puts the file back as it was: a device is left alone
    text = json.loads(MODEL.read_text())
    text["temperature"] = "1/(3-n)"
    text["layers"][0]["heads"][0]["temperature"] = "1/n"
    m.write_text(json.dumps(text))
    o = run(tmp_path, ["check", m, "--max-n", "3", "-q", "--json", dev])
    assert o.code == 2 and stat.S_ISCHR(os.lstat(dev).st_mode), o.stderr


# ---------------------------------------------------------------------------- 4. checkpoints


def _check_ckpt(tmp_path: Path, ck: Path) -> F.Outcome:
    m = tmp_path / "m.json"
    if not m.exists():
        m.write_text(MODEL.read_text())
    args = ["check", m, "--max-n", "3", "-q", "--checkpoint", ck, "--json", tmp_path / "out.json"]
    return run(tmp_path, args)


def test_checkpoint_lock_symlink_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "lock").symlink_to(victim)
    o = _check_ckpt(tmp_path, ck)
    one_line_exit_2(o, "lock is a symbolic link")
    assert victim.read_text() == "precious\n"


def test_checkpoint_shard_folder_symlink_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert _check_ckpt(tmp_path, ck).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = next(p for p in ck.iterdir() if p.is_dir())
    shutil.rmtree(folder)
    folder.symlink_to(elsewhere, target_is_directory=True)
    o = _check_ckpt(tmp_path, ck)
    one_line_exit_2(o, f"{folder.name} is a symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_checkpoint_shard_file_symlink_is_recomputed_not_followed(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert _check_ckpt(tmp_path, ck).code == 0
    fresh = (tmp_path / "out.json").read_text()
    shard = sorted(ck.glob("*/s*.json"))[0]
    victim = tmp_path / "victim.json"
    victim.write_text(shard.read_text())
    shard.unlink()
    shard.symlink_to(victim)
    before = victim.read_text()
    o = _check_ckpt(tmp_path, ck)
    assert o.code == 0 and "not a regular file" in o.stderr, o.stderr
    assert (tmp_path / "out.json").read_text() == fresh
    assert victim.read_text() == before and not shard.is_symlink()


def test_checkpoint_manifest_fifo_does_not_hang(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    os.mkfifo(ck / "manifest.json")
    o = _check_ckpt(tmp_path, ck)
    one_line_exit_2(o, "manifest.json is not a regular file or folder")


def test_export_temp_files_are_unique(tmp_path: Path) -> None:
    """A fixed OUT.pt.tmp followed a planted symlink (and two exports shared it)."""
    pytest.importorskip("torch")
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "x.pt.tmp").symlink_to(victim)
    o = run(tmp_path, ["export", "torch", m, "-o", tmp_path / "x.pt"])
    assert o.code == 0, o.stderr
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "x.pt").is_file() and not (tmp_path / "x.pt").is_symlink()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["m.json", "victim.txt", "x.pt", "x.pt.tmp"], names


# ---------------------------------------------------------------------------- 7. full disk


def _limited_run(args: list[str], cwd: Path, limit: int) -> subprocess.CompletedProcess[str]:
    """The CLI in a child whose files may not grow past ``limit`` bytes (a full disk: writes
    past it fail with EFBIG, SIGXFSZ ignored)."""
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from exactattn.cli import main\n"
        "main.main(args=sys.argv[1:], prog_name='exactattn')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_report_on_a_full_disk_leaves_no_file(tmp_path: Path) -> None:
    """The Markdown fits, the first figure does not: exit 2 and nothing written (the report
    was left beside exit 2)."""
    shutil.copy(ROOT / "tests" / "data" / "result_small.json", tmp_path / "r.json")
    p = _limited_run(["report", "r.json", "-o", "out.md"], tmp_path, 20_000)
    assert p.returncode == 2, p.stderr
    assert "cannot use the file" in p.stderr and "Traceback" not in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.json"]
    p = _limited_run(["report", "r.json", "-o", "out.md"], tmp_path, 10**8)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.md").exists() and (tmp_path / "out-gamma.png").exists()


@pytest.mark.parametrize("limit", [20_000, 40_000, 60_000])
def test_latex_report_figures_on_a_full_disk_are_exit_2(tmp_path: Path, limit: int) -> None:
    """Found by the fuzz (seed 2046, case 1,632: `report r.json -o out.tex` under a file-size
    limit of 20,000 bytes): matplotlib's PDF writer turned the failed write into
    "AttributeError: 'Stream' object has no attribute 'pos'", exit 4; now the figure is
    rendered in memory and the write fails as an OSError: exit 2, nothing left behind."""
    shutil.copy(ROOT / "tests" / "data" / "result_small.json", tmp_path / "r.json")
    p = _limited_run(["report", "r.json", "-o", "out.tex"], tmp_path, limit)
    assert p.returncode in (0, 2), p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    if p.returncode == 2:
        assert "cannot use the file" in p.stderr, p.stderr
        assert sorted(x.name for x in tmp_path.iterdir()) == ["r.json"]


def test_export_on_a_full_disk_is_exit_2(tmp_path: Path) -> None:
    """Found by the fuzz's fulldisk kind: PyTorch's writer reports a failed write as a
    RuntimeError ("unexpected pos 64 vs 0", "iostream error"), which was exit 4; now exit 2
    naming the file, nothing left behind."""
    pytest.importorskip("torch")
    shutil.copy(MODEL, tmp_path / "m.json")
    p = _limited_run(["export", "torch", "m.json", "-o", "x.pt"], tmp_path, 100)
    assert p.returncode == 2, p.stderr
    assert "cannot use the file x.pt: File too large" in p.stderr, p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.json"]
    # a limit past torch's first blocks ("basic_ios::clear: iostream error" was exit 4)
    p = _limited_run(["export", "torch", "m.json", "-o", "x.pt"], tmp_path, 4_000)
    assert p.returncode == 2 and "cannot use the file x.pt: File too large" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.json"]
    p = _limited_run(["export", "torch", "m.json", "-o", "x.pt"], tmp_path, 10**8)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize(
    ("args", "out"),
    [
        (["report", "r.json", "-o", "out.md"], "out.md"),
        (["report", "r.json", "-o", "out.tex"], "out.tex"),
        (["check", "m.json", "--max-n", "2", "-q", "--json", "o.json"], "o.json"),
        (["build", "dyck", "--pairs", "()", "-o", "d.json"], "d.json"),
    ],
)
def test_a_full_disk_names_the_file_it_could_not_write(
    tmp_path: Path, args: list[str], out: str
) -> None:
    """A file object's failed write names no file (the temporary one at most): the exit-2
    line said "cannot use the file: File too large", not which output failed. Every write
    error now names the output, and says the fix of a full disk."""
    shutil.copy(ROOT / "tests" / "data" / "result_small.json", tmp_path / "r.json")
    shutil.copy(MODEL, tmp_path / "m.json")
    p = _limited_run(args, tmp_path, 100)
    assert p.returncode == 2, p.stderr
    assert f"cannot use the file {out}: File too large (fix: free space on its disk)" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.json", "r.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_device_names_itself(tmp_path: Path) -> None:
    """A special file is written in place (not through a temporary file): its failed write
    names it too."""
    shutil.copy(MODEL, tmp_path / "m.json")
    o = run(tmp_path, ["check", tmp_path / "m.json", "--max-n", "2", "-q", "--json", "/dev/full"])
    one_line_exit_2(o, "cannot use the file /dev/full: No space left on device")


# ---------------------------------------------------------------------------- 6. RASP


def _chain(k: int, op: str) -> str:
    """A program whose third line is a chain of k terms joined by ``op``."""
    kind, term, out = ("int", "int(x)", "y > 3") if op in ("+", "-") else ("bool", "x", "y")
    chain = f" {op} ".join([term] * k)
    return f'alphabet "a" "b"\nbool x = token == "a"\n{kind} y = {chain}\naccept {out}\n'


@pytest.mark.parametrize("op", ["+", "-", "or", "and"])
def test_rasp_long_chain_exits_2_naming_the_line(tmp_path: Path, op: str) -> None:
    """500 terms: RecursionError in the type checker (exit 4) on main."""
    (tmp_path / "p.rasp").write_text(_chain(500, op))
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    one_line_exit_2(o, "p.rasp: line 3, column 1: an expression 50")  # 500, or 501 with int()
    assert "levels deep (limit 200; a chain x + y + z counts one level" in o.stderr
    assert not (tmp_path / "m.json").exists()


def test_rasp_long_chain_in_a_reference_exits_2(tmp_path: Path) -> None:
    """The same chain in a model's reference program (check, eval): exit 2, not 4."""
    m = json.loads((ROOT / "models" / "rasp_majority.json").read_text())
    chain = "int z = " + " + ".join(["as"] * 500)
    m["reference"]["program"] = m["reference"]["program"].replace(
        "accept as", chain + "\naccept as"
    )
    (tmp_path / "m.json").write_text(json.dumps(m))
    for args in (
        ["check", tmp_path / "m.json", "--max-n", "2", "-q"],
        ["eval", tmp_path / "m.json", "ab"],
    ):
        o = run(tmp_path, args)
        one_line_exit_2(o, "reference.program: line 8, column 1: an expression 500 levels deep")
        assert o.stderr.count("(fix:") == 1, o.stderr


def _burn(frames: int, fn: Any, *args: Any) -> Any:
    """Call fn with ``frames`` Python frames already on the stack (a deep caller)."""
    return fn(*args) if frames == 0 else _burn(frames - 1, fn, *args)


@pytest.mark.parametrize("op", ["+", "-", "or", "and"])
def test_rasp_chain_at_the_limit_works_under_a_deep_caller(op: str) -> None:
    """Depth 200 (a chain of 200 Boolean terms, of 199 int(x) terms) parses, runs, compiles,
    unparses and checks with 400 frames of the recursion limit of 1,000 already used."""
    from exactattn.constructions.rasp_compile import compile_program
    from exactattn.model import model_from_dict
    from exactattn.rasp.interpret import run as interpret
    from exactattn.rasp.parse import parse_program
    from exactattn.rasp.unparse import unparse
    from exactattn.run.check import run_check

    def work() -> int:
        p = parse_program(_chain(199 if op in "+-" else 200, op))
        interpret(p, "abab")
        unparse(p)
        model = model_from_dict(compile_program(p).model)
        return run_check(model, max_n=3).exit_code()

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    try:
        here = len(__import__("inspect").stack(0))
        assert _burn(max(0, 400 - here), work) == 0
    finally:
        sys.setrecursionlimit(limit)


def _one_layer_of(k: int, name: str = "v") -> str:
    """k comparisons of one prefix count: k feed-forward definitions in one layer."""
    defs = "\n".join(f"bool {name}{j} = c > {j}" for j in range(k))
    return (
        f'alphabet "a" "b"\nint c = psum(int(token == "a"))\n{defs}\n'
        f"accept {' or '.join(f'{name}{j}' for j in range(k))}\n"
    )


@pytest.mark.parametrize("k, name", [(19, "v"), (60, "v"), (25, "x" * 250)])
def test_rasp_many_definitions_in_one_layer_compile_and_load(
    tmp_path: Path, k: int, name: str
) -> None:
    """19 definitions made a layer name of 271 characters, which the loader refused (exit 2
    on a valid program); long definition names made coordinate and head names too long."""
    (tmp_path / "p.rasp").write_text(_one_layer_of(k, name))
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    assert o.code == 0, o.stderr
    m = json.loads((tmp_path / "m.json").read_text())
    names = [x.get("name", "") for x in m["layers"]] + m["coordinates"]
    names += [h.get("name", "") for x in m["layers"] for h in x.get("heads", [])]
    assert max(map(len, names)) <= 256
    assert any(f"({k} definitions)" in x.get("name", "") for x in m["layers"])
    o = run(
        tmp_path,
        ["check", tmp_path / "m.json", "--max-n", "3", "-q", "--json", tmp_path / "out.json"],
    )
    assert o.code == 0, o.stderr  # the reference (the program) agrees with the model


def test_rasp_long_token_sets_compile(tmp_path: Path) -> None:
    symbols = [f"s{j:02d}" + "y" * 20 for j in range(12)]
    alphabet = " ".join(f'"{s}"' for s in symbols)
    members = ", ".join(f'"{s}"' for s in symbols[:11])
    (tmp_path / "p.rasp").write_text(
        f"alphabet {alphabet}\nbool x = token in {{{members}}}\naccept x\n"
    )
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    assert o.code == 0, o.stderr
    coords = json.loads((tmp_path / "m.json").read_text())["coordinates"]
    assert max(map(len, coords)) <= 256


def _attend_chain(k: int) -> str:
    defs = ['bool a0 = token == "a"'] + [
        f"bool a{j} = attend leftmost j < i where a{j - 1}[j] value a{j - 1}[j] default false"
        for j in range(1, k)
    ]
    return 'alphabet "a" "b"\n' + "\n".join(defs) + f"\naccept a{k - 1}\n"


def test_rasp_model_size_is_bounded_before_building(tmp_path: Path) -> None:
    """480 chained attends: a MemoryError at 3.9 GB on main; now exit 2 at once, with the
    estimate, the limit and the line whose layer crosses it."""
    import resource

    (tmp_path / "p.rasp").write_text(_attend_chain(480))
    t = resource.getrusage(resource.RUSAGE_SELF)
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - t.ru_utime
    one_line_exit_2(o, "more than the limit of 2,000,000")
    assert "p.rasp: line " in o.stderr and "numbers by this line's layer" in o.stderr
    assert cpu < 20, cpu  # lowered, counted, refused: no dense model was built


@pytest.mark.parametrize("stem", ["dyck2", "majority", "anbn"])
def test_rasp_size_estimate_is_a_close_upper_bound(stem: str) -> None:
    from exactattn.constructions.rasp_compile import _Compiler
    from exactattn.rasp.parse import parse_program

    sources = [(ROOT / "models" / "rasp" / f"{stem}.rasp").read_text(), _attend_chain(30)]
    for src in sources:
        c = _Compiler(parse_program(src))
        model = c.run().model
        entries = sum(len(row) for x in model["layers"] for m in _matrices(x) for row in m) + sum(
            len(b) for x in model["layers"] for b in _biases(x)
        )
        entries += sum(len(v) for v in model["embedding"]["token"].values())
        entries += len(model["embedding"].get("position", []))
        estimate = c.bound_size()
        assert entries <= estimate <= entries * 1.05 + 100, (entries, estimate)


def _matrices(layer: dict[str, Any]) -> list[list[list[Any]]]:
    if layer["kind"] == "attention":
        return [h[k] for h in layer["heads"] for k in ("query", "key", "value", "output")]
    return [h["weight"] for h in layer["hidden"]] + [layer["output"]["weight"]]


def _biases(layer: dict[str, Any]) -> list[list[Any]]:
    if layer["kind"] == "attention":
        return []
    return [h["bias"] for h in layer["hidden"]] + [layer["output"]["bias"]]


def test_rasp_program_the_model_cannot_keep_is_refused(tmp_path: Path) -> None:
    """A 150,000-character program compiled to a model whose reference the loader refused."""
    src = (ROOT / "models" / "rasp" / "majority.rasp").read_text() + ("# " + "c" * 98 + "\n") * 1500
    (tmp_path / "p.rasp").write_text(src)
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    one_line_exit_2(o, f"p.rasp: line 1, column 1: a program of {len(src):,} characters")


def test_rasp_alphabet_symbol_the_model_cannot_hold_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "p.rasp").write_text('# c\nalphabet "a" "' + "b" * 300 + '"\naccept token == "a"\n')
    o = run(tmp_path, ["build", "rasp", tmp_path / "p.rasp", "-q", "-o", tmp_path / "m.json"])
    one_line_exit_2(o, "p.rasp: line 2, column 1: alphabet symbol")


# ---------------------------------------------------------------------------- 7. guards


def test_eval_of_a_long_input_is_refused_before_any_work(tmp_path: Path) -> None:
    """6,000 symbols: aborted at 3.3 GB (exit 134) on main."""
    import resource

    t = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    o = run(tmp_path, ["eval", MODEL, "ab" * 3000])
    one_line_exit_2(o, "eval: an input of length 6,000 has 36,060,009 activations and attention")
    assert "more than the limit of 100,000" in o.stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - t < 5


def test_eval_size_counts_what_eval_keeps() -> None:
    """(L + 1)·T·d activations and heads·T² weights (T = n + BOS): mean_a_position has one
    layer, one head, d = 4 and a BOS."""
    from exactattn.model import load_model
    from exactattn.run.evaluate import MAX_EVAL_VALUES, eval_size, evaluate

    model = load_model(MODEL)
    assert eval_size(model, 10) == 2 * 11 * 4 + 11 * 11
    ev = evaluate(model, list("ab" * 5))
    kept = sum(len(row) for act in ev.hard for row in act)
    kept += sum(len(r) for heads in ev.hard_attention if heads for rows in heads for r in rows)
    assert kept == eval_size(model, 10)
    longest = max(n for n in range(1, 1000) if eval_size(model, n) <= MAX_EVAL_VALUES)
    assert longest == 311  # T = 312: 312² + 2·312·4 = 99,840; T = 313: 100,473


def test_export_n_is_bounded(tmp_path: Path) -> None:
    """``--n 1000000000`` ground on (position embeddings at a billion positions)."""
    pytest.importorskip("torch")
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    for n in ("1000000000", "10001", "0"):
        o = run(tmp_path, ["export", "torch", m, "-o", tmp_path / "x.pt", "--n", n], timeout=60)
        one_line_exit_2(o, "an export is built for one length 1 <= n <= 10,000")
        assert not (tmp_path / "x.pt").exists()


def test_precision_inputs_guards(tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    f = tmp_path / "in.txt"
    cases = [
        (b"ab\nb\xffa\n", "in.txt: not UTF-8 text"),  # exit 4 on main
        (b"ab\n" * 11, "--max-inputs: the 11 inputs of"),
        (("ab" * 2_000).encode() + b"\n", "--max-inputs: the 1 input of"),  # 4,000 symbols
        (b"ab\nac\n", "in.txt:2: unknown symbol 'c'"),
        (b"\n\n", "in.txt: no input (every line is empty)"),
    ]
    for data, needle in cases:
        f.write_bytes(data)
        args = [
            "precision",
            m,
            "--inputs",
            f,
            "--max-inputs",
            "10",
            "--json",
            tmp_path / "out.json",
        ]
        o = run(tmp_path, args)
        one_line_exit_2(o, needle)
        assert o.stderr.count("(fix:") == 1, o.stderr
    f.write_bytes(b"ab\n" * 11)
    o = run(tmp_path, ["precision", m, "--inputs", f, "--max-inputs", "10", "--force"])
    assert o.code == 0, o.stderr


def test_precision_inputs_line_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line past the limit is refused while it is read (a file of one endless line)."""
    import exactattn.cli.extra as X

    monkeypatch.setattr(X, "MAX_INPUT_LINE", 100)
    m = tmp_path / "m.json"
    m.write_text(MODEL.read_text())
    (tmp_path / "in.txt").write_text("ab\n" + "a" * 101 + "\n")
    o = run(tmp_path, ["precision", m, "--inputs", tmp_path / "in.txt"])
    one_line_exit_2(o, "in.txt:2: a line of more than 100 characters")
    monkeypatch.setattr(X, "MAX_INPUT_LINE", 10**6)
    monkeypatch.setattr(X, "MAX_FAMILY_N", 50)
    o = run(tmp_path, ["precision", m, "--inputs", tmp_path / "in.txt"])
    one_line_exit_2(o, "in.txt:2: an input of 101 symbols is longer than the limit of 50")


def test_certify_range_work_guard(tmp_path: Path) -> None:
    import resource

    t = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    o = run(tmp_path, ["certify", DYCK1, "--range", "1..1000000000000", "--tau", "theorem"])
    one_line_exit_2(o, "--range 1..1,000,000,000,000: 1,000,000,000,000 lengths")
    assert "more than --max-lengths 1,000,000" in o.stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - t < 5
    o = run(tmp_path, ["certify", DYCK1, "--range", "1..30", "--max-lengths", "29"])
    one_line_exit_2(o, "30 lengths")
    args = ["certify", DYCK1, "--range", "1..30", "--max-lengths", "29", "--force"]
    o = run(tmp_path, [*args, "--tau", "theorem"])
    assert o.code == 0, o.stderr


# ---------------------------------------------------------------------------- 8. minor


def test_float16_overflow_is_refused(tmp_path: Path) -> None:
    """A weight of 10^5 is inf in float16 (largest 65,504): the file was written, exit 0."""
    pytest.importorskip("torch")
    d = json.loads(MODEL.read_text())
    d["layers"][0]["heads"][0]["query"] = [[0, 100_000, 0, 0]]
    m = tmp_path / "m.json"
    m.write_text(json.dumps(d))
    tl = [["transformer-lens"]] if F._has("transformer_lens") else []
    for cmd in (["torch"], *tl):
        args = ["export", *cmd, m, "-o", tmp_path / "x.pt", "--dtype", "float16"]
        o = run(tmp_path, [*args, "--json", tmp_path / "r.json"] if cmd == ["torch"] else args)
        one_line_exit_2(o, "--dtype float16: 1 exported tensor(s) do not fit the dtype")
        assert "W_Q" in o.stderr
        assert not (tmp_path / "x.pt").exists() and not (tmp_path / "r.json").exists()
    o = run(tmp_path, ["export", "torch", m, "-o", tmp_path / "x.pt", "--dtype", "float32"])
    assert o.code == 0, o.stderr


def test_export_float16_of_a_bundled_model_still_works(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    o = run(tmp_path, ["export", "torch", DYCK1, "-o", tmp_path / "x.pt", "--dtype", "float16"])
    assert o.code == 0, o.stderr


@pytest.mark.parametrize("objective", ["margin", "gamma", "error"])
def test_search_tau_zero_is_refused(tmp_path: Path, objective: str) -> None:
    args = ["search", MODEL, "--n", "3", "--objective", objective, "--tau", "0"]
    one_line_exit_2(run(tmp_path, args), "--tau: τ(3) = '0' is not positive at n = 3")


def test_export_tau_zero_is_refused_as_tau(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    o = run(tmp_path, ["export", "torch", MODEL, "-o", tmp_path / "x.pt", "--tau", "0"])
    one_line_exit_2(o, "--tau: τ(16) = '0' is not positive")


def test_one_fix_per_message(tmp_path: Path) -> None:
    """A RASP error inside a model's reference and a usage error that names its own fix
    got a second "(fix:" appended."""
    m = json.loads((ROOT / "models" / "rasp_majority.json").read_text())
    m["reference"]["program"] = m["reference"]["program"].replace("int(token", "(token")
    (tmp_path / "m.json").write_text(json.dumps(m))
    o = run(tmp_path, ["check", tmp_path / "m.json", "--max-n", "2", "-q"])
    assert o.code == 2 and o.stderr.count("(fix:") == 1, o.stderr
    (tmp_path / "in.txt").write_text("ab\nac\n")
    o = run(tmp_path, ["precision", MODEL, "--inputs", tmp_path / "in.txt"])
    assert o.code == 2 and o.stderr.count("(fix:") == 1, o.stderr


def test_fuzz_messages_are_well_formed(tmp_path: Path) -> None:
    """Every message of 300 fuzz cases (all kinds, the new ones too): at most one "(fix:",
    no literal ``\\t`` (no fuzz input holds a tab, so one would be the code's own text
    escaped), and no ``\\n\\t``."""
    import random

    rng = random.Random(40)
    undo = F.stub_figures()
    try:
        for _ in range(300):
            case_rng = random.Random(rng.getrandbits(64))
            kind, args = F.make_case(case_rng, tmp_path, big=False)
            o = F.run_case(kind, args, tmp_path, timeout=60)
            assert F.problems(o) == [], (kind, args, F.problems(o))
            for line in o.stderr.splitlines():
                assert line.count("(fix:") <= 1, line
                assert "\\t" not in line and "\\n\\t" not in line, line
    finally:
        undo()


# ---------------------------------------------------------------------------- 1b. precision, search


PREC = ROOT / "reports" / "precision"
STORED = sorted(
    p for p in PREC.rglob("*.json") if json.loads(p.read_text()).get("format") != "exactattn/1"
)


@pytest.mark.parametrize("path", STORED, ids=[p.name for p in STORED])
def test_every_stored_precision_and_search_file_renders(tmp_path: Path, path: Path) -> None:
    for suffix in ("md", "tex"):
        o = run(tmp_path, ["report", path, "-o", tmp_path / f"out.{suffix}"])
        assert o.code == 0, o.stderr
        text = (tmp_path / f"out.{suffix}").read_text()
        assert F.report_injections(f"out.{suffix}", text) == []


def test_precision_report_shows_the_runs(tmp_path: Path) -> None:
    doc = F.generated_bases()["precision family"]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    o = run(tmp_path, ["report", tmp_path / "r.json", "-o", tmp_path / "out.md"])
    assert o.code == 0, o.stderr
    md = (tmp_path / "out.md").read_text()
    assert "# Precision: dyck1" in md and "## float16, τ = model" in md
    assert "## float32, τ = model" in md and "| 40 | 2 |" in md


L0 = ("runs", 0, "lengths", 0)


@pytest.mark.parametrize(
    "which, path, value, needle",
    [
        ("precision", ("runs", 0, "dtype"), "<b>", "runs[0].dtype: expected one of float16"),
        ("precision", (*L0, "flips"), "x", "runs[0].lengths[0].flips"),
        ("precision", (*L0, "flips"), 99, "99 is beyond the limit of 2"),  # 2 inputs at n = 1
        ("precision", (*L0, "total_error", "upper"), "\\input{x}", "total_error.upper"),
        ("precision", ("settings", "mode"), 5, "settings.mode"),
        ("precision", ("runs",), [], "runs: a precision result needs"),
        ("precision family", (*L0, "first_flip", "input"), "ab", "first_flip.input"),
        ("precision family", (*L0, "first_flip", "diagnosis", "layer"), "x", "diagnosis.layer"),
        ("search", ("witness", "value", "upper"), "<img>", "witness.value.upper"),
        ("search", ("witness", "input"), ["a"], "witness.input: 1 symbols, but n = 5"),
        ("search", ("objective",), "<b>", "objective: expected one of margin"),
        ("search", ("n",), 0, "n: expected an integer >= 1"),
        ("precision", ("model_sha256",), ["<b>"], "model_sha256: expected a string"),
        ("search", ("model_sha256",), 5, "model_sha256: expected a string"),
    ],
)
def test_run_report_refuses_wrong_types(
    tmp_path: Path, which: str, path: tuple, value: Any, needle: str
) -> None:
    o = _report(tmp_path, _set(F.generated_bases()[which], path, value), "tex")
    one_line_exit_2(o, needle)
    assert not (tmp_path / "out.tex").exists()


@pytest.mark.parametrize("which", ["precision", "precision family", "search", "search margin"])
@pytest.mark.parametrize("suffix", ["md", "tex"])
def test_run_report_escapes_every_string(tmp_path: Path, which: str, suffix: str) -> None:
    base = F.generated_bases()[which]
    strings = [p for p in F._paths(base) if p and isinstance(F._get(base, p), str)]
    strings = [p for p in strings if p != ("format",)]
    rendered = 0
    for k, p in enumerate(strings):
        payload = HOSTILE[k % 3]
        o = _report(tmp_path, _set(base, p, payload), suffix)
        assert o.code in (0, 2) and F.problems(o) == [], (p, o.stderr, F.problems(o))
        if o.code == 0:
            rendered += 1
            text = (tmp_path / f"out.{suffix}").read_text(encoding="utf-8")
            assert F.report_injections(f"out.{suffix}", text) == [], p
            # (a code span may show "<img …>" literally: markdown-it renders it as text)
            assert suffix == "md" or "\\input{" not in text
    assert rendered >= 3


def test_checkpoint_lock_may_not_be_the_model(tmp_path: Path) -> None:
    """``check ck/lock --checkpoint ck`` truncated the model to write the lock's pid."""
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "lock").write_text(MODEL.read_text())
    o = run(tmp_path, ["check", ck / "lock", "--max-n", "2", "-q", "--checkpoint", ck])
    one_line_exit_2(o, "which it would overwrite")
    assert (ck / "lock").read_text() == MODEL.read_text()
