"""Delete Azure clusters, verify nothing is left, and sweep expired ones on evidence, not tags.

`delete_cluster` deletes the cluster's resource groups (a group another client is already
deleting counts as progress: lro.delete waits for it), verifies by listing what is still tagged
with the cluster in them (ProvisionError naming it), then deletes the head's custom role
(roles.py), which lives outside the group: a failure there is ProvisionError naming the role as
what is left. Tagged resources outside the cluster's groups are never deleted: a tag is no
evidence (docs/azure.md, "The threat model for tags").

`sweep` finds azbench's clusters by their `azbench-cluster` tag and deletes only those it has
evidence for that no tag writer can forge (`evidence`): the group is named `azbench-<cluster>`
(or the creator evidence names that very group), it holds only what azbench makes for the
cluster, and its creator is known: the caller (their custom role's createdBy, or this home's
creator nonce) or, with all_owners, another principal whose custom role ARM stamped. Past
`azbench-expires` such a cluster is deleted unless dry_run, every one tried and each outcome
reported; another's expired ones only with all_owners (else reported as skipped); groups without
the evidence are reported as skipped, never deleted. A live cluster of the caller's that this
home has no record of is reported, never deleted ("not in my store" is no evidence that a
cluster is abandoned). Custom role definitions of azbench's whose group is gone are deleted too
(found by their name and assignable scope: roles.expiry_roles). `clear_group` empties one
resource group in dependency order (region fallback).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Collection

from orchestrator.providers.azure import records
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure.lro import Reporter, delete, wait_gone
from orchestrator.providers.azure.owner import Creator, Owner, creator, owner_of
from orchestrator.providers.azure.plan import default_group
from orchestrator.providers.azure.resources import (
    KINDS,
    NIC,
    NSG,
    PIP,
    RG,
    VM,
    VMSS,
    VNET,
)
from orchestrator.errors import AzbenchError, ProvisionError
from orchestrator.providers.azure.roles import delete_expiry_role, expiry_roles, role_name
from orchestrator.providers.base import SweepItem
from orchestrator.models import parse_utc
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_EXPIRES

DISKS = "Microsoft.Compute/disks"

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


def tagged_groups(clients: AzureClients, cluster: str | None = None) -> list[records.Group]:
    """The resource groups tagged with the cluster (any azbench cluster if None): one listing."""
    with arm_call("list resource groups by tag"):
        return clients.tagged_groups(tag_filter(cluster))


def own_group(groups: Sequence[records.Group], name: str, rg: str | None = None) -> records.Group | None:
    """The cluster's own group among `groups` tagged with it: the one named `rg` (default
    azbench-<name>). Any other group carrying the tag is a decoy (or an orphan): reported by
    sweep, never read as the cluster, never written."""
    want = default_group(name, rg).lower()
    return next((g for g in groups if g.name.lower() == want), None)


def delete_cluster(clients: AzureClients, cluster: str, *, groups: Collection[str], workers: int = 8) -> list[str]:
    """Delete the cluster's resource groups `groups`, wait, verify nothing tagged with the
    cluster is left in them, then the head's custom role of each (a group already gone, say
    deleted by its own expiry agent, may still have one); the groups deleted. A role that could
    not be deleted is ProvisionError naming it as what is left (the groups are gone by then)."""
    names = sorted(set(groups), key=str.lower)
    _run_all([partial(delete, clients, "", RG, g) for g in names], workers)
    verify_gone(clients, cluster, names)
    left = []
    for group in names:
        try:
            delete_expiry_role(clients, group)
        except AzbenchError as exc:
            left.append((role_name(clients.subscription_id, group), exc))
    if left:
        what = ", ".join(f"custom role definition '{name}' ({exc.message})" for name, exc in left)
        raise ProvisionError(f"cluster '{cluster}': its resource groups are deleted; left: {what}")
    return names


def verify_gone(clients: AzureClients, cluster: str, groups: Collection[str]) -> None:
    """Nothing tagged with `cluster` is left in `groups` (one listing by tag); a group still
    listed while ARM deletes it is waited for (lro.wait_gone). What is tagged outside them is
    not the cluster's to delete, and is not counted."""
    inside = {g.lower() for g in groups}
    with arm_call("list resources by tag"):
        resources = [r for r in clients.tagged_resources(tag_filter(cluster)) if r.group.lower() in inside]
    left = [r.id for r in resources]
    if left:
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        raise ProvisionError(f"cluster '{cluster}' still has {len(left)} tagged resource(s) after delete: "
                             f"{', '.join(left[:5])}{more}", hint="rerun `azbench down`; check the portal")


def ours(cluster: str, item: records.Tagged) -> bool:
    """Whether `item` of the cluster's group is one azbench makes for `cluster`: a kind `up`
    creates, tagged with the cluster and named as `up` names it, or the head VM's OS disk
    (Azure names it `<vm>_OsDisk_...`, untagged)."""
    kind = next((k for k in KINDS if k.lower() == item.type.lower()), None)
    if item.type.lower() == DISKS.lower():
        return item.name.startswith(f"{cluster}-head_")
    if kind is None or kind == RG or item.tags.get(TAG_CLUSTER) != cluster:
        return False
    return item.name.startswith(f"{cluster}-")


def clear_group(clients: AzureClients, rg: str, names_by_kind: dict[str, list[str]], report: Reporter,
                workers: int = 8) -> None:
    """Delete the given resources of `rg` in dependency order, keeping the group itself."""
    for wave in DELETE_WAVES:
        _run_all([partial(delete, clients, rg, k, n, report) for k in wave for n in names_by_kind.get(k, [])],
                 workers)


@dataclass(frozen=True)
class Evidence:
    """What sweep could prove of one group tagged with `cluster`: None fields passed; `why` is
    the first that failed ("" when the group is azbench's, created by `made`)."""

    made: Creator
    why: str = ""


def group_contents(clients: AzureClients, group: str) -> list[records.Tagged]:
    """What resource group `group` holds (one listing); empty when the group is gone."""
    with arm_call(f"list resource group {group}"):
        try:
            return clients.group_contents(group)
        except Exception as exc:
            if not is_not_found(exc):
                raise
            return []


def evidence(clients: AzureClients, me: Owner, cluster: str, group: records.Group,
             roles: Mapping[str, records.RoleDef], *, contents: bool = True) -> Evidence:
    """Whether `group` is azbench's cluster `cluster` (see the module docstring): its name, its
    creator (the custom role's createdBy from `roles`, by group; else this home's creator
    nonce), and, with `contents`, what it holds (one listing of the group)."""
    role = roles.get(group.name.lower())
    held = group_contents(clients, group.name) if contents else None
    made = creator(me, subscription_id=clients.subscription_id, rg=group.name, cluster=cluster, tags=group.tags,
                   role_created_by=role.created_by if role else None,
                   children=[dict(r.tags) for r in held] if held is not None else None)
    if group.name != default_group(cluster) and made.who == "unknown":
        return Evidence(made, f"its group {group.name} is not named {default_group(cluster)}: not azbench's "
                              "(its tags alone prove nothing)")
    if made.who == "unknown":
        return Evidence(made, f"no evidence azbench made it ({made.how})")
    if held is not None:
        foreign = [r.name for r in held if not ours(cluster, r)]
        if foreign:
            return Evidence(made, f"its group {group.name} holds what azbench did not make ({', '.join(foreign)})")
    return Evidence(made)


def sweep(clients: AzureClients, *, me: Owner, dry_run: bool = True, known_clusters: Collection[str] | None = None,
          now: datetime | None = None, all_owners: bool = False,
          only: Collection[str] | None = None) -> list[SweepItem]:
    """What sweep found, and unless dry_run did: see the module docstring. Given `only`, nothing
    but those (clusters, or role definitions by name) is deleted. `known_clusters`: this home's
    live records (None: do not report the caller's unknown live clusters). Every candidate is
    tried; a failed delete is that item's "failed" (with its error), and the next is tried all
    the same. Reads: the groups by tag, the directory's custom roles, and each expired
    candidate's contents."""
    now = now or datetime.now(timezone.utc)
    groups = tagged_groups(clients)
    roles = expiry_roles(clients)
    out = []
    for cluster, found_tags in sorted(_by_cluster(groups).items()):
        own = own_group(found_tags.groups, cluster)
        out += _decoys(cluster, found_tags.groups, own, now)
        if own is None:
            continue
        entry = _by_cluster([own])[cluster]
        item = _sweep_cluster(clients, me, cluster, entry, roles, now, dry_run=dry_run,
                              known_clusters=known_clusters, all_owners=all_owners, only=only)
        if item is None:
            continue
        if item.deleted:
            roles = {k: v for k, v in roles.items() if k not in {g.name.lower() for g in entry.groups}}
        out.append(item)
    return out + _orphan_roles(clients, roles, {g.name.lower() for g in groups}, dry_run=dry_run, only=only)


def _decoys(cluster: str, groups: Sequence[records.Group], own: records.Group | None,
            now: datetime) -> list[SweepItem]:
    """Another group carrying the tag is a decoy (or an orphan): reported when it claims to be
    expired or the cluster's own group is, never written, never a reason to skip the latter."""
    out = []
    own_stamp = parse_utc(own.tags.get(TAG_EXPIRES)) if own is not None else None
    for decoy in (g for g in groups if g is not own):
        stamp = parse_utc(decoy.tags.get(TAG_EXPIRES))
        if (stamp is not None and stamp <= now) or (own_stamp is not None and own_stamp <= now):
            claimed = owner_of(decoy.tags)
            out.append(SweepItem(cluster=cluster, resource_groups=(decoy.name,), resources=(),
                                 expires=decoy.tags.get(TAG_EXPIRES), deleted=False, mine=False,
                                 owner=claimed.describe() + " (tags only)" if claimed else "no owner tags",
                                 reason=f"decoy: its group {decoy.name} is not named {default_group(cluster)}: "
                                        "not the cluster's group (its tags alone prove nothing); never written "
                                        f"(a custom group of yours? `azbench adopt {cluster} --resource-group "
                                        f"{decoy.name}`, then `down`)",
                                 action="skipped"))
    return out


def _sweep_cluster(clients: AzureClients, me: Owner, cluster: str, entry: _Found,
                   roles: Mapping[str, records.RoleDef], now: datetime, *, dry_run: bool,
                   known_clusters: Collection[str] | None, all_owners: bool,
                   only: Collection[str] | None) -> SweepItem | None:
    """One cluster's own group: its item (deleted unless a dry run, when expired, the caller's
    or `all_owners`, proven azbench's, and among `only`), or None when there is nothing to say."""
    stamps = [s for s in (parse_utc(e) for e in entry.expires) if s is not None]
    deadline = min(stamps) if stamps else None
    expired = deadline is not None and deadline <= now
    found = [evidence(clients, me, cluster, g, roles, contents=expired) for g in entry.groups]
    made = next((f.made for f in found if not f.why), found[0].made)
    why = next((f.why for f in found if f.why), "")
    mine = made.mine
    owners = [o for o in entry.owners if o is not None]
    who = (f"principal {made.principal}" if made.principal else
           owners[0].describe() + " (tags only)" if owners else "no owner tags")
    item = partial(SweepItem, cluster=cluster, resource_groups=tuple(g.name for g in entry.groups),
                   resources=(), expires=min(entry.expires) if entry.expires else None, owner=who, mine=mine)
    if not expired:
        if mine and not why and known_clusters is not None and cluster not in known_clusters:
            left = f"expires {deadline:%Y-%m-%dT%H:%M:%SZ}" if deadline else "no readable expiry"
            return item(reason=f"live ({left}), not in this home: adopt it with `azbench adopt {cluster}` "
                               "or leave it", deleted=False, action="kept")
        return None
    reason = f"expired at {deadline:%Y-%m-%dT%H:%M:%SZ}"
    if why:
        return item(reason=f"{reason}; {why}", deleted=False, action="skipped")
    if not (mine or all_owners):
        return item(reason=f"{reason}; another owner's: --all-owners deletes it", deleted=False, action="skipped")
    if only is not None and cluster not in only:
        return None  # not among those the caller confirmed
    if dry_run:
        return item(reason=reason, deleted=False, action="delete")
    try:
        delete_cluster(clients, cluster, groups=[g.name for g in entry.groups])
    except AzbenchError as exc:
        return item(reason=reason, deleted=False, action="failed", error=str(exc))
    return item(reason=reason, deleted=True, action="deleted")


def _orphan_roles(clients: AzureClients, roles: Mapping[str, records.RoleDef], groups: Collection[str], *,
                  dry_run: bool, only: Collection[str] | None) -> list[SweepItem]:
    """azbench's custom roles whose group is gone (no group of that name is tagged as azbench's
    now: checked with a GET, since a group can lose its tags and still stand), deleted unless a
    dry run. A role names its group in its assignable scope, so a sweep from any home finds it,
    whoever made the cluster: a definition without its group grants nothing, anywhere."""
    out = []
    for group, role in sorted(roles.items()):
        if group in groups or (only is not None and role.role_name not in only):
            continue
        with arm_call(f"read resource group {group}"):
            try:
                clients.group(group)
                continue  # the group stands (untagged): its role is not an orphan
            except Exception as exc:
                if not is_not_found(exc):
                    raise
        item = partial(SweepItem, cluster=role.role_name, resource_groups=(), resources=(), expires=None,
                       owner=f"principal {role.created_by}" if role.created_by else "", what="role definition",
                       reason="its group is gone", mine=True)
        if dry_run:
            out.append(item(deleted=False, action="delete"))
            continue
        try:
            delete_expiry_role(clients, role.assignable_scopes[0].rstrip("/").rsplit("/", 1)[1])
        except AzbenchError as exc:
            out.append(item(deleted=False, action="failed", error=str(exc)))
            continue
        out.append(item(deleted=True, action="deleted"))
    return out


@dataclass
class _Found:
    """What the tags say of one cluster: its groups, expiries, owners."""

    groups: list[records.Group] = field(default_factory=list)
    expires: list[str] = field(default_factory=list)
    owners: list[Owner | None] = field(default_factory=list)


def _by_cluster(groups: list[records.Group]) -> dict[str, _Found]:
    found: dict[str, _Found] = {}
    for g in groups:
        entry = found.setdefault(g.tags[TAG_CLUSTER], _Found())
        entry.groups.append(g)
        if g.tags.get(TAG_EXPIRES):
            entry.expires.append(g.tags[TAG_EXPIRES])
        entry.owners.append(owner_of(g.tags))
    return found


def _run_all(jobs: Sequence[Callable[[], object]], workers: int) -> None:
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = [pool.submit(job) for job in jobs]
    errors = [exc for f in futures if (exc := f.exception()) is not None]
    if errors:
        raise errors[0]
