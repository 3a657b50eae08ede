"""Providers: where clusters come from. The Provider seam (base.py), one folder per backend
(azure/, azureml/, local/, ssh/, fake/), each with the same few files (settings.py: its spec
section; props.py: what its records keep; plan, cluster.py: its one to_cluster; provider.py: the
Provider and the launcher it connects), and azure_shared/, what the two Azure backends share
(credentials, ARM errors, the throttle policy, tags).

This module builds a backend's Provider by name through the registry (orchestrator.backends);
no module imports a backend but the registry, and no backend imports another.
May import: specs/, hardware/, hosts/, slurm/ and the base.
Exposes: get_provider, parts, names; base (Provider, ProviderParts, the part Protocols, CloudView, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator import backends
from orchestrator.providers.base import Provider, ProviderParts


def names() -> tuple[str, ...]:
    """The backends a spec may name."""
    return backends.names()


def get_provider(name: str, progress: Callable[[Any], None] | None = None) -> Provider:
    """The provider called `name`; `progress` receives step events from providers that emit
    them (Azure: one per resource created, waited on or deleted)."""
    provider: Provider = backends.load(name).make(progress)
    return provider


def parts(name: str) -> ProviderParts:
    """What clusters of provider `name` can do beyond the protocol, and their traits (e.g.
    before `up` asks); building a provider opens no connection and reads no credential."""
    return get_provider(name).parts()


__all__ = ["get_provider", "names", "parts"]
