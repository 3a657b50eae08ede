"""Team cost: what each owner's clusters cost and how much of it trained, from the store.

An owner's clusters count for the part of their lives inside the window (`since` to now), in
node-hours over each cluster's size history (its resize events, as `goodput --cluster` counts
them), at the price per node-hour their records hold (list price); their runs (the runs whose record names the owner,
started inside the window) give the training node-hours (run.run_goodput). Goodput per owner is
training node-hours over the node-hours of their clusters. A record from before owners were
stored (schema v6) counts under NOT_RECORDED.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from orchestrator.goodput.cluster import EVENT_LIMIT, _node_counts, _nodes_at, life
from orchestrator.goodput.model import TRAINING, OwnerTotal
from orchestrator.goodput.run import run_goodput
from orchestrator.goodput.timeline import epoch
from orchestrator.hardware.catalog import find
from orchestrator.models import local_owner, utcnow
from orchestrator.store.database import Store
from orchestrator.store.schema import ClusterRow

NOT_RECORDED = "(not recorded)"


@dataclass
class _Acc:
    clusters: int = 0
    runs: int = 0
    hours: float = 0.0
    node_hours: float = 0.0
    gpu_hours: float = 0.0
    cost: float = 0.0
    unpriced: list[str] = field(default_factory=list)
    training_node_hours: float = 0.0


def by_owner(store: Store, since: datetime | None = None, now: datetime | None = None) -> list[OwnerTotal]:
    """One total per owner with a cluster or a run in the window, most expensive first."""
    now = now or utcnow()
    acc: dict[str, _Acc] = {}
    for row in store.list_clusters(include_terminated=True):
        hours = _hours_in(row, since, now)
        if hours <= 0:
            continue
        a = acc.setdefault(row.owner or NOT_RECORDED, _Acc())
        a.clusters += 1
        a.hours += hours
        node_hours = _node_hours_in(store, row, since, now)
        a.node_hours += node_hours
        sku = find(row.sku)
        a.gpu_hours += node_hours * (sku.gpus_per_vm if sku else 0)
        price = row.cluster.cost_per_hour_usd
        if price is None:
            a.unpriced.append(row.name)
        elif row.nodes > 0:  # per node-hour, as `goodput --cluster` prices it
            a.cost += node_hours * price / row.nodes
    for run in store.list_runs():
        if since is not None and run.created_at < since:
            continue
        g = run_goodput(store, run.id, now)
        a = acc.setdefault(run.owner or NOT_RECORDED, _Acc())
        a.runs += 1
        a.training_node_hours += g.categories[TRAINING] * g.nodes / 3600
    out = [OwnerTotal(owner=k, clusters=a.clusters, runs=a.runs, cluster_hours=round(a.hours, 4),
                      node_hours=round(a.node_hours, 4), gpu_hours=round(a.gpu_hours, 4),
                      cost_usd=None if a.unpriced else round(a.cost, 2),
                      training_node_hours=round(a.training_node_hours, 4),
                      goodput=round(min(a.training_node_hours / a.node_hours, 1.0), 4) if a.node_hours else 0.0,
                      unpriced=sorted(a.unpriced))
           for k, a in acc.items()]
    return sorted(out, key=lambda t: (-(t.cost_usd or 0.0), t.owner))


@dataclass(frozen=True)
class Spend:
    """What one owner's clusters cost inside a window (list price), and which have no price."""

    owner: str
    usd: float
    clusters: int
    unpriced: tuple[str, ...] = ()


def spent(store: Store, owner: str, since: datetime | None, now: datetime | None = None) -> Spend:
    """The cost of `owner`'s clusters from `since` (None: ever) to now."""
    now = now or utcnow()
    rows = [r for r in store.list_clusters(include_terminated=True) if r.owner == owner]
    return _spend(owner, rows, since, now)


def _spend(owner: str, rows: Sequence[ClusterRow], since: datetime | None, now: datetime) -> Spend:
    usd, counted, unpriced = 0.0, 0, []
    for row in rows:
        hours = _hours_in(row, since, now)
        if hours <= 0:
            continue
        counted += 1
        price = row.cluster.cost_per_hour_usd
        if price is None:
            unpriced.append(row.name)
        else:
            usd += hours * price
    return Spend(owner, round(usd, 2), counted, tuple(sorted(unpriced)))


def _node_hours_in(store: Store, row: ClusterRow, since: datetime | None, now: datetime) -> float:
    """The cluster's node-hours inside the window, over its size history (its resize events,
    as `goodput --cluster` walks them: cluster._node_counts)."""
    lo, hi, _ = life(row, now)
    events = [e for e in store.list_events(cluster=row.name, limit=EVENT_LIMIT)
              if e.run_id is None and e.kind == "resize"]
    steps = _node_counts(row.nodes, events, lo)
    start = max(lo, epoch(since)) if since is not None else lo
    total = 0.0
    bounds = [t for t, _ in steps if start < t < hi] + [hi]
    t0 = start
    for t1 in bounds:
        total += max(t1 - t0, 0.0) * _nodes_at(steps, t0)
        t0 = t1
    return total / 3600


def _hours_in(row: ClusterRow, since: datetime | None, now: datetime) -> float:
    lo, hi, _ = life(row, now)
    if since is not None:
        lo = max(lo, epoch(since))
    return max(hi - lo, 0.0) / 3600


def expected_owner(store: Store, provider: str) -> str:
    """The owner an `up` of a `provider` cluster will record, as far as it is known before any
    sign-in: the owner of this home's newest cluster of that provider (the same sign-in, on
    Azure its principal), else who runs azbench here (models.local_owner)."""
    rows = [r for r in store.list_clusters(include_terminated=True) if r.provider == provider and r.owner]
    newest = max(rows, key=lambda r: r.created_at) if rows else None
    return newest.owner if newest is not None and newest.owner else local_owner()
