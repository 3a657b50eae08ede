"""The Azure cluster read back from ARM (describe and adopt): its scale sets and their VMs but
the parked ones, the group's tags, the head's addresses and size, then cluster.py's one
to_cluster; and what a listed resource bills (holdings and overview).
"""

from __future__ import annotations

import os

from orchestrator.models import ClusterState, Cluster, ScaleSetPlan
from orchestrator.providers.azure import records, resources
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.cluster import Found, to_cluster
from orchestrator.providers.azure.heal import parse_ids
from orchestrator.providers.azure.lro import observe
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.spot import read_set
from orchestrator.providers.azure.up import Prefetched
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_PARKED, TAG_RACK
from orchestrator.providers.base import Billed


def billed_of(item: records.Tagged, props: AzureProps) -> Billed | None:
    """What a listed resource bills by the hour: a scale set its VMs but the parked ones (the
    listing carries its size and capacity), the head VM its recorded size ("" when the record
    has none: not priced) unless it failed to be created; None for the rest."""
    if item.type.lower() == resources.VMSS.lower():
        parked = len(parse_ids(item.tags.get(TAG_PARKED, "")))
        return Billed("scale set", item.sku, max((item.capacity or 0) - parked, 0), spot=props.is_spot)
    if item.type.lower() == resources.VM.lower():
        # A VM whose creation failed (AllocationFailed: no hardware was given) bills no compute.
        return Billed("head", props.head_size or "", 0 if item.state == "Failed" else 1)
    return None


def read_back(name: str, rg: records.Group, clients: AzureClients, keep: Prefetched | None = None) -> Cluster:
    with arm_call(f"list scale sets of {rg.name}"):
        sets = clients.scale_sets_in(rg.name)
    if keep is not None:
        keep.sets = sets
    return described(name, rg, sets, clients, keep)


def described(name: str, rg: records.Group, sets: list[records.ScaleSet], clients: AzureClients,
               keep: Prefetched | None = None) -> Cluster:
    """Read what `up` knew from ARM: the scale sets tagged with the cluster (their VMs but the
    parked ones), the resource group's tags, the head's public and private addresses and its
    size; then the one to_cluster."""
    ours = sorted((s for s in sets if s.tags.get(TAG_CLUSTER) == name), key=lambda s: s.name)
    states = {str(s.state) for s in ours}
    state = (ClusterState.FAILED if "Failed" in states else
             ClusterState.READY if ours and states == {"Succeeded"} else ClusterState.PROVISIONING)
    pip = observe(clients, rg.name, resources.PIP, f"{name}-head-ip")
    nic = observe(clients, rg.name, resources.NIC, f"{name}-head-nic")
    head = observe(clients, rg.name, resources.VM, f"{name}-head")
    if keep is not None:
        keep.pip = pip
    hosts: list[str] = []
    vms: dict[str, int] = {}
    for s in ours:
        parked = {str(i) for i in parse_ids(s.tags.get(TAG_PARKED, ""))}
        listed = read_set(clients, rg.name, s.name)
        active = [h for h, i in zip(listed.hosts, listed.instance_ids) if i not in parked]
        hosts += active
        vms[s.name] = len(active)
    first = ours[0] if ours else None
    found = Found(name=name, region=first.location if first else rg.location, resource_group=rg.name,
                  tags=rg.tags, subscription_id=clients.subscription_id, arm_endpoint=clients.base_url,
                  sku=first.sku_name if first else None,
                  sets=tuple(ScaleSetPlan(name=s.name, vms=vms[s.name], gpus=0) for s in ours),
                  head_ip=pip.public_ip if pip else None, head_private_ip=nic.private_ip if nic else None,
                  image=first.image if first else None, admin_user=_admin(ours),
                  spot=first.spot if first else None, hosts=tuple(hosts), vms_per_rack=_rack(ours),
                  head_size=head.vm_size if head else None)
    return to_cluster(found, state)


def _rack(sets: list[records.ScaleSet]) -> int | None:
    """The VMs per NVL72 rack the sets' azbench-rack-vms tag says (GB200 sets made before the
    tag have none: None)."""
    for s in sets:
        value = s.tags.get(TAG_RACK, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return None


def _admin(sets: list[records.ScaleSet]) -> str:
    """The admin user of the first set that names one, else the default `up` would use."""
    for s in sets:
        if s.admin_user:
            return s.admin_user
    return os.environ.get("AZBENCH_ADMIN_USER", "azureuser")
