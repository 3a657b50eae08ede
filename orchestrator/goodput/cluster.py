"""A cluster's goodput over its whole life: from its record's creation to its end (now while it
lives), split into CLUSTER_CATEGORIES (model.CLUSTER_SOURCES says where each comes from).

The cluster's own activities are spans of its events, each recorded after the fact with its
`started_at` (lifecycle's up, down and resize; `azbench prepare` and `azbench health`) or its
`seconds` (a node replacement); they hold every node. Runs hold their nodes, in their own
categories (run.run_goodput; a run's teardown is `run_teardown` here); what the runs leave free
is idle. Each instant is weighted by the share of the cluster's nodes each activity held (node
counts follow the resize events), so the seconds add up to the wall time, while node-hours,
GPU-hours and dollars count every node.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from orchestrator.errors import NotFoundError
from orchestrator.goodput.model import (CLUSTER_CATEGORIES, IDLE, TRAINING, Cause,
                                        ClusterGoodput, RunGoodput, RunShare, Span)
from orchestrator.goodput.run import run_goodput
from orchestrator.goodput.timeline import epoch, utc
from orchestrator.hardware.catalog import find
from orchestrator.models import ClusterState, utcnow
from orchestrator.store.database import Store
from orchestrator.store.events import ResizeData, Spanned
from orchestrator.store.schema import ClusterRow, EventRow

# Event kinds that are spans of the cluster's own activities, with their category and priority
# (where two overlap, the higher wins; all of them win over runs).
ACTIVITIES: dict[str, tuple[str, int]] = {
    "down": ("teardown", 6), "down_failed": ("teardown", 6),
    "up": ("provisioning", 5), "up_failed": ("provisioning", 5),
    "resize": ("resize_replace", 4), "node_replaced": ("resize_replace", 4),
    "prepare": ("staging", 3),
    "health": ("health_gate", 2),
}
_RESIZE = re.compile(r"^(\d+) -> (\d+) nodes")
EVENT_LIMIT = 1_000_000  # every event of the cluster (list_events keeps the latest `limit`)


@dataclass(frozen=True)
class _Activity:
    category: str
    start: float
    end: float
    priority: int


@dataclass(frozen=True)
class _RunSpan:
    category: str
    start: float
    end: float
    nodes: int


def cluster_goodput(store: Store, name: str, now: datetime | None = None) -> ClusterGoodput:
    """The breakdown of cluster `name`'s life from the store (and its runs' fetched logs);
    NotFoundError when the store has no such cluster."""
    row = store.get_cluster(name)
    if row is None:
        raise NotFoundError(f"no cluster named '{name}'", hint="see `azbench status`")
    now = now or utcnow()
    lo, hi, live = life(row, now)
    events = [e for e in store.list_events(cluster=name, limit=EVENT_LIMIT)
              if e.run_id is None and lo - 1 <= epoch(e.ts) <= hi + 1]
    runs = [run_goodput(store, r.id, now) for r in store.list_runs(cluster=name)
            if epoch(r.created_at) >= lo - 1]
    return breakdown(row, events, runs, now)


def life(row: ClusterRow, now: datetime) -> tuple[float, float, bool]:
    """(start, end, live) of the cluster's record: its creation to its termination, or now."""
    lo = epoch(row.created_at)
    if row.state == ClusterState.TERMINATED:
        end = row.terminated_at or row.updated_at
        return lo, max(epoch(end), lo), False
    return lo, max(epoch(now), lo), True


def breakdown(row: ClusterRow, events: Sequence[EventRow], runs: Sequence[RunGoodput],
              now: datetime) -> ClusterGoodput:
    """The cluster's breakdown from its record, its own events and its runs' breakdowns (pure)."""
    cluster = row.cluster
    lo, hi, live = life(row, now)
    activities = _activities(row, events, lo, hi)
    spans = [_RunSpan("run_teardown" if s.category == "teardown" else s.category,
                      max(epoch(s.start), lo), min(epoch(s.end), hi), r.nodes)
             for r in runs for a in r.attempts for s in a.spans]
    counts = _node_counts(cluster.nodes, events, lo)
    node_s = _weigh(activities, [s for s in spans if s.end > s.start], counts, lo, hi)
    seconds = dict.fromkeys(CLUSTER_CATEGORIES, 0.0)
    node_seconds = dict.fromkeys(CLUSTER_CATEGORIES, 0.0)
    for cat, (sec, nsec) in node_s.items():
        seconds[cat] += sec
        node_seconds[cat] += nsec
    wall = hi - lo
    gpus = _gpus_per_node(row)
    rate = (cluster.cost_per_hour_usd / cluster.nodes
            if cluster.cost_per_hour_usd is not None and cluster.nodes > 0 else None)
    cost = {} if rate is None else {k: round(v * rate / 3600, 4) for k, v in node_seconds.items()}
    note = (f"${cluster.cost_per_hour_usd:,.2f}/h for {cluster.nodes} nodes as the record holds it "
            "(list price)" if rate is not None and cluster.cost_per_hour_usd is not None
            else f"no price recorded for {cluster.sku}: cost unknown")
    out = ClusterGoodput(
        cluster=cluster.name, provider=cluster.provider, sku=cluster.sku, nodes=cluster.nodes,
        gpus_per_node=gpus, owner=row.owner, state=row.state.value, live=live,
        started_at=utc(lo), ended_at=utc(hi), wall_s=round(wall, 3),
        categories={k: round(v, 3) for k, v in seconds.items()}, cost_usd=cost,
        gpu_hours={k: round(v * gpus / 3600, 4) for k, v in node_seconds.items()},
        node_hours={k: round(v / 3600, 4) for k, v in node_seconds.items()},
        goodput=round(seconds[TRAINING] / wall, 4) if wall > 0 else 0.0,
        price_per_node_hour_usd=round(rate, 6) if rate is not None else None, price_note=note,
        runs=[RunShare(run_id=r.run_id, recipe=r.recipe, nodes=r.nodes, state=r.state, wall_s=r.wall_s,
                       goodput=r.goodput, cost_usd=round(sum(r.cost_usd.values()), 4) if r.cost_usd else None)
              for r in runs],
        causes=_causes(runs),
        spans=[Span(category=a.category, start=utc(a.start), end=utc(a.end), seconds=round(a.end - a.start, 3))
               for a in activities],
        notes=[f"run {r.run_id}: {n}" for r in runs for n in r.notes])
    return out.model_copy(update={"line": one_line(out)})


def one_line(g: ClusterGoodput) -> str:
    """'$X spent over H h (list price): Y% training, Z% idle, ...': the categories of 1% or more,
    largest first (at most six; the rest summed as other)."""
    if g.wall_s <= 0:
        return f"cluster '{g.cluster}': no time recorded"
    spent = (f"${sum(g.cost_usd.values()):,.2f} spent" if g.cost_usd else "cost unknown (no price recorded)")
    shares = sorted(((v / g.wall_s, k) for k, v in g.categories.items() if v > 0), reverse=True)
    shown = [(s, k) for s, k in shares if s >= 0.01][:6]
    rest = sum(s for s, _ in shares) - sum(s for s, _ in shown)
    parts = [f"{s:.0%} {k.replace('_', ' ')}" for s, k in shown]
    if rest >= 0.005:
        parts.append(f"{rest:.0%} other")
    hours = g.wall_s / 3600
    span = f"{hours:,.1f} h" if hours >= 1 else f"{g.wall_s / 60:,.1f} min"
    so_far = " so far" if g.live else ""
    return f"{spent}{so_far} over {span} ({'list price' if g.cost_usd else 'no price'}): {', '.join(parts)}"


def _activities(row: ClusterRow, events: Sequence[EventRow], lo: float, hi: float) -> list[_Activity]:
    out: list[_Activity] = []
    ups = 0
    for e in sorted(events, key=lambda e: e.ts):
        kind = ACTIVITIES.get(e.kind)
        if kind is None:
            continue
        end = epoch(e.ts)
        began = e.data.began(e.ts) if isinstance(e.data, Spanned) else None
        if began is not None:
            start = epoch(began)
        elif e.kind == "up" and ups == 0:  # a store from before the spans: the first up from creation
            start = lo
        else:
            continue
        if e.kind == "up":
            ups += 1
        start, end = max(start, lo), min(end, hi)
        if end > start:
            out.append(_Activity(kind[0], start, end, kind[1]))
    if row.state == ClusterState.PROVISIONING and not any(e.kind == "up" for e in events):
        first = min((a.start for a in out), default=hi)
        out.append(_Activity("provisioning", lo, first, ACTIVITIES["up"][1]))  # `up` in flight
    return out


def _node_counts(final: int, events: Sequence[EventRow], lo: float) -> list[tuple[float, int]]:
    """(from when, nodes) steps: the record's count, walked back through the resize events."""
    steps: list[tuple[float, int]] = []
    count = final
    for e in sorted((e for e in events if e.kind == "resize"), key=lambda e: e.ts, reverse=True):
        m = _RESIZE.match(e.message)
        before = e.data.before if isinstance(e.data, ResizeData) else None
        if before is not None:
            steps.append((epoch(e.ts), count))
            count = before
        elif m:
            steps.append((epoch(e.ts), count))
            count = int(m.group(1))
    steps.append((lo, count))
    return sorted(steps)


def _nodes_at(steps: Sequence[tuple[float, int]], t: float) -> int:
    count = steps[0][1]
    for when, n in steps:
        if when <= t:
            count = n
    return count


def _weigh(activities: Sequence[_Activity], spans: Sequence[_RunSpan], counts: Sequence[tuple[float, int]],
           lo: float, hi: float) -> dict[str, tuple[float, float]]:
    """Per category: (seconds weighted by the share of nodes, node-seconds)."""
    points = sorted({lo, hi, *(t for a in activities for t in (a.start, a.end)),
                     *(t for s in spans for t in (s.start, s.end)),
                     *(t for t, _ in counts if lo < t < hi)})
    starts: dict[float, list[int]] = defaultdict(list)
    ends: dict[float, list[int]] = defaultdict(list)
    for i, s in enumerate(spans):
        starts[s.start].append(i)
        ends[s.end].append(i)
    active: set[int] = set()
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for a, b in zip(points, points[1:]):
        active.difference_update(ends.get(a, ()))
        active.update(starts.get(a, ()))
        if b <= a:
            continue
        width, nodes = b - a, _nodes_at(counts, a)
        own = [x for x in activities if x.start <= a < x.end]
        if own:
            top = max(own, key=lambda x: x.priority)
            _add(out, top.category, width, 1.0, nodes)
            continue
        held = sum(spans[i].nodes for i in active)
        if nodes <= 0:  # a record without nodes: whatever runs is the whole of it
            nodes = max(held, 1)
        scale = min(1.0, nodes / held) if held else 1.0
        for i in active:
            _add(out, spans[i].category, width, spans[i].nodes * scale / nodes, nodes)
        free = 1.0 - min(held, nodes) / nodes
        if free > 0:
            _add(out, IDLE, width, free, nodes)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _add(out: dict[str, list[float]], category: str, width: float, share: float, nodes: int) -> None:
    out[category][0] += width * share
    out[category][1] += width * share * nodes


def _causes(runs: Sequence[RunGoodput]) -> list[Cause]:
    merged: dict[str, list[float]] = {}
    costs: dict[str, float | None] = {}
    for r in runs:
        for c in r.causes:
            acc = merged.setdefault(c.failure_class, [0, 0.0, 0.0, 0.0, 0.0])
            for i, v in enumerate((c.failures, c.lost_work_s, c.restart_overhead_s, c.node_hours, c.gpu_hours)):
                acc[i] += v
            prior = costs.get(c.failure_class, 0.0)
            costs[c.failure_class] = None if prior is None or c.cost_usd is None else prior + c.cost_usd
    out = [Cause(failure_class=k, failures=int(v[0]), lost_work_s=round(v[1], 3), restart_overhead_s=round(v[2], 3),
                 node_hours=round(v[3], 4), gpu_hours=round(v[4], 4),
                 cost_usd=None if costs[k] is None else round(costs[k] or 0.0, 4)) for k, v in merged.items()]
    return sorted(out, key=lambda c: (-c.gpu_hours, -c.node_hours, c.failure_class))


def _gpus_per_node(row: ClusterRow) -> int:
    sku = find(row.sku)
    return sku.gpus_per_vm if sku is not None else 0

