"""`azbench recipes`, `azbench report` and `azbench results`: what can run and what came out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from orchestrator.cli.common import (
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_filter,
    emit_json,
    make_console,
    make_table,
    open_store,
    output,
    recipes_app,
    results_app,
)
from orchestrator.paths import DEFAULT_DATA_ROOT

if TYPE_CHECKING:  # the CLI imports runs/ lazily: --help stays fast
    from datetime import datetime

    from orchestrator.goodput.model import ClusterGoodput, RunGoodput
    from orchestrator.runs.prepare import PrepareResult
    from orchestrator.store.database import Store

# ---------------------------------------------------------------- recipes

@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Recipes azbench can run."""
    from orchestrator.recipes.catalog import list_recipes
    out = output(as_json, fmt, query)
    recipes = list_recipes()
    if not out.rich:
        return out.emit(recipes)
    make_console().print(make_table("Recipes", ["name", "benchmark", "runs for a score", "SKUs", "description"],
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
    from orchestrator.runs.launch import describe_launch
    preview = describe_launch(name, sku, nodes, ruleset, image=image)
    if as_json:
        return emit_json(preview)
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
    if r.config:
        lines.append(f"submission config{' (an estimate scales from it)' if r.estimate else ''}: {r.config}")
    lines += [f"warning: {w}" for w in r.warnings]
    if r.config:
        from orchestrator.runs.rehearsal import rehearse
        done = rehearse(name, sku, nodes)
        waived = f" ({len(done.waived)} of them by a waiver that cites the implementation)" if done.waived else ""
        lines.append(f"rehearsal: {len(done.checks)} paths {done.implementation} names, "
                     + (f"{len(done.unresolved)} unresolved" if done.unresolved else "all resolved") + waived)
        lines += [f"warning: unresolved: {c.where}: {c.problem}" for c in done.unresolved]
    effective = {**r.config_env, **r.env}
    if effective:
        lines += ["", "environment (effective value, where it came from):"]
        lines += [f"  {k}={effective[k]}  [{r.env_sources.get(k, 'azbench')}]" for k in sorted(effective)]
    sys.stdout.write("\n".join(lines) + "\n\n--- script ---\n" + preview.script.rstrip() + "\n")
    if preview.stage_script:
        sys.stdout.write("\n--- data staging job ---\n" + preview.stage_script.rstrip() + "\n")


def _print_progress(line: str) -> None:
    sys.stdout.write(f"  {line}\n")
    sys.stdout.flush()


@app.command()
def prepare(recipe: Optional[str] = typer.Argument(None, help="Recipe name (with --list: all when left out)."),
            cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster to stage on."),
            sku: Optional[str] = typer.Option(None, "--sku", help="SKU whose container to build "
                                              "(default: the cluster's)."),
            nodes: Optional[int] = typer.Option(None, "--nodes", help="Scale whose submission "
                                                "config picks the implementation (default: the cluster's nodes)."),
            data_root: str = typer.Option(DEFAULT_DATA_ROOT, "--data-root",
                                          help="Shared folder the recipe's data goes under."),
            partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
            no_image: bool = typer.Option(False, "--no-image",
                                          help="Stage data only, do not build the container squashfs."),
            list_only: bool = typer.Option(False, "--list", help="Show, per recipe and scale, what "
                                           "prepare stages by itself, what you must do first (the "
                                           "command or place), and the size; no cluster needed."),
            as_json: bool = JsonOpt) -> None:
    """Stage a recipe on the cluster as one batch job: verify its licence-gated weights and
    tokenizers (printing where to get and place each missing one), download its public data
    through MLCommons' R2 path (checksummed; a rerun resumes) and build its container from the
    implementation's pinned Dockerfile into an enroot squashfs cached by digest, then run the
    README's preprocessing inside it (each step skipped when done). Exits 3 when a
    licence-gated item is missing, 5 when anything else is not staged.

    AZBENCH_R2_ORIGIN (scheme://host[:port]) points the R2 downloads at a mirror of MLCommons'
    bucket; AZBENCH_IMAGE_BUILDER names a program on the cluster run instead of docker + enroot;
    AZBENCH_CONTAINER_RUNNER one run instead of the pyxis job step (--container-image) for each step
    the implementation's README runs in its container (energon conversion, FP16 preprocessing)."""
    import os

    from orchestrator.errors import ConfigError
    if list_only:
        return _list_staging(recipe, data_root, as_json)
    if recipe is None or cluster is None:
        raise ConfigError("prepare needs a RECIPE and --cluster (or --list to see what it would do)",
                          hint="azbench prepare RECIPE --cluster C, or azbench prepare --list")

    from orchestrator.clusters import lifecycle
    from orchestrator.models import utcnow
    from orchestrator.recipes.catalog import get_recipe
    from orchestrator.runs.launch import container_build
    from orchestrator.runs.prepare import prepare as stage
    from orchestrator.store.schema import EventRow
    found_recipe = get_recipe(recipe)
    with open_store() as store:
        found = lifecycle.require_cluster(cluster, store)
    try:
        build = None if no_image or found_recipe.mlperf is None else \
            container_build(found_recipe, sku or found.sku, nodes or found.nodes)
    except ConfigError as exc:
        raise ConfigError(f"prepare {recipe}: no container for {nodes or found.nodes} x "
                          f"{sku or found.sku}: {exc.message}",
                          hint="give --sku and --nodes of the runs to come, or --no-image") from None
    began = utcnow()
    with lifecycle.connect(found) as access:
        result = stage(found_recipe, access.launcher, data_root=data_root, partition=partition,
                       container=build, builder=os.environ.get("AZBENCH_IMAGE_BUILDER") or None,
                       r2_origin=os.environ.get("AZBENCH_R2_ORIGIN") or None,
                       runner=os.environ.get("AZBENCH_CONTAINER_RUNNER") or None,
                       on_progress=None if as_json else _print_progress)
    with open_store() as store:  # after the fact, with its span (goodput counts it as staging)
        store.add_event(EventRow(kind="prepare", cluster=found.name,
                                 message=f"prepare {recipe}: job {result.job_id} {result.job_state}",
                                 data={"started_at": began.isoformat(), "job_id": result.job_id,
                                       "state": result.job_state}))
    if as_json:
        emit_json(result)
    else:
        _print_prepared(result)
    _refuse_unless_staged(recipe, result)


def _list_staging(recipe: str | None, data_root: str, as_json: bool) -> None:
    from orchestrator.runs.prepare import stage_plans
    plans = stage_plans(recipe, data_root=data_root)
    if as_json:
        return emit_json(plans)
    for p in plans:
        unknown = f"{', '.join(p.unsized)}: size unknown"
        size = (f"{p.size_gb:,.1f} GB" + (f" + {unknown}" if p.unsized else "") if p.size_gb is not None
                else unknown if p.unsized else "no data")
        sys.stdout.write(f"{p.recipe} {p.sku} x{p.nodes} ({'published' if p.published else 'estimate'}, "
                         f"{p.implementation}): {size}\n")
        sys.stdout.write("".join(f"  automatic: {a}\n" for a in p.automatic))
        sys.stdout.write("".join(f"  you first: {u}\n" for u in p.user))
        sys.stdout.write(f"  then: {p.command}\n")


def _print_prepared(result: PrepareResult) -> None:
    for item in result.items:
        sys.stdout.write(f"{item.name:24} {item.kind:10} {item.state:18} {item.path}\n")
    for item in result.items:
        if item.instructions:
            sys.stdout.write(f"{'optional, ' if item.optional else ''}missing: {item.instructions}\n")
    sys.stdout.write(f"job {result.job_id}: {result.job_state}; output {result.output}\n")


def _refuse_unless_staged(recipe: str, result: PrepareResult) -> None:
    """Exit 3 when an item the user must provide is missing, 5 when anything else is not staged."""
    from orchestrator.errors import PreflightError, RunFailedError
    gated = result.missing_gated
    if gated:
        raise PreflightError(f"prepare {recipe}: {len(gated)} item(s) you must provide are missing: "
                             + ", ".join(i.name for i in gated),
                             hint="place them as printed above, then rerun prepare")
    if not result.ok:
        bad = next((i for i in result.items if not i.ok), None)
        raise RunFailedError(f"prepare {recipe}: " + (f"{bad.name} {bad.state}" if bad else
                                                      f"staging job {result.job_state}"),
                             hint=f"see {result.output}; rerun prepare to resume")


@app.command()
def report(benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
           system: Optional[str] = typer.Option(None, "--system", help="Only this system."),
           cluster: Optional[str] = typer.Option(None, "--cluster", help="Only runs on this cluster."),
           since: Optional[str] = typer.Option(None, "--since", help="Only results since this date (YYYY-MM-DD)."),
           until: Optional[str] = typer.Option(None, "--until", help="Only results until this date (YYYY-MM-DD, inclusive)."),
           baseline: Optional[str] = typer.Option(None, "--baseline", help="Baseline for the site's history band (default: the latest set)."),
           as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
           query: Optional[str] = QueryOpt,
           markdown: bool = typer.Option(False, "--markdown", help="Print Markdown (for PR comments)."),
           html: Optional[Path] = typer.Option(None, "--html", help="Write the interactive site (index.html, pages, assets) here."),
           show_runs: bool = typer.Option(False, "--runs", help="Also list every run (the summary lists scores only)."),
           vs_published: bool = typer.Option(False, "--vs-published", help="Put each score beside the nearest published MLPerf result on the same GPU, with the delta."),
           price: list[str] = typer.Option([], "--price", help="Override a list price: SKU=USD_PER_VM_HOUR, e.g. h200=84.80 (repeatable).")) -> None:
    """MLPerf scores as MLCommons publishes them, best per benchmark, cost, MFU; with --markdown,
    --json or --html also step times, scaling efficiency, speedups and attempt history.

    A --benchmark, --system or --cluster that names nothing stored exits 2 with the stored
    names and the nearest; with nothing stored at all the report says so and exits 0."""
    from orchestrator.recipes.catalog import model_facts
    from orchestrator.report.build import build_report
    from orchestrator.errors import ConfigError
    from orchestrator.report.cost import parse_price
    from orchestrator.report.render import to_json, to_markdown
    out = output(as_json, fmt, query)
    prices = dict(parse_price(p) for p in price)
    when, end = _parse_date("--since", since), _parse_date("--until", until, end_of_day=True)
    if html is not None and html.exists() and not html.is_dir():
        raise ConfigError(f"--html: {html} is a file: give a directory for the site")
    with open_store() as store:
        results = store.list_results(benchmark=benchmark, system=system, cluster=cluster, since=when,
                                     until=end)
        stored = bool(results) or _check_filters(store, benchmark=benchmark, system=system, cluster=cluster)
        runs = store.list_runs(cluster=cluster) if cluster else store.list_runs()
        attempts = [a for r in runs for a in store.list_attempts(r.id)]
        spot = {c.name: c.cluster.sku for c in store.list_clusters(include_terminated=True)
                if c.cluster.properties.is_spot}
        events = store.list_events(cluster=cluster, limit=5000)
        history = None
        goodput: list[RunGoodput] = []
        clusters: list[ClusterGoodput] = []
        if html is not None:
            from orchestrator.goodput.cluster import cluster_goodput
            from orchestrator.goodput.run import run_goodput
            from orchestrator.pipelines.history import history_from_store
            history = history_from_store(store, baseline=baseline, since=when, until=end)
            goodput = [run_goodput(store, r.id) for r in runs if r.id in {a.run_id for a in attempts}]
            clusters = [cluster_goodput(store, c.name) for c in store.list_clusters(include_terminated=True)
                        if cluster is None or c.name == cluster]
    rep = build_report(results, runs, attempts, benchmark=benchmark, system=system, since=when,
                       until=end, spot_clusters=spot, model_facts=model_facts(), events=events,
                       prices=prices)
    if html is not None:
        from orchestrator.report.site import write_site
        try:
            files = write_site(rep, results, html, runs=runs, attempts=attempts, history=history,
                               goodput=goodput, clusters=clusters)
        except (PermissionError, FileExistsError, NotADirectoryError, IsADirectoryError,
                FileNotFoundError) as exc:
            raise ConfigError(f"--html: cannot write {exc.filename or html}: "
                              f"{exc.strerror or exc}") from None
        sys.stderr.write(f"wrote {len(files)} files to {html} (open {files[0]})\n")
    if not out.rich:
        out.emit_text(to_json(rep))
    elif markdown:
        sys.stdout.write(to_markdown(rep) + "\n")
    elif html is None:
        from orchestrator.report.terminal import render_text, summary_view
        if not results:
            sys.stdout.write("no results match these filters\n" if stored else
                             "no results yet: run a recipe (azbench run) or import logs "
                             "(azbench results import)\n")
            return
        view = summary_view(rep, runs=show_runs, vs_published=vs_published)
        sys.stdout.write(render_text(view, width=_report_width()))


def _report_width() -> int:
    """100 columns, or the terminal's width when it is narrower (COLUMNS counts as one)."""
    import os
    import shutil
    if "COLUMNS" in os.environ or sys.stdout.isatty():
        return max(40, min(100, shutil.get_terminal_size((100, 24)).columns))
    return 100


def _check_filters(store: Store, benchmark: Optional[str] = None, system: Optional[str] = None,
                   cluster: Optional[str] = None) -> bool:
    """After a selection came back empty: False when nothing is stored at all; else a name
    filter that matches no stored result is a NotFoundError (exit 2) naming the stored names and
    the nearest, and True when each name is stored (the filters together select nothing)."""
    benchmarks = store.result_names("benchmark")
    if not benchmarks:
        return False
    check_filter("benchmark", benchmark, benchmarks)
    if system is not None:
        check_filter("system", system, store.result_names("system"))
    if cluster is not None:
        check_filter("cluster", cluster, store.result_names("cluster"))
    return True


def _parse_date(flag: str, value: Optional[str], end_of_day: bool = False) -> datetime | None:
    """A date or date-time; a bare --until date means the end of that day (UTC)."""
    if value is None:
        return None
    from datetime import datetime, timedelta, timezone

    from orchestrator.errors import ConfigError
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{flag}: '{value}' is not a date like 2026-11-01") from None
    if end_of_day and len(value.strip()) == 10:
        when += timedelta(days=1, microseconds=-1)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@results_app.command("list")
def results_list(benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
                 system: Optional[str] = typer.Option(None, "--system", help="Only this system."),
                 as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Stored results, one line each. A --benchmark or --system that names nothing stored
    exits 2 with the stored names and the nearest."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        rows = store.list_results(benchmark=benchmark, system=system)
        if not rows:
            _check_filters(store, benchmark=benchmark, system=system)
    if not out.rich:
        return out.emit([r.model_dump(mode="json", exclude={"summary_json"}) for r in rows])
    make_console().print(make_table("Results", ["id", "benchmark", "system", "status", "minutes", "nodes", "GPUs",
                                        "resumed", "source", "run"],
                            [[r.id, r.benchmark, r.system, r.status,
                              f"{r.minutes:.3f}" if r.minutes is not None else "-", r.nodes, r.gpus,
                              "yes" if r.resumed else "", r.source, r.run_id] for r in rows]))


@results_app.command("show")
def results_show(result_id: int = typer.Argument(..., help="Result id (see azbench results list)."),
                 as_json: bool = JsonOpt) -> None:
    """One stored result with its parsed log summary."""
    from orchestrator.errors import NotFoundError
    with open_store() as store:
        row = next((r for r in store.list_results() if r.id == result_id), None)
    if row is None:
        raise NotFoundError(f"no result with id {result_id}", hint="see `azbench results list`")
    data = row.model_dump(mode="json")
    data["summary"] = json.loads(data.pop("summary_json") or "null")
    if as_json:
        return emit_json(data)
    summary = data["summary"] or {}
    for key in ("id", "benchmark", "system", "status", "minutes", "nodes", "gpus", "global_batch_size",
                "resumed", "source", "run_id", "log_path", "compliance_ok"):
        sys.stdout.write(f"{key:18} {data.get(key)}\n")
    sys.stdout.write(f"{'steps timed':18} {len(summary.get('step_times') or [])}\n"
                     f"{'eval points':18} {len(summary.get('eval_points') or [])}\n"
                     f"{'bad lines':18} {summary.get('bad_lines')}\n")


@results_app.command("import")
def results_import(path: Path = typer.Argument(..., help="Submission tree, results folder, run dir or log file."),
                   compliance: bool = typer.Option(True, "--compliance/--no-compliance",
                                                   help="Run mlperf_logging's compliance checker with "
                                                   "each log's round's ruleset (default); a log that "
                                                   "fails is scored as not converged, as the result "
                                                   "summarizer does."),
                   as_json: bool = JsonOpt) -> None:
    """Import MLPerf result logs (idempotent: the same file twice is one result). Each log is
    checked for compliance unless --no-compliance: a failing run is excluded as MLPerf's result
    summarizer excludes it, so a score the summarizer would not give is not reported official."""
    from orchestrator.results.importer import import_path
    with open_store() as store:
        summary = import_path(store, path, check_compliance=compliance)
    if as_json:
        return emit_json(summary)
    sys.stdout.write(f"imported {len(summary.imported)} result(s), {len(summary.duplicates)} already stored, "
                     f"{len(summary.warnings)} warning(s) from {path}\n")
    for warning in summary.warnings:
        sys.stderr.write(f"warning: {warning.path}: {warning.message}\n")


def _parse_since(since: Optional[str]) -> datetime | None:
    """--since as a UTC date-time (kept for `azbench baseline set --since`)."""
    return _parse_date("--since", since)


AccountOpt = typer.Option(..., "--account", help="Blob service URL, e.g. https://ACCOUNT.blob.core.windows.net "
                          "(key from $AZURE_STORAGE_KEY, else az login / managed identity).")
ContainerOpt = typer.Option(..., "--container", help="Blob container (created when missing).")


@results_app.command("push")
def results_push(account: str = AccountOpt, container: str = ContainerOpt, as_json: bool = JsonOpt) -> None:
    """Archive raw logs (content-hashed) and a store snapshot to Azure Blob Storage; idempotent."""
    from dataclasses import asdict

    from orchestrator.results.archive import AzureContainer, push
    with open_store() as store:
        summary = push(store, AzureContainer(account, container))
    if as_json:
        return emit_json(asdict(summary))
    sys.stdout.write(f"uploaded {len(summary.uploaded)} blob(s), {summary.bytes_uploaded:,} bytes; "
                     f"{summary.skipped} already there\n")
    for path in summary.missing_logs:
        sys.stderr.write(f"warning: {path}: log no longer on disk, not archived\n")


@results_app.command("pull")
def results_pull(account: str = AccountOpt, container: str = ContainerOpt,
                 into: Path = typer.Option(Path("azbench-archive"), "--into", help="Folder for the logs and snapshot.json."),
                 do_import: bool = typer.Option(True, "--import/--no-import", help="Add the snapshot's results to the local store."),
                 as_json: bool = JsonOpt) -> None:
    """Download archived logs and the latest store snapshot (and import its results)."""
    from dataclasses import asdict

    from orchestrator.results.archive import AzureContainer, pull
    remote = AzureContainer(account, container)
    if do_import:
        with open_store() as store:
            summary = pull(remote, into, store)
    else:
        summary = pull(remote, into)
    if as_json:
        return emit_json(asdict(summary))
    sys.stdout.write(f"downloaded {len(summary.downloaded)} file(s) into {into}, {summary.skipped} already there; "
                     f"imported {summary.imported_results} result(s)\n")
