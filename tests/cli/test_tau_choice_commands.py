"""precision, search and certify take the typed ``TauChoice`` (parsed once), like check."""

from __future__ import annotations

import pytest
from paths import ROOT

from exactattn.certificate.certify import certificate, range_certificate
from exactattn.core.errors import UsageError
from exactattn.model import load_model
from exactattn.results.settings import TauChoice
from exactattn.run.search import run_search

DYCK1 = ROOT / "models" / "dyck1.json"


def test_no_theorem_word_where_there_is_no_theorem_mode() -> None:
    with pytest.raises(UsageError, match="this command has no theorem mode"):
        TauChoice.parse("theorem", theorem=False)
    assert TauChoice.parse("theorem").is_theorem
    with pytest.raises(UsageError, match="no --tau theorem mode"):
        TauChoice.override_expr(TauChoice.theorem(), "search")
    e = TauChoice.parse("1/(n+1)", theorem=False).expr
    assert e is not None and e.text == "1/(n+1)"
    assert TauChoice.override_expr(TauChoice.parse("1/(n+1)"), "x") == e
    assert TauChoice.override_expr(None, "x") is None and TauChoice.override_expr(e, "x") is e
    assert TauChoice.override_expr(TauChoice.model(), "x") is None


def test_certify_choice_or_text_same_bytes() -> None:
    model = load_model(str(DYCK1))
    for text in ("1/(n+1)", "theorem", None):
        a = certificate(model, 12, TauChoice.parse(text)).to_json()
        assert a == certificate(model, 12, text).to_json()
    r = range_certificate(model, 3, 5, TauChoice.parse("1/(n+1)")).to_json()
    assert r == range_certificate(model, 3, 5, "1/(n+1)").to_json()
    assert r["tau"] == "1/(n+1)"


def test_search_refuses_a_theorem_choice() -> None:
    model = load_model(str(DYCK1))
    with pytest.raises(UsageError, match="no --tau theorem mode"):
        run_search(model, 4, "error", budget=2, tau=TauChoice.theorem())
    a = run_search(model, 4, "error", budget=3, seed=1, tau=TauChoice.parse("1/(n+1)", False))
    b = run_search(model, 4, "error", budget=3, seed=1, tau=TauChoice.parse("1/(n+1)").expr)
    assert a.to_json() == b.to_json()
