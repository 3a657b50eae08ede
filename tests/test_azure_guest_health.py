"""Azure Guest Health Reporting (issue 23), against the fake ARM's model of the documented call
(https://learn.microsoft.com/en-us/azure/azure-impact-reporting/guest-health-impact-report):
the request has the documented shape and fields, a node without a physical host name is
skipped, an ARM refusal is that node's failure (classified by status), and a provider without
a documented way answers MissingCapability."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from orchestrator.providers.azure import guest_health as ghr
from orchestrator.providers.fake.provider import FakeProvider
from orchestrator.errors import MissingCapability
from tests.test_azure_provider import spec_for, up


def test_the_body_is_the_documented_shape():
    body = ghr.impact_body(start=datetime(2026, 5, 13, 1, 6, 21, tzinfo=timezone.utc),
                           category=ghr.GENERIC, description="azbench health gate: collective fail",
                           resource_id="/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/"
                                       "virtualMachineScaleSets/x/virtualMachines/1",
                           physical_host="GGBB90904476")
    # Case-sensitive names: camelCase in properties, PascalCase in additionalProperties.
    assert body == {"properties": {
        "startDateTime": "2026-05-13T01:06:21.000000Z", "impactCategory": "Resource.Hpc.Unhealthy.HpcGenericFailure",
        "impactDescription": "azbench health gate: collective fail",
        "impactedResourceId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/"
                              "virtualMachineScaleSets/x/virtualMachines/1",
        "additionalProperties": {"PhysicalHostName": "GGBB90904476"}}}
    assert ghr.category("collective fail: 0 GB/s", has_ib=True) == "Resource.Hpc.Unhealthy.IBPerformance"
    assert ghr.category("collective fail: 0 GB/s", has_ib=False) == ghr.GENERIC
    assert ghr.category("throughput slow: 1e6 ops/s", has_ib=True) == ghr.GENERIC


def test_drained_nodes_are_reported_skipped_or_failed(fake, clients, azbench_home, monkeypatch):
    p, cluster = up(clients, spec_for(nodes=3))
    a, b, c = cluster.node_names
    physical = {a: "GGBB90904476", c: "GGBB90904477"}  # b's VM had no Hyper-V KVP value
    monkeypatch.setattr(p, "_physical_hosts", lambda cl, nodes: {n: physical[n] for n in nodes if n in physical})
    first = p.report_unhealthy(cluster, {a: "collective fail: 0 GB/s (threshold 400 GB/s)"})
    [ok] = first
    assert (ok.node, ok.status, ok.category) == (a, "reported", "Resource.Hpc.Unhealthy.IBPerformance")
    sent = fake.impacts[ok.detail]["properties"]
    assert sent["additionalProperties"] == {"PhysicalHostName": "GGBB90904476"}
    assert sent["impactedResourceId"].endswith(f"/virtualMachineScaleSets/{a.rsplit('-', 1)[0]}/virtualMachines/0")
    [put] = [e for e in fake.log if "workloadImpacts" in e.path]
    assert put.method == "PUT" and put.query["api-version"] == ["2025-01-01-preview"] and put.status == 200

    # A reused impact name is refused (the page: no 200): that node fails, the others go on.
    monkeypatch.setattr(ghr, "impact_name", lambda cluster, node: ok.detail)
    rest = {r.node: r for r in p.report_unhealthy(cluster, {b: "throughput slow", c: "throughput slow"})}
    assert rest[b].status == "skipped" and "PhysicalHostName" in rest[b].detail
    assert rest[c].status == "failed" and "HTTP 409" in rest[c].detail
    assert len(fake.impacts) == 1


def test_a_provider_without_a_documented_way_says_so(azbench_home):
    provider = FakeProvider()
    from orchestrator.specs.cluster import ClusterSpec
    spec = ClusterSpec(name="nog", provider="fake", sku="h100", nodes=2, region="eastus")
    cluster = provider.up(spec, provider.plan(spec))
    assert provider.parts().host_reports is None
    from orchestrator.clusters import lifecycle
    from orchestrator.store.database import Store
    with Store.open() as store, pytest.raises(MissingCapability) as info:
        lifecycle.report_unhealthy(cluster, {cluster.node_names[0]: "bad"}, store)
    assert "report a faulty host" in str(info.value) and info.value.exit_code == 7
