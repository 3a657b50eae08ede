"""Delete Azure clusters by tag, verify nothing tagged remains, and sweep expired or orphaned ones.

`delete_cluster` deletes every resource group tagged `azbench-cluster=<name>` and every tagged
resource outside them (by id), waits, then lists by tag again and raises ProvisionError naming what
is left. `sweep` finds the caller's clusters (owner.py) whose `azbench-expires` has passed, or
(given the set of clusters this home knows) whose record is gone, across resource groups, and
deletes them unless dry_run; another owner's expired clusters only with all_owners, and another
owner's live ones never.
`clear_group` empties one resource group in dependency order (region fallback).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Collection

from orchestrator.providers.azure import records
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure.lro import Reporter, delete
from orchestrator.providers.azure.owner import Owner, owner_of
from orchestrator.providers.azure.resources import (
    NIC,
    NSG,
    PIP,
    RG,
    VM,
    VMSS,
    VNET,
)
from orchestrator.errors import ProvisionError
from orchestrator.providers.base import SweepItem
from orchestrator.models import parse_utc
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_EXPIRES

# api-version for deletes by id of resources azbench may leave outside its resource group.
DELETE_API_VERSIONS = {
    "microsoft.compute/virtualmachinescalesets": "2024-07-01",
    "microsoft.compute/virtualmachines": "2024-07-01",
    "microsoft.compute/disks": "2024-03-02",
    "microsoft.network": "2024-05-01",
}
DEFAULT_DELETE_API = "2021-04-01"
# Delete order inside a group: what uses a resource goes before the resource.
DELETE_WAVES = ((VMSS, VM), (NIC,), (VNET, PIP), (NSG,))


def tag_filter(cluster: str | None = None) -> str:
    if cluster is None:
        return f"tagName eq '{TAG_CLUSTER}'"
    return f"tagName eq '{TAG_CLUSTER}' and tagValue eq '{cluster}'"


def tagged(clients: AzureClients, cluster: str | None = None) -> tuple[list[records.Group], list[records.Tagged]]:
    """(resource groups, resources) tagged with the cluster (any azbench cluster if None)."""
    with arm_call("list resources by tag"):
        groups = records.groups(clients.resources.resource_groups.list(filter=tag_filter(cluster)))
        resources = records.tagged(clients.resources.resources.list(filter=tag_filter(cluster)))
    return groups, resources


def delete_cluster(clients: AzureClients, cluster: str, *, workers: int = 8) -> list[str]:
    """Delete everything tagged with `cluster`, wait, verify; return the deleted ids/groups."""
    groups, resources = tagged(clients, cluster)
    names = {g.name.lower() for g in groups}
    loose = [r for r in resources if _group_of(r.id).lower() not in names]
    jobs = [partial(delete, clients, "", RG, g.name) for g in groups]
    jobs += [partial(_delete_by_id, clients, r.id, r.type) for r in loose]
    _run_all(jobs, workers)
    verify_gone(clients, cluster)
    return [g.name for g in groups] + [r.id for r in loose]


def verify_gone(clients: AzureClients, cluster: str) -> None:
    groups, resources = tagged(clients, cluster)
    left = [f"resource group {g.name}" for g in groups] + [r.id for r in resources]
    if left:
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        raise ProvisionError(f"cluster '{cluster}' still has {len(left)} tagged resource(s) after delete: "
                             f"{', '.join(left[:5])}{more}", hint="rerun `azbench down`; check the portal")


def clear_group(clients: AzureClients, rg: str, names_by_kind: dict[str, list[str]], report: Reporter,
                workers: int = 8) -> None:
    """Delete the given resources of `rg` in dependency order, keeping the group itself."""
    for wave in DELETE_WAVES:
        _run_all([partial(delete, clients, rg, k, n, report) for k in wave for n in names_by_kind.get(k, [])],
                 workers)


def sweep(clients: AzureClients, *, me: Owner, dry_run: bool = True, known_clusters: Collection[str] | None = None,
          now: datetime | None = None, all_owners: bool = False,
          only: Collection[str] | None = None) -> list[SweepItem]:
    """The clusters to sweep, deleted unless dry_run (and, given `only`, only those named).

    `me`'s clusters go when past `azbench-expires` or unknown to `known_clusters` (this home's
    records; None skips that check). Another owner's cluster goes only when expired and
    `all_owners`: a colleague's live cluster is unknown to this home's store, never orphaned."""
    now = now or datetime.now(timezone.utc)
    out = []
    for cluster, entry in sorted(_by_cluster(*tagged(clients)).items()):
        owners = [o for o in entry.owners if o is not None]
        owner = owners[0] if owners else None
        mine = owner == me
        reason = _sweep_reason(cluster, entry.expires, known_clusters if mine else None, now)
        if reason is None or not (mine or all_owners) or (only is not None and cluster not in only):
            continue
        if not dry_run:
            delete_cluster(clients, cluster)
        out.append(SweepItem(cluster=cluster, reason=reason, resource_groups=tuple(entry.groups),
                             resources=tuple(entry.resources), expires=min(entry.expires) if entry.expires else None,
                             deleted=not dry_run, owner=owner.describe() if owner else "no owner tags",
                             mine=mine))
    return out


@dataclass
class _Found:
    """What the tags say of one cluster: its groups, resources outside them, expiries, owners."""

    groups: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    expires: list[str] = field(default_factory=list)
    owners: list[Owner | None] = field(default_factory=list)


def _by_cluster(groups: list[records.Group], resources: list[records.Tagged]) -> dict[str, _Found]:
    found: dict[str, _Found] = {}
    items = [(g.tags, g.name, True) for g in groups] + [(r.tags, r.id, False) for r in resources]
    for tags, key, is_group in items:
        entry = found.setdefault(tags[TAG_CLUSTER], _Found())
        (entry.groups if is_group else entry.resources).append(key)
        if tags.get(TAG_EXPIRES):
            entry.expires.append(tags[TAG_EXPIRES])
        entry.owners.append(owner_of(tags))
    return found


def _sweep_reason(cluster: str, expires: list[str], known: Collection[str] | None,
                  now: datetime) -> str | None:
    stamps = [parse_utc(e) for e in expires]
    valid = [s for s in stamps if s is not None]
    if valid and min(valid) <= now:
        return f"expired at {min(valid):%Y-%m-%dT%H:%M:%SZ}"
    if known is not None and cluster not in known:
        return "no azbench record of this cluster"
    if expires and not valid:
        return None  # unreadable tag: never delete on a guess
    return None


def _delete_by_id(clients: AzureClients, resource_id: str, rtype: str) -> None:
    low = (rtype or "").lower()
    api = DELETE_API_VERSIONS.get(low) or DELETE_API_VERSIONS.get(low.split("/")[0], DEFAULT_DELETE_API)
    with arm_call(f"delete {resource_id}"):
        try:
            clients.resources.resources.begin_delete_by_id(resource_id, api_version=api).result()
        except Exception as exc:
            if not is_not_found(exc):
                raise


def _group_of(resource_id: str) -> str:
    parts = resource_id.split("/")
    low = [p.lower() for p in parts]
    return parts[low.index("resourcegroups") + 1] if "resourcegroups" in low else ""


def _run_all(jobs: Sequence[Callable[[], object]], workers: int) -> None:
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = [pool.submit(job) for job in jobs]
    errors = [exc for f in futures if (exc := f.exception()) is not None]
    if errors:
        raise errors[0]
