"""Providers: where clusters come from. The Provider seam (base.py), one folder per backend
(azure/, azureml/, local/, ssh/, fake/), each with the same few files (settings.py: its spec
section; props.py: what its records keep; plan, cluster.py: its one to_cluster; provider.py: the
Provider and the launcher it connects), and azure_shared/, what the two Azure backends share
(credentials, ARM errors, the throttle policy, tags).

This module builds a backend's Provider by name through the registry (orchestrator.backends);
no module imports a backend but the registry, and no backend imports another.
May import: specs/, hardware/, hosts/, slurm/ and the base.
Exposes: get_provider, capabilities, names, require; base (Provider, ProviderBase, CloudView, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator import backends
from orchestrator.providers.base import Provider
from orchestrator.seams import Capabilities


def names() -> tuple[str, ...]:
    """The backends a spec may name."""
    return backends.names()


def get_provider(name: str, progress: Callable[[Any], None] | None = None, *,
                 plan_only: bool = False) -> Provider:
    """The provider called `name`; `progress` receives step events from providers that emit
    them (Azure: one per resource created, waited on or deleted). MissingExtra (exit 7, naming
    `pip install 'azbench[EXTRA]'`) when its SDKs are not installed, unless `plan_only`: a plan
    is pure (`up --dry-run` needs no SDK)."""
    backend = backends.load(name)
    if not plan_only:
        require(name)
    try:
        provider: Provider = backend.make(progress)
    except ModuleNotFoundError as exc:
        raise _missing(backend, name, exc) from None
    return provider


def require(name: str) -> None:
    """MissingExtra when provider `name`'s SDKs are not installed (before a prompt asks)."""
    backends.require_extra(backends.load(name).extra, f"--provider {name}")


def capabilities(name: str) -> Capabilities:
    """What clusters of provider `name` can do, without building one (e.g. before `up` asks)."""
    backend = backends.load(name)
    try:
        caps: Capabilities = backend.caps()
    except ModuleNotFoundError as exc:
        raise _missing(backend, name, exc) from None
    return caps


def _missing(backend: backends.Backend, name: str, exc: ModuleNotFoundError) -> Exception:
    """A backend module that failed to import its SDK: MissingExtra naming its extra; any other
    missing module stays what it is (a bug, its traceback under --debug)."""
    if backend.extra is None:
        return exc
    found = backends.missing_extra(exc, backend.extra, f"--provider {name}")
    return exc if found is None else found


__all__ = ["capabilities", "get_provider", "names", "require"]
