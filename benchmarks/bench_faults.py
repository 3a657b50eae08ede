"""Failure-recovery figures on the real local Slurm cluster (issue 5).

- node death -> resumed job running: a node's slurmd and tasks are SIGKILLed after a checkpoint;
  measured to the retry's AZBENCH_ATTEMPT_START and to its first training step (target: under
  30 s + SlurmdTimeout), with the detection and health-gate parts broken out;
- lost work per failure (steps and step-seconds past the checkpoint resumed from; target: at most
  one checkpoint interval, 20 steps);
- hang detection latency: last training step -> attempt recorded failed (target: hang_timeout
  plus a poll interval or two).
Prints JSON lines, never asserts. Run: python benchmarks/bench_faults.py [--slurmd-timeout 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402

QUICK = {"target": 0.6, "max_seconds": 120}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slurmd-timeout", type=int, default=10)
    args = parser.parse_args()
    os.environ["AZBENCH_HOME"] = tempfile.mkdtemp(prefix="azb-bench-faults-")
    from orchestrator.providers.local.provider import LocalProvider
    from orchestrator.specs.cluster import load_cluster_spec
    from orchestrator.store.database import Store
    provider = LocalProvider()
    spec = load_cluster_spec(None, {"name": "benchfaults", "nodes": 3,
                                    "local": {"slurmd_timeout": args.slurmd_timeout}})
    cluster = provider.up(spec, provider.plan(spec))
    try:
        with Store.open() as store:
            store.save_cluster(cluster)
            node_death(cluster, store, args.slurmd_timeout)
            hang(store)
    finally:
        provider.down(cluster)


def node_death(cluster, store, slurmd_timeout: int) -> None:
    from orchestrator.providers.local.provider import kill_node, restart_node
    from orchestrator.specs.run import RetryPolicy, RunSpec
    from orchestrator.models import JobRef
    from orchestrator.clusters.lifecycle import connect
    from orchestrator.runs.execute import run_sweep
    os.environ["AZBENCH_SMOKE_STEP_SLEEP"] = "0.1"
    killed: dict[str, float | str] = {}

    def killer() -> None:
        launcher = connect(cluster).launcher
        while not killed:
            for run in store.list_runs():
                log = Path(f"{run.run_dir}/attempt-1/train.log")
                steps = re.findall(r'"step": (\d+)', log.read_text()) if log.exists() else []
                if run.job_id and steps and int(steps[-1]) >= 26:
                    node = launcher.poll([JobRef(cluster=cluster.name, job_id=run.job_id)])[run.job_id].nodes[-1]
                    kill_node(cluster, node)
                    killed.update(node=node, at=time.time())
                    return
            time.sleep(0.05)

    threading.Thread(target=killer, daemon=True).start()
    [out] = run_sweep(RunSpec(recipe="smoke", cluster=cluster.name, nodes=[2], params=QUICK,
                              retry=RetryPolicy(backoff_s=0.5)), store, poll_interval=0.3)
    os.environ.pop("AZBENCH_SMOKE_STEP_SLEEP")
    restart_node(cluster, str(killed["node"]))
    first, second = store.list_attempts(out.run_id)
    log2 = Path(store.get_run(out.run_id).run_dir, "attempt-2", "train.log").read_text()
    start2 = float(re.search(r"AZBENCH_ATTEMPT_START (\d+)", log2).group(1))
    step_ms = [json.loads(m)["time_ms"] for m in re.findall(r":::MLLOG (\{.*\"tracked_stats\".*\})", log2)]
    gate = [e for e in store.list_events(run_id=out.run_id) if e.kind == "health_gate"][-1]
    at = float(killed["at"])
    emit("node_death_to_resumed_job_running", start2 - at, "s", target_s=30 + slurmd_timeout,
         slurmd_timeout_s=slurmd_timeout, run_state=out.state, note="to the retry's script start (1 s resolution)")
    emit("node_death_to_first_resumed_step", step_ms[0] / 1000 - at, "s", target_s=30 + slurmd_timeout)
    emit("node_death_detected", first.ended_at.timestamp() - at, "s", failure=first.failure_class,
         note="Slurm marks the node down after SlurmdTimeout; the job then ends NODE_FAIL")
    emit("health_gate_before_retry", float(re.search(r"in ([\d.]+)s", gate.message).group(1)), "s")
    emit("lost_work_steps_per_failure", first.lost_steps or 0, "steps", target_max=20,
         resumed_from_step=second.resumed_from_step)
    emit("lost_work_seconds_per_failure", first.lost_seconds or 0.0, "s")


def hang(store) -> None:
    from orchestrator.specs.run import HealthPolicy, RetryPolicy, RunSpec
    from orchestrator.runs.execute import run_sweep
    script = Path(tempfile.mkdtemp()) / "hang.sh"
    script.write_text('if [ "${AZBENCH_ATTEMPT:-}" = 1 ]; then export AZBENCH_SMOKE_HANG_AT_STEP=15; fi\n')
    os.environ["BASH_ENV"] = str(script)
    try:
        [out] = run_sweep(RunSpec(recipe="smoke", cluster="benchfaults", nodes=[1], params=QUICK,
                                  health=HealthPolicy(enabled=False),
                                  retry=RetryPolicy(hang_timeout=6, backoff_s=0)), store,
                          poll_interval=0.3)
    finally:
        os.environ.pop("BASH_ENV")
    first = store.list_attempts(out.run_id)[0]
    log1 = Path(store.get_run(out.run_id).run_dir, "attempt-1", "train.log").read_text()
    last_ms = max(json.loads(m)["time_ms"] for m in re.findall(r":::MLLOG (\{.*\"tracked_stats\".*\})", log1))
    emit("hang_detected_after_last_step", first.ended_at.timestamp() - last_ms / 1000, "s",
         hang_timeout_s=6, poll_s=0.3, failure=first.failure_class, run_state=out.state,
         note="includes scancel and the cancelled job's end")


if __name__ == "__main__":
    main()
