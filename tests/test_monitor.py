"""The monitor's pure decisions, the failure-class table and the watch loop (fake clock/poller)."""

from __future__ import annotations

import pytest

from orchestrator.specs.run import RetryPolicy
from orchestrator.errors import RemoteError
from orchestrator.models import JobRef, JobState, JobStatus
from orchestrator.runs.failures import (
    FAILURES,
    Failure,
    FailureClass,
    Observation,
    classify,
    lost_work,
    scan_log,
)
from orchestrator.runs.monitor import (
    Action,
    AttemptRecord,
    WatchState,
    backoff_s,
    decide,
    decide_retry,
    job_status_from_log,
    watch,
)

S = JobState
F = FailureClass
REF = JobRef(cluster="c", job_id="7")


# -- the table ----------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [F.NODE_FAIL, F.NODE_LOST, F.BOOT_FAIL, F.PREEMPTED, F.TIMEOUT,
                                 F.OUT_OF_MEMORY, F.HANG, F.NCCL_ERROR, F.IB_ERROR, F.XID_ERROR,
                                 F.ECC_ERROR])
def test_infrastructure_classes_are_retryable(cls):
    assert FAILURES[cls].retryable and FAILURES[cls].category == "infra"


@pytest.mark.parametrize("cls", [F.CONFIG_ERROR, F.APP_ERROR, F.NOT_CONVERGED, F.DEADLINE, F.CANCELLED])
def test_user_classes_are_not(cls):
    assert not FAILURES[cls].retryable


def test_every_class_has_a_row():
    assert set(FAILURES) == set(FailureClass)


# -- classify -------------------------------------------------------------------------------

@pytest.mark.parametrize("state,cls", [(S.NODE_FAIL, F.NODE_FAIL), (S.BOOT_FAIL, F.BOOT_FAIL),
                                       (S.PREEMPTED, F.PREEMPTED), (S.TIMEOUT, F.TIMEOUT),
                                       (S.OUT_OF_MEMORY, F.OUT_OF_MEMORY)])
def test_slurm_states_map_to_their_class(state, cls):
    failure = classify(Observation(state=state, nodes=["n1", "n2"], down_nodes=["n2", "n9"]))
    assert failure.cls == cls and failure.suspects == ("n2",)


def test_success_and_non_convergence():
    assert classify(Observation(state=S.COMPLETED, exit_code=0, converged=True)) is None
    assert classify(Observation(state=S.COMPLETED, exit_code=0, converged=False)).cls == F.NOT_CONVERGED


def test_our_own_verdicts_come_first():
    assert classify(Observation(state=S.CANCELLED, hung=True)).cls == F.HANG
    assert classify(Observation(state=S.CANCELLED, deadline=True)).cls == F.DEADLINE
    assert classify(Observation(state=S.CANCELLED)).cls == F.CANCELLED


def test_a_node_down_under_a_failed_job_is_node_lost():
    failure = classify(Observation(state=S.FAILED, exit_code=1, nodes=["a", "b"], down_nodes=["b"]))
    assert failure.cls == F.NODE_LOST and failure.suspects == ("b",)


@pytest.mark.parametrize("line,cls", [
    ("1: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", F.XID_ERROR),
    ("1: RuntimeError: CUDA error: uncorrectable ECC error encountered", F.ECC_ERROR),
    ("1: NET/IB : Got completion with error 12, opcode 0, IBV_WC_RETRY_EXC_ERR", F.IB_ERROR),
    ("1: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp", F.NCCL_ERROR),
    ("1: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)", F.NCCL_ERROR),
])
def test_log_signatures_name_the_node_by_rank(line, cls):
    failure = classify(Observation(state=S.FAILED, exit_code=1, nodes=["a", "b"],
                                   log_tail=f"0: ok\n{line}\n"))
    assert failure.cls == cls and failure.suspects == ("b",) and failure.retryable


def test_rank_maps_to_node_with_several_tasks_per_node():
    hit = scan_log("9: NVRM: Xid 48\n", ["g1", "g2"], tasks_per_node=8)
    assert hit.suspects == ("g2",)


def test_srun_node_failure_line_names_the_node():
    hit = scan_log("srun: error: Node failure on gpu-07\n", ["gpu-03", "gpu-07"])
    assert hit.cls == F.NODE_LOST and hit.suspects == ("gpu-07",)


def test_application_errors_are_the_users():
    bad_lr = classify(Observation(state=S.FAILED, exit_code=2,
                                  log_tail="0: azbench-smoke: application error: --lr must be > 0\n"))
    assert bad_lr.cls == F.CONFIG_ERROR and "--lr" in bad_lr.evidence and not bad_lr.retryable
    crash = classify(Observation(state=S.FAILED, exit_code=1, log_tail="0: ValueError: boom\n"))
    assert crash.cls == F.APP_ERROR and crash.evidence == "ValueError: boom"
    oom = classify(Observation(state=S.FAILED, exit_code=1, log_tail="0: torch.OutOfMemoryError: CUDA out of memory\n"))
    assert oom.cls == F.APP_ERROR  # the batch size, not the machine


def test_lost_work_counts_past_the_kept_checkpoint():
    steps = [(s, 0.5) for s in range(1, 28)]
    assert lost_work(steps, 20) == (7, 3.5)
    assert lost_work(steps, None) == (27, 13.5)
    assert lost_work([], 20) == (0, 0.0)


# -- decide / decide_retry --------------------------------------------------------------------

def test_decide_hang_counts_only_while_running():
    ws = WatchState(started=0.0, last_progress_at=0.0)
    assert decide(S.PENDING, ws, 100, hang_timeout=10, deadline_s=1000) == Action.WAIT
    assert decide(S.RUNNING, ws, 100, hang_timeout=10, deadline_s=1000) == Action.CANCEL_HANG
    assert decide(S.RUNNING, ws, 1001, hang_timeout=1e9, deadline_s=1000) == Action.CANCEL_DEADLINE
    assert decide(S.FAILED, ws, 5000, hang_timeout=10, deadline_s=1000) == Action.DONE


def node_fail(*nodes: str) -> Failure:
    return Failure(F.NODE_FAIL, tuple(nodes))


def test_retry_excludes_every_suspect_so_far_and_resumes():
    policy = RetryPolicy(max_attempts=4, backoff_s=2)
    history = [AttemptRecord(1, node_fail("n2")), AttemptRecord(2, node_fail("n3"), ("n2",))]
    d = decide_retry(history, policy, elapsed_s=10, cluster_nodes=8, nodes_needed=2)
    assert d.retry and d.exclude == ("n2", "n3") and d.resume and d.backoff_s == 4


def test_retry_restart_policy_starts_from_scratch():
    d = decide_retry([AttemptRecord(1, node_fail("a"))], RetryPolicy(resume="restart"), 0)
    assert d.retry and not d.resume


@pytest.mark.parametrize("history,policy,elapsed,nodes,why", [
    ([AttemptRecord(1, Failure(F.CONFIG_ERROR))], RetryPolicy(), 0, None, "not retried"),
    ([AttemptRecord(3, node_fail("a"))], RetryPolicy(max_attempts=3), 0, None, "max_attempts"),
    ([AttemptRecord(1, node_fail("a"))], RetryPolicy(max_duration=100), 99, None, "max_duration"),
    ([AttemptRecord(1, node_fail("a", "b"))], RetryPolicy(), 0, 3, "nodes left"),
    ([AttemptRecord(1, node_fail("a"))], RetryPolicy(on=[]), 0, None, "not retried"),
])
def test_retry_stops(history, policy, elapsed, nodes, why):
    d = decide_retry(history, policy, elapsed, nodes, 2)
    assert not d.retry and why in d.reason


def test_backoff_is_exponential_and_bounded():
    policy = RetryPolicy(backoff_s=2)
    assert [backoff_s(policy, n) for n in (1, 2, 3)] == [2, 4, 8]
    assert backoff_s(policy, 30) == 60


# -- watch --------------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class ScriptedPoller:
    """Answers from a script; an Exception in it is raised (the cluster is unreachable)."""

    def __init__(self, script) -> None:
        self.script = list(script)
        self.calls = 0

    def poll(self, refs):
        self.calls += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return {REF.job_id: JobStatus(ref=REF, state=item)}


def test_watch_detects_a_hang_after_hang_timeout():
    clock = FakeClock()
    steps = iter([1, 2, 3] + [3] * 100)
    status, action = watch(REF, ScriptedPoller([S.PENDING, S.RUNNING]), lambda: (next(steps), None, None),
                           run_id="r", attempt=1, nodes=1, hang_timeout=10, deadline_s=1e6,
                           interval=1, clock=clock, sleep=clock.sleep)
    assert action == Action.CANCEL_HANG and 10 < clock.now <= 14


def test_pending_time_is_not_hang_time():
    clock = FakeClock()
    script = [S.PENDING] * 50 + [S.RUNNING, S.RUNNING, S.COMPLETED]
    status, action = watch(REF, ScriptedPoller(script), lambda: (None, None, None), run_id="r",
                           attempt=1, nodes=1, hang_timeout=10, deadline_s=1e6, interval=1,
                           clock=clock, sleep=clock.sleep)
    assert action == Action.DONE and status.state == S.COMPLETED


def test_watch_rides_out_an_unreachable_cluster_without_calling_it_a_hang():
    clock = FakeClock()
    down = RemoteError("connection refused")
    poller = ScriptedPoller([S.RUNNING] + [down] * 30 + [S.RUNNING, S.COMPLETED])
    steps = iter(range(1, 100))
    notes = []
    status, action = watch(REF, poller, lambda: (next(steps), None, None), run_id="r", attempt=1,
                           nodes=1, hang_timeout=10, deadline_s=1e6, interval=1, clock=clock,
                           sleep=clock.sleep, on_progress=lambda p: notes.append(p.note))
    assert action == Action.DONE and status.state == S.COMPLETED
    assert any("reconnecting" in n for n in notes)


def test_watch_gives_up_after_unreachable_s_with_an_attach_hint():
    clock = FakeClock()
    with pytest.raises(RemoteError) as err:
        watch(REF, ScriptedPoller([RemoteError("down")]), lambda: (None, None, None), run_id="r9",
              attempt=1, nodes=1, hang_timeout=10, deadline_s=1e6, interval=1, clock=clock,
              sleep=clock.sleep, unreachable_s=20)
    assert "azbench run --attach r9" in str(err.value)


def test_a_forgotten_job_is_settled_by_its_log_exit_line():
    unknown = JobStatus(ref=REF, state=S.UNKNOWN)
    assert job_status_from_log(unknown, "x\nAZBENCH_ATTEMPT_STOP 17 rc=0\n").state == S.COMPLETED
    failed = job_status_from_log(unknown, "AZBENCH_ATTEMPT_STOP 17 rc=3\n")
    assert failed.state == S.FAILED and failed.exit_code == 3
    assert job_status_from_log(unknown, "no stop line").state == S.UNKNOWN


# -- startup grace (issue 21 point 8a) ----------------------------------------------------

# Timing of NVIDIA's published v5.0 llama31_405b log eos-dfw_n64_ngc25.01_nemo/result_0.txt
# (mlcommons/training_results_v5.0 @ 0fdc28f, copied in /work/shared/mlperf-logs): the first
# MLLOG line at 0 s, the warm-up's tracked_stats (step 0) at 608.1 s, the first train_step_time
# at 662.8 s, then one every ~55 s.
FIRST_STEP_S, STEP_EVERY_S = 662.8, 55.0


class InjectedLog:
    """A launcher whose MLLOG file grows with the fake clock (lines injected at set times)."""

    def __init__(self, clock, lines):
        self.clock, self.lines = clock, lines  # [(seconds, mllog line)]

    def poll(self, refs):
        return {REF.job_id: JobStatus(ref=REF, state=S.RUNNING)}

    def tail(self, path, *, offset=0, nbytes=None):
        text = "".join(line + "\n" for t, line in self.lines if t <= self.clock.now)
        return text.encode()[-(nbytes or 0):] if nbytes else text.encode()


def _mllog(t_s, key, value, step=None):
    import json
    meta = {"step": step} if step is not None else {}
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": int(1_744_812_015_695 + t_s * 1000),
                                     "event_type": "POINT_IN_TIME", "key": key, "value": value,
                                     "metadata": meta})


def _405b_lines(steps):
    """The published 405B start, then `steps` training steps, then silence (a hang)."""
    lines = [(0.0, _mllog(0.0, "cache_clear", True)), (19.3, _mllog(19.3, "init_start", None))]
    lines += [(FIRST_STEP_S + i * STEP_EVERY_S, _mllog(FIRST_STEP_S + i * STEP_EVERY_S, "tracked_stats",
                                                      {"train_step_time": STEP_EVERY_S}, step=1152 * (i + 1)))
              for i in range(steps)]
    return lines


def _watch_405b(steps, *, startup_grace, hang_timeout=600):
    from orchestrator.runs.monitor import progress_reader
    clock = FakeClock()
    log = InjectedLog(clock, _405b_lines(steps))
    seen = []
    status, action = watch(REF, log, progress_reader(log, "mllog.txt"), run_id="r", attempt=1, nodes=64,
                           hang_timeout=hang_timeout, deadline_s=1e6, startup_grace=startup_grace,
                           interval=5, clock=clock, sleep=clock.sleep, on_progress=lambda p: seen.append(p.step))
    return action, clock.now, seen


def test_without_a_startup_grace_a_405b_start_is_called_a_hang():
    action, at, seen = _watch_405b(3, startup_grace=None)
    assert action == Action.CANCEL_HANG and 600 < at < FIRST_STEP_S and set(seen) == {None}


def test_the_startup_grace_covers_the_first_step_then_hang_timeout_applies():
    action, at, seen = _watch_405b(3, startup_grace=1800)
    last_step_at = FIRST_STEP_S + 2 * STEP_EVERY_S
    assert action == Action.CANCEL_HANG
    assert last_step_at + 600 < at <= last_step_at + 610  # the steady-state limit, not the grace
    assert [s for s in dict.fromkeys(seen) if s is not None] == [1152, 2304, 3456]


def test_a_job_that_never_steps_is_cancelled_at_the_end_of_its_grace():
    action, at, _ = _watch_405b(0, startup_grace=1800)
    assert action == Action.CANCEL_HANG and 1800 < at <= 1805


def test_decide_uses_the_grace_only_before_the_first_step():
    ws = WatchState(started=0, last_progress_at=0)
    assert decide(S.RUNNING, ws, 700, hang_timeout=600, deadline_s=1e6, startup_grace=1800) == Action.WAIT
    ws.last_step = 1
    assert decide(S.RUNNING, ws, 700, hang_timeout=600, deadline_s=1e6, startup_grace=1800) == Action.CANCEL_HANG


def test_the_405b_recipe_sets_a_startup_grace_above_the_published_first_step():
    from orchestrator.recipes.catalog import get_recipe
    launch = get_recipe("llama31_405b").launch
    assert launch.startup_grace_min is not None and launch.startup_grace_min * 60 > FIRST_STEP_S
    assert "training_results_v5.0" in launch.startup_grace_source
    spec = RetryPolicy.model_validate({"startup_grace": "45m"})
    assert spec.startup_grace == 2700 and RetryPolicy().startup_grace is None


def test_an_attempt_takes_the_runs_grace_else_the_recipes_and_none_without_live_logs():
    from types import SimpleNamespace

    from orchestrator.specs.run import RunSpec
    from orchestrator.recipes.catalog import get_recipe
    from orchestrator.runs.attempts import _startup_grace
    from orchestrator.seams import LauncherParts
    recipe = get_recipe("llama31_405b")

    def ctx(live=True, **retry):
        parts = LauncherParts(live_logs=SimpleNamespace() if live else None)  # type: ignore[arg-type]
        return SimpleNamespace(launcher=SimpleNamespace(parts=lambda: parts), recipe=recipe,
                               spec=RunSpec(recipe="llama31_405b", retry=retry))
    assert _startup_grace(ctx()) == recipe.launch.startup_grace_min * 60 == 1800
    assert _startup_grace(ctx(startup_grace="45m")) == 2700
    assert _startup_grace(ctx(live=False)) is None
    assert _startup_grace(SimpleNamespace(launcher=ctx().launcher, recipe=get_recipe("smoke"),
                                          spec=RunSpec(recipe="smoke"))) is None


def test_the_retry_excludes_the_node_only_the_evidence_names():
    """Issue 47.5: a failure whose evidence names node3 but whose scan matched no job node left
    excluded_nodes empty; the retry now leaves node3 out (fresh or read back from the store)."""
    from orchestrator.runs.execute import _stored_failure
    from orchestrator.runs.failures import with_named_suspects
    from orchestrator.store.schema import AttemptRow
    fresh = with_named_suspects(Failure(F.NCCL_ERROR, (), "NCCL watchdog timeout, rank 12 on node3"))
    d = decide_retry([AttemptRecord(1, fresh)], RetryPolicy(), 0, cluster_nodes=4, nodes_needed=2)
    assert fresh.suspects == ("node3",) and d.retry and d.exclude == ("node3",)
    row = AttemptRow(run_id="r", attempt=1, state="failed", failure_class="nccl_error",
                     message=fresh.describe(), excluded_nodes=[])
    stored = _stored_failure(row)
    assert stored is not None and stored.suspects == ("node3",)
    # its own suspects win; a user failure or an eviction names none to exclude
    assert with_named_suspects(node_fail("node1"), "node3").suspects == ("node1",)
    assert with_named_suspects(Failure(F.APP_ERROR, (), "rank 0 on node3: exit 1")).suspects == ()
    assert with_named_suspects(Failure(F.PREEMPTED, (), "evicted node3")).suspects == ()
