"""The float filter's work on the compact rows of a :class:`~exactattn.engine.hard.Sharing`
(each group's first word before q0, every word from q0) gives the numbers of the whole
assembled batch bit for bit: the error bounds (``float64._errors_compact`` against
``readout.layer_errors``) and the feed-forward layers (``_shared_ffn`` against ``ffn_linear`` on
the assembled δ), including non-finite entries and δ columns nonzero only in some rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from paths import ROOT

from exactattn import load_model
from exactattn.engine.cascade import ffn as ffp
from exactattn.engine.cascade import float64 as f64
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import readout as ro
from exactattn.engine.cascade import weights as wt
from exactattn.engine.hard import CompiledModel, Sharing, run_hard
from exactattn.inputs import words_of_length


def _bits(x: np.ndarray) -> bytes:
    a = np.ascontiguousarray(x)
    return a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()


def _parts(rng: np.random.Generator, cols: list[int], F: int, q0: int, B: int, T: int):
    """Random compact parts; some columns absent from one part, some entries non-finite."""

    def enc(shape: tuple[int, int]) -> iv.MR:
        m = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 3)
        r = np.abs(rng.normal(size=shape)) * 10.0 ** rng.integers(-9, 0)
        r[rng.random(shape) < 0.2] = 0.0
        m[r == 0] = np.where(rng.random(int((r == 0).sum())) < 0.5, 0.0, m[r == 0])
        if m.size and rng.random() < 0.3:
            m.flat[rng.integers(m.size)] = rng.choice([np.inf, -np.inf, np.nan])
        if m.size and rng.random() < 0.2:
            r.flat[rng.integers(r.size)] = np.inf
        return m, r

    top = {c: enc((F, q0)) for c in cols if rng.random() < 0.8}
    rest = {c: enc((B, T - q0)) for c in cols if c not in top or rng.random() < 0.8}
    return top, rest


@pytest.mark.parametrize("seed", range(40))
def test_compact_error_bounds_are_the_assembled_ones(seed: int) -> None:
    rng = np.random.default_rng(seed)
    G, F = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    T = int(rng.integers(2, 9))
    q0 = int(rng.integers(0, T))
    B = F * G
    cols = sorted(rng.choice(19, size=int(rng.integers(1, 5)), replace=False).tolist())
    top, rest = _parts(rng, cols, F, q0, B, T)
    sh = Sharing(group=G, q0=q0, layers=1)
    with np.errstate(all="ignore"):
        want = ro.layer_errors(f64._assemble(top, rest, sh, B, T), B, T, 19)
        got = f64._errors_compact(top, rest, sh, B, T)
    assert [_bits(x) for x in got] == [_bits(x) for x in want]


def test_compact_error_bounds_see_a_first_word_row() -> None:
    """The largest bound in a row before q0 (only in the firsts' part) is found for every
    word of its group: dropping the repeat would report the wrong row (not a vacuous test)."""
    top = {3: (np.array([[0.0, 5.0]]), np.array([[0.0, 1e-9]]))}
    rest = {3: (np.array([[1.0], [2.0]]), np.array([[1e-9], [1e-9]]))}
    sh = Sharing(group=2, q0=2, layers=1)
    lo, hi, row = f64._errors_compact(top, rest, sh, 2, 3)
    assert row.tolist() == [1, 1]
    assert (hi > 5.0).all() and (hi < 5.0001).all() and (lo > 4.9999).all()


@pytest.mark.parametrize("n", [4, 5])
def test_shared_ffn_is_the_whole_batch(n: int) -> None:
    """Dyck-2's feed-forward layer (layer 3, inside the shared layers) on random δ that is
    the same before q0 in every word of a group, as the shared attention layers give it."""
    model = load_model(ROOT / "models" / "dyck2.json")
    cm = CompiledModel(model)
    words = list(words_of_length(model.alphabet, n))[:512]
    hb = run_hard(cm, words, n)
    sh = hb.sharing
    assert sh is not None and sh.layers > 3
    B, T = len(words), hb.x0.shape[1]
    lt = hb.layers[3]
    assert lt.pre is not None
    fl = wt.float_weights(cm).layers[3]
    rng = np.random.default_rng(n)
    F = B // sh.group
    for trial in range(6):
        cols = sorted(rng.choice(19, size=int(rng.integers(1, 7)), replace=False).tolist())
        top, rest = {}, {}
        for c in cols:
            m = rng.normal(size=(F, sh.q0)) * 0.1
            r = np.abs(rng.normal(size=(F, sh.q0))) * 1e-9
            if trial % 2:  # nonzero only from q0 on: the pruning must see the same batch
                m[:], r[:] = 0.0, 0.0
            top[c] = (m, r)
            rest[c] = (
                rng.normal(size=(B, T - sh.q0)) * 0.1,
                np.abs(rng.normal(size=(B, T - sh.q0))) * 1e-9,
            )
        delta = f64._assemble(top, rest, sh, B, T)
        with np.errstate(all="ignore"):
            hidden, out_rows, ints = fl
            want = ffp.ffn_linear(ffp.rat_pre(lt.pre), delta, ints, (B, T))
            got, _ = f64._shared_ffn(lt.pre, delta, fl, sh, B, T)
        assert list(got) == list(want)
        for c in want:
            assert _bits(got[c][0]) == _bits(want[c][0])
            assert _bits(got[c][1]) == _bits(want[c][1])
