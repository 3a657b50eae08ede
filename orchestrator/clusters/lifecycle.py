"""The use cases behind the CLI: up, down, status, and cluster lookup.

Each function takes typed specs, wires provider + store, and returns data for the CLI to render.
Every use case that asks a provider looks it up here (`get_provider`: the one place tests
substitute it); what needs no provider lives beside it: cost.py (list-price rates and costs),
status.py (what `status` says, the record following the cloud), resizing.py (resize's plan and
its rollback). Their names are re-exported here.
The cluster record is written before the action it describes (so a crash leaves something
`down` can use); a history event only after the fact: "up 2 x SKU" (kind `up`) once it is up,
or "... attempted, failed: why" (kind `up_failed`) when it is not, so an event of an action's
own kind always means that the action happened.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from orchestrator import providers
from orchestrator.clusters import status
from orchestrator.clusters.cost import Rate, billed_rate, cost_so_far, gpus_of, price_of, spent_at
from orchestrator.clusters.resizing import ReportsNotes, ResizePlan, plan_resize, undrain
from orchestrator.clusters.spending import check_cost_cap, cost_cap
from orchestrator.clusters.status import (GONE, ClusterStatus, ListedCluster, NodeView, expires_at, reconcile,
                                          time_left)
from orchestrator.errors import (AzbenchError, ConfigError, LostRaceError, NotAvailableError, NotFoundError,
                                 NotOwnerError, PreflightError, ProvisionError, ShrinkError)
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster, ClusterState, Plan, RunState, local_owner, utcnow
from orchestrator.providers import get_provider, require
from orchestrator.providers.base import lacking
from orchestrator.specs.cluster import ClusterSpec
# store.events, not store.schema: EventRow brings no sqlalchemy (~0.4 s on `up --dry-run`, -X importtime).
from orchestrator.store.events import DownData, EventRow, FailedData, HostReportData, ResizeData, UpData

if TYPE_CHECKING:
    from orchestrator.providers.base import (Holding, HostReport, Provider, ProviderParts, SetChange, SweepItem,
                                             SweepRequest)
    from orchestrator.seams import Access
    from orchestrator.store.database import Store
    from orchestrator.store.schema import ClusterRow

__all__ = [  # its use cases, and what moved beside it (cost, status, resizing), importable from here
    "ACTIVE_RUNS", "adopt", "billed_rate", "check", "cluster_status", "ClusterStatus", "connect", "cost_so_far",
    "down", "down_preview", "DownPreview", "expires_at", "extend", "EXTEND_HOURS", "GONE", "ListedCluster",
    "NodeView", "owner_of", "parts", "plan", "plan_resize", "Rate", "reachable", "record_if_live", "replace_node",
    "report_unhealthy", "ReportsNotes", "require_cluster", "require_sdk", "resize", "resize_preview",
    "resize_question", "ResizePlan", "restore_capacity", "status_list", "sweep", "time_left", "up", "UpResult",
]


EXTEND_HOURS = (0.25, 168.0)  # `extend --hours`: a quarter hour to a week at a time


@dataclass(frozen=True)
class UpResult:
    plan: Plan
    cluster: Cluster
    adopted: bool = False


def require_sdk(provider: str) -> None:
    """MissingExtra (exit 7, naming the pip extra) when `provider`'s SDKs are not installed:
    `up` asks this before it asks to spend."""
    require(provider)


def plan(spec: ClusterSpec) -> Plan:
    """The dry-run: no credentials, no network, no store."""
    return get_provider(spec.provider, plan_only=True).plan(spec)


def check(spec: ClusterSpec, the_plan: Plan) -> tuple[list[str], list[str]]:
    """`up --dry-run --check`: the provider reads what its preflight needs (quota, sizes and
    zones, images): (what it found, one line per check; the problems `up` would refuse with).
    No write, no store."""
    if (preflight := get_provider(spec.provider).parts().preflight) is None:
        raise lacking(spec.name, spec.provider, "check")
    return preflight.check(spec, the_plan)


def up(spec: ClusterSpec, store: Store, on_progress: Callable[[Any], None] | None = None) -> UpResult:
    """Plan, store the cluster PROVISIONING with its plan, then create or adopt it.

    The record exists before the first create, so a crash mid-up (kill -9 included) leaves one
    that `azbench down NAME` deletes from. A refusal before anything was created (a config or
    preflight error), or a race lost to another `up` of the same name, puts the store back as it
    was; any other failure records what exists as FAILED. A rerun keeps the cluster's first
    creation time."""
    provider = get_provider(spec.provider, progress=on_progress)
    the_plan = provider.plan(spec)
    check_cost_cap(the_plan, cost_cap(spec))  # before describe(): no credential is read yet
    previous = store.get_cluster(spec.name)
    live = previous is not None and previous.state != ClusterState.TERMINATED
    if previous is not None and previous.state in (ClusterState.DELETING, ClusterState.DELETE_FAILED):
        raise ConfigError(f"cluster '{spec.name}' is {previous.state.value}: a `down` of it has not finished",
                          hint=f"rerun `azbench down {spec.name}` to finish it, then `up` again")
    if previous is not None and live and previous.provider != spec.provider:
        raise ConfigError(f"cluster '{spec.name}' already exists with provider "
                          f"'{previous.provider}': pick another --name")
    existing = provider.describe(spec.name, spec)
    began = utcnow()
    created = previous.created_at if previous is not None and live else began
    pending = provider.provisional(spec, the_plan).model_copy(update={"created_at": created})
    store.save_cluster(pending, spec.model_dump_json(), plan_json=the_plan.model_dump_json(),
                       owner=owner_of(pending))
    what = f"up {spec.nodes} x {the_plan.sku}"
    try:
        cluster = provider.up(spec, the_plan)
    except (ConfigError, PreflightError, LostRaceError) as exc:
        # Nothing of this `up`'s exists: refused before the first create, or another `up` made
        # the cluster (this home keeps no record pointing at it).
        _unwind(store, spec.name, previous)
        _attempted(store, spec.name, "up", what, exc)
        raise
    except AzbenchError as exc:
        _record_leftovers(spec, provider, store, exc, previous, pending)
        _attempted(store, spec.name, "up", what, exc, began)
        raise
    cluster = cluster.model_copy(update={"created_at": created})
    store.save_cluster(cluster, spec.model_dump_json(), owner=owner_of(cluster))
    for note in cluster.properties.up_notes():  # what someone else did meanwhile, and what `up` did
        store.add_event(EventRow(kind="up_interference", cluster=spec.name, message=note))
    store.add_event(EventRow(kind="up", cluster=spec.name, message=what,  # after the fact
                             data=UpData(started_at=began)))
    # "adopted" only for a cluster that stood whole before this `up` (a partial one was completed:
    # its missing parts were created, and the progress lines said so).
    adopted = existing is not None and existing.state == ClusterState.READY
    return UpResult(plan=the_plan, cluster=cluster, adopted=adopted)


def owner_of(cluster: Cluster) -> str:
    """Who pays for the cluster: the principal its provider records (Azure: the signed-in
    object id its tags carry), else who runs azbench here (models.local_owner)."""
    return cluster.properties.principal() or local_owner()


def _attempted(store: Store, name: str, kind: str, what: str, exc: BaseException,
               began: datetime | None = None) -> None:
    """History of an action that did not happen: `<what> attempted, failed: <why>`, of kind
    `<kind>_failed` (an `extend` event means the cloud accepted the new deadline); `began`, when
    the attempt may have left something billing, goes into its data as `started_at` (goodput
    counts the span). Best effort: the action's own error is the one the user must see."""
    try:
        store.add_event(EventRow(kind=f"{kind}_failed", cluster=name,
                                 message=f"{what} attempted, failed: {exc}",
                                 data=FailedData(started_at=began)))
    except AzbenchError:
        pass


def _unwind(store: Store, name: str, previous: ClusterRow | None) -> None:
    """Nothing was created: the store goes back to what it held before this `up`."""
    if previous is None:
        store.forget_cluster(name)
    else:  # its spec and plan too: a refused rerun (drift, another owner) changes nothing
        store.save_cluster(previous.cluster, previous.spec_json, plan_json=previous.plan_json)


def _record_leftovers(spec: ClusterSpec, provider: Provider, store: Store, exc: AzbenchError,
                      previous: ClusterRow | None, pending: Cluster) -> None:
    """After a failed `up` (a boot step, capacity, a timeout): what was created stays, and may be
    billing. Record it as FAILED, so `azbench down NAME` finds and deletes it, and say so.
    When the provider cannot tell, the PROVISIONING record stays for `down` to use."""
    try:
        left = provider.describe(spec.name, spec)
    except AzbenchError:
        return  # cannot tell; `azbench down NAME` (or sweep, by tag) still finds it
    if left is None:
        _unwind(store, spec.name, previous)
        return
    # The record keeps the first creation time (a describe of a cloud without one says "now"),
    # and, when no node exists (the scale-set PUT was refused outright: quota), the SKU, node
    # count and price it asked for: what exists is the cloud's view (`azbench status NAME`).
    kept: dict[str, object] = {"state": ClusterState.FAILED, "created_at": pending.created_at}
    if not left.nodes:
        kept.update(sku=pending.sku, nodes=pending.nodes, cost_per_hour_usd=pending.cost_per_hour_usd)
    store.save_cluster(left.model_copy(update=kept), spec.model_dump_json())
    note = (f"its resources are still there: `azbench down {spec.name}` deletes them "
            f"(`azbench status {spec.name}` lists them)")
    exc.hint = f"{exc.hint}; {note}" if exc.hint else note


def down(name: str, store: Store, on_progress: Callable[[Any], None] | None = None, *,
         force: bool = False, confirm: Callable[[str], None] | None = None) -> Cluster:
    """Delete the cluster's resources; idempotent; the record ends TERMINATED.

    Refused (NotOwnerError, nothing written) for a cluster the caller did not create, or one
    whose resources include some the backend did not make, unless `force`. `confirm` gets the
    question naming everything that goes (DownPreview; it raises to say no). The record is
    DELETING while the provider deletes; a delete that stops part way leaves it DELETE_FAILED
    with a `down_failed` event saying what is left, and the error's hint is to rerun `down`."""
    cluster = require_cluster(name, store, live=False)
    provider = get_provider(cluster.provider, progress=on_progress)
    what = "down" + (" (--force)" if force else "")
    preview = _down_preview(cluster, store, provider)
    try:
        _require_creator(provider, cluster, force=force, verb="down")
        foreign = [h for h in preview.holdings if not h.ours]
        if foreign and not force:
            raise NotOwnerError(f"cluster '{name}' holds {len(foreign)} resource(s) azbench did not make "
                                f"({', '.join(h.name for h in foreign)}), and `down` deletes everything it holds: "
                                f"{', '.join(h.describe() for h in preview.holdings)}",
                                hint=f"move them out first, or `azbench down {name} --force` deletes them too")
    except AzbenchError as exc:
        _attempted(store, name, "down", what, exc)
        raise
    if confirm is not None and preview.question:
        confirm(preview.question)
    began = utcnow()
    if cluster.state != ClusterState.TERMINATED:
        store.set_cluster_state(name, ClusterState.DELETING)
    try:
        provider.down(cluster)
    except AzbenchError as exc:
        if cluster.state != ClusterState.TERMINATED:
            store.set_cluster_state(name, ClusterState.DELETE_FAILED)
        _attempted(store, name, "down", what, exc, began)
        exc.hint = f"rerun `azbench down {name}` to finish the delete"
        if isinstance(exc, ProvisionError):
            exc.kind = "down failed"  # a delete that stopped, not a provisioning failure (same exit 4)
        raise
    store.set_cluster_state(name, ClusterState.TERMINATED)
    store.add_event(EventRow(kind="down", cluster=name, message=what,  # after the fact
                             data=DownData(started_at=began)))
    return cluster.model_copy(update={"state": ClusterState.TERMINATED})


def _require_creator(provider: Provider, cluster: Cluster, *, force: bool, verb: str) -> None:
    """NotOwnerError unless the caller created the live cluster (the provider's evidence:
    `foreign_owner`), or `force`: the one check of `down`, `extend` and `resize` (`adopt` asks
    the provider the same question)."""
    if force:
        return
    ownership = provider.parts().ownership
    other = ownership.foreign_owner(cluster) if ownership is not None else None  # none: no owners
    if other is not None:
        raise NotOwnerError(f"cluster '{cluster.name}' is not yours: {other}",
                            hint=f"`azbench {verb} {cluster.name} ... --force` acts on it anyway")


def adopt(name: str, store: Store, provider: str | None = None, *, force: bool = False,
          account: str | None = None, endpoint: str | None = None, resource_group: str | None = None) -> Cluster:
    """Rebuild the record of live cluster `name` from its cloud (tags and resources) in a home
    that has none (a lost store, another machine): the first backend that finds it, of
    `provider` or of every backend whose clusters are findable by tag (the `ownership` part).
    Another owner's is refused (NotOwnerError) unless `force`. An `adopt` event after the fact."""
    row = store.get_cluster(name)
    if row is not None and row.state != ClusterState.TERMINATED:
        raise ConfigError(f"cluster '{name}' is already in this home ({row.state.value})",
                          hint=f"see `azbench status {name}`")
    # Which backends can adopt is asked of their parts (no SDK needed): only those that can
    # need their extra, so a missing SDK of a backend that cannot adopt is never in the way.
    backends = [provider] if provider else [n for n in providers.names() if providers.parts(n).ownership is not None]
    for backend in backends:
        if (ownership := get_provider(backend).parts().ownership) is None:
            raise lacking(name, backend, "adopt")
        found = ownership.adopt(name, account=account, endpoint=endpoint, force=force, resource_group=resource_group)
        if found is None:
            continue
        if row is not None:  # a TERMINATED record of the name: it comes back through PROVISIONING
            store.save_cluster(found.model_copy(update={"state": ClusterState.PROVISIONING}))
        store.save_cluster(found, owner=owner_of(found))
        store.add_event(EventRow(kind="adopt", cluster=name,
                                 message=f"adopted {found.nodes} x {found.sku} ({found.state.value})"))
        return found
    raise NotFoundError(f"no cluster named '{name}' in {', '.join(backends)}",
                        hint="`azbench sweep --dry-run` lists what your subscription holds")


# The run states of a run not finished yet: `down` counts those on the cluster in its question.
ACTIVE_RUNS = frozenset({RunState.QUEUED, RunState.HEALTH_CHECK, RunState.SUBMITTING, RunState.RUNNING,
                         RunState.RETRYING})


@dataclass(frozen=True)
class DownPreview:
    """What `down` deletes, for its question: `question` is "" where none is asked (a provider
    that costs nothing, or a record already terminated). `holdings`: everything the cloud lists
    for it (ones the backend did not make included)."""

    cluster: Cluster
    running_runs: int
    cost_so_far_usd: float | None
    question: str
    holdings: tuple[Holding, ...] = ()


def down_preview(name: str, store: Store) -> DownPreview:
    """The cluster `down NAME` would delete and, on a provider that costs money
    (traits.spends_money), the [y/N] question naming its nodes, GPUs, the runs this home
    recorded as running on it (the scheduler itself is not asked), its list-price cost so far
    and every resource that goes. Reads the cloud (the provider's `holdings`), writes nothing."""
    cluster = require_cluster(name, store, live=False)
    return _down_preview(cluster, store, get_provider(cluster.provider))


def _down_preview(cluster: Cluster, store: Store, provider: Provider) -> DownPreview:
    name = cluster.name
    running = sum(1 for r in store.list_runs(cluster=name) if r.state in ACTIVE_RUNS)
    own = provider.parts()
    if not own.traits.spends_money or cluster.state == ClusterState.TERMINATED:
        cost = cost_so_far(cluster) if cluster.state != ClusterState.TERMINATED else None
        return DownPreview(cluster, running, cost, "")
    # Without the ownership part nothing is listed: the question names the cluster's nodes only.
    holdings = tuple(own.ownership.holdings(cluster)) if own.ownership is not None else ()
    billed = [h.billed for h in holdings if h.billed is not None]
    rate = billed_rate(billed) if holdings else None
    cost = spent_at(cluster, rate) if rate is not None else cost_so_far(cluster)
    gpus = gpus_of(cluster)
    priced = f" ({rate.say()})" if rate is not None and rate.parts else ""
    spent = (f"~${cost:,.2f} spent so far (list price{priced})" if cost is not None else
             f"cost so far unknown{priced}")
    goes = f"; it deletes {', '.join(h.describe() for h in holdings)}" if holdings else ""
    question = (f"Delete cluster '{name}' ({cluster.provider}, {cluster.state.value}): {cluster.nodes:,} x "
                f"{cluster.sku}{f' = {gpus:,} GPUs' if gpus is not None else ''}, {running} run(s) recorded "
                f"as running on it, {spent}{goes}?")
    return DownPreview(cluster, running, cost, question, holdings)


def resize_question(name: str, nodes: int, store: Store) -> str:
    """For `resize` that grows a cluster on a provider that costs money: the [y/N] question
    naming the VMs added and the cost per hour before and after (list price); "" otherwise.
    The count is checked first (GB200: whole racks), so nothing is asked of a refused one."""
    cluster = require_cluster(name, store)
    plan = plan_resize(cluster, nodes)
    if plan.after <= plan.before or not parts(cluster).traits.spends_money:
        return ""
    added = plan.after - plan.before
    price = price_of(cluster)
    gpus = gpus_of(cluster.model_copy(update={"nodes": added}))
    more = (f"+~${added * price:,.2f}/h, ~${(cluster.cost_per_hour_usd or 0) + added * price:,.2f}/h in all "
            "(list price)" if price is not None and cluster.cost_per_hour_usd is not None else "cost unknown")
    return (f"Add {added:,} x {lookup(cluster.sku).name}{f' ({gpus:,} GPUs)' if gpus is not None else ''} to "
            f"cluster '{name}' ({plan.before:,} -> {plan.after:,} nodes): {more}?")


def record_if_live(spec: ClusterSpec, store: Store) -> bool:
    """Store the cluster `spec` names as its provider describes it (an `up` cut short before the
    store knew it); False when the provider finds no such cluster."""
    found = get_provider(spec.provider).describe(spec.name, spec)
    if found is None:
        return False
    store.save_cluster(found, spec.model_dump_json(), owner=owner_of(found))
    return True


def connect(cluster: Cluster) -> Access:
    """The cluster's launcher, shell and traits (close the Access when done)."""
    return get_provider(cluster.provider).connect(cluster)


def parts(cluster: Cluster) -> ProviderParts:
    """What the cluster can do beyond the protocol, and its traits, without connecting to it."""
    return get_provider(cluster.provider).parts()


def restore_capacity(cluster: Cluster, nodes: Sequence[str] = (), evict_wait_s: float = 0.0) -> list[str]:
    """After an eviction: the provider waits (at most `evict_wait_s`) until `nodes` are gone, then
    brings the cluster's nodes back (MissingCapability where it cannot); the host names now in
    the cluster."""
    if (healer := parts(cluster).healer) is None:
        raise lacking(cluster.name, cluster.provider, "restore_capacity")
    return healer.restore_capacity(cluster, nodes, evict_wait_s=evict_wait_s)


def sweep(request: SweepRequest, store: Store | None = None) -> list[SweepItem]:
    """Every backend that can (the `expiry` part) searches its cloud for expired clusters and,
    unless a dry run, deletes them; their items in registry order. Each deleted cluster this
    home has a live record of ends TERMINATED, with a `sweep` event. NotFoundError-free: a
    backend's own errors (no subscription, sign-in) pass through."""
    items: list[SweepItem] = []
    for name in providers.names():
        # Whether it sweeps is asked of its parts (no SDK needed); only a backend that does
        # needs its extra, so ssh's missing paramiko never stands in for azure's SDKs.
        if providers.parts(name).expiry is None or (expiry := get_provider(name).parts().expiry) is None:
            continue
        found = expiry.sweep(request)
        items += found
        if store is not None:
            _mark_swept(store, name, found)
    return items


def _mark_swept(store: Store, provider: str, items: Sequence[SweepItem]) -> None:
    """This home's live records of the clusters sweep deleted end TERMINATED, after the fact."""
    for item in items:
        row = store.get_cluster(item.cluster) if item.deleted else None
        if row is not None and row.provider == provider and row.state != ClusterState.TERMINATED:
            store.set_cluster_state(item.cluster, ClusterState.TERMINATED)
            store.add_event(EventRow(kind="down", cluster=item.cluster, message=f"swept: {item.reason}"))


def cluster_status(cluster: Cluster, now: datetime | None = None, store: Store | None = None) -> ClusterStatus:
    """`azbench status NAME` (status.cluster_status) with the cluster's provider."""
    return status.cluster_status(get_provider(cluster.provider), cluster, now, store)


def status_list(store: Store, now: datetime | None = None) -> tuple[list[ListedCluster], list[str]]:
    """`azbench status` (status.status_list), each backend's provider looked up here."""
    return status.status_list(store, lambda backend: get_provider(backend), now)


def reachable(name: str | None, store: Store) -> Cluster:
    """The named cluster (or the only live one) for a command that logs in to it (`ssh`, `run`,
    `health`, `logs`, `prepare`). One that is deleted (NotFoundError, exit 2, as require_cluster
    says it) or being deleted (NotAvailableError) is refused in one line with its state, before
    any login: as its record says, or, for a backend whose cloud
    can be asked without a login, as the cloud says now (one listing; the record follows). A
    cloud that cannot be asked leaves the record as it is."""
    row = store.get_cluster(name) if name is not None else None
    if name is not None and row is None:
        raise NotFoundError(f"no cluster named '{name}'", hint="see `azbench status`")
    cluster = row.cluster if row is not None else require_cluster(None, store)
    live = parts(cluster).live
    if cluster.state not in GONE and live is not None:
        try:
            view = live.overview([cluster]).get(cluster.name)
        except Exception:  # the cloud cannot be asked now: the login will say what it finds
            view = None
        cluster, _ = reconcile(cluster, view, store)
    if cluster.state == ClusterState.TERMINATED:  # as require_cluster says it, with the state
        raise NotFoundError(f"cluster '{cluster.name}' is down (terminated): nothing of it is left to log in to",
                            hint="bring it up with `azbench up`")
    if cluster.state in GONE:
        why = "its delete is under way" if cluster.state == ClusterState.DELETING else "a `down` of it stopped part way"
        raise NotAvailableError(f"cluster '{cluster.name}' is {cluster.state.value}: {why}",
                                hint=f"rerun `azbench down {cluster.name}` to finish the delete")
    return cluster


def require_cluster(name: str | None, store: Store, *, live: bool = True) -> Cluster:
    """The named cluster, or the only live one when no name is given."""
    if name is None:
        live_rows = store.list_clusters()
        if len(live_rows) == 1:
            return live_rows[0].cluster
        if not live_rows:
            raise NotFoundError("no cluster is up", hint="start one with `azbench up`")
        names = ", ".join(r.name for r in live_rows)
        raise ConfigError(f"several clusters are up ({names}): pass --cluster NAME")
    row = store.get_cluster(name)
    if row is None:
        raise NotFoundError(f"no cluster named '{name}'", hint="see `azbench status`")
    if live and row.state == ClusterState.TERMINATED:
        raise NotFoundError(f"cluster '{name}' is down", hint="bring it up with `azbench up`")
    return row.cluster


def extend(name: str, hours: float, store: Store, now: datetime | None = None, *, force: bool = False) -> Cluster:
    """Move the cluster's deadline `hours` later (from now if it has passed): the provider's tags,
    which the in-cluster expiry agent reads, then the record. Another's cluster is refused
    (NotOwnerError) unless `force`, as `down` and `resize` refuse it."""
    if not (math.isfinite(hours) and EXTEND_HOURS[0] <= hours <= EXTEND_HOURS[1]):
        raise ConfigError(f"--hours: must be between {EXTEND_HOURS[0]:g} and {EXTEND_HOURS[1]:g}, "
                          f"got {hours:g}")
    cluster = require_cluster(name, store)
    provider = get_provider(cluster.provider)
    deadline = expires_at(cluster)
    expiry = provider.parts().expiry
    if expiry is None or deadline is None:
        raise ConfigError(f"cluster '{name}' ({cluster.provider}) has no expiry to extend",
                          hint="only clusters that delete themselves (azure) expire")
    now = now or datetime.now(timezone.utc)
    new = max(deadline, now) + timedelta(hours=hours)
    what = f"expiry {deadline:%Y-%m-%dT%H:%M:%SZ} -> {new:%Y-%m-%dT%H:%M:%SZ}"
    try:
        _require_creator(provider, cluster, force=force, verb="extend")
        expiry.extend(cluster, new)
    except AzbenchError as exc:  # the cloud said no: history says so, not that it moved
        _attempted(store, name, "extend", what, exc)
        raise
    updated = cluster.model_copy(update={"properties": cluster.properties.with_deadline(new)})
    with store.transaction():
        store.save_cluster(updated)
        store.add_event(EventRow(kind="extend", cluster=name, message=what))  # after Azure accepted
    return updated


def replace_node(cluster: Cluster, node: str, store: Store) -> tuple[Cluster, str]:
    """The provider retires `node` and brings a fresh one up under a new name (MissingCapability
    where it cannot); the record is re-read from the provider and stored. The cluster as now
    described, and the new node's name."""
    provider = get_provider(cluster.provider)
    if (healer := provider.parts().healer) is None:
        raise lacking(cluster.name, cluster.provider, "replace_node")
    new = healer.replace_node(cluster, node)
    current = provider.describe(cluster.name) or cluster
    current = current.model_copy(update={"created_at": cluster.created_at})
    store.save_cluster(current)
    return current, new


def report_unhealthy(cluster: Cluster, reasons: Mapping[str, str], store: Store) -> list[HostReport]:
    """Report drained nodes (node -> reason) to the cloud as faulty hosts (MissingCapability
    where the provider has no documented way); one `host_reported` event per node."""
    if (reports := parts(cluster).host_reports) is None:
        raise lacking(cluster.name, cluster.provider, "report_unhealthy")
    results = reports.report_unhealthy(cluster, reasons)
    for r in results:
        store.add_event(EventRow(kind="host_reported", cluster=cluster.name,
                                 message=f"{r.node}: {r.status} ({r.detail})",
                                 data=HostReportData(node=r.node, status=r.status, detail=r.detail,
                                                     category=r.category)))
    return results


def resize(name: str, nodes: int, store: Store, *, force: bool = False) -> tuple[Cluster, ResizePlan]:
    """`azbench resize`: grow (the provider's quota check first) or shrink (drain the nodes to
    remove, refuse when a job runs on them unless `force`), then store the record and an event.
    Another's cluster is refused unless `force` (as `down` and `extend`); a grow asks the
    scheduler nothing. A resize that fails is recorded (`resize_failed`) with why."""
    cluster = require_cluster(name, store)
    provider = get_provider(cluster.provider)
    began = utcnow()
    if (resizer := provider.parts().resizer) is None:
        raise lacking(cluster.name, cluster.provider, "resize")
    have = len(cluster.node_names) or cluster.nodes
    what = f"resize {have} -> {nodes} nodes"
    drained: list[str] = []
    try:
        _require_creator(provider, cluster, force=force, verb="resize")
        plan = plan_resize(cluster, nodes)
        if plan.after < plan.before:
            with provider.connect(cluster) as access:
                infos = access.launcher.node_states()
                busy = [n for n, info in infos.items() if info.state in ("allocated", "mixed", "completing")]
                plan = plan_resize(cluster, nodes, busy)
                if plan.busy and not force:
                    raise ConfigError(f"refusing to shrink '{name}': a job runs on {', '.join(plan.busy)}",
                                      hint="wait for it, or pass --force to remove them anyway")
                control = access.launcher.parts().nodes
                if plan.remove and control is not None:  # without it the provider retires them as they are
                    drained = list(plan.remove)
                    control.drain({n: "azbench: resize (removing)" for n in plan.remove})
        resized = resizer.resize(cluster, nodes, plan.remove)
    except AzbenchError as exc:
        # No node stays drained and billing: those the provider did not remove (all of them,
        # unless it says which it kept) go back to service, and the message says so.
        back = undrain(provider, cluster, [n for n in drained if n in exc.kept]
                        if isinstance(exc, ShrinkError) else drained)
        if back:
            exc.message = f"{exc.message}; {back}"
        _attempted(store, name, "resize", what, exc)
        raise
    resized = resized.model_copy(update={"created_at": cluster.created_at})
    store.save_cluster(resized)
    if isinstance(provider, ReportsNotes):  # what the resize did besides its plan (a park that fell back)
        for note in provider.notes.get(name, []):
            store.add_event(EventRow(kind="resize_note", cluster=name, message=note))
    store.add_event(EventRow(kind="resize", cluster=name, message=f"{plan.before} -> {plan.after} nodes",
                             data=ResizeData(removed=list(plan.remove), forced=list(plan.busy),
                                             before=plan.before, after=plan.after, started_at=began)))
    return resized, plan


def resize_preview(name: str, nodes: int, store: Store) -> list[SetChange]:
    """`resize --dry-run`: what the provider would change, one entry per node group (scale set)
    that changes; reads only, never the scheduler (a shrink removes the last nodes, as a real
    one does when none of them is busy)."""
    cluster = require_cluster(name, store)
    plan = plan_resize(cluster, nodes)
    if (resizer := parts(cluster).resizer) is None:
        raise lacking(cluster.name, cluster.provider, "resize_preview")
    return resizer.resize_preview(cluster, nodes, plan.remove)
