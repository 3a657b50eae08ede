"""Providers: where clusters come from (Azure, Azure ML, this machine, an SSH login, a fake).

`get_provider(name)` imports the implementation lazily, so the Azure SDKs load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.providers.base import Provider

PROVIDERS = ("local", "ssh", "azure", "azureml", "fake")


def get_provider(name: str) -> Provider:
    if name == "local":
        from orchestrator.providers.local import LocalProvider
        return LocalProvider()
    if name == "ssh":
        from orchestrator.providers.ssh import SshProvider
        return SshProvider()
    if name == "azure":
        from orchestrator.providers.azure import AzureProvider
        return AzureProvider()
    if name == "azureml":
        from orchestrator.providers.azureml import AzureMLProvider
        return AzureMLProvider()
    if name == "fake":
        from orchestrator.providers.fake import FakeProvider
        return FakeProvider()
    raise ConfigError(f"unknown provider '{name}' (choose from {', '.join(PROVIDERS)})")
