"""The plan as text: the table's columns and cells (strings), and the lines around it. Returns
strings; the CLI prints them (a table with rich, or tab-separated)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.forecast.basis import point_lines

if TYPE_CHECKING:
    from orchestrator.forecast.plan import Plan, PlanRow

MARKS = {"target": "<- target", "target at the upper bound": "<- target (upper end)", "budget": "<- budget"}


def plan_table(plan: Plan) -> tuple[list[str], list[list[str]]]:
    """(columns, rows): one row per node count."""
    racks = any(r.racks is not None for r in plan.rows)
    base = plan.rows[0].nodes if plan.rows else 0
    columns = ["nodes", "GPUs", *(["racks"] if racks else []), "predicted min", "80% interval",
               "stands on", "measured min", "cost/result", "cost/h", f"strong eff. (vs {base:,})",
               "quota vCPUs", "mark"]
    return columns, [_cells(plan, row, racks) for row in plan.rows]


def plan_title(plan: Plan) -> str:
    return (f"{plan.benchmark} on {plan.sku_short} ({plan.gpus_per_node} GPUs per VM): predicted "
            f"time-to-train (MLPerf score) and cost per scored result ({plan.runs_required} runs)")


def plan_lines(plan: Plan) -> list[str]:
    """What is printed under the table: answers, basis, points, price, comparisons, notes."""
    lines = [a.text for a in (plan.target, plan.target_upper, plan.budget) if a is not None]
    lines += plan.basis.text
    lines.append(f"price: {plan.price_note}; quota family {plan.rows[0].quota_family if plan.rows else '-'}")
    lines.append("points (GPUs, score, round and system):")
    lines += point_lines(plan.basis.points)
    lines += [f"measured speedup {c}" for c in plan.comparisons]
    lines += plan.notes
    return lines


def _cells(plan: Plan, row: PlanRow, racks: bool) -> list[str]:
    measured = ""
    if row.measured_minutes is not None:
        star = "*" if (row.measured_by or "").startswith("stored") else ""
        measured = f"{row.measured_minutes:.2f}{star}" + (f" ({row.measured_who})" if row.measured_who else "")
    rack = [f"{row.racks} x {row.vms_per_rack}" if row.racks else "-"] if racks else []
    return [f"{row.nodes:,}", f"{row.gpus:,}", *rack, f"{row.minutes:.2f}", f"{row.low:.2f}-{row.high:.2f}",
            row.stands_on, measured, _usd(row.cost_per_result_usd, plan), _usd(row.cost_per_hour_usd, plan),
            f"{row.strong_scaling:.0%}" if row.strong_scaling is not None else "-",
            f"{row.vcpus:,}", " ".join(MARKS[m] for m in row.marks)]


def _usd(value: float | None, plan: Plan) -> str:
    if value is None:
        return "unknown" if plan.price_per_vm_hour_usd is None else "-"
    return f"${value:,.0f}"
