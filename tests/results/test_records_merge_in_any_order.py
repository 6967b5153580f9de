"""Result records merge: any split of a length's inputs, merged in any order, gives the
record of the whole length (the property shards, processes and resumed runs rely on)."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from strategies import models, to_json_text

from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text
from exactattn.inputs import Shard, shards_of_length, word_of_rank, words_in
from exactattn.model import load_model, model_from_raw
from exactattn.results import LengthRecord, input_rank, merge_lengths, parse_point
from exactattn.run.check import LengthJob, check_shard


def _model(d):
    return model_from_raw(load_json_text(to_json_text(d)))


def _record_json(rec: LengthRecord) -> str:
    return json.dumps(rec.to_json(exact=True), sort_keys=True)


# Where a word's float enclosure is computed with other words of its batch, the last bits of
# the enclosure (and what rests on them) may differ with the batch (cascade/float64.py,
# "Determinism"); a shard's batches are fixed, so a run never sees this. Everything else is
# exact and must merge to the whole exactly.
LAYOUT_BITS = {"error", "error_witness", "precision_bits", "float_settled"}


def _strip(d):
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in LAYOUT_BITS}
    if isinstance(d, list):
        return [_strip(x) for x in d]
    return d


def _errors(rec: LengthRecord) -> list:
    return [layer.get("error") for layer in rec.to_json(exact=True)["layers"]]


def _same(a: LengthRecord, b: LengthRecord) -> None:
    assert json.dumps(_strip(a.to_json(exact=True)), sort_keys=True) == json.dumps(
        _strip(b.to_json(exact=True)), sort_keys=True
    )
    for ea, eb in zip(_errors(a), _errors(b), strict=True):
        if ea is None or eb is None:
            assert ea == eb
            continue
        if "inf" in (ea["upper"], eb["upper"]):
            continue
        lo_a, lo_b = parse_point(ea["lower"], False), parse_point(eb["lower"], False)
        hi_a, hi_b = parse_point(ea["upper"], True), parse_point(eb["upper"], True)
        assert lo_a <= hi_b and lo_b <= hi_a, (ea, eb)  # both enclose the same error


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models(), n=st.integers(1, 3), data=st.data())
def test_any_split_merged_in_any_order_is_the_whole(d, n, data) -> None:
    try:
        model = _model(d)
        model.check_length(n)
        model.position_vectors(n)
    except ExactAttnError:
        return
    k = len(model.alphabet)
    total = k**n
    hard_only = data.draw(st.booleans())
    job = LengthJob(model, n, None, hard_only, batch=data.draw(st.sampled_from([1, 3, 64])))
    try:
        whole = check_shard(job, Shard(n, 0, 0, total))
    except ExactAttnError:
        return
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, total - 1)), max_size=4))))
    bounds = [0, *[c for c in cuts if 0 < c < total], total]
    parts = [
        check_shard(job, Shard(n, i, a, b))
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    rng.shuffle(parts)
    merged = merge_lengths(parts)
    _same(merged, whole)
    # and a different bracketing: right fold instead of left fold, bit for bit the same
    right = parts[-1]
    for p in reversed(parts[:-1]):
        right = p.merge(right)
    assert _record_json(right) == _record_json(merged)


def test_record_json_round_trip_is_exact() -> None:
    model = load_model(ROOT / "models" / "dyck2.json")
    rec = check_shard(LengthJob(model, 3, None, False), Shard(3, 0, 0, 64))
    back = LengthRecord.from_json(rec.to_json(exact=True), model.alphabet)
    assert _record_json(back) == _record_json(rec)
    assert back.to_json() == rec.to_json()
    # merging a round-tripped part with a fresh one is the same as merging fresh parts
    a = check_shard(LengthJob(model, 3, None, False), Shard(3, 0, 0, 20))
    b = check_shard(LengthJob(model, 3, None, False), Shard(3, 1, 20, 64))
    a2 = LengthRecord.from_json(a.to_json(exact=True), model.alphabet)
    assert _record_json(a2.merge(b)) == _record_json(rec)


def test_shards_cover_a_length_in_order() -> None:
    alphabet = ("(", ")", "[", "]")
    for n in (1, 5, 9):
        shards = shards_of_length(4, n, max_inputs=64)
        assert shards[0].start == 0 and shards[-1].stop == 4**n
        assert all(a.stop == b.start for a, b in zip(shards, shards[1:], strict=False))
        ranks = [input_rank(alphabet, w) for s in shards for w in words_in(alphabet, s)]
        assert ranks == list(range(4**n))
    assert word_of_rank(alphabet, 3, 27) == (")", "[", "]")  # 27 = 1·16 + 2·4 + 3
