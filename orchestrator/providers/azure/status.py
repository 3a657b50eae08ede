"""`azbench status NAME` for an Azure cluster without SSH: what ARM reports, reads only.

The cluster's own resource group (azbench-<name>, tagged with it) gives creation time and
expiry; the owner is read from the head's and the scale sets' tags (the group's when they have
none);
the head VM's provisioning state and size; each GPU scale set's provisioning state, capacity,
and its instances' power states from one list call per set (what bills: the head at its own
size, each set's VMs that are not deallocated) (`$expand=instanceView`, as
https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-set-vms/list
documents: without it the list carries no power state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from orchestrator.providers.azure import resources
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.records import ArmResource
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure.lro import observe
from orchestrator.providers.azure.teardown import own_group, tagged_groups
from orchestrator.providers.base import Billed, CloudResource, CloudView
from orchestrator.models import parse_utc
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_CREATED, TAG_EXPIRES, TAG_OWNER


def live_view(clients: AzureClients, name: str, expected_sets: Sequence[str] = (),
              resource_group: str | None = None) -> CloudView:
    """ARM's view of cluster `name` in its own group (`resource_group`, default
    azbench-<name>; another group tagged with it is a decoy, never read as the cluster):
    CloudView(exists=False) when that group is not there; phase "deleting" when it is being
    deleted (nothing more is read), "partial" when the head or one of `expected_sets` (the
    record's) is missing, or something failed. The owner shown is the one the head's and the
    scale sets' owner tags name (only the `up` that ARM answered 201 wrote them: a same-name
    `up`'s later group PUT replaces the group's tags, not theirs), else the group's."""
    rg = own_group(tagged_groups(clients, name), name, resource_group)
    if rg is None:
        return CloudView(exists=False)
    tagged_view = CloudView(exists=True, created=parse_utc(rg.tags.get(TAG_CREATED)),
                            expires=parse_utc(rg.tags.get(TAG_EXPIRES)), owner=rg.tags.get(TAG_OWNER))
    if rg.state == "Deleting":
        return replace(tagged_view, resources=(CloudResource("resource group", rg.name, rg.state, ""),),
                       phase="deleting", phase_detail=f"resource group {rg.name} is being deleted")
    head_name = f"{name}-head"
    head = observe(clients, rg.name, resources.VM, head_name)
    rows = [CloudResource("VM", head_name, head.state if head else "missing", _head_detail(head))]
    with arm_call(f"list scale sets of {rg.name}"):
        sets = sorted((s for s in clients.scale_sets_in(rg.name) if s.tags.get(TAG_CLUSTER) == name),
                      key=lambda s: s.name)
    listed = running = 0
    billed = [Billed("head", head.vm_size or "", 1)] if head is not None else []
    for s in sets:
        powers = _power_states(clients, rg.name, s.name)
        listed += len(powers)
        running += powers.count("running")
        # A deallocated VM bills no compute (a parked or evicted one); any other state does.
        billed.append(Billed("scale set", s.sku_name, len(powers) - powers.count("deallocated"),
                             spot=s.spot is not None))
        counts = ", ".join(f"{powers.count(p)} {p}" for p in sorted(set(powers))) or "none listed"
        rows.append(CloudResource("scale set", s.name, str(s.state),
                                  f"{s.sku_name}, capacity {s.capacity}: {counts}"))
    children = [t.get(TAG_OWNER) for t in ([head.tags] if head is not None else []) + [x.tags for x in sets]]
    owner = next((o for o in children if o), None) or tagged_view.owner
    tagged_view = replace(tagged_view, owner=owner)
    gaps = [f"{r.kind} {r.name} {r.state.lower()}" for r in rows if r.state in ("missing", "Failed")]
    gaps += [f"scale set {s} missing" for s in expected_sets if s not in {x.name for x in sets}]
    return replace(tagged_view, resources=tuple(rows), instances=listed, running=running,
                   phase="partial" if gaps else "", phase_detail=", ".join(gaps), billed=tuple(billed))


def _head_detail(head: ArmResource | None) -> str:
    return (head.vm_size or "") if head is not None else ""


def _power_states(clients: AzureClients, rg: str, scale_set: str) -> list[str]:
    """Each instance's PowerState/<x> as x ("running", "deallocated", ...; "unknown" without one)."""
    with arm_call(f"list VMs of {scale_set}"):
        return [vm.power for vm in clients.set_vms(rg, scale_set, instance_view=True)]
