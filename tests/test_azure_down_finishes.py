"""`down` that finishes the job it started and deletes only what it names (issue 39, points 4
and 5), against the fake ARM, Alice's cluster and Bob, her teammate on the subscription."""

from __future__ import annotations

import json

import pytest

from orchestrator.models import ClusterState
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from testsupport.fake_arm import arm_writes
from tests.cli_helpers import run_cli


def spec_for(name: str, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, **azure})


def up(principals, who: str, name: str, **azure):
    clients = principals.act_as(who)
    p = AzureProvider(clients, capacity_wait_s=0, join_timeout_s=0)
    spec = spec_for(name, **azure)
    with Store.open() as store:
        store.save_cluster(p.provisional(spec, p.plan(spec)), spec.model_dump_json())
        store.save_cluster(p.up(spec, p.plan(spec)), spec.model_dump_json())


def role_definitions(fake) -> int:
    return sum(1 for k in fake.resources if "/roledefinitions/" in k)


def test_a_down_whose_role_delete_fails_says_rerun_down_and_the_rerun_finishes(principals, capsys):
    fake = principals.fake
    up(principals, "alice", "half")
    fault = fake.add_fault("error500", method="DELETE", path_contains="roleDefinitions", times=50)
    code, out, err = run_cli(capsys, "down", "half", "--yes")
    assert code == 4
    line = err.strip()
    assert "\n" not in line and "rerun `azbench down half`" in line and "up resumes" not in line
    assert "azbench self-expiry" in line  # what is left: the custom role definition
    assert "azbench-half" not in {r["name"] for r in fake.resources.values()}  # the group went
    with Store.open() as store:
        row = store.get_cluster("half")
        assert row.state == ClusterState.DELETE_FAILED
        failed = [e for e in store.list_events(cluster="half") if e.kind == "down_failed"]
        assert failed and "azbench self-expiry" in failed[-1].message
    code, out, err = run_cli(capsys, "status", "half", "-o", "json")
    shown = json.loads(out)
    assert shown["clusters"][0]["state"] == "delete failed"
    assert "down_failed" in [e["kind"] for e in shown["events"]]
    # `up` of a cluster half deleted points at `down`, never the other way round.
    code, out, err = run_cli(capsys, "up", "--provider", "azure", "--sku", "h100", "--nodes", "1",
                             "--region", "eastus", "--name", "half", "--yes")
    assert code == 2 and "rerun `azbench down half`" in err
    fault.times = 0
    code, out, err = run_cli(capsys, "down", "half", "--yes")
    assert code == 0, err
    assert role_definitions(fake) == 0
    with Store.open() as store:
        assert store.get_cluster("half").state == ClusterState.TERMINATED


def test_down_names_every_resource_and_refuses_a_teammates_vnet_without_force(principals, capsys):
    fake = principals.fake
    up(principals, "alice", "shared")
    bob = principals.clients("bob")
    bob.network.virtual_networks.begin_create_or_update("azbench-shared", "teammate-vnet", {
        "location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.99.0.0/16"]}}}).result()
    principals.act_as("alice")
    writes = arm_writes(fake)
    code, out, err = run_cli(capsys, "down", "shared")  # no terminal: the question, then the refusal
    assert code == 2
    for name in ("shared-head", "shared-gpu-00", "shared-vnet", "shared-nsg", "shared-head-ip",
                 "shared-head-nic", "teammate-vnet (virtualNetworks, not made by azbench)"):
        assert name in err, err
    code, out, err = run_cli(capsys, "down", "shared", "--yes")
    assert code == 2
    assert err.count("\n") == 1 and "teammate-vnet" in err and "--force" in err
    assert arm_writes(fake) == writes
    code, out, err = run_cli(capsys, "down", "shared", "--yes", "--force")
    assert code == 0, err
    assert "azbench-shared" not in {r["name"] for r in fake.resources.values()}
