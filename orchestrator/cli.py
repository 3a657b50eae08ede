"""The azbench command line: parse flags, call one use case, render a table or --json.

Start-up stays light: only typer is imported here at module level; every command imports what it
needs when it runs, so `azbench --help` never loads the Azure SDKs, SQLAlchemy or matplotlib.
One error handler (`main`) maps AzbenchError subclasses to one stderr line and an exit code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from orchestrator.errors import EXIT_CODES, AzbenchError

app = typer.Typer(
    name="azbench",
    help="Provision Azure GPU clusters (or a local Slurm cluster), run MLPerf Training recipes, "
         "and report scores, scaling and cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog="Exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items()),
)
recipes_app = typer.Typer(help="List and inspect benchmark recipes.", no_args_is_help=True,
                          rich_markup_mode=None)
results_app = typer.Typer(help="Stored results: list, show, import MLPerf logs.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(recipes_app, name="recipes")
app.add_typer(results_app, name="results")

_STATE = {"debug": False}
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    _STATE["debug"] = debug or bool(os.environ.get("AZBENCH_DEBUG"))


# ---------------------------------------------------------------- output helpers

def _dump(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (list, tuple)):
        return [_dump(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _dump(v) for k, v in obj.items()}
    return obj


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(_dump(obj), indent=2, default=str) + "\n")


def _console():
    from rich.console import Console
    return Console()


def _table(title: str, columns: list[str], rows: list[list[Any]]):
    from rich.table import Table
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    return table


def _store():
    from orchestrator.store import Store
    return Store.open()


# ---------------------------------------------------------------- catalog / init

@app.command()
def catalog(as_json: bool = JsonOpt) -> None:
    """The GPU VM sizes azbench knows (prices are list-price estimates)."""
    from orchestrator.catalog import CATALOG
    if as_json:
        return _print_json(list(CATALOG))
    rows = [[s.short, s.name, ", ".join(s.aliases), f"{s.gpus_per_vm} x {s.gpu_model}",
             s.vcpus or "-", s.ram_gib or "-",
             f"{s.ib_links} x {s.ib_gbps_per_link} Gb/s" if s.ib_links else "-",
             s.nvlink_domain_vms, s.cpu_arch, s.quota_family or "-",
             f"~${s.price_per_hour_usd:,.2f}" if s.price_per_hour_usd is not None else "unknown",
             s.peak_tflops_bf16 or "-", s.peak_tflops_fp8 or "-"] for s in CATALOG]
    _console().print(_table(
        "GPU VM catalog (price: Linux pay-as-you-go list estimate per VM-hour)",
        ["size", "name", "aliases", "GPUs/VM", "vCPU", "RAM GiB", "InfiniBand", "NVLink VMs",
         "arch", "quota family", "price/h", "BF16 TF/GPU", "FP8 TF/GPU"], rows))


@app.command()
def init(path: Path = typer.Argument(Path("cluster.yaml"), help="Where to write the example."),
         force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
    """Write a commented example cluster.yaml."""
    from orchestrator.errors import ConfigError
    from orchestrator.resources import templates_dir
    if path.exists() and not force:
        raise ConfigError(f"{path} exists: pass --force to overwrite it")
    text = (templates_dir() / "cluster.example.yaml").read_text()
    path.write_text(text)
    sys.stdout.write(f"wrote {path}\n")


# ---------------------------------------------------------------- up / down / status

def _cluster_spec(file: Optional[Path], **flags: Any):
    from orchestrator.specs import load_cluster_spec
    if file is None and flags.get("name") is None:
        flags["name"] = flags.get("provider") or "local"
    return load_cluster_spec(file, flags)


@app.command()
def up(
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Cluster spec YAML (see azbench init)."),
    name: Optional[str] = typer.Option(None, "--name", help="Cluster name (default: the provider's name)."),
    provider: Optional[str] = typer.Option(None, "--provider", help="local | ssh | azure | azureml | fake"),
    sku: Optional[str] = typer.Option(None, "--sku", help="VM size or alias: h100, h200, gb200, local."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Number of nodes (VMs)."),
    region: Optional[str] = typer.Option(None, "--region", help="Azure region, e.g. eastus."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan and cost only: no credentials, no changes."),
    as_json: bool = JsonOpt,
) -> None:
    """Provision a cluster (or adopt the running one of the same name)."""
    from orchestrator import lifecycle
    spec = _cluster_spec(file, name=name, provider=provider, sku=sku, nodes=nodes, region=region)
    if dry_run:
        the_plan = lifecycle.plan(spec)
        return _print_json(the_plan) if as_json else _render_plan(the_plan)
    with _store() as store:
        result = lifecycle.up(spec, store)
    if as_json:
        return _print_json({"plan": result.plan, "cluster": result.cluster, "adopted": result.adopted})
    verb = "adopted" if result.adopted else "up"
    c = result.cluster
    sys.stdout.write(f"cluster '{c.name}' {verb}: {c.nodes} x {c.sku} ({c.provider}), "
                     f"nodes {', '.join(c.node_names[:8])}{' ...' if len(c.node_names) > 8 else ''}\n")


def _render_plan(plan: Any) -> None:
    console = _console()
    cost = f"~${plan.cost_per_hour_usd:,.2f}/h (estimate)" if plan.cost_per_hour_usd is not None else "unknown"
    console.print(f"[bold]Plan for cluster '{plan.cluster}'[/bold] ({plan.provider}, {plan.region or 'this machine'}): "
                  f"{plan.nodes:,} x {plan.sku} = {plan.total_gpus:,} GPUs, cost {cost}")
    tags = {k: v for r in plan.resources for k, v in r.properties.items() if k.startswith("tag:")}
    console.print(_table("Resources that would be created", ["kind", "name", "count", "properties"],
                         [[r.kind.removeprefix("Microsoft."), r.name, r.count,
                           ", ".join(f"{k}={v}" for k, v in r.properties.items()
                                     if not k.startswith("tag:") and v is not None)]
                          for r in plan.resources if not r.kind.endswith("virtualMachineScaleSets")]))
    if tags:
        console.print("tags on every resource: " + ", ".join(f"{k[4:]}={v}" for k, v in tags.items()))
    vmss = {r.name: r.properties for r in plan.resources if r.kind.endswith("virtualMachineScaleSets")}
    console.print(_table("Scale sets (one InfiniBand fabric each)", ["name", "VMs", "GPUs", "racks", "settings"],
                         [[s.name, s.vms, s.gpus, s.racks if s.racks is not None else "-",
                           _vmss_settings(vmss.get(s.name, {}))] for s in plan.scale_sets]))
    for check in plan.preflight:
        console.print(f"preflight: {check}")
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")


def _vmss_settings(props: dict) -> str:
    keys = ("orchestration", "single_placement_group", "platform_fault_domain_count", "overprovision")
    return ", ".join(f"{k}={props[k]}" for k in keys if k in props)


@app.command()
def down(name: str = typer.Argument(..., help="Cluster name."), as_json: bool = JsonOpt) -> None:
    """Delete everything the cluster owns and verify nothing is left."""
    from orchestrator import lifecycle
    with _store() as store:
        cluster = lifecycle.down(name, store)
    if as_json:
        return _print_json(cluster)
    sys.stdout.write(f"cluster '{name}' is down\n")


@app.command()
def status(name: Optional[str] = typer.Argument(None, help="Cluster name (default: all)."),
           as_json: bool = JsonOpt) -> None:
    """Clusters (with live node states and cost so far when one is named) and their runs."""
    from orchestrator import lifecycle
    with _store() as store:
        clusters = [lifecycle.require_cluster(name, store, live=False)] if name else \
            [r.cluster for r in store.list_clusters(include_terminated=True)]
        runs = store.list_runs(cluster=name) if name else store.list_runs()
    nodes = lifecycle.node_views(clusters[0]) if name else []
    costs = {c.name: lifecycle.cost_so_far(c) if c.state.value == "ready" else None for c in clusters}
    if as_json:
        return _print_json({"clusters": clusters, "cost_so_far_usd": costs,
                            "nodes": [n.__dict__ for n in nodes], "runs": runs})
    console = _console()
    console.print(_table("Clusters", ["name", "provider", "sku", "nodes", "state", "created", "cost so far (est.)"],
                         [[c.name, c.provider, c.sku, c.nodes, c.state.value, f"{c.created_at:%Y-%m-%d %H:%M}",
                           f"${costs[c.name]:,.2f}" if costs[c.name] is not None else "-"] for c in clusters]))
    if nodes:
        console.print(_table("Nodes", ["node", "state", "detail"], [[n.name, n.state, n.detail] for n in nodes]))
    console.print(_table("Runs", ["id", "cluster", "recipe", "nodes", "state", "message"],
                         [[r.id, r.cluster, r.recipe, r.nodes, r.state, r.message] for r in runs[-30:]]))


@app.command()
def sweep(dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
          subscription: Optional[str] = typer.Option(None, "--subscription", help="Azure subscription id."),
          arm_endpoint: Optional[str] = typer.Option(None, "--arm-endpoint", help="ARM endpoint (sovereign clouds)."),
          as_json: bool = JsonOpt) -> None:
    """Delete Azure clusters whose azbench-expires tag has passed or that azbench has no record of."""
    from orchestrator.providers.azure import sweep as azure_sweep
    with _store() as store:
        known = {r.name for r in store.list_clusters()}
    items = azure_sweep(dry_run=dry_run, known_clusters=known, subscription_id=subscription,
                        arm_endpoint=arm_endpoint)
    if as_json:
        return _print_json([i.__dict__ for i in items])
    verb = "would delete" if dry_run else "deleted"
    for item in items:
        sys.stdout.write(f"{verb} {item.cluster}: {item.reason} ({len(item.resources)} resources in "
                         f"{', '.join(item.resource_groups) or 'no group'})\n")
    if not items:
        sys.stdout.write("nothing to sweep\n")


# ---------------------------------------------------------------- recipes

@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOpt) -> None:
    """Recipes azbench can run."""
    from orchestrator.recipes import list_recipes
    recipes = list_recipes()
    if as_json:
        return _print_json(recipes)
    _console().print(_table("Recipes", ["name", "benchmark", "runs for a score", "SKUs", "description"],
                            [[r.name, r.benchmark, r.required_runs, ", ".join(r.skus), r.description]
                             for r in recipes]))


@recipes_app.command("show")
def recipes_show(name: str = typer.Argument(..., help="Recipe name."),
                 sku: str = typer.Option("local", "--sku", help="VM size or alias."),
                 nodes: int = typer.Option(1, "--nodes", help="Number of nodes (VMs)."),
                 ruleset: Optional[str] = typer.Option(None, "--ruleset", help="MLPerf ruleset, e.g. 5.1.0."),
                 image: Optional[str] = typer.Option(None, "--image", help="Override the container image."),
                 as_json: bool = JsonOpt) -> None:
    """The resolved config (parallelism, batch, placement) and the exact script that would run."""
    from orchestrator.recipes import describe_launch
    preview = describe_launch(name, sku, nodes, ruleset, image=image)
    if as_json:
        return _print_json(preview)
    r = preview.resolved
    lines = [f"{r.recipe} ({r.benchmark}, ruleset {r.ruleset or '-'}) on {r.nodes} x {r.sku_short} = {r.gpus} GPUs",
             f"target: {r.target.metric} {'>=' if r.target.direction == 'max' else '<='} {r.target.value}, "
             f"{r.required_runs} runs for a score, walltime {r.walltime_min} min"]
    if r.gbs:
        lines.append(f"parallelism: TP {r.tp} x PP {r.pp} x CP {r.cp} x DP {r.dp}"
                     f"{f' (VP {r.vp})' if r.vp else ''}, micro batch {r.mbs}, global batch {r.gbs}, "
                     f"grad accumulation {r.grad_accum}")
    lines.append(f"config: {'derived: ' + (r.rule or '') if r.derived else 'listed'} ({r.source or 'recipe'})")
    if r.image:
        lines.append(f"image: {r.image}")
    lines += [f"warning: {w}" for w in r.warnings]
    sys.stdout.write("\n".join(lines) + "\n\n--- script ---\n" + preview.script.rstrip() + "\n")
    if preview.stage_script:
        sys.stdout.write("\n--- data staging job ---\n" + preview.stage_script.rstrip() + "\n")


# ---------------------------------------------------------------- run / logs / report / results

def _later(what: str, issue: str) -> None:
    from orchestrator.errors import NotAvailableError
    raise NotAvailableError(f"{what} is not built yet (arrives with issue {issue})")


@app.command()
def run(recipe: Optional[str] = typer.Argument(None, help="Recipe name (see azbench recipes list)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster name (default: the only one up)."),
        nodes: Optional[str] = typer.Option(None, "--nodes", help="Node counts, comma-separated: 1,2,4."),
        repeats: Optional[int] = typer.Option(None, "--repeats", help="Runs per node count."),
        file: Optional[Path] = typer.Option(None, "--file", "-f", help="Run spec YAML (retry, health, params)."),
        param: list[str] = typer.Option([], "--param", "-p", help="Recipe parameter KEY=VALUE (repeatable)."),
        poll: float = typer.Option(1.0, "--poll", min=0.05, help="Seconds between scheduler polls."),
        attach: Optional[str] = typer.Option(None, "--attach", help="Reattach to run RUN's live job(s) and finish its sweep."),
        as_json: bool = JsonOpt) -> None:
    """Run a recipe at one or more node counts, watch it, then ingest its results.

    A rerun of the same command while its sweep is unfinished reattaches instead of resubmitting.
    Ctrl-C asks whether to cancel the job or detach (without a terminal: detach)."""
    from orchestrator.errors import ConfigError
    from orchestrator.runs import attach_run, require_success, run_sweep
    from orchestrator.specs import load_run_spec, parse_node_list
    if attach is None and recipe is None:
        raise ConfigError("give a recipe name, or --attach RUN")
    spec = None if attach else load_run_spec(file, {
        "recipe": recipe, "cluster": cluster, "repeats": repeats,
        "nodes": parse_node_list(nodes) if nodes else None, "params": _params(param) if param else None})
    with _store() as store, _progress_view(enabled=not as_json) as show:
        try:
            outcomes = attach_run(attach, store, on_progress=show, on_event=show.event, poll_interval=poll) \
                if attach else run_sweep(spec, store, on_progress=show, on_event=show.event, poll_interval=poll)
        except KeyboardInterrupt:
            _interrupted(store, spec, attach)
    if as_json:
        _print_json([o.__dict__ for o in outcomes])
    else:
        _console().print(_table("Runs", ["run", "nodes", "repeat", "state", "attempts", "resumed",
                                         "time to train (min)", "message"],
                                [[o.run_id, o.nodes, o.repeat, o.state, o.attempts, "yes" if o.resumed else "",
                                  f"{o.minutes:.3f}" if o.minutes is not None else "-", o.message]
                                 for o in outcomes]))
        _attempt_table(outcomes)
    require_success(outcomes)


def _attempt_table(outcomes: list[Any]) -> None:
    """Attempt history of runs that needed more than one attempt (lost work, resumed step)."""
    retried = [o for o in outcomes if o.attempts > 1]
    if not retried:
        return
    with _store() as store:
        rows = [[o.run_id, a.attempt, a.job_id, a.state, a.failure_class or "", ", ".join(a.excluded_nodes),
                 a.resumed_from_step if a.resumed_from_step is not None else "",
                 a.lost_steps if a.lost_steps is not None else "",
                 f"{a.lost_seconds:.1f}" if a.lost_seconds is not None else ""]
                for o in retried for a in store.list_attempts(o.run_id)]
    _console().print(_table("Attempts", ["run", "attempt", "job", "state", "failure", "excluded",
                                         "resumed from step", "lost steps", "lost s"], rows))


def _interrupted(store: Any, spec: Any, attach: Optional[str]) -> None:
    """Ctrl-C: on a terminal ask cancel or detach; otherwise detach and say how to come back."""
    from orchestrator.errors import RunFailedError
    from orchestrator.runs import FINAL, cancel_runs, live_sweep
    if attach:
        row = store.get_run(attach)
        live = [r for r in store.list_runs(sweep_id=row.sweep_id) if r.state not in FINAL] if row else []
    else:
        from orchestrator.lifecycle import require_cluster
        live = live_sweep(spec, store, require_cluster(spec.cluster, store).name)
    if not live:
        raise KeyboardInterrupt
    ids = [r.id for r in live]
    choice = "d"
    if sys.stdin.isatty() and sys.stderr.isatty():
        sys.stderr.write("\n")
        choice = typer.prompt("Cancel the Slurm job(s) or detach? [c/d]", default="d").strip().lower()[:1]
    if choice == "c":
        jobs = cancel_runs(store, ids)
        raise RunFailedError(f"cancelled {', '.join(ids)} (Slurm job(s) {', '.join(jobs) or 'none'})")
    sys.stderr.write(f"\ndetached: the job keeps running. Reattach with: azbench run --attach {ids[0]}\n")
    sys.exit(130)


def _params(items: list[str]) -> dict[str, Any]:
    from orchestrator.errors import ConfigError
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param: '{item}' is not KEY=VALUE")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


class _progress_view:
    """A live one-line-per-run view on a terminal; plain log lines elsewhere (CI)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.last: dict[str, str] = {}
        self.tty = sys.stderr.isatty()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")

    def event(self, e: Any) -> None:
        if self.enabled:
            sys.stderr.write(("\r\033[K" if self.tty else "") + f"{e.run_id}: {e.message}\n")

    def __call__(self, p: Any) -> None:
        self.show(p)

    def show(self, p: Any) -> None:
        if not self.enabled:
            return
        if getattr(p, "note", ""):
            sys.stderr.write(("\r\033[K" if self.tty else "") + f"{p.run_id}: {p.note}" + ("" if self.tty else "\n"))
            return
        step = f"step {p.step}" if p.step is not None else "step -"
        value = f", eval {p.eval_value:.4f}" if p.eval_value is not None else ""
        eta = f", eta {p.eta_s:.0f}s" if p.eta_s is not None else ""
        line = (f"{p.run_id} [{p.nodes} node{'s' if p.nodes != 1 else ''}, attempt {p.attempt}] "
                f"{p.state.value}: {step}{value}, {p.elapsed_s:.0f}s{eta}")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
        elif self.last.get(p.run_id) != f"{p.state.value}{p.step}":
            sys.stderr.write(line + "\n")
        self.last[p.run_id] = f"{p.state.value}{p.step}"


@app.command()
def logs(run_id: str = typer.Argument(..., help="Run id (see azbench status)."),
         follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines until the run ends."),
         attempt: Optional[int] = typer.Option(None, "--attempt", help="Attempt number (default: the last).")) -> None:
    """Print a run's training log (fetched copy, or live from the cluster while it runs)."""
    from orchestrator.logview import stream_log
    with _store() as store:
        for chunk in stream_log(store, run_id, attempt=attempt, follow=follow):
            sys.stdout.write(chunk)
            sys.stdout.flush()


@app.command()
def report(benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
           system: Optional[str] = typer.Option(None, "--system", help="Only this system."),
           cluster: Optional[str] = typer.Option(None, "--cluster", help="Only runs on this cluster."),
           since: Optional[str] = typer.Option(None, "--since", help="Only results since this date (YYYY-MM-DD)."),
           as_json: bool = JsonOpt,
           markdown: bool = typer.Option(False, "--markdown", help="Print Markdown (for PR comments)."),
           html: Optional[Path] = typer.Option(None, "--html", help="Write index.html and PNG plots here.")) -> None:
    """Scores, time-to-train, step times, scaling efficiency, speedup and cost."""
    from orchestrator.report import build_report
    from orchestrator.report_render import rich_tables, to_json, to_markdown, write_html
    when = _parse_since(since)
    with _store() as store:
        results = store.list_results(benchmark=benchmark, system=system, cluster=cluster, since=when)
        runs = store.list_runs(cluster=cluster) if cluster else store.list_runs()
        attempts = [a for r in runs for a in store.list_attempts(r.id)]
    rep = build_report(results, runs, attempts, benchmark=benchmark, system=system, since=when)
    if html is not None:
        files = write_html(rep, results, html)
        sys.stderr.write(f"wrote {len(files)} files to {html} (open {files[0]})\n")
    if as_json:
        sys.stdout.write(to_json(rep) + "\n")
    elif markdown:
        sys.stdout.write(to_markdown(rep) + "\n")
    elif html is None:
        console = _console()
        if not results:
            console.print("no results yet: run a recipe (azbench run) or import logs (azbench results import)")
        for table in rich_tables(rep):
            console.print(table)


def _parse_since(since: Optional[str]):
    if since is None:
        return None
    from datetime import datetime, timezone
    from orchestrator.errors import ConfigError
    try:
        when = datetime.fromisoformat(since)
    except ValueError:
        raise ConfigError(f"--since: '{since}' is not a date like 2026-11-01") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@results_app.command("list")
def results_list(benchmark: Optional[str] = typer.Option(None, "--benchmark"),
                 system: Optional[str] = typer.Option(None, "--system"),
                 as_json: bool = JsonOpt) -> None:
    """Stored results, one line each."""
    with _store() as store:
        rows = store.list_results(benchmark=benchmark, system=system)
    if as_json:
        return _print_json([r.model_dump(mode="json", exclude={"summary_json"}) for r in rows])
    _console().print(_table("Results", ["id", "benchmark", "system", "status", "minutes", "nodes", "GPUs",
                                        "resumed", "source", "run"],
                            [[r.id, r.benchmark, r.system, r.status,
                              f"{r.minutes:.3f}" if r.minutes is not None else "-", r.nodes, r.gpus,
                              "yes" if r.resumed else "", r.source, r.run_id] for r in rows]))


@results_app.command("show")
def results_show(result_id: int = typer.Argument(..., help="Result id (see azbench results list)."),
                 as_json: bool = JsonOpt) -> None:
    """One stored result with its parsed log summary."""
    from orchestrator.errors import NotFoundError
    with _store() as store:
        row = next((r for r in store.list_results() if r.id == result_id), None)
    if row is None:
        raise NotFoundError(f"no result with id {result_id}", hint="see `azbench results list`")
    data = row.model_dump(mode="json")
    data["summary"] = json.loads(data.pop("summary_json") or "null")
    if as_json:
        return _print_json(data)
    summary = data["summary"] or {}
    for key in ("id", "benchmark", "system", "status", "minutes", "nodes", "gpus", "global_batch_size",
                "resumed", "source", "run_id", "log_path", "compliance_ok"):
        sys.stdout.write(f"{key:18} {data.get(key)}\n")
    sys.stdout.write(f"{'steps timed':18} {len(summary.get('step_times') or [])}\n"
                     f"{'eval points':18} {len(summary.get('eval_points') or [])}\n"
                     f"{'bad lines':18} {summary.get('bad_lines')}\n")


@results_app.command("import")
def results_import(path: Path = typer.Argument(..., help="Submission tree, results folder, run dir or log file."),
                   compliance: bool = typer.Option(False, "--compliance", help="Run mlperf_logging's compliance checker on each log."),
                   as_json: bool = JsonOpt) -> None:
    """Import MLPerf result logs (idempotent: the same file twice is one result)."""
    from orchestrator.importer import import_path
    with _store() as store:
        summary = import_path(store, path, check_compliance=compliance)
    if as_json:
        return _print_json(summary)
    sys.stdout.write(f"imported {len(summary.imported)} result(s), {len(summary.duplicates)} already stored, "
                     f"{len(summary.warnings)} warning(s) from {path}\n")
    for warning in summary.warnings:
        sys.stderr.write(f"warning: {warning.path}: {warning.message}\n")


# ---------------------------------------------------------------- pipelines (own module)

from orchestrator.cli_pipeline import baseline_app, pipeline_app, register_compare  # noqa: E402

app.add_typer(pipeline_app, name="pipeline")
app.add_typer(baseline_app, name="baseline")
register_compare(app)


# ---------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; AzbenchError -> one line on stderr + its exit code."""
    try:
        code = app(args=argv, prog_name="azbench", standalone_mode=False)
        # Without standalone mode, typer returns a typer.Exit's code instead of exiting.
        if isinstance(code, int) and code:
            sys.exit(code)
    except AzbenchError as exc:
        if _STATE["debug"]:
            raise
        sys.stderr.write(f"azbench: {exc.kind}: {exc}\n")
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: bad flag, missing argument
        show = getattr(exc, "show", None)
        show() if show else sys.stderr.write(f"azbench: {exc.format_message()}\n")
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        sys.stderr.write("azbench: aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("azbench: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: keep it to one line unless --debug
        if _STATE["debug"]:
            raise
        sys.stderr.write(f"azbench: internal error: {type(exc).__name__}: {exc} "
                         "(rerun with --debug for the traceback)\n")
        sys.exit(1)
    sys.exit(0)
