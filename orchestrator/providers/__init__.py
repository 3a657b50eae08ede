"""Providers: where clusters come from. The Provider seam (base.py), one folder per backend
(azure/, azureml/, local/, ssh/, fake/), each with the same few files (settings.py: its spec
section; props.py: what its records keep; plan, cluster.py: its one to_cluster; provider.py: the
Provider and the launcher it connects), and azure_shared/, what the two Azure backends share
(credentials, ARM errors, the throttle policy, tags).

This module builds a backend's Provider by name through the registry (orchestrator.backends);
no module imports a backend but the registry, and no backend imports another.
May import: specs/, hardware/, hosts/, slurm/ and the base.
Exposes: get_provider, capabilities, names; base (Provider, ProviderBase, CloudView, ...).
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


def get_provider(name: str, progress: Callable[[Any], None] | None = None) -> Provider:
    """The provider called `name`; `progress` receives step events from providers that emit
    them (Azure: one per resource created, waited on or deleted)."""
    provider: Provider = backends.load(name).make(progress)
    return provider


def capabilities(name: str) -> Capabilities:
    """What clusters of provider `name` can do, without building one (e.g. before `up` asks)."""
    caps: Capabilities = backends.load(name).caps()
    return caps


__all__ = ["capabilities", "get_provider", "names"]
