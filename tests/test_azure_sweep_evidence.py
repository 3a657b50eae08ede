"""`sweep` that cannot be steered, and no orphaned custom roles (issue 39, points 2 and 7).

Tags are evidence a tag writer can forge: `azbench-owner` and `azbench-installation` are
readable on any of a person's resources, and anyone with Tag Contributor may copy them onto a
group of their choosing. So a group is azbench's only with evidence no tag writer can make
(docs/azure.md, "What makes a cluster yours"): its name is `azbench-<cluster>` (or the group
this home's record names), it holds only what azbench creates for that cluster, and its creator
is known: this home's creator nonce, or the custom self-expiry role defined on it, whose
createdBy ARM stamps. Alice and Bob share the subscription; each has their own home."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from testsupport.fake_arm import SUB
from tests.fixtures.arm import ALICE
from tests.cli_helpers import run_cli

PAST = (datetime.now(timezone.utc) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_for(name: str, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, **azure})


def up(principals, who: str, name: str, *, days_ago: float = 0, record: bool = True, **azure):
    """`up` by `who` from their home (a cluster `days_ago` old expires 24 h after that)."""
    clients = principals.act_as(who)
    p = AzureProvider(clients, capacity_wait_s=0, join_timeout_s=0)
    p.opts.now = lambda: datetime.now(timezone.utc) - timedelta(days=days_ago)
    spec = spec_for(name, **azure)
    if not record:
        return p.up(spec, p.plan(spec))
    with Store.open() as store:
        store.save_cluster(p.provisional(spec, p.plan(spec)), spec.model_dump_json())
        cluster = p.up(spec, p.plan(spec))
        store.save_cluster(cluster, spec.model_dump_json())
    return cluster


def groups(fake) -> set[str]:
    return {r["name"] for k, r in fake.resources.items() if "/providers/" not in k}


def role_definitions(fake) -> list[str]:
    return sorted(r["properties"]["roleName"] for k, r in fake.resources.items()
                  if "/roledefinitions/" in k)


def forge(principals, who: str, group: str, tags: dict[str, str], *, vnet: str | None = None) -> None:
    """`who` makes group `group` with `tags` (and an untagged VNet in it): what anyone with
    Contributor on a group and Tag Contributor can do."""
    c = principals.clients(who)
    c.resources.resource_groups.create_or_update(group, {"location": "eastus", "tags": tags})
    if vnet:
        c.network.virtual_networks.begin_create_or_update(group, vnet, {
            "location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]}}}).result()


def test_forged_groups_survive_every_sweep(principals, capsys):
    fake = principals.fake
    up(principals, "alice", "stale", days_ago=3)  # Alice's own expired cluster
    up(principals, "bob", "bobs-old", days_ago=3)  # Bob's expired cluster, with its custom role
    installation = (principals.home("alice") / "installation-id").read_text().strip()
    # Bob copies Alice's owner tags (read off any of her resources) onto a group of his, with
    # data in it, and a past expiry; and a group with nothing but the cluster and expiry tags.
    forge(principals, "bob", "prod-data", {"azbench-cluster": "prod-data", "azbench-owner": ALICE,
                                           "azbench-installation": installation, "azbench-expires": PAST},
          vnet="data-vnet")
    forge(principals, "bob", "team-share", {"azbench-cluster": "team-share", "azbench-expires": PAST})
    # A group that copies a real cluster's name pattern, with nothing in it, Alice's tags too.
    forge(principals, "bob", "azbench-lookalike", {"azbench-cluster": "lookalike", "azbench-owner": ALICE,
                                                   "azbench-installation": installation, "azbench-expires": PAST})
    principals.act_as("alice")
    code, out, err = run_cli(capsys, "sweep", "--yes")
    assert code == 0, err
    assert {"prod-data", "team-share", "azbench-lookalike"} <= groups(fake)
    assert "azbench-stale" not in groups(fake)  # her own expired cluster went
    for name, why in (("prod-data", "its group prod-data is not named azbench-prod-data"),
                      ("team-share", "its group team-share is not named azbench-team-share"),
                      ("lookalike", "no evidence azbench made it")):
        line = next(x for x in out.splitlines() if f" {name}:" in x)
        assert line.startswith("skipped ") and why in line, out
    code, out, err = run_cli(capsys, "sweep", "--yes", "--all-owners")
    assert code == 0, err
    assert {"prod-data", "team-share", "azbench-lookalike"} <= groups(fake)
    assert "azbench-bobs-old" not in groups(fake)  # Bob's real expired cluster: its role says azbench made it
    assert role_definitions(fake) == []  # and both clusters' custom roles went with them


def test_a_home_that_lost_everything_sweeps_and_leaves_no_role_definition(principals, capsys, tmp_path):
    """Alice's laptop is gone: a new home (new installation, no store) signed in as Alice. The
    same principal is not "another owner"; her expired cluster goes, custom role and all; her
    live one stays; a role definition whose group was deleted outside azbench goes too."""
    fake = principals.fake
    up(principals, "alice", "stale", days_ago=3)
    up(principals, "alice", "alive")
    up(principals, "alice", "orphan")
    principals.clients("alice").resources.resource_groups.begin_delete("azbench-orphan").result()
    assert len(role_definitions(fake)) == 3
    principals.act_as("alice", home=tmp_path / "new-laptop")
    code, out, err = run_cli(capsys, "sweep", "--yes")
    assert code == 0, err
    assert groups(fake) == {"azbench-alive"}
    assert role_definitions(fake) == [f"azbench self-expiry {SUB}/azbench-alive"]
    assert "kept alive: live" in out and "another owner" not in out
    assert "deleted stale" in out
    assert f"deleted role definition 'azbench self-expiry {SUB}/azbench-orphan' (its group is gone)" in out


def test_without_a_custom_role_only_the_creating_home_sweeps_it(principals, capsys, tmp_path):
    """A cluster made with azure.self_expiry off has no custom role: its creator nonce in the
    home that made it is the only evidence. That home sweeps it; a new home of the same person
    reports it and leaves it (its owner tags alone prove nothing)."""
    fake = principals.fake
    up(principals, "alice", "plain", days_ago=3, self_expiry=False)
    principals.act_as("alice", home=tmp_path / "new-laptop")
    code, out, err = run_cli(capsys, "sweep", "--yes")
    assert code == 0, err
    assert "azbench-plain" in groups(fake)
    assert "skipped plain:" in out and "no evidence azbench made it" in out
    principals.act_as("alice")
    code, out, err = run_cli(capsys, "sweep", "--yes")
    assert code == 0, err
    assert "azbench-plain" not in groups(fake)


def test_sweep_of_a_bobs_cluster_by_alice_needs_all_owners(principals, capsys):
    fake = principals.fake
    up(principals, "bob", "theirs", days_ago=3)
    principals.act_as("alice")
    code, out, err = run_cli(capsys, "sweep", "--yes")
    assert code == 0, err
    assert "azbench-theirs" in groups(fake)
    assert "another owner's: --all-owners deletes it" in out
    assert role_definitions(fake) == [f"azbench self-expiry {SUB}/azbench-theirs"]
