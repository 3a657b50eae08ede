"""`azbench goodput`: where a run's, a cluster's or each owner's time and money went
(orchestrator.goodput): RUN, --cluster NAME, or --by owner [--since DATE]."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import Enum
from typing import Optional

import typer

from orchestrator.cli.common import JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, make_console, make_table, open_store, output
from orchestrator.safetext import clean
from orchestrator.errors import ConfigError
from orchestrator.cli.common import parse_date
from orchestrator.goodput.cluster import cluster_goodput
from orchestrator.goodput.model import CLUSTER_SOURCES, Cause, ClusterGoodput, OwnerTotal, RUN_SOURCES, RunGoodput
from orchestrator.goodput.owners import by_owner
from orchestrator.goodput.run import run_goodput

class GroupBy(str, Enum):
    owner = "owner"


@app.command()
def goodput(run: Optional[str] = typer.Argument(None, help="Run id (see `azbench status`)."),
            cluster: Optional[str] = typer.Option(None, "--cluster", help="A cluster's whole life instead of one run."),
            by: Optional[GroupBy] = typer.Option(None, "--by", help="Totals per owner (cost and goodput) from the store."),
            since: Optional[str] = typer.Option(None, "--since", help="With --by: only from this date (YYYY-MM-DD)."),
            as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
            query: Optional[str] = QueryOpt) -> None:
    """Where the time went: a run's wall time (or a cluster's life) split into categories, each
    from its source (queued, health gate, init, training, evaluation, checkpoint, lost work,
    restart overhead, teardown; a cluster adds provisioning, staging, idle, resize and its own
    teardown), with GPU-hours and list-price cost per category, the failures with their class
    and evidence, and the top causes of lost GPU-hours. What no source covers is `unattributed`.
    Goodput = training / wall time."""
    chosen = [f for f, v in (("RUN", run), ("--cluster", cluster), ("--by", by)) if v is not None]
    if len(chosen) != 1:
        raise ConfigError("goodput needs exactly one of RUN, --cluster NAME or --by owner"
                          + (f" (got {' and '.join(chosen)})" if chosen else ""))
    if since is not None and by is None:
        raise ConfigError("--since goes with --by owner")
    out = output(as_json, fmt, query)
    with open_store() as store:
        if run is not None:
            g = run_goodput(store, run)
            return out.emit(g) if not out.rich else _render_run(g)
        if cluster is not None:
            c = cluster_goodput(store, cluster)
            return out.emit(c) if not out.rich else _render_cluster(c)
        totals = by_owner(store, since=parse_date("--since", since))
    return out.emit(totals) if not out.rich else _render_owners(totals)


def _render_run(g: RunGoodput) -> None:
    console = make_console()
    when = "so far, the run is live" if g.live else g.state
    console.print(clean(f"run {g.run_id} ({g.recipe}, {g.nodes} node(s) on {g.cluster}, {when}): "
                        f"{_dur(g.wall_s)} wall, goodput {g.goodput:.1%}"
                        + (f", time to train {g.minutes:.2f} min" if g.minutes is not None else "")),
                  markup=False, highlight=False)
    _categories(g.categories, g.wall_s, g.gpu_hours, g.cost_usd, RUN_SOURCES)
    rows = []
    for a in g.attempts:
        f = a.failure
        rows.append([a.attempt, a.state, a.job_id or "-", f.failure_class if f else "-",
                     ", ".join(f.nodes) if f and f.nodes else "-",
                     a.resumed_from_step if a.resumed_from_step is not None else "-",
                     f"{f.lost_work_s:,.1f}" if f else "-", f"{f.restart_overhead_s:,.1f}" if f else "-"])
    console.print(make_table("Attempts", ["attempt", "state", "job", "failure", "nodes", "resumed from",
                                          "lost work s", "restart s"], rows))
    for a in g.attempts:  # evidence is prose: below the table, whole, not in a one-word column
        if a.failure is not None and a.failure.evidence:
            console.print(clean(f"  attempt {a.attempt} evidence: {a.failure.evidence}"),
                          markup=False, highlight=False)
    _causes(g.causes, g.cost_usd != {})
    _footer(g.price_note, g.notes)


def _render_cluster(c: ClusterGoodput) -> None:
    console = make_console()
    console.print(clean(f"cluster {c.cluster} ({c.nodes} x {c.sku}, {c.provider}, {c.state}"
                        f"{', live: counted up to now' if c.live else ''}): {c.line}"), markup=False, highlight=False)
    _categories(c.categories, c.wall_s, c.gpu_hours, c.cost_usd, CLUSTER_SOURCES, c.node_hours)
    if c.runs:
        console.print(make_table("Runs", ["run", "recipe", "nodes", "state", "wall", "goodput", "cost $"],
                                 [[r.run_id, r.recipe, r.nodes, r.state, _dur(r.wall_s), f"{r.goodput:.1%}",
                                   f"{r.cost_usd:,.2f}" if r.cost_usd is not None else "-"] for r in c.runs]))
    _causes(c.causes, c.cost_usd != {})
    _footer(c.price_note, c.notes)


def _render_owners(totals: list[OwnerTotal]) -> None:
    if not totals:
        sys.stdout.write("no clusters or runs in the store for that window\n")
        return
    make_console().print(make_table(
        "Cost and goodput per owner (list price)",
        ["owner", "clusters", "runs", "cluster h", "node h", "GPU h", "cost $", "training node h", "goodput"],
        [[t.owner, t.clusters, t.runs, f"{t.cluster_hours:,.2f}", f"{t.node_hours:,.2f}", f"{t.gpu_hours:,.2f}",
          f"{t.cost_usd:,.2f}" if t.cost_usd is not None else f"unknown ({', '.join(t.unpriced)} unpriced)",
          f"{t.training_node_hours:,.2f}", f"{t.goodput:.1%}"] for t in totals]))


def _categories(seconds: Mapping[str, float], wall: float, gpu_hours: Mapping[str, float],
                cost: Mapping[str, float], sources: Mapping[str, str],
                node_hours: Mapping[str, float] | None = None) -> None:
    """The categories as a table, then where each non-zero one came from."""
    header = ["category", "seconds", "share"] + (["node h"] if node_hours is not None else []) + ["GPU h", "cost $"]
    rows = []
    for name, value in seconds.items():
        rows.append([name, f"{value:,.1f}", f"{value / wall:.1%}" if wall > 0 else "-"]
                    + ([f"{node_hours[name]:,.3f}"] if node_hours is not None else [])
                    + [f"{gpu_hours[name]:,.3f}", f"{cost[name]:,.2f}" if cost else "-"])
    rows.append(["wall", f"{wall:,.1f}", "100.0%"]
                + ([f"{sum(node_hours.values()):,.3f}"] if node_hours is not None else [])
                + [f"{sum(gpu_hours.values()):,.3f}", f"{sum(cost.values()):,.2f}" if cost else "-"])
    console = make_console()
    console.print(make_table("Where the time went", header, rows))
    for name, value in seconds.items():
        if value > 0 and name in sources:
            console.print(f"  {name}: {sources[name]}", markup=False, highlight=False)


def _causes(causes: list[Cause], priced: bool) -> None:
    if not causes:
        return
    make_console().print(make_table(
        "Top causes of lost GPU-hours (lost work + restart overhead, by failure class)",
        ["failure class", "failures", "lost work s", "restart s", "node h", "GPU h", "cost $"],
        [[c.failure_class, c.failures, f"{c.lost_work_s:,.1f}", f"{c.restart_overhead_s:,.1f}",
          f"{c.node_hours:,.3f}", f"{c.gpu_hours:,.3f}",
          f"{c.cost_usd:,.2f}" if priced and c.cost_usd is not None else "-"] for c in causes]))


def _footer(price_note: str, notes: list[str]) -> None:
    sys.stdout.write(clean(f"price: {price_note}") + "\n")
    for note in notes:
        sys.stdout.write(clean(f"note: {note}") + "\n")


def _dur(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:,.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds:,.1f} s"
