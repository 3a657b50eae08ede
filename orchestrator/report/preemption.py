"""The report's spot section: preemptions per run, the work they cost, and the money spot saved.

Pure: runs, their attempts and the spot clusters ({name: SKU}) in, one line per run out. A run is
listed when it ran on a spot cluster or had a preempted attempt. Node-hours count every attempt
(failed ones included); the spot price is the catalog's estimate (catalog.SPOT_PRICE_FRACTION of
the pay-as-you-go list price), so "saved" is an estimate and labelled as one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator import formats
from orchestrator.hardware.catalog import SPOT_PRICE_SOURCE, lookup
from orchestrator.models import Frozen
from orchestrator.report.lost import LostWork
from orchestrator.store.schema import AttemptRow, RunRow

PREEMPTED = "preempted"  # runs.failures.FailureClass.PREEMPTED (report may not import runs/)


class PreemptionLine(Frozen):
    run_id: str
    cluster: str
    nodes: int
    spot: bool
    attempts: int
    preemptions: int
    lost_steps: int
    lost_seconds: float  # goodput's lost work of the preempted attempts (report.lost)
    node_hours: float
    cost_spot_usd: float | None = None
    cost_payg_usd: float | None = None
    saved_usd: float | None = None


def preemption_lines(runs: Sequence[RunRow] | None, attempts: Sequence[AttemptRow] | None,
                     spot_clusters: Mapping[str, str], lost: LostWork | None = None) -> list[PreemptionLine]:
    """One line per run on a spot cluster or with a preempted attempt, in run order; `lost` the
    report's shared lost work (one is made when not given)."""
    if not runs or not attempts:
        return []
    lost = lost if lost is not None else LostWork(runs, attempts)
    by_run: dict[str, list[AttemptRow]] = {}
    for a in attempts:
        by_run.setdefault(a.run_id, []).append(a)
    lines = []
    for run in runs:
        tries = by_run.get(run.id, [])
        preempted = [a for a in tries if a.failure_class == PREEMPTED]
        if run.cluster not in spot_clusters and not preempted:
            continue
        hours = sum(run.nodes * (a.ended_at - a.started_at).total_seconds() / 3600
                    for a in tries if a.started_at and a.ended_at)
        lines.append(PreemptionLine(
            run_id=run.id, cluster=run.cluster, nodes=run.nodes, spot=run.cluster in spot_clusters,
            attempts=len(tries), preemptions=len(preempted),
            lost_steps=sum(a.lost_steps or 0 for a in preempted),
            lost_seconds=round(sum(lost.of(run.id, a.attempt) or 0.0 for a in preempted), 3),
            node_hours=round(hours, 4), **_costs(spot_clusters.get(run.cluster), hours)))
    return lines


def preemption_section(lines: Sequence[PreemptionLine]) -> tuple[str, list[str], list[list[str]]]:
    header = ["run", "cluster", "nodes", "spot", "attempts", "preemptions", "lost steps", "lost work s",
              "node-h", "spot ($)", "pay-as-you-go ($)", "saved ($)"]
    rows = [[x.run_id, x.cluster, formats.count(x.nodes), "yes" if x.spot else "no", formats.count(x.attempts),
             formats.count(x.preemptions), formats.count(x.lost_steps), formats.fixed(x.lost_seconds, 1),
             formats.fixed(x.node_hours, 3),
             _usd(x.cost_spot_usd), _usd(x.cost_payg_usd), _usd(x.saved_usd)] for x in lines]
    return f"Spot preemptions and cost saved (estimate: spot price {SPOT_PRICE_SOURCE})", header, rows


def _costs(sku: str | None, hours: float) -> dict[str, float]:
    if sku is None:
        return {}
    row = lookup(sku)
    payg, spot = row.price_per_hour_usd, row.spot_price_per_hour_usd()
    if payg is None or spot is None:
        return {}
    return {"cost_spot_usd": round(hours * spot, 2), "cost_payg_usd": round(hours * payg, 2),
            "saved_usd": round(hours * (payg - spot), 2)}


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"
