"""The typed Azure edge (issue 29, point 4): SDK objects become records in one module per backend.

The records are built here from the SDK's own models, made from REST bodies in the shapes the
ARM and Azure ML APIs document (the fake ARM sends the same), so a reader that drifts from the
SDK fails here rather than deep inside `up`. The edge rules are checked on the syntax tree, each
checker with a planted violation: only the records modules read SDK objects (no getattr/hasattr
anywhere else in the Azure backends), azureml never imports azure/, and azure_shared imports
neither backend.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orchestrator.providers.azure import records as R
from orchestrator.providers.azure import resources as ar
from orchestrator.providers.azure.resources import SpotTerms
from orchestrator.providers.azure_shared import records as shared
from orchestrator.providers.azure_shared.capacity import quota_problems, sku_problems
from orchestrator.providers.azureml import records as aml

PROVIDERS = Path(__file__).resolve().parents[1] / "orchestrator" / "providers"
AZURE_FOLDERS = ("azure", "azureml", "azure_shared")


# -- azure: compute, network, resources --------------------------------------------------------

def test_a_spot_scale_set_reads_its_shape_spot_terms_image_and_admin():
    from azure.mgmt.compute.models import VirtualMachineScaleSet
    vmss = VirtualMachineScaleSet({
        "name": "c-gpu-00", "location": "eastus", "tags": {"azbench-cluster": "c"},
        "sku": {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": 2},
        "properties": {"provisioningState": "Succeeded", "virtualMachineProfile": {
            "priority": "Spot", "evictionPolicy": "Delete", "billingProfile": {"maxPrice": 12.5},
            "osProfile": {"adminUsername": "bench", "computerNamePrefix": "c-gpu-00-"},
            "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc",
                                                  "sku": "2204", "version": "latest"}}}}})
    s = R.scale_set(vmss)
    assert (s.name, s.location, s.state, s.sku_name, s.sku_tier, s.capacity) == (
        "c-gpu-00", "eastus", "Succeeded", "Standard_ND96isr_H100_v5", "Standard", 2)
    assert s.spot == SpotTerms("delete", 12.5) and s.admin_user == "bench"
    assert s.image == "microsoft-dsvm:ubuntu-hpc:2204:latest" and s.tags == {"azbench-cluster": "c"}


def test_a_regular_scale_set_without_profile_details_reads_as_regular():
    from azure.mgmt.compute.models import VirtualMachineScaleSet
    s = R.scale_set(VirtualMachineScaleSet({"name": "s", "location": "eastus", "sku": {"name": "x"}}))
    assert s.spot is None and s.image is None and s.admin_user is None and s.capacity == 0 and s.state is None


def test_a_scale_set_vm_reads_its_computer_name_and_power_state():
    from azure.mgmt.compute.models import VirtualMachineScaleSetVM
    vm = R.scale_set_vm(VirtualMachineScaleSetVM({
        "name": "c-gpu-00_3", "instanceId": "3", "location": "eastus", "properties": {
            "provisioningState": "Succeeded", "osProfile": {"computerName": "c-gpu-00-3"},
            "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded"},
                                          {"code": "PowerState/deallocated"}]}}}))
    assert (vm.instance_id, vm.host, vm.state, vm.power, vm.deallocated) == (
        "3", "c-gpu-00-3", "Succeeded", "deallocated", True)
    bare = R.scale_set_vm(VirtualMachineScaleSetVM({"name": "c-gpu-00_4", "instanceId": "4", "location": "x"}))
    assert (bare.host, bare.power, bare.deallocated) == ("c-gpu-00_4", "unknown", False)


def test_network_resources_read_their_address_and_ssh_source():
    from azure.mgmt.network.models import NetworkInterface, NetworkSecurityGroup, PublicIPAddress
    pip = R.resource(ar.PIP, PublicIPAddress({"location": "eastus", "properties": {
        "provisioningState": "Succeeded", "ipAddress": "20.1.2.3"}}))
    nic = R.resource(ar.NIC, NetworkInterface({"location": "eastus", "properties": {
        "ipConfigurations": [{"name": "ipconfig", "properties": {"privateIPAddress": "10.0.0.4"}}]}}))
    nsg = R.resource(ar.NSG, NetworkSecurityGroup({"location": "eastus", "tags": {"a": "b"}, "properties": {
        "securityRules": [{"name": "ssh", "properties": {"destinationPortRange": "22", "sourceAddressPrefix":
                                                         "203.0.113.7/32", "access": "Allow", "priority": 100,
                                                         "direction": "Inbound", "protocol": "Tcp"}}]}}))
    assert (pip.public_ip, pip.state) == ("20.1.2.3", "Succeeded")
    assert (nic.private_ip, nic.state) == ("10.0.0.4", "Succeeded")  # no state reported: Succeeded
    assert (nsg.ssh_source, nsg.tags) == ("203.0.113.7/32", {"a": "b"})


def test_the_head_vm_reads_its_size_and_identity():
    from azure.mgmt.compute.models import VirtualMachine
    vm = R.resource(ar.VM, VirtualMachine({"location": "eastus", "identity": {"principalId": "p-1"},
                                           "properties": {"hardwareProfile": {"vmSize": "Standard_D8s_v5"},
                                                          "provisioningState": "Creating"}}))
    assert (vm.vm_size, vm.principal_id, vm.state) == ("Standard_D8s_v5", "p-1", "Creating")


def test_groups_and_tagged_resources():
    from azure.mgmt.resource.resources.models import GenericResourceExpanded, ResourceGroup
    [g] = R.groups([ResourceGroup({"name": "azbench-c", "location": "eastus", "tags": {"k": "v"}})])
    [t] = R.tagged([GenericResourceExpanded({"id": "/subscriptions/s/x", "name": "x", "type": "T"})])
    assert (g.name, g.location, dict(g.tags)) == ("azbench-c", "eastus", {"k": "v"})
    assert (t.id, t.name, t.type, dict(t.tags)) == ("/subscriptions/s/x", "x", "T", {})


def test_an_image_without_architecture_or_generation_reads_as_x64_v1():
    from azure.mgmt.compute.models import VirtualMachineImage
    old = R.vm_image(VirtualMachineImage({"name": "1.0", "location": "eastus"}))
    arm = R.vm_image(VirtualMachineImage({"name": "1.0", "location": "eastus", "properties": {
        "architecture": "Arm64", "hyperVGeneration": "V2"}}))
    assert (old.architecture, old.generation) == ("x64", "V1")
    assert (arm.architecture, arm.generation) == ("Arm64", "V2")


# -- shared: resource SKUs and usages ----------------------------------------------------------

def test_a_zone_restricted_size_is_offered_but_refused_in_that_zone():
    from azure.mgmt.compute.models import ResourceSku
    row = shared.sku_row(ResourceSku({
        "resourceType": "virtualMachines", "name": "Standard_ND96isr_H100_v5", "family": "fam",
        "locations": ["EastUS"], "locationInfo": [{"location": "EastUS", "zones": ["1", "2"]}],
        "capabilities": [{"name": "vCPUs", "value": "96"}],
        "restrictions": [{"type": "Zone", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription",
                          "restrictionInfo": {"locations": ["eastus"], "zones": ["2"]}}]}))
    assert row.locations == ("eastus",) and row.capability("vCPUs", 0) == 96 and row.capability("GPUs", 8) == 8
    assert sku_problems(row, row.name, "eastus", ["1"]) == []
    [problem] = sku_problems(row, row.name, "eastus", ["2"])
    assert "restricted in zone(s) 2 of eastus" in problem and "usable zones: 1" in problem


def test_a_compute_usage_row_and_the_quota_line():
    from azure.mgmt.compute.models import Usage
    row = shared.compute_usage(Usage({"unit": "Count", "currentValue": 96, "limit": 192,
                                      "name": {"value": "standardNDSH100v5Family"}}))
    assert (row.name, row.current, row.limit, row.free) == ("standardNDSH100v5Family", 96, 192, 96)
    assert quota_problems({row.name: row}, {row.name: 192}, "eastus") == [
        "quota standardNDSH100v5Family in eastus: need 192 vCPUs, 96 free (limit 192, used 96)"]


# -- azureml: computes, jobs, nodes, usages ----------------------------------------------------

def test_an_aml_compute_reads_size_counts_and_creation_time():
    from azure.ai.ml.entities import AmlCompute
    entity = AmlCompute(name="bench", size="Standard_ND96isr_H100_v5", min_instances=1, max_instances=4,
                        location="eastus", tags={"azbench-cluster": "bench"},
                        provisioning_state="Succeeded", created_on="2025-01-02T03:04:05Z")
    info = aml.compute(entity)
    assert (info.name, info.size, info.min_instances, info.max_instances, info.provisioning_state) == (
        "bench", "Standard_ND96isr_H100_v5", 1, 4, "Succeeded")
    assert info.created is not None and info.created.isoformat() == "2025-01-02T03:04:05+00:00"


def test_compute_nodes_and_usages_read_the_rest_keys_their_entities_keep():
    """azure-ai-ml copies the REST body into these entities' __dict__ (camelCase keys), leaving
    the typed attributes None (records.py's module docstring)."""
    from azure.ai.ml._restclient.arm_ml_service.models import AmlComputeNodeInformation
    from azure.ai.ml._restclient.arm_ml_service.models import Usage as RestUsage
    from azure.ai.ml.entities import AmlComputeNodeInfo, Usage
    node = AmlComputeNodeInfo._from_rest_object(AmlComputeNodeInformation({"nodeId": "tvm-1", "nodeState": "Idle"}))
    assert aml.node(node) == aml.ComputeNode("tvm-1", "idle")
    usage = Usage._from_rest_object(RestUsage({"unit": "Count", "currentValue": 8, "limit": 96, "name": {
        "value": "Standard NDSH100v5 Family Cluster Dedicated vCPUs"}}))
    assert aml.quota_row(usage) == shared.QuotaRow("Standard NDSH100v5 Family Cluster Dedicated vCPUs", 8, 96)


# -- the edge rules, on the syntax tree ----------------------------------------------------------

def sdk_probes(tree: ast.AST) -> list[int]:
    """Lines calling getattr or hasattr (reading an object's attributes by name)."""
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id in ("getattr", "hasattr")})


def imported(tree: ast.AST) -> set[str]:
    """Every module an absolute import names (inside functions and TYPE_CHECKING included)."""
    found: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            found |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module:
            found |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
    return found


def reaches(tree: ast.AST, package: str) -> bool:
    return any(m == package or m.startswith(package + ".") for m in imported(tree))


def _modules(folder: str) -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted((PROVIDERS / folder).glob("*.py"))}


def test_only_the_records_modules_read_sdk_objects_by_name():
    found = {f"{folder}/{name}": lines for folder in AZURE_FOLDERS for name, tree in _modules(folder).items()
             if name != "records.py" and (lines := sdk_probes(tree))}
    assert not found, f"getattr/hasattr outside the records modules: {found}"


def test_azureml_never_imports_azure_and_the_shared_package_neither_backend():
    aml_to_azure = [n for n, t in _modules("azureml").items() if reaches(t, "orchestrator.providers.azure")]
    shared_to_backends = [n for n, t in _modules("azure_shared").items()
                          if reaches(t, "orchestrator.providers.azure") or reaches(t, "orchestrator.providers.azureml")]
    assert not aml_to_azure and not shared_to_backends, (aml_to_azure, shared_to_backends)


@pytest.mark.parametrize("code, probes, reaches_azure", [
    ("x = getattr(vm, 'os_profile', None)\n", [1], False),
    ("if hasattr(vm, 'zones'):\n    pass\n", [1], False),
    ("def f():\n    from orchestrator.providers.azure.errors import arm_call\n", [], True),
    ("from orchestrator.providers import azure\n", [], True),
    ("from orchestrator.providers.azure_shared.errors import arm_call\n", [], False),
])
def test_the_edge_checkers_see_what_they_forbid(code, probes, reaches_azure):
    tree = ast.parse(code)
    assert sdk_probes(tree) == probes
    assert reaches(tree, "orchestrator.providers.azure") is reaches_azure
