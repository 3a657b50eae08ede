"""Grow within Azure's limits (issue 39, point 3), against the fake ARM (VMs not booted, so no
Slurm: join_timeout_s 0).

A scale set with singlePlacementGroup holds at most 100 VMs ("A scale set configured with a
single placement group has a max capacity of 100 VMs", https://learn.microsoft.com/azure/
virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups); the fake refuses more
with 400. A grow fills the sets that have room first, in whole racks of the cluster's own size
(GB200), then adds sets; a shrink parks VMs (deallocated: Azure bills no compute for them) so a
grow brings the same instance ids back instead of burning new ones."""

from __future__ import annotations

import json

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.errors import ConfigError
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from tests.test_azure_lifecycle import run_cli, wired  # noqa: F401 (a fixture)

INGRESS = "203.0.113.7/32"


def spec_for(name: str, sku: str, nodes: int, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku=sku, nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, "self_expiry": False, **azure})


def capacities(fake, cluster: str) -> dict[str, int]:
    return {n: r["sku"]["capacity"] for n, r in sorted(fake.of_type("virtualMachineScaleSets").items())
            if n.startswith(f"{cluster}-")}


def writes(fake, since: int) -> list[str]:
    """'PATCH 200 virtualMachineScaleSets/x', 'POST 202 x/deallocate', 'PATCH 200 tags of x'."""
    out = []
    for e in fake.since(since):
        if e.method not in ("PUT", "PATCH", "POST", "DELETE"):
            continue
        if e.path.endswith("/tags/default"):
            out.append(f"{e.method} {e.status} tags of {e.path.split('/providers/Microsoft.Resources/')[0].rsplit('/', 1)[-1]}")
        else:
            out.append(f"{e.method} {e.status} {e.path.rsplit('/', 2)[-2]}/{e.path.rsplit('/', 1)[-1]}")
    return out


@pytest.fixture
def gb200(fake, clients, azbench_home):
    """2,048 GB200 VMs: 128 racks of 16 in 22 sets, 18 of 96 VMs (6 racks) and 4 of 80 (5 racks)."""
    for row in fake.usages["eastus"]:
        row["limit"] = 1_000_000  # 2,048 x 128 vCPUs, and more to grow
    p = AzureProvider(clients, capacity_wait_s=0, join_timeout_s=0)
    spec = spec_for("big", "gb200", 2048)
    cluster = p.up(spec, p.plan(spec))
    sets = capacities(fake, "big")
    assert len(sets) == 22 and list(sets.values()).count(96) == 18 and list(sets.values()).count(80) == 4
    return p, cluster


def test_2048_to_2064_fills_a_set_with_room_and_never_patches_past_100(fake, gb200):
    p, cluster = gb200
    mark = fake.mark()
    grown = p.resize(cluster, 2064)
    # One capacity PATCH, on a set with room; then the set's next instance id noted in its tags.
    assert writes(fake, mark) == ["PATCH 200 virtualMachineScaleSets/big-gpu-18", "PATCH 200 tags of big-gpu-18"]
    assert fake.of_type("virtualMachineScaleSets")["big-gpu-18"]["tags"]["azbench-next-id"] == "96"
    after = capacities(fake, "big")
    assert after["big-gpu-18"] == 96 and max(after.values()) == 96
    assert grown.nodes == 2064 and grown.properties.rack_size() == 16


def test_2048_plus_100_is_refused_as_a_partial_rack_and_2160_adds_a_set(fake, gb200):
    p, cluster = gb200
    with pytest.raises(ConfigError, match="nearest valid counts are 2144 or 2160"):
        lifecycle.plan_resize(cluster, 2048 + 100)
    mark = fake.mark()
    grown = p.resize(cluster, 2160)  # 7 racks: one in each 80-VM set, three in a new set
    after = capacities(fake, "big")
    assert [after[f"big-gpu-{i}"] for i in (18, 19, 20, 21)] == [96, 96, 96, 96]
    assert after["big-gpu-22"] == 48 and max(after.values()) <= 100
    assert sum(after.values()) == 2160 == grown.nodes
    assert not [w for w in writes(fake, mark) if " 400 " in w]
    new_set = fake.of_type("virtualMachineScaleSets")["big-gpu-22"]
    assert new_set["tags"]["azbench-rack-vms"] == "16" and new_set["properties"]["singlePlacementGroup"] is True


def test_shrink_and_grow_cycles_bring_the_same_vms_back(fake, clients, azbench_home):
    """Three cycles of 4 -> 2 -> 4 on a set with 12 slots: a grow starts the parked VMs again
    (same instance ids, same Slurm slots), so nothing is created and nothing deleted."""
    p = AzureProvider(clients, capacity_wait_s=0, join_timeout_s=0)
    spec = spec_for("cyc", "h100", 4)
    cluster = p.up(spec, p.plan(spec))
    names = sorted(cluster.node_names)
    key = fake._vmss_key("cyc-gpu-00")
    mark = fake.mark()
    for _ in range(3):
        plan = lifecycle.plan_resize(cluster, 2)
        cluster = p.resize(cluster, 2, plan.remove)
        assert len(cluster.node_names) == 2 and cluster.nodes == 2
        cluster = p.resize(cluster, 4)
        assert sorted(cluster.node_names) == names
    assert fake._instance_ids(key) == [0, 1, 2, 3]  # no id burned, none made
    done = writes(fake, mark)
    assert not [w for w in done if "virtualMachineScaleSets" in w or "/delete" in w], done  # no capacity change
    assert [w.rsplit("/", 1)[-1] for w in done if w.startswith("POST")] == ["deallocate", "start"] * 3
    assert fake.of_type("virtualMachineScaleSets")["cyc-gpu-00"]["tags"]["azbench-parked"] == ""


def test_resize_dry_run_prints_each_sets_change_and_writes_nothing(fake, wired, capsys):
    """`resize NAME N --dry-run`: one line per set that changes, `<set>: <now> -> <after>`, and
    `-o json` the same as {"sets": [...]}: no write, no SSH (the record's head is unreachable)."""
    p = AzureProvider(wired, capacity_wait_s=0, join_timeout_s=0)
    spec = spec_for("dry", "h100", 3, max_vms_per_scale_set=2)
    with Store.open() as store:
        store.save_cluster(p.up(spec, p.plan(spec)), spec.model_dump_json())
    mark = fake.mark()
    assert run_cli("resize", "dry", "5", "--dry-run") == 0
    out = capsys.readouterr().out
    # Sets of at most 2 (azure.max_vms_per_scale_set): the one with room, then a new set.
    assert out.splitlines() == ["dry-gpu-01: 1 -> 2", "dry-gpu-02: 0 -> 1"]
    assert run_cli("resize", "dry", "--nodes", "2", "--dry-run", "-o", "json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == {"sets": [{"name": "dry-gpu-01", "now": 1, "after": 0}]}  # the last node goes first
    assert not writes(fake, mark)
