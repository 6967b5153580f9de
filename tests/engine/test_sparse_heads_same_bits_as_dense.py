"""engine/sparsehead.py: one long word's heads from their candidate keys, the same bits.

Every path is compared with the dense code it replaces (``sparse=False``), which
tests/run/test_deployed_precision.py replays against an independent full-matrix reference; the float
filter's allowances are shown to be needed (a test input where dropping them changes the
answer), and ``exp`` is shown to underflow to +0 below ``EXP_ZERO`` in each dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import exactattn.engine.longinput as longinput
import exactattn.engine.sparsehead as sh
from exactattn import load_model
from exactattn.engine.diagnosis import diagnose
from exactattn.engine.dtypes import (
    DtypeModel,
    _div,
    _f64,
    dtype_of,
    embed_dtype,
    finfo,
    run_numpy,
)
from exactattn.engine.hard import CompiledModel
from exactattn.engine.longinput import run_hard_long
from exactattn.inputs.families import bracket_pairs, families_for, family_word
from exactattn.results.settings import TauChoice

DTYPES = ["float16", "bfloat16", "float32", "float64"]
TAUS = [None, TauChoice.parse("1/(n^3*log(n))", False).expr]
BF16 = ml_dtypes.bfloat16


def _model(models_dir, name):
    return load_model(models_dir / f"{name}.json")


def _unit(models_dir):
    return load_model(models_dir.parent / "reports" / "precision" / "dyck2-unit.json")


FEW = ("nested", "far-error", "random-balanced", "alternating", "repeat", "last-different")


def _words(model, ns, fams=None):
    for fam in fams or families_for(model):
        if fam not in families_for(model):
            continue
        for n in ns:
            if model.max_length is None or n <= model.max_length:
                yield fam, family_word(model, fam, n, 0)


def _same_runs(a, b) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip(a.acts, b.acts, strict=True))


def _values(x) -> list[str]:
    return [
        ",".join(str(int(v)) for v in r) + "/" + str(int(d))
        for r, d in zip(x.num.tolist(), x.den.tolist(), strict=True)
    ]


# ---------------------------------------------------------------------------------------
# the dtype pass
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, table",
    [
        ("dyck2", "auto"),
        ("dyck2", "never"),
        ("dyck2", "always"),
        ("rasp_dyck2", "auto"),
        ("rasp_dyck2", "never"),
        ("ltl_since_until_positions", "never"),
        ("ltl_since_until_positions", "always"),
    ],
)
def test_dtype_pass_from_candidates_is_the_dense_pass(models_dir, monkeypatch, name, table):
    """Family words at n = 33 and 70, four dtypes, two τ: the same bits as the dense
    blocks, with the logit table (low-precision dtypes) used when it fits, never, always."""
    if table == "never":
        monkeypatch.setattr(sh, "TABLE_KEYS", 0)
    elif table == "always":
        monkeypatch.setattr(sh, "TABLE_KEYS", 1 << 40)
        monkeypatch.setattr(sh, "TABLE_SHARE", 0)
    model = _model(models_dir, name)
    cm = CompiledModel(model)
    dms = {d: DtypeModel(cm, d) for d in DTYPES}
    for _, w in _words(model, (33, 70), FEW):
        lh = run_hard_long(cm, w)
        for d, dm in dms.items():
            x0 = embed_dtype(dm, lh.acts[0])
            for tau in TAUS:
                dense = run_numpy(dm, x0, len(w), tau, sparse=False)
                fast = run_numpy(dm, x0, len(w), tau, sparse=True)
                assert _same_runs(dense, fast), (name, w[:8], d, tau)


def test_dtype_pass_bounded_dyck_and_blocks(models_dir):
    """The bounded-embedding Dyck-2 (γ = 1/(n+1)³), and tiny dense blocks (block=3: the
    rows the candidate path leaves go back to the dense blocks one block at a time)."""
    model = _unit(models_dir)
    cm = CompiledModel(model)
    for _, w in _words(model, (40,)):
        lh = run_hard_long(cm, w)
        for d in DTYPES:
            dm = DtypeModel(cm, d)
            x0 = embed_dtype(dm, lh.acts[0])
            for tau in TAUS:
                dense = run_numpy(dm, x0, len(w), tau, block=3, sparse=False)
                fast = run_numpy(dm, x0, len(w), tau, block=3, sparse=True)
                assert _same_runs(dense, fast), (w[:8], d, tau)


def _filter_case():
    """One float32 query (twelve ones) against three keys whose float32 scores tie although
    the real products of the float32 values differ by 2.75: k_a sums to 2^24; k_b is
    2^24 − 11 plus eleven 0.75s, each step rounding up by 0.25 (spacing 1 below 2^24), so
    2^24 − 2.75 comes out as 2^24. At τ = 2^-10 both weights are 1/2."""
    f = np.float32
    q = np.ones((1, 12), dtype=f)
    k = np.zeros((3, 12), dtype=f)
    k[0, 0] = 2**24
    k[1, 0] = 2**24 - 11
    k[1, 1:] = 0.75
    v = np.array([[1], [3], [5]], dtype=f)
    return q, k, v, np.float32(2.0**-10)


def _dtype_head(q, k, v, tau):
    out = np.zeros((q.shape[0], v.shape[1]), dtype=q.dtype)
    lim = sh.limits("float32", finfo(np.float32))
    need = sh.dtype_head(q, k, v, list(range(q.shape[1])), tau, "none", lim, [False], out)
    return out, need


def test_dtype_filter_needs_its_rounding_allowance(monkeypatch):
    """With the allowance the candidate path gives the dense answer (α = 1/2, 1/2, 0 → 2);
    without the sum's rounding allowance (coef = 0: float64 scores taken for the dtype's)
    key b is dropped and the answer is 1."""
    q, k, v, tau = _filter_case()
    monkeypatch.setattr(sh, "TABLE_KEYS", 0)
    out, need = _dtype_head(q, k, v, tau)
    assert not need.any() and float(out[0, 0]) == 2.0
    orig = sh.DtypeBound.__init__

    def no_allowance(self, *a):
        orig(self, *a)
        self.coef = 0.0

    monkeypatch.setattr(sh.DtypeBound, "__init__", no_allowance)
    out, _ = _dtype_head(q, k, v, tau)
    assert float(out[0, 0]) == 1.0  # the mutation changes the answer: the test has teeth


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_exp_underflows_below_exp_zero_exhaustively(name):
    """Every finite value x ≤ EXP_ZERO of the 16-bit dtypes has exp(x) = +0 exactly."""
    dt = dtype_of(name)
    allv = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dt)
    with np.errstate(invalid="ignore"):  # NaN patterns
        a64 = allv.astype(np.float64)
    x = allv[np.isfinite(a64) & (a64 <= sh.EXP_ZERO[name])]
    with np.errstate(all="ignore"):
        e = np.exp(x)
    assert x.size > 1000 and (e.astype(np.float64) == 0).all()
    assert not np.signbit(e.astype(np.float32)).any()


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_exp_underflows_below_exp_zero_sampled(name):
    """float32 and float64: EXP_ZERO itself, its neighbourhood and a spread of values below
    it down to the most negative finite value (float32 exhaustively: tests marked slow)."""
    dt = dtype_of(name)
    lo = np.array(finfo(dt).min, dtype=dt)
    z = np.array(sh.EXP_ZERO[name], dtype=dt)
    near = [z]
    for _ in range(2000):
        near.append(np.nextafter(near[-1], lo))
    spread = -np.logspace(np.log10(-float(z)), np.log10(-float(lo)) - 1e-9, 20000).astype(dt)
    x = np.concatenate([np.array(near, dtype=dt), spread, [lo]])
    assert (x.astype(np.float64) <= sh.EXP_ZERO[name]).all()
    with np.errstate(all="ignore"):
        assert (np.exp(x) == 0).all()


@pytest.mark.slow
def test_exp_underflows_below_exp_zero_float32_exhaustively():
    """Every finite float32 x ≤ −200 (about 1.06·10⁹ values) has exp(x) = +0."""
    z = np.float32(sh.EXP_ZERO["float32"])
    start = int(np.array(z).view(np.uint32))  # negative floats: larger bit pattern = smaller
    stop = int(np.array(np.float32(np.finfo(np.float32).min)).view(np.uint32))
    step = 1 << 24
    for a in range(start, stop + 1, step):
        bits = np.arange(a, min(a + step, stop + 1), dtype=np.uint32)
        with np.errstate(all="ignore"):
            assert (np.exp(bits.view(np.float32)) == 0).all(), a


# ---------------------------------------------------------------------------------------
# the hard pass
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["dyck1", "dyck2", "rasp_dyck2", "ltl_counting_positions", "induction_k2"]
)
def test_exact_pass_from_candidates_is_the_dense_pass(models_dir, name):
    """Every activation value and each head's support and argmax counts, family words at
    n = 1, 2, 5, 33 and 70."""
    model = _model(models_dir, name)
    cm = CompiledModel(model)
    for fam, w in _words(model, (1, 2, 5, 33, 70)):
        a = run_hard_long(cm, w, sparse=False)
        b = run_hard_long(cm, w, sparse=True)
        assert [_values(x) for x in a.acts] == [_values(x) for x in b.acts], (name, fam, len(w))
        for key, h in a.heads.items():
            assert np.array_equal(h.count, b.heads[key].count)
            assert np.array_equal(h.top_count, b.heads[key].top_count)


def test_exact_pass_with_python_integers(models_dir, monkeypatch):
    """The paths for values past int64 (embedding rows, reductions, object scores), forced
    by a small int64 bound, give the same values as the plain run."""
    model = _model(models_dir, "rasp_dyck2")
    cm = CompiledModel(model)
    w = family_word(model, "nested", 24, 0)
    ref = run_hard_long(cm, w, sparse=False)
    monkeypatch.setattr(longinput, "INT64_SAFE", 2**20)
    monkeypatch.setattr(sh, "INT64_SAFE", 2**20)
    longinput._POSITIONS.clear()
    got = run_hard_long(cm, w, sparse=True)
    assert [_values(x) for x in ref.acts] == [_values(x) for x in got.acts]
    longinput._POSITIONS.clear()


def _exact_case():
    """Integers past 2^53: key 0 scores 2^60 + 140 (the maximum) but its float64 score is
    2^60; key 1 scores 2^60 + 129 and its float64 score is 2^60 + 256."""
    qn = np.array([[1, 1]], dtype=np.int64)
    kc = np.array([[2**60 + 100, 40], [2**60 + 129, 0]], dtype=np.int64)
    return qn, kc


def test_exact_filter_needs_its_rounding_allowance(monkeypatch):
    qn, kc = _exact_case()
    [(_, _, ri, kj)] = list(sh.exact_tops(qn, kc, "none"))
    assert ri.tolist() == [0] and kj.tolist() == [0]
    real = sh.search

    def no_allowance(qf, kf, mask, slack, coef, const, target_of):
        def exact_target(r0, r1, seed):
            return np.einsum("br,br->b", qf[r0:r1], kf[seed]), np.zeros(r1 - r0, dtype=bool)

        return real(qf, kf, mask, slack * 0, 0.0, const, exact_target)

    monkeypatch.setattr(sh, "search", no_allowance)
    [(_, _, ri, kj)] = list(sh.exact_tops(qn, kc, "none"))
    assert kj.tolist() == [1]  # without it the true maximum is filtered out


# ---------------------------------------------------------------------------------------
# the diagnosis, conversions, families
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dyck2", "rasp_dyck2"])
def test_diagnosis_from_candidates_is_the_dense_diagnosis(models_dir, name):
    """The same first event (cause, layer, head, query, key, message) on every family word
    at n = 33 and 70, every dtype and τ; threshold 10^30 walks every layer."""
    model = _model(models_dir, name)
    cm = CompiledModel(model)
    dms = {d: DtypeModel(cm, d) for d in DTYPES}
    causes = set()
    for _, w in _words(model, (33, 70), FEW[:3]):
        lh = run_hard_long(cm, w)
        for dm in dms.values():
            for tau in TAUS:
                run = run_numpy(dm, embed_dtype(dm, lh.acts[0]), len(w), tau)
                for thr in (0.1, 1e30):
                    a = diagnose(dm, run, 0, lh, thr, sparse=False)
                    b = diagnose(dm, run, 0, lh, thr, sparse=True)
                    assert repr(a) == repr(b)
                    causes.add(a.cause)
    assert {"overflow", "absorption", "rounding"} <= causes


def _quotient_cases() -> tuple[list[int], list[int]]:
    """int64 pairs: random, near float64 midpoints, and just below a power of two, where a
    quotient first rounded to 64 bits lands on a float64 midpoint (the x87 double-rounding
    cases: spacing/2 in a binade, spacing/4 just under 2^k where the spacing halves)."""
    rng = np.random.default_rng(11)
    nums, dens = [], []
    for _ in range(20000):
        b = int(rng.integers(1, 2 ** int(rng.integers(1, 62))))
        a = int(rng.integers(-(2**62), 2**62))
        if rng.random() < 0.2:  # a/b within one unit of a float64 midpoint
            m = int(rng.integers(2**52, 2**53))
            b = int(rng.integers(1, 2**9)) * 2 + 1
            a = (2 * m + 1) * b // 2 + int(rng.integers(-1, 2))
        nums.append(a)
        dens.append(b)
    for _ in range(2000):  # a/b ≈ 2^-1 - 2^-55, the midpoint just below 1/2 (± 1 in a)
        b = int(rng.integers(2**61, 2**62))
        a = b * (2**54 - 1) // 2**55 + int(rng.integers(0, 2))
        sign = 1 if rng.random() < 0.5 else -1
        nums.append(sign * a)
        dens.append(b)
    return nums, dens


@pytest.mark.parametrize("x87", [True, False], ids=["x87-filter", "exact-fallback"])
def test_f64_is_correctly_rounded(monkeypatch, x87):
    """int64 and Python-integer quotients, random, at float64 midpoints (± 1) and just under
    powers of two; both the x87 extended-precision filter and the exact fallback that every
    other platform takes (forced here)."""
    import exactattn.engine.dtypes as dtypes_mod

    if x87 and not dtypes_mod.LONGDOUBLE_64:
        pytest.skip("longdouble is not x87 extended precision on this platform")
    monkeypatch.setattr(dtypes_mod, "LONGDOUBLE_64", x87)
    nums, dens = _quotient_cases()
    n, d = np.array(nums, dtype=np.int64), np.array(dens, dtype=np.int64)
    ref = np.array([_div(a, b) for a, b in zip(nums, dens, strict=True)])
    assert np.array_equal(_f64(n, d), ref)
    big_n = np.array(nums[:100] + [3**80, -(7**60)], dtype=object)
    big_d = np.array(dens[:100] + [5**30, 11], dtype=object)
    ref_big = np.array([_div(int(a), int(b)) for a, b in zip(big_n, big_d, strict=True)])
    assert np.array_equal(_f64(big_n, big_d), ref_big)
    if x87:  # the cases reach both repairs: plain double rounding errs in each kind
        with np.errstate(all="ignore"):
            ql = n.astype(np.longdouble) / d.astype(np.longdouble)
        naive = ql.astype(np.float64)
        wrong = naive != ref
        q = np.abs(naive)
        diff = np.abs(ql - naive.astype(np.longdouble))
        sp = np.spacing(q).astype(np.longdouble)
        assert (wrong & (diff == sp / 2)).any() and (wrong & (diff == sp / 4)).any()


def test_x87_probe_asks_the_arithmetic():
    """float64 and float32 arithmetic (what longdouble is on ARM, Windows, or x87 with a
    53-bit precision-control word) fail the probe; x87 longdouble passes it."""
    import exactattn.engine.dtypes as dtypes_mod

    assert not dtypes_mod.arithmetic_is_x87(np.float64)
    assert not dtypes_mod.arithmetic_is_x87(np.float32)
    x87 = np.finfo(np.longdouble).nmant == 63
    assert dtypes_mod.arithmetic_is_x87(np.longdouble) == x87 == dtypes_mod.LONGDOUBLE_64


def test_bracket_alphabets_get_the_dyck_families(models_dir):
    """The compiled RASP Dyck programs get the Dyck models' own family words."""
    dyck2, rasp = _model(models_dir, "dyck2"), _model(models_dir, "rasp_dyck2")
    assert bracket_pairs(rasp) == ["()", "[]"] == bracket_pairs(dyck2)
    assert bracket_pairs(_model(models_dir, "rasp_dyck1")) == ["()"]
    assert bracket_pairs(_model(models_dir, "rasp_anbn")) is None
    for fam in ("nested", "far-error", "random-balanced", "alternating-pairs"):
        for n in (4, 7, 64):
            assert family_word(rasp, fam, n, 3) == family_word(dyck2, fam, n, 3)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rasp_dyck2", "dyck2"])
def test_long_word_4096_candidates_equal_dense(models_dir, name):
    """n = 4,096, ``nested`` and ``far-error``: the default (candidate) paths of the exact
    and the dtype pass equal the dense ones, float32 / bfloat16 / float64, both τ."""
    model = _model(models_dir, name)
    cm = CompiledModel(model)
    for fam in ("nested", "far-error"):
        w = family_word(model, fam, 4096, 0)
        a = run_hard_long(cm, w, sparse=False)
        b = run_hard_long(cm, w)
        assert [_values(x) for x in a.acts] == [_values(x) for x in b.acts]
        for d in ("bfloat16", "float32", "float64"):
            dm = DtypeModel(cm, d)
            x0 = embed_dtype(dm, b.acts[0])
            for tau in TAUS:
                assert _same_runs(
                    run_numpy(dm, x0, 4096, tau, sparse=False), run_numpy(dm, x0, 4096, tau)
                )
