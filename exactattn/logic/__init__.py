"""Logic: reference semantics of temporal formulas (LTL with counting), independent of weights."""
