"""Spot eviction on the real local Slurm cluster: a fake IMDS per node (loopback servers this
module starts), the spot agent (templates/spot_agent.py) as one process per emulated node, and a
`Preempt` event during the smoke run. The test evicts the node (kills its slurmd) when the agent
acknowledges the event, as Azure does. Plus pure tests of the agent's event filter, the
classification and the retry's node choice.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from orchestrator.specs.run import HealthPolicy, RetryPolicy, RunSpec
from orchestrator.models import JobState
from orchestrator.runs.failures import (
    FAILURES,
    PREEMPT_REASON,
    FailureClass,
    Observation,
    classify,
    preempted_nodes,
)
from orchestrator.runs.monitor import AttemptRecord, decide_retry
from orchestrator.store.database import Store
from testsupport.fake_imds import FakeImds
from tests.fixtures.slurm import local_spec, private_cluster

AGENT = Path(__file__).resolve().parents[1] / "templates" / "spot_agent.py"
QUICK = {"target": 0.6, "max_seconds": 120}


def load_agent():
    spec = importlib.util.spec_from_file_location("spot_agent", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- pure
def test_agent_and_classifier_agree_on_the_drain_reason():
    assert load_agent().PREEMPT_REASON == PREEMPT_REASON


def test_a_drained_for_preemption_node_makes_the_attempt_a_preemption():
    obs = Observation(state=JobState.FAILED, exit_code=75, nodes=["node1", "node2"],
                      down_nodes=["node2"], log_tail="0: NCCL error: remote process exited",
                      preempted_nodes=preempted_nodes({"node2": f"{PREEMPT_REASON} E1",
                                                       "node3": f"{PREEMPT_REASON} E2",
                                                       "node1": "Not responding"}))
    failure = classify(obs)
    assert failure.cls == FailureClass.PREEMPTED and failure.suspects == ("node2",)
    assert FAILURES[FailureClass.PREEMPTED].retryable
    # a node preempted outside the job, or a job that finished anyway, is no preemption
    assert classify(Observation(state=JobState.FAILED, exit_code=1, nodes=["node1"],
                                preempted_nodes=["node3"])).cls == FailureClass.APP_ERROR
    assert classify(Observation(state=JobState.COMPLETED, exit_code=0, nodes=["node2"],
                                preempted_nodes=["node2"])) is None


def test_retry_after_preemption_keeps_the_evicted_node_eligible():
    from orchestrator.runs.failures import Failure
    history = [AttemptRecord(1, Failure(FailureClass.NODE_FAIL, ("node1",))),
               AttemptRecord(2, Failure(FailureClass.PREEMPTED, ("node2",)))]
    decision = decide_retry(history, RetryPolicy(max_attempts=3, backoff_s=0), 0.0, 3, 2)
    assert decision.retry and decision.exclude == ("node1",) and decision.resume


def test_agent_handles_only_preempt_events_for_its_own_vm(monkeypatch):
    agent = load_agent()
    imds = FakeImds("vmss_3").start()
    calls: list[list[str]] = []
    monkeypatch.setattr(agent, "slurm", lambda argv: calls.append(argv) or "")
    try:
        imds.preempt(resources=["vmss_4"])
        imds.events.append({"EventId": "R1", "EventType": "Reboot", "Resources": ["vmss_3"]})
        args = agent.parse_args(["--node", "n3", "--endpoint", imds.endpoint, "--once",
                                 "--interval", "0.01"])
        args.instance = agent.instance_name(args.endpoint, "fallback")
        assert args.instance == "vmss_3"
        agent.poll_once(args, set())
        assert calls == [] and imds.acked == []
        mine = imds.preempt()
        handled: set[str] = set()
        agent.poll_once(args, handled)
        agent.poll_once(args, handled)  # once per EventId
        assert [a.event["EventId"] for a in imds.acked] == [mine["EventId"]]
        assert calls[0] == ["scontrol", "update", "NodeName=n3", "State=DRAIN",
                            f"Reason={PREEMPT_REASON} {mine['EventId']}"]
        assert imds.rejected == 0 and imds.polls == 3
    finally:
        imds.stop()


def test_agent_acknowledges_before_not_before():
    agent = load_agent()
    now = time.time()
    event = {"NotBefore": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))}
    assert now + 24 <= agent.deadline_of(event, 5.0, 60.0, now) <= now + 25.01
    assert agent.deadline_of({"NotBefore": ""}, 5.0, 25.0, now) == now + 25.0


# ---------------------------------------------------------------- the local cluster
@pytest.fixture(scope="module")
def spot_cluster(tmp_path_factory):
    for cluster, _ in private_cluster(tmp_path_factory, local_spec("spot", 3, slurmd_timeout=5)):
        yield cluster


@pytest.fixture
def store(spot_cluster, azbench_home):
    with Store.open() as s:
        s.save_cluster(spot_cluster)
        yield s


@pytest.fixture
def agents(spot_cluster, tmp_path):
    """One fake IMDS and one spot agent process per node; stopped by their own pids."""
    servers = {n: FakeImds(n).start() for n in spot_cluster.node_names}
    procs = {}
    try:
        for node, imds in servers.items():
            with open(tmp_path / f"agent-{node}.log", "w") as out:
                procs[node] = subprocess.Popen(
                    [sys.executable, str(AGENT), "--node", node, "--endpoint", imds.endpoint,
                     "--interval", "0.2", "--margin", "2"],
                    env={**os.environ, **spot_cluster.env}, stdout=out, stderr=subprocess.STDOUT)
        yield servers
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(10)
        for imds in servers.values():
            imds.stop()


def test_preempt_notice_checkpoints_and_the_run_resumes_elsewhere(spot_cluster, store, agents,
                                                                  tmp_path, monkeypatch):
    from orchestrator.providers.local.provider import kill_node
    from orchestrator.models import JobRef
    from orchestrator.clusters.lifecycle import connect
    monkeypatch.setenv("AZBENCH_SMOKE_STEP_SLEEP", "0.1")
    noticed: dict[str, object] = {}

    def evict(event) -> None:
        # Azure evicts once the event is acknowledged, but not at once: the eviction lands 2 s
        # later, after azbench has seen the job leave. Restoring before it (a node still up
        # counts as capacity) put the second attempt on the dying node.
        threading.Timer(2.0, kill_node, (spot_cluster, str(noticed["node"]))).start()

    def preempt_mid_run() -> None:
        launcher = connect(spot_cluster).launcher
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for run in store.list_runs():
                log = Path(f"{run.run_dir}/attempt-1/train.log")
                steps = re.findall(r'"step": (\d+)', log.read_text()) if log.exists() else []
                if run.job_id and steps and int(steps[-1]) >= 25:
                    node = launcher.poll([JobRef(cluster="spot", job_id=run.job_id)])[run.job_id].nodes[-1]
                    noticed.update(node=node, step=int(steps[-1]))
                    agents[node].on_ack = evict
                    noticed["event"] = agents[node].preempt(notice_s=30)
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=preempt_mid_run, daemon=True)
    thread.start()
    spec = RunSpec(recipe="smoke", cluster="spot", nodes=[2], params=QUICK,
                   health=HealthPolicy(enabled=False), retry=RetryPolicy(backoff_s=0.5))
    from orchestrator.runs.execute import run_sweep
    [out] = run_sweep(spec, store, poll_interval=0.3)
    thread.join(5)
    assert "event" in noticed, "the job never reached step 25"
    victim, imds = str(noticed["node"]), agents[str(noticed["node"])]
    assert out.state == "succeeded", out.message
    attempts = store.list_attempts(out.run_id)
    assert len(attempts) == 2, [(a.failure_class, a.message) for a in attempts]
    first, second = attempts
    assert first.failure_class == "preempted" and victim in first.message
    # the checkpoint was taken on the notice and before the acknowledgement, inside the window
    log1 = Path(store.get_run(out.run_id).run_dir, "attempt-1", "train.log").read_text()
    saved = int(re.search(r"preemption notice \(SIGUSR1\): checkpointed step (\d+)", log1).group(1))
    assert saved >= int(noticed["step"])
    [acked] = imds.acked
    assert acked.at < parsedate_to_datetime(noticed["event"]["NotBefore"]).timestamp()
    # resumed from that checkpoint, at most one step of work lost, on whatever nodes were up
    assert second.resumed_from_step == saved
    assert first.lost_steps is not None and first.lost_steps <= 1
    assert victim not in second.excluded_nodes
    log = Path(out.log_path).read_text()
    assert f'"key": "resumed_from_checkpoint", "value": {saved}' in log
    [result] = store.list_results()
    assert result.resumed and result.converged
    restore = [e for e in store.list_events(run_id=out.run_id) if e.kind == "spot_restore"]
    assert restore and restore[0].data.nodes == [victim]
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-n", victim, "-o", "%E"], capture_output=True,
                           text=True, env={**os.environ, **spot_cluster.env})
    assert PREEMPT_REASON not in sinfo.stdout  # resumed in Slurm after the restore


def test_run_and_time_wrapper_survives_the_notice_and_the_trainer_gets_it(tmp_path):
    """slurmstepd signals every process of the step; the rank-0 wrapper must outlive SIGUSR1."""
    import signal

    from orchestrator.templating import render
    ready = tmp_path / "ready"
    trainer = (f"python3 -c 'import signal, sys, time, pathlib; "
               f"signal.signal(signal.SIGUSR1, lambda *a: (print(\"checkpointed\", flush=True), sys.exit(75))); "
               f"pathlib.Path(\"{ready}\").touch(); time.sleep(60)'")
    wrapper = render("run_and_time.sh.j2", command=trainer, benchmark="b", recipe="t")
    script = tmp_path / "rat.sh"
    script.write_text(wrapper.replace("/results/", f"{tmp_path}/"))
    proc = subprocess.Popen(["bash", str(script)], env={**os.environ, "SLURM_PROCID": "0"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        for _ in range(300):
            if ready.exists():
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGUSR1)  # every process of the "step", wrapper and trainer
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err
    log = (tmp_path / "mllog_rank0.log").read_text()
    assert "checkpointed" in log and "RUNANDTIME_STOP" in log and "RESULT," not in log
    assert "SIGUSR1 (preemption notice) passed to the trainer" in err
