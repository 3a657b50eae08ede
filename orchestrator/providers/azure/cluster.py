"""The Azure cluster record: one `to_cluster` for what `up` made and what `describe` reads back.

`up` and `describe` each gather the same facts (`Found`: the resource group and its tags, the
GPU scale sets, the head's addresses, the node image, the spot terms), `up` from what it just
created and `describe` from ARM, and both build the Cluster here, so a cluster recorded
through either carries the same AzureProps (the spot report reads its priority). The tags are
the truth for owner, expiry, creation time and the spot restore timeout. `provisional` is the
record stored before `up` creates anything: where `down` finds the resources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator import paths
from orchestrator.hardware.catalog import GpuSku, find
from orchestrator.providers.azure.plan import head_price
from orchestrator.providers.azure import cloudinit
from orchestrator.providers.azure import resources
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.models import Cluster, ClusterState, Plan, ScaleSetPlan, SshTarget, parse_utc
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure_shared.endpoints import arm_endpoint as resolve_endpoint
from orchestrator.providers.azure_shared.tags import TAG_CREATED, TAG_EXPIRES, TAG_OWNER, TAG_SPOT_RESTORE


@dataclass(frozen=True)
class Found:
    """What Azure holds for one cluster. `sku` is None before any scale set exists; `spot` is
    None for regular priority; `tags` are the resource group's."""

    name: str
    region: str | None
    resource_group: str
    tags: Mapping[str, str]
    subscription_id: str
    arm_endpoint: str
    sku: str | None = None
    sets: tuple[ScaleSetPlan, ...] = ()
    head_ip: str | None = None
    head_private_ip: str | None = None
    image: str | None = None
    admin_user: str = "azureuser"
    spot: resources.SpotTerms | None = None
    # The scale-set VMs' computer names as ARM lists them (describe); None: a fresh cluster's,
    # instance ids 0..n-1 (up). They differ once a node was replaced, added or removed.
    hosts: tuple[str, ...] | None = None
    vms_per_rack: int | None = None  # GB200: the VMs per NVL72 rack of the layout
    head_size: str | None = None  # the head VM's size (None: not read)


def to_cluster(found: Found, state: ClusterState) -> Cluster:
    """The Cluster record of `found`. Its SSH login is set once the head has an address and
    azbench holds the keys (the cluster directory's admin key and pinned known_hosts)."""
    row = find(found.sku)
    cdir = paths.cluster_dir(found.name)
    ssh = None
    if found.head_ip and (cdir / cloudinit.ADMIN_KEY).exists() and (cdir / cloudinit.KNOWN_HOSTS).exists():
        ssh = SshTarget(host=found.head_ip, port=22, user=found.admin_user, key_path=cdir / cloudinit.ADMIN_KEY,
                        known_hosts=cdir / cloudinit.KNOWN_HOSTS)
    nodes = sum(s.vms for s in found.sets)
    created = parse_utc(found.tags.get(TAG_CREATED))
    restore = found.tags.get(TAG_SPOT_RESTORE)
    props = AzureProps(
        subscription_id=found.subscription_id, resource_group=found.resource_group,
        arm_endpoint=found.arm_endpoint, head_ip=found.head_ip, head_private_ip=found.head_private_ip,
        scale_sets=[s.name for s in found.sets], image=found.image,
        owner=found.tags.get(TAG_OWNER), expires=found.tags.get(TAG_EXPIRES),
        priority="spot" if found.spot else "regular",
        eviction_policy=found.spot.eviction_policy if found.spot else None,
        spot_restore_timeout=int(restore) if found.spot and restore and restore.isdigit() else None,
        vms_per_rack=found.vms_per_rack, head_size=found.head_size)
    return Cluster(name=found.name, provider="azure", sku=found.sku or "unknown", nodes=nodes,
                   region=found.region, state=state,
                   node_names=list(found.hosts) if found.hosts is not None else
                   [h for s in found.sets for h in cloudinit.node_hostnames(s)],
                   partition=cloudinit.PARTITION, workdir=cloudinit.WORKDIR,
                   env=cloudinit.recipe_env(row) if row else {}, ssh=ssh,
                   cost_per_hour_usd=hourly_cost(row, nodes, found.spot, found.head_size),
                   properties=props, **({"created_at": created} if created else {}))


def provisional(spec: ClusterSpec, plan: Plan, *, subscription_id: str | None = None,
                arm_endpoint: str | None = None) -> Cluster:
    """The PROVISIONING record: the subscription, ARM endpoint (the spec's, else the
    environment's, as `up` resolves them) and resource group `down` deletes from, and the
    planned scale sets. Reads no network and no credential."""
    a = spec.section(AzureSettings)
    sub = subscription_id or a.subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID")
    endpoint = resolve_endpoint(arm_endpoint or a.arm_endpoint)
    spot = a.priority == "spot"
    props = AzureProps(subscription_id=sub, arm_endpoint=endpoint.rstrip("/") if endpoint else None,
                       resource_group=resources.names_from_plan(plan).rg, head_size=a.head_size,
                       scale_sets=[s.name for s in plan.scale_sets], priority=a.priority,
                       eviction_policy=a.eviction_policy if spot else None,
                       spot_restore_timeout=a.spot_restore_timeout if spot else None)
    racks = [cloudinit.rack_of(spec.sku_row, s) for s in plan.scale_sets]
    props = props.model_copy(update={"vms_per_rack": racks[0] if racks and racks[0] > 1 else None})
    return Cluster(name=spec.name, provider="azure", sku=plan.sku, nodes=plan.nodes, region=plan.region,
                   state=ClusterState.PROVISIONING, cost_per_hour_usd=plan.cost_per_hour_usd,
                   properties=props)


def hourly_cost(row: GpuSku | None, nodes: int, spot: resources.SpotTerms | None,
                head_size: str | None) -> float | None:
    """List-price estimate per hour: the nodes (spot estimate under max_price for spot) plus the
    head at its own size's price (plan.head_price; nothing where that is unknown: the plan
    and `status` say so); the planner's figure for the same cluster."""
    if row is None or row.price_per_hour_usd is None:
        return None
    per_vm = row.spot_price_per_hour_usd(spot.max_price) if spot else None
    if per_vm is None:
        per_vm = row.price_per_hour_usd
    return round(nodes * per_vm + (head_price(head_size) or 0.0), 2)
