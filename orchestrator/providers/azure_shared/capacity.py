"""Whether a region can hold new VMs: the size offered and unrestricted for the subscription
(resource SKUs), and the vCPU quotas free (usages). Shared by the azure backend's preflight and
the azureml backend's size check; each says which quotas its VMs draw on.

Restrictions as the Resource SKUs API documents them
(https://learn.microsoft.com/en-us/rest/api/compute/resource-skus/list, ResourceSkuRestrictions):
`type` Location (values: the locations) or Zone (restrictionInfo.locations and .zones), with
`reasonCode` NotAvailableForSubscription or QuotaId. locationInfo.zones still lists a zone
restricted for this subscription, so offered and usable are checked apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure_shared.records import QuotaRow, SkuRow

if TYPE_CHECKING:
    from orchestrator.providers.azure_shared.clients import ArmClients

TOTAL_CORES = "cores"  # the regional total, whatever the family
# Spot VMs count against this regional quota ("Total Regional Low-priority vCPUs") instead of
# the size family's quota and the regional total.
LOW_PRIORITY_QUOTA = "lowPriorityCores"
LABELS = {TOTAL_CORES: "total regional vCPUs",
          LOW_PRIORITY_QUOTA: "Total Regional Low-priority vCPUs (lowPriorityCores)"}


def vm_sizes(arm: ArmClients, region: str) -> dict[str, SkuRow]:
    """The VM sizes the Resource SKUs API lists for `region` (one call), by name."""
    with arm_call(f"list VM sizes in {region}"):
        rows = arm.sku_rows(region)
    return {r.name: r for r in rows if r.resource_type == "virtualMachines"}


def sku_problems(row: SkuRow | None, name: str, region: str, zones: Sequence[str]) -> list[str]:
    """What ARM would refuse for size `name` in `region` (and `zones`), from its row."""
    if row is None or region not in row.locations:
        return [f"{name} is not offered in {region}"]
    out = []
    restricted: set[str] = set()
    reasons: set[str] = set()
    for r in row.restrictions:
        if region not in r.locations:
            continue
        if r.kind == "Location":
            out.append(f"{name} is restricted in {region} for this subscription ({r.reason})")
        elif r.kind == "Zone":
            restricted |= set(r.zones)
            reasons.add(r.reason)
    offered = set(row.zones)
    missing = [z for z in zones if z not in offered]
    if missing:
        out.append(f"{name} is not offered in zone(s) {', '.join(missing)} of {region} "
                   f"(offered: {', '.join(sorted(offered)) or 'none'})")
    refused = [z for z in zones if z in restricted and z in offered]
    if refused:
        usable = sorted(offered - restricted)
        out.append(f"{name} is restricted in zone(s) {', '.join(refused)} of {region} for this subscription "
                   f"({', '.join(sorted(reasons))}; usable zones: {', '.join(usable) or 'none'})")
    return out


def quota_problems(usage: Mapping[str, QuotaRow], wants: Mapping[str, int], region: str,
                   what: str = "quota") -> list[str]:
    """Each quota in `wants` ({quota name: vCPUs}) that `usage` does not list or that has fewer
    vCPUs free than wanted, in one line each ('quota <label> in <region>: ...'; `what` names
    whose quota it is)."""
    out = []
    for family, want in wants.items():
        if not want:
            continue
        label = LABELS.get(family, family)
        row = usage.get(family)
        if row is None:
            out.append(f"{what} {label} in {region}: not listed for this subscription "
                       f"(need {want:,} vCPUs)")
            continue
        if row.free < want:
            out.append(f"{what} {label} in {region}: need {want:,} vCPUs, {row.free:,} free "
                       f"(limit {row.limit:,}, used {row.current:,})")
    return out
