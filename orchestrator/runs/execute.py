"""The `azbench run` use case: each run gated, watched, classified, retried, resumed, ingested.

Runs execute one after another (benchmarks need the nodes to themselves). One attempt is: health
gate on the nodes it may use -> submit pinned to the healthy ones -> watch -> classify
(orchestrator.runs.failures) -> retry or finish (monitor.decide_retry). Crash safety: every state
change is in the store before the action it describes (the next attempt's row, with its
excluded nodes, exists before its gate and submission; a hang's class is stored before the
cancel), and one file lock per run keeps two azbench processes from driving the same run. So a
rerun of the same command, or `attach_run`, finds the live sweep and re-watches its job instead
of submitting a duplicate, then finishes the bookkeeping.
"""

from __future__ import annotations

import fcntl
import secrets
from contextlib import contextmanager
from typing import Callable, Iterator

from orchestrator import paths
from orchestrator.clusters.lifecycle import connect, reachable, require_cluster
from orchestrator.specs.run import RunSpec
from orchestrator.errors import ConfigError, NotFoundError, RunFailedError, StoreError
from orchestrator.models import AttemptState, Cluster, JobRef, RunState, local_owner, named_nodes, utcnow
from orchestrator.paths import RunLayout
from orchestrator.recipes.catalog import Recipe, check_params, check_request, get_recipe
from orchestrator.runs.attempts import (
    FINAL,
    FINAL_ATTEMPT,
    AttemptContext,
    RunEvent,
    RunOutcome,
    cluster_gpus_per_node,
    final_failure,
    finish_attempt,
    local_log,
    start_attempt,
)
from orchestrator.runs.failures import Failure, FailureClass, lost_work, with_named_suspects
from orchestrator.runs.monitor import AttemptRecord, Progress, RetryDecision, decide_retry
from orchestrator.store.database import Store
from orchestrator.store.events import RetryData
from orchestrator.store.schema import AttemptRow, RunRow
from orchestrator.runs.launch import container_build
from orchestrator.runs.prepare import check_staged
from orchestrator.runs.preemption import recover
from orchestrator.results.mllog import parse_file


def run_sweep(spec: RunSpec, store: Store, *, on_progress: Callable[[Progress], None] | None = None,
              on_event: Callable[[RunEvent], None] | None = None, poll_interval: float = 1.0,
              reattach: bool = True) -> list[RunOutcome]:
    """Run `spec.recipe` at each node count x repeat; a live sweep of the same spec is resumed.
    A cluster that is deleted (or being deleted) is refused in one line before any login."""
    cluster = reachable(spec.cluster, store)
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
    # The stored spec may come from a pulled snapshot: it is checked as a fresh `run` would check
    # it (a parameter with a line break could otherwise add a line to the next attempt's script).
    try:
        spec = RunSpec.model_validate_json(row.spec_json)
    except ValueError as e:
        raise ConfigError(f"run '{run_id}': its stored run spec is not valid ({str(e).splitlines()[0][:120]})") from None
    recipe = get_recipe(row.recipe)
    spec = spec.model_copy(update={"params": check_params(recipe, spec.params)})
    cluster = reachable(row.cluster, store)
    rows = store.list_runs(sweep_id=row.sweep_id) if row.sweep_id else [row]
    return _drive_all(rows, spec, recipe, cluster, store, on_progress, on_event, poll_interval)


def live_sweep(spec: RunSpec, store: Store, cluster: str) -> list[RunRow]:
    """All runs of the newest sweep with exactly this spec that still has unfinished runs."""
    text = spec.model_dump_json()
    live = [r for r in store.list_runs(cluster=cluster) if r.spec_json == text and r.state not in FINAL]
    if not live:
        return []
    sweep = live[-1].sweep_id
    return store.list_runs(sweep_id=sweep) if sweep else [live[-1]]


def cancel_runs(store: Store, run_ids: list[str]) -> list[str]:
    """Cancel the live job of each unfinished run and record it cancelled; returns job ids."""
    cancelled = []
    for run_id in run_ids:
        row = store.get_run(run_id)
        if row is None or row.state in FINAL:
            continue
        attempts = store.list_attempts(run_id)
        cluster = require_cluster(row.cluster, store, live=False)
        with connect(cluster) as access:
            if attempts and attempts[-1].job_id and attempts[-1].state not in FINAL_ATTEMPT:
                store.update_attempt(run_id, attempts[-1].attempt, state=AttemptState.CANCELLED,
                                     failure_class=FailureClass.CANCELLED.value, ended_at=utcnow())
                access.launcher.cancel(JobRef(cluster=cluster.name, job_id=attempts[-1].job_id))
                cancelled.append(attempts[-1].job_id)
        store.update_run(run_id, state=RunState.CANCELLED, message="cancelled by the user")
    return cancelled


def new_run_id() -> str:
    return f"r{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def require_success(outcomes: list[RunOutcome]) -> None:
    failed = [o for o in outcomes if o.state != RunState.SUCCEEDED]
    if failed:
        first = failed[0]
        raise RunFailedError(f"{len(failed)} of {len(outcomes)} runs failed; first: {first.run_id} "
                             f"({first.nodes} nodes): {first.message}")


def _create_runs(spec: RunSpec, recipe: Recipe, cluster: Cluster, store: Store) -> list[RunRow]:
    sweep = f"s{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    stored = store.get_cluster(cluster.name)
    owner = stored.owner if stored is not None and stored.owner else local_owner()
    rows = []
    with store.transaction():
        for nodes in spec.nodes:
            for repeat in range(spec.repeats):
                run_id = new_run_id()
                rows.append(store.create_run(RunRow(
                    id=run_id, sweep_id=sweep, cluster=cluster.name, recipe=recipe.name,
                    benchmark=recipe.benchmark, nodes=nodes, repeat_index=repeat, state=RunState.QUEUED,
                    spec_json=spec.model_dump_json(), run_dir=RunLayout.of(cluster.workdir, run_id).run_dir,
                    owner=owner)))
    return rows


def _drive_all(rows: list[RunRow], spec: RunSpec, recipe: Recipe, cluster: Cluster, store: Store,
               on_progress: Callable[[Progress], None] | None, on_event: Callable[[RunEvent], None] | None,
               poll: float) -> list[RunOutcome]:
    with connect(cluster) as access:
        if recipe.mlperf is not None and access.shell is not None:  # files on the cluster are readable
            # A Slurm launch runs the squashfs `prepare` built (attempts._mlperf_attempt).
            for nodes in sorted({r.nodes for r in rows}):
                check_staged(recipe, access.launcher, cluster.name,
                             container=container_build(recipe, cluster.sku, nodes),
                             prepare_args=f" --nodes {nodes}")
        ctx = AttemptContext(spec, recipe, cluster, store, access, on_progress, on_event, poll)
        outcomes = []
        for row in rows:
            if row.state in FINAL:
                outcomes.append(_stored_outcome(store, row))
                continue
            with _run_lock(row.id):
                outcomes.append(_drive(ctx, store.get_run(row.id) or row))
        return outcomes


def _drive(ctx: AttemptContext, row: RunRow) -> RunOutcome:
    """Attempts until success or a stop decision; resumes wherever a crash left the run."""
    attempts = ctx.store.list_attempts(row.id)
    cur = attempts[-1] if attempts else None
    if cur is None:
        cur = ctx.store.add_attempt(AttemptRow(run_id=row.id, attempt=1, state=AttemptState.WAITING,
                                               started_at=utcnow()))
    while True:
        if cur.state in FINAL_ATTEMPT:  # a crash between recording a failure and deciding on it
            nxt = _next_attempt(ctx, row, ctx.store.list_attempts(row.id), None)
            if isinstance(nxt, RunOutcome):
                return nxt
            cur = nxt
        if cur.job_id is None:
            cur = start_attempt(ctx, row, cur)
            if cur.state in FINAL_ATTEMPT:
                continue
        failure, done = finish_attempt(ctx, row, cur)
        if done is not None:
            return done
        nxt = _next_attempt(ctx, row, ctx.store.list_attempts(row.id), failure)
        if isinstance(nxt, RunOutcome):
            return nxt
        cur = nxt


def _next_attempt(ctx: AttemptContext, row: RunRow, attempts: list[AttemptRow],
                  failure: Failure | None) -> AttemptRow | RunOutcome:
    """Decide on the last failed attempt: the next attempt's row, or the run's final outcome."""
    last = attempts[-1]
    failure = failure or _stored_failure(last)
    if failure is not None:  # a node only the evidence names is still the one to leave out
        failure = with_named_suspects(failure, last.message or "")
    if failure is None:
        raise StoreError(f"run {row.id}: attempt {last.attempt} ended ({last.state}) with no failure "
                         "recorded, so there is nothing to retry; `azbench logs RUN` shows what it printed")
    history = [AttemptRecord(a.attempt, _stored_failure(a), tuple(a.excluded_nodes))
               for a in attempts[:-1]] + [AttemptRecord(last.attempt, failure, tuple(last.excluded_nodes))]
    elapsed = (utcnow() - attempts[0].started_at).total_seconds() if attempts[0].started_at else 0.0
    decision = decide_retry(history, ctx.spec.retry, elapsed, ctx.cluster.nodes, row.nodes)
    if decision.retry and failure.cls == FailureClass.PREEMPTED:
        stop = recover(ctx, row, failure)
        decision = decision if stop is None else RetryDecision(False, stop)
    if not decision.retry:
        _store_lost_work(ctx, row, last.attempt, None)
        return final_failure(ctx, row, last, failure, decision.reason)
    # Without the checkpoints part (Azure ML) the recipe resumes from its datastore by itself.
    checkpoints = ctx.launcher.parts().checkpoints
    resume_step = checkpoints.latest_checkpoint(row.run_dir or "") if decision.resume and checkpoints else None
    with ctx.store.transaction():
        _store_lost_work(ctx, row, last.attempt, resume_step)
        nxt = ctx.store.add_attempt(AttemptRow(
            run_id=row.id, attempt=last.attempt + 1, state=AttemptState.WAITING, started_at=utcnow(),
            excluded_nodes=list(decision.exclude), resumed_from_step=resume_step or None))
        ctx.store.update_run(row.id, state="retrying", message=failure.describe())
    ctx.event(row, "retry", f"attempt {last.attempt} failed: {failure.describe()}; attempt "
              f"{nxt.attempt} in {decision.backoff_s:g}s"
              + (f" without {', '.join(decision.exclude)}" if decision.exclude else "")
              + (f", resuming from step {resume_step}" if resume_step else ", from scratch"),
              RetryData(failure=failure.cls.value, suspects=list(failure.suspects)))
    ctx.sleep(decision.backoff_s)
    return nxt


def _store_lost_work(ctx: AttemptContext, row: RunRow, n: int, kept_step: int | None) -> None:
    log = local_log(row.id, n)
    if log.exists():
        steps, seconds = lost_work(parse_file(log).step_times, kept_step)
        ctx.store.update_attempt(row.id, n, lost_steps=steps, lost_seconds=seconds)


def _stored_failure(attempt: AttemptRow) -> Failure | None:
    if attempt.state == "succeeded" or not attempt.failure_class:
        return None
    # its line (failure.describe(): "cls on node3 (...): evidence") names its suspects
    suspects = named_nodes(attempt.message or "") or tuple(attempt.excluded_nodes)
    return Failure(FailureClass(attempt.failure_class), suspects, "")


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


__all__ = ["FINAL", "RunOutcome", "RunEvent", "run_sweep", "attach_run", "cancel_runs", "live_sweep",
           "require_success", "cluster_gpus_per_node"]
