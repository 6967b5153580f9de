"""No module outside ``exactattn/results/`` spells a result-file key (issue 21).

The result formats (``exactattn-result/1``, ``-precision/1``, ``-search/1``,
``-certificate/1``) are owned by the records in ``exactattn/results/``: their ``to_json`` /
``from_json`` are the only places that write or read the keys. This test scans every other
module of the package for a string literal used as a key — a subscript (``d["gamma"]``), the
first argument of ``.get`` / ``.pop`` / ``.setdefault``, or a key of a dict display — and
fails when that string is a result key.

The result key set is derived from ``exactattn/results/`` itself (every key literal there),
so it cannot go stale. Keys that are also keys of another data shape are allowed only where
that shape is handled:

* model-format keys (the set derived from ``exactattn/model/``: its key literals and the
  key names its validator lists) in the modules that read or build *model* dicts
  (``MODEL_DICT_MODULES``);
* a few keys of other shapes, each named with its module, its shape and why
  (``OTHER_SHAPE_KEYS``); an entry that no longer matches fails the test, so the table
  cannot outlive the code it excuses.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import exactattn

PKG = Path(exactattn.__file__).resolve().parent

# Modules that read or build model dicts (the exactattn/1 model format, owned by model/):
# they may use model-format keys, and only those.
MODEL_DICT_MODULES = (
    "model/",
    "constructions/",
    "importers/",
    "rasp/",
    "export/",
    "engine/",
    "run/evaluate.py",
    "cli/export.py",
)

# (module, key): the shape the key belongs to there. Keep short; each entry must still match.
_CHECKPOINT = "checkpoint and shard files (run/executors.py: manifest, shard identity)"
_LEDGER_RUNS = "the claims ledger's runs: run kinds (soft, thm, hard) and run_check keywords"
_EXPORT = "export files (export/: the torch / TransformerLens configs, the rounding report)"
OTHER_SHAPE_KEYS: dict[tuple[str, str], str] = {
    ("core/numbers.py", "lower"): "the {lower, upper} interval encoding every format shares",
    ("core/numbers.py", "upper"): "the {lower, upper} interval encoding every format shares",
    ("core/numbers.py", "num"): "a named group of the rational-number regex (m['num'])",
    ("core/numbers.py", "den"): "a named group of the rational-number regex (m['den'])",
    ("bounds/closedforms.py", "n"): "sympy's local_dict (the symbol n) re-parsing our own text",
    ("engine/cascade/attention.py", "K"): "a compiled head's weight matrices by name, in memory",
    ("engine/longsoft.py", "K"): "a compiled head's weight matrices by name, in memory",
    ("constructions/dyck.py", "step"): "a hidden unit's name in a construction",
    ("importers/tracr.py", "positions"): "the importer's notes on tracr's outputs",
    ("importers/tracr.py", "expected"): "a case of tracr's export format",
    ("importers/tracr_compile.py", "expected"): "a case of tracr's export format (the writer)",
    ("report/regenerate.py", "max_n"): "keyword arguments of run_check",
    ("report/regenerate.py", "bounds"): "keyword arguments of run_check",
    ("run/executors.py", "format"): _CHECKPOINT,
    ("run/executors.py", "settings"): _CHECKPOINT,
    ("run/executors.py", "n"): _CHECKPOINT,
    ("run/executors.py", "tau"): _CHECKPOINT,
    ("run/executors.py", "index"): _CHECKPOINT,
    ("run/executors.py", "start"): _CHECKPOINT,
    ("run/executors.py", "model_sha256"): _CHECKPOINT,
    ("export/torch.py", "dtype"): _EXPORT,
    ("export/torch.py", "index"): _EXPORT,
    ("export/torch.py", "taus"): _EXPORT,
    ("export/transformer_lens.py", "dtype"): _EXPORT,
    ("export/transformer_lens.py", "tau"): _EXPORT,
    ("cli/export.py", "model"): _EXPORT,
    ("cli/export.py", "dtype"): _EXPORT,
    ("cli/export.py", "index"): _EXPORT,
    ("run/executors.py", "hard_only"): _CHECKPOINT,
    ("run/executors.py", "float_filter"): _CHECKPOINT,
    ("cli/__init__.py", "min_n"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/__init__.py", "max_n"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/__init__.py", "tau"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/__init__.py", "hard_only"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/__init__.py", "bounds"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/__init__.py", "find_tau"): _CHECKPOINT + " (check's fingerprint)",
    ("cli/show.py", "value"): "an accept read-out's decision {value, accept} in memory (evaluate)",
    ("report/regenerate.py", "find_tau"): "keyword arguments of run_check",
    ("report/claims.py", "max_n"): _LEDGER_RUNS,
    ("report/claims.py", "hard_only"): _LEDGER_RUNS,
    ("report/claims.py", "bounds"): _LEDGER_RUNS,
    ("report/claims.py", "find_tau"): _LEDGER_RUNS,
    ("report/claims.py", "tau_theorem"): _LEDGER_RUNS,
    ("report/claims.py", "soft"): _LEDGER_RUNS,
    ("report/claims.py", "hard"): _LEDGER_RUNS,
}


def _key_literals(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every string used as a key: subscripts, .get/.pop/.setdefault, dict-display keys."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            s = node.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, str):
                yield s.value, node.lineno
        elif isinstance(node, ast.Call):
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr in ("get", "pop", "setdefault")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.args[0].value, node.lineno
        elif isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    yield k.value, k.lineno


def _modules(under: Path) -> list[Path]:
    return sorted(under.rglob("*.py"))


def _rel(p: Path) -> str:
    return p.relative_to(PKG).as_posix()


def _under(rel: str, prefixes: set[str] | tuple[str, ...]) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in prefixes)


def result_keys() -> set[str]:
    """Every key the results package reads or writes."""
    return {
        k for p in _modules(PKG / "results") for k, _ in _key_literals(ast.parse(p.read_text()))
    }


def model_keys() -> set[str]:
    """The model format's keys, from model/: its key literals, and the key names its
    validator lists (identifier-like strings in set, tuple and list displays)."""
    keys: set[str] = set()
    for p in _modules(PKG / "model"):
        tree = ast.parse(p.read_text())
        keys |= {k for k, _ in _key_literals(tree)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                for e in node.elts:
                    if isinstance(e, ast.Constant) and isinstance(e.value, str):
                        if e.value.isidentifier():
                            keys.add(e.value)
    return keys


def offences(source: str, rel: str, rkeys: set[str], mkeys: set[str]) -> list[str]:
    """Result-key literals of one module that no exemption covers ("rel:line 'key'")."""
    out = []
    model_ok = _under(rel, MODEL_DICT_MODULES)
    for key, line in _key_literals(ast.parse(source)):
        if key not in rkeys:
            continue
        if model_ok and key in mkeys:
            continue
        if (rel, key) in OTHER_SHAPE_KEYS:
            continue
        out.append(f"{rel}:{line} {key!r}")
    return out


def test_no_result_key_literals_outside_results() -> None:
    rkeys, mkeys = result_keys(), model_keys()
    assert {"gamma", "first_flip", "witness", "tau_theorem"} <= rkeys  # the scan finds keys
    bad: list[str] = []
    for p in _modules(PKG):
        rel = _rel(p)
        if rel.startswith("results/"):
            continue
        bad += offences(p.read_text(), rel, rkeys, mkeys)
    assert not bad, (
        "result-file keys spelled outside exactattn/results/ (use the record's fields; "
        "add keys to a record's to_json/from_json):\n" + "\n".join(bad)
    )


def test_exemptions_are_live() -> None:
    """Every pending path exists and every (module, key) exemption still occurs."""
    for p in MODEL_DICT_MODULES:
        assert (PKG / p).exists(), p
    for (rel, key), why in OTHER_SHAPE_KEYS.items():
        found = {k for k, _ in _key_literals(ast.parse((PKG / rel).read_text()))}
        assert key in found, f"stale exemption {rel} {key!r} ({why})"


def test_a_planted_literal_fails() -> None:
    """``d["gamma"]`` in run/search.py (or a dict display with a precision key in cli/extra.py,
    or a model-format-looking result key in a model module that is not a model key) is
    reported; the module as it is, is not."""
    rkeys, mkeys = result_keys(), model_keys()
    src = (PKG / "run" / "search.py").read_text()
    assert offences(src, "run/search.py", rkeys, mkeys) == []
    planted = src + '\n\ndef _planted(d):\n    return d["gamma"]\n'
    assert offences(planted, "run/search.py", rkeys, mkeys) == [
        f"run/search.py:{planted.count(chr(10))} 'gamma'"
    ]
    extra = (PKG / "cli" / "extra.py").read_text() + '\nX = {"first_flip": None}\n'
    assert [o.split()[-1] for o in offences(extra, "cli/extra.py", rkeys, mkeys)] == [
        "'first_flip'"
    ]
    assert "gamma" not in mkeys
    assert offences('d.get("gamma")\n', "constructions/dyck.py", rkeys, mkeys)
    # a model key in a model module is the model's business; elsewhere it is a result key
    assert "layers" in mkeys and "layers" in rkeys
    assert offences('m["layers"]\n', "model/load.py", rkeys, mkeys) == []
    assert offences('m["layers"]\n', "run/search.py", rkeys, mkeys)
