"""Issue 27, items 5, 7, 9, 10, 11, 13: the edges a hostile user still found.

One-letter alphabets, numbers past Python's 4,300-digit string limit, references that do not
fit the output, Ctrl-C under --jobs, absurd temperatures, and bounds on what each command
accepts (input counts, empty length ranges, tracr files). Each case runs the CLI in-process
(tests/fuzzing.py) under a CPU-time budget, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import fuzzing as F
import pytest

BASE = F.BASE_MODEL


def write_model(tmp_path: Path, model: dict, name: str = "m.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(model), encoding="utf-8")
    return p


def run(tmp_path: Path, args: list[str], timeout: float = 60) -> F.Outcome:
    return F.run_case("edge", args, tmp_path, timeout=timeout)


def one_letter() -> dict:
    """Alphabet {a}; constant position embedding, so every length is one cheap input."""
    m = copy.deepcopy(BASE)
    m["name"] = "one-letter"
    m["alphabet"] = ["a"]
    del m["embedding"]["token"]["b"]
    m["embedding"]["position"] = ["0", "0", "0", "0"]
    return m


# ---------------------------------------------------------------------------- item 5


@pytest.mark.parametrize("lengths", [["--max-n", "2"], ["--min-n", "2000", "--max-n", "2000"]])
def test_one_letter_alphabet_answers_without_quiet(tmp_path: Path, lengths: list[str]) -> None:
    """The estimate (shown without -q) used to loop forever for k = 1 (run *= 1)."""
    p = write_model(tmp_path, one_letter())
    run(tmp_path, ["check", str(p), *lengths, "-q"])  # warm imports (the -q path never hung)
    t0 = time.process_time()
    o = run(tmp_path, ["check", str(p), *lengths], timeout=10)
    spent = time.process_time() - t0
    assert not o.timed_out and o.code == 0, (o.code, o.stderr)
    assert "not timed" in o.stderr  # the estimate line (the -q path never hung)
    assert spent < 1.0, spent


def test_one_letter_estimate_is_timed_when_the_job_is_larger(tmp_path: Path) -> None:
    p = write_model(tmp_path, one_letter())
    o = run(tmp_path, ["check", str(p), "--max-n", "12"], timeout=20)
    assert o.code == 0 and "12 inputs (n = 1..12, alphabet of 1); estimated" in o.stderr


def test_estimate_terminates_for_every_alphabet_size() -> None:
    from exactattn.model import model_from_dict
    from exactattn.run.check import estimate

    for k in (1, 2, 3, 7, 64, 65):
        m = copy.deepcopy(BASE)
        letters = [f"t{i}" for i in range(k)]
        m["alphabet"] = letters
        m["embedding"]["token"] = {t: [i % 2, 1, 0, 0] for i, t in enumerate(letters)}
        m["embedding"]["token"]["<s>"] = [0, 1, 0, 0]
        secs = estimate(model_from_dict(m), 1, 2, hard_only=True)
        assert 0 <= secs < 60, (k, secs)


# ---------------------------------------------------------------------------- item 13


def test_count_inputs_is_arithmetic() -> None:
    from exactattn.inputs import count_inputs, count_text, inputs_exceed

    for k in (1, 2, 3, 5):
        for lo in (1, 2, 4):
            for hi in range(lo, 9):
                assert count_inputs(k, lo, hi) == sum(k**n for n in range(lo, hi + 1))
    assert count_inputs(2, 3, 2) == 0
    assert count_text(2, 1, 25) == "67,108,862"
    assert count_text(1, 1, 10**6) == "1,000,000"
    # 2^(10^6) ≈ 10^301029.99…: a true lower bound, computed without the number
    assert count_text(2, 1, 10**6) == "more than 10^301,029"
    t0 = time.process_time()
    assert inputs_exceed(2, 1, 10**7, 50_000_000)
    assert inputs_exceed(26, 1, 10**6, 10**100)
    assert time.process_time() - t0 < 0.1
    assert not inputs_exceed(2, 1, 25, 67_108_862)
    assert inputs_exceed(2, 1, 25, 67_108_861)
    assert not inputs_exceed(1, 1, 10**6, 10**6)


@pytest.mark.parametrize("max_n", ["100000", "1000000"])
def test_check_refuses_huge_counts_quickly(tmp_path: Path, max_n: str) -> None:
    """--max-n 100000 exited 4 (printing a 30,000-digit count); 10^6 ground in the estimate."""
    p = write_model(tmp_path, BASE)
    for extra in ([], ["-q"], ["--hard-only"]):
        o = run(tmp_path, ["check", str(p), "--max-n", max_n, *extra], timeout=5)
        assert o.code == 2, (o.code, o.stderr)
        assert "more than 10^" in o.stderr and "--max-inputs 50,000,000" in o.stderr
        assert "Traceback" not in o.stderr


def test_check_max_inputs_boundary(tmp_path: Path) -> None:
    p = write_model(tmp_path, BASE)
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "--max-inputs", "13", "-q"])
    assert o.code == 2 and "14 inputs (n = 1..3, alphabet of 2)" in o.stderr, o.stderr
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "--max-inputs", "14", "-q"])
    assert o.code == 0, o.stderr


@pytest.mark.parametrize(
    "lengths",
    [["--max-n", "0"], ["--max-n", "-1"], ["--min-n", "3", "--max-n", "2"], ["--min-n", "0"]],
)
def test_precision_refuses_empty_ranges(tmp_path: Path, lengths: list[str]) -> None:
    """These used to exit 0 "no flip" over zero lengths."""
    p = write_model(tmp_path, BASE)
    args = ["precision", str(p), "--dtype", "float32", *lengths]
    if "--max-n" not in lengths:
        args += ["--max-n", "2"]
    o = run(tmp_path, args, timeout=10)
    assert o.code == 2, (o.code, o.stderr)
    assert "no flip" not in o.stderr


def test_precision_has_an_input_guard(tmp_path: Path) -> None:
    p = write_model(tmp_path, BASE)
    for max_n in ("30", "10000000"):
        o = run(tmp_path, ["precision", str(p), "--max-n", max_n], timeout=5)
        assert o.code == 2 and "--max-inputs 1,000,000" in o.stderr, (o.code, o.stderr)
    o = run(tmp_path, ["precision", str(p), "--max-n", "3", "--max-inputs", "13"], timeout=10)
    assert o.code == 2 and "14 inputs" in o.stderr, o.stderr
    args = ["precision", str(p), "--max-n", "3", "--max-inputs", "14", "--dtype", "float64"]
    o = run(tmp_path, args, timeout=30)
    assert o.code == 0, o.stderr


@pytest.mark.parametrize("beam", ["0", "-3"])
def test_search_refuses_empty_beam(tmp_path: Path, beam: str) -> None:
    p = write_model(tmp_path, BASE)
    args = ["search", str(p), "--n", "3", "--objective", "margin", "--beam", beam]
    o = run(tmp_path, args, timeout=10)
    assert o.code == 2 and "--beam must be at least 1" in o.stderr, (o.code, o.stderr)


# ---------------------------------------------------------------------------- item 9

OUTPUTS = {
    "argmax": {"kind": "argmax", "weight": [[0, 0, 0, 1], [0, 0, 0, -1]], "labels": ["x", "y"]},
    "value": {"kind": "value", "weight": [[0, 0, 0, 1]]},
}
LANGUAGES = {
    "dyck": {"kind": "dyck", "pairs": ["ab"]},
    "ltl": {"kind": "ltl", "formula": "Y a"},
    "regex": {"kind": "regex", "pattern": "a*b"},
}


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_language_reference_on_a_non_accept_output(
    tmp_path: Path, output: str, language: str
) -> None:
    """A language reference on an argmax/value output crashed the check (TypeError)."""
    m = copy.deepcopy(BASE)
    m["output"] = OUTPUTS[output]
    m["reference"] = LANGUAGES[language]
    p = write_model(tmp_path, m)
    out = tmp_path / "out.json"
    for extra in (["-q"], [], ["--hard-only", "-q"]):
        o = run(tmp_path, ["check", str(p), "--max-n", "3", "--json", str(out), *extra])
        assert o.code == 2, (o.code, o.stderr)
        line = o.stderr.strip()
        assert line.startswith(f"error: reference.kind: a {language} reference"), line
        assert f"output.kind is '{output}'" in line and "(fix: use a cases reference" in line
        assert "\n" not in line and not out.exists()


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_language_reference_on_accept_output_still_loads(tmp_path: Path, language: str) -> None:
    m = copy.deepcopy(BASE)
    m["reference"] = LANGUAGES[language]
    o = run(tmp_path, ["check", str(write_model(tmp_path, m)), "--max-n", "3", "-q"])
    assert o.code in (0, 1), (o.code, o.stderr)


# ---------------------------------------------------------------------------- item 10


@pytest.mark.parametrize("to_group", [True, False], ids=["terminal-ctrl-c", "parent-only"])
def test_ctrl_c_under_jobs_prints_no_traceback(tmp_path: Path, to_group: bool) -> None:
    """Ctrl-C during check --jobs 2 printed concurrent.futures' InvalidStateError traceback
    (and each worker's KeyboardInterrupt) before "interrupted"."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "out.json"
    env = dict(os.environ, EXACTATTN_SHARD_INPUTS="256")  # many shards: futures pending
    args = [
        sys.executable,
        "-m",
        "exactattn",
        "check",
        str(F.ROOT / "tests/data/mean_a_position.json"),
    ]
    args += ["--max-n", "16", "--jobs", "2", "--arb-only", "-q", "--json", str(out)]
    p = subprocess.Popen(
        args,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not out.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the first length is written: the pool is running shards
        time.sleep(0.5)
        assert p.poll() is None, "the check finished before the interrupt"
        if to_group:  # what a terminal does: the parent and its workers all get SIGINT
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "Error" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted: finished lengths were kept", err
    assert json.loads(out.read_text())["verdict"]["status"] == "incomplete"


# ---------------------------------------------------------------------------- item 11

HUGE_TAUS = ["exp(-exp(20))", "exp(-exp(exp(3)))", "exp(-10^6)^3", "exp(10^6)*exp(10^6)"]


@pytest.mark.parametrize("tau", HUGE_TAUS)
def test_absurd_temperatures_stop_at_a_named_limit(tmp_path: Path, tau: str) -> None:
    """exp(-exp(20)) took minutes and gigabytes (exact endpoints of 7·10^8 bits)."""
    p = write_model(tmp_path, BASE)
    cmds = [
        ["check", str(p), "--max-n", "3", "-q"],
        ["check", str(p), "--max-n", "3", "--bounds", "--find-tau"],
        ["precision", str(p), "--max-n", "3", "--dtype", "float32"],
        ["search", str(p), "--n", "4", "--objective", "error", "--budget", "5"],
        ["eval", str(p), "ab"],
    ]
    for args in cmds:
        o = run(tmp_path, [*args, "--tau", tau], timeout=5)
        assert o.code == 2, (args, o.code, o.stderr)
        assert o.stderr.startswith("error: --tau: τ("), o.stderr
        assert o.stderr.count("\n") == 1
        assert "[2^-2,097,152, 2^2,097,152]" in o.stderr and "docs/limits.md" in o.stderr


@pytest.mark.parametrize("where", ["model", "head"])
def test_absurd_model_temperature_is_refused_at_start(tmp_path: Path, where: str) -> None:
    m = copy.deepcopy(BASE)
    if where == "model":
        m["temperature"] = "exp(-exp(exp(3)))"
        path = "temperature"
    else:
        m["layers"][0]["heads"][0]["temperature"] = "1/n + exp(-exp(n))*0 + exp(-exp(exp(n)))"
        path = "layers[0].heads[0].temperature"
    p = write_model(tmp_path, m)
    out = tmp_path / "out.json"
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "--json", str(out)], timeout=5)
    assert o.code == 2, (o.code, o.stderr)
    assert o.stderr.startswith(f"error: {path}: τ(") and "beyond a size limit" in o.stderr
    assert not out.exists()


@pytest.mark.parametrize("tau", ["exp(-700)", "exp(-10^6)", "1/n^1024"])
def test_tiny_temperatures_in_range_stay_cheap(tmp_path: Path, tau: str) -> None:
    """Errors of e^(-e^700) used to be expanded into exact fractions by search/precision."""
    p = write_model(tmp_path, BASE)
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "-q", "--tau", tau], timeout=10)
    assert o.code == 0, o.stderr
    args = ["search", str(p), "--n", "4", "--objective", "error", "--budget", "5", "--tau", tau]
    o = run(tmp_path, [*args, "--json", str(tmp_path / "out.json")], timeout=10)
    assert o.code == 0, o.stderr
    value = json.loads(o.out_text or "{}")["witness"]["value"]
    assert value["lower"] == "0" and "e-" in value["upper"], value
    args = ["precision", str(p), "--max-n", "3", "--dtype", "float64", "--tau", tau]
    o = run(tmp_path, args, timeout=20)
    assert o.code in (0, 1), o.stderr


def test_arb_endpoints_outward() -> None:
    from fractions import Fraction

    from flint import arb

    from exactattn.core.numbers import EXACT_BINARY_EXPONENT, arb_endpoints, arb_endpoints_outward

    tiny = Fraction(1, 2**EXACT_BINARY_EXPONENT)
    x = arb("0.3")
    assert arb_endpoints_outward(x) == arb_endpoints(x)  # moderate: exact
    t = arb(2) ** -100_000  # exact, positive, far below 2^-65,536
    assert arb_endpoints_outward(t) == (0, tiny)
    assert arb_endpoints_outward(-t) == (-tiny, 0)
    e = (-(arb(10) ** 30)).exp()  # e^(-10^30): [± 6e-434294481772865832204907879351]
    assert arb_endpoints_outward(e) == (-tiny, tiny)
    lo, hi = arb_endpoints_outward(arb(1) + e)
    assert lo <= 1 <= hi and hi - lo < Fraction(1, 2**50)
    with pytest.raises(OverflowError):
        arb_endpoints_outward((arb(10) ** 30).exp())


# ---------------------------------------------------------------------------- item 7

BIG = "1" + "0" * 1199  # 10^1199: four FFN layers multiply activations up to 10^4796


def growing_ffn(layers: int = 4, big: str = BIG) -> dict:
    m = copy.deepcopy(BASE)
    m["name"] = "growing"
    ffn = {
        "kind": "ffn",
        "hidden": [{"weight": [[0, 0, 0, big]], "bias": [0]}],
        "output": {"weight": [[0], [0], [0], [1]], "bias": [0, 0, 0, 0]},
    }
    m["layers"] += [copy.deepcopy(ffn) for _ in range(layers)]
    return m


def long_gamma() -> dict:
    """Key and query scaled by 1/(3…3) (2,300 threes): γ(n) = 1/(3…3)², 4,600 digits."""
    m = copy.deepcopy(BASE)
    m["name"] = "long-gamma"
    q = "1/" + "3" * 2300
    m["layers"][0]["heads"][0]["key"] = [[q, 0, 0, 0]]
    m["layers"][0]["heads"][0]["query"] = [[0, q, 0, 0]]
    return m


@pytest.mark.parametrize("extra", [[], ["--hard-only"], ["-q", "--jobs", "2"]])
def test_long_exact_values_are_written_exactly(tmp_path: Path, extra: list[str]) -> None:
    """A 4,600-digit γ and 4,797-digit activations crashed check with Python's 4,300-digit
    int/str guard; now the JSON holds every digit and the table an ≈ abbreviation."""
    from fractions import Fraction

    out = tmp_path / "out.json"
    p = write_model(tmp_path, long_gamma())
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "--json", str(out), *extra])
    assert o.code in (0, 3), (o.code, o.stderr)
    res = json.loads(out.read_text())
    g = Fraction(res["lengths"][0]["gamma"])
    assert g == Fraction(1, int("3" * 2300) ** 2)  # the hard score gap of 'a' vs BOS
    assert len(str(g.denominator)) == 4600
    p = write_model(tmp_path, growing_ffn())
    o = run(tmp_path, ["check", str(p), "--max-n", "2", "--json", str(out), *extra])
    assert o.code in (0, 1), (o.code, o.stderr)
    res = json.loads(out.read_text())
    # x_max: the largest |activation|: the mean a-position (≤ 1) times 10^(4·1199)
    xm = Fraction(res["lengths"][-1]["layers"][-1]["activation_max"])
    assert xm.numerator.bit_length() > 4796 * 3.3 and xm <= 10 ** (4 * 1199) * 2


def test_long_exact_values_in_the_table_are_abbreviated(tmp_path: Path) -> None:
    import contextlib
    import io

    from exactattn.cli import print_table

    p = write_model(tmp_path, long_gamma())
    out = tmp_path / "out.json"
    o = run(tmp_path, ["check", str(p), "--max-n", "2", "--hard-only", "--json", str(out)])
    assert o.code == 0, o.stderr
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_table(json.loads(out.read_text()))
    text = buf.getvalue()
    assert "≈9e-4600" in text and "3333333333" not in text, text[:2000]


@pytest.mark.parametrize("suffix", [".md", ".tex"])
def test_long_exact_values_go_through_report(tmp_path: Path, suffix: str) -> None:
    """A result that check writes (a 4,600-digit γ) is one that report reads and renders."""
    p = write_model(tmp_path, long_gamma())
    out = tmp_path / "out.json"
    o = run(tmp_path, ["check", str(p), "--max-n", "2", "--hard-only", "--json", str(out)])
    assert o.code == 0, o.stderr
    kept = tmp_path / "result.json"  # the harness clears out* files before each case
    out.rename(kept)
    rep = tmp_path / f"out{suffix}"
    o = run(tmp_path, ["report", str(kept), "-o", str(rep)], timeout=60)
    assert o.code == 0, o.stderr
    text = rep.read_text()
    assert "3333333333" * 10 not in text  # abbreviated in the report, exact in the JSON


def test_long_exact_values_in_precision_and_search(tmp_path: Path) -> None:
    for model in (long_gamma(), growing_ffn()):
        p = write_model(tmp_path, model)
        o = run(tmp_path, ["precision", str(p), "--max-n", "2", "--dtype", "float32"], timeout=30)
        assert o.code in (0, 1), (o.code, o.stderr)
        for objective in ("gamma", "error", "margin"):
            args = ["search", str(p), "--n", "3", "--objective", objective, "--budget", "4"]
            o = run(tmp_path, [*args, "--json", str(tmp_path / "out.json")], timeout=30)
            assert o.code == 0, (objective, o.code, o.stderr)
            assert json.loads(o.out_text or "{}")["witness"]["value"]["lower"]


def test_precision_rounds_values_past_float64_to_inf() -> None:
    import math

    import numpy as np

    from exactattn.run.precision import round_exact

    num = np.array([10**4800, -(10**4800), 3], dtype=object)
    got = round_exact(num, np.array(7, dtype=object), np.float32)
    assert math.isinf(got[0]) and got[0] > 0 and got[1] < 0 and got[2] == np.float32(3 / 7)


def test_values_past_the_digit_limit_are_refused_clearly(tmp_path: Path) -> None:
    """26 layers × 10^3990: activations of 103,740 digits, past MAX_INT_DIGITS (10^5)."""
    p = write_model(tmp_path, growing_ffn(26, "1" + "0" * 3990))
    out = tmp_path / "out.json"
    o = run(tmp_path, ["check", str(p), "--max-n", "1", "-q", "--hard-only", "--json", str(out)])
    assert o.code == 2, (o.code, o.stderr)
    assert o.stderr.startswith("error: an exact value of the computation has more than 100,000")
    assert not out.exists()


# ---------------------------------------------------------------------------- item 13: tracr

TRACR = F.ROOT / "tests" / "data" / "tracr"


def _npy(shape: tuple[int, ...], data: bytes = b"", dtype: str = "<f4") -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue() + data


def _npz(path: Path, members: dict[str, bytes], compress: bool = False) -> Path:
    import zipfile

    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", mode) as z:
        for name, data in members.items():
            z.writestr(name + ".npy", data)
    return path


def _import(tmp_path: Path, npz: Path, meta: Path | None = None) -> F.Outcome:
    meta = meta or TRACR / "reverse.json"
    args = ["import", "tracr", str(npz), str(meta), "-o", str(tmp_path / "out.json")]
    return run(tmp_path, args, timeout=10)


def test_tracr_huge_npy_header_is_refused_before_allocating(tmp_path: Path) -> None:
    """A header declaring (100000, 100000) float32 made numpy allocate 37 GiB (exit 4)."""
    npz = _npz(tmp_path / "p.npz", {"token_embed/embeddings": _npy((100000, 100000), b"\0" * 64)})
    o = _import(tmp_path, npz)
    assert o.code == 2, (o.code, o.stderr)
    assert "p.npz: token_embed/embeddings: declares shape (100000, 100000)" in o.stderr
    assert not (tmp_path / "out.json").exists()


def test_tracr_zip_bomb_is_refused_from_its_declared_size(tmp_path: Path, monkeypatch) -> None:
    """The check reads only the zip directory: limits scaled down so the bomb stays small."""
    import exactattn.importers.tracr as T

    monkeypatch.setattr(T, "MAX_MEMBER_BYTES", 2**20)
    monkeypatch.setattr(T, "RATIO_FROM", 2**20)
    zeros = _npy((1024, 1024), b"\0" * 4 * 2**20)
    o = _import(tmp_path, _npz(tmp_path / "p.npz", {"pos_embed/embeddings": zeros}, True))
    assert o.code == 2 and "expands to 4,194," in o.stderr, (o.code, o.stderr)
    monkeypatch.setattr(T, "MAX_MEMBER_BYTES", 2**30)
    zeros = _npy((1024, 2048), b"\0" * 8 * 2**20)
    o = _import(tmp_path, _npz(tmp_path / "p.npz", {"pos_embed/embeddings": zeros}, True))
    assert o.code == 2 and "-fold, more than the limit of 1,000" in o.stderr, o.stderr


def test_tracr_metadata_nesting_and_huge_floats(tmp_path: Path) -> None:
    meta = tmp_path / "m.json"
    meta.write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    o = _import(tmp_path, TRACR / "reverse.npz", meta)
    assert o.code == 2 and "nested deeper than the limit of 64" in o.stderr, o.stderr
    meta.write_text('{"a": ' * 70 + "1" + "}" * 70)
    o = _import(tmp_path, TRACR / "reverse.npz", meta)
    assert o.code == 2 and "nested deeper than the limit of 64" in o.stderr, o.stderr
    for number in ("1e999999999", "1.5e-301", "1" * 5000, "0." + "1" * 5000):
        text = (TRACR / "reverse.json").read_text()
        meta.write_text(text.replace('"max_seq_len": 5', f'"max_seq_len": 5, "x": {number}'))
        assert meta.read_text() != text
        o = _import(tmp_path, TRACR / "reverse.npz", meta)
        assert o.code == 2 and "beyond the limits of model numbers" in o.stderr, o.stderr


def test_tracr_fixture_still_imports(tmp_path: Path) -> None:
    o = _import(tmp_path, TRACR / "reverse.npz")
    assert o.code == 0, o.stderr


# ---------------------------------------------------------------------------- item 13: exit 2


def test_exit_2_after_a_saved_length_writes_nothing(tmp_path: Path) -> None:
    """--tau theorem meets a tie at the top only at n = 2, after n = 1 was saved: the file
    used to stay behind beside exit 2. Now it is removed, or a previous file restored."""
    m = copy.deepcopy(BASE)
    head = m["layers"][0]["heads"][0]
    head.update({"hard": "leftmost", "mask": "lt", "key": [[1, 0, 0, 0]]})
    p = write_model(tmp_path, m)
    out = tmp_path / "out.json"
    args = ["check", str(p), "--max-n", "3", "-q", "--tau", "theorem", "--json", str(out)]
    o = run(tmp_path, args)
    assert o.code == 2 and "at n = 2 a leftmost/rightmost head has a tie" in o.stderr, o.stderr
    assert not out.exists()
    out.write_text("previous result\n")
    o = F.run_case("edge", args, tmp_path, timeout=60)  # (run_case clears out* files first)
    assert o.code == 2 and not out.exists()
    keep = tmp_path / "keep.json"
    keep.write_text("previous result\n")
    args[-1] = str(keep)
    o = run(tmp_path, args)
    assert o.code == 2 and keep.read_text() == "previous result\n"


def test_too_many_heads_or_layers(tmp_path: Path) -> None:
    """A 6,000-head model took 31–70 CPU-s and 1.5 GB for 14 inputs."""
    m = copy.deepcopy(BASE)
    m["layers"][0]["heads"] *= 1025
    o = run(tmp_path, ["check", str(write_model(tmp_path, m)), "--max-n", "2", "-q"], timeout=20)
    assert o.code == 2, (o.code, o.stderr)
    assert o.stderr.startswith("error: layers[0].heads: the model has 1,025 or more attention")
    m = copy.deepcopy(BASE)
    m["layers"] = [copy.deepcopy(m["layers"][0]) for _ in range(1025)]
    o = run(tmp_path, ["check", str(write_model(tmp_path, m)), "--max-n", "2", "-q"], timeout=20)
    assert o.code == 2 and "1,025 layers are more than the limit of 1,024" in o.stderr, o.stderr


def test_precision_exit_2_after_saved_lengths_writes_nothing(tmp_path: Path) -> None:
    """τ(n) = e^(-300000 n) leaves the temperature range at n = 4, after n = 1..3 were saved."""
    p = write_model(tmp_path, BASE)
    out = tmp_path / "out.json"
    args = ["precision", str(p), "--max-n", "5", "--dtype", "float32", "--json", str(out)]
    o = run(tmp_path, [*args, "--tau", "exp(-n*300000)"], timeout=30)
    assert o.code == 2 and "τ(4)" in o.stderr, (o.code, o.stderr)
    assert not out.exists()


def test_single_input_lengths_are_bounded(tmp_path: Path) -> None:
    """precision --n / search --n of 10^8 ground for minutes; --n-pow2 already stopped at 2^24."""
    p = write_model(tmp_path, BASE)
    for args in (
        ["precision", str(p), "--family", "all", "--n", "100000000", "--dtype", "float32"],
        ["search", str(p), "--n", "16777217", "--objective", "margin"],
    ):
        o = run(tmp_path, args, timeout=5)
        assert o.code == 2 and "is longer than the limit of 16,777,216" in o.stderr, o.stderr
