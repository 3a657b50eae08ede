"""The Azure provider driving the real azure-mgmt-* clients against the loopback fake ARM server.

Covers: created resources and their properties (placement group, fault domains, IB/accelerated
networking, tags, NSG source, image arch), dry-run plan == what exists after up, adoption on rerun
(no duplicate PUTs), crash mid-up then rerun, each injected fault's request sequence and outcome,
preflight shortfall messages, down/verify/sweep, and the cloud-init golden files.
"""

from __future__ import annotations

import base64
import gzip
import os
import shutil
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from orchestrator.hardware.catalog import lookup
from orchestrator.providers.azure import cloudinit as ci
from orchestrator.providers.azure.provider import AzureProvider, sweep
from orchestrator.providers.azure.clients import AzureClients, clients_from_config
from orchestrator.providers.azure_shared.errors import ArmErrorClass, classify_code
from orchestrator.providers.azure.preflight import resolve_ingress
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import CapacityError, ConfigError, PreflightError, ProvisionError
from orchestrator.models import ScaleSetPlan
from testsupport.fake_arm import STUB_OID, SUB, StubCredential, allow_plain_http_policy
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"
INGRESS = "203.0.113.7/32"


def spec_for(name="h100t", sku="h100", nodes=3, **azure) -> ClusterSpec:
    # boot_timeout_s 0: this fake does not boot VMs (tests/test_azure_e2e.py has the one that does)
    opts = {"ssh_ingress_cidr": INGRESS, "max_vms_per_scale_set": 2, "boot_timeout_s": 0, **azure}
    return ClusterSpec(name=name, provider="azure", sku=sku, nodes=nodes, region="eastus", azure=opts)


def provider(clients, **kw) -> AzureProvider:
    return AzureProvider(clients, capacity_wait_s=0, **kw)


def up(clients, spec, **kw):
    p = provider(clients, **kw)
    return p, p.up(spec, p.plan(spec))


def puts_per_path(fake) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in fake.log:
        if e.method == "PUT" and e.status in (200, 201):
            out[e.path.lower()] = out.get(e.path.lower(), 0) + 1
    return out


# ---------------------------------------------------------------- created resources
def test_up_creates_the_cluster_with_ib_ready_properties(fake, clients, azbench_home):
    p, cluster = up(clients, spec_for())
    sets = fake.of_type("virtualMachineScaleSets")
    assert sorted(sets) == ["h100t-gpu-00", "h100t-gpu-01"]
    vmss = sets["h100t-gpu-00"]
    props = vmss["properties"]
    assert (props["singlePlacementGroup"], props["platformFaultDomainCount"], props["overprovision"]) == (True, 1, False)
    assert props["orchestrationMode"] == "Uniform" and props["upgradePolicy"]["mode"] == "Manual"
    assert vmss["sku"] == {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": 2}
    prof = props["virtualMachineProfile"]
    nic = prof["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
    assert nic["enableAcceleratedNetworking"] is True
    assert prof["storageProfile"]["imageReference"] == {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc",
                                                        "sku": "2204", "version": "latest"}
    assert prof["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] is True
    for res in fake.resources.values():
        if res["type"].startswith("Microsoft.Authorization/"):
            continue  # role assignment and definition: not taggable (tests/test_expiry.py)
        assert {"azbench-cluster": "h100t", "azbench-owner": STUB_OID}.items() <= res["tags"].items()
        assert "azbench-expires" in res["tags"]
    rules = fake.of_type("networkSecurityGroups")["h100t-nsg"]["properties"]["securityRules"]
    assert [(r["properties"]["sourceAddressPrefix"], r["properties"]["destinationPortRange"]) for r in rules] == [(INGRESS, "22")]
    vnet = fake.of_type("virtualNetworks")["h100t-vnet"]["properties"]
    assert vnet["addressSpace"]["addressPrefixes"] == ["10.40.0.0/16"]
    head_nic = fake.of_type("networkInterfaces")["h100t-head-nic"]["properties"]["ipConfigurations"][0]["properties"]
    assert head_nic["privateIPAddress"] == "10.40.0.4"
    head = fake.of_type("virtualMachines")["h100t-head"]["properties"]
    cloud = gzip.decompress(base64.b64decode(head["osProfile"]["customData"])).decode()
    assert "SlurmctldHost=h100t-head(10.40.0.4)" in cloud and "SwitchName=h100t-gpu-01" in cloud
    assert cluster.ssh.host == fake.of_type("publicIPAddresses")["h100t-head-ip"]["properties"]["ipAddress"]
    host_pub = (azbench_home / "clusters/h100t/ssh_host_ed25519_key.pub").read_text().split()[1]
    assert cluster.ssh.known_hosts.read_text() == f"{cluster.ssh.host} ssh-ed25519 {host_pub}\n"
    assert host_pub in cloud
    assert stat.S_IMODE(os.stat(cluster.ssh.key_path).st_mode) == 0o600
    assert cluster.node_names == ["h100t-gpu-00-000000", "h100t-gpu-00-000001", "h100t-gpu-01-000000"]
    states = p.node_states(cluster)
    assert [(n["name"], n["state"]) for n in states] == [(h, "Succeeded") for h in cluster.node_names]
    lists = [e for e in fake.log if e.method == "GET" and e.path.endswith("/virtualMachines")]
    assert len(lists) == 2  # one list per scale set, never one GET per VM


def test_dry_run_plan_is_exactly_what_up_created(fake, clients, azbench_home):
    p = provider(clients)
    spec = spec_for(nodes=5)
    plan = p.plan(spec)
    p.up(spec, plan)
    planned = sorted((r.kind.lower(), r.name, r.count) for r in plan.resources)
    # A role definition is planned by its role name (its GUID is derived from the subscription at up).
    held = sorted((r["type"].lower(), r["properties"]["roleName"].replace(SUB, "<subscription>")
                   if r["type"].endswith("roleDefinitions") else r["name"], r.get("sku", {}).get("capacity", 1))
                  for r in fake.resources.values())
    assert planned == held


def test_gb200_uses_an_arm64_image_and_whole_racks(fake, clients, azbench_home):
    up(clients, spec_for("gbt", "gb200", 36, max_vms_per_scale_set=100))
    vmss = fake.of_type("virtualMachineScaleSets")["gbt-gpu-00"]
    assert vmss["sku"]["capacity"] == 36
    assert vmss["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]["sku"] == "2404-arm64"
    head = fake.of_type("virtualMachines")["gbt-head"]["properties"]
    assert head["storageProfile"]["imageReference"]["offer"] == "ubuntu-24_04-lts"
    cloud = gzip.decompress(base64.b64decode(head["osProfile"]["customData"])).decode()
    assert "TopologyPlugin=topology/block" in cloud and "BlockName=gbt-gpu-00-rack1" in cloud


# ---------------------------------------------------------------- idempotency and crashes
def test_second_up_adopts_everything_without_a_put(fake, clients, azbench_home):
    up(clients, spec_for())
    before = len(fake.log)
    events = []
    up(clients, spec_for(), progress=events.append)
    assert [e.method for e in fake.log[before:] if e.method != "GET"] == []
    assert {e.action for e in events} == {"exists"}


def test_crash_mid_up_then_rerun_resumes_without_duplicates(fake, clients, azbench_home):
    def crash(event):
        if event.action == "creating" and event.name == "h100t-gpu-00":
            raise KeyboardInterrupt("killed")
    # The killed process's pollers of that scale set never finish (frozen from its PUT on, so no
    # background poll can complete it before the crash).
    fake.frozen_client, fake.frozen_match = "first", "virtualmachinescalesets/h100t-gpu-00"
    first = AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                         per_call_policies=[allow_plain_http_policy("first")], polling_interval=0.01)
    with pytest.raises(KeyboardInterrupt):
        up(first, spec_for(), progress=crash)
    assert fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["properties"]["provisioningState"] == "Creating"
    assert "h100t-gpu-00" in (azbench_home / "clusters/h100t/azure-lro.json").read_text()
    events = []
    up(clients, spec_for(), progress=events.append)
    assert ("resumed", "h100t-gpu-00") in [(e.action, e.name) for e in events]
    assert set(puts_per_path(fake).values()) == {1}
    assert all(r["properties"]["provisioningState"] == "Succeeded" for r in fake.resources.values()
               if not r["type"].endswith("roleDefinitions"))  # a role definition has no provisioning state
    assert not (azbench_home / "clusters/h100t/azure-lro.json").read_text().count("gpu")


def test_down_after_a_partial_up_leaves_the_fake_empty(fake, clients, azbench_home):
    def crash(event):
        if event.action == "created" and event.kind == "networkInterfaces":
            raise RuntimeError("killed")
    with pytest.raises(RuntimeError):
        up(clients, spec_for(), progress=crash)
    assert fake.of_type("networkInterfaces") and not fake.of_type("virtualMachineScaleSets")
    p = provider(clients)
    cluster = p.describe("h100t")
    assert cluster is not None and cluster.nodes == 0
    p.down(cluster)
    assert fake.resources == {}
    p.down(cluster)  # idempotent: nothing left is success
    assert p.describe("h100t") is None


def test_down_deletes_its_group_never_a_tagged_stray_and_verifies(fake, clients, azbench_home):
    """A resource outside the cluster's group that carries its tag is not the cluster's (anyone
    with Tag Contributor may tag anything: issue 39): `down` leaves it."""
    p, cluster = up(clients, spec_for())
    clients.resources.resource_groups.create_or_update("other", {"location": "eastus"})
    tags = {"azbench-cluster": "h100t"}
    clients.network.public_ip_addresses.begin_create_or_update("other", "stray", {"location": "eastus", "tags": tags}).result()
    clients.network.public_ip_addresses.begin_create_or_update("other", "keep", {"location": "eastus"}).result()
    p.down(cluster)
    assert sorted(r["name"] for r in fake.resources.values()) == ["keep", "other", "stray"]
    up(clients, spec_for())
    fake.sticky.add("h100t-head-ip")
    with pytest.raises(ProvisionError, match="still has 1 tagged resource.*h100t-head-ip"):
        p.down(cluster)


# ---------------------------------------------------------------- faults
def test_throttled_put_is_retried_by_azure_core_after_retry_after(fake, clients, azbench_home):
    fake.add_fault("throttle", path_contains="virtualMachineScaleSets/h100t-gpu-01")
    up(clients, spec_for())
    assert fake.sequence("virtualMachineScaleSets/h100t-gpu-01") == [
        "PUT 429 virtualMachineScaleSets/h100t-gpu-01", "PUT 201 virtualMachineScaleSets/h100t-gpu-01",
        "GET 200 op", "GET 200 op", "GET 200 virtualMachineScaleSets/h100t-gpu-01"]


def test_server_error_is_retried_by_azure_core(fake, clients, azbench_home):
    fake.add_fault("error500", path_contains="networkSecurityGroups")
    up(clients, spec_for())
    assert fake.sequence("networkSecurityGroups/h100t-nsg") == [
        "PUT 500 networkSecurityGroups/h100t-nsg", "PUT 201 networkSecurityGroups/h100t-nsg",
        "GET 200 op", "GET 200 op", "GET 200 networkSecurityGroups/h100t-nsg"]


def test_allocation_failure_deletes_and_retries_in_the_next_zone(fake, clients, azbench_home):
    fake.add_fault("zonal_allocation", path_contains="virtualMachineScaleSets/h100t-gpu-00", zone="1")
    events = []
    up(clients, spec_for(zones=["1", "2"]), progress=events.append)
    assert fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["zones"] == ["2"]
    assert fake.sequence("virtualMachineScaleSets/h100t-gpu-00") == [
        "PUT 201 virtualMachineScaleSets/h100t-gpu-00", "GET 200 op", "GET 200 op",
        "DELETE 202 virtualMachineScaleSets/h100t-gpu-00", "GET 200 op", "GET 200 op",
        "PUT 201 virtualMachineScaleSets/h100t-gpu-00", "GET 200 op", "GET 200 op",
        "GET 200 virtualMachineScaleSets/h100t-gpu-00"]
    assert [e.detail for e in events if e.action == "retry"] == ["ZonalAllocationFailed in zone 1 of eastus"]


def test_allocation_failure_in_every_zone_moves_to_the_fallback_region(fake, clients, azbench_home):
    fake.add_fault("allocation", path_contains="virtualMachineScaleSets/h100t-gpu-00")
    _, cluster = up(clients, spec_for(fallback_regions=["westus3"]))
    assert cluster.region == "westus3"
    assert {r.get("location") for k, r in fake.resources.items()
            if "/providers/" in k and "microsoft.authorization" not in k} == {"westus3"}
    assert set(puts_per_path(fake)) and fake.count("DELETE", "virtualNetworks/h100t-vnet") == 1


def test_allocation_failure_in_the_last_fallback_region_is_the_capacity_error(fake, clients, azbench_home):
    # up moves on once per fallback region; the last region's CapacityError is what the caller gets.
    fake.add_fault("allocation", path_contains="virtualMachineScaleSets/h100t-gpu-00", times=2)
    events = []
    with pytest.raises(CapacityError, match="AllocationFailed"):
        up(clients, spec_for(fallback_regions=["westus3"]), progress=events.append)
    assert [e.detail for e in events if e.action == "retry" and "moving to" in e.detail] == [
        "no capacity in eastus: moving to westus3"]
    assert fake.count("PUT", "virtualMachineScaleSets/h100t-gpu-00") == 2


def test_allocation_failure_without_fallback_is_a_capacity_error(fake, clients, azbench_home):
    fake.add_fault("allocation", path_contains="virtualMachineScaleSets/h100t-gpu-00")
    with pytest.raises(CapacityError, match="AllocationFailed") as err:
        up(clients, spec_for())
    assert err.value.code == "AllocationFailed" and err.value.request_id.startswith("req-")
    assert "h100t-gpu-00" not in fake.of_type("virtualMachineScaleSets")


@pytest.mark.parametrize("kind,code", [("quota", "OperationNotAllowed"), ("sku", "SkuNotAvailable")])
def test_quota_and_sku_conflicts_fail_fast(fake, clients, azbench_home, kind, code):
    # Refused while writing (preflight passed): a runtime failure, exit 4, with the ARM code and
    # the resource in one line; exit 3 is preflight's own (issue 21).
    fake.add_fault(kind, path_contains="virtualMachineScaleSets/", times=5)
    with pytest.raises(ProvisionError) as err:
        up(clients, spec_for(nodes=2))
    assert not isinstance(err.value, PreflightError) and err.value.exit_code == 4
    assert err.value.code == code and err.value.request_id
    assert f"create virtualMachineScaleSets h100t-gpu-00: HTTP 409 {code}:" in str(err.value)
    assert "\n" not in str(err.value)
    assert fake.count("PUT", "virtualMachineScaleSets/h100t-gpu-00") == 1


def test_preflight_reports_the_exact_quota_shortfall_before_any_put(fake, clients, azbench_home):
    for row in fake.usages["eastus"]:
        if row["name"]["value"] == "standardNDISRGB200V6NDRFamily":
            row.update(currentValue=1024, limit=2048)
    with pytest.raises(PreflightError) as err:
        up(clients, spec_for("big", "gb200", 2048, max_vms_per_scale_set=100))
    assert ("quota standardNDISRGB200V6NDRFamily in eastus: need 262,144 vCPUs, 1,024 free "
            "(limit 2,048, used 1,024)") in str(err.value)
    assert fake.count("PUT") == 0


def test_preflight_rejects_sizes_not_offered_or_restricted(fake, clients, azbench_home):
    fake.skus["eastus"] = [s for s in fake.skus["eastus"] if s["name"] != "Standard_ND96isr_H100_v5"]
    with pytest.raises(PreflightError, match="Standard_ND96isr_H100_v5 is not offered in eastus"):
        up(clients, spec_for())
    for s in fake.skus["westus3"]:
        s["restrictions"] = [{"type": "Location", "values": ["westus3"], "reasonCode": "NotAvailableForSubscription"}]
    spec = ClusterSpec(name="r", provider="azure", sku="h100", nodes=1, region="westus3", azure={"ssh_ingress_cidr": INGRESS})
    with pytest.raises(PreflightError, match="restricted in westus3 .*NotAvailableForSubscription"):
        provider(clients).up(spec, provider(clients).plan(spec))
    assert fake.count("PUT") == 0


def test_a_foreign_resource_group_is_never_adopted(fake, clients, azbench_home):
    clients.resources.resource_groups.create_or_update("azbench-h100t", {"location": "eastus"})
    with pytest.raises(ConfigError, match="not created by azbench") as err:  # issue 32: exit 2, not 4
        up(clients, spec_for())
    assert err.value.exit_code == 2
    assert fake.count("PUT") == 1


# ---------------------------------------------------------------- sweep, ingress, config
def test_sweep_deletes_expired_clusters_and_only_reports_unrecorded_live_ones(fake, clients, azbench_home):
    """Issue 32, point 1: the expiry tag decides. A live cluster of the caller's that this home
    has no record of (a lost store) is reported with the way to adopt it, never deleted."""
    past = AzureProvider(clients)
    past.opts.now = lambda: datetime.now(timezone.utc) - timedelta(days=3)
    s_old = spec_for("old", nodes=1)
    past.up(s_old, past.plan(s_old))
    up(clients, spec_for("live", nodes=1))
    me: dict[str, str] = {}  # signed in as the principal both were made by (the token's oid)
    assert [(i.cluster, i.deleted, i.mine, i.action) for i in sweep(clients, dry_run=True, **me)] == \
        [("old", False, True, "delete")]
    found = sweep(clients, dry_run=True, known_clusters={"old"}, **me)
    assert [(i.cluster, i.action) for i in found] == [("live", "kept"), ("old", "delete")]
    assert found[0].reason.startswith("live (expires ") and \
        found[0].reason.endswith("not in this home: adopt it with `azbench adopt live` or leave it")
    found = sweep(clients, dry_run=True, known_clusters={"old", "live"}, **me)
    assert [i.reason.split()[0] for i in found] == ["expired"]
    done = sweep(clients, dry_run=False, known_clusters=set(), **me)  # a home that lost its store
    assert [(i.cluster, i.action, i.deleted) for i in done] == [("live", "kept", False), ("old", "deleted", True)]
    assert {r["tags"]["azbench-cluster"] for r in fake.resources.values() if "tags" in r} == {"live"}
    # old's role assignment went with its group, its custom role with `delete_cluster`
    assert {k.split("/")[4] for k in fake.resources} == {"azbench-live", "microsoft.authorization"}
    assert len(fake.of_type("roleDefinitions")) == 1


def test_ssh_ingress_is_configured_env_or_looked_up_never_the_internet(monkeypatch):
    monkeypatch.delenv("AZBENCH_CALLER_IP", raising=False)
    assert resolve_ingress("198.51.100.0/24") == "198.51.100.0/24"
    assert resolve_ingress(None, lambda: "198.51.100.9\n") == "198.51.100.9/32"
    monkeypatch.setenv("AZBENCH_CALLER_IP", "2001:db8::1")
    assert resolve_ingress(None, lambda: pytest.fail("lookup not needed")) == "2001:db8::1/128"
    with pytest.raises(PreflightError, match="whole internet"):
        resolve_ingress("0.0.0.0/0")


def test_missing_subscription_is_a_one_line_config_error(monkeypatch):
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    with pytest.raises(ConfigError, match="AZURE_SUBSCRIPTION_ID") as err:
        clients_from_config()
    assert "\n" not in str(err.value)


def test_private_authority_disables_instance_discovery(monkeypatch):
    import azure.identity
    seen = {}
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", lambda **kw: seen.update(kw) or "cred")
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", SUB)
    monkeypatch.setenv("AZURE_AUTHORITY_HOST", "https://login.sovereign.example")
    monkeypatch.setenv("AZURE_RESOURCE_MANAGER_ENDPOINT", "https://arm.sovereign.example/")
    c = clients_from_config()
    assert seen == {"disable_instance_discovery": True}
    assert c.base_url == "https://arm.sovereign.example"
    assert c.client_kwargs()["credential_scopes"] == ["https://arm.sovereign.example/.default"]


def test_error_codes_not_exception_classes_decide():
    assert classify_code("AllocationFailed") is ArmErrorClass.CAPACITY
    assert classify_code("OperationNotAllowed", "exceeding approved standardNDSH100v5Family Cores quota") is ArmErrorClass.QUOTA
    assert classify_code("OperationNotAllowed", "x", ("TooManyRequests",)) is ArmErrorClass.THROTTLED
    assert classify_code("SkuNotAvailable") is ArmErrorClass.SKU_UNAVAILABLE
    assert classify_code("OverconstrainedAllocationRequest") is ArmErrorClass.OVERCONSTRAINED


def test_get_provider_returns_azure_and_sdk_loads_lazily():
    code = ("import sys; from orchestrator.providers import get_provider; p = get_provider('azure'); "
            "print(type(p).__name__, any(m.startswith('azure.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1]).stdout.split()
    assert out == ["AzureProvider", "False"]


# ---------------------------------------------------------------- cloud-init golden files
FIXED = ci.ClusterSecrets(admin_key_path=Path("/dev/null"), admin_public_key="ssh-ed25519 AAAAadmin azbench-admin",
                          host_private_key="-----BEGIN OPENSSH PRIVATE KEY-----\nFAKEHOSTKEY\n-----END OPENSSH PRIVATE KEY-----",
                          host_public_key="ssh-ed25519 AAAAhost azbench-head-host", munge_key_b64="bXVuZ2U=")
CASES = {
    "h100": ("h100t", "h100", [ScaleSetPlan(name="h100t-gpu-00", vms=2, gpus=16), ScaleSetPlan(name="h100t-gpu-01", vms=1, gpus=8)]),
    "gb200": ("gbt", "gb200", [ScaleSetPlan(name="gbt-gpu-00", vms=36, gpus=144, racks=2)]),
    # The GB200 image (Ubuntu 24.04) has Slurm 23.11: blocks; on an older Slurm, leaf switches.
    "gb200-tree": ("gbt", "gb200", [ScaleSetPlan(name="gbt-gpu-00", vms=36, gpus=144, racks=2)]),
    "h100-spot": ("h100t", "h100", [ScaleSetPlan(name="h100t-gpu-00", vms=2, gpus=16)]),
    "d4s_v5": ("cput", "d4s_v5", [ScaleSetPlan(name="cput-cpu-00", vms=2, gpus=0)]),
}


def _rendered(case: str) -> dict[str, str]:
    name, sku, sets = CASES[case]
    row = lookup(sku)
    version = (23, 11) if case == "gb200" else (22, 5)
    return {"head": ci.head_cloud_init(name, row, sets, "10.40.0.4", "10.40.0.0/16", FIXED, slurm_version=version),
            "node": ci.node_cloud_init(name, row, sets, "10.40.0.4", FIXED, spot=case.endswith("-spot"))}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("role", ["head", "node"])
def test_cloud_init_matches_golden_and_parses(case, role, tmp_path):
    text = _rendered(case)[role]
    check_golden(GOLDEN / f"cloud-init-{role}.{case}.yaml", text)
    doc = yaml.safe_load(text)
    assert text.startswith("#cloud-config\n") and "munge" in doc["packages"]
    files = {f["path"]: f for f in doc["write_files"]}
    assert files["/etc/munge/munge.key"]["permissions"] == "0400"
    if role == "head":
        assert doc["ssh_keys"]["ed25519_public"] == FIXED.host_public_key
        assert "NodeName=" in files["/etc/slurm/slurm.conf"]["content"]
    else:
        assert doc["mounts"][1][:2] == ["10.40.0.4:/shared", "/shared"]
    if shutil.which("cloud-init"):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        check = subprocess.run(["cloud-init", "schema", "--config-file", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_custom_data_for_2048_gb200_vms_fits_azure_limit():
    sets = [ScaleSetPlan(name=f"big-gpu-{i:02d}", vms=96, gpus=384, racks=6) for i in range(21)]
    sets.append(ScaleSetPlan(name="big-gpu-21", vms=32, gpus=128, racks=2))
    from orchestrator.providers.azure.expiry import agent_context
    agent = agent_context("big", SUB, "azbench-big", "https://management.azure.com", 30)  # as up renders it
    text = ci.head_cloud_init("big", lookup("gb200"), sets, "10.40.0.4", "10.40.0.0/16", FIXED, expiry=agent)
    packed = base64.b64decode(ci.custom_data(text, "head"))
    assert text.count("State=UNKNOWN") == 2048 and len(packed) <= ci.MAX_CUSTOM_DATA
    # Spare slots for replacement and resize: whole racks of the layout's own 16 VMs per set (issue 32:
    # a resize grows by those), plus one (3 racks for 96 VMs, 2 for 32).
    assert text.count("State=FUTURE") == 21 * 48 + 32


def test_cli_progress_callback_reaches_the_azure_provider():
    from orchestrator.providers import get_provider
    def show(event):
        return None
    provider = get_provider("azure", progress=show)
    assert provider.opts.progress is show
