"""Watching a job and deciding what comes next: pure decisions plus one thin watch loop.

`decide()` says, after one poll, whether to keep waiting, stop (the job ended), or cancel (a hang:
no first training step within `startup_grace` of the job starting, or no new step for
`hang_timeout` after that; or the run's deadline). `decide_retry()` says, after a
failed attempt, whether to retry, after what bounded backoff, without which nodes and resuming
from a checkpoint or not. `watch()` polls the launcher (one batched scheduler call per interval)
with an injected clock and sleep; when the cluster is unreachable (login node rebooting, sshd
restarted) it keeps polling until `unreachable_s` passes, and never calls that a hang.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol, Sequence

from orchestrator.specs.run import RetryPolicy
from orchestrator.errors import LaunchError, RemoteError
from orchestrator.models import JobRef, JobState, JobStatus
from orchestrator.runs.failures import NOT_EXCLUDED, Failure, infra_retryable
from orchestrator.results.mllog import parse_lines
from orchestrator.results.stragglers import spread

BACKOFF_CAP_S = 60.0
_STOP = re.compile(r"AZBENCH_ATTEMPT_STOP \d+ rc=(-?\d+)")
UNKNOWN_GRACE_POLLS = 30  # consecutive "not listed" polls before a job counts as lost


class Action(str, Enum):
    WAIT = "wait"
    DONE = "done"
    CANCEL_HANG = "cancel_hang"
    CANCEL_DEADLINE = "cancel_deadline"


@dataclass(frozen=True)
class Progress:
    """What the user sees while a job runs."""

    run_id: str
    attempt: int
    nodes: int
    state: JobState
    step: int | None = None
    eval_value: float | None = None
    elapsed_s: float = 0.0
    eta_s: float | None = None
    note: str = ""
    slowest: str = ""  # "node7 x1.42": the node with the highest compute time per step vs median


@dataclass
class WatchState:
    started: float
    last_progress_at: float
    last_step: int | None = None
    history: list[JobState] = field(default_factory=list)
    unreachable_since: float | None = None


class Poller(Protocol):
    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]: ...


# (step, eval value, eta[, slowest node]): a reader may leave out the slowest node
ProgressReader = Callable[[], tuple[int | None, float | None, float | None] | tuple[int | None, float | None, float | None, str]]


def decide(state: JobState, watch: WatchState, now: float, *, hang_timeout: float,
           deadline_s: float, startup_grace: float | None = None) -> Action:
    """Pure: what to do after one poll. Hangs count only while the job is running: until its
    first training step the limit is `startup_grace` (model load, warm-up: a 405B job's first
    step comes ~11 min after its first MLLOG line), then `hang_timeout` between steps.
    `startup_grace` None: `hang_timeout` from the start."""
    if state.terminal:
        return Action.DONE
    if now - watch.started > deadline_s:
        return Action.CANCEL_DEADLINE
    if state == JobState.RUNNING and now - watch.last_progress_at > hang_limit(watch, hang_timeout, startup_grace):
        return Action.CANCEL_HANG
    return Action.WAIT


def hang_limit(watch: WatchState, hang_timeout: float, startup_grace: float | None) -> float:
    """The silence allowed now: the startup grace before the first step, the hang timeout after."""
    return startup_grace if watch.last_step is None and startup_grace is not None else hang_timeout


@dataclass(frozen=True)
class AttemptRecord:
    """One past attempt as the retry decision sees it."""

    attempt: int
    failure: Failure | None
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    reason: str
    backoff_s: float = 0.0
    exclude: tuple[str, ...] = ()
    resume: bool = False


def decide_retry(history: Sequence[AttemptRecord], policy: RetryPolicy, elapsed_s: float,
                 cluster_nodes: int | None = None, nodes_needed: int = 1) -> RetryDecision:
    """Pure: retry the run after its last failed attempt in `history`, or stop, and why.

    Excludes every node any failed attempt suspected (never spend a retry on a known-bad node;
    evicted spot nodes are not bad: failures.NOT_EXCLUDED),
    bounded by max_attempts, max_duration and the nodes left to run on.
    """
    last = history[-1]
    failure = last.failure
    if failure is None:
        return RetryDecision(False, "the attempt succeeded")
    if not infra_retryable(failure.cls, policy.on):
        return RetryDecision(False, f"{failure.cls.value} is not retried ({failure.info.meaning})")
    if last.attempt >= policy.max_attempts:
        return RetryDecision(False, f"max_attempts ({policy.max_attempts}) used up")
    wait = backoff_s(policy, last.attempt)
    if elapsed_s + wait >= policy.max_duration:
        return RetryDecision(False, f"max_duration ({policy.max_duration}s) would pass")
    exclude = tuple(sorted({n for rec in history if rec.failure and rec.failure.cls not in NOT_EXCLUDED
                            for n in rec.failure.suspects} | set(last.excluded)))
    if cluster_nodes is not None and cluster_nodes - len(exclude) < nodes_needed:
        return RetryDecision(False, f"only {cluster_nodes - len(exclude)} nodes left after "
                                    f"excluding {', '.join(exclude)}; {nodes_needed} needed")
    return RetryDecision(True, f"retrying after {failure.cls.value}", wait, exclude,
                         resume=policy.resume == "checkpoint")


def backoff_s(policy: RetryPolicy, attempt: int, cap: float = BACKOFF_CAP_S) -> float:
    """Exponential backoff (tenacity's wait_exponential): backoff_s * 2**(attempt-1), capped."""
    return min(cap, float(policy.backoff_s * 2 ** max(attempt - 1, 0)))


def watch(ref: JobRef, poller: Poller, read_progress: ProgressReader, *, run_id: str,
          attempt: int, nodes: int, hang_timeout: float, deadline_s: float,
          startup_grace: float | None = None, interval: float = 1.0, on_progress: Callable[[Progress], None] | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep,
          unreachable_s: float = 600.0) -> tuple[JobStatus, Action]:
    """Poll until `decide` says stop; returns the last status and why the loop ended.
    `startup_grace`: the hang limit until the first step (see decide).

    RemoteError/LaunchError from a poll or a progress read mean "cannot see the cluster right
    now": the loop reports it, keeps the hang clock paused, and re-raises only after
    `unreachable_s` without one good poll (the job itself keeps running; attach later).
    """
    now = clock()
    ws = WatchState(started=now, last_progress_at=now)
    while True:
        try:
            status = poller.poll([ref])[ref.job_id]
            running = status.state == JobState.RUNNING
            step, value, eta, *extra = read_progress() if running else (None, None, None)
        except (RemoteError, LaunchError) as exc:
            _unreachable(ws, clock(), unreachable_s, exc, on_progress, run_id, attempt, nodes)
            sleep(interval)
            continue
        now = clock()
        if ws.unreachable_since is not None:  # blind time is not hang time
            ws.last_progress_at += now - ws.unreachable_since
            ws.unreachable_since = None
        ws.history.append(status.state)
        if not running:  # the hang clock starts when the job does, not when it was queued
            ws.last_progress_at = now
        if step is not None and step != ws.last_step:
            ws.last_step, ws.last_progress_at = step, now
        if on_progress:
            on_progress(Progress(run_id, attempt, nodes, status.state, ws.last_step, value,
                                 now - ws.started, eta, slowest=str(extra[0]) if extra else ""))
        action = decide(status.state, ws, now, hang_timeout=hang_timeout, deadline_s=deadline_s,
                        startup_grace=startup_grace)
        if action != Action.WAIT:
            return status, action
        sleep(interval)


def _unreachable(ws: WatchState, now: float, limit: float, exc: Exception,
                 on_progress: Callable[[Progress], None] | None, run_id: str, attempt: int,
                 nodes: int) -> None:
    if ws.unreachable_since is None:
        ws.unreachable_since = now
    if now - ws.unreachable_since > limit:
        raise RemoteError(f"cluster unreachable for {now - ws.unreachable_since:.0f}s while "
                          f"watching {run_id}: {exc}", hint=f"azbench run --attach {run_id}")
    if on_progress:
        on_progress(Progress(run_id, attempt, nodes, JobState.UNKNOWN, ws.last_step, None,
                             now - ws.started, None, note=f"reconnecting: {exc}"))


def job_status_from_log(status: JobStatus, log_text: str) -> JobStatus:
    """A job the scheduler no longer lists but whose script logged its exit is finished."""
    match = _STOP.search(log_text)
    if status.state != JobState.UNKNOWN or match is None:
        return status
    rc = int(match.group(1))
    return status.model_copy(update={"state": JobState.COMPLETED if rc == 0 else JobState.FAILED,
                                      "exit_code": rc, "reason": "from the log's exit line"})


class JobLost(Exception):
    """The scheduler no longer lists the job and its log has no exit line."""

    def __init__(self, status: JobStatus) -> None:
        super().__init__(status.reason)
        self.status = status


class LogReader(Poller, Protocol):
    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes: ...


class LogPoller:
    """launcher.poll, but a job the scheduler forgot (MinJobAge passed, say) is settled by the
    exit line its batch script wrote to the log; JobLost after UNKNOWN_GRACE_POLLS without one.
    Without live logs (`live` False) nothing settles a forgotten job but the grace."""

    def __init__(self, launcher: LogReader, log: str, live: bool = True) -> None:
        self.launcher, self.log, self.live, self.unknown = launcher, log, live, 0

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        statuses = self.launcher.poll(refs)
        ref = refs[0]
        status = statuses[ref.job_id]
        if status.state != JobState.UNKNOWN:
            self.unknown = 0
            return statuses
        tail = self.launcher.tail(self.log, nbytes=4096).decode(errors="replace") if self.live else ""
        settled = job_status_from_log(status, tail)
        self.unknown += 1
        if settled.state == JobState.UNKNOWN and self.unknown >= UNKNOWN_GRACE_POLLS:
            raise JobLost(settled)
        return {**statuses, ref.job_id: settled}


def no_progress() -> tuple[None, None, None]:
    """The progress of a job whose log cannot be read while it runs: nothing known."""
    return None, None, None


def progress_reader(launcher: LogReader, log_path: str, nbytes: int = 16384) -> ProgressReader:
    """(last step, last eval value, eta, slowest node) from the tail of a remote MLLOG file;
    a reader may return only the first three."""

    def read() -> tuple[int | None, float | None, float | None, str]:
        tail = launcher.tail(log_path, nbytes=nbytes).decode(errors="replace")
        summary = parse_lines(tail.splitlines())
        step = summary.step_times[-1].step if summary.step_times else None
        value = summary.eval_points[-1].value if summary.eval_points else None
        nodes = spread(summary.node_step_times)
        slowest = f"{nodes.slowest} x{nodes.ratio:.2f}" if nodes and nodes.nodes > 1 else ""
        return step, value, None, slowest
    return read

