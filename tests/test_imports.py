"""The package's shape: no import cycle among gplace modules (imports inside functions count),
and only the CLI and the top-level API import the place() pipeline."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "gplace"


def import_graph() -> dict[str, set[str]]:
    mods = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [node.module, *subs]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m:
                    edges[m].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_cli_and_the_api_import_the_pipeline():
    """Entry points (the CLI, the package, ``python -m gplace.warmup``) may import the pipeline;
    nothing below them does."""
    top = {"gplace.place", "gplace.cli", "gplace"}
    for m, targets in import_graph().items():
        if m.startswith("gplace.cli") or m in ("gplace", "gplace.__main__", "gplace.warmup"):
            continue
        assert not (targets & top), f"{m} imports {sorted(targets & top)}"
