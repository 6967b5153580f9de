"""The certified float cascade: the soft meaning of a batch of inputs in float enclosures.

One owner for everything between the exact hard meaning (:mod:`exactattn.engine.hard`) and
the arb path (:mod:`exactattn.engine.certify`): ``run/shard.py`` asks
:class:`~exactattn.engine.cascade.chain.Cascade` for a batch's certified soft meaning and
nothing more. Each tier returns a :class:`~exactattn.engine.cascade.batch.FloatBatch` of
certified enclosures or "cannot tell" for every word; the chain settles what some tier can
and leaves the rest to arb, so a tier only ever moves work, never changes a result.

=================  =====================================================================
module             owns
=================  =====================================================================
``policy``         :class:`~exactattn.engine.cascade.policy.Policy`: which tiers run
                   (``EXACTATTN_COARSE``, ``_CENTRED``, ``_DD``, ``_BLAS``, read once, here),
                   the BLAS switch in force, the allocator setting (``EXACTATTN_MALLOC``)
``interval``       midpoint-radius float64 arithmetic, our exp/expm1, sums in fixed order,
                   exact rationals and temperatures as enclosures (the soundness argument)
``blas``           certified BLAS matrix products (Rump's a priori bound, opt-in)
``weights``        a model's weights as sparse float rows, the linear maps that apply them
``attention``      the attention pass: one head's δ (softmax − hard), every layout of it
``ffn``            the feed-forward pass: δ through ReLUs as exact integer combinations
``readout``        layer error ends, tightness, ε ≤ 1 and the read-out decisions
``batch``          ``FloatBatch`` (what every tier returns), batches cut and joined
``float64``        the float64 tier (``certify_float``), with prefix sharing
``coarse``         the coarse tier: loose certified ends at about float64's cost
``centred``        the centred float64 tier: softmax rows of large perturbations centred
``dd``             the double-double tier (``certify_dd``) and its arithmetic
``chain``          the cascade: the tiers in order, ``settle_dominated``, arb for the rest
=================  =====================================================================

Imports run one way: ``policy``, ``blas`` → ``interval`` → ``weights``, ``batch`` → the passes
→ the tiers → ``chain``. This ``__init__`` imports nothing (so importing one module does not
load the others).
"""
