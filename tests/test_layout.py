"""The package layout is the architecture: one folder per concern, dependencies one way, seams kept.

Walks every import in orchestrator/ (module level, inside functions, and under TYPE_CHECKING: a
lazy import is still a dependency). What each folder may import is read from the "May import:"
line of its `__init__` docstring, the one source of truth: `folder/` allows a whole folder,
`folder.module` only that module. Then the seam rules: runs/ never imports providers, only the
providers registry knows provider names, only store/ touches the store's connection, only
slurm/ spells Slurm's commands, benchmarks/ never import tests/, and the code that talks to
providers and launchers never probes them with getattr/hasattr.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "orchestrator"
BASE = {"models", "errors", "paths", "yamlio", "seams", "templating", "backends"}
FOLDERS = ("store", "slurm", "hardware", "hosts", "specs", "providers", "clusters", "results", "recipes", "report",
           "runs", "pipelines", "cli")
REGISTRY = "orchestrator.providers"
PROVIDER_NAMES = {"local", "ssh", "azure", "azureml", "fake"}
SLURM_WORDS = re.compile(r"(?<![\w./-])(sbatch|srun|salloc|squeue|sinfo|scontrol|scancel|sacct)(?![\w.-])")
# Modules that talk to providers, launchers and their Access: no duck-typed probing there.
NO_PROBES = ("orchestrator.runs", "orchestrator.pipelines", "orchestrator.cli",
             "orchestrator.clusters.lifecycle", "orchestrator.clusters.shell",
             "orchestrator.clusters.spending")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py") if "_data" not in p.parts}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The orchestrator modules `name` imports (a `from pkg import mod` counts as pkg.mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
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
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else None


def allowed_imports(folder: str) -> list[str]:
    """The "May import:" entries of a folder's contract: "clusters" (the whole folder) or
    "clusters.catalog" (one module), as written in its __init__ docstring."""
    doc = ast.get_docstring(_tree(PKG / folder / "__init__.py")) or ""
    match = re.search(r"^May import:(.*?)(?=^[A-Z][a-z]+:|\Z)", doc, re.S | re.M)
    assert match, f"orchestrator/{folder}/__init__.py has no 'May import:' line"
    text = re.sub(r"\(never [^)]*\)", "", match.group(1))  # a stated exception is not an allowance
    entries = re.findall(r"\b(" + "|".join(FOLDERS) + r")(/|(?:\.[a-z_]+)+)", text)
    if "the base only" not in text:
        assert "the base" in text, f"{folder}'s contract must say whether it imports the base"
    return [f if sep == "/" else f + sep for f, sep in entries]


def _permits(entries: list[str], dep: str) -> bool:
    rel = dep.removeprefix("orchestrator.")
    return any(rel == e or rel.startswith(e + ".") for e in entries)


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


def provider_name_branches(tree: ast.AST) -> list[int]:
    """Lines comparing something with a provider's name (`x == "azure"`, `in ("local", ...)`)."""
    def names(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in PROVIDER_NAMES
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(isinstance(e, ast.Constant) and e.value in PROVIDER_NAMES for e in node.elts)
        return False
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
                   and any(names(side) for side in (n.left, *n.comparators))})


# The CLI's error handler reads typer's usage exceptions (its vendored click classes are private).
PROBES_ALLOWED = {("orchestrator.cli.app", "_usage_error")}


def probes(tree: ast.AST, module: str = "") -> list[int]:
    """Lines that probe an object: hasattr(...), or getattr(obj, name, default)."""
    allowed: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and (module, fn.name) in PROBES_ALLOWED:
            allowed |= set(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and (n.func.id == "hasattr" or (n.func.id == "getattr" and len(n.args) == 3))} - allowed)


# -- the layout --------------------------------------------------------------------------------

def test_root_holds_only_the_base_and_the_folders() -> None:
    files = {p.stem for p in PKG.glob("*.py")} - {"__init__", "__main__"}
    assert files <= BASE, f"modules outside a concern's folder: {sorted(files - BASE)}"
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(FOLDERS), folders ^ set(FOLDERS)


def test_every_package_states_its_contract() -> None:
    for init in PKG.rglob("__init__.py"):
        doc = ast.get_docstring(_tree(init)) or ""
        assert len(doc.split()) >= 8, f"{init.relative_to(PKG.parent)} needs a docstring stating its contract"
    for folder in FOLDERS:
        allowed_imports(folder)  # every top-level folder says what it may import


def test_no_import_circle_between_modules() -> None:
    graph = _graph()
    assert sum(len(v) for v in graph.values()) > 100  # the walk really sees the imports
    # A package's __init__ importing its own modules is not a loop of meaning; leave those out.
    graph = {m: {d for d in deps if not (m.endswith("__init__") or d.startswith(m + "."))}
             for m, deps in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_imports_follow_each_contract_and_floors_point_down() -> None:
    allowed = {f: allowed_imports(f) for f in FOLDERS}
    folder_graph: dict[str, set[str]] = defaultdict(set)
    wrong = []
    for module, deps in _graph().items():
        here = _folder(module)
        for dep in deps:
            there = _folder(dep)
            if here is None and there is not None and module != "orchestrator.__main__":
                wrong.append(f"base module {module} imports {dep}")
            if here and there and here != there:
                folder_graph[here].add(there)
                if not _permits(allowed[here], dep):
                    wrong.append(f"{module} ({here}/) imports {dep}, which its contract does not allow")
    assert not wrong, "\n".join(sorted(wrong))
    assert _cycle(folder_graph) is None


# -- the seams ---------------------------------------------------------------------------------

def test_runs_never_imports_a_provider() -> None:
    bad = [f"{m} imports {d}" for m, deps in _graph().items() if m.startswith("orchestrator.runs")
           for d in deps if d == REGISTRY or d.startswith(REGISTRY + ".")]
    assert not bad, "\n".join(bad)


def test_only_the_registry_knows_provider_names() -> None:
    found = {name: lines for name, path in _modules().items() if name != REGISTRY
             and (lines := provider_name_branches(_tree(path)))}
    assert not found, f"provider-name comparisons outside {REGISTRY}: {found}"


def test_no_getattr_probes_where_providers_and_launchers_are_used() -> None:
    found = {name: lines for name, path in _modules().items() if name.startswith(NO_PROBES)
             and (lines := probes(_tree(path), name))}
    assert not found, f"getattr/hasattr probes (ask Capabilities, or type the object): {found}"


def test_only_the_store_touches_its_connection() -> None:
    found = [f"{name}:{n.lineno}" for name, path in _modules().items()
             if not name.startswith("orchestrator.store") for n in ast.walk(_tree(path))
             if isinstance(n, ast.Attribute) and n.attr == "_conn"]
    assert not found, f"store._conn used outside store/: {found}"


def test_only_slurm_spells_slurm_commands() -> None:
    found = [f"{p.relative_to(ROOT)}:{i}" for p in PKG.rglob("*.py") if "slurm" != p.parent.name
             for i, line in enumerate(p.read_text().splitlines(), 1) if SLURM_WORDS.search(line)]
    assert not found, "Slurm command words outside orchestrator/slurm/:\n" + "\n".join(found)


def test_benchmarks_never_import_tests() -> None:
    found = []
    for path in (ROOT / "benchmarks").glob("*.py"):
        for n in ast.walk(_tree(path)):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            found += [f"{path.name}: {m}" for m in names if m == "tests" or m.startswith("tests.")]
    assert not found, found


# -- the checkers check --------------------------------------------------------------------------

@pytest.mark.parametrize("loop", [{"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"x": {"x"}}])
def test_the_cycle_finder_finds_loops(loop: dict[str, set[str]]) -> None:
    assert _cycle(loop) is not None
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_rule_checkers_see_what_they_forbid() -> None:
    code = ast.parse('if c.provider == "azure" or p in ("local", "fake"):\n'
                     '    f = getattr(p, "extend", None)\nok = x == "other"\n')
    assert provider_name_branches(code) == [1] and probes(code) == [2]
    assert SLURM_WORDS.search('run(f"sbatch --parsable {x}")') and not SLURM_WORDS.search("slurm/batch.py")
    assert _permits(["hardware.catalog"], "orchestrator.hardware.catalog")
    assert not _permits(["hardware.catalog"], "orchestrator.hardware.layout")
    assert _permits(["providers"], "orchestrator.providers.azure.up")
