"""The float64 tier's large-batch shortcuts compute the same bits as the plain code.

notes/benchmark-rounds.md, "Cheaper float64 tier": exact hard scores from int64 limbs of q and k
instead of Python integers (their float conversion must be Python's correctly rounded float(int)),
exp that skips entries clipped to −760, and the random benchmark model's whole float batch
with the Python-integer path forced.
"""

from __future__ import annotations

import random
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from paths import ROOT

from exactattn import model_from_dict
from exactattn.engine.cascade import attention as att
from exactattn.engine.cascade import float64 as f64
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import policy as pol
from exactattn.engine.hard import CompiledModel, run_hard
from exactattn.engine.ratarray import RatArray
from exactattn.engine.temperature import BASE_PREC, Temperatures
from exactattn.inputs import words_of_length


def _to_limbs(x: int, b: int, n: int, rng: random.Random) -> list[int]:
    """x = Σ d[i]·2^(b·i) with random non-normalised signed digits (|d| < 2^60)."""
    d = [0] * n
    rest = x
    for i in range(n - 1):
        d[i] = rng.randrange(-(2**59), 2**59)
        rest -= d[i] << (b * i)
    top, low = divmod(rest, 1 << (b * (n - 1)))
    d[n - 1] = top
    # spread the remainder over the lower digits (exact)
    for i in range(n - 2, -1, -1):
        q, low = divmod(low, 1 << (b * i))
        d[i] += q
    assert sum(v << (b * i) for i, v in enumerate(d)) == x
    return d


def _values(rng: random.Random, bits: int) -> list[int]:
    vals = [0, 1, -1, 2**53 + 1, -(2**53 + 1), 2**54 + 2, 2**54 + 6]
    for e in range(0, bits - 54):  # exact halfway cases and their neighbours
        for m in (2**53 + 1, 2**53 + 3, 2**54 - 1):
            for dlt in (-1, 0, 1):
                v = (m << e) + dlt
                vals += [v, -v]
    for _ in range(3000):
        k = rng.randrange(1, bits)
        v = rng.getrandbits(k)
        vals.append(v if rng.random() < 0.5 else -v)
    return vals


@pytest.mark.parametrize("b,n", [(28, 3), (28, 5), (26, 4), (29, 3), (20, 3)])
def test_limbs_float_is_correctly_rounded(b: int, n: int) -> None:
    rng = random.Random(b * 10 + n)
    bits = min(60 + b * (n - 1), 2 * b + 61)  # what _limbs_float accepts
    vals = [v for v in _values(rng, bits) if abs(v) < 2 ** (bits - 1)]
    digits = [_to_limbs(v, b, n, rng) for v in vals]
    c = [np.array([d[i] for d in digits], dtype=np.int64) for i in range(n)]
    got = att._limbs_float(c, b)
    assert got is not None
    want = np.array([float(v) for v in vals])
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_limbs_float_refuses_what_does_not_fit() -> None:
    c = [np.zeros(3, np.int64) for _ in range(4)]
    c[3][1] = 2**40  # |X| ≥ 2^124: above 2^62·2^(2b)
    assert att._limbs_float(c, 28) is None
    c[3][1] = 2**33
    assert att._limbs_float(c, 28) is not None


def test_score_limbs_match_python_integers() -> None:
    rng = np.random.default_rng(3)
    for bits, A in [(55, 4), (40, 7), (20, 3), (58, 2)]:
        q = rng.integers(-(2**bits), 2**bits, (5, 6, A))
        k = rng.integers(-(2**bits), 2**bits, (5, 7, A))
        qr, kr = RatArray(q, 3), RatArray(k, 5)
        scores = qr.bmm(RatArray(np.swapaxes(k, 1, 2), 5))
        tr = SimpleNamespace(q=qr, k=kr, scores=scores)
        got = att._score_limbs(tr)  # type: ignore[arg-type]
        assert got is not None
        f = att._limbs_float(*got)
        assert f is not None
        want = scores.num.astype(np.float64)
        assert np.array_equal(f.view(np.int64), want.view(np.int64))
        # and the gaps of two scores (what _head converts)
        g = [c - c[:, :, :1] for c in got[0]]
        fg = att._limbs_float(g, got[1])
        so = scores.num.astype(object)
        want = (so - so[:, :, :1]).astype(np.float64)
        assert fg is not None and np.array_equal(fg.view(np.int64), want.view(np.int64))
    # another denominator than q.den·k.den: not the hard scores' form
    tr = SimpleNamespace(q=qr, k=kr, scores=RatArray(scores.num, 7))
    assert att._score_limbs(tr) is None  # type: ignore[arg-type]


def test_exp_skips_clipped_entries_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.uniform(-2000, -760, 9000),
            [-760.0, np.nextafter(-760.0, 0), -np.inf, np.nan, np.inf, 0.0, -0.0, 700.0],
            rng.uniform(-800, 10, 3000),
        ]
    )
    rng.shuffle(x)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        got = iv._exp(x)
        want = iv._exp_all(x)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert iv._EXP_LOW == iv._exp_all(np.array([-1e300]))[0] == 0.0


def test_random_model_limbs_same_as_python_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole float batch of the random benchmark model (object scores, big rows) is the
    same with the limb path and with the Python-integer path it replaces."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from models import random_model
    finally:
        sys.path.pop(0)
    m = model_from_dict(random_model(d=16, blocks=4, heads=2, seed=0))
    cm = CompiledModel(m)
    n = 7
    hb = run_hard(cm, list(words_of_length(m.alphabet, n)), n)
    taus = iv.tau_enclosures(Temperatures(m, None).at(n, BASE_PREC))
    assert any(h.scores.num.dtype == object for lt in hb.layers for h in (lt.heads or []))
    calls = []
    real = att._score_limbs

    def counted(tr):  # type: ignore[no-untyped-def]
        got = real(tr)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(att, "_score_limbs", counted)
    fast = f64.certify_float(cm, hb, taus)
    assert calls and all(calls)
    monkeypatch.setattr(att, "_score_limbs", lambda tr: None)
    slow = f64.certify_float(cm, hb, taus)
    for name, v in vars(fast).items():
        w = getattr(slow, name)
        assert (v is None) == (w is None), name
        if v is not None:
            assert v.dtype == w.dtype and np.array_equal(v.view(np.uint8), w.view(np.uint8)), name


def test_malloc_tuning_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """EXACTATTN_MALLOC=0 leaves the allocator alone; on Linux/glibc the settings apply."""
    monkeypatch.setenv("EXACTATTN_MALLOC", "0")
    assert pol._tune_malloc() is False
    assert pol._keep_heap(1 << 30) is False  # the long-input setting obeys the switch too
    monkeypatch.delenv("EXACTATTN_MALLOC")
    if sys.platform.startswith("linux") and "glibc" in " ".join(__import__("platform").libc_ver()):
        assert pol._tune_malloc() is True
        assert pol._keep_heap(1 << 30) is True
