"""The hard meaning's float filter (engine/hardfilter.py, proofs/hard_filter.md, issue 38).

The filter must give the exact path's record bit for bit (Lemma X): every argmax it calls
certain is the exact one, every enclosure holds, and every word that may attain an extremum is
recomputed. Checked here lemma by lemma against exact arithmetic, on a model built so that
float64 orders two scores the wrong way (which the filter must not decide, and decides wrongly
without its rounding allowance), on exact ties confirmed on the keys, and — hypothesis — on
random small models with deliberate ties and near-ties, at every split into exact prefix and
filtered layers, against the exact path (records equal) and, through the whole check with the
filter forced on, against the check without it.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from paths import ROOT
from strategies import models, to_json_text

from exactattn import model_from_dict, run_check
from exactattn.core.errors import ExactAttnError
from exactattn.core.numbers import load_json_text, parse_decimal
from exactattn.engine import hardfilter as hf
from exactattn.engine.cascade import interval as iv
from exactattn.engine.hard import CompiledModel, read_output, run_hard
from exactattn.engine.measure import LengthAccumulator
from exactattn.engine.ratarray import RatArray
from exactattn.inputs import words_of_length
from exactattn.model import AcceptOutput, model_from_raw
from exactattn.model.reference import Oracle

sys.path.insert(0, str(ROOT / "benchmarks"))


def records(model, n: int, start: int, batch: int = 5) -> tuple[object, object]:
    """The hard records of every word of length n, exact path and filter (``start``: the
    exact prefix), in batches of ``batch`` words (candidates across batches)."""
    cm = CompiledModel(model)
    oracle = Oracle(model.reference, model.alphabet) if model.reference else None
    L = len(model.layers)
    exact = LengthAccumulator(model, n, oracle, L)
    filt = LengthAccumulator(model, n, oracle, L)
    words = list(words_of_length(model.alphabet, n))
    for r in range(0, len(words), batch):
        chunk = words[r : r + batch]
        exact.add_hard(run_hard(cm, chunk, n), first_rank=r)
        filt.add_filtered(hf.run_filter(cm, chunk, n, start), cm, first_rank=r)
    kinds = [layer.kind for layer in model.layers]
    return exact.to_record(None, kinds, {}), filt.to_record(None, kinds, {})


def wrong_claims(model, n: int, start: int) -> list[str]:
    """What the filter claims about a word it calls decided (``ok``) and the exact path
    contradicts: its accept decision, an enclosure of |y − t|, of a layer's largest
    |activation| or of a head's smallest gap. (The measurement would recompute some of these
    words as candidates anyway; the claims must hold by themselves.)"""
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))
    hb = run_hard(cm, words, n)
    f = hf.run_filter(cm, words, n, start)
    out = []
    y = read_output(model, hb.activations[-1], n).values
    t = model.output.threshold
    for b in np.flatnonzero(f.ok).tolist():
        yb = Fraction(int(y.num[b]), y.den)
        if bool(f.accept[b]) != (yb > t):
            out.append(f"{words[b]}: accept {bool(f.accept[b])}")
        if not Fraction(f.margin_lo[b]) <= abs(yb - t) <= Fraction(f.margin_hi[b]):
            out.append(f"{words[b]}: margin")
        for li, lo in f.act_lo.items():
            x = hb.layers[li].x_out
            got = Fraction(int(np.abs(x.num[b]).max()), x.den)
            if not Fraction(lo[b]) <= got <= Fraction(f.act_hi[li][b]):
                out.append(f"{words[b]}: activation of layer {li}")
        for (li, h), facts in f.heads.items():
            one = LengthAccumulator(model, n, None, len(model.layers))
            one.add_hard(run_hard(cm, [words[b]], n), first_rank=0)
            rec = one.head_gaps[(li, h)]
            tr = hb.layers[li].heads[h]
            if int(tr.top[b].sum(axis=1).max()) != int(facts.top_max[b]):
                out.append(f"{words[b]}: argmax set of head {li}.{h}")
            g = rec.value
            lo, hi = facts.gap_lo[b], facts.gap_hi[b]
            if (g is None) != (lo == np.inf):
                out.append(f"{words[b]}: a gap at head {li}.{h} or none")
            elif g is not None and not Fraction(lo) <= g <= Fraction(hi):
                out.append(f"{words[b]}: gap of head {li}.{h}")
    return out


# ------------------------------------------------------------------ the lemmas, one by one


def _fracs(rng: random.Random, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    for i in np.ndindex(*shape):
        out[i] = Fraction(rng.randint(-40, 40), rng.choice([1, 2, 3, 7, 10, 12, 1024]))
    return out


def _exact_of(a: np.ndarray) -> RatArray:
    return RatArray.from_fractions(a.tolist())


def test_lemma_he_conversion() -> None:
    """Lemma HE: fl(fl(N)/fl(D)) is within CONV·max|x̂| + ETA of N/D, per word."""
    rng = random.Random(1)
    for _ in range(50):
        a = _fracs(rng, (3, 4, 5))
        ea = _exact_of(a)
        x = iv.rat_float_fm(ea.num, ea.den)  # (d, B, T)
        mag = hf._word_max(hf._row_max_abs(x))
        rad = mag * hf.CONV + hf.ETA
        for b, i, c in np.ndindex(3, 4, 5):
            assert abs(Fraction(x[c, b, i]) - a[b, i, c]) <= Fraction(rad[b])


def test_lemma_hl_linear_map() -> None:
    """Lemma HL: ŷ within ‖W‖∞·R + g·(‖W‖∞·M + max|b|) of x·Wᵀ + b for every entry of the
    word, with non-dyadic weights and a radius on the input; the magnitude bound holds."""
    rng = random.Random(2)
    for _ in range(40):
        d, m = rng.randint(1, 6), rng.randint(1, 4)
        w = _fracs(rng, (m, d))
        b = _fracs(rng, (m,))
        lin = hf._Map.of(w.tolist(), b.tolist())
        xe = _fracs(rng, (2, 3, d))
        ex = _exact_of(xe)
        x = iv.rat_float_fm(ex.num, ex.den)
        mag = hf._word_max(hf._row_max_abs(x))
        rad = mag * hf.CONV + hf.ETA
        y, ymag, yr = lin(x, mag, rad)
        for bb, i, o in np.ndindex(2, 3, m):
            exact = sum(w[o, c] * xe[bb, i, c] for c in range(d)) + b[o]
            assert abs(Fraction(y[o, bb, i]) - exact) <= Fraction(yr[bb])
            assert abs(y[o, bb, i]) <= ymag[bb]


def test_lemma_hl_needs_the_extra_u() -> None:
    """Lemma HL's allowance (γ_{d+1} + u)(1 + u) on an exact input: the weight, the product,
    the bias and the sum round in one direction here (the coarse tier's seeded case, its
    Lemma L), an error of 2.57u·(|xw| + |b|) against a radius of ≈ 3u·(|xw| + |b|); with
    γ_{d+1} alone (≈ 2u, row HF4) it misses."""
    w = Fraction(1267227208755797877, 1152921504607236860)
    b = Fraction(836794654979, 17592186044490)
    xf = float.fromhex("0x1.ede25d4d1fd61p+0")
    lin = hf._Map.of([[w]], [b])
    x = np.full((1, 1, 1), xf)
    y, _, rad = lin(x, np.array([xf]), np.zeros(1))
    err = abs(Fraction(y[0, 0, 0]) - (w * Fraction(xf) + b))
    assert err <= Fraction(rad[0])
    assert err > Fraction(257, 100) * Fraction(hf.U) * (abs(w * Fraction(xf)) + b)


def test_exactly_representable_numbers_have_no_conversion_radius() -> None:
    """Integers below 2^53 over a power of two convert exactly: Lemma HE's radius is ETA
    alone there (the rule's two conditions), CONV·max|x̂| + ETA elsewhere."""
    mag = np.array([3.0])
    dyadic = RatArray(np.array([[[3, -1]]], dtype=np.int64), 4)
    assert hf.conversion_radius(dyadic, mag).tolist() == [hf.ETA]
    third = RatArray(np.array([[[3, -1]]], dtype=np.int64), 3)
    assert hf.conversion_radius(third, mag).tolist() == [3.0 * hf.CONV + hf.ETA]
    wide = RatArray(np.array([[[2**53 + 1, 0]]], dtype=np.int64), 4)
    assert hf.conversion_radius(wide, mag).tolist() == [3.0 * hf.CONV + hf.ETA]


def test_lemma_hd_ha_scores_and_tops() -> None:
    """Lemmas HD and HA on the filter's first layer: every score within ρ of the exact one,
    every unique top the filter certifies the exact argmax set, and every word's gap
    enclosure holds the exact smallest gap."""
    rng = random.Random(3)
    for trial in range(25):
        d = {
            "format": "exactattn/1",
            "name": "scores",
            "alphabet": ["a", "b", "c"],
            "bos": "<s>",
            "d": 3,
            "embedding": {
                "token": {t: [str(_fracs(rng, (1,))[0]) for _ in range(3)] for t in "abc<"},
                "position": ["1/(i+1)", "i", "0"],
            },
            "layers": [
                {
                    "kind": "attention",
                    "heads": [
                        {
                            "query": [[str(x) for x in row] for row in _fracs(rng, (2, 3))],
                            "key": [[str(x) for x in row] for row in _fracs(rng, (2, 3))],
                            "value": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                            "mask": rng.choice(["none", "leq", "lt"]),
                            "hard": "average",
                        }
                    ],
                }
            ],
            "output": {
                "kind": "accept",
                "position": "last",
                "weight": [1, 1, 1],
                "bias": 0,
                "threshold": 0,
            },
        }
        d["embedding"]["token"]["<s>"] = d["embedding"]["token"].pop("<")
        model = model_from_dict(d)
        cm = CompiledModel(model)
        n = 3
        words = list(words_of_length(model.alphabet, n))
        hb = run_hard(cm, words, n)
        f = hf.run_filter(cm, words, n, 0)
        tr = hb.layers[0].heads[0]
        s = f.first[0].s
        for b in range(len(words)):
            for i, j in np.ndindex(s.shape[1], s.shape[2]):
                exact = Fraction(int(tr.scores.num[b, i, j]), tr.scores.den)
                assert abs(Fraction(s[b, i, j]) - exact) <= Fraction(f.first[0].rho[b])
        facts = f.heads[(0, 0)]
        acc = LengthAccumulator(model, n, None, 1)
        for b in range(len(words)):
            if not f.ok[b]:
                continue
            # a decided word: its argmax sets are the exact ones (one key, or a confirmed tie)
            sizes = tr.top[b].sum(axis=1)
            assert int(sizes.max()) == int(facts.top_max[b]), (trial, b)
            rec = acc.head_gaps.setdefault((0, 0), type(acc.gap)())
            one = LengthAccumulator(model, n, None, 1)
            one.add_hard(run_hard(cm, [words[b]], n), first_rank=0)
            g = one.head_gaps[(0, 0)].value
            if g is None:
                assert facts.gap_lo[b] == np.inf
            else:
                assert Fraction(facts.gap_lo[b]) <= g <= Fraction(facts.gap_hi[b])
            del rec


# ------------------------------------------------------------- a model floats get wrong

BIG = 2**53
CANCEL = {
    "format": "exactattn/1",
    "name": "cancellation",
    "alphabet": ["a", "b"],
    "d": 3,
    # keys K·x: a's (2^53, 1, −2^53) scores 1 exactly under the query (1, 1, 1), but
    # fl(fl(2^53 + 1) − 2^53) = 0 in the fixed order; b's (1/2, 0, 0) scores 1/2: float64 puts
    # b on top, exactly a is. The embeddings and values are small, so every other radius is.
    "embedding": {"token": {"a": [1, 1, -1], "b": [f"1/{2 * BIG}", 0, 0]}},
    "layers": [
        {
            "kind": "attention",
            "heads": [
                {
                    "query": [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
                    "query_bias": [1, 1, 1],
                    "key": [[BIG, 0, 0], [0, 1, 0], [0, 0, BIG]],
                    "value": [[0, 0, 0], [0, 1, 0], [0, 0, 0]],
                    "mask": "none",
                    "hard": "average",
                }
            ],
        }
    ],
    "output": {
        "kind": "accept",
        "position": "last",
        "weight": [0, 1, 0],
        "bias": 0,
        "threshold": "1/2",
    },
}


def test_cancellation_is_not_decided_by_the_filter() -> None:
    """Where float64 orders the scores wrongly the filter says "cannot tell" (the word is
    recomputed), and the record is the exact path's; "aa" and "bb" tie on equal keys, which
    the filter confirms (Lemma HT) and decides. Rows HF1, HF2 (no threshold, no score
    radius) make it decide "ab" wrongly here."""
    model = model_from_dict(CANCEL)
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 2))
    f = hf.run_filter(cm, words, 2, 0)
    assert f.ok.tolist() == [True, False, False, True]  # "ab", "ba": cannot tell
    assert wrong_claims(model, 2, 0) == []
    exact, filt = records(model, 2, 0)
    assert exact == filt


def _no_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter without its rounding allowance: no γ, no u, no conversion error."""
    monkeypatch.setattr(hf, "gamma", lambda k: 0.0)
    monkeypatch.setattr(hf, "U", 0.0)
    monkeypatch.setattr(hf, "CONV", 0.0)
    monkeypatch.setattr(hf, "ETA", 0.0)
    monkeypatch.setattr(hf, "SAFE", 1.0)
    hf._FW.clear()  # the weights' constants were computed with the real ones


def test_the_rounding_allowance_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its rounding allowance the filter decides "ab" with b on top (float64's
    order): a wrong hard meaning, whose accept decision it claims (exactly y = 1 > 1/2).
    (Here the measurement recomputes "ab" anyway, as a candidate for the smallest margin.)"""
    _no_allowance(monkeypatch)
    try:
        model = model_from_dict(CANCEL)
        cm = CompiledModel(model)
        words = list(words_of_length(model.alphabet, 2))
        f = hf.run_filter(cm, words, 2, 0)
        assert f.ok[1] and not f.accept[1]
        assert "('a', 'b'): accept False" in wrong_claims(model, 2, 0)
    finally:
        hf._FW.clear()


def test_ties_are_confirmed_on_exact_keys_only_at_the_first_filtered_layer() -> None:
    """A tie of equal keys is decided at the first filtered layer (the exact keys are at
    hand) and recomputed exactly after it (no exact keys there): both give the exact record."""
    d = json.loads(json.dumps(CANCEL))
    d["embedding"]["token"] = {"a": [1, 2, 0], "b": [1, 2, 0]}  # every key equal: all tie
    d["layers"].append(json.loads(json.dumps(d["layers"][0])))
    model = model_from_dict(d)
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, 3))
    assert hf.run_filter(cm, words, 3, 0).ok.all() is np.False_  # layer 1 ties: exact
    assert hf.run_filter(cm, words, 3, 1).ok.all()  # confirmed at layer 1 itself
    for start in (0, 1, 2):
        exact, filt = records(model, 3, start)
        assert exact == filt


# ------------------------------------------------------- random models (hypothesis)


def _accept_model(d: dict):
    try:
        model = model_from_raw(load_json_text(to_json_text(d)))
    except ExactAttnError:
        return None
    if not isinstance(model.output, AcceptOutput):
        return None
    if not hf.filter_weights(CompiledModel(model), model.length(1)).ok:
        return None
    return model


def _accept_models(d: dict) -> dict:
    """Most drawn models have an accept read-out; turn the others into one (the filter's)."""
    if d["output"]["kind"] != "accept":
        d = dict(d)
        d["output"] = {
            "kind": "accept",
            "position": "last",
            "weight": [1] + [0] * (d["d"] - 1),
            "bias": 0,
            "threshold": 0,
        }
        d.pop("reference", None)
    return d


def _records_agree(d: dict) -> None:
    model = _accept_model(_accept_models(d))
    if model is None:
        return
    for n in range(1, 4):
        for start in range(len(model.layers) + 1):
            assert wrong_claims(model, n, start) == [], (n, start)
            exact, filt = records(model, n, start, batch=4)
            assert exact == filt, (n, start)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_filter_equals_exact(d) -> None:
    """On random small models (deliberate ties: zero and repeated rows; near-ties: decimals
    beside thirds), at every split into exact prefix and filtered layers, nothing the filter
    claims is contradicted by the exact path, and the hard record is the exact path's, bit
    for bit."""
    _records_agree(d)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_random_models_filter_equals_exact_many(d) -> None:
    _records_agree(d)


SOFT_ENDS = {"error", "error_witness", "precision_bits", "float_settled", "measured_over_bound"}


def _compare(a, b, path: str = "") -> list[str]:
    """Where two result files differ, but for the soft error enclosures (and what rests on
    them), which may differ in their last digits (the coarse tier reads other enclosures)."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [f"{path}: {a!r} != {b!r}"]
        out = []
        for k in a:
            if k in SOFT_ENDS or (path == ".closed_forms" and k.startswith("error_layer_")):
                continue
            out += _compare(a[k], b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path]
        return [d for x, y in zip(a, b, strict=True) for d in _compare(x, y, path)]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _overlap(a: dict, b: dict) -> bool:
    if "inf" in (a["upper"], b["upper"]):
        return True
    lo = max(parse_decimal(a["lower"]), parse_decimal(b["lower"]))
    return lo <= min(parse_decimal(a["upper"]), parse_decimal(b["upper"]))


def _forced(monkeypatch: pytest.MonkeyPatch, start: int | None) -> None:
    """The check's rules replaced: the filter runs from layer ``start`` on (0: every layer),
    and the coarse tier (which reads the filter's enclosures) wherever it can."""
    import exactattn.engine.cascade.chain as chain
    import exactattn.run.shard as shard

    monkeypatch.setattr(shard, "filter_plan", lambda cm, n: start)
    monkeypatch.setattr(chain, "coarse_pays", lambda cm, n: True)


def _check_forced(d: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _accept_model(_accept_models(d))
    if model is None:
        return
    plain = run_check(model, max_n=3).to_json()
    for start in range(len(model.layers)):
        _forced(monkeypatch, start)
        got = run_check(model, max_n=3).to_json()
        assert _compare(plain, got) == []
        for rf, rs in zip(got["lengths"], plain["lengths"], strict=True):
            for lf, ls in zip(rf["layers"], rs["layers"], strict=True):
                assert _overlap(lf["error"], ls["error"]), (rf["n"], lf["index"])
    monkeypatch.undo()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_whole_check_with_the_filter_forced(d) -> None:
    """The whole check with the filter forced on (any exact prefix): every hard value,
    decision, count and witness equal to the check without it, the error enclosures sound
    (they overlap the exact path's)."""
    with pytest.MonkeyPatch.context() as mp:
        _check_forced(d, mp)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=models())
def test_whole_check_with_the_filter_forced_many(d) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _check_forced(d, mp)


# ----------------------------------------------------- the benchmark models and the rule


def _random_model(**kw):
    from models import random_model

    return model_from_dict(random_model(**kw))


def test_the_rule() -> None:
    """The filter runs on the random benchmark model (scores beyond float64), after its
    int64 layers; not on Dyck-2 (small integers) nor on a model without an accept read-out."""
    from exactattn import load_model

    rnd = CompiledModel(_random_model())
    assert [hf.filter_plan(rnd, n) for n in (4, 12)] == [4, 2]
    assert hf.filter_plan(CompiledModel(load_model(ROOT / "models" / "dyck2.json")), 8) is None
    assert hf.filter_plan(CompiledModel(load_model(ROOT / "models" / "dyck1.json")), 8) is None


@pytest.mark.parametrize("seed,blocks", [(0, 4), (1, 3)])
def test_random_benchmark_models_unchanged(seed: int, blocks: int, monkeypatch) -> None:
    """On both random benchmark models the result file is the same with and without the
    filter (n ≤ 7 here; docs/scale.md has n ≤ 12): the coarse tier's ends move in their last
    bits, what is reported does not."""
    from cascade_patch import set_policy

    model = _random_model(d=16, blocks=blocks, heads=2, seed=seed)
    on = run_check(model, max_n=7).to_json()
    set_policy(monkeypatch, hard_filter=False)
    off = run_check(model, max_n=7).to_json()
    assert on == off


def test_checkpoint_identity_records_the_filter(tmp_path: Path) -> None:
    """Shard identities carry ``hard_filter: 1`` where the filter runs (soft jobs), and only
    there: Dyck-2's, and hard-only jobs', are as before."""
    from exactattn import load_model
    from exactattn.inputs import Shard
    from exactattn.run.executors import Checkpoint, fingerprint
    from exactattn.run.shard import LengthJob

    rnd = _random_model()
    ck = Checkpoint(tmp_path / "ck", fingerprint("m", {"max_n": 12}))
    shard = Shard(12, 0, 0, 4096)
    assert ck.identity(LengthJob(rnd, 12, None, False), shard)["hard_filter"] == 1
    assert "hard_filter" not in ck.identity(LengthJob(rnd, 12, None, True), shard)
    dyck = load_model(ROOT / "models" / "dyck2.json")
    assert "hard_filter" not in ck.identity(LengthJob(dyck, 8, None, False), shard)
    ck.close()


def test_words_recomputed_are_few_on_the_benchmark_model() -> None:
    """The point of it: on the random benchmark model at n = 12 the filter decides all but a
    few words per batch and recomputes fewer than 1% exactly (candidates included)."""
    model = _random_model()
    cm = CompiledModel(model)
    n = 12
    start = hf.filter_plan(cm, n)
    acc = LengthAccumulator(model, n, None, len(model.layers))
    words = list(itertools.islice(words_of_length(model.alphabet, n), 2048))
    f = hf.run_filter(cm, words, n, start)
    acc.add_filtered(f, cm, first_rank=0)
    assert (~f.ok).sum() <= 5
    assert f.exact_idx.size <= 20


def test_a_near_tie_of_different_keys_is_not_confirmed() -> None:
    """Keys (1, 0) and (1, 2^-60) under the query (1, 1): float64 sees the scores 1 and
    fl(1 + 2^-60) = 1 tie, but the keys differ (in one coordinate only), so exactly b's is
    the top: the filter must not confirm a tie (Lemma HT needs the whole key row equal;
    a tie would average b's value 1 with a's 0 and reject "ab", whose y is exactly 2 > 7/4),
    and the record is the exact path's."""
    d = json.loads(json.dumps(CANCEL))
    d["d"] = 3
    d["embedding"]["token"] = {"a": [1, 0, 0], "b": [1, f"1/{2**60}", 1]}
    head = d["layers"][0]["heads"][0]
    head.update(
        query=[[0, 0, 0], [0, 0, 0]],
        query_bias=[1, 1],
        key=[[1, 0, 0], [0, 1, 0]],
        value=[[0, 0, 0], [0, 0, 0], [0, 0, 1]],
    )
    d["output"].update(weight=[0, 0, 1], threshold="7/4")
    model = model_from_dict(d)
    assert wrong_claims(model, 2, 0) == []
    exact, filt = records(model, 2, 0)
    assert exact == filt
    cm = CompiledModel(model)
    f = hf.run_filter(cm, list(words_of_length(model.alphabet, 2)), 2, 0)
    assert f.ok.tolist() == [True, False, False, True]  # "ab", "ba": not decided
