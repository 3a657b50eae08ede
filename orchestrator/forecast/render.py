"""The plan as text: the table's columns and cells (strings), and the lines around it. Returns
strings; the CLI prints them (a table with rich, or tab-separated)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator import formats
from orchestrator.explain.account import not_overlapped
from orchestrator.forecast.basis import point_lines

if TYPE_CHECKING:
    from orchestrator.forecast.plan import ForecastPlan, PlanRow

MARKS = {"target": "<- target", "target at the upper bound": "<- target (upper end)", "budget": "<- budget"}


def plan_table(plan: ForecastPlan) -> tuple[list[str], list[list[str]]]:
    """(columns, rows): one row per node count."""
    racks = any(r.racks is not None for r in plan.rows)
    base = plan.rows[0].nodes if plan.rows else 0
    columns = ["nodes", "GPUs", *(["racks"] if racks else []), "predicted min", "80% interval",
               "stands on", "measured min", "$/result", "cost/h", f"strong eff. (vs {formats.count(base)})",
               "quota vCPUs", "mark"]
    return columns, [_cells(plan, row, racks) for row in plan.rows]


def plan_title(plan: ForecastPlan) -> str:
    return (f"{plan.benchmark} on {plan.sku_short} ({plan.gpus_per_node} GPUs per VM): predicted "
            f"time-to-train (MLPerf score) and cost per result ({plan.runs_required} runs for a score)")


def plan_lines(plan: ForecastPlan) -> list[str]:
    """What is printed under the table: answers, basis, points, price, comparisons, notes."""
    lines = [a.text for a in (plan.target, plan.target_upper, plan.budget) if a is not None]
    lines += plan.basis.text
    lines.append(f"price: {plan.price_note}; quota family {plan.rows[0].quota_family if plan.rows else '-'}")
    factors: dict[tuple[float, str], list[int]] = {}
    for row in plan.rows:
        factors.setdefault((row.scaling_factor, row.scaling_from), []).append(row.nodes)
    for (factor, source), counts in factors.items():
        lines.append(f"runs priced at the predicted score / RCP scaling factor {factor:.4g}"
                     + (f" (of {source})" if source else "")
                     + f" for {', '.join(formats.count(n) for n in counts)} nodes")
    for row in plan.rows:
        if row.measured_cost_per_result_usd is not None and row.measured_minutes is not None:
            lines.append(f"measured at {formats.count(row.nodes)} nodes: "
                         f"{formats.fixed(row.measured_minutes, 2)} min ({row.measured_by}), "
                         f"{_usd(row.measured_cost_per_result_usd, plan)} per result as the report "
                         "prices it (its runs, each at its own minutes)")
    lines.append("points (GPUs, score, round and system):")
    lines += point_lines(plan.basis.points)
    lines += [f"measured speedup {c}" for c in plan.comparisons]
    lines += model_lines(plan)
    lines += plan.notes
    return lines


def model_lines(plan: ForecastPlan) -> list[str]:
    """The step model per row (explain: azbench explain, docs/explain.md), and where it and the
    curve disagree beyond their intervals."""
    out: list[str] = []
    missing = {"; ".join(r.explain.not_predicted) for r in plan.rows
               if r.explain is not None and r.explain.predicted_step_s is None}
    if missing and all(r.explain is None or r.explain.predicted_step_s is None for r in plan.rows):
        return [f"step model: not predicted ({' / '.join(sorted(missing))})"]
    for row in plan.rows:
        e = row.explain
        if e is None:
            continue
        if e.predicted_step_s is None:
            out.append(f"step model at {formats.count(row.nodes)} nodes: not predicted ({'; '.join(e.not_predicted)})")
            continue
        top = ", ".join(f"{k} {v:.3g} s" for k, v in sorted(e.components.items(), key=lambda kv: -kv[1])[:3])
        ttt = (f"; {formats.fixed(e.model_minutes, 2)} min [{formats.fixed(e.model_low, 2)}-"
               f"{formats.fixed(e.model_high, 2)}] to train" if e.model_minutes is not None else "")
        leaves = f"; leaving the NVLink domain: {', '.join(e.leaves_nvlink_domain)}" if e.leaves_nvlink_domain else ""
        rate = (f" on {e.cross_domain_gbs:.0f} GB/s per GPU between NVLink domains ({e.cross_domain_source})"
                if e.cross_domain_gbs is not None else "")
        serial = f"; {serial}" if (serial := not_overlapped(e.layout)) else ""
        out.append(f"step model at {formats.count(row.nodes)} nodes: {e.predicted_step_s:.3g} s ({top}; dp_comm "
                   f"{e.components.get('dp_comm', 0.0):.3g} s{rate}{serial}){ttt}{leaves}")
        if row.model_vs_curve:
            out.append(f"at {formats.count(row.nodes)} nodes {row.model_vs_curve}")
    software = next((r.explain.overhead_source for r in plan.rows if r.explain and r.explain.overhead_source), "")
    if software:
        out.append(f"step model's other: the software's per-step overhead, {software}")
    return out


def _cells(plan: ForecastPlan, row: PlanRow, racks: bool) -> list[str]:
    measured = ""
    if row.measured_minutes is not None:
        star = "*" if (row.measured_by or "").startswith("stored") else ""
        measured = f"{formats.fixed(row.measured_minutes, 2)}{star}" + (f" ({row.measured_who})" if row.measured_who else "")
    rack = [f"{formats.count(row.racks)} x {row.vms_per_rack}" if row.racks else "-"] if racks else []
    return [formats.count(row.nodes), formats.count(row.gpus), *rack, formats.fixed(row.minutes, 2),
            f"{formats.fixed(row.low, 2)}-{formats.fixed(row.high, 2)}",
            row.stands_on, measured, _usd(row.cost_per_result_usd, plan), _usd(row.cost_per_hour_usd, plan),
            formats.pct(row.strong_scaling, 0), formats.count(row.vcpus), " ".join(MARKS[m] for m in row.marks)]


def _usd(value: float | None, plan: ForecastPlan) -> str:
    if value is None:
        return "unknown" if plan.price_per_vm_hour_usd is None else "-"
    return formats.usd(value, 0)
