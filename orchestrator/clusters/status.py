"""What `azbench status` says of a cluster, and the record following the cloud's view.

The cloud's view comes first (the provider's `live` part: no login), the record follows it
(`reconcile`: saved, with a `status` event), then the scheduler's view from the head, only while
the cluster is ready. lifecycle.py hands in the provider (its `get_provider`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from orchestrator.clusters.cost import Rate, cost_now
from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster, ClusterState
from orchestrator.providers.base import CloudView, Provider

if TYPE_CHECKING:
    from orchestrator.store.database import Store


@dataclass(frozen=True)
class NodeView:
    """One node for `azbench status`: its name, state and a detail (reason or scale set)."""

    name: str
    state: str
    detail: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    """`azbench status NAME`: the cloud's view (no login; None where the provider has none),
    then the scheduler's view from the head. `cloud_note` says why the cloud view is missing,
    `head` why the scheduler's is ("head unreachable: <reason>", or no login tried for a cluster
    deleted or being deleted); `change` how the record followed the cloud; "" when there is
    nothing to say.
    """

    cluster: Cluster
    cloud: CloudView | None
    nodes: list[NodeView]
    cost_so_far_usd: float | None
    expires: datetime | None
    cloud_note: str = ""
    head: str = ""
    change: str = ""  # how the record followed the cloud's view ("" when it did not change)
    rate: Rate | None = None  # what bills now, from the cloud's view (None without one)

    @property
    def down_nodes(self) -> list[str]:
        """The nodes the scheduler reports down, drained or failed ("down*", "drain", "fail")."""
        return [n.name for n in self.nodes if n.state.rstrip("*~#!%$@^-+").lower()
                in ("down", "drain", "drained", "draining", "fail", "failing", "not_responding")]

    @property
    def health(self) -> str:
        """"degraded" when the scheduler reports a node down, else the record's state."""
        return "degraded" if self.down_nodes else self.cluster.state.value


def cluster_status(provider: Provider, cluster: Cluster, now: datetime | None = None,
                   store: Store | None = None) -> ClusterStatus:
    """The cloud's view of the cluster first (states, instances, its tags' creation time and
    expiry), and the record follows it (saved when `store` is given): nothing left is
    TERMINATED, a group being deleted DELETING, a ready cluster with parts missing FAILED.
    Then Slurm's view, only when the cluster is (still) ready: no SSH to a cluster the cloud
    says is gone. Never raises for an unreachable cloud or head: each failure becomes its
    one-line note."""
    cloud: CloudView | None = None
    cloud_note = ""
    live = provider.parts().live
    if live is not None and cluster.state != ClusterState.TERMINATED:
        try:
            cloud = live.live_view(cluster)
        except Exception as exc:  # status reports; the SDK's network errors are not all ours
            cloud_note = f"cloud view unavailable: {one_line(exc)}"
    cluster, change = reconcile(cluster, cloud, store)
    nodes: list[NodeView] = []
    head = ""
    if cluster.state == ClusterState.READY:
        try:
            with provider.connect(cluster) as access:
                infos = access.launcher.node_states()
            nodes = [NodeView(i.name, i.state + ("" if i.responding else "*"),
                              "" if i.reason.lower() == "none" else i.reason) for i in infos.values()]
        except MissingCapability:
            pass  # the launcher has no node list (Azure ML): nothing to say
        except Exception as exc:  # RemoteError, or what paramiko raises before it is wrapped
            head = f"head unreachable: {one_line(exc)}"
    elif cluster.state in GONE:
        head = "no login tried: the cluster is " + {ClusterState.TERMINATED: "deleted", ClusterState.DELETING: "being deleted",
                                                    ClusterState.DELETE_FAILED: "partly deleted (delete failed)"}[cluster.state]
    created = cloud.created if cloud is not None and cloud.created else cluster.created_at
    deadline = cloud.expires if cloud is not None and cloud.expires else expires_at(cluster)
    rate, cost = cost_now(cluster, cloud, created, now)
    return ClusterStatus(cluster=cluster, cloud=cloud, nodes=nodes, cost_so_far_usd=cost,
                         expires=deadline, cloud_note=cloud_note, head=head, change=change, rate=rate)


@dataclass(frozen=True)
class ListedCluster:
    """One row of `azbench status`: the record as the cloud's view left it, what bills now
    per hour, the cost so far and the deadline (None where there is none or it is gone)."""

    cluster: Cluster
    cost_so_far_usd: float | None
    billed_per_hour_usd: float | None
    expires: datetime | None
    change: str = ""


def status_list(store: Store, provider_for: Callable[[str], Provider],
                now: datetime | None = None) -> tuple[list[ListedCluster], list[str]]:
    """Every cluster of this home as its cloud has it: each backend that can be asked without
    a login (the `live` part) is asked once for all its clusters (`overview`: one listing
    of each kind), and each record follows its view (`_reconcile`, saved). Returns the rows and
    one note per backend that could not be asked (its rows then stand as recorded)."""
    rows = [r.cluster for r in store.list_clusters(include_terminated=True)]
    by_backend: dict[str, list[Cluster]] = {}
    for c in rows:
        if c.state != ClusterState.TERMINATED:
            by_backend.setdefault(c.provider, []).append(c)
    views: dict[str, CloudView] = {}
    notes: list[str] = []
    for backend, clusters in by_backend.items():
        if (live := provider_for(backend).parts().live) is None:
            continue
        try:
            views.update(live.overview(clusters))
        except Exception as exc:  # status reports; the SDK's network errors are not all ours
            notes.append(f"{backend}: cloud view unavailable: {one_line(exc)}")
    out = []
    for c in rows:
        view = views.get(c.name) if c.state != ClusterState.TERMINATED else None
        c, change = reconcile(c, view, store)
        created = view.created if view is not None and view.created else c.created_at
        rate, cost = cost_now(c, view, created, now) if c.state != ClusterState.TERMINATED else (None, None)
        deadline = None if c.state == ClusterState.TERMINATED else \
            (view.expires if view is not None and view.expires else expires_at(c))
        out.append(ListedCluster(c, cost, rate.per_hour if rate is not None else None, deadline, change))
    return out, notes


GONE = (ClusterState.TERMINATED, ClusterState.DELETING, ClusterState.DELETE_FAILED)


def reconcile(cluster: Cluster, cloud: CloudView | None, store: Store | None) -> tuple[Cluster, str]:
    """The record as the cloud's view says it is, and one line saying what changed ("" when
    nothing did). A PROVISIONING record is left alone: an `up` may be writing it now."""
    from orchestrator.store.schema import EventRow  # lazy: +sqlalchemy, ~0.4 s, on `up --dry-run` (-X importtime)
    if cloud is None:
        return cluster, ""
    state, why = cluster.state, ""
    if not cloud.exists and cluster.state in (ClusterState.READY, ClusterState.FAILED, ClusterState.DELETING):
        state, why = ClusterState.TERMINATED, "deleted: the cloud holds nothing tagged with it"
    elif cloud.phase == "deleting" and cluster.state != ClusterState.DELETING:
        state, why = ClusterState.DELETING, f"being deleted: {cloud.phase_detail}"
    elif cloud.phase == "partial" and cluster.state == ClusterState.READY:
        state, why = ClusterState.FAILED, f"partly there: {cloud.phase_detail}"
    elif cloud.exists and not cloud.phase and cluster.state == ClusterState.DELETING:
        state, why = ClusterState.FAILED, "its deletion stopped: the cloud still holds it"
    if state == cluster.state:
        return cluster, ""
    updated = cluster.model_copy(update={"state": state})
    if store is not None:
        store.save_cluster(updated)
        store.add_event(EventRow(kind="status", cluster=cluster.name,
                                 message=f"{cluster.state.value} -> {state.value}: {why}"))
    return updated, f"record updated: {cluster.state.value} -> {state.value} ({why})"


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def expires_at(cluster: Cluster) -> datetime | None:
    """The cluster's deadline (its azbench-expires tag, as recorded), or None when it has none."""
    return cluster.properties.deadline()


def time_left(cluster: Cluster, now: datetime | None = None) -> timedelta | None:
    """Time until the cluster deletes itself (negative once past), or None without a deadline."""
    deadline = expires_at(cluster)
    return None if deadline is None else deadline - (now or datetime.now(timezone.utc))
