"""Preflight sees what ARM would refuse before any write (issue 21 point 4): zone restrictions,
family and low-priority quota, image architecture; and a refusal ARM makes at write time is a
runtime failure (exit 4), never "preflight failed" (exit 3). The fake ARM's request log counts
the writes."""

from __future__ import annotations

import pytest

from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import EXIT_CODES, PreflightError, ProvisionError
from testsupport.fake_arm import arm_writes, restrict

INGRESS = "203.0.113.7/32"
H100 = "Standard_ND96isr_H100_v5"


def spec_for(name="pf", sku="h100", nodes=2, **azure) -> ClusterSpec:
    opts = {"ssh_ingress_cidr": INGRESS, "max_vms_per_scale_set": 2, "boot_timeout_s": 0, **azure}
    return ClusterSpec(name=name, provider="azure", sku=sku, nodes=nodes, region="eastus", azure=opts)


def up(clients, spec):
    p = AzureProvider(clients, capacity_wait_s=0)
    return p.up(spec, p.plan(spec))


def test_a_zone_restricted_for_the_subscription_is_refused_before_any_write(fake, clients, azbench_home):
    restrict(fake, H100, zones=["2"])
    with pytest.raises(PreflightError) as err:
        up(clients, spec_for(zones=["1", "2"]))
    assert (f"{H100} is restricted in zone(s) 2 of eastus for this subscription "
            "(NotAvailableForSubscription; usable zones: 1, 3)") in str(err.value)
    assert arm_writes(fake) == 0 and fake.count("GET", "providers/Microsoft.Compute/skus") == 1


def test_an_unrestricted_zone_of_a_partly_restricted_size_still_goes_ahead(fake, clients, azbench_home):
    restrict(fake, H100, zones=["2"])
    up(clients, spec_for(zones=["3"]))
    assert fake.of_type("virtualMachineScaleSets")["pf-gpu-00"]["zones"] == ["3"]


def test_a_location_restriction_in_restriction_info_is_refused(fake, clients, azbench_home):
    restrict(fake, H100)
    with pytest.raises(PreflightError, match="restricted in eastus for this subscription"):
        up(clients, spec_for())
    assert arm_writes(fake) == 0


def test_the_family_and_low_priority_quotas_are_read_before_any_write(fake, clients, azbench_home):
    for row in fake.usages["eastus"]:
        if row["name"]["value"] in ("lowPriorityCores", "standardNDSH100v5Family"):
            row.update(currentValue=0, limit=96)
    with pytest.raises(PreflightError, match=r"Low-priority vCPUs \(lowPriorityCores\) in eastus: need 192"):
        up(clients, spec_for(priority="spot"))
    with pytest.raises(PreflightError, match="quota standardNDSH100v5Family in eastus: need 192 vCPUs, 96 free"):
        up(clients, spec_for())
    assert arm_writes(fake) == 0


def test_an_x64_image_for_grace_is_refused(fake, clients, azbench_home):
    with pytest.raises(PreflightError, match="is x64 Hyper-V V2; the size needs Arm64 Gen2"):
        up(clients, spec_for("gb", "gb200", 18, max_vms_per_scale_set=100, image="microsoft-dsvm:ubuntu-hpc:2404:latest"))
    gallery = f"/subscriptions/{clients.subscription_id}/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/hpc"
    fake.resources[gallery.lower()] = {"id": gallery, "name": "hpc", "type": "Microsoft.Compute/galleries/images",
                                       "location": "eastus", "properties": {"architecture": "x64"}}
    fake.resources[(gallery + "/versions/1.0.0").lower()] = {"id": gallery + "/versions/1.0.0", "name": "1.0.0",
                                                              "type": "Microsoft.Compute/galleries/images/versions",
                                                              "location": "eastus", "properties": {}}
    with pytest.raises(PreflightError, match="is x64; the size needs Arm64"):
        up(clients, spec_for("gb", "gb200", 18, max_vms_per_scale_set=100, image=gallery + "/versions/1.0.0"))
    assert arm_writes(fake) == 0


@pytest.mark.parametrize("kind,code", [("quota", "OperationNotAllowed"), ("sku", "SkuNotAvailable")])
def test_a_refusal_at_write_time_is_a_runtime_failure_naming_code_and_resource(fake, clients, azbench_home,
                                                                                kind, code):
    fake.add_fault(kind, path_contains="virtualMachineScaleSets/", times=5)
    with pytest.raises(ProvisionError) as err:
        up(clients, spec_for())
    assert not isinstance(err.value, PreflightError) and err.value.exit_code == 4 and EXIT_CODES[4]
    assert err.value.code == code and "\n" not in str(err.value)
    assert str(err.value).startswith(f"create virtualMachineScaleSets pf-gpu-00: HTTP 409 {code}: ")
