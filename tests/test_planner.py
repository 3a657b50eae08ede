"""The Azure plan obeys the IB design rules: 100-VM scale sets, whole GB200 racks, cost."""

from __future__ import annotations

import pytest

from orchestrator.providers.azure.plan import plan_azure
from orchestrator.specs.cluster import load_cluster_spec
from orchestrator.errors import ConfigError


def spec(**kw):
    base = {"name": "t", "provider": "azure", "region": "eastus"}
    return load_cluster_spec(None, {**base, **kw})


def test_gb200_record_scale_plan():
    plan = plan_azure(spec(sku="gb200", nodes=2048))
    assert plan.total_gpus == 8192
    assert sum(s.vms for s in plan.scale_sets) == 2048
    assert all(s.vms <= 100 and s.vms % 16 == 0 for s in plan.scale_sets)
    assert sum(s.racks for s in plan.scale_sets) == 128
    assert plan.cost_per_hour_usd == pytest.approx(2048 * 108.16 + 0.384, abs=0.01)
    assert any("128 NVL72 racks x 16 VMs" in w for w in plan.warnings)


def test_gb200_whole_racks_of_18():
    plan = plan_azure(spec(sku="gb200", nodes=180))
    assert [s.vms for s in plan.scale_sets] == [90, 90]
    assert [s.racks for s in plan.scale_sets] == [5, 5]


def test_gb200_partial_rack_is_an_error_with_a_hint():
    with pytest.raises(ConfigError, match="racks of 18 VMs: 20 nodes is not a whole number"):
        plan_azure(spec(sku="gb200", nodes=20))
    plan = plan_azure(spec(sku="gb200", nodes=4, azure={"vms_per_rack": 4}))
    assert plan.scale_sets[0].racks == 1


def test_h100_splits_evenly_under_the_cap():
    plan = plan_azure(spec(sku="h100", nodes=128))
    assert [s.vms for s in plan.scale_sets] == [64, 64]
    assert plan.total_gpus == 1024
    vmss = [r for r in plan.resources if r.kind.endswith("virtualMachineScaleSets")]
    assert all(r.properties["single_placement_group"] is True for r in vmss)
    assert all(r.properties["platform_fault_domain_count"] == 1 for r in vmss)
    assert all(r.properties["tag:azbench-cluster"] == "t" for r in plan.resources
               if not r.kind.startswith("Microsoft.Authorization/"))  # role assignment, definition: not taggable


def test_unknown_price_is_unknown_not_zero():
    plan = plan_azure(spec(sku="mi300x", nodes=64))  # the catalog has no list price for it
    assert plan.cost_per_hour_usd is None
    assert any("no list price" in w for w in plan.warnings)


def test_nsg_source_and_vnet():
    plan = plan_azure(spec(sku="h100", nodes=2, azure={"ssh_ingress_cidr": "203.0.113.7"}))
    nsg = next(r for r in plan.resources if r.kind.endswith("networkSecurityGroups"))
    assert nsg.properties["source"] == "203.0.113.7/32"
    assert any("172.16.0.0/16" in c for c in plan.preflight)
    assert any("standardNDSH100v5Family has 192 free vCPUs" in c for c in plan.preflight)


def test_raised_scale_set_cap_is_warned():
    plan = plan_azure(spec(sku="h100", nodes=250, azure={"max_vms_per_scale_set": 300}))
    assert [s.vms for s in plan.scale_sets] == [250]
    assert any("only valid if Azure support raised" in w for w in plan.warnings)


def test_another_head_size_is_not_counted_as_the_default_one():
    """The head's 8 vCPUs and $0.384/h are Standard_D8s_v5's; another head size is read at up."""
    plan = plan_azure(spec(sku="h100", nodes=2))
    assert any("total regional vCPU quota has 200 free vCPUs (GPU nodes + head)" in c for c in plan.preflight)
    assert not any("priced as" in w for w in plan.warnings)
    plan = plan_azure(spec(sku="h100", nodes=2, azure={"head_size": "Standard_D32s_v5"}))
    assert any("total regional vCPU quota has 192 free vCPUs (GPU nodes) plus the head's vCPUs "
               "(Standard_D32s_v5: its count is read at up)" in c for c in plan.preflight)
    assert not any("200 free" in c for c in plan.preflight)
    # Issue 39: a head size the catalog prices is priced as itself; one it does not is said, not guessed.
    assert any("the head (Standard_D32s_v5) is not priced (not in the catalog): the cost per hour counts the "
               "nodes only" in w for w in plan.warnings)
    assert plan.cost_per_hour_usd == round(2 * 98.32, 2)
    plan = plan_azure(spec(sku="h100", nodes=2, azure={"head_size": "Standard_D16s_v5"}))
    assert plan.cost_per_hour_usd == round(2 * 98.32 + 0.768, 2) and not any("head" in w for w in plan.warnings)
    plan = plan_azure(spec(sku="h100", nodes=2, azure={"head_size": "Standard_D32s_v5", "priority": "spot"}))
    assert any("quota has the head's vCPUs (Standard_D32s_v5" in c for c in plan.preflight)
