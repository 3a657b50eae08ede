"""Ownership checked the same way by every mutating command, and the smaller items (issue 39,
points 9 and 11), against the fake ARM with two principals in their own homes.

Bob made `theirs`; Alice took a record of it with `adopt --force` (the reproduction: `extend`
then edited it with no --force at all). `extend`, `resize`, `down` and `adopt` now ask the one
question, "did you create it?", answered by evidence a tag writer cannot forge."""

from __future__ import annotations

import json

import pytest

from orchestrator.clusters import lifecycle, spending
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from testsupport.fake_arm import arm_writes
from tests.fixtures.arm import BOB
from tests.cli_helpers import run_cli


def spec_for(name: str, nodes: int = 1, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, **azure})


def up(principals, who: str, name: str, **azure):
    principals.act_as(who)
    with Store.open() as store:
        return lifecycle.up(spec_for(name, **azure), store).cluster


@pytest.mark.parametrize("command", [("extend", "theirs", "--hours", "1"),
                                     ("resize", "theirs", "--nodes", "2", "--yes"),
                                     ("down", "theirs", "--yes"),
                                     ("adopt", "theirs")])
def test_each_mutating_command_refuses_another_principals_cluster_without_force(principals, capsys, command):
    fake = principals.fake
    up(principals, "bob", "theirs")
    principals.act_as("alice")
    if command[0] != "adopt":  # Alice holds a record of it, as after `adopt --force`
        code, out, err = run_cli(capsys, "adopt", "theirs", "--force")
        assert code == 0, err
    writes = arm_writes(fake)
    code, out, err = run_cli(capsys, *command)
    assert code == 2, err
    assert err.count("\n") == 1 and f"created by principal {BOB}" in err and "--force" in err
    assert arm_writes(fake) == writes
    with Store.open() as store:
        events = [e.kind for e in store.list_events(cluster="theirs")]
    if command[0] != "adopt":
        assert events[-1] == f"{command[0]}_failed"  # the refusal is history too


def test_extend_with_force_moves_another_principals_deadline(principals, capsys):
    up(principals, "bob", "theirs")
    principals.act_as("alice")
    assert run_cli(capsys, "adopt", "theirs", "--force")[0] == 0
    code, out, err = run_cli(capsys, "extend", "theirs", "--hours", "1", "--force")
    assert code == 0, err
    assert "now expires at" in out


def test_the_same_principal_from_a_new_home_is_not_another_owner(principals, capsys, tmp_path):
    up(principals, "alice", "mine")
    principals.act_as("alice", home=tmp_path / "new-laptop")
    code, out, err = run_cli(capsys, "adopt", "mine")
    assert code == 0, err
    assert "another owner" not in out + err
    code, out, err = run_cli(capsys, "extend", "mine", "--hours", "1")
    assert code == 0, err


def test_a_failed_resize_records_an_event_and_status_json_shows_it(principals, capsys):
    fake = principals.fake
    up(principals, "alice", "grow", self_expiry=False)
    principals.act_as("alice")
    for row in fake.usages["eastus"]:
        row["currentValue"] = row["limit"]  # no vCPU left: the grow's quota check refuses
    code, out, err = run_cli(capsys, "resize", "grow", "--nodes", "2", "--yes")
    assert code == 4, err
    code, out, err = run_cli(capsys, "status", "grow", "-o", "json")
    events = json.loads(out)["events"]
    failed = [e for e in events if e["kind"] == "resize_failed"]
    assert failed and "1 -> 2 nodes attempted, failed" in failed[-1]["message"]
    assert [e["kind"] for e in events][0] == "up"


def test_the_default_name_does_not_double_the_prefix():
    name = spending.default_name("azure", user="alice", token="beef")
    spec = ClusterSpec(name=name, provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32"})
    plan = AzureProvider().plan(spec)
    group = next(r.name for r in plan.resources if r.kind == "Microsoft.Resources/resourceGroups")
    assert name == "azbench-alice-beef" and group == "azbench-alice-beef"
    assert "azbench-azbench-" not in json.dumps(plan.model_dump(mode="json"))
