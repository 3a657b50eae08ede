"""Self-healing on a real 6-node local Slurm cluster: `azbench health --replace` retires an
injected bad node, starts a fresh one under a new name, gates it and returns it to service; the
store records each replacement; the per-call cap leaves the rest drained. Plus the typed
answer where a provider cannot replace nodes."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster
from orchestrator.store.database import Store
from tests.fixtures.slurm import local_spec, private_cluster


@pytest.fixture(scope="module")
def heal_cluster(tmp_path_factory):
    yield from private_cluster(tmp_path_factory, local_spec("heal", 6))


def _sinfo(cluster) -> dict[str, str]:
    from orchestrator.hosts.remote import LocalRunner
    out = LocalRunner(cluster.env).run(["sinfo", "-h", "-N", "-o", "%N %T"])
    assert out.ok, out.stderr
    return dict(line.split() for line in out.stdout.splitlines())


@pytest.mark.integration
def test_replace_swaps_a_bad_node_for_a_fresh_gated_one_and_caps_the_rest(heal_cluster, monkeypatch, capsys):
    cluster, home = heal_cluster
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    with Store.open() as store:
        store.save_cluster(cluster)
    monkeypatch.setenv("AZBENCH_HEALTH_BAD_NODES", "node3")
    with pytest.raises(SystemExit) as done:
        main(["health", "heal", "--replace", "--json"])
    assert done.value.code == 0, capsys.readouterr()  # the bad node was replaced by a healthy one
    report = json.loads(capsys.readouterr().out)
    assert report["drained"] == ["node3"]
    [rep] = report["replacements"]
    assert (rep["node"], rep["new_node"], rep["status"]) == ("node3", "node7", "replaced")
    assert "collective fail" in rep["reason"] and rep["seconds"] > 0 and rep["cost_usd"] == 0.0
    nodes = _sinfo(cluster)
    assert "node3" not in nodes and nodes["node7"] == "idle" and len(nodes) == 6
    with Store.open() as store:
        [event] = [e for e in store.list_events(cluster="heal") if e.kind == "node_replaced"]
        assert event.data.node == "node3" and event.data.new_node == "node7"
        assert event.data.reason and event.data.seconds > 0 and event.data.cost_usd == 0.0
        assert store.get_cluster("heal") is not None
        assert "node7" in Cluster.model_validate_json(store.get_cluster("heal").cluster_json).node_names

    # Another bad node with no replacement left to spend: it stays drained, and the cap says so.
    monkeypatch.setenv("AZBENCH_HEALTH_BAD_NODES", "node5")
    with pytest.raises(SystemExit) as capped:
        main(["health", "heal", "--replace", "--max-replacements", "0", "--json"])
    assert capped.value.code == 9
    second = json.loads(capsys.readouterr().out)
    assert second["replacements"] == [] and second["replace_capped"] == ["node5"]
    nodes = _sinfo(cluster)
    assert nodes["node5"] == "drained" and "node8" not in nodes
    with Store.open() as store:
        kinds = [e.kind for e in store.list_events(cluster="heal")]
    assert kinds.count("node_replaced") == 1 and "replace_capped" in kinds


@pytest.mark.integration
def test_a_run_spec_with_health_replace_replaces_what_its_gate_drains(heal_cluster, monkeypatch):
    """The attempt's fleet gate (runs/attempts._fleet_gate) with `health.replace` in the spec."""
    from types import SimpleNamespace

    from orchestrator.clusters import lifecycle
    from orchestrator.specs.run import HealthPolicy, RunSpec
    from orchestrator.runs.attempts import AttemptContext, _fleet_gate
    cluster, home = heal_cluster
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    monkeypatch.setenv("AZBENCH_HEALTH_BAD_NODES", "node2")
    spec = RunSpec(recipe="smoke", cluster="heal", nodes=[2],
                   health=HealthPolicy(replace=True, max_replacements=1))
    with Store.open() as store:
        current = Cluster.model_validate_json(store.get_cluster("heal").cluster_json)
        with lifecycle.connect(current) as access:
            ctx = AttemptContext(spec=spec, recipe=None, cluster=current, store=store,  # type: ignore[arg-type]
                                 access=access, on_progress=None, on_event=None, poll=0.3)
            drained = _fleet_gate(ctx, SimpleNamespace(id="r1", cluster="heal"), 1,  # type: ignore[arg-type]
                                  ["node1", "node2", "node4"])
        replaced = [e.data for e in store.list_events(cluster="heal") if e.kind == "node_replaced"]
    assert drained == ["node2"]
    assert replaced[-1].node == "node2" and replaced[-1].status == "replaced"
    assert "node2" not in _sinfo(cluster) and _sinfo(cluster)[replaced[-1].new_node] == "idle"


def test_a_provider_without_the_healer_part_says_so(azbench_home):
    from orchestrator.clusters import lifecycle
    from orchestrator.store.database import Store
    cluster = Cluster(name="c1", provider="ssh", sku="Local_CPU", nodes=2)
    with Store.open() as store, pytest.raises(MissingCapability) as info:
        lifecycle.replace_node(cluster, "node1", store)
    assert "cannot replace a node" in str(info.value) and info.value.exit_code == 7


# -- resize -------------------------------------------------------------------------------------

def test_resize_plan_keeps_gb200_in_whole_racks_and_removes_idle_nodes_first():
    from orchestrator.clusters.lifecycle import plan_resize
    from orchestrator.errors import ConfigError
    gb = Cluster(name="gb", provider="azure", sku="gb200", nodes=36,
                 node_names=[f"gb{i}" for i in range(1, 37)])
    with pytest.raises(ConfigError, match="whole NVLink racks of 18"):
        plan_resize(gb, 20)
    assert plan_resize(gb, 54).after == 54 and plan_resize(gb, 18).remove[0] == "gb36"
    cpu = Cluster(name="c", provider="local", sku="Local_CPU", nodes=4,
                  node_names=["node1", "node2", "node3", "node10"])
    plan = plan_resize(cpu, 2, busy=["node10"])
    assert plan.remove == ("node3", "node2") and plan.busy == ()
    plan = plan_resize(cpu, 1, busy=["node10", "node1"])
    assert plan.remove == ("node3", "node2", "node10") and plan.busy == ("node10",)
    with pytest.raises(ConfigError, match="at least one node"):
        plan_resize(cpu, 0)


@pytest.fixture(scope="module")
def resize_cluster(tmp_path_factory):
    yield from private_cluster(tmp_path_factory, local_spec("grow", 3))


@pytest.mark.integration
def test_resize_grows_then_refuses_to_shrink_under_a_job_unless_forced(resize_cluster, monkeypatch, capsys):
    from orchestrator.hosts.remote import LocalRunner
    cluster, home = resize_cluster
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    with Store.open() as store:
        store.save_cluster(cluster)
    with pytest.raises(SystemExit) as grown:
        main(["resize", "grow", "--nodes", "4", "--json"])
    assert grown.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["after"] == 4 and out["nodes"] == ["node1", "node2", "node3", "node4"]
    assert _sinfo(cluster) == {f"node{i}": "idle" for i in range(1, 5)}
    with pytest.raises(SystemExit) as too_big:  # beyond its slots: the quota preflight says no
        main(["resize", "grow", "--nodes", "100"])
    assert too_big.value.code != 0 and "at most" in capsys.readouterr().err

    runner = LocalRunner(cluster.env)  # a job on every node: a shrink would kill it
    job = runner.run(["sbatch", "--parsable", "-N", "4", "-o", "/dev/null", "--wrap", "sleep 120"])
    assert job.ok, job.stderr
    # Wait for the event, not a fixed time: up to 120 s (a busy machine starts jobs slowly),
    # usually well under a second; then the job must really be running.
    import time
    deadline = time.monotonic() + 120
    while set(_sinfo(cluster).values()) != {"allocated"} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(_sinfo(cluster).values()) == {"allocated"}, _sinfo(cluster)
    with pytest.raises(SystemExit) as refused:
        main(["resize", "grow", "--nodes", "2"])
    assert refused.value.code == 2 and "a job runs on node4, node3" in capsys.readouterr().err
    assert len(_sinfo(cluster)) == 4
    with pytest.raises(SystemExit):
        main(["resize", "grow", "--nodes", "2", "--force", "--json"])
    captured = capsys.readouterr()
    assert captured.out, captured.err
    out = json.loads(captured.out)
    assert out["removed"] == ["node4", "node3"] and out["forced"] == ["node4", "node3"]
    assert sorted(_sinfo(cluster)) == ["node1", "node2"]
    runner.run(["scancel", job.stdout.strip().split(";")[0]])
    with Store.open() as store:
        events = [e for e in store.list_events(cluster="grow") if e.kind == "resize"]
        assert [e.message for e in events] == ["3 -> 4 nodes", "4 -> 2 nodes"]
        assert Cluster.model_validate_json(store.get_cluster("grow").cluster_json).nodes == 2


def test_the_report_lists_each_replacement_from_the_store_events():
    from orchestrator.report.build import build_report
    from orchestrator.report.render import to_markdown
    from orchestrator.store.schema import EventRow
    events = [EventRow(kind="node_replaced", cluster="heal", message="node3 -> node7",
                       data={"node": "node3", "reason": "collective fail: none", "new_node": "node7",
                             "seconds": 1.25, "cost_usd": 0.0, "status": "replaced"}),
              EventRow(kind="up", cluster="heal", message="up 6 x Local_CPU"),
              EventRow(kind="node_replaced", cluster="other", data={"node": "a", "new_node": "b"})]
    report = build_report([], events=events, cluster=None)
    assert [(x.cluster, x.node, x.new_node) for x in report.replacements] == [
        ("heal", "node3", "node7"), ("other", "a", "b")]
    text = to_markdown(report)
    assert "Node replacements (self-healing)" in text and "| heal | node3 | node7 | replaced | 1.2" in text
    only = build_report([], [], events=events, cluster="heal")
    assert [x.node for x in only.replacements] == ["node3"]
