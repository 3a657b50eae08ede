"""Spot capacity after an eviction: bring each GPU scale set back to its planned size.

An evicted spot VM is either deleted (eviction policy `delete`: the instance disappears and the
set's capacity drops) or deallocated (`deallocate`: the instance stays, stopped). `restore`
PATCHes the set's sku.capacity back to the planned count (Azure creates new instances, with new
instance ids) and starts the deallocated ones, then lists the set again. While Azure has no spot
capacity (AllocationFailed and friends) it retries every `wait_s` until `timeout_s` has passed,
then raises CapacityError saying how many VMs each set is short. One list call per scale set per
try; never one GET per VM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.heal import parse_ids
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.errors import CapacityError
from orchestrator.providers.azure_shared.tags import TAG_PARKED


@dataclass(frozen=True)
class SetState:
    """What one scale set holds now: instance ids, the deallocated ones, their computer names."""

    name: str
    instance_ids: tuple[str, ...]
    deallocated: tuple[str, ...]
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Restored:
    """One scale set after `restore`: VMs added back, VMs started, hostnames now in the set."""

    name: str
    added: int
    started: int
    hosts: tuple[str, ...]


def read_set(clients: AzureClients, rg: str, name: str) -> SetState:
    """The scale set's instances and power states from one list call."""
    with arm_call(f"list VMs of {name}"):
        vms = clients.set_vms(rg, name, instance_view=True)
    return SetState(name, tuple(vm.instance_id for vm in vms), tuple(vm.instance_id for vm in vms if vm.deallocated),
                    tuple(vm.host for vm in vms))


def await_eviction(clients: AzureClients, rg: str, sets: list[str], hosts: set[str], *, timeout_s: float,
                   poll_s: float = 5.0, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> set[str]:
    """Until none of `hosts` is a running instance of `sets` (deleted, or deallocated), at most
    `timeout_s`; the ones still running then. The agent acknowledges a Preempt event once the
    job has left and Azure evicts on the acknowledgement or at NotBefore (Scheduled Events:
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Preempt", minimum notice
    30 seconds), so the job's end comes before the eviction. One list call per set per poll."""
    deadline, waited = clock() + timeout_s, 0.0
    while True:
        up = set()
        for name in sets:
            state = read_set(clients, rg, name)
            off = set(state.deallocated)
            up |= {h for h, i in zip(state.hosts, state.instance_ids) if h in hosts and i not in off}
        # Both the time slept and the wall clock count, as in `restore`.
        if not up or waited + poll_s > timeout_s or clock() + poll_s > deadline:
            return up
        sleep(poll_s)
        waited += poll_s


def restore(clients: AzureClients, rg: str, planned: dict[str, int], *, timeout_s: float, wait_s: float,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> list[Restored]:
    """Every set in `planned` ({name: VMs}) back to its size, or CapacityError after timeout_s."""
    deadline, waited = clock() + timeout_s, 0.0
    while True:
        try:
            return [_restore_one(clients, rg, name, want) for name, want in planned.items()]
        except CapacityError as exc:
            # Both the time slept and the wall clock count: neither may pass the bound.
            if waited + wait_s > timeout_s or clock() + wait_s > deadline:
                short = _shortfall(clients, rg, planned)
                raise CapacityError(
                    f"spot capacity is gone: {short} after waiting {timeout_s:g} s for Azure to "
                    f"give the evicted VMs back ({exc.message})",
                    hint="retry later, raise azure.max_price, add azure.fallback_regions, or use "
                         "azure.priority: regular") from None
            sleep(wait_s)
            waited += wait_s


def _restore_one(clients: AzureClients, rg: str, name: str, want: int) -> Restored:
    """One set back to `want` VMs in the cluster: the evicted ones started (deallocated, not
    parked by a shrink: heal.park keeps those in the set's azbench-parked tag), the deleted ones
    made again (capacity up, parked VMs still counted in it)."""
    now = read_set(clients, rg, name)
    vmss = None
    if now.deallocated or want > len(now.instance_ids):
        with arm_call(f"read scale set {name}"):
            vmss = clients.scale_set(rg, name)
    parked = {str(i) for i in parse_ids(vmss.tags.get(TAG_PARKED, "") if vmss else "")} & set(now.instance_ids)
    evicted = [i for i in now.deallocated if i not in parked]
    added = max(want - (len(now.instance_ids) - len(parked)), 0)
    if added and vmss is not None:
        with arm_call(f"restore capacity of {name} to {want} VMs"):
            clients.set_capacity(rg, name, vmss.sku_name, vmss.sku_tier, len(now.instance_ids) + added)
    if evicted:
        with arm_call(f"start deallocated VMs of {name}"):
            clients.start_instances(rg, name, evicted)
    after = read_set(clients, rg, name) if added or evicted else now
    hosts = tuple(h for h, i in zip(after.hosts, after.instance_ids) if i not in parked)
    return Restored(name, added, len(evicted), hosts)


def _shortfall(clients: AzureClients, rg: str, planned: dict[str, int]) -> str:
    parts = []
    for name, want in planned.items():
        try:
            got = read_set(clients, rg, name)
            have = len(got.instance_ids) - len(got.deallocated)
        except CapacityError:
            have = -1
        if have < want:
            parts.append(f"{name} has {have if have >= 0 else '?'} of {want} VMs running")
    return "; ".join(parts) or "the scale sets did not come back"
