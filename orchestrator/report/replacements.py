"""The report's self-healing section: every node replacement (runs/fleet_replace.py's
`node_replaced` events), with its reason, the new node, how long it took and what it cost.

Pure: the store's events in, one line per replacement out (other event kinds are skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from orchestrator import formats
from orchestrator.models import Frozen
from orchestrator.store.events import NodeReplacedData
from orchestrator.store.schema import EventRow


class ReplacementLine(Frozen):
    ts: datetime
    cluster: str
    node: str
    new_node: str
    status: str
    seconds: float
    cost_usd: float | None = None
    reason: str = ""


def replacement_lines(events: Sequence[EventRow] | None, cluster: str | None = None) -> list[ReplacementLine]:
    """One line per `node_replaced` event (of `cluster` when given), oldest first."""
    out = []
    for e in events or ():
        if not isinstance(d := e.data, NodeReplacedData) or (cluster is not None and e.cluster != cluster):
            continue
        out.append(ReplacementLine(ts=e.ts, cluster=e.cluster or "", node=d.node, new_node=d.new_node or "",
                                   status=d.status, seconds=d.seconds, cost_usd=d.cost_usd, reason=d.reason))
    return sorted(out, key=lambda x: x.ts)


def replacement_section(lines: Sequence[ReplacementLine]) -> tuple[str, list[str], list[list[str]]]:
    header = ["when", "cluster", "node", "new node", "status", "seconds", "cost", "reason"]
    rows = [[f"{x.ts:%Y-%m-%d %H:%M}", x.cluster, x.node, x.new_node, x.status, formats.fixed(x.seconds, 1),
             formats.usd(x.cost_usd), x.reason] for x in lines]
    return "Node replacements (self-healing)", header, rows
