"""Ownership on a shared subscription (issue 21, point 2; issue 39): owner tags, sweep, down --force, up.

Two $AZBENCH_HOMEs stand for two people (or two machines) on one subscription: each has its own
installation id, which with the signed-in principal's object id (the `oid` of its ARM token) is
the owner every resource is tagged with. The CLI runs in a subprocess against the fake ARM over
HTTPS (its identity endpoint signs the CLI in); in-process set-up uses the SDK clients directly.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.providers.azure.provider import AzureProvider, sweep
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import NotOwnerError
from testsupport.fake_arm import STUB_OID, SUB, StubCredential
from tests.cli_helpers import azbench, one_line_error

INGRESS = "203.0.113.7/32"
WRITES = ("PUT", "PATCH", "DELETE", "POST")


def spec_for(name: str, nodes: int = 1, self_expiry: bool = False) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, "self_expiry": self_expiry})


def up(clients, name: str, *, days_ago: float = 0, owner: str | None = None, nodes: int = 1,
       self_expiry: bool = False):
    p = AzureProvider(clients, capacity_wait_s=0, owner=owner)
    p.opts.now = lambda: datetime.now(timezone.utc) - timedelta(days=days_ago)
    spec = spec_for(name, nodes, self_expiry)
    return p.up(spec, p.plan(spec))


OTHER = "00000000-0000-4000-8000-0000000000ff"


def clients_as(fake, oid: str) -> AzureClients:
    """SDK clients signed in as another principal (its tokens carry `oid`)."""
    from testsupport.fake_arm import allow_plain_http_policy
    return AzureClients(credential=StubCredential(oid=oid), subscription_id=SUB, base_url=fake.base_url,
                        per_call_policies=[] if fake.base_url.startswith("https") else [allow_plain_http_policy()],
                        polling_interval=0.01, retry_backoff_factor=0.01)


def writes(fake) -> int:
    """ARM writes (the identity endpoint's token POSTs are not ARM's)."""
    return sum(1 for e in fake.log if e.method in WRITES and "/oauth2/" not in e.path)


def clusters_in(fake) -> set[str]:
    return {r["tags"]["azbench-cluster"] for r in fake.resources.values() if "azbench-cluster" in (r.get("tags") or {})}


@pytest.fixture
def tls_clients(tls_arm) -> AzureClients:
    fake, _ = tls_arm
    return AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                        polling_interval=0.01, retry_backoff_factor=0.01)


def test_every_resource_carries_the_principal_and_the_installation(fake, clients, azbench_home):
    up(clients, "mine")
    installation = (azbench_home / "installation-id").read_text().strip()
    assert len(installation) == 36
    tagged = [r for r in fake.resources.values() if r.get("tags")]
    assert len(tagged) == 7  # group, NSG, IP, VNet, NIC, head, scale set
    for res in tagged:
        assert res["tags"]["azbench-owner"] == STUB_OID  # the oid claim of the clients' token
        assert res["tags"]["azbench-installation"] == installation


def test_up_never_adopts_another_owners_cluster_of_the_same_name(fake, clients, tmp_path, monkeypatch):
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    up(clients, "same")
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "b"))
    before = writes(fake)
    # The owner tags of its resources (written only after ARM's 201) name the first principal.
    with pytest.raises(NotOwnerError, match="cluster 'same' .*is not yours: created by principal .*owner tags "
                                            "of its resources") as err:
        up(clients_as(fake, OTHER), "same")
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert writes(fake) == before
    # Issue 39, point 11: the same principal from another home is the same person: its rerun
    # takes the cluster (`up` only adds what is missing).
    assert up(clients, "same").name == "same" and writes(fake) == before


def test_a_second_home_sweeps_without_touching_the_first_homes_clusters(tls_arm, tls_clients, tmp_path,
                                                                         monkeypatch):
    """Another principal's home: the first one's expired cluster is skipped (and deleted only with
    --all-owners: its custom role's createdBy proves azbench made it), its live one untouched."""
    from testsupport.fake_arm import env_for
    fake, _ = tls_arm
    env = env_for(fake, "203.0.113.7", client_id="someone-else", oid=OTHER)
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    up(tls_clients, "alive", self_expiry=True)
    up(tls_clients, "stale", days_ago=3, self_expiry=True)  # expired two days ago
    other = tmp_path / "b"
    fake.retry_after = "1"  # the CLI's pollers: as ARM asks
    before = writes(fake)
    plain = azbench("sweep", home=other, env=env)
    # Issue 32, point 13: plain sweep names another owner's expired cluster (and deletes nothing).
    assert plain.code == 0, plain.err
    assert plain.out.startswith("skipped stale: expired at ") and "another owner's: --all-owners deletes it" in plain.out
    assert plain.out.count("\n") == 1 and "alive" not in plain.out
    asked = azbench("sweep", "--all-owners", home=other, env=env)  # no terminal, no --yes
    assert asked.code == 2 and "pass --yes" in one_line_error(asked)
    assert asked.out.startswith("will delete stale: expired at ") and f"owner principal {STUB_OID}" in asked.out
    assert "alive" not in asked.out
    assert writes(fake) == before
    done = azbench("sweep", "--all-owners", "--yes", home=other, env=env)
    assert done.code == 0, done.err
    assert done.out.splitlines()[-1] == "deleted stale"
    assert clusters_in(fake) == {"alive"}  # the first home's live cluster is untouched


def test_sweep_of_the_owners_home_deletes_its_expired_clusters(fake, clients, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    up(clients, "stale", days_ago=3)
    up(clients, "kept")
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "b"))
    up(clients_as(fake, OTHER), "theirs", days_ago=3, self_expiry=True)  # another principal's, its custom role
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    found = sweep(clients, dry_run=True, known_clusters={"kept"})
    assert [(i.cluster, i.mine, i.action) for i in found] == [("stale", True, "delete"), ("theirs", False, "skipped")]
    found = sweep(clients, dry_run=True, known_clusters={"kept"}, all_owners=True)
    assert [(i.cluster, i.mine, i.action) for i in found] == [("stale", True, "delete"), ("theirs", False, "delete")]
    assert sweep(clients, dry_run=False, known_clusters={"kept"}, only={"theirs"}, all_owners=True)[0].deleted
    assert clusters_in(fake) == {"stale", "kept"}


def test_down_of_another_owners_cluster_needs_force(tls_arm, tls_clients, tmp_path, monkeypatch):
    from orchestrator.store.database import Store
    fake, env = tls_arm
    home = tmp_path / "a"
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    cluster = up(tls_clients, "shared", owner="11111111-2222-3333-4444-555555555555")  # signed in as another
    with Store.open() as store:
        store.save_cluster(cluster, spec_for("shared").model_dump_json())
    fake.retry_after = "1"
    before = writes(fake)
    refused = azbench("down", "shared", "--yes", home=home, env=env)
    assert refused.code == 2
    line = one_line_error(refused)
    # Signed in as someone else at `up`: the owner tags of the cluster's resources (written only
    # by the `up` ARM answered 201, after it) name that principal as its creator (issue 48).
    assert "is not yours: created by principal 11111111-2222-3333-4444-555555555555" in line
    assert "the owner tags of its resources" in line
    assert "--force" in line and writes(fake) == before
    forced = azbench("down", "shared", "--force", "--yes", home=home, env=env)
    assert forced.code == 0, forced.err
    assert clusters_in(fake) == set()


def test_a_home_that_lost_its_store_sweeps_and_the_live_cluster_survives(tls_arm, tls_clients, tmp_path,
                                                                         monkeypatch):
    """Issue 32, point 1: azbench.db is gone but the installation id was kept (a restored backup,
    a copied home). `sweep --yes` deletes the expired cluster only; the live one is listed with
    the way to adopt it, and `adopt` rebuilds its record from ARM."""
    fake, env = tls_arm
    home = tmp_path / "a"
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    up(tls_clients, "alive")
    up(tls_clients, "stale", days_ago=3)
    assert not (home / "azbench.db").exists()  # the clusters were made in-process: no record here
    fake.retry_after = "1"
    done = azbench("sweep", "--yes", home=home, env=env)
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].startswith("kept alive: live (expires ") and \
        "not in this home: adopt it with `azbench adopt alive` or leave it" in lines[0]
    assert lines[1].startswith("will delete stale: expired at ") and lines[-1] == "deleted stale"
    assert clusters_in(fake) == {"alive"}
    adopted = azbench("adopt", "alive", home=home, env=env)
    assert adopted.code == 0, adopted.err
    assert adopted.out.startswith("cluster 'alive' adopted: 1 x Standard_ND96isr_H100_v5 (azure), ready")
    status = azbench("status", home=home, env=env)
    assert "alive" in status.out and "ready" in status.out


def test_two_principals_on_one_subscription(fake, tmp_path, monkeypatch):
    """Issue 32, point 9: ownership by the `oid` of each principal's own token (no `owner=`
    stand-in): the fake's tokens carry oid and tid as Entra's do. Same home, two principals."""
    from orchestrator.providers.azure.owner import principal_of
    from testsupport.fake_arm import allow_plain_http_policy

    def clients_as(oid: str) -> AzureClients:
        return AzureClients(credential=StubCredential(oid=oid), subscription_id=SUB, base_url=fake.base_url,
                            per_call_policies=[allow_plain_http_policy()], polling_interval=0.01,
                            retry_backoff_factor=0.01)
    alice_oid, bob_oid = "00000000-0000-4000-8000-0000000a11ce", "00000000-0000-4000-8000-000000000b0b"
    alice, bob = clients_as(alice_oid), clients_as(bob_oid)
    token = alice.credential.get_token("x").token
    assert principal_of(token) == alice_oid
    import base64
    import json
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["tid"] == StubCredential.tid
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "shared-home"))
    mine = up(alice, "alices")
    up(alice, "alices-old", days_ago=3)
    assert {r["tags"]["azbench-owner"] for r in fake.resources.values() if r.get("tags")} == {alice_oid}
    # Bob, in the same home: Alice's clusters are not his, live or expired.
    found = sweep(bob, dry_run=True, known_clusters=set())
    assert [(i.cluster, i.mine, i.action) for i in found] == [("alices-old", False, "skipped")]
    assert found[0].owner.startswith(f"principal {alice_oid}")
    # No custom role (self_expiry off): the tags of the cluster's resources speak (issue 48: only
    # the `up` ARM answered 201 writes them), naming Alice.
    assert AzureProvider(bob).foreign_owner(mine).startswith(f"created by principal {alice_oid}")
    assert "the owner tags of its resources" in AzureProvider(bob).foreign_owner(mine)
    assert AzureProvider(alice).foreign_owner(mine) is None
    before = writes(fake)
    with pytest.raises(NotOwnerError, match=f"is not yours: .*principal {alice_oid}"):
        up(bob, "alices")
    assert writes(fake) == before
    # Alice's own sweep deletes her expired cluster and reports nothing of Bob's.
    done = sweep(alice, dry_run=False, known_clusters={"alices"})
    assert [(i.cluster, i.action) for i in done] == [("alices-old", "deleted")]
    assert clusters_in(fake) == {"alices"}


def test_a_custom_group_is_adopted_only_when_named_and_only_if_ours(fake, clients, azbench_home):
    """A spec's own `azure.resource_group` is not azbench-<name>: from a home without its record
    the group reads as a decoy (adopt finds nothing) until the caller names it, and naming one
    proves nothing by itself: another principal's group of that name is refused."""
    spec = ClusterSpec(name="teamc", provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, "resource_group": "team-rg"})
    made = AzureProvider(clients, capacity_wait_s=0)
    made.up(spec, made.plan(spec))
    before = writes(fake)
    ownership = AzureProvider(clients, capacity_wait_s=0).parts().ownership
    assert ownership is not None
    assert ownership.adopt("teamc") is None  # the default name holds nothing
    adopted = ownership.adopt("teamc", resource_group="team-rg")
    assert adopted is not None and (adopted.name, adopted.nodes) == ("teamc", 1)
    assert adopted.properties.resource_group == "team-rg"  # later reads and `down` go there
    assert writes(fake) == before  # adopt reads only
    # Another principal makes a cluster of another name in its own custom group, and I claim it.
    theirs = ClusterSpec(name="theirs", provider="azure", sku="h100", nodes=1, region="eastus",
                         azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, "resource_group": "their-rg"})
    other = AzureProvider(clients_as(fake, OTHER), capacity_wait_s=0)
    other.up(theirs, other.plan(theirs))
    before = writes(fake)
    with pytest.raises(NotOwnerError):
        ownership.adopt("theirs", resource_group="their-rg")
    assert writes(fake) == before  # reads only
