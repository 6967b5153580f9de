"""Independent, slow, plainly written reference for the exactattn model format 1.

This module reads a model file's JSON *itself* (it does not use ``exactattn.model`` or
``exactattn.model.expr``) and computes, for one model and one length n, every quantity the
spec's "Measured quantities" section defines.  Hard values are ``fractions.Fraction``;
softmax values are ``mpmath`` numbers at 60 decimal digits (high precision, NOT
certified).  It exists to cross-check the fast engine, so it favours one loop per
definition over speed.

Conventions read from docs/model-format.md and its worked example:

* Numbers: JSON integers, JSON numbers with a fraction part and strings holding a
  rational literal ("3/4", "-2", "0.125", "1e-3") all mean the exact rational as written
  (``json.loads(..., parse_float=Fraction)``); booleans, NaN and Infinity are rejected.
* Positions: the sequence is ``bos? w_1 .. w_n eos?``; BOS is position 0 (so ``i = 0`` in
  position expressions), w_p is position p, EOS is position n+1.  Position *numbers* are
  used everywhere (witnesses, masks, output positions): without BOS the first position is
  1, not 0.  A position table's row p is P(p, .), indexed by position number.
* Masks compare position numbers; BOS and EOS are ordinary positions for masks, as keys
  and as queries.  An empty visible set adds the zero vector (both meanings).
* Soft weights: exp(s_ij / tau) / sum_k exp(s_ik / tau) over the visible set, tau the
  head's own temperature, else the model's, else "1".
* gamma(n): over every layer, head, input, query position (BOS/EOS included) and visible
  key j (BOS/EOS included) whose HARD score is strictly below the maximum visible hard
  score, the minimum of (max - s_ij), exact.  None when there is no such key.  The
  witness is the first minimiser in the order input (lexicographic), layer, head, query,
  key; ``top_key`` is the smallest position attaining the maximum.
* x_max(n): max |entry| of x^(0) over every position (BOS/EOS included) of every input.
* activation_max[l]: max |entry| of the hard x^(l+1) over every position of every input.
* error[l]: max over inputs and positions (BOS/EOS included) of ||soft x^(l+1) - hard
  x^(l+1)||_inf; witness is the first maximiser (input order, then position).
* invariant: error[l] <= 1 for every layer l that feeds another layer (all but the last);
  vacuously "holds" for a one-layer model.
* accept output: y = w . x_P + b, accepted iff y > t; margin |y - t| (0 when y = t).
  P: "last" = n, "first" = 1, "bos" = 0, "eos" = n+1, an integer = that position number.
* argmax output: at every input position p = 1..n the label of the largest entry of
  W x_p + b, or the tie marker TIE when the top value is attained more than once; the
  margin of one position is top - second (0 on a tie); min_margin is the minimum over
  inputs and positions.
* Soft decisions are computed on the soft activations.  The soft meaning keeps a value
  exact (a Fraction) whenever it is exactly rational by construction (see ``_smul``,
  ``_soft_weights``, ``_soft_mix``); an inexact soft value within 1e-40 of a decision
  boundary is reported as UNDECIDED (neither meaning's decision can be told apart from a
  tie at this precision) and counted separately.
* Disagreement (a flip): an input where the hard meaning decides and the soft decision
  differs; for argmax, an input with a position whose hard label is not TIE and whose soft
  label (TIE included) differs from it.  A hard tie (accept: y = t; argmax: TIE at a
  position) is not a flip, whatever the soft meaning says there (issue 17,
  docs/model-format.md "Hard ties, margins, counters").  Inputs with an UNDECIDED soft
  decision are counted in ``undecided`` and not in ``disagreements``.
* reference mismatches: ``cases`` compares the cases whose input has length n;
  ``dyck`` and ``regex`` compare every input of length n.  A soft decision that is
  UNDECIDED is counted in ``soft_undecided``, not as a mismatch.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

import mpmath

DPS = 60
TIE = "<tie>"
UNDECIDED = "<undecided>"
_UNDECIDED_BAND = mpmath.mpf(10) ** -40

mp = mpmath.MPContext()
mp.dps = DPS


class ReferenceError_(Exception):
    """The reference evaluator cannot evaluate the model (bad or unsupported input)."""


# --------------------------------------------------------------------------------------
# Numbers


_RATIONAL = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?(\s*/\s*\d+)?\s*$")


def _reject_constant(name: str):
    raise ReferenceError_(f"non-finite JSON constant {name}")


def load_text(text: str) -> dict:
    """Parse a model file's text; every JSON number becomes an exact Fraction or int."""
    return json.loads(text, parse_float=Fraction, parse_constant=_reject_constant)


def num(x) -> Fraction:
    """One exact number of the model file."""
    if isinstance(x, bool):
        raise ReferenceError_(f"boolean {x!r} is not a number")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        if not _RATIONAL.match(x):
            raise ReferenceError_(f"{x!r} is not a rational literal")
        if "/" in x:
            top, bottom = x.split("/")
            return Fraction(top.strip()) / Fraction(bottom.strip())
        return Fraction(x.strip())
    raise ReferenceError_(f"{x!r} is not a number")


def vec(x, length: int | None = None) -> list[Fraction]:
    out = [num(e) for e in x]
    if length is not None and len(out) != length:
        raise ReferenceError_(f"vector of length {len(out)}, expected {length}")
    return out


def mat(x, cols: int | None = None) -> list[list[Fraction]]:
    rows = [vec(r) for r in x]
    if not rows:
        raise ReferenceError_("empty matrix")
    for r in rows:
        if len(r) != len(rows[0]) or (cols is not None and len(r) != cols):
            raise ReferenceError_("ragged matrix or wrong column count")
    return rows


def mpf_of(x):
    """An exact Fraction (or int) or an mpf, as an mpf of the reference context."""
    if isinstance(x, Fraction):
        return mp.mpf(x.numerator) / x.denominator
    if isinstance(x, int):
        return mp.mpf(x)
    return mp.mpf(x)


# --------------------------------------------------------------------------------------
# Expressions: an independent recursive-descent evaluator for the spec's grammar.
# Values are Fractions while they are exactly rational; sqrt/log/exp produce mpf unless
# ``exact`` is set (then they raise).  Unary minus binds looser than ^ (as in Python).


_TOKEN = re.compile(
    r"\s*(\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+"
    r"|\*\*|[A-Za-z_]\w*|[-+*/^(),])"
)
_MAX_EXPONENT = 10_000


def _tokenize(text: str) -> list[str]:
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ReferenceError_(f"bad expression text at {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, env: dict, exact: bool, functions: set[str]):
        self.toks = _tokenize(text)
        self.k = 0
        self.env = env
        self.exact = exact
        self.functions = functions

    def peek(self):
        return self.toks[self.k] if self.k < len(self.toks) else None

    def take(self, expected=None):
        t = self.peek()
        if t is None or (expected is not None and t != expected):
            raise ReferenceError_(f"expected {expected!r}, got {t!r}")
        self.k += 1
        return t

    def parse(self):
        v = self.expr()
        if self.peek() is not None:
            raise ReferenceError_(f"trailing text {self.peek()!r}")
        return v

    def expr(self):
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            w = self.term()
            v = _add(v, w) if op == "+" else _add(v, _neg(w))
        return v

    def term(self):
        v = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            w = self.unary()
            v = _mul(v, w) if op == "*" else _div(v, w)
        return v

    def unary(self):
        if self.peek() == "-":
            self.take()
            return _neg(self.unary())
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek() in ("^", "**"):
            self.take()
            e = self.unary()
            if not isinstance(e, Fraction) or e.denominator != 1:
                raise ReferenceError_("exponent is not an integer")
            if abs(e) > _MAX_EXPONENT:
                raise ReferenceError_("exponent too large")
            if isinstance(base, Fraction):
                if base == 0 and e < 0:
                    raise ReferenceError_("division by zero")
                return base ** int(e)
            return base ** int(e)
        return base

    def atom(self):
        t = self.take()
        if t == "(":
            v = self.expr()
            self.take(")")
            return v
        if t[0].isdigit() or t[0] == ".":
            return Fraction(t)
        if t in self.env:
            return self.env[t]
        if t in self.functions and self.peek() == "(":
            self.take("(")
            args = [self.expr()]
            while self.peek() == ",":
                self.take()
                args.append(self.expr())
            self.take(")")
            return self.call(t, args)
        raise ReferenceError_(f"unknown name {t!r}")

    def call(self, f, args):
        if f in ("min", "max"):
            if len(args) < 2:
                raise ReferenceError_(f"{f} needs two or more arguments")
            keyed = sorted(args, key=mpf_of)
            return keyed[0] if f == "min" else keyed[-1]
        if f == "mod":
            a, b = args
            if b == 0:
                raise ReferenceError_("mod by zero")
            return _add(a, _neg(_mul(b, _floor(_div(a, b)))))
        (a,) = args
        if f == "floor":
            return _floor(a)
        if f == "ceil":
            return -_floor(_neg(a))
        if f == "sqrt":
            if isinstance(a, Fraction) and a >= 0:
                p, q = math.isqrt(a.numerator), math.isqrt(a.denominator)
                if p * p == a.numerator and q * q == a.denominator:
                    return Fraction(p, q)
            if self.exact:
                raise ReferenceError_("sqrt is not rational here")
            return mp.sqrt(mpf_of(a))
        if f == "log":
            if a == 1:
                return Fraction(0)
            if self.exact:
                raise ReferenceError_("log is not rational here")
            return mp.log(mpf_of(a))
        if f == "exp":
            if a == 0:
                return Fraction(1)
            if self.exact:
                raise ReferenceError_("exp is not rational here")
            return mp.exp(mpf_of(a))
        raise ReferenceError_(f"unknown function {f}")


def _neg(a):
    return -a


def _add(a, b):
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a + b
    return mpf_of(a) + mpf_of(b)


def _mul(a, b):
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a * b
    return mpf_of(a) * mpf_of(b)


def _div(a, b):
    if b == 0:
        raise ReferenceError_("division by zero")
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a / b
    return mpf_of(a) / mpf_of(b)


def _floor(a):
    if isinstance(a, Fraction):
        return Fraction(math.floor(a))
    return Fraction(int(mp.floor(a)))


POSITION_FUNCTIONS = {"min", "max", "floor", "ceil", "mod"}
TEMPERATURE_FUNCTIONS = POSITION_FUNCTIONS | {"sqrt", "log", "exp"}


def eval_position(text: str, i: int, n: int) -> Fraction:
    """A position-embedding expression at i, n: must be an exact rational."""
    env = {"i": Fraction(i), "n": Fraction(n)}
    v = _Parser(text, env, exact=True, functions=POSITION_FUNCTIONS).parse()
    if not isinstance(v, Fraction):
        raise ReferenceError_("position expression is not rational")
    return v


def eval_temperature(text: str, n: int):
    """A temperature expression at n: a Fraction when rational, else an mpf."""
    env = {"n": Fraction(n)}
    v = _Parser(text, env, exact=False, functions=TEMPERATURE_FUNCTIONS).parse()
    if v <= 0:
        raise ReferenceError_(f"temperature {text!r} is not positive at n = {n}")
    return v


# --------------------------------------------------------------------------------------
# Soft arithmetic: a value is a Fraction when it is exactly rational by construction,
# otherwise an mpf.  Multiplying by an exact 0 gives an exact 0.


def _sadd(a, b):
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a + b
    return mpf_of(a) + mpf_of(b)


def _smul(a, b):
    if (isinstance(a, Fraction) and a == 0) or (isinstance(b, Fraction) and b == 0):
        return Fraction(0)
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a * b
    return mpf_of(a) * mpf_of(b)


def _relu(a):
    if isinstance(a, Fraction):
        return a if a > 0 else Fraction(0)
    return a if a > 0 else mp.mpf(0)


def _matvec(W, x, add=_sadd, mul=_smul):
    out = []
    for row in W:
        acc = Fraction(0)
        for w, v in zip(row, x, strict=True):
            acc = add(acc, mul(w, v))
        out.append(acc)
    return out


def _dot(a, b):
    acc = Fraction(0)
    for u, v in zip(a, b, strict=True):
        acc = _sadd(acc, _smul(u, v))
    return acc


def _vadd(a, b):
    return [_sadd(u, v) for u, v in zip(a, b, strict=True)]


# --------------------------------------------------------------------------------------
# The model, read plainly from the dict


@dataclass
class Head:
    query: list | None
    key: list | None
    query_bias: list | None
    key_bias: list | None
    score: list | None
    value: list
    value_bias: list | None
    output: list | None
    mask: str
    hard: str
    temperature: str | None


@dataclass
class Layer:
    kind: str
    heads: list = field(default_factory=list)
    hidden: list = field(default_factory=list)  # [(W, b)]
    out: tuple | None = None  # (W, b)


_MASKS = {
    "none": "none",
    "leq": "leq",
    "causal": "leq",
    "lt": "lt",
    "strict-causal": "lt",
    "geq": "geq",
    "gt": "gt",
}


class Model:
    def __init__(self, d: dict):
        if d.get("format") != "exactattn/1":
            raise ReferenceError_("format must be exactattn/1")
        self.raw = d
        self.name = d["name"]
        self.alphabet = list(d["alphabet"])
        self.bos = d.get("bos")
        self.eos = d.get("eos")
        self.d = int(d["d"])
        emb = d["embedding"]
        self.token = {t: vec(v, self.d) for t, v in emb["token"].items()}
        for t in self.alphabet + [x for x in (self.bos, self.eos) if x is not None]:
            if t not in self.token:
                raise ReferenceError_(f"no embedding for token {t!r}")
        pos = emb.get("position")
        self.position_exprs = None
        self.position_table = None
        if isinstance(pos, list):
            if len(pos) != self.d:
                raise ReferenceError_("position list must have d expressions")
            self.position_exprs = [str(e) for e in pos]
        elif isinstance(pos, dict):
            self.position_table = [vec(r, self.d) for r in pos["table"]]
        self.temperature = d.get("temperature", "1")
        self.max_length = d.get("max_length")
        self.min_length = d.get("min_length", 1)
        self.layers = [self._layer(x) for x in d["layers"]]
        self.output = d["output"]
        self.reference = d.get("reference")

    def _layer(self, x: dict) -> Layer:
        if x["kind"] == "attention":
            return Layer("attention", heads=[self._head(h) for h in x["heads"]])
        if x["kind"] == "ffn":
            hidden = []
            cols = self.d
            for h in x["hidden"]:
                W = mat(h["weight"], cols)
                hidden.append((W, vec(h.get("bias", [0] * len(W)), len(W))))
                cols = len(W)
            W = mat(x["output"]["weight"], cols)
            if len(W) != self.d:
                raise ReferenceError_("ffn output must have d rows")
            return Layer(
                "ffn", hidden=hidden, out=(W, vec(x["output"].get("bias", [0] * self.d), self.d))
            )
        raise ReferenceError_(f"unknown layer kind {x['kind']!r}")

    def _head(self, h: dict) -> Head:
        def opt_vec(key, length):
            return vec(h[key], length) if key in h else None

        if "score" in h:
            query = key = None
            score = mat(h["score"], self.d)
            qb = kb = None
        else:
            query = mat(h["query"], self.d)
            key = mat(h["key"], self.d)
            if len(query) != len(key):
                raise ReferenceError_("query and key must have the same number of rows")
            score = None
            qb = opt_vec("query_bias", len(query))
            kb = opt_vec("key_bias", len(key))
        value = mat(h["value"], self.d)
        out = mat(h["output"], len(value)) if "output" in h else None
        if out is None and len(value) != self.d:
            raise ReferenceError_("value must have d rows when output is absent")
        return Head(
            query=query,
            key=key,
            query_bias=qb,
            key_bias=kb,
            score=score,
            value=value,
            value_bias=opt_vec("value_bias", len(value)),
            output=out,
            mask=_MASKS[h.get("mask", "none")],
            hard=h.get("hard", "average"),
            temperature=h.get("temperature"),
        )

    # ---- sequence and embedding

    def sequence(self, tokens: list[str]) -> list[tuple[int, str]]:
        """[(position number, token)] for the input, with BOS at 0 and EOS at n + 1."""
        n = len(tokens)
        seq = []
        if self.bos is not None:
            seq.append((0, self.bos))
        for p, t in enumerate(tokens, start=1):
            seq.append((p, t))
        if self.eos is not None:
            seq.append((n + 1, self.eos))
        return seq

    def position_vector(self, p: int, n: int) -> list[Fraction]:
        if self.position_exprs is not None:
            return [eval_position(e, p, n) for e in self.position_exprs]
        if self.position_table is not None:
            if self.max_length is None or n > int(self.max_length):
                raise ReferenceError_(f"n = {n} is beyond max_length")
            return list(self.position_table[p])
        return [Fraction(0)] * self.d

    def embed(self, tokens: list[str]) -> list[list[Fraction]]:
        n = len(tokens)
        return [
            [e + q for e, q in zip(self.token[t], self.position_vector(p, n), strict=True)]
            for p, t in self.sequence(tokens)
        ]

    def tau(self, head: Head, n: int):
        return eval_temperature(head.temperature or self.temperature, n)


def visible(mask: str, i: int, positions: list[int]) -> list[int]:
    """Indices (into the sequence) of the keys visible from the query at position i."""
    out = []
    for idx, j in enumerate(positions):
        if mask == "none":
            ok = True
        elif mask == "leq":
            ok = j <= i
        elif mask == "lt":
            ok = j < i
        elif mask == "geq":
            ok = j >= i
        elif mask == "gt":
            ok = j > i
        else:
            raise ReferenceError_(f"unknown mask {mask!r}")
        if ok:
            out.append(idx)
    return out


def scores(head: Head, xs: list) -> list[list]:
    """s[a][b]: score of query (sequence index) a against key b, same arithmetic as xs."""
    if head.score is not None:
        Ax = [_matvec(head.score, x) for x in xs]
        return [[_dot(xa, Ax[b]) for b in range(len(xs))] for xa in xs]
    qs, ks = [], []
    for x in xs:
        q = _matvec(head.query, x)
        if head.query_bias is not None:
            q = _vadd(q, head.query_bias)
        k = _matvec(head.key, x)
        if head.key_bias is not None:
            k = _vadd(k, head.key_bias)
        qs.append(q)
        ks.append(k)
    return [[_dot(q, k) for k in ks] for q in qs]


def values(head: Head, xs: list) -> list[list]:
    out = []
    for x in xs:
        v = _matvec(head.value, x)
        if head.value_bias is not None:
            v = _vadd(v, head.value_bias)
        out.append(v)
    return out


def hard_weights(head: Head, s_row: list[Fraction], vis: list[int]) -> dict[int, Fraction]:
    top = max(s_row[b] for b in vis)
    M = [b for b in vis if s_row[b] == top]
    if head.hard == "average":
        return {b: Fraction(1, len(M)) for b in M}
    if head.hard == "leftmost":
        return {min(M): Fraction(1)}
    if head.hard == "rightmost":
        return {max(M): Fraction(1)}
    raise ReferenceError_(f"unknown hard rule {head.hard!r}")


def _soft_weights(s_row: list, vis: list[int], tau) -> dict[int, object]:
    """Softmax weights; exactly uniform (Fractions) when every visible score is the same
    exact number, mpf otherwise."""
    ss = [s_row[b] for b in vis]
    if all(isinstance(s, Fraction) for s in ss) and len(set(ss)) == 1:
        return {b: Fraction(1, len(vis)) for b in vis}
    top = max(mpf_of(s) for s in ss)
    t = mpf_of(tau)
    e = {b: mp.exp((mpf_of(s_row[b]) - top) / t) for b in vis}
    z = mp.fsum(e.values())
    return {b: e[b] / z for b in vis}


def _soft_mix(weights: dict[int, object], vs: list[list]) -> list:
    """sum_b weights[b] * vs[b]; a coordinate where every weighted value is the same exact
    number equals that number exactly (the weights sum to 1)."""
    m = len(vs[0])
    out = []
    for c in range(m):
        col = [vs[b][c] for b in weights]
        if all(isinstance(v, Fraction) for v in col) and len(set(col)) == 1:
            out.append(col[0])
            continue
        acc = Fraction(0)
        for b, w in weights.items():
            acc = _sadd(acc, _smul(w, vs[b][c]))
        out.append(acc)
    return out


@dataclass
class ScoreRecord:
    layer: int
    head: int
    query: int  # position number
    top_key: int
    other_key: int
    gap: Fraction


@dataclass
class InputEval:
    tokens: list[str]
    positions: list[int]
    hard: list[list[list[Fraction]]]  # hard[l][seq index][k]; l = 0 embedding
    soft: list[list[list]]
    gaps: list[ScoreRecord]  # every strict gap, in (layer, head, query, key) order


def evaluate_input(model: Model, tokens: list[str]) -> InputEval:
    n = len(tokens)
    seq = model.sequence(tokens)
    positions = [p for p, _ in seq]
    x0 = model.embed(tokens)
    hard = [x0]
    soft = [[list(r) for r in x0]]
    gaps: list[ScoreRecord] = []
    for li, layer in enumerate(model.layers):
        xh, xs = hard[-1], soft[-1]
        if layer.kind == "attention":
            new_h = [list(r) for r in xh]
            new_s = [list(r) for r in xs]
            for hi, head in enumerate(layer.heads):
                sh = scores(head, xh)
                ss = scores(head, xs)
                vh = values(head, xh)
                vs = values(head, xs)
                tau = model.tau(head, n)
                for a, i in enumerate(positions):
                    vis = visible(head.mask, i, positions)
                    if not vis:
                        continue  # the head adds the zero vector
                    top = max(sh[a][b] for b in vis)
                    top_key = min(positions[b] for b in vis if sh[a][b] == top)
                    for b in vis:
                        if sh[a][b] < top:
                            gaps.append(
                                ScoreRecord(li, hi, i, top_key, positions[b], top - sh[a][b])
                            )
                    # hard
                    wh = hard_weights(head, sh[a], vis)
                    mix = [
                        sum((w * vh[b][c] for b, w in wh.items()), Fraction(0))
                        for c in range(len(vh[0]))
                    ]
                    add = mix if head.output is None else _matvec(head.output, mix)
                    new_h[a] = [u + v for u, v in zip(new_h[a], add, strict=True)]
                    # soft
                    ws = _soft_weights(ss[a], vis, tau)
                    mix_s = _soft_mix(ws, vs)
                    add_s = mix_s if head.output is None else _matvec(head.output, mix_s)
                    new_s[a] = _vadd(new_s[a], add_s)
            hard.append(new_h)
            soft.append(new_s)
        else:
            hard.append([_ffn(layer, x) for x in xh])
            soft.append([_ffn(layer, x) for x in xs])
    return InputEval(list(tokens), positions, hard, soft, gaps)


def _ffn(layer: Layer, x: list) -> list:
    h = x
    for W, b in layer.hidden:
        h = [_relu(v) for v in _vadd(_matvec(W, h), b)]
    W, b = layer.out
    return _vadd(x, _vadd(_matvec(W, h), b))


# --------------------------------------------------------------------------------------
# Outputs and decisions


def output_position(model: Model, n: int) -> int:
    P = model.output["position"]
    return {"last": n, "first": 1, "bos": 0, "eos": n + 1}[P] if isinstance(P, str) else int(P)


def _index_of(positions: list[int], p: int) -> int:
    if p not in positions:
        raise ReferenceError_(f"output position {p} does not exist")
    return positions.index(p)


def _decide_greater(y, t: Fraction):
    """True / False / UNDECIDED for y > t (y exact or mpf)."""
    if isinstance(y, Fraction):
        return y > t
    diff = y - mpf_of(t)
    if abs(diff) <= _UNDECIDED_BAND * max(1, abs(mpf_of(t))):
        return UNDECIDED
    return bool(diff > 0)


def _argmax_label(entries: list, labels: list[str]):
    """The soft label: TIE only for an exact tie, UNDECIDED when an inexact entry is within
    the band of the top."""
    if all(isinstance(e, Fraction) for e in entries):
        best = [k for k, e in enumerate(entries) if e == max(entries)]
        return labels[best[0]] if len(best) == 1 else TIE
    top = max(mpf_of(e) for e in entries)
    near = [k for k, e in enumerate(entries) if abs(mpf_of(e) - top) <= _UNDECIDED_BAND]
    if len(near) == 1:
        return labels[near[0]]
    if not all(isinstance(entries[k], Fraction) for k in near):
        return UNDECIDED
    exact_top = max(entries[k] for k in near)
    best = [k for k in near if entries[k] == exact_top]
    return labels[best[0]] if len(best) == 1 else TIE


def decide(model: Model, ev: InputEval, which: str):
    """(decision, margin) of the hard ("hard") or soft ("soft") meaning on one input.
    margin is only meaningful (exact) for the hard meaning."""
    n = len(ev.tokens)
    x = ev.hard[-1] if which == "hard" else ev.soft[-1]
    out = model.output
    if out["kind"] == "accept":
        idx = _index_of(ev.positions, output_position(model, n))
        w = vec(out["weight"], model.d)
        b = num(out.get("bias", 0))
        t = num(out.get("threshold", 0))
        y = _sadd(_dot(w, x[idx]), b)
        if which == "hard":
            return y > t, abs(y - t)
        return _decide_greater(y, t), None
    if out["kind"] == "argmax":
        W = mat(out["weight"], model.d)
        b = vec(out.get("bias", [0] * len(W)), len(W))
        labels = list(out["labels"])
        decisions, margin = [], None
        for p in range(1, n + 1):
            e = _vadd(_matvec(W, x[_index_of(ev.positions, p)]), b)
            if which == "hard":
                srt = sorted(e, reverse=True)
                m = srt[0] - srt[1] if len(srt) > 1 else None
                margin = m if margin is None or (m is not None and m < margin) else margin
                best = [k for k, v in enumerate(e) if v == srt[0]]
                decisions.append(labels[best[0]] if len(best) == 1 else TIE)
            else:
                decisions.append(_argmax_label(e, labels))
        if which == "soft" and UNDECIDED in decisions:
            return UNDECIDED, None
        return decisions, margin
    raise ReferenceError_(f"output kind {out['kind']!r} has no decisions in the reference")


def _flip(dh, margin, ds) -> bool:
    """Whether a decided soft meaning flips a hard decision (a hard tie never flips)."""
    if isinstance(dh, list):
        return any(h != TIE and s != h for h, s in zip(dh, ds, strict=True))
    return margin != 0 and ds != dh


def oracle(model: Model, tokens: list[str]):
    """The reference's expected output for this input, or None when it has none."""
    ref = model.reference
    if ref is None:
        return None
    if ref["kind"] == "cases":
        for case in ref["cases"]:
            if list(case["input"]) == list(tokens):
                return case["output"]
        return None
    if ref["kind"] == "dyck":
        pairs = {p[0]: p[1] for p in ref["pairs"]}
        closing = {p[1]: p[0] for p in ref["pairs"]}
        stack = []
        for t in tokens:
            if t in pairs:
                stack.append(t)
            elif t in closing:
                if not stack or stack[-1] != closing[t]:
                    return False
                stack.pop()
            else:
                return False
        return not stack
    if ref["kind"] == "regex":
        return re.fullmatch(ref["pattern"], "".join(tokens)) is not None
    raise ReferenceError_(f"reference kind {ref['kind']!r} not supported by the reference")


# --------------------------------------------------------------------------------------
# One length n


@dataclass
class LengthResult:
    n: int
    inputs: int
    gamma: Fraction | None
    gamma_witness: dict | None
    x_max: Fraction
    tau: object
    activation_max: list[Fraction]
    error: list  # mpf (or exact Fraction) per layer
    error_witness: list[dict]
    invariant: str
    disagreements: int
    undecided: int
    first_disagreement: list[str] | None
    min_margin: Fraction | None
    reference_mismatches: dict | None
    evaluations: list[InputEval] = field(repr=False, default_factory=list)


def all_inputs(model: Model, n: int) -> list[list[str]]:
    return [list(w) for w in itertools.product(model.alphabet, repeat=n)]


def check_length(model: Model, n: int, keep_evaluations: bool = False) -> LengthResult:
    inputs = all_inputs(model, n)
    evals = [evaluate_input(model, w) for w in inputs]
    L = len(model.layers)

    # gamma(n), on hard scores
    gamma, gamma_witness = None, None
    for ev in evals:
        for r in ev.gaps:
            if gamma is None or r.gap < gamma:
                gamma = r.gap
                gamma_witness = {
                    "input": ev.tokens,
                    "layer": r.layer,
                    "head": r.head,
                    "query": r.query,
                    "top_key": r.top_key,
                    "other_key": r.other_key,
                }

    # x_max(n) and the hard activation maxima
    x_max = max(abs(v) for ev in evals for row in ev.hard[0] for v in row)
    activation_max = [
        max(abs(v) for ev in evals for row in ev.hard[l + 1] for v in row) for l in range(L)
    ]

    # per-layer error
    error, error_witness = [], []
    for l in range(L):
        best, wit = None, None
        for ev in evals:
            for a, p in enumerate(ev.positions):
                e = max(
                    abs(mpf_of(s) - mpf_of(h))
                    for s, h in zip(ev.soft[l + 1][a], ev.hard[l + 1][a], strict=True)
                )
                if best is None or e > best:
                    best, wit = e, {"input": ev.tokens, "position": p}
        error.append(best)
        error_witness.append(wit)
    feeding = error[:-1]
    if all(e <= 1 for e in feeding):
        invariant = "holds"
    else:
        invariant = "fails"

    # decisions
    disagreements, undecided, first, min_margin = 0, 0, None, None
    hard_mis = soft_mis = soft_undecided = 0
    any_oracle = False
    for ev in evals:
        dh, margin = decide(model, ev, "hard")
        ds, _ = decide(model, ev, "soft")
        if margin is not None and (min_margin is None or margin < min_margin):
            min_margin = margin
        if ds == UNDECIDED:
            undecided += 1
        elif _flip(dh, margin, ds):
            disagreements += 1
            if first is None:
                first = ev.tokens
        expected = oracle(model, ev.tokens)
        if expected is not None:
            any_oracle = True
            if dh != expected:
                hard_mis += 1
            if ds == UNDECIDED:
                soft_undecided += 1
            elif ds != expected:
                soft_mis += 1
    ref = None
    if model.reference is not None:
        ref = {
            "hard": hard_mis,
            "soft": soft_mis,
            "soft_undecided": soft_undecided,
            "compared": any_oracle,
        }
    tau = eval_temperature(model.temperature, n)
    return LengthResult(
        n=n,
        inputs=len(inputs),
        gamma=gamma,
        gamma_witness=gamma_witness,
        x_max=x_max,
        tau=tau,
        activation_max=activation_max,
        error=error,
        error_witness=error_witness,
        invariant=invariant,
        disagreements=disagreements,
        undecided=undecided,
        first_disagreement=first,
        min_margin=min_margin,
        reference_mismatches=ref,
        evaluations=evals if keep_evaluations else [],
    )


def check(model_dict: dict, max_n: int, min_n: int = 1) -> list[LengthResult]:
    model = Model(model_dict)
    return [check_length(model, n) for n in range(min_n, max_n + 1)]


def gap_at(model: Model, witness: dict) -> Fraction:
    """The hard score gap s[query, top_key] - s[query, other_key] at a witness."""
    ev = evaluate_input(model, witness["input"])
    xh = ev.hard[witness["layer"]]
    head = model.layers[witness["layer"]].heads[witness["head"]]
    s = scores(head, xh)
    a = ev.positions.index(witness["query"])
    top = ev.positions.index(witness["top_key"])
    other = ev.positions.index(witness["other_key"])
    return s[a][top] - s[a][other]


def is_top_key(model: Model, witness: dict) -> bool:
    """Whether top_key attains the maximum visible hard score and other_key is visible."""
    ev = evaluate_input(model, witness["input"])
    xh = ev.hard[witness["layer"]]
    head = model.layers[witness["layer"]].heads[witness["head"]]
    s = scores(head, xh)
    a = ev.positions.index(witness["query"])
    vis = visible(head.mask, witness["query"], ev.positions)
    vis_pos = [ev.positions[b] for b in vis]
    top = max(s[a][b] for b in vis)
    return (
        witness["top_key"] in vis_pos
        and witness["other_key"] in vis_pos
        and s[a][ev.positions.index(witness["top_key"])] == top
    )


def error_at(ev: InputEval, layer: int, position: int):
    """||soft - hard||_inf after `layer` at one position number of one evaluated input."""
    a = ev.positions.index(position)
    return max(
        abs(mpf_of(s) - mpf_of(h))
        for s, h in zip(ev.soft[layer + 1][a], ev.hard[layer + 1][a], strict=True)
    )
