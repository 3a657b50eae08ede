"""The Azure provider's live part: ARM's view of a cluster without a login (one cluster's
states, or every cluster of this home from one listing of each kind), and its VMs' states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from orchestrator.models import Cluster, parse_utc
from orchestrator.providers.azure import records, resources
from orchestrator.providers.azure import status
from orchestrator.providers.azure.core import AzureCore, rg_of
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.readback import billed_of
from orchestrator.providers.azure.teardown import own_group, tag_filter, tagged_groups
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_CREATED, TAG_EXPIRES, TAG_OWNER
from orchestrator.providers.base import CloudNode, CloudResource, CloudView


class AzureLive(AzureCore):
    """`node_states`, `live_view` and `overview` (ProviderParts.live)."""

    def overview(self, clusters: Sequence[Cluster]) -> dict[str, CloudView]:
        """ARM's view of `clusters` from one listing of the subscription's azbench groups and one
        of its azbench resources (states expanded), per subscription and endpoint: whether each
        still exists, is being deleted or is partly there, its tags' creation time, expiry and
        owner, and what bills (scale sets' VMs not parked, the head at its recorded size)."""
        out: dict[str, CloudView] = {}
        by_account: dict[tuple[str | None, str | None], list[Cluster]] = {}
        for c in clusters:
            props = c.properties_as(AzureProps)
            by_account.setdefault((props.subscription_id, props.arm_endpoint), []).append(c)
        for (sub, endpoint), group in by_account.items():
            clients = self.clients or self._built_clients(sub, endpoint, None)
            groups = tagged_groups(clients)
            with arm_call("list resources by tag"):
                listed = clients.tagged_resources(tag_filter(), states=True)
            for c in group:
                out[c.name] = _overview(c, [g for g in groups if g.tags.get(TAG_CLUSTER) == c.name],
                                        [r for r in listed if r.tags.get(TAG_CLUSTER) == c.name])
        return out

    def node_states(self, cluster: Cluster) -> list[CloudNode]:
        """One row per VM from one list call per scale set (never one GET per VM)."""
        clients = self._clients_for(cluster.name, cluster)
        props = cluster.properties_as(AzureProps)
        rg = rg_of(cluster)
        out: list[CloudNode] = []
        for s in props.scale_sets:
            with arm_call(f"list VMs of {s}"):
                vms = clients.set_vms(rg, s)
            out += [CloudNode(name=vm.host, scale_set=s, state=str(vm.state)) for vm in vms]
        return out

    def live_view(self, cluster: Cluster) -> CloudView:
        """ARM's view, no SSH and no writes: VM and scale-set states, instances, tags (status.py)."""
        expected = cluster.properties_as(AzureProps).scale_sets if isinstance(cluster.properties, AzureProps) else []
        group = cluster.properties_as(AzureProps).resource_group if isinstance(cluster.properties, AzureProps) else None
        return status.live_view(self._clients_for(cluster.name, cluster), cluster.name, expected, group)


def _overview(cluster: Cluster, groups: list[records.Group], listed: list[records.Tagged]) -> CloudView:
    """One cluster's CloudView from the subscription's listings (AzureProvider.overview)."""
    props = cluster.properties_as(AzureProps)
    own = own_group(groups, cluster.name, props.resource_group)  # other tagged groups are decoys
    groups = [own] if own is not None else []
    listed = [r for r in listed if own is not None and r.group.lower() == own.name.lower()]
    if not groups:
        return CloudView(exists=False)
    tags = groups[0].tags
    # The owner the resources' tags name (a same-name `up`'s group PUT cannot reach them).
    owner = next((r.tags[TAG_OWNER] for r in listed if r.tags.get(TAG_OWNER)), None) or tags.get(TAG_OWNER)
    base = CloudView(exists=True, created=parse_utc(tags.get(TAG_CREATED)), expires=parse_utc(tags.get(TAG_EXPIRES)),
                     owner=owner)
    deleting = [g for g in groups if g.state == "Deleting"]
    if deleting:
        return replace(base, phase="deleting", phase_detail=f"resource group {deleting[0].name} is being deleted",
                       resources=tuple(CloudResource("resource group", g.name, g.state, "") for g in deleting))
    rows = [CloudResource(r.type.rsplit("/", 1)[-1], r.name, r.state or "Succeeded",
                          f"{r.sku}, capacity {r.capacity}" if r.capacity is not None else "")
            for r in listed if r.type.lower() in (resources.VM.lower(), resources.VMSS.lower())]
    names = {r.name for r in listed}
    gaps = [f"{r.kind} {r.name} failed" for r in rows if r.state == "Failed"]
    gaps += [f"scale set {s} missing" for s in props.scale_sets if s not in names]
    if f"{cluster.name}-head" not in names:
        gaps.append(f"VM {cluster.name}-head missing")
    billed = tuple(b for b in (billed_of(r, props) for r in listed) if b is not None)
    return replace(base, resources=tuple(rows), phase="partial" if gaps else "", phase_detail=", ".join(gaps),
                   billed=billed)
