"""The package layout is the architecture: one folder per concern, dependencies one way, seams kept.

What the import graph says is `lint-imports`' (pyproject.toml [tool.importlinter], run by CI and
proven here on a planted copy): the floors of docs/architecture.md, backends only through the
registry, runs/ and pipelines/ never importing providers/. What the types say is mypy's. This
file keeps what neither can say, as rules about meaning: each expression is resolved to what it
stands for (`aliases`/`qualify`: `il.import_module`, a `load` bound by `from importlib import
import_module as load`, `getattr(builtins, "__im" + "port__")` are one thing) and each string
is folded from its parts (`fold`: "s" + "batch", f-strings, `"".join([...])`, `%` and
`.format`, `.lower()`, `[::-1]`, a constant, an Enum member, a class attribute).

Every rule reads the syntax tree (ast) of each module under orchestrator/ and returns its
violations as `module:line: what`; each whole-tree test asserts there are none. Each rule is
proven by planted tests (PLANTED): the violation is appended to one real module (or written as a
new module of a real package), in memory (the real tree with one mutation; two for a case that
needs a second module), and the rule must report something new at that module, below its
original last line; ALLOWED holds what each rule must let pass (the registry and a backend's own
package, plain values, dynamic names).
tests/test_toy_backend.py registers a test-only backend and shows the rules counting it.

What counts as an import: `import x`, `from x import y` (`from pkg import mod` counts as
pkg.mod), a call of `importlib.import_module`/`__import__` (under any alias) with a literal
name (relative names resolved, `fromlist` counted as from-imports), and `sys.modules["x"]` (or
`.get("x")`, under any alias) with a literal name; module level, inside functions and under
TYPE_CHECKING alike: a lazy import is still a dependency.

The rules:
- Layout: the root holds only the base modules and the concern folders; every package has a
  docstring stating its contract, and every top-level folder a "May import:" line.
- No import loop between modules, counting a package's imports of its own submodules (an
  `__init__` importing a submodule that imports the package back is a loop); no loop between folders.
- Contracts: what a folder imports is allowed by the "May import:" line of its `__init__`
  docstring (`folder/`: a whole folder, `folder.module`: that module only; "never x/" anywhere,
  inside a parenthesis too, up to the next , ; or ), is an exception, not an allowance); base
  modules import no folder. (The floors are lint-imports' layers too; these lines are finer.)
- Backends: a backend is a package the registry (orchestrator/backends.py) lists; names and
  packages are read from the registry at test time, so a backend a test registers counts. No
  module imports a backend (its package or any submodule) but the registry and the backend's
  own package; so no backend imports another. providers/base.py and providers/azure_shared/ are
  not backends.
- Dynamic imports: only the registry loads a module by a name or path known at run time
  (DYNAMIC: importlib.import_module, __import__, pkgutil.resolve_name, importlib.util's
  spec/module builders, runpy, sys.modules, exec/eval/compile), however the loader is reached;
  results/checker.py's patch of the third-party MLPerf checker is the one exception.
- Reflection: outside the homes of providers, launchers, runners and the store (SEAM_HOMES), no
  getattr/hasattr/setattr/delattr/vars/dir/type of one, no `object.__getattribute__(it, ...)`,
  no inspect.* or `operator.attrgetter(...)(it)`, no dunder read on it or its type. "One" is a
  name annotated with a seam type, bound from a maker (`get_provider`, `.connect`, `Store.open`,
  `open_store`), or named like one (`provider`, `self._launcher`, `azure_store`).
- GPU and VM-size names (the catalog's words, tests/test_catalog.forbidden_words): nowhere
  outside hardware/ and the backends, plain or assembled; cli/ may show an alias as a plain
  literal in a help text, never build or compare one.
- Provider names: only the registry uses a provider's name to decide something, and a backend's
  package may use its own name. Elsewhere a string that folds to a registered provider name, in
  any case (an Enum member, `.value` of one, a class attribute, parts joined, a frozenset
  constant, one picked out of `backends.names()`), may not
  be a side of a comparison (`==`, `!=`, `in`, `not in`, `is`, a tuple/list/set of names
  included), a `case` value or mapping-pattern key, a key of a dict display or a `dict(name=...)`
  keyword, a subscript key or `.get`/`.pop` argument, an `operator.eq`/getattr argument, or an
  argument of `.startswith`/`.endswith`; a name bound to one counts as the name
  (`AZ = "azure"` then `provider == AZ`; a constant imported from a module of the tree, or read
  as `module.AZ`). As a plain value (a default, help text, `Literal[...]`, `provider="fake"`) it
  is allowed.
- No class is told apart by its name (`type(p).__name__ == "AzureProvider"`, a `match` on
  `p.__class__.__name__`) outside the registry; the CLI's usage-error handler is the exception.
- The store's privates: outside orchestrator/store/, no attribute starting with one underscore
  (dunders aside) is read from the store, nor through getattr/setattr/delattr with a literal
  name. "The store" on the syntax tree: an attribute chain rooted at a name `store`, `Store` or
  `*_store`, at an attribute `.store`/`._store`/`.*_store`, or at a name the module binds to a
  Store (a parameter or variable annotated `Store`, a name assigned or `with`-bound from
  `Store(...)`, `Store.open(...)` or `open_store(...)`); any private link after it is a violation,
  and so is reading its attributes by name (`vars(store)`, `store.__dict__`).
- No probing where providers and launchers are used (NO_PROBES: every module of those folders,
  a new one included): no `hasattr`, no
  3-argument `getattr`, and no `getattr` with a literal attribute name at all (ask Capabilities,
  or type the object). The CLI's usage-error handler is the one allowed exception.
- The SDK edge: only the Azure backends' records and client modules (SDK_EDGE) call the SDK's
  operation groups (`compute.virtual_machines.get(...)`, `clients.resources.resource_groups`,
  `ml.jobs.get(...)`: the groups and their methods are read from the installed SDKs) or take a
  management client from the clients (`clients.compute`); in the Azure backends and any module
  importing azure.*, no attribute only the SDK's models have is read (`vm.os_profile`). A group
  azbench also uses as a name of its own (`tags`, `compute`, `resources`) counts when reached
  through a client or called with a method only the SDK has; `ml.compute.get(...)` is not told
  apart from a record's `.compute` and a dict's `.get`.
- Only slurm/ spells Slurm's command words (folded from parts too; naming slurm's own constant,
  `commands.NODE_LIST`, is using it), in any case (`#SBATCH`), in the source (escapes read
  as spaces, so `"...\\nsrun"` counts) and in every string as Python decodes it;
  benchmarks/ never import tests/.
"""

from __future__ import annotations

import ast
import builtins
import functools
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from orchestrator import backends

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "orchestrator"
BASE = {"models", "errors", "paths", "yamlio", "seams", "templating", "backends", "formats", "safetext"}
FOLDERS = ("store", "slurm", "hardware", "hosts", "specs", "providers", "clusters", "results", "recipes", "goodput", "fabric",
           "report", "forecast", "explain",
           "runs", "pipelines", "cli")
REGISTRY = "orchestrator.backends"  # the one module that names backends and imports them
PROVIDERS = "orchestrator.providers"
STORE = "orchestrator.store"
# Slurm's command words, any case (`#SBATCH`), not inside a path or a longer name.
SLURM_WORDS = re.compile(r"(?<![\w./-])(sbatch|srun|salloc|squeue|sinfo|scontrol|scancel|sacct)(?![\w.-])", re.I)
# A backslash escape in source text (`\n`, `\x0a`, `\u000a`, `\N{...}`, octal): read as a space.
ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|.)")
# The folders that talk to providers, launchers and their Access: no duck-typed probing there,
# in any module, a new one included.
NO_PROBES = ("runs", "pipelines", "cli", "clusters")
# The CLI's error handler reads typer's usage exceptions (its vendored click classes are private),
# by attribute and by class name.
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


def _sys_modules_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to the sys module, names bound to sys.modules itself: `from sys import modules`)."""
    systems, registries = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            systems |= {a.asname or a.name for a in n.names if a.name == "sys"}
        elif isinstance(n, ast.ImportFrom) and n.module == "sys":
            registries |= {a.asname or a.name for a in n.names if a.name == "modules"}
    return systems, registries


def _sys_modules_key(node: ast.AST, names: tuple[set[str], set[str]]) -> str | None:
    """The literal module name of `sys.modules["x"]` or `sys.modules.get("x")` (pop, setdefault,
    __getitem__ alike): a module reached that way is imported."""
    def is_registry(e: ast.AST) -> bool:
        return isinstance(e, ast.Name) and e.id in names[1] or isinstance(e, ast.Attribute) and \
            e.attr == "modules" and isinstance(e.value, ast.Name) and e.value.id in names[0]
    if isinstance(node, ast.Subscript) and is_registry(node.value):
        return _literal(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
            node.func.attr in ("get", "pop", "setdefault", "__getitem__") and is_registry(node.func.value):
        return _literal(node.args[0])
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
    registries = _sys_modules_names(mod.tree)
    found: list[Import] = []
    for node in ast.walk(mod.tree):
        if (name := _sys_modules_key(node, registries)) is not None:
            found.append(Import(name, getattr(node, "lineno", 0)))
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
    # A stated exception is not an allowance: "never x/" anywhere (inside a parenthesis too, as
    # in runs/'s "(lifecycle for `connect`; never providers/)") up to the next , ; or ).
    text = re.sub(r"\bnever\b[^),;]*", "", match.group(1))
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


# -- provider names --------------------------------------------------------------------------------

Constants = frozenset[tuple[str, frozenset[str]]]  # a name (`AZ`, `names.AZ`) -> the strings it may hold


def _strings(node: ast.AST | None) -> frozenset[str]:
    """The strings a literal spells: "a", "a" + "b", ("a", "b"), ["a"], {"a"}."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return frozenset(s for e in node.elts if (s := _literal(e)) is not None)
    value = _literal(node)
    return frozenset({value}) if value is not None else frozenset()


@functools.cache
def _own_constants(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Names the module binds to string literals anywhere (`AZ = "azure"`, `NAMES: tuple[str, ...]
    = ("azure", "local")`; a name bound twice may hold either)."""
    found: dict[str, frozenset[str]] = defaultdict(frozenset)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name) and (values := _strings(n.value)):
                    found[t.id] |= values
    return dict(found)


@functools.cache
def _import_nodes(tree: ast.Module) -> tuple[ast.Import | ast.ImportFrom, ...]:
    return tuple(n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def constants(tree: Tree, module: str, skip: str = "") -> Constants:
    """What each name of `module` may hold, resolved: its own literal bindings, a constant it
    imports from a module of the tree (`from x import AZ as A`), and `alias.AZ` for a module of
    the tree it imports (`import orchestrator.x as alias`, `from orchestrator import x`)."""
    mod = tree[module]
    found = dict(_own_constants(mod.tree))

    def theirs_ok(source: str) -> bool:
        return bool(skip) and _within(source, skip)
    package = module if mod.package else module.rpartition(".")[0]
    for n in _import_nodes(mod.tree):
        if isinstance(n, ast.ImportFrom):
            source = _resolve(n.module or "", package, n.level) if n.level else n.module or ""
            for a in n.names:
                if theirs_ok(source) or theirs_ok(f"{source}.{a.name}"):
                    continue
                if f"{source}.{a.name}" in tree:  # a module: its constants as alias.NAME
                    found |= {f"{a.asname or a.name}.{k}": v for k, v in _own_constants(tree[f"{source}.{a.name}"].tree).items()}
                elif source in tree and a.name in (theirs := _own_constants(tree[source].tree)):
                    found[a.asname or a.name] = theirs[a.name]
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name in tree and not theirs_ok(a.name):
                    found |= {f"{a.asname or a.name}.{k}": v for k, v in _own_constants(tree[a.name].tree).items()}
    return frozenset(found.items())


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _names(node: ast.AST | None, names: frozenset[str], consts: dict[str, frozenset[str]]) -> bool:
    """The node spells a provider name in any case (folded: a literal, parts joined, a name, an
    Enum member or class attribute bound to one, `.lower()` of one), is a tuple/list/set (or
    frozenset(...)) holding one, or picks one out of the registry's list (`backends.names()[0]`)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names(e, names, consts) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple", "list") \
            and len(node.args) == 1:
        return _names(node.args[0], names, consts)
    if isinstance(node, ast.Starred):
        return _names(node.value, names, consts)
    # One name picked out of the registry's list (`backends.names()[0]`) is a name; the whole
    # list (`p in backends.names()`: is it registered?) is not.
    root: ast.AST | None = node if isinstance(node, ast.Subscript) else None
    while isinstance(root, (ast.Subscript, ast.Call, ast.Attribute)):
        if isinstance(root, ast.Attribute) and root.attr in ("names", "packages", "_REGISTRY", "_BUILT_IN") \
                and _dotted(root.value) in ("backends", "orchestrator.backends"):
            return True
        root = root.value if isinstance(root, (ast.Subscript, ast.Attribute)) else root.func
    return bool({s.lower() for s in fold(node, consts)} & names)


def provider_name_uses(tree: ast.AST, names: Iterable[str], consts: Constants = frozenset()) -> list[tuple[int, str]]:
    """(line, how) wherever a name of `names` decides something: a comparison side, a case value
    or mapping-pattern key, a dict display key or dict() keyword, a startswith/endswith argument;
    a name bound to one (`AZ = "azure"`, then `provider == AZ`) counts as the name."""
    return list(_provider_name_uses(tree, frozenset(names), consts))


@functools.cache
def _provider_name_uses(tree: ast.AST, names: frozenset[str], consts: Constants) -> tuple[tuple[int, str], ...]:
    found: set[tuple[int, str]] = set()
    bound = dict(consts)
    if isinstance(tree, ast.Module):
        bound |= _bound_strings(tree)
    table = aliases(tree) if isinstance(tree, ast.Module) else {}

    def named(node: ast.AST | None) -> bool:
        return _names(node, names, bound)
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and named(n.slice):
            found.add((n.lineno, "subscript key"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "get", "pop", "setdefault", "__getitem__", "__contains__", "__eq__", "__ne__", "count", "index",
                "removeprefix", "removesuffix") and any(named(a) for a in n.args):
            found.add((n.lineno, f"looked up or compared (.{n.func.attr})"))
        elif isinstance(n, ast.Call) and (qualify(n.func, table) or "").startswith(("operator.", "builtins.getattr",
                                                                                    "builtins.hasattr")) \
                and any(named(a) for a in n.args):
            found.add((n.lineno, "compared or looked up (" + (qualify(n.func, table) or "") + ")"))
        if isinstance(n, ast.Compare) and any(named(side) for side in (n.left, *n.comparators)):
            found.add((n.lineno, "compared"))
        elif isinstance(n, ast.MatchValue) and named(n.value):
            found.add((n.lineno, "case value"))
        elif isinstance(n, ast.MatchMapping) and any(named(k) for k in n.keys):
            found.add((n.lineno, "case mapping key"))
        elif isinstance(n, ast.Dict) and any(named(k) for k in n.keys):
            found.add((n.lineno, "dict key"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict" \
                and any(k.arg in names for k in n.keywords):
            found.add((n.lineno, "dict key"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("startswith", "endswith") and any(named(a) for a in n.args):
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
        wrong += [f"{module}:{line}: provider name {how}"
                  for line, how in provider_name_uses(mod.tree, others, constants(tree, module))]
    return ordered(wrong)


# -- classes told apart by name ------------------------------------------------------------------

def _type_name(node: ast.AST) -> bool:
    """`type(x).__name__`, `x.__class__.__name__` (or `__qualname__`)."""
    if not (isinstance(node, ast.Attribute) and node.attr in ("__name__", "__qualname__")):
        return False
    owner = node.value
    return isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "type" or \
        isinstance(owner, ast.Attribute) and owner.attr == "__class__"


def _allowed_lines(tree: ast.AST, module: str) -> set[int]:
    """The lines of the functions PROBES_ALLOWED names in `module`."""
    lines: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (module, fn.name) in PROBES_ALLOWED:
            lines |= set(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    return lines


@functools.cache
def type_name_uses(tree: ast.AST, module: str = "") -> list[int]:
    """Lines that tell a class by its name: a comparison or `match` on `type(x).__name__`."""
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(_type_name(side) for side in (n.left, *n.comparators)) or \
                isinstance(n, ast.Match) and _type_name(n.subject):
            found.add(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _type_name(n.func.value) \
                and n.func.attr in ("startswith", "endswith"):
            found.add(n.lineno)
    return sorted(found - _allowed_lines(tree, module))


def type_name_violations(tree: Tree) -> list[str]:
    """Classes told apart by name (`type(p).__name__ == "AzureProvider"`) outside the registry:
    ask Capabilities, or type the object."""
    return ordered(f"{m}:{line}: class compared by name" for m, mod in tree.items() if m != REGISTRY
                   for line in type_name_uses(mod.tree, m))


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
    getattr(store, "_conn")) or its attributes by name (vars(store), store.__dict__)."""
    names = store_names(tree)
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and (_private(n.attr) or n.attr == "__dict__") \
                and any(_is_store(v, names) for v in _chain(n.value)):
            found.add(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars" and n.args \
                and any(_is_store(v, names) for v in _chain(n.args[0])):
            found.add(n.lineno)  # vars(store)["_engine"]: the store's attributes by name
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "setattr", "delattr") \
                and len(n.args) >= 2 and (attr := _literal(n.args[1])) is not None \
                and (_private(attr) or attr == "__dict__") \
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
    allowed = _allowed_lines(tree, module)
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
    return ordered(f"{m}:{line}: getattr/hasattr probe" for m, mod in tree.items() if _folder(m) in NO_PROBES
                   for line in probes(mod.tree, m))


# -- Slurm's words -------------------------------------------------------------------------------

@functools.cache
def slurm_word_uses(mod: Module) -> list[int]:
    """Lines spelling a Slurm command word, in any case: in the source (comments and names too),
    each backslash escape read as a space (`"...\\nsrun ..."`), and in each string as Python
    reads it (escapes decoded, so `"#!/bin/bash\\n#SBATCH"` is two lines)."""
    found = {i for i, line in enumerate(mod.source.splitlines(), 1) if SLURM_WORDS.search(ESCAPE.sub(" ", line))}
    found |= {n.lineno for n in ast.walk(mod.tree)
              if isinstance(n, ast.Constant) and isinstance(n.value, str) and SLURM_WORDS.search(n.value)}
    return sorted(found)


def slurm_word_violations(tree: Tree) -> list[str]:
    return ordered(f"{m}:{line}: Slurm command word outside slurm/" for m, mod in tree.items()
                   if not _within(m, "orchestrator.slurm") for line in slurm_word_uses(mod))


# -- what a name stands for: the symbols of one module ---------------------------------------------
#
# The rules below ask what an expression *is*, not how it is spelled: `il.import_module`,
# `load` (bound by `from importlib import import_module as load`), `getattr(importlib,
# "import_" + "module")` and `vars(builtins)["__import__"]` all resolve to one qualified name.
# Strings are folded the same way: "s" + "batch", f"{'s'}batch", "".join(["s", "batch"]),
# a constant bound to a part, an Enum member or a class attribute, `.lower()` of one.

_BUILTINS = frozenset(dir(builtins))
_CASE = ("lower", "upper", "casefold", "strip", "lstrip", "rstrip", "title", "capitalize")
_FOLD_CAP = 64  # at most this many spellings per expression (a product of alternatives)


@functools.cache
def aliases(tree: ast.Module, package: str = "") -> dict[str, str]:
    """name -> the qualified name it stands for, module-wide (every scope: an over-approximation):
    `import a.b as x` (x -> a.b), `import a.b` (a -> a), `from a import b as c` (c -> a.b),
    relative imports resolved against `package`, and `y = <a resolvable name>` (y -> what it is)."""
    table: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                table[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
        elif isinstance(n, ast.ImportFrom):
            source = _resolve(n.module or "", package, n.level) if n.level else n.module or ""
            for a in n.names:
                if a.name != "*":
                    table[a.asname or a.name] = f"{source}.{a.name}"
    for _ in range(3):  # y = x; z = y: a few rounds reach a fixed point in practice
        for n in ast.walk(tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if (q := qualify(n.value, table)) is not None:
                    table |= {t.id: q for t in targets if isinstance(t, ast.Name) and t.id not in table}
    return table


def qualify(node: ast.AST, table: dict[str, str]) -> str | None:
    """The qualified name an expression stands for (`importlib.import_module`,
    `builtins.__import__`), through aliases, attribute chains, getattr with a foldable name,
    `vars(m)[...]`/`m.__dict__[...]`/`__builtins__[...]` and `operator.attrgetter(...)`; else None."""
    if isinstance(node, ast.Name):
        if node.id in table:
            return table[node.id]
        if node.id == "__builtins__":
            return "builtins"
        return f"builtins.{node.id}" if node.id in _BUILTINS else None
    if isinstance(node, ast.Attribute):
        base = qualify(node.value, table)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Call) and qualify(node.func, table) == "builtins.getattr" and len(node.args) >= 2:
        base, names = qualify(node.args[0], table), fold(node.args[1], {})
        return f"{base}.{next(iter(names))}" if base and len(names) == 1 else None
    if isinstance(node, ast.Subscript):
        names = fold(node.slice, {})
        holder = node.value
        if isinstance(holder, ast.Attribute) and holder.attr == "__dict__":
            holder = holder.value
        elif isinstance(holder, ast.Call) and qualify(holder.func, table) == "builtins.vars" and holder.args:
            holder = holder.args[0]
        base = qualify(holder, table)
        return f"{base}.{next(iter(names))}" if base and len(names) == 1 else None
    return None


def _cap(values: Iterable[str]) -> frozenset[str]:
    out = frozenset(values)
    return out if len(out) <= _FOLD_CAP else frozenset()


def fold(node: ast.AST | None, consts: dict[str, frozenset[str]]) -> frozenset[str]:
    """Every string `node` may spell from constants: literals, `+` and f-strings of foldable
    parts, `sep.join([...])`, `"%s%s" % (...)`, `"{}{}".format(...)`, `.lower()` and friends,
    `str(...)`, a name or `Enum.MEMBER`/`Class.ATTR`/`module.NAME` bound to a literal (through
    `consts`), `Member.value`. Nothing it cannot know (a parameter, a call) is guessed."""
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant):
        return frozenset({node.value}) if isinstance(node.value, str) else frozenset()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left, consts), fold(node.right, consts)
        return _cap(a + b for a in left for b in right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        parts = [fold(a, consts) for a in args]
        if all(len(p) == 1 for p in parts):
            try:
                return frozenset({node.left.value % tuple(next(iter(p)) for p in parts)})
            except (TypeError, ValueError):
                return frozenset()
        return frozenset()
    if isinstance(node, ast.JoinedStr):
        out = frozenset({""})
        for v in node.values:
            part = fold(v.value if isinstance(v, ast.FormattedValue) and v.format_spec is None else v, consts)
            if not part:
                return frozenset()
            out = _cap(a + b for a in out for b in part)
        return out
    if isinstance(node, (ast.Name, ast.Attribute)):
        dotted = _dotted(node)
        if dotted is not None and dotted in consts:
            return consts[dotted]
        if isinstance(node, ast.Attribute) and node.attr in ("value", "name"):
            return fold(node.value, consts)  # Provider.AZURE.value is what Provider.AZURE holds
        return frozenset()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver = node.func.attr, node.func.value
        if method in _CASE and not node.args:
            return _cap(getattr(s, method)() for s in fold(receiver, consts))
        if method == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
            out = frozenset({""})
            seps = fold(receiver, consts)
            for i, e in enumerate(node.args[0].elts):
                part = fold(e, consts)
                if not part or len(seps) != 1:
                    return frozenset()
                out = _cap(a + (next(iter(seps)) if i else "") + b for a in out for b in part)
            return out
        if method == "format" and not node.keywords:
            template, parts = fold(receiver, consts), [fold(a, consts) for a in node.args]
            if len(template) == 1 and all(len(p) == 1 for p in parts):
                try:
                    return frozenset({next(iter(template)).format(*(next(iter(p)) for p in parts))})
                except (IndexError, KeyError, ValueError):
                    return frozenset()
        return frozenset()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
        return fold(node.args[0], consts)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):  # "hctabs"[::-1], "xsbatch"[1:]
        bounds: list[int | None] = []
        for b in (node.slice.lower, node.slice.upper, node.slice.step):
            if b is None:
                bounds.append(None)
            elif isinstance(b, ast.Constant) and isinstance(b.value, int):
                bounds.append(b.value)
            elif isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.USub) and isinstance(b.operand, ast.Constant) \
                    and isinstance(b.operand.value, int):
                bounds.append(-b.operand.value)
            else:
                return frozenset()
        return _cap(t[slice(*bounds)] for t in fold(node.value, consts))
    return frozenset()


@functools.cache
def _bound_strings(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Names a module binds to strings it can fold, class attributes as `Class.NAME` too (an Enum's
    members: `class P(Enum): AZ = "azure"` gives P.AZ), and the functional Enum API's members
    (`P = Enum("P", {"AZ": "azure"})` or `Enum("P", ["azure"])`). Two rounds, so a name bound to
    a fold of other names (`B = A + "x"`) resolves."""
    found: dict[str, frozenset[str]] = defaultdict(frozenset)

    def bind(target: ast.AST, value: ast.AST | None, prefix: str = "") -> None:
        if isinstance(target, ast.Name) and value is not None:
            if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                strings = frozenset(s for e in value.elts for s in fold(e, found))
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id in ("frozenset", "set", "tuple", "list") and len(value.args) == 1:
                inner = value.args[0]
                strings = frozenset(s for e in getattr(inner, "elts", []) for s in fold(e, found))
            else:
                strings = fold(value, found)
            if strings:
                found[prefix + target.id] |= strings
            if isinstance(value, ast.Call) and value.args and _dotted(value.func) in (
                    "Enum", "StrEnum", "enum.Enum", "enum.StrEnum"):
                members = value.args[1] if len(value.args) > 1 else None
                if isinstance(members, ast.Dict):
                    for k, v in zip(members.keys, members.values):
                        if (key := fold(k, found)) and (held := fold(v, found)):
                            found[f"{target.id}.{next(iter(key))}"] |= held
                elif isinstance(members, (ast.List, ast.Tuple)):
                    for e in members.elts:
                        for s in fold(e, found):
                            found[f"{target.id}.{s}"] |= {s}
                elif (spelled := fold(members, found)):
                    for s in next(iter(spelled)).replace(",", " ").split():
                        found[f"{target.id}.{s}"] |= {s}
    for _ in range(2):
        for n in ast.walk(tree):
            if isinstance(n, ast.ClassDef):
                for stmt in n.body:
                    if isinstance(stmt, ast.Assign):
                        for t in stmt.targets:
                            bind(t, stmt.value, n.name + ".")
                    elif isinstance(stmt, ast.AnnAssign):
                        bind(stmt.target, stmt.value, n.name + ".")
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    bind(t, n.value)
    return dict(found)


def _docstring_ids(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _function_lines(tree: ast.AST, allowed: Iterable[str]) -> set[int]:
    names = set(allowed)
    lines: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in names:
            lines |= set(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    return lines


def _package_of(mod: Module) -> str:
    return mod.name if mod.package else mod.name.rpartition(".")[0]


# -- dynamic imports: only the registry loads modules by name -------------------------------------

# What loads a module (or runs code) by a name or a path known only at run time. import-linter
# sees `import importlib`; this sees the call, whatever it is called locally (`__import__` is a
# builtin: no import to see).
DYNAMIC = frozenset({
    "builtins.__import__", "importlib.__import__", "importlib.import_module", "importlib.reload",
    "importlib.util.spec_from_file_location", "importlib.util.spec_from_loader",
    "importlib.util.module_from_spec", "importlib.util.LazyLoader",
    "importlib.machinery.SourceFileLoader", "importlib.machinery.SourcelessFileLoader",
    "importlib.machinery.ExtensionFileLoader", "importlib.machinery.PathFinder",
    "pkgutil.resolve_name", "pkgutil.get_loader", "pkgutil.find_loader", "pkgutil.iter_modules",
    "pkgutil.walk_packages", "pkgutil.get_importer",
    "runpy.run_module", "runpy.run_path", "zipimport.zipimporter", "imp.load_module", "imp.load_source",
    "sys.modules", "sys.meta_path", "sys.path_hooks",
    "builtins.exec", "builtins.eval", "builtins.compile",
})
# Outside the registry, the one exception: results/checker.py patches and runs the installed
# third-party MLPerf checker's own code (its per-ruleset parser module, its eval/exec of rules);
# no module of ours is loaded there.
DYNAMIC_ALLOWED = {"orchestrator.results.checker": ("_patch", "_eval", "_exec", "_compiled")}


@functools.cache
def dynamic_import_uses(mod: Module) -> list[tuple[int, str]]:
    """(line, what) of every import of, and every reference to, a loader in DYNAMIC."""
    table = aliases(mod.tree, _package_of(mod))
    found: set[tuple[int, str]] = set()
    for n in ast.walk(mod.tree):
        if isinstance(n, ast.ImportFrom) and not n.level:
            found |= {(n.lineno, f"{n.module}.{a.name}") for a in n.names if f"{n.module}.{a.name}" in DYNAMIC}
        elif isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            q = qualify(n, table)
            if q is not None and (q in DYNAMIC or any(q.startswith(d + ".") for d in DYNAMIC)):
                found.add((n.lineno, q))
    allowed = _function_lines(mod.tree, DYNAMIC_ALLOWED.get(mod.name, ()))
    return sorted((line, what) for line, what in found if line not in allowed)


def dynamic_import_violations(tree: Tree) -> list[str]:
    return ordered(f"{m}:{line}: loads a module by name ({what}); only {REGISTRY} may"
                   for m, mod in tree.items() if m != REGISTRY for line, what in dynamic_import_uses(mod))


# -- reflection on the seams' objects ---------------------------------------------------------------

# The objects behind the seams: a provider, its launcher, an Access, a runner, the store. Above
# their homes they are used through their types, never taken apart by reflection.
SEAM_TYPES = frozenset({"Provider", "ProviderBase", "ProviderParts", "Launcher", "SlurmLauncher", "Access",
                        "Runner", "Store", "Capabilities", "Backend"})
SEAM_WORDS = ("provider", "prov", "launcher", "access", "runner", "store", "backend", "shell")
SEAM_MAKERS = frozenset({"get_provider", "connect", "open_store", "open", "Store", "make", "load", "make_provider"})
# Where the objects live: each may look at itself.
SEAM_HOMES = ("orchestrator.providers", "orchestrator.store", "orchestrator.hosts", "orchestrator.slurm",
              "orchestrator.seams", "orchestrator.backends")
REFLECTORS = frozenset({"builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr",
                        "builtins.vars", "builtins.dir", "builtins.type"})


def _seam_word(name: str) -> bool:
    name = name.lstrip("_").lower()
    return name in SEAM_WORDS or name.endswith(tuple("_" + w for w in SEAM_WORDS))


def _annotated_seam(annotation: ast.AST | None) -> bool:
    for n in ast.walk(annotation) if annotation is not None else ():
        if isinstance(n, ast.Name) and n.id in SEAM_TYPES or isinstance(n, ast.Attribute) and n.attr in SEAM_TYPES:
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and set(re.findall(r"\w+", n.value)) & SEAM_TYPES:
            return True
    return False


@functools.cache
def seam_names(tree: ast.Module) -> frozenset[str]:
    """Names that hold a seam object: named so (`provider`, `self._launcher`'s `_launcher`,
    `azure_provider`), annotated with a seam type, bound from a maker (`get_provider(...)`,
    `provider.connect(...)`, `Store.open(...)`, `with open_store() as db`), or from another."""
    found: set[str] = set()
    for _ in range(2):
        for n in ast.walk(tree):
            if isinstance(n, ast.arg) and (_annotated_seam(n.annotation) or _seam_word(n.arg)):
                found.add(n.arg)
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and _annotated_seam(n.annotation):
                found.add(n.target.id)
            elif isinstance(n, (ast.Assign, ast.NamedExpr)) and is_seam(n.value, frozenset(found)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(n, ast.withitem) and isinstance(n.optional_vars, ast.Name) \
                    and is_seam(n.context_expr, frozenset(found)):
                found.add(n.optional_vars.id)
            elif isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) \
                    and is_seam(n.iter, frozenset(found)):
                found.add(n.target.id)
    return frozenset(found)


def is_seam(expr: ast.AST | None, names: frozenset[str]) -> bool:
    """`expr` is a seam object: a seam name, an attribute named like one (`self.provider`,
    `access.launcher`), a maker's result, or an element of a container of them."""
    if isinstance(expr, ast.Name):
        return expr.id in names or _seam_word(expr.id)
    if isinstance(expr, ast.Attribute):
        return _seam_word(expr.attr) or expr.attr in SEAM_TYPES
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in SEAM_MAKERS and (name not in ("open", "load", "make", "connect")
                                        or isinstance(func, ast.Attribute) and is_seam(func.value, names)
                                        or isinstance(func, ast.Attribute) and _dotted(func.value) in ("Store", "backends"))
    if isinstance(expr, (ast.Subscript, ast.Starred)):
        return is_seam(expr.value, names)
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return any(is_seam(e, names) for e in expr.elts)
    return False


@functools.cache
def reflection_uses(mod: Module) -> list[tuple[int, str]]:
    """(line, how) wherever a seam object is taken apart: getattr/hasattr/setattr/delattr/vars/
    dir/type of it, `object.__getattribute__(it, ...)` (any `builtins.object`/`type` method),
    inspect.* of it, `operator.attrgetter(...)(it)`, or a dunder read on it or on its type
    (`p.__dict__`, `p.__module__`, `type(p).__name__`, `p.__class__.__qualname__`)."""
    table = aliases(mod.tree, _package_of(mod))
    names = seam_names(mod.tree)
    found: set[tuple[int, str]] = set()

    def seam_or_its_type(e: ast.AST) -> bool:
        if isinstance(e, ast.Call) and qualify(e.func, table) == "builtins.type" and e.args:
            return is_seam(e.args[0], names)
        if isinstance(e, ast.Attribute) and e.attr == "__class__":
            return is_seam(e.value, names)
        return is_seam(e, names)
    for n in ast.walk(mod.tree):
        if isinstance(n, ast.Call):
            q = qualify(n.func, table) or ""
            first = n.args[0] if n.args else None
            if q in REFLECTORS and first is not None and seam_or_its_type(first):
                found.add((n.lineno, q.removeprefix("builtins.") + "()"))
            elif (q.startswith(("builtins.object.", "builtins.type.", "inspect.")) or q == "builtins.isinstance"
                  and False) and first is not None and seam_or_its_type(first):
                found.add((n.lineno, q))
            elif isinstance(n.func, ast.Call) and qualify(n.func.func, table) in (
                    "operator.attrgetter", "operator.methodcaller") and first is not None and seam_or_its_type(first):
                found.add((n.lineno, "operator." + (qualify(n.func.func, table) or "").rpartition(".")[2]))
        elif isinstance(n, ast.Attribute) and n.attr.startswith("__") and n.attr.endswith("__") \
                and n.attr not in ("__enter__", "__exit__", "__init__") and seam_or_its_type(n.value):
            found.add((n.lineno, n.attr))
    allowed = _allowed_lines(mod.tree, mod.name)
    return sorted((line, how) for line, how in found if line not in allowed)


def reflection_violations(tree: Tree) -> list[str]:
    return ordered(f"{m}:{line}: reflection on a provider, launcher, runner or the store ({how}); type the object"
                   for m, mod in tree.items() if not any(_within(m, h) for h in SEAM_HOMES)
                   for line, how in reflection_uses(mod))


# -- folded strings: Slurm's words, GPU and size names -----------------------------------------------

def _assembled(mod: Module, consts: dict[str, frozenset[str]], plain: bool = True) -> Iterator[tuple[int, str]]:
    """(line, text) of every string an expression spells (docstrings aside), folded from its
    parts; with `plain` False, only what is assembled (a literal alone is left out)."""
    skip = _docstring_ids(mod.tree)
    for n in ast.walk(mod.tree):
        if not plain and isinstance(n, ast.Constant):
            continue
        if id(n) in skip or not isinstance(n, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Name, ast.Attribute,
                                               ast.Subscript)):
            continue
        if isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(getattr(n, "ctx", None), ast.Load):
            continue
        for text in fold(n, consts):
            yield n.lineno, text


def module_strings(tree: Tree, module: str, skip: str = "") -> dict[str, frozenset[str]]:
    """What each name of `module` may spell: its own bindings and the constants it imports, but
    not those of `skip` (a name slurm/ binds to a Slurm word is slurm's to spell; naming the
    constant is using it, not spelling it)."""
    return {**{k: v for k, v in constants(tree, module, skip)}, **_bound_strings(tree[module].tree)}


@functools.cache
def _folded_slurm(mod: Module, consts: frozenset[tuple[str, frozenset[str]]]) -> tuple[int, ...]:
    return tuple(sorted({line for line, text in _assembled(mod, dict(consts)) if SLURM_WORDS.search(text)}))


def slurm_assembled_violations(tree: Tree) -> list[str]:
    """Slurm's command words spelled from parts ("s" + "batch", "".join(...), a constant) outside slurm/."""
    return ordered(f"{m}:{line}: Slurm command word (assembled) outside slurm/" for m, mod in tree.items()
                   if not _within(m, "orchestrator.slurm")
                   for line in _folded_slurm(mod, frozenset(module_strings(tree, m, "orchestrator.slurm").items())))


@functools.cache
def gpu_words() -> re.Pattern[str]:
    """What names a GPU or a VM size, from the catalog's rows (tests/test_catalog.forbidden_words)."""
    from tests.test_catalog import forbidden_words
    words = forbidden_words()
    return re.compile("|".join(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])"
                               for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)


# Where a size or GPU may be named: hardware/ (the catalog), and the backends, whose SDK calls
# spell Azure's size prefix. Everything else reads the catalog's rows. cli/ may give the aliases
# users type as examples in a help text (a plain literal), never build or compare one.
GPU_HOMES = ("orchestrator.hardware", "orchestrator.providers")
GPU_EXAMPLES = ("orchestrator.cli",)


@functools.cache
def _folded_gpu(mod: Module, consts: frozenset[tuple[str, frozenset[str]]]) -> tuple[int, ...]:
    pattern = gpu_words()
    plain = not _within(mod.name, GPU_EXAMPLES[0])
    return tuple(sorted({line for line, text in _assembled(mod, dict(consts), plain) if pattern.search(text)}))


def gpu_assembled_violations(tree: Tree) -> list[str]:
    """GPU and size names spelled outside hardware/, assembled from parts ("Standard_ND" +
    "96isr_H100_v5", f"{'H'}100", "".join(...)) or bound to a name and compared."""
    return ordered(f"{m}:{line}: GPU or VM size named outside hardware/" for m, mod in tree.items()
                   if not any(_within(m, h) for h in GPU_HOMES)
                   for line in _folded_gpu(mod, frozenset(module_strings(tree, m).items())))


# -- the SDK edge ----------------------------------------------------------------------------------

# The Azure backends' records and client modules are the one place that calls the SDK and reads
# what it returns; the rest of the tree gets typed records (docs/architecture.md, house rules).
AZURE_BACKENDS = ("orchestrator.providers.azure", "orchestrator.providers.azureml",
                  "orchestrator.providers.azure_shared")
SDK_EDGE = frozenset(f"{package}.{module}" for package in AZURE_BACKENDS for module in ("records", "clients"))


@dataclass(frozen=True)
class Sdk:
    """What the Azure SDKs azbench calls expose, read from the installed packages: each
    operation group of the management clients (compute, network, resources, authorization) and
    of azure-ai-ml's MLClient, with its methods; the attribute names of the management models."""

    groups: dict[str, frozenset[str]]
    fields: frozenset[str]
    # azure-core's requests, responses and errors are transport, not models: the ARM error and
    # throttling modules read them (status codes, headers, the request's method).
    transport: frozenset[str]


def _public(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n for n in names if not n.startswith("_"))


@functools.cache
def sdk() -> Sdk:
    import importlib.util
    import inspect

    import azure.mgmt.authorization.v2022_04_01.models as authorization_models
    import azure.mgmt.compute.models as compute_models
    import azure.mgmt.network.models as network_models
    import azure.mgmt.resource.resources.models as resource_models
    from azure.core.credentials import AccessToken
    from azure.core.exceptions import HttpResponseError
    from azure.core.rest import HttpRequest, HttpResponse
    from azure.mgmt.authorization import AuthorizationManagementClient
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.network import NetworkManagementClient
    from azure.mgmt.resource.resources import ResourceManagementClient

    class Credential:
        def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
            return AccessToken("", 0)

    groups: dict[str, frozenset[str]] = defaultdict(frozenset)
    for kind in (ComputeManagementClient, NetworkManagementClient, ResourceManagementClient,
                 AuthorizationManagementClient):
        client = kind(Credential(), "00000000-0000-0000-0000-000000000000")  # no request is sent
        for name in _public(dir(client)):
            try:
                ops = getattr(client, name)
            except ValueError:  # a group of the multi-API client that its default version lacks
                continue
            if type(ops).__name__.endswith("Operations"):
                groups[name] |= _public(dir(type(ops)))
    # MLClient's groups are properties annotated with their Operations class; read from its source
    # (importing azure.ai.ml takes seconds).
    azure = importlib.util.find_spec("azure")
    assert azure is not None, "the Azure SDKs are not installed"
    root = next(Path(p) / "ai" / "ml" for p in azure.submodule_search_locations or ()
                if (Path(p) / "ai" / "ml" / "_ml_client.py").is_file())
    ml_client = next(n for n in ast.parse((root / "_ml_client.py").read_text()).body
                     if isinstance(n, ast.ClassDef) and n.name == "MLClient")
    properties = {ast.unparse(f.returns).strip("'\""): f.name for f in ml_client.body
                  if isinstance(f, ast.FunctionDef) and f.returns is not None
                  and any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list)}
    for path in sorted((root / "operations").glob("*.py")):
        for c in ast.parse(path.read_text()).body:
            if isinstance(c, ast.ClassDef) and c.name in properties and c.name.endswith("Operations"):
                groups[properties[c.name]] |= _public(f.name for f in c.body
                                                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
    fields: set[str] = set()
    for models in (compute_models, network_models, resource_models, authorization_models):
        for cls in vars(models).values():
            if inspect.isclass(cls):
                fields |= set(getattr(cls, "_attribute_map", None) or ())  # msrest models
                fields |= {a for k in cls.__mro__ for a in vars(k).get("__annotations__", ())}  # TypeSpec models
    transport = set(vars(HttpResponseError(message=""))) | set(vars(HttpRequest("GET", "https://x")))
    for cls in (HttpResponseError, HttpRequest, HttpResponse):
        transport |= set(dir(cls))
    assert {"virtual_machines", "resource_groups", "role_definitions", "jobs"} <= set(groups), sorted(groups)
    assert {"os_profile", "admin_username"} <= fields
    return Sdk(dict(groups), frozenset(fields), frozenset(transport))


@dataclass(frozen=True)
class Reach:
    """One attribute read `value.attr` (line, attr), with what the rule asks of it: the last
    name of `value` and of what `value` is an attribute of (`clients.compute.x`: compute,
    clients), whether it is called, and whether `value` is a module the file imports."""

    line: int
    attr: str
    owner: str
    owner_of: str
    called: bool
    on_module: bool
    load: bool


@dataclass(frozen=True)
class SdkFacts:
    """What the SDK rule reads of one module, from one walk of its syntax tree."""

    defined: frozenset[str]  # its classes' fields, methods and class attributes, and `self.x = `
    read: frozenset[str]  # every attribute name it reads
    azure: bool  # it imports azure.*
    reaches: tuple[Reach, ...]


def _ident(expr: ast.AST) -> str:
    """The last name of an expression: `clients`, `self.clients` -> clients, `f(x)` -> f."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Call):
        return _ident(expr.func)
    return ""


@functools.cache
def sdk_facts(tree: ast.Module) -> SdkFacts:
    defined: set[str] = set()
    aliases: set[str] = set()
    called: set[int] = set()
    attributes: list[ast.Attribute] = []
    azure = False
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            attributes.append(n)
        elif isinstance(n, ast.Call):
            called.add(id(n.func))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            aliases |= {a.asname or a.name.split(".")[0] for a in n.names}
            modules = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            azure = azure or any(_within(m, "azure") for m in modules)
        elif isinstance(n, ast.ClassDef):
            for b in n.body:
                if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    defined.add(b.target.id)
                elif isinstance(b, ast.Assign):
                    defined |= {t.id for t in b.targets if isinstance(t, ast.Name)}
                elif isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defined.add(b.name)
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    defined.add(t.attr)
    reaches = tuple(Reach(a.lineno, a.attr, _ident(a.value),
                          _ident(a.value.value) if isinstance(a.value, ast.Attribute) else "",
                          id(a) in called, isinstance(a.value, ast.Name) and a.value.id in aliases,
                          isinstance(a.ctx, ast.Load)) for a in attributes)
    return SdkFacts(frozenset(defined), frozenset(a.attr for a in attributes), azure, reaches)


def _sdk_scope(module: str, mod: Module) -> bool:
    """Where SDK objects could be met: the Azure backends, and any module importing azure.*."""
    return module.startswith(AZURE_BACKENDS) or sdk_facts(mod.tree).azure


@dataclass(frozen=True)
class SdkNames:
    """The SDK's names as this tree meets them (see sdk_uses)."""

    sdk: Sdk
    ambiguous: frozenset[str]  # operation groups also named by azbench's own classes (tags, compute, ...)
    generic: frozenset[str]  # attribute names azbench defines or reads outside the SDK scope, builtins'
    handles: frozenset[str]  # the clients modules' properties that return an SDK client


def sdk_names(tree: Tree) -> SdkNames:
    s = sdk()
    own = frozenset().union(*(sdk_facts(mod.tree).defined for m, mod in tree.items() if m not in SDK_EDGE))
    own |= {m.rpartition(".")[2] for m in tree}
    generic = set(own) | {a for m in SDK_EDGE if m in tree for a in sdk_facts(tree[m].tree).defined}
    generic |= {a for t in (str, bytes, dict, list, tuple, set, int, float, object, BaseException) for a in dir(t)}
    generic |= s.transport
    for module, mod in tree.items():
        if not _sdk_scope(module, mod):
            generic |= sdk_facts(mod.tree).read
    handles = {f.name for m in SDK_EDGE if m in tree for c in tree[m].tree.body if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, ast.FunctionDef) and f.returns is not None
               and ast.unparse(f.returns).strip("'\"").endswith("Client")}
    return SdkNames(s, frozenset(set(s.groups) & own), frozenset(generic), frozenset(handles))


def sdk_uses(mod: Module, names: SdkNames, fields: bool) -> list[tuple[int, str]]:
    """(line, what) for each use of the SDK in `mod`:
    - an operation group: `x.virtual_machines`, `compute.resource_skus.list(...)`, `ml.jobs.get(...)`;
      a group also named by azbench's own classes (`tags`, `resources`, `compute`) counts when
      reached through a client (`clients.resources.tags`) or called with a method only the SDK
      has (`x.tags.begin_update_at_scope(...)`, `ml.compute.list_nodes(...)`);
    - a management client taken from the clients (`clients.compute`, `self.arm_clients(t).network`);
    - with `fields`, an attribute only the SDK's models have, read (not called) from anything but
      a module: `vm.os_profile.admin_username`, `nic.ip_configurations`."""
    s = names.sdk
    found: set[tuple[int, str]] = set()
    for r in sdk_facts(mod.tree).reaches:
        via_client = r.owner in names.handles and "client" in r.owner_of.lower()
        if r.attr in s.groups and (r.attr not in names.ambiguous or via_client):
            found.add((r.line, f"SDK operation group .{r.attr}"))
        if r.attr in names.handles and "client" in r.owner.lower():
            found.add((r.line, f"SDK client .{r.attr}"))
        if r.called and r.owner in names.ambiguous and r.attr in s.groups[r.owner] and r.attr not in names.generic:
            found.add((r.line, f"SDK operation group .{r.owner}.{r.attr}()"))
        if fields and r.load and not r.called and not r.on_module and r.attr in s.fields \
                and r.attr not in names.generic and r.attr not in s.groups:
            found.add((r.line, f"SDK attribute .{r.attr}"))
    return sorted(found)


def sdk_violations(tree: Tree) -> list[str]:
    """SDK calls and SDK model reads outside the Azure backends' records and client modules."""
    names = sdk_names(tree)
    return ordered(f"{module}:{line}: {what} outside the records and client modules"
                   for module, mod in tree.items() if module not in SDK_EDGE
                   for line, what in sdk_uses(mod, names, _sdk_scope(module, mod)))


# -- the layout ----------------------------------------------------------------------------------

def test_root_holds_only_the_base_and_the_folders() -> None:
    """Each name at the root is a concern's folder or a member of the base, a module or (split by
    noun, as models/ is) a package; no name is both, and every member of the base is there."""
    files = {p.stem for p in PKG.glob("*.py")} - {"__init__", "__main__"}
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    base_packages = folders & BASE
    assert files <= BASE, f"modules outside a concern's folder: {sorted(files - BASE)}"
    assert not files & base_packages, f"both a module and a package: {sorted(files & base_packages)}"
    assert files | base_packages == BASE, f"base members missing: {sorted(BASE - files - base_packages)}"
    assert folders - base_packages == set(FOLDERS), (folders - base_packages) ^ set(FOLDERS)


def test_every_package_states_its_contract() -> None:
    for init in PKG.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 8, f"{init.relative_to(PKG.parent)} needs a docstring stating its contract"
    for folder in FOLDERS:
        allowed_imports(folder)  # every top-level folder says what it may import


def test_the_rules_name_modules_that_exist() -> None:
    tree = real_tree()
    assert set(NO_PROBES) <= set(FOLDERS), f"NO_PROBES names folders that are gone: {set(NO_PROBES) - set(FOLDERS)}"
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


def folder_edges(tree: Tree) -> dict[str, set[str]]:
    """folder -> the folders its modules import."""
    known = set(tree)
    edges: dict[str, set[str]] = defaultdict(set)
    for module, mod in tree.items():
        here = _folder(module)
        for imp in imports(mod, known):
            there = _folder(imp.target) if imp.target in known else None
            if here and there and here != there:
                edges[here].add(there)
    return edges


def test_the_documented_floors_and_listing_point_down() -> None:
    """docs/architecture.md draws the folders twice, a table of floors and the listing of the
    tree; in both, every folder an import reaches is below the importer (issue 37: report/ was
    drawn below forecast/, which it imports)."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    floors = {f: int(n) for n, f in re.findall(r"^\| (\d+) \| `(\w+)/` \|", doc, re.M)}
    assert set(floors) == set(FOLDERS), set(floors) ^ set(FOLDERS)
    listing = re.search(r"^orchestrator/\n(.*?)^```", doc, re.S | re.M)
    assert listing, "the listing of orchestrator/ is gone from docs/architecture.md"
    order = [f for f in re.findall(r"^  (\w+)/ ", listing.group(1), re.M)]
    assert set(order) == set(FOLDERS), set(order) ^ set(FOLDERS)
    up = [f"{here} (floor {floors[here]}) imports {there} (floor {floors[there]})"
          for here, theirs in folder_edges(real_tree()).items() for there in theirs if floors[there] >= floors[here]]
    up += [f"{here} imports {there}, listed above it" for here, theirs in folder_edges(real_tree()).items()
           for there in theirs if order.index(there) < order.index(here)]
    assert not up, "\n".join(up)


# -- the seams ---------------------------------------------------------------------------------

def test_only_the_registry_imports_a_backend() -> None:
    wrong = backend_import_violations(real_tree())
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
    wrong = slurm_word_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def test_only_the_registry_loads_modules_by_name() -> None:
    wrong = dynamic_import_violations(real_tree())
    assert not wrong, "import it, or register a backend in orchestrator/backends.py:\n" + "\n".join(wrong)


def test_no_reflection_on_providers_launchers_runners_or_the_store() -> None:
    wrong = reflection_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def test_no_gpu_or_size_named_outside_hardware_even_from_parts() -> None:
    wrong = gpu_assembled_violations(real_tree())
    assert not wrong, "read the catalog's rows (orchestrator/hardware/):\n" + "\n".join(wrong)


def test_no_slurm_word_assembled_outside_slurm() -> None:
    wrong = slurm_assembled_violations(real_tree())
    assert not wrong, "\n".join(wrong)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with the project's contracts (pyproject.toml) over the package under `root`."""
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("lint-imports is not installed (pip install -e '.[test]')")
    (root / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(exe), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_lint_imports_catches_upward_backend_and_runs_imports(tmp_path: Path) -> None:
    """The import-linter contracts hold on a copy of the package with three planted imports, lazy
    and type-only ones among them: store/ importing cli/ (a floor upward), runs/ importing the
    provider facade, one backend importing another; each is named."""
    shutil.copytree(PKG, tmp_path / "orchestrator", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    clean = _lint_imports(tmp_path)
    assert clean.returncode == 0, clean.stdout[-3000:]
    plant = {"store/database.py": "\ndef _up():\n    from orchestrator.cli import app  # noqa\n",
             "runs/monitor.py": "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import orchestrator.providers.base\n",
             "providers/fake/provider.py": "\nimport orchestrator.providers.ssh.settings\n"}
    for where, code in plant.items():
        path = tmp_path / "orchestrator" / where
        path.write_text(path.read_text() + code)
    broken = _lint_imports(tmp_path)
    assert broken.returncode != 0
    for needle in ("orchestrator.store.database -> orchestrator.cli", "orchestrator.runs.monitor -> orchestrator.providers",
                   "orchestrator.providers.fake.provider -> orchestrator.providers.ssh"):
        assert needle in broken.stdout, (needle, broken.stdout[-3000:])


def test_no_class_is_told_apart_by_its_name() -> None:
    wrong = type_name_violations(real_tree())
    assert not wrong, "ask Capabilities, or type the object:\n" + "\n".join(wrong)


def test_only_the_records_and_client_modules_call_the_sdk() -> None:
    wrong = sdk_violations(real_tree())
    assert not wrong, "call the SDK in the backend's clients.py, read its objects in records.py:\n" + "\n".join(wrong)


def test_the_sdk_rule_reads_the_installed_sdks() -> None:
    s = sdk()
    assert {"begin_update", "begin_delete_instances", "list"} <= s.groups["virtual_machine_scale_sets"]
    assert {"create_or_update", "check_existence"} <= s.groups["resource_groups"]
    assert {"stream", "download", "begin_cancel"} <= s.groups["jobs"]  # MLClient's, from its source
    assert {"list_nodes", "list_usage"} <= s.groups["compute"]
    assert {"os_profile", "admin_username", "ip_configurations"} <= s.fields
    names = sdk_names(real_tree())
    assert names.handles == {"compute", "network", "resources", "authorization"}
    assert {"tags", "compute", "resources"} <= names.ambiguous and "virtual_machines" not in names.ambiguous


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
    "dynamic import": dynamic_import_violations,
    "reflection": reflection_violations,
    "gpu name": gpu_assembled_violations,
    "slurm assembled": slurm_assembled_violations,
    "provider name": provider_name_violations,
    "store private": store_private_violations,
    "probe": probe_violations,
    "sdk": sdk_violations,
    "type name": type_name_violations,
    "slurm word": slurm_word_violations,
}


def caught(rule: Rule, module: str, code: str | dict[str, str], tree: Tree | None = None) -> list[str]:
    """What `rule` reports on the tree with `code` planted in `module` that it does not on the tree
    as it is (so a rule the current code already breaks still shows the planted line). `code` may
    also be {module: code}, for a case that takes two modules (a constant and its importer)."""
    if tree is None:
        tree = real_tree()
        before = _BASELINE.setdefault((rule, backends.names()), set(rule(tree)))
    else:
        before = set(rule(tree))
    after = tree
    for where, text in ({module: code} if isinstance(code, str) else code).items():
        after = planted(after, where, text)
    return ordered(set(rule(after)) - before)


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
    pytest.param("contract", "orchestrator.runs.execute",
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
    # 9. (issue 37) the SDK outside the Azure backends' records and client modules.
    pytest.param("sdk", "orchestrator.providers.azure.heal",
                 'def f(compute):\n    return compute.virtual_machines.get("rg", "head")\n', id="9-compute.virtual_machines.get"),
    pytest.param("sdk", "orchestrator.providers.azure.spot",
                 'def f(clients, body):\n    clients.compute.virtual_machine_scale_sets.begin_update("rg", "s", body).result()\n',
                 id="9-clients.compute.vmss.begin_update"),
    pytest.param("sdk", "orchestrator.providers.azure.lro",
                 'def f(clients):\n    return clients.resources.resource_groups.create_or_update("rg", {})\n',
                 id="9-resource_groups.create_or_update"),
    pytest.param("sdk", "orchestrator.providers.azure.roles",
                 'def f(ops, auth):\n    return ops.role_definitions.get("s", "g"), auth.role_assignments.delete("s", "n")\n',
                 id="9-role_definitions-role_assignments"),
    pytest.param("sdk", "orchestrator.providers.azure.up",
                 'def f(network):\n    return network.network_interfaces.get("rg", "nic").ip_configurations\n',
                 id="9-network-ops"),
    pytest.param("sdk", "orchestrator.providers.azure.expiry",
                 'def f(clients, patch):\n    clients.resources.tags.begin_update_at_scope("/s", patch)\n',
                 id="9-tags-through-a-client"),
    pytest.param("sdk", "orchestrator.providers.azure.preflight",
                 'def f(clients):\n    return vm_sizes(clients.compute, "eastus")\n', id="9-a-management-client-handed-on"),
    pytest.param("sdk", "orchestrator.providers.azureml.launcher",
                 'def f(self):\n    return self.ml.jobs.get("j"), self.ml.compute.list_nodes("c")\n',
                 id="9-MLClient-jobs-and-compute"),
    pytest.param("sdk", "orchestrator.providers.azure.provider",
                 'def f(vm):\n    return vm.os_profile.admin_username\n', id="9-sdk-attribute-read"),
    pytest.param("sdk", "orchestrator.cli.app",
                 'def f(c):\n    return c.virtual_machine_scale_sets.list("rg")\n', id="9-an-operation-group-anywhere"),
    # 10. (issue 37) what an outside review planted and the rules let through.
    pytest.param("backend import", "orchestrator.cli.app",
                 'import sys\ndef f():\n    return sys.modules["orchestrator.providers.azure"]\n', id="10-sys.modules-in-cli"),
    pytest.param("backend import", "orchestrator.clusters.lifecycle",
                 'from sys import modules as loaded\ndef f():\n    return loaded.get("orchestrator.providers.local.provider")\n',
                 id="10-sys.modules.get-aliased"),
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'AZ = "azure"\ndef f(provider):\n    return provider == AZ\n', id="10-provider-name-constant"),
    pytest.param("provider name", "orchestrator.runs.monitor",
                 {"orchestrator.runs.names": 'AZ = "az" + "ure"\n',
                  "orchestrator.runs.monitor": 'from orchestrator.runs import names\nfrom orchestrator.runs.names import AZ as A\n'
                                               'def f(c):\n    return c.provider in (A, "x") or c.provider == names.AZ\n'},
                 id="10-provider-name-constant-imported"),
    pytest.param("probe", "orchestrator.clusters.sweeping",
                 'def f(provider):\n    return getattr(provider, "sweep", None)\n', id="10-3-arg-getattr-in-a-new-clusters-module"),
    pytest.param("slurm word", "orchestrator.runs.execute",
                 'SCRIPT = "#!/bin/bash\\n#SBATCH --nodes=2\\n"\n', id="10-uppercase-SBATCH-after-an-escape"),
    pytest.param("slurm word", "orchestrator.runs.monitor",
                 'CMD = "set -e\\nsrun --mpi=pmix ./train"\n', id="10-one-line-string-with-srun"),
    pytest.param("slurm word", "orchestrator.report.build",
                 '# then SQUEUE -u $USER shows it\n', id="10-uppercase-word-in-a-comment"),
    pytest.param("store private", "orchestrator.report.build",
                 'def f(store):\n    return vars(store)["_engine"]\n', id="10-vars(store)"),
    pytest.param("store private", "orchestrator.report.build",
                 'def f(store):\n    return store.__dict__["_engine"]\n', id="10-store.__dict__"),
    pytest.param("type name", "orchestrator.clusters.lifecycle",
                 'def f(p):\n    return type(p).__name__ == "AzureProvider"\n', id="10-type(p).__name__"),
    pytest.param("type name", "orchestrator.report.build",
                 'def f(p):\n    match p.__class__.__name__:\n        case "LocalProvider":\n            return 1\n',
                 id="10-match-on-__class__.__name__"),
    pytest.param("contract", "orchestrator.runs.execute",
                 "from orchestrator.providers import base\n", id="10-runs-never-providers-inside-a-parenthesis"),
    # 11. (issue 44) rules about meaning: forms no rule listed before, each resolved or folded.
    # Dynamic imports outside the registry, however the loader is reached.
    pytest.param("dynamic import", "orchestrator.report.build",
                 'import importlib as il\ndef f(name):\n    return il.import_module(name)\n', id="11-alias-import_module-variable"),
    pytest.param("dynamic import", "orchestrator.runs.execute",
                 'from importlib import import_module as load\nWHERE = "orchestrator.report.build"\n'
                 'def f():\n    return load(WHERE)\n', id="11-from-import-alias-constant-name"),
    pytest.param("dynamic import", "orchestrator.clusters.lifecycle",
                 'def f(name):\n    return __import__(name)\n', id="11-__import__-variable"),
    pytest.param("dynamic import", "orchestrator.cli.app",
                 'import pkgutil\ndef f():\n    return pkgutil.resolve_name("orchestrator.report.build:build_report")\n',
                 id="11-pkgutil.resolve_name"),
    pytest.param("dynamic import", "orchestrator.goodput.run",
                 'import builtins\nloader = getattr(builtins, "__im" + "port__")\ndef f(x):\n    return loader(x)\n',
                 id="11-getattr-builtins-assembled"),
    pytest.param("dynamic import", "orchestrator.forecast.plan",
                 'def f(x):\n    return __builtins__["__import__"](x)\n', id="11-__builtins__-subscript"),
    pytest.param("dynamic import", "orchestrator.pipelines.pipeline",
                 'import sys as s\ndef f(name):\n    return s.modules[name]\n', id="11-sys.modules-dynamic-key"),
    pytest.param("dynamic import", "orchestrator.recipes.catalog",
                 'from importlib import util\ndef f(p):\n    return util.module_from_spec(util.spec_from_file_location("m", p))\n',
                 id="11-spec_from_file_location"),
    pytest.param("dynamic import", "orchestrator.report.site",
                 'import runpy\nrun = runpy.run_module\n', id="11-runpy-as-a-value"),
    pytest.param("dynamic import", "orchestrator.results.summary",
                 'def f():\n    exec("import orchestrator.report")\n', id="11-exec-an-import"),
    # Reflection on a provider, a launcher, an Access or the store.
    pytest.param("reflection", "orchestrator.report.build",
                 'def f(provider):\n    return getattr(provider, "resize")\n', id="11-getattr-provider"),
    pytest.param("reflection", "orchestrator.results.summary",
                 'def f(self):\n    return dir(self.launcher)\n', id="11-dir-self.launcher"),
    pytest.param("reflection", "orchestrator.goodput.cluster",
                 'def f(p: "Provider"):\n    return p.__module__.endswith("cloud")\n', id="11-__module__-annotated"),
    pytest.param("reflection", "orchestrator.report.build",
                 'def f(db):\n    s = Store.open(db)\n    return object.__getattribute__(s, "engine")\n',
                 id="11-object.__getattribute__-store"),
    pytest.param("reflection", "orchestrator.forecast.plan",
                 'def f(access):\n    return type(access.launcher).__qualname__\n', id="11-type-of-launcher-qualname"),
    pytest.param("reflection", "orchestrator.pipelines.pipeline",
                 'def f(name):\n    prov = get_provider(name)\n    return vars(prov)\n', id="11-vars-of-get_provider"),
    pytest.param("reflection", "orchestrator.runs.monitor",
                 'import inspect\ndef f(launcher):\n    return inspect.getmembers(launcher)\n', id="11-inspect.getmembers"),
    pytest.param("reflection", "orchestrator.cli.app",
                 'from operator import attrgetter\ndef f(x: Provider):\n    return attrgetter("replace_node")(x)\n',
                 id="11-attrgetter-typed-name"),
    pytest.param("reflection", "orchestrator.clusters.lifecycle",
                 'def f(spec):\n    with open_store() as db:\n        return db.__dict__\n', id="11-with-open_store-__dict__"),
    # Provider names however the string is reached.
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'from enum import Enum\nclass Kind(Enum):\n    AZ = "azure"\n    LOCAL = "local"\n'
                 'def f(c):\n    match Kind(c.provider):\n        case Kind.AZ:\n            return 1\n',
                 id="11-Enum-match"),
    pytest.param("provider name", "orchestrator.runs.execute",
                 'from enum import StrEnum\nclass P(StrEnum):\n    ML = "az" + "ureml"\n'
                 'def f(c):\n    return c.provider == P.ML.value\n', id="11-StrEnum-value-assembled"),
    pytest.param("provider name", "orchestrator.report.build",
                 'from enum import Enum\nK = Enum("K", {"A": "fake"})\ndef f(p):\n    return p is K.A\n',
                 id="11-functional-Enum"),
    pytest.param("provider name", "orchestrator.pipelines.pipeline",
                 'WAIT = {}\ndef f():\n    return WAIT.get("azure", 5)\n', id="11-dict-get-key"),
    pytest.param("provider name", "orchestrator.cli.app",
                 'def f(p):\n    return p.upper() == "AZURE"\n', id="11-case-insensitive"),
    pytest.param("provider name", "orchestrator.goodput.run",
                 'import operator\ndef f(p):\n    return operator.eq(p, "local")\n', id="11-operator.eq"),
    pytest.param("provider name", "orchestrator.forecast.plan",
                 'def f(p):\n    return "".join(["s", "sh"]) == p\n', id="11-join-assembled"),
    pytest.param("provider name", "orchestrator.runs.monitor",
                 'from orchestrator import backends\ndef f(p):\n    return p == backends.names()[2]\n',
                 id="11-picked-from-the-registry-list"),
    pytest.param("provider name", "orchestrator.clusters.spending",
                 'CLOUDS = frozenset({"azure", "azureml"})\ndef f(p):\n    return p in CLOUDS\n', id="11-frozenset-constant"),
    pytest.param("provider name", "orchestrator.report.site",
                 'def f(table, c):\n    return table["%s" % "fake"](c)\n', id="11-subscript-dispatch"),
    # GPU and size names, assembled from parts.
    pytest.param("gpu name", "orchestrator.report.build",
                 'SIZE = "Standard_ND" + "96isr_H100_v5"\n', id="11-size-concatenated"),
    pytest.param("gpu name", "orchestrator.runs.execute",
                 'def f(n):\n    return f"{\'H\'}100" if n else None\n', id="11-gpu-fstring"),
    pytest.param("gpu name", "orchestrator.results.summary",
                 'def f(sku):\n    return sku == "".join(["GB", "200"])\n', id="11-gpu-join"),
    pytest.param("gpu name", "orchestrator.cli.app",
                 'def f(sku):\n    return sku == "h" + "100"\n', id="11-cli-builds-an-alias"),
    pytest.param("gpu name", "orchestrator.goodput.cluster",
                 'GPU = "B200"\n', id="11-gpu-plain-in-goodput"),
    pytest.param("gpu name", "orchestrator.forecast.points",
                 'PART = "MI"\ndef f():\n    return "{}{}".format(PART, "325X")\n', id="11-gpu-format-with-a-constant"),
    # Slurm's command words, assembled.
    pytest.param("slurm assembled", "orchestrator.runs.execute",
                 'CMD = "s" + "batch"\n', id="11-s+batch"),
    pytest.param("slurm assembled", "orchestrator.runs.monitor",
                 'def f():\n    return f"{\'sq\'}ueue -u me"\n', id="11-fstring-squeue"),
    pytest.param("slurm assembled", "orchestrator.clusters.lifecycle",
                 'A = "sin"\nB = A + "fo"\n', id="11-constant-then-concatenated"),
    pytest.param("slurm assembled", "orchestrator.report.build",
                 'X = "%s%s" % ("sa", "cct")\n', id="11-percent-format"),
    pytest.param("slurm assembled", "orchestrator.cli.app",
                 'def f(run):\n    return run(["nurs"[::-1], "hostname"])\n', id="11-reversed"),
    pytest.param("slurm assembled", "orchestrator.pipelines.pipeline",
                 'def f():\n    return "".join(["scan", "cel"])\n', id="11-join-scancel"),
]


@pytest.mark.parametrize(("rule", "module", "code"), PLANTED)
def test_each_rule_catches_its_planted_violation(rule: str, module: str, code: str | dict[str, str]) -> None:
    """Planted in a real module, or in a new one of a real package (`first` is then 0)."""
    tree = real_tree()
    assert module in tree or module.rpartition(".")[0] in tree, f"{module} is gone: plant the case elsewhere"
    first = tree[module].source.rstrip("\n").count("\n") + 1 if module in tree else 0
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
    pytest.param("sdk", "orchestrator.providers.azure.clients",
                 'def f(self):\n    return self.compute.virtual_machines.get("rg", "vm").os_profile.admin_username\n',
                 id="the-clients-module-calls-the-sdk"),
    pytest.param("sdk", "orchestrator.providers.azureml.records",
                 'def f(ml):\n    return ml.jobs.get("j").status, ml.compute.get("c").size\n', id="a-records-module-reads-it"),
    pytest.param("sdk", "orchestrator.providers.azure.heal",
                 'def f(clients):\n    s = clients.scale_set("rg", "s")\n    return s.tags.get("k"), s.sku_name, s.capacity\n',
                 id="typed-records-elsewhere"),
    pytest.param("sdk", "orchestrator.providers.azureml.provider",
                 'def f(info, props):\n    return info.tags.get("azbench-cluster"), props.compute, props.resource_group\n',
                 id="own-fields-named-like-sdk-ones"),
    pytest.param("backend import", "orchestrator.cli.app",
                 'import sys\ndef f(name):\n    return sys.modules["orchestrator.report"], sys.modules[name]\n',
                 id="sys.modules-of-a-non-backend-or-a-dynamic-name"),
    pytest.param("provider name", "orchestrator.clusters.lifecycle",
                 'AZ = "azure"\nX = "other"\ndef f(provider):\n    return provider == X, print(AZ)\n',
                 id="a-provider-name-constant-used-as-a-plain-value"),
    pytest.param("slurm word", "orchestrator.runs.execute",
                 'PATHS = ("slurm/batch.py", "x.sbatch_args", "--srun-flags")\n', id="slurm-paths-and-longer-names"),
    pytest.param("slurm word", "orchestrator.slurm.commands", 'X = "#SBATCH --nodes=1\\nsrun hostname"\n',
                 id="slurm-spells-its-words"),
    pytest.param("type name", "orchestrator.cli.app",
                 'def f(e):\n    return f"{type(e).__name__}: {e}"\n', id="a-type-name-in-a-message"),
    pytest.param("store private", "orchestrator.report.build",
                 'def f(store, row):\n    return vars(row), row.__dict__\n', id="vars-of-something-else"),
    pytest.param("dynamic import", REGISTRY, 'import importlib\ndef f(p):\n    return importlib.import_module(p)\n',
                 id="the-registry-loads-by-name"),
    pytest.param("dynamic import", "orchestrator.cli.common",
                 'from importlib.metadata import version\nimport importlib.util\ndef f():\n'
                 '    return version("azbench"), importlib.util.find_spec("mlperf_logging")\n',
                 id="metadata-and-find_spec-load-nothing"),
    pytest.param("reflection", "orchestrator.report.build",
                 'def f(row, exc):\n    return getattr(row, "x"), type(exc).__name__, vars(row)\n', id="reflection-on-data"),
    pytest.param("reflection", "orchestrator.providers.azure.provider",
                 'def f(provider):\n    return type(provider).__name__\n', id="a-provider-looks-at-itself"),
    pytest.param("provider name", "orchestrator.specs.cluster",
                 'from orchestrator import backends\ndef f(p):\n    return p in backends.names()\n',
                 id="is-it-registered"),
    pytest.param("gpu name", "orchestrator.hardware.catalog",
                 'X = "Standard_ND" + "96isr_H100_v5"\n', id="hardware-names-sizes"),
    pytest.param("gpu name", "orchestrator.cli.plan",
                 'HELP = "VM size or alias: h100, h200"\n', id="cli-help-example"),
    pytest.param("slurm assembled", "orchestrator.providers.local.provider",
                 'from orchestrator.slurm.commands import NODE_LIST\nX = NODE_LIST + " -h"\n',
                 id="slurm-constant-used-by-name"),
    pytest.param("slurm assembled", "orchestrator.slurm.batch",
                 'X = "s" + "batch"\n', id="slurm-assembles-its-own"),
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
    assert SLURM_WORDS.search("#SBATCH --nodes=2") and SLURM_WORDS.search(ESCAPE.sub(" ", r'"a\nsrun b"'))
    assert "providers" not in allowed_imports("runs") and "clusters" in allowed_imports("runs")
    assert _permits(["hardware.catalog"], "orchestrator.hardware.catalog")
    assert not _permits(["hardware.catalog"], "orchestrator.hardware.layout")
    assert _permits(["providers"], "orchestrator.providers.azure.up")
