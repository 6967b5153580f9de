"""Checks for Propositions D and L (proofs/claims.md): the builders' claimed bounds.

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

finish("claims")
