"""`azbench health CLUSTER`: the scale health gate as its own command (runs/fleet.py)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from orchestrator.safetext import clean
from orchestrator.cli.common import (
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    make_console,
    make_table,
    open_store,
    output,
)
from orchestrator.errors import EXIT_UNHEALTHY
from orchestrator import formats
from orchestrator.clusters import lifecycle
from orchestrator.models import Cluster, utcnow
from orchestrator.providers.base import HostReport
from orchestrator.runs import fleet_gate, fleet_replace
from orchestrator.runs.fleet import FleetReport
from orchestrator.runs.fleet_replace import ReplaceReport
from orchestrator.seams import Access
from orchestrator.store.events import EventRow, HealthData

@app.command()
def health(
    name: str = typer.Argument(..., help="Cluster name."),
    nodes: Optional[str] = typer.Option(None, "--nodes", help="Only these nodes (Slurm hostlist, e.g. node[1-64])."),
    undrain: Optional[str] = typer.Option(None, "--undrain", help="Return this drained node to service and stop."),
    tolerance: float = typer.Option(0.15, "--tolerance", min=0.01, max=0.99,
                                    help="A straggler must also be below the median throughput by at least this fraction (besides its robust z-score)."),
    no_drain: bool = typer.Option(False, "--no-drain", help="Report only: drain nothing."),
    replace: bool = typer.Option(False, "--replace", help="Replace each drained node with a fresh one "
                                 "under a new name, gate it and return it to service."),
    max_replacements: int = typer.Option(4, "--max-replacements", min=0,
                                         help="At most this many replacements now (also at most 8 per hour)."),
    report_to_azure: bool = typer.Option(False, "--report-to-azure", help="Before replacing, report each "
                                         "drained node to Azure Guest Health Reporting (preview; the "
                                         "subscription must be allow-listed)."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
) -> None:
    """Per-node checks, group collectives and a throughput probe; drain the nodes that fail
    (and with --replace, replace them). Exits 9 when any node was flagged and not replaced
    by a node that passed its gate (or on a fabric-wide fault)."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        cluster = lifecycle.reachable(name, store)
    with lifecycle.connect(cluster) as access:
        if undrain:
            fleet_gate.undrain(cluster, access, undrain)
            if not out.rich:
                return out.emit({"undrained": undrain})
            sys.stdout.write(f"{undrain} returned to service\n")
            return
        report = _gate(name, cluster, access, nodes, tolerance, drain_bad=not no_drain)
        reported = _report_to_azure(cluster, report) if report_to_azure and report.drained else []
        healed = _replace(cluster, access, report, max_replacements) if replace and report.drained else None
    replaced = [r for r in (healed.replacements if healed else []) if r.status == "replaced"]
    if not out.rich:
        out.emit({**report.__dict__, "verdicts": [v.__dict__ for v in report.verdicts],
                  "bad_nodes": report.bad_nodes,
                  "replacements": [r.__dict__ for r in (healed.replacements if healed else [])],
                  "replace_capped": healed.capped if healed else [],
                  "reported": [r.__dict__ for r in reported]})
    else:
        _render(report)
        for r in reported:
            sys.stdout.write(clean(f"reported to Azure: {r.node} {r.status} ({r.detail})") + "\n")
        if healed:
            _render_replacements(healed)
    unhealed = set(report.bad_nodes) - {r.node for r in replaced}
    if unhealed or report.fabric:  # drained or a fabric-wide fault: a pipeline must see it
        raise typer.Exit(EXIT_UNHEALTHY)


def _gate(name: str, cluster: Cluster, access: Access, nodes: str | None, tolerance: float, *,
          drain_bad: bool) -> FleetReport:
    """The gate over cluster `name`, then its `health` event with its span (goodput counts it)."""
    began = utcnow()
    report = fleet_gate.gate_cluster(cluster, access, only=nodes, tolerance=tolerance, drain_bad=drain_bad)
    with open_store() as store:
        store.add_event(EventRow(kind="health", cluster=name,
                                 message=f"{len(report.checked)} nodes checked, drained: "
                                         f"{', '.join(report.drained) or 'none'}",
                                 data=HealthData(started_at=began, seconds=report.seconds,
                                                 drained=list(report.drained))))
    return report


def _report_to_azure(cluster: Cluster, report: FleetReport) -> list[HostReport]:
    """Each drained node reported to Azure Guest Health Reporting (lifecycle.report_unhealthy)."""
    with open_store() as store:
        return lifecycle.report_unhealthy(cluster, fleet_replace.reasons(report), store)


def _replace(cluster: Cluster, access: Access, report: FleetReport, max_replacements: int) -> ReplaceReport:
    """Each drained node replaced by a fresh one that passed its own gate (runs/fleet_replace.py)."""
    with open_store() as store:
        return fleet_replace.replace_drained(cluster, access, store, fleet_replace.reasons(report),
                                             fleet_replace.ReplacePolicy(max_replacements=max_replacements))


def _render(report: FleetReport) -> None:
    console = make_console()
    if report.verdicts:
        console.print(make_table("Health verdicts", ["node", "check", "status", "value", "threshold", "detail"],
                                 [[v.node, v.check, v.status, _fmt(v.value, v.unit), _fmt(v.threshold, v.unit),
                                   v.detail] for v in report.verdicts]))
    median = _fmt(report.median_ops_per_s, " ops/s") if report.median_ops_per_s else "-"
    sys.stdout.write(f"checked {len(report.checked)} nodes in {report.seconds:.1f} s: "
                     f"{report.group_rounds} group rounds ({report.group_tests} group tests), "
                     f"{report.probe_rounds} probe rounds, median throughput {median}\n")
    if report.fabric:
        sys.stdout.write(f"fabric: {report.fabric}; nothing drained\n")
    sys.stdout.write(f"drained: {', '.join(report.drained) or 'none'}\n")


def _render_replacements(healed: ReplaceReport) -> None:
    console = make_console()
    if healed.replacements:
        console.print(make_table("Replacements", ["node", "new node", "status", "seconds", "cost", "reason"],
                                 [[r.node, r.new_node or "-", r.status, f"{r.seconds:.1f}",
                                   "-" if r.cost_usd is None else f"${r.cost_usd:.2f}", r.detail or r.reason]
                                  for r in healed.replacements]))
    if healed.capped:
        sys.stdout.write(f"left drained (replacement cap): {', '.join(healed.capped)}\n")


def _fmt(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{formats.sig(value)}{unit}"
