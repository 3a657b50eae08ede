"""Drift: a rerun of `up NAME` whose request differs from the cluster Azure holds.

`up` of an existing cluster adopts what exists; adopting a cluster of another shape would leave
the store saying one thing and Azure another (4 nodes recorded, 2 running; the NSG keeping the
old SSH range). So before any write `up` compares the live resources (read with GETs only: the
observed resources plus one list of the group's scale sets) with the request: node count, VM
size, region, priority, SSH range and node image. Any difference is DriftError (exit 2), one
line with the whole diff, and nothing is written. The node count changes with `azbench resize`.

An `up` that was killed mid-way (its continuation tokens still on disk) left only some scale
sets: its rerun resumes, so then the node count is compared only over the sets that exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.providers.azure import resources
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.records import ArmResource, ScaleSet
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError
from orchestrator.models import Plan
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER


class DriftError(ConfigError):
    """The request differs from the live cluster (exit 2); nothing was written."""

    kind = "drift"


@dataclass(frozen=True)
class Difference:
    what: str
    live: str
    requested: str

    def __str__(self) -> str:
        return f"{self.what} {self.live} -> {self.requested}"


@dataclass(frozen=True)
class LiveShape:
    """What Azure holds for the cluster; None where nothing live says it."""

    sets: tuple[tuple[str, int], ...] = ()  # (scale set, VMs) of the cluster's sets
    sku: str | None = None
    region: str | None = None
    priority: str | None = None
    ssh_range: str | None = None
    image: str | None = None

    @property
    def nodes(self) -> int | None:
        """VMs in the cluster's scale sets; None when it has none yet."""
        return sum(vms for _, vms in self.sets) if self.sets else None


def live_shape(clients: AzureClients, rg: str, cluster: str, seen: Mapping[str, ArmResource | None],
               listed: Sequence[ScaleSet] | None = None) -> LiveShape:
    """The live facts, from the observed resources (lro.observe's, by 'kind/name') and one list of
    the group's scale sets (only when the group exists; `listed`: that list, read already)."""
    group = seen.get(f"{resources.RG}/{rg}")
    if group is None:
        return LiveShape()
    if listed is None:
        with arm_call(f"list scale sets of {rg}"):
            listed = clients.scale_sets_in(rg)
    sets = [s for s in listed if s.tags.get(TAG_CLUSTER) == cluster]
    region = next((o.location for k, o in seen.items() if o is not None and not k.startswith(resources.RG)
                   and o.location), None) or (sets[0].location if sets else None)
    nsg = next((o for k, o in seen.items() if o is not None and k.startswith(resources.NSG + "/")), None)
    ssh = nsg.ssh_source if nsg is not None else None
    if not sets:
        return LiveShape(region=region, ssh_range=ssh)
    return LiveShape(sets=tuple((s.name, s.capacity) for s in sets), sku=sets[0].sku_name, region=region,
                     priority="spot" if sets[0].spot else "regular", ssh_range=ssh, image=sets[0].image)


def differences(spec: ClusterSpec, plan: Plan, ingress: str, live: LiveShape,
                resuming: bool = False) -> list[Difference]:
    """What the request changes in the live cluster (empty: adopt it as it is). `resuming`: an
    earlier `up` did not finish, so planned sets not created yet are not a difference."""
    a = spec.section(AzureSettings)
    out: list[Difference] = []
    made = {name for name, _ in live.sets}
    wanted_nodes = sum(s.vms for s in plan.scale_sets if s.name in made) if resuming else plan.nodes
    if live.nodes is not None and live.nodes != wanted_nodes:
        out.append(Difference("nodes", str(live.nodes), str(plan.nodes)))
    if live.sku is not None and live.sku.lower() != plan.sku.lower():
        out.append(Difference("sku", live.sku, plan.sku))
    regions = {r.lower() for r in [spec.region or "", *a.fallback_regions]}
    if live.region is not None and live.region.lower() not in regions:
        out.append(Difference("region", live.region, spec.region or "-"))
    if live.priority is not None and live.priority != a.priority:
        out.append(Difference("priority", live.priority, a.priority))
    if live.ssh_range is not None and live.ssh_range != ingress:
        out.append(Difference("ssh range", live.ssh_range, ingress))
    wanted = a.image or spec.sku_row.image
    if live.image is not None and _is_image_ref(wanted) and live.image.lower() != wanted.lower():
        out.append(Difference("image", live.image, wanted))
    return out


def check(spec: ClusterSpec, plan: Plan, ingress: str, live: LiveShape, resuming: bool = False) -> None:
    """DriftError naming every difference, in one line; nothing when the request matches."""
    diffs = differences(spec, plan, ingress, live, resuming)
    if not diffs:
        return
    hints = []
    if any(d.what == "nodes" for d in diffs):
        hints.append(f"change the node count with `azbench resize {spec.name}`")
    if any(d.what != "nodes" for d in diffs):
        hints.append(f"for anything else, `azbench down {spec.name}` first or pick another name")
    raise DriftError(f"cluster '{spec.name}' exists with another shape (live -> requested): "
                     f"{', '.join(str(d) for d in diffs)}; nothing was changed", hint="; ".join(hints))


def _is_image_ref(image: str) -> bool:
    return image.startswith("/") or image.count(":") == 3
