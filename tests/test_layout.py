"""The package layout is the architecture: one folder per concern, dependencies one way.

Walks every import in orchestrator/ (module level, inside functions, and under TYPE_CHECKING:
a lazy import is still a dependency) and checks that no two modules and no two folders import
each other, directly or around a loop, and that each folder imports only the floors below it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "orchestrator"
BASE = {"models", "errors", "paths", "yamlio", "seams"}
# Each folder and the folders it may import (the base above is open to all).
ALLOWED = {
    "store": set(),
    "slurm": set(),
    "clusters": {"store", "slurm"},
    "results": {"clusters", "store"},
    "recipes": {"clusters", "slurm"},
    "report": {"clusters", "recipes", "results", "store"},
    "runs": {"clusters", "recipes", "results", "slurm", "store"},
    "pipelines": {"clusters", "recipes", "report", "results", "runs", "slurm", "store"},
    "cli": {"clusters", "pipelines", "recipes", "report", "results", "runs", "slurm", "store"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py") if "_data" not in p.parts}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The orchestrator modules `name` imports (a `from pkg import mod` counts as pkg.mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("orchestrator"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("orchestrator"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found.update(subs or {target})
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else None


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop in `graph`, as the list of its nodes, or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        colour[node] = 2
        stack.pop()
        return None

    for start in sorted(graph):
        if start not in colour and (found := visit(start)):
            return found
    return None


def test_root_holds_only_the_base_and_the_folders() -> None:
    files = {p.stem for p in PKG.glob("*.py")} - {"__init__", "__main__"}
    assert files <= BASE, f"modules outside a concern's folder: {sorted(files - BASE)}"
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(ALLOWED), folders ^ set(ALLOWED)


def test_every_package_states_its_contract() -> None:
    for init in PKG.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 8, f"{init.relative_to(PKG.parent)} needs a docstring stating its contract"


def test_no_import_circle_between_modules() -> None:
    graph = _graph()
    assert sum(len(v) for v in graph.values()) > 100  # the walk really sees the imports
    # A package's __init__ importing its own modules is not a loop of meaning; leave those out.
    graph = {m: {d for d in deps if not (m.endswith("__init__") or d.startswith(m + "."))}
             for m, deps in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_import_circle_between_folders_and_floors_point_down() -> None:
    folder_graph: dict[str, set[str]] = defaultdict(set)
    wrong = []
    for module, deps in _graph().items():
        here = _folder(module)
        for dep in deps:
            there = _folder(dep)
            if here is None and there is not None and module.split(".")[1] in BASE:
                wrong.append(f"base module {module} imports {dep}")
            if here and there and here != there:
                folder_graph[here].add(there)
                if there not in ALLOWED[here]:
                    wrong.append(f"{module} ({here}/) imports {dep} ({there}/)")
    assert not wrong, "\n".join(sorted(wrong))
    assert _cycle(folder_graph) is None


@pytest.mark.parametrize("loop", [{"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"x": {"x"}}])
def test_the_cycle_finder_finds_loops(loop: dict[str, set[str]]) -> None:
    assert _cycle(loop) is not None
    assert _cycle({"a": {"b"}, "b": set()}) is None
