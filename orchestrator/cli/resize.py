"""`azbench resize NAME N` (or --nodes N): grow or shrink a live cluster (clusters.lifecycle.resize);
with --dry-run, what it would change, set by set (lifecycle.resize_preview)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from orchestrator.cli.common import JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, confirm, open_store, output
from orchestrator.errors import ConfigError
from orchestrator.clusters import lifecycle


@app.command()
def resize(
    name: str = typer.Argument(..., help="Cluster name."),
    count: Optional[int] = typer.Argument(None, metavar="[N]", help="The node count to reach (the same as --nodes)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="The node count to reach (GB200: whole racks of the "
                                                              "cluster's layout, 18 or 16 VMs)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each scale set's change (<set>: <now> -> <after>) "
                                                          "and stop: no writes, no SSH."),
    force: bool = typer.Option(False, "--force", help="Resize it even if another principal made it, and shrink "
                                                      "even when a job runs on the nodes removed."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Grow without asking (required without a terminal on "
                                                        "providers that cost money)."),
    as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
) -> None:
    """Grow (within the provider's quota; Azure starts the VMs a shrink parked, then fills the
    scale sets that have room, never past their Slurm slots or 100 VMs each) or shrink (draining
    the nodes removed first; refused under a running job without --force; Azure parks them:
    deallocated, started again by a grow) a live cluster. Growing a cluster that costs money
    shows the VMs added and the cost per hour and asks [y/N] first (--yes skips the question)."""
    if (count is None) == (nodes is None):
        raise ConfigError("resize needs the node count once: `azbench resize NAME N` or `--nodes N`")
    target = count if count is not None else nodes
    assert target is not None
    out = output(as_json, fmt, query)
    if dry_run:
        with open_store() as store:
            changes = lifecycle.resize_preview(name, target, store)
        if not out.rich:
            return out.emit({"sets": [{"name": c.name, "now": c.now, "after": c.after} for c in changes]})
        sys.stdout.write("".join(f"{c.name}: {c.now} -> {c.after}\n" for c in changes) or
                         f"{name}: no change at {target} nodes\n")
        return None
    with open_store() as store:
        question = lifecycle.resize_question(name, target, store)
    if question:
        confirm(question, yes)
    with open_store() as store:
        cluster, plan = lifecycle.resize(name, target, store, force=force)
    if not out.rich:
        return out.emit({"cluster": name, "before": plan.before, "after": plan.after,
                         "removed": list(plan.remove), "forced": list(plan.busy), "nodes": cluster.node_names})
    removed = f"; removed {', '.join(plan.remove)}" if plan.remove else ""
    sys.stdout.write(f"{name}: {plan.before} -> {plan.after} nodes{removed}\n")
