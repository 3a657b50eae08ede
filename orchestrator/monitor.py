"""Watching a job: a pure `decide(...)` and a thin watch loop with an injected clock and sleep.

The loop polls the launcher (one batched scheduler call per interval), reads training progress
from the MLLOG tail, reports it through a callback, and stops on a terminal state, a hang (no
new progress for `hang_timeout`), or the run's deadline. Retry decisions build on `decide`.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol, Sequence

from orchestrator.models import JobRef, JobState, JobStatus


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


@dataclass
class WatchState:
    started: float
    last_progress_at: float
    last_step: int | None = None
    history: list[JobState] = field(default_factory=list)


class Poller(Protocol):
    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]: ...


ProgressReader = Callable[[], tuple[int | None, float | None, float | None]]


def decide(state: JobState, watch: WatchState, now: float, *, hang_timeout: float,
           deadline_s: float) -> Action:
    """Pure: what to do after one poll. Hangs count only while the job is running."""
    if state.terminal:
        return Action.DONE
    if now - watch.started > deadline_s:
        return Action.CANCEL_DEADLINE
    if state == JobState.RUNNING and now - watch.last_progress_at > hang_timeout:
        return Action.CANCEL_HANG
    return Action.WAIT


def watch(ref: JobRef, poller: Poller, read_progress: ProgressReader, *, run_id: str,
          attempt: int, nodes: int, hang_timeout: float, deadline_s: float,
          interval: float = 1.0, on_progress: Callable[[Progress], None] | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> tuple[JobStatus, Action]:
    """Poll until `decide` says stop; returns the last status and why the loop ended."""
    now = clock()
    ws = WatchState(started=now, last_progress_at=now)
    while True:
        status = poller.poll([ref])[ref.job_id]
        now = clock()
        ws.history.append(status.state)
        step, value, eta = read_progress() if status.state == JobState.RUNNING else (None, None, None)
        if step is not None and step != ws.last_step:
            ws.last_step, ws.last_progress_at = step, now
        if on_progress:
            on_progress(Progress(run_id, attempt, nodes, status.state, ws.last_step, value,
                                 now - ws.started, eta))
        action = decide(status.state, ws, now, hang_timeout=hang_timeout, deadline_s=deadline_s)
        if action != Action.WAIT:
            return status, action
        sleep(interval)


def tail_command(path: str, nbytes: int = 16384) -> str:
    return f"tail -c {int(nbytes)} {shlex.quote(path)} 2>/dev/null || true"
