"""The exports as a new user meets them (issue 39, point 8): one default dtype for both, the
TransformerLens read-out threshold as a number, and an export built for length n refusing
to run on another length (its position embeddings are P(p, n))."""

from __future__ import annotations

import warnings

import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn.cli import main
from exactattn.core.errors import UsageError
from exactattn.export import DEFAULT_DTYPE, have
from exactattn.model import load_model

MODELS = ROOT / "models"

needs_torch = pytest.mark.skipif(
    not have("torch"), reason='needs the torch extra: pip install -e ".[torch]"'
)
needs_tl = pytest.mark.skipif(
    not (have("torch") and have("transformer_lens")),
    reason='needs the transformer-lens extra: pip install -e ".[transformer-lens]"',
)


def test_one_default_dtype_for_both_exports() -> None:
    assert DEFAULT_DTYPE == "float64"
    for cmd in ("torch", "transformer-lens"):
        out = CliRunner().invoke(main, ["export", cmd, "--help"]).output
        assert "[default: float64]" in " ".join(out.split()), (cmd, out)


@needs_torch
def test_torch_export_refuses_another_length() -> None:
    from exactattn.export.torch import export_torch

    mod = export_torch(load_model(MODELS / "dyck1.json"), 4).module
    assert mod.config["dtype"] == "float64"
    ok = mod.encode(["(())"])
    assert mod.decide(mod(ok)) == [True]
    for bad in (["()"], ["(())()"]):
        with pytest.raises(UsageError, match="exported for inputs of length n = 4"):
            mod.encode(bad)
    x = mod.embed(ok)
    with pytest.raises(UsageError, match="got 2"):
        mod.run(x[:, :4, :])  # BOS, 2 symbols, and no EOS slot: the wrong number of slots
    with pytest.raises(UsageError, match="exported for inputs of length n = 4"):
        mod.readout(x[:, :5, :])


@needs_tl
def test_transformer_lens_threshold_is_a_number_and_lengths_are_guarded() -> None:
    from exactattn.export.transformer_lens import (
        export_transformer_lens,
        load_hooked,
        readout,
        tokens,
    )

    model = load_model(MODELS / "dyck1.json")
    doc = export_transformer_lens(model, 4)
    assert doc["cfg"]["dtype"] == "float64"
    r = doc["readout"]
    assert isinstance(r["threshold"], float) and r["threshold"] == 0.5
    assert r["threshold_exact"] == "1/2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ht, doc = load_hooked(doc)
    words = [list("(())"), list("(()(")]
    y = readout(doc, ht(tokens(doc, words)))
    assert [bool(v > r["threshold"]) for v in y.tolist()] == [True, False]
    with pytest.raises(UsageError, match="length n = 4"):
        tokens(doc, [list("()")])
    with pytest.raises(UsageError, match="not in the alphabet"):
        tokens(doc, [list("(x))")])
    short = tokens(doc, words)[:, :4]  # a hand-made batch of another length
    with pytest.raises(UsageError, match="length n = 4"):
        ht(short)
    with pytest.raises(UsageError, match="length n = 4"):
        readout(doc, ht(tokens(doc, words))[:, :5])
