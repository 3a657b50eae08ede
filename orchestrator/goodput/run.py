"""A run's goodput: its wall time, from the first attempt's start to the last one's end (now while
it runs), split into RUN_CATEGORIES, each from its own source (model.RUN_SOURCES).

Per attempt, the store's marks (started_at, gate_started_at, submitted_at, ended_at), the batch
script's AZBENCH_ATTEMPT_START/STOP lines and the MLLOG of its fetched train.log give its phases:
gate, queue, init (job start to run_start), training (run_start to run_stop, or to the failure),
teardown. Over them lie evaluation (eval_start..eval_stop) and checkpoints (azbench_checkpoint);
over those, a failed attempt's lost work (from the checkpoint the next attempt resumed from, or
run_start when none was kept, to the failure: its last MLLOG event); over everything the restart
overhead (from the failure to the next attempt's run_start, or to the attempt's end when nothing
retried), both attributed to the failure's class. What no source covers stays `unattributed`. The categories add up to the wall time by
construction (timeline.partition).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from orchestrator import paths
from orchestrator.errors import NotFoundError
from orchestrator.goodput.model import (LOST_WORK, RESTART, RUN_CATEGORIES, TRAINING, UNATTRIBUTED,
                                        AttemptFailure, AttemptGoodput, Cause, RunGoodput, Span)
from orchestrator.goodput.timeline import Interval, Piece, epoch, partition, totals, utc
from orchestrator.hardware.catalog import find
from orchestrator.models import (FINAL_ATTEMPT_STATES, FINAL_RUN_STATES, AttemptState, Cluster, named_nodes,
                                 utcnow)
from orchestrator.results.mllog import RunSummary, parse_file
from orchestrator.store.database import Store
from orchestrator.store.schema import AttemptRow, RunRow

# Where claims overlap, the higher wins: a failure's restart overhead over everything, its lost
# work over what it trained, evaluation and checkpoints over training, the phases last.
PHASE, OVERLAY, LOST, RESTARTING = 1, 2, 3, 4
FAILED_STATES = frozenset({AttemptState.FAILED, AttemptState.CANCELLED})


def run_goodput(store: Store, run_id: str, now: datetime | None = None) -> RunGoodput:
    """The breakdown of run `run_id` from the store and the logs fetched under $AZBENCH_HOME;
    NotFoundError when the store has no such run."""
    row = store.get_run(run_id)
    if row is None:
        raise NotFoundError(f"no run '{run_id}'", hint="see `azbench status`")
    attempts = store.list_attempts(run_id)
    stored = store.get_cluster(row.cluster)
    return breakdown(row, attempts, {a.attempt: read_log(run_id, a.attempt) for a in attempts},
                     stored.cluster if stored is not None else None, now)


def read_log(run_id: str, attempt: int) -> RunSummary | None:
    """The attempt's fetched train.log summarised, or None when it is not here."""
    log = paths.local_train_log(run_id, attempt)
    return parse_file(log) if log.is_file() else None


def breakdown(row: RunRow, attempts: Sequence[AttemptRow], logs: Mapping[int, RunSummary | None],
              cluster: Cluster | None, now: datetime | None = None) -> RunGoodput:
    """The run's breakdown from its row, attempts, their logs and its cluster (pure)."""
    now_s = epoch(now or utcnow())
    marks = _marks(attempts, logs, now_s)
    notes: list[str] = []
    intervals: list[Interval] = []
    for i, m in enumerate(marks):
        intervals += _phases(m, marks[i + 1] if i + 1 < len(marks) else None, notes)
    live = row.state not in FINAL_RUN_STATES or any(m.live for m in marks)
    lo = marks[0].start if marks else now_s
    hi = max((m.end for m in marks), default=lo)
    pieces = partition(intervals, lo, hi, UNATTRIBUTED, [(m.start, m.end, m.row.attempt) for m in marks])
    categories = totals(pieces, RUN_CATEGORIES)
    wall = hi - lo
    rate, price_note = run_price(row, cluster)
    gpus = _gpus_per_node(cluster) * row.nodes
    failures = {m.row.attempt: _failure(m, pieces, marks[i + 1] if i + 1 < len(marks) else None)
                for i, m in enumerate(marks) if m.failed}
    done = next((m.log for m in reversed(marks) if m.row.state == AttemptState.SUCCEEDED and m.log), None)
    return RunGoodput(
        run_id=row.id, cluster=row.cluster, recipe=row.recipe, benchmark=row.benchmark,
        nodes=row.nodes, gpus=gpus, owner=row.owner, state=row.state.value, live=live,
        started_at=utc(lo) if marks else None, ended_at=utc(hi) if marks else None,
        wall_s=round(wall, 3), categories=_rounded(categories),
        cost_usd={} if rate is None else {k: round(v * rate / 3600, 4) for k, v in categories.items()},
        gpu_hours={k: round(v * gpus / 3600, 4) for k, v in categories.items()},
        goodput=round(categories[TRAINING] / wall, 4) if wall > 0 else 0.0,
        minutes=done.minutes if done is not None else None,
        price_per_hour_usd=rate, price_note=price_note,
        attempts=[_attempt(m, pieces, failures.get(m.row.attempt)) for m in marks],
        causes=causes(pieces, list(failures.values()), row.nodes, gpus, rate),
        notes=notes)


def lost_work_by_attempt(g: RunGoodput) -> dict[int, float]:
    """Each failed attempt's lost work in seconds, as `goodput` prints it: the one definition
    of "lost" that `run`'s attempt table shows too."""
    return {a.attempt: a.failure.lost_work_s for a in g.attempts if a.failure is not None}


def run_price(row: RunRow, cluster: Cluster | None) -> tuple[float | None, str]:
    """USD per hour of the run's nodes: the cluster's recorded cost per hour x run nodes /
    cluster nodes; None, and why, where it is not known."""
    if cluster is None:
        return None, f"cluster '{row.cluster}' is not in the store: no price"
    if cluster.cost_per_hour_usd is None or cluster.nodes <= 0:
        return None, f"no price recorded for cluster '{cluster.name}' ({cluster.sku})"
    rate = cluster.cost_per_hour_usd / cluster.nodes * row.nodes
    return round(rate, 6), (f"{row.nodes} of the cluster's {cluster.nodes} nodes at its recorded "
                            f"${cluster.cost_per_hour_usd:,.2f}/h (list price)")


def causes(pieces: Sequence[Piece], failures: Sequence[AttemptFailure], nodes: int, gpus: int,
           rate: float | None) -> list[Cause]:
    """Lost work and restart overhead per failure class, most GPU-hours (node-hours) first."""
    by: dict[str, list[float]] = {}
    for p in pieces:
        if p.cause is not None and p.label in (LOST_WORK, RESTART):
            lost, restart = by.setdefault(p.cause, [0.0, 0.0])
            by[p.cause] = [lost + p.seconds, restart] if p.label == LOST_WORK else [lost, restart + p.seconds]
    out = []
    for cls, (lost, restart) in by.items():
        seconds = lost + restart
        out.append(Cause(failure_class=cls, failures=sum(1 for f in failures if f.failure_class == cls),
                         lost_work_s=round(lost, 3), restart_overhead_s=round(restart, 3),
                         node_hours=round(seconds * nodes / 3600, 4),
                         gpu_hours=round(seconds * gpus / 3600, 4),
                         cost_usd=None if rate is None else round(seconds * rate / 3600, 4)))
    return sorted(out, key=lambda c: (-c.gpu_hours, -c.node_hours, c.failure_class))


# -- the marks of one attempt -----------------------------------------------------------------


@dataclass(frozen=True)
class _Mark:
    """One attempt's times in epoch seconds, clipped into its own window [start, end]."""

    row: AttemptRow
    log: RunSummary | None
    start: float
    end: float
    live: bool
    gate: float | None
    submitted: float | None
    job_start: float | None
    job_stop: float | None
    run_start: float | None
    run_stop: float | None
    last: float | None

    @property
    def failed(self) -> bool:
        return self.row.state in FAILED_STATES

    @property
    def failure_at(self) -> float:
        """When the work stopped: the last MLLOG event, else the job's stop line, else the end."""
        return self.last if self.last is not None else self.job_stop if self.job_stop is not None else self.end

    def clip(self, t: float | None) -> float | None:
        return None if t is None else min(max(t, self.start), self.end)


def _marks(attempts: Sequence[AttemptRow], logs: Mapping[int, RunSummary | None], now: float) -> list[_Mark]:
    """Each attempt's window (its row's start to its end, now while it runs; never overlapping
    the next one's) and its marks clipped into it."""
    rows = [a for a in sorted(attempts, key=lambda a: a.attempt) if a.started_at is not None]
    out: list[_Mark] = []
    for i, a in enumerate(rows):
        assert a.started_at is not None
        start = max(epoch(a.started_at), out[-1].end) if out else epoch(a.started_at)
        nxt = rows[i + 1].started_at if i + 1 < len(rows) else None
        live = a.state not in FINAL_ATTEMPT_STATES
        end = epoch(a.ended_at) if a.ended_at else (epoch(nxt) if nxt and not live else now)
        if nxt is not None:
            end = min(end, epoch(nxt))
        end = max(end, start)
        log = logs.get(a.attempt)

        def clip(t: float | None, lo: float = start, hi: float = end) -> float | None:
            return None if t is None else min(max(t, lo), hi)

        out.append(_Mark(
            a, log, start, end, live,
            gate=clip(_at(a.gate_started_at)), submitted=clip(_at(a.submitted_at)),
            job_start=clip(_seconds(log.job_start_s) if log else None),
            job_stop=clip(_seconds(log.job_stop_s) if log else None),
            run_start=clip(_ms(log.run_start_ms) if log else None),
            run_stop=clip(_ms(log.run_stop_ms) if log else None),
            last=clip(_ms(log.last_time_ms) if log else None)))
    return out


def _at(when: datetime | None) -> float | None:
    return None if when is None else epoch(when)


def _seconds(value: int | None) -> float | None:
    return None if value is None else float(value)


def _ms(value: int | None) -> float | None:
    return None if value is None else value / 1000.0


def _phases(m: _Mark, nxt: _Mark | None, notes: list[str]) -> list[Interval]:
    """The claims of one attempt (see the module): its own phases, then, when it failed, the
    work it lost and the restart until `nxt` (the next attempt) trains again."""
    claim = _Claims(m)
    _own_phases(m, claim, notes)
    if m.failed:
        _failure_phases(m, nxt, claim, notes)
    return claim.out


class _Claims:
    """The intervals one attempt claims, in order; an empty, reversed or open span claims
    nothing. A claim with an `origin` (the attempt whose failure it costs) carries the
    attempt's failure class."""

    def __init__(self, m: _Mark) -> None:
        self.m = m
        self.out: list[Interval] = []

    def __call__(self, label: str, a: float | None, b: float | None, prio: int = PHASE,
                 lane: int | None = None, origin: int | None = None) -> None:
        if a is not None and b is not None and b > a:
            self.out.append(Interval(label, a, b, prio, self.m.row.attempt if lane is None else lane,
                                     self.m.row.failure_class if origin is not None else None, origin))


def _own_phases(m: _Mark, claim: _Claims, notes: list[str]) -> None:
    """Claim the attempt's health gate, queue, init, training (with its evaluations and
    checkpoints over it) and, when it succeeded, teardown. A span it cannot place is named in `notes` as unattributed."""
    n = m.row.attempt
    if m.gate is not None:
        claim("health_gate", m.gate, m.submitted if m.submitted is not None else m.end)
    started = m.job_start
    if m.submitted is not None:
        if started is not None:
            claim("queued", m.submitted, started)
        elif m.live and m.log is None:  # submitted, no line of its job yet: still queued
            claim("queued", m.submitted, m.end)
        elif m.row.job_id is not None:
            notes.append(f"attempt {n}: no AZBENCH_ATTEMPT_START line here (train.log not fetched, "
                         "or the job never started): its time after submission is unattributed")
    work_end = m.failure_at if m.failed else (m.end if m.live else (
        m.run_stop if m.run_stop is not None else m.last if m.last is not None else m.job_stop))
    if started is not None and (m.run_start is not None or (m.log and m.log.init_start_ms is not None)):
        claim("init", started, m.run_start if m.run_start is not None else work_end)
    elif m.run_start is not None and started is None:
        notes.append(f"attempt {n}: the log has run_start but no AZBENCH_ATTEMPT_START line: "
                     "its queue and init are unattributed")
    train_end = m.run_stop if m.run_stop is not None else work_end
    claim(TRAINING, m.run_start, train_end)
    if m.log is not None and m.run_start is not None and train_end is not None:
        for a, b in m.log.eval_spans:
            claim("evaluation", max(a / 1000, m.run_start), min(b / 1000, train_end), OVERLAY)
        for c in m.log.checkpoints:
            claim("checkpoint", max(c.time_ms / 1000 - c.seconds, m.run_start), min(c.time_ms / 1000, train_end),
                  OVERLAY)
    if m.row.state == AttemptState.SUCCEEDED:
        claim("teardown", train_end, m.end)


def _failure_phases(m: _Mark, nxt: _Mark | None, claim: _Claims, notes: list[str]) -> None:
    """Claim what a failed attempt cost: the work since its last kept checkpoint (lost), and
    the restart until the next attempt trains again (or, with none, until its job ended)."""
    n, failed_at = m.row.attempt, m.failure_at
    if m.run_start is not None and failed_at > m.run_start:
        claim(LOST_WORK, _kept_at(m, nxt, failed_at, notes), failed_at, LOST, origin=n)
    if nxt is None:  # nothing retried: detecting the failure and ending its job are still its cost
        claim(RESTART, failed_at, m.end, RESTARTING, origin=n)
        return
    # Until the next attempt trains again: its run_start; its own failure when it never got
    # there; now while it is still on its way; its start when it ended with no run_start here.
    resumed = (nxt.run_start if nxt.run_start is not None else nxt.failure_at if nxt.failed
               else nxt.end if nxt.live else nxt.start)
    claim(RESTART, failed_at, nxt.start, RESTARTING, origin=n)
    claim(RESTART, nxt.start, resumed, RESTARTING, lane=nxt.row.attempt, origin=n)


def _kept_at(m: _Mark, nxt: _Mark | None, failed_at: float, notes: list[str]) -> float:
    """When the work this failure did not lose ends: the checkpoint the next attempt resumed
    from, as this attempt's log wrote it; run_start when none of its own was kept."""
    assert m.run_start is not None
    ckpts = [c for c in (m.log.checkpoints if m.log else []) if c.time_ms / 1000 <= failed_at]
    if nxt is not None:
        kept = nxt.row.resumed_from_step
    else:  # nothing retried: the newest checkpoint it wrote is what a resume would start from
        kept = ckpts[-1].step if ckpts else None
    own = m.row.resumed_from_step or 0
    if kept is None or kept <= own:
        return m.run_start
    written = [c for c in ckpts if c.step == kept]
    if written:
        return m.clip(written[-1].time_ms / 1000) or m.run_start
    if m.row.lost_seconds:  # a recipe that logs no checkpoints: the store's step time past it
        notes.append(f"attempt {m.row.attempt}: no azbench_checkpoint event for step {kept}: lost "
                     f"work is the step time past it the store recorded ({m.row.lost_seconds:g} s)")
        return max(failed_at - m.row.lost_seconds, m.run_start)
    notes.append(f"attempt {m.row.attempt}: no azbench_checkpoint event for step {kept} and no "
                 "lost step time recorded: all of its training counts as lost")
    return m.run_start


def failed_nodes(failed: Sequence[str], evidence: str, next_excluded: Sequence[str]) -> list[str]:
    """The nodes a failure names: those the next attempt newly excluded (it left out what
    failed), else those the evidence names ("node3", "gpu-node-3"), else the attempt's own."""
    newly = [n for n in next_excluded if n not in failed]
    if newly:
        return newly
    return list(named_nodes(evidence)) or list(failed)


def _failure(m: _Mark, pieces: Sequence[Piece], nxt: _Mark | None = None) -> AttemptFailure:
    n = m.row.attempt
    mine = [p for p in pieces if p.origin == n]
    nodes = failed_nodes(m.row.excluded_nodes, m.row.message or "",
                         nxt.row.excluded_nodes if nxt is not None else [])
    return AttemptFailure(attempt=n, failure_class=m.row.failure_class or "unknown",
                   evidence=m.row.message or "", nodes=nodes,
                   at=utc(m.failure_at),
                   lost_work_s=round(sum(p.seconds for p in mine if p.label == LOST_WORK), 3),
                   restart_overhead_s=round(sum(p.seconds for p in mine if p.label == RESTART), 3))


def _attempt(m: _Mark, pieces: Sequence[Piece], failure: AttemptFailure | None) -> AttemptGoodput:
    n = m.row.attempt
    mine = [p for p in pieces if p.attempt == n]
    return AttemptGoodput(
        attempt=n, state=m.row.state.value, job_id=m.row.job_id, started_at=m.row.started_at,
        ended_at=m.row.ended_at, resumed_from_step=m.row.resumed_from_step,
        lost_steps=m.row.lost_steps, excluded_nodes=list(m.row.excluded_nodes),
        categories=_rounded(totals(mine, RUN_CATEGORIES)),
        spans=[Span(category=p.label, start=utc(p.start), end=utc(p.end), seconds=round(p.seconds, 3),
                    attempt=p.attempt, cause=p.cause) for p in mine],
        failure=failure)


def _gpus_per_node(cluster: Cluster | None) -> int:
    row = find(cluster.sku) if cluster is not None else None
    return row.gpus_per_vm if row is not None else 0


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}
