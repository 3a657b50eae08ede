"""Replace and resize the scale-set VMs of a live Azure cluster (the healer and resizer parts).

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
- instances: VirtualMachineScaleSetVMs.list, one call per set (never one GET per VM);
- park and unpark: VirtualMachineScaleSets.begin_deallocate / begin_start with instance ids
  (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/deallocate: no compute
  billed while deallocated; the instance keeps its id and disk).
Errors are classified by HTTP status first (azure_shared/errors.py, arm_call).

A grow stays within Azure's limits and never burns what it cannot get back (`plan_growth`,
decided before any write): it starts the VMs a shrink parked (a shrink deallocates, so a shrink
and a grow back give the same ids and Slurm names, nothing created, nothing deleted), then adds
new VMs to the sets with room, never past a set's Slurm slots (from the next instance id, which
the set's azbench-next-id tag keeps) nor its 100-VM single-placement-group cap, in whole NVL72
racks for GB200, then new sets (the provider creates them, as `up` did). A new VM whose id still
lies beyond its set's slots (an id burned out of azbench's sight) would never join: it is deleted
again and the call fails with CapacityError.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.errors import CapacityError, ConfigError, ProvisionError
from orchestrator.providers.azure_shared.tags import TAG_MAX_VMS, TAG_NEXT_ID, TAG_PARKED, TAG_SLOTS
from orchestrator.providers.base import SetChange
from orchestrator.providers.azure.resources import VMSS, rid


# A scale set with singlePlacementGroup holds at most 100 VMs ("A scale set configured with a
# single placement group has a max capacity of 100 VMs", https://learn.microsoft.com/azure/
# virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups): azbench's sets are,
# so a grow never asks one for more (a set already above it ran under a raised limit: its own
# size is its cap).
SINGLE_PLACEMENT_GROUP_MAX = 100


@dataclass(frozen=True)
class SetView:
    """One scale set now: its capacity, its slurm.conf slots, its VMs (host -> instance id:
    every instance, the parked ones included), the instance ids a shrink parked (deallocated,
    TAG_PARKED), and the next instance id Azure gives as far as azbench has seen (TAG_NEXT_ID,
    else one past the highest listed)."""

    name: str
    sku_name: str
    sku_tier: str | None
    capacity: int
    slots: int | None  # None: made before azbench kept spare slots (no azbench-slots tag)
    hosts: dict[str, int]
    parked: frozenset[int] = frozenset()
    next_id: int = 0
    cap: int = SINGLE_PLACEMENT_GROUP_MAX  # the most VMs it may hold (TAG_MAX_VMS, at most 100 by default)

    @property
    def active(self) -> dict[str, int]:
        """The set's VMs in the cluster: every instance but the parked ones."""
        return {h: i for h, i in self.hosts.items() if i not in self.parked}

    @property
    def room(self) -> int:
        """Slots above the next instance id (ids below it that are gone are never reused)."""
        if self.slots is None:
            return 0
        first = max(self.next_id, max(self.hosts.values(), default=-1) + 1)
        return max(self.slots - first, 0)

    def new_room(self, unit: int = 1) -> int:
        """VMs a grow may add to this set under new ids, in whole `unit`s: within its Slurm
        slots and within the single-placement-group cap (parked VMs count: they hold their
        place in the set)."""
        return min(self.room, max(self.cap - self.capacity, 0)) // unit * unit


@dataclass(frozen=True)
class Growth:
    """What a grow does: per set, the parked instance ids it starts and the VMs it adds under
    new ids (the capacity after), and the new sets it creates (name -> VMs)."""

    start: dict[str, list[int]] = field(default_factory=dict)
    add: dict[str, int] = field(default_factory=dict)
    new_sets: dict[str, int] = field(default_factory=dict)

    def changes(self, sets: Sequence[SetView]) -> list[SetChange]:
        """Each set's VMs in the cluster now and after (`resize --dry-run`), in name order."""
        out = []
        for s in sorted(sets, key=lambda v: v.name):
            more = len(self.start.get(s.name, ())) + self.add.get(s.name, 0)
            if more:
                out.append(SetChange(s.name, len(s.active), len(s.active) + more))
        return out + [SetChange(name, 0, vms) for name, vms in sorted(self.new_sets.items())]


def plan_growth(sets: Sequence[SetView], count: int, cluster: str, *, unit: int = 1,
                new_set_names: Iterable[str] = (), new_set_cap: int | None = None) -> Growth:
    """Where `count` more VMs go, `unit` at a time (an NVL72 rack stays in one set): first the
    VMs a shrink parked (their ids and Slurm slots come back), then new VMs in the sets with
    room (within their slots and the 100-VM cap: `new_room`), in name order, then new sets
    (`new_set_names`, each up to `new_set_cap` in whole units). CapacityError, before anything
    is written, when that is not enough."""
    left = count
    growth = Growth()
    for s in sorted(sets, key=lambda v: v.name):
        parked = sorted(s.parked & set(s.hosts.values()))
        take = min(len(parked) // unit * unit, left // unit * unit)
        if take:
            growth.start[s.name] = parked[:take]
            left -= take
    for s in sorted(sets, key=lambda v: v.name):
        take = min(s.new_room(unit), left // unit * unit)
        if take:
            growth.add[s.name] = take
            left -= take
    cap = new_set_cap if new_set_cap is not None else min((s.cap for s in sets), default=SINGLE_PLACEMENT_GROUP_MAX)
    per_set = cap // unit * unit
    for name in new_set_names:
        if left <= 0 or per_set <= 0:
            break
        take = min(per_set, left // unit * unit)
        growth.new_sets[name] = take
        left -= take
    if left > 0:
        room = sum(len(v) for v in growth.start.values()) + sum(growth.add.values()) + sum(growth.new_sets.values())
        raise CapacityError(f"Azure cluster '{cluster}' can add {room} more VMs, not {count}: its sets' spare "
                            f"slots and the {SINGLE_PLACEMENT_GROUP_MAX}-VM cap allow "
                            f"{', '.join(f'{s.name}: {s.new_room(unit) + len(s.parked)}' for s in sets)}"
                            + (f", new sets {', '.join(growth.new_sets)}" if growth.new_sets else
                               "; its slurm.conf defines no spare set"),
                            hint="`azbench down` and `up` again at the new size")
    return growth


def read_sets(clients: AzureClients, rg: str, names: Iterable[str]) -> list[SetView]:
    """Each named set (one list of the group's sets: capacity, tags) and its VMs (one list call
    per set)."""
    wanted = list(names)
    with arm_call(f"list scale sets of {rg}"):
        listed = {s.name: s for s in clients.scale_sets_in(rg)}
    out = []
    for name in wanted:
        vmss = listed.get(name)
        if vmss is None:
            raise ProvisionError(f"scale set {name} of resource group {rg} is gone",
                                 hint="see `azbench status`; `azbench down` and `up` again")
        with arm_call(f"list VMs of {name}"):
            vms = clients.set_vms(rg, name)
        slots, nxt, most = vmss.tags.get(TAG_SLOTS), vmss.tags.get(TAG_NEXT_ID), vmss.tags.get(TAG_MAX_VMS)
        out.append(SetView(name=name, sku_name=vmss.sku_name, sku_tier=vmss.sku_tier, capacity=vmss.capacity,
                           slots=int(slots) if slots and slots.isdigit() else None,
                           hosts={vm.host: int(vm.instance_id) for vm in vms},
                           parked=frozenset(parse_ids(vmss.tags.get(TAG_PARKED, ""))),
                           next_id=int(nxt) if nxt and nxt.isdigit() else 0,
                           cap=_cap(most, vmss.capacity)))
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


def park(clients: AzureClients, rg: str, sub: str, view: SetView, ids: Sequence[int]) -> None:
    """Take instances out of the cluster without burning their ids: deallocate them (Azure
    bills no compute for a deallocated VM; its OS disk stays, and so does its instance id) and
    add them to the set's TAG_PARKED, so a grow starts them again under the same Slurm names."""
    with arm_call(f"deallocate instances {', '.join(map(str, ids))} of {view.name}"):
        clients.deallocate_instances(rg, view.name, [str(i) for i in ids])
    _tag_set(clients, rg, sub, view.name, {TAG_PARKED: format_ids(view.parked | set(ids))})


def unpark(clients: AzureClients, rg: str, sub: str, view: SetView, ids: Sequence[int]) -> None:
    """Start parked instances again and take them off TAG_PARKED."""
    with arm_call(f"start instances {', '.join(map(str, ids))} of {view.name}"):
        clients.start_instances(rg, view.name, [str(i) for i in ids])
    _tag_set(clients, rg, sub, view.name, {TAG_PARKED: format_ids(view.parked - set(ids))})


def note_next_id(clients: AzureClients, rg: str, sub: str, view: SetView) -> None:
    """Record on the set the next instance id Azure gives, as far as its list now shows."""
    nxt = max(view.next_id, max(view.hosts.values(), default=-1) + 1)
    _tag_set(clients, rg, sub, view.name, {TAG_NEXT_ID: str(nxt)})


def grow(clients: AzureClients, rg: str, sub: str, sets: Sequence[SetView], growth: Growth, cluster: str) -> list[str]:
    """Carry out `growth` on the existing sets (new sets are the provider's: they need the
    cluster's cloud-init): start the parked VMs, then raise capacities; the hosts that joined
    the cluster. A VM that lands beyond its set's slots anyway (an id burned outside azbench's
    sight) is deleted again and CapacityError names the set."""
    by_name = {s.name: s for s in sets}
    started: list[str] = []
    for name, ids in growth.start.items():
        view = by_name[name]
        unpark(clients, rg, sub, view, ids)
        started += [h for h, i in sorted(view.hosts.items(), key=lambda kv: kv[1]) if i in ids]
    for name, add in growth.add.items():
        set_capacity(clients, rg, by_name[name], by_name[name].capacity + add)
    return started + (new_hosts(clients, rg, sub, [by_name[n] for n in growth.add], cluster) if growth.add else [])


def new_hosts(clients: AzureClients, rg: str, sub: str, before: Sequence[SetView], cluster: str) -> list[str]:
    after = read_sets(clients, rg, [s.name for s in before])
    new: list[str] = []
    for old, now in zip(before, after):
        fresh = {h: i for h, i in now.hosts.items() if h not in old.hosts}
        outside = sorted(i for i in fresh.values() if now.slots is not None and i >= now.slots)
        note_next_id(clients, rg, sub, now)
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


def _cap(tag: str | None, capacity: int) -> int:
    """A set's cap: its azbench-max-vms tag, else the single-placement-group 100; a set already
    above that ran under a limit Azure support raised: its own size is its cap."""
    most = int(tag) if tag and tag.isdigit() else SINGLE_PLACEMENT_GROUP_MAX
    return most if most <= SINGLE_PLACEMENT_GROUP_MAX else max(capacity, SINGLE_PLACEMENT_GROUP_MAX)


def parse_ids(text: str) -> list[int]:
    """"4-7,12" -> [4, 5, 6, 7, 12]; anything unreadable is left out."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out += list(range(int(lo), int(hi or lo) + 1))
    return out


def format_ids(ids: Iterable[int]) -> str:
    """[4, 5, 6, 7, 12] -> "4-7,12" (a tag value holds at most 256 characters: ranges keep a
    100-VM set's ids well inside it)."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _tag_set(clients: AzureClients, rg: str, sub: str, name: str, tags: dict[str, str]) -> None:
    with arm_call(f"tag scale set {name}"):
        clients.merge_tags(rid(sub, rg, VMSS, name), tags)
