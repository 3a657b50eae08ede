"""The cluster commands: `up`, `down`, `adopt`, `status`, `extend`, `ssh` and `sweep`: a cluster's
life from its plan to its deletion, as clusters.lifecycle runs it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console

from orchestrator.safetext import clean
from orchestrator.cli.common import (
    JsonOpt,
    Output,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_number,
    confirm,
    make_console,
    make_table,
    open_store,
    output,
)
from orchestrator.clusters import lifecycle, spending
from orchestrator.clusters.lifecycle import ClusterStatus, ListedCluster
from orchestrator.clusters.shell import check_head, describe, head_command
from orchestrator.clusters.spending import budget_warning, default_name, worst_case
from orchestrator.errors import ConfigError, PreflightError, ProvisionError
from orchestrator.models import Plan, utcnow
from orchestrator.providers.azure_shared.endpoints import check_arm_endpoint
from orchestrator.providers.base import SweepItem, SweepRequest
from orchestrator.specs.cluster import ClusterSpec, load_cluster_spec

if TYPE_CHECKING:
    from orchestrator.store.schema import RunRow

def _cluster_spec(file: Optional[Path], **flags: Any) -> ClusterSpec:
    if file is None and flags.get("name") is None:
        flags["name"] = default_name(flags.get("provider"))
    return load_cluster_spec(file, flags)


@app.command()
def up(
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Cluster spec YAML (see azbench init)."),
    name: Optional[str] = typer.Option(None, "--name", help="Cluster name (default: azbench-<user>-<4 hex> on "
                                                            "providers that cost money, else the provider's name)."),
    provider: Optional[str] = typer.Option(None, "--provider", help="local | ssh | azure | azureml | fake"),
    sku: Optional[str] = typer.Option(None, "--sku", help="VM size or alias: h100, h200, gb200, local."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Number of nodes (VMs)."),
    region: Optional[str] = typer.Option(None, "--region", help="Azure region, e.g. eastus."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan and cost only: no credentials, no changes."),
    check: bool = typer.Option(False, "--check", help="With --dry-run: sign in and read quota, sizes, zones and "
                                                      "images (no writes)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Start spending without asking (required without a terminal)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost-per-hour", min=0.01, metavar="USD",
                                             help="Refuse a plan whose list-price cost per hour is above this."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
) -> None:
    """Provision a cluster (or adopt the running one of the same name).

    Azure and Azure ML clusters cost money: `up` prints the plan in one line and asks first
    (--yes skips the question; without a terminal it refuses unless --yes is given)."""
    out = output(as_json, fmt, query)
    check_number("--max-cost-per-hour", max_cost, 0.01, 1_000_000)
    if check and not dry_run:
        raise ConfigError("--check goes with --dry-run (a real `up` checks the same before its first write)")
    spec = _cluster_spec(file, name=name, provider=provider, sku=sku, nodes=nodes, region=region)
    the_plan = lifecycle.plan(spec)
    spending.check_cost_cap(the_plan, spending.cost_cap(spec, max_cost))
    if spec.budget is not None:
        _warn_budget(spec, the_plan)
    if dry_run:
        return _dry_run(spec, the_plan, check, out)
    lifecycle.require_sdk(spec.provider)  # a missing extra is said before the cost question
    _ask_to_spend(spec, the_plan, yes, out)
    with open_store() as store:
        result = lifecycle.up(spec, store, on_progress=_step_line if out.rich else None)
    if not out.rich:
        return out.emit({"plan": result.plan, "cluster": result.cluster, "adopted": result.adopted})
    verb = "adopted" if result.adopted else "up"
    c = result.cluster
    sys.stdout.write(f"cluster '{c.name}' {verb}: {c.nodes} x {c.sku} ({c.provider}), "
                     f"nodes {', '.join(c.node_names[:8])}{' ...' if len(c.node_names) > 8 else ''}\n")


def _dry_run(spec: ClusterSpec, the_plan: Plan, check: bool, out: Output) -> None:
    """`up --dry-run`: the plan (with --check, what the provider read); a problem --check found
    is a PreflightError after the plan is shown."""
    checked, problems = lifecycle.check(spec, the_plan) if check else (None, [])
    if not out.rich:
        out.emit({**the_plan.model_dump(mode="json"), "worst_case_usd": the_plan.worst_case_usd,
                  **({"checked": checked, "problems": problems} if check else {})})
    else:
        _render_plan(the_plan, checked)
    if problems:
        raise PreflightError("; ".join(problems), hint="read by --dry-run --check; nothing was created")


def _ask_to_spend(spec: ClusterSpec, the_plan: Plan, yes: bool, out: Output) -> None:
    """The questions before `up` writes: the cost (providers that spend money), then the
    provider's own (e.g. a wide SSH range, allowed by azure.allow_wide_ssh_ingress, still asked)."""
    if spending.spends_money(spec.provider):
        summary = spending.plan_summary(the_plan, spec)
        if yes and out.rich:  # the plan, not a claim that anything started (preflight may refuse it)
            sys.stdout.write(f"plan: {summary}\n")
            sys.stdout.flush()
        confirm(f"Create {summary}?", yes)
    own = spec.own_section()
    for question in own.up_questions() if own else []:
        confirm(question, yes)


def _warn_budget(spec: ClusterSpec, plan: Plan) -> None:
    """The spec's `budget:` against what its owner's clusters cost this period (the store): a
    warning on stderr, never a refusal (the cost cap refuses)."""
    assert spec.budget is not None
    from orchestrator.goodput.owners import expected_owner, spent  # lazy: +SQLAlchemy on `up --dry-run` (0.4 s)
    since = spec.budget.since(utcnow())
    with open_store() as store:
        owner = expected_owner(store, spec.provider)
        spend = spent(store, owner, since)
    line = budget_warning(plan, spec.budget, owner, spend.usd, since, spend.unpriced)
    if line:
        sys.stderr.write(f"warning: {line}\n")
        sys.stderr.flush()


def _step_line(event: Any) -> None:
    """One stderr line per provisioning step (resources created, waited on, deleted)."""
    detail = f" ({event.detail})" if event.detail else ""
    sys.stderr.write(clean(f"{event.action}: {event.kind} {event.name}{detail}") + "\n")  # the cloud's text
    sys.stderr.flush()


def _render_plan(plan: Plan, checked: list[str] | None = None) -> None:
    """The plan; its preflight lines say what `up` will check, or (`checked`, --check) what
    was read."""
    console = make_console()
    cost = f"~${plan.cost_per_hour_usd:,.2f}/h (estimate)" if plan.cost_per_hour_usd is not None else "unknown"
    console.print(f"[bold]Plan for cluster '{plan.cluster}'[/bold] ({plan.provider}, {plan.region or 'this machine'}): "
                  f"{plan.nodes:,} x {plan.sku} = {plan.total_gpus:,} GPUs, cost {cost}", markup=True)
    if plan.lifetime:
        console.print(f"lifetime: {plan.lifetime}{worst_case(plan)}", markup=False)
    tags = {k: v for r in plan.resources for k, v in r.properties.items() if k.startswith("tag:")}
    console.print(make_table("Resources that would be created", ["kind", "name", "count", "properties"],
                         [[r.kind.removeprefix("Microsoft."), r.name, r.count,
                           ", ".join(f"{k}={v}" for k, v in r.properties.items()
                                     if not k.startswith("tag:") and v is not None)]
                          for r in plan.resources if not r.kind.endswith("virtualMachineScaleSets")]))
    if tags:
        console.print("tags on every resource: " + ", ".join(f"{k[4:]}={v}" for k, v in tags.items()))
    vmss = {r.name: r.properties for r in plan.resources if r.kind.endswith("virtualMachineScaleSets")}
    console.print(make_table("Scale sets (one InfiniBand fabric each)", ["name", "VMs", "GPUs", "racks", "settings"],
                         [[s.name, s.vms, s.gpus, s.racks if s.racks is not None else "-",
                           _vmss_settings(vmss.get(s.name, {}))] for s in plan.scale_sets]))
    for line in plan.preflight if checked is None else checked + [p for p in plan.preflight if not p.startswith("will check")]:
        console.print(f"preflight: {line}", markup=False)
    if checked is None and any(line.startswith("will check") for line in plan.preflight):
        console.print("preflight: the 'will check' lines are read by `up` before its first write, not now "
                      "(`--dry-run --check` reads them where the provider can, with no writes)", markup=False)
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")


def _vmss_settings(props: Mapping[str, object]) -> str:
    keys = ("orchestration", "single_placement_group", "platform_fault_domain_count", "overprovision",
            "priority", "eviction_policy", "max_price")
    return ", ".join(f"{k}={props[k]}" for k in keys if k in props)


@app.command()
def down(name: str = typer.Argument(..., help="Cluster name."),
         force: bool = typer.Option(False, "--force", help="Delete it even if another principal made it, or its "
                                                           "group holds resources azbench did not make."),
         yes: bool = typer.Option(False, "--yes", "-y", help="Delete without asking (required without a terminal "
                                                            "on providers that cost money)."),
         as_json: bool = JsonOpt,
         fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Delete everything the cluster owns and verify nothing is left.

    On providers that cost money it first shows what goes (nodes, GPUs, runs recorded as running,
    cost so far, every resource it deletes) and asks [y/N]; --yes skips the question; without a
    terminal it refuses unless --yes. A cluster you did not create, or whose group holds
    resources azbench did not make, is refused unless --force. If it stops part way, rerun it."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        cluster = lifecycle.down(name, store, on_progress=_step_line if out.rich else None, force=force,
                                 confirm=lambda question: confirm(question, yes))
        if not out.rich:
            return out.emit(cluster)
        from orchestrator.goodput.cluster import cluster_goodput  # lazy: +SQLAlchemy on `up --dry-run` (0.4 s)
        line = cluster_goodput(store, name).line  # where its money went, now that its record is final
    sys.stdout.write(f"cluster '{name}' is down\n{name}: {line}\n")


@app.command()
def adopt(name: str = typer.Argument(..., help="Cluster name (its azbench-cluster tag)."),
          provider: Optional[str] = typer.Option(None, "--provider",
                                                 help="Where to look (default: every provider whose clusters carry tags)."),
          force: bool = typer.Option(False, "--force", help="Record it even if another owner made it."),
          subscription: Optional[str] = typer.Option(None, "--subscription", help="Azure subscription id."),
          arm_endpoint: Optional[str] = typer.Option(None, "--arm-endpoint", help="ARM endpoint (sovereign clouds)."),
          resource_group: Optional[str] = typer.Option(
              None, "--resource-group", help="The group that holds it, when its spec named one (default: azbench-NAME)."),
          as_json: bool = JsonOpt,
          fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Rebuild the record of a live cluster this home does not know (a lost or copied store) from
    its cloud tags and resources; another owner's needs --force. Reads only: nothing changes in the cloud."""
    out = output(as_json, fmt, query)
    _check_arm_endpoint_flag(arm_endpoint)
    with open_store() as store:
        cluster = lifecycle.adopt(name, store, provider, force=force, account=subscription, endpoint=arm_endpoint,
                                  resource_group=resource_group)
    if not out.rich:
        return out.emit(cluster)
    left = lifecycle.time_left(cluster)
    expiry = f", expires in {_left(left)}" if left is not None else ""
    sys.stdout.write(f"cluster '{name}' adopted: {cluster.nodes} x {cluster.sku} ({cluster.provider}), "
                     f"{cluster.state.value}{expiry}{'' if cluster.ssh else '; no SSH keys for it in this home'}\n")


@app.command()
def status(name: Optional[str] = typer.Argument(None, help="Cluster name (default: all)."),
           as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
           query: Optional[str] = QueryOpt) -> None:
    """Clusters and their runs, as their cloud has them: every row is what the cloud reports
    now (one listing per provider, no SSH; the records follow), with the cost of what still
    bills. With NAME: the cloud's view in detail (VM and scale-set states, instances, cost so
    far, expiry, the cluster's history), then Slurm's when the head answers."""

    out = output(as_json, fmt, query)
    events: list[Any] = []
    notes: list[str] = []
    with open_store() as store:
        runs = store.list_runs(cluster=name) if name else store.list_runs()
        if name:
            # ARM's view first; the record follows it (deleted, being deleted, partly there).
            one = lifecycle.cluster_status(lifecycle.require_cluster(name, store, live=False), store=store)
            events = store.list_events(cluster=name)
            left_at = one.expires if one.cluster.state.value != "terminated" else None
            rows = [lifecycle.ListedCluster(one.cluster, one.cost_so_far_usd,
                                            one.rate.per_hour if one.rate is not None else None, left_at, one.change)]
        else:
            one = None
            rows, notes = lifecycle.status_list(store)
    clusters = [r.cluster for r in rows]
    nodes = one.nodes if one else []
    now = datetime.now(timezone.utc)
    costs = {r.cluster.name: r.cost_so_far_usd for r in rows}
    billed = {r.cluster.name: r.billed_per_hour_usd for r in rows}
    left = {r.cluster.name: (r.expires - now if r.expires is not None else None) for r in rows}
    if not out.rich:
        extra = {} if one is None else {"cloud": one.cloud and dataclasses.asdict(one.cloud),
                                        "cloud_note": one.cloud_note, "head": one.head, "change": one.change,
                                        "billed": one.rate.say() if one.rate is not None else None,
                                        "health": one.health, "down_nodes": one.down_nodes,
                                        "events": events}
        return out.emit({"clusters": clusters, "cost_so_far_usd": costs, "billed_per_hour_usd": billed,
                         "expires_in_s": {k: int(v.total_seconds()) if v is not None else None
                                          for k, v in left.items()},
                         "nodes": [n.__dict__ for n in nodes], "runs": runs, **extra})
    _render_status(rows, notes, one, events, runs, costs, left)


def _render_status(rows: list[ListedCluster], notes: list[str], one: ClusterStatus | None, events: list[Any],
                   runs: list[RunRow], costs: dict[str, float | None],
                   left: dict[str, timedelta | None]) -> None:
    """`status` on a terminal: the clusters, the list's notes, then for one cluster its cloud's
    view, nodes and history, then the runs."""
    clusters = [r.cluster for r in rows]
    console = make_console()
    console.print(make_table("Clusters", ["name", "provider", "sku", "nodes", "state", "created", "cost so far (est.)",
                                          "expires in"],
                         [[c.name, c.provider, c.sku, c.nodes, c.state.value, f"{c.created_at:%Y-%m-%d %H:%M}",
                           f"${costs[c.name]:,.2f}" if costs[c.name] is not None else "-",
                           _left(left[c.name]) if c.state.value != "terminated" else "-"]
                          for c in clusters]))
    for row in rows if one is None else ():
        if row.change:
            console.print(clean(f"{row.cluster.name}: {row.change}"), markup=False)
    for note in notes:
        console.print(clean(note), markup=False)
    if one is not None and one.cloud is not None:
        _render_cloud(console, one)
    for note in (one.change, one.cloud_note, one.head) if one is not None else ():
        if note:
            console.print(clean(note), markup=False)
    if one is not None and one.down_nodes:  # the record says ready; Slurm says otherwise
        console.print(f"{one.cluster.name}: degraded: {len(one.down_nodes)} node(s) down in Slurm: "
                      f"{', '.join(one.down_nodes)}", markup=False)
    if one is not None and one.nodes:
        console.print(make_table("Nodes", ["node", "state", "detail"],
                                 [[n.name, n.state, n.detail] for n in one.nodes]))
    if events:
        console.print(make_table("History", ["when", "kind", "what"],
                                 [[f"{e.ts:%Y-%m-%d %H:%M}", e.kind, e.message] for e in events[-15:]]))
    console.print(make_table("Runs", ["id", "cluster", "recipe", "nodes", "state", "message"],
                         [[r.id, r.cluster, r.recipe, r.nodes, r.state, r.message] for r in runs[-30:]]))


def _render_cloud(console: Console, one: ClusterStatus) -> None:
    """The cloud's view of one cluster, read with no login: its resources, instances, owner,
    expiry and what bills now."""
    cloud = one.cloud
    assert cloud is not None  # the caller checks
    if not cloud.exists:
        console.print(f"{one.cluster.provider}: nothing tagged with cluster '{one.cluster.name}' exists")
    elif cloud.phase == "deleting":
        console.print(clean(f"{one.cluster.provider}: {cloud.phase_detail}"), markup=False)
    else:
        console.print(make_table(f"{one.cluster.provider} (no login)", ["kind", "name", "state", "detail"],
                                 [[r.kind, r.name, r.state, r.detail] for r in cloud.resources]))
        console.print(clean(f"instances: {cloud.instances} listed, {cloud.running} running; owner "
                            f"{cloud.owner or '-'}; expires {cloud.expires:%Y-%m-%d %H:%M} UTC"
                            if cloud.expires else f"instances: {cloud.instances} listed, {cloud.running} running; "
                            f"owner {cloud.owner or '-'}; no expiry"), markup=False)  # the owner tag is anyone's
        if one.rate is not None and (one.rate.parts or one.rate.unpriced):
            console.print(f"billed now (list price): {one.rate.say()}", markup=False)


def _left(left: timedelta | None) -> str:
    """'5h 12m', 'expired', or '-' for a cluster with no deadline."""
    if left is None:
        return "-"
    minutes = int(left.total_seconds() // 60)
    if minutes < 0:
        return "expired"
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


@app.command()
def extend(name: str = typer.Argument(..., help="Cluster name."),
           hours: float = typer.Option(..., "--hours", help="Hours to add to the expiry (from now if past)."),
           force: bool = typer.Option(False, "--force", help="Extend it even if another principal made it."),
           as_json: bool = JsonOpt,
           fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Move an Azure cluster's expiry later: its azbench-expires tags, which the head's expiry timer reads."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        cluster = lifecycle.extend(name, hours, store, force=force)
    if not out.rich:
        return out.emit(cluster)
    deadline = cluster.properties.deadline()
    sys.stdout.write(f"cluster '{name}' now expires at {deadline:%Y-%m-%dT%H:%M:%SZ} "
                     f"(in {_left(lifecycle.time_left(cluster))})\n")


@app.command(context_settings={"ignore_unknown_options": True})
def ssh(name: str = typer.Argument(..., help="Cluster name."),
        command: Optional[list[str]] = typer.Argument(None, help="After --: a command for the head's shell."),
        show: bool = typer.Option(False, "--print", help="Print the command line instead of running it.")) -> None:
    """A shell (or one command) on the cluster's head node, trusting only its pinned host key.

    Local clusters have no sshd: the command runs on this machine with the cluster's environment."""

    with open_store() as store:
        cluster = lifecycle.reachable(name, store)
    cmd = head_command(cluster, list(command or []))
    if show:
        sys.stdout.write(describe(cmd) + "\n")
        return
    check_head(cluster)
    code = subprocess.run(cmd.argv, env={**os.environ, **cmd.env}, cwd=cmd.cwd).returncode
    if code:
        raise typer.Exit(code)


@app.command()
def sweep(dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
          yes: bool = typer.Option(False, "--yes", "-y", help="Delete without asking (required without a terminal)."),
          all_owners: bool = typer.Option(False, "--all-owners",
                                          help="Also delete other owners' expired clusters."),
          subscription: Optional[str] = typer.Option(None, "--subscription", help="Azure subscription id."),
          arm_endpoint: Optional[str] = typer.Option(None, "--arm-endpoint", help="ARM endpoint (sovereign clouds)."),
          as_json: bool = JsonOpt,
          fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Delete your Azure clusters whose azbench-expires tag has passed (--all-owners: other
    owners' expired ones too); lists them and asks first. A live cluster of yours that this home
    has no record of is listed, never deleted (`azbench adopt NAME` takes it in)."""
    out = output(as_json, fmt, query)
    _check_arm_endpoint_flag(arm_endpoint)
    with open_store() as store:
        known = {r.name for r in store.list_clusters()}
    request = SweepRequest(dry_run=True, known=known, all_owners=all_owners, account=subscription,
                           endpoint=arm_endpoint)
    items = lifecycle.sweep(request)
    doomed = [i for i in items if i.action == "delete"]
    if out.rich:
        for item in items:
            sys.stdout.write(_sweep_line(item, "would delete" if dry_run else "will delete") + "\n")
        if not items:
            sys.stdout.write("nothing to sweep\n")
        sys.stdout.flush()
    if not dry_run and doomed:
        things = "cluster(s) and role definition(s)" if any(i.what != "cluster" for i in doomed) else "cluster(s)"
        confirm(f"Delete these {len(doomed)} {things}?", yes)
        with open_store() as store:
            done = lifecycle.sweep(dataclasses.replace(request, dry_run=False, only={i.cluster for i in doomed}),
                                   store)
        items = [i for i in done if i.action in ("deleted", "failed")]
        if out.rich:
            for item in items:
                label = item.cluster if item.what == "cluster" else f"{item.what} '{item.cluster}' ({item.reason})"
                sys.stdout.write(f"deleted {label}\n" if item.deleted else f"failed {label}: {item.error}\n")
    if not out.rich:
        out.emit([i.__dict__ for i in items])
    failed = [i for i in items if i.action == "failed"]
    if failed:
        deleted = sum(1 for i in items if i.deleted)
        raise ProvisionError(f"sweep: {len(failed)} of {len(doomed)} cluster(s) could not be deleted "
                             f"({', '.join(i.cluster for i in failed)}); {deleted} deleted",
                             hint="see the lines above; rerun `azbench sweep` to try them again")


def _check_arm_endpoint_flag(value: str | None) -> None:
    """--arm-endpoint must be an https URL (ConfigError naming the flag, exit 2)."""
    if value is not None:
        try:
            check_arm_endpoint(value)
        except ValueError as exc:
            raise ConfigError(f"--arm-endpoint: {exc}") from None


def _sweep_line(item: SweepItem, verb: str) -> str:
    """One line per cluster sweep found: what it will do (or would), and why."""
    if item.what != "cluster":
        return f"{verb} {item.what} '{item.cluster}' ({item.reason})"
    whose = "" if item.mine else f"; owner {item.owner}"
    where = f"{len(item.resources)} resources in {', '.join(item.resource_groups) or 'no group'}{whose}"
    said = item.action if item.action in ("kept", "skipped") else verb  # what sweep leaves says so
    return f"{said} {item.cluster}: {item.reason} ({where})"


