"""The `azbench run` use case: each run gated, watched, classified, retried, resumed, ingested.

Runs execute one after another (benchmarks need the nodes to themselves). One attempt is: health
gate on the nodes it may use -> sbatch pinned to the healthy ones -> watch -> classify
(orchestrator.failures) -> retry or finish (monitor.decide_retry). Crash safety: every state
change is in the store before the action it describes (the next attempt's row, with its
excluded nodes, exists before its gate and sbatch; a hang's class is stored before scancel), and
one file lock per run keeps two azbench processes from driving the same run. So a rerun of the
same command, or `attach_run`, finds the live sweep and re-watches its Slurm job instead of
submitting a duplicate, then finishes the bookkeeping.
"""

from __future__ import annotations

import fcntl
import re
import secrets
import shlex
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from orchestrator import paths
from orchestrator.access import launcher_for, recipe_python, runner_for
from orchestrator.errors import AzbenchError, ConfigError, NotFoundError, RunFailedError
from orchestrator.failures import Failure, FailureClass, Observation, classify, lost_work
from orchestrator.lifecycle import require_cluster
from orchestrator.models import AttemptSpec, Cluster, JobRef, JobState, JobStatus, utcnow
from orchestrator.monitor import (Action, AttemptRecord, JobLost, LogPoller, Progress, decide_retry,
                                  progress_reader, watch)
from orchestrator.recipes import Recipe, check_request, get_recipe, render_command
from orchestrator.specs import RunSpec
from orchestrator.store import Store
from orchestrator.store_schema import AttemptRow, EventRow, RunRow

FINAL = {"succeeded", "failed", "cancelled"}
_CKPT = re.compile(r"^(?!\.).*?(\d+)\D*$")


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
    attempts: int = 1
    resumed: bool = False


@dataclass(frozen=True)
class RunEvent:
    """A line for the user: reattached, gate verdicts, retries."""

    run_id: str
    kind: str
    message: str


@dataclass
class _Ctx:
    spec: RunSpec
    recipe: Recipe
    cluster: Cluster
    store: Store
    launcher: object
    runner: object
    on_progress: Callable[[Progress], None] | None
    on_event: Callable[[RunEvent], None] | None
    poll: float
    sleep: Callable[[float], None] = time.sleep

    def event(self, run: RunRow, kind: str, message: str, **data: object) -> None:
        self.store.add_event(EventRow(kind=kind, cluster=run.cluster, run_id=run.id,
                                      message=message, data=data))
        if self.on_event:
            self.on_event(RunEvent(run.id, kind, message))


def run_sweep(spec: RunSpec, store: Store, *, on_progress: Callable[[Progress], None] | None = None,
              on_event: Callable[[RunEvent], None] | None = None, poll_interval: float = 1.0,
              reattach: bool = True) -> list[RunOutcome]:
    """Run `spec.recipe` at each node count x repeat; a live sweep of the same spec is resumed."""
    cluster = require_cluster(spec.cluster, store)
    recipe = get_recipe(spec.recipe)
    for nodes in spec.nodes:
        check_request(recipe, cluster.sku, nodes, cluster.nodes)
    rows = live_sweep(spec, store, cluster.name) if reattach else []
    if rows and on_event:
        on_event(RunEvent(rows[0].id, "reattach", f"reattaching to sweep {rows[0].sweep_id}"))
    rows = rows or _create_runs(spec, recipe, cluster, store)
    return _drive_all(rows, spec, recipe, cluster, store, on_progress, on_event, poll_interval)


def attach_run(run_id: str, store: Store, *, on_progress: Callable[[Progress], None] | None = None,
               on_event: Callable[[RunEvent], None] | None = None,
               poll_interval: float = 1.0) -> list[RunOutcome]:
    """Re-watch the sweep that `run_id` belongs to; finished runs are reported from the store."""
    row = store.get_run(run_id)
    if row is None or not row.spec_json:
        raise NotFoundError(f"no run '{run_id}'", hint="see `azbench status`")
    spec = RunSpec.model_validate_json(row.spec_json)
    cluster = require_cluster(row.cluster, store)
    rows = store.list_runs(sweep_id=row.sweep_id) if row.sweep_id else [row]
    return _drive_all(rows, spec, get_recipe(row.recipe), cluster, store, on_progress, on_event,
                      poll_interval)


def live_sweep(spec: RunSpec, store: Store, cluster: str) -> list[RunRow]:
    """All runs of the newest sweep with exactly this spec that still has unfinished runs."""
    text = spec.model_dump_json()
    live = [r for r in store.list_runs(cluster=cluster) if r.spec_json == text and r.state not in FINAL]
    if not live:
        return []
    sweep = live[-1].sweep_id
    return store.list_runs(sweep_id=sweep) if sweep else [live[-1]]


def cancel_runs(store: Store, run_ids: list[str]) -> list[str]:
    """scancel the live job of each unfinished run and record it cancelled; returns job ids."""
    cancelled = []
    for run_id in run_ids:
        row = store.get_run(run_id)
        if row is None or row.state in FINAL:
            continue
        attempts = store.list_attempts(run_id)
        cluster = require_cluster(row.cluster, store, live=False)
        runner = runner_for(cluster)
        try:
            if attempts and attempts[-1].job_id and attempts[-1].state not in FINAL:
                store.update_attempt(run_id, attempts[-1].attempt, state="cancelled",
                                     failure_class=FailureClass.CANCELLED.value, ended_at=utcnow())
                launcher_for(cluster, runner).cancel(JobRef(cluster=cluster.name,
                                                            job_id=attempts[-1].job_id))
                cancelled.append(attempts[-1].job_id)
        finally:
            runner.close()
        store.update_run(run_id, state="cancelled", message="cancelled by the user")
    return cancelled


def new_run_id() -> str:
    return f"r{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def require_success(outcomes: list[RunOutcome]) -> None:
    failed = [o for o in outcomes if o.state != "succeeded"]
    if failed:
        first = failed[0]
        raise RunFailedError(f"{len(failed)} of {len(outcomes)} runs failed; first: {first.run_id} "
                             f"({first.nodes} nodes): {first.message}")


def cluster_gpus_per_node(cluster: Cluster) -> int:
    from orchestrator.catalog import lookup
    return lookup(cluster.sku).gpus_per_vm


# -- one sweep, one run --------------------------------------------------------------------


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


def _drive_all(rows, spec, recipe, cluster, store, on_progress, on_event, poll) -> list[RunOutcome]:
    runner = runner_for(cluster)
    try:
        ctx = _Ctx(spec, recipe, cluster, store, launcher_for(cluster, runner), runner,
                   on_progress, on_event, poll)
        outcomes = []
        for row in rows:
            if row.state in FINAL:
                outcomes.append(_stored_outcome(store, row))
                continue
            with _run_lock(row.id):
                outcomes.append(_drive(ctx, store.get_run(row.id) or row))
        return outcomes
    finally:
        runner.close()


def _drive(ctx: _Ctx, row: RunRow) -> RunOutcome:
    """Attempts until success or a stop decision; resumes wherever a crash left the run."""
    attempts = ctx.store.list_attempts(row.id)
    cur = attempts[-1] if attempts else None
    if cur is None:
        cur = ctx.store.add_attempt(AttemptRow(run_id=row.id, attempt=1, state="waiting",
                                               started_at=utcnow()))
    while True:
        if cur.state in FINAL:  # a crash between recording a failure and deciding on it
            nxt = _next_attempt(ctx, row, ctx.store.list_attempts(row.id), None)
            if isinstance(nxt, RunOutcome):
                return nxt
            cur = nxt
        if cur.job_id is None:
            cur = start_attempt(ctx, row, cur)
            if cur.state in FINAL:
                continue
        failure, done = finish_attempt(ctx, row, cur)
        if done is not None:
            return done
        nxt = _next_attempt(ctx, row, ctx.store.list_attempts(row.id), failure)
        if isinstance(nxt, RunOutcome):
            return nxt
        cur = nxt


def _next_attempt(ctx: _Ctx, row: RunRow, attempts: list[AttemptRow],
                  failure: Failure | None) -> AttemptRow | RunOutcome:
    """Decide on the last failed attempt: the next attempt's row, or the run's final outcome."""
    last = attempts[-1]
    failure = failure or _stored_failure(last)
    history = [AttemptRecord(a.attempt, _stored_failure(a), tuple(a.excluded_nodes))
               for a in attempts[:-1]] + [AttemptRecord(last.attempt, failure, tuple(last.excluded_nodes))]
    elapsed = (utcnow() - attempts[0].started_at).total_seconds() if attempts[0].started_at else 0.0
    decision = decide_retry(history, ctx.spec.retry, elapsed, ctx.cluster.nodes, row.nodes)
    if not decision.retry:
        _store_lost_work(ctx, row, last.attempt, None)
        return final_failure(ctx, row, last, failure, decision.reason)
    resume_step = newest_checkpoint_step(ctx.runner, row.run_dir or "") if decision.resume else None
    with ctx.store.transaction():
        _store_lost_work(ctx, row, last.attempt, resume_step)
        nxt = ctx.store.add_attempt(AttemptRow(
            run_id=row.id, attempt=last.attempt + 1, state="waiting", started_at=utcnow(),
            excluded_nodes=list(decision.exclude), resumed_from_step=resume_step or None))
        ctx.store.update_run(row.id, state="retrying", message=failure.describe())
    ctx.event(row, "retry", f"attempt {last.attempt} failed: {failure.describe()}; attempt "
              f"{nxt.attempt} in {decision.backoff_s:g}s"
              + (f" without {', '.join(decision.exclude)}" if decision.exclude else "")
              + (f", resuming from step {resume_step}" if resume_step else ", from scratch"),
              failure=failure.cls.value, suspects=list(failure.suspects))
    ctx.sleep(decision.backoff_s)
    return nxt


def _store_lost_work(ctx: _Ctx, row: RunRow, n: int, kept_step: int | None) -> None:
    from orchestrator.mllog import parse_file
    log = local_log(row.id, n)
    if log.exists():
        steps, seconds = lost_work(parse_file(log).step_times, kept_step)
        ctx.store.update_attempt(row.id, n, lost_steps=steps, lost_seconds=seconds)


def newest_checkpoint_step(runner, run_dir: str) -> int | None:
    """The highest step number among complete (non-hidden) files in <run_dir>/checkpoints."""
    out = runner.run(f"ls -1 {shlex.quote(run_dir + '/checkpoints')} 2>/dev/null || true", timeout=60)
    steps = [int(m.group(1)) for name in out.stdout.split() if (m := _CKPT.match(name))
             and not name.endswith((".tmp", ".partial"))]
    return max(steps) if steps else None


def _stored_failure(attempt: AttemptRow) -> Failure | None:
    if attempt.state == "succeeded" or not attempt.failure_class:
        return None
    return Failure(FailureClass(attempt.failure_class), tuple(attempt.excluded_nodes), "")


def _stored_outcome(store: Store, row: RunRow) -> RunOutcome:
    attempts = store.list_attempts(row.id)
    results = [r for r in store.list_results() if r.run_id == row.id]
    last = results[-1] if results else None
    return RunOutcome(run_id=row.id, nodes=row.nodes, repeat=row.repeat_index, state=row.state,
                      message=row.message or "", result_id=last.id if last else None,
                      minutes=last.minutes if last else None,
                      log_path=last.log_path if last else None, attempts=len(attempts),
                      resumed=bool(last and last.resumed))


@contextmanager
def _run_lock(run_id: str) -> Iterator[None]:
    """One driver per run: an flock the kernel drops when its holder dies (even SIGKILL)."""
    path = paths.ensure_home() / "locks" / f"{run_id}.lock"
    path.parent.mkdir(exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"run {run_id} is being watched by another azbench process",
                              hint="wait for it, or stop it first") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def attempt_spec(row: RunRow, spec: RunSpec, recipe: Recipe, cluster: Cluster, attempt: int,
                 resume: bool, exclude: list[str]) -> AttemptSpec:
    run_dir = row.run_dir or f"{cluster.workdir}/runs/{row.id}"
    command = render_command(recipe, run_dir=run_dir, nodes=row.nodes, params=spec.params,
                             python=recipe_python(cluster))
    return AttemptSpec(run_id=row.id, attempt=attempt, recipe=recipe.name, nodes=row.nodes,
                       run_dir=run_dir, command=command, env=dict(recipe.launch.env),
                       exclude=exclude, resume=resume,
                       time_limit_min=min(spec.time_limit_min, recipe.launch.time_limit_min),
                       tasks_per_node=recipe.launch.tasks_per_node,
                       gpus_per_node=cluster_gpus_per_node(cluster))


def local_log(run_id: str, attempt: int) -> Path:
    return paths.run_dir(run_id) / f"attempt-{attempt}" / "train.log"



# -- one attempt ---------------------------------------------------------------------------


def start_attempt(ctx: _Ctx, row: RunRow, cur: AttemptRow) -> AttemptRow:
    """Gate, then sbatch pinned to the healthy nodes; a job already submitted is adopted."""
    store, n = ctx.store, cur.attempt
    if cur.state == "submitting":  # crashed between the store write and sbatch's answer?
        job_id = _job_by_name(ctx, row, n)
        if job_id:
            return _submitted(ctx, row, n, job_id)
    excluded, pin = list(cur.excluded_nodes), list(cur.excluded_nodes)
    if ctx.spec.health.enabled:
        gated = _gate(ctx, row, cur)
        if isinstance(gated, AttemptRow):
            return gated
        excluded, pin = gated
    with store.transaction():
        store.update_attempt(row.id, n, state="submitting", excluded_nodes=excluded)
        store.update_run(row.id, state="submitting")
    resume = n > 1 and ctx.spec.retry.resume == "checkpoint"
    aspec = attempt_spec(row, ctx.spec, ctx.recipe, ctx.cluster, n, resume, pin)
    try:
        ref = ctx.launcher.submit(aspec, recipe_dir=ctx.recipe.code_path)
    except AzbenchError as exc:
        return _record_failure(ctx, row, n, Failure(FailureClass.CONFIG_ERROR, (), f"submit: {exc}"))
    return _submitted(ctx, row, n, ref.job_id)


def finish_attempt(ctx: _Ctx, row: RunRow, cur: AttemptRow) -> tuple[Failure | None, RunOutcome | None]:
    """Watch the attempt's job to its end and classify it: (failure, None) or (None, outcome)."""
    n, run_dir = cur.attempt, row.run_dir or ""
    ref = JobRef(cluster=ctx.cluster.name, job_id=cur.job_id or "", run_dir=run_dir)
    log = f"{run_dir}/attempt-{n}/train.log"
    status, intent = _watch_attempt(ctx, row, cur, ref, log)
    text = _fetch_attempt_log(ctx, row, n, log)
    result = None
    if status.state == JobState.COMPLETED and status.exit_code in (0, None):
        result = _result(ctx, row, n)
    down = [name for name, info in ctx.launcher.node_states().items() if not info.usable]
    failure = classify(Observation(
        state=status.state, exit_code=status.exit_code, nodes=list(status.nodes), log_tail=text,
        down_nodes=down, tasks_per_node=ctx.recipe.launch.tasks_per_node,
        hung=intent == FailureClass.HANG, deadline=intent == FailureClass.DEADLINE,
        converged=result.converged if result is not None else None))
    if failure is None and result is not None:
        return None, _finish(ctx, row, n, "succeeded", "completed", result=result)
    failure = failure or Failure(FailureClass.APP_ERROR, (), "no result")
    _record_failure(ctx, row, n, failure, summary_step=_resume_step_of(text))
    return failure, None


def final_failure(ctx: _Ctx, row: RunRow, last: AttemptRow, failure: Failure | None,
                  reason: str) -> RunOutcome:
    what = failure.describe() if failure else "failed"
    users = failure is not None and not failure.retryable
    message = f"{what} [the user's error: not retried]" if users else f"{what} [not retried: {reason}]"
    result = _result(ctx, row, last.attempt)
    return _finish(ctx, row, last.attempt, "failed", message, result=result, attempt_state=None)


def _gate(ctx: _Ctx, row: RunRow, cur: AttemptRow) -> tuple[list[str], list[str]] | AttemptRow:
    from orchestrator.health import choose_nodes, run_gate
    store, n = ctx.store, cur.attempt
    with store.transaction():
        store.update_attempt(row.id, n, state="health_check")
        store.update_run(row.id, state="health_check")
    infos = ctx.launcher.node_states()
    gate = run_gate(ctx.launcher, ctx.runner, ctx.cluster, run_id=row.id, attempt=n,
                    run_dir=row.run_dir or "", python=recipe_python(ctx.cluster),
                    nodes=choose_nodes(infos, cur.excluded_nodes, row.nodes),
                    policy=ctx.spec.health, poll_interval=min(ctx.poll, 0.5))
    excluded = sorted(set(cur.excluded_nodes) | set(gate.failed))
    verdict = "; ".join(f"{node}: {why}" for node, why in sorted(gate.failed.items()))
    ctx.event(row, "health_gate", f"attempt {n}: {len(gate.healthy)}/{len(gate.checked)} nodes "
              f"healthy in {gate.seconds:.1f}s" + (f"; excluded {verdict}" if verdict else "")
              + (f"; {gate.fabric}" if gate.fabric else ""),
              failed=gate.failed, busbw_gbps=gate.busbw_gbps, job_id=gate.job_id)
    if gate.fabric or len(gate.healthy) < row.nodes:
        store.update_attempt(row.id, n, excluded_nodes=excluded)
        why = gate.fabric or f"{len(gate.healthy)} healthy nodes, {row.nodes} needed"
        return _record_failure(ctx, row, n, Failure(FailureClass.HEALTH_GATE, tuple(gate.failed), why))
    everyone = set(infos) | set(ctx.cluster.node_names)
    return excluded, sorted(everyone - set(gate.healthy))


def _submitted(ctx: _Ctx, row: RunRow, n: int, job_id: str) -> AttemptRow:
    with ctx.store.transaction():
        cur = ctx.store.update_attempt(row.id, n, job_id=job_id, state="pending")
        ctx.store.update_run(row.id, state="running", job_id=job_id)
    return cur


def _watch_attempt(ctx: _Ctx, row: RunRow, cur: AttemptRow, ref: JobRef,
                   log: str) -> tuple[JobStatus, FailureClass | None]:
    """The job's final status, and the class azbench itself stored before cancelling it."""
    intent = FailureClass(cur.failure_class) if cur.failure_class else None
    if intent is None:
        started = cur.started_at or utcnow()
        first = ctx.store.list_attempts(row.id)[0].started_at or started
        left = ctx.spec.retry.max_duration - (utcnow() - first).total_seconds()
        try:
            status, action = watch(ref, LogPoller(ctx.launcher, ctx.runner, log), progress_reader(ctx.runner, log),
                                   run_id=row.id, attempt=cur.attempt, nodes=row.nodes,
                                   hang_timeout=ctx.spec.retry.hang_timeout, deadline_s=max(left, 0),
                                   interval=ctx.poll, on_progress=ctx.on_progress)
        except JobLost as lost:
            return lost.status, None
        if action == Action.DONE:
            return status, None
        intent = FailureClass.HANG if action == Action.CANCEL_HANG else FailureClass.DEADLINE
        # Stored before scancel: a crash now still knows this was our cancel, not a user's.
        ctx.store.update_attempt(row.id, cur.attempt, failure_class=intent.value,
                                 message=f"cancelling: {intent.value}")
    ctx.launcher.cancel(ref)
    return _final_status(ctx, ref), intent


def _final_status(ctx: _Ctx, ref: JobRef, tries: int = 60) -> JobStatus:
    status = ctx.launcher.poll([ref])[ref.job_id]
    for _ in range(tries):
        if status.state.terminal or status.state == JobState.UNKNOWN:
            break
        ctx.sleep(ctx.poll)
        status = ctx.launcher.poll([ref])[ref.job_id]
    return status


def _record_failure(ctx: _Ctx, row: RunRow, n: int, failure: Failure,
                    summary_step: int | None = None) -> AttemptRow:
    fields = dict(state="failed", failure_class=failure.cls.value, ended_at=utcnow(),
                  message=failure.describe())
    if summary_step is not None:
        fields["resumed_from_step"] = summary_step
    return ctx.store.update_attempt(row.id, n, **fields)


def _job_by_name(ctx: _Ctx, row: RunRow, n: int) -> str | None:
    name = f"azbench-{row.id}-a{n}"
    out = ctx.runner.run(f"squeue -h --states=all --name={shlex.quote(name)} -o %i", timeout=60)
    ids = [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]
    return ids[-1] if ids else None


def _fetch_attempt_log(ctx: _Ctx, row: RunRow, n: int, remote: str) -> str:
    """The attempt's train.log (copied home for lost-work maths) plus its Slurm output tail."""
    local = local_log(row.id, n)
    try:
        ctx.runner.get(remote, local)
    except AzbenchError:
        pass
    extra = ctx.runner.run(f"tail -c 8192 {shlex.quote(str(Path(remote).parent))}/slurm-*.out "
                           "2>/dev/null || true", timeout=60).stdout
    head = local.read_text(errors="replace")[-65536:] if local.exists() else ""
    return head + "\n" + extra


def _resume_step_of(text: str) -> int | None:
    from orchestrator.mllog import parse_lines
    return parse_lines(text.splitlines()).resume_step


def _resume_step_of_result(result) -> int | None:
    import json
    return json.loads(result.summary_json or "{}").get("resume_step") if result else None


def _result(ctx: _Ctx, row: RunRow, n: int, fetch: bool = True):
    """The ResultRow of attempt n's log, carrying the run's attempt history; None without a log."""
    import json

    from orchestrator.ingest import result_from_run
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


def _finish(ctx: _Ctx, row: RunRow, n: int, state: str, message: str, *, result=None,
            attempt_state: str | None = "same") -> RunOutcome:
    store, result_id = ctx.store, None
    if state == "succeeded" and result is not None and not result.converged:
        state, message = "failed", f"job completed but the run did not converge ({result.status})"
    with store.transaction():
        if result is not None:
            result_id, _ = store.add_result(result)
        if attempt_state is not None:
            store.update_attempt(row.id, n, state=state, ended_at=utcnow(), message=message,
                                 resumed_from_step=_resume_step_of_result(result))
        store.update_run(row.id, state=state, message=message)
        store.add_event(EventRow(kind=f"run_{state}", cluster=row.cluster, run_id=row.id,
                                 message=message))
    return RunOutcome(run_id=row.id, nodes=row.nodes, repeat=row.repeat_index, state=state,
                      message=message, result_id=result_id,
                      minutes=result.minutes if result is not None else None,
                      log_path=str(local_log(row.id, n)) if result is not None else None,
                      attempts=n, resumed=bool(result and result.resumed))


__all__ = ["RunOutcome", "RunEvent", "run_sweep", "attach_run", "cancel_runs", "live_sweep",
           "require_success", "newest_checkpoint_step"]
