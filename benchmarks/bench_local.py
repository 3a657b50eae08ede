"""Local cluster figures (issue: the main job on a real local Slurm cluster).

- local `up` time for 4 nodes (target < 15 s), and adopt time of a running cluster;
- SSH connections opened during one watched smoke run through the ssh provider (target 1);
- scheduler calls per poll interval with 4 concurrent jobs (target 1).
Needs slurm-wlm, munge and openssh-server. Run: python benchmarks/bench_local.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="azb-bench-"))
    os.environ["AZBENCH_HOME"] = str(home)
    from orchestrator.providers.local.provider import LocalProvider
    from orchestrator.specs.cluster import load_cluster_spec
    provider = LocalProvider()
    spec = load_cluster_spec(None, {"name": "bench", "nodes": 4})
    start = time.perf_counter()
    cluster = provider.up(spec, provider.plan(spec))
    emit("local_up_4_nodes", time.perf_counter() - start, "s", target_s=15)
    start = time.perf_counter()
    provider.up(spec, provider.plan(spec))
    emit("local_up_adopt", time.perf_counter() - start, "s")
    try:
        concurrent_polls(cluster)
        ssh_connections(cluster, home)
    finally:
        provider.down(cluster)


def concurrent_polls(cluster) -> None:
    from orchestrator.hosts.remote import LocalRunner
    from orchestrator.models import AttemptSpec
    from orchestrator.slurm.launcher import SlurmLauncher
    launcher = SlurmLauncher(LocalRunner(env=dict(cluster.env)), cluster)
    refs = [launcher.submit(AttemptSpec(run_id=f"poll{i}", attempt=1, recipe="sleep", nodes=1,
                                        run_dir=f"{cluster.workdir}/bench/poll{i}",
                                        command="sleep 3"))
            for i in range(4)]
    polls, calls_before = 0, launcher.sacct_calls + launcher.squeue_calls
    while True:
        polls += 1
        states = launcher.poll(refs)
        if all(s.state.terminal for s in states.values()):
            break
        time.sleep(0.5)
    calls = launcher.sacct_calls + launcher.squeue_calls - calls_before
    emit("scheduler_calls_per_poll_4_jobs", calls / polls, "calls", polls=polls,
         sacct_calls=launcher.sacct_calls, squeue_calls=launcher.squeue_calls, target=1,
         note="the first poll learns that sacct has no accounting storage; later polls are 1 squeue")


def ssh_connections(cluster, home: Path) -> None:
    """One watched smoke run through a real sshd, counting paramiko connections."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from orchestrator.clusters import lifecycle
    from orchestrator.hosts.remote import SshRunner
    from orchestrator.specs.run import RunSpec
    from orchestrator.specs.cluster import load_cluster_spec
    from orchestrator.runs.execute import run_sweep
    from orchestrator.store.database import Store
    from testsupport.sshd import prepare_sshd
    (home / "sshd").mkdir()
    server = prepare_sshd(home / "sshd")
    server.start()
    opened: list[SshRunner] = []
    import orchestrator.runs.execute as runs_module
    real = runs_module.connect

    def counting(cluster):  # every Access the run opens: its shell is the SSH connection
        access = real(cluster)
        if isinstance(access.shell, SshRunner):
            opened.append(access.shell)
        return access
    runs_module.connect = counting
    try:
        spec = load_cluster_spec(None, {"name": "viassh", "provider": "ssh", "nodes": 4, "ssh": {
            "host": server.host, "port": server.port, "user": server.user,
            "key_path": str(server.client_key), "known_hosts": str(server.known_hosts),
            "workdir": cluster.workdir, "env": {"SLURM_CONF": cluster.env["SLURM_CONF"],
                                                "AZBENCH_PYTHON": sys.executable}}})
        with Store.open() as store:
            lifecycle.up(spec, store)
            start = time.perf_counter()
            out = run_sweep(RunSpec(recipe="smoke", cluster="viassh", nodes=[2],
                                    params={"target": 0.6}), store, poll_interval=0.5)
        emit("ssh_connections_per_watched_run", sum(r.connections_opened for r in opened),
             "connections", target=1, run_state=out[0].state,
             run_wall_s=round(time.perf_counter() - start, 2))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
