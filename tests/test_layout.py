"""The package layout is the architecture: one folder per concern, dependencies one way, seams kept.

Every rule reads the syntax tree (ast) of each module under orchestrator/ and returns its
violations as `module:line: what`; each whole-tree test asserts there are none. Each rule is
proven by planted tests (PLANTED): the violation is appended to one real module, in memory (the
real tree with one mutation), and the rule must report something new at that module, below its
original last line; ALLOWED holds what each rule must let pass (the registry and a backend's own
package, plain values, dynamic names).
tests/test_toy_backend.py registers a test-only backend and shows the rules counting it.

What counts as an import: `import x`, `from x import y` (`from pkg import mod` counts as
pkg.mod), and a call of `importlib.import_module`/`__import__` (under any alias) with a literal
name (relative names resolved, `fromlist` counted as from-imports); module level, inside
functions and under TYPE_CHECKING alike: a lazy import is still a dependency.

The rules:
- Layout: the root holds only the base modules and the concern folders; every package has a
  docstring stating its contract, and every top-level folder a "May import:" line.
- No import loop between modules, counting a package's imports of its own submodules (an
  `__init__` importing a submodule that imports the package back is a loop); no loop between folders.
- Contracts: what a folder imports is allowed by the "May import:" line of its `__init__`
  docstring (`folder/`: a whole folder, `folder.module`: that module only); base modules import
  no folder.
- Backends: a backend is a package the registry (orchestrator/backends.py) lists; names and
  packages are read from the registry at test time, so a backend a test registers counts. No
  module imports a backend (its package or any submodule) but the registry and the backend's
  own package; so no backend imports another. providers/base.py and providers/azure_shared/ are
  not backends.
- runs/ never imports providers/ (not even the facade).
- Provider names: only the registry uses a provider's name to decide something, and a backend's
  package may use its own name. Elsewhere a string equal to a registered provider name may not
  be a side of a comparison (`==`, `!=`, `in`, `not in`, `is`, a tuple/list/set of names
  included), a `case` value or mapping-pattern key, a key of a dict display or a `dict(name=...)`
  keyword, or an argument of `.startswith`/`.endswith`. As a plain value (a default, help text,
  `Literal[...]`, `provider="fake"`) it is allowed.
- The store's privates: outside orchestrator/store/, no attribute starting with one underscore
  (dunders aside) is read from the store, nor through getattr/setattr/delattr with a literal
  name. "The store" on the syntax tree: an attribute chain rooted at a name `store`, `Store` or
  `*_store`, at an attribute `.store`/`._store`/`.*_store`, or at a name the module binds to a
  Store (a parameter or variable annotated `Store`, a name assigned or `with`-bound from
  `Store(...)`, `Store.open(...)` or `open_store(...)`); any private link after it is a violation.
- No probing where providers and launchers are used (NO_PROBES modules): no `hasattr`, no
  3-argument `getattr`, and no `getattr` with a literal attribute name at all (ask Capabilities,
  or type the object). The CLI's usage-error handler is the one allowed exception.
- Only slurm/ spells Slurm's command words; benchmarks/ never import tests/.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from orchestrator import backends

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "orchestrator"
BASE = {"models", "errors", "paths", "yamlio", "seams", "templating", "backends"}
FOLDERS = ("store", "slurm", "hardware", "hosts", "specs", "providers", "clusters", "results", "recipes", "goodput", "report",
           "forecast",
           "runs", "pipelines", "cli")
REGISTRY = "orchestrator.backends"  # the one module that names backends and imports them
PROVIDERS = "orchestrator.providers"
STORE = "orchestrator.store"
SLURM_WORDS = re.compile(r"(?<![\w./-])(sbatch|srun|salloc|squeue|sinfo|scontrol|scancel|sacct)(?![\w.-])")
# Modules that talk to providers, launchers and their Access: no duck-typed probing there.
NO_PROBES = ("orchestrator.runs", "orchestrator.pipelines", "orchestrator.cli",
             "orchestrator.clusters.lifecycle", "orchestrator.clusters.shell",
             "orchestrator.clusters.spending")
# The CLI's error handler reads typer's usage exceptions (its vendored click classes are private).
PROBES_ALLOWED = {("orchestrator.cli.app", "_usage_error")}


@dataclass(frozen=True)
class Module:
    """One module of the tree: its dotted name, its source and syntax tree, whether an __init__."""

    name: str
    source: str
    tree: ast.Module
    package: bool


Tree = dict[str, Module]


def load_tree(pkg: Path = PKG) -> Tree:
    """Every module under `pkg` (the orchestrator package, or a tiny one a test writes)."""
    tree: Tree = {}
    for path in sorted(pkg.rglob("*.py")):
        if "_data" in path.parts:
            continue
        parts = path.relative_to(pkg.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if package else parts)
        source = path.read_text()
        tree[name] = Module(name, source, ast.parse(source, str(path)), package)
    return tree


_REAL: Tree | None = None


def real_tree() -> Tree:
    global _REAL
    if _REAL is None:
        _REAL = load_tree()
    return _REAL


def planted(tree: Tree, name: str, code: str) -> Tree:
    """A copy of `tree` with `code` appended to module `name` (a new module if there is none)."""
    code = textwrap.dedent(code)
    old = tree.get(name)
    source = (old.source.rstrip("\n") + "\n\n\n" if old else "") + code
    module = replace(old, source=source, tree=ast.parse(source)) if old else \
        Module(name, source, ast.parse(source), False)
    return {**tree, name: module}


def backend_packages() -> dict[str, str]:
    """name -> package of every registered backend, as the registry holds them now (the test-only
    ones a test registered included). The registry exposes names(), not packages: read its table."""
    table = backends.packages()
    assert tuple(table) == backends.names()
    return table


def ordered(violations: Iterable[str]) -> list[str]:
    """Violations ("module:line: what") by module, then line number."""
    def key(v: str) -> tuple[str, int, str]:
        where, _, what = v.partition(": ")
        module, _, line = where.rpartition(":")
        return (module, int(line), what) if line.isdigit() else (where, 0, what)
    return sorted(set(violations), key=key)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# -- imports -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Import:
    target: str
    line: int


def _literal(node: ast.AST | None) -> str | None:
    """The string an expression spells with constants only ("a" + "b", f"a{'b'}"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_literal(v.value if isinstance(v, ast.FormattedValue) and v.format_spec is None
                          and v.conversion == -1 else v) for v in node.values]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None


def _loader_names(tree: ast.AST) -> dict[str, str]:
    """Local name -> "import_module" or "__import__", for the names bound to them (`from
    importlib import import_module as load` included)."""
    found = {"import_module": "import_module", "__import__": "__import__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("importlib", "builtins"):
            found |= {a.asname or a.name: a.name for a in node.names if a.name in ("import_module", "__import__")}
    return found


def _loader_call(node: ast.Call, loaders: dict[str, str]) -> str | None:
    """'import_module' or '__import__' when the call is one of them (any module prefix)."""
    func = node.func
    if isinstance(func, ast.Name):
        return loaders.get(func.id)
    if isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__"):
        return func.attr
    return None


def _resolve(name: str, package: str, level: int) -> str:
    base = package.split(".")[: len(package.split(".")) - level + 1] if level else []
    return ".".join(base + ([name] if name else []))


def _dynamic_imports(node: ast.Call, kind: str, package: str) -> list[str]:
    args: dict[int | str, ast.expr] = {**dict(enumerate(node.args)),
                                       **{k.arg: k.value for k in node.keywords if k.arg}}
    name = _literal(args.get(0, args.get("name")))
    if name is None:
        return []
    if kind == "import_module":
        level = len(name) - len(name.lstrip("."))
        anchor = _literal(args.get(1, args.get("package")))
        if level and anchor is None:
            anchor = package
        return [_resolve(name[level:], anchor or "", level) if level else name]
    level_node = args.get(4, args.get("level"))
    level = level_node.value if isinstance(level_node, ast.Constant) and isinstance(level_node.value, int) else 0
    target = _resolve(name, package, level) if level else name
    fromlist = args.get(3, args.get("fromlist"))
    subs = [_literal(e) for e in fromlist.elts] if isinstance(fromlist, (ast.List, ast.Tuple)) else []
    return [target] + [f"{target}.{s}" for s in subs if s]


def imports(mod: Module, known: Iterable[str]) -> list[Import]:
    """What `mod` imports, each target once per statement: a `from pkg import x` counts as pkg.x
    when pkg.x is a known module, else as pkg."""
    return list(_imports(mod, frozenset(known)))


@functools.cache
def _imports(mod: Module, known: frozenset[str]) -> tuple[Import, ...]:
    package = mod.name if mod.package else mod.name.rpartition(".")[0]
    loaders = _loader_names(mod.tree)
    found: list[Import] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            found += [Import(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", package, node.level) if node.level else node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found += [Import(t, node.lineno) for t in sorted(subs or {target})]
        elif isinstance(node, ast.Call) and (kind := _loader_call(node, loaders)):
            targets = _dynamic_imports(node, kind, package)
            real = [t for t in targets[1:] if t in known]  # __import__'s fromlist: modules only
            found += [Import(t, node.lineno) for t in (targets[:1] + real)]
    return tuple(found)


def graph(tree: Tree) -> dict[str, set[str]]:
    """module -> the modules of the tree it imports (itself aside), package -> own submodules included."""
    known = set(tree)
    return {name: {i.target for i in imports(mod, known) if i.target in known and i.target != name}
            for name, mod in tree.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import loop in `edges`, as the list of its nodes, or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        colour[node] = 2
        stack.pop()
        return None

    for start in sorted(edges):
        if start not in colour and (found := visit(start)):
            return found
    return None


# -- contracts -------------------------------------------------------------------------------------

def _folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else None


def allowed_imports(folder: str, tree: Tree | None = None) -> list[str]:
    """The "May import:" entries of a folder's contract: "clusters" (the whole folder) or
    "clusters.catalog" (one module), as written in its __init__ docstring."""
    doc = ast.get_docstring((tree or real_tree())[f"orchestrator.{folder}"].tree) or ""
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


def contract_violations(tree: Tree) -> list[str]:
    """Imports a folder's "May import:" line does not allow, base modules importing a folder, and
    a loop between folders."""
    allowed = {f: allowed_imports(f, tree) for f in FOLDERS}
    known = set(tree)
    folder_graph: dict[str, set[str]] = defaultdict(set)
    wrong = []
    for module, mod in tree.items():
        here = _folder(module)
        for imp in imports(mod, known):
            if imp.target not in known or imp.target == module:
                continue
            there = _folder(imp.target)
            if here is None and there is not None and module != "orchestrator.__main__":
                wrong.append(f"{module}:{imp.line}: base module imports {imp.target}")
            if here and there and here != there:
                folder_graph[here].add(there)
                if not _permits(allowed[here], imp.target):
                    wrong.append(f"{module}:{imp.line}: {here}/ imports {imp.target}, which its contract does not allow")
    if loop := cycle(folder_graph):
        wrong.append("folder loop: " + " -> ".join(loop))
    return ordered(wrong)


# -- backends --------------------------------------------------------------------------------------

def backend_imports(tree: Tree, packages: dict[str, str] | None = None) -> list[tuple[str, int, str, str]]:
    """(module, line, backend, imported module) for each import of a backend (its package or a
    submodule) by anything but the registry and the backend's own package."""
    packages = backend_packages() if packages is None else packages
    known = set(tree) | set(packages.values())
    found = set()
    for module, mod in tree.items():
        if module == REGISTRY:
            continue
        for imp in imports(mod, known):
            found |= {(module, imp.line, name, imp.target) for name, package in packages.items()
                      if _within(imp.target, package) and not _within(module, package)}
    return sorted(found)


def backend_import_violations(tree: Tree, packages: dict[str, str] | None = None) -> list[str]:
    return ordered(f"{module}:{line}: imports backend '{name}' ({target}); only {REGISTRY} may"
                   for module, line, name, target in backend_imports(tree, packages))


def runs_provider_imports(tree: Tree) -> list[str]:
    known = set(tree)
    return ordered({f"{m}:{i.line}: imports {i.target}" for m, mod in tree.items() if _within(m, "orchestrator.runs")
                   for i in imports(mod, known) if _within(i.target, PROVIDERS)})


# -- provider names --------------------------------------------------------------------------------

def _names(node: ast.AST | None, names: frozenset[str]) -> bool:
    """The node is a provider name, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in names for e in node.elts)
    return False


def provider_name_uses(tree: ast.AST, names: Iterable[str]) -> list[tuple[int, str]]:
    """(line, how) wherever a name of `names` decides something: a comparison side, a case value
    or mapping-pattern key, a dict display key or dict() keyword, a startswith/endswith argument."""
    return list(_provider_name_uses(tree, frozenset(names)))


@functools.cache
def _provider_name_uses(tree: ast.AST, names: frozenset[str]) -> tuple[tuple[int, str], ...]:
    found: set[tuple[int, str]] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(_names(side, names) for side in (n.left, *n.comparators)):
            found.add((n.lineno, "compared"))
        elif isinstance(n, ast.MatchValue) and _names(n.value, names):
            found.add((n.lineno, "case value"))
        elif isinstance(n, ast.MatchMapping) and any(_names(k, names) for k in n.keys):
            found.add((n.lineno, "case mapping key"))
        elif isinstance(n, ast.Dict) and any(_names(k, names) for k in n.keys):
            found.add((n.lineno, "dict key"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict" \
                and any(k.arg in names for k in n.keywords):
            found.add((n.lineno, "dict key"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("startswith", "endswith") and any(_names(a, names) for a in n.args):
            found.add((n.lineno, n.func.attr))
    return tuple(sorted(found))


def provider_name_violations(tree: Tree, packages: dict[str, str] | None = None) -> list[str]:
    """Provider names deciding something outside the registry (a backend may use its own)."""
    packages = backend_packages() if packages is None else packages
    wrong = []
    for module, mod in tree.items():
        if module == REGISTRY:
            continue
        others = {name for name, package in packages.items() if not _within(module, package)}
        wrong += [f"{module}:{line}: provider name {how}" for line, how in provider_name_uses(mod.tree, others)]
    return ordered(wrong)


# -- the store's privates ------------------------------------------------------------------------

def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def _names_store(annotation: ast.AST) -> bool:
    for n in ast.walk(annotation):
        if isinstance(n, ast.Name) and n.id == "Store" or isinstance(n, ast.Attribute) and n.attr == "Store":
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(r"\bStore\b", n.value):
            return True
    return False


def _makes_store(expr: ast.AST | None) -> bool:
    """Store(...), Store.open(...), open_store(...) (any module prefix)."""
    if not isinstance(expr, ast.Call):
        return False
    f = expr.func
    if isinstance(f, ast.Name):
        return f.id in ("Store", "open_store")
    if isinstance(f, ast.Attribute):
        return f.attr in ("Store", "open_store") or (f.attr == "open" and _is_store_class(f.value))
    return False


def _is_store_class(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Name) and expr.id == "Store" or isinstance(expr, ast.Attribute) and expr.attr == "Store"


def store_names(tree: ast.AST) -> set[str]:
    """The names a module binds to a Store, besides `store`/`Store`/`*_store` (module-wide, not
    per scope: an over-approximation)."""
    found = {"store", "Store"}
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) and n.annotation is not None and _names_store(n.annotation):
            found.add(n.arg)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and _names_store(n.annotation):
            found.add(n.target.id)
        elif isinstance(n, (ast.Assign, ast.NamedExpr)) and _makes_store(n.value):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.withitem) and _makes_store(n.context_expr) and isinstance(n.optional_vars, ast.Name):
            found.add(n.optional_vars.id)
    return found


def _chain(expr: ast.AST) -> Iterator[ast.AST]:
    """expr, then each object it is an attribute of (a.b.c -> a.b.c, a.b, a)."""
    yield expr
    while isinstance(expr, ast.Attribute):
        expr = expr.value
        yield expr


def _is_store(expr: ast.AST, names: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in names or expr.id.endswith("_store")
    if isinstance(expr, ast.Attribute):
        return expr.attr in ("store", "_store", "Store") or expr.attr.endswith("_store")
    return False


@functools.cache
def store_private_uses(tree: ast.AST) -> list[int]:
    """Lines reading a private attribute of the store (store._local, self.store._engine.x,
    getattr(store, "_conn"))."""
    names = store_names(tree)
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and _private(n.attr) and any(_is_store(v, names) for v in _chain(n.value)):
            found.add(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "setattr", "delattr") \
                and len(n.args) >= 2 and (attr := _literal(n.args[1])) is not None and _private(attr) \
                and any(_is_store(v, names) for v in _chain(n.args[0])):
            found.add(n.lineno)
    return sorted(found)


def store_private_violations(tree: Tree) -> list[str]:
    return ordered(f"{m}:{line}: private attribute of the store" for m, mod in tree.items() if not _within(m, STORE)
                   for line in store_private_uses(mod.tree))


# -- probes ------------------------------------------------------------------------------------------

@functools.cache
def probes(tree: ast.AST, module: str = "") -> list[int]:
    """Lines that probe an object: hasattr(...), getattr(obj, name, default), getattr(obj, "literal")."""
    allowed: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (module, fn.name) in PROBES_ALLOWED:
            allowed |= set(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    found = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        func = n.func.id if isinstance(n.func, ast.Name) else \
            n.func.attr if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
            and n.func.value.id == "builtins" else None
        if func == "hasattr" or func == "getattr" and (
                len(n.args) >= 3 or (len(n.args) >= 2 and _literal(n.args[1]) is not None)):
            found.add(n.lineno)
    return sorted(found - allowed)


def probe_violations(tree: Tree) -> list[str]:
    return ordered(f"{m}:{line}: getattr/hasattr probe" for m, mod in tree.items() if m.startswith(NO_PROBES)
                   for line in probes(mod.tree, m))


# -- the layout ----------------------------------------------------------------------------------

def test_root_holds_only_the_base_and_the_folders() -> None:
    files = {p.stem for p in PKG.glob("*.py")} - {"__init__", "__main__"}
    assert files <= BASE, f"modules outside a concern's folder: {sorted(files - BASE)}"
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(FOLDERS), folders ^ set(FOLDERS)


def test_every_package_states_its_contract() -> None:
    for init in PKG.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 8, f"{init.relative_to(PKG.parent)} needs a docstring stating its contract"
    for folder in FOLDERS:
        allowed_imports(folder)  # every top-level folder says what it may import


def test_the_rules_name_modules_that_exist() -> None:
    tree = real_tree()
    for prefix in NO_PROBES:
        assert any(_within(m, prefix) for m in tree), f"NO_PROBES names {prefix}, which is gone"
    for module, fn in PROBES_ALLOWED:
        assert module in tree and any(isinstance(n, ast.FunctionDef) and n.name == fn
                                      for n in ast.walk(tree[module].tree)), (module, fn)
    assert REGISTRY in tree and f"{STORE}.database" in tree
    for name, package in backend_packages().items():
        assert package in tree, f"backend {name}'s package {package} is not under orchestrator/"


def test_no_import_circle_between_modules() -> None:
    edges = graph(real_tree())
    assert sum(len(v) for v in edges.values()) > 100  # the walk really sees the imports
    assert cycle(edges) is None, " -> ".join(cycle(edges) or [])


def test_imports_follow_each_contract_and_floors_point_down() -> None:
    wrong = contract_violations(real_tree())
    assert not wrong, "\n".join(wrong)


# -- the seams ---------------------------------------------------------------------------------

def test_only_the_registry_imports_a_backend() -> None:
    wrong = backend_import_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def test_runs_never_imports_a_provider() -> None:
    wrong = runs_provider_imports(real_tree())
    assert not wrong, "\n".join(wrong)


def test_only_the_registry_knows_provider_names() -> None:
    wrong = provider_name_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def test_no_getattr_probes_where_providers_and_launchers_are_used() -> None:
    wrong = probe_violations(real_tree())
    assert not wrong, "ask Capabilities, or type the object:\n" + "\n".join(wrong)


def test_only_the_store_touches_its_privates() -> None:
    wrong = store_private_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def test_only_slurm_spells_slurm_commands() -> None:
    found = [f"{p.relative_to(ROOT)}:{i}" for p in PKG.rglob("*.py") if "slurm" != p.parent.name
             for i, line in enumerate(p.read_text().splitlines(), 1) if SLURM_WORDS.search(line)]
    assert not found, "Slurm command words outside orchestrator/slurm/:\n" + "\n".join(found)


def test_benchmarks_never_import_tests() -> None:
    found = []
    for path in (ROOT / "benchmarks").glob("*.py"):
        mod = Module(path.stem, "", ast.parse(path.read_text()), False)
        found += [f"{path.name}:{i.line}: {i.target}" for i in imports(mod, ()) if _within(i.target, "tests")]
    assert not found, found


# -- the checkers check: each rule, planted in one real module, is caught -------------------------

Rule = Callable[[Tree], list[str]]
RULES: dict[str, Rule] = {
    "contract": contract_violations,
    "backend import": backend_import_violations,
    "runs imports providers": runs_provider_imports,
    "provider name": provider_name_violations,
    "store private": store_private_violations,
    "probe": probe_violations,
}


def caught(rule: Rule, module: str, code: str, tree: Tree | None = None) -> list[str]:
    """What `rule` reports on the tree with `code` planted in `module` that it does not on the tree
    as it is (so a rule the current code already breaks still shows the planted line)."""
    if tree is None:
        tree = real_tree()
        before = _BASELINE.setdefault((rule, backends.names()), set(rule(tree)))
    else:
        before = set(rule(tree))
    return ordered(set(rule(planted(tree, module, code))) - before)


_BASELINE: dict[tuple[Rule, tuple[str, ...]], set[str]] = {}


PLANTED = [
    # 1. importlib / __import__ with a literal name is an import.
    pytest.param("contract", "orchestrator.report.build",
                 'import importlib\nimportlib.import_module("orchestrator.runs.execute")\n', id="1-import_module-contract"),
    pytest.param("contract", "orchestrator.hardware.catalog",
                 'def f():\n    return __import__("orchestrator.store.database")\n', id="1-__import__-contract"),
    pytest.param("backend import", "orchestrator.clusters.lifecycle",
                 'from importlib import import_module as load\nload("orchestrator.providers" + ".azure.up")\n',
                 id="1-import_module-alias-backend"),
    pytest.param("backend import", "orchestrator.cli.app",
                 '__import__("orchestrator.providers", fromlist=["local"])\n', id="1-__import__-fromlist-backend"),
    pytest.param("runs imports providers", "orchestrator.runs.execute",
                 'import importlib\nimportlib.import_module(".azure", package="orchestrator.providers")\n',
                 id="1-import_module-relative-runs"),
    # 2. one backend importing another.
    pytest.param("backend import", "orchestrator.providers.fake.provider",
                 "from orchestrator.providers.azure import plan\n", id="2-fake-imports-azure"),
    pytest.param("backend import", "orchestrator.providers.azureml.provider",
                 "def f():\n    import orchestrator.providers.azure.signin\n", id="2-azureml-imports-azure-lazily"),
    pytest.param("backend import", "orchestrator.providers.local.provider",
                 "from .. import ssh\n", id="2-local-imports-ssh-relative"),
    # 3. a backend imported from anywhere but the registry.
    pytest.param("backend import", "orchestrator.clusters.lifecycle",
                 "from orchestrator.providers.azure.provider import AzureProvider\n", id="3-lifecycle-imports-azure"),
    pytest.param("backend import", "orchestrator.providers",
                 "from orchestrator.providers import fake\n", id="3-facade-imports-fake"),
    pytest.param("backend import", "orchestrator.cli.health",
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from orchestrator.providers.ssh import settings\n",
                 id="3-cli-imports-ssh-under-TYPE_CHECKING"),
    # 4. match/case on a provider name.
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'def f(cluster):\n    match cluster.provider:\n        case "azure":\n            return 1\n',
                 id="4-match-case"),
    pytest.param("provider name", "orchestrator.runs.execute",
                 'def f(c):\n    match c:\n        case {"local": x} | Cluster(provider="ssh"):\n            return x\n',
                 id="4-match-mapping-and-class-pattern"),
    # 5. dict keys that are provider names.
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'def f(cluster):\n    return {"azure": 600, "local": 5}[cluster.provider]\n', id="5-dict-display-key"),
    pytest.param("provider name", "orchestrator.runs.monitor",
                 "WAIT = dict(azureml=600)\n", id="5-dict-keyword"),
    # 6. startswith/endswith a provider name.
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'def f(cluster):\n    return cluster.provider.startswith("azure")\n', id="6-startswith"),
    pytest.param("provider name", "orchestrator.report.build",
                 'def f(p):\n    return p.endswith(("x", "ssh"))\n', id="6-endswith-tuple"),
    # ... and the comparisons the rule always caught, now also inside a backend naming another.
    pytest.param("provider name", "orchestrator.providers.azureml.provider",
                 'def f(c):\n    return c.provider in ("azure", "other")\n', id="6-backend-compares-another"),
    # 7. any private attribute of the store, from outside store/.
    pytest.param("store private", "orchestrator.runs.execute",
                 'def f(store):\n    return store._local.conn.execute("select 1")\n', id="7-store._local"),
    pytest.param("store private", "orchestrator.pipelines.pipeline",
                 "def f(self):\n    self.store._engine.dispose()\n", id="7-self.store._engine"),
    pytest.param("store private", "orchestrator.report.build",
                 "def f(db: Store):\n    return db.engine._pool\n", id="7-annotated-name-deep-chain"),
    pytest.param("store private", "orchestrator.cli.run",
                 "def f():\n    with open_store() as s:\n        return s._conn()\n", id="7-with-open_store"),
    pytest.param("store private", "orchestrator.results.summary",
                 'def f(store):\n    return getattr(store, "_local")\n', id="7-getattr-literal-private"),
    # 8. probing with getattr/hasattr where providers and launchers are used.
    pytest.param("probe", "orchestrator.runs.monitor",
                 'def f(launcher):\n    try:\n        return getattr(launcher, "drain")\n'
                 '    except AttributeError:\n        return None\n', id="8-getattr-2-args-in-try"),
    pytest.param("probe", "orchestrator.clusters.lifecycle",
                 'def f(access):\n    return hasattr(access.launcher, "resume")\n', id="8-hasattr"),
    pytest.param("probe", "orchestrator.cli.app",
                 'def f(p, n):\n    return getattr(p, n, None)\n', id="8-getattr-3-args"),
]


@pytest.mark.parametrize(("rule", "module", "code"), PLANTED)
def test_each_rule_catches_its_planted_violation(rule: str, module: str, code: str) -> None:
    assert module in real_tree(), f"{module} is gone: plant the case elsewhere"
    first = real_tree()[module].source.rstrip("\n").count("\n") + 1
    found = caught(RULES[rule], module, code)
    assert found, f"the {rule} rule missed: {code}"
    for line in found:
        where, _, _ = line.partition(": ")
        mod, _, lineno = where.rpartition(":")
        assert mod == module and int(lineno) > first, found


ALLOWED = [
    pytest.param("backend import", REGISTRY, "import orchestrator.providers.azure\n", id="registry-imports-a-backend"),
    pytest.param("backend import", "orchestrator.providers.azure.up",
                 "from orchestrator.providers.azure import plan\nfrom orchestrator.providers.azure_shared import endpoints\n"
                 "from orchestrator.providers.base import ProviderBase\n", id="backend-imports-itself-and-shared"),
    pytest.param("backend import", "orchestrator.clusters.lifecycle",
                 'import importlib\ndef f(name):\n    return importlib.import_module(name)\n', id="non-literal-name"),
    pytest.param("provider name", REGISTRY, 'def f(n):\n    return n == "azure"\n', id="registry-names-providers"),
    pytest.param("provider name", "orchestrator.providers.azure.plan",
                 'def f(c):\n    match c.provider:\n        case "azure":\n            return {"azure": 1}\n',
                 id="backend-names-itself"),
    pytest.param("provider name", "orchestrator.cli.app",
                 'HELP = "azure"\ndef f(provider: str = "local"):\n    return dict(provider="fake", x=["ssh"])\n',
                 id="plain-values"),
    pytest.param("store private", "orchestrator.store.database", "def f(store):\n    return store._local\n",
                 id="store-touches-its-own"),
    pytest.param("store private", "orchestrator.runs.execute",
                 "def f(self, tokens):\n    return self._store, tokens._x, store.__class__\n", id="not-the-store"),
    pytest.param("probe", "orchestrator.runs.execute", "def f(m, n):\n    return getattr(m, n)\n",
                 id="getattr-dynamic-name"),
    pytest.param("probe", "orchestrator.hardware.catalog", 'def f(m):\n    return hasattr(m, "x")\n',
                 id="probe-outside-NO_PROBES"),
]


@pytest.mark.parametrize(("rule", "module", "code"), ALLOWED)
def test_each_rule_lets_pass_what_it_allows(rule: str, module: str, code: str) -> None:
    assert caught(RULES[rule], module, code) == []


def test_the_loop_check_counts_a_package_importing_its_own_submodule(tmp_path: Path) -> None:
    pkg = tmp_path / "orchestrator"
    (pkg / "things").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""root"""\n')
    (pkg / "things" / "__init__.py").write_text('"""things"""\nfrom orchestrator.things import part\n')
    (pkg / "things" / "part.py").write_text('"""part"""\nfrom orchestrator.things import helper\n')
    (pkg / "things" / "other.py").write_text('"""other"""\nimport orchestrator.things.part\n')
    edges = graph(load_tree(pkg))
    assert edges["orchestrator.things"] == {"orchestrator.things.part"}
    assert cycle(edges) == ["orchestrator.things", "orchestrator.things.part", "orchestrator.things"]
    # A sibling import is no edge to the package: from-importing a submodule is fine.
    (pkg / "things" / "other.py").write_text('"""other"""\n')
    (pkg / "things" / "part.py").write_text('"""part"""\nfrom orchestrator.things import other\n')
    assert cycle(graph(load_tree(pkg))) is None


@pytest.mark.parametrize("loop", [{"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"x": {"x"}}])
def test_the_cycle_finder_finds_loops(loop: dict[str, set[str]]) -> None:
    assert cycle(loop) is not None
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_reader_sees_every_form() -> None:
    code = textwrap.dedent('''
        import importlib, importlib as il
        from importlib import import_module as load
        from . import sibling
        from ..store import database
        il.import_module("orchestrator.a")
        load(f"orchestrator.{'b'}")
        importlib.import_module("..c", "orchestrator.x.y")
        __import__("orchestrator.d", None, None, ["e"])
        importlib.import_module(name)
    ''')
    mod = Module("orchestrator.runs.execute", code, ast.parse(code), False)
    known = {"orchestrator.runs.sibling", "orchestrator.store.database", "orchestrator.d.e"}
    assert [i.target for i in imports(mod, known) if i.target.startswith("orchestrator")] == [
        "orchestrator.runs.sibling", "orchestrator.store.database", "orchestrator.a", "orchestrator.b",
        "orchestrator.x.c", "orchestrator.d", "orchestrator.d.e"]


def test_slurm_words_and_contract_entries() -> None:
    assert SLURM_WORDS.search('run(f"sbatch --parsable {x}")') and not SLURM_WORDS.search("slurm/batch.py")
    assert _permits(["hardware.catalog"], "orchestrator.hardware.catalog")
    assert not _permits(["hardware.catalog"], "orchestrator.hardware.layout")
    assert _permits(["providers"], "orchestrator.providers.azure.up")
