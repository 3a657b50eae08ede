"""`azbench run` and `azbench logs`: run recipes with live progress, reattach, read logs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Self

import typer

from orchestrator.safetext import clean
from orchestrator.cli.common import (
    say,
    JsonOpt,
    Output,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_number,
    make_console,
    make_table,
    open_store,
    output,
    parse_params,
    placement_lines,
)
from orchestrator.errors import ConfigError
from orchestrator.errors import EXIT_INTERRUPTED, RunFailedError
from orchestrator.clusters import lifecycle
from orchestrator.goodput.run import lost_work_by_attempt, run_goodput
from orchestrator.recipes import catalog as recipe_catalog
from orchestrator.recipes.catalog import check_params
from orchestrator.runs.attempts import RunEvent, RunOutcome
# The use cases are read through their modules when a command runs: tests patch them there.
from orchestrator.runs import execute
from orchestrator.runs.launch import describe_launch
from orchestrator.runs.logview import stream_log
from orchestrator.runs.monitor import Progress as RunProgress
from orchestrator.specs.run import RunSpec, load_run_spec, parse_node_list
from orchestrator.store.database import Store

# ---------------------------------------------------------------- run / logs / report / results

@app.command()
def run(recipe: Optional[str] = typer.Argument(None, help="Recipe name (see azbench recipes list)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster name (default: the only one up)."),
        nodes: Optional[str] = typer.Option(None, "--nodes", help="Node counts, comma-separated: 1,2,4."),
        repeats: Optional[int] = typer.Option(None, "--repeats", help="Runs per node count."),
        file: Optional[Path] = typer.Option(None, "--file", "-f", help="Run spec YAML (retry, health, params)."),
        param: list[str] = typer.Option([], "--param", "-p", help="Recipe parameter KEY=VALUE (repeatable); for "
                                        "an MLPerf recipe, an environment variable its implementation reads, "
                                        "set after the submission config (e.g. -p TP_PP_DP_MAPPING=False)."),
        poll: float = typer.Option(1.0, "--poll", min=0.05, help="Seconds between scheduler polls."),
        attach: Optional[str] = typer.Option(None, "--attach", help="Reattach to run RUN's live job(s) and finish its sweep."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and exact script per node count; submit nothing."),
        sku: Optional[str] = typer.Option(None, "--sku", help="With --dry-run: plan for this VM size instead of the cluster's."),
        as_json: bool = JsonOpt,
        fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Run a recipe at one or more node counts, watch it, then ingest its results.

    A rerun of the same command while its sweep is unfinished reattaches instead of resubmitting.
    Ctrl-C asks whether to cancel the job or detach (without a terminal: detach)."""
    out = output(as_json, fmt, query)
    if attach is None and recipe is None and file is None:
        raise ConfigError("give a recipe name (or a run spec with -f), or --attach RUN")
    check_number("--poll", poll, 0.05, 3600)
    spec = None if attach else load_run_spec(file, {
        "recipe": recipe, "cluster": cluster, "repeats": repeats,
        "nodes": parse_node_list(nodes) if nodes else None, "params": parse_params(param) if param else None})
    if spec is not None:  # unknown names refused, values typed like the recipe's defaults
        spec = spec.model_copy(update={"params": check_params(recipe_catalog.get_recipe(spec.recipe), spec.params)})
    if dry_run:
        return _dry_run(spec, sku, out)
    with open_store() as store, _progress_view(enabled=out.rich) as show:
        try:
            if attach:
                outcomes = execute.attach_run(attach, store, on_progress=show, on_event=show.event,
                                      poll_interval=poll)
            else:
                assert spec is not None  # loaded above whenever there is nothing to attach to
                outcomes = execute.run_sweep(spec, store, on_progress=show, on_event=show.event,
                                     poll_interval=poll)
        except KeyboardInterrupt:
            _interrupted(store, spec, attach)
    if not out.rich:
        out.emit([o.__dict__ for o in outcomes])
    else:
        make_console().print(make_table("Runs", ["run", "nodes", "repeat", "state", "attempts", "resumed",
                                         "time to train (min)", "message"],
                                [[o.run_id, o.nodes, o.repeat, o.state, o.attempts, "yes" if o.resumed else "",
                                  f"{o.minutes:.3f}" if o.minutes is not None else "-", o.message]
                                 for o in outcomes]))
        _attempt_table(outcomes)
    execute.require_success(outcomes)


def _dry_run(spec: RunSpec | None, sku: Optional[str], out: Output) -> None:
    if spec is None:
        raise ConfigError("--dry-run needs a recipe, not --attach")
    if sku is None:
        with open_store() as store:
            sku = lifecycle.require_cluster(spec.cluster, store).sku
    previews = [describe_launch(spec.recipe, sku, n, params=spec.params, time_limit_min=spec.time_limit_min)
                for n in spec.nodes]
    if not out.rich:
        return out.emit(previews)
    for p in previews:
        r = p.resolved
        shape = f"TP {r.tp} x PP {r.pp} x CP {r.cp} x DP {r.dp}, GBS {r.gbs}" if r.gbs else f"DP {r.dp}"
        say(f"=== {r.recipe} on {r.nodes} x {r.sku_short} ({r.gpus} GPUs): {shape}"
                         f"{' (derived: ' + (r.rule or '') + ')' if r.derived else ''}\n")
        if r.placement is not None:
            say(placement_lines(r.placement))
        for warning in r.warnings:
            say(f"warning: {warning}\n")
        say(p.script.rstrip() + "\n\n")


def _attempt_table(outcomes: list[RunOutcome]) -> None:
    """Attempt history of runs that needed more than one attempt (lost work, resumed step)."""
    retried = [o for o in outcomes if o.attempts > 1]
    if not retried:
        return
    with open_store() as store:
        # lost work is goodput's figure (checkpoint kept to the failure), never a second sum
        lost = {o.run_id: lost_work_by_attempt(run_goodput(store, o.run_id)) for o in retried}
        rows = [[o.run_id, a.attempt, a.job_id, a.state, a.failure_class or "", ", ".join(a.excluded_nodes),
                 a.resumed_from_step if a.resumed_from_step is not None else "",
                 a.lost_steps if a.lost_steps is not None else "",
                 f"{lost[o.run_id][a.attempt]:,.1f}" if a.attempt in lost[o.run_id] else ""]
                for o in retried for a in store.list_attempts(o.run_id)]
    make_console().print(make_table("Attempts", ["run", "attempt", "job", "state", "failure", "excluded",
                                         "resumed from step", "lost steps", "lost work s"], rows))


def _interrupted(store: Store, spec: RunSpec | None, attach: Optional[str]) -> None:
    """Ctrl-C: on a terminal ask cancel or detach; otherwise detach and say how to come back."""
    if attach:
        row = store.get_run(attach)
        live = [r for r in store.list_runs(sweep_id=row.sweep_id) if r.state not in execute.FINAL] if row else []
    elif spec is not None:
        live = execute.live_sweep(spec, store, lifecycle.require_cluster(spec.cluster, store).name)
    else:
        live = []
    if not live:
        raise KeyboardInterrupt
    ids = [r.id for r in live]
    choice = "d"
    if sys.stdin.isatty() and sys.stderr.isatty():
        sys.stderr.write("\n")
        choice = typer.prompt("Cancel the Slurm job(s) or detach? [c/d]", default="d").strip().lower()[:1]
    if choice == "c":
        jobs = execute.cancel_runs(store, ids)
        raise RunFailedError(f"cancelled {', '.join(ids)} (Slurm job(s) {', '.join(jobs) or 'none'})")
    sys.stderr.write(f"\ndetached: the job keeps running. Reattach with: azbench run --attach {ids[0]}\n")
    sys.exit(EXIT_INTERRUPTED)


class _progress_view:
    """A live one-line-per-run view on a terminal; plain log lines elsewhere (CI)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.last: dict[str, str] = {}
        self.tty = sys.stderr.isatty()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")

    def event(self, e: RunEvent) -> None:
        if self.enabled:
            sys.stderr.write(("\r\033[K" if self.tty else "") + clean(f"{e.run_id}: {e.message}") + "\n")

    def __call__(self, p: RunProgress) -> None:
        self.show(p)

    def show(self, p: RunProgress) -> None:
        if not self.enabled:
            return
        if p.note:
            sys.stderr.write(("\r\033[K" if self.tty else "") + clean(f"{p.run_id}: {p.note}") + ("" if self.tty else "\n"))
            return
        step = f"step {p.step}" if p.step is not None else "step -"
        value = f", eval {p.eval_value:.4f}" if p.eval_value is not None else ""
        eta = f", eta {p.eta_s:.0f}s" if p.eta_s is not None else ""
        slowest = f", slowest {p.slowest}" if p.slowest else ""
        line = (f"{p.run_id} [{p.nodes} node{'s' if p.nodes != 1 else ''}, attempt {p.attempt}] "
                f"{p.state.value}: {step}{value}, {p.elapsed_s:.0f}s{eta}{slowest}")
        if self.tty:
            sys.stderr.write("\r\033[K" + clean(line))
            sys.stderr.flush()
        elif self.last.get(p.run_id) != f"{p.state.value}{p.step}":
            sys.stderr.write(clean(line) + "\n")
        self.last[p.run_id] = f"{p.state.value}{p.step}"


@app.command()
def logs(run_id: str = typer.Argument(..., help="Run id (see azbench status)."),
         follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines until the run ends."),
         attempt: Optional[int] = typer.Option(None, "--attempt", help="Attempt number (default: the last)."),
         fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Print a run's training log (fetched copy, or live from the cluster while it runs).

    -o json: {"run_id", "attempt", "lines"}; -o tsv: the run, the attempt and the line count
    (--query "lines[]" -o tsv gives the lines)."""
    out = output(False, fmt, query)
    if follow and not out.rich:
        raise ConfigError("--follow prints the log as it comes; -o json|tsv and --query need the "
                          "whole log: leave out --follow")
    if not out.rich:
        parts: list[str] = []
        with open_store() as store:
            number = stream_log(store, run_id, parts.append, attempt=attempt)
        return out.emit({"run_id": run_id, "attempt": number, "lines": "".join(parts).splitlines()})

    def show(text: str) -> None:
        say(text)  # a job's log is text from the cluster: no ESC, bidi or zero-width reaches the terminal
        sys.stdout.flush()
    with open_store() as store:
        stream_log(store, run_id, show, attempt=attempt, follow=follow)
