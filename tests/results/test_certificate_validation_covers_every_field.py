"""Every field of a certificate file that its record reads is validated: a value of the wrong
type anywhere is exit 2 naming the path, or the record reads it and the report renders —
never a traceback (exit 4). Fuzz seed 2047 found ``sharp_chain`` (issue 35) unvalidated; this
walks a fresh certificate of each kind, so a key added later without validation fails here."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from paths import ROOT

from exactattn.cli import main
from exactattn.core.errors import ModelError
from exactattn.core.jsonio import read_json
from exactattn.report.certificate import certificate_latex, certificate_markdown
from exactattn.results.certificate import certificate_from_json
from exactattn.results.resultfile import validate_certificate

WRONG: tuple[Any, ...] = (None, "x", "1/0", -3, 2.5, True, [], {}, [None], {"a": 1})


def _paths(x: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(x, dict):
        for k, v in x.items():
            if path == () and k == "claims":  # the model's claims: kept raw, never read here
                continue
            yield from _paths(v, (*path, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _paths(v, (*path, i))


def _set(d: Any, path: tuple[Any, ...], value: Any) -> Any:
    d = copy.deepcopy(d)
    at = d
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return d


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = []
    for i, how in enumerate((["--n", "20"], ["--range", "1..30"])):
        f = tmp_path_factory.mktemp("cert") / f"c{i}.json"
        model = str(ROOT / "models" / "dyck1.json")
        res = CliRunner().invoke(main, ["certify", model, *how, "--json", str(f)])
        assert res.exit_code == 0, res.output
        out.append(read_json(f))
    one, rng = out
    assert one.get("sharp_chain") and one.get("certified_by")  # the walk reaches them
    return [one, rng]


def test_every_field_with_a_wrong_value_is_bad_input_or_renders(
    certificates: list[dict[str, Any]],
) -> None:
    tried = 0
    for cert in certificates:
        validate_certificate(cert)  # the real file passes
        for path in _paths(cert):
            if not path or path == ("format",):
                continue
            for value in WRONG:
                bad = _set(cert, path, value)
                try:
                    validate_certificate(bad)
                except ModelError:
                    continue
                rec = certificate_from_json(bad)  # a ValueError here is the exit 4 bug
                certificate_markdown(rec)
                certificate_latex(rec)
                tried += 1
    assert tried > 50  # some mutations are valid values (null where null is allowed)
