"""The main job end to end on real parts: the local Slurm cluster, the smoke recipe, through
LocalRunner, through SshRunner (a real sshd on loopback), and through the CLI as a user runs it.
"""

from __future__ import annotations

import json
import sys

import pytest

from orchestrator.specs.run import RunSpec
from orchestrator.specs.cluster import load_cluster_spec
from orchestrator.results.mllog import parse_file
from orchestrator.runs.execute import run_sweep
from orchestrator.store.database import Store
from tests.cli_helpers import azbench, one_line_error

pytestmark = pytest.mark.integration

# A lower target keeps each run to a few seconds; the recipe and the flow are the real ones.
QUICK = {"target": 0.6, "max_seconds": 120}


def check_smoke_log(log, nodes: int) -> None:
    summary = parse_file(log)
    assert summary.benchmark == "smoke" and summary.status == "success"
    assert summary.run_start_ms and summary.run_stop_ms > summary.run_start_ms
    assert summary.global_batch_size == 32 * nodes
    assert summary.eval_points[-1].value >= 0.6
    assert len(summary.step_times) >= 10 and summary.step_time_source == "tracked_stats"
    assert summary.platform == f"{nodes}xLocal_CPU"


def sweep_and_check(store: Store, cluster_name: str, nodes: list[int]) -> None:
    outcomes = run_sweep(RunSpec(recipe="smoke", cluster=cluster_name, nodes=nodes, params=QUICK),
                         store, poll_interval=0.3)
    assert [(o.nodes, o.state) for o in outcomes] == [(n, "succeeded") for n in nodes]
    for outcome in outcomes:
        check_smoke_log(outcome.log_path, outcome.nodes)
        attempts = store.list_attempts(outcome.run_id)
        assert [(a.attempt, a.state) for a in attempts] == [(1, "succeeded")]
        assert attempts[0].job_id == store.get_run(outcome.run_id).job_id
    results = store.list_results(cluster=cluster_name)
    assert sorted(r.nodes for r in results) == nodes
    assert all(r.converged and r.benchmark == "smoke" and r.source == "run" for r in results)


# The CLI flow below runs 1 and 2 nodes through the local runner; here the local runner runs one
# node and the SSH runner two (the multi-node launch, which crosses more of the transport).
def test_smoke_at_1_node_through_local_runner(local_cluster, azbench_home):
    with Store.open() as store:
        store.save_cluster(local_cluster)
        sweep_and_check(store, local_cluster.name, [1])


def test_smoke_at_2_nodes_through_ssh_runner(local_cluster, sshd, azbench_home):
    from orchestrator.clusters import lifecycle
    spec = load_cluster_spec(None, {
        "name": "viassh", "provider": "ssh", "nodes": 4,
        "ssh": {"host": sshd.host, "port": sshd.port, "user": sshd.user,
                "key_path": str(sshd.client_key), "known_hosts": str(sshd.known_hosts),
                "workdir": local_cluster.workdir,
                "env": {"SLURM_CONF": local_cluster.env["SLURM_CONF"],
                        "AZBENCH_PYTHON": sys.executable}}})
    with Store.open() as store:
        cluster = lifecycle.up(spec, store).cluster
        assert cluster.ssh is not None and cluster.node_names == local_cluster.node_names
        sweep_and_check(store, "viassh", [2])


def test_cli_flow_up_run_report_down(azbench_home):
    up = azbench("up", "--provider", "local", "--name", "cli", "--nodes", "2", home=azbench_home)
    assert up.code == 0, up.err
    try:
        status = json.loads(azbench("status", "cli", "--json", home=azbench_home).out)
        assert [(n["name"], n["state"]) for n in status["nodes"]] == [("node1", "idle"), ("node2", "idle")]
        assert status["cost_so_far_usd"] == {"cli": 0.0}
        bad = azbench("run", "smoke", "--nodes", "1,4", home=azbench_home)
        assert bad.code == 2
        assert "4 nodes requested but the cluster has 2" in one_line_error(bad)
        unknown = azbench("run", "nosuch", home=azbench_home)
        assert unknown.code == 2 and "unknown recipe 'nosuch'" in one_line_error(unknown)
        run = azbench("run", "smoke", "--nodes", "1,2", "-p", "target=0.6", "--poll", "0.3",
                      home=azbench_home)
        assert run.code == 0, run.err
        assert "running: step" in run.err  # progress lines while it ran
        report = json.loads(azbench("report", "--cluster", "cli", "--json", home=azbench_home).out)
        weak = report["weak_scaling"]
        assert len(weak) == 1 and weak[0]["efficiency"] > 0
        assert {g["nodes"] for g in report["groups"]} == {1, 2}
        run_id = json.loads(azbench("status", "--json", home=azbench_home).out)["runs"][0]["id"]
        logs = azbench("logs", run_id, home=azbench_home)
        assert logs.code == 0 and ":::MLLOG" in logs.out and '"run_stop"' in logs.out
    finally:
        down = azbench("down", "cli", home=azbench_home)
    assert down.code == 0, down.err
    after = azbench("run", "smoke", "--cluster", "cli", home=azbench_home)
    assert after.code == 2 and "cluster 'cli' is down" in one_line_error(after)


def test_run_without_any_cluster_says_so(azbench_home):
    result = azbench("run", "smoke", home=azbench_home)
    assert result.code == 2 and "no cluster is up" in one_line_error(result)
