"""A format-1 model as a PyTorch ``nn.Module`` (issue 26), and the torch kernels of ``precision``.

Why: a construction checked exactly should run where models live. The module holds the
model's weights *as given*, each rounded once (nearest, ties to even) to the chosen dtype, so
every weight the dtype can hold is exact; :func:`rounding_report` lists the others, each
compared exactly with its Fraction. Position embeddings are evaluated for one n (they may
depend on n), τ(n) per head is stored as a 0-d buffer (float64 nearest to the certified
value, then rounded to the dtype, as ``precision`` does).

Attention rules: ``softmax`` is the deployed mode, run by a *kernel*: ``eager`` (q kᵀ / τ,
masked with −∞, ``torch.softmax``, α v) or ``sdpa`` (``scaled_dot_product_attention`` with
``scale = 1/τ`` and a boolean mask; ``sdpa-math``, ``sdpa-flash`` and ``sdpa-efficient`` pin
one of its CPU/GPU implementations). ``hard`` uses each head's own hard rule; ``average``,
``leftmost`` and ``rightmost`` force one — reference modes, evaluated in the dtype
(argmax set = scores equal to the row maximum). A query with no visible key adds 0 in every
mode (the format's rule; a kernel's NaN or 0 is replaced).

Importing this module imports torch: only ``exactattn export`` and ``precision --backend
torch-*`` import it, lazily, so the core never needs the optional extra.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch  # optional extra: this module is only ever imported lazily (see docstring)
import torch.nn.functional as F
from torch import nn

from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_rendered
from exactattn.engine.dtypes import DtypeModel, _frac_vec, dtype_of, rat_to_dtype
from exactattn.engine.hard import CompiledModel
from exactattn.engine.ratarray import RatArray
from exactattn.export import DEFAULT_DTYPE
from exactattn.model import AcceptOutput, ArgmaxOutput, Model, load_model
from exactattn.results.settings import TauOverride

TORCH_FORMAT = "exactattn-torch/1"
KERNELS = ("eager", "sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient")
ATTENTION_MODES = ("softmax", "hard", "average", "leftmost", "rightmost")
TORCH_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
# full T×T score matrices up to this many entries per batch; past it, query rows in blocks
# (each softmax row is independent, so blocking changes no formula; documented)
FULL_ENTRIES = 1 << 26


def to_torch(a: np.ndarray, dtype: str) -> torch.Tensor:
    """A dtype-rounded numpy array as a tensor of the same dtype, bit for bit."""
    if dtype == "bfloat16":  # ml_dtypes → float32 (exact) → torch.bfloat16 (exact)
        return torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def to_numpy(t: torch.Tensor, dtype: str) -> np.ndarray:
    """A tensor back to the numpy dtype ``precision`` uses (exact)."""
    if dtype == "bfloat16":
        return t.detach().to(torch.float32).numpy().astype(dtype_of("bfloat16"))
    return t.detach().numpy()


def visible(mask: str, T: int) -> torch.Tensor:
    """The format's masks on sequence slots: (T, T) bool, True = the key is visible."""
    q = torch.arange(T)[:, None]
    k = torch.arange(T)[None, :]
    if mask == "none":
        return torch.ones((T, T), dtype=torch.bool)
    return {"leq": k <= q, "lt": k < q, "geq": k >= q, "gt": k > q}[mask]


def _sdpa_backends(kernel: str) -> Any:
    # lazy: torch, an optional extra
    from torch.nn.attention import SDPBackend

    return {
        "sdpa-math": [SDPBackend.MATH],
        "sdpa-flash": [SDPBackend.FLASH_ATTENTION],
        "sdpa-efficient": [SDPBackend.EFFICIENT_ATTENTION],
    }[kernel]


class ExportedHead(nn.Module):
    """One head: q = W_Q x + b_Q, k, v likewise; adds W_O (Σ_j α_ij v_j) (W_O absent: identity)."""

    def __init__(
        self,
        Q: torch.Tensor,
        bq: torch.Tensor,
        K: torch.Tensor,
        bk: torch.Tensor,
        V: torch.Tensor,
        bv: torch.Tensor,
        O: torch.Tensor | None,
        mask: str,
        hard: str,
        tau: torch.Tensor,
    ) -> None:
        super().__init__()
        self.W_Q = nn.Parameter(Q, requires_grad=False)
        self.b_Q = nn.Parameter(bq, requires_grad=False)
        self.W_K = nn.Parameter(K, requires_grad=False)
        self.b_K = nn.Parameter(bk, requires_grad=False)
        self.W_V = nn.Parameter(V, requires_grad=False)
        self.b_V = nn.Parameter(bv, requires_grad=False)
        self.W_O = nn.Parameter(O, requires_grad=False) if O is not None else None
        self.register_buffer("tau", tau)
        self.mask = mask
        self.hard = hard

    def forward(
        self,
        x: torch.Tensor,
        attention: str = "softmax",
        kernel: str = "eager",
        tau: torch.Tensor | None = None,
    ) -> torch.Tensor:
        N, T, _ = x.shape
        q = F.linear(x, self.W_Q, self.b_Q)
        k = F.linear(x, self.W_K, self.b_K)
        v = F.linear(x, self.W_V, self.b_V)
        vis = visible(self.mask, T)
        tau = self.tau if tau is None else tau
        step = max(1, FULL_ENTRIES // max(1, N * T)) if N * T * T > FULL_ENTRIES else T
        parts = []
        for s in range(0, T, step):
            rows = slice(s, min(T, s + step))
            parts.append(self._mix(q[:, rows], k, v, vis[rows], attention, kernel, tau))
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        return F.linear(z, self.W_O) if self.W_O is not None else z

    def _mix(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        vis: torch.Tensor,
        attention: str,
        kernel: str,
        tau: torch.Tensor,
    ) -> torch.Tensor:
        """Σ_j α_ij v_j for the query rows in q (vis: their rows of the mask)."""
        has = vis.any(dim=1)[None, :, None]
        if attention == "softmax":
            if kernel == "eager":
                logits = (q @ k.transpose(-1, -2)) / tau
                logits = logits.masked_fill(~vis, float("-inf"))
                z = torch.softmax(logits, dim=-1) @ v
            else:
                scale = 1.0 / float(tau)  # what deployed code passes: the float of 1/τ
                z = _sdpa(q, k, v, vis, scale, kernel)
            return torch.where(has, z, torch.zeros((), dtype=z.dtype))
        rule = self.hard if attention == "hard" else attention
        S = q @ k.transpose(-1, -2)
        top = vis & (S == S.masked_fill(~vis, float("-inf")).amax(dim=-1, keepdim=True))
        if rule == "average":
            w = top.to(q.dtype) / top.sum(dim=-1, keepdim=True).clamp(min=1).to(q.dtype)
        else:
            idx = torch.arange(S.shape[-1])
            pick = torch.where(top, idx, -1 if rule == "rightmost" else S.shape[-1])
            j = pick.amax(dim=-1) if rule == "rightmost" else pick.amin(dim=-1)
            w = (idx == j[..., None]).to(q.dtype) * top.any(dim=-1, keepdim=True).to(q.dtype)
        return w @ v


def _sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, vis: torch.Tensor, scale: float, kernel: str
) -> torch.Tensor:
    """scaled_dot_product_attention on one head: (N, rows, m) → (N, rows, m).

    The fused kernels (flash, efficient) need one head size for q, k and v: there the
    smaller side is padded with zero columns (zero products are exact, so no value changes),
    as a deployment with equal head sizes would hold them. A kernel PyTorch cannot run here
    is a usage error naming PyTorch's reason.
    """
    m = v.shape[-1]
    if kernel in ("sdpa-flash", "sdpa-efficient"):
        w = max(q.shape[-1], m)
        q, k = (F.pad(t, (0, w - t.shape[-1])) for t in (q, k))
        v = F.pad(v, (0, w - m))
    args = (q[:, None], k[:, None], v[:, None])
    if kernel == "sdpa":
        return F.scaled_dot_product_attention(*args, attn_mask=vis, scale=scale)[:, 0, :, :m]
    # lazy: torch, an optional extra
    from torch.nn.attention import sdpa_kernel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(_sdpa_backends(kernel)):
                z = F.scaled_dot_product_attention(*args, attn_mask=vis, scale=scale)
        except RuntimeError as exc:
            why = "; ".join(str(c.message).split(" (Triggered")[0] for c in caught)
            raise UsageError(
                f"PyTorch {torch.__version__} cannot run the {kernel} kernel here: "
                f"{why or str(exc).splitlines()[0]}"
            ) from None
    return z[:, 0, :, :m]


class ExportedFFN(nn.Module):
    """x ↦ W_out relu(… relu(W_1 x + b_1) …) + b_out (the residual is added by the model)."""

    def __init__(self, hidden: list[tuple[torch.Tensor, torch.Tensor]], out: Any) -> None:
        super().__init__()
        self.hidden = nn.ModuleList()
        for W, b in hidden:
            lin = nn.Linear(W.shape[1], W.shape[0], dtype=W.dtype)
            lin.weight = nn.Parameter(W, requires_grad=False)
            lin.bias = nn.Parameter(b, requires_grad=False)
            self.hidden.append(lin)
        self.out = nn.Linear(out[0].shape[1], out[0].shape[0], dtype=out[0].dtype)
        self.out.weight = nn.Parameter(out[0], requires_grad=False)
        self.out.bias = nn.Parameter(out[1], requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for lin in self.hidden:
            x = torch.relu(lin(x))
        return self.out(x)


class ExportedModel(nn.Module):
    """The model at one length n: ``forward(ids)`` gives the read-out, ``run`` every layer.

    ``ids`` are indices into ``alphabet`` of shape (batch, n); BOS/EOS are added here.
    The read-out: accept → y (batch,), accepted iff y > ``threshold``; argmax/value →
    (batch, n, rows). ``attention`` and ``kernel`` can be changed on the instance.
    """

    def __init__(self, config: dict[str, Any], parts: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.attention = config.get("attention", "softmax")
        self.kernel = config.get("kernel", "eager")
        emb = parts.get("token_embedding")
        self.token_embedding = nn.Parameter(emb, requires_grad=False) if emb is not None else None
        self.register_buffer("position_embedding", parts.get("position_embedding"))
        self.layers = nn.ModuleList()
        for spec, layer in zip(config["layers"], parts["layers"], strict=True):
            if spec["kind"] == "attention":
                heads = [
                    ExportedHead(*h, mask=hs["mask"], hard=hs["hard"], tau=t)
                    for h, hs, t in zip(layer["heads"], spec["heads"], layer["taus"], strict=True)
                ]
                self.layers.append(nn.ModuleList(heads))
            else:
                self.layers.append(ExportedFFN(layer["hidden"], layer["out"]))
        self.readout_weight = nn.Parameter(parts["readout_weight"], requires_grad=False)
        self.readout_bias = nn.Parameter(parts["readout_bias"], requires_grad=False)
        self.register_buffer("threshold", parts.get("threshold"))

    # -- layout ------------------------------------------------------------------
    @property
    def n(self) -> int | None:
        return self.config.get("n")

    def encode(self, words: Sequence[Sequence[str]]) -> torch.Tensor:
        """Words over the alphabet as an id tensor (batch, n); each word of the exported n."""
        for w in words:
            if self.n is not None and len(w) != self.n:
                raise UsageError(f"word {list(w)!r}: {self._wrong_length(len(w))}")
        index = {t: i for i, t in enumerate(self.config["vocab"])}
        try:
            return torch.tensor([[index[t] for t in w] for w in words], dtype=torch.long)
        except KeyError as exc:
            raise UsageError(f"symbol {exc} is not in the alphabet") from None

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """x⁰ = E[token] + P(p, n), summed in the dtype: (batch, T, d)."""
        cfg = self.config
        if self.token_embedding is None or self.position_embedding is None:
            raise UsageError("this module was built without embeddings (kernel use only)")
        if ids.shape[1] != cfg["n"]:
            raise UsageError(self._wrong_length(ids.shape[1]))
        cols = [ids]
        N = ids.shape[0]
        if cfg["bos"] is not None:
            cols.insert(0, torch.full((N, 1), cfg["vocab"].index(cfg["bos"])))
        if cfg["eos"] is not None:
            cols.append(torch.full((N, 1), cfg["vocab"].index(cfg["eos"])))
        full = torch.cat(cols, dim=1)
        return self.token_embedding[full] + self.position_embedding[None]

    def run(
        self, x: torch.Tensor, taus: list[list[Any] | None] | None = None
    ) -> list[torch.Tensor]:
        """Activations after every layer (index 0: x itself); ``taus`` overrides τ per head."""
        self._check_slots(x)
        acts = [x]
        with torch.no_grad():
            for li, layer in enumerate(self.layers):
                if isinstance(layer, ExportedFFN):
                    x = x + layer(x)
                else:
                    out = x
                    for hi, head in enumerate(layer):
                        t = None
                        if taus is not None and taus[li] is not None:
                            t = torch.tensor(float(taus[li][hi]), dtype=x.dtype)
                        out = out + head(x, self.attention, self.kernel, t)
                    x = out
                acts.append(x)
        return acts

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        """The read-out of final activations x (batch, T, d): accept → y (batch,), accepted
        iff y > ``threshold``; argmax/value → (batch, n, rows) at the input positions."""
        self._check_slots(x)
        cfg = self.config
        if cfg["output"] == "accept":
            return F.linear(x[:, cfg["accept_slot"], :], self.readout_weight, self.readout_bias)[
                :, 0
            ]
        s = cfg["first_slot"]
        return F.linear(
            x[:, s : s + x.shape[1] - cfg["extra_slots"], :], self.readout_weight, self.readout_bias
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.readout(self.run(self.embed(ids))[-1])

    def _wrong_length(self, got: int) -> str:
        return (
            f"this module was exported for inputs of length n = {self.n}, got {got} (fix: "
            "export the model again with --n for that length; the position embeddings and "
            "τ(n) depend on n)"
        )

    def _check_slots(self, x: torch.Tensor) -> None:
        """An exported module runs at its own length only (kernel modules have no n)."""
        if self.n is not None and x.shape[1] != self.n + self.config["extra_slots"]:
            raise UsageError(self._wrong_length(x.shape[1] - self.config["extra_slots"]))

    def decide(self, y: torch.Tensor) -> list[Any]:
        """Decisions as ``precision`` states them: accept → bool (None: NaN); argmax → labels
        (None: a tie at the top or NaN); value → float64 arrays."""
        cfg = self.config
        yy = y.detach().to(torch.float64).numpy()
        if cfg["output"] == "accept":
            thr = float(self.threshold)
            return [None if math.isnan(v) else bool(v > thr) for v in yy]
        if cfg["output"] == "argmax":
            labels = cfg["labels"]
            res = []
            for row in yy:
                out: list[str | None] = []
                for p in row:
                    win = np.flatnonzero(p == p.max())
                    out.append(
                        labels[int(win[0])] if len(win) == 1 and not np.isnan(p).any() else None
                    )
                res.append(out)
            return res
        return list(yy)


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------


@dataclass
class Export:
    module: ExportedModel
    rounding: list[dict[str, Any]]


def _config(model: Model, n: int | None, dtype: str, attention: str, kernel: str) -> dict:
    out = model.output
    vocab = list(model.alphabet) + [t for t in (model.bos, model.eos) if t is not None]
    layers = []
    for layer in model.layers:
        if layer.kind == "attention":
            layers.append(
                {
                    "kind": "attention",
                    "heads": [{"mask": h.mask, "hard": h.hard} for h in layer.heads],
                }  # type: ignore[union-attr]
            )
        else:
            layers.append({"kind": "ffn", "hidden": len(layer.hidden)})  # type: ignore[union-attr]
    return {
        "format": TORCH_FORMAT,
        "name": model.name,
        "alphabet": list(model.alphabet),
        "vocab": vocab,
        "bos": model.bos,
        "eos": model.eos,
        "d": model.d,
        "n": n,
        "dtype": dtype,
        "attention": attention,
        "kernel": kernel,
        "layers": layers,
        "output": out.kind,
        "labels": list(out.labels) if isinstance(out, ArgmaxOutput) else None,
        "accept_slot": model.accept_slot(n) if isinstance(out, AcceptOutput) and n else None,
        "first_slot": model.first_input_position(),
        "extra_slots": (model.bos is not None) + (model.eos is not None),
    }


def _parts(dm: DtypeModel, n: int | None, tau_override: TauOverride = None) -> dict[str, Any]:
    """The dtype-rounded tensors of a DtypeModel (the same arrays the numpy backend uses)."""
    name = dm.name
    m = dm.model
    T = lambda a: to_torch(a, name)  # noqa: E731
    layers = []
    taus = dm.taus(n if n is not None else 1, tau_override)
    for li, layer in enumerate(dm.layers):
        if isinstance(layer, list):
            layers.append(
                {
                    "heads": [
                        (
                            T(h.Q),
                            T(h.bq),
                            T(h.K),
                            T(h.bk),
                            T(h.V),
                            T(h.bv),
                            T(h.O) if h.O is not None else None,
                        )
                        for h in layer
                    ],
                    "taus": [T(np.array(t)) for t in taus[li]],  # type: ignore[union-attr]
                }
            )
        else:
            layers.append(
                {
                    "hidden": [(T(w), T(b)) for w, b in layer.hidden],
                    "out": (T(layer.out[0]), T(layer.out[1])),
                }
            )
    out = m.output
    parts: dict[str, Any] = {"layers": layers}
    if isinstance(out, AcceptOutput):
        parts["readout_weight"] = T(_frac_vec(out.weight, dm.dt)[None, :])
        parts["readout_bias"] = T(_frac_vec([out.bias], dm.dt))
        parts["threshold"] = T(_frac_vec([out.threshold], dm.dt)[0:1].reshape(()))
    else:
        parts["readout_weight"] = T(np.array([_frac_vec(r, dm.dt) for r in out.weight]))
        parts["readout_bias"] = T(_frac_vec(out.bias, dm.dt))
        parts["threshold"] = None
    if n is not None:
        cm = dm.cm
        parts["token_embedding"] = T(rat_to_dtype(cm.token_table, dm.dt))
        parts["position_embedding"] = T(rat_to_dtype(cm.positions(n), dm.dt))
    return parts


def export_torch(
    model: Model,
    n: int,
    dtype: str = DEFAULT_DTYPE,
    attention: str = "softmax",
    kernel: str = "eager",
    tau: TauOverride = None,
) -> Export:
    """The model at length n as an ``nn.Module`` in ``dtype``, with its rounding report."""
    if attention not in ATTENTION_MODES:
        raise UsageError(f"unknown attention mode '{attention}'; use one of {ATTENTION_MODES}")
    if kernel not in KERNELS:
        raise UsageError(f"unknown kernel '{kernel}'; use one of {KERNELS}")
    if dtype not in TORCH_DTYPES:
        raise UsageError(f"unknown dtype '{dtype}'; use one of {', '.join(TORCH_DTYPES)}")
    model.check_length(n)
    cm = CompiledModel(model)
    dm = DtypeModel(cm, dtype)
    mod = ExportedModel(_config(model, n, dtype, attention, kernel), _parts(dm, n, tau))
    return Export(mod, rounding_report(model, cm, dm, n, tau))


def torch_module(
    model: Model | str | Path, n: int, dtype: str = DEFAULT_DTYPE, **kw: Any
) -> ExportedModel:
    """The model (a Model or a model file) at length n as an ``nn.Module``; keyword
    arguments as :func:`export_torch` (the rounding report is ``export_torch(...).rounding``)."""
    if not isinstance(model, Model):
        model = load_model(model)
    return export_torch(model, n, dtype, **kw).module


def kernel_module(dm: DtypeModel, kernel: str) -> ExportedModel:
    """The layers of a DtypeModel as a module without embeddings (``precision``'s backend)."""
    return ExportedModel(_config(dm.model, None, dm.name, "softmax", kernel), _parts(dm, None))


def run_torch(
    dm: DtypeModel, x0: np.ndarray, n: int, kernel: str, tau_override: TauOverride = None
) -> list:
    """The layers on a dtype batch x0 (N, T, d), in torch: activations as numpy (dtype)."""
    mod = getattr(dm, "_torch_module", None)
    if mod is None or mod.kernel != kernel:
        mod = kernel_module(dm, kernel)
        dm._torch_module = mod  # type: ignore[attr-defined]
    taus = dm.taus(n, tau_override)
    acts = mod.run(to_torch(x0, dm.name), taus)
    return [to_numpy(a, dm.name) for a in acts]


# ---------------------------------------------------------------------------
# the rounding report: every weight the dtype cannot hold, compared exactly
# ---------------------------------------------------------------------------


def _round_check(name: str, ra: RatArray, rounded: np.ndarray, shown: int = 5) -> dict | None:
    flat_num = np.asarray(ra.num).reshape(-1)
    flat = (
        rounded.astype(np.float64).reshape(-1)
        if rounded.dtype != np.float64
        else rounded.reshape(-1)
    )
    bad = []
    worst = Fraction(0)
    for idx, (num, val) in enumerate(zip(flat_num.tolist(), flat.tolist(), strict=True)):
        exact = Fraction(int(num), ra.den)
        if not math.isfinite(val):
            bad.append((idx, exact, val))
            worst = None  # type: ignore[assignment]
            continue
        got = Fraction(val)
        if got != exact:
            bad.append((idx, exact, val))
            if worst is not None:
                worst = max(worst, abs(got - exact))
    if not bad:
        return None
    shape = rounded.shape
    return {
        "tensor": name,
        "entries": int(flat.size),
        "rounded": len(bad),
        "max_abs_error": None if worst is None else f"{float(worst):.6g}",
        "examples": [
            {
                "index": [int(j) for j in np.unravel_index(i, shape)] if shape else [],
                "exact": str(e),
                "value": repr(v),
            }
            for i, e, v in bad[:shown]
        ],
    }


def rounding_report(
    model: Model, cm: CompiledModel, dm: DtypeModel, n: int, tau: TauOverride = None
) -> list[dict[str, Any]]:
    """Every exported tensor with entries that round in the dtype (exact comparison with the
    Fraction value); τ(n) is listed when it is irrational or not representable."""
    dt = dm.dt
    rep: list[dict | None] = [
        _round_check("token_embedding", cm.token_table, rat_to_dtype(cm.token_table, dt)),
        _round_check("position_embedding", cm.positions(n), rat_to_dtype(cm.positions(n), dt)),
    ]
    for li, layer in enumerate(cm.layers):
        if isinstance(layer, list):
            for hi, h in enumerate(layer):
                p = f"layers.{li}.{hi}"
                for nm, ra in (
                    ("W_Q", h.Q),
                    ("b_Q", h.bq),
                    ("W_K", h.K),
                    ("b_K", h.bk),
                    ("W_V", h.V),
                    ("b_V", h.bv),
                    ("W_O", h.O),
                ):
                    if ra is not None:
                        rep.append(_round_check(f"{p}.{nm}", ra, rat_to_dtype(ra, dt)))
                texpr = model.head_temperature(li, hi, tau)
                t = dm.taus(n, tau)[li][hi]  # type: ignore[index]
                try:
                    exact: Fraction | None = texpr.eval_exact({"n": n})
                except Exception:  # irrational (log, sqrt, exp): no dtype holds it
                    exact = None
                if exact is None or Fraction(float(t)) != exact:
                    rep.append(
                        {
                            "tensor": f"{p}.tau",
                            "entries": 1,
                            "rounded": 1,
                            "max_abs_error": None,
                            "examples": [
                                {
                                    "index": [],
                                    "exact": str(exact)
                                    if exact is not None
                                    else f"{texpr.text} at n = {n} (irrational)",
                                    "value": repr(float(t)),
                                }
                            ],
                        }
                    )
        else:
            for k, (w, b) in enumerate(layer.hidden):
                rep.append(_round_check(f"layers.{li}.hidden.{k}.weight", w, rat_to_dtype(w, dt)))
                rep.append(_round_check(f"layers.{li}.hidden.{k}.bias", b, rat_to_dtype(b, dt)))
            rep.append(
                _round_check(
                    f"layers.{li}.out.weight", layer.out[0], rat_to_dtype(layer.out[0], dt)
                )
            )
            rep.append(
                _round_check(f"layers.{li}.out.bias", layer.out[1], rat_to_dtype(layer.out[1], dt))
            )
    out = model.output
    if isinstance(out, AcceptOutput):
        vals = {
            "readout_weight": list(out.weight),
            "readout_bias": [out.bias],
            "threshold": [out.threshold],
        }
    else:
        vals = {"readout_weight": [list(r) for r in out.weight], "readout_bias": list(out.bias)}
    for nm, v in vals.items():
        ra = RatArray.from_fractions(v)
        rep.append(_round_check(nm, ra, rat_to_dtype(ra, dt)))
    return [r for r in rep if r is not None]


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------


def overflows(tensors: dict[str, Any]) -> list[str]:
    """The exported tensors the dtype cannot hold: an entry became ±inf or NaN (float16 tops
    out at 65,504, so a weight of 10^5 is inf), or a temperature τ became 0 (its scale 1/τ
    is then infinite). Such an export is not the model: ``exactattn export`` refuses it
    (exit 2, nothing written; docs/export.md). It wrote the file and exited 0 (issue 40)."""
    out = []
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or not torch.is_floating_point(t):
            continue
        if not bool(torch.isfinite(t).all()) or (
            name.split(".")[-1] == "tau" and bool((t <= 0).any())
        ):
            out.append(name)
    return out


def save(exp: Export, path: Path) -> None:
    """``{"config", "state_dict", "rounding"}`` via torch.save (loadable with weights_only)."""
    mod = exp.module
    doc = {"config": mod.config, "state_dict": mod.state_dict(), "rounding": exp.rounding}
    # a unique temporary file beside it, then a rename (a fixed OUT.pt.tmp was shared by two
    # exports and followed a planted symlink; issue 40)
    write_torch(doc, path)


def write_torch(doc: dict[str, Any], path: Path) -> None:
    """``torch.save`` into memory, then the bytes through a temporary file: a failed write
    is an :class:`OSError` naming ``path``. PyTorch's own file writer reports a full disk (or
    a file-size limit) as a RuntimeError ("unexpected pos 64 vs 0", "basic_ios::clear:
    iostream error"), which was exit 4 (the fuzz's fulldisk kind, issue 40)."""
    write_rendered(path, lambda buf: torch.save(doc, buf))


def load(path: str | Path) -> ExportedModel:
    """Rebuild an exported module from a file written by :func:`save` (no code is unpickled)."""
    doc = torch.load(path, weights_only=True)
    cfg = doc["config"]
    if cfg.get("format") != TORCH_FORMAT:
        raise UsageError(f"{path} is not an {TORCH_FORMAT} file")
    sd = doc["state_dict"]
    layers = []
    for li, spec in enumerate(cfg["layers"]):
        if spec["kind"] == "attention":
            heads, taus = [], []
            for hi in range(len(spec["heads"])):
                p = f"layers.{li}.{hi}."
                heads.append(
                    tuple(sd[p + k] for k in ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V"))
                    + (sd.get(p + "W_O"),)
                )
                taus.append(sd[p + "tau"])
            layers.append({"heads": heads, "taus": taus})
        else:
            p = f"layers.{li}."
            layers.append(
                {
                    "hidden": [
                        (sd[f"{p}hidden.{k}.weight"], sd[f"{p}hidden.{k}.bias"])
                        for k in range(spec["hidden"])
                    ],
                    "out": (sd[p + "out.weight"], sd[p + "out.bias"]),
                }
            )
    parts = {
        "layers": layers,
        "token_embedding": sd.get("token_embedding"),
        "position_embedding": sd.get("position_embedding"),
        "readout_weight": sd["readout_weight"],
        "readout_bias": sd["readout_bias"],
        "threshold": sd.get("threshold"),
    }
    return ExportedModel(cfg, parts)


def library_version() -> str:
    return f"torch {torch.__version__}"
