"""Models whose gamma(n), x_max(n) and first-layer error are known in closed form, checked
against the engine (``run_check``) for n = 1..10.  Closed forms are evaluated with mpmath at
50 digits; the engine's certified enclosure must contain them and be tight.

Notation: positions are numbered as in the spec (BOS 0, w_i at i); E = exp(1/tau(n)).
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

from exactattn import model_from_dict, run_check

ctx = mpmath.MPContext()
ctx.dps = 50
NS = range(1, 11)


def check(d: dict, max_n: int = 10) -> list[dict]:
    res = run_check(model_from_dict(d), max_n=max_n).to_json()
    assert [x["n"] for x in res["lengths"]] == list(range(1, max_n + 1))
    return res["lengths"]


def assert_encloses(interval: dict, value, what: str = "") -> None:
    lo, hi = ctx.mpf(interval["lower"]), ctx.mpf(interval["upper"])
    slack = ctx.mpf(10) ** -45 * max(1, abs(value))
    assert lo - slack <= value <= hi + slack, (what, interval, ctx.nstr(value, 20))
    assert hi - lo <= ctx.mpf("1e-6") * abs(value) + ctx.mpf("1e-40"), ("loose", what, interval)


def frac(x: str | None) -> Fraction | None:
    return None if x is None else Fraction(x)


# -------------------------------------------------------------------------------- (a)

CAUSAL_RANK = {
    "format": "exactattn/1",
    "name": "causal-rank",
    "alphabet": ["a"],
    "d": 3,
    "embedding": {"token": {"a": [1, 0, 0]}, "position": ["0", "i/n", "0"]},
    "temperature": "1",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [[1, 0, 0]],
                    "key": [[0, -1, 0]],
                    "value": [[0, 1, 0]],
                    "output": [[0], [0], [1]],
                    "mask": "causal",
                    "hard": "leftmost",
                }
            ],
        }
    ],
    "output": {
        "kind": "accept",
        "position": "last",
        "weight": [0, 0, 1],
        "bias": 0,
        "threshold": 0,
    },
}


def causal_rank_error(n: int):
    r = ctx.exp(ctx.mpf(-1) / n)  # exp(s/tau) ratio between neighbouring keys, tau = 1
    return ctx.fsum(k * r**k for k in range(n)) / ctx.fsum(r**k for k in range(n)) / n


def test_causal_rank_head():
    """Causal head, query constant 1, key = -(i/n): s_ij = -j/n on V(i) = {1..i}.

    gamma: the maximum at i is s_i1 = -1/n (unique); the other keys j = 2..i have gap
    (j-1)/n, smallest 1/n, present as soon as i >= 2.  So gamma(1) = null (one key only)
    and gamma(n) = 1/n for n >= 2, witness top_key 1, other_key 2.
    x_max: entries 1 (coordinate 0) and i/n <= 1: x_max(n) = 1.
    error: leftmost hard takes v_1 = 1/n.  Soft weights are proportional to
    exp(-j/(n tau)) = r^(j-1) with r = e^(-1/n) (tau = 1), so at query i
        soft - hard = sum_{j<=i} r^(j-1) (j-1)/n / sum_{j<=i} r^(j-1)
                    = (1/n) sum_{k<i} k r^k / sum_{k<i} r^k,
    the mean of a geometric law truncated to {0..i-1}, increasing in i; only coordinate 2
    changes, so eps_0(n) = (1/n) sum_{k<n} k r^k / sum_{k<n} r^k, attained at i = n.
    """
    for r in check(CAUSAL_RANK):
        n = r["n"]
        if n == 1:
            assert r["gamma"] is None and r["gamma_witness"] is None
        else:
            assert frac(r["gamma"]) == Fraction(1, n)
            w = r["gamma_witness"]
            assert (w["top_key"], w["other_key"]) == (1, 2)
        assert r["x_max"] == "1"
        assert r["layers"][0]["activation_max"] == "1"
        assert_encloses(r["layers"][0]["error"], causal_rank_error(n), f"n={n}")
        assert r["layers"][0]["error_witness"] == {"input": ["a"] * n, "position": n}
        assert r["invariant"] == "holds"
        # y = soft output > 0 = t always; hard y = 1/n > 0: no disagreement, margin 1/n
        assert r["disagreements"] == 0
        assert frac(r["min_margin"]) == Fraction(1, n)


# -------------------------------------------------------------------------------- (b)

WORKED = {
    "format": "exactattn/1",
    "name": "mean-a-position",
    "alphabet": ["a", "b"],
    "bos": "<s>",
    "d": 4,
    "embedding": {
        "token": {"a": [1, 1, 0, 0], "b": [0, 1, 0, 0], "<s>": [0, 1, 0, 0]},
        "position": ["0", "0", "i/n", "0"],
    },
    "temperature": "1/n",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [[0, 1, 0, 0]],
                    "key": [[1, 0, 0, 0]],
                    "value": [[0, 0, 1, 0]],
                    "output": [[0], [0], [0], [1]],
                    "mask": "leq",
                    "hard": "average",
                }
            ],
        }
    ],
    "output": {
        "kind": "accept",
        "position": "last",
        "weight": [0, 0, 0, 1],
        "bias": 0,
        "threshold": "1/2",
    },
}
WORKED_ERRORS = [
    "0.268941421370",
    "0.159760468379",
    "0.0866343289591",
    "0.0426634629009",
    "0.0195550369835",
]


def test_worked_example():
    """The spec's worked example (a copy of tests/data/mean_a_position.json).

    gamma: scores are 1 at a-positions and 0 elsewhere (BOS included); every query sees
    BOS, so whenever an a is visible the gap is exactly 1; otherwise all scores tie:
    gamma(n) = 1 for every n >= 1 (a^n has an a at query 1, which also sees BOS).
    x_max = 1 (entries 0/1 and i/n <= 1).
    error at n = 1: on "a", hard takes position 1 (value 1), soft gives e/(1+e) to it and
    1/(1+e) to BOS (value 0): 1/(1+e).  For n = 2..5 the spec's table (12 digits).
    decisions: every zero-margin input has soft output exactly 1/2 (see
    test_reference_selfcheck), so no input is a disagreement; those inputs may only be
    reported as undecided.
    """
    for r in check(WORKED, max_n=10):
        n = r["n"]
        assert r["inputs"] == 2**n
        assert r["gamma"] == "1"
        assert r["x_max"] == "1"
        assert r["min_margin"] == "0"
        assert r["disagreements"] == 0
        if n == 1:
            assert_encloses(r["layers"][0]["error"], 1 / (1 + ctx.e), "1/(1+e)")
        if n <= 5:
            lo = ctx.mpf(r["layers"][0]["error"]["lower"])
            hi = ctx.mpf(r["layers"][0]["error"]["upper"])
            table = ctx.mpf(WORKED_ERRORS[n - 1])
            assert abs(lo - table) <= 5 * ctx.mpf(10) ** -12 * table
            assert abs(hi - table) <= 5 * ctx.mpf(10) ** -12 * table


# -------------------------------------------------------------------------------- (c)


def indicator_model(temperature: str) -> dict:
    return {
        "format": "exactattn/1",
        "name": "indicator",
        "alphabet": ["a", "b"],
        "bos": "<s>",
        "d": 3,
        "embedding": {"token": {"a": [1, 1, 0], "b": [0, 1, 0], "<s>": [0, 1, 0]}},
        "temperature": temperature,
        "layers": [
            {
                "kind": "attention",
                "heads": [
                    {
                        "query": [[0, 1, 0]],
                        "key": [[1, 0, 0]],
                        "value": [[1, 0, 0]],
                        "output": [[0], [0], [1]],
                    }
                ],
            }
        ],
        "output": {
            "kind": "accept",
            "position": "last",
            "weight": [0, 0, 1],
            "bias": 0,
            "threshold": "1/2",
        },
    }


@pytest.mark.parametrize(
    "temperature, E",
    [
        ("1/log(n+1)", lambda n: ctx.mpf(n + 1)),
        ("1", lambda n: ctx.e),
        ("1/n", lambda n: ctx.exp(n)),
        ("sqrt(n)", lambda n: ctx.exp(1 / ctx.sqrt(n))),
    ],
)
def test_indicator_head(temperature, E):
    """Unmasked head over BOS + n symbols, score s_j = [w_j = a] (query 1, key = a-flag),
    value v_j = [w_j = a], written to coordinate 2.

    With m a's: m = 0 makes every score tie and every value 0, so hard = soft = 0.  For
    m >= 1 hard averages v over the a's (= 1), soft puts E/(mE + n+1-m) on each a, so
        soft = mE/(mE + n+1-m),   error = (n+1-m)/(mE + n+1-m),
    decreasing in m, largest at m = 1: eps_0(n) = n/(E + n), at every query position.
    tau = 1/log(n+1) gives E = n+1 and the rational error n/(2n+1) through an irrational
    temperature.  gamma(n) = 1 (BOS, score 0, is always visible next to an a) and
    x_max(n) = 1.  Hard output 1 > 1/2 with margin 1/2 when m >= 1, 0 (margin 1/2) when
    m = 0; soft output mE/(mE+n+1-m) > 1/2 iff mE > n+1-m.
    """
    for r in check(indicator_model(temperature), max_n=10):
        n = r["n"]
        e = E(n)
        assert r["gamma"] == "1"
        assert r["x_max"] == "1"
        assert r["layers"][0]["activation_max"] == "1"
        assert_encloses(r["layers"][0]["error"], n / (e + n), f"{temperature} n={n}")
        assert r["layers"][0]["error_witness"]["input"].count("a") == 1
        assert r["min_margin"] == "1/2"
        expected = sum(ctx.binomial(n, m) for m in range(1, n + 1) if not m * e > n + 1 - m)
        assert r["disagreements"] == int(expected)
        assert r["undecided"] == 0


def test_indicator_rational_error_exact_values():
    """The irrational temperature 1/log(n+1) gives the rational error n/(2n+1): the
    engine's enclosure must contain it for n = 1..10."""
    for r in check(indicator_model("1/log(n+1)")):
        n = r["n"]
        assert_encloses(r["layers"][0]["error"], ctx.mpf(n) / (2 * n + 1), f"n={n}")
        assert_encloses(r["tau"], 1 / ctx.log(n + 1), f"tau n={n}")


# -------------------------------------------------------------------------------- (d)

RIGHTMOST_TIE = {
    "format": "exactattn/1",
    "name": "rightmost-tie",
    "alphabet": ["a", "b"],
    "d": 3,
    "embedding": {"token": {"a": [1, 0, 0], "b": [0, 0, 0]}},
    "temperature": "1/n",
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [[0, 0, 0]],
                    "key": [[1, 1, 1]],
                    "value": [[4, 0, 0]],
                    "output": [[0], [0], [1]],
                    "mask": "leq",
                    "hard": "rightmost",
                }
            ],
        },
        {
            "kind": "ffn",
            "hidden": [{"weight": [[0, 0, 0]], "bias": [0]}],
            "output": {"weight": [[0], [0], [0]], "bias": [0, 0, 0]},
        },
    ],
    "output": {
        "kind": "argmax",
        "weight": [[0, 0, 1], [0, 0, -1]],
        "bias": ["-1/2", 0],
        "labels": ["hi", "lo"],
    },
}


def test_rightmost_tie_error_is_rational_and_breaks_invariant():
    """A zero query: every visible score ties at every query, so there is no strict gap:
    gamma(n) = null.  Hard rightmost takes v_i = 4[w_i = a]; soft is exactly uniform over
    j <= i, giving 4 * (number of a's in w_1..w_i) / i, whatever tau.  The error at i is
    4 |#a(1..i)/i - [w_i = a]|, largest for a^(n-1) b or b^(n-1) a at i = n:
    eps_0(n) = 4(n-1)/n, an exact rational (0 at n = 1).  The ffn layer adds nothing, so
    eps_1(n) = eps_0(n).  Layer 0 feeds layer 1: the invariant eps_0 <= 1 holds iff
    4(n-1)/n <= 1, i.e. only for n = 1.  x_max(n) = 1; activation_max = 4 (hard output
    4 at an a).
    """
    for r in check(RIGHTMOST_TIE):
        n = r["n"]
        eps = ctx.mpf(4 * (n - 1)) / n
        assert r["gamma"] is None and r["gamma_witness"] is None
        assert r["x_max"] == "1"
        assert [x["activation_max"] for x in r["layers"]] == ["4", "4"]
        for layer in r["layers"]:
            assert_encloses(layer["error"], eps, f"n={n}")
        assert r["invariant"] == ("holds" if n == 1 else "fails")
