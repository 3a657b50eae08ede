"""CLI commands for scheduled pipelines and baselines: `azbench pipeline run`, `azbench baseline
set|list|show|delete`, `azbench compare`.

The use cases are imported at module level: the root imports this module only when one of its
commands runs (cli/app.py's loaders). Non-interactive by design for CI: nothing prompts when stdin is not a terminal (a
confirmation then needs --yes), and progress is plain timestamped log lines when $CI is set or
stderr is not a terminal.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

import typer

from orchestrator.cli.common import OutputFormat, OutputOpt, QueryOpt, app, confirm, output, wrapped
from orchestrator.cli.common import open_store
from orchestrator.cli.common import check_number
from orchestrator.errors import AzbenchError
from orchestrator.pipelines.junit import to_junit_xml
from orchestrator.paths import write_atomic
from orchestrator.safetext import clean
from orchestrator.cli.common import make_console, make_table
from orchestrator.errors import RegressionError
from orchestrator.errors import ConfigError
from orchestrator.cli.common import parse_date
from orchestrator.errors import NotFoundError
from orchestrator import formats
from orchestrator.clusters import lifecycle
from orchestrator.pipelines.baselines import Comparison, METRICS, Selection, Tolerance, Tolerances, check_name, collect, compare, delete_baseline, find_baseline, get_baseline, list_baselines, set_baseline
from orchestrator.pipelines.pipeline import down_cluster, run_pipeline
from orchestrator.pipelines.results import PipelineResult, PipelineSummary, comparison_markdown, junit_suites, summary_markdown
from orchestrator.pipelines.spec import cluster_specs, load_pipeline_spec
from orchestrator.recipes import catalog as recipe_catalog  # read when the command runs (tests patch it)
from orchestrator.runs.attempts import RunEvent
from orchestrator.runs.monitor import Progress as RunProgress
from orchestrator.store.database import Store

if TYPE_CHECKING:
    from collections.abc import Mapping


pipeline_app = typer.Typer(help="Scheduled benchmark pipelines: up, runs, report, compare, down.",
                           no_args_is_help=True, rich_markup_mode=None)
baseline_app = typer.Typer(help="Performance baselines to compare runs against.",
                           no_args_is_help=True, rich_markup_mode=None)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")
YesOpt = typer.Option(False, "--yes", "-y", help="Confirm without asking (required without a terminal).")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(baseline_app, name="baseline")
SweepOpt = typer.Option([], "--sweep", help="Sweep id (repeatable; default: the newest sweep).")


def plain_output() -> bool:
    """CI logs: no carriage returns or colours, one line per change."""
    return bool(os.environ.get("CI")) or not sys.stderr.isatty()


# ---------------------------------------------------------------- pipeline run


@pipeline_app.command("run")
def pipeline_run(
    file: Path = typer.Argument(..., help="Pipeline spec YAML (see infra/pipelines/nightly.example.yaml)."),
    yes: bool = YesOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the summary JSON on stdout."),
    fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
    junit: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML here."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write the Markdown summary here."),
    summary_json: Optional[Path] = typer.Option(None, "--summary-json", help="Write the summary JSON here."),
    poll: float = typer.Option(1.0, "--poll", min=0.05, help="Seconds between scheduler polls."),
) -> None:
    """Bring the cluster(s) up, run the matrix, report, compare with the baseline, tear down.

    Teardown runs on every exit path (error, Ctrl-C, SIGTERM). Exit 0 passed, 8 regression,
    5 failed runs, 128+N on signal N, else the failing stage's code."""
    out = output(as_json, fmt, query)
    check_number("--poll", poll, 0.05, 3600)
    spec = load_pipeline_spec(file)
    for entry in spec.matrix:  # before anything costs money: unknown recipes or parameters
        recipe_catalog.check_params(recipe_catalog.get_recipe(entry.recipe), entry.params)
    plans = [lifecycle.plan(c) for c in cluster_specs(spec)]
    cost = sum(p.cost_per_hour_usd or 0.0 for p in plans)
    if cost > 0:
        what = ", ".join(f"{p.nodes} x {p.sku}" for p in plans)
        confirm(f"Bring up {what} at ~${cost:,.2f}/h (list price) for pipeline '{spec.name}'?", yes)
    view = _Lines(quiet=False)
    with open_store() as store:
        result = run_pipeline(spec, store, on_line=view.line, on_progress=view.progress,
                              on_event=view.event, poll_interval=poll)
    _write_outputs(result, junit, markdown, summary_json)
    s = result.summary
    if out.format is OutputFormat.json and out.query is None:
        sys.stdout.write(s.model_dump_json(indent=2) + "\n")  # what --json always printed
    elif not out.rich:
        out.emit(s)
    else:
        _print_cases(s)
    if s.exit_code:
        raise pipeline_error(s.status, s.exit_code, s.message)


def pipeline_error(status: str, code: int, message: str) -> Exception:
    """An AzbenchError carrying the pipeline's exit code (typer.Exit's code is lost under
    cli.main's standalone_mode=False), so main() prints one line and exits with it."""

    class PipelineExit(AzbenchError):
        exit_code = code
        kind = f"pipeline {status}"

    return PipelineExit(message)


@pipeline_app.command("down")
def pipeline_down(file: Path = typer.Argument(..., help="Pipeline spec YAML."),
                  as_json: bool = JsonOpt,
                  fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Tear down every cluster of a pipeline (idempotent): the CI step for a cancelled job."""
    out = output(as_json, fmt, query)
    spec = load_pipeline_spec(file)
    with open_store() as store:
        states = {c.name: down_cluster(c, store) for c in cluster_specs(spec)}
    if not out.rich:
        return out.emit(states)
    for name, state in states.items():
        sys.stdout.write(f"cluster '{name}': {state}\n")


def _write_outputs(result: PipelineResult, junit: Optional[Path], markdown: Optional[Path],
                   summary_json: Optional[Path]) -> None:
    outputs: dict[Optional[Path], Callable[[], str]] = {junit: lambda: to_junit_xml(junit_suites(result.summary)),
               markdown: lambda: summary_markdown(result),
               summary_json: lambda: result.summary.model_dump_json(indent=2) + "\n"}
    for path, render in outputs.items():
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, render())
            sys.stderr.write(f"wrote {path}\n")


def _print_cases(s: PipelineSummary) -> None:
    keys = ("time_to_train", "step_time", "weak_scaling_efficiency", "allreduce_busbw")
    rows = [[c.name, len(c.run_ids), len(c.failed)] + [_fmt(c.metrics.get(k)) for k in keys]
            + ["error" if c.failed else "regression" if c.regressions else
               "not run" if not c.run_ids else "improvement" if c.improvements else "ok"]
            for c in s.cases]
    header = ["case", "runs", "failed"] + [METRICS[k][0] for k in keys] + ["verdict"]
    if plain_output():  # CI logs: no box drawing, nothing clipped to 80 columns
        sys.stdout.write(f"pipeline {s.pipeline}: {s.status}\n")
        for row in rows:
            sys.stdout.write(clean("  " + ", ".join(f"{h}={v}" for h, v in zip(header, row))) + "\n")
    else:
        make_console().print(make_table(f"Pipeline {s.pipeline}: {s.status}", header, rows))
    for c in s.cases:  # the lines name benchmarks and SKUs read from results: no controls
        for line in c.regressions:
            sys.stdout.write(wrapped(f"regression: {line}"))
        for line in c.improvements:
            sys.stdout.write(wrapped(f"improvement: {line}"))
    for cluster, line in s.goodput.items():
        sys.stdout.write(wrapped(f"goodput {cluster}: {line}"))


class _Lines:
    """Progress for people and CI logs: timestamped plain lines, or a live line on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.plain = quiet, plain_output()
        self.seen: dict[str, tuple[str, float]] = {}

    def line(self, text: str) -> None:
        if not self.quiet:
            prefix = "" if self.plain else "\r\033[K"
            sys.stderr.write(f"{prefix}{time.strftime('%H:%M:%S')} {text}\n")
            sys.stderr.flush()

    def event(self, e: RunEvent) -> None:
        self.line(f"{e.run_id}: {e.message}")

    def progress(self, p: RunProgress) -> None:
        if self.quiet:
            return
        step = f"step {p.step}" if p.step is not None else "step -"
        value = f", eval {p.eval_value:.4f}" if p.eval_value is not None else ""
        text = (f"{p.run_id} [{p.nodes} node(s), attempt {p.attempt}] {p.state.value}: "
                f"{p.note or step}{value}, {p.elapsed_s:.0f}s")
        if not self.plain:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()
            return
        last_state, last_t = self.seen.get(p.run_id, ("", 0.0))
        # CI logs: a line when the state changes, else at most one every 15 s per run.
        if p.state.value != last_state or time.monotonic() - last_t >= 15:
            self.seen[p.run_id] = (p.state.value, time.monotonic())
            self.line(text)


# ---------------------------------------------------------------- baselines and compare


@baseline_app.command("set")
def baseline_set(
    name: str = typer.Argument(..., help="Baseline name, e.g. nightly-h100."),
    sweep: list[str] = SweepOpt,
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only results of runs on this cluster."),
    benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
    since: Optional[str] = typer.Option(None, "--since", help="Only results since this date (YYYY-MM-DD)."),
    yes: bool = YesOpt, as_json: bool = JsonOpt,
                        fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
) -> None:
    """Make a baseline from stored results (default: the newest sweep); replaces one of that name."""
    out = output(as_json, fmt, query)
    check_name(name)
    with open_store() as store:
        selection = _selection(store, sweep, cluster, benchmark, since)
        entries = collect(store, selection)
        if find_baseline(store, name) is not None:
            confirm(f"Replace baseline '{name}'?", yes)
        base = set_baseline(store, name, entries, source=selection.source())
    if not out.rich:
        return out.emit(base)
    scales = ", ".join(e.label for e in base.entries)
    sys.stdout.write(wrapped(f"baseline '{name}' set from {_describe(selection.source())}: {scales}"))


@baseline_app.command("list")
def baseline_list(as_json: bool = JsonOpt,
                  fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Stored baselines."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        items = list_baselines(store)
    if not out.rich:
        return out.emit(items)
    make_console().print(make_table("Baselines", ["name", "scales", "updated", "source"],
                            [[b.name, ", ".join(e.label for e in b.entries),
                              f"{b.updated_at:%Y-%m-%d %H:%M}", _describe(b.source)] for b in items]))


@baseline_app.command("show")
def baseline_show(name: str = typer.Argument(..., help="Baseline name."), as_json: bool = JsonOpt,
                                                                          fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """One baseline's samples: mean, spread and count per benchmark x scale x metric."""
    out = output(as_json, fmt, query)
    import statistics

    with open_store() as store:
        base = get_baseline(store, name)
    if not out.rich:
        return out.emit(base)
    rows = [[e.label, METRICS.get(m, (m,))[0], _fmt(e.value(m)),
             _fmt(statistics.stdev(v)) if len(v) > 1 else "-", len(v)]
            for e in base.entries for m, v in e.metrics.items() if v and m not in e.refused]
    make_console().print(make_table(f"Baseline {name} ({_describe(base.source)}, updated "
                            f"{base.updated_at:%Y-%m-%d %H:%M}; value: the MLPerf score for time "
                            "to train, the median step for step time)",
                            ["scale", "metric", "value", "std", "n"], rows))
    for e in base.entries:
        for m, why in e.refused.items():
            sys.stdout.write(wrapped(f"{e.label} {METRICS.get(m, (m,))[0]}: {why}"))


@baseline_app.command("delete")
def baseline_delete(name: str = typer.Argument(..., help="Baseline name."), yes: bool = YesOpt) -> None:
    """Delete a baseline."""
    with open_store() as store:
        get_baseline(store, name)
        confirm(f"Delete baseline '{name}'?", yes)
        delete_baseline(store, name)
    sys.stdout.write(f"baseline '{name}' deleted\n")


@app.command("compare")
def compare_cmd(
    baseline: str = typer.Argument(..., help="Baseline name (see azbench baseline list)."),
    sweep: list[str] = SweepOpt,
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only results of runs on this cluster."),
    benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
    since: Optional[str] = typer.Option(None, "--since", help="Only results since this date (YYYY-MM-DD)."),
    tolerance: list[str] = typer.Option([], "--tolerance", "-t",
                                        help="METRIC=CHANGE, e.g. step_time=5% (repeatable)."),
    min_confidence: Optional[float] = typer.Option(None, "--min-confidence",
                                                   help="t-test confidence a regression needs (0-1)."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt,
    markdown: bool = typer.Option(False, "--markdown", help="Print Markdown (for PR comments)."),
) -> None:
    """Compare stored results (default: the newest sweep) with a baseline; exit 8 on regression."""
    out = output(as_json, fmt, query)
    tolerances = _tolerances(tolerance, min_confidence)
    with open_store() as store:
        base = get_baseline(store, baseline)
        result = compare(base, collect(store, _selection(store, sweep, cluster, benchmark, since)), tolerances)
    if not out.rich:
        out.emit(result.to_json_data())
    elif markdown:
        sys.stdout.write(comparison_markdown(result))
    else:
        _print_comparison(result)
    if result.regressions:
        raise RegressionError(f"{len(result.regressions)} regression(s) against '{baseline}'; first: "
                              + result.regressions[0].describe())


def _print_comparison(result: Comparison) -> None:
    rows = [[d.label, METRICS[d.metric][0], f"{_fmt(d.baseline_mean)} (n={d.n_baseline})",
             f"{_fmt(d.current_mean)} (n={d.n_current})",
             _pct(d.change, signed=True), _pct(d.confidence, 0) if d.confidence is not None else "n<2", d.verdict]
            for d in result.deltas]
    make_console().print(make_table(f"Compared with baseline {result.baseline}",
                            ["scale", "metric", "baseline", "current", "change", "confidence",
                             "verdict"], rows))
    for d in result.regressions:  # its label names a benchmark and a SKU read from results
        sys.stdout.write(wrapped(f"regression: {d.describe()}"))
    for d in result.improvements:
        sys.stdout.write(wrapped(f"improvement: {d.describe()}"))
    for note in result.notes:
        sys.stdout.write(wrapped(note))


def _tolerances(items: list[str], min_confidence: Optional[float]) -> Tolerances:
    from pydantic import ValidationError

    data: dict[str, dict[str, object]] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        if not sep or metric not in METRICS:
            raise ConfigError(f"--tolerance: '{item}' is not METRIC=CHANGE with METRIC one of "
                              + ", ".join(METRICS))
        data[metric] = {"max_change": value}
    if min_confidence is not None:
        for metric in METRICS:
            data.setdefault(metric, Tolerances().model_dump()[metric])["min_confidence"] = min_confidence
    try:
        return Tolerances.model_validate({k: Tolerance.model_validate(v) for k, v in data.items()})
    except ValidationError as exc:
        msg = exc.errors()[0].get("msg", "invalid value").removeprefix("Value error, ")
        raise ConfigError(f"--tolerance/--min-confidence: {msg}") from None


def _selection(store: Store, sweeps: list[str], cluster: Optional[str], benchmark: Optional[str],
               since: Optional[str]) -> Selection:
    """The flags' selection; with no filter at all, the newest sweep."""
    if not (sweeps or cluster or benchmark or since):
        newest = [r.sweep_id for r in store.list_runs() if r.sweep_id]
        if not newest:
            imported = store.list_results()
            if imported:  # imported logs belong to no sweep: a date or a benchmark selects them
                first = min(r.created_at for r in imported)
                raise NotFoundError(
                    f"no sweeps stored yet; imported results: pass --since DATE "
                    f"(e.g. --since {first:%Y-%m-%d}, the first of {len(imported)} stored) "
                    "or --benchmark B")
            raise NotFoundError("no sweeps stored yet", hint="run a recipe first (azbench run)")
        sweeps = [max(newest)]  # sweep ids start with their UTC creation time
    return Selection(sweep_ids=tuple(sweeps), cluster=cluster, benchmark=benchmark, since=parse_date("--since", since))


def _describe(source: Mapping[str, object]) -> str:
    """A baseline's source (a selection's, or a pipeline's) in one phrase."""
    parts = [f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in source.items()
             if v and k in ("sweep_ids", "sweeps", "cluster", "benchmark", "since", "pipeline")]
    return "; ".join(parts).replace("sweep_ids", "sweeps") or "all results"


def _pct(value: float | None, digits: int = 1, signed: bool = False) -> str:
    return formats.pct(value, digits, signed=signed)


def _fmt(value: float | None) -> str:
    return formats.sig(value)
