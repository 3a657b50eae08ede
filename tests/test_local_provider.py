"""The local provider against real Slurm daemons: up, jobs, adopt, node failure, down."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orchestrator import paths
from orchestrator.providers.local import provider as local_mod
from orchestrator.providers.local import proc as localproc
from orchestrator.providers.local.provider import LocalProvider, kill_node, load_state, restart_node
from orchestrator.hosts.remote import LocalRunner
from orchestrator.errors import PreflightError, ProvisionError
from orchestrator.models import ClusterState
from tests.fixtures.slurm import local_spec

pytestmark = pytest.mark.integration


def _wait(predicate, timeout_s: float, what: str):
    """Poll a real Slurm daemon until `predicate()` is truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_plan_lists_daemons_and_costs_nothing():
    plan = LocalProvider().plan(local_spec("plan", 4))
    assert (plan.provider, plan.sku, plan.nodes, plan.cost_per_hour_usd) == ("local", "Local_CPU", 4, 0.0)
    assert [s.name for s in plan.scale_sets] == ["node[1-4]"]
    kinds = {r.kind: r for r in plan.resources}
    assert kinds["slurmd"].count == 4
    assert kinds["slurmctld"].properties["port"] == "chosen at up"


def test_missing_binaries_raise_preflight_with_install_hint(monkeypatch, azbench_home):
    monkeypatch.setattr(local_mod.shutil, "which", lambda name, path=None: None)
    with pytest.raises(PreflightError) as err:
        LocalProvider().up(local_spec("nobins", 2))
    assert str(err.value) == "slurm/munge not found: apt-get install slurm-wlm munge"


def test_the_cluster_fixture_waits_until_every_node_is_idle(tmp_path_factory):
    """`local_cluster` promises four idle nodes: the wait returns only once a downed node is
    back, and fails naming the states when one stays down past its bound."""
    import threading

    from tests.fixtures.slurm import private_cluster, wait_all_idle
    for cluster, _ in private_cluster(tmp_path_factory, local_spec("idlewait", 2)):
        runner = LocalRunner(cluster.env)
        down = runner.run(["scontrol", "update", "nodename=node2", "state=down", "reason=test"])
        assert down.ok, down.stderr
        with pytest.raises(pytest.fail.Exception, match=r"nodes not all idle after 1 s: .*'node2': 'down'"):
            wait_all_idle(cluster, timeout_s=1.0)
        timer = threading.Timer(1.0, runner.run, [["scontrol", "update", "nodename=node2", "state=resume"]])
        timer.start()
        try:
            assert wait_all_idle(cluster, timeout_s=60.0) == {"node1": "idle", "node2": "idle"}
        finally:
            timer.join()


def test_session_cluster_runs_a_two_node_job(local_cluster):
    runner = LocalRunner(local_cluster.env)
    idle = runner.run(["sinfo", "-h", "-N", "-o", "%N %T"])
    assert idle.ok, idle.stderr
    assert sorted(idle.stdout.split()) == sorted(["node1", "node2", "node3", "node4"] + ["idle"] * 4)
    out = Path(local_cluster.workdir) / "hostname-job.out"
    script = "#!/bin/bash\nsrun -N 2 bash -c 'echo $SLURMD_NODENAME $(hostname)'\n"
    (Path(local_cluster.workdir) / "job.sh").write_text(script)
    sub = runner.run(["sbatch", "--parsable", "-N", "2", "-o", str(out),
                      str(Path(local_cluster.workdir) / "job.sh")])
    assert sub.ok, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]

    def finished() -> str | None:
        res = runner.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"])
        state = res.stdout.strip()
        return state if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") else None

    assert _wait(finished, 60, f"job {job_id}") == "COMPLETED"
    lines = out.read_text().split("\n")
    assert sorted(line.split()[0] for line in lines if line) == ["node1", "node2"]
    # No database: the jobcomp text file is the durable record of finished jobs.
    record = Path(str(local_cluster.properties.jobcomp_file)).read_text()
    assert f"JobId={job_id} " in record and "JobState=COMPLETED" in record


@pytest.fixture
def small_cluster(azbench_home):
    provider = LocalProvider()
    spec = local_spec("fault", 2, slurmd_timeout=5)
    try:
        cluster = provider.up(spec, provider.plan(spec))
    except PreflightError as exc:
        pytest.skip(str(exc))
    yield provider, spec, cluster
    provider.down(cluster)


def test_second_up_adopts_then_down_stops_every_daemon(small_cluster):
    provider, spec, cluster = small_cluster
    before = load_state(paths.cluster_dir(spec.name))
    assert before is not None and set(before.daemons) == {"munged", "slurmctld", "slurmd:node1",
                                                          "slurmd:node2"}
    again = provider.up(spec, provider.plan(spec))
    after = load_state(paths.cluster_dir(spec.name))
    assert again.env == cluster.env and after is not None
    assert {k: d.pid for k, d in after.daemons.items()} == {k: d.pid for k, d in before.daemons.items()}
    assert provider.describe(spec.name).state == ClusterState.READY

    provider.down(cluster)
    assert not any(localproc.alive(d.pid, d.start_time) for d in before.daemons.values())
    assert provider.describe(spec.name) is None
    assert (Path(str(cluster.properties.cluster_dir)) / "log" / "slurmctld.log").exists()
    provider.down(cluster)  # idempotent


def test_half_dead_cluster_is_restarted_on_up(small_cluster):
    provider, spec, cluster = small_cluster
    before = load_state(paths.cluster_dir(spec.name))
    ctld = before.daemons["slurmctld"]
    os.kill(ctld.pid, 9)
    _wait(lambda: not localproc.alive(ctld.pid, ctld.start_time), 60, "slurmctld to die")
    assert provider.describe(spec.name).state == ClusterState.FAILED
    provider.up(spec, provider.plan(spec))
    after = load_state(paths.cluster_dir(spec.name))
    assert all(localproc.alive(d.pid, d.start_time) for d in after.daemons.values())
    assert not any(localproc.alive(d.pid, d.start_time) for d in before.daemons.values())


def test_kill_node_marks_it_down_and_restart_returns_it(small_cluster):
    provider, spec, cluster = small_cluster
    runner = LocalRunner(cluster.env, cwd=Path(cluster.workdir))
    sub = runner.run(["sbatch", "--parsable", "-N", "2", "-w", "node1,node2",
                      "--wrap", "srun sleep 300"])
    assert sub.ok, sub.stderr
    job_id = sub.stdout.strip()
    state = load_state(paths.cluster_dir(spec.name))
    marker = f"{state.cluster_dir}:node2"
    _wait(lambda: localproc.step_pids(marker, exact=True), 30, "job steps on node2")

    kill_node(cluster, "node2")
    assert localproc.step_pids(marker, exact=True) == []
    slurmd = state.daemons["slurmd:node2"]
    assert not localproc.alive(slurmd.pid, slurmd.start_time)

    def node2_down() -> bool:
        res = runner.run(["sinfo", "-h", "-n", "node2", "-o", "%T"])
        return res.stdout.strip().startswith("down")

    _wait(node2_down, 60, "node2 to be marked down")
    runner.run(["scancel", job_id])
    restart_node(cluster, "node2")
    res = runner.run(["sinfo", "-h", "-n", "node2", "-o", "%T"])
    assert res.stdout.strip() == "idle"


def test_not_ready_in_time_quotes_slurmctld_log_and_stops_daemons(monkeypatch, azbench_home):
    monkeypatch.setattr(local_mod, "node_states", lambda state, sinfo="sinfo": {"node1": "down*"})
    spec = local_spec("slow", 1)
    try:
        local_mod.find_binaries()
    except PreflightError as exc:
        pytest.skip(str(exc))
    with pytest.raises(ProvisionError) as err:
        LocalProvider(ready_timeout_s=0.5).up(spec)
    message = str(err.value)
    assert "did not become ready within 0.5 s (node1=down*)" in message
    assert "last lines of slurmctld.log" in message
    state = load_state(paths.cluster_dir("slow"))
    assert state is not None and not any(localproc.alive(d.pid, d.start_time)
                                         for d in state.daemons.values())
