"""What `resize` does before and after the provider: the plan (whole NVLink racks; the nodes a
shrink removes, idle ones first), and the nodes a failed shrink drained returned to service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from orchestrator.errors import AzbenchError, ConfigError
from orchestrator.hardware.layout import rack_unit, valid_counts_near
from orchestrator.models import Cluster
from orchestrator.providers.base import Provider


@runtime_checkable
class ReportsNotes(Protocol):
    """A provider that says what an operation did besides its plan, per cluster (Azure: a
    shrink whose park fell back to deleting the instances)."""

    notes: dict[str, list[str]]


def undrain(provider: Provider, cluster: Cluster, nodes: Sequence[str]) -> str:
    """Return `nodes` (drained for a resize that failed) to service; what happened, in words."""
    if not nodes:
        return ""
    try:
        with provider.connect(cluster) as access:
            if (control := access.launcher.parts().nodes) is not None:  # it drained them: it has one
                control.resume(list(nodes))
    except AzbenchError as exc:
        return (f"{', '.join(nodes)} stay drained: returning them failed ({exc}); "
                f"`azbench health {cluster.name} --undrain` returns them")
    return f"{', '.join(nodes)} returned to service (undrained)"


@dataclass(frozen=True)
class ResizePlan:
    """What `resize` does: the node counts, and the nodes a shrink drains and removes."""

    cluster: str
    before: int
    after: int
    remove: tuple[str, ...] = ()
    busy: tuple[str, ...] = ()


def plan_resize(cluster: Cluster, nodes: int, busy: Sequence[str] = ()) -> ResizePlan:
    """Check `nodes` (GB200: whole NVLink racks of the cluster's own layout, 18 VMs or 16 as
    `up` lays them out: hardware.layout.rack_unit) and pick what a shrink removes: the
    highest-numbered nodes, idle ones first. `busy` are nodes running a job now."""
    if nodes < 1:
        raise ConfigError(f"--nodes: a cluster needs at least one node, got {nodes}")
    rack = rack_unit(cluster)
    if rack > 1 and nodes % rack:
        near = " or ".join(str(n) for n in valid_counts_near(nodes, rack))
        raise ConfigError(f"--nodes: cluster '{cluster.name}' ({cluster.sku}) is laid out in whole NVLink racks "
                          f"of {rack} VMs; {nodes} is not a whole number of racks: the nearest valid counts are {near}")
    have = len(cluster.node_names) or cluster.nodes
    if nodes >= have:
        return ResizePlan(cluster.name, have, nodes)
    # The provider's own node order (instance order on Azure, whose base-36 names no natural
    # sort orders): the last nodes go first, so a GB200 shrink takes whole racks off the top.
    names = list(cluster.node_names)
    taken = set(busy)
    order = [n for n in reversed(names) if n not in taken] + [n for n in reversed(names) if n in taken]
    remove = tuple(order[:have - nodes])
    return ResizePlan(cluster.name, have, nodes, remove, tuple(n for n in remove if n in taken))
