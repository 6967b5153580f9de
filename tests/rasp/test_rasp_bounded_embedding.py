"""``exactattn build rasp --embedding bounded`` (issue 36): every bundled program compiled with
embeddings and activations bounded by a constant, integers held as k/(n+1).

Hand-derived values (proofs/rasp-gaps.md, Lemmas RB1–RB6; proofs/claims.md, Proposition RB):
the count lookup's gap at the last query is 1/((n+1)·(n+1)²), so every program with a prefix
sum has γ(n) = 1/(n+1)³ exactly; a program with Boolean selects only keeps 1/(n+1); the
embedding's largest entry is 1 (the ``one`` coordinate) and so is every activation (Booleans
and counts/(n+1) ≤ 1). The hard meaning is compared with the interpreter on every input up to
n = 8 by ``check`` and, independently of the engine, by a plain Fraction forward pass below.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from fractions import Fraction

import pytest
from paths import ROOT

from exactattn import run_check
from exactattn.certificate.certify import certificate, certify_range
from exactattn.constructions.rasp_claims import activation_bound_scaled, x_max_bound
from exactattn.constructions.rasp_compile import compile_program
from exactattn.constructions.rasp_gap import bound_at
from exactattn.core.errors import ModelError
from exactattn.model import model_from_dict
from exactattn.model.expr import parse_expression
from exactattn.rasp import parse_program, run

SOURCES = ROOT / "models" / "rasp"
STEMS = sorted(p.stem for p in SOURCES.glob("*.rasp"))
# the programs whose only heads are Boolean selects keep the unbounded rate
BOOLEAN_ONLY = {"firstlast", "rotate"}


def _prog(stem: str):
    return parse_program((SOURCES / f"{stem}.rasp").read_text(encoding="utf-8"), stem)


def _bounded(stem: str):
    return compile_program(_prog(stem), "bounded")


def _words(alphabet, max_n):
    for n in range(1, max_n + 1):
        yield from itertools.product(alphabet, repeat=n)


def _expected(prog, word) -> object:
    """The interpreter's output in the model's terms (an integer k shown as k/(n+1))."""
    out = run(prog, word)
    if prog.output.kind == "accept":
        return out
    if out and isinstance(out[0], bool):
        return ["1" if b else "0" for b in out]
    return [Fraction(v, len(word) + 1) for v in out]


# -- an independent evaluator: the format-1 hard meaning in plain Fractions ----------------------


Sparse = list[list[tuple[int, Fraction]]]


def _sparse(mat: list[list[object]]) -> Sparse:
    return [[(k, Fraction(a)) for k, a in enumerate(row) if Fraction(a)] for row in mat]


def _mv(mat: Sparse, x: list[Fraction]) -> list[Fraction]:
    return [sum((a * x[k] for k, a in row), Fraction(0)) for row in mat]


def _dot(a: list[Fraction], b: list[Fraction]) -> Fraction:
    return sum((u * v for u, v in zip(a, b, strict=True)), Fraction(0))


VISIBLE = {
    "none": lambda p, j: True,
    "leq": lambda p, j: j <= p,
    "lt": lambda p, j: j < p,
    "geq": lambda p, j: j >= p,
    "gt": lambda p, j: j > p,
}


class _Forward:
    """The format-1 hard meaning in plain Fractions, written from docs/model-format.md alone
    (no engine code): BOS at position 0, scores (Q x_p)·(K x_j) over the mask's keys,
    leftmost/rightmost/average on the argmax set, an empty key set adds 0, an FFN adds
    W₂ ReLU(W₁x + b₁) + b₂, every layer's output is added to the residual stream."""

    def __init__(self, model: dict) -> None:
        self.m = model
        self.pos = [parse_expression(e, ("i", "n")) for e in model["embedding"]["position"]]
        self.layers = []
        for layer in model["layers"]:
            if layer["kind"] == "attention":
                heads = [
                    (
                        _sparse(h["query"]),
                        _sparse(h["key"]),
                        _sparse(h["value"]),
                        _sparse(h["output"]),
                        h["mask"],
                        h.get("hard", "average"),
                    )
                    for h in layer["heads"]
                ]
                self.layers.append(("attention", heads))
            else:
                hidden = [
                    (_sparse(hl["weight"]), [Fraction(b) for b in hl["bias"]])
                    for hl in layer["hidden"]
                ]
                out = (
                    _sparse(layer["output"]["weight"]),
                    [Fraction(b) for b in layer["output"]["bias"]],
                )
                self.layers.append(("ffn", (hidden, out)))

    def __call__(self, word: tuple[str, ...]) -> tuple[object, Fraction, Fraction]:
        """(output, max |residual entry| over every layer, max |FFN hidden unit|)."""
        m = self.m
        n = len(word)
        toks = [m["bos"], *word]
        xs = [
            [
                Fraction(t) + e.eval_exact({"i": i, "n": n})
                for t, e in zip(m["embedding"]["token"][tok], self.pos, strict=True)
            ]
            for i, tok in enumerate(toks)
        ]
        act = max(abs(v) for x in xs for v in x)
        hid = Fraction(0)
        for kind, body in self.layers:
            adds = [[Fraction(0)] * len(x) for x in xs]
            if kind == "attention":
                for Q, K, V, O, mask, rule in body:
                    qs = [_mv(Q, x) for x in xs]
                    ks = [_mv(K, x) for x in xs]
                    vs = [_mv(V, x) for x in xs]
                    for p in range(len(xs)):
                        keys = [j for j in range(len(xs)) if VISIBLE[mask](p, j)]
                        if not keys:
                            continue
                        s = {j: _dot(qs[p], ks[j]) for j in keys}
                        top = [j for j in keys if s[j] == max(s.values())]
                        chosen = (
                            [min(top)]
                            if rule == "leftmost"
                            else [max(top)]
                            if rule == "rightmost"
                            else top
                        )
                        v = [
                            sum((vs[j][r] for j in chosen), Fraction(0)) / len(chosen)
                            for r in range(len(V))
                        ]
                        adds[p] = [a + b for a, b in zip(adds[p], _mv(O, v), strict=True)]
            else:
                hidden, (W2, b2) = body
                for p, x in enumerate(xs):
                    h = x
                    for W1, b1 in hidden:
                        h = [max(Fraction(0), u + b) for u, b in zip(_mv(W1, h), b1, strict=True)]
                        hid = max([hid, *(abs(u) for u in h)])
                    adds[p] = [o + b for o, b in zip(_mv(W2, h), b2, strict=True)]
            xs = [[a + b for a, b in zip(x, d, strict=True)] for x, d in zip(xs, adds, strict=True)]
            act = max([act, *(abs(v) for x in xs for v in x)])
        o = m["output"]
        if o["kind"] == "accept":
            y = _dot([Fraction(w) for w in o["weight"]], xs[n]) + Fraction(o["bias"])
            return y > Fraction(o["threshold"]), act, hid
        if o["kind"] == "argmax":
            result = []
            for x in xs[1:]:
                logits = [
                    Fraction(b) + _dot([Fraction(w) for w in r], x)
                    for r, b in zip(o["weight"], o["bias"], strict=True)
                ]
                result.append(o["labels"][logits.index(max(logits))])
            return result, act, hid
        w = [Fraction(v) for v in o["weight"][0]]
        return [_dot(w, x) + Fraction(o["bias"][0]) for x in xs[1:]], act, hid


@pytest.mark.parametrize("stem", STEMS)
def test_independent_forward_pass_equals_the_interpreter_and_stays_bounded(stem):
    """Every input up to n = 4 (Dyck-2's four letters: n = 3)."""
    prog = _prog(stem)
    model = _bounded(stem).model
    forward = _Forward(model)
    # the hidden units are ReLU(W₁x + b₁) with |x| ≤ 1: at most Σ|W₁| + |b₁| per unit
    hid_cap = max(
        sum(abs(Fraction(w)) for w in row) + abs(Fraction(b))
        for layer in model["layers"]
        if layer["kind"] == "ffn"
        for hl in layer["hidden"]
        for row, b in zip(hl["weight"], hl["bias"], strict=True)
    )
    for w in _words(prog.alphabet, 3 if stem == "dyck2" else 4):
        got, act, hid = forward(w)
        assert got == _expected(prog, w), (stem, w)
        assert act <= 1, (stem, w, act)  # Proposition RB(e): the claim is 1
        assert hid <= hid_cap, (stem, w, hid)


# -- check: hard meaning, γ, claims, activations at n = 1..8 --------------------------------------


_CHECKS: dict[str, dict] = {}
# Dyck-2 at n = 8 is 87,380 words (~50 s of CPU): the slow run; n ≤ 7 by default
MAX_N = {"dyck2": 7}


def _check8(stem: str) -> dict:
    if stem not in _CHECKS:
        model = model_from_dict(_bounded(stem).model)
        _CHECKS[stem] = run_check(model, max_n=MAX_N.get(stem, 8), hard_only=True).to_json()
    return _CHECKS[stem]


@pytest.mark.parametrize("stem", STEMS)
def test_bounded_hard_meaning_equals_interpreter_and_every_bound_holds(stem):
    """Every input up to n = 8 (Dyck-2: n = 7; n = 8 in the slow run): 0 reference mismatches,
    γ(n) and every head's gap ≥ the compiler's bounds, every claim held, activations exactly 1."""
    _assert_bounded_check(stem, _check8(stem))


def _assert_bounded_check(stem: str, res: dict) -> None:
    compiled = _bounded(stem)
    k = len(compiled.model["alphabet"])
    assert res["verdict"]["status"] == "clean"
    for rec in res["lengths"]:
        n = rec["n"]
        assert rec["reference_mismatches"]["hard"] == 0, (stem, n, rec["first_reference_mismatch"])
        assert rec["reference_compared"] == k**n
        assert Fraction(rec["gamma"]) >= bound_at(compiled.gap_bound, n), (stem, n)
        for h in compiled.heads:
            g = rec["layers"][h.layer]["heads"][h.head]["gamma"]
            b = bound_at(h.bound, n)
            if g is not None and b is not None:
                assert Fraction(g) >= b, (stem, n, h)
        assert rec["compiler_gap_bound"]["holds"], (stem, n)
        cl = rec["claims"]
        assert cl["violations"] == 0 and cl["undecided"] == 0, (stem, n, cl)
        items = cl["claims"]
        # the embedding's largest entry (`one`) and the largest activation: exactly 1 at every n
        assert items["x_max_upper"] == {"claim": "1", "measured": "1", "status": "holds"}
        assert items["activation_upper"] == {"claim": "1", "measured": "1", "status": "holds"}
        assert rec["x_max"] == "1"


@pytest.mark.parametrize("stem", STEMS)
def test_measured_gamma_is_the_hand_derived_rate(stem):
    """1/(n+1)³ for every program with a prefix sum or an integer equality (the count lookup
    at the last query: keys c and c ± 1, 1/((n+1)(n+1)²) apart); the Boolean-only programs keep
    the select's 1/(n+1) (rotate: 3/2 at n = 1, one key each side of a tie-break)."""
    res = _check8(stem)
    got = [Fraction(r["gamma"]) for r in res["lengths"]]
    if stem in BOOLEAN_ONLY:
        want = [Fraction(1, n + 1) for n in range(1, 9)]
        if stem == "rotate":
            want[0] = Fraction(3, 2)
        assert got == want
        assert _bounded(stem).gap_bound == "1/(n + 1)"
    elif stem == "reverse":  # `pos[j] == n + 1 - pos`: the select's gap is n/(n+1)³
        # n = 1: the compare heads' 1/(n+1) (the select's levels are 9/8 apart)
        assert got == [Fraction(1, 2)] + [Fraction(n, (n + 1) ** 3) for n in range(2, 9)]
    else:
        assert got == [Fraction(1, (n + 1) ** 3) for n in range(1, len(got) + 1)]
        assert res["closed_forms"]["gamma"]["form"] == {
            "kind": "rational",
            "num": ["1"],
            "den": ["1", "3", "3", "1"],
        }


def test_embedding_entries_are_bounded_at_every_n():
    """Every position expression lies in [0, 1] at i = 0..n, n = 1..64; token entries are 0/1."""
    for stem in STEMS:
        m = _bounded(stem).model
        exprs = [parse_expression(e, ("i", "n")) for e in m["embedding"]["position"]]
        for n in range(1, 65):
            for i in range(n + 1):
                for e in exprs:
                    assert 0 <= e.eval_exact({"i": i, "n": n}) <= 1
        for row in m["embedding"]["token"].values():
            assert set(row) <= {0, 1}
        assert x_max_bound([e for e in m["embedding"]["position"] if e != "0"]) == "1"


# -- claims and certify ---------------------------------------------------------------------------


def test_every_bounded_model_has_constant_claims():
    for stem in STEMS:
        c = _bounded(stem)
        cl = c.model["claims"]
        want = "1/(n + 1)" if stem in BOOLEAN_ONLY else "1/(n + 1)^3"
        assert c.gap_bound == want and cl["gamma_lower"]["expr"] == want
        assert cl["x_max_upper"]["expr"] == "1" and cl["activation_upper"]["expr"] == "1"
        assert ("margin_lower" in cl) == (stem != "count")
        assert ("unique_top" in cl) == (stem not in ("count", "majority"))
        for v in cl.values():
            if isinstance(v, dict):
                assert v["justification"]["statement"].startswith("Proposition RB(")
        assert c.model["temperature"] == (
            "1/(8*(n+1)*log(n+2))" if stem in BOOLEAN_ONLY else "1/(8*(n+1)^3*log(n+2))"
        )


def test_activation_bound_scaled_by_hand():
    """|k/(n+1)| ≤ (a·n + b)/(n+1) ≤ max(a, b); at least 1 (the Booleans)."""
    assert activation_bound_scaled([]) == "1"
    assert activation_bound_scaled([((0, 0), (1, 0)), ((-1, 0), (1, 0))]) == "1"
    assert activation_bound_scaled([((-2, 0), (1, 3))]) == "3"
    assert activation_bound_scaled([((0, -5), (0, 0))]) == "5"


def test_bounded_dyck2_is_certified_with_constant_x_and_activations():
    m = model_from_dict(_bounded("dyck2").model)
    c = certificate(m, 65536, "theorem").to_json()
    assert c["status"] == "certified" and c["conditional_on"] == []
    assert c["claims_at_n"] == {
        "gamma_lower": f"1/{65537**3}",
        "x_max_upper": "1",
        "margin_lower": "1/2",
    }
    assert c["constants"]["X"] == "1"
    steps = {s["step"]: s["proved_in"] for s in c["proof_chain"]}
    assert steps["claim gamma_lower"].startswith("proofs/claims.md, Proposition RB(a)")
    r = certify_range(m, 1, 100, "theorem")
    assert r["first_failure"] is None and r["certified_through"] == 100


def test_soft_meaning_of_bounded_dyck2_at_its_own_tau_small_n():
    res = run_check(model_from_dict(_bounded("dyck2").model), max_n=4).to_json()
    assert res["verdict"]["status"] == "clean"
    for rec in res["lengths"]:
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert rec["invariant"] == "holds"


# -- the integer output: k shown as k/(n+1) -------------------------------------------------------


def test_integer_output_is_scaled_and_the_reference_says_so():
    m = _bounded("count").model
    assert m["reference"]["output_scale"] == "1/(n+1)"
    assert "output_scale" not in compile_program(_prog("count")).model["reference"]
    res = run_check(model_from_dict(m), max_n=4, hard_only=True).to_json()
    assert all(r["reference_mismatches"]["hard"] == 0 for r in res["lengths"])
    # without the scale the oracle expects the integers themselves: every input but a's-free
    # ones differs
    d = json.loads(json.dumps(m))
    del d["reference"]["output_scale"]
    res = run_check(model_from_dict(d), max_n=2, hard_only=True).to_json()
    assert [r["reference_mismatches"]["hard"] for r in res["lengths"]] == [1, 3]


@pytest.mark.parametrize(
    ("stem", "scale", "what"),
    [
        ("dyck2", "1/(n+1)", "applies only to an integer output"),
        ("rotate", "1/(n+1)", "applies only to an integer output"),
        ("count", "1/(n+", "reference.output_scale"),
        ("count", 3, "reference.output_scale"),
    ],
)
def test_a_bad_output_scale_names_its_path(stem, scale, what):
    d = _bounded(stem).model
    d["reference"]["output_scale"] = scale
    with pytest.raises(ModelError) as exc:
        model_from_dict(d)
    assert str(exc.value).startswith("reference.output_scale") and what in str(exc.value)


# -- the CLI ---------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "exactattn", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )


def test_build_rasp_embedding_bounded_writes_the_bundled_model(tmp_path):
    out = tmp_path / "M.json"
    proc = _cli(
        "build", "rasp", str(SOURCES / "dyck2.rasp"), "--embedding", "bounded", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == json.loads(
        (ROOT / "models" / "rasp_dyck2_bounded.json").read_text()
    )
    assert "count-lookup, gap ≥ 1/(n + 1)^3" in proc.stderr
    assert "compare, gap ≥ 1/(n + 1)" in proc.stderr
    # the accept line's `depth == 0` is two compare heads, named by that line
    assert proc.stderr.count("line 20 (output), compare, gap ≥ 1/(n + 1)") == 2
    assert "gap bound γ(n) ≥ 1/(n + 1)^3" in proc.stderr
    # the default is today's compilation, byte for byte
    out2 = tmp_path / "U.json"
    proc = _cli(
        "build", "rasp", str(SOURCES / "dyck2.rasp"), "--embedding", "unbounded", "-o", str(out2)
    )
    assert proc.returncode == 0, proc.stderr
    assert out2.read_bytes() == (ROOT / "models" / "rasp_dyck2.json").read_bytes()
    bad = _cli("build", "rasp", str(SOURCES / "dyck2.rasp"), "--embedding", "unit")
    assert bad.returncode == 2 and "--embedding" in bad.stderr


def test_compile_program_refuses_an_unknown_embedding():
    with pytest.raises(ValueError, match="embedding 'unit'"):
        compile_program(_prog("count"), "unit")


@pytest.mark.slow
def test_bounded_dyck2_hard_meaning_and_activations_n8():
    res = run_check(model_from_dict(_bounded("dyck2").model), max_n=8, hard_only=True).to_json()
    _assert_bounded_check("dyck2", res)
    assert res["lengths"][-1]["gamma"] == "1/729"


@pytest.mark.slow
def test_check_bounded_dyck2_max_n_8_is_clean_at_its_own_tau(tmp_path):
    out = tmp_path / "r.json"
    proc = _cli(
        "check", "models/rasp_dyck2_bounded.json", "--max-n", "8", "--jobs", "2", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    for rec in res["lengths"]:
        assert rec["reference_mismatches"] == {"hard": 0, "soft": 0}
        assert Fraction(rec["gamma"]) == Fraction(1, (rec["n"] + 1) ** 3)
