"""Why no per-coordinate chain certifies Dyck-2 at τ*_dec(n)/4 (issue 35; docs/certify.md).

At τ = τ*_dec(n)/4 (a grid value 2^(k/8): τ*_dec's lower end is one), measure the true
errors after layer 1 (`depth`, `depth_sq`; every other coordinate is exact there) over every
input of length n — their certified lower ends, so any sound bound is at least as large —
and search for one input and signs s_{p,c} ∈ {−1, 0, 1} such that the hard layer-1 output
plus s_{p,c}·(that largest error) at every position, run through layers 2–4 in the soft
meaning at τ, puts the read-out on the wrong side of 1/2. A chain that knows only one error
bound per coordinate must allow this state, so it cannot certify n at τ.

    python benchmarks/dyck2_chain_limit.py N K [--per-input]

``--per-input`` allows at each position only that input's own error there (what a chain
cannot know without enumeration): then the search finds no flip at n = 3, 4. Soft layers are
evaluated with mpmath at 50 digits (the flips found are far from the threshold).
"""

from __future__ import annotations

import itertools
import random
import sys
from fractions import Fraction as F
from pathlib import Path

import mpmath as mp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exactattn import evaluate, load_model  # noqa: E402
from exactattn.core.numbers import arb_endpoints, to_arb  # noqa: E402
from exactattn.model import AttentionLayer  # noqa: E402

mp.mp.dps = 50
MASK = {
    "none": lambda i, j: True,
    "leq": lambda i, j: j <= i,
    "lt": lambda i, j: j < i,
    "geq": lambda i, j: j >= i,
    "gt": lambda i, j: j > i,
}


def q(x: object) -> mp.mpf:
    f = F(x)  # type: ignore[arg-type]
    return mp.mpf(f.numerator) / f.denominator


def affine(W: object, b: object, x: list) -> list:
    return [
        sum(q(a) * c for a, c in zip(r, x, strict=True)) + q(bb) for r, bb in zip(W, b, strict=True)
    ]  # type: ignore[call-overload]


def layer(m: object, li: int, X: list, tau: mp.mpf) -> list:
    """One layer of the model on a residual stream X (mpmath), softmax at τ."""
    ly = m.layers[li]  # type: ignore[attr-defined]
    if not isinstance(ly, AttentionLayer):
        out = []
        for x in X:
            z = x
            for W, b in ly.hidden:
                z = [max(mp.mpf(0), v) for v in affine(W, b, z)]
            Wo, bo = ly.output
            out.append([a + c for a, c in zip(x, affine(Wo, bo, z), strict=True)])
        return out
    out = [row[:] for row in X]
    T = len(X)
    for h in ly.heads:
        for i in range(T):
            js = [j for j in range(T) if MASK[h.mask](i, j)]
            if not js:
                continue
            qi = affine(h.query, h.query_bias, X[i])
            s = [
                sum(a * b for a, b in zip(qi, affine(h.key, h.key_bias, X[j]), strict=True))
                for j in js
            ]
            top = max(s)
            w = [mp.exp((x - top) / tau) for x in s]
            Z = sum(w)
            mix = [mp.mpf(0)] * len(h.value)
            for wj, j in zip(w, js, strict=True):
                v = affine(h.value, h.value_bias, X[j])
                mix = [a + wj / Z * b for a, b in zip(mix, v, strict=True)]
            for r in range(len(out[i])):
                out[i][r] += sum(q(h.output[r][a]) * mix[a] for a in range(len(mix)))
    return out


def main() -> None:
    n, k = int(sys.argv[1]), int(sys.argv[2])
    per_input = "--per-input" in sys.argv
    m = load_model(ROOT / "models" / "dyck2.json")
    D, DS = m.coordinates.index("depth"), m.coordinates.index("depth_sq")
    tau = mp.power(2, mp.mpf(k) / 8)
    half = mp.mpf(1) / 2
    states = {}
    top = [mp.mpf(0), mp.mpf(0)]
    for word in itertools.product(m.alphabet, repeat=n):
        ev = evaluate(m, list(word), f"exp({k}/8*log(2))")
        rad = []
        for p in range(len(ev.hard[2])):
            rr = []
            for j, c in enumerate((D, DS)):
                lo = arb_endpoints(abs(ev.soft[2][p][c] - to_arb(F(ev.hard[2][p][c]))))[0]
                rr.append(q(lo))
                top[j] = max(top[j], rr[-1])
            rad.append(rr)
        o = m.output
        y_hard = sum(q(w) * q(x) for w, x in zip(o.weight, ev.hard[-1][-1], strict=True)) + q(
            o.bias
        )
        states[word] = ([[q(x) for x in row] for row in ev.hard[2]], y_hard > half, rad)
    print(
        f"n = {n}, τ = 2^({k}/8) = {mp.nstr(tau, 6)}: largest true error after layer 1 "
        f"(certified lower end): depth {mp.nstr(top[0], 4)}, depth_sq {mp.nstr(top[1], 4)}; "
        f"the match head's gap 1/(n+1) = {mp.nstr(mp.mpf(1) / (n + 1), 4)}"
    )
    rng = random.Random(35)
    words = list(states)
    rng.shuffle(words)
    best = None
    for word in words[:400]:
        X0, accept, rad = states[word]

        def overshoot(sg: list) -> mp.mpf:
            X = [row[:] for row in X0]  # noqa: B023
            for p, (a, b) in enumerate(sg):
                X[p][D] += a * (rad[p][0] if per_input else top[0])  # noqa: B023
                X[p][DS] += b * (rad[p][1] if per_input else top[1])  # noqa: B023
            for li in range(2, len(m.layers)):
                X = layer(m, li, X, tau)
            y = sum(q(w) * x for w, x in zip(m.output.weight, X[-1], strict=True)) + q(
                m.output.bias
            )
            return (half - y) if accept else (y - half)  # noqa: B023

        sg = [[rng.choice([-1, 0, 1]), rng.choice([-1, 0, 1])] for _ in X0]
        cur = overshoot(sg)
        for _ in range(60):
            p, c = rng.randrange(len(X0)), rng.randrange(2)
            old = sg[p][c]
            sg[p][c] = rng.choice([-1, 0, 1])
            new = overshoot(sg)
            if new >= cur:
                cur = new
            else:
                sg[p][c] = old
        if best is None or cur > best[0]:
            best = (cur, word, [r[:] for r in sg], accept)
        if cur > 0:
            break
    assert best is not None
    cur, word, sg, accept = best
    print(
        f"{'FLIP' if cur > 0 else 'no flip found'}: input {''.join(word)} (hard: "
        f"{'accept' if accept else 'reject'}), signs (depth, depth_sq) per position {sg}: the "
        f"soft read-out ends {mp.nstr(abs(cur), 4)} "
        f"{'past' if cur > 0 else 'short of'} the threshold"
    )


if __name__ == "__main__":
    main()
