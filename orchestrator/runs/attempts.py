"""One attempt of one run: gate, submit, watch, classify, fetch, ingest, record.

The lower half of `azbench run` (orchestrator.runs.execute drives sweeps and retries on top of it).
Every state change is written to the store before the action it describes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from orchestrator import paths
from orchestrator.clusters.lifecycle import parts
from orchestrator.specs.run import RunSpec
from orchestrator.errors import AzbenchError
from orchestrator.models import (
    FINAL_ATTEMPT_STATES,
    FINAL_RUN_STATES,
    AttemptSpec,
    AttemptState,
    Cluster,
    DataInput,
    JobRef,
    JobState,
    JobStatus,
    RunState,
    utcnow,
)
from orchestrator.paths import RunLayout, job_name, local_attempt_dir, local_train_log
from orchestrator.recipes.catalog import Recipe, render_command
from orchestrator.runs.failures import Failure, FailureClass, Observation, classify, preempted_nodes
from orchestrator.runs.monitor import (
    Action,
    JobLost,
    LogPoller,
    Progress,
    no_progress,
    progress_reader,
    watch,
)
from orchestrator.store.database import Store
from orchestrator.store.events import FleetGateData, GateData, Payload, StragglerData
from orchestrator.store.schema import AttemptRow, EventRow, ResultRow, RunRow
from orchestrator.hardware.catalog import lookup
from orchestrator.recipes.catalog import resolve
from orchestrator.runs.launch import container_build, launch_attempt
from orchestrator.recipes.catalog import data_for, resolve
from orchestrator.results.mllog import parse_lines
from orchestrator.results.stragglers import find_stragglers
from orchestrator.runs.health import choose_nodes, run_gate
from orchestrator.runs.fleet_gate import gate_nodes
from orchestrator.runs.fleet_replace import ReplacePolicy, reasons, replace_drained
from orchestrator.results.ingest import result_from_run
from orchestrator.results.summary import summary_of

if TYPE_CHECKING:
    from orchestrator.seams import Access, Launcher

FINAL = FINAL_RUN_STATES
FINAL_ATTEMPT = FINAL_ATTEMPT_STATES


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    nodes: int
    repeat: int
    state: RunState
    message: str
    result_id: int | None = None
    minutes: float | None = None
    log_path: str | None = None
    attempts: int = 1
    resumed: bool = False


@dataclass(frozen=True)
class RunEvent:
    """A line for the user: reattached, gate verdicts, retries."""

    run_id: str
    kind: str
    message: str


@dataclass
class AttemptContext:
    """What every step of one attempt needs: spec, recipe, cluster, store, and the cluster's
    Access (its launcher, with its parts, and traits)."""

    spec: RunSpec
    recipe: Recipe
    cluster: Cluster
    store: Store
    access: Access
    on_progress: Callable[[Progress], None] | None
    on_event: Callable[[RunEvent], None] | None
    poll: float
    sleep: Callable[[float], None] = time.sleep

    @property
    def launcher(self) -> Launcher:
        return self.access.launcher

    def event(self, run: RunRow, kind: str, message: str, data: Payload | None = None) -> None:
        """Record the run's event `kind` (its data the model store.events names for it)."""
        self.store.add_event(EventRow(kind=kind, cluster=run.cluster, run_id=run.id,
                                      message=message, data=data))
        if self.on_event:
            self.on_event(RunEvent(run.id, kind, message))


def cluster_gpus_per_node(cluster: Cluster) -> int:
    return lookup(cluster.sku).gpus_per_vm


# -- one sweep, one run --------------------------------------------------------------------


def attempt_spec(row: RunRow, spec: RunSpec, recipe: Recipe, cluster: Cluster, attempt: int,
                 resume: bool, exclude: list[str], python: str = "python3") -> AttemptSpec:
    """One attempt as the launcher submits it; `python` runs plain recipes on the nodes."""
    run_dir = row.run_dir or RunLayout.of(cluster.workdir, row.id).run_dir
    if recipe.mlperf is not None:
        return _mlperf_attempt(row, recipe, cluster, attempt, exclude, run_dir, spec.params)
    command = render_command(recipe, run_dir=run_dir, nodes=row.nodes, params=spec.params,
                             python=python)
    return AttemptSpec(run_id=row.id, attempt=attempt, recipe=recipe.name, nodes=row.nodes,
                       run_dir=run_dir, command=command, env=dict(recipe.launch.env),
                       exclude=exclude, resume=resume,
                       time_limit_min=min(spec.time_limit_min, recipe.launch.time_limit_min),
                       tasks_per_node=recipe.launch.tasks_per_node,
                       gpus_per_node=cluster_gpus_per_node(cluster))


def _mlperf_attempt(row: RunRow, recipe: Recipe, cluster: Cluster, attempt: int,
                    exclude: list[str], run_dir: str, params: dict[str, Any] | None = None) -> AttemptSpec:
    """An MLPerf recipe runs as its container job (its -p parameters exported after the
    submission config, as `run --dry-run` shows); timed runs never resume (rules)."""
    resolved = resolve(recipe, cluster.sku, row.nodes, env=params)
    build = container_build(recipe, cluster.sku, row.nodes)
    if build is not None:  # the squashfs `azbench prepare` built from the pinned Dockerfile
        resolved = resolved.model_copy(update={"image": build.squashfs()})
    spec = launch_attempt(resolved, run_dir, run_id=row.id, attempt=attempt, exclude=exclude)
    return spec.model_copy(update=container_fields(recipe, cluster.sku, row.nodes, params))


def container_fields(recipe: Recipe, sku: str, nodes: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a launcher without batch scripts builds an MLPerf job from: the resolved config's
    environment, the recipe's image for the SKU's CPU architecture, MPI, and its data inputs."""
    if recipe.mlperf is None:
        return {}
    resolved = resolve(recipe, sku, nodes, env=params)
    # The submission config's environment (sourced on Slurm by the launch script) with azbench's
    # values on top: a launcher without batch scripts cannot source the files itself.
    return {"env": {**resolved.config_env, **resolved.env}, "image": resolved.image,
            "distribution": "mpi",
            "data": [DataInput(name=d.name, path=d.host_path("").lstrip("/"), var=d.var)
                     for d in data_for(recipe, resolved.vendored)]}


def local_log(run_id: str, attempt: int) -> Path:
    return local_train_log(run_id, attempt)



# -- one attempt ---------------------------------------------------------------------------


def start_attempt(ctx: AttemptContext, row: RunRow, cur: AttemptRow) -> AttemptRow:
    """Gate, then submit pinned to the healthy nodes; a job already submitted is adopted."""
    store, n = ctx.store, cur.attempt
    if cur.state == AttemptState.SUBMITTING:  # crashed between the store write and the scheduler's answer?
        found = ctx.launcher.find(job_name(row.id, n))
        if found is not None:
            return _submitted(ctx, row, n, found.job_id)
    excluded, pin = list(cur.excluded_nodes), list(cur.excluded_nodes)
    if ctx.spec.health.enabled and ctx.launcher.parts().gate is not None:
        gated = _gate(ctx, row, cur)
        if isinstance(gated, AttemptRow):
            return gated
        excluded, pin = gated
    with store.transaction():
        store.update_attempt(row.id, n, state=AttemptState.SUBMITTING, excluded_nodes=excluded,
                             submitted_at=utcnow())
        store.update_run(row.id, state=RunState.SUBMITTING)
    resume = n > 1 and ctx.spec.retry.resume == "checkpoint"
    aspec = attempt_spec(row, ctx.spec, ctx.recipe, ctx.cluster, n, resume, pin, ctx.access.python)
    try:
        ref = ctx.launcher.submit(aspec, recipe_dir=ctx.recipe.code_path)
    except AzbenchError as exc:
        return _record_failure(ctx, row, n, Failure(FailureClass.CONFIG_ERROR, (), f"submit: {exc}"))
    return _submitted(ctx, row, n, ref.job_id)


def finish_attempt(ctx: AttemptContext, row: RunRow, cur: AttemptRow) -> tuple[Failure | None, RunOutcome | None]:
    """Watch the attempt's job to its end and classify it: (failure, None) or (None, outcome)."""
    n, run_dir = cur.attempt, row.run_dir or ""
    ref = JobRef(cluster=ctx.cluster.name, job_id=cur.job_id or "", run_dir=run_dir,
                 backend=ctx.launcher.backend)
    log = RunLayout(run_dir).train_log(n)
    status, intent = _watch_attempt(ctx, row, cur, ref, log)
    text = _fetch_attempt_log(ctx, row, n, ref)
    result = None
    if status.state == JobState.COMPLETED and status.exit_code in (0, None):
        result = _result(ctx, row, n)
    infos = ctx.launcher.node_states()
    down = [name for name, info in infos.items() if not info.usable]
    failure = classify(Observation(
        state=status.state, exit_code=status.exit_code, nodes=list(status.nodes), log_tail=text,
        down_nodes=down, tasks_per_node=ctx.recipe.launch.tasks_per_node,
        hung=intent == FailureClass.HANG, deadline=intent == FailureClass.DEADLINE,
        preempted_nodes=preempted_nodes({n: i.reason for n, i in infos.items()}),
        converged=result.converged if result is not None else None))
    slow = _stragglers(ctx, row, n, text)
    if failure is None and result is not None:
        return None, _finish(ctx, row, n, RunState.SUCCEEDED, "completed", result=result)
    failure = failure or Failure(FailureClass.APP_ERROR, (), "no result")
    if slow:  # the retry runs without them (decide_retry excludes every suspect)
        failure = dataclasses.replace(failure, suspects=tuple(sorted({*failure.suspects, *slow})))
    _record_failure(ctx, row, n, failure, summary_step=_resume_step_of(text))
    return failure, None


STRAGGLER_MIN_NODES = 3  # with two nodes the median is their mean: no straggler to name


def _stragglers(ctx: AttemptContext, row: RunRow, n: int, text: str) -> list[str]:
    """Nodes whose compute time per step (the recipe's azbench_node_step_time) exceeds the
    median of the run's nodes by more than the tolerance; recorded as a "straggler" event."""
    times = parse_lines(text.splitlines()).node_step_times
    if len(times) < STRAGGLER_MIN_NODES:
        return []
    slow = find_stragglers(times, higher_is_better=False)
    for s in slow:
        ctx.event(row, "straggler", f"attempt {n}: {s.node} computes a step in {s.value:.4g} s, "
                  f"{s.off_median:+.0%} vs the median {s.median:.4g} s (threshold {s.threshold:.4g} s)",
                  StragglerData(node=s.node, value=s.value, threshold=s.threshold, median=s.median))
    return [s.node for s in slow]


def final_failure(ctx: AttemptContext, row: RunRow, last: AttemptRow, failure: Failure | None,
                  reason: str) -> RunOutcome:
    what = failure.describe() if failure else "failed"
    users = failure is not None and not failure.retryable
    message = f"{what} [the user's error: not retried]" if users else f"{what} [not retried: {reason}]"
    result = _result(ctx, row, last.attempt)
    return _finish(ctx, row, last.attempt, RunState.FAILED, message, result=result, end_attempt=False)


def _hang_timeout(ctx: AttemptContext) -> float:
    """Hangs are judged from the MLLOG tail, which only a launcher with live logs can read."""
    if ctx.launcher.parts().live_logs is None:
        return float("inf")
    return ctx.spec.retry.hang_timeout


def _startup_grace(ctx: AttemptContext) -> float | None:
    """The hang limit until the first step: the run's retry.startup_grace, else the recipe's
    (None without live logs: _hang_timeout is then infinite from the start)."""
    if ctx.launcher.parts().live_logs is None:
        return None
    if ctx.spec.retry.startup_grace is not None:
        return float(ctx.spec.retry.startup_grace)
    minutes = ctx.recipe.launch.startup_grace_min
    return None if minutes is None else minutes * 60.0


def _gate(ctx: AttemptContext, row: RunRow, cur: AttemptRow) -> tuple[list[str], list[str]] | AttemptRow:
    store, n = ctx.store, cur.attempt
    with store.transaction():
        store.update_attempt(row.id, n, state=AttemptState.HEALTH_CHECK, gate_started_at=utcnow())
        store.update_run(row.id, state=RunState.HEALTH_CHECK)
    infos = ctx.launcher.node_states()
    chosen = choose_nodes(infos, cur.excluded_nodes, row.nodes)
    drained = _fleet_gate(ctx, row, n, chosen)
    gate = run_gate(ctx.launcher, ctx.cluster, run_id=row.id, attempt=n,
                    run_dir=row.run_dir or "", python=ctx.access.python,
                    nodes=[c for c in chosen if c not in drained],
                    policy=ctx.spec.health, poll_interval=min(ctx.poll, 0.5))
    excluded = sorted(set(cur.excluded_nodes) | set(gate.failed) | set(drained))
    verdict = "; ".join(f"{node}: {why}" for node, why in sorted(gate.failed.items()))
    ctx.event(row, "health_gate", f"attempt {n}: {len(gate.healthy)}/{len(gate.checked)} nodes "
              f"healthy in {gate.seconds:.1f}s" + (f"; excluded {verdict}" if verdict else "")
              + (f"; {gate.fabric}" if gate.fabric else ""),
              GateData(failed=gate.failed, busbw_gbps=gate.busbw_gbps, job_id=gate.job_id))
    if gate.fabric or len(gate.healthy) < row.nodes:
        store.update_attempt(row.id, n, excluded_nodes=excluded)
        why = gate.fabric or f"{len(gate.healthy)} healthy nodes, {row.nodes} needed"
        return _record_failure(ctx, row, n, Failure(FailureClass.HEALTH_GATE, tuple(gate.failed), why))
    everyone = set(infos) | set(ctx.cluster.node_names)
    return excluded, sorted(everyone - set(gate.healthy))


def _fleet_gate(ctx: AttemptContext, row: RunRow, n: int, nodes: list[str]) -> list[str]:
    """`azbench health`'s checks on the chosen nodes (probe, group collectives, stragglers):
    the nodes it drained, which this attempt and every later run then avoid."""
    report = gate_nodes(ctx.access, ctx.cluster, nodes, with_ahc=False)
    if report.verdicts or report.fabric:
        ctx.event(row, "health_fleet", f"attempt {n}: " + (report.fabric or "drained " + "; ".join(
            f"{v.node}: {v.reason}" for v in report.verdicts)), FleetGateData(drained=report.drained))
    policy = ctx.spec.health
    if policy.replace and report.drained and parts(ctx.cluster).healer is not None:
        replace_drained(ctx.cluster, ctx.access, ctx.store, reasons(report),
                        ReplacePolicy(policy.max_replacements, policy.max_replacements_per_hour))
    return report.drained


def _submitted(ctx: AttemptContext, row: RunRow, n: int, job_id: str) -> AttemptRow:
    with ctx.store.transaction():
        cur = ctx.store.update_attempt(row.id, n, job_id=job_id, state=AttemptState.PENDING)
        ctx.store.update_run(row.id, state=RunState.RUNNING, job_id=job_id)
    return cur


def _watch_attempt(ctx: AttemptContext, row: RunRow, cur: AttemptRow, ref: JobRef,
                   log: str) -> tuple[JobStatus, FailureClass | None]:
    """The job's final status, and the class azbench itself stored before cancelling it."""
    intent = FailureClass(cur.failure_class) if cur.failure_class else None
    if intent is None:
        started = cur.started_at or utcnow()
        first = ctx.store.list_attempts(row.id)[0].started_at or started
        left = ctx.spec.retry.max_duration - (utcnow() - first).total_seconds()
        try:
            live = ctx.launcher.parts().live_logs
            status, action = watch(ref, LogPoller(ctx.launcher, log, live is not None),
                                   progress_reader(live, log) if live is not None else no_progress,
                                   run_id=row.id, attempt=cur.attempt, nodes=row.nodes,
                                   hang_timeout=_hang_timeout(ctx), deadline_s=max(left, 0),
                                   startup_grace=_startup_grace(ctx),
                                   interval=ctx.poll, on_progress=ctx.on_progress)
        except JobLost as lost:
            return lost.status, None
        if action == Action.DONE:
            return status, None
        intent = FailureClass.HANG if action == Action.CANCEL_HANG else FailureClass.DEADLINE
        # Stored before the cancel: a crash now still knows this was our cancel, not a user's.
        ctx.store.update_attempt(row.id, cur.attempt, failure_class=intent.value,
                                 message=f"cancelling: {intent.value}")
    ctx.launcher.cancel(ref)
    return _final_status(ctx, ref), intent


def _final_status(ctx: AttemptContext, ref: JobRef, tries: int = 60) -> JobStatus:
    status = ctx.launcher.poll([ref])[ref.job_id]
    for _ in range(tries):
        if status.state.terminal or status.state == JobState.UNKNOWN:
            break
        ctx.sleep(ctx.poll)
        status = ctx.launcher.poll([ref])[ref.job_id]
    return status


def _record_failure(ctx: AttemptContext, row: RunRow, n: int, failure: Failure,
                    summary_step: int | None = None) -> AttemptRow:
    fields: dict[str, Any] = dict(state=AttemptState.FAILED, failure_class=failure.cls.value, ended_at=utcnow(),
                  message=failure.describe())
    if summary_step is not None:
        fields["resumed_from_step"] = summary_step
    return ctx.store.update_attempt(row.id, n, **fields)


def _fetch_attempt_log(ctx: AttemptContext, row: RunRow, n: int, ref: JobRef) -> str:
    """The attempt's train.log (fetched home, for lost-work maths) and the end of the
    scheduler's output of its job (*.out), as text to classify."""
    try:
        ctx.launcher.fetch_logs(ref, paths.run_dir(row.id))
    except AzbenchError:
        pass
    local = local_log(row.id, n)
    head = _tail_text(local, 65536)
    outputs = sorted(local_attempt_dir(row.id, n).glob("*.out"))
    return head + "\n" + "".join(_tail_text(p, 8192) for p in outputs)


def _tail_text(path: Path, nbytes: int) -> str:
    """The last `nbytes` of a local file as text (never the whole of a large file in memory)."""
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        handle.seek(max(path.stat().st_size - nbytes, 0))
        return handle.read().decode(errors="replace")


def _resume_step_of(text: str) -> int | None:
    return parse_lines(text.splitlines()).resume_step


def _resume_step_of_result(result: ResultRow | None) -> int | None:
    return summary_of(result).resume_step if result else None


def _result(ctx: AttemptContext, row: RunRow, n: int, fetch: bool = True) -> ResultRow | None:
    """The ResultRow of attempt n's log, carrying the run's attempt history; None without a log."""
    import json

    if fetch:
        try:
            ctx.launcher.fetch_logs(JobRef(cluster=ctx.cluster.name, job_id="-",
                                           run_dir=row.run_dir or ""), paths.run_dir(row.id))
        except AzbenchError:
            pass
    log = local_log(row.id, n)
    if not log.exists():
        return None
    result = result_from_run(log, run_id=row.id, cluster=ctx.cluster, nodes=row.nodes,
                             benchmark=row.benchmark)
    summary = json.loads(result.summary_json or "{}")
    summary["attempts"] = [a.model_dump(mode="json", exclude={"id", "run_id"})
                           for a in ctx.store.list_attempts(row.id)]
    return result.model_copy(update={"summary_json": json.dumps(summary), "log_path": result.log_path})


def _finish(ctx: AttemptContext, row: RunRow, n: int, state: RunState, message: str, *, result: ResultRow | None = None,
            end_attempt: bool = True) -> RunOutcome:
    """The run's final state (and its last attempt's, unless already recorded), its result
    stored, all in one transaction."""
    store, result_id = ctx.store, None
    if state == RunState.SUCCEEDED and result is not None and not result.converged:
        state, message = RunState.FAILED, f"job completed but the run did not converge ({result.status})"
    with store.transaction():
        if result is not None:
            result_id, _ = store.add_result(result)
        if end_attempt:
            store.update_attempt(row.id, n, state=AttemptState(state.value), ended_at=utcnow(), message=message,
                                 resumed_from_step=_resume_step_of_result(result))
        store.update_run(row.id, state=state, message=message)
        store.add_event(EventRow(kind=f"run_{state}", cluster=row.cluster, run_id=row.id,
                                 message=message))
    return RunOutcome(run_id=row.id, nodes=row.nodes, repeat=row.repeat_index, state=state,
                      message=message, result_id=result_id,
                      minutes=result.minutes if result is not None else None,
                      log_path=str(local_log(row.id, n)) if result is not None else None,
                      attempts=n, resumed=bool(result and result.resumed))


