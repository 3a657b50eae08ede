"""Replace and resize the scale-set VMs of a live Azure cluster (capabilities replaces_nodes, resizes).

Slurm side (cloudinit.slot_count): slurm.conf defines, per scale set, the VMs `up` made plus
spare instance-id slots in state FUTURE, and the set carries their count as its azbench-slots
tag. Azure gives a new instance the next unused instance id and the computer name
prefix + base-36 id (cloudinit.node_hostnames), so a VM made later is already a node slurm.conf
knows: its cloud-init (the same customData as every node) starts slurmd, slurmd registers, and
Slurm turns the FUTURE node idle. Nothing is re-rendered and slurmctld is not restarted. The
same holds for a spot VM that the `delete` eviction policy removed and a restore brought back
under a new id (spot.py). A retired node goes DOWN, then FUTURE (hidden, never scheduled).

ARM side, all through azure-mgmt-compute (clients.py makes the calls):
- delete instances: VirtualMachineScaleSets.begin_delete_instances (POST .../delete,
  https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-sets/delete-instances):
  the instances go and the set's capacity drops by as many;
- capacity: VirtualMachineScaleSets.begin_update with sku.capacity (PATCH,
  https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-sets/update: "sku.capacity:
  Specifies the number of virtual machines in the scale set"), which creates the missing
  instances under new ids;
- instances: VirtualMachineScaleSetVMs.list, one call per set (never one GET per VM).
Errors are classified by HTTP status first (azure_shared/errors.py, arm_call). A new VM whose id lies beyond the
set's slots would never join: it is deleted again and the call fails with CapacityError.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.errors import CapacityError, ConfigError, ProvisionError
from orchestrator.providers.azure_shared.tags import TAG_SLOTS


@dataclass(frozen=True)
class SetView:
    """One scale set now: its capacity, its slurm.conf slots and its VMs (host -> instance id)."""

    name: str
    sku_name: str
    sku_tier: str | None
    capacity: int
    slots: int | None  # None: made before azbench kept spare slots (no azbench-slots tag)
    hosts: dict[str, int]

    @property
    def room(self) -> int:
        """Slots above the highest id in use (ids below it that are gone are never reused)."""
        if self.slots is None:
            return 0
        return max(self.slots - (max(self.hosts.values(), default=-1) + 1), 0)


def read_sets(clients: AzureClients, rg: str, names: Iterable[str]) -> list[SetView]:
    """Each set's GET (capacity, tags) and VM list: two calls per set."""
    out = []
    for name in names:
        with arm_call(f"read scale set {name}"):
            vmss = clients.scale_set(rg, name)
            vms = clients.set_vms(rg, name)
        slots = vmss.tags.get(TAG_SLOTS)
        out.append(SetView(name=name, sku_name=vmss.sku_name, sku_tier=vmss.sku_tier, capacity=vmss.capacity,
                           slots=int(slots) if slots and slots.isdigit() else None,
                           hosts={vm.host: int(vm.instance_id) for vm in vms}))
    return out


def find_host(sets: Sequence[SetView], host: str, cluster: str) -> tuple[SetView, int]:
    for s in sets:
        if host in s.hosts:
            return s, s.hosts[host]
    raise ConfigError(f"Azure cluster '{cluster}' has no node {host!r} in its scale sets "
                      f"({', '.join(s.name for s in sets)})")


def delete_instances(clients: AzureClients, rg: str, scale_set: str, ids: Sequence[int]) -> None:
    with arm_call(f"delete instances {', '.join(map(str, ids))} of {scale_set}"):
        clients.delete_instances(rg, scale_set, [str(i) for i in ids])


def set_capacity(clients: AzureClients, rg: str, view: SetView, capacity: int) -> None:
    with arm_call(f"set the capacity of {view.name} to {capacity} VMs"):
        clients.set_capacity(rg, view.name, view.sku_name, view.sku_tier, capacity)


def grow(clients: AzureClients, rg: str, sets: Sequence[SetView], count: int, cluster: str, unit: int = 1) -> list[str]:
    """Add `count` VMs across the sets with spare slots (roomiest first), `unit` at a time
    (an NVL72 rack stays in one set); the new hosts. A VM that lands beyond its set's slots is
    deleted again and CapacityError names the set."""
    plan: dict[str, int] = {}
    left = count
    for s in sorted(sets, key=lambda v: -v.room):
        take = min(s.room // unit * unit, left)
        if take:
            plan[s.name] = take
            left -= take
    if left:
        room = sum(s.room for s in sets)
        raise CapacityError(f"Azure cluster '{cluster}' can add {room} more VMs: its slurm.conf defines "
                            f"no more spare slots ({', '.join(f'{s.name}: {s.room}' for s in sets)})",
                            hint="`azbench down` and `up` again at the new size")
    by_name = {s.name: s for s in sets}
    for name, add in plan.items():
        set_capacity(clients, rg, by_name[name], by_name[name].capacity + add)
    return new_hosts(clients, rg, [by_name[n] for n in plan], cluster)


def new_hosts(clients: AzureClients, rg: str, before: Sequence[SetView], cluster: str) -> list[str]:
    after = read_sets(clients, rg, [s.name for s in before])
    new: list[str] = []
    for old, now in zip(before, after):
        fresh = {h: i for h, i in now.hosts.items() if h not in old.hosts}
        outside = sorted(i for i in fresh.values() if now.slots is not None and i >= now.slots)
        if outside:
            delete_instances(clients, rg, now.name, outside)
            raise CapacityError(f"scale set {now.name} of '{cluster}' gave instance ids "
                                f"{', '.join(map(str, outside))}, beyond the {now.slots} slots its "
                                "slurm.conf defines: those VMs could not join Slurm and were deleted",
                                hint="`azbench down` and `up` again at the new size")
        new += sorted(fresh, key=lambda h: fresh[h])
    if not new:
        raise ProvisionError(f"Azure added no VM to {', '.join(s.name for s in before)} of '{cluster}'")
    return new
