"""Model types: the validated, exact, immutable model and its parts (format ``exactattn/1``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactattn.core.errors import ModelError
from exactattn.model.expr import Expr, ExprError, NotRationalError

# the public model types, listed once: ``exactattn.model`` re-exports exactly these
__all__ = [
    "AcceptOutput",
    "ArgmaxOutput",
    "AttentionLayer",
    "DEFAULT_VALUE_TOLERANCE",
    "FFNLayer",
    "HARD_RULES",
    "Head",
    "Layer",
    "MASKS",
    "Mat",
    "Model",
    "Output",
    "PositionEmbedding",
    "Reference",
    "ValueOutput",
    "Vec",
]

Vec = tuple[Fraction, ...]
Mat = tuple[Vec, ...]

MASKS = {
    "none": "none",
    "leq": "leq",
    "causal": "leq",
    "lt": "lt",
    "strict-causal": "lt",
    "geq": "geq",
    "gt": "gt",
}
HARD_RULES = ("average", "leftmost", "rightmost")
DEFAULT_VALUE_TOLERANCE = Fraction(1, 100)


@dataclass(frozen=True)
class Head:
    """One attention head in query/key form (the ``score`` form A becomes Q = Aᵀ, K = I)."""

    query: Mat
    query_bias: Vec
    key: Mat
    key_bias: Vec
    value: Mat
    value_bias: Vec
    output: Mat | None  # None: identity (m = d)
    mask: str
    hard: str
    temperature: Expr | None
    name: str | None = None
    score_form: bool = False


@dataclass(frozen=True)
class AttentionLayer:
    heads: tuple[Head, ...]
    name: str | None = None
    kind: str = "attention"


@dataclass(frozen=True)
class FFNLayer:
    hidden: tuple[tuple[Mat, Vec], ...]
    output: tuple[Mat, Vec]
    name: str | None = None
    kind: str = "ffn"


Layer = AttentionLayer | FFNLayer


@dataclass(frozen=True)
class AcceptOutput:
    position: str | int
    weight: Vec
    bias: Fraction
    threshold: Fraction
    kind: str = "accept"


@dataclass(frozen=True)
class ArgmaxOutput:
    weight: Mat
    bias: Vec
    labels: tuple[str, ...]
    kind: str = "argmax"


@dataclass(frozen=True)
class ValueOutput:
    weight: Mat
    bias: Vec
    tolerance: Fraction = DEFAULT_VALUE_TOLERANCE
    kind: str = "value"


Output = AcceptOutput | ArgmaxOutput | ValueOutput


@dataclass(frozen=True)
class Reference:
    """An oracle: ``cases`` (explicit outputs) or a language (``ltl``, ``dyck``, ``regex``)."""

    kind: str
    cases: dict[tuple[str, ...], Any] | None = None
    formula: str | None = None
    pairs: tuple[str, ...] | None = None
    pattern: str | None = None
    program: str | None = None  # kind "rasp": the program text (exactattn/rasp)
    gap_bound: str | None = None  # kind "rasp": the compiler's lower bound on γ(n)
    head_gap_bounds: tuple[tuple[int, int, str], ...] = ()  # kind "rasp": (layer, head, bound)
    output_scale: str | None = None  # kind "rasp": an integer output k is shown as k·scale(n)


@dataclass(frozen=True)
class PositionEmbedding:
    kind: str  # "none" | "exprs" | "table"
    exprs: tuple[Expr, ...] = ()
    table: tuple[Vec, ...] = ()


@dataclass(frozen=True, eq=False)
class Model:
    """A validated model. Compared and hashed by identity (it holds the raw source)."""

    name: str
    description: str
    alphabet: tuple[str, ...]
    bos: str | None
    eos: str | None
    d: int
    token_embedding: dict[str, Vec]
    position: PositionEmbedding
    layers: tuple[Layer, ...]
    temperature: Expr
    output: Output
    reference: Reference | None
    min_length: int
    max_length: int | None
    coordinates: tuple[str, ...] | None = None
    source: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    claims: Any = None  # exactattn.model.claimed.ModelClaims | None (docs/model-format.md)
    built_by: Any = None  # exactattn.model.provenance.BuiltBy | None: how a builder made it

    # -- sequence layout --------------------------------------------------------
    def length(self, n: int) -> int:
        """Number of positions T the transformer sees for n input symbols."""
        return n + (self.bos is not None) + (self.eos is not None)

    def first_input_position(self) -> int:
        return 1 if self.bos is not None else 0

    def tokens(self, word: Sequence[str]) -> list[str]:
        seq = list(word)
        if self.bos is not None:
            seq = [self.bos, *seq]
        if self.eos is not None:
            seq = [*seq, self.eos]
        return seq

    def position_index(self, p: int) -> int:
        """The spec's position number i of sequence slot p (BOS is 0, w_1 is 1)."""
        return p if self.bos is not None else p + 1

    def output_positions(self, n: int) -> list[int]:
        """Sequence slots of the input symbols 1..n (for argmax/value outputs)."""
        start = self.first_input_position()
        return list(range(start, start + n))

    def accept_slot(self, n: int) -> int:
        """Sequence slot that an ``accept`` output reads."""
        out = self.output
        assert isinstance(out, AcceptOutput)
        pos = out.position
        start = self.first_input_position()
        if pos == "last":
            return start + n - 1
        if pos == "first":
            return start
        if pos == "bos":
            return 0
        if pos == "eos":
            return self.length(n) - 1
        assert isinstance(pos, int)
        # integer positions use the spec's numbering (BOS 0, w_1 at 1, EOS at n+1)
        return pos if self.bos is not None else pos - 1

    def check_length(self, n: int) -> None:
        """Refuse lengths the model does not support, naming the limit."""
        if n < 1:
            raise ModelError("", f"n = {n}: inputs have at least one symbol", "use n >= 1")
        if self.max_length is not None and n > self.max_length:
            raise ModelError(
                "max_length",
                f"the model supports n <= {self.max_length}, asked for n = {n}",
                f"use n <= {self.max_length}: lower --max-n or --n, or shorten the input",
            )
        out = self.output
        if isinstance(out, AcceptOutput) and isinstance(out.position, int):
            slot = self.accept_slot(n)
            if not 0 <= slot < self.length(n):
                raise ModelError(
                    "output.position",
                    f"position {out.position} does not exist at n = {n}",
                    "use a position between 0 and n+1 that exists, or 'last'",
                )

    # -- embeddings and temperatures -------------------------------------------
    def position_vectors(self, n: int) -> list[Vec]:
        """P(p, n) for every sequence slot, exact; errors name coordinate, i and n."""
        T = self.length(n)
        pe = self.position
        if pe.kind == "none":
            return [tuple(Fraction(0) for _ in range(self.d))] * T
        if pe.kind == "table":
            # row i is P(i, ·) for the spec's position number i (BOS 0, w_1 1, EOS n+1)
            rows_needed = self.position_index(T - 1) + 1
            if rows_needed > len(pe.table):
                raise ModelError(
                    "embedding.position.table",
                    f"has {len(pe.table)} rows but n = {n} needs {rows_needed} "
                    "(rows are indexed by position number: BOS 0, w_1 1, EOS n+1)",
                    "add rows or lower --max-n",
                )
            return [pe.table[self.position_index(p)] for p in range(T)]
        # each distinct expression once per slot, and once per n if it does not use i
        # (a wide model repeats "0" in most coordinates: d = 10^6 means 10^6 slots per row)
        first: dict[int, int] = {}  # id of a distinct expression -> its first coordinate
        codes = [first.setdefault(id(e), k) for k, e in enumerate(pe.exprs)]
        distinct = sorted(set(codes))
        fixed: dict[int, Fraction] = {}
        rows = []
        for p in range(T):
            i = self.position_index(p)
            env = {"i": i, "n": n}
            vals: dict[int, Fraction] = {}
            for k in distinct:
                e = pe.exprs[k]
                if k in fixed:
                    vals[k] = fixed[k]
                    continue
                try:
                    vals[k] = e.eval_exact(env)
                except NotRationalError as exc:
                    raise ModelError(
                        f"embedding.position[{k}]",
                        f"'{e.text}' is irrational at i = {i}, n = {n} ({exc})",
                        "position embeddings must be rational at every position",
                    ) from None
                except ExprError as exc:
                    raise ModelError(
                        f"embedding.position[{k}]",
                        f"'{e.text}' is undefined at i = {i}, n = {n}: {exc}",
                        "make the expression defined at every position (e.g. use i+1)",
                    ) from None
                if "i" not in e.variables():
                    fixed[k] = vals[k]
            rows.append(
                tuple(map(vals.__getitem__, codes))
                if len(distinct) > 1
                else (vals[distinct[0]],) * len(codes)
            )
        return rows

    def head_temperature(self, layer: int, head: int, override: Expr | None = None) -> Expr:
        if override is not None:
            return override
        h = self.layers[layer].heads[head]  # type: ignore[union-attr]
        return h.temperature if h.temperature is not None else self.temperature

    def attention_heads(self) -> list[tuple[int, int, Head]]:
        return [
            (li, hi, h)
            for li, layer in enumerate(self.layers)
            if isinstance(layer, AttentionLayer)
            for hi, h in enumerate(layer.heads)
        ]


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------
