"""Guest Health Reporting (preview): tell Azure that a node the health gate drained is unhealthy.

Built only from the documentation, https://learn.microsoft.com/en-us/azure/azure-impact-reporting/
guest-health-impact-report ("Report node health by using Guest Health Reporting"):
- `PUT {arm}/subscriptions/{subscriptionId}/providers/Microsoft.Impact/workloadImpacts/{impactName}
  ?api-version=2025-01-01-preview`; the impact name must be unique (a reused one gets no 200);
- body `{"properties": {startDateTime, impactCategory, impactDescription, impactedResourceId,
  additionalProperties: {PhysicalHostName, ...}}}`, all five required, field names case
  sensitive (camelCase at the top, PascalCase in additionalProperties);
- `impactCategory` from the documented HPC list: `Resource.Hpc.Unhealthy.IBPerformance`
  ("Degraded InfiniBand performance") for a failed or slow collective on a size with
  InfiniBand, else `Resource.Hpc.Unhealthy.HpcGenericFailure` ("Issue doesn't fall into any
  other category");
- 200: accepted (not a promise of repair); 4xx: failed validation; 429: retry later. Errors are
  classified by HTTP status first (azure_shared/errors.py, arm_call).
- `PhysicalHostName` is "available in metadata": the page reads it inside the VM from Hyper-V
  KVP (its linked kvp_client.c). Each node's cloud-init copies it, once at boot, to
  /shared/azbench/hosts/<hostname>.physical (templates/cloud-init-node.yaml.j2); a node without
  one (no KVP: an emulated VM) is not reported, and the result says why.
The subscription must be allow-listed for the preview (the page's onboarding): ARM's refusal is
reported per node, the replacement goes on.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call

ImpactBody = dict[str, dict[str, object]]  # {"properties": {...}}: JSON

API_VERSION = "2025-01-01-preview"
IB_PERFORMANCE = "Resource.Hpc.Unhealthy.IBPerformance"
GENERIC = "Resource.Hpc.Unhealthy.HpcGenericFailure"
HOSTS_DIR = "/shared/azbench/hosts"


def category(reason: str, has_ib: bool) -> str:
    """The documented HPC impact category for a gate reason (see the module docstring)."""
    return IB_PERFORMANCE if has_ib and reason.lstrip().startswith("collective") else GENERIC


def impact_body(*, start: datetime, category: str, description: str, resource_id: str,
                physical_host: str) -> ImpactBody:
    """The request body, exactly the documented shape (module docstring)."""
    stamp = start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"properties": {"startDateTime": stamp, "impactCategory": category,
                           "impactDescription": description[:1000], "impactedResourceId": resource_id,
                           "additionalProperties": {"PhysicalHostName": physical_host}}}


def impact_name(cluster: str, node: str) -> str:
    """Unique per report, as the page requires, and still readable."""
    return f"azbench-{cluster}-{node}-{uuid.uuid4().hex[:12]}"


def report(clients: AzureClients, name: str, body: ImpactBody) -> None:
    """PUT the impact through the resources client's pipeline (credential, retries, policies)."""
    url = (f"{clients.base_url}/subscriptions/{clients.subscription_id}/providers/Microsoft.Impact/"
           f"workloadImpacts/{name}")
    with arm_call(f"report {name} to Azure Guest Health Reporting"):
        clients.put_json(url, API_VERSION, body)


def now() -> datetime:
    return datetime.now(timezone.utc)
