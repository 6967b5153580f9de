"""The arb path's per-shard memo of a head's δα (engine/soft.py, ``WeightCache.dalpha``).

With δ = 0 into a head, δα is a function of the word's score, argmax and support rows, the
mask, the head, τ and the precision; the memo computes it once per pattern. It must give
the balls a fresh computation gives, bit for bit (results are byte-identical with and
without it): here every word of a length is run through ``run_soft`` with one shared cache
(hits) and with a fresh cache per word (no hits), and every δ entry's midpoint and radius
must agree, at two precisions.
"""

from __future__ import annotations

import json
import sys

import pytest
from flint import ctx
from paths import ROOT

from exactattn import model_from_dict
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.soft import WeightCache, run_soft
from exactattn.engine.temperature import Temperatures
from exactattn.importers.tracr import import_tracr
from exactattn.inputs import words_of_length

TRACR = ROOT / "tests" / "data" / "tracr_lib"


def _model(name: str) -> tuple[object, int]:
    """A tracr library program at (at most) n = 4, or the benchmark's random model (its
    first block: words with the same argmax and support rows but other scores)."""
    if name == "random":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from models import random_model

        return model_from_dict(random_model(d=8, blocks=1, heads=2, seed=3)), 5
    n = int(json.loads((TRACR / f"{name}.json").read_text())["max_seq_len"])
    return model_from_dict(import_tracr(TRACR / f"{name}.npz", TRACR / f"{name}.json")), min(4, n)


def _bits(m) -> list[tuple[int, int, int, int]] | None:
    if m is None:
        return None
    out = []
    for x in m.entries():
        mm, me = x.mid().man_exp()
        rm, re_ = x.rad().man_exp()
        out.append((int(mm), int(me), int(rm), int(re_)))
    return out


@pytest.mark.parametrize("name", ["lib_frac_prevs", "lib_sort_unique", "lib_hist", "random"])
def test_dalpha_memo_gives_fresh_balls(name: str) -> None:
    model, n = _model(name)
    cm = CompiledModel(model)
    temps = Temperatures(model, None)
    words = list(words_of_length(model.alphabet, n))
    hb = run_hard(cm, words, n)
    for prec in (64, 128):
        taus = temps.at(n, prec)
        shared = WeightCache(cm)
        with ctx.workprec(prec):
            for b in range(len(words)):
                got = run_soft(cm, hb, b, taus, shared).deltas
                want = run_soft(cm, hb, b, taus, WeightCache(cm)).deltas
                assert [_bits(d) for d in got] == [_bits(d) for d in want], (words[b], prec)
        # the memo did serve on the tracr programs: fewer patterns than (word, head) calls
        # (the random model's words differ in their scores: one pattern per call)
        heads = sum(len(layer) for layer in cm.layers if isinstance(layer, list))
        calls = len(words) * heads
        assert 0 < len(shared.dalpha) <= calls
        assert name == "random" or len(shared.dalpha) < calls


def test_dalpha_memo_stays_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo is emptied before it would pass DALPHA_CELLS (T² cells per entry), and the
    balls stay a fresh computation's."""
    import exactattn.engine.soft as soft

    model, n = _model("random")
    T = model.length(n)
    monkeypatch.setattr(soft, "DALPHA_CELLS", 3 * T * T)
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))
    hb = run_hard(cm, words, n)
    taus = Temperatures(model, None).at(n, 64)
    shared = WeightCache(cm)
    with ctx.workprec(64):
        for b in range(len(words)):
            got = run_soft(cm, hb, b, taus, shared).deltas
            want = run_soft(cm, hb, b, taus, WeightCache(cm)).deltas
            assert [_bits(d) for d in got] == [_bits(d) for d in want]
            assert shared.dalpha_cells == T * T * len(shared.dalpha) <= 3 * T * T
