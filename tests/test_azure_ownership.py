"""Ownership on a shared subscription (issue 21, point 2): owner tags, sweep, down --force, up.

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


def spec_for(name: str, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, "self_expiry": False})


def up(clients, name: str, *, days_ago: float = 0, owner: str | None = None, nodes: int = 1):
    p = AzureProvider(clients, capacity_wait_s=0, owner=owner)
    p.opts.now = lambda: datetime.now(timezone.utc) - timedelta(days=days_ago)
    spec = spec_for(name, nodes)
    return p.up(spec, p.plan(spec))


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
    with pytest.raises(NotOwnerError, match="cluster 'same' .*belongs to another owner") as err:
        up(clients, "same")
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert writes(fake) == before


def test_a_second_home_sweeps_without_touching_the_first_homes_clusters(tls_arm, tls_clients, tmp_path,
                                                                         monkeypatch):
    fake, env = tls_arm
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    up(tls_clients, "alive")
    up(tls_clients, "stale", days_ago=3)  # expired two days ago
    other = tmp_path / "b"
    fake.retry_after = "1"  # the CLI's pollers: as ARM asks
    before = writes(fake)
    plain = azbench("sweep", home=other, env=env)
    assert (plain.code, plain.out) == (0, "nothing to sweep\n"), plain.err
    asked = azbench("sweep", "--all-owners", home=other, env=env)  # no terminal, no --yes
    assert asked.code == 2 and "pass --yes" in one_line_error(asked)
    assert asked.out.startswith("will delete stale: expired at ") and "owner principal " in asked.out
    assert "alive" not in asked.out
    assert writes(fake) == before
    done = azbench("sweep", "--all-owners", "--yes", home=other, env=env)
    assert done.code == 0, done.err
    assert done.out.splitlines()[-1] == "deleted stale"
    assert clusters_in(fake) == {"alive"}  # the first home's live cluster is untouched


def test_sweep_of_the_owners_home_deletes_its_unrecorded_and_expired_clusters(fake, clients, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    up(clients, "stale", days_ago=3)
    up(clients, "kept")
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "b"))
    up(clients, "theirs", days_ago=3)
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "a"))
    found = sweep(clients, dry_run=True, known_clusters={"kept"})
    assert [(i.cluster, i.mine) for i in found] == [("stale", True)]
    found = sweep(clients, dry_run=True, known_clusters={"kept"}, all_owners=True)
    assert [(i.cluster, i.mine) for i in found] == [("stale", True), ("theirs", False)]
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
    refused = azbench("down", "shared", home=home, env=env)
    assert refused.code == 2
    line = one_line_error(refused)
    assert "belongs to another owner (principal 11111111-2222-3333-4444-555555555555" in line
    assert "--force" in line and writes(fake) == before
    forced = azbench("down", "shared", "--force", home=home, env=env)
    assert forced.code == 0, forced.err
    assert clusters_in(fake) == set()
