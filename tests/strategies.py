"""Hypothesis strategies: random small format-1 models (as dicts) for cross-checking.

``models()`` draws a model dict with d in 2..5, an alphabet of 2-3 tokens, optional BOS/EOS,
1-3 layers mixing attention heads (every mask including aliases, query/key with and without
biases or the ``score`` form, value with or without ``output``, every hard rule) and
feed-forward layers, small rational weights (numerators -3..3, denominators 1..4) written in
every accepted notation, deliberate ties (zero and repeated-row matrices), position
embeddings as expressions or tables, temperatures, ``accept`` / ``argmax`` outputs and
sometimes a reference (``cases``, ``dyck``, ``regex``).

Numbers that must appear as bare JSON decimals (``0.75`` rather than ``"0.75"``) are
``RawDecimal`` strings; ``to_json_text`` writes them unquoted.  Load the text with the
engine's file loader, and with ``reference_evaluator.load_text`` for the reference.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

from hypothesis import strategies as st

MAX_N = 3  # the checks run n = 1..MAX_N; position tables cover max_length >= MAX_N


class RawDecimal(str):
    """A decimal number to be written as a bare JSON number (with a fraction part)."""


_RAW = re.compile(r'"@@RAW:([^"@]*)@@"')


def to_json_text(d) -> str:
    def mark(x):
        if isinstance(x, RawDecimal):
            return f"@@RAW:{x}@@"
        if isinstance(x, dict):
            return {k: mark(v) for k, v in x.items()}
        if isinstance(x, list):
            return [mark(v) for v in x]
        return x

    return _RAW.sub(r"\1", json.dumps(mark(d)))


# ----------------------------------------------------------------------------- numbers


def _decimal_text(q: Fraction) -> str | None:
    """Exact terminating decimal text of q (denominators 1, 2, 4), always with a point."""
    if 100 % q.denominator:
        return None
    hundredths = int(q * 100)
    sign = "-" if hundredths < 0 else ""
    a = abs(hundredths)
    return f"{sign}{a // 100}.{a % 100:02d}"


@st.composite
def numbers(draw, nonneg: bool = False):
    """A small rational, written as a JSON int, "p/q", a decimal string, "Ne-2" or a bare
    JSON decimal; biased towards 0 and 1 so that ties are common."""
    kind = draw(st.sampled_from(["zero", "one", "any", "any", "any"]))
    if kind == "zero":
        p, q = 0, draw(st.integers(1, 4))
    elif kind == "one":
        p, q = 1, 1
    else:
        p, q = draw(st.integers(0 if nonneg else -3, 3)), draw(st.integers(1, 4))
    value = Fraction(p, q)
    forms = ["ratio"]
    if value.denominator == 1:
        forms += ["int", "int"]
    dec = _decimal_text(value)
    if dec is not None:
        forms += ["decimal", "raw", "exp"]
    form = draw(st.sampled_from(forms))
    if form == "int":
        return int(value)
    if form == "ratio":
        return f"{p}/{q}"  # possibly unreduced, e.g. "2/4" or "0/3"
    if form == "decimal":
        return dec
    if form == "raw":
        return RawDecimal(dec)
    return f"{int(value * 100)}e-2"


def vectors(length: int):
    return st.lists(numbers(), min_size=length, max_size=length)


@st.composite
def matrices(draw, rows: int, cols: int):
    """A (rows, cols) matrix; sometimes zero or with every row equal (deliberate ties)."""
    kind = draw(st.sampled_from(["random", "random", "random", "zero", "repeat", "sparse"]))
    if kind == "zero":
        return [[0] * cols for _ in range(rows)]
    if kind == "repeat":
        row = draw(vectors(cols))
        return [list(row) for _ in range(rows)]
    if kind == "sparse":
        out = [[0] * cols for _ in range(rows)]
        for r in range(rows):
            c = draw(st.integers(0, cols - 1))
            out[r][c] = draw(st.sampled_from([1, -1, 2, "1/2"]))
        return out
    return [draw(vectors(cols)) for _ in range(rows)]


# ----------------------------------------------------------------------------- pieces

POSITION_EXPRESSIONS = [
    "0",
    "0",
    "i",
    "i/n",
    "1/(i+1)",
    "(-1)^i",
    "n",
    "1/n",
    "i^2",
    "mod(i, 2)",
    "floor(i/2)",
    "ceil(i/2)",
    "min(i, 1)",
    "max(i - n, 0)",
    "2*i - n",
    "-i/2",
    "1/(n+1)",
    "i*n",
    "0.5",
    "3/4",
    "i**2/(n*n)",
]
TEMPERATURES = ["1", "sqrt(n)", "1/n", "1/log(n+1)", "1/2", "n", "2", "3/2", "1/(n+1)"]
MASKS = ["none", "leq", "causal", "lt", "strict-causal", "geq", "gt"]
ALPHABETS = [["a", "b"], ["a", "b", "c"], ["0", "1"], ["(", ")"], ["x", "yy"]]
REGEXES = {
    ("a", "b"): ["a*b*", "(ab)*", "(a|b)*a", "b+a?"],
    ("a", "b", "c"): ["a(b|c)*", "[abc]*c", "(a|bc)*"],
    ("0", "1"): ["(0|1)*1", "0*1*", "(01)*0?"],
}


@st.composite
def heads(draw, d: int):
    h: dict = {}
    if draw(st.booleans()) and draw(st.booleans()):
        h["score"] = draw(matrices(d, d))
    else:
        k = draw(st.integers(1, 2))
        h["query"] = draw(matrices(k, d))
        h["key"] = draw(matrices(k, d))
        if draw(st.booleans()):
            h["query_bias"] = draw(vectors(k))
        if draw(st.booleans()):
            h["key_bias"] = draw(vectors(k))
    if draw(st.booleans()):
        m = draw(st.integers(1, 2))
        h["value"] = draw(matrices(m, d))
        h["output"] = draw(matrices(d, m))
    else:
        h["value"] = draw(matrices(d, d))
    if draw(st.booleans()):
        h["value_bias"] = draw(vectors(len(h["value"])))
    mask = draw(st.sampled_from([None, *MASKS]))
    if mask is not None:
        h["mask"] = mask
    hard = draw(st.sampled_from([None, "average", "leftmost", "rightmost"]))
    if hard is not None:
        h["hard"] = hard
    if draw(st.integers(0, 4)) == 0:
        h["temperature"] = draw(st.sampled_from(TEMPERATURES))
    return h


@st.composite
def layers(draw, d: int):
    if draw(st.integers(0, 2)) < 2:
        return {"kind": "attention", "heads": draw(st.lists(heads(d), min_size=1, max_size=2))}
    hidden, width = [], d
    for _ in range(draw(st.integers(1, 2))):
        h = draw(st.integers(1, 3))
        hidden.append({"weight": draw(matrices(h, width)), "bias": draw(vectors(h))})
        width = h
    return {
        "kind": "ffn",
        "hidden": hidden,
        "output": {"weight": draw(matrices(d, width)), "bias": draw(vectors(d))},
    }


@st.composite
def outputs(draw, d: int, bos: str | None, eos: str | None):
    if draw(st.booleans()):
        positions = ["last", "first", 1]
        if eos is not None:
            positions = ["eos", *positions]
        if bos is not None:
            positions = ["bos", 0, *positions]
        return {
            "kind": "accept",
            "position": draw(st.sampled_from(positions)),
            "weight": draw(vectors(d)),
            "bias": draw(numbers()),
            "threshold": draw(numbers()),
        }
    m = draw(st.integers(2, 3))
    out = {"kind": "argmax", "weight": draw(matrices(m, d)), "labels": ["P", "Q", "R"][:m]}
    if draw(st.booleans()):
        out["bias"] = draw(vectors(m))
    return out


@st.composite
def references(draw, alphabet: list[str], output: dict):
    kind = draw(st.sampled_from(["none", "none", "cases", "language"]))
    if kind == "cases":
        cases, seen = [], set()
        for _ in range(draw(st.integers(1, 4))):
            word = tuple(draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=MAX_N)))
            if word in seen:
                continue
            seen.add(word)
            if output["kind"] == "accept":
                expected = draw(st.booleans())
            else:
                expected = [draw(st.sampled_from(output["labels"])) for _ in word]
            cases.append({"input": list(word), "output": expected})
        return {"kind": "cases", "cases": cases}
    if kind == "language" and output["kind"] == "accept":
        if alphabet == ["(", ")"]:
            return {"kind": "dyck", "pairs": ["()"]}
        if tuple(alphabet) in REGEXES:
            return {"kind": "regex", "pattern": draw(st.sampled_from(REGEXES[tuple(alphabet)]))}
    return None


@st.composite
def models(draw):
    d = draw(st.integers(2, 5))
    alphabet = draw(st.sampled_from(ALPHABETS))
    bos = draw(st.sampled_from([None, "<s>"]))
    eos = draw(st.sampled_from([None, "</s>"]))
    specials = [t for t in (bos, eos) if t is not None]
    model: dict = {"format": "exactattn/1", "name": "random", "alphabet": list(alphabet)}
    if bos is not None:
        model["bos"] = bos
    if eos is not None:
        model["eos"] = eos
    model["d"] = d
    token = {}
    one_hot = draw(st.booleans())
    for k, t in enumerate(alphabet + specials):
        if one_hot:
            token[t] = [1 if c == k % d else 0 for c in range(d)]
        else:
            token[t] = draw(vectors(d))
    embedding: dict = {"token": token}
    pos_kind = draw(st.sampled_from(["none", "exprs", "exprs", "table"]))
    if pos_kind == "exprs":
        embedding["position"] = [draw(st.sampled_from(POSITION_EXPRESSIONS)) for _ in range(d)]
    elif pos_kind == "table":
        max_length = draw(st.integers(MAX_N, MAX_N + 1))
        model["max_length"] = max_length
        # row p is P(p, .) for the position number p = 0 .. max_length + 1
        embedding["position"] = {"table": [draw(vectors(d)) for _ in range(max_length + 2)]}
    model["embedding"] = embedding
    if draw(st.booleans()):
        model["temperature"] = draw(st.sampled_from(TEMPERATURES))
    model["layers"] = draw(st.lists(layers(d), min_size=1, max_size=3))
    model["output"] = draw(outputs(d, bos, eos))
    ref = draw(references(list(alphabet), model["output"]))
    if ref is not None:
        model["reference"] = ref
    return model
