"""Result records merge: any split of a length's inputs, merged in any order, gives the
record of the whole length (the property shards, processes and resumed runs rely on)."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import models, to_json_text

from exactattn.check import LengthJob, check_shard
from exactattn.errors import ExactAttnError
from exactattn.inputs import Shard, shards_of_length, word_of_rank, words_in
from exactattn.model import load_model, model_from_raw
from exactattn.numbers import load_json_text
from exactattn.results import LengthRecord, input_rank, merge_lengths

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _model(d):
    return model_from_raw(load_json_text(to_json_text(d)))


def _record_json(rec: LengthRecord) -> str:
    return json.dumps(rec.to_json(exact=True), sort_keys=True)


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
    assert _record_json(merged) == _record_json(whole)
    # and a different bracketing: right fold instead of left fold
    right = parts[-1]
    for p in reversed(parts[:-1]):
        right = p.merge(right)
    assert _record_json(right) == _record_json(whole)


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
