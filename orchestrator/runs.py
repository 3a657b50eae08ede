"""The `azbench run` use case: one run per node count and repeat, watched, then ingested.

Runs execute one after another (benchmarks need the nodes to themselves). Every state change
is written to the store before the action it describes: the attempt row exists before sbatch,
its job id is recorded right after, and the result lands in one transaction with the final
states, so a crash never leaves a half-recorded run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from orchestrator import paths
from orchestrator.access import launcher_for, recipe_python, runner_for
from orchestrator.errors import AzbenchError, ConfigError, RunFailedError
from orchestrator.lifecycle import require_cluster
from orchestrator.models import AttemptSpec, Cluster, JobState, utcnow
from orchestrator.monitor import Action, Progress, tail_command, watch
from orchestrator.recipes import Recipe, check_request, get_recipe, render_command
from orchestrator.specs import RunSpec
from orchestrator.store import Store
from orchestrator.store_schema import AttemptRow, EventRow, RunRow


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    nodes: int
    repeat: int
    state: str
    message: str
    result_id: int | None = None
    minutes: float | None = None
    log_path: str | None = None


def run_sweep(spec: RunSpec, store: Store, *, on_progress: Callable[[Progress], None] | None = None,
              poll_interval: float = 1.0) -> list[RunOutcome]:
    """Run `spec.recipe` at each node count x repeat on the cluster; record everything."""
    cluster = require_cluster(spec.cluster, store)
    recipe = get_recipe(spec.recipe)
    for nodes in spec.nodes:
        check_request(recipe, cluster.sku, nodes, cluster.nodes)
    rows = _create_runs(spec, recipe, cluster, store)
    runner = runner_for(cluster)
    try:
        launcher = launcher_for(cluster, runner)
        return [_execute(row, spec, recipe, cluster, store, launcher, runner, on_progress,
                         poll_interval) for row in rows]
    finally:
        runner.close()


def new_run_id() -> str:
    return f"r{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _create_runs(spec: RunSpec, recipe: Recipe, cluster: Cluster, store: Store) -> list[RunRow]:
    sweep = f"s{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    rows = []
    with store.transaction():
        for nodes in spec.nodes:
            for repeat in range(spec.repeats):
                run_id = new_run_id()
                rows.append(store.create_run(RunRow(
                    id=run_id, sweep_id=sweep, cluster=cluster.name, recipe=recipe.name,
                    benchmark=recipe.benchmark, nodes=nodes, repeat_index=repeat, state="queued",
                    spec_json=spec.model_dump_json(), run_dir=f"{cluster.workdir}/runs/{run_id}")))
    return rows


def _attempt_spec(row: RunRow, spec: RunSpec, recipe: Recipe, cluster: Cluster, attempt: int,
                  resume: bool = False, exclude: list[str] | None = None) -> AttemptSpec:
    run_dir = row.run_dir or f"{cluster.workdir}/runs/{row.id}"
    command = render_command(recipe, run_dir=run_dir, nodes=row.nodes, params=spec.params,
                             python=recipe_python(cluster))
    return AttemptSpec(run_id=row.id, attempt=attempt, recipe=recipe.name, nodes=row.nodes,
                       run_dir=run_dir, command=command, env=dict(recipe.launch.env),
                       exclude=exclude or [], resume=resume,
                       time_limit_min=min(spec.time_limit_min, recipe.launch.time_limit_min),
                       tasks_per_node=recipe.launch.tasks_per_node,
                       gpus_per_node=cluster_gpus_per_node(cluster))


def cluster_gpus_per_node(cluster: Cluster) -> int:
    from orchestrator.catalog import lookup
    return lookup(cluster.sku).gpus_per_vm


def _execute(row, spec, recipe, cluster, store, launcher, runner, on_progress,
             poll_interval) -> RunOutcome:
    attempt = 1
    aspec = _attempt_spec(row, spec, recipe, cluster, attempt)
    store.add_attempt(AttemptRow(run_id=row.id, attempt=attempt, state="submitting",
                                 started_at=utcnow()))
    store.update_run(row.id, state="submitting")
    try:
        ref = launcher.submit(aspec, recipe_dir=recipe.code_path)
    except AzbenchError as exc:
        return _finish(store, row, attempt, "failed", f"submit failed: {exc}")
    store.update_attempt(row.id, attempt, job_id=ref.job_id, state="pending")
    store.update_run(row.id, state="running", job_id=ref.job_id)
    log = f"{ref.run_dir}/attempt-{attempt}/train.log"
    status, action = watch(
        ref, launcher, _progress_reader(runner, log), run_id=row.id, attempt=attempt,
        nodes=row.nodes, hang_timeout=spec.retry.hang_timeout,
        deadline_s=spec.retry.max_duration, interval=poll_interval, on_progress=on_progress)
    if action in (Action.CANCEL_HANG, Action.CANCEL_DEADLINE):
        launcher.cancel(ref)
        why = "no training progress for %ss" % spec.retry.hang_timeout \
            if action == Action.CANCEL_HANG else "the run passed its max_duration"
        return _ingest_and_finish(store, row, cluster, launcher, ref, attempt, "failed",
                                  f"cancelled: {why}")
    ok = status.state == JobState.COMPLETED
    message = "completed" if ok else f"job {status.state.value} (exit {status.exit_code})"
    return _ingest_and_finish(store, row, cluster, launcher, ref, attempt,
                              "succeeded" if ok else "failed", message)


def _progress_reader(runner, log_path: str):
    from orchestrator.mllog import parse_lines

    def read() -> tuple[int | None, float | None, float | None]:
        tail = runner.run(tail_command(log_path), timeout=30)
        summary = parse_lines(tail.stdout.splitlines())
        step = summary.step_times[-1].step if summary.step_times else None
        value = summary.eval_points[-1].value if summary.eval_points else None
        return step, value, None
    return read


def _ingest_and_finish(store, row, cluster, launcher, ref, attempt, state, message) -> RunOutcome:
    from orchestrator.ingest import result_from_run
    dest = paths.run_dir(row.id)
    try:
        files = launcher.fetch_logs(ref, dest)
    except AzbenchError as exc:
        return _finish(store, row, attempt, "failed", f"{message}; logs not fetched: {exc}")
    log = next((f for f in files if f.name == "train.log" and f.parent.name == f"attempt-{attempt}"), None)
    if log is None:
        return _finish(store, row, attempt, "failed", f"{message}; no train.log came back")
    result = result_from_run(log, run_id=row.id, cluster=cluster, nodes=row.nodes,
                             benchmark=row.benchmark)
    if state == "succeeded" and not result.converged:
        state, message = "failed", f"job completed but the run did not converge (status {result.status})"
    return _finish(store, row, attempt, state, message, result=result, log=log)


def _finish(store, row, attempt, state, message, *, result=None, log: Path | None = None) -> RunOutcome:
    result_id = None
    with store.transaction():
        if result is not None:
            result_id, _ = store.add_result(result)
        store.update_attempt(row.id, attempt, state=state, ended_at=utcnow(), message=message)
        store.update_run(row.id, state=state, message=message)
        store.add_event(EventRow(kind=f"run_{state}", cluster=row.cluster, run_id=row.id,
                                 message=message))
    return RunOutcome(run_id=row.id, nodes=row.nodes, repeat=row.repeat_index, state=state,
                      message=message, result_id=result_id,
                      minutes=result.minutes if result is not None else None,
                      log_path=str(log) if log else None)


def require_success(outcomes: list[RunOutcome]) -> None:
    failed = [o for o in outcomes if o.state != "succeeded"]
    if failed:
        first = failed[0]
        raise RunFailedError(f"{len(failed)} of {len(outcomes)} runs failed; first: {first.run_id} "
                             f"({first.nodes} nodes): {first.message}")


def validate_nodes(nodes: list[int]) -> None:
    if not nodes:
        raise ConfigError("--nodes: give at least one node count")

