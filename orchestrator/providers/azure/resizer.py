"""The Azure provider's resizer part: grow (parked VMs started, sets with room filled, new sets
made with the body `up` uses: scaleset.body) and shrink (park, else delete), and its preview.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator import paths
from orchestrator.errors import AzbenchError, ConfigError, ProvisionError, ShrinkError
from orchestrator.hardware.catalog import lookup
from orchestrator.hardware.layout import rack_unit
from orchestrator.models import Cluster, ScaleSetPlan
from orchestrator.providers.azure import cloudinit, heal, resources, scaleset
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.core import AzureCore, rg_of
from orchestrator.providers.azure.heal import Growth, SetView
from orchestrator.providers.azure.lro import Reporter, TokenStore, ensure
from orchestrator.providers.azure.preflight import quota_check
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.up import LRO_FILE
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.base import SetChange


class AzureResizer(AzureCore):
    """`resize` and `resize_preview` (ProviderParts.resizer) of the Azure provider."""

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        """Grow: the vCPU quota preflight for the VMs to add, then, decided before any write
        (heal.plan_growth): the parked VMs started, the sets with room filled (within their
        Slurm slots and the 100-VM cap), new sets made; then wait until the new VMs are idle in
        Slurm. Shrink: retire `remove` in Slurm (the caller drained them) and park their
        instances (deallocated: no compute billed, ids kept for a grow). The cluster as described."""
        clients, rg, props = self._clients_for(cluster.name, cluster), rg_of(cluster), cluster.properties_as(AzureProps)
        growth, sets, unit = self._growth(cluster, nodes, remove)
        have = sum(len(s.active) for s in sets)
        if nodes > have:
            new_vms = sum(growth.add.values()) + sum(growth.new_sets.values())
            if new_vms:
                quota_check(clients, cluster.region or "", lookup(cluster.sku), new_vms, spot=props.is_spot)
            fresh = heal.grow(clients, rg, clients.subscription_id, sets, growth, cluster.name)
            for name, vms in growth.new_sets.items():
                fresh += self._new_set(clients, cluster, sets, name, vms, unit)
            self._wait_joined(cluster, fresh, timeout_s)
        elif nodes < have:
            self._shrink(cluster, clients, rg, sets, remove)
        described = self.describe(cluster.name)
        if described is None:
            raise ProvisionError(f"Azure cluster '{cluster.name}' is gone after the resize")
        return described

    def _shrink(self, cluster: Cluster, clients: AzureClients, rg: str, sets: Sequence[SetView],
                remove: Sequence[str]) -> None:
        """Take `remove` (drained by the caller) out: park each set's instances (deallocate:
        ids kept for a grow); where parking fails, delete them instead (said in `notes`); then
        retire in Slurm what is gone. Where neither works, ShrinkError names the nodes still
        there, which the caller undrains: no node stays drained and billing."""
        where = [heal.find_host(sets, host, cluster.name) for host in remove]
        host_of = {(v.name, i): h for h, (v, i) in zip(remove, where)}
        gone: list[str] = []
        kept: list[str] = []
        failures: list[str] = []
        notes: list[str] = []
        for view in sets:
            ids = [i for v, i in where if v.name == view.name]
            if not ids:
                continue
            hosts = [host_of[(view.name, i)] for i in ids]
            try:
                heal.park(clients, rg, clients.subscription_id, view, ids)
            except AzbenchError as parked:
                try:
                    heal.delete_instances(clients, rg, view.name, ids)
                except AzbenchError as deleted:
                    kept += hosts
                    failures.append(f"parking {', '.join(hosts)} failed ({parked}) and deleting them failed "
                                    f"({deleted})")
                    continue
                notes.append(f"parking {', '.join(hosts)} of {view.name} failed ({parked}); deleted them "
                             "instead (their instance ids are not kept for a grow)")
            gone += hosts
        self.notes[cluster.name] = notes
        if gone:
            self._retire(cluster, gone, "azbench: resize (removed)")
        if kept:
            raise ShrinkError(f"shrinking '{cluster.name}' left {', '.join(kept)} in the cluster: "
                              + "; ".join(failures) + (f"; removed {', '.join(gone)}" if gone else ""),
                              kept=list(kept), hint="rerun the resize")

    def resize_preview(self, cluster: Cluster, nodes: int, remove: Sequence[str] = ()) -> list[SetChange]:
        """What `resize` would change, set by set (`<set>: <now> -> <after>`), read from ARM (the
        sets and their VMs): the same plan `resize` carries out; no write, no login."""
        growth, sets, _ = self._growth(cluster, nodes, remove)
        have = sum(len(s.active) for s in sets)
        if nodes >= have:
            return growth.changes(sets)
        where = [heal.find_host(sets, host, cluster.name) for host in remove]
        return [SetChange(v.name, len(v.active), len(v.active) - sum(1 for w, _ in where if w.name == v.name))
                for v in sorted(sets, key=lambda v: v.name) if any(w.name == v.name for w, _ in where)]

    def _growth(self, cluster: Cluster, nodes: int,
                remove: Sequence[str]) -> tuple[Growth, list[SetView], int]:
        """(the grow's plan, the sets as they are, the rack unit); checks the count first."""
        clients, rg, props = self._clients_for(cluster.name, cluster), rg_of(cluster), cluster.properties_as(AzureProps)
        unit = rack_unit(cluster)
        if unit > 1 and nodes % unit:  # lifecycle.plan_resize said so already; never a partial rack
            raise ConfigError(f"resizing '{cluster.name}' to {nodes} nodes would leave a partial NVLink rack "
                              f"(racks of {unit} VMs)")
        sets = heal.read_sets(clients, rg, props.scale_sets)
        have = sum(len(s.active) for s in sets)
        if nodes < have and (len(remove) != have - nodes or len(set(remove)) != len(remove)):
            raise ConfigError(f"shrinking '{cluster.name}' to {nodes} needs {have - nodes} of its "
                              f"nodes to remove, got {', '.join(remove) or 'none'}")
        if nodes <= have:
            return heal.Growth(), sets, unit
        growth = heal.plan_growth(sets, nodes - have, cluster.name, unit=unit,
                                  new_set_names=self._spare_sets(cluster, sets))
        return growth, sets, unit

    def _spare_sets(self, cluster: Cluster, sets: Sequence[SetView]) -> list[str]:
        """The names new scale sets may take (the layout's next ones: <cluster>-gpu-NN), where
        the cluster's VMs can join a set made after `up`: without Slurm to join (join_timeout_s
        0) any; with it none, since its slurm.conf defines the sets `up` made and no other."""
        if self.join_timeout_s > 0:
            return []
        prefix = sets[0].name.rsplit("-", 1)[0] if sets else f"{cluster.name}-gpu"
        used = [int(s.name.rsplit("-", 1)[1]) for s in sets if s.name.rsplit("-", 1)[-1].isdigit()]
        first = max(used, default=-1) + 1
        return [f"{prefix}-{i:02d}" for i in range(first, first + 10)]

    def _new_set(self, clients: AzureClients, cluster: Cluster, sets: Sequence[SetView], name: str, vms: int,
                 unit: int) -> list[str]:
        """Create scale set `name` of `vms` VMs as `up` makes the cluster's sets: the same body
        (resources.vmss_body), the nodes' cloud-init from this home's cluster keys, the first
        set's size, image, zone and spot terms; its hosts."""
        props = cluster.properties_as(AzureProps)
        rg, cdir = rg_of(cluster), paths.cluster_dir(cluster.name)
        if not (cdir / cloudinit.MUNGE_KEY).exists() or not props.head_private_ip:
            raise ConfigError(f"cluster '{cluster.name}' needs a new scale set, whose nodes need the cluster's keys "
                              f"and head address: this home has no {cdir / cloudinit.MUNGE_KEY}",
                              hint="resize it from the home that made it")
        with arm_call(f"read scale set {sets[0].name}"):
            first = clients.scale_set(rg, sets[0].name)
        plan = ScaleSetPlan(name=name, vms=vms, gpus=vms * lookup(cluster.sku).gpus_per_vm,
                            racks=(vms // unit) if unit > 1 else None)
        sec = cloudinit.load_or_create_secrets(cdir)
        sku = lookup(cluster.sku)
        every = [ScaleSetPlan(name=s.name, vms=len(s.active), gpus=0) for s in sets] + [plan]
        node_cd = cloudinit.custom_data(cloudinit.node_cloud_init(cluster.name, sku, every, props.head_private_ip, sec,
                                                                  spot=first.spot is not None), "nodes")
        subnet_id = f"{resources.rid(clients.subscription_id, rg, resources.VNET, f'{cluster.name}-vnet')}/subnets/{resources.SUBNET}"
        # The first set's shape and tags (its cap included), as `up` made it: scaleset.body, the
        # same function `up` builds every set with.
        template = scaleset.SetTemplate(location=first.location or cluster.region or "", sku=sku,
                                        sku_name=first.sku_name, image=resources.image_reference(
                                            first.image or props.image or sku.image),
                                        custom_data=node_cd, subnet_id=subnet_id, admin=first.admin_user or "azureuser",
                                        pubkey=sec.admin_public_key, spot=first.spot, tags=first.tags)
        zone = first.zones[0] if first.zones else None
        report = Reporter(self.opts.progress)
        ensure(clients, rg, resources.VMSS, name, lambda: scaleset.body(template, plan, zone), seen=None,
               tokens=TokenStore(cdir / LRO_FILE), report=report)
        view = heal.read_sets(clients, rg, [name])[0]
        heal.note_next_id(clients, rg, clients.subscription_id, view)
        return sorted(view.hosts, key=lambda h: view.hosts[h])
