"""`azbench health` on a real 64-node local Slurm cluster: two injected slow nodes and one bad
node are found, drained with their reasons, nothing else is flagged; a run then avoids them, and
--undrain returns one."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.cli import main
from orchestrator.specs.run import RetryPolicy, RunSpec
from orchestrator.runs.execute import run_sweep
from orchestrator.store.database import Store
from tests.fixtures.slurm import local_spec, private_cluster

# 64 nodes on two cores: the gate test took 290 s under a load average of 40-90 (CI runs after
# a stop on a machine that may still be busy), so the suite's 300 s per-test limit was a speed
# test of the machine. 900 s still stops a real hang.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

NODES = 64
SLOW, BAD = ("node1", "node40"), "node2"  # node1/node2 are where a run would land first
SLOW_FACTOR = 10
# Before the first step the hang limit is the startup grace (issue 21), so torch starting slowly
# on a busy machine is not a hang; where this checkout has none, hang_timeout alone covers it.
SLOW_START_OK = ({"startup_grace": 180} if "startup_grace" in RetryPolicy.model_fields
                 else {"hang_timeout": 40})


@pytest.fixture(scope="module")
def big_cluster(tmp_path_factory):
    yield from private_cluster(tmp_path_factory, local_spec("fleet", NODES))


def reasons(cluster) -> dict[str, str]:
    from orchestrator.hosts.remote import LocalRunner
    out = LocalRunner(cluster.env).run(["sinfo", "-h", "-R", "-N", "-o", "%N|%E"])
    assert out.ok, out.stderr
    return dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)


def test_gate_drains_slow_and_bad_nodes_and_a_run_avoids_them(big_cluster, monkeypatch, capsys):
    cluster, home = big_cluster
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    with Store.open() as store:
        store.save_cluster(cluster)
    monkeypatch.setenv("AZBENCH_HEALTH_SLOW_NODES", ",".join(SLOW))
    # 10x slower, not 2x: a probe measured under contention in the first round against one
    # measured alone in the re-probe can differ by well over 1.3x on a busy machine; 10x cannot
    # flip a verdict at the 25 % tolerance.
    monkeypatch.setenv("AZBENCH_HEALTH_SLOW_FACTOR", str(SLOW_FACTOR))
    monkeypatch.setenv("AZBENCH_HEALTH_BAD_NODES", BAD)
    with pytest.raises(SystemExit) as done:
        main(["health", "fleet", "--json"])
    assert done.value.code == 9  # nodes were flagged: a pipeline sees it
    report = json.loads(capsys.readouterr().out)
    checks = {(v["node"], v["check"], v["status"]) for v in report["verdicts"]}
    # On failure, say what the throughput rule saw (round 1's suspects and median, each verdict).
    seen = {k: report.get(k) for k in ("suspects", "median_ops_per_s", "probe_rounds")}
    injected = {("node1", "collective", "slow"), ("node40", "collective", "slow"),
                ("node1", "throughput", "slow"), ("node40", "throughput", "slow"),
                ("node2", "collective", "fail")}
    # Every injected fault is found. A healthy node's CPU-clock probe can still read slow in all
    # three probes on a host that steals CPU from the guest (a run beside a second test worker
    # once named node55 besides the three): at most one such extra node is tolerated, and only
    # for throughput, never a collective, probe, disk or memory verdict.
    extra = checks - injected
    assert injected <= checks and not report["fabric"], (seen, report["verdicts"])
    assert len({n for n, _, _ in extra}) <= 1 and all(c == "throughput" for _, c, _ in extra), (seen, extra)
    flagged = sorted({"node1", "node2", "node40"} | {n for n, _, _ in extra}, key=lambda n: int(n[4:]))
    assert report["bad_nodes"] == flagged
    for v in report["verdicts"]:
        assert v["threshold"] is not None and (v["value"] is None) == (v["status"] == "fail")
    assert report["group_rounds"] <= 2 * 6  # 2 * log2(64)
    drained = reasons(cluster)
    assert sorted(drained, key=lambda n: int(n[4:])) == flagged
    assert re.match(r"azbench: collective slow: 10 GB/s \(threshold 75 GB/s\)", drained["node1"])
    assert "throughput slow" in drained["node40"] and "collective fail" in drained[BAD]

    # A run now lands elsewhere: the gate's node choice skips drained nodes.
    monkeypatch.delenv("AZBENCH_HEALTH_SLOW_NODES")
    monkeypatch.delenv("AZBENCH_HEALTH_SLOW_FACTOR")
    monkeypatch.delenv("AZBENCH_HEALTH_BAD_NODES")
    with Store.open() as store:
        [out] = run_sweep(RunSpec(recipe="smoke", cluster="fleet", nodes=[2],
                                  params={"target": 0.6, "max_seconds": 120}), store, poll_interval=0.3)
        assert out.state == "succeeded", out.message
        run = store.get_run(out.run_id)
    log = (run.run_dir + "/attempt-1/train.log")
    from orchestrator.slurm.states import expand_hostlist
    with open(log) as fh:
        used = expand_hostlist(re.search(r":::DLPAL azbench \d+ \d+ (\S+)", fh.read()).group(1))
    assert len(used) == 2 and not set(used) & set(flagged)

    with pytest.raises(SystemExit):
        main(["health", "fleet", "--undrain", BAD])
    assert "returned to service" in capsys.readouterr().out
    assert sorted(reasons(cluster)) == sorted(set(flagged) - {BAD})
    with pytest.raises(SystemExit) as again:  # it is in service now: nothing to return
        main(["health", "fleet", "--undrain", BAD])
    assert again.value.code == 2
    assert f"--undrain: {BAD} is not drained or down" in capsys.readouterr().err


def test_a_straggler_in_a_run_is_recorded_and_the_retry_excludes_it(big_cluster, monkeypatch, tmp_path):
    """Attempt 1 runs with one slow node and hangs after its first eval block (step 25), so the
    node's step time is logged; the retry must run without it. Torch's start-up on two busy cores
    falls under the startup grace (SLOW_START_OK), so the hang timeout after the first step is
    the 10 s test_faults uses (30 s had been the whole wait, start-up included)."""
    from orchestrator.slurm.states import expand_hostlist
    from orchestrator.hosts.remote import LocalRunner
    cluster, home = big_cluster
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    # Slurm fills the lowest free node names first: with node1 and node2 out of service the
    # 3-node attempt lands on node3-node5, so node4 is in it whether or not the gate test ran
    # first (it leaves node1 drained and node2 returned).
    drained = LocalRunner(cluster.env).run(["scontrol", "update", "NodeName=node1,node2", "State=DRAIN",
                                            "Reason=test: keep attempt 1 on node3-node5"])
    assert drained.ok, drained.stderr
    assert {"node1", "node2"} <= set(reasons(cluster))
    script = tmp_path / "hang-first.sh"
    script.write_text('if [ "${AZBENCH_ATTEMPT:-}" = 1 ]; then export AZBENCH_SMOKE_HANG_AT_STEP=30; fi\n')
    monkeypatch.setenv("BASH_ENV", str(script))
    monkeypatch.setenv("AZBENCH_SMOKE_SLOW_NODES", "node4")
    monkeypatch.setenv("AZBENCH_SMOKE_SLOW_SLEEP", "0.1")
    with Store.open() as store:
        store.save_cluster(cluster)
        [out] = run_sweep(RunSpec(recipe="smoke", cluster="fleet", nodes=[3],
                                  params={"target": 0.6, "max_seconds": 120},
                                  retry=RetryPolicy(**{"hang_timeout": 10, "backoff_s": 0, **SLOW_START_OK})),
                          store, poll_interval=0.3)
        run = store.get_run(out.run_id)
        attempts = store.list_attempts(out.run_id)
        events = [e for e in store.list_events(run_id=out.run_id) if e.kind == "straggler"]

    def used(n: int) -> list[str]:
        with open(f"{run.run_dir}/attempt-{n}/train.log") as fh:
            return expand_hostlist(re.search(r":::DLPAL azbench \d+ \d+ (\S+)", fh.read()).group(1))

    assert "node4" in used(1), "the slow node was not in attempt 1: the test proves nothing"
    assert out.state == "succeeded", out.message
    assert attempts[0].failure_class == "hang" and "node4" in attempts[1].excluded_nodes
    assert "node4" not in used(2)
    # node4 is recorded first (the worst). The recipe reads CPU time on the CPU build, so a busy
    # machine should not name a healthy node too; were it to, that node must be far less slow
    # (0.1 s of extra work per step against a forward pass of milliseconds).
    assert events and events[0].data.node == "node4", [e.data for e in events]
    assert events[0].data.value > events[0].data.threshold > events[0].data.median
    assert all(e.data.value < events[0].data.value / 2 for e in events[1:]), [e.data for e in events]
