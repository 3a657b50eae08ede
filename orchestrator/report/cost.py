"""Cost of a report group at list price: per scored result, all runs, all attempts. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator import metrics
from orchestrator.catalog import CATALOG
from orchestrator.store_schema import AttemptRow, ResultRow, RunRow


def group_costs(rows: list[ResultRow], sku: str | None, nodes: int | None, score_minutes: float | None,
                runs: Sequence[RunRow] | None, attempts: Sequence[AttemptRow] | None) -> dict[str, Any]:
    """List-price cost per result, of all runs, and of all attempts (failed ones included)."""
    price = next((row.price_per_hour_usd for row in CATALOG if sku and row.name == sku), None)
    if price is None or not nodes:
        why = "unknown node count" if price is not None else f"no list price for SKU {sku!r}"
        return {"price_per_vm_hour": price, "cost_note": f"cost unknown: {why}"}
    out: dict[str, Any] = {"price_per_vm_hour": price, "cost_note": "list-price estimate"}
    if score_minutes is not None:
        out["cost_per_result_usd"] = metrics.run_cost_usd(
            metrics.node_hours(nodes, score_minutes * 60), price)
    out["cost_all_runs_usd"] = sum(metrics.run_cost_usd(metrics.node_hours(nodes, r.minutes * 60),
                                                        price) for r in rows if r.minutes)
    if runs is not None and attempts is not None:
        run_nodes = {r.id: r.nodes for r in runs}
        ids = {r.run_id for r in rows if r.run_id}
        spans = [(run_nodes[a.run_id], (a.ended_at - a.started_at).total_seconds(), price)
                 for a in attempts if a.run_id in ids and a.run_id in run_nodes
                 and a.started_at and a.ended_at]
        if spans:
            out["cost_all_attempts_usd"] = metrics.result_cost_usd(spans)
    return out
