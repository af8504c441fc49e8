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


def top_level_names(path: Path) -> set[str]:
    """The names a module defines or imports at its top level (if/try blocks included)."""
    names = set()
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            body.extend([*node.body, *node.orelse, *getattr(node, "finalbody", []),
                         *(s for h in getattr(node, "handlers", []) for s in h.body)])
    return names


def gplace_imports_of(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of each ``from gplace... import name`` in ``path``, at any depth."""
    return [(node.lineno, node.module, a.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            and node.module.split(".")[0] == "gplace" for a in node.names]


def missing_gplace_names(path: Path) -> list[str]:
    """The ``from gplace... import name`` lines of ``path`` whose module or name does not exist
    in the package (a script whose import fails only when it runs)."""
    bad = []
    for line, module, name in gplace_imports_of(path):
        base = ROOT.parent.joinpath(*module.split("."))
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not source.exists():
            bad.append(f"{path.name}:{line}: no module {module}")
        elif not (name in top_level_names(source) or (base / name).is_dir()
                  or (base / f"{name}.py").exists()):
            bad.append(f"{path.name}:{line}: {module} has no {name}")
    return bad


def test_the_recipes_and_benchmarks_import_what_the_package_has():
    """The scripts around the package (benchmarks, recipes, examples) import gplace names
    inside their functions, which a rename breaks without an error until the script runs."""
    scripts = [f for folder in ("benchmarks", "datasets", "pretrain", "finetune", "scripts",
                                "calibration")
               for f in (ROOT.parent / folder).rglob("*.py")]
    assert len(scripts) > 10
    assert [b for f in scripts for b in missing_gplace_names(f)] == []


def test_a_renamed_name_is_caught(tmp_path):
    script = tmp_path / "old.py"
    script.write_text("def main():\n    from gplace.cli.simulate_cmd import load_model\n"
                      "    from gplace.cli.models import load_model\n"
                      "    from gplace.nowhere import x\n")
    assert missing_gplace_names(script) == ["old.py:2: gplace.cli.simulate_cmd has no load_model",
                                            "old.py:4: no module gplace.nowhere"]
