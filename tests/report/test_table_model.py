"""One table model (report/table.py) rendered to Markdown and LaTeX: escaping in one place,
the same rows in both formats."""

from __future__ import annotations

import json

from paths import ROOT

from exactattn.report import table as T
from exactattn.report.data import load
from exactattn.report.fmt import rational
from exactattn.report.latex import render_fragment

HOSTILE = "a|b`c\\input{/etc/passwd}$_%&#~^<x>*[l](u)\n"


def test_a_hostile_cell_is_escaped_in_both_formats() -> None:
    t = T.Table(
        [
            T.Column(T.Lit("n", "$n$"), "r"),
            T.Column(T.Lit("name", "name")),
            T.Column(T.Lit("v", "v")),
        ],
        [
            [T.Text("1"), T.Text(HOSTILE), T.Value(rational("-3/4"))],
            [T.Text("2"), T.Code(HOSTILE), T.MISSING],
        ],
    )
    md = T.markdown(t)
    assert md[0] == "| n | name | v |" and md[1] == "|---:|---|---|"
    assert md[2] == (
        "| 1 | a\\|b\\`c\\\\input{/etc/passwd}\\$\\_%\\&\\#\\~^\\<x\\>\\*\\[l\\](u)\\\\n | -3/4 |"
    )
    assert md[3] == "| 2 | ``a\\|b`c\\input{/etc/passwd}$_%&#~^<x>*[l](u)\\n`` | — |"
    tex = T.latex(t)
    assert r"\begin{tabular}{rll}" in tex and r"$n$ & name & v \\" in tex
    row1 = next(line for line in tex if line.startswith("1 & "))
    assert row1 == (
        r"1 & a\textbar{}b`c\textbackslash{}input\{/etc/passwd\}\$\_\%\&\#\~{}\^{}"
        r"\textless{}x\textgreater{}*[l](u)[U+000A] & $-\tfrac{3}{4}$ \\"
    )
    row2 = next(line for line in tex if line.startswith("2 & "))
    assert r"\input" not in row2.replace(r"{\char92}input", "")  # no live control sequence
    assert row2.endswith(" & --- \\\\")


def test_groups_become_multicolumn_rows_in_latex_only() -> None:
    t = T.Table(
        [T.Column(T.Lit("n", "n"))] + [T.Column(T.Lit(f"c{i}", f"c{i}")) for i in range(3)],
        [[T.Text(str(i)) for i in range(4)]],
        groups=[T.Group(1, 2, T.rich(T.Lit("", "layer 0 ("), T.Text("a_b"), T.Lit("", ")")))],
    )
    tex = T.latex(t)
    assert r" & \multicolumn{2}{c}{layer 0 (a\_b)} &  \\" in tex
    assert r"\cmidrule(lr){2-3}" in tex
    assert T.markdown(t)[0] == "| n | c0 | c1 | c2 |"


def test_the_rasp_gap_bound_is_in_the_latex_report() -> None:
    result = json.loads(
        (ROOT / "tests" / "golden" / "layout" / "rasp_dyck1_n4_bounds.json").read_text("utf-8")
    )
    tex = render_fragment(load(result), [])
    assert r"\label{tab:exactattn-rasp-dyck1-compiler-gap}" in tex
    assert r"$n$ & measured $\gamma(n)$ & bound & status \\" in tex
    assert r"4 & \texttt{1/5} & \texttt{1/5} & holds \\" in tex
