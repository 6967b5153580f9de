"""Checks for Propositions D, L, R and RB (proofs/claims.md): the builders' claimed bounds.

Run: PYTHONPATH=. python3 proofs/check_claims.py   (exit status 0 iff every check passes)
"""

from __future__ import annotations

import sympy as sp
from checklib import check, finish, ok

n, i, j, jp, v, t, P, Pp = sp.symbols("n i j jp v t P Pp")

# ---------------------------------------------------------------- Proposition D(a)
s1 = lambda jj: (v**2 - (v - jj) ** 2) / i  # noqa: E731
diff1 = sp.simplify(s1(j) - s1(jp) - ((v - jp) ** 2 - (v - j) ** 2) / i)
check(diff1 == 0, "layer 1: s_ij - s_ij' = ((v-j')^2 - (v-j)^2)/i")
ok("D(a) layer 1: score differences are integers over i")
s2 = lambda pp, jj: -pp + jj / (n + 1)  # noqa: E731
# different penalties (P' >= P + 1) and |j - j'| <= n: s_j - s_j' >= 1 - n/(n+1) = 1/(n+1)
worst = sp.simplify(s2(P, j) - s2(P + 1, j + n))
check(sp.simplify(worst - 1 / (n + 1)) == 0, "layer 2: worst difference of unequal penalties")
check(sp.simplify(s2(P, j + 1) - s2(P, j) - 1 / (n + 1)) == 0, "layer 2: equal penalties")
ok("D(a) layer 2: any two scores differ by >= 1/(n+1)")

# ---------------------------------------------------------------- embedding bounds
# Each bound "value <= B" is certified by an identity B - value = Σ (products of factors that the
# hypotheses make >= 0) / (positive denominator), checked exactly by sympy.
# D(b): 0 <= i <= n + 1, n >= 1, so i, n, n + 1 - i >= 0. L(b): 1 <= i <= n, so i - 1, n - i,
# n - 1 >= 0.
A, Bf, C = n + 1 - i, n - i, i - 1  # nonnegative under the respective hypotheses
CERTS = [
    ("D(b) i <= (n+1)^2", (n + 1) ** 2 - i, (n + 1) * A + i * n),
    ("D(b) i^2 <= (n+1)^2", (n + 1) ** 2 - i**2, A * (n + 1 + i)),
    ("D(b) 1/max(i,1) <= 1 <= (n+1)^2", (n + 1) ** 2 - 1, n * (n + 2)),
    ("D(b) i/(n+1) <= 1", 1 - i / (n + 1), A / (n + 1)),
    ("D(b) unit i^2/(n+1)^2 <= 1", 1 - i**2 / (n + 1) ** 2, A * (n + 1 + i) / (n + 1) ** 2),
    (
        "D(b) unit i/(n+1)^3 <= 1",
        1 - i / (n + 1) ** 3,
        ((n + 1) ** 2 * A + i * n * (n + 2)) / (n + 1) ** 3,
    ),
    ("D(b) unit 1/(n+1) <= 1", 1 - 1 / (n + 1), n / (n + 1)),
    ("L(b) i/n <= 1", 1 - i / n, Bf / n),
    ("L(b) (i+1)/n <= 2", 2 - (i + 1) / n, (Bf + (n - 1)) / n),
    ("L(b) (n-i+1)/n <= 1", 1 - (n - i + 1) / n, C / n),
    ("L(b) positions i <= 2n", 2 * n - i, n + Bf),
    ("L(b) positions i+1 <= 2n", 2 * n - (i + 1), Bf + (n - 1)),
    ("L(b) positions n-i+1 <= 2n", 2 * n - (n - i + 1), n + C),
]
for name, slack, cert in CERTS:
    check(sp.simplify(slack - cert) == 0, f"{name}: slack identity")
    ok(f"{name}: slack = {cert} (each factor >= 0 under the hypotheses)")

# ---------------------------------------------------------------- the builders emit what is proved
from exactattn.constructions import dyck, induction, ltl  # noqa: E402

EXPECTED = {
    ("dyck", "integer"): {"0", "i", "i^2", "1/max(i,1)", "i/(n+1)"},
    ("dyck", "unit"): {"0", "i/(n+1)", "i^2/(n+1)^2", "1/max(i,1)", "1/(n+1)", "i/(n+1)^3"},
    ("ltl", "temperature"): {"0", "i/n", "min(i,1)", "min(i,1)*(i+1)/n", "min(i,1)*(n-i+1)/n"},
    ("ltl", "positions"): {"0", "i", "n*min(i,1)", "min(i,1)*(i+1)", "min(i,1)*(n-i+1)"},
}


def texts(model: dict) -> tuple[set[str], set]:
    pos = {str(p) for p in model["embedding"]["position"]}
    tok = {x for row in model["embedding"]["token"].values() for x in row}
    return pos, tok


for scale in ("integer", "unit"):
    pos, tok = texts(dyck.build_dyck(["()", "[]"], scale=scale))
    check(pos <= EXPECTED[("dyck", scale)], f"dyck {scale}: position expressions {pos}")
    check(tok <= {0, 1}, f"dyck {scale}: token entries {tok}")
    ok(f"dyck {scale}: the builder's embedding is the one Proposition D(b) covers")
for scheme in ("temperature", "positions"):
    models = [ltl.compile_ltl(f, al, scheme) for f, al in ltl.CATALOG_FORMULAS.values()]
    models.append(induction.build_induction(["a", "b"], hops=2, scheme=scheme, max_n=2))
    for m in models:
        pos, tok = texts(m)
        check(pos <= EXPECTED[("ltl", scheme)], f"ltl {scheme}: position expressions {pos}")
        check(tok <= {0, 1}, f"ltl {scheme}: token entries {tok}")
        check("eos" not in m, f"ltl {scheme}: no EOS (positions stop at n)")
    ok(f"ltl/induction {scheme}: the builders' embeddings are the ones Proposition L(b) covers")

# ---------------------------------------------------------------- Proposition R (compiled RASP)
from fractions import Fraction  # noqa: E402

from exactattn.constructions import rasp_claims as rc  # noqa: E402
from exactattn.constructions.rasp_bundled import catalog as rasp_catalog  # noqa: E402

p = sp.symbols("p")
Pn = n - p  # >= 0 for positions 0 <= p <= n; p >= 0 and n - 1 >= 0 (n >= 1)
X = sp.sympify(rc.X_MAX.replace("^", "**"), locals={"n": n})
check(sp.simplify(X - n**2) == 0, f"R(b): the claimed x_max is n^2, got {rc.X_MAX}")
R_VALUES = {"i": p, "i^2": p**2, "1/(i+1)": 1 / (p + 1), "n": n, "i/(n+1)": p / (n + 1)}
# table bound − value, and X − table bound, as sums of products of factors that are >= 0 for
# 0 <= p <= n, n >= 1 (p, n − p, n − 1, n, n + 1)
R_CERTS = {
    "i": Pn,
    "i^2": Pn * (n + p),
    "1/(i+1)": p / (p + 1),
    "n": sp.Integer(0),
    "i/(n+1)": (Pn + 1) / (n + 1),
}
TABLE_CERTS = {"n^2": sp.Integer(0), "n": n * (n - 1), "1": (n - 1) * (n + 1)}
check(set(rc.EMBED_BOUNDS) == set(R_VALUES), f"R(b): covered expressions {set(rc.EMBED_BOUNDS)}")
for expr, value in R_VALUES.items():
    tb = rc.EMBED_BOUNDS[expr]
    bound = sp.sympify(tb.replace("^", "**"), locals={"n": n})
    cert = R_CERTS[expr]
    check(sp.simplify(bound - value - cert) == 0, f"R(b) {expr} <= {tb}: slack identity")
    check(tb in TABLE_CERTS, f"R(b) {tb}: a bound with a certificate against X")
    check(sp.expand(X - bound - TABLE_CERTS[tb]) == 0, f"R(b) {tb} <= {rc.X_MAX}: slack identity")
    ok(f"R(b) {expr} <= {tb} <= {rc.X_MAX}: slacks {cert}, {TABLE_CERTS[tb]} (factors >= 0)")
# R(c): y in {0, 1}; accept threshold 1/2; argmax scores (1 - y, y)
for y in (0, 1):
    check(abs(Fraction(y) - Fraction(1, 2)) == Fraction(1, 2), f"R(c) accept margin at y={y}")
    check(abs((1 - y) - y) == 1, f"R(c) argmax margin at y={y}")
ok("R(c): margins 1/2 (accept) and 1 (argmax) for a Boolean read-out")
# R(e): a form with a <= 2 and a + b <= 1 is <= n^2 for n >= 1, and activation_bound covers
# every interval it is given (random intervals, n = 1..40, exact)
a_, b_ = sp.symbols("a b")
check(
    sp.expand(n**2 - a_ * n - b_ - ((n - 1) * (n + 1 - a_) + (1 - a_ - b_))) == 0,
    "R(e): n^2 - a n - b = (n - 1)(n + 1 - a) + (1 - a - b)",
)
import random  # noqa: E402

from exactattn.model.expr import parse_expression  # noqa: E402

rng = random.Random(5)
for trial in range(300):
    ranges = []
    for _ in range(rng.randint(0, 4)):
        lo = (rng.randint(-3, 2), rng.randint(-3, 2))
        ranges.append((lo, (lo[0] + rng.randint(0, 3), lo[1] + rng.randint(0, 3))))
    sq = rng.random() < 0.5
    e = parse_expression(rc.activation_bound(ranges, sq), ("n",))
    for nn in range(1, 41):
        v = e.eval_exact({"n": nn})
        need = [max(abs(l0 * nn + l1), abs(h0 * nn + h1)) for (l0, l1), (h0, h1) in ranges]
        check(all(v >= x for x in need) and (not sq or v >= nn * nn), f"R(e) trial {trial}")
ok("R(e): the n^2 identity, and activation_bound >= every interval (300 random cases)")
# the compiler emits what is proved, on every bundled program
MARGIN = {"accept": "1/2", "argmax": "1"}
RASP = sorted(rasp_catalog().items())
for stem, m in [(k, v) for k, v in RASP if not k.endswith("_bounded")]:
    emb = m["embedding"]
    pos = [str(x) for x in emb["position"]]
    check(set(pos) <= set(rc.EMBED_BOUNDS) | {"0"}, f"{stem}: position expressions {set(pos)}")
    check("eos" not in m, f"{stem}: no EOS (positions stop at n)")
    d = m["d"]
    for k in range(d):
        tok_nonzero = any(row[k] != 0 for row in emb["token"].values())
        check(not (tok_nonzero and pos[k] != "0"), f"{stem}: coordinate {k} is token and position")
    check({x for row in emb["token"].values() for x in row} <= {0, 1}, f"{stem}: token entries")
    cl = m["claims"]
    check(cl["gamma_lower"]["expr"] == m["reference"]["gap_bound"], f"{stem}: γ claim")
    check(cl["x_max_upper"]["expr"] == rc.X_MAX, f"{stem}: x_max claim")
    check(cl["activation_upper"]["expr"] == "n^2", f"{stem}: activation claim (R(e): n^2)")
    kind = m["output"]["kind"]
    check(cl.get("margin_lower", {}).get("expr") == MARGIN.get(kind), f"{stem}: margin claim")
    if kind == "argmax":
        out = m["output"]
        check(out["labels"] == ["0", "1"], f"{stem}: Boolean labels")
        check(out["weight"][0] == [-w for w in out["weight"][1]], f"{stem}: weights (−c, c)")
        b0, b1 = (Fraction(str(b)) for b in out["bias"])
        check(b0 + b1 == 1, f"{stem}: biases (1 − c₀, c₀)")
    if kind == "accept":
        check(str(m["output"]["threshold"]) == "1/2", f"{stem}: threshold 1/2")
    hards = [
        (h.get("hard", "average"), h.get("name", ""))
        for layer in m["layers"]
        if layer.get("type", layer.get("kind")) == "attention"
        for h in layer["heads"]
    ]
    for hard, name in hards:
        if hard != "average":
            check(": select " in name, f"{stem}: a {hard} head that is not a select head: {name}")
    check(("unique_top" in cl) == any(h != "average" for h, _ in hards), f"{stem}: unique_top")
    ok(f"rasp {stem}: embedding, read-out and claims are the ones Proposition R covers")

# ---------------------------------------------------------------- D(e), L(e), R(f): profiles
# the k-th key below the top is >= a + b·⌊(k−1)/r⌋ below it, from the drops the proofs derive
rho = sp.symbols("rho", integer=True, nonnegative=True)
check(sp.expand((rho + 1) ** 2 - (1 + 2 * rho)) == rho**2, "D(e)/R(f): (ρ+1)² − (1 + 2ρ) = ρ²")
for k in range(1, 200):
    r2 = (k - 1) // 2
    check(k * k >= 1 + 2 * r2, f"D(e): k² ≥ 1 + 2⌊(k−1)/2⌋ at k = {k}")
    check(((k + 1) // 2) ** 2 >= 1 + 2 * r2, f"D(e): ⌈k/2⌉² ≥ 1 + 2⌊(k−1)/2⌋ at k = {k}")
    # comparisons: drops {BOS ≥ 3} ∪ {3, 6, 9, …}: the k-th smallest ≥ 3(⌊(k−1)/2⌋ + 1)
    drops = sorted([3] + [3 * m for m in range(1, k + 1)])
    check(drops[k - 1] >= 3 * (r2 + 1), f"L(e): comparison drops at k = {k}")
ok("D(e), L(e), R(f): the profiles' per-rank drops (d² ≥ 1 + 2ρ, two keys per d; comparisons)")


def _profiles(model: dict) -> list[tuple]:
    hp = model["claims"]["head_profiles"]["heads"]
    return [
        (h["layer"], h["head"], h["gap"], h["step"], h["per_rank"], h.get("unique", False))
        for h in hp
    ]


for scale, first, g in (("integer", 0, "1/(n+1)"), ("unit", 1, "1/(n+1)^3")):
    m = dyck.build_dyck(["()", "[]"], scale=scale)
    g2 = "2/(n+1)" if scale == "integer" else "2/(n+1)^3"
    want = [
        (first + 1, 0, g, g2, 2, True),
        (first + 2, 0, g, g, 1, True),
        (first + 4, 0, "1", "0", 1, False),
    ]
    check(_profiles(m) == want, f"D(e) {scale}: emitted profiles {_profiles(m)}")
    rs = m["claims"]["coordinate_ranges"]["ranges"]
    check(set(rs) == set(m["coordinates"]), f"D(d) {scale}: every coordinate has a range")
    for b in [c for c in m["coordinates"] if c.startswith(("open", "close", "match"))] + [
        "bad",
        "any_bad",
    ]:
        check(rs[b] == {"min": "0", "max": "1", "integer": True}, f"D(d) {scale}: {b} is a bit")
    check(rs["one"] == {"min": "1", "max": "1", "integer": True}, f"D(d) {scale}: one = 1")
    ok(f"dyck {scale}: the emitted coordinate ranges and profiles are Proposition D(d), D(e)'s")
for scheme in ("temperature", "positions"):
    unit = "/n" if scheme == "temperature" else ""
    models = [ltl.compile_ltl(f, al, scheme) for f, al in ltl.CATALOG_FORMULAS.values()]
    models.append(induction.build_induction(["a", "b"], hops=2, scheme=scheme, max_n=2))
    for m in models:
        for h in m["claims"]["head_profiles"]["heads"]:
            check(h["gap"] == f"3{unit}" and h["step"] == f"3{unit}", f"L(e) {scheme}: {h}")
            layer = m["layers"][h["layer"]]["heads"][h["head"]]
            test = "[test" in layer["name"]
            check(
                h["per_rank"] == (2 if test else 1), f"L(e) {scheme}: per_rank of {layer['name']}"
            )
            check(
                h.get("unique", False) == (layer["mask"] in ("lt", "leq")),
                f"L(e) {scheme}: unique {h}",
            )
        cr = m["claims"]["coordinate_ranges"]
        check(set(cr["ranges"]) == set(m["coordinates"]), f"L(d) {scheme}: every coordinate")
        check(
            cr["ranges"]["<bos>"]["max"] == "0" and cr["bos"]["<bos>"]["min"] == "1", "L(d) <bos>"
        )
    ok(f"ltl/induction {scheme}: the emitted ranges and profiles are Proposition L(d), L(e)'s")
for stem, md in [(k, v) for k, v in RASP if not k.endswith("_bounded")]:
    hp = md["claims"]["head_profiles"]["heads"]
    for h in hp:
        name = md["layers"][h["layer"]]["heads"][h["head"]]["name"]
        kind = next(k for k in rc.PROFILES if k in name)
        check(
            (h["gap"], h["step"], h["per_rank"]) == rc.PROFILES[kind] and h["unique"],
            f"R(f) {stem}: {h}",
        )
    check(
        set(md["claims"]["coordinate_ranges"]["ranges"]) == set(md["coordinates"]),
        f"R(f) {stem}: ranges",
    )
ok(
    "R(f): every compiled program's profiles are its primitives' "
    "(select, count-lookup, square-lookup)"
)

# ---------------------------------------------------------------- Proposition RB (bounded)
# RB(b): every bounded position expression lies in [0, 1] for 0 <= p <= n, n >= 1: 1 − value
# and value as sums of products of factors >= 0 (n − p, p, n, n + 1, p + 1)
RB_VALUES = {
    "i/(n+1)": p / (n + 1),
    "i^2/(n+1)^2": p**2 / (n + 1) ** 2,
    "1/(i+1)": 1 / (p + 1),
    "n/(n+1)": n / (n + 1),
    "1/(n+1)": 1 / (n + 1),
    "1/(n+1)^2": 1 / (n + 1) ** 2,
}
RB_CERTS = {  # 1 − value
    "i/(n+1)": (Pn + 1) / (n + 1),
    "i^2/(n+1)^2": (Pn + 1) * (n + 1 + p) / (n + 1) ** 2,
    "1/(i+1)": p / (p + 1),
    "n/(n+1)": 1 / (n + 1),
    "1/(n+1)": n / (n + 1),
    "1/(n+1)^2": n * (n + 2) / (n + 1) ** 2,
}
check(set(rc.BOUNDED_EMBED_BOUNDS) == set(RB_VALUES), "RB(b): covered expressions")
for expr, value in RB_VALUES.items():
    check(rc.BOUNDED_EMBED_BOUNDS[expr] == "1", f"RB(b) {expr}: the table says ≤ 1")
    check(sp.simplify(1 - value - RB_CERTS[expr]) == 0, f"RB(b) {expr} <= 1: slack identity")
    ok(f"RB(b) 0 <= {expr} <= 1: slack {RB_CERTS[expr]} (factors >= 0)")
check(rc.x_max_bound(list(RB_VALUES)) == "1", "RB(b): x_max_bound of the bounded embedding is 1")
# RB(e): |k/(n+1)| <= (a n + b)/(n + 1) <= max(a, b): max(a, b)(n + 1) − a n − b >= 0, and
# activation_bound_scaled covers every integer interval it is given (random, n = 1..40, exact)
a2, b2 = sp.symbols("a2 b2", nonnegative=True)
check(
    sp.expand(
        sp.Max(a2, b2) * (n + 1) - a2 * n - b2 - ((sp.Max(a2, b2) - a2) * n + (sp.Max(a2, b2) - b2))
    )
    == 0,
    "RB(e): max(a,b)(n+1) − (a n + b) = (max − a) n + (max − b)",
)
for trial in range(300):
    ranges = []
    for _ in range(rng.randint(0, 4)):
        lo = (rng.randint(-3, 2), rng.randint(-3, 2))
        ranges.append((lo, (lo[0] + rng.randint(0, 3), lo[1] + rng.randint(0, 3))))
    top = Fraction(rc.activation_bound_scaled(ranges))
    for nn in range(1, 41):
        need = [
            Fraction(max(abs(l0 * nn + l1), abs(h0 * nn + h1)), nn + 1)
            for (l0, l1), (h0, h1) in ranges
        ]
        check(top >= 1 and all(top >= x for x in need), f"RB(e) trial {trial}")
ok("RB(e): (a n + b)/(n + 1) <= max(a, b), and activation_bound_scaled >= every k/(n+1)")
for stem, m in [(k, v) for k, v in RASP if k.endswith("_bounded")]:
    emb = m["embedding"]
    pos = [str(x) for x in emb["position"]]
    check(set(pos) <= set(rc.BOUNDED_EMBED_BOUNDS) | {"0"}, f"{stem}: position expressions")
    for k in range(m["d"]):
        tok_nonzero = any(row[k] != 0 for row in emb["token"].values())
        check(not (tok_nonzero and pos[k] != "0"), f"{stem}: coordinate {k} is token and position")
    check({x for row in emb["token"].values() for x in row} <= {0, 1}, f"{stem}: token entries")
    cl = m["claims"]
    check(cl["gamma_lower"]["expr"] == m["reference"]["gap_bound"], f"{stem}: γ claim")
    check(cl["x_max_upper"]["expr"] == "1", f"{stem}: x_max claim 1")
    check(
        "coordinate_ranges" not in cl and "head_profiles" not in cl,
        f"{stem}: no Theorem S claims (Proposition R(f) covers the unbounded encoding only)",
    )
    check(cl["activation_upper"]["expr"] == "1", f"{stem}: activation claim (RB(e): 1)")
    kind = m["output"]["kind"]
    check(cl.get("margin_lower", {}).get("expr") == MARGIN.get(kind), f"{stem}: margin claim")
    check(
        (m["reference"].get("output_scale") == "1/(n+1)") == (kind == "value"),
        f"{stem}: an integer read-out says it shows k/(n+1)",
    )
    for layer in m["layers"]:
        for h in layer.get("heads", []):
            if h.get("hard", "average") != "average":
                check(": select " in h["name"], f"{stem}: a unique-hard head that is not a select")
    check(
        all(
            c["justification"]["statement"].startswith("Proposition RB(")
            for c in cl.values()
            if isinstance(c, dict)
        ),
        f"{stem}: every claim cites Proposition RB",
    )
    ok(f"rasp {stem}: embedding, read-out and claims are the ones Proposition RB covers")

finish("claims")
