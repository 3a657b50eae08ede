"""The azure backend's SDK objects as typed records: the one module that reads their attributes.

What azure-mgmt-compute, -network, -resource and -authorization return (scale sets, their VMs
with power states, the head VM, NICs, public IPs, NSGs, resource groups, tagged resources, role
assignments, images) becomes a frozen dataclass holding only what azbench reads; providers and
their helpers never touch an SDK model. The models are read through their typed `properties`
(the TypeSpec-generated ones flatten them only through an untyped __getattr__). Nearly every
field is Optional in the SDK, because ARM omits what does not apply or is not known yet (a VM's
computer name before it reports one, a public IP's address before allocation, a size without
restrictions), so each reader says what an absent field means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.providers.azure.resources import NIC, NSG, PIP, RG, VM, VMSS, VNET, SpotTerms, image_text
from orchestrator.providers.azure_shared.records import text

if TYPE_CHECKING:
    from azure.mgmt.authorization.v2022_04_01.models import RoleAssignment, RoleDefinition
    from azure.mgmt.compute.models import (
        VirtualMachine,
        VirtualMachineImage,
        VirtualMachineImageResource,
        VirtualMachineScaleSet,
        VirtualMachineScaleSetVM,
        VirtualMachineScaleSetVMProfile,
    )
    from azure.mgmt.network.models import (
        NetworkInterface,
        NetworkSecurityGroup,
        PublicIPAddress,
        VirtualNetwork,
    )
    from azure.mgmt.resource.resources.models import GenericResource, GenericResourceExpanded, ResourceGroup

SSH_PORT = "22"


@dataclass(frozen=True)
class ArmResource:
    """One resource `up` creates or adopts, as ARM has it. `state` is its provisioning state
    ("Succeeded" for a resource that reports none). The rest is per kind, None elsewhere."""

    state: str
    location: str | None
    tags: Mapping[str, str]
    public_ip: str | None = None  # a public IP's address (none before allocation)
    private_ip: str | None = None  # a NIC's first IP configuration's private address
    ssh_source: str | None = None  # an NSG: the source prefix of its (last) rule for port 22
    vm_size: str | None = None  # a VM's size
    principal_id: str | None = None  # a VM's system-assigned identity


@dataclass(frozen=True)
class ScaleSet:
    """A GPU scale set: its shape (size, capacity, spot terms, image, admin user) and state."""

    name: str
    location: str | None
    tags: Mapping[str, str]
    state: str | None  # provisioning state
    sku_name: str
    sku_tier: str | None
    capacity: int
    spot: SpotTerms | None = None  # None: regular priority
    image: str | None = None  # resources.image_text of the VM profile's image reference
    admin_user: str | None = None
    zones: tuple[str, ...] = ()  # the availability zones it was placed in (none: regional)


@dataclass(frozen=True)
class ScaleSetVM:
    """One instance of a scale set, from its VM list. `power_states` are the instance view's
    PowerState/<x> codes as lower-case x ("running", "deallocated"): empty unless the list was
    asked for the instance view (`expand="instanceView"`)."""

    instance_id: str
    host: str  # the computer name, else (before the VM reports one) the VM's name
    state: str | None  # provisioning state
    power_states: tuple[str, ...] = ()

    @property
    def power(self) -> str:
        """The instance's power state, "unknown" when the list carried none."""
        return self.power_states[0] if self.power_states else "unknown"

    @property
    def deallocated(self) -> bool:
        return "deallocated" in self.power_states


@dataclass(frozen=True)
class Group:
    """A resource group found by tag; `state` its provisioningState ("Deleting" while a delete
    runs; "" when ARM sent none)."""

    name: str
    location: str | None
    tags: Mapping[str, str] = field(default_factory=dict)
    state: str = ""


@dataclass(frozen=True)
class Tagged:
    """A resource as ARM's generic resource list gives it (by tag, or a group's contents):
    `state` its provisioningState when the list was asked to expand it ("" otherwise); `sku`
    and `capacity` a scale set's; `principal_id` a VM's system-assigned identity."""

    id: str
    name: str
    type: str
    tags: Mapping[str, str] = field(default_factory=dict)
    state: str = ""
    sku: str = ""
    capacity: int | None = None
    principal_id: str | None = None
    location: str | None = None

    @property
    def group(self) -> str:
        """The resource group in its id ("" for none)."""
        parts = self.id.split("/")
        low = [p.lower() for p in parts]
        return parts[low.index("resourcegroups") + 1] if "resourcegroups" in low else ""


@dataclass(frozen=True)
class Assignment:
    """A role assignment: the principal it grants its role to (ARM always names one; the SDK
    types every field Optional)."""

    principal_id: str | None
    role_definition_id: str = ""


@dataclass(frozen=True)
class RoleDef:
    """A custom role definition: its actions (all its permission blocks'), assignable scopes,
    name, id (a GUID) and who created it (`createdBy`, the creator's object id, stamped by ARM:
    None where ARM sent none)."""

    actions: tuple[str, ...]
    assignable_scopes: tuple[str, ...]
    role_name: str = ""
    guid: str = ""
    created_by: str | None = None


@dataclass(frozen=True)
class VmImage:
    """A platform image version: CPU architecture and Hyper-V generation. ARM leaves out the
    defaults (x64, V1) for older images, so an absent field reads as those."""

    architecture: str
    generation: str


def resource(kind: str, model: object) -> ArmResource:
    """The record of a resource of `kind` (resources.RG, NSG, PIP, VNET, NIC, VM, VMSS) as its
    operation group's `get` or `create_or_update` returned it."""
    return _READERS[kind](model)


def scale_set(vmss: VirtualMachineScaleSet) -> ScaleSet:
    props = vmss.properties
    profile = props.virtual_machine_profile if props else None
    os_profile = profile.os_profile if profile else None
    return ScaleSet(name=vmss.name or "", location=vmss.location, tags=dict(vmss.tags or {}),
                    state=props.provisioning_state if props else None,
                    sku_name=(vmss.sku.name if vmss.sku else None) or "",
                    sku_tier=vmss.sku.tier if vmss.sku else None,
                    capacity=int((vmss.sku.capacity if vmss.sku else None) or 0),
                    spot=_spot(profile) if profile else None, image=_image(profile) if profile else None,
                    admin_user=os_profile.admin_username if os_profile else None, zones=tuple(vmss.zones or ()))


def scale_set_vm(vm: VirtualMachineScaleSetVM) -> ScaleSetVM:
    props = vm.properties
    computer = props.os_profile.computer_name if props and props.os_profile else None
    statuses = (props.instance_view.statuses if props and props.instance_view else None) or []
    codes = [(s.code or "").lower() for s in statuses]
    return ScaleSetVM(instance_id=str(vm.instance_id), host=computer or vm.name or "",
                      state=props.provisioning_state if props else None,
                      power_states=tuple(c.split("/", 1)[1] for c in codes if c.startswith("powerstate/")))


def groups(rows: Iterable[ResourceGroup]) -> list[Group]:
    return [Group(name=g.name or "", location=g.location, tags=dict(g.tags or {}),
                  state=(g.properties.provisioning_state or "") if g.properties else "") for g in rows]


def tagged(rows: Iterable[GenericResourceExpanded]) -> list[Tagged]:
    """Generic resources: ARM leaves out what a type does not have (a sku, an identity) and the
    provisioning state unless `$expand` asked for it."""
    return [Tagged(id=r.id or "", name=r.name or "", type=r.type or "", tags=dict(r.tags or {}),
                   state=r.provisioning_state or "", sku=(r.sku.name or "") if r.sku else "",
                   capacity=r.sku.capacity if r.sku else None,
                   principal_id=r.identity.principal_id if r.identity else None, location=r.location)
            for r in rows]


def assignment(found: RoleAssignment) -> Assignment:
    return Assignment(principal_id=found.principal_id, role_definition_id=found.role_definition_id or "")


def role_definition(found: RoleDefinition) -> RoleDef:
    """ARM leaves out empty lists: none means none."""
    return RoleDef(actions=tuple(a for p in found.permissions or [] for a in p.actions or []),
                   assignable_scopes=tuple(found.assignable_scopes or []), role_name=found.role_name or "",
                   guid=found.name or "", created_by=found.created_by or None)


def image_names(rows: Iterable[VirtualMachineImageResource]) -> list[str]:
    """The names of what virtual_machine_images.list / list_skus return (versions, SKUs)."""
    return [r.name for r in rows]


def vm_image(image: VirtualMachineImage) -> VmImage:
    props = image.properties
    return VmImage(architecture=text(props.architecture if props else None) or "x64",
                   generation=text(props.hyper_v_generation if props else None) or "V1")


def gallery_architecture(found: GenericResource) -> str:
    """A gallery image definition's architecture, x64 when absent (GalleryImageProperties,
    https://learn.microsoft.com/en-us/rest/api/compute/gallery-images/get). get_by_id returns
    the generic resource, whose `properties` is the untyped JSON object."""
    props = found.properties  # Any in the SDK: the resource type's own JSON
    return str(props.get("architecture") or "x64") if isinstance(props, dict) else "x64"


def _spot(profile: VirtualMachineScaleSetVMProfile) -> SpotTerms | None:
    """A VM profile's spot terms, or None for regular priority. ARM omits evictionPolicy and
    billingProfile where azbench did not set them: deallocate, and -1 (up to pay-as-you-go)."""
    if text(profile.priority).lower() != "spot":
        return None
    billing = profile.billing_profile
    max_price = billing.max_price if billing else None
    return SpotTerms(eviction_policy=(text(profile.eviction_policy) or "deallocate").lower(),
                     max_price=float(max_price) if max_price is not None else -1.0)


def _image(profile: VirtualMachineScaleSetVMProfile) -> str | None:
    ref = profile.storage_profile.image_reference if profile.storage_profile else None
    if ref is None:
        return None
    return image_text({"id": ref.id, "publisher": ref.publisher, "offer": ref.offer, "sku": ref.sku,
                       "version": ref.version})


def _group(model: ResourceGroup) -> ArmResource:
    return ArmResource(state=_state(model.properties.provisioning_state if model.properties else None),
                       location=model.location, tags=dict(model.tags or {}))


def _network(model: VirtualNetwork) -> ArmResource:
    props = model.properties
    return ArmResource(state=_state(props.provisioning_state if props else None), location=model.location,
                       tags=dict(model.tags or {}))


def _public_ip(model: PublicIPAddress) -> ArmResource:
    props = model.properties
    return ArmResource(state=_state(props.provisioning_state if props else None), location=model.location,
                       tags=dict(model.tags or {}), public_ip=props.ip_address if props else None)


def _nic(model: NetworkInterface) -> ArmResource:
    props = model.properties
    configs = (props.ip_configurations if props else None) or []
    first = configs[0].properties if configs else None
    return ArmResource(state=_state(props.provisioning_state if props else None), location=model.location,
                       tags=dict(model.tags or {}), private_ip=first.private_ip_address if first else None)


def _nsg(model: NetworkSecurityGroup) -> ArmResource:
    props = model.properties
    source = None
    for rule in (props.security_rules if props else None) or []:
        if rule.properties is not None and rule.properties.destination_port_range == SSH_PORT:
            source = rule.properties.source_address_prefix
    return ArmResource(state=_state(props.provisioning_state if props else None), location=model.location,
                       tags=dict(model.tags or {}), ssh_source=source)


def _vm(model: VirtualMachine) -> ArmResource:
    props = model.properties
    hardware = props.hardware_profile if props else None
    return ArmResource(state=_state(props.provisioning_state if props else None), location=model.location,
                       tags=dict(model.tags or {}), vm_size=text(hardware.vm_size if hardware else None) or None,
                       principal_id=model.identity.principal_id if model.identity else None)


def _vmss(model: VirtualMachineScaleSet) -> ArmResource:
    s = scale_set(model)
    return ArmResource(state=_state(s.state), location=s.location, tags=s.tags)


def _state(value: object) -> str:
    return text(value) or "Succeeded"


# One reader per kind `up` creates; each takes that kind's SDK model (the table erases it).
_READERS: dict[str, Callable[[Any], ArmResource]] = {
    RG: _group, VNET: _network, NSG: _nsg, PIP: _public_ip, NIC: _nic, VM: _vm, VMSS: _vmss}


__all__ = ["ArmResource", "Assignment", "Group", "ScaleSet", "ScaleSetVM", "Tagged", "VmImage", "assignment",
           "gallery_architecture", "groups", "image_names", "resource", "scale_set", "scale_set_vm", "tagged",
           "vm_image"]
