"""The backend registry: every backend's name and the package that implements it.

This is the one list that knows the backends. Each entry names a package under
orchestrator/providers/ whose `__init__` exposes `BACKEND`, a `Backend` saying what a cluster
spec must hold for it (its settings section, SKU and region rules), the model of what its
cluster records keep (`props`), and how to build its Provider. Packages load lazily, by the
name written here, so `azbench --help` imports no cloud SDK, and no module but this one imports
a backend: code above the providers asks a provider for its parts, never its name.

Adding a backend: one folder under providers/ and one line in `_REGISTRY` (docs/architecture.md
has the recipe). `register` adds one at run time, for the tests' own test-only backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import ConfigError, MissingExtra

_REGISTRY: dict[str, str] = {
    "local": "orchestrator.providers.local",
    "ssh": "orchestrator.providers.ssh",
    "azure": "orchestrator.providers.azure",
    "azureml": "orchestrator.providers.azureml",
    "fake": "orchestrator.providers.fake",
}
_BUILT_IN = frozenset(_REGISTRY)
LOCAL_SKU = "Local_CPU"  # the one size a backend with `only_sku` (local) and a spec without a sku get


@dataclass(frozen=True)
class Backend:
    """What one backend tells the rest of azbench, read from its package's `BACKEND`.

    `settings` is the model of its section of a cluster spec (the section's key is the
    backend's name; None: it reads none); `props` the model of what its Cluster records keep;
    `make(progress)` builds its Provider (`progress` receives step events from backends that
    emit them; what it can do beyond the protocol is the provider's `parts()`). The rest are
    the spec rules `check_spec` applies."""

    settings: type[BaseModel] | None
    props: type[BaseModel]
    make: Callable[[Callable[[Any], None] | None], Any]
    sku_required: bool = True  # else the spec's sku defaults to LOCAL_SKU
    region_required: bool = False
    only_sku: str | None = None  # the one size it runs
    section_required: bool = False  # its settings section has no defaults
    section_hint: str = ""
    extra: str | None = None  # the pip extra its SDKs come in (errors.EXTRAS); None: the core


def names() -> tuple[str, ...]:
    """The registered backends' names, in registry order."""
    return tuple(_REGISTRY)


def packages() -> dict[str, str]:
    """Each registered backend's name and the package that implements it (a copy)."""
    return dict(_REGISTRY)


def load(name: str) -> Backend:
    """The backend called `name` (ConfigError naming the choices when there is none)."""
    package = _REGISTRY.get(name)
    if package is None:
        raise ConfigError(f"unknown provider '{name}' (choose from {', '.join(_REGISTRY)})")
    backend = importlib.import_module(package).BACKEND
    if not isinstance(backend, Backend):
        raise TypeError(f"{package}.BACKEND is a {type(backend).__name__}, not a Backend")
    return backend


def check_spec(name: str, sku: str | None, region: str | None, sections: set[str]) -> str:
    """The spec's SKU after backend `name`'s rules; ValueError saying which rule failed.
    `sections` are the settings sections the spec wrote."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown provider '{name}' (choose from {', '.join(_REGISTRY)})")
    backend = load(name)
    if sku is None:
        if backend.sku_required:
            raise ValueError(f"sku is required for provider '{name}' (see azbench catalog)")
        sku = LOCAL_SKU
    if backend.only_sku is not None and sku != backend.only_sku:
        raise ValueError(f"the {name} provider emulates CPU nodes: use sku 'local'")
    if backend.region_required and region is None:
        raise ValueError(f"region is required for provider '{name}'")
    if backend.section_required and name not in sections:
        raise ValueError(f"provider '{name}' needs an '{name}:' section ({backend.section_hint})")
    return sku


def register(name: str, package: str) -> None:
    """Add a backend at run time (the tests' test-only backend); ValueError if the name is taken."""
    if name in _REGISTRY:
        raise ValueError(f"provider '{name}' is already registered")
    _REGISTRY[name] = package


def unregister(name: str) -> None:
    """Remove a backend `register` added; the built-in ones stay."""
    if name not in _BUILT_IN:
        _REGISTRY.pop(name, None)


# What each pip extra (pyproject's optional-dependencies) gives and the modules that prove it is
# installed. The core reads results; a command that needs more says which extra, in one line
# (MissingExtra, exit 7). A backend's `extra` names its row.
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "azure": ("the Azure SDKs", ("azure.identity", "azure.mgmt.compute", "azure.mgmt.network",
                                 "azure.mgmt.resource", "azure.mgmt.authorization", "paramiko",
                                 "tenacity")),
    "azureml": ("the Azure ML SDK", ("azure.ai.ml", "azure.identity", "azure.mgmt.compute")),
    "blob": ("the Azure Storage SDK", ("azure.storage.blob", "azure.identity")),
    "ssh": ("SSH (paramiko)", ("paramiko", "tenacity")),
    "local": ("PyTorch", ("torch",)),
    "postgres": ("the PostgreSQL driver", ("psycopg",)),
}
_SHARED_NAMESPACE = "azure"  # three extras install under it: its absence names none of them


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` (EXTRAS) that cannot be imported here, found by importlib's
    finders without importing them (milliseconds)."""
    return [module for module in EXTRAS[extra][1] if not _findable(module)]


def _findable(module: str) -> bool:
    """Whether `module` can be imported, importing nothing: importlib.util.find_spec imports a
    dotted name's parents (find_spec("azure.mgmt.compute") imports azure.mgmt, which is what
    loading the SDK lazily must not do), so each level is asked of the meta path's finders with
    its parent's search path, the path-based one walked by hand (pkgutil.get_importer per entry),
    namespace packages (the Azure SDKs share `azure` and `azure.mgmt`) gathering their portions."""
    import importlib.util
    import sys
    from importlib.machinery import PathFinder

    names = module.split(".")
    try:
        spec = importlib.util.find_spec(names[0])  # a top-level name imports nothing
        for depth in range(2, len(names) + 1):
            name = ".".join(names[:depth])
            loaded = sys.modules.get(name)
            if loaded is not None:  # imported already (os.path, a module that is no package's)
                spec = loaded.__spec__
                continue
            if spec is None or spec.submodule_search_locations is None:
                return False
            path = list(spec.submodule_search_locations)
            found = None
            for meta in sys.meta_path:
                if meta is PathFinder or isinstance(meta, PathFinder):
                    found = _path_spec(name, path)
                elif hasattr(meta, "find_spec"):
                    found = meta.find_spec(name, path)  # a blocker raises ModuleNotFoundError
                if found is not None:
                    break
            spec = found
    except (ImportError, ValueError):  # hidden, a broken package or a module without a spec
        return False
    return spec is not None


def _path_spec(name: str, path: list[str]) -> Any:
    """PathFinder.find_spec(name, path) without its parent imported (it reads the parent's
    __path__ from sys.modules for a namespace package): the first module or regular package
    on `path`, else a namespace package of every entry's portion, else None."""
    import importlib.util
    import pkgutil

    portions: list[str] = []
    for entry in path:
        finder = pkgutil.get_importer(entry)
        part = finder.find_spec(name) if finder is not None and hasattr(finder, "find_spec") else None
        if part is None:
            continue
        if part.loader is not None:
            return part
        portions.extend(part.submodule_search_locations or ())
    if not portions:
        return None
    spec = importlib.util.spec_from_loader(name, None, is_package=True)
    if spec is not None:
        spec.submodule_search_locations = portions
    return spec


def require_extra(extra: str | None, subject: str = "") -> None:
    """MissingExtra when a module of `extra` is missing (None asks for nothing); `subject`
    says what asked ("--provider azure")."""
    if extra is None:
        return
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(extra, EXTRAS[extra][0], subject, module=missing[0])


def missing_extra(exc: ImportError, extra: str | None = None, subject: str = "") -> MissingExtra | None:
    """The MissingExtra behind a failed import: `extra` when given and the module is one an
    extra provides, else the extra that provides it; None when no extra does (a bug)."""
    name = exc.name or ""
    owners = [e for e, (_, modules) in EXTRAS.items()
              if any(m == name or m.startswith(name + ".") or name.startswith(m + ".")
                     for m in modules)]
    if not owners:
        return None
    if extra is None or extra not in EXTRAS:
        if name == _SHARED_NAMESPACE:
            return None
        extra = owners[0]
    return MissingExtra(extra, EXTRAS[extra][0], subject, module=name)
