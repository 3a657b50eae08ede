"""Drift (issue 21, point 3): a rerun of `up NAME` with another shape exits 2 and writes nothing.

Writes are counted from the fake ARM's request log (every PUT, PATCH, DELETE and POST).
"""

from __future__ import annotations

import pytest

from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.providers.azure.drift import DriftError
from orchestrator.specs.cluster import ClusterSpec

INGRESS = "203.0.113.7/32"
WRITES = ("PUT", "PATCH", "DELETE", "POST")


def spec_for(nodes=2, region="eastus", **azure) -> ClusterSpec:
    opts = {"ssh_ingress_cidr": INGRESS, "max_vms_per_scale_set": 2, "boot_timeout_s": 0,
            "self_expiry": False, **azure}
    return ClusterSpec(name="d", provider="azure", sku="h100", nodes=nodes, region=region, azure=opts)


def up(clients, spec):
    p = AzureProvider(clients, capacity_wait_s=0)
    return p.up(spec, p.plan(spec))


def arm_writes(fake) -> int:
    return sum(1 for e in fake.log if e.method in WRITES and "/oauth2/" not in e.path)


@pytest.fixture
def live(fake, clients, azbench_home):
    up(clients, spec_for())
    return arm_writes(fake)


def test_another_node_count_exits_2_points_to_resize_and_writes_nothing(fake, clients, live):
    with pytest.raises(DriftError) as err:
        up(clients, spec_for(nodes=4))
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert "cluster 'd' exists with another shape (live -> requested): nodes 2 -> 4; nothing was changed" \
        in str(err.value)
    assert "azbench resize d" in str(err.value)
    assert arm_writes(fake) == live  # zero ARM writes


def test_every_difference_is_in_the_one_line_diff(fake, clients, live):
    spec = spec_for(ssh_ingress_cidr="198.51.100.0/24", priority="spot",
                    image="microsoft-dsvm:ubuntu-hpc:2404:latest")
    with pytest.raises(DriftError) as err:
        up(clients, spec)
    text = str(err.value)
    assert "priority regular -> spot" in text
    assert f"ssh range {INGRESS} -> 198.51.100.0/24" in text
    assert "image microsoft-dsvm:ubuntu-hpc:2204:latest -> microsoft-dsvm:ubuntu-hpc:2404:latest" in text
    assert "nodes" not in text.split(";")[0] and "azbench down d" in text
    assert arm_writes(fake) == live


def test_another_size_or_region_is_drift_too(fake, clients, live):
    with pytest.raises(DriftError, match="sku Standard_ND96isr_H100_v5 -> Standard_ND96isr_H200_v5"):
        up(clients, ClusterSpec(**{**spec_for().model_dump(), "sku": "h200"}))
    with pytest.raises(DriftError, match="region eastus -> westus3"):
        up(clients, spec_for(region="westus3"))
    assert arm_writes(fake) == live


def test_the_same_request_adopts_and_a_fallback_region_is_not_drift(fake, clients, live):
    up(clients, spec_for())
    up(clients, spec_for(region="westus3", fallback_regions=["eastus"]))
    assert arm_writes(fake) == live


def test_a_drifted_up_leaves_the_store_as_it_was(tls_arm, tmp_path, monkeypatch):
    """Through the use case: the record, its spec and plan stay those of the live cluster."""
    from orchestrator.clusters import lifecycle
    from orchestrator.store.database import Store
    fake, _ = tls_arm
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "home"))
    with Store.open() as store:
        lifecycle.up(spec_for(polling_interval=0.01), store)
        before, writes = store.get_cluster("d"), arm_writes(fake)
        with pytest.raises(DriftError):
            lifecycle.up(spec_for(nodes=4, polling_interval=0.01), store)
        after = store.get_cluster("d")
    assert arm_writes(fake) == writes
    assert (after.spec_json, after.plan_json, after.nodes, after.state) == (
        before.spec_json, before.plan_json, 2, before.state)


def test_a_rerun_after_a_crash_between_scale_sets_resumes_and_is_not_drift(fake, azbench_home):
    # A killed `up` created d-gpu-00 (2 VMs) but never reached d-gpu-01 (1 VM): its rerun
    # resumes. CI once saw the rerun read the 2 live VMs as drift from the 3 requested.
    from orchestrator.providers.azure.clients import AzureClients
    from testsupport.fake_arm import SUB, StubCredential, allow_plain_http_policy

    def crash(event):
        if event.action == "creating" and event.name == "d-gpu-00":
            raise KeyboardInterrupt("killed")

    def clients_as(name: str) -> AzureClients:
        return AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                            per_call_policies=[allow_plain_http_policy(name)], polling_interval=0.01)

    fake.frozen_client, fake.frozen_match = "first", "virtualmachinescalesets/d-gpu-00"
    one_at_a_time = AzureProvider(clients_as("first"), capacity_wait_s=0, workers=1,
                                  progress=crash)
    with pytest.raises(KeyboardInterrupt):
        one_at_a_time.up(spec_for(nodes=3), one_at_a_time.plan(spec_for(nodes=3)))
    assert set(fake.of_type("virtualMachineScaleSets")) == {"d-gpu-00"}
    lro = azbench_home / "clusters/d/azure-lro.json"
    tokens = lro.read_text()
    # Without the crashed run's tokens nothing says an `up` is unfinished: that is drift.
    lro.unlink()
    with pytest.raises(DriftError, match="nodes 2 -> 3"):
        up(clients_as("second"), spec_for(nodes=3))
    lro.write_text(tokens)
    cluster = up(clients_as("second"), spec_for(nodes=3))
    assert cluster.nodes == 3 and set(fake.of_type("virtualMachineScaleSets")) == {"d-gpu-00", "d-gpu-01"}
