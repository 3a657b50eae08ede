"""`azbench recipes`, `azbench report` and `azbench results`: what can run and what came out."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TextIO

import typer

from orchestrator import formats
from orchestrator.cli.common import (
    say,
    Col,
    JsonOpt,
    Output,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_filter,
    fit_table,
    make_console,
    output_width,
    make_table,
    open_store,
    output,
    parse_date,
    recipes_app,
    results_app,
)
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.cli.run import _params, placement_lines
from orchestrator.errors import ConfigError
from orchestrator.errors import PreflightError, RunFailedError
from orchestrator.paths import write_atomic
from orchestrator.errors import NotFoundError
from orchestrator.safetext import clean

if TYPE_CHECKING:  # the CLI imports runs/ lazily: --help stays fast
    from datetime import datetime

    from orchestrator.goodput.model import ClusterGoodput, RunGoodput
    from orchestrator.report.build import Report
    from orchestrator.results.importer import ImportProgress
    from orchestrator.runs.prepare import PrepareResult
    from orchestrator.store.database import Store
    from orchestrator.report.history import History
    from orchestrator.store.schema import AttemptRow, EventRow, FabricResultRow, ResultRow, RunRow

# ---------------------------------------------------------------- recipes

@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Recipes azbench can run."""
    from orchestrator.recipes.catalog import list_recipes  # lazy: +pydantic on --help (cli/__init__)
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
                 param: list[str] = typer.Option([], "--param", "-p", help="Recipe parameter KEY=VALUE, as `run` "
                                                 "takes it (MLPerf recipes: an environment variable)."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """The resolved config (parallelism, batch, placement: which ranks share a group, from the
    rank order, and what crosses the scale-out fabric) and the exact script that would run."""
    out = output(as_json, fmt, query)
    from orchestrator.runs.launch import describe_launch  # lazy: +jinja2+pydantic on --help (cli/__init__)
    preview = describe_launch(name, sku, nodes, ruleset, image=image, params=_params(param) if param else None)
    if not out.rich:
        return out.emit(preview)
    r = preview.resolved
    lines = [f"{r.recipe} ({r.benchmark}, ruleset {r.ruleset or '-'}) on {r.nodes} x {r.sku_short} = {r.gpus} GPUs",
             f"target: {r.target.metric} {'>=' if r.target.direction == 'max' else '<='} {r.target.value}, "
             f"{r.required_runs} runs for a score, walltime {r.walltime_min} min"]
    if r.gbs:
        lines.append(f"parallelism: TP {r.tp} x PP {r.pp} x CP {r.cp} x DP {r.dp}"
                     f"{f' (VP {r.vp})' if r.vp else ''}, micro batch {r.mbs}, global batch {r.gbs}, "
                     f"grad accumulation {r.grad_accum}")
    lines.append(f"config: {'derived: ' + (r.rule or '') if r.derived else 'listed'} ({r.source or 'recipe'})")
    if r.placement is not None:
        lines += placement_lines(r.placement).splitlines()
    if r.image:
        lines.append(f"image: {r.image}")
    if r.config:
        lines.append(f"submission config{' (an estimate scales from it)' if r.estimate else ''}: {r.config}")
    lines += [f"warning: {w}" for w in r.warnings]
    if r.config:
        from orchestrator.runs.rehearsal import rehearse  # lazy: +jinja2+pydantic on --help (cli/__init__)
        done = rehearse(name, sku, nodes)
        waived = f" ({len(done.waived)} of them by a waiver that cites the implementation)" if done.waived else ""
        lines.append(f"rehearsal: {len(done.checks)} paths {done.implementation} names, "
                     + (f"{len(done.unresolved)} unresolved" if done.unresolved else "all resolved") + waived)
        lines += [f"warning: unresolved: {c.where}: {c.problem}" for c in done.unresolved]
    effective = {**r.config_env, **r.env}
    if effective:
        lines += ["", "environment (effective value, where it came from):"]
        lines += [f"  {k}={effective[k]}  [{r.env_sources.get(k, 'azbench')}]" for k in sorted(effective)]
    say("\n".join(lines) + "\n\n--- script ---\n" + preview.script.rstrip() + "\n")
    if preview.stage_script:
        say("\n--- data staging job ---\n" + preview.stage_script.rstrip() + "\n")


def _print_progress(line: str) -> None:
    say(f"  {line}\n")
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
            as_json: bool = JsonOpt,
            fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
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
    out = output(as_json, fmt, query)
    import os

    if list_only:
        return _list_staging(recipe, data_root, out)
    if recipe is None or cluster is None:
        raise ConfigError("prepare needs a RECIPE and --cluster (or --list to see what it would do)",
                          hint="azbench prepare RECIPE --cluster C, or azbench prepare --list")

    from orchestrator.clusters import lifecycle  # lazy: +pydantic on --help (cli/__init__)
    from orchestrator.models import utcnow  # lazy: +pydantic on --help (cli/__init__)
    from orchestrator.recipes.catalog import get_recipe  # lazy: +pydantic on --help (cli/__init__)
    from orchestrator.runs.launch import container_build  # lazy: +jinja2+pydantic on --help (cli/__init__)
    from orchestrator.runs.prepare import prepare as stage  # lazy: +jinja2+pydantic on --help (cli/__init__)
    from orchestrator.store.events import EventRow, PrepareData  # lazy: +pydantic on --help (cli/__init__)
    found_recipe = get_recipe(recipe)
    with open_store() as store:
        found = lifecycle.reachable(cluster, store)
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
                       on_progress=_print_progress if out.rich else None, cluster=found.name)
    with open_store() as store:  # after the fact, with its span (goodput counts it as staging)
        store.add_event(EventRow(kind="prepare", cluster=found.name,
                                 message=f"prepare {recipe}: job {result.job_id} {result.job_state}",
                                 data=PrepareData(started_at=began, job_id=result.job_id,
                                                  state=result.job_state)))
    if not out.rich:
        out.emit(result)
    else:
        _print_prepared(result)
    _refuse_unless_staged(recipe, result)


def _list_staging(recipe: str | None, data_root: str, out: Output) -> None:
    from orchestrator.runs.prepare import stage_plans  # lazy: +jinja2+pydantic on --help (cli/__init__)
    plans = stage_plans(recipe, data_root=data_root)
    if not out.rich:
        return out.emit(plans)
    for p in plans:
        unknown = f"{', '.join(p.unsized)}: size unknown"
        size = (f"{p.size_gb:,.1f} GB" + (f" + {unknown}" if p.unsized else "") if p.size_gb is not None
                else unknown if p.unsized else "no data")
        say(f"{p.recipe} {p.sku} x{p.nodes} ({'published' if p.published else 'estimate'}, "
                         f"{p.implementation}): {size}\n")
        say("".join(f"  automatic: {a}\n" for a in p.automatic))
        say("".join(f"  you first: {u}\n" for u in p.user))
        say(f"  then: {p.command}\n")


def _print_prepared(result: PrepareResult) -> None:
    for item in result.items:
        say(f"{item.name:24} {item.kind:10} {item.state:18} {item.path}\n")
    for item in result.items:
        if item.instructions:
            say(f"{'optional, ' if item.optional else ''}missing: {item.instructions}\n")
    say(f"job {result.job_id}: {result.job_state}; output {result.output}\n")


def _refuse_unless_staged(recipe: str, result: PrepareResult) -> None:
    """Exit 3 when an item the user must provide is missing, 5 when anything else is not staged."""
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
           parts: Optional[Path] = typer.Option(None, "--parts", help="With --markdown: write it into this "
                                                "directory as files of under 65,536 characters each (a "
                                                "GitHub comment's limit): index.md and one per benchmark."),
           html: Optional[Path] = typer.Option(None, "--html", help="Write the interactive site (index.html, pages, assets) here."),
           show_runs: bool = typer.Option(False, "--runs", help="Also list every run (the summary lists scores only)."),
           vs_published: bool = typer.Option(False, "--vs-published", help="Put each score beside the nearest published MLPerf result on the same GPU, with the delta."),
           price: list[str] = typer.Option([], "--price", help="Override a list price: SKU=USD_PER_VM_HOUR, e.g. h200=84.80 (repeatable)."),
           mixed_rounds: bool = typer.Option(False, "--mixed-rounds", help="Also compute speedups between "
                                             "scores of different rounds (flagged; default: same round only).")) -> None:
    """MLPerf scores as MLCommons publishes them, best per benchmark, cost, MFU; with --markdown,
    --json or --html also step times, scaling efficiency, speedups and attempt history.

    A --benchmark, --system or --cluster that names nothing stored exits 2 with the stored
    names and the nearest; with nothing stored at all the report says so and exits 0."""
    from orchestrator.recipes.catalog import model_facts  # lazy: +pydantic on --help (cli/__init__)
    from orchestrator.report.build import build_report  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    from orchestrator.report.cost import parse_price  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    from orchestrator.report.render import to_json, to_markdown  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    out = output(as_json, fmt, query)
    prices = dict(parse_price(p) for p in price)
    when, end = parse_date("--since", since), parse_date("--until", until, end_of_day=True)
    _check_report_paths(html, parts, markdown)
    with open_store() as store:
        got = _report_inputs(store, benchmark=benchmark, system=system, cluster=cluster, since=when, until=end,
                             baseline=baseline, site=html is not None)
    rep = build_report(got.results, got.runs, got.attempts, benchmark=benchmark, system=system, since=when,
                       until=end, spot_clusters=got.spot, model_facts=model_facts(), events=got.events,
                       prices=prices, fabric=got.fabric, mixed_round_speedups=mixed_rounds)
    if html is not None:
        _write_report_site(rep, got, html)
    results, stored = got.results, got.stored
    if not out.rich:
        out.emit_text(to_json(rep))
    elif markdown and parts is not None:
        _write_parts(rep, parts)
    elif markdown:
        sys.stdout.write(to_markdown(rep) + "\n")
    elif html is None:
        from orchestrator.report.terminal import render_text, summary_view  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
        if not results and not rep.fabric:
            sys.stdout.write("no results match these filters\n" if stored else
                             "no results yet: run a recipe (azbench run) or import logs "
                             "(azbench results import)\n")
            return
        if results:
            view = summary_view(rep, runs=show_runs, vs_published=vs_published)
            sys.stdout.write(render_text(view, width=_report_width()))
        if rep.fabric:
            _print_fabric(rep)


def _check_report_paths(html: Path | None, parts: Path | None, markdown: bool) -> None:
    """--html and --parts name directories, and --parts goes with --markdown (before any read)."""
    if html is not None and html.exists() and not html.is_dir():
        raise ConfigError(f"--html: {html} is a file: give a directory for the site")
    if parts is not None and not markdown:
        raise ConfigError("--parts writes the Markdown report in parts: give --markdown too")
    if parts is not None and parts.exists() and not parts.is_dir():
        raise ConfigError(f"--parts: {parts} is a file: give a directory for the parts")


@dataclass
class _ReportInputs:
    """What `report` reads from the store; history and goodput only for the site."""

    results: list[ResultRow]
    fabric: list[FabricResultRow]
    stored: bool  # anything stored under these filters' names (for "no results" wording)
    runs: list[RunRow]
    attempts: list[AttemptRow]
    spot: dict[str, str]
    events: list[EventRow]
    history: History | None = None
    goodput: list[RunGoodput] = field(default_factory=list)
    clusters: list[ClusterGoodput] = field(default_factory=list)


def _report_inputs(store: Store, *, benchmark: str | None, system: str | None, cluster: str | None,
                   since: datetime | None, until: datetime | None, baseline: str | None,
                   site: bool) -> _ReportInputs:
    results = _with_system(store, system, benchmark=benchmark, cluster=cluster, since=since, until=until)
    fabric = store.list_fabric_results(cluster=cluster, since=since, until=until)
    stored = bool(results) or bool(fabric) or _check_filters(store, benchmark=benchmark, system=system,
                                                             cluster=cluster)
    runs = store.list_runs(cluster=cluster) if cluster else store.list_runs()
    attempts = [a for r in runs for a in store.list_attempts(r.id)]
    spot = {c.name: c.cluster.sku for c in store.list_clusters(include_terminated=True)
            if c.cluster.properties.is_spot}
    got = _ReportInputs(results, fabric, stored, runs, attempts, spot,
                        store.list_events(cluster=cluster, limit=5000))
    if site:
        from orchestrator.goodput.cluster import cluster_goodput  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
        from orchestrator.goodput.run import run_goodput  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
        from orchestrator.pipelines.history import history_from_store  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
        got.history = history_from_store(store, baseline=baseline, since=since, until=until)
        attempted = {a.run_id for a in attempts}
        got.goodput = [run_goodput(store, r.id) for r in runs if r.id in attempted]
        got.clusters = [cluster_goodput(store, c.name) for c in store.list_clusters(include_terminated=True)
                        if cluster is None or c.name == cluster]
    return got


def _write_report_site(rep: Report, got: _ReportInputs, html: Path) -> None:
    """The site under `html`; a path that cannot be written is one line (ConfigError)."""
    from orchestrator.report.site import write_site  # lazy: +jinja2+numpy+pydantic+sqlalchemy on --help (cli/__init__)
    try:
        files = write_site(rep, got.results, html, runs=got.runs, attempts=got.attempts, history=got.history,
                           goodput=got.goodput, clusters=got.clusters)
    except (PermissionError, FileExistsError, NotADirectoryError, IsADirectoryError,
            FileNotFoundError) as exc:
        raise ConfigError(f"--html: cannot write {exc.filename or html}: {exc.strerror or exc}") from None
    sys.stderr.write(f"wrote {len(files)} files to {html} (open {files[0]})\n")


def _print_fabric(rep: Report) -> None:
    """The fabric section (fabric/lines.py): one line per stored collective run."""
    from orchestrator.fabric.lines import fabric_section  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    title, header, rows = fabric_section(rep.fabric)
    keep = [0, 1, 2, 3, 4, 5, 8, 9, 11]  # the full evidence is in --json, --markdown and --html
    make_console().print(make_table(title, [header[i] for i in keep], [[r[i] for i in keep] for r in rows]))


def _write_parts(rep: Report, folder: Path) -> None:
    """The Markdown report as files under `folder` (report.render.markdown_parts); one line per
    file on stdout: its path and its size in characters."""
    from orchestrator.report.render import markdown_parts  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in markdown_parts(rep):
        write_atomic(folder / name, text)
        sys.stdout.write(f"{folder / name}\t{formats.count(len(text))} characters\n")


def _report_width() -> int:
    """$COLUMNS when set, else the terminal's width up to 100, else (piped) 100."""
    import os
    return output_width() if "COLUMNS" in os.environ else min(100, output_width())


def _with_system(store: Store, system: Optional[str], **filters: Any) -> list[ResultRow]:
    """store.list_results(**filters) of the system `system` names: a stored system name, or a
    label as the report prints it ('v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo', report.build.names_system)."""
    from orchestrator.report.build import names_system  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    if system is None or "/" not in system:
        return store.list_results(system=system, **filters)
    return [r for r in store.list_results(**filters) if names_system(r, system)]


def _check_filters(store: Store, benchmark: Optional[str] = None, system: Optional[str] = None,
                   cluster: Optional[str] = None) -> bool:
    """After a selection came back empty: False when nothing is stored at all; else a name
    filter that matches no stored result is a NotFoundError (exit 2) naming the stored names and
    the nearest, and True when each name is stored (the filters together select nothing)."""
    benchmarks = store.result_names("benchmark")
    if not benchmarks:
        return False
    check_filter("benchmark", benchmark, benchmarks)
    if system is not None and "/" in system:  # a label: any stored result it names, else the labels
        from orchestrator.report.build import group_label, group_results, names_system  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
        everything = store.list_results()
        if not any(names_system(r, system) for r in everything):
            check_filter("system", system, sorted(group_label(key) for key in group_results(everything)))
    elif system is not None:
        check_filter("system", system, store.result_names("system"))
    if cluster is not None:
        check_filter("cluster", cluster, store.result_names("cluster"))
    return True


@results_app.command("list")
def results_list(benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
                 system: Optional[str] = typer.Option(None, "--system", help="Only this system."),
                 as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Stored results, one line each. A --benchmark or --system that names nothing stored
    exits 2 with the stored names and the nearest."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        rows = _with_system(store, system, benchmark=benchmark)
        if not rows:
            _check_filters(store, benchmark=benchmark, system=system)
    if not out.rich:
        return out.emit([r.model_dump(mode="json", exclude={"summary_json"}) for r in rows])
    # No cell cut: at a narrow width the columns read last are left out, and named.
    columns = [Col("id", 0, wrap=False), Col("benchmark", 0, wrap=False), Col("system", 0, wrap=False),
               Col("status", 1, wrap=False), Col("minutes", 0, wrap=False), Col("nodes", 2, wrap=False),
               Col("GPUs", 1, wrap=False), Col("resumed", 3, wrap=False), Col("source", 2, wrap=False),
               Col("run", 3, wrap=False)]
    width = _report_width()
    table, left_out = fit_table("Results", columns, [
        [r.id, r.benchmark, r.system, r.status, formats.fixed(r.minutes, 3), formats.count(r.nodes),
         formats.count(r.gpus), "yes" if r.resumed else "", r.source, r.run_id] for r in rows], width)
    console = make_console()
    console.width = width
    console.print(table)
    if left_out:
        console.print(f"left out at {width} columns: {', '.join(left_out)} (-o json or --query has them)",
                      markup=False)


@results_app.command("show")
def results_show(result_id: int = typer.Argument(..., help="Result id (see azbench results list)."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """One stored result with its parsed log summary."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        row = store.get_result(result_id)
    if row is None:
        raise NotFoundError(f"no result with id {result_id}", hint="see `azbench results list`")
    from orchestrator.results.summary import summary_of  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    data = row.model_dump(mode="json")
    data["summary"] = json.loads(data.pop("summary_json") or "null")
    if not out.rich:
        return out.emit(data)
    summary = summary_of(row)
    for key in ("id", "benchmark", "system", "status", "minutes", "nodes", "gpus", "global_batch_size",
                "resumed", "source", "run_id", "log_path", "compliance_ok"):
        sys.stdout.write(clean(f"{key:18} {data.get(key)}") + "\n")
    if row.summary_json is None:  # nothing parsed was kept: no count is a claim
        sys.stdout.write(f"{'log summary':18} not recorded\n")
        return
    sys.stdout.write(f"{'steps timed':18} {len(summary.step_times)}\n"
                     f"{'eval points':18} {len(summary.eval_points)}\n"
                     f"{'bad lines':18} {summary.bad_lines}\n")


@results_app.command("import")
def results_import(path: Path = typer.Argument(..., help="Submission tree, results folder, run dir, log file, or an nccl-tests output."),
                   compliance: bool = typer.Option(True, "--compliance/--no-compliance",
                                                   help="Run mlperf_logging's compliance checker with "
                                                   "each log's round's ruleset (default); a log that "
                                                   "fails is scored as not converged, as the result "
                                                   "summarizer does."),
                   round_name: Optional[str] = typer.Option(
                       None, "--round", help="The MLPerf round of every log (v5.1), for a tree "
                       "whose folders do not name it (a clone in tr51/): its score can then be "
                       "checked and official. Stored results without a round get it."),
                   sku: Optional[str] = typer.Option(None, "--sku", help="An nccl-tests output: judge it "
                                                     "against this VM size (default: the catalog size of "
                                                     "the GPU the output names), as `fabric inspect --sku`."),
                   as_json: bool = JsonOpt,
                   fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Import MLPerf result logs, or an nccl-tests output as a fabric result (idempotent: the same
    file twice is one result). Each MLPerf log is
    checked for compliance unless --no-compliance: a failing run is excluded as MLPerf's result
    summarizer excludes it, so a score the summarizer would not give is not reported official."""
    out = output(as_json, fmt, query)
    from orchestrator.fabric.stored import import_nccl_tests, is_nccl_tests_file  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    from orchestrator.results.importer import import_path  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    if is_nccl_tests_file(path):  # a collective's output: a fabric result (`azbench fabric`)
        with open_store() as store:
            fabric = import_nccl_tests(store, path, sku)
        if not out.rich:
            return out.emit(fabric)
        say(f"imported {fabric.imported} nccl-tests run(s) ({', '.join(fabric.collectives)}), "
            f"{fabric.duplicates} already stored, from {path}: see `azbench report` (fabric)\n"
            f"judged against {fabric.sku or 'no catalog size'} ({fabric.sku_basis}): "
            f"verdict {fabric.verdict}, as `azbench fabric inspect` gives\n")
        return
    meter = ImportMeter(sys.stderr)
    try:
        with open_store() as store:
            summary = import_path(store, path, check_compliance=compliance, progress=meter,
                                  round_name=round_name)
    finally:
        meter.close()
    if not out.rich:
        return out.emit(summary)
    say(f"imported {len(summary.imported)} result(s), {len(summary.duplicates)} already stored, "
                     f"{len(summary.warnings)} warning(s) from {path}\n")
    if summary.refiled:
        sys.stdout.write(f"filed {len(summary.refiled)} stored result(s) without a round as "
                         f"{summary.refiled[0].round} (--round)\n")
    for why, n in sorted(summary.skipped_reasons().items()):
        sys.stdout.write(f"skipped {n} log(s): {why}\n")
    for warning in summary.warnings:  # paths and messages hold folder names: no controls
        sys.stderr.write(clean(f"warning: {warning.path}: {warning.message}") + "\n")


class ImportMeter:
    """An import's progress on stderr: one line rewritten in place on a terminal (files read,
    checked, stored, time left), plain lines in a log (CI) at each stage and every 10 s.
    Nothing for an import that ends within 2 s, so a quick one (or a one-line error) stays so."""

    QUIET_S, EVERY_S, REDRAW_S = 2.0, 10.0, 0.1

    def __init__(self, stream: TextIO) -> None:
        self._out = stream
        self._tty = stream.isatty()
        self._last = 0.0
        self._stage = ""
        self._drawn = False

    def __call__(self, p: ImportProgress) -> None:
        if p.elapsed_s < self.QUIET_S or p.stage == "done":
            return
        import time
        now = time.monotonic()
        changed, self._stage = p.stage != self._stage, p.stage
        if self._tty:
            if changed or now - self._last >= self.REDRAW_S:
                import shutil
                width = shutil.get_terminal_size().columns - 1
                self._out.write("\r\x1b[K" + import_line(p)[:width])
                self._drawn = True
        elif changed or now - self._last >= self.EVERY_S:
            self._out.write(import_line(p) + "\n")
        else:
            return
        self._out.flush()
        self._last = now

    def close(self) -> None:
        """Clear the terminal's progress line (before the summary or an error is printed)."""
        if self._drawn:
            self._out.write("\r\x1b[K")
            self._out.flush()
            self._drawn = False


def import_line(p: ImportProgress) -> str:
    """'read 289/289 logs (22 already stored), parsed 267/267, checked 40/267, about 12 s left'."""
    new = p.found - p.skipped
    parts = [f"read {p.read:,}/{p.found:,} logs" + (f" ({p.skipped:,} already stored)" if p.skipped else "")]
    if p.stage != "read":
        parts.append(f"parsed {p.parsed:,}/{new:,}")
    if p.stage in ("check", "store") and p.to_check:
        parts.append(f"checked {p.checked:,}/{p.to_check:,}")
    if p.stage == "store":
        parts.append(f"storing {new:,}")
    if p.left_s is not None and p.stage in ("read", "check"):
        parts.append(f"about {p.left_s:,.0f} s left" if p.left_s >= 1 else "under 1 s left")
    return ", ".join(parts)


AccountOpt = typer.Option(..., "--account", help="Blob service URL, e.g. https://ACCOUNT.blob.core.windows.net "
                          "(key from $AZURE_STORAGE_KEY, else az login / managed identity).")
ContainerOpt = typer.Option(..., "--container", help="Blob container (created when missing).")


@results_app.command("push")
def results_push(account: str = AccountOpt, container: str = ContainerOpt, as_json: bool = JsonOpt,
                                                                           fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Archive raw logs (content-hashed) and a store snapshot to Azure Blob Storage; idempotent."""
    out = output(as_json, fmt, query)
    from dataclasses import asdict

    from orchestrator.results.archive import AzureContainer, push  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    with open_store() as store:
        summary = push(store, AzureContainer(account, container))
    if not out.rich:
        return out.emit(asdict(summary))
    sys.stdout.write(f"uploaded {len(summary.uploaded)} blob(s), {summary.bytes_uploaded:,} bytes; "
                     f"{summary.skipped} already there\n")
    for path in summary.missing_logs:
        sys.stderr.write(clean(f"warning: {path}: log no longer on disk, not archived") + "\n")
    for path in summary.refused_logs:
        sys.stderr.write(clean(f"warning: {path}: outside this home's log folders (archive/, "
                               "runs/): not read, not uploaded") + "\n")


@results_app.command("pull")
def results_pull(account: str = AccountOpt, container: str = ContainerOpt,
                 into: Path = typer.Option(Path("azbench-archive"), "--into", help="Folder for the logs and snapshot.json."),
                 do_import: bool = typer.Option(True, "--import/--no-import", help="Add the snapshot's results to the local store."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Download archived logs and the latest store snapshot (and import its results)."""
    out = output(as_json, fmt, query)
    from dataclasses import asdict

    from orchestrator.results.archive import AzureContainer, pull  # lazy: +pydantic+sqlalchemy on --help (cli/__init__)
    remote = AzureContainer(account, container)
    if do_import:
        with open_store() as store:
            summary = pull(remote, into, store)
    else:
        summary = pull(remote, into)
    if not out.rich:
        return out.emit(asdict(summary))
    say(f"downloaded {len(summary.downloaded)} file(s) into {into}, {summary.skipped} already there; "
                     f"imported {summary.imported_results} result(s)\n")
