"""Spot scale sets against the loopback fake ARM: the request body (priority, eviction policy,
billingProfile.maxPrice), the low-priority vCPU quota preflight, the dry-run plan's spot price,
and capacity restore after evicted instances disappear (or are deallocated)."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import pytest
import yaml

from orchestrator.hardware.catalog import SPOT_PRICE_FRACTION, lookup
from orchestrator.providers.azure.plan import plan_azure
from orchestrator.errors import CapacityError, ConfigError, PreflightError
from tests.test_azure_provider import spec_for, up

STEP = "/usr/local/sbin/azbench-step"  # every runcmd step runs under it (it names a failing step)


def spot_spec(**azure):
    return spec_for(nodes=3, priority="spot", **azure)


def test_spot_scale_set_body_carries_priority_eviction_and_max_price(fake, clients, azbench_home):
    _, cluster = up(clients, spot_spec(eviction_policy="delete", max_price=40.5))
    for vmss in fake.of_type("virtualMachineScaleSets").values():
        prof = vmss["properties"]["virtualMachineProfile"]
        assert prof["priority"] == "Spot" and prof["evictionPolicy"] == "Delete"
        assert prof["billingProfile"] == {"maxPrice": 40.5}
    head = fake.of_type("virtualMachines")["h100t-head"]["properties"]
    assert "priority" not in head  # the head (slurmctld, NFS) is never evictable
    assert cluster.properties.priority == "spot" and cluster.properties.eviction_policy == "delete"
    files, runcmd = node_cloud_config(fake)
    agent = Path(__file__).resolve().parents[1] / "templates" / "spot_agent.py"
    assert files["/usr/local/sbin/azbench-spot-agent"]["content"] == agent.read_text()
    assert "ExecStart=/usr/bin/python3 /usr/local/sbin/azbench-spot-agent" in \
        files["/etc/systemd/system/azbench-spot-agent.service"]["content"]
    assert [STEP, "systemctl", "enable", "--now", "azbench-spot-agent"] in runcmd


def node_cloud_config(fake) -> tuple[dict, list]:
    vmss = fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]
    packed = vmss["properties"]["virtualMachineProfile"]["osProfile"]["customData"]
    doc = yaml.safe_load(gzip.decompress(base64.b64decode(packed)).decode())
    return {f["path"]: f for f in doc["write_files"]}, doc["runcmd"]


def test_default_max_price_is_minus_one_and_regular_sets_have_no_priority(fake, clients, azbench_home):
    up(clients, spot_spec())
    prof = fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["properties"]["virtualMachineProfile"]
    assert prof["billingProfile"] == {"maxPrice": -1.0} and prof["evictionPolicy"] == "Deallocate"


def test_regular_priority_sends_no_spot_fields(fake, clients, azbench_home):
    up(clients, spec_for(nodes=2))
    prof = fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["properties"]["virtualMachineProfile"]
    assert not {"priority", "evictionPolicy", "billingProfile"} & set(prof)
    files, runcmd = node_cloud_config(fake)
    assert "/usr/local/sbin/azbench-spot-agent" not in files and "azbench-spot-agent" not in str(runcmd)


def test_spot_preflight_checks_the_low_priority_quota_not_the_family(fake, clients, azbench_home):
    for row in fake.usages["eastus"]:
        if row["name"]["value"] == "lowPriorityCores":
            row.update(currentValue=100, limit=292)
        if row["name"]["value"] == "standardNDSH100v5Family":
            row.update(currentValue=0, limit=0)  # no regular quota at all: must not matter
    with pytest.raises(PreflightError) as err:
        up(clients, spot_spec())
    assert str(err.value).count("quota") == 1
    assert ("quota Total Regional Low-priority vCPUs (lowPriorityCores) in eastus: need 288 vCPUs, "
            "192 free (limit 292, used 100)") in str(err.value)
    assert fake.count("PUT") == 0


def test_spot_preflight_passes_without_family_quota(fake, clients, azbench_home):
    for row in fake.usages["eastus"]:
        if row["name"]["value"] == "standardNDSH100v5Family":
            row.update(currentValue=0, limit=0)
    _, cluster = up(clients, spot_spec())
    assert len(cluster.node_names) == 3


def test_dry_run_plan_shows_spot_terms_and_the_spot_estimate():
    plan = plan_azure(spot_spec(max_price=50))
    vmss = [r for r in plan.resources if r.kind.endswith("virtualMachineScaleSets")][0]
    assert (vmss.properties["priority"], vmss.properties["eviction_policy"],
            vmss.properties["max_price"]) == ("Spot", "Deallocate", "50 USD/h")
    payg = lookup("h100").price_per_hour_usd
    assert plan.cost_per_hour_usd == round(3 * round(payg * SPOT_PRICE_FRACTION, 2) + 0.384, 2)
    note = next(w for w in plan.warnings if w.startswith("spot:"))
    assert "pay-as-you-go" in note and f"{SPOT_PRICE_FRACTION:.0%}" in note
    assert any("lowPriorityCores" in line for line in plan.preflight)
    assert not any("family quota" in line for line in plan.preflight)


def test_plan_warns_about_a_max_price_below_the_estimate_or_without_spot():
    low = plan_azure(spot_spec(max_price=1))
    assert any("below the estimated spot price" in w for w in low.warnings)
    regular = plan_azure(spec_for(nodes=2, max_price=50))
    assert any("applies only with azure.priority: spot" in w for w in regular.warnings)
    assert not any(w.startswith("spot:") for w in regular.warnings)


def test_max_price_must_be_minus_one_or_positive():
    with pytest.raises(Exception, match="max_price must be -1"):
        spot_spec(max_price=0)
    with pytest.raises((ConfigError, ValueError)):
        spot_spec(eviction_policy="stop")


def test_capacity_restore_after_instances_disappear(fake, clients, azbench_home):
    p, cluster = up(clients, spot_spec(eviction_policy="delete"))
    before = [n["name"] for n in p.node_states(cluster)]
    fake.evict("h100t-gpu-00", [1])  # eviction policy delete: the VM and its capacity are gone
    assert len(p.node_states(cluster)) == 2
    hosts = p.restore_capacity(cluster, timeout_s=5)
    assert len(hosts) == 3 and fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["sku"]["capacity"] == 2
    assert "h100t-gpu-00-000001" not in hosts and "h100t-gpu-00-000002" in hosts  # a new instance id
    assert sorted(set(before) - {"h100t-gpu-00-000001"}) == sorted(set(hosts) - {"h100t-gpu-00-000002"})
    assert fake.count("PATCH", "virtualMachineScaleSets/h100t-gpu-00") == 1
    assert fake.count("PATCH", "virtualMachineScaleSets/h100t-gpu-01") == 0  # untouched set


def test_capacity_restore_starts_deallocated_instances(fake, clients, azbench_home):
    p, cluster = up(clients, spot_spec())
    fake.evict("h100t-gpu-01", [0], policy="deallocate")
    hosts = p.restore_capacity(cluster, timeout_s=5)
    assert sorted(hosts) == sorted(cluster.node_names)  # same VMs, same names: slurm.conf holds
    assert fake.count("POST", "virtualMachineScaleSets/h100t-gpu-01/start") == 1
    assert fake.count("PATCH") == 0 and not fake.deallocated


def test_capacity_restore_waits_then_says_spot_capacity_is_gone(fake, clients, azbench_home):
    slept: list[float] = []
    p, cluster = up(clients, spot_spec(eviction_policy="delete"))
    p.opts.sleep, p.opts.capacity_wait_s = slept.append, 10.0
    fake.evict("h100t-gpu-00", [0, 1])
    fake.add_fault("allocation", method="PATCH", path_contains="h100t-gpu-00", times=100)
    with pytest.raises(CapacityError) as err:
        p.restore_capacity(cluster, timeout_s=35)
    message = str(err.value)
    assert "spot capacity is gone: h100t-gpu-00 has 0 of 2 VMs running" in message
    assert "after waiting 35 s" in message and "Allocation failed" in message
    assert slept == [10.0, 10.0, 10.0]  # bounded: 3 waits of 10 s fit in 35 s
    assert fake.count("PATCH", "h100t-gpu-00") == 4


def test_cli_dry_run_shows_spot_and_rejects_a_bad_max_price(tmp_path, azbench_home):
    from tests.cli_helpers import azbench
    spec = tmp_path / "spot.yaml"
    spec.write_text("name: h100s\nprovider: azure\nsku: h100\nnodes: 4\nregion: eastus\n"
                    "azure:\n  priority: spot\n  eviction_policy: delete\n  max_price: 60\n")
    res = azbench("up", "-f", str(spec), "--dry-run", home=azbench_home, env={"COLUMNS": "300"})
    assert res.code == 0, res.err
    assert "priority=Spot, eviction_policy=Delete, max_price=60 USD/h" in res.out
    assert "lowPriorityCores" in res.out and "pay-as-you-go" in res.out
    spec.write_text(spec.read_text().replace("max_price: 60", "max_price: 0"))
    bad = azbench("up", "-f", str(spec), "--dry-run", home=azbench_home)
    assert bad.code == 2 and "Traceback" not in bad.err
    assert f"{spec}:9" in bad.err and "max_price must be -1" in bad.err


def test_restore_waits_for_the_noticed_vm_to_be_evicted_first(fake, clients, azbench_home):
    # The job leaves a noticed node before Azure evicts it: restoring then would find the set
    # full, and the eviction would land after it.
    p, cluster = up(clients, spot_spec(eviction_policy="delete"))
    victim = "h100t-gpu-00-000001"
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) == 2:  # the eviction lands during the second pause
            fake.evict("h100t-gpu-00", [1])

    p.opts.sleep = sleep
    hosts = p.restore_capacity(cluster, [victim], timeout_s=5, evict_wait_s=60)
    assert slept == [5.0, 5.0]
    assert victim not in hosts and len(hosts) == 3  # restored after the eviction, under a new id
    assert fake.count("PATCH", "virtualMachineScaleSets/h100t-gpu-00") == 1


def test_restore_after_a_notice_that_never_evicts_is_bounded(fake, clients, azbench_home):
    p, cluster = up(clients, spot_spec())
    slept: list[float] = []
    p.opts.sleep = slept.append
    hosts = p.restore_capacity(cluster, ["h100t-gpu-01-000000"], timeout_s=5, evict_wait_s=12)
    assert slept == [5.0, 5.0]  # 2 pauses of 5 s fit in 12 s; then it restores anyway
    assert sorted(hosts) == sorted(cluster.node_names) and fake.count("PATCH") == 0
