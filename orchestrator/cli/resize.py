"""`azbench resize NAME --nodes N`: grow or shrink a live cluster (clusters.lifecycle.resize)."""

from __future__ import annotations

import sys

from typing import Optional

import typer

from orchestrator.cli.common import (
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    confirm,
    open_store,
    output,
)


@app.command()
def resize(
    name: str = typer.Argument(..., help="Cluster name."),
    nodes: int = typer.Option(..., "--nodes", help="The node count to reach (GB200: whole racks of the cluster's layout, 18 or 16 VMs)."),
    force: bool = typer.Option(False, "--force", help="Shrink even when a job runs on the nodes removed."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Grow without asking (required without a terminal on "
                                                        "providers that cost money)."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
) -> None:
    """Grow (within the provider's quota) or shrink (draining the nodes removed first; refused
    under a running job without --force) a live cluster. Growing a cluster that costs money
    shows the VMs added and the cost per hour and asks [y/N] first (--yes skips the question)."""
    out = output(as_json, fmt, query)
    from orchestrator.clusters import lifecycle
    with open_store() as store:
        question = lifecycle.resize_question(name, nodes, store)
    if question:
        confirm(question, yes)
    with open_store() as store:
        cluster, plan = lifecycle.resize(name, nodes, store, force=force)
    if not out.rich:
        return out.emit({"cluster": name, "before": plan.before, "after": plan.after,
                         "removed": list(plan.remove), "forced": list(plan.busy),
                         "nodes": cluster.node_names})
    removed = f"; removed {', '.join(plan.remove)}" if plan.remove else ""
    sys.stdout.write(f"{name}: {plan.before} -> {plan.after} nodes{removed}\n")
