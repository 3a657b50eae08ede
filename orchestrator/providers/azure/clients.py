"""The azure backend's management clients and every call it makes through them, as typed functions.

`AzureClients` is the shared ArmClients (azure_shared/clients.py: credential, subscription, ARM
endpoint, per-call policies, polling interval, retry settings, throttle budget, and the Compute
RP reads both backends make) plus the three clients only this backend uses, each created once,
lazily, so the SDKs load only when used. Production passes nothing but a DefaultAzureCredential
(`clients_from_config`); tests pass a credential stub and an AllowPlainHttp policy
(azure-notes.md §5.1) without touching this code.

This module and records.py are the backend's SDK edge (tests/test_layout.py holds the rest to
it): each method below makes one SDK call on an operation group (compute, network, resources,
authorization) and answers with a record of records.py, a plain value, or an `Operation` whose
result is one; what the SDK raises goes up unchanged, for the caller's `arm_call` to classify.
Long-running operations that the callers wait on whole (delete instances, capacity, tags) wait
here; the creates and deletes that `lro.py` resumes from a continuation token come back as an
`Operation`. The request bodies are built by resources.py (or here, for the few updates).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from orchestrator.providers.azure import records
from orchestrator.providers.azure.records import ArmResource, Assignment, Group, RoleDef, ScaleSet, ScaleSetVM, Tagged
from orchestrator.providers.azure.resources import NIC, NSG, PIP, RG, VM, VMSS, VNET
from orchestrator.providers.azure_shared.clients import ArmClients, arm_from_config

if TYPE_CHECKING:
    from azure.core.polling import LROPoller
    from azure.mgmt.authorization import AuthorizationManagementClient
    from azure.mgmt.network import NetworkManagementClient
    from azure.mgmt.resource.resources import ResourceManagementClient

T = TypeVar("T")


class Operation(Generic[T]):
    """A long-running ARM operation in flight (the SDK's poller), its result read into a record."""

    def __init__(self, poller: LROPoller[Any], read: Callable[[Any], T]) -> None:
        self._poller, self._read = poller, read

    def done(self) -> bool:
        return self._poller.done()

    def wait(self, timeout: float) -> None:
        self._poller.wait(timeout=timeout)

    def result(self) -> T:
        """Wait for the end; the final resource as a record. Raises what the operation failed with."""
        return self._read(self._poller.result())

    def continuation_token(self) -> str:
        """What resumes the operation from another process (`resume_create`)."""
        return self._poller.continuation_token()


class AzureClients(ArmClients):
    """The four management clients of one subscription (compute comes with ArmClients), and the
    calls the azure backend makes through them."""

    @property
    def network(self) -> NetworkManagementClient:
        return self._cached("network", _network)

    @property
    def resources(self) -> ResourceManagementClient:
        return self._cached("resources", _resources)

    @property
    def authorization(self) -> AuthorizationManagementClient:
        return self._cached("authorization", _authorization)

    # -- the resources `up` creates, by kind (resources.KINDS) ------------------------------------
    def read_resource(self, rg: str, kind: str, name: str) -> ArmResource:
        """GET one resource of `kind` (a resource group: `name` is the group). Raises the SDK's
        not-found error when it does not exist."""
        if kind == RG:
            return records.resource(kind, self.resources.resource_groups.get(name))
        return records.resource(kind, self._ops(kind).get(rg, name))

    def begin_create(self, rg: str, kind: str, name: str, body: object) -> Operation[ArmResource]:
        """PUT `kind/name` (not a resource group: `create_group`)."""
        return Operation(self._ops(kind).begin_create_or_update(rg, name, body), _reader(kind))

    def resume_create(self, rg: str, kind: str, name: str, token: str) -> Operation[ArmResource]:
        """Resume a create from the continuation token an earlier poller gave."""
        return Operation(self._ops(kind).begin_create_or_update(rg, name, None, continuation_token=token),
                         _reader(kind))

    def begin_remove(self, rg: str, kind: str, name: str) -> Operation[None]:
        """DELETE `kind/name` (a resource group with what is in it, when kind is resources.RG)."""
        if kind == RG:
            return Operation(self.resources.resource_groups.begin_delete(name), lambda _: None)
        return Operation(self._ops(kind).begin_delete(rg, name), lambda _: None)

    def create_group(self, name: str, body: Any) -> tuple[int, ArmResource]:
        """PUT the resource group (`body`: its JSON, or a ResourceGroup model): (ARM's HTTP
        status, the group). 201 Created answers the request that created it, 200 one that found
        it there."""
        # `cls` (the generated operations' hook for the raw response) returns what it is given.
        status, model = cast(tuple[int, Any], self.resources.resource_groups.create_or_update(
            name, body, cls=lambda response, model, headers: (response.http_response.status_code, model)))
        return status, records.resource(RG, model)

    def _ops(self, kind: str) -> Any:
        """The operation group of a kind; the SDK's six share no base class (and name their
        parameters differently, so the calls above pass them by position)."""
        table: dict[str, Callable[[], Any]] = {
            VNET: lambda: self.network.virtual_networks,
            NSG: lambda: self.network.network_security_groups,
            PIP: lambda: self.network.public_ip_addresses,
            NIC: lambda: self.network.network_interfaces,
            VM: lambda: self.compute.virtual_machines,
            VMSS: lambda: self.compute.virtual_machine_scale_sets}
        return table[kind]()

    # -- scale sets and their VMs -------------------------------------------------------------------
    def scale_set(self, rg: str, name: str) -> ScaleSet:
        return records.scale_set(self.compute.virtual_machine_scale_sets.get(rg, name))

    def scale_sets_in(self, rg: str) -> list[ScaleSet]:
        """Every scale set of the group (one list call)."""
        return [records.scale_set(s) for s in self.compute.virtual_machine_scale_sets.list(rg)]

    def set_vms(self, rg: str, scale_set: str, *, instance_view: bool = False) -> list[ScaleSetVM]:
        """The set's VMs from one list call; with `instance_view` their power states too
        (https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-set-vms/list:
        without `$expand=instanceView` the list carries none)."""
        ops = self.compute.virtual_machine_scale_set_vms
        rows = ops.list(rg, scale_set, expand="instanceView") if instance_view else ops.list(rg, scale_set)
        return [records.scale_set_vm(vm) for vm in rows]

    def delete_instances(self, rg: str, scale_set: str, instance_ids: Sequence[str]) -> None:
        """Delete these instances and wait (POST .../delete; the set's capacity drops by as many)."""
        from azure.mgmt.compute import models as m
        self.compute.virtual_machine_scale_sets.begin_delete_instances(
            rg, scale_set, m.VirtualMachineScaleSetVMInstanceRequiredIDs(instance_ids=list(instance_ids))).result()

    def set_capacity(self, rg: str, scale_set: str, sku_name: str, sku_tier: str | None, capacity: int) -> None:
        """PATCH the set's sku.capacity and wait (Azure creates the missing instances under new ids)."""
        from azure.mgmt.compute import models as m
        self.compute.virtual_machine_scale_sets.begin_update(rg, scale_set, m.VirtualMachineScaleSetUpdate(
            sku=m.Sku(name=sku_name, tier=sku_tier, capacity=capacity))).result()

    def start_instances(self, rg: str, scale_set: str, instance_ids: Sequence[str]) -> None:
        """Start these (deallocated) instances and wait."""
        from azure.mgmt.compute import models as m
        self.compute.virtual_machine_scale_sets.begin_start(
            rg, scale_set, m.VirtualMachineScaleSetVMInstanceIDs(instance_ids=list(instance_ids))).result()

    # -- by tag, by id ------------------------------------------------------------------------------
    def tagged_groups(self, tag_filter: str) -> list[Group]:
        return records.groups(self.resources.resource_groups.list(filter=tag_filter))

    def tagged_resources(self, tag_filter: str, *, states: bool = False) -> list[Tagged]:
        """The subscription's resources matching `tag_filter`, from one listing; with `states`
        each one's provisioningState too ($expand=provisioningState, https://learn.microsoft.com/
        rest/api/resources/resources/list)."""
        return records.tagged(self.resources.resources.list(filter=tag_filter,
                                                            expand="provisioningState" if states else None))

    def group(self, name: str) -> Group:
        """GET one resource group (tags, state). Raises the SDK's not-found error when absent."""
        return records.groups([self.resources.resource_groups.get(name)])[0]

    def group_contents(self, rg: str) -> list[Tagged]:
        """Everything in the resource group, tagged or not, with each one's provisioningState,
        from one listing (Resources - List By Resource Group, https://learn.microsoft.com/rest/api/
        resources/resources/list-by-resource-group). Raises the SDK's not-found error when the
        group is absent."""
        return records.tagged(self.resources.resources.list_by_resource_group(rg, expand="provisioningState"))

    def replace_tags(self, scope: str, tags: Mapping[str, str]) -> None:
        """Replace the scope's tags with exactly `tags` (PUT .../tags/default, Tags - Create Or
        Update At Scope) and wait."""
        from azure.mgmt.resource.resources.models import Tags, TagsResource
        self.resources.tags.begin_create_or_update_at_scope(scope, TagsResource(properties=Tags(tags=dict(tags)))).result()

    def deallocate_instances(self, rg: str, scale_set: str, instance_ids: Sequence[str]) -> None:
        """Deallocate these instances and wait (POST .../deallocate: shut down, compute released
        and not billed, instance ids and disks kept: https://learn.microsoft.com/rest/api/compute/
        virtual-machine-scale-sets/deallocate)."""
        from azure.mgmt.compute import models as m
        self.compute.virtual_machine_scale_sets.begin_deallocate(
            rg, scale_set, m.VirtualMachineScaleSetVMInstanceIDs(instance_ids=list(instance_ids))).result()

    def merge_tags(self, scope: str, tags: Mapping[str, str]) -> None:
        """Merge `tags` into the scope's tags (the others kept) and wait."""
        from azure.mgmt.resource.resources.models import Tags, TagsPatchResource
        patch = TagsPatchResource(operation="Merge", properties=Tags(tags=dict(tags)))
        self.resources.tags.begin_update_at_scope(scope, patch).result()

    def gallery_architecture(self, image_id: str, api_version: str) -> str:
        """GET a gallery image (definition or version) by id: its definition's architecture
        (records.gallery_architecture; a version or managed image reads x64). Raises the SDK's
        not-found error when it does not exist."""
        return records.gallery_architecture(self.resources.resources.get_by_id(image_id, api_version=api_version))

    # -- platform images ----------------------------------------------------------------------------
    def vm_image(self, region: str, publisher: str, offer: str, sku: str, version: str) -> records.VmImage:
        return records.vm_image(self.compute.virtual_machine_images.get(region, publisher, offer, sku, version))

    def image_skus(self, region: str, publisher: str, offer: str) -> list[str]:
        return records.image_names(self.compute.virtual_machine_images.list_skus(region, publisher, offer))

    def image_versions(self, region: str, publisher: str, offer: str, sku: str) -> list[str]:
        return records.image_names(self.compute.virtual_machine_images.list(region, publisher, offer, sku))

    # -- role definitions and assignments (roles.py) ------------------------------------------------
    def role_definition(self, scope: str, guid: str) -> RoleDef:
        """Raises the SDK's not-found error when there is none."""
        return records.role_definition(self.authorization.role_definitions.get(scope, guid))

    def define_role(self, scope: str, guid: str, *, name: str, description: str, actions: Sequence[str],
                    assignable_scopes: Sequence[str]) -> None:
        """PUT a custom role definition (https://learn.microsoft.com/azure/role-based-access-control/
        custom-roles-rest)."""
        from azure.mgmt.authorization.v2022_04_01.models import Permission, RoleDefinition
        body = RoleDefinition(role_name=name, role_type="CustomRole", description=description,
                              permissions=[Permission(actions=list(actions), not_actions=[])],
                              assignable_scopes=list(assignable_scopes))
        self.authorization.role_definitions.create_or_update(scope, guid, body)

    def custom_roles(self) -> list[RoleDef]:
        """Every custom role definition of the directory, from one listing at the tenant's root
        with $filter=type eq 'CustomRole' (https://learn.microsoft.com/azure/role-based-access-
        control/custom-roles-rest, "List all custom role definitions in a tenant")."""
        return [records.role_definition(d) for d in self.authorization.role_definitions.list(
            "", filter="type eq 'CustomRole'")]

    def delete_role_definition(self, scope: str, guid: str) -> bool:
        """True when a definition was there (ARM answers 204, no body, when none was)."""
        return self.authorization.role_definitions.delete(scope, guid) is not None

    def role_assignment(self, scope: str, name: str) -> Assignment:
        """Raises the SDK's not-found error when there is none."""
        return records.assignment(self.authorization.role_assignments.get(scope, name))

    def delete_role_assignment(self, scope: str, name: str) -> None:
        self.authorization.role_assignments.delete(scope, name)

    def assign_role(self, scope: str, name: str, *, role_definition_id: str, principal_id: str,
                    description: str) -> None:
        """PUT role assignment `name` for a service principal (principal_type skips the directory
        lookup that fails while a new identity replicates)."""
        # The model of the API version the client's role_assignments speaks (the package default,
        # 2022-04-01); `azure.mgmt.authorization.models` star-imports every version's, so the
        # name there is typed as 2015-07-01's (nested `properties=`) while runtime gets 2022-04-01's.
        from azure.mgmt.authorization.v2022_04_01.models import RoleAssignmentCreateParameters
        params = RoleAssignmentCreateParameters(role_definition_id=role_definition_id, principal_id=principal_id,
                                                principal_type="ServicePrincipal", description=description)
        self.authorization.role_assignments.create(scope, name, params)

    # -- a request no operation group has -----------------------------------------------------------
    def put_json(self, url: str, api_version: str, body: object) -> None:
        """PUT `body` to an ARM URL through the resources client's pipeline (credential, retries,
        policies); anything but 200 raises HttpResponseError with ARM's error."""
        from azure.core.exceptions import HttpResponseError
        from azure.core.rest import HttpRequest
        from azure.mgmt.core.exceptions import ARMErrorFormat
        response = self.resources.send_request(HttpRequest("PUT", url, params={"api-version": api_version}, json=body))
        if response.status_code != 200:
            raise HttpResponseError(response=response, error_format=ARMErrorFormat)


def clients_from_config(*, subscription_id: str | None = None, arm_endpoint: str | None = None,
                        polling_interval: float | None = None) -> AzureClients:
    """Production clients: DefaultAzureCredential, subscription from config or environment."""
    return arm_from_config(AzureClients, subscription_id=subscription_id, arm_endpoint=arm_endpoint,
                           polling_interval=polling_interval)


def _reader(kind: str) -> Callable[[Any], ArmResource]:
    return lambda model: records.resource(kind, model)


def _network(arm: ArmClients) -> NetworkManagementClient:
    from azure.mgmt.network import NetworkManagementClient
    return NetworkManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())


def _resources(arm: ArmClients) -> ResourceManagementClient:
    from azure.mgmt.resource.resources import ResourceManagementClient
    return ResourceManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())


def _authorization(arm: ArmClients) -> AuthorizationManagementClient:
    from azure.mgmt.authorization import AuthorizationManagementClient
    return AuthorizationManagementClient(arm.credential, arm.subscription_id, **arm.client_kwargs())
