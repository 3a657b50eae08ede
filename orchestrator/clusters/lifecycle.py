"""The use cases behind the CLI: up, down, status, and cluster lookup.

Each function takes typed specs, wires provider + store, and returns data for the CLI to render.
Every state change is written to the store before the action it describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from orchestrator.clusters.providers import get_provider
from orchestrator.clusters.spending import check_cost_cap, cost_cap
from orchestrator.clusters.specs import ClusterSpec
from orchestrator.errors import AzbenchError, ConfigError, NotFoundError, NotOwnerError, PreflightError
from orchestrator.models import Cluster, ClusterState, Plan, utcnow

if TYPE_CHECKING:
    from orchestrator.clusters.providers.base import Provider
    from orchestrator.seams import Access, Capabilities
    from orchestrator.store.database import Store
    from orchestrator.store.schema import ClusterRow


@dataclass(frozen=True)
class UpResult:
    plan: Plan
    cluster: Cluster
    adopted: bool = False


def plan(spec: ClusterSpec) -> Plan:
    """The dry-run: no credentials, no network, no store."""
    return get_provider(spec.provider).plan(spec)


def up(spec: ClusterSpec, store: Store, on_progress: Callable[[Any], None] | None = None) -> UpResult:
    """Plan, store the cluster PROVISIONING with its plan, then create or adopt it.

    The record exists before the first create, so a crash mid-up (kill -9 included) leaves one
    that `azbench down NAME` deletes from. A refusal before anything was created (a config or
    preflight error) puts the store back as it was; any other failure records what exists as
    FAILED. A rerun keeps the cluster's first creation time."""
    from orchestrator.store.schema import EventRow
    provider = get_provider(spec.provider, progress=on_progress)
    the_plan = provider.plan(spec)
    check_cost_cap(the_plan, cost_cap(spec))  # before describe(): no credential is read yet
    previous = store.get_cluster(spec.name)
    live = previous is not None and previous.state != ClusterState.TERMINATED
    if previous is not None and live and previous.provider != spec.provider:
        raise ConfigError(f"cluster '{spec.name}' already exists with provider "
                          f"'{previous.provider}': pick another --name")
    existing = provider.describe(spec.name)
    created = previous.created_at if previous is not None and live else utcnow()
    pending = provider.provisional(spec, the_plan).model_copy(update={"created_at": created})
    store.save_cluster(pending, spec.model_dump_json(), plan_json=the_plan.model_dump_json())
    store.add_event(EventRow(kind="up", cluster=spec.name, message=f"up {spec.nodes} x {the_plan.sku}"))
    try:
        cluster = provider.up(spec, the_plan)
    except (ConfigError, PreflightError):
        _unwind(store, spec.name, previous)
        raise
    except AzbenchError as exc:
        _record_leftovers(spec, provider, store, exc, previous, pending)
        raise
    cluster = cluster.model_copy(update={"created_at": created})
    store.save_cluster(cluster, spec.model_dump_json())
    return UpResult(plan=the_plan, cluster=cluster, adopted=existing is not None)


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
        left = provider.describe(spec.name)
    except AzbenchError:
        return  # cannot tell; `azbench down NAME` (or sweep, by tag) still finds it
    if left is None:
        _unwind(store, spec.name, previous)
        return
    # The record keeps the first creation time (a describe of a cloud without one says "now").
    kept = {"state": ClusterState.FAILED, "created_at": pending.created_at}
    store.save_cluster(left.model_copy(update=kept), spec.model_dump_json())
    note = f"its resources are still there: `azbench down {spec.name}` deletes them"
    exc.hint = f"{exc.hint}; {note}" if exc.hint else note


def down(name: str, store: Store, on_progress: Callable[[Any], None] | None = None, *,
         force: bool = False) -> Cluster:
    """Delete the cluster's resources; idempotent; the record ends TERMINATED. A cluster that
    belongs to another owner (a shared subscription) is refused (NotOwnerError) unless `force`."""
    from orchestrator.store.schema import EventRow
    cluster = require_cluster(name, store, live=False)
    provider = get_provider(cluster.provider, progress=on_progress)
    if not force:
        other = provider.foreign_owner(cluster)
        if other is not None:
            raise NotOwnerError(f"cluster '{name}' belongs to another owner ({other})",
                                hint=f"`azbench down {name} --force` deletes it anyway")
    store.add_event(EventRow(kind="down", cluster=name, message="down requested" + (" (--force)" if force else "")))
    provider.down(cluster)
    store.set_cluster_state(name, ClusterState.TERMINATED)
    return cluster.model_copy(update={"state": ClusterState.TERMINATED})


def connect(cluster: Cluster) -> Access:
    """The cluster's launcher, shell and capabilities (close the Access when done)."""
    return get_provider(cluster.provider).connect(cluster)


def capabilities(cluster: Cluster) -> Capabilities:
    """What the cluster can do, without connecting to it."""
    return get_provider(cluster.provider).caps


def restore_capacity(cluster: Cluster, nodes: Sequence[str] = ()) -> list[str]:
    """After an eviction: the provider brings the cluster's nodes back (MissingCapability where
    it cannot); the host names now in the cluster."""
    return get_provider(cluster.provider).restore_capacity(cluster, nodes)


@dataclass(frozen=True)
class NodeView:
    """One node for `azbench status`: its name, state and a detail (reason or scale set)."""

    name: str
    state: str
    detail: str = ""


def node_views(cluster: Cluster) -> list[NodeView]:
    """Live node states: the scheduler's view where azbench can reach it, else the cloud's."""
    if cluster.state != ClusterState.READY:
        return []
    provider = get_provider(cluster.provider)
    try:
        access = provider.connect(cluster)
    except AzbenchError:
        if not provider.caps.live_node_states:
            return []
        return [NodeView(n["name"], n["state"], n["scale_set"]) for n in provider.node_states(cluster)]
    with access:
        infos = access.launcher.node_states()
    return [NodeView(i.name, i.state + ("" if i.responding else "*"),
                     "" if i.reason.lower() == "none" else i.reason) for i in infos.values()]


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


def cost_so_far(cluster: Cluster, now: datetime | None = None) -> float | None:
    """List-price estimate since creation (None when the price is unknown)."""
    if cluster.cost_per_hour_usd is None:
        return None
    end = now or datetime.now(timezone.utc)
    hours = max(0.0, (end - cluster.created_at).total_seconds() / 3600)
    return round(hours * cluster.cost_per_hour_usd, 2)


def expires_at(cluster: Cluster) -> datetime | None:
    """The cluster's deadline (its azbench-expires tag, as recorded), or None when it has none."""
    return cluster.properties.deadline()


def time_left(cluster: Cluster, now: datetime | None = None) -> timedelta | None:
    """Time until the cluster deletes itself (negative once past), or None without a deadline."""
    deadline = expires_at(cluster)
    return None if deadline is None else deadline - (now or datetime.now(timezone.utc))


def extend(name: str, hours: float, store: Store, now: datetime | None = None) -> Cluster:
    """Move the cluster's deadline `hours` later (from now if it has passed): the provider's tags,
    which the in-cluster expiry agent reads, then the record."""
    from orchestrator.store.schema import EventRow
    if hours <= 0:
        raise ConfigError(f"--hours: must be positive, got {hours:g}")
    cluster = require_cluster(name, store)
    provider = get_provider(cluster.provider)
    deadline = expires_at(cluster)
    if not provider.caps.expires or deadline is None:
        raise ConfigError(f"cluster '{name}' ({cluster.provider}) has no expiry to extend",
                          hint="only clusters that delete themselves (azure) expire")
    now = now or datetime.now(timezone.utc)
    new = max(deadline, now) + timedelta(hours=hours)
    store.add_event(EventRow(kind="extend", cluster=name, message=f"expiry {deadline:%Y-%m-%dT%H:%M:%SZ} -> "
                                                                  f"{new:%Y-%m-%dT%H:%M:%SZ}"))
    provider.extend(cluster, new)
    updated = cluster.model_copy(update={"properties": cluster.properties.with_deadline(new)})
    store.save_cluster(updated)
    return updated
