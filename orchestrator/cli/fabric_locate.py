"""`azbench fabric locate`: which node makes the fabric slow (runs/locate.py), or with --dry-run
the rounds and wall time a cluster of a size would take (runs/locate_plan.estimate)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Optional

import typer

from orchestrator.cli.common import JsonOpt, OutputFormat, OutputOpt, QueryOpt, make_console, make_table, \
    open_store, output
from orchestrator.cli.fabric import fabric_app
from orchestrator.errors import EXIT_FABRIC, ConfigError
from orchestrator.fabric.locate_plan import Estimate, estimate  # light: no pydantic, no store
from orchestrator.clusters import lifecycle
from orchestrator.fabric.nccltests import parse_size
from orchestrator.hardware.catalog import lookup
from orchestrator.hardware.layout import default_vms_per_rack

if TYPE_CHECKING:
    from orchestrator.fabric.locate import LocateReport


@fabric_app.command("locate", help=(
    "Name the nodes that make the fabric slow, in few rounds: a per-node check (node state; GPU and HCA "
    "counts on GPU sizes), one collective inside each NVLink rack on NVL72 sizes, then every node in a "
    "pair at once (a perfect matching; across racks on NVL72), each pair's busbw against the round's "
    "median and the row's pair figure, then each slow pair's nodes re-paired with known-good ones. A node "
    "is named only when it is slow in its pair and again with a good partner. --drain drains the named "
    f"nodes through the health gate's path (never by default). Exits {EXIT_FABRIC} when a node is named. "
    "--dry-run prints the rounds and the wall time estimated from the row's figures."))
def fabric_locate(cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster name (default: the only one up)."),
                  nodes: Optional[str] = typer.Option(None, "--nodes", help="Only these nodes, comma-separated "
                                                      "(default: every node)."),
                  drain_found: bool = typer.Option(False, "--drain", help="Drain the named nodes (the gate's path)."),
                  dry_run: bool = typer.Option(False, "--dry-run", help="Print the rounds and the estimated wall "
                                               "time; run nothing."),
                  sku: Optional[str] = typer.Option(None, "--sku", help="With --dry-run and no cluster: the size."),
                  count: Optional[int] = typer.Option(None, "--count", help="With --dry-run and no cluster: VMs."),
                  as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                  query: Optional[str] = QueryOpt) -> None:
    out = output(as_json, fmt, query)
    if dry_run:
        plan = _estimate(cluster, sku, count)
        if not out.rich:
            out.emit({"nodes": plan.nodes, "racks": plan.racks, "rounds": len(plan.rounds),
                      "tests": sum(t for _, t, _ in plan.rounds), "wall_s": round(plan.wall_s, 1),
                      "plan": [{"round": i, "what": w, "tests": t, "seconds": round(s, 1)}
                               for i, (w, t, s) in enumerate(plan.rounds, 1)], "basis": plan.basis})
        else:
            _print_estimate(plan)
        return
    names = [n.strip() for n in nodes.split(",") if n.strip()] if nodes else None
    from orchestrator.runs.locate import locate_cluster  # lazy: +SQLAlchemy on `fabric inspect` (0.4 s), which opens no store
    with open_store() as store:
        found = lifecycle.require_cluster(cluster, store)
        with lifecycle.connect(found) as access:
            report = locate_cluster(found, access, nodes=names, drain_found=drain_found, store=store)
    if not out.rich:
        out.emit(report_json(report))
    else:
        _print_report(report)
    if report.suspects:
        raise typer.Exit(EXIT_FABRIC)


def report_json(report: LocateReport) -> dict[str, object]:
    """The JSON of a locate run: suspects, rounds, tests, wall_s and each round's results."""
    return {
        "cluster": report.cluster, "sku": report.sku, "device": report.device, "nodes": report.nodes,
        "suspects": [{"node": s.node, "evidence": s.evidence, "busbw": s.busbw, "expected": s.expected}
                     for s in report.suspects],
        "rounds": len(report.rounds), "tests": report.tests, "wall_s": round(report.wall_s, 2),
        "results": [{"round": r.index, "kind": r.kind, "wall_s": round(r.wall_s, 2), "notes": r.notes,
                     "tests": [{"nodes": list(t.nodes), "kind": t.kind, "subject": t.subject, "busbw": t.busbw,
                                "median": t.median, "floor": t.floor, "expected": t.expected,
                                "slow": t.slow, "error": t.error or None} for t in r.tests]}
                    for r in report.rounds],
        "unconfirmed": report.unconfirmed, "notes": report.notes, "drained": report.drained}


def _estimate(cluster: str | None, sku: str | None, count: int | None) -> Estimate:
    if sku is None or count is None:
        if sku is not None or count is not None:
            raise ConfigError("--dry-run: give both --sku and --count, or a cluster")
        with open_store() as store:
            found = lifecycle.require_cluster(cluster, store, live=False)
        sku, count = found.sku, found.nodes
    if count < 2:
        raise ConfigError(f"--count: {count} VMs; locate needs at least 2")
    row = lookup(sku)
    rack_vms = (default_vms_per_rack(count, row) or row.nvlink_domain_vms) if row.nvlink_domain_vms > 1 else 1
    base = row.nccl
    message = parse_size(base.message) if base is not None else parse_size("1M")
    figure = base.reference_gbps if base is not None else None
    # NVL72 rows publish the in-rack figure; pairs across racks have none of their own (the row's scope).
    return estimate(count, max(row.gpus_per_vm, 1), rack_vms, message, figure if rack_vms > 1 else None,
                    figure if rack_vms <= 1 else None)


def _print_estimate(plan: Estimate) -> None:
    w = sys.stdout.write
    w(f"fabric locate on {plan.nodes} VMs" + (f" in {plan.racks} racks" if plan.racks else "") + ": "
      f"{len(plan.rounds)} rounds, about {plan.wall_s / 60:.1f} min\n")
    for i, (what, tests, seconds) in enumerate(plan.rounds, 1):
        w(f"  round {i}: {what}: {tests} test(s), about {seconds:.0f} s\n")
    w(f"estimated from: {plan.basis}\n")


def _print_report(report: LocateReport) -> None:
    w = sys.stdout.write
    for note in report.notes:
        w(f"note: {note}\n")
    for r in report.rounds:
        w(f"round {r.index} ({r.kind}): {len(r.tests)} test(s), {r.wall_s:.1f} s" +
          (f"; {'; '.join(r.notes)}" if r.notes else "") + "\n")
    tests = [t for r in report.rounds for t in r.tests if t.kind in ("pair", "rack", "re-pair")]
    ranked = sorted(tests, key=lambda t: (t.busbw is not None, t.busbw or 0.0))
    rows = [["+".join(t.nodes), t.kind, f"{t.busbw:.4g}" if t.busbw is not None else t.error or "not measured",
             f"{t.floor:.4g}" if t.floor is not None else "-", {True: "slow", False: "ok", None: "not judged"}[t.slow]]
            for t in ranked]
    if rows:
        make_console().print(make_table(f"Collectives on {report.cluster}, slowest first",
                                        ["nodes", "test", "busbw GB/s", "floor GB/s", "verdict"], rows))
    for s in report.suspects:
        w(f"suspect {s.node}: {s.evidence}\n")
    for line in report.unconfirmed:
        w(f"unconfirmed: {line}\n")
    if report.drained:
        w(f"drained: {', '.join(report.drained)}\n")
    w(f"{len(report.suspects)} suspect(s) in {len(report.rounds)} rounds, {report.tests} collectives, "
      f"{report.wall_s:.1f} s\n")


__all__ = ["fabric_locate", "report_json"]
