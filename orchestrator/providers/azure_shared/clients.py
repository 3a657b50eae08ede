"""The ARM connection both Azure backends build their management clients from.

`ArmClients` holds the credential, subscription, ARM endpoint (sovereign clouds, and the tests'
fake), per-call policies, the LRO polling interval, azure-core's retry settings and the shared
throttle budget (throttle.py), and builds each management client once, lazily, so the SDKs load
only when used. It builds the Compute RP client, which both backends read (resource SKUs, vCPU
usages: `sku_rows`, `vcpu_usages`, and the signed-in principal's ARM token, `arm_token`: the shared
SDK edge with records.py); azure/clients.py's AzureClients adds the network, resources and
authorization clients.
`arm_from_config` resolves what production passes: a DefaultAzureCredential (signin.py), the
subscription from the spec or AZURE_SUBSCRIPTION_ID, the endpoint from the spec or
AZURE_RESOURCE_MANAGER_ENDPOINT. The SDK classes are imported for the type checker only; at
run time azure.* loads inside the functions that build a client.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

from orchestrator.errors import ConfigError
from orchestrator.providers.azure_shared.endpoints import PUBLIC_ARM, arm_scope
from orchestrator.providers.azure_shared.endpoints import arm_endpoint as resolve_endpoint
from orchestrator.providers.azure_shared.records import QuotaRow, SkuRow, compute_usage, sku_row
from orchestrator.providers.azure_shared.throttle import ThrottleBudget, retry_policy
from orchestrator.providers.azure_shared.signin import default_credential, quiet_sdk_loggers

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential
    from azure.core.pipeline.policies import HTTPPolicy, RetryPolicy, SansIOHTTPPolicy
    from azure.core.pipeline.transport import HttpTransport
    from azure.core.rest import HttpRequest, HttpResponse
    from azure.mgmt.compute import ComputeManagementClient

    Policy = SansIOHTTPPolicy[HttpRequest, HttpResponse] | HTTPPolicy[HttpRequest, HttpResponse]

GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
C = TypeVar("C")
A = TypeVar("A", bound="ArmClients")


class ClientOptions(TypedDict, total=False):
    """The keyword arguments every azure-mgmt client of one connection gets."""

    base_url: str
    polling_interval: float
    credential_scopes: list[str]
    per_call_policies: list[Policy]
    retry_policy: RetryPolicy[HttpRequest, HttpResponse]
    transport: HttpTransport[HttpRequest, HttpResponse]


@dataclass
class ArmClients:
    """Factory and cache for the management clients of one subscription (thread-safe)."""

    credential: TokenCredential
    subscription_id: str
    base_url: str = PUBLIC_ARM
    per_call_policies: list[Policy] = field(default_factory=list)
    polling_interval: float = 30.0
    retry_total: int | None = None
    retry_backoff_factor: float | None = None
    transport: HttpTransport[HttpRequest, HttpResponse] | None = None
    credential_scopes: list[str] | None = None
    # Retry-After waits on 429s, shared by every client and thread (throttle.py); `up` resets it
    # to azure.throttle_budget_s.
    throttle: ThrottleBudget = field(default_factory=ThrottleBudget)
    _cache: dict[str, object] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def compute(self) -> ComputeManagementClient:
        return self._cached("compute", _compute_client)

    def sku_rows(self, region: str) -> list[SkuRow]:
        """The Resource SKUs API's rows for `region` (one call; only the location filter is supported)."""
        return [sku_row(s) for s in self.compute.resource_skus.list(filter=f"location eq '{region}'")]

    def vcpu_usages(self, region: str) -> list[QuotaRow]:
        """The subscription's Compute RP vCPU quotas in `region` (one usages call)."""
        return [compute_usage(u) for u in self.compute.usage.list(region)]

    def arm_token(self) -> str:
        """An access token of the credential for this connection's ARM scope."""
        return self.credential.get_token(*(self.credential_scopes or [arm_scope(self.base_url)])).token

    def client_kwargs(self) -> ClientOptions:
        kw = ClientOptions(base_url=self.base_url, polling_interval=self.polling_interval,
                           credential_scopes=self.credential_scopes or [arm_scope(self.base_url)])
        if self.per_call_policies:
            kw["per_call_policies"] = list(self.per_call_policies)
        kw["retry_policy"] = retry_policy(self.throttle, retry_total=self.retry_total,
                                          retry_backoff_factor=self.retry_backoff_factor)
        if self.transport is not None:
            kw["transport"] = self.transport
        return kw

    def _cached(self, which: str, build: Callable[[ArmClients], C]) -> C:
        """The client `build` makes for this connection, made once (under the lock)."""
        with self._lock:
            if which not in self._cache:
                self._cache[which] = build(self)
            return cast(C, self._cache[which])


def arm_from_config(kind: type[A], *, subscription_id: str | None = None, arm_endpoint: str | None = None,
                    polling_interval: float | None = None) -> A:
    """Production clients of class `kind`: DefaultAzureCredential, the subscription and ARM
    endpoint from the spec, else the environment. ConfigError naming the setting that is
    missing or not a subscription id."""
    sub = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID")
    if not sub:
        raise ConfigError("no Azure subscription: set azure.subscription_id in the cluster spec "
                          "or AZURE_SUBSCRIPTION_ID")
    if not GUID.fullmatch(sub.strip()):
        where = "azure.subscription_id" if subscription_id else "AZURE_SUBSCRIPTION_ID"
        raise ConfigError(f"{where} '{sub}' is not a subscription id: expected a GUID such as "
                          "00000000-0000-0000-0000-000000000000")
    quiet_sdk_loggers()
    base_url = resolve_endpoint(arm_endpoint) or PUBLIC_ARM
    return kind(credential=default_credential(), subscription_id=sub.strip(), base_url=base_url,
                polling_interval=polling_interval or 30.0)


def _compute_client(arm: ArmClients) -> ComputeManagementClient:
    from azure.mgmt.compute import ComputeManagementClient
    return ComputeManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())
