"""Checks for proofs/rasp-compiler.md (Propositions C and CB: the RASP compiler is correct, with
unbounded and with bounded embeddings).

Unlike the other scripts, this one imports the compiler: each lemma is checked on the weights
`exactattn/constructions/rasp_compile.py` actually emits for a small program exercising one
primitive — so a change to a gadget's bias or a selector's weight fails here (mutation rows
RC1–RC9).

Run: PYTHONPATH=. python3 proofs/check_rasp_compiler.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import itertools
import sys
from fractions import Fraction
from pathlib import Path

import sympy as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository this script belongs to (mutation copies too)

from checklib import check, finish, ok  # noqa: E402

from exactattn.constructions.rasp_bundled import program_paths  # noqa: E402
from exactattn.constructions.rasp_compile import compile_program  # noqa: E402
from exactattn.rasp.ast import RaspError  # noqa: E402
from exactattn.rasp.parse import parse_program  # noqa: E402

n, i, j, b, c = sp.symbols("n i j b c", integer=True)
t, t1, t2 = sp.symbols("t t1 t2", integer=True, nonnegative=True)
ALPHA = 'alphabet "a" "b" "c"\n'
TA, TB, TC = 'token in {"a"}', 'token in {"b"}', 'token in {"c"}'
POSITION = {"pos": "i", "pos_sq": "i^2", "inv_pos": "1/(i+1)", "len": "n", "pos_frac": "i/(n+1)"}


def F(x: object) -> Fraction:
    """A model number (int or 'p/q' string) as a Fraction (no float, no sympify)."""
    return Fraction(x)  # type: ignore[arg-type]


class Model:
    """A compiled model read back by coordinate name."""

    def __init__(self, src: str, embedding: str = "unbounded") -> None:
        self.src = src
        self.m = compile_program(parse_program(src), embedding).model
        self.coords: list[str] = self.m["coordinates"]
        self.writer: dict[str, tuple[int, object]] = {}
        for li, layer in enumerate(self.m["layers"]):
            if layer["kind"] == "ffn":
                w2 = layer["output"]["weight"]
                for r, row in enumerate(w2):
                    if any(F(x) for x in row):
                        self.writer[self.coords[r]] = (li, layer)
            else:
                for h in layer["heads"]:
                    for r, row in enumerate(h["output"]):
                        if any(F(x) for x in row):
                            self.writer[self.coords[r]] = (li, h)

    def units(self, z: str) -> list[tuple[dict[str, Fraction], Fraction, Fraction]]:
        """The FFN units coordinate z is made of: (weights by coordinate, bias, out coef)."""
        _, layer = self.writer[z]
        assert isinstance(layer, dict) and layer["kind"] == "ffn"
        (hid,) = layer["hidden"]
        row = layer["output"]["weight"][self.coords.index(z)]
        out = []
        for k, coef in enumerate(row):
            if F(coef):
                w = {self.coords[a]: F(x) for a, x in enumerate(hid["weight"][k]) if F(x)}
                out.append((w, F(hid["bias"][k]), F(coef)))
        return out

    def head(self, z: str) -> dict:
        _, h = self.writer[z]
        assert isinstance(h, dict) and "query" in h
        return h

    def heads(self) -> list[dict]:
        return [
            h for layer in self.m["layers"] if layer["kind"] == "attention" for h in layer["heads"]
        ]

    def bilinear(self, h: dict) -> dict[tuple[str, str], Fraction]:
        """s_pj = Σ A[a, b]·x_p[a]·x_j[b] with A = Qᵀ K."""
        A: dict[tuple[str, str], Fraction] = {}
        for qr, kr in zip(h["query"], h["key"], strict=True):
            for a, qa in enumerate(qr):
                for bb, kb in enumerate(kr):
                    if F(qa) and F(kb):
                        key = (self.coords[a], self.coords[bb])
                        A[key] = A.get(key, Fraction(0)) + F(qa) * F(kb)
        return {k: v for k, v in A.items() if v}

    def values(self, h: dict) -> dict[str, dict[str, Fraction]]:
        """Output coordinate -> the combination of key coordinates it receives."""
        out: dict[str, dict[str, Fraction]] = {}
        for r, orow in enumerate(h["output"]):
            for m_, x in enumerate(orow):
                if F(x):
                    combo = {
                        self.coords[s]: F(x) * F(v) for s, v in enumerate(h["value"][m_]) if F(v)
                    }
                    out[self.coords[r]] = combo
        return out

    def readout(self) -> tuple[dict[str, Fraction], Fraction]:
        """The output's affine form y (accept / argmax label 1 / value)."""
        o = self.m["output"]
        if o["kind"] == "accept":
            w, bias = o["weight"], o["bias"]
        elif o["kind"] == "argmax":
            w, bias = o["weight"][1], o["bias"][1]
        else:
            w, bias = o["weight"][0], o["bias"][0]
        return {self.coords[k]: F(x) for k, x in enumerate(w) if F(x)}, F(bias)

    def output_coord(self) -> str:
        terms, const = self.readout()
        (z,) = terms
        return z


def relu_eval(units: list, env: dict[str, object]) -> sp.Expr:
    """Σ out·ReLU(w·x + bias) with symbolic inputs (sympy Max; decided when signs are known)."""
    tot = sp.Integer(0)
    for w, bias, coef in units:
        arg = sp.Rational(bias.numerator, bias.denominator)
        for cname, x in w.items():
            arg += sp.Rational(x.numerator, x.denominator) * env[cname]
        tot += sp.Rational(coef.numerator, coef.denominator) * sp.Max(0, sp.expand(arg))
    return sp.expand(tot)


def R(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


def form(terms: dict[str, Fraction], const: Fraction, env: dict[str, object]) -> sp.Expr:
    return sp.expand(R(const) + sum(R(v) * env[k] for k, v in terms.items()))


def decided(e: sp.Expr) -> bool:
    return not e.has(sp.Max) and not e.has(sp.Min)


# ---------------------------------------------------------------- C0: write-once residual stream
def write_once(mod: Model) -> bool:
    m = mod.m
    emb = {k for k, e in zip(mod.coords, m["embedding"]["position"], strict=True) if e != "0"} | {
        k
        for k in mod.coords
        if any(F(v[mod.coords.index(k)]) for v in m["embedding"]["token"].values())
    }
    ready = set(emb)
    for layer in m["layers"]:
        written: set[str] = set()
        if layer["kind"] == "ffn":
            if len(layer["hidden"]) != 1 or any(F(x) for x in layer["output"]["bias"]):
                return False
            reads = {
                mod.coords[a]
                for row in layer["hidden"][0]["weight"]
                for a, x in enumerate(row)
                if F(x)
            }
            written = {
                mod.coords[r]
                for r, row in enumerate(layer["output"]["weight"])
                if any(F(x) for x in row)
            }
        else:
            reads = set()
            for h in layer["heads"]:
                for mat in ("query", "key", "value"):
                    reads |= {mod.coords[a] for row in h[mat] for a, x in enumerate(row) if F(x)}
                for key in ("query_bias", "key_bias", "value_bias"):
                    if key in h:
                        return False
                w = {mod.coords[r] for r, row in enumerate(h["output"]) if any(F(x) for x in row)}
                if w & written:
                    return False
                written |= w
        if not reads <= ready or written & ready:
            return False
        ready |= written
    return True


PROGRAMS: list[str] = []


def M(src: str) -> Model:
    PROGRAMS.append(src)
    return Model(ALPHA + src)


# ---------------------------------------------------------------- C1: embedding
emb_model = M('output psum(int(token == "a")) + int(token != "b")')
mm = emb_model.m
check(mm.get("bos") not in mm["alphabet"], "C1 the BOS token is not an input symbol")
pos_exprs = dict(zip(emb_model.coords, mm["embedding"]["position"], strict=True))
for name, expr in POSITION.items():
    check(pos_exprs.get(name) == expr, f"C1 position embedding of {name} is {expr}")
check(all(e == "0" for k, e in pos_exprs.items() if k not in POSITION), "C1 other positions are 0")
tok = {
    t_: dict(zip(emb_model.coords, row, strict=True))
    for t_, row in mm["embedding"]["token"].items()
}
for t_, row in tok.items():
    is_bos = t_ == mm["bos"]
    check(F(row["one"]) == 1 and F(row["bos"]) == int(is_bos), f"C1 one/bos at token {t_}")
    for k, v in row.items():
        if k.startswith("token in"):
            want = 0 if is_bos else int(f'"{t_}"' in k)
            check(F(v) == want, f"C1 token test {k} at {t_}")
        elif k not in ("one", "bos"):
            check(F(v) == 0, f"C1 token entry {k} at {t_} is 0")
ok("C1: embedding — one, bos, token tests (0 at BOS), pos = i, i², 1/(i+1), n, i/(n+1)")

# ---------------------------------------------------------------- C2: affine forms
aff = M('output 2 * pos - n + 1 - (0 - 3) * int(token == "a") + -1 * int(not (token == "b"))')
terms, const = aff.readout()
qa, qb = sp.symbols("qa qb", integer=True)
env = {"pos": i, "len": n, TA: qa, TB: qb}
check(aff.m["output"]["kind"] == "value", "C2 integer output is a value read-out")
check(
    sp.expand(form(terms, const, env) - (2 * i - n + 1 + 3 * qa - (1 - qb))) == 0,
    "C2 affine lowering of + − literal· int not",
)
check(not aff.m["layers"], "C2 linear operations emit no layer")
ok("C2: +, −, literal·, unary −, int(·), not lower to affine forms with no layer")

# ---------------------------------------------------------------- C3: FFN gadgets
BOOL = {
    "ta and tb": (lambda x, y, z: x and y),
    "ta and tb and tc": (lambda x, y, z: x and y and z),
    "ta or tb or tc": (lambda x, y, z: x or y or z),
    "ta or tb": (lambda x, y, z: x or y),
    "ta != tb": (lambda x, y, z: x != y),
    "ta == tb": (lambda x, y, z: x == y),
    "if ta then tb else tc": (lambda x, y, z: y if x else z),
    "(ta and tb) or not tc": (lambda x, y, z: (x and y) or not z),
}
DEFS = 'bool ta = token == "a"\nbool tb = token == "b"\nbool tc = token == "c"\n'
for text, fn in BOOL.items():
    mod = M(DEFS + f"output {text}")
    z = mod.output_coord()
    terms, const = mod.readout()
    for bits in itertools.product((0, 1), repeat=3):
        env = dict(zip((TA, TB, TC), bits, strict=True))
        # evaluate every gadget the expression needs, in layer order
        for cname in mod.coords:
            if cname in mod.writer:
                env[cname] = relu_eval(mod.units(cname), env)
        got = form(terms, const, env)
        check(got == int(fn(*map(bool, bits))), f"C3 gadget {text} at {bits}: {got}")
ok("C3: Boolean gadgets (and/or of m terms, xor, xnor, ite, nested) exact on {0,1}³")

a_, b_ = sp.symbols("a_ b_", integer=True)
WIN = [*range(-3, 4)]
SIGN_CASES = [(d, (d > 0) - (d < 0)) for d in WIN] + [(4 + t, 1), (-4 - t, -1)]
CMP = {
    "==": lambda s: s == 0,
    "!=": lambda s: s != 0,
    "<": lambda s: s < 0,
    "<=": lambda s: s <= 0,
    ">": lambda s: s > 0,
    ">=": lambda s: s >= 0,
}
for op, fn in CMP.items():
    mod = M(f"output pos {op} n")
    units = mod.units(mod.output_coord())
    for d, s in SIGN_CASES:  # pos − n = d: every integer d, by its sign
        got = relu_eval(units, {"pos": b + d, "len": b})
        check(decided(got) and got == int(fn(s)), f"C3 integer gadget pos {op} n at d = {d}")
mod = M("output abs(pos - n)")
units = mod.units(mod.output_coord())
for d, _s in SIGN_CASES:
    got = relu_eval(units, {"pos": b + d, "len": b})
    check(decided(got) and sp.expand(got - sp.Abs(d)) == 0, f"C3 abs at d = {d}")
MINMAX_CASES = [  # (pos, len, min, max): a ≥ 0 or a ≤ −1, times a ≥ b or a < b
    (t1, t1 - t2, t1 - t2, t1),
    (t1, t1 + 1 + t2, t1, t1 + 1 + t2),
    (-1 - t1, -1 - t1 - t2, -1 - t1 - t2, -1 - t1),
    (-1 - t1, t2 - t1, -1 - t1, t2 - t1),
]
for fname, col in (("min", 2), ("max", 3)):
    mod = M(f"output {fname}(pos, n)")
    units = mod.units(mod.output_coord())
    for case in MINMAX_CASES:
        got = relu_eval(units, {"pos": case[0], "len": case[1]})
        check(decided(got) and sp.expand(got - case[col]) == 0, f"C3 {fname} on {case[:2]}")
ok("C3: integer gadgets ==, !=, <, <=, >, >=, abs, min, max exact on all of ℤ (sign cases)")

# ---------------------------------------------------------------- C4: prefix sums
cnt = M('output psum(int(token == "a") - int(token == "b") + 2)')
terms, const = cnt.readout()
check(const == 0 and terms.get("pos") == 2, "C4 psum: the literal contributes c₀·pos")
counted: dict[str, Fraction] = {}
for z, coef in terms.items():
    if z == "pos":
        continue
    look = cnt.head(z)
    check(look["mask"] == "leq" and look.get("hard", "average") == "average", "C4 lookup mask")
    A = cnt.bilinear(look)
    (share,) = [q for (q, k) in A if k == "pos"]
    check(A == {(share, "pos"): 2, ("inv_pos", "pos_sq"): -1}, f"C4 lookup score {A}")
    check(cnt.values(look) == {z: {"pos": 1}}, "C4 lookup reads pos")
    p = sp.Symbol("p", integer=True, nonnegative=True)
    env_q = {share: c / (p + 1), "inv_pos": 1 / (p + 1)}
    env_k = {"pos": j, "pos_sq": j**2}
    s = sum(R(v) * env_q[q] * env_k[k] for (q, k), v in A.items())
    check(sp.simplify(s - (c**2 - (c - j) ** 2) / (p + 1)) == 0, "C4 lookup score identity")
    check(sp.simplify(s.subs(j, c) - s - (c - j) ** 2 / (p + 1)) == 0, "C4 lookup gap (c−j)²/(p+1)")
    mean = cnt.head(share)
    check(not cnt.bilinear(mean), "C4 mean head: every score 0 (uniform)")
    check(mean["mask"] == "leq" and mean.get("hard", "average") == "average", "C4 mean mask")
    (nobos,) = cnt.values(mean)[share]
    check(cnt.values(mean) == {share: {nobos: 1}}, "C4 mean reads b′")
    units = cnt.units(nobos)
    (src,) = [k for k in units[0][0] if k != "bos"]
    for bb, bos in itertools.product((0, 1), repeat=2):
        got = relu_eval(units, {src: bb, "bos": bos})
        check(got == bb * (1 - bos), f"C4 b′ = b·(1 − bos) at {(bb, bos)}")
    counted[src] = coef
check(counted == {TA: 1, TB: -1}, f"C4 read-out Σ c_k count(b_k): {counted}")
ok(
    "C4: psum = Σ c_k·count(b_k) + c₀·pos; b′ = ReLU(b − bos); uniform mean; "
    "lookup (c² − (c − j)²)/(p+1)"
)


# ---------------------------------------------------------------- C6: select heads
Kc, Qc, qa = sp.symbols("Kc Qc qa", integer=True)
KEYSYMS = {j, Kc}


def select_head(mod: Model) -> dict:
    (h,) = [h for h in mod.heads() if h.get("hard") in ("leftmost", "rightmost")]
    return h


def sel_outputs(mod: Model, nk: int, ne: int) -> tuple[str, str, str, list[str], list[str]]:
    """The select head's outputs in creation order: one, bos, value, key atoms, keys K_m."""
    outs = list(mod.values(select_head(mod)))  # output rows in coordinate (= creation) order
    check(len(outs) == 3 + nk + ne, f"select outputs {outs}")
    kinds = ["sel_one", "sel_bos", "sel_value"] + ["sel_k"] * nk + ["sel_e"] * ne
    check(all(k in o for k, o in zip(kinds, outs, strict=True)), f"select output names {outs}")
    return outs[0], outs[1], outs[2], outs[3 : 3 + nk], outs[3 + nk :]


def check_select(
    label: str,
    mod: Model,
    *,
    choice: str,
    mask: str,
    qatoms: dict[str, int],  # query atom coordinate -> its coefficient (atoms are coordinates)
    katoms: list[tuple[dict[str, int], int]],  # each key atom's 0/1 form (coefficients, constant)
    f,  # f(*query bools, *key bools) -> bool: the Boolean part of `where`
    eqs: list[tuple[sp.Expr, dict[str, int]]],  # (Q at the query, K's form at the key)
    query_env: dict[str, sp.Expr],
    key_env: dict[str, sp.Expr],  # K's coordinates at the key and their squares
    value: dict[str, int],
) -> None:
    """Lemma C6 (★) on the emitted score, for every 0/1 value of the atoms and of bos_j."""
    h = select_head(mod)
    check(h["hard"] == choice and h["mask"] == mask, f"{label}: hard rule and mask")
    A = mod.bilinear(h)
    sigma = 1 if choice == "rightmost" else -1
    for qbits in itertools.product((0, 1), repeat=len(qatoms)):
        q_env = {"one": 1, "pos": i, "len": n, **query_env, **dict(zip(qatoms, qbits, strict=True))}
        consts = set()
        for kbits in itertools.product((0, 1), repeat=len(katoms) + 1):
            *kvals, bos = kbits
            k_env = {"one": 1, "bos": bos, "pos": j, "pos_sq": j**2, "pos_frac": j / (n + 1)}
            k_env.update(key_env)
            for (fm, k0), v in zip(katoms, kvals, strict=True):
                ((coord, coef),) = fm.items()  # the atom's value v on its coordinate
                k_env[coord] = sp.Rational(v - k0, coef)
            for side, k_ in ((q_env, 0), (k_env, 1)):  # products of atoms: `and` gadgets
                for z in {pair[k_] for pair in A} - set(side):
                    if z in mod.writer and mod.writer[z][1].get("kind") == "ffn":
                        side[z] = relu_eval(mod.units(z), side)
            try:
                s = sum(R(v) * q_env[q] * k_env[k] for (q, k), v in A.items())
            except KeyError as exc:
                check(False, f"{label}: score reads an unexpected coordinate {exc}")
                return
            want = (int(bool(f(*qbits, *kvals))) - 1) - bos + sigma * j / (n + 1)
            for Q, Kf in eqs:
                want -= (Q - sum(v * k_env[k] for k, v in Kf.items())) ** 2
            diff = sp.expand(s - want)
            check(not diff.free_symbols & KEYSYMS, f"{label}: score − (★) depends on j: {diff}")
            consts.add(diff)
        check(len(consts) == 1, f"{label}: (★) with one M(p) per query: {consts}")
    check(
        sp.simplify(1 - n / (n + 1) - sp.Rational(1) / (n + 1)) == 0 and abs(sigma) == 1,
        f"{label}: R1 gap 1 − n/(n+1) = 1/(n+1)",
    )
    vals = mod.values(h)
    one_c, bos_c, val_c, k_cs, e_cs = sel_outputs(mod, len(katoms), len(eqs))
    check(vals[one_c] == {"one": 1} and vals[bos_c] == {"bos": 1}, f"{label}: reads one, bos")
    check(vals[val_c] == {k: Fraction(v) for k, v in value.items()}, f"{label}: reads V")
    for kc_, (fm, k0) in zip(k_cs, katoms, strict=True):
        want_v = {k: Fraction(v) for k, v in fm.items()} | ({"one": Fraction(k0)} if k0 else {})
        check(vals[kc_] == want_v, f"{label}: key atom read at the key")
    for ec, (_Q, Kf) in zip(e_cs, eqs, strict=True):
        check(vals[ec] == {k: Fraction(v) for k, v in Kf.items()}, f"{label}: K read at the key")


s1 = M(
    'bool y = attend rightmost j < i where (token[j] == "a") == (token == "a") and '
    'token[j] != "c" value token[j] == "b" default token == "c"\noutput y'
)
check_select(
    "C6 mixed Boolean",
    s1,
    choice="rightmost",
    mask="lt",
    qatoms={TA: 1},
    katoms=[({TA: 1}, 0), ({TC: -1}, 1)],
    f=lambda q, k1, k2: (k1 == q) and k2,
    eqs=[],
    query_env={},
    key_env={},
    value={TB: 1},
)
s2 = M(
    "bool y = attend leftmost j where pos[j] == n + 1 - pos "
    'value token[j] == "a" default false\noutput y'
)
check_select(
    "C6 equality pos[j] == n + 1 − pos (K² from pos_sq)",
    s2,
    choice="leftmost",
    mask="none",
    qatoms={},
    katoms=[],
    f=lambda: True,
    eqs=[(n + 1 - i, {"pos": 1})],
    query_env={},
    key_env={},
    value={TA: 1},
)
s3 = M(
    'int c = psum(int(token == "a"))\n'
    'bool y = attend leftmost j >= i where c[j] == c and token[j] == "b" value true default false'
    "\noutput y"
)
A3 = s3.bilinear(select_head(s3))
(cc,) = {k for (q, k) in A3 if k.startswith("c.")}
(sq,) = {k for (q, k) in A3 if "square" in k}
check_select(
    "C6 equality c[j] == c (square lookup)",
    s3,
    choice="leftmost",
    mask="geq",
    qatoms={},
    katoms=[({TB: 1}, 0)],
    f=lambda k: bool(k),
    eqs=[(Qc, {cc: 1})],
    query_env={cc: Qc},
    key_env={cc: Kc, sq: Kc**2},
    value={"one": 1},
)
for text, want_mask in (
    ("", "none"),
    ("< i", "lt"),
    ("<= i", "leq"),
    ("> i", "gt"),
    (">= i", "geq"),
):
    for choice in ("leftmost", "rightmost"):
        mod = M(
            f'bool y = attend {choice} j {text} where token[j] == "a" '
            "value true default false\noutput y"
        )
        h = select_head(mod)
        check(h["mask"] == want_mask and h["hard"] == choice, f"C6 mask {text!r} {choice}")
ok("C6: select score = M(p) + (f − 1) − bos − Σ(Q − K)² ± j/(n+1) (★); reads one/bos/V/atoms/K")


def run_ffns_after(mod: Model, env: dict[str, object], after: int) -> dict[str, object]:
    """Evaluate every FFN layer after layer ``after`` (symbolic inputs allowed)."""
    for li, layer in enumerate(mod.m["layers"]):
        if li <= after or layer["kind"] != "ffn":
            continue
        for z in mod.coords:
            if z in mod.writer and mod.writer[z][0] == li:
                env[z] = relu_eval(mod.units(z), env)
    return env


def check_output(mod: Model, env: dict[str, object]) -> sp.Expr | None:
    """The read-out after the FFNs that follow the select head (None: a missing input)."""
    terms, const = mod.readout()
    try:
        return form(terms, const, run_ffns_after(mod, env, select_layer(mod)))
    except KeyError as exc:  # the check reads a coordinate the lemma does not give it
        check(False, f"C6 check FFN reads {exc}, not one of the head's outputs or the query's")
        return None


def select_layer(mod: Model) -> int:
    h = select_head(mod)
    layers = mod.m["layers"]
    return next(li for li, L in enumerate(layers) if L["kind"] == "attention" and h in L["heads"])


# the check after the head: y = ite(one ∧ ¬bos ∧ f(q, k_sel) ∧ ⋀[e_sel = Q], V_sel, D)
one_c, bos_c, val_c, k_cs, _ = sel_outputs(s1, 2, 0)
terms, const = s1.readout()
for bits in itertools.product((0, 1), repeat=7):
    one_s, bos_s, val_s, k0, k1, qv, dv = bits
    env = {one_c: one_s, bos_c: bos_s, val_c: val_s, TA: qv, TC: dv}
    # the second atom `token[j] != "c"` is read as its value 1 − tc at the key
    env.update(dict(zip(k_cs, (k0, k1), strict=True)))
    got = check_output(s1, env)
    cond = one_s and not bos_s and (k0 == qv) and k1
    check(got == (val_s if cond else dv), f"C6 check FFN at {bits}: {got}")
one_c, bos_c, val_c, k_cs, e_cs = sel_outputs(s3, 1, 1)
terms, const = s3.readout()
for bits in itertools.product((0, 1), repeat=4):
    one_s, bos_s, val_s, kv = bits
    for d in range(-2, 3):
        env = {one_c: one_s, bos_c: bos_s, val_c: val_s, k_cs[0]: kv, e_cs[0]: Qc + d, cc: Qc}
        got = check_output(s3, env)
        cond = one_s and not bos_s and kv and d == 0
        check(got == (val_s if cond else 0), f"C6 check FFN (equality) at {bits}, d = {d}")
ok("C6: the check FFNs give V at the chosen key iff it exists, is not BOS and satisfies S, else D")

# ---------------------------------------------------------------- C5: squares
(sqh,) = [h for h in s3.heads() if "square-lookup" in h.get("name", "")]
A = s3.bilinear(sqh)
(absc,) = [q for (q, k) in A if k == "pos"]
check(A == {(absc, "pos"): 2, ("one", "pos_sq"): -1}, f"C5 square lookup score {A}")
check(sqh["mask"] == "none" and sqh.get("hard", "average") == "average", "C5 square lookup mask")
check(s3.values(sqh) == {sq: {"pos_sq": 1}}, "C5 square lookup reads pos_sq")
al = sp.Symbol("alpha", integer=True, nonnegative=True)
s = 2 * al * j - j**2
check(sp.expand(s - (al**2 - (al - j) ** 2)) == 0, "C5 2αj − j² = α² − (α − j)²")
units = s3.units(absc)
for d, _s in SIGN_CASES:
    got = relu_eval(units, {cc: d})
    check(decided(got) and sp.expand(got - sp.Abs(d)) == 0, f"C5 α = |K| at K = {d}")
h0, h1 = sp.symbols("h0 h1", integer=True)
check(
    sp.expand(n - (h0 * n + h1) - ((1 - h0) * (n - 1) + (1 - h0 - h1))) == 0,
    "C5 h0 ≤ 1, h0 + h1 ≤ 1 ⇒ h0·n + h1 ≤ n for n ≥ 1",
)
for bad in ("c + n", "2 * c", "c + 1"):
    try:
        Model(
            ALPHA + f'int c = psum(int(token == "a"))\nint d = {bad}\n'
            "bool y = attend leftmost j where d[j] == c value true default false\noutput y"
        )
        check(False, f"C5 the compiler refuses the key {bad} (may leave [−n, n])")
    except RaspError:
        pass
ok("C5: K² by pos_sq (K = a·pos + c) or by |K| and a square lookup, only for |K| ≤ n")

# ---------------------------------------------------------------- C7: read-out
acc = M('accept token == "a" and pos == n')
o = acc.m["output"]
check(
    o["kind"] == "accept" and o["position"] == "last" and F(o["threshold"]) == Fraction(1, 2),
    "C7 accept at the last position, threshold 1/2",
)
for y in (0, 1):
    check((y > Fraction(1, 2)) == (y == 1), "C7 accept iff y = 1")
arg = M('output token == "a"')
o = arg.m["output"]
w0 = [F(x) for x in o["weight"][0]]
w1 = [F(x) for x in o["weight"][1]]
check(
    o["kind"] == "argmax"
    and o["labels"] == ["0", "1"]
    and all(x == -y for x, y in zip(w0, w1, strict=True))
    and F(o["bias"][0]) == 1 - F(o["bias"][1]),
    "C7 argmax logits (1 − y, y)",
)
for y in (0, 1):
    check(abs((1 - y) - y) == 1 and ((y > 1 - y) == (y == 1)), "C7 label 1 iff y = 1, margin 1")
ok("C7: read-outs — accept y > 1/2 at n, argmax over (1 − y, y), value y")

# ---------------------------------------------------------------- C0 on everything compiled here
for src in PROGRAMS:
    check(write_once(Model(ALPHA + src)), f"C0 write-once: {src[:40]!r}")
check(len(program_paths()) >= 8, "C0 the bundled programs are found")
for path in program_paths():
    check(write_once(Model(path.read_text(encoding="utf-8"))), f"C0 write-once: {path.name}")
ok(
    f"C0: every coordinate written once into a zero slot, read only later "
    f"({len(PROGRAMS)} programs + the bundled ones)"
)

# ================================================================ Proposition CB (bounded)
# N = n + 1; an `int` coordinate holds k/N for its integer value k.
nb = sp.Symbol("n", integer=True, positive=True)  # n ≥ 1: the signs below are decided
Nb = nb + 1
POSITION_B = {
    "pos_frac": "i/(n+1)",
    "pos_frac_sq": "i^2/(n+1)^2",
    "inv_pos": "1/(i+1)",
    "len_frac": "n/(n+1)",
    "unit": "1/(n+1)",
    "unit_sq": "1/(n+1)^2",
}
PROGRAMS_B: list[str] = []


def MB(src: str) -> Model:
    PROGRAMS_B.append(src)
    return Model(ALPHA + src, "bounded")


def emb_env(p_: object) -> dict[str, object]:
    """The bounded embedding's values at position p_ (Lemma CB1)."""
    return {
        "one": 1,
        "pos_frac": p_ / Nb,
        "pos_frac_sq": p_**2 / Nb**2,
        "inv_pos": 1 / (p_ + 1),
        "len_frac": nb / Nb,
        "unit": 1 / Nb,
        "unit_sq": 1 / Nb**2,
    }


# ---------------------------------------------------------------- CB1: embedding
mod = MB('output psum(int(token == "a")) + int(token != "b")')
pe = dict(zip(mod.coords, mod.m["embedding"]["position"], strict=True))
for name, expr in POSITION_B.items():
    check(pe.get(name) == expr, f"CB1 position embedding of {name} is {expr}")
check(all(e == "0" for k, e in pe.items() if k not in POSITION_B), "CB1 other positions are 0")
for t_, row in mod.m["embedding"]["token"].items():
    row_ = dict(zip(mod.coords, row, strict=True))
    check(F(row_["one"]) == 1 and F(row_["bos"]) == int(t_ == mod.m["bos"]), f"CB1 one/bos {t_}")
    check(all(F(v) in (0, 1) for v in row), f"CB1 token entries 0/1 at {t_}")
ok("CB1: bounded embedding — i/N, i²/N², 1/(i+1), n/N, 1/N, 1/N² (N = n + 1); tokens 0/1")


def ffn_env(mod: Model, env: dict[str, object]) -> dict[str, object]:
    """Evaluate every FFN coordinate whose inputs env has (layer order), symbolically."""
    for cname in mod.coords:
        if cname in mod.writer and mod.writer[cname][1].get("kind") == "ffn" and cname not in env:
            try:
                env[cname] = relu_eval(mod.units(cname), env)
            except KeyError:
                continue
    return env


# ---------------------------------------------------------------- CB2: physical forms
aff = MB('output 2 * pos - n + 1 - (0 - 3) * int(token == "a") + -1 * int(not (token == "b"))')
terms, const = aff.readout()
check(aff.m["output"]["kind"] == "value" and const == 0, "CB2 integer read-out: no constant")
check(aff.m["reference"].get("output_scale") == "1/(n+1)", "CB7 output_scale 1/(n+1)")
for qa_, qb_ in itertools.product((0, 1), repeat=2):
    env = {**emb_env(i), TA: qa_, TB: qb_}
    got = form(terms, const, ffn_env(aff, env))
    want = (2 * i - nb + 1 + 3 * qa_ - (1 - qb_)) / Nb
    check(decided(got) and sp.simplify(got - want) == 0, f"CB2 phys form at {(qa_, qb_)}: {got}")
for z in terms:
    if z in aff.writer:  # a scaled Boolean: ReLU(b + unit − 1)
        ((w, bias, coef),) = aff.units(z)
        check(bias == -1 and coef == 1 and w.get("unit") == 1 and len(w) == 2, f"CB2 scaled {z}")
ok("CB2: an integer form's physical form is its value over N (scaled Booleans, constant on unit)")

# ---------------------------------------------------------------- CB3: gadgets
for text, fn in BOOL.items():
    mod = MB(DEFS + f"output {text}")
    terms, const = mod.readout()
    for bits in itertools.product((0, 1), repeat=3):
        env = ffn_env(mod, dict(zip((TA, TB, TC), bits, strict=True)))
        check(form(terms, const, env) == int(fn(*map(bool, bits))), f"CB3 Boolean {text} {bits}")
mod = MB("output abs(pos - n)")
units = mod.units(mod.output_coord())
check(all(b_ == 0 for _, b_, _ in units), "CB3 abs: no bias (homogeneous)")
for d, _s in SIGN_CASES:  # pos − n = d, every integer d by its sign
    got = relu_eval(units, {"pos_frac": (b + d) / Nb, "len_frac": b / Nb})
    check(decided(got) and sp.simplify(got - sp.Abs(d) / Nb) == 0, f"CB3 abs at d = {d}")
for fname, col in (("min", 2), ("max", 3)):
    mod = MB(f"output {fname}(pos, n)")
    units = mod.units(mod.output_coord())
    check(all(b_ == 0 for _, b_, _ in units), f"CB3 {fname}: no bias (homogeneous)")
    for case in MINMAX_CASES:  # integer values of pos and n, stored over N
        got = relu_eval(units, {"pos_frac": case[0] / Nb, "len_frac": case[1] / Nb})
        check(decided(got) and sp.simplify(got - case[col] / Nb) == 0, f"CB3 {fname} on {case[:2]}")
ok("CB3: Boolean gadgets unchanged; abs/min/max act on k/N with no bias (homogeneous)")


def compare_outputs(mod: Model, env: dict[str, object]) -> dict[str, object]:
    """Evaluate every compare head (reads one/bos at the key only) at the query env: the head
    writes the mean of one − bos over the argmax of {BOS: s(bos = 1), others: s(bos = 0)}."""
    for h in mod.heads():
        if ": compare" not in h.get("name", ""):
            continue
        A = mod.bilinear(h)
        check({k for _, k in A} <= {"one", "bos"}, "CB3b compare reads one/bos at the key")
        check(h["mask"] == "none" and h.get("hard", "average") == "average", "CB3b no mask")
        ((out, combo),) = mod.values(h).items()
        check(combo == {"one": 1, "bos": -1}, "CB3b value one − bos")
        try:
            s_bos = sum(R(v) * env[q] * {"one": 1, "bos": 1}[k] for (q, k), v in A.items())
            s_oth = sum(R(v) * env[q] * {"one": 1, "bos": 0}[k] for (q, k), v in A.items())
        except KeyError:
            continue
        diff = sp.simplify(s_oth - s_bos)
        check(diff != 0 and diff.is_positive is not None, f"CB3b decided sign: {diff}")
        env[out] = 1 if diff.is_positive else 0
        env[out + "#gap"] = sp.Abs(diff)
    return env


for op, fn in CMP.items():
    mod = MB(f"output pos {op} n")
    terms, const = mod.readout()
    cmp_heads = [h for h in mod.heads() if ": compare" in h.get("name", "")]
    check(len(cmp_heads) == (2 if op in ("==", "!=") else 1), f"CB3b {op}: compare heads")
    check(not [L for L in mod.m["layers"] if L["kind"] == "ffn"], f"CB3b {op}: no FFN")
    for d in range(-4, 5):
        env = {"pos_frac": (b + d) / Nb, "len_frac": b / Nb, "unit": 1 / Nb, "one": 1}
        env = compare_outputs(mod, env)
        got = form(terms, const, env)
        check(got == int(fn(d)), f"CB3b pos {op} n at d = {d}: {got}")
        for h in cmp_heads:
            ((out, _),) = mod.values(h).items()
            g = env[out + "#gap"]
            check(sp.simplify(g * Nb - sp.Abs(g * Nb)) == 0 and g * Nb >= 1, "CB3b gap ≥ 1/N")
ok("CB3b: compare heads [d ≥ k]: score (2d − 2k + 1)/N against BOS's 0; ==, !=, <, ≤, >, ≥")

# ---------------------------------------------------------------- CB4: prefix sums
cnt = MB('output psum(int(token == "a") - int(token == "b") + 2)')
terms, const = cnt.readout()
check(const == 0 and terms.get("pos_frac") == 2, "CB4 psum: c₀·pos on pos_frac")
counted = {}
for z, coef in terms.items():
    if z == "pos_frac":
        continue
    look = cnt.head(z)
    A = cnt.bilinear(look)
    (share,) = [q for (q, k) in A if k == "pos_frac"]
    check(A == {(share, "pos_frac"): 2, ("inv_pos", "pos_frac_sq"): -1}, f"CB4 lookup score {A}")
    check(look["mask"] == "leq" and look.get("hard", "average") == "average", "CB4 lookup mask")
    check(cnt.values(look) == {z: {"pos_frac": 1}}, "CB4 lookup reads pos_frac")
    p = sp.Symbol("p", integer=True, nonnegative=True)
    env_q = {share: c / ((p + 1) * Nb), "inv_pos": 1 / (p + 1)}
    env_k = {"pos_frac": j / Nb, "pos_frac_sq": j**2 / Nb**2}
    s_ = sum(R(v) * env_q[q] * env_k[k] for (q, k), v in A.items())
    check(sp.simplify(s_ - (c**2 - (c - j) ** 2) / ((p + 1) * Nb**2)) == 0, "CB4 lookup identity")
    mean = cnt.head(share)
    check(not cnt.bilinear(mean) and mean["mask"] == "leq", "CB4 mean head uniform, j ≤ i")
    (nobos,) = cnt.values(mean)[share]
    units = cnt.units(nobos)
    (src,) = [k for k in units[0][0] if k not in ("bos", "unit")]
    for bb, bos in itertools.product((0, 1), repeat=2):
        got = relu_eval(units, {src: bb, "bos": bos, "unit": 1 / Nb})
        check(decided(got) and sp.simplify(got - bb * (1 - bos) / Nb) == 0, f"CB4 b″ {bb, bos}")
    counted[src] = coef
check(counted == {TA: 1, TB: -1}, f"CB4 read-out Σ c_k count(b_k): {counted}")
ok("CB4: b″ = b(1 − bos)/N; mean c/((p+1)N); lookup (c² − (c − j)²)/((p+1)N²) reads c/N")


# ---------------------------------------------------------------- CB5, CB6: select heads
def check_select_b(
    label: str,
    mod: Model,
    *,
    choice: str,
    qatoms: dict[str, int],
    katoms: list[tuple[dict[str, int], int]],
    f,
    eqs: list[tuple[sp.Expr, sp.Expr]],  # (Q's integer value at the query, K's at the key)
    query_env: dict[str, sp.Expr],
    key_env: dict[str, sp.Expr],
) -> None:
    """Lemma CB6 (★B) on the emitted score, for every 0/1 value of the atoms and of bos_j."""
    h = select_head(mod)
    check(h["hard"] == choice, f"{label}: hard rule")
    A = mod.bilinear(h)
    sigma = 1 if choice == "rightmost" else -1
    tie = j / Nb**3 if eqs else j / Nb
    for qbits in itertools.product((0, 1), repeat=len(qatoms)):
        q_env = {**emb_env(i), **query_env, **dict(zip(qatoms, qbits, strict=True))}
        consts = set()
        for kbits in itertools.product((0, 1), repeat=len(katoms) + 1):
            *kvals, bos = kbits
            k_env = {**emb_env(j), "bos": bos, **key_env}
            for (fm, k0), v in zip(katoms, kvals, strict=True):
                ((coord, coef),) = fm.items()
                k_env[coord] = sp.Rational(v - k0, coef)
            for side, k_ in ((q_env, 0), (k_env, 1)):
                for z in {pair[k_] for pair in A} - set(side):
                    if z in mod.writer and mod.writer[z][1].get("kind") == "ffn":
                        side[z] = relu_eval(mod.units(z), side)
            try:
                s_ = sum(R(v) * q_env[q] * k_env[k] for (q, k), v in A.items())
            except KeyError as exc:
                check(False, f"{label}: score reads an unexpected coordinate {exc}")
                return
            want = (int(bool(f(*qbits, *kvals))) - 1) - bos + sigma * tie
            for Q, K in eqs:
                want -= (Q - K) ** 2 / Nb**2
            diff = sp.simplify(s_ - want)
            check(not diff.free_symbols & KEYSYMS, f"{label}: score − (★B) depends on j: {diff}")
            consts.add(diff)
        check(len(consts) == 1, f"{label}: (★B) with one M(p) per query: {consts}")
    check(sp.simplify(1 / Nb**2 - nb / Nb**3 - 1 / Nb**3) == 0, f"{label}: RB1 1/N² − n/N³ = 1/N³")


sb1 = MB(
    'bool y = attend rightmost j < i where (token[j] == "a") == (token == "a") and '
    'token[j] != "c" value token[j] == "b" default token == "c"\noutput y'
)
check_select_b(
    "CB6 mixed Boolean (tie-break j/N)",
    sb1,
    choice="rightmost",
    qatoms={TA: 1},
    katoms=[({TA: 1}, 0), ({TC: -1}, 1)],
    f=lambda q, k1, k2: (k1 == q) and k2,
    eqs=[],
    query_env={},
    key_env={},
)
sb2 = MB(
    "bool y = attend leftmost j where pos[j] == n + 1 - pos "
    'value token[j] == "a" default false\noutput y'
)
check_select_b(
    "CB6 equality pos[j] == n + 1 − pos (K̃² from pos_frac_sq, unit)",
    sb2,
    choice="leftmost",
    qatoms={},
    katoms=[],
    f=lambda: True,
    eqs=[(nb + 1 - i, j)],
    query_env={},
    key_env={},
)
sb4 = MB(
    "bool y = attend rightmost j where 2 * pos[j] - 1 == n - pos "
    'value token[j] == "a" default false\noutput y'
)
check_select_b(
    "CB6 equality 2·pos[j] − 1 == n − pos (K = a·pos + c, c ≠ 0: the cross term 2ac·j/N²)",
    sb4,
    choice="rightmost",
    qatoms={},
    katoms=[],
    f=lambda: True,
    eqs=[(nb - i, 2 * j - 1)],
    query_env={},
    key_env={},
)
sb3 = MB(
    'int c = psum(int(token == "a"))\n'
    'bool y = attend leftmost j >= i where c[j] == c and token[j] == "b" value true default false'
    "\noutput y"
)
A3 = sb3.bilinear(select_head(sb3))
(ccb,) = {k for (q, k) in A3 if k.startswith("c.") and "square" not in k}
(sqb,) = {k for (q, k) in A3 if "square" in k}
check_select_b(
    "CB6 equality c[j] == c (square lookup K²/N²)",
    sb3,
    choice="leftmost",
    qatoms={},
    katoms=[({TB: 1}, 0)],
    f=lambda k: bool(k),
    eqs=[(Qc, Kc)],
    query_env={ccb: Qc / Nb},
    key_env={ccb: Kc / Nb, sqb: Kc**2 / Nb**2},
)
(sqh,) = [h for h in sb3.heads() if "square-lookup" in h.get("name", "")]
A = sb3.bilinear(sqh)
(absc,) = [q for (q, k) in A if k == "pos_frac"]
check(A == {(absc, "pos_frac"): 2, ("one", "pos_frac_sq"): -1}, f"CB5 square lookup score {A}")
check(sqh["mask"] == "none" and sb3.values(sqh) == {sqb: {"pos_frac_sq": 1}}, "CB5 reads j²/N²")
al = sp.Symbol("alpha", integer=True, nonnegative=True)
s_ = 2 * (al / Nb) * (j / Nb) - j**2 / Nb**2
check(sp.simplify(s_ - (al**2 - (al - j) ** 2) / Nb**2) == 0, "CB5 (K² − (|K| − j)²)/N²")
units = sb3.units(absc)
check(all(b_ == 0 for _, b_, _ in units), "CB5 |K̃| with no bias")
for d, _s in SIGN_CASES:
    got = relu_eval(units, {ccb: d / Nb})
    check(decided(got) and sp.simplify(got - sp.Abs(d) / Nb) == 0, f"CB5 α = |K|/N at K = {d}")
check(
    any(x[2] == "1/(n + 1)^3" for x in sb3.m["reference"]["head_gap_bounds"]),
    "CB6 an equality select's bound is 1/(n + 1)^3",
)
ok("CB5/CB6: select score (★B) with levels (Q − K)²/N² and tie-break j/N³ (j/N without =)")


def run_after(mod: Model, env: dict[str, object], after: int) -> dict[str, object]:
    """Every FFN and compare head after layer ``after``, in layer order (numbers only)."""
    for li, layer in enumerate(mod.m["layers"]):
        if li <= after:
            continue
        if layer["kind"] == "ffn":
            for z in mod.coords:
                if z in mod.writer and mod.writer[z][0] == li:
                    env[z] = relu_eval(mod.units(z), env)
        else:
            compare_outputs(mod, env)
    return env


one_c, bos_c, val_c, k_cs, e_cs = sel_outputs(sb3, 1, 1)
terms, const = sb3.readout()
for bits in itertools.product((0, 1), repeat=4):
    one_s, bos_s, val_s, kv = bits
    for d in range(-2, 3):
        qv = 3
        env = {
            **emb_env(2),
            "one": 1,
            one_c: one_s,
            bos_c: bos_s,
            val_c: val_s,
            k_cs[0]: kv,
            e_cs[0]: sp.Rational(qv + d) / Nb,
            ccb: sp.Rational(qv) / Nb,
        }
        got = form(terms, const, run_after(sb3, env, select_layer(sb3)))
        cond = one_s and not bos_s and kv and d == 0
        check(got == (val_s if cond else 0), f"CB6 check (equality by compare) {bits}, d = {d}")
ok("CB6: the check — compare heads for [e_sel = Q], then C6's FFNs — gives V or D")

# ---------------------------------------------------------------- CB7: read-out
acc = MB('accept token == "a" and pos == n')
check(
    acc.m["output"]["kind"] == "accept" and F(acc.m["output"]["threshold"]) == Fraction(1, 2),
    "CB7 accept at threshold 1/2",
)
check("output_scale" not in acc.m["reference"], "CB7 no output_scale for an accept")
arg = MB('output token == "a"')
check(arg.m["output"]["kind"] == "argmax" and arg.m["output"]["labels"] == ["0", "1"], "CB7 argmax")
ok("CB7: read-outs — accept and argmax as C7; an integer value shows k/N (output_scale 1/(n+1))")

# ---------------------------------------------------------------- CB0 on everything compiled here
for src in PROGRAMS_B:
    check(write_once(Model(ALPHA + src, "bounded")), f"CB0 write-once: {src[:40]!r}")
for path in program_paths():
    m_ = Model(path.read_text(encoding="utf-8"), "bounded")
    check(write_once(m_), f"CB0 write-once: {path.name}")
    check(
        all(e in POSITION_B.values() for e in m_.m["embedding"]["position"] if e != "0"),
        f"CB1 bounded embedding only: {path.name}",
    )
ok(f"CB0: write-once ({len(PROGRAMS_B)} programs + the bundled ones, bounded)")

finish("check_rasp_compiler")
