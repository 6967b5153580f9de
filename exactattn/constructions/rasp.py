"""A small RASP-style front end: named residual coordinates compiled to format 1.

Writing format-1 matrices by hand is error-prone: a score is a bilinear form over
d coordinates and one misplaced entry silently changes the language. Here a program
names its coordinates, and every step says in those names what it reads and what it
writes:

* ``token`` / ``indicator`` / ``constant`` / ``position``: embedding coordinates;
* ``head`` + ``attention``: select (a bilinear score ``Σ c·q[a]·k[b]`` over named
  query/key coordinates, with a mask) and aggregate (values written to new
  coordinates); several heads in one layer read the same input;
* ``ffn``: elementwise ReLU steps (named hidden units, outputs to new coordinates);
* helpers in S-RASP style: ``prefix_mean`` (uniform causal attention, exact in both
  meanings), ``to_integer`` (the ratio ``c/p`` read back as the integer ``c`` by a
  parabolic lookup over positions) and ``exists`` (any flag set, exactly 0/1).

Every written coordinate is fresh (it starts at 0, so the residual add stores the
value exactly) and may be read only by later layers; both rules are checked, so a
program cannot read a value before it exists. ``to_model`` emits the dict with
``coordinates`` naming each residual coordinate.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = ["Head", "Program", "ProgramError", "num"]

Num = int | Fraction | str
Terms = Mapping[str, Num]

MASKS = ("none", "leq", "lt", "geq", "gt")


class ProgramError(ValueError):
    """A program step that cannot compile (unknown or unready coordinate, reuse, ...)."""


def _frac(x: Num) -> Fraction:
    if isinstance(x, bool) or not isinstance(x, (int, Fraction, str)):
        raise ProgramError(f"{x!r}: numbers are int, Fraction or 'p/q' strings")
    return Fraction(x)


def num(x: Num) -> int | str:
    """JSON form of an exact number: an int, or a 'p/q' string (never a float)."""
    f = _frac(x)
    return f.numerator if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


@dataclass
class Head:
    """One attention head in coordinate names (compiled to matrices by ``to_model``).

    ``score`` terms ``(a, b, c)`` add ``c · x_i[a] · x_j[b]`` (query i, key j);
    ``values`` maps each output coordinate to a linear combination of key coordinates.
    """

    score: list[tuple[str, str, Fraction]]
    values: dict[str, dict[str, Fraction]]
    mask: str
    hard: str
    name: str | None


@dataclass
class _Layer:
    kind: str
    name: str | None
    heads: list[Head] = field(default_factory=list)
    units: list[tuple[dict[str, Fraction], Fraction]] = field(default_factory=list)
    outputs: dict[str, dict[int, Fraction]] = field(default_factory=dict)


class Program:
    """A transformer under construction, one named coordinate per residual dimension."""

    def __init__(
        self,
        name: str,
        alphabet: Sequence[str],
        *,
        bos: str | None = None,
        eos: str | None = None,
        description: str = "",
    ) -> None:
        if len(set(alphabet)) != len(alphabet) or not alphabet:
            raise ProgramError("alphabet: expected a non-empty list of distinct tokens")
        for special in (bos, eos):
            if special is not None and special in alphabet:
                raise ProgramError(f"{special!r} is both a special token and in the alphabet")
        self.name = name
        self.description = description
        self.alphabet = list(alphabet)
        self.bos = bos
        self.eos = eos
        self.coords: list[str] = []
        self._ready: dict[str, int] = {}  # coordinate -> first layer index that may read it
        self._token: dict[str, dict[str, Fraction]] = {}
        self._position: dict[str, str] = {}
        self._layers: list[_Layer] = []
        self._pending: list[Head] = []

    # -- coordinates ----------------------------------------------------------------
    @property
    def tokens(self) -> list[str]:
        """Every token the embedding must cover: alphabet, then BOS and EOS if any."""
        return [*self.alphabet, *(t for t in (self.bos, self.eos) if t is not None)]

    def _new(self, name: str, ready: int) -> str:
        if name in self._ready:
            raise ProgramError(f"coordinate {name!r} already exists (coordinates are written once)")
        self.coords.append(name)
        self._ready[name] = ready
        return name

    def token(self, name: str, values: Mapping[str, Num]) -> str:
        """A coordinate set by the token embedding (tokens not listed get 0)."""
        unknown = set(values) - set(self.tokens)
        if unknown:
            raise ProgramError(f"{name}: unknown tokens {sorted(unknown)}")
        self._token[name] = {t: _frac(v) for t, v in values.items()}
        return self._new(name, 0)

    def indicator(self, name: str, tokens: Collection[str]) -> str:
        """1 on the given tokens, 0 elsewhere."""
        return self.token(name, {t: 1 for t in tokens})

    def constant(self, name: str = "one") -> str:
        """1 at every position (the bias coordinate of queries and FFNs)."""
        return self.token(name, {t: 1 for t in self.tokens})

    def position(self, name: str, expr: str) -> str:
        """A coordinate set by the position embedding: an expression in i and n."""
        self._position[name] = expr
        return self._new(name, 0)

    def _check_read(self, coord: str, where: str) -> None:
        layer = len(self._layers)
        if coord not in self._ready:
            raise ProgramError(f"{where}: unknown coordinate {coord!r}")
        if self._ready[coord] > layer:
            raise ProgramError(f"{where}: {coord!r} is written by this layer; read it later")

    # -- attention --------------------------------------------------------------------
    def head(
        self,
        *,
        values: Mapping[str, Terms],
        score: Sequence[tuple[str, str, Num]] = (),
        mask: str = "none",
        hard: str = "average",
        name: str | None = None,
    ) -> Head:
        """Select (score terms, mask) and aggregate (values into new coordinates).

        The head belongs to the next ``attention`` layer; its outputs become readable
        after that layer.
        """
        where = f"head {name or '?'}"
        if mask not in MASKS:
            raise ProgramError(f"{where}: mask {mask!r} not in {MASKS}")
        if hard not in ("average", "leftmost", "rightmost"):
            raise ProgramError(f"{where}: hard rule {hard!r}")
        terms = []
        for a, b, c in score:
            self._check_read(a, where)
            self._check_read(b, where)
            terms.append((a, b, _frac(c)))
        vals: dict[str, dict[str, Fraction]] = {}
        for out, combo in values.items():
            for src in combo:
                self._check_read(src, where)
            vals[out] = {src: _frac(c) for src, c in combo.items()}
        for out in vals:
            self._new(out, len(self._layers) + 1)
        h = Head(terms, vals, mask, hard, name)
        self._pending.append(h)
        return h

    def attention(self, *heads: Head, name: str | None = None) -> None:
        """Close a layer made of the given heads (all created since the last layer)."""
        if not heads or list(heads) != self._pending:
            raise ProgramError(f"layer {name or '?'}: pass exactly the heads created for it")
        self._layers.append(_Layer("attention", name, heads=list(heads)))
        self._pending = []

    def aggregate(
        self,
        *,
        values: Mapping[str, Terms],
        score: Sequence[tuple[str, str, Num]] = (),
        mask: str = "none",
        name: str | None = None,
    ) -> None:
        """A one-head attention layer."""
        h = self.head(values=values, score=score, mask=mask, name=name)
        self.attention(h, name=name)

    # -- feed-forward -------------------------------------------------------------------
    def ffn(
        self,
        units: Sequence[tuple[Terms, Num]],
        outputs: Mapping[str, Mapping[int, Num]],
        *,
        name: str | None = None,
    ) -> None:
        """Elementwise step: hidden ``u_k = ReLU(Σ c·x[a] + b_k)``, outputs ``Σ c_k·u_k``."""
        if self._pending:
            raise ProgramError(f"ffn {name or '?'}: close the pending attention layer first")
        where = f"ffn {name or '?'}"
        hidden = []
        for combo, bias in units:
            for src in combo:
                self._check_read(src, where)
            hidden.append(({s: _frac(c) for s, c in combo.items()}, _frac(bias)))
        outs: dict[str, dict[int, Fraction]] = {}
        for out, combo in outputs.items():
            for k in combo:
                if not 0 <= k < len(hidden):
                    raise ProgramError(f"{where}: output {out!r} reads missing unit {k}")
            outs[out] = {k: _frac(c) for k, c in combo.items()}
        for out in outs:
            self._new(out, len(self._layers) + 1)
        self._layers.append(_Layer("ffn", name, units=hidden, outputs=outs))

    # -- S-RASP-style helpers -------------------------------------------------------------
    def prefix_mean(self, out: str, value: Terms, *, strict: bool = False) -> str:
        """``out_i`` = mean of ``value`` over keys j ≤ i (j < i if strict): uniform
        attention (zero query), so the soft meaning reproduces it exactly."""
        self.aggregate(values={out: value}, mask="lt" if strict else "leq", name=out)
        return out

    def to_integer(
        self, out: str, ratio: str, inv: str, pos: str, pos_sq: str, *, square: str | None = None
    ) -> str:
        """Read an integer c from ``ratio = c/p`` (``inv = 1/p`` at the query) as a position.

        Score ``2·ratio_i·j − inv_i·j² = (c² − (c − j)²)/p`` over keys j ≤ i (``pos``,
        ``pos_sq`` hold j and j²): the maximum is at j = c when 0 ≤ c ≤ i (at j = 0
        when c < 0), and every other key is at least 1/p lower. The value is j (and
        j² into ``square`` if given), so ``out = max(c, 0)`` exactly.
        """
        values: dict[str, Terms] = {out: {pos: 1}}
        if square is not None:
            values[square] = {pos_sq: 1}
        self.aggregate(
            values=values, score=[(ratio, pos, 2), (inv, pos_sq, -1)], mask="leq", name=out
        )
        return out

    def exists(self, out: str, flag: str, one: str) -> str:
        """``out`` = 1 if some position has ``flag`` = 1 else 0 (flags must be 0/1).

        Score ``flag_j``: the flagged positions tie at the top (gap 1) and their mean
        flag is exactly 1; with no flag every score is 0 and the mean is 0.
        """
        self.aggregate(values={out: {flag: 1}}, score=[(one, flag, 1)], mask="none", name=out)
        return out

    # -- output ------------------------------------------------------------------------------
    def accept(
        self, weights: Terms, *, threshold: Num, bias: Num = 0, position: str | int = "last"
    ) -> dict[str, Any]:
        """An ``accept`` output: y = Σ w·x[a] + bias at ``position``; accept iff y > threshold."""
        for src in weights:
            self._check_read(src, "output")
        w = [num(weights.get(c, 0)) for c in self.coords]
        return {
            "kind": "accept",
            "position": position,
            "weight": w,
            "bias": num(bias),
            "threshold": num(threshold),
        }

    def to_model(
        self,
        output: Mapping[str, Any],
        *,
        temperature: str | None = None,
        reference: Mapping[str, Any] | None = None,
        min_length: int | None = None,
    ) -> dict[str, Any]:
        """The format-1 model dict (JSON-serializable, numbers exact)."""
        if self._pending:
            raise ProgramError("heads created but no attention layer closes them")
        d = len(self.coords)
        idx = {c: k for k, c in enumerate(self.coords)}

        def unit(c: str, coef: Fraction = Fraction(1)) -> list[Fraction]:
            row = [Fraction(0)] * d
            row[idx[c]] = coef
            return row

        def mat(rows: list[list[Fraction]]) -> list[list[int | str]]:
            return [[num(x) for x in r] for r in rows]

        layers: list[dict[str, Any]] = []
        for layer in self._layers:
            if layer.kind == "attention":
                layers.append(
                    {
                        "kind": "attention",
                        "name": layer.name,
                        "heads": [self._head_dict(h, d, idx, unit, mat) for h in layer.heads],
                    }
                )
            else:
                hidden = [[Fraction(0)] * d for _ in layer.units]
                for k, (combo, _) in enumerate(layer.units):
                    for src, c in combo.items():
                        hidden[k][idx[src]] += c
                out_w = [[Fraction(0)] * len(layer.units) for _ in range(d)]
                for out, combo in layer.outputs.items():
                    for k, c in combo.items():
                        out_w[idx[out]][k] += c
                layers.append(
                    {
                        "kind": "ffn",
                        "name": layer.name,
                        "hidden": [
                            {"weight": mat(hidden), "bias": [num(b) for _, b in layer.units]}
                        ],
                        "output": {"weight": mat(out_w), "bias": [0] * d},
                    }
                )
        for layer_dict in layers:
            if layer_dict["name"] is None:
                del layer_dict["name"]
        model: dict[str, Any] = {
            "format": "exactattn/1",
            "name": self.name,
            "description": self.description,
            "alphabet": list(self.alphabet),
        }
        if self.bos is not None:
            model["bos"] = self.bos
        if self.eos is not None:
            model["eos"] = self.eos
        model["d"] = d
        model["coordinates"] = list(self.coords)
        model["embedding"] = {
            "token": {
                t: [num(self._token.get(c, {}).get(t, 0)) for c in self.coords] for t in self.tokens
            },
        }
        if self._position:
            model["embedding"]["position"] = [self._position.get(c, "0") for c in self.coords]
        model["layers"] = layers
        if temperature is not None:
            model["temperature"] = temperature
        model["output"] = dict(output)
        if reference is not None:
            model["reference"] = dict(reference)
        if min_length is not None:
            model["min_length"] = min_length
        return model

    @staticmethod
    def _head_dict(h: Head, d: int, idx: dict[str, int], unit: Any, mat: Any) -> dict[str, Any]:
        terms = h.score or []
        query = [unit(a, c) for a, _, c in terms] or [[Fraction(0)] * d]
        key = [unit(b) for _, b, _ in terms] or [[Fraction(0)] * d]
        outs = list(h.values)
        value = [[Fraction(0)] * d for _ in outs]
        for r, out in enumerate(outs):
            for src, c in h.values[out].items():
                value[r][idx[src]] += c
        output = [[Fraction(0)] * len(outs) for _ in range(d)]
        for r, out in enumerate(outs):
            output[idx[out]][r] = Fraction(1)
        head: dict[str, Any] = {}
        if h.name is not None:
            head["name"] = h.name
        head.update(
            {
                "query": mat(query),
                "key": mat(key),
                "value": mat(value),
                "output": mat(output),
                "mask": h.mask,
            }
        )
        if h.hard != "average":
            head["hard"] = h.hard
        return head


# -- a second program: majority -------------------------------------------------------------


def build_majority(alphabet: Sequence[str] = ("a", "b"), *, bos: str = "<bos>") -> dict:
    """Accept iff the first symbol of ``alphabet`` occurs in strictly more than half the input.

    Three steps: ``share`` = c_i/(i+1) by a prefix mean (BOS counts in the denominator),
    ``count`` = c_i by ``to_integer`` (gap 1/(i+1), so γ(n) = 1/(n+1)), and the read-out
    ``2·count − n`` at the last position, an integer: threshold 1/2, margin 1/2.
    """
    if len(alphabet) < 2:
        raise ProgramError("majority: the alphabet needs at least two symbols")
    p = Program(
        "majority",
        alphabet,
        bos=bos,
        description=f"accept iff more than half the symbols are {alphabet[0]!r} "
        "(exactattn.constructions.rasp.build_majority)",
    )
    target = p.indicator("target", [alphabet[0]])
    pos = p.position("pos", "i")
    pos_sq = p.position("pos_sq", "i^2")
    inv = p.position("inv_pos", "1/(i+1)")
    length = p.position("len", "n")
    p.prefix_mean("share", {target: 1})
    p.to_integer("count", "share", inv, pos, pos_sq)
    output = p.accept({"count": 2, length: -1}, threshold="1/2", position="last")
    return p.to_model(output, temperature="1/(4*(n+1)*log(n+1))", min_length=1)
