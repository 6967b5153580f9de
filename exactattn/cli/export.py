"""``exactattn export torch|transformer-lens`` (issue 26), apart from :mod:`exactattn.cli` so
that module only needs one ``add_command`` line. torch and transformer-lens are optional
extras: they are imported inside the commands, and a missing extra is exit 2 with the install
command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from exactattn.cli.common import Console, refuse_overwrite
from exactattn.core.errors import UsageError
from exactattn.core.jsonio import write_json_atomic
from exactattn.engine.temperature import BASE_PREC, Temperatures, parse_tau
from exactattn.export import DEFAULT_DTYPE, require
from exactattn.model import load_model

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

DTYPES = ["float64", "float32", "float16", "bfloat16"]


MAX_EXPORT_N = 10_000
"""Longest ``--n`` of an export: the export evaluates the exact position embeddings at every
position and checks each tensor's rounding, which grows faster than n (dyck1: n = 10,000 in
4 CPU-s and 350 MB, n = 100,000 in 96 CPU-s and 8 GB; ``--n 1000000000`` ground on; issue 40)."""


def _n_for(model: Any, n: int | None) -> int:
    """The length to evaluate position embeddings at: --n, else 16 (or the model's limit)."""
    if n is not None:
        if not 1 <= n <= MAX_EXPORT_N:
            raise UsageError(
                f"--n {n:,}: an export is built for one length 1 <= n <= {MAX_EXPORT_N:,} "
                "(docs/limits.md) (fix: a shorter length; `exactattn precision --n N` runs "
                "longer inputs in the dtypes)"
            )
        model.check_length(n)
        return n
    return min(16, model.max_length) if model.max_length is not None else 16


def print_rounding(rounding: list[dict[str, Any]], dtype: str, shown: int = 20) -> None:

    if not rounding:
        console.print(f"every exported value is exact in {dtype}", highlight=False)
        return
    total = sum(r["rounded"] for r in rounding)
    console.print(
        f"{total} value(s) in {len(rounding)} tensor(s) round in {dtype} "
        "(compared exactly with the model's rationals):",
        highlight=False,
    )
    for r in rounding[:shown]:
        ex = r["examples"][0]
        err = f", max |error| {r['max_abs_error']}" if r["max_abs_error"] else ""
        console.print(
            f"  {escape(r['tensor'])}: {r['rounded']}/{r['entries']}{err}; e.g. "
            f"{ex['index']} {escape(ex['exact'])} → {ex['value']}",
            highlight=False,
        )
    if len(rounding) > shown:
        console.print(f"  … and {len(rounding) - shown} more tensors", highlight=False)


def _refuse_overflow(names: list[str], dtype: str) -> None:
    """Exit 2, nothing written, when the dtype cannot hold the model (docs/export.md)."""
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise UsageError(
            f"--dtype {dtype}: {len(names)} exported tensor(s) do not fit the dtype: {shown} "
            "(a value past its range became ±inf, or a temperature became 0) (fix: a wider "
            "dtype such as float32, or a model with smaller weights)"
        )


@click.group("export")
def export_group() -> None:
    """Export a model into PyTorch or TransformerLens (optional extra 'torch')."""


@export_group.command("torch")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), required=True, help="OUT.pt."
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=DEFAULT_DTYPE,
    show_default=True,
    help="Weights rounded once to this dtype (the same default for both exports).",
)
@click.option("--n", "n", type=int, default=None, help="Input length (default 16).")
@click.option(
    "--attention",
    type=click.Choice(["softmax", "hard", "average", "leftmost", "rightmost"]),
    default="softmax",
    show_default=True,
    help="softmax (deployed) or a hard rule (reference; 'hard' = each head's own).",
)
@click.option(
    "--kernel",
    type=click.Choice(["eager", "sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient"]),
    default="eager",
    show_default=True,
    help="Attention computed by hand (eager) or by PyTorch's scaled_dot_product_attention.",
)
@click.option("--tau", default=None, help="Temperature override (an expression in n).")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the rounding report as JSON.",
)
def export_torch_cmd(
    model_path: str,
    out: str,
    dtype: str,
    n: int | None,
    attention: str,
    kernel: str,
    tau: str | None,
    json_out: str | None,
) -> None:
    """MODEL at one length n as a PyTorch module file (config + state dict; load it with
    exactattn.export.torch.load). Lists every weight that rounds in the dtype."""

    refuse_overwrite([("MODEL", model_path)], [("-o", out), ("--json", json_out)])
    require("torch", "exactattn export torch")
    # lazy: torch, an optional extra
    from exactattn.export.torch import export_torch, overflows, save

    model = load_model(model_path)
    length = _n_for(model, n)
    override = parse_tau(tau) if tau else None
    if override is not None:  # τ(n) > 0, said as --tau's own error (not as an overflow)
        Temperatures(model, override).at(length, BASE_PREC)
    exp = export_torch(model, length, dtype, attention, kernel, override)
    _refuse_overflow(overflows(exp.module.state_dict()), dtype)
    save(exp, Path(out))
    if json_out:
        write_json_atomic(
            Path(json_out),
            {
                "format": "exactattn-torch-rounding/1",
                "model": model.name,
                "n": length,
                "dtype": dtype,
                "rounding": exp.rounding,
            },
        )
    err_console.print(
        f"wrote {out} ({model.name}, n = {length}, {dtype})", highlight=False, markup=False
    )
    print_rounding(exp.rounding, dtype)


@export_group.command("transformer-lens")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Output file (default: MODEL's stem + .transformer-lens.pt in the current directory).",
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=DEFAULT_DTYPE,
    show_default=True,
    help="Weights rounded once to this dtype (the same default for both exports).",
)
@click.option("--n", "n", type=int, default=None, help="Input length (default 16).")
@click.option(
    "--mask-hooks/--no-mask-hooks",
    default=True,
    show_default=True,
    help="Carry masks other than causal/none by a hook on hook_attn_scores (else: refuse).",
)
def export_tl_cmd(
    model_path: str, out: str | None, dtype: str, n: int | None, mask_hooks: bool
) -> None:
    """MODEL as a TransformerLens HookedTransformer: config + state dict (load it with
    exactattn.export.transformer_lens.load_hooked). Exit 2 naming the feature that does not
    fit (per-head temperatures; with --no-mask-hooks, masks other than causal/none)."""
    # an output naming the input is refused first, as by `export torch` (with or without
    # the optional extras installed)
    path = Path(out) if out else Path(Path(model_path).stem + ".transformer-lens.pt")
    refuse_overwrite([("MODEL", model_path)], [("-o", path)])
    require("torch", "exactattn export transformer-lens", extra="transformer-lens")
    require("transformer_lens", "exactattn export transformer-lens")
    # lazy: torch and transformer_lens, optional extras
    from exactattn.export.transformer_lens import describe, export_transformer_lens, save

    model = load_model(model_path)
    length = _n_for(model, n)
    doc = export_transformer_lens(model, length, dtype, mask_hooks)
    from exactattn.export.torch import overflows  # lazy: torch, an optional extra

    _refuse_overflow(overflows(doc["state_dict"]), dtype)
    save(doc, path)
    err_console.print(
        f"wrote {path} ({model.name}, n = {length}, {dtype})", highlight=False, markup=False
    )
    console.print(describe(doc), highlight=False, markup=False)
