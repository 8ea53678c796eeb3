"""The house: every import in kafka_recon points down its layers, and nothing imports in a cycle.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import pytest

from harness.docs import LAYERS, graph, layer_of, main

pytestmark = pytest.mark.unit

NEVER = ("spark_jobs", "harness", "tests", "bench", "dags", "plugins")


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


def test_the_published_layers_and_schemas_are_what_the_code_makes() -> None:
    """docs/layers.md and docs/schemas/ are generated (`make docs`): a change to an import or a
    run file's model that is not published fails here."""
    assert main(["--check"]) == 0


def test_no_function_in_the_library_is_longer_than_80_lines() -> None:
    import ast

    from kafka_recon.settings import PACKAGE

    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} {lines}")
    assert long == [], "split these into steps a reader can hold"
