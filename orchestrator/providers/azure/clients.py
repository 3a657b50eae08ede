"""The azure backend's management clients: compute, network, resources and authorization, from
one ARM connection.

`AzureClients` is the shared ArmClients (azure_shared/clients.py: credential, subscription, ARM
endpoint, per-call policies, polling interval, retry settings, throttle budget) plus the three
clients only this backend uses, each created once, lazily, so the SDKs load only when used.
Production passes nothing but a DefaultAzureCredential (`clients_from_config`); tests pass a
credential stub and an AllowPlainHttp policy (azure-notes.md §5.1) without touching this code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.providers.azure_shared.clients import ArmClients, arm_from_config

if TYPE_CHECKING:
    from azure.mgmt.authorization import AuthorizationManagementClient
    from azure.mgmt.network import NetworkManagementClient
    from azure.mgmt.resource.resources import ResourceManagementClient


class AzureClients(ArmClients):
    """The four management clients of one subscription (compute comes with ArmClients)."""

    @property
    def network(self) -> NetworkManagementClient:
        return self._cached("network", _network)

    @property
    def resources(self) -> ResourceManagementClient:
        return self._cached("resources", _resources)

    @property
    def authorization(self) -> AuthorizationManagementClient:
        return self._cached("authorization", _authorization)


def clients_from_config(*, subscription_id: str | None = None, arm_endpoint: str | None = None,
                        polling_interval: float | None = None) -> AzureClients:
    """Production clients: DefaultAzureCredential, subscription from config or environment."""
    return arm_from_config(AzureClients, subscription_id=subscription_id, arm_endpoint=arm_endpoint,
                           polling_interval=polling_interval)


def _network(arm: ArmClients) -> NetworkManagementClient:
    from azure.mgmt.network import NetworkManagementClient
    return NetworkManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())


def _resources(arm: ArmClients) -> ResourceManagementClient:
    from azure.mgmt.resource.resources import ResourceManagementClient
    return ResourceManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())


def _authorization(arm: ArmClients) -> AuthorizationManagementClient:
    from azure.mgmt.authorization import AuthorizationManagementClient
    return AuthorizationManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())
