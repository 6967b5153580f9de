"""A format-1 model as a TransformerLens ``HookedTransformer`` (issue 26).

Why: interpretability work happens in TransformerLens; a construction checked exactly should
load there with hooks named as TransformerLens names them (``blocks.0.attn.hook_pattern``, …).

How the model is laid out (every step exact: only zero columns, zero heads and identity
copies are added, so no value changes):

* a block is attention then MLP; an attention layer followed by a feed-forward layer share a
  block, a lone layer gets a zero partner (zero heads add 0, a zero MLP adds 0);
* heads are padded to one head count and one ``d_head`` with zero heads / zero columns;
* a feed-forward layer with k > 1 hidden layers becomes k blocks: each writes its ReLU
  outputs into scratch coordinates of the residual stream (``d`` … ``d + 2w``, two banks of
  width w) and erases the previous bank with ReLU(h) = h ≥ 0; the last writes the output;
* τ(n) is TransformerLens's ``attn_scale`` (scores are divided by it): every head must use
  the same τ(n) — per-head temperatures do not fit, and the message says which;
* masks: all ``leq`` → ``attention_dir="causal"``; otherwise ``"bidirectional"`` and every
  head whose mask is not ``none`` is masked by a permanent hook on ``hook_attn_scores``
  (installed by :func:`load_hooked`; TransformerLens turns an all-masked row's NaN into 0,
  the format's rule). ``mask_hooks=False`` refuses such models instead.

Importing this module imports torch and transformer_lens (optional extras): only
``exactattn export transformer-lens`` imports it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch  # optional extra: imported only by the export command / its tests

from exactattn.core.errors import ModelError, UsageError
from exactattn.engine.dtypes import DtypeModel, _frac_vec, rat_to_dtype
from exactattn.engine.hard import CompiledModel
from exactattn.export import DEFAULT_DTYPE
from exactattn.export.torch import TORCH_DTYPES, to_torch, visible, write_torch
from exactattn.model import AcceptOutput, ArgmaxOutput, Model

TL_FORMAT = "exactattn-transformer-lens/1"


def fit_problems(model: Model, n: int, mask_hooks: bool = True) -> list[str]:
    """The features of the model that do not fit a HookedTransformer (empty: it fits)."""
    problems = []
    texts = {(li, hi): model.head_temperature(li, hi).text for li, hi, _ in model.attention_heads()}
    if len(set(texts.values())) > 1:
        (l0, h0), t0 = next(iter(texts.items()))
        other = next(k for k, t in texts.items() if t != t0)
        problems.append(
            f"layers[{other[0]}].heads[{other[1]}]: temperature '{texts[other]}' differs from "
            f"layers[{l0}].heads[{h0}]'s '{t0}' — TransformerLens divides every head's scores "
            "by one attn_scale"
        )
    if not mask_hooks:
        masks = {h.mask for _, _, h in model.attention_heads()}
        if masks - {"leq"} and masks - {"none"}:
            li, hi, h = next(
                (li, hi, h) for li, hi, h in model.attention_heads() if h.mask not in ("none",)
            )
            problems.append(
                f"layers[{li}].heads[{hi}].mask: '{h.mask}' (with the other heads' masks "
                f"{sorted(masks)}) — TransformerLens masks are causal (leq) or bidirectional "
                "(none) for the whole model; allow the mask hook to carry the rest"
            )
    return problems


def _pad(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def _mlp_pieces(layer: Any, d: int, D: int, w: int, dt: Any) -> list[dict[str, np.ndarray]]:
    """One feed-forward layer as TransformerLens MLPs over the widened residual (D wide).

    Piece j computes h_j = ReLU(W_j h_{j-1} + b_j) (h_0 = x) and, for j > 1, ReLU(h_{j-1})
    = h_{j-1} to erase it from its bank; the last piece writes W_out h_k + b_out to x.
    """
    one = np.ones((), dtype=dt)
    k = len(layer.hidden)
    pieces = []
    for j, (W, b) in enumerate(layer.hidden, start=1):
        width = W.shape[0]
        read = 0 if j == 1 else d + ((j - 2) % 2) * w  # where h_{j-1} lives
        prev = W.shape[1] if j > 1 else 0
        m = width + prev
        W_in = np.zeros((D, m), dtype=dt)
        W_in[read : read + W.shape[1], :width] = W.T
        b_in = np.zeros(m, dtype=dt)
        b_in[:width] = b
        W_out = np.zeros((m, D), dtype=dt)
        b_out = np.zeros(D, dtype=dt)
        if j == k:
            Wo, bo = layer.out
            W_out[:width, :d] = Wo.T
            b_out[:d] = bo
        else:
            bank = d + ((j - 1) % 2) * w
            W_out[:width, bank : bank + width] = np.eye(width, dtype=dt) * one
        if prev:
            W_in[read : read + prev, width:] = np.eye(prev, dtype=dt) * one
            W_out[width:, read : read + prev] = -np.eye(prev, dtype=dt) * one
        pieces.append({"W_in": W_in, "b_in": b_in, "W_out": W_out, "b_out": b_out})
    return pieces


def export_transformer_lens(
    model: Model, n: int, dtype: str = DEFAULT_DTYPE, mask_hooks: bool = True
) -> dict[str, Any]:
    """``{"format", "cfg", "state_dict", "mask_hooks", "layer_map", ...}`` for ``n``.

    Raises :class:`ModelError` (exit 2) naming the feature when the model does not fit.
    """
    if dtype not in TORCH_DTYPES:
        raise UsageError(f"unknown dtype '{dtype}'; use one of {', '.join(TORCH_DTYPES)}")
    model.check_length(n)
    problems = fit_problems(model, n, mask_hooks)
    if problems:
        raise ModelError(
            "",
            "does not fit a TransformerLens HookedTransformer: " + "; ".join(problems),
            "export it to PyTorch instead: exactattn export torch MODEL",
        )
    cm = CompiledModel(model)
    dm = DtypeModel(cm, dtype)
    dt = dm.dt
    d = model.d
    ffns = [layer for layer in dm.layers if not isinstance(layer, list)]
    w = max((W.shape[0] for f in ffns if len(f.hidden) > 1 for W, _ in f.hidden), default=0)
    D = d + 2 * w
    heads_max = max((len(layer) for layer in dm.layers if isinstance(layer, list)), default=1)
    d_head = max(
        (
            max(h.Q.shape[0], h.V.shape[0])
            for layer in dm.layers
            if isinstance(layer, list)
            for h in layer
        ),
        default=1,
    )
    # blocks: (attention layer index or None, list of MLP pieces or [], ffn layer index)
    blocks: list[dict[str, Any]] = []
    layer_map: dict[int, str] = {}
    i = 0
    L = len(dm.layers)
    while i < L:
        blk: dict[str, Any] = {"attn": None, "mlp": None}
        if isinstance(dm.layers[i], list):
            blk["attn"] = i
            layer_map[i] = f"blocks.{len(blocks)}.hook_resid_mid"
            i += 1
        pieces = []
        if i < L and not isinstance(dm.layers[i], list):
            pieces = _mlp_pieces(dm.layers[i], d, D, w, dt)
            fi = i
            i += 1
        blk["mlp"] = pieces[0] if pieces else None
        blocks.append(blk)
        for p in pieces[1:]:
            blocks.append({"attn": None, "mlp": p})
        if pieces:
            layer_map[fi] = f"blocks.{len(blocks) - 1}.hook_resid_post"
    d_mlp = max((b["mlp"]["W_in"].shape[1] for b in blocks if b["mlp"] is not None), default=0)
    attn_only = d_mlp == 0
    masks = {h.mask for _, _, h in model.attention_heads()}
    causal = masks == {"leq"}
    T = model.length(n)
    sd: dict[str, np.ndarray] = {}
    hooks: dict[str, list[str]] = {}
    taus = dm.taus(n)
    tau = next((float(t[0]) for t in taus if t), 1.0)
    sd["embed.W_E"] = _pad(rat_to_dtype(cm.token_table, dt), (cm.token_table.shape[0], D))
    sd["pos_embed.W_pos"] = _pad(rat_to_dtype(cm.positions(n), dt), (T, D))
    for b, blk in enumerate(blocks):
        pre = f"blocks.{b}."
        W_Q = np.zeros((heads_max, D, d_head), dtype=dt)
        W_K = np.zeros_like(W_Q)
        W_V = np.zeros_like(W_Q)
        W_O = np.zeros((heads_max, d_head, D), dtype=dt)
        b_Q = np.zeros((heads_max, d_head), dtype=dt)
        b_K = np.zeros_like(b_Q)
        b_V = np.zeros_like(b_Q)
        head_masks = ["none"] * heads_max
        if blk["attn"] is not None:
            for hi, h in enumerate(dm.layers[blk["attn"]]):
                W_Q[hi, :d, : h.Q.shape[0]] = h.Q.T
                W_K[hi, :d, : h.K.shape[0]] = h.K.T
                W_V[hi, :d, : h.V.shape[0]] = h.V.T
                b_Q[hi, : h.bq.shape[0]] = h.bq
                b_K[hi, : h.bk.shape[0]] = h.bk
                b_V[hi, : h.bv.shape[0]] = h.bv
                O = h.O if h.O is not None else np.eye(d, dtype=dt)
                W_O[hi, : O.shape[1], :d] = O.T
                head_masks[hi] = h.mask
        sd.update(
            {
                pre + "attn.W_Q": W_Q,
                pre + "attn.W_K": W_K,
                pre + "attn.W_V": W_V,
                pre + "attn.W_O": W_O,
                pre + "attn.b_Q": b_Q,
                pre + "attn.b_K": b_K,
                pre + "attn.b_V": b_V,
                pre + "attn.b_O": np.zeros(D, dtype=dt),
            }
        )
        if not causal and any(mk != "none" for mk in head_masks):
            hooks[pre + "attn.hook_attn_scores"] = head_masks
        if not attn_only:
            mlp = blk["mlp"] or {
                "W_in": np.zeros((D, d_mlp), dtype=dt),
                "b_in": np.zeros(d_mlp, dtype=dt),
                "W_out": np.zeros((d_mlp, D), dtype=dt),
                "b_out": np.zeros(D, dtype=dt),
            }
            sd[pre + "mlp.W_in"] = _pad(mlp["W_in"], (D, d_mlp))
            sd[pre + "mlp.b_in"] = _pad(mlp["b_in"], (d_mlp,))
            sd[pre + "mlp.W_out"] = _pad(mlp["W_out"], (d_mlp, D))
            sd[pre + "mlp.b_out"] = mlp["b_out"]
    out = model.output
    if isinstance(out, AcceptOutput):
        W = _frac_vec(out.weight, dt)[None, :]
        bU = _frac_vec([out.bias], dt)
        # the threshold as a number (the dtype's value of it, compared as y > threshold like
        # the torch export's decide), and exactly as the model states it
        thr = float(_frac_vec([out.threshold], dt)[0])
        readout = {
            "kind": "accept",
            "slot": model.accept_slot(n),
            "threshold": thr,
            "threshold_exact": str(out.threshold),
        }
    else:
        W = np.array([_frac_vec(r, dt) for r in out.weight])
        bU = _frac_vec(out.bias, dt)
        readout = {
            "kind": out.kind,
            "first_slot": model.first_input_position(),
            "labels": list(out.labels) if isinstance(out, ArgmaxOutput) else None,
        }
    sd["unembed.W_U"] = _pad(W.T, (D, W.shape[0]))
    sd["unembed.b_U"] = bU
    vocab = list(model.alphabet) + [t for t in (model.bos, model.eos) if t is not None]
    cfg = {
        "n_layers": len(blocks),
        "d_model": D,
        "n_ctx": T,
        "d_head": d_head,
        "n_heads": heads_max,
        "d_mlp": d_mlp if not attn_only else None,
        "d_vocab": len(vocab),
        "d_vocab_out": int(W.shape[0]),
        "act_fn": "relu",
        "normalization_type": None,
        "attention_dir": "causal" if causal else "bidirectional",
        "attn_only": attn_only,
        "positional_embedding_type": "standard",
        "use_attn_scale": True,
        "attn_scale": tau,
        "default_prepend_bos": False,
        "dtype": dtype,
        "model_name": model.name,
    }
    return {
        "format": TL_FORMAT,
        "cfg": cfg,
        "state_dict": {k: to_torch(v, dtype) for k, v in sd.items()},
        "mask_hooks": hooks,
        "layer_map": {str(k): v for k, v in sorted(layer_map.items())},
        "vocab": vocab,
        "bos": model.bos,
        "eos": model.eos,
        "n": n,
        "d": d,
        "readout": readout,
        "tau": next(
            (model.head_temperature(li, hi).text for li, hi, _ in model.attention_heads()), None
        ),
    }


def save(doc: dict[str, Any], path: Path) -> None:
    """torch.save through a unique temporary file and a rename (core/jsonio.py)."""
    write_torch(doc, path)


def _mask_hook(masks: list[str]) -> Any:
    def hook(scores: torch.Tensor, hook: Any = None) -> torch.Tensor:
        T = scores.shape[-1]
        out = scores.clone()
        for hi, mk in enumerate(masks):
            if mk != "none":
                out[:, hi] = out[:, hi].masked_fill(~visible(mk, T), float("-inf"))
        return out

    return hook


def load_hooked(source: str | Path | dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A HookedTransformer from an export (file or dict), mask hooks installed; and the doc."""
    # lazy: transformer_lens, an optional extra
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    doc = torch.load(source, weights_only=True) if not isinstance(source, dict) else source
    if doc.get("format") != TL_FORMAT:
        raise UsageError(f"{source} is not an {TL_FORMAT} file")
    kw = dict(doc["cfg"])
    kw["dtype"] = TORCH_DTYPES[kw["dtype"]]
    kw["device"] = "cpu"
    cfg = HookedTransformerConfig(**kw)
    with warnings.catch_warnings():
        # 3.x warns that HookedTransformer goes in 4.0 (hence the extra's pin <4)
        warnings.simplefilter("ignore", DeprecationWarning)
        ht = HookedTransformer(cfg)
    full = ht.state_dict()  # TransformerLens's own buffers (causal mask, IGNORE) stay
    unknown = set(doc["state_dict"]) - set(full)
    if unknown:
        raise UsageError(f"{source}: weights TransformerLens does not have: {sorted(unknown)}")
    full.update(doc["state_dict"])
    ht.load_state_dict(full, strict=True)
    for name, masks in doc["mask_hooks"].items():
        ht.add_perma_hook(name, _mask_hook(masks))
    ht.add_perma_hook("hook_embed", _length_hook(doc))
    ht.eval()
    return ht, doc


def _length_hook(doc: dict[str, Any]) -> Any:
    """Refuse a run on sequences of another length: the position embeddings are P(p, n) for
    the n exported (``i/n`` at another n is another model), so a shorter or longer input
    would run silently wrong."""
    T = doc["cfg"]["n_ctx"]

    def hook(embed: torch.Tensor, hook: Any = None) -> torch.Tensor:
        if embed.shape[1] != T:
            raise UsageError(_wrong_length(doc, embed.shape[1]))
        return embed

    return hook


def _wrong_length(doc: dict[str, Any], got_slots: int) -> str:
    extra = (doc["bos"] is not None) + (doc["eos"] is not None)
    return (
        f"this export is for inputs of length n = {doc['n']} ({doc['cfg']['n_ctx']} positions "
        f"with BOS/EOS), got {got_slots - extra} symbols ({got_slots} positions) (fix: export "
        "the model again with --n for that length; the position embeddings depend on n)"
    )


def tokens(doc: dict[str, Any], words: list[list[str]]) -> torch.Tensor:
    """Token ids (batch, n_ctx) of whole sequences, BOS/EOS added, for the exported
    vocabulary (``doc["vocab"]``): what ``HookedTransformer`` takes. Every word must have the
    exported length n and symbols of the alphabet (else a UsageError naming the word)."""
    index = {t: i for i, t in enumerate(doc["vocab"])}
    specials = {doc["bos"], doc["eos"]} - {None}
    seqs = []
    for w in words:
        if len(w) != doc["n"]:
            raise UsageError(f"word {list(w)!r}: " + _wrong_length(doc, len(w) + len(specials)))
        bad = [t for t in w if t not in index or t in specials]
        if bad:
            raise UsageError(f"word {list(w)!r}: symbol {bad[0]!r} is not in the alphabet")
        s = ([doc["bos"]] if doc["bos"] is not None else []) + list(w)
        s += [doc["eos"]] if doc["eos"] is not None else []
        seqs.append([index[t] for t in s])
    return torch.tensor(seqs, dtype=torch.long)


def readout(doc: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
    """The model's read-out from TransformerLens logits (batch, n_ctx, rows), as the torch
    export gives it: accept → y (batch,), accepted iff y > ``doc["readout"]["threshold"]``
    (a number; ``threshold_exact`` is the model's rational); argmax → (batch, n, labels), the
    label of each position its largest entry (``doc["readout"]["labels"]``); value → (batch,
    n, rows)."""
    if logits.shape[1] != doc["cfg"]["n_ctx"]:
        raise UsageError(_wrong_length(doc, logits.shape[1]))
    r = doc["readout"]
    if r["kind"] == "accept":
        return logits[:, r["slot"], 0]
    s = r["first_slot"]
    return logits[:, s : s + doc["n"]]


def describe(doc: dict[str, Any]) -> str:
    cfg = doc["cfg"]
    return (
        f"{cfg['n_layers']} blocks, d_model {cfg['d_model']} (model d {doc['d']}), "
        f"{cfg['n_heads']} heads × d_head {cfg['d_head']}, d_mlp {cfg['d_mlp']}, "
        f"n_ctx {cfg['n_ctx']}, attention_dir {cfg['attention_dir']}, attn_scale τ = "
        f"{cfg['attn_scale']!r} ({doc['tau']}), mask hooks on {len(doc['mask_hooks'])} blocks"
    )
