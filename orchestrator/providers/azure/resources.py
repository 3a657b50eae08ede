"""The Azure resources of one cluster: names from the plan, tags, and the SDK request bodies.

Pure builders (no network): `names_from_plan` reads exactly the resources `--dry-run` printed, so
`up` cannot create anything the plan did not show; the `*_body` functions build the azure-mgmt
models (imported lazily) for the resource group, NSG (SSH from one CIDR only), VNet + subnet
(outside 172.16.0.0/16), public IP, head NIC (static private IP), head VM and the GPU scale sets
(Uniform, single placement group, one fault domain, no overprovisioning, Manual upgrades,
accelerated networking, SSH keys only). Every OS disk, NIC and public IP carries deleteOption
Delete, so deleting a VM (or an instance, or the whole set) leaves nothing billing behind.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from orchestrator.errors import PreflightError, ProvisionError
from orchestrator.models import Plan, PlannedResource, ScaleSetPlan
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_CREATED, TAG_EXPIRES, TAG_SPOT_RESTORE

if TYPE_CHECKING:
    from azure.mgmt.compute.models import BillingProfile, LinuxConfiguration, VirtualMachine, VirtualMachineScaleSet
    from azure.mgmt.network.models import NetworkInterface, NetworkSecurityGroup, PublicIPAddress, VirtualNetwork

RG = "Microsoft.Resources/resourceGroups"
VNET = "Microsoft.Network/virtualNetworks"
NSG = "Microsoft.Network/networkSecurityGroups"
PIP = "Microsoft.Network/publicIPAddresses"
NIC = "Microsoft.Network/networkInterfaces"
VM = "Microsoft.Compute/virtualMachines"
VMSS = "Microsoft.Compute/virtualMachineScaleSets"
KINDS = (RG, NSG, PIP, VNET, NIC, VM, VMSS)  # creation order
ROLE = "Microsoft.Authorization/roleAssignments"  # the head identity's, made after the head (azure_expiry)
ROLE_DEF = "Microsoft.Authorization/roleDefinitions"  # its custom role, made after the group (expiry.py)
SUBNET = "nodes"
STAMP = "%Y-%m-%dT%H:%M:%SZ"
IMAGE_PARTS = ("publisher", "offer", "sku", "version")  # a URN's, in order
# What happens to a VM's OS disk, NICs and public IP when the VM is deleted: "Delete". The
# default is "Detach": they outlive the VM and keep billing (OSDisk.deleteOption: "The default
# value is set to Detach", api-version 2021-03-01+; NetworkInterfaceReference.properties and
# PublicIPAddress.properties deleteOption likewise). https://learn.microsoft.com/en-us/azure/
# virtual-machines/delete and https://learn.microsoft.com/en-us/rest/api/compute/virtual-machines/create-or-update
DELETE = "Delete"
# Ubuntu LTS for the head, matching the node image's release so slurmctld and slurmd agree.
HEAD_IMAGES = {"2204": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
               "2404": "Canonical:ubuntu-24_04-lts:server:latest"}


@dataclass(frozen=True)
class ClusterNames:
    rg: str
    nsg: str
    pip: str
    vnet: str
    nic: str
    head: str
    sets: tuple[ScaleSetPlan, ...]
    role: str | None = None  # the expiry role assignment; None with azure.self_expiry off
    custom_role: bool = False  # the assignment's role is the custom one (else built-in Contributor)


def head_nic_resource(plan: Plan) -> PlannedResource:
    """The head's NIC, which plan_azure leaves implicit; AzureProvider.plan adds it."""
    tags = {k: v for k, v in next(r for r in plan.resources if r.kind == VM).properties.items()
            if k.startswith("tag:")}
    return PlannedResource(kind=NIC, name=f"{plan.cluster}-head-nic",
                           properties={"accelerated_networking": True, "private_ip": "static", **tags})


def names_from_plan(plan: Plan) -> ClusterNames:
    by_kind: dict[str, list[str]] = {}
    for res in plan.resources:
        if res.kind not in KINDS + (ROLE, ROLE_DEF):
            raise ProvisionError(f"plan has a resource azbench cannot create: {res.kind} {res.name}")
        by_kind.setdefault(res.kind, []).append(res.name)
    for kind in KINDS[:-1]:
        if len(by_kind.get(kind, [])) != 1:
            raise ProvisionError(f"plan must hold exactly one {kind}, has {by_kind.get(kind, [])}")
    sets = tuple(s for s in plan.scale_sets)
    if sorted(by_kind.get(VMSS, [])) != sorted(s.name for s in sets):
        raise ProvisionError("plan's scale-set resources and scale_sets disagree")
    one = {k: v[0] for k, v in by_kind.items()}
    return ClusterNames(rg=one[RG], nsg=one[NSG], pip=one[PIP], vnet=one[VNET], nic=one[NIC],
                        head=one[VM], sets=sets, role=one.get(ROLE), custom_role=ROLE_DEF in one)


def cluster_tags(cluster: str, owner: dict[str, str], expires: datetime, extra: dict[str, str], *,
                 created: datetime | None = None, spot_restore_s: int | None = None) -> dict[str, str]:
    """`owner`: the owner tags (owner.Owner.tags())."""
    tags = {**extra, TAG_CLUSTER: cluster, **owner, TAG_EXPIRES: expires.strftime(STAMP)}
    if created is not None:
        tags[TAG_CREATED] = created.strftime(STAMP)
    if spot_restore_s is not None:
        tags[TAG_SPOT_RESTORE] = str(spot_restore_s)
    return tags


def subnet_layout(vnet_cidr: str, vms: int) -> tuple[str, str]:
    """(subnet CIDR, head's static private IP): the subnet spans the VNet; Azure keeps .0-.3."""
    net = ipaddress.ip_network(vnet_cidr)
    if net.num_addresses < vms + 6:
        raise PreflightError(f"VNet {vnet_cidr} holds {net.num_addresses - 5:,} VMs, need {vms + 1:,}",
                             hint="set azure.vnet_cidr to a larger range, e.g. a /16")
    return str(net), str(net.network_address + 4)


def rid(sub: str, rg: str, kind: str = "", name: str = "") -> str:
    base = f"/subscriptions/{sub}/resourceGroups/{rg}"
    return f"{base}/providers/{kind}/{name}" if kind else base


def image_reference(image: str) -> dict[str, str]:
    """A URN 'publisher:offer:sku:version' or a gallery/managed image id."""
    if image.startswith("/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) != 4:
        raise PreflightError(f"image '{image}' is neither publisher:offer:sku:version nor a resource id")
    return dict(zip(IMAGE_PARTS, parts))


def image_text(ref: Mapping[str, str | None]) -> str | None:
    """An image reference as azbench writes it (image_reference's inverse): the resource id,
    or publisher:offer:sku:version; None when it has neither."""
    if ref.get("id"):
        return str(ref["id"])
    parts = [ref.get(k) for k in IMAGE_PARTS]
    return ":".join(str(p) for p in parts) if all(parts) else None


def head_image(node_image: dict[str, str]) -> dict[str, str]:
    release = "2404" if node_image.get("sku", "").startswith("24") else "2204"
    return image_reference(HEAD_IMAGES[release])


# The builders below pass each model's `properties=` as the typed (TypeSpec-generated) signatures
# declare; the SDKs' flattened keywords (SecurityRule(priority=...)) only work through an untyped
# back-compat shim. Either way ARM receives the same JSON.
def nsg_body(location: str, tags: dict[str, str], ingress_cidr: str) -> NetworkSecurityGroup:
    from azure.mgmt.network import models as n
    rule = n.SecurityRule(name="ssh-from-caller", properties=n.SecurityRulePropertiesFormat(
        priority=100, direction="Inbound", access="Allow", protocol="Tcp",
        source_address_prefix=ingress_cidr, source_port_range="*",
        destination_address_prefix="*", destination_port_range="22"))
    return n.NetworkSecurityGroup(location=location, tags=tags,
                                  properties=n.NetworkSecurityGroupPropertiesFormat(security_rules=[rule]))


def vnet_body(location: str, tags: dict[str, str], cidr: str, subnet_cidr: str, nsg_id: str) -> VirtualNetwork:
    from azure.mgmt.network import models as n
    subnet = n.Subnet(name=SUBNET, properties=n.SubnetPropertiesFormat(
        address_prefix=subnet_cidr, network_security_group=n.NetworkSecurityGroup(id=nsg_id)))
    return n.VirtualNetwork(location=location, tags=tags, properties=n.VirtualNetworkPropertiesFormat(
        address_space=n.AddressSpace(address_prefixes=[cidr]), subnets=[subnet]))


def pip_body(location: str, tags: dict[str, str]) -> PublicIPAddress:
    from azure.mgmt.network import models as n
    return n.PublicIPAddress(location=location, tags=tags, sku=n.PublicIPAddressSku(name="Standard"),
                             properties=n.PublicIPAddressPropertiesFormat(public_ip_allocation_method="Static",
                                                                          public_ip_address_version="IPv4",
                                                                          delete_option=DELETE))


def nic_body(location: str, tags: dict[str, str], subnet_id: str, pip_id: str,
             private_ip: str) -> NetworkInterface:
    from azure.mgmt.network import models as n
    ipc = n.NetworkInterfaceIPConfiguration(
        name="ipconfig", properties=n.NetworkInterfaceIPConfigurationPropertiesFormat(
            primary=True, subnet=n.Subnet(id=subnet_id), private_ip_allocation_method="Static",
            private_ip_address=private_ip, public_ip_address=n.PublicIPAddress(id=pip_id)))
    return n.NetworkInterface(location=location, tags=tags, properties=n.NetworkInterfacePropertiesFormat(
        enable_accelerated_networking=True, ip_configurations=[ipc]))


def head_vm_body(location: str, tags: dict[str, str], *, size: str, image: dict[str, str], admin: str,
                 pubkey: str, custom_data: str, nic_id: str, computer_name: str,
                 identity: bool = False) -> VirtualMachine:
    """`identity`: a system-assigned managed identity, for the expiry agent (azure_expiry)."""
    from azure.mgmt.compute import models as m
    nic = m.NetworkInterfaceReference(id=nic_id, properties=m.NetworkInterfaceReferenceProperties(
        primary=True, delete_option=DELETE))
    return m.VirtualMachine(
        location=location, tags=tags,
        identity=m.VirtualMachineIdentity(type="SystemAssigned") if identity else None,
        properties=m.VirtualMachineProperties(
            hardware_profile=m.HardwareProfile(vm_size=size),
            storage_profile=m.StorageProfile(
                image_reference=m.ImageReference(**image),
                os_disk=m.OSDisk(create_option="FromImage", disk_size_gb=256, caching="ReadWrite",
                                 delete_option=DELETE,
                                 managed_disk=m.ManagedDiskParameters(storage_account_type="Premium_LRS"))),
            os_profile=m.OSProfile(computer_name=computer_name, admin_username=admin, custom_data=custom_data,
                                   linux_configuration=_linux(admin, pubkey)),
            network_profile=m.NetworkProfile(network_interfaces=[nic])))


@dataclass(frozen=True)
class SpotTerms:
    """Spot priority for a scale set's VMs: eviction policy and max price (-1 = up to PAYG)."""

    eviction_policy: str = "deallocate"
    max_price: float = -1.0


class SpotFields(TypedDict, total=False):
    """The VM-profile fields of a spot scale set; none for regular priority."""

    priority: str
    eviction_policy: str
    billing_profile: BillingProfile


def spot_profile(spot: SpotTerms | None) -> SpotFields:
    """The VM-profile fields of a spot scale set (priority, evictionPolicy, billingProfile)."""
    if spot is None:
        return {}
    from azure.mgmt.compute.models import BillingProfile
    return {"priority": "Spot", "eviction_policy": spot.eviction_policy.capitalize(),
            "billing_profile": BillingProfile(max_price=spot.max_price)}


def vmss_body(location: str, tags: dict[str, str], *, sku_name: str, scale_set: ScaleSetPlan,
              zone: str | None, image: dict[str, str], admin: str, pubkey: str, custom_data: str,
              subnet_id: str, prefix: str, spot: SpotTerms | None = None) -> VirtualMachineScaleSet:
    from azure.mgmt.compute import models as m
    ipc = m.VirtualMachineScaleSetIPConfiguration(
        name="ipconfig", properties=m.VirtualMachineScaleSetIPConfigurationProperties(
            primary=True, subnet=m.ApiEntityReference(id=subnet_id)))
    nic = m.VirtualMachineScaleSetNetworkConfiguration(
        name="ib-node", properties=m.VirtualMachineScaleSetNetworkConfigurationProperties(
            primary=True, enable_accelerated_networking=True, ip_configurations=[ipc], delete_option=DELETE))
    profile = m.VirtualMachineScaleSetVMProfile(
        os_profile=m.VirtualMachineScaleSetOSProfile(computer_name_prefix=prefix, admin_username=admin,
                                                     custom_data=custom_data,
                                                     linux_configuration=_linux(admin, pubkey)),
        storage_profile=m.VirtualMachineScaleSetStorageProfile(
            image_reference=m.ImageReference(**image),
            os_disk=m.VirtualMachineScaleSetOSDisk(
                create_option="FromImage", caching="ReadWrite", delete_option=DELETE,
                managed_disk=m.VirtualMachineScaleSetManagedDiskParameters(storage_account_type="Premium_LRS"))),
        network_profile=m.VirtualMachineScaleSetNetworkProfile(network_interface_configurations=[nic]),
        **spot_profile(spot))
    return m.VirtualMachineScaleSet(
        location=location, tags=tags, zones=[zone] if zone else None,
        sku=m.Sku(name=sku_name, tier="Standard", capacity=scale_set.vms),
        properties=m.VirtualMachineScaleSetProperties(
            orchestration_mode="Uniform", single_placement_group=True, platform_fault_domain_count=1,
            overprovision=False, upgrade_policy=m.UpgradePolicy(mode="Manual"), virtual_machine_profile=profile))


def _linux(admin: str, pubkey: str) -> LinuxConfiguration:
    from azure.mgmt.compute import models as m
    key = m.SshPublicKey(path=f"/home/{admin}/.ssh/authorized_keys", key_data=pubkey)
    return m.LinuxConfiguration(disable_password_authentication=True,
                                ssh=m.SshConfiguration(public_keys=[key]))
