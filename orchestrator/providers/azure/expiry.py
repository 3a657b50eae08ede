"""An Azure cluster's own expiry: the head's identity and role, its agent, and moving the deadline.

The head VM gets a system-assigned managed identity; `grant_self_delete` gives it Contributor on
the cluster's resource group only (one role assignment, named in the plan), so the expiry agent
(templates/expiry_agent.py, run by a systemd timer that cloud-init installs) can delete this
cluster and nothing else. `agent_context` is what the head's cloud-init needs to install it.
`move_expiry` rewrites the `azbench-expires` tag on everything the cluster owns: the agent reads
that tag on every tick, so `azbench extend` moves the in-cluster deadline with no SSH to the head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from orchestrator.providers.azure import records
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call, arm_error, is_not_found
from orchestrator.providers.azure.resources import rid
from orchestrator.providers.azure.teardown import tagged
from orchestrator.errors import NotFoundError, ProvisionError
from orchestrator.paths import templates_dir
from orchestrator.providers.azure_shared.tags import TAG_EXPIRES

if TYPE_CHECKING:
    from azure.mgmt.authorization.v2022_04_01.operations import RoleAssignmentsOperations

# Built-in "Contributor": delete (and read the tags of) what is in the group the role is scoped to.
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"
AGENT_FILE = "expiry_agent.py"
TIMER_MINUTES = 2
AGENT_PACKAGES = ("azure-identity>=1.17,<2", "azure-mgmt-resource>=26,<27")


@dataclass(frozen=True)
class AgentContext:
    """The head's expiry agent: its JSON config, its source, and how often the timer fires."""

    config_json: str
    source: str
    timer_minutes: int = TIMER_MINUTES
    packages: tuple[str, ...] = AGENT_PACKAGES


def agent_context(cluster: str, subscription_id: str, resource_group: str, arm_endpoint: str,
                  idle_minutes: int | None) -> AgentContext:
    config = {"cluster": cluster, "subscription_id": subscription_id, "resource_group": resource_group,
              "arm_endpoint": arm_endpoint, "idle_minutes": idle_minutes,
              "state_dir": "/var/lib/azbench-expiry"}
    return AgentContext(config_json=json.dumps(config, sort_keys=True),
                        source=(templates_dir() / AGENT_FILE).read_text())


def head_principal(vm: records.ArmResource, head: str) -> str:
    """The object id of the head VM's system-assigned identity."""
    principal = vm.principal_id
    if not principal:
        raise ProvisionError(f"head VM {head} has no system-assigned identity, so it cannot delete "
                             "its cluster when it expires",
                             hint="delete the head VM and rerun up, or set azure.self_expiry: false")
    return str(principal)


def grant_self_delete(clients: AzureClients, rg: str, name: str, principal_id: str) -> str:
    """Contributor on `rg` for `principal_id`, as role assignment `name`; returns "exists" or
    "created". A rerun finds the assignment and sends no PUT."""
    scope = rid(clients.subscription_id, rg)
    # The multi-API client types the property by no version: it serves the package default's.
    ops: RoleAssignmentsOperations = clients.authorization.role_assignments
    with arm_call(f"read role assignment {name}"):
        try:
            current: records.Assignment | None = records.assignment(ops.get(scope, name))
        except Exception as exc:
            if not is_not_found(exc):
                raise
            current = None
    if current is not None and current.principal_id == principal_id:
        return "exists"
    if current is not None:  # the head was recreated: its identity is a new principal
        with arm_call(f"delete stale role assignment {name}"):
            ops.delete(scope, name)
    # The model of the API version the client's role_assignments speaks (the package default,
    # 2022-04-01); `azure.mgmt.authorization.models` star-imports every version's, so the
    # name there is typed as 2015-07-01's (nested `properties=`) while runtime gets 2022-04-01's.
    from azure.mgmt.authorization.v2022_04_01.models import RoleAssignmentCreateParameters
    role = (f"/subscriptions/{clients.subscription_id}/providers/Microsoft.Authorization/"
            f"roleDefinitions/{CONTRIBUTOR_ROLE}")
    # principal_type skips the directory lookup that fails while a new identity replicates.
    params = RoleAssignmentCreateParameters(role_definition_id=role, principal_id=principal_id,
                                            principal_type="ServicePrincipal",
                                            description="azbench: the head deletes its own cluster when it expires")
    with arm_call(f"create role assignment {name} on {rg}"):
        try:
            ops.create(scope, name, params)
        except Exception as exc:
            if arm_error(exc).code != "RoleAssignmentExists":
                raise
    return "created"


def move_expiry(clients: AzureClients, cluster: str, expires: datetime) -> list[str]:
    """Set `azbench-expires` on the cluster's groups and tagged resources (tags merged, others
    kept); returns the scopes changed. NotFoundError when Azure holds nothing of the cluster."""
    from azure.mgmt.resource.resources.models import Tags, TagsPatchResource
    stamp = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    groups, resources = tagged(clients, cluster)
    if not groups and not resources:
        raise NotFoundError(f"Azure holds no resource tagged azbench-cluster={cluster}")
    scopes = [rid(clients.subscription_id, g.name) for g in groups] + [r.id for r in resources]
    patch = TagsPatchResource(operation="Merge", properties=Tags(tags={TAG_EXPIRES: stamp}))
    for scope in scopes:
        with arm_call(f"tag {scope}"):
            clients.resources.tags.begin_update_at_scope(scope, patch).result()
    return scopes

