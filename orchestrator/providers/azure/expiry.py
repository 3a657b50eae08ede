"""An Azure cluster's own expiry: the head's identity, its agent, and moving the deadline.

The head VM gets a system-assigned managed identity (`head_principal` reads its object id), and
that identity one role assignment on the cluster's resource group (roles.py): by default a custom
role granting exactly what the expiry agent (templates/expiry_agent.py, run by a systemd timer
that cloud-init installs) needs, reading the group and deleting it with what is in it. It cannot
create, change or start anything, so root on the head cannot spend money through it.
`agent_context` is what the head's cloud-init needs to install the agent.
`move_expiry` rewrites the `azbench-expires` tag on everything the cluster owns: the agent reads
that tag on every tick, so `azbench extend` moves the in-cluster deadline with no SSH to the head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from orchestrator.providers.azure import records
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure.resources import rid
from orchestrator.providers.azure.teardown import tagged
from orchestrator.errors import NotFoundError, ProvisionError
from orchestrator.paths import templates_dir
from orchestrator.providers.azure_shared.tags import TAG_EXPIRES
from orchestrator.providers.azure.plan import default_group

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
        raise ProvisionError(f"head VM {head} reports no system-assigned identity (read with its own GET), "
                             "so it cannot delete its cluster when it expires; nothing else was changed",
                             hint=f"give it one (`az vm identity assign -g <group> -n {head}`) and rerun up, or set "
                                  "azure.self_expiry: false (then `azbench sweep` is the only backstop)")
    return str(principal)


def move_expiry(clients: AzureClients, cluster: str, expires: datetime, rg: str | None = None) -> list[str]:
    """Set `azbench-expires` on the cluster's own group `rg` (default azbench-<cluster>) and the
    resources in it tagged with the cluster (tags merged, others kept); returns the scopes
    changed. Another group carrying the cluster's tag (a decoy) and anything in it is never
    written. NotFoundError when the cluster's group holds nothing of it."""
    stamp = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    own = default_group(cluster, rg).lower()
    groups, resources = tagged(clients, cluster)
    groups = [g for g in groups if g.name.lower() == own]
    resources = [r for r in resources if r.group.lower() == own] if groups else []
    if not groups:
        raise NotFoundError(f"Azure holds no resource group {default_group(cluster, rg)} tagged "
                            f"azbench-cluster={cluster}")
    scopes = [rid(clients.subscription_id, g.name) for g in groups] + [r.id for r in resources]
    for scope in scopes:
        with arm_call(f"tag {scope}"):
            clients.merge_tags(scope, {TAG_EXPIRES: stamp})
    return scopes

