"""The Azure provider's ownership part: who created a cluster (owner.creator, on evidence a
same-name `up` cannot overwrite), what its group holds, and `adopt` for a home without its record.
"""

from __future__ import annotations

from orchestrator.errors import NotOwnerError
from orchestrator.models import Cluster
from orchestrator.providers.azure import records, resources, roles
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.core import AzureCore, rg_of
from orchestrator.providers.azure.lro import observe
from orchestrator.providers.azure.owner import Creator, creator, signed_in
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.readback import billed_of, read_back
from orchestrator.providers.azure.teardown import group_contents, ours, own_group, tagged_groups
from orchestrator.providers.base import Holding


class AzureOwnership(AzureCore):
    """`foreign_owner`, `holdings` and `adopt` (ProviderParts.ownership)."""

    def adopt(self, name: str, *, account: str | None = None, endpoint: str | None = None,
              force: bool = False, resource_group: str | None = None) -> Cluster | None:
        """The cluster as describe reads it (its tags: owner, expiry, creation; its scale sets and
        head), for a home without its record; None when nothing is tagged with it. One the caller
        did not create (owner.creator: its custom role's createdBy, or this home's creator nonce;
        the owner tags prove nothing) is refused unless `force`: reads only, no write. A group
        named other than azbench-<name> is read only when the caller names it (`resource_group`:
        a spec's custom group); its creator evidence still decides whose it is."""
        clients = self.clients or self._built_clients(account, endpoint, None)
        group = own_group(tagged_groups(clients, name), name, resource_group)
        if group is None:  # another group carrying the tag is a decoy: never the cluster
            return None
        made = self._creator(clients, name, group)
        if not made.mine and not force:
            raise NotOwnerError(f"cluster '{name}' is not yours: {made.describe()}",
                                hint=f"`azbench adopt {name} --force` records it here anyway (its `extend`, "
                                     "`resize` and `down` then need --force too)")
        return read_back(name, group, clients)

    def foreign_owner(self, cluster: Cluster) -> str | None:
        """Why the live cluster is not the caller's (owner.creator: who created it, or that no
        evidence says), else None; None too when its group is gone (nothing left to protect)."""
        clients = self._clients_for(cluster.name, cluster)
        rg = rg_of(cluster)
        group = observe(clients, "", resources.RG, rg)
        if group is None:
            return None
        made = self._creator(clients, cluster.name, records.Group(rg, group.location, dict(group.tags), group.state))
        return None if made.mine else made.describe()

    def holdings(self, cluster: Cluster) -> list[Holding]:
        """Everything in the cluster's resource group as ARM lists it (one listing), each marked
        whether azbench made it for this cluster (teardown.ours), the scale sets and the head
        with what they bill: a set its VMs that are not parked, the head its recorded size."""
        clients = self._clients_for(cluster.name, cluster)
        props = cluster.properties_as(AzureProps)
        contents = self._contents[cluster.name] = group_contents(clients, rg_of(cluster))
        return [Holding(kind=item.type.rsplit("/", 1)[-1], name=item.name, ours=ours(cluster.name, item),
                        billed=billed_of(item, props)) for item in contents]

    def _creator(self, clients: AzureClients, name: str, group: records.Group) -> Creator:
        """Who created the cluster's group (owner.creator), from evidence a same-name `up`'s
        group PUT cannot overwrite: the tags of what the group holds (one listing per command,
        shared with `holdings`), and only when they do not show this home's creator
        nonce, the custom role's createdBy (one GET)."""
        if self._me is None:
            self._me = signed_in(clients, self.opts.owner)
        me = self._me
        contents = self._contents.get(name)  # `holdings` in this command listed it already
        if contents is None:
            contents = self._contents[name] = group_contents(clients, group.name)
        children = [dict(item.tags) for item in contents]
        made = creator(me, subscription_id=clients.subscription_id, rg=group.name, cluster=name, tags=group.tags,
                       role_created_by=None, children=children, role_read=False)
        if made.mine:
            return made
        role = roles.read_expiry_role(clients, group.name)
        return creator(me, subscription_id=clients.subscription_id, rg=group.name, cluster=name, tags=group.tags,
                       role_created_by=role.created_by if role else None, children=children)
