"""The Azure provider's healer and host-report parts: a node short of GPUs at boot replaced,
a node replaced on request, spot capacity restored, bad hosts reported to Guest Health Reporting.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from functools import partial

from orchestrator.errors import AzbenchError, CapacityError, ProvisionError
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster
from orchestrator.providers.azure import cloudinit, heal
from orchestrator.providers.azure import guest_health as ghr
from orchestrator.providers.azure import boot
from orchestrator.providers.azure.boot import ShortNodeError
from orchestrator.providers.azure.core import AzureCore, rg_of, sets_of
from orchestrator.providers.azure.guest_health import HOSTS_DIR
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.spot import await_eviction, restore
from orchestrator.providers.base import HostReport
from orchestrator.slurm.launcher import SlurmLauncher

# VMs one `up` replaces for failing their boot-time fabric check (too few GPUs or InfiniBand
# HCAs) before it gives up: a few bad hosts are replaced, a bad image is not retried VM by VM.
MAX_BOOT_REPLACEMENTS = 4


class AzureHealer(AzureCore):
    """`replace_node`, `restore_capacity` (ProviderParts.healer), `report_unhealthy`
    (ProviderParts.host_reports), and the boot wait that replaces a short node (`up`)."""

    def _boot(self, cluster: Cluster, timeout_s: float) -> Cluster:
        """Wait until booted; a node short of GPUs or HCAs at boot (boot.ShortNodeError) is
        replaced before Slurm lists it, at most MAX_BOOT_REPLACEMENTS per `up`."""
        replaced = 0
        while True:
            try:
                boot.wait_booted(cluster, cloudinit.head_hostname(cluster.name), timeout_s=timeout_s,
                                 progress=partial(self._boot_progress, cluster.name))
                return cluster
            except ShortNodeError as short:
                if len(short.short) == len(cluster.node_names) > 1:
                    raise ProvisionError(f"every VM failed its fabric check at boot ({short.message}): an image "
                                         "fault, not the hosts; nothing replaced",
                                         hint="check the image's NVIDIA driver and OFED") from None
                if replaced + len(short.short) > MAX_BOOT_REPLACEMENTS:
                    raise ProvisionError(f"{short.message}; {replaced} VM(s) already replaced during this up "
                                         f"(at most {MAX_BOOT_REPLACEMENTS})", hint=short.hint) from None
                for node, why in short.short.items():
                    self._boot_progress(cluster.name, f"replacing {node} before Slurm lists it: {why}")
                    new = self.replace_node(cluster, node)
                    cluster = cluster.model_copy(update={"node_names": [new if n == node else n
                                                                         for n in cluster.node_names]})
                replaced += len(short.short)

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        """After a spot eviction: wait (at most `evict_wait_s`) until `nodes` are no longer
        running instances, then every GPU scale set back to its planned VMs (azure/spot.py);
        whole sets are restored, not only `nodes`.

        Returns the hostnames now in the sets; CapacityError when Azure has no spot capacity
        within `timeout_s` (default: the cluster's azure.spot_restore_timeout).
        """
        clients = self._clients_for(cluster.name, cluster)
        props = cluster.properties_as(AzureProps)
        rg = rg_of(cluster)
        if nodes and evict_wait_s > 0:
            await_eviction(clients, rg, sets_of(props.scale_sets, nodes), set(nodes), timeout_s=evict_wait_s,
                           poll_s=min(5.0, evict_wait_s), sleep=self.opts.sleep or time.sleep)
        planned = {s: sum(1 for h in cluster.node_names if h.startswith(f"{s}-")) for s in props.scale_sets}
        limit = timeout_s if timeout_s is not None else float(props.spot_restore_timeout or 1800)
        done = restore(clients, rg, planned, timeout_s=limit, wait_s=self.opts.capacity_wait_s,
                       sleep=self.opts.sleep or time.sleep)
        return [h for r in done for h in r.hosts]

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        """Retire `node` in Slurm, delete its scale-set instance, restore the set's capacity and
        wait until the new VM has booted through the same cloud-init and is idle in Slurm under
        its new computer name (azure/heal.py); the new node's name."""
        clients, rg = self._clients_for(cluster.name, cluster), rg_of(cluster)
        names = cluster.properties_as(AzureProps).scale_sets
        # The node's own set only (its computer name is the set's prefix + id): requests per
        # replacement do not grow with the number of sets.
        mine = sets_of(names, [node])
        view, instance = heal.find_host(heal.read_sets(clients, rg, mine), node, cluster.name)
        if view.room < 1:
            raise CapacityError(f"scale set {view.name} of '{cluster.name}' has no spare Slurm slot left "
                                f"(slurm.conf defines {view.slots or 0})",
                                hint="`azbench down` and `up` again to get fresh slots")
        self._retire(cluster, [node], "azbench: replaced")
        heal.delete_instances(clients, rg, view.name, [instance])
        after = replace(view, capacity=view.capacity - 1, hosts={h: i for h, i in view.hosts.items() if h != node})
        heal.set_capacity(clients, rg, after, view.capacity)
        [new] = heal.new_hosts(clients, rg, clients.subscription_id, [after], cluster.name)
        self._wait_joined(cluster, [new], timeout_s)
        if lookup(cluster.sku).nvlink_domain_vms > 1 and self.join_timeout_s > 0:
            # NVL72: the new VM came up in a spare rack's block; it takes the old one's place.
            with self.connect(cluster) as access:
                launcher = access.launcher
                assert isinstance(launcher, SlurmLauncher)
                launcher.swap_topology(node, new, cloudinit.TOPOLOGY_FILES)
        return new

    def report_unhealthy(self, cluster: Cluster, reasons: Mapping[str, str]) -> list[HostReport]:
        """Report each drained node to Azure Guest Health Reporting (azure/guest_health.py, with
        the documentation cited): its VM's resource id, the physical host name its cloud-init
        saved from Hyper-V KVP, a documented HPC category. One result per node; a node without
        a physical host name is skipped, an ARM refusal (e.g. a subscription not allow-listed
        for the preview) is that node's "failed"."""
        clients, rg = self._clients_for(cluster.name, cluster), rg_of(cluster)
        sets = heal.read_sets(clients, rg, cluster.properties_as(AzureProps).scale_sets)
        physical = self._physical_hosts(cluster, list(reasons))
        has_ib = bool(lookup(cluster.sku).ib_links)
        out: list[HostReport] = []
        for node, reason in reasons.items():
            category = ghr.category(reason, has_ib)
            if not physical.get(node):
                out.append(HostReport(node, "skipped", f"no PhysicalHostName for {node} in "
                                      f"{ghr.HOSTS_DIR} (its Hyper-V KVP had none)", category))
                continue
            view, instance = heal.find_host(sets, node, cluster.name)
            resource = (f"/subscriptions/{clients.subscription_id}/resourceGroups/{rg}/providers/"
                        f"Microsoft.Compute/virtualMachineScaleSets/{view.name}/virtualMachines/{instance}")
            name = ghr.impact_name(cluster.name, node)
            body = ghr.impact_body(start=ghr.now(), category=category, description=f"azbench health gate: {reason}",
                                   resource_id=resource, physical_host=physical[node])
            try:
                ghr.report(clients, name, body)
            except AzbenchError as exc:
                out.append(HostReport(node, "failed", exc.message, category))
                continue
            out.append(HostReport(node, "reported", name, category))
        return out

    def _physical_hosts(self, cluster: Cluster, nodes: Sequence[str]) -> dict[str, str]:
        """{node: physical host name} from the files the nodes' cloud-init wrote on /shared."""
        out: dict[str, str] = {}
        with self.connect(cluster) as access:
            assert access.shell is not None
            for node in nodes:
                try:
                    out[node] = access.shell.read(f"{HOSTS_DIR}/{node}.physical").decode().strip()
                except Exception:  # noqa: BLE001 - no file: the node had no KVP value
                    continue
        return out
