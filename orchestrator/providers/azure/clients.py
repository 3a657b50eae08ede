"""Build the Azure management clients (compute, network, resources, authorization) from one typed configuration.

`AzureClients` holds the credential, subscription, ARM endpoint (`azure.arm_endpoint` or
AZURE_RESOURCE_MANAGER_ENDPOINT: sovereign clouds, and the tests' fake), per-call policies, the
LRO polling interval and azure-core retry settings; it creates each client once, lazily, so the
SDKs load only when used. Production passes nothing but a DefaultAzureCredential; tests pass a
credential stub and an AllowPlainHttp policy (azure-notes.md §5.1) without touching this code.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from orchestrator.providers.azure_shared.throttle import ThrottleBudget, retry_policy
from orchestrator.errors import ConfigError

GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
PUBLIC_ARM = "https://management.azure.com"
PUBLIC_AUTHORITIES = frozenset({"login.microsoftonline.com", "login.microsoftonline.us",
                                "login.chinacloudapi.cn", "login.partner.microsoftonline.cn"})


@dataclass
class AzureClients:
    """Factory and cache for the three management clients of one subscription."""

    credential: Any
    subscription_id: str
    base_url: str = PUBLIC_ARM
    per_call_policies: list[Any] = field(default_factory=list)
    polling_interval: float = 30.0
    retry_total: int | None = None
    retry_backoff_factor: float | None = None
    transport: Any = None
    credential_scopes: list[str] | None = None
    # Retry-After waits on 429s, shared by every client and thread (throttle.py); `up` resets it
    # to azure.throttle_budget_s.
    throttle: ThrottleBudget = field(default_factory=ThrottleBudget)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def compute(self) -> Any:
        return self._client("compute")

    @property
    def network(self) -> Any:
        return self._client("network")

    @property
    def resources(self) -> Any:
        return self._client("resources")

    @property
    def authorization(self) -> Any:
        return self._client("authorization")

    def client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"base_url": self.base_url, "polling_interval": self.polling_interval,
                              "credential_scopes": self.credential_scopes or [_scope(self.base_url)]}
        if self.per_call_policies:
            kw["per_call_policies"] = list(self.per_call_policies)
        retry: dict[str, Any] = {}
        if self.retry_total is not None:
            retry["retry_total"] = self.retry_total
        if self.retry_backoff_factor is not None:
            retry["retry_backoff_factor"] = self.retry_backoff_factor
        kw["retry_policy"] = retry_policy(self.throttle, **retry)
        if self.transport is not None:
            kw["transport"] = self.transport
        return kw

    def _client(self, which: str) -> Any:
        with self._lock:
            if which not in self._cache:
                self._cache[which] = _new_client(which, self.credential, self.subscription_id,
                                                 self.client_kwargs())
            return self._cache[which]


def clients_from_config(*, subscription_id: str | None = None, arm_endpoint: str | None = None,
                        polling_interval: float | None = None) -> AzureClients:
    """Production clients: DefaultAzureCredential, subscription from config or environment."""
    sub = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID")
    if not sub:
        raise ConfigError("no Azure subscription: set azure.subscription_id in the cluster spec "
                          "or AZURE_SUBSCRIPTION_ID")
    if not GUID.fullmatch(sub.strip()):
        where = "azure.subscription_id" if subscription_id else "AZURE_SUBSCRIPTION_ID"
        raise ConfigError(f"{where} '{sub}' is not a subscription id: expected a GUID such as "
                          "00000000-0000-0000-0000-000000000000")
    from orchestrator.providers.azure_shared.signin import quiet_sdk_loggers
    quiet_sdk_loggers()
    base_url = (arm_endpoint or os.environ.get("AZURE_RESOURCE_MANAGER_ENDPOINT") or PUBLIC_ARM).rstrip("/")
    return AzureClients(credential=default_credential(), subscription_id=sub.strip(), base_url=base_url,
                        polling_interval=polling_interval or 30.0)


def default_credential() -> Any:
    """DefaultAzureCredential (CLI login, managed identity, workload identity, environment).

    Instance discovery is turned off for an authority that is not one of Microsoft's public
    hosts: MSAL would otherwise validate it against login.microsoftonline.com first, which fails
    in sovereign or air-gapped clouds (azure-notes.md §3.5).
    """
    from azure.identity import DefaultAzureCredential
    authority = os.environ.get("AZURE_AUTHORITY_HOST", "")
    host = urlsplit(authority if "//" in authority else f"https://{authority}").hostname or ""
    if authority and host not in PUBLIC_AUTHORITIES:
        return DefaultAzureCredential(disable_instance_discovery=True)
    return DefaultAzureCredential()


def _scope(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/.default"


def _new_client(which: str, credential: Any, subscription_id: str, kw: dict[str, Any]) -> Any:
    if which == "compute":
        from azure.mgmt.compute import ComputeManagementClient
        return ComputeManagementClient(credential, subscription_id, **kw)
    if which == "network":
        from azure.mgmt.network import NetworkManagementClient
        return NetworkManagementClient(credential, subscription_id, **kw)
    if which == "authorization":
        from azure.mgmt.authorization import AuthorizationManagementClient
        return AuthorizationManagementClient(credential, subscription_id, **kw)
    from azure.mgmt.resource.resources import ResourceManagementClient
    return ResourceManagementClient(credential, subscription_id, **kw)
