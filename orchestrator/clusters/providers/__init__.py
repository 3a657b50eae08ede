"""Providers: where clusters come from (Azure, Azure ML, this machine, an SSH login, a fake).

`get_provider(name)` imports the implementation lazily, so the Azure SDKs load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.clusters.providers.base import Provider

PROVIDERS = ("local", "ssh", "azure", "azureml", "fake")


def get_provider(name: str, progress: Callable[[Any], None] | None = None) -> Provider:
    """The provider called `name`; `progress` receives step events from providers that emit
    them (Azure: one per resource created, waited on or deleted)."""
    if name == "local":
        from orchestrator.clusters.providers.local import LocalProvider
        return LocalProvider()
    if name == "ssh":
        from orchestrator.clusters.providers.ssh import SshProvider
        return SshProvider()
    if name == "azure":
        from orchestrator.clusters.providers.azure import AzureProvider
        return AzureProvider(progress=progress)
    if name == "azureml":
        from orchestrator.clusters.providers.azureml import AzureMLProvider
        return AzureMLProvider()
    if name == "fake":
        from orchestrator.clusters.providers.fake import FakeProvider
        return FakeProvider()
    raise ConfigError(f"unknown provider '{name}' (choose from {', '.join(PROVIDERS)})")
