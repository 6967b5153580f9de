"""The uncertified baseline: a plain float64 numpy softmax forward pass.

What a practitioner would write to evaluate the same model on the same inputs: weights
rounded to float64 once, BLAS matmuls, a numerically stable softmax, no error control.
The certified float path (exactattn/engine/cascade/) is measured against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from exactattn.engine.hard import visible_mask
from exactattn.engine.temperature import Temperatures
from exactattn.model import AcceptOutput, AttentionLayer, Model


def _f(m) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in m], dtype=np.float64)


def _v(v) -> np.ndarray:
    return np.array([float(x) for x in v], dtype=np.float64)


class FloatModel:
    """A model's weights and temperatures at length n as float64 arrays (built once)."""

    def __init__(self, model: Model, n: int) -> None:
        self.model = model
        self.n = n
        toks = list(model.alphabet) + [t for t in (model.bos, model.eos) if t is not None]
        self.index = {t: i for i, t in enumerate(toks)}
        self.table = _f([model.token_embedding[t] for t in toks])
        self.pos = _f(model.position_vectors(n))
        taus = Temperatures(model, None).at(n, 64)
        self.layers: list = []
        for li, layer in enumerate(model.layers):
            if isinstance(layer, AttentionLayer):
                heads = []
                for hi, h in enumerate(layer.heads):
                    T = self.pos.shape[0]
                    heads.append(
                        dict(
                            Q=_f(h.query),
                            bq=_v(h.query_bias),
                            K=_f(h.key),
                            bk=_v(h.key_bias),
                            V=_f(h.value),
                            bv=_v(h.value_bias),
                            O=_f(h.output) if h.output is not None else None,
                            vis=visible_mask(h.mask, T),
                            inv_tau=1.0 / float(taus[li][hi].mid()),
                        )
                    )
                self.layers.append(("attention", heads))
            else:
                self.layers.append(
                    (
                        "ffn",
                        [(_f(w), _v(b)) for w, b in layer.hidden],
                        (_f(layer.output[0]), _v(layer.output[1])),
                    )
                )

    def forward(self, words: Sequence[Sequence[str]]) -> np.ndarray:
        """The soft read-out of every word: accept flags, or argmax indices per position."""
        m = self.model
        idx = np.array([[self.index[t] for t in m.tokens(w)] for w in words])
        x = self.table[idx] + self.pos[None]
        for layer in self.layers:
            if layer[0] == "attention":
                out = x
                for h in layer[1]:
                    q = x @ h["Q"].T + h["bq"]
                    k = x @ h["K"].T + h["bk"]
                    v = x @ h["V"].T + h["bv"]
                    s = (q @ np.swapaxes(k, 1, 2)) * h["inv_tau"]
                    s = np.where(h["vis"][None], s, -np.inf)
                    smax = s.max(axis=2, keepdims=True)
                    smax = np.where(np.isfinite(smax), smax, 0.0)
                    e = np.exp(s - smax)
                    z = e.sum(axis=2, keepdims=True)
                    a = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
                    mixed = a @ v
                    out = out + (mixed @ h["O"].T if h["O"] is not None else mixed)
                x = out
            else:
                h = x
                for w, b in layer[1]:
                    h = np.maximum(h @ w.T + b, 0.0)
                w, b = layer[2]
                x = x + h @ w.T + b
        o = m.output
        if isinstance(o, AcceptOutput):
            y = x[:, m.accept_slot(self.n), :] @ _v(o.weight) + float(o.bias)
            return y > float(o.threshold)
        slots = m.output_positions(self.n)
        y = x[:, slots, :] @ _f(o.weight).T + _v(o.bias)
        return np.argmax(y, axis=2)
