"""Self-healing on a real 6-node local Slurm cluster: `azbench health --replace` retires an
injected bad node, starts a fresh one under a new name, gates it and returns it to service; the
store records each replacement; the per-call cap leaves the rest drained. Plus the typed
answer where a provider cannot replace nodes."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from orchestrator.clusters.providers.base import ProviderBase
from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster
from orchestrator.store.database import Store
from tests.fixtures.slurm import local_spec, private_cluster


@pytest.fixture(scope="module")
def heal_cluster(tmp_path_factory):
    yield from private_cluster(tmp_path_factory, local_spec("heal", 6))


def _sinfo(cluster) -> dict[str, str]:
    from orchestrator.clusters.remote import LocalRunner
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
        assert event.data["node"] == "node3" and event.data["new_node"] == "node7"
        assert {"reason", "seconds", "cost_usd"} <= set(event.data)
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


def test_a_provider_without_the_capability_says_so():
    cluster = Cluster(name="c1", provider="ssh", sku="Local_CPU", nodes=2)
    with pytest.raises(MissingCapability) as info:
        ProviderBase().replace_node(cluster, "node1")
    assert "cannot replace a node" in str(info.value) and info.value.exit_code == 7
