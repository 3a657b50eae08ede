"""Delete Azure clusters by tag, verify nothing tagged remains, and sweep expired ones.

`delete_cluster` deletes every resource group tagged `azbench-cluster=<name>` and every tagged
resource outside them (by id), waits (a group another client is already deleting counts as
progress: lro.delete waits for it), lists by tag again and raises ProvisionError naming what is
left, then deletes the head's custom role (roles.py), which lives outside the group. `sweep`
finds clusters by tag: the expiry tag decides. The caller's clusters (owner.py) past
`azbench-expires` are deleted unless dry_run, every one tried and each outcome reported; another
owner's expired ones only with all_owners (else reported as skipped); a live cluster of the
caller that this home has no record of (a lost or copied store) is reported, never deleted:
"not in my store" is no evidence that a cluster is abandoned. Another owner's live cluster is
never listed. `clear_group` empties one resource group in dependency order (region fallback).
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
from orchestrator.providers.azure.lro import Reporter, delete, wait_gone
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
from orchestrator.errors import AzbenchError, ProvisionError
from orchestrator.providers.azure.roles import delete_expiry_role
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
        groups = clients.tagged_groups(tag_filter(cluster))
        resources = clients.tagged_resources(tag_filter(cluster))
    return groups, resources


def delete_cluster(clients: AzureClients, cluster: str, *, workers: int = 8,
                   groups: Collection[str] = ()) -> list[str]:
    """Delete everything tagged with `cluster`, wait, verify, then the head's custom role of
    each of its groups (and of `groups`, the ones its record names: a cluster whose group is
    gone, say deleted by its own expiry agent, may still have one); the deleted ids/groups."""
    found, resources = tagged(clients, cluster)
    names = {g.name.lower() for g in found}
    loose = [r for r in resources if _group_of(r.id).lower() not in names]
    jobs = [partial(delete, clients, "", RG, g.name) for g in found]
    jobs += [partial(_delete_by_id, clients, r.id, r.type) for r in loose]
    _run_all(jobs, workers)
    verify_gone(clients, cluster)
    for group in sorted({g.name for g in found} | set(groups), key=str.lower):
        delete_expiry_role(clients, group)
    return [g.name for g in found] + [r.id for r in loose]


def verify_gone(clients: AzureClients, cluster: str) -> None:
    """Nothing tagged with `cluster` is left; a group still listed while ARM deletes it is
    waited for (lro.wait_gone)."""
    groups, resources = tagged(clients, cluster)
    for g in groups:
        if g.state == "Deleting":
            wait_gone(clients, g.name)
    if any(g.state == "Deleting" for g in groups):
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
    """What sweep found, and unless dry_run did: see the module docstring. Given `only`, no
    cluster but those is deleted. `known_clusters`: this home's live records (None: do not
    report the caller's unknown live clusters). Every expired candidate is tried; a failed
    delete is that item's "failed" (with its error), and the next is tried all the same."""
    now = now or datetime.now(timezone.utc)
    out = []
    for cluster, entry in sorted(_by_cluster(*tagged(clients)).items()):
        owners = [o for o in entry.owners if o is not None]
        owner = owners[0] if owners else None
        mine = owner == me
        stamps = [s for s in (parse_utc(e) for e in entry.expires) if s is not None]
        deadline = min(stamps) if stamps else None
        expired = deadline is not None and deadline <= now
        who = owner.describe() if owner else "no owner tags"
        item = partial(SweepItem, cluster=cluster, resource_groups=tuple(entry.groups),
                       resources=tuple(entry.resources), expires=min(entry.expires) if entry.expires else None,
                       owner=who, mine=mine)
        if not expired:
            if mine and known_clusters is not None and cluster not in known_clusters:
                left = f"expires {deadline:%Y-%m-%dT%H:%M:%SZ}" if deadline else "no readable expiry"
                out.append(item(reason=f"live ({left}), not in this home: adopt it with `azbench adopt {cluster}` "
                                       "or leave it", deleted=False, action="kept"))
            continue
        reason = f"expired at {deadline:%Y-%m-%dT%H:%M:%SZ}"
        if not (mine or all_owners):
            out.append(item(reason=f"{reason}; another owner's: --all-owners deletes it", deleted=False,
                            action="skipped"))
            continue
        if only is not None and cluster not in only:
            continue  # not among those the caller confirmed
        if dry_run:
            out.append(item(reason=reason, deleted=False, action="delete"))
            continue
        try:
            delete_cluster(clients, cluster, groups=entry.groups)
        except AzbenchError as exc:
            out.append(item(reason=reason, deleted=False, action="failed", error=str(exc)))
            continue
        out.append(item(reason=reason, deleted=True, action="deleted"))
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


def _delete_by_id(clients: AzureClients, resource_id: str, rtype: str) -> None:
    low = (rtype or "").lower()
    api = DELETE_API_VERSIONS.get(low) or DELETE_API_VERSIONS.get(low.split("/")[0], DEFAULT_DELETE_API)
    with arm_call(f"delete {resource_id}"):
        try:
            clients.delete_by_id(resource_id, api)
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
