"""The fused (vectorised) float-filter code computes the same bits as the straightforward code.

The certified float path was sped up for small batches (notes/benchmark-rounds.md, "Fused float
filter"): every hidden unit of a feed-forward layer at once, exp of score gaps once per
distinct gap, sums of stacked arrays. Each must give the bits of the unit-by-unit /
entry-by-entry computation it replaced (benchmarks/compare_softfloat.py checks whole
models; these tests check the pieces on random data, including paths bundled models rarely
reach: undecided ReLUs, residuals through two hidden layers, zero coefficients).

The default suite runs a sample of the random cases; every case runs under ``-m slow``.
The samples (``FFN_DEFAULT``, ``LIN_DEFAULT``, ``LABEL_DEFAULT``) are the first seeds plus
the few seeds that, together, execute every line-to-line transition (arc) of
engine/softfloat.py (now engine/cascade/ffn.py, weights.py, readout.py) that all seeds
execute (measured with a sys.settrace tracer, 462 arcs for the feed-forward cases, 137 for
``lin``, 37 for the read-out): the empty δ, one and two hidden layers, undecided ReLUs and
residuals, the memoised plans (first layer, "h", "o", "out"), Python-integer scores
(seed % 3 == 0) and ±inf/nan entries.
test_fused_ffn_memo_covers_later_layers and test_fused_ffn_reaches_residuals still run all
300 random layers by default.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from cascade_patch import patch_everywhere

from exactattn.engine.cascade import attention as att
from exactattn.engine.cascade import batch as fbm
from exactattn.engine.cascade import ffn as ffp
from exactattn.engine.cascade import interval as iv
from exactattn.engine.cascade import readout as ro
from exactattn.engine.cascade import weights as wt
from exactattn.engine.ratarray import RatArray

# ----------------------------------------------------------------------------------------
# the unit-by-unit feed-forward layer as it was before the fused version (reference)


def _lin_value(coef, den, delta, res):
    acc = res
    for c, num in coef.items():
        t = iv.mul(iv.from_rat(num, den), delta[c])
        acc = t if acc is None else iv.add(acc, t)
    return acc


def ffn_unit_by_unit(pre, delta, ints, shape):  # noqa: C901 (a verbatim reference)
    if not delta:
        return {}
    ones = np.ones(shape, dtype=np.int64)
    units = [c for c in range(max(delta) + 1) if c in delta]
    lin_of = {c: {c: ones} for c in units}
    res_of = {}
    den = 1
    for k, (rows, wden) in enumerate(ints.hidden):
        new_lin = {}
        new_res = {}
        for h, row in enumerate(rows):
            co = {}
            res = None
            for i, w in row:
                if i in lin_of:
                    for c, v in lin_of[i].items():
                        co[c] = co[c] + w * v if c in co else w * v
                if i in res_of:
                    rm, rr = res_of[i]
                    f = float(iv.Fraction(w, wden))
                    t = (rm * f, rr * abs(f) * (1 + iv.WIDEN) + np.abs(rm * f) * iv.WIDEN)
                    res = t if res is None else iv.add(res, t)
            co = {c: v for c, v in co.items() if v.any()}
            if not co and res is None:
                continue
            dz = _lin_value(co, den * wden, delta, res)
            zpos, zneg, zm = pre(k, h)
            val = iv.add(zm, dz)
            fin = iv.finite(val)
            keep = ~zneg & fin & (val[0] >= val[1])
            kill = (~zpos & fin & (-val[0] >= val[1])) | (dz[1] == 0)
            gen_mask = ~keep & ~kill
            co = {c: np.where(keep, v, 0) for c, v in co.items()}
            co = {c: v for c, v in co.items() if v.any()}
            r_m = np.zeros(shape)
            r_r = np.zeros(shape)
            if res is not None:
                r_m = np.where(keep, res[0], 0.0)
                r_r = np.where(keep, res[1], 0.0)
            if gen_mask.any():
                rz = (np.where(zpos, zm[0], 0.0), np.where(zpos, zm[1], 0.0))
                gen = iv.sub(iv.mr_relu(val), rz)
                r_m = np.where(gen_mask, gen[0], r_m)
                r_r = np.where(gen_mask, gen[1], r_r)
            if co:
                new_lin[h] = co
            if r_r.any():
                new_res[h] = (r_m, r_r)
        lin_of, res_of = new_lin, new_res
        den *= wden
    dt = den * ints.out_den
    out = {}
    targets = set(delta) | {a for a, row in enumerate(ints.out) if row}
    for a in sorted(targets):
        co = {}
        if a in delta:
            co[a] = ones * dt
        res = None
        for h, w in ints.out[a]:
            if h in lin_of:
                for c, v in lin_of[h].items():
                    co[c] = co[c] + w * v if c in co else w * v
            if h in res_of:
                rm, rr = res_of[h]
                f = float(iv.Fraction(w, ints.out_den))
                t = (rm * f, rr * abs(f) * (1 + iv.WIDEN) + np.abs(rm * f) * iv.WIDEN)
                res = t if res is None else iv.add(res, t)
        co = {c: v for c, v in co.items() if v.any()}
        val = _lin_value(co, dt, delta, res)
        if val is not None:
            out[a] = val
    return out


def _rows(rng, n_out, n_in, density):
    rows = []
    for _ in range(n_out):
        row = []
        for c in range(n_in):
            if rng.random() < density:
                w = int(rng.integers(-3, 4))
                if w:
                    row.append((c, w))
        rows.append(row)
    return rows


def _random_ffn(rng):
    """A random feed-forward layer as ffn_linear sees it, δ columns and pre-activations."""
    B, T = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    d = int(rng.integers(2, 7))
    widths = [int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 3)))]
    hidden, pres, n_in = [], [], d
    for H in widths:
        hidden.append((_rows(rng, H, n_in, 0.6), int(rng.choice([1, 2, 3, 4]))))
        # pre-activations near 0: keep, kill and undecided ReLUs all occur
        pres.append(RatArray(rng.integers(-2, 3, size=(B, T, H)), int(rng.choice([1, 2, 5]))))
        n_in = H
    out = _rows(rng, d, n_in, 0.5)
    ints = SimpleNamespace(hidden=hidden, out=out, out_den=int(rng.choice([1, 2, 3])), plans={})
    delta = {}
    for c in range(d):
        if rng.random() < 0.7:
            kind = rng.integers(0, 4)
            m = rng.standard_normal((B, T)) * 10.0 ** rng.integers(-12, 1)
            if kind == 0:  # exactly zero where it is zero
                m[rng.random((B, T)) < 0.5] = 0.0
                r = np.where(m == 0, 0.0, np.abs(m) * 1e-9 + iv.TINY)
            elif kind == 1:  # wide: ReLUs undecided
                r = np.abs(rng.standard_normal((B, T))) + iv.TINY
            else:
                r = np.abs(m) * 2.0**-40 + iv.TINY
            delta[c] = (m, r)
    return delta, ints, pres, (B, T)


def _same(a: dict, b: dict) -> bool:
    if list(a) != list(b):
        return False
    return all(
        a[k][0].tobytes() == b[k][0].tobytes() and a[k][1].tobytes() == b[k][1].tobytes() for k in a
    )


FFN_DEFAULT = frozenset(range(16)) | {52, 53, 122, 250}
LIN_DEFAULT = frozenset(range(12)) | {29}
LABEL_DEFAULT = frozenset(range(12))


def _sampled(n: int, default: frozenset[int]) -> list:
    """Seeds 0..n-1: those in ``default`` run by default, the others under ``-m slow``."""
    return [s if s in default else pytest.param(s, marks=pytest.mark.slow) for s in range(n)]


@pytest.mark.parametrize("seed", _sampled(300, FFN_DEFAULT))
def test_fused_ffn_is_bit_identical(seed):
    rng = np.random.default_rng(seed)
    delta, ints, pres, shape = _random_ffn(rng)
    with np.errstate(all="ignore"):
        ref = ffn_unit_by_unit(ffp.rat_pre(pres), delta, ints, shape)
        got = ffp.ffn_linear(ffp.rat_pre(pres), delta, ints, shape)
        assert _same(ref, got)
        assert ints.plans or not delta  # the first layer's plan, kept per model
        again = ffp.ffn_linear(ffp.rat_pre(pres), delta, ints, shape)  # from the plan
        assert _same(ref, again)
        del ints.plans  # and without a plan cache
        assert _same(ref, ffp.ffn_linear(ffp.rat_pre(pres), delta, ints, shape))
        ints.plans = {}
        # a PreCols without ``block`` (longsoft's): the units are stacked one by one
        plain = ffp.rat_pre(pres)
        got2 = ffp.ffn_linear(lambda k, h: plain(k, h), delta, ints, shape)
        assert _same(ref, got2)


def test_fused_ffn_memo_covers_later_layers():
    """The combinations' structure of later hidden layers and of the output layer is
    memoised too (keys "h"/"o" in the layer's plans) in some of the random layers above, so
    test_fused_ffn_is_bit_identical's second call reads it back."""
    kinds = set()
    for seed in range(300):
        rng = np.random.default_rng(seed)
        delta, ints, pres, shape = _random_ffn(rng)
        with np.errstate(all="ignore"):
            ffp.ffn_linear(ffp.rat_pre(pres), delta, ints, shape)
        kinds |= {k[0] for k in ints.plans if k and isinstance(k[0], str)}
    assert {"h", "o"} <= kinds


def test_fused_ffn_reaches_residuals():
    """The random layers above do exercise undecided ReLUs and residuals (else the
    comparison would not cover them)."""
    seen = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        delta, ints, pres, shape = _random_ffn(rng)
        calls = []
        orig = ffp._scaled_res

        def spy(rs, w, den, orig=orig, calls=calls):
            calls.append(1)
            return orig(rs, w, den)

        ffp._scaled_res = spy
        try:
            with np.errstate(all="ignore"):
                ffp.ffn_linear(ffp.rat_pre(pres), delta, ints, shape)
        finally:
            ffp._scaled_res = orig
        seen += bool(calls)
    assert seen > 30


# ----------------------------------------------------------------------------------------
# exp of score gaps, once per distinct gap


def test_gap_weights_once_per_gap_is_bit_identical():
    rng = np.random.default_rng(7)
    for _ in range(50):
        lo = int(rng.integers(1, 10**6))
        gnum = rng.integers(lo, lo + int(rng.integers(1, 300)), size=int(rng.integers(1, 500)))
        sden = int(rng.choice([1, 2, 3, 7, 2**20, 3**30]))
        tau = float(rng.uniform(0.01, 10))
        it = (np.float64(1 / tau), np.float64(abs(1 / tau) * 2.0**-40 + iv.TINY))
        a = att._gap_weights(gnum, sden, it)
        b = att._gap_weights_all(gnum, sden, it)
        assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()
        # two far-apart values (the memoised pair), and three (computed entry by entry)
        far = rng.choice([lo, lo + 10**9], size=gnum.size)
        for g in (far, np.concatenate([far, [lo + 5]])):
            a = att._gap_weights(g, sden, it)
            b = att._gap_weights_all(g, sden, it)
            assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def test_gap_weights_memo_follows_the_rounding_constants(monkeypatch):
    """A test that zeroes the allowances must see their effect, memo or not."""
    gnum = np.array([3, 4, 3], dtype=np.int64)
    it = (np.float64(0.5), np.float64(2.0**-50))
    before = att._gap_weights(gnum, 5, it)
    patch_everywhere(monkeypatch, "TINY", 0.0)
    patch_everywhere(monkeypatch, "SLACK", 0.0)
    after = att._gap_weights(gnum, 5, it)
    assert after[1].tobytes() == att._gap_weights_all(gnum, 5, it)[1].tobytes()
    assert (after[1] < before[1]).all()


# ----------------------------------------------------------------------------------------
# sums in a fixed order


def test_seq_sum_is_left_to_right():
    """_seq_sum adds in index order (not pairwise): [1, u, u, …] keeps 1 (each u/2-sized term
    rounds away), where pairwise or reordered sums would not."""
    u = 2.0**-53
    x = np.array([[1.0] + [u] * 40] * 3)[None]  # (1, 3, 41): sum over axis 2
    s = iv.seq_sum(x, 2)
    assert (s == 1.0).all()
    rng = np.random.default_rng(3)
    for _ in range(200):
        shape = tuple(int(v) for v in rng.integers(1, 9, size=3))
        y = rng.standard_normal(shape) * 10.0 ** rng.integers(-15, 15, size=shape)
        for axis in range(3):
            ref = np.take(y, 0, axis=axis).copy()
            for j in range(1, shape[axis]):
                ref += np.take(y, j, axis=axis)
            assert iv.seq_sum(y, axis).tobytes() == ref.tobytes()


# ----------------------------------------------------------------------------------------
# joining chunks


def _fb(B, L, labels=True, accept=False):
    z = np.zeros(B, bool)
    return fbm.FloatBatch(
        settled=z.copy(),
        err_lo=np.zeros((B, L)),
        err_hi=np.ones((B, L)),
        err_row=np.zeros((B, L), np.int64),
        labels=np.arange(B * 2, dtype=np.int64).reshape(B, 2) if labels else None,
        accept=np.ones(B, bool) if accept else None,
        decided=z.copy(),
        tight=np.zeros((B, L), bool),
    )


@pytest.mark.parametrize("order", [(True, False), (False, True), (False, True, True)])
def test_concat_parts_without_a_readout(order):
    """A chunk the double-double tier gave up on has no read-out (labels/accept None);
    joining it with chunks that have one keeps theirs, in place, with the right shape."""
    parts = [_fb(2, 3, labels=x, accept=x) for x in order]
    got = fbm.concat(parts)
    assert got.labels is not None and got.labels.shape == (2 * len(order), 2)
    assert got.accept is not None and got.accept.shape == (2 * len(order),)
    for i, x in enumerate(order):
        rows = got.labels[2 * i : 2 * i + 2]
        if x:
            assert (rows == np.arange(4).reshape(2, 2)).all()
            assert got.accept[2 * i : 2 * i + 2].all()
        else:
            assert (rows == -1).all() and not got.accept[2 * i : 2 * i + 2].any()
    assert fbm.concat([_fb(2, 3, labels=False)]).labels is None


# ----------------------------------------------------------------------------------------
# sparse products: many output rows at once


def lin_row_by_row(cols, rows):
    """softfloat.lin as it was (reference)."""
    if not cols:
        return {}
    R = {}
    out = {}
    k = (len(cols) + 3) * iv.SUM_U
    for a, row in enumerate(rows):
        terms = [(c, w) for c, w in row if c in cols]
        if not terms:
            continue
        m = r = None
        for c, w in terms:
            cm, cr = cols[c]
            if c not in R:
                R[c] = cr + np.abs(cm) * k
            if w == 1.0:
                tm, tr = cm, R[c]
            elif w == -1.0:
                tm, tr = -cm, R[c]
            else:
                tm, tr = cm * w, R[c] * abs(w)
            if m is None:
                m, r = tm.copy(), tr.copy()
            else:
                m += tm
                r += tr
        r *= 1 + k
        out[a] = (m, iv.guard(m, np.maximum(r, np.minimum(r * 2.0**300, iv.TINY))))
    return out


@pytest.mark.parametrize("seed", _sampled(100, LIN_DEFAULT))
def test_lin_is_bit_identical(seed):
    rng = np.random.default_rng(seed)
    d_in, d_out = int(rng.integers(1, 8)), int(rng.integers(1, 9))
    rows = [
        [
            (c, float(rng.choice([1.0, -1.0, 0.5, 3.0, -1 / 3])))
            for c in range(d_in)
            if rng.random() < 0.5
        ]
        for _ in range(d_out)
    ]
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 4)))
    cols = {
        c: (rng.standard_normal(shape), np.abs(rng.standard_normal(shape)) * 1e-12)
        for c in range(d_in)
        if rng.random() < 0.7
    }
    before = {c: (m.copy(), r.copy()) for c, (m, r) in cols.items()}
    assert _same(lin_row_by_row(cols, rows), wt.lin(cols, rows))
    assert _same(lin_row_by_row(cols, rows), wt.lin(cols, rows))  # steps from the memo
    assert _same(before, cols)  # the inputs are not changed in place


# ----------------------------------------------------------------------------------------
# the argmax read-out with two labels: one pair instead of all four


@pytest.mark.parametrize("seed", _sampled(60, LABEL_DEFAULT))
def test_two_label_decisions_match_all_pairs(seed):
    rng = np.random.default_rng(seed)
    B, P = int(rng.integers(1, 20)), int(rng.integers(1, 5))
    hard = rng.integers(-3, 4, size=(B, P, 2))  # many ties
    if seed % 3 == 0:
        hard = hard.astype(object) * 2**70  # Python integers
    scale = 10.0 ** rng.integers(-20, 300, size=(B, P, 2))
    dm = rng.standard_normal((B, P, 2)) * scale
    dm[rng.random((B, P, 2)) < 0.2] = 0.0
    dr = np.abs(rng.standard_normal((B, P, 2))) * scale * 10.0 ** rng.integers(-17, 1)
    special = rng.random((B, P, 2))
    dm[special < 0.03] = np.inf
    dm[(special >= 0.03) & (special < 0.05)] = np.nan
    dr[(special >= 0.05) & (special < 0.07)] = np.inf
    den = int(rng.choice([1, 3, 2**10]))
    off = ro._off_diagonal(2)
    with np.errstate(all="ignore"):
        got = ro._label_decisions(hard, den, dm, dr, off)
        ref = ro._label_decisions_pairs(hard, den, dm, dr, off)
    assert (got[0] == ref[0]).all() and (got[1] == ref[1]).all()
    assert (got[2][ref[0]] == ref[2][ref[0]]).all()  # the label, where there is one
