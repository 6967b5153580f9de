"""The TransformerLens export (issue 26): a bundled LTL model and tracr-imported models load
in a HookedTransformer and reproduce the torch export (read-out and every layer, through the
hook names the export maps them to). Skipped, with the reason, without the extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (optional extra: pip install -e '.[torch]')"
)
pytest.importorskip(
    "transformer_lens",
    reason="transformer-lens is not installed (optional extra: "
    "pip install -e '.[transformer-lens]')",
)
# one intra-op thread: the tests' tensors are tiny, and on a shared machine torch's thread
# pool costs more than it saves (10 ms per small matmul measured under load)
torch.set_num_threads(1)

from exactattn.cli import main  # noqa: E402
from exactattn.export.torch import export_torch  # noqa: E402
from exactattn.export.transformer_lens import (  # noqa: E402
    export_transformer_lens,
    load_hooked,
    readout,
    tokens,
)
from exactattn.importers.tracr import import_tracr  # noqa: E402
from exactattn.inputs import words_of_length  # noqa: E402
from exactattn.model import load_model, model_from_dict  # noqa: E402

MODELS = ROOT / "models"
TRACR = ROOT / "tests" / "data" / "tracr"


def _model(src: str):
    if src.startswith("tracr:"):
        name = src.removeprefix("tracr:")
        return model_from_dict(import_tracr(TRACR / f"{name}.npz", TRACR / f"{name}.json"))
    return load_model(MODELS / f"{src}.json")


@pytest.mark.parametrize(
    "src,dtype,tol",
    [
        # three hidden layers split over blocks, masks gt/lt by hook
        ("ltl_since_until_positions", "float64", 1e-12),
        ("ltl_counting_temperature", "float32", 1e-5),  # four heads, leq/geq, τ = 1/n
        ("tracr:frac_prevs", "float64", 1e-12),  # value output, τ = sqrt(10)
        ("tracr:length", "float32", 1e-5),  # argmax output
    ],
)
def test_hooked_transformer_reproduces_torch_export(tmp_path, src: str, dtype: str, tol) -> None:
    model = _model(src)
    n = 4
    words = [list(w) for w in words_of_length(model.alphabet, n)]
    out = tmp_path / "m.pt"
    r = (
        CliRunner().invoke(
            main,
            [
                "export",
                "transformer-lens",
                str(MODELS / f"{src}.json"),
                "-o",
                str(out),
                "--n",
                str(n),
                "--dtype",
                dtype,
            ],
        )
        if not src.startswith("tracr:")
        else None
    )
    if r is not None:
        assert r.exit_code == 0, r.output
        ht, doc = load_hooked(out)
    else:
        ht, doc = load_hooked(export_transformer_lens(model, n, dtype))
    logits, cache = ht.run_with_cache(tokens(doc, words))
    mod = export_torch(model, n, dtype).module
    acts = mod.run(mod.embed(mod.encode(words)))
    y = mod.readout(acts[-1])
    assert (readout(doc, logits) - y).abs().max().item() <= tol
    for li in range(len(model.layers)):
        tl = cache[doc["layer_map"][str(li)]][..., : model.d]
        assert (tl - acts[li + 1]).abs().max().item() <= tol, f"layer {li}"
        assert (cache[doc["layer_map"][str(li)]][..., model.d :] == 0).all()  # scratch erased
    # hooks are TransformerLens's names, and attention patterns respect the model's masks
    assert "blocks.0.attn.hook_pattern" in cache
    # the decisions agree too
    assert model.output.kind == "value" or mod.decide(readout(doc, logits)) == mod.decide(y)


def test_mask_hook_is_what_masks() -> None:
    """Without the hooks the LTL model's masks are gone and the outputs change: the hook is
    doing real work (a test of the test)."""
    model = _model("ltl_since_until_positions")
    n = 4
    words = [list(w) for w in words_of_length(model.alphabet, n)]
    doc = export_transformer_lens(model, n, "float64")
    ht, doc = load_hooked(doc)
    with_hooks = ht(tokens(doc, words))
    ht.reset_hooks(including_permanent=True)
    without = ht(tokens(doc, words))
    assert (with_hooks - without).abs().max().item() > 1e-3


def test_models_that_do_not_fit_are_named(tmp_path) -> None:
    raw = (MODELS / "induction_k1.json").read_text()
    import json

    d = json.loads(raw)
    d["layers"][2]["heads"][1]["temperature"] = "1/(2*n)"
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    r = CliRunner().invoke(
        main, ["export", "transformer-lens", str(p), "-o", str(tmp_path / "o.pt")]
    )
    assert r.exit_code == 2
    assert "layers[2].heads[1]: temperature '1/(2*n)'" in r.output
    assert not (tmp_path / "o.pt").exists()
    r = CliRunner().invoke(
        main,
        [
            "export",
            "transformer-lens",
            str(MODELS / "dyck2.json"),
            "--no-mask-hooks",
            "-o",
            str(tmp_path / "o.pt"),
        ],
    )
    assert r.exit_code == 2 and ".mask: 'lt'" in r.output


@pytest.mark.parametrize("mask", ["none", "leq", "lt", "gt", "geq"])
def test_every_mask_and_identity_output(mask: str) -> None:
    """A one-head model without an output matrix (identity) under each mask, including
    queries that see no key (lt at the first slot, gt at the last: they add 0)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_export_torch import _tiny

    model = model_from_dict(_tiny(mask))
    ht, doc = load_hooked(export_transformer_lens(model, 3, "float64"))
    assert doc["cfg"]["attention_dir"] == ("causal" if mask == "leq" else "bidirectional")
    words = [list(w) for w in words_of_length(model.alphabet, 3)]
    mod = export_torch(model, 3, "float64").module
    y = readout(doc, ht(tokens(doc, words)))
    assert torch.equal(y, mod(mod.encode(words)))
