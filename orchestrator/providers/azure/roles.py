"""The head identity's role for self-expiry: a custom role definition scoped to the cluster's
group, and the one role assignment that gives it to the head's managed identity.

`ensure_expiry_role` defines the custom role (EXPIRY_ACTIONS: read the group and its tags, delete
the group and what is in it, which is exactly what the expiry agent, templates/expiry_agent.py,
does), assignable at the cluster's group only; `grant_self_delete` assigns it (or, with
`azure.self_expiry_role: contributor`, the documented fallback, built-in Contributor) to the
head's identity on that group; `delete_expiry_role` removes the definition with the cluster
(`down`, `sweep`), and `expiry_roles` lists every one of the subscription, by group, so `sweep`
finds those whose group is gone. Definitions, like their names, are unique in the directory, so
the id is derived from the subscription and the group: a rerun finds the same one. ARM stamps a
definition with its creator (`createdBy`), which no tag writer can change: owner.creator reads
it as the evidence of who created the cluster.
"""

from __future__ import annotations

import re

import uuid

from orchestrator.errors import AzbenchError
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.records import Assignment, RoleDef
from orchestrator.providers.azure.resources import rid
from orchestrator.providers.azure_shared.errors import AzureErrorMixin, arm_call, arm_error, is_not_found


class Unread:
    """The type of UNREAD: a value not read yet (where None means "read: there is none")."""


UNREAD = Unread()

# Built-in "Contributor" (the fallback, azure.self_expiry_role: contributor): everything in the
# group the assignment is scoped to but access control, creating resources included.
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"
# The custom role's actions, and why each (https://learn.microsoft.com/azure/role-based-access-control/
# resource-provider-operations names them): the agent reads the group (its tags hold the cluster
# and the deadline) and deletes it; "To delete a resource group, you need access to the delete
# action for the Microsoft.Resources/subscriptions/resourceGroups resource. You also need delete
# for all resources in the resource group." (https://learn.microsoft.com/azure/azure-resource-manager/
# management/delete-resource-group), so the delete action of each type `up` puts in the group
# (resources.KINDS; disks: the head's OS disk). Slurm's idleness the agent reads on the head.
EXPIRY_ACTIONS = (
    "Microsoft.Resources/subscriptions/resourceGroups/read",
    "Microsoft.Resources/subscriptions/resourceGroups/delete",
    "Microsoft.Compute/virtualMachineScaleSets/delete",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Network/networkInterfaces/delete",
    "Microsoft.Network/virtualNetworks/delete",
    "Microsoft.Network/publicIPAddresses/delete",
    "Microsoft.Network/networkSecurityGroups/delete",
)
# What to do when ARM refuses to define the custom role, by its code (the fake ARM cites each).
ROLE_HINTS = {
    "AuthorizationFailed": ("the signed-in principal may not create role definitions "
                            "(Microsoft.Authorization/roleDefinitions/write: Owner or User Access Administrator): "
                            "set azure.self_expiry_role: contributor to give the head built-in Contributor on its "
                            "group instead (broader), or azure.self_expiry: false (only `azbench sweep` enforces "
                            "the expiry); `azbench down` deletes the empty group made so far"),
    "RoleDefinitionWithSameNameExists": ("a custom role of that name, not azbench's for this group, exists in the "
                                         "directory: delete it (`az role definition delete --name ...`) or set "
                                         "azure.resource_group to another name"),
    "RoleDefinitionLimitExceeded": ("the directory holds 5000 custom roles, Azure's limit: delete unused ones, or "
                                    "set azure.self_expiry_role: contributor"),
}

def role_definition_guid(subscription_id: str, rg: str) -> str:
    """The custom role's id: one per subscription and group (role definition ids, like their
    names, are unique in the directory), the same on every rerun."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"azbench:{subscription_id.lower()}:{rg.lower()}:expiry-role"))


def role_name(subscription_id: str, rg: str) -> str:
    """The custom role's name (unique in the directory, as Azure requires)."""
    return f"azbench self-expiry {subscription_id}/{rg}"


def role_definition_id(subscription_id: str, guid: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{guid}"


def read_expiry_role(clients: AzureClients, rg: str) -> RoleDef | None:
    """The cluster's custom role definition as ARM has it (createdBy included), or None."""
    sub = clients.subscription_id
    with arm_call(f"read role definition '{role_name(sub, rg)}'"):
        try:
            return clients.role_definition(rid(sub, rg), role_definition_guid(sub, rg))
        except Exception as exc:
            if not is_not_found(exc):
                raise
            return None


def ensure_expiry_role(clients: AzureClients, rg: str, *, creator: str, fresh: bool = False,
                       current: RoleDef | None | Unread = UNREAD) -> tuple[str, str]:
    """Define the custom role of EXPIRY_ACTIONS, assignable at `rg` only (PUT {group}/providers/
    Microsoft.Authorization/roleDefinitions/{id}, https://learn.microsoft.com/azure/
    role-based-access-control/custom-roles-rest). (its full id, "exists" or "created"): a rerun
    reads it (or uses `current`, read already) and sends no PUT. `fresh`: this `up` has just
    created the group (ARM's 201), so a definition already there is a leftover of an earlier
    cluster of the group's name; one that `creator` (the signed-in principal) did not create is
    deleted and defined again, so its createdBy, the evidence of who made the cluster
    (owner.creator), names this one's creator. A refusal names the fallback (ROLE_HINTS)."""
    sub = clients.subscription_id
    scope, guid = rid(sub, rg), role_definition_guid(sub, rg)
    if isinstance(current, Unread):
        current = read_expiry_role(clients, rg)
    if current is not None and fresh and (current.created_by or "").lower() != creator.lower():
        with arm_call(f"delete leftover role definition '{role_name(sub, rg)}' (created by {current.created_by})"):
            clients.delete_role_definition(f"/subscriptions/{sub}", guid)
        current = None
    if current is not None and set(current.actions) == set(EXPIRY_ACTIONS) and \
            [s.lower() for s in current.assignable_scopes] == [scope.lower()]:
        return role_definition_id(sub, guid), "exists"
    try:
        with arm_call(f"create role definition '{role_name(sub, rg)}' on {rg}"):
            clients.define_role(scope, guid, name=role_name(sub, rg), actions=EXPIRY_ACTIONS, assignable_scopes=[scope],
                                description="azbench: the cluster's head reads and deletes its own resource group "
                                            "when it expires, and nothing else")
    except AzbenchError as exc:
        hint = ROLE_HINTS.get(exc.code) if isinstance(exc, AzureErrorMixin) else None
        if hint:
            exc.hint = hint
        raise
    return role_definition_id(sub, guid), "created"


_GROUP_SCOPE = re.compile(r"/subscriptions/[^/]+/resourceGroups/([^/]+)", re.IGNORECASE)


def expiry_roles(clients: AzureClients) -> dict[str, RoleDef]:
    """azbench's custom roles of this subscription, by the resource group their one assignable
    scope names (lower case), from one listing of the directory's custom roles. A role is
    azbench's when its name is `role_name(subscription, group)` and its id the one derived from
    them (role_definition_guid): a role someone else named so is not."""
    sub = clients.subscription_id
    with arm_call("list custom role definitions"):
        found = clients.custom_roles()
    out: dict[str, RoleDef] = {}
    for role in found:
        scopes = [s.rstrip("/") for s in role.assignable_scopes]
        # The scope must be a resource group itself: the last segment of a VNet's scope
        # (.../resourceGroups/G/providers/Microsoft.Network/virtualNetworks/V) is no group name.
        group = _GROUP_SCOPE.fullmatch(scopes[0]) if len(scopes) == 1 else None
        if group is None:
            continue
        rg = group.group(1)
        if role.role_name == role_name(sub, rg) and role.guid.lower() == role_definition_guid(sub, rg):
            out[rg.lower()] = role
    return out


def delete_expiry_role(clients: AzureClients, rg: str) -> bool:
    """Delete the cluster's custom role (at the subscription: the group may be gone already);
    True when one was there. A cluster made with the Contributor fallback, or before custom
    roles, has none: 204, nothing to do."""
    sub = clients.subscription_id
    with arm_call(f"delete role definition '{role_name(sub, rg)}'"):
        try:
            return clients.delete_role_definition(f"/subscriptions/{sub}", role_definition_guid(sub, rg))
        except Exception as exc:
            if is_not_found(exc):
                return False
            raise


def grant_self_delete(clients: AzureClients, rg: str, name: str, principal_id: str,
                      role: str | None = None, *, fresh: bool = False) -> str:
    """Role `role` (a full role definition id; None: built-in Contributor, the fallback) on `rg`
    for `principal_id`, as role assignment `name`; returns "exists" or "created". A rerun finds
    the assignment and sends no PUT; one for another principal (a recreated head) or another role
    (a cluster from before the custom role) is replaced: ARM cannot update either in place.
    `fresh`: the group was created by this `up`, so it holds no assignment yet (no read)."""
    scope = rid(clients.subscription_id, rg)
    role = role or role_definition_id(clients.subscription_id, CONTRIBUTOR_ROLE)
    current: Assignment | None = None
    if not fresh:
        with arm_call(f"read role assignment {name}"):
            try:
                current = clients.role_assignment(scope, name)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
    if current is not None and current.principal_id == principal_id and \
            current.role_definition_id.lower() == role.lower():
        return "exists"
    if current is not None:  # a new principal, or another role
        with arm_call(f"delete stale role assignment {name}"):
            clients.delete_role_assignment(scope, name)
    with arm_call(f"create role assignment {name} on {rg}"):
        try:
            clients.assign_role(scope, name, role_definition_id=role, principal_id=principal_id,
                                description="azbench: the head deletes its own cluster when it expires")
        except Exception as exc:
            if arm_error(exc).code != "RoleAssignmentExists":
                raise
    return "created"
