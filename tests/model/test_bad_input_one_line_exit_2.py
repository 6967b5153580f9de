"""Every reproducer of issue 12 (bad input): exit 2, one line naming the JSON path, no output.

Run in-process through the CLI (tests/fuzzing.py) for speed;
tests/model/test_bad_model_files.py keeps the subprocess-level checks. Also: exit 4 for internal
errors, 130 for Ctrl-C, partial runs never "clean", atomic writes.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import fuzzing as F
import pytest

BASE = F.BASE_MODEL  # has BOS "<s>", no EOS, accept at "last"


def run(tmp_path: Path, args: list[str]) -> F.Outcome:
    return F.run_case("model", args, tmp_path, timeout=120)


def check_text(tmp_path: Path, text: str, max_n: int = 3) -> F.Outcome:
    p = tmp_path / "m.json"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    return run(
        tmp_path,
        ["check", str(p), "--max-n", str(max_n), "-q", "--json", str(tmp_path / "out.json")],
    )


def mut(fn) -> str:
    d = copy.deepcopy(BASE)
    fn(d)
    return json.dumps(d)


def set_value(v):
    return lambda d: d["layers"][0]["heads"][0]["value"][0].__setitem__(2, v)


def no_bos(d):
    d.pop("bos")
    d["embedding"]["token"].pop("<s>")


def raw_position(literal: str, without_bos: bool = False) -> str:
    def f(d):
        if without_bos:
            no_bos(d)
        d["output"]["position"] = "@@"

    return mut(f).replace('"@@"', literal)


CASES = {
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested deeper than the limit of 64"),
    "long integer": (json.dumps(BASE).replace('"d": 4', '"d": ' + "1" * 5000), "d: a number of"),
    "long ratio": (mut(set_value("1/" + "3" * 5000)), "layers[0].heads[0].value[0][2]: a number"),
    "duplicate key": (
        mut(lambda d: None).replace('"hard": "average"', '"hard": "average", "mask": "gt"'),
        "layers[0].heads[0].mask: the key 'mask' appears twice",
    ),
    "arabic digits": (mut(set_value("١/٢")), "value[0][2]: '١/٢' is not a rational literal"),
    "padded": (mut(set_value(" 1 ")), "value[0][2]: ' 1 ' is not a rational literal"),
    "negative denominator": (mut(set_value("1/-2")), "'1/-2' is not a rational literal"),
    "empty BOS": (
        mut(lambda d: (d.__setitem__("bos", ""), d["embedding"]["token"].__setitem__("", [0] * 4))),
        "bos: the bos token is empty",
    ),
    "surrogate in name": (
        json.dumps(BASE).replace('"mean-a-position"', '"x\\ud800"'),
        "name: the string 'x\ufffd' holds a lone UTF-16 surrogate",
    ),
    "surrogate in token": (
        json.dumps(BASE).replace('"b"', '"\\udc00"'),
        "holds a lone UTF-16 surrogate",
    ),
    "newline in name": (mut(lambda d: d.__setitem__("name", "a\nb")), "name: the model name"),
    "LTL 5000 deep": (
        mut(lambda d: d.__setitem__("reference", {"kind": "ltl", "formula": "!" * 5000 + "a"})),
        "reference.formula: the formula is nested more than 100",
    ),
    "LTL 5000 parens": (
        mut(
            lambda d: d.__setitem__(
                "reference", {"kind": "ltl", "formula": "(" * 4000 + "a" + ")" * 4000}
            )
        ),
        "reference.formula: the formula is nested more than 100",
    ),
    "position 0 without BOS": (raw_position("0", True), "output.position: position 0 is the BOS"),
    "position -0 without BOS": (raw_position("-0", True), "output.position: position 0 is the"),
    "position 10^100": (raw_position("1" + "0" * 100), "output.position: 1000"),
    "eos without EOS": (
        mut(lambda d: d["output"].__setitem__("position", "eos")),
        'output.position: "eos" but the model has no EOS token',
    ),
    "bos without BOS": (
        mut(lambda d: (no_bos(d), d["output"].__setitem__("position", "bos"))),
        'output.position: "bos" but the model has no BOS token',
    ),
    "long key": (
        json.dumps(BASE)[:-1] + ', "' + "k" * 100_000 + '": 1}',
        "a key of 100,000 characters is longer than the limit of 256",
    ),
    "unused temperature undefined at n = 3": (
        mut(
            lambda d: (
                d.__setitem__("temperature", "1/(3-n)"),
                d["layers"][0]["heads"][0].__setitem__("temperature", "1/n"),
            )
        ),
        "temperature: τ(3) = '1/(3-n)' is undefined at n = 3",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reproducer_exits_2_with_one_line(tmp_path: Path, name: str) -> None:
    text, needle = CASES[name]
    o = check_text(tmp_path, text)
    assert o.code == 2, (o.code, o.stderr)
    assert F.problems(o) == [], F.problems(o)
    line = o.stderr.strip()
    assert len(line.splitlines()) == 1 and len(line) < 700, line
    assert needle in line, line
    assert "fix:" in line
    assert not (tmp_path / "out.json").exists()


def test_non_utf8_model(tmp_path: Path) -> None:
    o = check_text(tmp_path, "")
    (tmp_path / "m.json").write_bytes(b'{"name": "\xff"}')
    o = run(tmp_path, ["check", str(tmp_path / "m.json"), "--max-n", "1"])
    assert o.code == 2 and "is not UTF-8 text" in o.stderr


def test_unused_temperature_leaves_no_result_file(tmp_path: Path) -> None:
    """The issue's lying file: n = 1, 2 were fine, n = 3 stopped the run."""
    text, _ = CASES["unused temperature undefined at n = 3"]
    o = check_text(tmp_path, text, max_n=3)
    assert o.code == 2 and not (tmp_path / "out.json").exists()
    o = check_text(tmp_path, text, max_n=2)  # defined at n = 1, 2: a clean, complete run
    assert o.code == 0
    assert json.loads(o.out_text or "")["verdict"]["status"] == "clean"


def test_partial_run_is_never_clean(tmp_path: Path) -> None:
    """The file written after each length says 'incomplete' until the last length is done."""
    from exactattn.model import model_from_dict
    from exactattn.run.check import run_check

    seen = []
    model = model_from_dict(json.loads(json.dumps(BASE)))
    result = run_check(model, max_n=3, on_length=lambda r: seen.append(r.to_json()["verdict"]))
    assert [v["status"] for v in seen] == ["incomplete", "incomplete", "incomplete"]
    assert "n = 1..3 was asked for" in seen[0]["summary"]
    assert result.verdict().status == "clean" and result.exit_code() == 0


def test_interrupt_keeps_finished_lengths_marked_incomplete(tmp_path: Path, monkeypatch) -> None:
    import exactattn.run.check as C

    real = C.check_length
    calls = {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(C, "check_length", flaky)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(BASE))
    o = run(tmp_path, ["check", str(p), "--max-n", "3", "-q", "--json", str(tmp_path / "out.json")])
    assert o.code == 130
    v = json.loads(o.out_text or "")
    assert v["verdict"]["status"] == "incomplete" and v["interrupted"] is True
    assert [r["n"] for r in v["lengths"]] == [1]


def test_internal_error_exits_4_without_traceback(tmp_path: Path, monkeypatch) -> None:
    import exactattn.run.check as C

    def boom(*a, **k):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(C, "check_length", boom)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(BASE))
    args = ["check", str(p), "--max-n", "2", "-q", "--json", str(tmp_path / "out.json")]
    o = run(tmp_path, args)
    assert o.code == 4
    assert "Traceback" not in o.stderr and "internal error" in o.stderr
    assert "ZeroDivisionError: simulated bug" in o.stderr and "--debug" in o.stderr
    assert not (tmp_path / "out.json").exists()
    monkeypatch.setattr("sys.argv", ["exactattn", "--debug", *args])
    o = run(tmp_path, ["--debug", *args])
    assert o.code == 4 and "Traceback" in o.stderr


def test_eval_empty_separator(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps(BASE))
    o = run(tmp_path, ["eval", str(p), "ab", "--sep", ""])
    assert o.code == 2 and '--sep ""' in o.stderr and "Traceback" not in o.stderr


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda r: r.pop("lengths"), "lengths: a result needs a non-empty list"),
        (lambda r: r.__setitem__("lengths", []), "lengths: a result needs a non-empty list"),
        (lambda r: r["lengths"][0].__setitem__("gamma", "abc"), "lengths[0].gamma: 'abc'"),
        (lambda r: r["lengths"][0].__setitem__("x_max", "@NaN"), "lengths[0].x_max: 'NaN'"),
        (lambda r: r["lengths"][1].__setitem__("n", 1), "lengths[1].n: n = 1 appears twice"),
        (lambda r: r["lengths"][3].__setitem__("n", 10**100), "beyond the limit of 1,000,000,000"),
    ],
)
def test_report_on_bad_results(tmp_path: Path, change, needle: str) -> None:
    r = copy.deepcopy(F.BASE_RESULT)
    change(r)
    (tmp_path / "r.json").write_text(json.dumps(r).replace('"@NaN"', "NaN"))
    o = run(tmp_path, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "out.md")])
    assert o.code == 2 and needle in o.stderr, o.stderr
    assert len(o.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.md").exists()


def test_report_on_non_utf8(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_bytes(b"\xff\xfe{}")
    o = run(tmp_path, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "out.md")])
    assert o.code == 2 and "not UTF-8" in o.stderr


def test_atomic_write_leaves_no_partial_file(tmp_path: Path) -> None:
    from exactattn.core.jsonio import write_text_atomic

    target = tmp_path / "r.md"
    write_text_atomic(target, "old\n")

    class Boom(Exception):
        pass

    def bad_writer(tmp: Path) -> None:
        tmp.write_text("half")
        raise Boom

    from exactattn.core.jsonio import write_with

    with pytest.raises(Boom):
        write_with(target, bad_writer)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]


def test_error_messages_are_capped() -> None:
    from exactattn.core.errors import ModelError

    e = ModelError("x" * 100_000, "y" * 100_000, "z\nw")
    assert len(str(e)) <= 600 and "\n" not in str(e)


def test_click_usage_errors_are_capped(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps(BASE))
    o = run(tmp_path, ["check", str(p), "--max-n", "x" * 100_000])
    assert o.code == 2 and len(o.stderr) < 1000 and "--max-n" in o.stderr


def test_closed_forms_skip_infinite_and_clamp_negative_enclosures() -> None:
    """Fuzz finds: an ``inf`` end or a negative lower end used to crash ``report`` (exit 4)."""
    from exactattn.bounds.closedforms import closed_forms
    from exactattn.results.sequences import values_of_rows

    rows = copy.deepcopy(F.BASE_RESULT["lengths"])
    rows[4]["bounds"]["tau_theorem"]["upper"] = "inf"  # n = 5 bounds nothing above
    rows[3]["layers"][0]["error"] = {"lower": "inf", "upper": "inf"}
    rows[4]["tau_star"]["invariant"]["lower"] = "-1/2"  # a τ ≥ -1/2 says only τ ≥ 0
    cf = closed_forms(values_of_rows(rows))
    thm = cf["tau_theorem"]
    assert thm["open_at"] == [5] and thm["on"] == [2, 3, 4] and thm["shape"] == "n^(-3)"
    err = cf["error_layer_0"]
    assert err["open_at"] == [4] and err["on"] == [2, 3, 5] and err["exactly_zero_at"] == [1]
    inv = cf["tau_star_invariant"]
    assert inv["rests_on"]["5"] == {"lower": "0", "upper": "1/64"}
    assert inv["c_lower"] == "0" and inv["on"] == [2, 3, 4, 5]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["lengths"][4]["bounds"]["tau_theorem"].__setitem__("upper", "inf"),
        lambda r: r["lengths"][4]["tau_star"]["invariant"].__setitem__("lower", "-1/2"),
    ],
)
def test_report_with_odd_but_valid_enclosures(tmp_path: Path, change) -> None:
    r = copy.deepcopy(F.BASE_RESULT)
    change(r)
    (tmp_path / "r.json").write_text(json.dumps(r))
    undo = F.stub_figures()
    try:
        o = run(tmp_path, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "out.md")])
    finally:
        undo()
    assert o.code == 0, o.stderr
    assert (tmp_path / "out.md").exists()


def test_fit_sequence_with_far_apart_lengths() -> None:
    """n = 1, 2, 10^12 (a hand-made file): no list of the range (it crashed or ate memory)."""
    from exactattn.bounds.closedforms import fit_sequence

    rec = fit_sequence({1: Fraction(1), 2: Fraction(1), 3: Fraction(1), 10**12: Fraction(1)})
    assert rec["expression"] == "1"
