"""The house: every import in kafka_recon points down its layers, and nothing imports in a cycle.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit

# bottom to top; a module may import its own layer or any below it
LAYERS = [
    ("errors", ["kafka_recon.errors", "kafka_recon"]),
    ("settings", ["kafka_recon.settings"]),
    ("values", ["kafka_recon.config", "kafka_recon.window"]),
    ("run folder", ["kafka_recon.runfolder"]),
    ("sources", ["kafka_recon.sources"]),
    ("cluster", ["kafka_recon.cluster"]),
    ("spark steps", ["kafka_recon.spark"]),
    ("result", ["kafka_recon.result"]),
    ("outputs", ["kafka_recon.outputs"]),
    ("orchestration", ["kafka_recon.orchestrate"]),
    ("faces", ["kafka_recon.faces", "kafka_recon.airflow", "kafka_recon.__main__"]),
]
NEVER = ("spark_jobs", "harness", "tests", "bench", "dags", "plugins")
TREES = ("kafka_recon", "spark_jobs", "harness", "dags", "plugins", "bench")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for tree in TREES for p in (REPO_ROOT / tree).rglob("*.py")}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every module of ours this file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import mod` imports pkg.mod when that is a module
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def layer_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), rank)
    return best[1]


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports_of(p, known) - {m} for m, p in mods.items()}


def test_every_library_module_has_a_layer() -> None:
    unplaced = [m for m in graph() if m.startswith("kafka_recon") and layer_of(m) < 0]
    assert unplaced == [], "give each new module a layer in LAYERS"


def test_library_imports_only_point_down() -> None:
    upward = []
    for m, deps in graph().items():
        if not m.startswith("kafka_recon"):
            continue
        for d in deps:
            if d.startswith("kafka_recon") and d != "kafka_recon" and layer_of(d) > layer_of(m):
                upward.append(f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} "
                              f"({LAYERS[layer_of(d)][0]})")
    assert upward == []


def test_the_library_never_imports_what_tests_or_demonstrates_it() -> None:
    wrong = sorted(f"{m} imports {d}" for m, deps in graph().items()
                   if m.startswith("kafka_recon") for d in deps if d.split(".")[0] in NEVER)
    assert wrong == []


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_anywhere() -> None:
    g = graph()
    # a package's __init__ importing its own modules is not a cycle of design
    g = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in g.items()}
    assert cycles(g) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
