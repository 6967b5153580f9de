"""Input families for lengths no one can enumerate: the inputs where constructions break.

Each family maps (model, n, seed) to one input of length n. Which families exist depends on
the model: Dyck models get nesting/matching families (deep nesting makes the depth lookup
reach its largest positions; a mismatch at the far end makes the matching partner n
positions away); every model gets generic families whose single distinguishing symbol sits
at the far end (LTL/counting witnesses far apart) and long repeats (induction).

A model is a Dyck model when its reference is ``dyck`` (its pairs), or when its alphabet is
made of bracket pairs only — ``()``, ``[]``, ``{}``, ``<>``, each with both halves, pairs in
the order their opening brackets appear in the alphabet (the compiled RASP Dyck programs,
whose reference is the program: the same ``nested`` and ``far-error`` words as the Dyck
models over the same alphabet).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from exactattn.core.errors import UsageError
from exactattn.model import Model

Word = tuple[str, ...]


BRACKETS = ("()", "[]", "{}", "<>")


def bracket_pairs(model: Model) -> list[str] | None:
    """The Dyck pairs of the model (module docstring), or None."""
    ref = model.reference
    if ref is not None and ref.kind == "dyck" and ref.pairs:
        return list(ref.pairs)
    alpha = list(model.alphabet)
    pairs = [p for a in alpha for p in BRACKETS if a == p[0]]
    if pairs and sorted(alpha) == sorted(c for p in pairs for c in p):
        return pairs
    return None


def _pairs(model: Model) -> list[str]:
    pairs = bracket_pairs(model)
    if pairs:
        return pairs
    raise UsageError("this family needs a model with a Dyck reference or a bracket alphabet")


def _pad(model: Model, w: list[str], n: int) -> Word:
    """Odd n: a balanced word of length n − 1 plus one opening bracket (so not in Dyck)."""
    if len(w) < n:
        w = w + [_pairs(model)[0][0]] * (n - len(w))
    return tuple(w[:n])


def dyck_nested(model: Model, n: int, seed: int) -> Word:
    """Deepest nesting, bracket types cycling with depth: ([([ … ])]) ."""
    ps = _pairs(model)
    h = n // 2
    opens = [ps[i % len(ps)][0] for i in range(h)]
    closes = [ps[i % len(ps)][1] for i in reversed(range(h))]
    return _pad(model, opens + closes, n)


def dyck_alternating(model: Model, n: int, seed: int) -> Word:
    """Depth at most one: ()[]()[] …"""
    ps = _pairs(model)
    w: list[str] = []
    for i in range(n // 2):
        w += list(ps[i % len(ps)])
    return _pad(model, w, n)


def dyck_random(model: Model, n: int, seed: int) -> Word:
    """A random balanced word (uniform choice of open/close as long as completion is possible)."""
    ps = _pairs(model)
    rng = random.Random(seed)
    h = n // 2
    w: list[str] = []
    stack: list[str] = []
    opened = 0
    for _ in range(2 * h):
        can_open = opened < h
        if can_open and (not stack or rng.random() < 0.5):
            p = rng.choice(ps)
            w.append(p[0])
            stack.append(p[1])
            opened += 1
        else:
            w.append(stack.pop())
    return _pad(model, w, n)


def dyck_far_error(model: Model, n: int, seed: int) -> Word:
    """Deepest nesting whose LAST bracket closes the wrong type: the mismatch is n apart."""
    w = list(dyck_nested(model, n - (n % 2), seed))
    ps = _pairs(model)
    if not w:
        return _pad(model, [], n)
    last = w[-1]
    others = [p[1] for p in ps if p[1] != last]
    if others:
        w[-1] = others[0]
    else:  # Dyck-1: no other type; make the word unbalanced at the far end instead
        w[-1] = ps[0][0]
    return tuple(w + [ps[0][0]] * (n % 2))


def dyck_far_unbalanced(model: Model, n: int, seed: int) -> Word:
    """Alternating pairs, but the first bracket is a closing one: a negative prefix at 1."""
    w = list(dyck_alternating(model, n, seed))
    if w:
        w[0] = _pairs(model)[0][1]
    return tuple(w)


def constant(model: Model, n: int, seed: int) -> Word:
    """a^n (first alphabet symbol): every score ties."""
    return tuple([model.alphabet[0]] * n)


def last_different(model: Model, n: int, seed: int) -> Word:
    """a^{n-1} b: the only witness sits at the far end."""
    a = model.alphabet
    return tuple([a[0]] * (n - 1) + [a[-1]])


def first_different(model: Model, n: int, seed: int) -> Word:
    """b a^{n-1}: the only witness sits at the near end, n positions before the read-out."""
    a = model.alphabet
    return tuple([a[-1]] + [a[0]] * (n - 1))


def alternating(model: Model, n: int, seed: int) -> Word:
    """a b a b … over the whole alphabet, cyclically."""
    a = model.alphabet
    return tuple(a[i % len(a)] for i in range(n))


def repeat(model: Model, n: int, seed: int) -> Word:
    """A random block of length min(8, n) repeated: long repeats (induction heads)."""
    rng = random.Random(seed)
    k = min(8, n)
    block = [rng.choice(model.alphabet) for _ in range(k)]
    return tuple(block[i % k] for i in range(n))


def uniform_random(model: Model, n: int, seed: int) -> Word:
    """Independent uniform symbols (seeded)."""
    rng = random.Random(seed)
    return tuple(rng.choice(model.alphabet) for _ in range(n))


GENERIC: dict[str, Callable[[Model, int, int], Word]] = {
    "constant": constant,
    "last-different": last_different,
    "first-different": first_different,
    "alternating": alternating,
    "repeat": repeat,
    "random": uniform_random,
}
DYCK: dict[str, Callable[[Model, int, int], Word]] = {
    "nested": dyck_nested,
    "alternating-pairs": dyck_alternating,
    "random-balanced": dyck_random,
    "far-error": dyck_far_error,
    "negative-prefix": dyck_far_unbalanced,
}


def families_for(model: Model) -> dict[str, Callable[[Model, int, int], Word]]:
    """The families that make sense for this model (Dyck ones first, then generic)."""
    out: dict[str, Callable[[Model, int, int], Word]] = {}
    if bracket_pairs(model):
        out.update(DYCK)
    out.update(GENERIC)
    return out


def family_word(model: Model, name: str, n: int, seed: int = 0) -> Word:
    fams = families_for(model)
    if name not in fams:
        raise UsageError(f"unknown family '{name}' for {model.name}; use one of {', '.join(fams)}")
    if n < 1:
        raise UsageError("--n must be at least 1")
    return fams[name](model, n, seed)
