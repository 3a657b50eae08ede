"""The Azure lifecycle that never deletes the wrong thing and always tells the truth (issue 32),
against the fake ARM with the real SDK clients: deletions that finish (a second `down` during a
deletion, throttling and 5xx on the delete, a sweep whose first delete fails), `status` that
follows ARM (deleted, being deleted, partly there; no login to a cluster that is gone), a failed
`up` record that keeps what it asked for, the loser of an `up` race pointing at nothing, GB200
resize in whole racks of the cluster's own layout, `down` and `resize` that ask, unique default
names, and `--dry-run --check`. The CLI runs in-process (`main`) with the provider's production
client factory aimed at the fake, as tests/test_spending.py does."""

from __future__ import annotations

import io
import sys
from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.clusters import lifecycle, spending
from orchestrator.errors import ConfigError, LostRaceError, ProvisionError
from orchestrator.models import Cluster, ClusterState
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from tests.fixtures.hangup import hangup_server
from testsupport.fake_arm import SUB, StubCredential, allow_plain_http_policy, arm_writes, restrict

INGRESS = "203.0.113.7/32"


def spec_for(name: str = "lc", sku: str = "h100", nodes: int = 2, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku=sku, nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": INGRESS, "boot_timeout_s": 0, **azure})


@pytest.fixture
def wired(fake, clients, azbench_home, monkeypatch):
    """Every AzureProvider the CLI or lifecycle builds talks to the fake (as 'tester'); stdin is
    not a terminal."""
    from orchestrator.providers.azure import provider as azure
    clients.throttle.sleep = lambda s: None  # Retry-After waits are booked, not slept
    monkeypatch.setattr(azure, "clients_from_config", lambda **kw: clients)
    real = lifecycle.get_provider  # the other backends stay themselves (sweep asks each for its parts)
    monkeypatch.setattr(lifecycle, "get_provider",
                        lambda name, progress=None, **kw: AzureProvider(clients, capacity_wait_s=0, progress=progress,
                                                                  join_timeout_s=0)
                        if name == "azure" else real(name, progress=progress, **kw))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("AZBENCH_CALLER_IP", "203.0.113.7")
    return clients


def run_cli(*args: str) -> int:
    from orchestrator.cli.app import main
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return int(exit_.value.code or 0)


def up_recorded(spec: ClusterSpec) -> Cluster:
    with Store.open() as store:
        return lifecycle.up(spec, store).cluster


@pytest.fixture
def listener():
    """A loopback port that counts the connections made to it (an SSH attempt would be one)."""
    with hangup_server() as (port, hits):
        yield port, hits


def _point_head_at(name: str, port: int) -> None:
    """The record's SSH login aimed at `port` (where a login attempt would be counted)."""
    from orchestrator.models import SshTarget
    with Store.open() as store:
        c = store.get_cluster(name).cluster
        ssh = SshTarget(host="127.0.0.1", port=port, user="azureuser", key_path=c.ssh.key_path if c.ssh else
                        store.path.parent / "none", known_hosts=c.ssh.known_hosts if c.ssh else store.path.parent / "none")
        store.save_cluster(c.model_copy(update={"ssh": ssh}))


def _start_delete(fake, group: str) -> None:
    """Another client's delete of `group`, left running (nobody polls its operation)."""
    status, _, _ = fake.handle("DELETE", f"/subscriptions/{SUB}/resourcegroups/{group}?api-version=2021-04-01",
                               b"", {"authorization": "Bearer another-client"})
    assert status == 202


# ---------------------------------------------------------------- point 2: deletions that finish
def test_a_second_down_during_deletion_waits_for_it_and_exits_0(fake, wired, capsys, listener):
    port, hits = listener
    up_recorded(spec_for("dl"))
    _point_head_at("dl", port)
    fake.polls_to_finish = 2
    _start_delete(fake, "azbench-dl")  # the first `down` (or the expiry agent) is deleting it
    assert run_cli("down", "dl", "--yes") == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert "cluster 'dl' is down" in out.out
    assert [e.status for e in fake.log if e.method == "DELETE" and e.path.lower().endswith("/azbench-dl")] == [202, 409]
    assert fake.resources == {}  # the group, and the custom role after it
    with Store.open() as store:
        assert store.get_cluster("dl").state == ClusterState.TERMINATED
    assert run_cli("status", "dl") == 0  # status after down: deleted, no login tried
    shown = capsys.readouterr().out
    assert "terminated" in shown and "no login tried: the cluster is deleted" in shown
    assert hits == []


def test_down_survives_throttling_and_5xx_on_the_delete(fake, wired, capsys):
    up_recorded(spec_for("tz"))
    fake.add_fault("throttle", method="DELETE", path_contains="/resourcegroups/azbench-tz", times=3)
    fake.add_fault("error500", method="GET", path_contains="/operations/", times=8)  # past azure-core's retries
    assert run_cli("down", "tz", "--yes") == 0, capsys.readouterr().err
    assert fake.resources == {}
    assert wired.throttle.throttled and wired.throttle.waited_s == 3.0  # three Retry-After: 1 waits booked
    statuses = [e.status for e in fake.log if e.method == "DELETE" and e.path.lower().endswith("/azbench-tz")]
    assert statuses[:4] == [429, 429, 429, 202] and 409 in statuses[4:]  # asked again: already being deleted


def test_sweep_tries_every_expired_cluster_and_marks_the_deleted_ones(fake, wired, capsys, azbench_home):
    p = AzureProvider(wired, capacity_wait_s=0)
    p.opts.now = lambda: datetime.now(timezone.utc) - timedelta(days=2)
    with Store.open() as store:
        for name in ("a-old", "b-old"):
            store.save_cluster(p.up(spec_for(name, nodes=1), p.plan(spec_for(name, nodes=1))))
    fake.add_fault("locked", method="DELETE", path_contains="/resourcegroups/azbench-a-old", times=100)
    assert run_cli("sweep", "--yes") == 4
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[:2] == [line for line in lines if line.startswith("will delete")]
    assert lines[2].startswith("failed a-old: delete resourceGroups azbench-a-old: HTTP 409 ScopeLocked: ")
    assert "a management lock" in lines[2] and lines[3] == "deleted b-old"
    assert err.strip() == ("azbench: provisioning failed: sweep: 1 of 2 cluster(s) could not be deleted (a-old); "
                           "1 deleted (see the lines above; rerun `azbench sweep` to try them again)")
    with Store.open() as store:
        assert store.get_cluster("b-old").state == ClusterState.TERMINATED
        assert store.get_cluster("a-old").state == ClusterState.READY
        assert [e.message for e in store.list_events(cluster="b-old") if e.kind == "down"][0].startswith(
            "swept: expired at ")


# ---------------------------------------------------------------- point 3: status that reconciles
def test_status_follows_arm_deleting_then_deleted_without_a_login(fake, wired, capsys, listener):
    port, hits = listener
    up_recorded(spec_for("gone"))
    _point_head_at("gone", port)
    fake.polls_to_finish = 5
    _start_delete(fake, "azbench-gone")  # its own expiry agent, say
    writes = arm_writes(fake)
    assert run_cli("status", "gone") == 0
    shown = capsys.readouterr().out
    assert "record updated: ready -> deleting" in shown and "no login tried: the cluster is being deleted" in shown
    assert "resource group azbench-gone is being deleted" in shown
    for _ in range(10):  # ARM finishes the delete (the fake: as the group is read)
        if fake.handle("GET", f"/subscriptions/{SUB}/resourcegroups/azbench-gone", b"",
                       {"authorization": "Bearer x"})[0] == 404:
            break
    assert run_cli("status", "gone") == 0
    shown = capsys.readouterr().out
    assert "record updated: deleting -> terminated (deleted: the cloud holds nothing tagged with it)" in shown
    assert hits == [] and arm_writes(fake) == writes  # status only reads, and never logs in here
    with Store.open() as store:
        assert store.get_cluster("gone").state == ClusterState.TERMINATED
        assert [e.kind for e in store.list_events(cluster="gone")].count("status") == 2


def test_status_of_a_partly_created_cluster_says_what_is_missing(fake, wired, capsys):
    up_recorded(spec_for("part", nodes=3, max_vms_per_scale_set=2))
    key = next(k for k in fake.resources if k.endswith("/virtualmachinescalesets/part-gpu-01"))
    del fake.resources[key]
    assert run_cli("status", "part") == 0
    shown = capsys.readouterr().out
    assert "record updated: ready -> failed (partly there: scale set part-gpu-01 missing)" in shown


def test_a_failed_up_keeps_its_sku_nodes_and_price(fake, wired, azbench_home):
    fake.add_fault("quota", method="PUT", path_contains="virtualMachineScaleSets")
    with Store.open() as store:
        with pytest.raises(ProvisionError, match="OperationNotAllowed") as err:
            lifecycle.up(spec_for("q", nodes=2), store)
        row = store.get_cluster("q")
    assert row.state == ClusterState.FAILED
    assert (row.cluster.sku, row.cluster.nodes) == ("Standard_ND96isr_H100_v5", 2)
    assert row.cluster.cost_per_hour_usd == pytest.approx(2 * 98.32 + 0.384, abs=0.01)
    assert "`azbench down q` deletes them" in str(err.value)


# ---------------------------------------------------------------- point 1: the loser of a race
def _winner(fake) -> None:
    """The other `up` of the same name (another principal) creates the group."""
    other = AzureClients(credential=StubCredential(oid="00000000-0000-4000-8000-0000000000ff"),
                         subscription_id=SUB, base_url=fake.base_url,
                         per_call_policies=[allow_plain_http_policy()], polling_interval=0.01)
    other.resources.resource_groups.create_or_update(
        "azbench-dup", {"location": "eastus", "tags": {"azbench-cluster": "dup", "azbench-owner": "winner"}})


def _lose(store, fake) -> str:
    with pytest.raises(LostRaceError) as err:
        lifecycle.up(spec_for("dup"), store)
    text = str(err.value)
    # The winner's group holds nothing yet: the loser cannot tell a race from its own lost 201
    # (issue 48), says both, and sends no one to another name or to `down`.
    assert "ARM answered 200, not 201 Created" in text and "\n" not in text
    assert "its 201 was lost" in text and "stopped before writing anything else" in text
    assert "azbench down" not in text.replace("never `azbench down", "")  # no hint to delete the winner's
    assert store.get_cluster("dup") is None  # this home keeps no record pointing at the winner's
    assert [e.kind for e in store.list_events(cluster="dup")] == ["up_failed"]
    return text


def test_the_loser_of_an_up_race_stops_after_its_one_put(fake, wired, azbench_home, monkeypatch):
    """The group appears while preflight runs (after this `up` read it absent): ARM answers this
    run's group PUT 200, not 201, and that is its proof it did not create the group: it stops
    before any other write (issue 39: the winner restores the tags that PUT replaced:
    tests/test_azure_race.py races two real CLIs)."""
    from orchestrator.providers.azure import up as up_module
    real = up_module.UpRun._preflight

    def winner_first(self, region):
        found = real(self, region)
        _winner(fake)
        return found
    monkeypatch.setattr(up_module.UpRun, "_preflight", winner_first)
    with Store.open() as store:
        assert "ARM answered 200, not 201 Created" in _lose(store, fake)
    puts = [(e.path.rsplit("/", 1)[-1], e.status) for e in fake.log if e.method in ("PUT", "PATCH", "POST", "DELETE")]
    assert puts == [("azbench-dup", 201), ("azbench-dup", 200)]  # the winner's, then this run's only write


# ---------------------------------------------------------------- point 5: GB200 racks of the layout
def test_gb200_resize_of_32_nodes_to_48_adds_one_whole_rack_of_16(fake, wired, azbench_home):
    p = AzureProvider(wired, capacity_wait_s=0, join_timeout_s=0)
    spec = spec_for("gb", sku="gb200", nodes=32)
    cluster = p.up(spec, p.plan(spec))
    vmss = fake.of_type("virtualMachineScaleSets")["gb-gpu-00"]
    assert vmss["tags"]["azbench-rack-vms"] == "16" and vmss["sku"]["capacity"] == 32
    described = p.describe("gb")
    assert described.properties.rack_size() == 16 == cluster.properties.rack_size()
    for bad, near in ((36, "32 or 48"), (18, "16 or 32"), (50, "48 or 64")):
        with pytest.raises(ConfigError, match=f"whole NVLink racks of 16 VMs; {bad} is not a whole number of "
                                              f"racks: the nearest valid counts are {near}"):
            lifecycle.plan_resize(described, bad)
    assert lifecycle.plan_resize(described, 48).after == 48 and lifecycle.plan_resize(described, 64).after == 64
    grown = p.resize(described, 48)
    assert fake.of_type("virtualMachineScaleSets")["gb-gpu-00"]["sku"]["capacity"] == 48
    assert grown.nodes == 48 and grown.nodes // grown.properties.rack_size() == 3  # 3 whole racks of 16
    assert lifecycle.plan_resize(grown, 32).remove == tuple(f"gb-gpu-00-{_b36(i)}" for i in range(47, 31, -1))


def _b36(i: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(6):
        i, r = divmod(i, 36)
        out = digits[r] + out
    return out


# ---------------------------------------------------------------- point 7: down and resize ask
def test_down_and_a_growing_resize_ask_on_azure_and_refuse_without_a_terminal(fake, wired, capsys):
    up_recorded(spec_for("ask", nodes=2))
    writes = arm_writes(fake)
    assert run_cli("down", "ask") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("azbench: config error: Delete cluster 'ask' (azure, ready): 2 x Standard_ND96isr_H100_v5 "
                          "= 16 GPUs, 0 run(s) recorded as running on it, ~$")
    # Issue 39: what bills, priced, and everything that goes.
    assert "head Standard_D8s_v5 at $0.384/h" in err and "2 x Standard_ND96isr_H100_v5 at $196.64/h" in err
    goes = err.split("; it deletes ")[1].split("? needs confirmation")[0].split(", ")
    assert sorted(goes) == ["ask-gpu-00 (virtualMachineScaleSets)", "ask-head (virtualMachines)",
                            "ask-head-ip (publicIPAddresses)", "ask-head-nic (networkInterfaces)",
                            "ask-nsg (networkSecurityGroups)", "ask-vnet (virtualNetworks)"]
    assert err.endswith("? needs confirmation: pass --yes (stdin is not a terminal)")
    with Store.open() as store:
        question = lifecycle.resize_question("ask", 3, store)
        assert question == ("Add 1 x Standard_ND96isr_H100_v5 (8 GPUs) to cluster 'ask' (2 -> 3 nodes): "
                            "+~$98.32/h, ~$295.34/h in all (list price)?")
        assert lifecycle.resize_question("ask", 1, store) == ""  # a shrink costs nothing more
    assert run_cli("resize", "ask", "--nodes", "3") == 2
    assert "needs confirmation: pass --yes" in capsys.readouterr().err
    assert arm_writes(fake) == writes


def test_a_cluster_without_a_name_gets_a_unique_one_where_it_costs_money(azbench_home, capsys):
    assert spending.default_name("azure", user="Alice.Smith", token="beef") == "azbench-alice-smith-beef"
    assert spending.default_name("local") == "local" and spending.default_name(None) == "local"
    assert spending.default_name("fake") == "fake"  # costs nothing: the name stays the provider's
    names = set()
    for _ in range(2):
        assert run_cli("up", "--dry-run", "--provider", "azure", "--sku", "h100", "--nodes", "1",
                       "--region", "eastus") == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("Plan for cluster 'azbench-")
        names.add(first.split("'")[1])
    assert len(names) == 2


# ---------------------------------------------------------------- point 4: a plan that says what it knows
def test_dry_run_says_what_will_be_checked_and_check_reads_it_with_no_writes(fake, wired, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # piped output is 100 wide; the lines below are matched whole
    args = ["up", "--dry-run", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastus",
            "--name", "chk"]
    assert run_cli(*args) == 0
    out = capsys.readouterr().out
    assert "preflight: will check that family quota standardNDSH100v5Family has 192 free vCPUs" in out
    assert "has 192 free vCPUs (2 x 96)\n" in out.replace("preflight: will check that family quota "
                                                           "standardNDSH100v5Family ", "")
    assert "lifetime: expires after 24 h: at most ~$4,728.48 until it deletes itself (24 h x $197.02/h)" in out
    assert fake.log == []  # no credential, no request
    restrict(fake, "Standard_ND96isr_H100_v5", zones=["2"])  # restricted in a zone this plan does not ask for
    assert run_cli(*args, "--check") == 0
    out = capsys.readouterr().out
    assert "preflight: checked: Standard_ND96isr_H100_v5 in eastus: offered, not restricted" in out
    assert ("preflight: checked: quota standardNDSH100v5Family in eastus: 100,000 of 100,000 vCPUs free, "
            "192 needed: ok") in out
    assert "preflight: checked: image microsoft-dsvm:ubuntu-hpc:2204:latest exists" in out
    assert "preflight: VNet 10.40.0.0/16 does not overlap 172.16.0.0/16 (checked: ok)" in out  # the plan's own line
    assert "will check" not in out and arm_writes(fake) == 0


def test_dry_run_check_reports_a_restricted_zone_and_a_quota_shortfall_as_exit_3(fake, wired, capsys, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # piped output is 100 wide; the lines below are matched whole
    spec = tmp_path / "c.yaml"
    spec.write_text("name: chk\nprovider: azure\nsku: h100\nnodes: 2\nregion: eastus\n"
                    "azure:\n  zones: ['2']\n  ssh_ingress_cidr: 203.0.113.7/32\n")
    restrict(fake, "Standard_ND96isr_H100_v5", zones=["2"])
    fake.usages["eastus"] = [u if u["name"]["value"] != "standardNDSH100v5Family" else
                             {**u, "currentValue": 9_900, "limit": 10_000} for u in fake.usages["eastus"]]
    assert run_cli("up", "--dry-run", "-f", str(spec)) == 0
    out = capsys.readouterr().out
    assert "will check that Standard_ND96isr_H100_v5 is offered in eastus (zones 2) and not restricted" in out
    assert fake.log == []
    assert run_cli("up", "--dry-run", "--check", "-f", str(spec)) == 3
    out, err = capsys.readouterr()
    assert "preflight: checked: Standard_ND96isr_H100_v5 in eastus zones 2: Standard_ND96isr_H100_v5 is " \
           "restricted in zone(s) 2 of eastus" in out
    assert ("preflight: checked: quota standardNDSH100v5Family in eastus: 100 of 10,000 vCPUs free, 192 needed: "
            "short by 92") in out
    assert err.startswith("azbench: preflight failed: Standard_ND96isr_H100_v5 is restricted in zone(s) 2") \
        and err.count("\n") == 1
    assert arm_writes(fake) == 0


def test_adopted_is_said_only_when_nothing_was_created(fake, wired, capsys, tmp_path):
    spec = tmp_path / "ad.yaml"
    spec.write_text("name: ad\nprovider: azure\nsku: h100\nnodes: 1\nregion: eastus\n"
                    "azure:\n  boot_timeout_s: 0\n  ssh_ingress_cidr: 203.0.113.7/32\n")
    assert run_cli("up", "-f", str(spec), "--yes") == 0
    first = capsys.readouterr()
    assert "cluster 'ad' up:" in first.out and "adopted" not in first.out + first.err
    key = next(k for k in fake.resources if k.endswith("/virtualmachinescalesets/ad-gpu-00"))
    del fake.resources[key]  # a partial cluster: the rerun creates the set
    assert run_cli("up", "-f", str(spec), "--yes") == 0
    second = capsys.readouterr()
    assert "created: virtualMachineScaleSets ad-gpu-00" in second.err and "cluster 'ad' up:" in second.out
    assert run_cli("up", "-f", str(spec), "--yes") == 0
    third = capsys.readouterr()
    assert "cluster 'ad' adopted:" in third.out and "created:" not in third.err
