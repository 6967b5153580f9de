"""Findings of a user's audit (README and docs followed literally): each test fails without
its fix."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from paths import ROOT, TESTS

from exactattn.cli import main
from exactattn.constructions.induction import induction_formulas
from exactattn.logic.ltl import formula_depth
from exactattn.report import render

DATA = TESTS / "data" / "result_small.json"


def _code_spans(html: str) -> list[str]:
    return [
        c.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        for c in re.findall(r"<code>(.*?)</code>", html, re.S)
    ]


def test_markdown_pipe_in_names_is_shown_as_written(tmp_path: Path) -> None:
    """A '|' in a model or token name is escaped in table cells only: in the heading and the
    summary list a code span would show the backslash ("a\\|b")."""
    r = json.loads(DATA.read_text())
    r["model"] = "a|b"
    r["model_info"]["alphabet"] = ["|", "x"]
    md = render(r, tmp_path / "r.md")[tmp_path / "r.md"]
    html = MarkdownIt("commonmark").enable("table").render(md)
    heading = re.search(r"<h1>(.*?)</h1>", html).group(1)
    assert _code_spans(heading) == ["a|b"]
    summary = re.search(r"<ul>(.*?)</ul>", html, re.S).group(1)
    spans = _code_spans(summary)
    assert spans[:3] == ["a|b", "|", "x"], spans
    assert not any("\\" in s for s in spans), spans


def test_eval_piped_is_not_cut_to_80_columns() -> None:
    """`exactattn eval` into a pipe or file shows every coordinate name and value, like the
    check table (a width-80 console crushed Dyck-2's 19 coordinates into '…')."""
    out = CliRunner().invoke(main, ["eval", str(ROOT / "models" / "dyck2.json"), "([])"])
    assert out.exit_code == 0, out.output
    for name in ("depth_ratio", "any_bad", "match2", "inv_pos"):
        assert name in out.output
    assert "…" not in out.output
    assert "output (accept): hard y = 1 → accept; soft → accept" in out.output


def test_build_induction_refuses_what_it_cannot_build(tmp_path: Path) -> None:
    """`build induction` beyond the compiler's nesting or with a reference too big to list
    exits 2 with one line (it was exit 4: RecursionError, MemoryError)."""
    out = tmp_path / "m.json"
    big = ",".join(f"t{i}" for i in range(300))
    for args, needle in (
        (["--alphabet", "a,b", "--hops", "99"], "fewer hops"),
        (["--alphabet", "a,b", "--hops", "20"], "nested 102 operators deep"),
        (["--alphabet", big, "--max-n", "1"], "smaller alphabet"),
        (["--alphabet", ",".join(f"s{i}" for i in range(50)), "--max-n", "1"], "nested 103"),
        (["--alphabet", "a,b,c,d,e,f,g,h,i,j"], "lower --max-n"),
        (["--alphabet", "a,b", "--max-n", "1000000000"], "lower --max-n"),
    ):
        res = CliRunner().invoke(main, ["build", "induction", *args, "-o", str(out)])
        assert res.exit_code == 2, (args, res.output)
        assert needle in res.output and len(res.output.strip().splitlines()) == 1, res.output
        assert not out.exists()
    # the documented largest: 19 hops over two symbols stay within 100 (compiling them is slow)
    depth = max(map(formula_depth, induction_formulas(["a", "b"], 19).values()))
    assert depth == 97


def test_precision_table_rounds_upper_ends_up() -> None:
    """`precision`'s tables print upper ends: rounded up like check's table, never through a
    float (0.00141443 was shown as 0.00141, 1.03081e-6 as 1.03e-06, 3e-400 as 0)."""
    from exactattn.cli.extra import _short
    from exactattn.results.precision import Enclosure

    assert _short(Enclosure("0.00141442", "0.00141443")) == "1.42e-3"
    assert _short(Enclosure("0.0000010308", "0.00000103081")) == "1.04e-6"
    assert _short(Enclosure("0", "3e-400")) == "3e-400"
    assert _short(Enclosure("0", "2.5e-5000")) == "2.5e-5000"
    assert _short(Enclosure("0.0909127", "0.0909128")) == "9.1e-2"
    assert _short(Enclosure("0", "0")) == "0" and _short(Enclosure("1", "inf")) == "inf"


BAD_MODELS = [
    (lambda m: [m], "model"),
    (lambda m: m.update(d=True), "d"),
    (lambda m: m.update(d="4"), "d"),
    (lambda m: m.update(d="9/2"), "d"),
    (lambda m: m.update(d=-1), "d"),
    (lambda m: m.update(name=3), "name"),
    (lambda m: m.update(alphabet=[]), "alphabet"),
    (lambda m: m.update(layers={}), "layers"),
    (lambda m: m.update(layers=[3]), "layers[0]"),
    (lambda m: m["layers"][0].update(heads=[]), "layers[0].heads"),
    (lambda m: m["layers"][0]["heads"][0].update(hard=1), "layers[0].heads[0].hard"),
    (lambda m: m["layers"][0]["heads"][0].update(output=[[0]] * 3), "layers[0].heads[0].output"),
    (lambda m: m["embedding"]["token"].update(a="x"), "embedding.token.a"),
    (lambda m: m["embedding"].update(token=[1]), "embedding.token"),
    (lambda m: m["embedding"].update(position=7), "embedding.position"),
    (lambda m: m["embedding"].update(position=["0"]), "embedding.position"),
    (lambda m: m["embedding"].update(position=[0, 0, ["i"], 0]), "embedding.position[2]"),
    (lambda m: m.update(output=[]), "output"),
    (lambda m: m.update(reference=1), "reference"),
    (lambda m: m.update(reference={"kind": "cases", "cases": {}}), "reference.cases"),
    (lambda m: m.update(eos="<s>"), "eos"),
    (lambda m: m.update(coordinates=["x"]), "coordinates"),
    (lambda m: m.update(min_length=0), "min_length"),
]


def test_bad_model_errors_name_the_path_and_the_fix(tmp_path: Path) -> None:
    """README, exit code 2: one line `error: <JSON path>: … (fix: …)` (type errors, empty
    lists and a non-object file had no fix; the last had no path either)."""
    base = json.loads((ROOT / "exactattn" / "examples" / "mean_a_position.json").read_text())
    for k, (mutate, path) in enumerate(BAD_MODELS):
        m = json.loads(json.dumps(base))
        changed = mutate(m)
        f = tmp_path / f"m{k}.json"
        f.write_text(json.dumps(changed if isinstance(changed, list) else m))
        res = CliRunner().invoke(main, ["check", str(f), "--max-n", "2", "-q"])
        line = res.output.strip()
        assert res.exit_code == 2 and "\n" not in line, (k, res.output)
        assert re.fullmatch(rf"error: {re.escape(path)}: .+ \(fix: .+\)", line), (k, line)


def test_worked_example_table_is_what_the_named_command_prints() -> None:
    """docs/model-format.md's recomputed worked example: its enclosures are those of the
    command it names (`--arb-only`), and the default float filter's wider ones contain them
    (the table was printed without naming the option, and a plain run prints other bounds)."""
    from exactattn import load_model, run_check

    text = (ROOT / "docs" / "model-format.md").read_text("utf-8")
    section = text.split("### The worked example, recomputed exactly")[1].split("\nEvery other")[0]
    assert "--max-n 5 --arb-only`" in section
    rows = re.findall(r"^\| (\d) \| \d+ \| 1 \| 1 \| \[([0-9.]+), ([0-9.]+)\] \|", section, re.M)
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5]
    model = load_model(ROOT / "exactattn" / "examples" / "mean_a_position.json")
    arb = run_check(model, max_n=5, float_filter=False).to_json()["lengths"]
    flt = run_check(model, max_n=5).to_json()["lengths"]
    for (n, lo, hi), a, f in zip(rows, arb, flt, strict=True):
        assert a["layers"][0]["error"] == {"lower": lo, "upper": hi}, n
        fe = f["layers"][0]["error"]
        assert Fraction(fe["lower"]) <= Fraction(lo) and Fraction(hi) <= Fraction(fe["upper"])


def test_report_format_error_names_the_option(tmp_path: Path) -> None:
    """`report R.json -o out` (no suffix) says which option sets the format, and --help
    documents --format (it said "pass the format explicitly" and --help had no text)."""
    res = CliRunner().invoke(main, ["report", str(DATA), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and "--format md|tex" in res.output and "(fix: " in res.output
    assert not list(tmp_path.iterdir())
    res = CliRunner().invoke(main, ["report", "--help"])
    assert "Markdown or LaTeX (default: from the suffix of -o" in res.output
    res = CliRunner().invoke(
        main, ["report", str(DATA), "-o", str(tmp_path / "out"), "--format", "md"]
    )
    assert res.exit_code == 0 and (tmp_path / "out").read_text().startswith("# exactattn report")


def test_certify_names_the_stored_result_as_a_user_would_type_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """certify's `checked_in` is relative inside the working directory, else absolute (run
    from elsewhere it printed '../../…/reports/claims/dyck2.hard.json')."""
    from exactattn.cli.certify import _rel

    stored = ROOT / "reports" / "claims" / "dyck2.hard.json"
    monkeypatch.chdir(tmp_path)
    assert _rel(stored) == str(stored.resolve())
    monkeypatch.chdir(ROOT)
    assert _rel(stored) == "reports/claims/dyck2.hard.json"
    assert _rel(Path("reports/claims/dyck2.hard.json")) == "reports/claims/dyck2.hard.json"


def test_closed_stdout_pipe_is_no_finding(tmp_path: Path) -> None:
    """`exactattn check … --report R.md | head -1` on a clean model: rich's broken-pipe exit
    made it exit 1 ("problem found") before the report was written."""
    report = tmp_path / "r.md"
    cmd = [sys.executable, "-m", "exactattn", "check", str(ROOT / "models" / "dyck1.json")]
    proc = subprocess.Popen(
        [*cmd, "--max-n", "3", "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert "error" not in err.lower() and report.read_text().startswith("# exactattn report")


def test_unsafe_tex_report_name_is_refused_before_the_run(tmp_path: Path) -> None:
    """`check --report 'my rep.tex'` ran the whole check, then refused the name and removed
    the --json file too (exit 2 after the work); it is refused before any work now."""
    res = CliRunner().invoke(
        main,
        [
            "check",
            str(ROOT / "models" / "dyck1.json"),
            "--max-n",
            "2",
            "--json",
            str(tmp_path / "r.json"),
            "--report",
            str(tmp_path / "my rep.tex"),
        ],
    )
    assert res.exit_code == 2 and "name the .tex report with letters" in res.output
    assert "clean" not in res.output and "γ(n)" not in res.output  # before the run
    assert not list(tmp_path.iterdir())


def test_hard_only_says_bounds_and_find_tau_compute_nothing() -> None:
    """`--hard-only --bounds --find-tau` exited 0 with no bounds and no τ* and no word why."""
    args = ["check", str(ROOT / "models" / "dyck1.json"), "--max-n", "2", "-q", "--hard-only"]
    res = CliRunner().invoke(main, [*args, "--bounds", "--find-tau"])
    assert res.exit_code == 0
    assert "warning: --hard-only skips the soft meaning, so --bounds and --find-tau" in res.output
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "warning" not in res.output


def _markup_model(tmp_path: Path) -> Path:
    m = json.loads((ROOT / "exactattn" / "examples" / "mean_a_position.json").read_text())
    a, b = "[/]", "[b]"
    m["name"] = "[/] [bold]x[/bold] [link=http://e]y"
    m["alphabet"] = [a, b]
    tok = m["embedding"]["token"]
    m["embedding"]["token"] = {a: tok["a"], b: tok["b"], "<s>": tok["<s>"]}
    m["layers"][0]["name"] = "[/]L"
    m["layers"][0]["heads"][0]["name"] = "[/]H"
    m["coordinates"] = ["[/]", "[red]", "c", "d"]
    path = tmp_path / "markup.json"
    path.write_text(json.dumps(m))
    return path


def test_rich_markup_in_user_names_is_printed_literally(tmp_path: Path) -> None:
    """Names like '[/]' are printable (docs/limits.md) but were rich markup: check, eval and
    search crashed (MarkupError, exit 4) or dropped text (the estimate line showed ' x y')."""
    model = str(_markup_model(tmp_path))
    name = "[/] [bold]x[/bold] [link=http://e]y"
    out = tmp_path / "[/]r.json"
    res = CliRunner().invoke(main, ["check", model, "--max-n", "2", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert f"{name}: 6 inputs" in res.output and f"{name}  (τ = 1/n)" in res.output
    res = CliRunner().invoke(main, ["eval", model, "[/] [b]"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{name} on [/] [b]  (n = 2")
    assert "[red]" in res.output and "1:[/]" in res.output and "[/]H" in res.output
    res = CliRunner().invoke(main, ["search", model, "--n", "2", "--objective", "margin"])
    assert res.exit_code == 0 and res.output.startswith(f"{name} n = 2"), res.output
    res = CliRunner().invoke(main, ["report", str(out), "-o", str(tmp_path / "[/]r.md")])
    assert res.exit_code == 0 and "wrote " + str(tmp_path / "[/]r.md") in res.output


def test_eval_prints_argmax_labels() -> None:
    """The hard argmax output '[none, none, b, a]' was read as a markup tag and vanished."""
    res = CliRunner().invoke(main, ["eval", str(ROOT / "models" / "induction_k1.json"), "abab"])
    assert res.exit_code == 0
    assert "output (argmax): hard [none, none, b, a]\n   soft [none, none, b, a]" in res.output


def test_docs_name_only_cli_options_that_exist() -> None:
    """docs/dyck.md said the CLI has no `--scale` option while `build dyck --scale unit`
    exists (README shows it): every `build dyck` option the docs name is in its --help, and no
    page says an existing option is missing."""
    helptext = CliRunner().invoke(main, ["build", "dyck", "--help"]).output
    assert "--scale" in helptext
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text("utf-8")
        for opt in re.findall(r"has no `(--[a-z-]+)", text):
            assert opt not in helptext, (page.name, opt)
        for line in re.findall(r"exactattn build dyck [^\n`|]*", text):
            for opt in re.findall(r"(--[a-z-]+)", line):
                assert opt in helptext, (page.name, line)


def test_report_of_a_file_it_does_not_render_is_one_line_naming_the_format(
    tmp_path: Path,
) -> None:
    """`report` given a file it does not render (a model): one `error:` line naming the format
    found and the files it renders (it was click's three-line usage error, 'is not an
    exactattn-result/1 file'). A precision or search file is rendered since issue 40; a
    malformed one is one line naming the JSON path."""
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"format": "exactattn/1", "runs": []}))
    res = CliRunner().invoke(main, ["report", str(f), "-o", str(tmp_path / "x.md")])
    line = res.output.strip()
    assert res.exit_code == 2 and "\n" not in line, res.output
    assert line.startswith(f"error: {f}: format: the file has format 'exactattn/1'")
    assert "precision (exactattn-precision/1) and search (exactattn-search/1)" in line
    assert "(fix: give the --json file of one of these commands)" in line
    f.write_text(json.dumps({"format": "exactattn-precision/1", "runs": []}))
    res = CliRunner().invoke(main, ["report", str(f), "-o", str(tmp_path / "x.md")])
    line = res.output.strip()
    assert res.exit_code == 2 and "\n" not in line, res.output
    assert line.startswith("error: model: expected a string, got None (fix: regenerate")
    assert not (tmp_path / "x.md").exists()


def test_precision_inputs_file_without_inputs_is_refused(tmp_path: Path) -> None:
    """`precision --inputs EMPTY` answered "no flip at the lengths run" with exit 0 over zero
    inputs (the empty --max-n range was already refused, docs/limits.md)."""
    empty = tmp_path / "in.txt"
    empty.write_text("\n  \n")
    out = tmp_path / "p.json"
    args = ["precision", str(ROOT / "models" / "dyck1.json"), "--dtype", "float32"]
    res = CliRunner().invoke(main, [*args, "--inputs", str(empty), "--json", str(out)])
    assert res.exit_code == 2 and "no input (every line is empty)" in res.output
    assert not out.exists()
    empty.write_text("(x)\n")
    res = CliRunner().invoke(main, [*args, "--inputs", str(empty)])
    assert res.exit_code == 2 and "(fix: inputs use the alphabet: (, ))" in res.output


def test_check_report_of_a_model_with_weights_near_1e300(tmp_path: Path) -> None:
    """A weight of 1e300 gives γ(n) = 10^300, a 301-digit closed-form constant: `exactattn
    report` refused the result `check` had just written (closed_forms.gamma.form.num[0]: at
    most 200 characters, 'regenerate the file with `exactattn check --json`')."""
    m = json.loads((ROOT / "exactattn" / "examples" / "mean_a_position.json").read_text())
    m["embedding"]["token"]["a"] = ["1e300", 1, 0, 0]
    model = tmp_path / "m.json"
    model.write_text(json.dumps(m))
    out, rep = tmp_path / "r.json", tmp_path / "r.tex"
    args = ["check", str(model), "--max-n", "4", "-q", "--json", str(out), "--report", str(rep)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    gamma = json.loads(out.read_text())["closed_forms"]["gamma"]
    assert gamma["form"]["num"] == [str(10**300)] and gamma["verified_on"] == [2, 3, 4]
    assert "10^{300}" in rep.read_text() or str(10**300) in rep.read_text()
    res = CliRunner().invoke(main, ["report", str(out), "-o", str(tmp_path / "again.tex")])
    assert res.exit_code == 0, res.output
    again = (tmp_path / "again.tex").read_text()
    assert again == rep.read_text().replace("{r-", "{again-")
    if shutil.which("pdflatex"):
        run = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", rep.name],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout[-2000:]


def test_every_option_has_help_text() -> None:
    """`--help` of every command explains every option (23 options had none: -o of the
    builders, report and export, search --objective/--beam/--json, precision --inputs, …)."""
    import click

    missing = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
            return
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden and not p.help:
                missing.append(f"{' '.join(path)} {p.opts[-1]}")

    walk(main, [])
    assert missing == []


def test_build_into_a_closed_pipe_says_so() -> None:
    """`exactattn build … | head -c 10`: the message blamed a file ('cannot use the file:
    Broken pipe (fix: check the path and its permissions)')."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "exactattn", "build", "dyck", "--pairs", "()", "[]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 2
    assert err == (
        "error: stdout: the reader closed the pipe before the output ended (fix: read the "
        "whole output, or write it to a file with -o)\n"
    )


def test_markdown_strikethrough_and_math_in_names_are_literal(tmp_path: Path) -> None:
    """A model named 'a ~~b~~ $x$' rendered b struck through on GitHub (GFM strikethrough) and
    $x$ as math: '~' and '$' are escaped like the other Markdown specials."""
    r = json.loads(DATA.read_text())
    r["model_info"]["output"] = "a ~~b~~ $x$"  # printed as plain text (not a code span)
    md = render(r, tmp_path / "r.md")[tmp_path / "r.md"]
    assert "a \\~\\~b\\~\\~ \\$x\\$" in md
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    assert "<s>" not in html and "a ~~b~~ $x$" in html


def test_error_figure_of_a_deep_model_keeps_its_legend(tmp_path: Path) -> None:
    """A 17-layer model (compiled RASP Dyck-2): the legend below the axes did not fit, matplotlib
    warned 'Tight layout not applied' on stderr and the saved figure cut the legend off."""
    import struct
    import warnings

    from exactattn.report import write_report

    result = json.loads((ROOT / "reports" / "rasp" / "rasp_dyck2-max-n-9.json").read_text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = write_report(result, tmp_path / "r.md")
    assert not [w for w in caught if "ight layout" in str(w.message)]
    png = next(f for f in files if f.name == "r-error.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert width == 750 and height > 800, (width, height)  # 5 × 3.4 in at 150 dpi, grown


def test_max_length_error_fits_every_command(tmp_path: Path) -> None:
    """`eval` of a too-long input said '(fix: use --max-n 3 or less)', an option eval has not."""
    m = json.loads((ROOT / "exactattn" / "examples" / "mean_a_position.json").read_text())
    m["max_length"] = 3
    f = tmp_path / "m.json"
    f.write_text(json.dumps(m))
    res = CliRunner().invoke(main, ["eval", str(f), "aaaa"])
    assert res.exit_code == 2
    assert res.output == (
        "error: max_length: the model supports n <= 3, asked for n = 4 (fix: use n <= 3: lower "
        "--max-n or --n, or shorten the input)\n"
    )


def test_unusable_report_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    """`check --json r.json --report FILE/r.md` ran every length, then failed to write the
    report (exit 2) and removed r.json: the run was lost. The directory is checked first."""
    (tmp_path / "f").write_text("")
    out = tmp_path / "r.json"
    args = ["check", str(ROOT / "models" / "dyck1.json"), "--max-n", "2", "--json", str(out)]
    res = CliRunner().invoke(main, [*args, "--report", str(tmp_path / "f" / "r.md")])
    assert res.exit_code == 2 and "cannot write under" in res.output, res.output
    assert "γ(n)" not in res.output and not out.exists()
    res = CliRunner().invoke(main, [*args, "-q", "--report", str(tmp_path / "new" / "r.md")])
    assert res.exit_code == 0 and (tmp_path / "new" / "r.md").exists()


def test_tau_theorem_where_there_is_no_theorem_mode() -> None:
    """eval, search and precision read `--tau theorem` as an expression: 'bad expression
    'theorem': unknown name 'theorem'' did not say what to do."""
    model = str(ROOT / "models" / "dyck1.json")
    for args in (
        ["eval", model, "()"],
        ["search", model, "--n", "3", "--objective", "error"],
        ["precision", model, "--max-n", "2"],
    ):
        res = CliRunner().invoke(main, [*args, "--tau", "theorem"])
        assert res.exit_code == 2, (args, res.output)
        assert "--tau theorem: this command has no theorem mode" in res.output
        assert "`exactattn check --max-n N --bounds` or `exactattn certify`" in res.output


def test_latex_typesets_greek_token_names(tmp_path: Path) -> None:
    """Alphabets like {σ, Δ} (common in formal-language papers) were typeset [U+03C3] and
    [U+0394] in the LaTeX report; they are Greek letters now, and unknown characters stay
    code points."""
    r = json.loads(DATA.read_text())
    r["model"] = "αβ-ο"
    r["model_info"]["alphabet"] = ["σ", "Δ"]
    tex = render(r, tmp_path / "r.tex")[tmp_path / "r.tex"]
    assert r"\texttt{$\sigma$}, \texttt{$\Delta$}" in tex
    assert r"$\alpha$$\beta$-[U+03BF]" in tex and "[U+03C3]" not in tex
    if shutil.which("pdflatex"):
        from exactattn.report import write_report

        write_report(r, tmp_path / "r.tex")
        run = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout[-2000:]
