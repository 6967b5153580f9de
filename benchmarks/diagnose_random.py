"""Why the float tiers leave words of the random benchmark model to arb (issue 25).

Runs one real shard of the check (``run.shard.check_shard``: float64 tier, double-double tier,
``settle_dominated``, arb for the rest) on the random benchmark model (d = 16, 4 × (2 heads +
FFN), seed 0) at n = 12, records what each tier computed, and classifies every word left to arb
by the requirement it misses in each tier:

* ``readout``: the soft read-out (accept decision) is undecided;
* ``eps@k``: ε ≤ 1 after layer k (a layer that feeds another) is undecided for the word;
* ``loose@k``: layer k's enclosure is neither tight (relative width ≤ 1e-6) nor below the
  threshold ``settle_dominated`` used (the reported lower ends so far);

and counts how many more words each candidate threshold would settle (every other
requirement met): ``thr=batch lo`` takes the largest certified lower end of any word of the
batch (loose ones too), ``thr=final`` the length's final reported lower end (known only at the
end of the length: an upper limit of what any dominance rule can settle). With ``--arb`` it
also prints the arb value of each loose layer relative to the final reported maximum (how far
below the maximum the word's true error lies).

With ``--ablate`` it prints instead how many words go to arb with each change of issue 25's
last round (the double-double guard, the two settle_dominated extensions) on or off.

    python benchmarks/diagnose_random.py [--n 12] [--blocks 4] [--seed 0] [--arb] [--ablate]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from exactattn import model_from_dict  # noqa: E402
from exactattn.engine.cascade import batch as batch_mod  # noqa: E402
from exactattn.engine.cascade import chain as chain_mod  # noqa: E402
from exactattn.engine.cascade import readout as readout_mod  # noqa: E402
from exactattn.engine.cascade.dd import DD_PREC, certify_dd  # noqa: E402
from exactattn.engine.cascade.interval import tau_enclosures  # noqa: E402
from exactattn.engine.temperature import Temperatures  # noqa: E402
from exactattn.inputs import Shard  # noqa: E402
from exactattn.run import shard as shard_mod  # noqa: E402
from models import random_model  # noqa: E402

_RO_LOG: list[np.ndarray] = []


def _wrap_readout() -> None:
    """Wrap the read-out (cascade/readout.py) so each call also logs whether the read-out alone
    is decided (``finish`` folds it into ``decided`` with the ε ≤ 1 tests); chunks log in order."""
    orig = readout_mod._readout

    def wrapped(cm, hb, delta, fw, res):  # type: ignore[no-untyped-def]
        keep = res.settled.copy()
        res.settled = np.ones_like(keep)
        orig(cm, hb, delta, fw, res)
        _RO_LOG.append(res.settled.copy())
        res.settled = keep & res.settled

    readout_mod._readout = wrapped  # diagnostic only


def _logged(f, *a, **k):  # type: ignore[no-untyped-def]
    """f(*a, **k) and the read-out status of every word of the FloatBatch it returns."""
    start = len(_RO_LOG)
    fb = f(*a, **k)
    got = _RO_LOG[start:]
    del _RO_LOG[start:]
    return fb, (np.concatenate(got) if got else np.ones(len(fb.err_lo), bool))


def classify(fb, ro_ok: np.ndarray, b: int, thr: np.ndarray) -> list[str]:
    """The requirements word b misses in one tier's FloatBatch, against threshold ``thr``."""
    L = fb.err_lo.shape[1]
    out = []
    if not ro_ok[b]:
        out.append("readout")
    for k in range(L - 1):
        lo, hi = fb.err_lo[b, k], fb.err_hi[b, k]
        if not (hi <= 1 or (lo > 1 and np.isfinite(lo))):
            out.append(f"eps@{k}")
    for k in range(L):
        if not fb.tight[b, k] and not fb.err_hi[b, k] < thr[k]:
            out.append(f"loose@{k}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arb", action="store_true", help="also time the arb words (the real check)")
    ap.add_argument("--ablate", action="store_true", help="left to arb per change, then stop")
    args = ap.parse_args()
    if args.ablate:
        ablate(args.n, args.blocks, args.seed)
        return
    model = model_from_dict(random_model(d=16, blocks=args.blocks, heads=2, seed=args.seed))
    n = args.n
    L = len(model.layers)
    total = len(model.alphabet) ** n
    _wrap_readout()

    batches: list[dict] = []
    orig_cf, orig_st, orig_sd = chain_mod.certify_float, chain_mod.second_tier, None
    orig_sd = chain_mod.settle_dominated

    def cf(cm, hb, taus, *a, **k):  # type: ignore[no-untyped-def]
        fb, r_ok = _logged(orig_cf, cm, hb, taus, *a, **k)
        batches.append({"hb": hb, "cm": cm, "f64": fb, "ro": r_ok, "sd": []})
        return fb

    def st(cm, hb, fb, todo, taus, tier=None):  # type: ignore[no-untyped-def]
        fb2 = orig_st(cm, hb, fb, todo, taus, tier)
        if tier is None:  # the double-double tier (the centred tier runs before it)
            batches[-1]["dd_todo"] = todo.copy()
        return fb2

    def sd(fb, settled, under, lower, *known):  # type: ignore[no-untyped-def]
        got = orig_sd(fb, settled, under, lower, *known)
        batches[-1]["sd"].append((np.array(lower, dtype=float), settled.copy(), got.copy()))
        return got

    arb_time = [0.0, 0]
    orig_cw = chain_mod.certify_word

    def cw(*a, **k):  # type: ignore[no-untyped-def]
        t0 = time.process_time()
        r = orig_cw(*a, **k)
        arb_time[0] += time.process_time() - t0
        arb_time[1] += 1
        batches[-1].setdefault("arb", {})[a[2]] = r
        return r

    chain_mod.certify_float, chain_mod.second_tier = cf, st
    chain_mod.settle_dominated, chain_mod.certify_word = sd, cw
    job = shard_mod.LengthJob(model=model, n=n, tau=None, hard_only=False)
    t0 = time.process_time()
    if args.arb:
        rec = shard_mod.check_shard(job, Shard(n, 0, 0, total))
    else:  # stop before arb: the float tiers only
        chain_mod.certify_word = _Stop.raise_
        rec = None
        try:
            shard_mod.check_shard(job, Shard(n, 0, 0, total))
        except _Stop:
            pass
    wall = time.process_time() - t0
    final_lower = (
        np.array([float(layer.error.lower.mid()) for layer in rec.layers]) if rec else None
    )

    dtaus = tau_enclosures(Temperatures(model, None).at(n, DD_PREC))
    kinds = {"f64": collections.Counter(), "dd": collections.Counter()}
    combos = {"f64": collections.Counter(), "dd": collections.Counter()}
    left = 0
    extra = collections.Counter()
    rel_rows = []
    for bt in batches:
        if not bt["sd"]:
            continue
        lower, _, got = bt["sd"][-1]
        fb = bt["f64"]
        idx = np.flatnonzero(~got)
        left += idx.size
        if idx.size == 0:
            continue
        thr_sd = lower.copy()
        first_settled = bt["sd"][0][2]
        if first_settled.any():
            thr_sd = np.maximum(thr_sd, fb.err_lo[first_settled].max(axis=0))
        fb_dd, ro_dd = _logged(certify_dd, bt["cm"], batch_mod.take_batch(bt["hb"], idx), dtaus)
        fin = np.isfinite(fb.err_lo)
        thr_batch = np.maximum(lower, np.where(fin, fb.err_lo, 0).max(axis=0))
        dd_lo = np.where(np.isfinite(fb_dd.err_lo), fb_dd.err_lo, 0).max(axis=0)
        thr_batch = np.maximum(thr_batch, dd_lo)
        for tier, f, r_ok, rows in (
            ("f64", fb, bt["ro"], idx),
            ("dd", fb_dd, ro_dd, np.arange(idx.size)),
        ):
            for b in rows:
                miss = classify(f, r_ok, b, thr_sd)
                kinds[tier].update(miss)
                combos[tier][" ".join(sorted({m.split("@")[0] for m in miss}))] += 1
        # what other thresholds would settle (the better of the two tiers per word)
        for name, thr in (("thr=batch lo", thr_batch), ("thr=final", final_lower)):
            if thr is None:
                continue
            for j, b in enumerate(idx):
                ok = False
                for f, r, rok in (
                    (fb, b, bt["ro"]),
                    (fb_dd, j, ro_dd),
                ):
                    if not classify(f, rok, r, thr):
                        ok = True
                extra[name] += ok
        if final_lower is not None and "arb" in bt:
            for j, b in enumerate(idx):
                r = bt["arb"].get(int(b))
                if r is None:
                    continue
                for k in range(L):
                    if not fb_dd.tight[j, k] and not fb_dd.err_hi[j, k] < thr_sd[k]:
                        hi = float(r.bounds[k][1].mid())
                        rel_rows.append((k, hi / final_lower[k] if final_lower[k] else np.inf))

    print(
        f"random d16 {args.blocks}×(attn 2 heads + ffn) seed {args.seed}, n = {n}: {total} inputs"
    )
    print(f"left to arb after the float tiers: {left} ({100 * left / total:.1f}%)")
    if arb_time[1]:
        print(
            f"arb: {arb_time[1]} words, {arb_time[0]:.1f} s CPU, "
            f"{1000 * arb_time[0] / arb_time[1]:.1f} ms/word"
        )
        precs = collections.Counter(r.prec for bt in batches for r in bt.get("arb", {}).values())
        print(f"arb precision per word: {dict(sorted(precs.items()))}")
    print(f"(shard CPU {wall:.1f} s)")
    print()
    print("requirement missed, per word left to arb (a word can miss several):")
    print(f"{'requirement':<14}{'float64':>10}{'double-double':>15}")
    keys = sorted(set(kinds["f64"]) | set(kinds["dd"]), key=lambda s: (s.split("@")[0], s))
    for key in keys:
        print(f"{key:<14}{kinds['f64'][key]:>10}{kinds['dd'][key]:>15}")
    print()
    print("kinds of failure per word (combination):")
    for tier in ("f64", "dd"):
        for c, v in combos[tier].most_common():
            print(f"  {tier:<4} {c or '(none)':<28}{v:>6}")
    print()
    for name, v in extra.items():
        print(f"words a dominance threshold '{name}' would settle (either tier): {v} of {left}")
    if rel_rows:
        print()
        print("loose dd layers: arb upper end / final reported lower end (1 = the maximum):")
        for k in range(L):
            xs = np.array([x for kk, x in rel_rows if kk == k])
            if xs.size:
                q = np.quantile(xs, [0, 0.5, 0.9, 1])
                print(
                    f"  layer {k}: {xs.size} words, min {q[0]:.3g} median {q[1]:.3g} "
                    f"90% {q[2]:.3g} max {q[3]:.3g}"
                )


_REAL_SD = chain_mod.settle_dominated


def _rule(any_lower: bool, open_eps: bool):  # type: ignore[no-untyped-def]
    """settle_dominated with either extension switched off (ablation only; the check runs
    the real one, which is ``_rule(True, True)``)."""

    def rule(fb, settled, under, lower, known=()):  # type: ignore[no-untyped-def]
        if any_lower and open_eps:
            return _REAL_SD(fb, settled, under, lower, known)
        L = fb.err_lo.shape[1]
        thr = np.array(lower, dtype=np.float64)
        if any_lower:
            for lo in (fb.err_lo, *known):
                thr = np.maximum(thr, np.where(np.isfinite(lo), lo, 0.0).max(axis=0))
        elif settled.any():
            thr = np.maximum(thr, fb.err_lo[settled].max(axis=0))
        covered = (fb.tight | (fb.err_hi < thr[None, :])).all(axis=1)
        if not open_eps:
            return settled | (fb.decided & ~under & covered)
        rep = np.array(lower, dtype=np.float64)
        lo_, hi_ = fb.err_lo[:, : L - 1], fb.err_hi[:, : L - 1]
        eps = (hi_ <= 1) | ((lo_ > 1) & np.isfinite(lo_))
        out = settled.copy()
        while True:
            got = rep if not out.any() else np.maximum(rep, fb.err_lo[out].max(axis=0))
            new = out | (fb.read & ~under & covered & (eps | (got[: L - 1] > 1)).all(axis=1))
            if (new == out).all():
                return new
            out = new

    return rule


def ablate(n: int, blocks: int, seed: int) -> None:
    """Words left to arb with each change of this round switched on or off."""
    from exactattn.engine.cascade import dd as ddtier

    model = model_from_dict(random_model(d=16, blocks=blocks, heads=2, seed=seed))
    total = len(model.alphabet) ** n
    real_sd, real_guard, real_cw = chain_mod.settle_dominated, ddtier.guard, chain_mod.certify_word

    def old_guard(a):  # type: ignore[no-untyped-def]
        h, lo, r = real_guard(a)
        return h, lo, np.where(r > 1.0, np.inf, r)

    count = [0]

    def cw(*a, **k):  # type: ignore[no-untyped-def]
        count[0] += 1
        return real_cw(*a, **k)

    print(f"{'dd guard':<22}{'threshold':<26}{'own ε ≤ 1 open':<16}{'left to arb':>12}")
    chain_mod.certify_word = cw
    try:
        for guard_name, g in (("radius > 1 → inf", old_guard), ("radius > MAXV → inf", real_guard)):
            for any_lower, open_eps in ((False, False), (True, False), (False, True), (True, True)):
                ddtier.guard = g
                chain_mod.settle_dominated = _rule(any_lower, open_eps)
                count[0] = 0
                job = shard_mod.LengthJob(model=model, n=n, tau=None, hard_only=False)
                shard_mod.check_shard(job, Shard(n, 0, 0, total))
                thr = "any word's lower end" if any_lower else "settled/reported only"
                eps = "if ε > 1 known" if open_eps else "no"
                print(f"{guard_name:<22}{thr:<26}{eps:<16}{count[0]:>12}")
    finally:
        chain_mod.settle_dominated, ddtier.guard = real_sd, real_guard
        chain_mod.certify_word = real_cw


class _Stop(Exception):
    @staticmethod
    def raise_(*a, **k):  # type: ignore[no-untyped-def]
        raise _Stop


if __name__ == "__main__":
    main()
