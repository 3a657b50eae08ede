"""Providers: where clusters come from, one folder per backend (azure/, azureml/, local/, ssh/,
fake/), each with the same few files (provider.py, and cluster.py building its records).

This module is the registry, and the only place that knows the providers' names: what each is
called, how its spec is checked, and how to load it. Everything else asks a provider's
`caps` (seams.Capabilities). `get_provider(name)` imports the implementation lazily, so the
Azure SDKs load only when used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.providers.base import Provider
    from orchestrator.seams import Capabilities


@dataclass(frozen=True)
class Entry:
    """One provider: where its class lives and what its specs must say."""

    module: str
    cls: str
    sku_required: bool = True  # else the spec's sku defaults to the local CPU size
    region_required: bool = False
    only_sku: str | None = None  # the one size it runs
    section: str | None = None  # the spec section it cannot do without
    section_hint: str = ""
    takes_progress: bool = False  # its `up` reports each resource as it goes


LOCAL_SKU = "Local_CPU"
_PKG = "orchestrator.providers"
REGISTRY: dict[str, Entry] = {
    "local": Entry(f"{_PKG}.local.provider", "LocalProvider", sku_required=False, only_sku=LOCAL_SKU),
    "ssh": Entry(f"{_PKG}.ssh.provider", "SshProvider", sku_required=False, section="ssh",
                 section_hint="host, user, key_path, workdir"),
    "azure": Entry(f"{_PKG}.azure.provider", "AzureProvider", region_required=True, takes_progress=True),
    "azureml": Entry(f"{_PKG}.azureml.provider", "AzureMLProvider", region_required=True),
    "fake": Entry(f"{_PKG}.fake.provider", "FakeProvider"),
}
PROVIDERS = tuple(REGISTRY)


def entry(name: str) -> Entry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown provider '{name}' (choose from {', '.join(PROVIDERS)})") from None


def get_provider(name: str, progress: Callable[[Any], None] | None = None) -> Provider:
    """The provider called `name`; `progress` receives step events from providers that emit
    them (Azure: one per resource created, waited on or deleted)."""
    e = entry(name)
    cls = getattr(importlib.import_module(e.module), e.cls)
    provider: Provider = cls(progress=progress) if e.takes_progress else cls()
    return provider


def capabilities(name: str) -> Capabilities:
    """What clusters of provider `name` can do, without building one (e.g. before `up` asks)."""
    e = entry(name)
    caps: Capabilities = getattr(importlib.import_module(e.module), e.cls).caps
    return caps


def check_spec(provider: str, sku: str | None, region: str | None,
               sections: dict[str, object | None]) -> str:
    """The spec's SKU after the provider's rules (ValueError saying which rule failed)."""
    e = REGISTRY.get(provider)
    if e is None:
        raise ValueError(f"unknown provider '{provider}' (choose from {', '.join(PROVIDERS)})")
    if sku is None:
        if e.sku_required:
            raise ValueError(f"sku is required for provider '{provider}' (see azbench catalog)")
        sku = LOCAL_SKU
    if e.only_sku is not None and sku != e.only_sku:
        raise ValueError(f"the {provider} provider emulates CPU nodes: use sku 'local'")
    if e.region_required and region is None:
        raise ValueError(f"region is required for provider '{provider}'")
    if e.section is not None and sections.get(e.section) is None:
        raise ValueError(f"provider '{provider}' needs an '{e.section}:' section ({e.section_hint})")
    return sku


__all__ = ["PROVIDERS", "REGISTRY", "capabilities", "check_spec", "entry", "get_provider"]


if TYPE_CHECKING:
    # Protocol conformance, proven by the type checker (CI runs mypy): every backend's class is
    # a Provider. get_provider loads them by name, which no checker can follow.
    from orchestrator.providers.azure.provider import AzureProvider
    from orchestrator.providers.azureml.provider import AzureMLProvider
    from orchestrator.providers.fake.provider import FakeProvider
    from orchestrator.providers.local.provider import LocalProvider
    from orchestrator.providers.ssh.provider import SshProvider

    _PROVIDERS_CONFORM: tuple[type[Provider], ...] = (
        AzureProvider, AzureMLProvider, FakeProvider, LocalProvider, SshProvider)
