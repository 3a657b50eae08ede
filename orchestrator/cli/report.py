"""`azbench report`: MLPerf scores as MLCommons publishes them, with scaling, cost, goodput and
the fabric, in the terminal, as JSON or Markdown, or as a static site."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from orchestrator import formats
from orchestrator.cli.common import JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, make_console, make_table, open_store, output, parse_date
from orchestrator.cli.results import _check_filters, _report_width, _with_system
from orchestrator.errors import ConfigError
from orchestrator.fabric.lines import fabric_section
from orchestrator.goodput.cluster import cluster_goodput
from orchestrator.goodput.model import ClusterGoodput, RunGoodput
from orchestrator.goodput.run import run_goodput
from orchestrator.paths import write_atomic
from orchestrator.pipelines.history import history_from_store
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import Report, build_report
from orchestrator.report.cost import parse_price
from orchestrator.report.history import History
from orchestrator.report.render import markdown_parts, to_json, to_markdown
from orchestrator.report.site import write_site
from orchestrator.report.terminal import render_text, summary_view
from orchestrator.store.database import Store
from orchestrator.store.schema import AttemptRow, EventRow, FabricResultRow, ResultRow, RunRow

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
    if not out.rich:
        out.emit_text(to_json(rep))
    elif markdown and parts is not None:
        _write_parts(rep, parts)
    elif markdown:
        sys.stdout.write(to_markdown(rep) + "\n")
    elif html is None:
        _print_summary(rep, got, show_runs=show_runs, vs_published=vs_published)


def _print_summary(rep: Report, got: _ReportInputs, *, show_runs: bool, vs_published: bool) -> None:
    """The terminal's report: the scores' summary and the fabric, or one line saying why there
    is nothing (nothing stored, or nothing these filters match)."""
    if not got.results and not rep.fabric:
        sys.stdout.write("no results match these filters\n" if got.stored else
                         "no results yet: run a recipe (azbench run) or import logs "
                         "(azbench results import)\n")
        return
    if got.results:
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
        got.history = history_from_store(store, baseline=baseline, since=since, until=until)
        attempted = {a.run_id for a in attempts}
        got.goodput = [run_goodput(store, r.id) for r in runs if r.id in attempted]
        got.clusters = [cluster_goodput(store, c.name) for c in store.list_clusters(include_terminated=True)
                        if cluster is None or c.name == cluster]
    return got


def _write_report_site(rep: Report, got: _ReportInputs, html: Path) -> None:
    """The site under `html`; a path that cannot be written is one line (ConfigError)."""
    try:
        files = write_site(rep, got.results, html, runs=got.runs, attempts=got.attempts, history=got.history,
                           goodput=got.goodput, clusters=got.clusters)
    except (PermissionError, FileExistsError, NotADirectoryError, IsADirectoryError,
            FileNotFoundError) as exc:
        raise ConfigError(f"--html: cannot write {exc.filename or html}: {exc.strerror or exc}") from None
    sys.stderr.write(f"wrote {len(files)} files to {html} (open {files[0]})\n")


def _print_fabric(rep: Report) -> None:
    """The fabric section (fabric/lines.py): one line per stored collective run."""
    title, header, rows = fabric_section(rep.fabric)
    keep = [0, 1, 2, 3, 4, 5, 8, 9, 11]  # the full evidence is in --json, --markdown and --html
    make_console().print(make_table(title, [header[i] for i in keep], [[r[i] for i in keep] for r in rows]))


def _write_parts(rep: Report, folder: Path) -> None:
    """The Markdown report as files under `folder` (report.render.markdown_parts); one line per
    file on stdout: its path and its size in characters."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in markdown_parts(rep):
        write_atomic(folder / name, text)
        sys.stdout.write(f"{folder / name}\t{formats.count(len(text))} characters\n")


