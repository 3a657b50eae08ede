"""Pure cluster planning for Azure-shaped providers: resources, scale sets, GPUs, cost per hour.

Applies the IB design rules of azure-notes.md §2: one IB fabric per Uniform scale set of at most
`max_vms_per_scale_set` VMs (100 by default), GB200 in whole NVL72 racks, VNet outside
172.16.0.0/16. CPU sizes (the dress rehearsal) keep the scale-set split but none of the IB rules.
No credentials, no network: `azbench up --dry-run` prints exactly this.
"""

from __future__ import annotations

import uuid

from orchestrator.hardware.catalog import SPOT_PRICE_SOURCE, GpuSku, find
from orchestrator.hardware.layout import scale_set_layout
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError
from orchestrator.models import Plan, PlannedResource, ScaleSetPlan
from orchestrator.providers.azure.settings import AzureSettings

# The head's vCPU figure holds for the default head size only: another `azure.head_size` is read at
# `up` (preflight reads its vCPUs from resource SKUs) and the plan says so instead of reusing it.
PRICED_HEAD_SIZE = "Standard_D8s_v5"
HEAD_VCPUS = 8  # Standard_D8s_v5: 8 vCPUs (Azure's Dv5 size table)


def head_price(size: str | None) -> float | None:
    """The head's list price per hour: its size's row of the catalog (Standard_D8s_v5, the
    default, $0.384; D16s_v5 $0.768), None for a size the catalog does not price."""
    row = find(size)
    return row.price_per_hour_usd if row is not None else None


def default_group(cluster: str, resource_group: str | None = None) -> str:
    """The cluster's resource group: azure.resource_group, else `azbench-<cluster>`, or the
    cluster's own name when it already starts with `azbench-` (the default names do), never
    `azbench-azbench-...`."""
    if resource_group:
        return resource_group
    return cluster if cluster.startswith("azbench-") else f"azbench-{cluster}"


def plan_azure(spec: ClusterSpec) -> Plan:
    """The resources `azbench up --provider azure` would create for `spec`."""
    sku, a = spec.sku_row, spec.section(AzureSettings)
    if not sku.is_azure_size:
        raise ConfigError(f"sku '{sku.name}' is not an Azure VM size (see azbench catalog)")
    sets, warnings = _layout(spec, sku)
    resources = _network_resources(spec) + _head_resources(spec)
    resources += [PlannedResource(kind="Microsoft.Compute/virtualMachineScaleSets", name=s.name,
                                  count=s.vms, properties=_vmss_properties(spec, sku, s))
                  for s in sets]
    return Plan(
        cluster=spec.name, provider=spec.provider, sku=sku.name, region=spec.region,
        nodes=spec.nodes, gpus_per_node=sku.gpus_per_vm, total_gpus=spec.nodes * sku.gpus_per_vm,
        scale_sets=sets, resources=resources, cost_per_hour_usd=_cost(spec, sku, warnings),
        preflight=preflight_checks(spec, sku), warnings=warnings, lifetime=azure_lifetime(spec),
        max_hours=a.expires_hours if a.self_expiry else None,
    )


def azure_lifetime(spec: ClusterSpec) -> str:
    """How an Azure cluster ends by itself: its expiry, and the idle rule when one is set."""
    a = spec.section(AzureSettings)
    text = f"expires after {a.expires_hours:g} h"
    if a.idle_minutes:
        text += f" or {a.idle_minutes} min without a Slurm job"
    if not a.self_expiry:
        text += " (azure.self_expiry off: only `azbench sweep` enforces it)"
    return text


def preflight_checks(spec: ClusterSpec, sku: GpuSku) -> list[str]:
    """What `up` checks against Azure before the first PUT, said as checks to come: the plan
    reads nothing (`--dry-run --check` reads them: AzureProvider.check). Only the VNet line,
    computed here, is a result."""
    a = spec.section(AzureSettings)
    vcpus = sku.vcpus * spec.nodes
    arch = "arm64" if sku.cpu_arch == "arm64" else "x64"
    head_known = a.head_size == PRICED_HEAD_SIZE
    head = f"the head's vCPUs ({a.head_size}: its count is read at up)"
    if a.priority == "spot":  # spot vCPUs count against their own regional quota only
        quotas = [f"will check that low-priority quota lowPriorityCores (Total Regional Low-priority vCPUs) has "
                  f"{vcpus:,} free vCPUs ({spec.nodes:,} x {sku.vcpus}, spot)",
                  f"will check that the total regional vCPU quota has {HEAD_VCPUS} free vCPUs (the head)"
                  if head_known else f"will check that the total regional vCPU quota has {head} free"]
    else:
        nodes = "GPU" if sku.gpus_per_vm else "CPU"
        quotas = [f"will check that family quota {sku.quota_family} has {vcpus:,} free vCPUs "
                  f"({spec.nodes:,} x {sku.vcpus})",
                  f"will check that the total regional vCPU quota has {vcpus + HEAD_VCPUS:,} free vCPUs "
                  f"({nodes} nodes + head)" if head_known else
                  f"will check that the total regional vCPU quota has {vcpus:,} free vCPUs ({nodes} nodes) "
                  f"plus {head}"]
    where = f"{spec.region}" + (f" (zones {', '.join(a.zones)})" if a.zones else "")
    return [
        f"will check that {sku.name} is offered in {where} and not restricted for the subscription "
        "(resource SKUs)",
        *quotas,
        f"will check that image {a.image or sku.image} exists for {arch}, Hyper-V Gen2",
        f"VNet {a.vnet_cidr} does not overlap 172.16.0.0/16 (checked: ok)",
    ]


def _layout(spec: ClusterSpec, sku: GpuSku) -> tuple[list[ScaleSetPlan], list[str]]:
    a = spec.section(AzureSettings)
    return scale_set_layout(spec.name, spec.nodes, sku, a.max_vms_per_scale_set, a.vms_per_rack)


def _tags(spec: ClusterSpec) -> dict[str, str | int | bool | None]:
    return {"tag:azbench-cluster": spec.name, "tag:azbench-owner": "<caller at up>",
            "tag:azbench-expires": f"now + {spec.section(AzureSettings).expires_hours:g} h"}


def _network_resources(spec: ClusterSpec) -> list[PlannedResource]:
    a = spec.section(AzureSettings)
    rg = default_group(spec.name, a.resource_group)
    ingress = a.ssh_ingress_cidr or "caller's public address/32 (detected at up)"
    return [
        PlannedResource(kind="Microsoft.Resources/resourceGroups", name=rg,
                        properties={"location": spec.region, **_tags(spec)}),
        PlannedResource(kind="Microsoft.Network/virtualNetworks", name=f"{spec.name}-vnet",
                        properties={"address_space": a.vnet_cidr, **_tags(spec)}),
        PlannedResource(kind="Microsoft.Network/networkSecurityGroups", name=f"{spec.name}-nsg",
                        properties={"allow": "tcp/22", "source": ingress, **_tags(spec)}),
    ]


def _head_resources(spec: ClusterSpec) -> list[PlannedResource]:
    a = spec.section(AzureSettings)
    head = [
        PlannedResource(kind="Microsoft.Network/publicIPAddresses", name=f"{spec.name}-head-ip",
                        properties=_tags(spec)),
        PlannedResource(kind="Microsoft.Compute/virtualMachines", name=f"{spec.name}-head",
                        properties={"size": a.head_size,
                                    "role": "login + slurmctld + NFS (/home, /shared)",
                                    **({"identity": "SystemAssigned"} if a.self_expiry else {}),
                                    **_tags(spec)}),
    ]
    if a.self_expiry:
        head += _self_expiry_role(spec)
    return head


def _self_expiry_role(spec: ClusterSpec) -> list[PlannedResource]:
    """The head identity's one role assignment, on the cluster's own group, so its expiry agent
    can delete the cluster and nothing else: by default a custom role defined for that group
    alone (read the group and its tags, delete the group and what is in it: roles.EXPIRY_ACTIONS),
    else (azure.self_expiry_role: contributor) built-in Contributor there. Role assignment names
    are GUIDs: derived from the group and cluster, so a rerun finds the same one."""
    a = spec.section(AzureSettings)
    rg = default_group(spec.name, a.resource_group)
    idle = f", or {a.idle_minutes} min without a Slurm job" if a.idle_minutes else ""
    custom = a.self_expiry_role == "custom"
    sub = a.subscription_id or "<subscription>"
    out = []
    if custom:
        out.append(PlannedResource(kind="Microsoft.Authorization/roleDefinitions",
                                   name=f"azbench self-expiry {sub}/{rg}",
                                   properties={"actions": "read the group and its tags, delete the group and "
                                                          "its VMs, scale sets, disks, NICs, VNet, IP, NSG",
                                               "assignable": f"resource group {rg} only"}))
    out.append(PlannedResource(kind="Microsoft.Authorization/roleAssignments",
                               name=str(uuid.uuid5(uuid.NAMESPACE_URL, f"azbench:{rg}:{spec.name}:head-expiry")),
                               properties={"role": "azbench self-expiry (custom)" if custom
                                           else "Contributor (azure.self_expiry_role: contributor)",
                                           "scope": f"resource group {rg}",
                                           "principal": f"{spec.name}-head's system-assigned identity",
                                           "purpose": f"the head deletes the cluster at azbench-expires{idle}"}))
    return out


def _vmss_properties(spec: ClusterSpec, sku: GpuSku, s: ScaleSetPlan) -> dict[str, str | int | bool | None]:
    return {"size": sku.name, "orchestration": "Uniform", "single_placement_group": True,
            "platform_fault_domain_count": 1, "overprovision": False,
            "accelerated_networking": True, "gpus": s.gpus, "racks": s.racks,
            "image": spec.section(AzureSettings).image or sku.image, **_spot_properties(spec), **_tags(spec)}


def _spot_properties(spec: ClusterSpec) -> dict[str, str | int | bool | None]:
    a = spec.section(AzureSettings)
    if a.priority != "spot":
        return {}
    return {"priority": "Spot", "eviction_policy": a.eviction_policy.capitalize(),
            "max_price": f"{a.max_price:g} USD/h" if a.max_price != -1 else "-1 (up to pay-as-you-go)"}


def _cost(spec: ClusterSpec, sku: GpuSku, warnings: list[str]) -> float | None:
    a = spec.section(AzureSettings)
    if a.priority != "spot" and a.max_price != -1:
        warnings.append("azure.max_price applies only with azure.priority: spot (ignored)")
    if sku.price_per_hour_usd is None:
        warnings.append(f"no list price known for {sku.name}: cost per hour unknown")
        return None
    head = head_price(a.head_size)
    if head is None:
        warnings.append(f"the head ({a.head_size}) is not priced (not in the catalog): the cost per hour "
                        "counts the nodes only")
    payg = round(spec.nodes * sku.price_per_hour_usd + (head or 0.0), 2)
    spot = sku.spot_price_per_hour_usd(a.max_price)
    if a.priority != "spot" or spot is None:
        return payg
    estimate = sku.spot_price_per_hour_usd()
    if estimate is not None and a.max_price != -1 and a.max_price < estimate:
        warnings.append(f"azure.max_price ${a.max_price:g}/h is below the estimated spot "
                        f"price ${estimate:g}/h: Azure may not allocate the VMs, or evict them early")
    total = round(spec.nodes * spot + (head or 0.0), 2)
    warnings.append(f"spot: ~${total:,.2f}/h estimated vs ${payg:,.2f}/h pay-as-you-go "
                    f"({SPOT_PRICE_SOURCE}); nodes may be evicted with 30 s notice")
    return total
