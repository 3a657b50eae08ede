"""Self-healing: replace the nodes the health gate drained, gate each new node, count the cost.

`replace_drained` takes the gate's drained nodes and their reasons. For each, within the
policy's caps, it asks the provider (through clusters.lifecycle, its `healer` part)
to retire the node and bring a fresh one up under a new name, joined to Slurm; then gates the
new node beside a few healthy reference nodes (runs/fleet_gate.gate_nodes: the same probe,
collective and robust straggler rule). A new node that fails its gate is drained like any other.
Every replacement is a store event (`node_replaced`: node, reason, new node, seconds, cost),
which `azbench report` and `azbench status` list.

Caps: at most `max_replacements` per call, and at most `max_per_hour` per cluster over the last
hour (counted from the store's events). A fault of the fabric, not of nodes, drains many nodes
at once; the gate already drains nothing when more than a tenth are flagged, and the hourly cap
keeps a fault that slips under that line from recycling the whole cluster: the rest stay
drained, with a `replace_capped` event saying so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Mapping

from orchestrator.clusters import lifecycle
from orchestrator.hardware.catalog import lookup
from orchestrator.errors import AzbenchError, MissingCapability
from orchestrator.models import Cluster, utcnow
from orchestrator.runs.fleet import FleetReport
from orchestrator.seams import Access
from orchestrator.store.database import Store
from orchestrator.store.events import NodeReplacedData, ReplaceCappedData
from orchestrator.store.schema import EventRow
from orchestrator.slurm.conf import natural_key
from orchestrator.runs.fleet_gate import gate_nodes

REPLACED = "node_replaced"
CAPPED = "replace_capped"
REFERENCE_NODES = 7  # healthy nodes gated beside a new one, so its throughput has a fleet to compare to


@dataclass(frozen=True)
class ReplacePolicy:
    max_replacements: int = 4
    max_per_hour: int = 8


@dataclass(frozen=True)
class Replacement:
    """One replacement: `status` is "replaced", "failed" (the provider could not) or
    "gate-failed" (the new node failed its gate and is drained)."""

    node: str
    reason: str
    new_node: str | None
    seconds: float
    cost_usd: float | None
    status: str
    detail: str = ""


@dataclass
class ReplaceReport:
    replacements: list[Replacement] = field(default_factory=list)
    capped: list[str] = field(default_factory=list)
    cluster: Cluster | None = None


def replace_drained(cluster: Cluster, access: Access, store: Store, drained: Mapping[str, str],
                    policy: ReplacePolicy = ReplacePolicy(), *,
                    clock: Callable[[], float] = time.monotonic) -> ReplaceReport:
    """Replace each drained node (node -> reason) within the caps; see the module docstring."""
    if lifecycle.parts(cluster).healer is None:
        raise MissingCapability(cluster.name, cluster.provider, "replace a node",
                                hint="drain it (`azbench health`) and replace it by hand")
    report = ReplaceReport(cluster=cluster)
    room = min(policy.max_replacements, policy.max_per_hour - recent_replacements(store, cluster.name))
    todo, report.capped = list(drained)[:max(room, 0)], list(drained)[max(room, 0):]
    if report.capped:
        store.add_event(EventRow(kind=CAPPED, cluster=cluster.name,
                                 message=f"{len(report.capped)} drained nodes left drained: cap of "
                                         f"{policy.max_replacements} per call, {policy.max_per_hour} per hour",
                                 data=ReplaceCappedData(nodes=report.capped)))
    for node in todo:
        started = clock()
        try:
            current, new = lifecycle.replace_node(report.cluster or cluster, node, store)
        except AzbenchError as exc:
            report.replacements.append(Replacement(node, drained[node], None, clock() - started, None,
                                                   "failed", exc.message))
            continue
        report.cluster = current
        gate = _gate_new(access, current, new)
        seconds = clock() - started
        done = Replacement(node, drained[node], new, seconds, _cost(current, seconds),
                           "replaced" if not gate else "gate-failed", gate)
        report.replacements.append(done)
        store.add_event(EventRow(kind=REPLACED, cluster=cluster.name,
                                 message=f"{node} -> {new} in {seconds:.1f}s ({done.status}): {done.reason}",
                                 data=NodeReplacedData(node=node, reason=done.reason, new_node=new,
                                                       seconds=round(seconds, 3), cost_usd=done.cost_usd,
                                                       status=done.status, gate=gate)))
    return report


def reasons(report: FleetReport) -> dict[str, str]:
    """The drained nodes of a gate report, each with its reasons."""
    out: dict[str, list[str]] = {}
    for v in report.verdicts:
        if v.node in report.drained:
            out.setdefault(v.node, []).append(v.reason)
    return {node: "; ".join(why) for node, why in out.items()}


def recent_replacements(store: Store, cluster: str, window: timedelta = timedelta(hours=1)) -> int:
    """Replacements recorded for `cluster` within `window` (the hourly cap's count)."""
    since = utcnow() - window
    return sum(1 for e in store.list_events(cluster=cluster, limit=1000)
               if e.kind == REPLACED and _aware(e.ts) >= since)


def _gate_new(access: Access, cluster: Cluster, new: str) -> str:
    """The gate on the new node beside healthy references; "" when it passed, else why."""
    infos = access.launcher.node_states()
    refs = [n for n in sorted(infos, key=natural_key) if n != new and infos[n].usable]
    report = gate_nodes(access, cluster, [new, *refs[:REFERENCE_NODES]])
    bad = [v for v in report.verdicts if v.node == new]
    return "; ".join(v.reason for v in bad) or report.fabric


def _cost(cluster: Cluster, seconds: float) -> float | None:
    """The replacement's cost: the new node's price for the time it took (None when unknown)."""
    price = lookup(cluster.sku).price_per_hour_usd
    if cluster.cost_per_hour_usd == 0.0:
        return 0.0
    return None if price is None else round(price * seconds / 3600, 4)


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
