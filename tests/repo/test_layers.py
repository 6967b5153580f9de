"""The package's import graph: no cycle, no import upward across stages, no hidden import.

Built statically (ast over every module of exactattn/, top-level and function-level imports,
relative imports resolved), so it needs no optional dependency and sees imports that only run
in one branch. It walks the imports Python actually runs: ``import a.b.c`` and
``from a.b.c import x`` first run the packages ``a`` and ``a.b`` (their ``__init__``) where the
importing module is not already inside them, and ``from a.b import c`` reads the package
``a.b`` itself (its ``__init__``), as well as the module ``a.b.c`` when there is one. So a cycle
that hides behind a package's ``__init__`` (``report`` → ``report.latex`` → … → ``report``
through ``from exactattn.report import fmt``) is a cycle here (issue 37). The rules (issue 21;
the last, issue 37):

* no import cycle between modules (``KNOWN_CYCLES``: the one named exception, with its issue);
* a module imports only from its own stage folder or a lower one (``LAYERS``);
* an import inside a function carries a ``# lazy: <why>`` comment (same line or the line above):
  allowed only where it breaks a real cost, e.g. an optional or heavy dependency;
* no module is longer than ``MAX_LINES``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from paths import ROOT

PKG = ROOT / "exactattn"

# stage folder → rank; a module may import only from stages of equal or lower rank.
# "" is the package root (__init__, __main__, testing): the public API, on top.
LAYERS = {
    "core": 0,  # numbers, errors, limits, JSON I/O, exit codes
    "logic": 1,  # LTL formulas
    "rasp": 1,  # the RASP language: programs, parser, checker, interpreter (reference oracles)
    "model": 2,  # the validated Model, expressions, reference oracles
    "importers": 2,  # tracr → model dict
    "constructions": 2,  # model dicts from formulas and programs (the RASP compiler too)
    "inputs": 3,  # enumeration, shards, long-input families
    "results": 4,  # the records and the result schema
    "engine": 5,  # hard and soft meanings, measurements, dtype emulation
    "export": 6,  # torch / TransformerLens
    "bounds": 7,  # theorems, bounds vs measurements, τ*, closed forms
    "certificate": 7,  # claimed bounds: parsing, verification, certificates from claims
    "run": 8,  # check, shards, executors, evaluate, precision and search sweeps
    "report": 9,  # Markdown, LaTeX, figures, claims
    "cli": 10,  # the command-line shell
    "": 11,  # public API
}


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    lazy: bool  # inside a function
    why: bool  # carries a "# lazy:" comment
    implicit: bool = False  # a package's __init__ run on the way to a module below it


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py")) if ".venv" not in p.parts}


def stage(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 2 and (PKG / f"{parts[1]}.py").exists():
        return ""  # a root module
    return parts[1] if len(parts) > 1 else ""


def packages_above(name: str) -> list[str]:
    """The packages Python runs before ``name``: a.b.c → [a, a.b]."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def runs(
    mod: str, target: str, names: list[str] | None, mods: dict[str, Path]
) -> list[tuple[str, bool]]:
    """What importing ``target`` from ``mod`` runs: (module, implicit) pairs.

    ``names``: the names of ``from target import …`` (None for ``import target``). The packages
    above the target run first, except those ``mod`` is inside (Python ran them before ``mod``);
    the target itself always counts (``from pkg import x`` reads ``pkg``'s namespace, its
    ``__init__``); and every name that is a module of the package runs too."""

    def known(t: str) -> str:
        # the longest known module that t names (exactattn.model.Model → exactattn.model)
        while t and t not in mods and "." in t:
            t = t.rsplit(".", 1)[0]
        return t

    inside = set(packages_above(mod))
    out: list[tuple[str, bool]] = []
    for p in packages_above(target):
        if p not in inside:
            out.append((known(p), True))
    out.append((known(target), False))
    for n in names or ():
        if f"{target}.{n}" in mods:
            out.append((f"{target}.{n}", False))
    return out


def edges() -> list[Edge]:
    mods = modules()
    out: list[Edge] = []
    for mod, path in mods.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(text)
        in_func: set[int] = set()
        for f in ast.walk(tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_func.update(id(n) for n in ast.walk(f) if n is not f)

        def why(node: ast.stmt, lines: list[str] = lines) -> bool:
            spots = lines[node.lineno - 1 : node.end_lineno]
            if node.lineno >= 2 and lines[node.lineno - 2].strip().startswith("#"):
                spots.append(lines[node.lineno - 2])
            return any("# lazy:" in s for s in spots)

        for node in ast.walk(tree):
            targets: list[tuple[str, bool]] = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    targets += runs(mod, a.name, None, mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    drop = node.level - (1 if is_pkg else 0)
                    base = base[: len(base) - drop] if drop else base
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = runs(mod, src, [a.name for a in node.names], mods)
            else:
                continue
            lazy = id(node) in in_func
            seen = set()
            for t, implicit in targets:
                if t in seen:
                    continue
                seen.add(t)
                if t in mods or lazy:
                    dst = t if t in mods else ""
                    out.append(Edge(mod, dst, node.lineno, lazy, why(node), implicit))
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a cycle path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete cycle through comp[0] inside the component (breadth-first)."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if w in members and w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def test_graph_is_seen() -> None:
    """The walker finds the imports it must (a walker that sees nothing passes everything)."""
    es = edges()
    assert len(modules()) > 60
    assert any(e.src == "exactattn.cli" or e.src.startswith("exactattn.cli.") for e in es)
    assert any(e.dst == "exactattn.model" for e in es)
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Known cycles, each with the issue that removes it: a strongly connected component of the
# import graph is allowed only if it lies inside one of these sets (a smaller one is progress; a
# larger one, or any other cycle, fails), and an entry no cycle needs any more must be removed.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def graph_of(es: list[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for e in es:
        if e.dst and e.dst != e.src:
            graph.setdefault(e.src, set()).add(e.dst)
    return graph


def test_no_import_cycle() -> None:
    graph = graph_of(edges())
    comps = find_cycles(graph)
    bad = [c for c in comps if not any(set(c) <= known for known in KNOWN_CYCLES)]
    cycles = [" → ".join(cycle_path(graph, c)) for c in bad]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
    stale = [why for known, why in KNOWN_CYCLES.items() if not any(set(c) <= known for c in comps)]
    assert not stale, "fixed cycles still allowed in KNOWN_CYCLES (remove them):\n" + "\n".join(
        stale
    )


def test_cycles_behind_package_inits_are_seen() -> None:
    """The walker sees what Python runs: the packages above an imported module, and a package
    read by ``from pkg import name`` (the report cycle of issue 37 hid behind both)."""
    mods = {m: Path() for m in ("a", "a.b", "a.b.c", "d", "d.e")}
    assert runs("d.e", "a.b.c", ["x"], mods) == [("a", True), ("a.b", True), ("a.b.c", False)]
    # inside the package: its __init__ has run, but ``from a import b`` reads it again
    assert runs("a.b.c", "a.b", None, mods) == [("a.b", False)]
    assert runs("a.b.c", "a", ["b"], mods) == [("a", False), ("a.b", False)]
    graph = graph_of([Edge("a", "a.b", 1, False, False), Edge("a.b", "a", 1, False, False)])
    assert find_cycles(graph) == [["a", "a.b"]]


def test_stages_import_only_downward() -> None:
    unknown = sorted({stage(m) for m in modules()} - set(LAYERS))
    assert not unknown, f"declare the rank of stage folder(s) {unknown} in LAYERS"
    bad = [
        f"{e.src}:{e.line} imports {e.dst} ({stage(e.src) or 'root'} {LAYERS[stage(e.src)]}"
        f" < {stage(e.dst) or 'root'} {LAYERS[stage(e.dst)]})"
        for e in edges()
        if e.dst and LAYERS[stage(e.src)] < LAYERS[stage(e.dst)]
    ]
    assert not bad, "imports upward across stages:\n" + "\n".join(bad)


def test_function_level_imports_say_why() -> None:
    bad = sorted({f"{e.src}:{e.line}" for e in edges() if e.lazy and not e.why})
    assert not bad, (
        "imports inside functions without a '# lazy: <why>' comment (move them to the top, or"
        " say which cost they avoid):\n" + "\n".join(bad)
    )


def test_cli_start_imports_nothing_heavy() -> None:
    """The lazy imports pay off: starting the CLI loads none of the slow or optional libraries
    (ml_dtypes alone took the start from 0.5 s to 1.7 s when it was hoisted)."""
    heavy = ("ml_dtypes", "matplotlib", "sympy", "torch", "dask", "distributed", "transformer_lens")
    code = f"import sys, exactattn.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


MAX_LINES = 1200  # issue 37: engine/softfloat.py had grown to 3,020 lines, one room for everything


def test_no_module_over_max_lines() -> None:
    """No module of exactattn/ is longer than MAX_LINES: a module that grows past it holds more
    than one thing, and splitting it keeps every room findable."""
    long = {
        m: n
        for m, p in modules().items()
        if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them): {long}"


ARCHITECTURE = PKG.parent / "docs" / "architecture.md"


def documented_stages(text: str) -> dict[str, tuple[int, set[str]]]:
    """docs/architecture.md's stage table: stage → (rank, the stages it imports).

    The table is the one with the header ``| rank | stage | produces | imports |``; a stage
    is its first backticked name without the slash (``exactattn/`` is the root, ""), and the
    imports are the backticked names of the last column (``—``: none)."""
    lines = text.splitlines()
    head = "| rank | stage | produces | imports |"
    start = lines.index(head) + 2  # skip the separator row
    out: dict[str, tuple[int, set[str]]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rank, name, imports = int(cells[0]), cells[1], cells[-1]
        stage_name = name.split("`")[1].rstrip("/")
        stage_name = "" if stage_name == "exactattn" else stage_name
        assert stage_name not in out, f"stage {stage_name or 'root'} listed twice"
        out[stage_name] = (rank, set(imports.split("`")[1::2]) - {""})
    return out


def stage_graph(es: list[Edge]) -> dict[str, set[str]]:
    """Which other stages each stage imports (every edge: top-level, lazy and implicit)."""
    out: dict[str, set[str]] = {s: set() for s in LAYERS}
    for e in es:
        if e.dst and stage(e.src) != stage(e.dst):
            out[stage(e.src)].add(stage(e.dst))
    return out


def test_architecture_import_table() -> None:
    """docs/architecture.md is true against the code: every stage folder is in its table, at
    its rank in ``LAYERS``, and the table's imports are exactly the stages it imports (an
    import added or removed across stages fails here until the doc says so)."""
    doc = documented_stages(ARCHITECTURE.read_text(encoding="utf-8"))
    real = stage_graph(edges())
    assert set(doc) == set(LAYERS), (
        f"stages in docs/architecture.md {sorted(doc)} differ from LAYERS {sorted(LAYERS)}"
    )
    ranks = {s: (doc[s][0], r) for s, r in LAYERS.items() if doc[s][0] != r}
    assert not ranks, f"ranks (doc, LAYERS) that differ: {ranks}"
    wrong = {
        s or "root": {
            "doc only": sorted(doc[s][1] - real[s]),
            "code only": sorted(real[s] - doc[s][1]),
        }
        for s in LAYERS
        if doc[s][1] != real[s]
    }
    assert not wrong, f"docs/architecture.md's import table differs from the code: {wrong}"


def test_architecture_table_reader_sees_a_difference() -> None:
    """The reader of the table finds what it must (a reader that sees nothing passes all)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    doc = documented_stages(text)
    assert doc["cli"][1] >= {"run", "report"} and doc["core"] == (0, set())
    assert doc[""][0] == LAYERS[""]
    row = next(line for line in text.splitlines() if line.startswith("| 3 | `inputs/`"))
    changed = text.replace(row, row.replace("`model`, `core`", "`core`"))
    assert documented_stages(changed)["inputs"][1] == {"core"} != stage_graph(edges())["inputs"]
