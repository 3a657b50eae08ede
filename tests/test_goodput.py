"""Goodput accounting (orchestrator.goodput) on synthetic runs whose every mark is known: each
category from its own source (the store's marks, the batch script's lines, the MLLOG), a failure
after a checkpoint and one with no checkpoint (all its work lost), a failure nothing retried, a
live run, a log that was never fetched, the partition's own rules, a cluster's life weighted by
the nodes each activity held, and totals per owner. The real local Slurm cluster and the CLI
are tests/test_goodput_e2e.py's.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.goodput import cluster as gc
from orchestrator.goodput import owners
from orchestrator.goodput.model import CLUSTER_CATEGORIES, RUN_CATEGORIES
from orchestrator.goodput.run import breakdown, run_goodput
from orchestrator.goodput.timeline import Interval, partition
from orchestrator.models import Cluster, ClusterState
from orchestrator.results.mllog import RunSummary, parse_lines
from orchestrator.store.database import Store
from orchestrator.store.schema import AttemptRow, ClusterRow, EventRow, RunRow

T0 = datetime(2026, 5, 4, 12, 0, 0, tzinfo=timezone.utc)
EPOCH0 = int(T0.timestamp())


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ev(key: str, t: float, value: object = None, **meta: object) -> str:
    """One MLLOG line at T0 + t seconds."""
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": int((EPOCH0 + t) * 1000), "event_type": "POINT_IN_TIME",
                                     "key": key, "value": value, "metadata": meta})


def log(job_start: float | None, init: float | None, run_start: float | None, **kw: object) -> RunSummary:
    """log_lines, parsed as goodput reads a fetched train.log."""
    return parse_lines(log_lines(job_start, init, run_start, **kw))  # type: ignore[arg-type]


def log_lines(job_start: float | None, init: float | None, run_start: float | None, *, steps: list[float] = (),
              evals: list[tuple[float, float]] = (), ckpts: list[tuple[int, float, float]] = (),
              run_stop: float | None = None, job_stop: float | None = None, first_step: int = 1) -> list[str]:
    """A train.log: the batch script's start line, init_start, run_start, a tracked_stats per step
    time, eval spans, checkpoints (step, complete at, seconds), run_stop, the stop line."""
    lines = []
    if job_start is not None:
        lines.append(f"AZBENCH_ATTEMPT_START {EPOCH0 + int(job_start)} attempt=1 resume=0")
    if init is not None:
        lines.append(ev("init_start", init))
    if run_start is not None:
        lines.append(ev("run_start", run_start))
    for i, t in enumerate(steps):
        lines.append(ev("tracked_stats", t, {"train_step_time": 0.5}, step=first_step + i))
    for a, b in evals:
        lines += [ev("eval_start", a), ev("eval_stop", b)]
    for step, t, secs in ckpts:
        lines.append(ev("azbench_checkpoint", t, step, seconds=secs))
    if run_stop is not None:
        lines.append(ev("run_stop", run_stop, status="success"))
    if job_stop is not None:
        lines.append(f"AZBENCH_ATTEMPT_STOP {EPOCH0 + int(job_stop)} rc=0")
    return lines


def run_row(state: str = "succeeded", nodes: int = 2) -> RunRow:
    return RunRow(id="r1", cluster="c1", recipe="smoke", benchmark="smoke", nodes=nodes, state=state,
                  created_at=T0, owner="alice")


def cluster(nodes: int = 4, price: float | None = 40.0, sku: str = "h100") -> Cluster:
    return Cluster(name="c1", provider="fake", sku=sku, nodes=nodes, state=ClusterState.READY,
                   cost_per_hour_usd=price, created_at=T0)


def attempt(n: int, state: str, start: float, end: float | None, *, gate: float | None = None,
            submitted: float | None = None, **kw: object) -> AttemptRow:
    return AttemptRow(run_id="r1", attempt=n, job_id=str(100 + n), state=state, started_at=at(start),
                      ended_at=at(end) if end is not None else None,
                      gate_started_at=at(gate) if gate is not None else None,
                      submitted_at=at(submitted) if submitted is not None else None, **kw)


def adds_up(g: object) -> None:
    cats = g.categories  # type: ignore[attr-defined]
    assert all(isinstance(v, float) for v in cats.values())
    assert sum(cats.values()) == pytest.approx(g.wall_s, rel=0.01, abs=0.01)  # type: ignore[attr-defined]


# -- one attempt: each category from its source ---------------------------------------------


def test_a_clean_run_each_category_from_its_source() -> None:
    a = attempt(1, "succeeded", 0, 55, gate=1, submitted=3)
    lg = log(5, 6, 10, steps=[12, 14, 16], evals=[(20, 22)], ckpts=[(20, 30, 2.0)], run_stop=50, job_stop=51)
    g = breakdown(run_row(), [a], {1: lg}, cluster())
    assert list(g.categories) == list(RUN_CATEGORIES)
    assert g.wall_s == 55
    assert g.categories == {
        "queued": 2.0,  # submitted_at 3 -> AZBENCH_ATTEMPT_START 5
        "health_gate": 2.0,  # gate_started_at 1 -> submitted_at 3
        "init": 5.0,  # job start 5 -> run_start 10
        "training": 36.0,  # run_start 10 -> run_stop 50, less the eval and the checkpoint
        "evaluation": 2.0,  # eval_start 20 -> eval_stop 22
        "checkpoint": 2.0,  # azbench_checkpoint at 30 that took 2 s
        "lost_work": 0.0, "restart_overhead": 0.0,
        "teardown": 5.0,  # run_stop 50 -> the attempt's end in the store, 55
        "unattributed": 1.0,  # the attempt's row (0) to its gate (1): no source
    }
    assert g.goodput == pytest.approx(36 / 55, abs=1e-4)
    # the cluster's 4 nodes cost $40/h: the run's 2 nodes $20/h; an H100 VM has 8 GPUs
    assert g.price_per_hour_usd == 20.0 and g.gpus == 16
    assert g.cost_usd["training"] == pytest.approx(36 * 20 / 3600, abs=1e-4)
    assert g.gpu_hours["training"] == pytest.approx(36 * 16 / 3600, abs=1e-4)
    assert g.owner == "alice" and g.causes == [] and g.attempts[0].failure is None
    adds_up(g)


def test_moving_a_source_moves_only_its_boundary() -> None:
    a = attempt(1, "succeeded", 0, 55, gate=1, submitted=3)
    early = breakdown(run_row(), [a], {1: log(5, 6, 10, run_stop=50)}, cluster())
    late = breakdown(run_row(), [a], {1: log(8, 9, 10, run_stop=50)}, cluster())  # the job started 3 s later
    assert late.categories["queued"] - early.categories["queued"] == 3
    assert early.categories["init"] - late.categories["init"] == 3
    assert {k: v for k, v in late.categories.items() if k not in ("queued", "init")} == \
        {k: v for k, v in early.categories.items() if k not in ("queued", "init")}


def test_no_gate_and_no_log_leave_time_unattributed_and_say_so() -> None:
    a = attempt(1, "succeeded", 0, 30, submitted=1)
    g = breakdown(run_row(), [a], {1: None}, cluster())
    assert g.categories["unattributed"] == 30 and g.categories["health_gate"] == 0
    assert any("no AZBENCH_ATTEMPT_START line" in n for n in g.notes)
    adds_up(g)


# -- failures -------------------------------------------------------------------------------


def killed_after_checkpoint() -> tuple[list[AttemptRow], dict[int, RunSummary]]:
    """killed_after_checkpoint_lines, each log parsed."""
    attempts, lines = killed_after_checkpoint_lines()
    return attempts, {n: parse_lines(text) for n, text in lines.items()}


def store_run_with_logs(store: Store, attempts: list[AttemptRow], lines: dict[int, list[str]],
                        made: Cluster | None = None, owner: str | None = None) -> None:
    """Run r1 on `made` (cluster()) in `store` with `attempts`, and each attempt's train.log
    fetched; `owner` as save_cluster takes it."""
    from orchestrator import paths
    store.save_cluster(made or cluster(), owner=owner)
    store.create_run(run_row())
    for a in attempts:
        store.add_attempt(a)
    for n, text in lines.items():
        train = paths.local_train_log("r1", n)
        train.parent.mkdir(parents=True, exist_ok=True)
        train.write_text("\n".join(text) + "\n")


def killed_after_checkpoint_lines() -> tuple[list[AttemptRow], dict[int, list[str]]]:
    """Attempt 1 checkpoints step 20 at t=30 (1 s), trains on to t=40 and its node dies; attempt
    2 resumes from step 20 and succeeds."""
    first = attempt(1, "failed", 0, 48, gate=1, submitted=3, failure_class="node_fail",
                    message="node_fail on node2 (Slurm ended the job NODE_FAIL): Slurm state node_fail",
                    excluded_nodes=["node2"], lost_steps=12, lost_seconds=9.5)
    second = attempt(2, "succeeded", 49, 85, gate=50, submitted=52, resumed_from_step=20,
                     excluded_nodes=["node2"])
    logs = {1: log_lines(5, 6, 10, steps=[28, 40], ckpts=[(20, 30, 1.0)], job_stop=46),
            2: log_lines(54, 55, 60, steps=[62, 70], evals=[(65, 67), (75, 77)], run_stop=80, job_stop=81)}
    return [first, second], logs


def test_a_failure_after_a_checkpoint_loses_only_what_came_after_it() -> None:
    attempts, logs = killed_after_checkpoint()
    g = breakdown(run_row(), attempts, logs, cluster())
    assert g.wall_s == 85 and len(g.attempts) == 2
    assert g.categories["lost_work"] == 10  # the checkpoint (30) to the last MLLOG event (40)
    assert g.categories["restart_overhead"] == 20  # the failure (40) to attempt 2's run_start (60)
    assert g.categories["training"] == 19 + 16  # 10..29 (checkpoint 29..30) and 60..80 less 2 evals
    assert g.categories["evaluation"] == 4
    assert g.categories["checkpoint"] == 1
    # attempt 2's gate, queue and init come after the failure: they are restart overhead
    assert g.categories["health_gate"] == 2 and g.categories["queued"] == 2 and g.categories["init"] == 5
    adds_up(g)
    failure = g.attempts[0].failure
    assert failure is not None and failure.failure_class == "node_fail" and failure.nodes == ["node2"]
    assert "Slurm state node_fail" in failure.evidence and failure.at == at(40)
    assert (failure.lost_work_s, failure.restart_overhead_s) == (10, 20)
    assert g.attempts[1].categories["restart_overhead"] == 11  # its own lane: 49..60
    [cause] = g.causes
    assert (cause.failure_class, cause.failures, cause.lost_work_s, cause.restart_overhead_s) == ("node_fail", 1, 10, 20)
    assert cause.gpu_hours == pytest.approx(30 * 16 / 3600, abs=1e-4)
    assert cause.cost_usd == pytest.approx(30 * 20 / 3600, abs=1e-4)
    lanes = {(s.attempt, s.category) for a in g.attempts for s in a.spans}
    assert (1, "lost_work") in lanes and (2, "restart_overhead") in lanes and (2, "training") in lanes


def test_an_attempt_with_no_checkpoint_loses_all_its_work() -> None:
    first = attempt(1, "failed", 0, 30, submitted=1, failure_class="xid_error", message="xid_error: NVRM: Xid 79")
    second = attempt(2, "succeeded", 31, 70, submitted=32)  # resumed_from_step None: from scratch
    logs = {1: log(2, 3, 5, steps=[10, 20, 25], job_stop=27), 2: log(33, 34, 40, run_stop=60)}
    g = breakdown(run_row(), [first, second], logs, cluster())
    assert g.categories["lost_work"] == 20  # run_start 5 to the failure 25: nothing kept
    assert g.attempts[0].categories["training"] == 0
    assert g.categories["restart_overhead"] == 15  # 25 -> attempt 2's run_start 40
    assert g.causes[0].failure_class == "xid_error"
    adds_up(g)


def test_a_checkpoint_older_than_the_attempt_keeps_nothing_of_it() -> None:
    # attempt 2 resumed from 20 and died before its own next checkpoint: attempt 3 resumes from 20
    # again, so all of attempt 2's training is lost
    a1 = attempt(1, "failed", 0, 20, submitted=1, failure_class="node_fail")
    a2 = attempt(2, "failed", 21, 40, submitted=22, failure_class="nccl_error", resumed_from_step=20)
    a3 = attempt(3, "succeeded", 41, 70, submitted=42, resumed_from_step=20)
    logs = {1: log(2, 3, 4, steps=[15], ckpts=[(20, 12, 0.5)]), 2: log(23, 24, 25, steps=[35]),
            3: log(43, 44, 45, run_stop=65)}
    g = breakdown(run_row(), [a1, a2, a3], logs, cluster())
    by = {f.attempt: f for a in g.attempts if (f := a.failure)}
    assert by[1].lost_work_s == 3 and by[2].lost_work_s == 10  # 12..15; 25..35 (all of it)
    assert {c.failure_class for c in g.causes} == {"node_fail", "nccl_error"}
    adds_up(g)


def test_a_failure_nothing_retried_costs_its_detection_not_teardown() -> None:
    """Issue 47.5: with no retry, Slurm's detection of the failure counted as teardown."""
    only = attempt(1, "failed", 0, 40, submitted=1, failure_class="app_error", message="app_error: exit 1")
    g = breakdown(run_row("failed"), [only], {1: log(2, 3, 5, steps=[30], ckpts=[(20, 25, 0.0)], job_stop=33)}, cluster())
    assert g.categories["lost_work"] == 5  # its newest checkpoint (25) to its last event (30)
    assert g.categories["teardown"] == 0 and g.categories["restart_overhead"] == 10  # 30 -> its end, 40
    failure = g.attempts[0].failure
    assert failure is not None and (failure.lost_work_s, failure.restart_overhead_s) == (5, 10)
    [cause] = g.causes
    assert (cause.failure_class, cause.lost_work_s, cause.restart_overhead_s) == ("app_error", 5, 10)
    adds_up(g)


def test_lost_work_without_checkpoint_events_uses_the_stored_step_time() -> None:
    first = attempt(1, "failed", 0, 30, submitted=1, failure_class="node_lost", lost_seconds=4.0)
    second = attempt(2, "succeeded", 31, 60, submitted=32, resumed_from_step=20)
    g = breakdown(run_row(), [first, second], {1: log(2, 3, 5, steps=[25]), 2: log(33, 34, 35, run_stop=50)},
                  cluster())
    assert g.categories["lost_work"] == 4
    assert any("no azbench_checkpoint event for step 20" in n for n in g.notes)


def test_a_live_run_counts_up_to_now() -> None:
    queued = attempt(1, "pending", 0, None, gate=0, submitted=2)
    g = breakdown(run_row("running"), [queued], {1: None}, cluster(), now=at(10))
    assert g.live and g.wall_s == 10 and g.categories["queued"] == 8 and g.categories["health_gate"] == 2
    running = attempt(1, "running", 0, None, submitted=1)
    g = breakdown(run_row("running"), [running], {1: log(2, 3, 5, steps=[8])}, cluster(), now=at(20))
    assert g.categories["training"] == 15 and g.ended_at == at(20)


def test_no_price_gives_no_cost_and_says_why() -> None:
    g = breakdown(run_row(), [attempt(1, "succeeded", 0, 10)], {1: None}, cluster(price=None))
    assert g.cost_usd == {} and g.price_per_hour_usd is None and "no price recorded" in g.price_note


def test_partition_tiles_the_window_whatever_the_claims() -> None:
    claims = [Interval("a", 0, 10, 1), Interval("b", 5, 7, 2), Interval("c", -5, 3, 0),
              Interval("bad", 9, 4, 9), Interval("d", 12, 30, 1)]
    pieces = partition(claims, 0, 20, "none")
    assert [(p.label, p.start, p.end) for p in pieces] == [
        ("a", 0, 5), ("b", 5, 7), ("a", 7, 10), ("none", 10, 12), ("d", 12, 20)]
    assert sum(p.seconds for p in pieces) == 20


# -- clusters ------------------------------------------------------------------------------


def test_a_cluster_life_weighted_by_the_nodes_each_activity_held(azbench_home) -> None:
    """4 H100 nodes at $40/h: up 0..10, a 2-node run 20..105, resized to 2 nodes at 200
    (190..200), down 290..300. Every category adds up to the wall, with a cost each."""
    attempts, logs = killed_after_checkpoint()
    with Store.open() as store:
        store.save_cluster(Cluster(name="c1", provider="fake", sku="h100", nodes=4, state=ClusterState.READY,
                                   cost_per_hour_usd=40.0, created_at=T0), owner="alice")
        store.create_run(run_row())
        for a in attempts:
            shifted = a.model_copy(update={k: getattr(a, k) + timedelta(seconds=20) for k in
                                           ("started_at", "ended_at", "gate_started_at", "submitted_at")
                                           if getattr(a, k) is not None})
            store.add_attempt(shifted)
        events = [EventRow(kind="up", cluster="c1", ts=at(10), message="up", data={"started_at": at(0).isoformat()}),
                  EventRow(kind="resize", cluster="c1", ts=at(200), message="4 -> 2 nodes",
                           data={"before": 4, "after": 2, "started_at": at(190).isoformat()}),
                  EventRow(kind="down", cluster="c1", ts=at(300), message="down",
                           data={"started_at": at(290).isoformat()})]
        for e in events:
            store.add_event(e)
        row = store.get_cluster("c1")
        assert row is not None
        store.save_cluster(row.cluster.model_copy(update={"nodes": 2, "cost_per_hour_usd": 20.0}))
        store.save_cluster(row.cluster.model_copy(update={"nodes": 2, "cost_per_hour_usd": 20.0,
                                                          "state": ClusterState.TERMINATED}))
        row = store.get_cluster("c1")
        assert row is not None and row.owner == "alice"  # kept when a later save names none
        store_events = store.list_events(cluster="c1")
        g = gc.breakdown(row.model_copy(update={"terminated_at": at(300)}), store_events,
                         [_shifted_run(attempts, logs)], at(400))
    assert list(g.categories) == list(CLUSTER_CATEGORIES)
    assert g.wall_s == 300 and not g.live
    adds_up(g)
    assert g.categories["provisioning"] == 10 and g.categories["teardown"] == 10
    assert g.categories["resize_replace"] == 10
    # the run held 2 of 4 nodes for 85 s: half of each of its seconds counts, the other half idle
    assert g.categories["training"] == pytest.approx(35 / 2)
    assert g.categories["lost_work"] == pytest.approx(10 / 2)
    # idle: 10..20 all of it, the run's half of 20..105, 105..190 all, 200..290 all (2 nodes now)
    assert g.categories["idle"] == pytest.approx(10 + 85 / 2 + 85 + 90)
    assert g.node_hours["idle"] == pytest.approx((10 * 4 + 85 * 2 + 85 * 4 + 90 * 2) / 3600, abs=1e-3)
    # $40/h for 4 nodes = $10 per node-hour, every category priced
    assert g.price_per_node_hour_usd == 10.0
    assert g.cost_usd["idle"] == pytest.approx(g.node_hours["idle"] * 10, abs=1e-3)
    assert g.gpu_hours["training"] == pytest.approx(35 * 2 * 8 / 3600, abs=1e-3)
    assert g.causes[0].failure_class == "node_fail" and g.runs[0].run_id == "r1"
    assert g.line.startswith("$") and "% idle" in g.line and "% training" in g.line


def _shifted_run(attempts: list[AttemptRow], logs: dict[int, RunSummary]):
    shift = timedelta(seconds=20)
    moved = [a.model_copy(update={k: getattr(a, k) + shift for k in
                                  ("started_at", "ended_at", "gate_started_at", "submitted_at")
                                  if getattr(a, k) is not None}) for a in attempts]
    moved_logs = {n: s.model_copy(update={
        "job_start_s": s.job_start_s + 20 if s.job_start_s else None,
        "job_stop_s": s.job_stop_s + 20 if s.job_stop_s else None,
        "run_start_ms": s.run_start_ms + 20000 if s.run_start_ms else None,
        "run_stop_ms": s.run_stop_ms + 20000 if s.run_stop_ms else None,
        "last_time_ms": s.last_time_ms + 20000 if s.last_time_ms else None,
        "init_start_ms": s.init_start_ms + 20000 if s.init_start_ms else None,
        "checkpoints": [c._replace(time_ms=c.time_ms + 20000) for c in s.checkpoints],
        "eval_spans": [(a + 20000, b + 20000) for a, b in s.eval_spans]})
        for n, s in logs.items()}
    return breakdown(run_row(), moved, moved_logs, cluster())


def test_a_live_cluster_counts_up_to_now_and_a_missing_one_is_not_found(azbench_home) -> None:
    from orchestrator.errors import NotFoundError
    with Store.open() as store:
        store.save_cluster(cluster(price=0.0), owner="bob")
        g = gc.cluster_goodput(store, "c1", now=at(3600))
        with pytest.raises(NotFoundError, match="no cluster named 'nope'"):
            gc.cluster_goodput(store, "nope")
    assert g.live and g.wall_s == 3600 and g.categories["idle"] == 3600
    assert g.cost_usd["idle"] == 0.0 and g.line == "$0.00 spent so far over 1.0 h (list price): 100% idle"


def test_owners_total_cost_and_goodput_from_the_store(azbench_home) -> None:
    with Store.open() as store:
        store.save_cluster(cluster(nodes=2, price=20.0), owner="alice")
        other = cluster(nodes=1, price=None).model_copy(update={"name": "c2", "created_at": at(1800)})
        store.save_cluster(other, owner="bob")
        store.create_run(run_row())
        store.add_attempt(attempt(1, "succeeded", 0, 60))
        totals = {t.owner: t for t in owners.by_owner(store, now=at(3600))}
        later = {t.owner: t for t in owners.by_owner(store, since=at(2700), now=at(3600))}
        spend = owners.spent(store, "alice", None, now=at(3600))
    assert totals["alice"].cost_usd == 20.0 and totals["alice"].clusters == 1 and totals["alice"].runs == 1
    assert totals["alice"].node_hours == 2.0
    assert totals["bob"].cost_usd is None and totals["bob"].unpriced == ["c2"]
    assert later["alice"].cost_usd == 5.0 and later["alice"].runs == 0  # the run began before --since
    assert spend.usd == 20.0 and spend.clusters == 1


def test_run_goodput_reads_the_fetched_logs_and_says_when_a_run_is_unknown(azbench_home) -> None:
    from orchestrator import paths
    from orchestrator.errors import NotFoundError
    with Store.open() as store:
        store.save_cluster(cluster())
        store.create_run(run_row())
        store.add_attempt(attempt(1, "succeeded", 0, 20, submitted=1))
        train = paths.local_train_log("r1", 1)
        train.parent.mkdir(parents=True)
        train.write_text(f"AZBENCH_ATTEMPT_START {EPOCH0 + 2} attempt=1 resume=0\n"
                         + ev("run_start", 4) + "\n" + ev("run_stop", 18, status="success") + "\n")
        g = run_goodput(store, "r1")
        with pytest.raises(NotFoundError, match="no run 'nope'"):
            run_goodput(store, "nope")
    assert (g.categories["queued"], g.categories["training"], g.categories["teardown"]) == (1, 14, 2)


# -- the store, owners, budgets, the CLI and the pipeline ------------------------------------


def test_a_v4_store_migrates_keeping_its_rows_with_no_owner(azbench_home, tmp_path) -> None:
    import sqlalchemy as sa

    from orchestrator.store.schema import SCHEMA_VERSION, migrate
    url = f"sqlite:///{tmp_path / 'v4.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        migrate(conn, target=4)
        conn.exec_driver_sql("INSERT INTO runs (id, cluster, recipe, benchmark, nodes, repeat_index, state, "
                             "created_at, updated_at) VALUES ('old', 'c1', 'smoke', 'smoke', 1, 0, 'succeeded', "
                             "'2026-01-01 00:00:00', '2026-01-01 00:00:00')")
        conn.exec_driver_sql("INSERT INTO attempts (run_id, attempt, state, excluded_nodes, started_at) "
                             "VALUES ('old', 1, 'succeeded', '[]', '2026-01-01 00:00:00')")
    engine.dispose()
    with Store.open(url) as store:
        assert store.schema_version() == SCHEMA_VERSION == 6
        run = store.get_run("old")
        [a] = store.list_attempts("old")
        assert run is not None and run.owner is None and a.gate_started_at is None and a.submitted_at is None
        totals = owners.by_owner(store)
    assert [t.owner for t in totals] == [owners.NOT_RECORDED]


def test_up_records_the_owner_and_the_span_of_its_provisioning(azbench_home, monkeypatch) -> None:
    from orchestrator.clusters import lifecycle
    from orchestrator.specs.cluster import ClusterSpec
    monkeypatch.setenv("AZBENCH_OWNER", "team-b")
    with Store.open() as store:
        lifecycle.up(ClusterSpec(name="f1", provider="fake", sku="local", nodes=2), store)
        row = store.get_cluster("f1")
        [up] = [e for e in store.list_events(cluster="f1") if e.kind == "up"]
        lifecycle.down("f1", store)
        [down] = [e for e in store.list_events(cluster="f1") if e.kind == "down"]
        g = gc.cluster_goodput(store, "f1")
    assert row is not None and row.owner == "team-b"
    assert up.data.started_at <= up.ts
    assert down.data.started_at <= down.ts
    assert g.categories["provisioning"] > 0 and g.categories["teardown"] > 0 and not g.live
    adds_up(g)  # a fake cluster lives some 80 ms: each category is rounded to the millisecond


def test_an_azure_cluster_is_owned_by_its_principal() -> None:
    from orchestrator.clusters.lifecycle import owner_of
    from orchestrator.providers.azure.props import AzureProps
    azure = Cluster(name="a1", provider="azure", sku="h100", nodes=1,
                    properties=AzureProps(owner="00000000-aaaa-bbbb-cccc-000000000001"))
    assert owner_of(azure) == "00000000-aaaa-bbbb-cccc-000000000001"


def test_budget_warnings_say_whose_spend_and_why() -> None:
    from orchestrator.clusters.spending import budget_warning
    from orchestrator.models import Plan
    from orchestrator.specs.cluster import Budget
    plan = Plan(cluster="x", provider="azure", sku="Standard_ND96isr_H100_v5", region="eastus", nodes=2,
                gpus_per_node=8, total_gpus=16, scale_sets=[], resources=[], cost_per_hour_usd=196.64,
                max_hours=24.0)
    budget = Budget(usd=1000, owners={"alice": 50_000}, period="month")
    since = datetime(2026, 5, 1, tzinfo=timezone.utc)
    over = budget_warning(plan, budget, "bob", 1200.0, since, ["old"])
    assert over == ("owner bob has spent ~$1,200.00 since 2026-05-01 (list price, this home's store; 1 "
                    "cluster(s) without a price not counted) of a $1,000.00 monthly budget: over it already; "
                    "this cluster adds ~$196.64/h")
    worst = budget_warning(plan, budget, "bob", 100.0, since)
    assert worst is not None and "at most ~$4,719.36 until it deletes itself: the budget runs out after ~4.6 h" in worst
    assert budget_warning(plan, budget, "alice", 100.0, since) is None  # her own budget holds it
    assert budget_warning(plan.model_copy(update={"provider": "local"}), budget, "bob", 5000.0, since) is None
    assert budget.since(datetime(2026, 5, 14, 9, tzinfo=timezone.utc)) == since
    assert Budget(period="week").since(datetime(2026, 5, 14, 9, tzinfo=timezone.utc)) == \
        datetime(2026, 5, 11, tzinfo=timezone.utc)


def test_a_bad_budget_names_its_line(tmp_path) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.specs.cluster import load_cluster_spec
    spec = tmp_path / "c.yaml"
    spec.write_text("name: c\nnodes: 1\nbudget:\n  usd: -5\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:4: budget\.usd: must be between 0\.01 and 1e\+09 USD, got -5"):
        load_cluster_spec(spec)
    spec.write_text("name: c\nnodes: 1\nbudget: {usd: 10, period: year}\n")
    with pytest.raises(ConfigError, match="budget.period"):
        load_cluster_spec(spec)
    plain = load_cluster_spec(None, {"name": "c", "nodes": 1})
    assert "budget" not in plain.model_dump()  # specs stored before budgets keep their shape


def test_up_warns_when_an_owner_is_over_budget(azbench_home, tmp_path) -> None:
    from tests.cli_helpers import azbench
    with Store.open() as store:
        old = Cluster(name="old", provider="azure", sku="h100", nodes=2, state=ClusterState.READY,
                      cost_per_hour_usd=196.64, created_at=datetime.now(timezone.utc) - timedelta(hours=2))
        store.save_cluster(old, owner="carol")
    spec = tmp_path / "c.yaml"
    spec.write_text("name: new\nprovider: azure\nsku: h100\nnodes: 2\nregion: eastus\n"
                    "budget: {usd: 100, period: all}\n")
    res = azbench("up", "-f", str(spec), "--dry-run", home=azbench_home)
    assert res.code == 0, res.err
    [line] = [ln for ln in res.err.splitlines() if ln.startswith("warning:")]
    assert line.startswith("warning: owner carol has spent ~$393.") and "of a $100.00 total budget: over it already" in line


def test_goodput_cli_needs_one_subject_and_says_what_is_missing(azbench_home) -> None:
    from tests.cli_helpers import azbench, one_line_error
    cases = {("goodput",): "goodput needs exactly one of RUN, --cluster NAME or --by owner",
             ("goodput", "r1", "--cluster", "c1"): "(got RUN and --cluster)",
             ("goodput", "r1", "--since", "2026-01-01"): "--since goes with --by owner",
             ("goodput", "nope"): "no run 'nope'",
             ("goodput", "--cluster", "nope"): "no cluster named 'nope'",
             ("goodput", "--by", "owner", "--since", "soon"): "--since: 'soon' is not a date"}
    for argv, said in cases.items():
        res = azbench(*argv, home=azbench_home)
        assert res.code == 2 and said in one_line_error(res), argv


def test_goodput_cli_tsv_and_query(azbench_home) -> None:
    from tests.cli_helpers import azbench
    attempts, lines = killed_after_checkpoint_lines()
    with Store.open() as store:
        store_run_with_logs(store, attempts, lines, owner="alice")
    res = azbench("goodput", "r1", "-o", "tsv", "--query", "{w: wall_s, l: categories.lost_work, c: attempts[0].failure.failure_class}",
                  home=azbench_home)
    assert res.code == 0 and res.out == "85.0\t10.0\tnode_fail\n"
    table = azbench("goodput", "r1", home=azbench_home)
    assert "Top causes of lost GPU-hours" in table.out and "lost_work: from the checkpoint" in table.out


def test_the_pipeline_summary_says_where_each_cluster_went(azbench_home, monkeypatch) -> None:
    from orchestrator.pipelines import pipeline as pl
    from orchestrator.pipelines.results import PipelineResult, summary_markdown
    from tests.test_pipeline import _fake_spec, _sweep_with
    monkeypatch.setattr("orchestrator.runs.execute.run_sweep", _sweep_with(0.1))
    lines: list[str] = []
    with Store.open() as store:
        result = pl.run_pipeline(_fake_spec(), store, on_line=lines.append)
    line = result.summary.goodput["fp"]
    assert " over " in line and "% " in line
    assert f"[fp] fp: {line}" in lines
    assert f"- fp: {line}" in summary_markdown(PipelineResult(result.summary), with_report=False)


def test_staging_gates_and_replacements_are_spans_of_their_events() -> None:
    """`azbench prepare` (staging), `azbench health` (health_gate) and a node replacement
    (resize_replace, from its `seconds`) hold the whole cluster while they run; an event with
    no span (an older store's) claims nothing."""
    row = ClusterRow(name="c1", provider="fake", sku="h100", nodes=4, state=ClusterState.TERMINATED,
                     cluster_json=cluster().model_dump_json(), created_at=T0, updated_at=at(100),
                     terminated_at=at(100))
    events = [EventRow(kind="prepare", cluster="c1", ts=at(30), message="prepare smoke",
                       data={"started_at": at(10).isoformat()}),
              EventRow(kind="health", cluster="c1", ts=at(45), message="4 nodes checked",
                       data={"started_at": at(40).isoformat(), "seconds": 4.8}),
              EventRow(kind="node_replaced", cluster="c1", ts=at(70), message="node3 -> node5",
                       data={"node": "node3", "seconds": 12.5}),
              EventRow(kind="resize", cluster="c1", ts=at(80), message="4 -> 4 nodes")]
    g = gc.breakdown(row, events, [], at(200))
    assert g.categories["staging"] == 20 and g.categories["health_gate"] == 5
    assert g.categories["resize_replace"] == 12.5 and g.categories["idle"] == 100 - 20 - 5 - 12.5
    assert g.node_hours["staging"] == pytest.approx(20 * 4 / 3600, abs=1e-4)
    assert [s.category for s in g.spans] == ["staging", "health_gate", "resize_replace"]
    adds_up(g)


def test_by_owner_follows_the_clusters_size_history_as_cluster_goodput_does(azbench_home) -> None:
    """Issue 47.5: a 4-node cluster resized to 2 half way through an hour is 3 node-hours for
    `goodput --by owner` as for `--cluster` (before: 2 x 1 h = 2, the record's final count)."""
    with Store.open() as store:
        store.save_cluster(Cluster(name="c1", provider="fake", sku="h100", nodes=4, state=ClusterState.READY,
                                   cost_per_hour_usd=40.0, created_at=T0), owner="alice")
        store.add_event(EventRow(kind="resize", cluster="c1", ts=at(1800), message="4 -> 2 nodes",
                                 data={"before": 4, "after": 2, "started_at": at(1790).isoformat()}))
        row = store.get_cluster("c1")
        assert row is not None
        store.save_cluster(row.cluster.model_copy(update={"nodes": 2, "cost_per_hour_usd": 20.0}))
        (total,) = owners.by_owner(store, now=at(3600))
        whole = gc.cluster_goodput(store, "c1", now=at(3600))
        later = owners.by_owner(store, since=at(2700), now=at(3600))[0]
    assert sum(whole.node_hours.values()) == pytest.approx(3.0, abs=1e-3)
    assert total.node_hours == pytest.approx(sum(whole.node_hours.values()), rel=0.01)
    assert total.cost_usd == pytest.approx(sum(whole.cost_usd.values()), rel=0.01)  # $10/node-hour
    assert total.gpu_hours == pytest.approx(3.0 * 8)
    assert later.node_hours == pytest.approx(0.5)  # 15 min of 2 nodes


def test_a_failure_names_its_node_from_the_retry_or_the_evidence() -> None:
    """Issue 47.5: failure.nodes was [] although the evidence named node3."""
    from orchestrator.goodput.run import failed_nodes
    assert failed_nodes([], "NCCL watchdog timeout, rank 12 on node3", []) == ["node3"]
    assert failed_nodes([], "Xid 79 on gpu-node-12: fell off the bus", []) == ["gpu-node-12"]
    assert failed_nodes(["gpu-node-1"], "anything on node3", ["gpu-node-1", "gpu-node-3"]) == ["gpu-node-3"]
    assert failed_nodes([], "OOM in rank 0", []) == []


def test_run_prints_goodputs_lost_work_not_a_second_sum(azbench_home, capsys) -> None:
    """Issue 47.5: `run` said attempt 1 lost 8.1 s (the store's step times past the kept step)
    where goodput said 10.38 s (the kept checkpoint to the failure). Both print goodput's."""
    from orchestrator import paths
    from orchestrator.cli.run import _attempt_table
    from orchestrator.runs.attempts import RunOutcome
    attempts, lines = killed_after_checkpoint_lines()  # the store says 9.5 s, goodput 10
    with Store.open() as store:
        store_run_with_logs(store, attempts, lines)
        g = run_goodput(store, "r1")
    failure = g.attempts[0].failure
    assert failure is not None and failure.lost_work_s == 10
    _attempt_table([RunOutcome(run_id="r1", nodes=2, repeat=1, state="succeeded", message="", attempts=2)])  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "lost work s" in out and "10.0" in out and "9.5" not in out
