"""The Azure provider: ND H100 v5 / ND H200 v5 / ND GB200 v6 Slurm clusters through the Azure SDKs.

`plan` is plan_azure plus the head's NIC, so what `--dry-run` prints is exactly what `up` creates
(`up` builds its resource names from the plan). `up` preflights and creates or adopts the cluster
(up.py), `describe` reads it back from tags and the resources (both build the record with
cluster.py's to_cluster), `down` deletes by tag and verifies nothing tagged remains (lifecycle
asks `foreign_owner` first: another owner's cluster needs --force), `sweep` removes the caller's
expired or orphaned clusters (others' expired ones with all_owners). The SDK is called in
clients.py only and its objects are read in records.py only; azure.* is imported only inside
functions, so `azbench --help` stays fast.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Callable, Collection, Mapping, Sequence

from orchestrator import paths
from orchestrator.providers.azure.plan import default_group, plan_azure
from orchestrator.providers.azure import cloudinit
from orchestrator.providers.azure import records
from orchestrator.providers.azure import resources
from orchestrator.providers.azure.clients import AzureClients, clients_from_config
from orchestrator.providers.azure.cluster import Found, provisional, to_cluster
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure.heal import Growth, SetView
from orchestrator.providers.azure.lro import ProgressEvent
from orchestrator.providers.azure.owner import Creator, Owner, creator, signed_in
from orchestrator.providers.azure.teardown import delete_cluster, ours, own_group, tag_filter, tagged_groups
from orchestrator.providers.azure.teardown import sweep as _sweep
from orchestrator.providers.azure.up import LRO_FILE, Prefetched, UpOptions, UpRun
from orchestrator.providers.base import (Billed, CloudNode, CloudResource, CloudView, Holding, HostReport, ProviderBase,
                                         SetChange, SweepItem, SweepRequest)
from orchestrator.hosts.remote import SshRunner
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.hardware.catalog import lookup
from orchestrator.errors import (AzbenchError, CapacityError, ConfigError, NotAvailableError, NotOwnerError,
                                 ProvisionError, ShrinkError)
from orchestrator.models import Cluster, ClusterState, Plan, ScaleSetPlan, parse_utc
from orchestrator.providers.azure.props import AzureProps
from orchestrator.seams import Access, Capabilities
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure_shared.tags import (TAG_CLUSTER, TAG_CREATED, TAG_EXPIRES, TAG_NEXT_ID, TAG_OWNER,
                                                     TAG_PARKED, TAG_RACK, TAG_SLOTS)

# VMs one `up` replaces for failing their boot-time fabric check (too few GPUs or InfiniBand
# HCAs) before it gives up: a few bad hosts are replaced, a bad image is not retried VM by VM.
MAX_BOOT_REPLACEMENTS = 4

__all__ = ["AzureProvider", "AzureClients", "ProgressEvent", "SweepItem", "sweep"]


class AzureProvider(ProviderBase):
    """Provider for `--provider azure`.

    `clients` defaults to DefaultAzureCredential clients built from the spec (or, for describe/
    down/sweep, the cluster record and the environment). `progress` receives ProgressEvents from
    worker threads (serialised); an exception it raises aborts `up` like a crash would.
    `caller_ip_lookup` returns the caller's public IP when neither azure.ssh_ingress_cidr nor
    AZBENCH_CALLER_IP is set. `capacity_wait_s` is the pause before retrying AllocationFailed.
    """

    name = "azure"
    caps = Capabilities(spends_money=True, expires=True, restores_capacity=True, live_node_states=True,
                        shell=True, replaces_nodes=True, resizes=True, reports_hosts=True,
                        sweeps=True) | SlurmLauncher.caps

    def __init__(self, clients: AzureClients | None = None, *,
                 progress: Callable[[ProgressEvent], None] | None = None,
                 caller_ip_lookup: Callable[[], str] | None = None, owner: str | None = None,
                 capacity_wait_s: float = 120.0, workers: int = 8,
                 sleep: Callable[[float], None] | None = None, join_timeout_s: float = 900.0) -> None:
        self.clients = clients
        # How long replace_node and resize wait for a new VM to boot and join Slurm; 0 (a fake
        # ARM whose VMs do not boot, like azure.boot_timeout_s: 0) skips every Slurm step.
        self.join_timeout_s = join_timeout_s
        self.opts = UpOptions(progress=progress, caller_ip_lookup=caller_ip_lookup, owner=owner,
                              capacity_wait_s=capacity_wait_s, workers=workers, sleep=sleep)
        self._last_boot_line = ""
        # One command's reads, kept for the calls after it in the same command (one listing of
        # each kind): what describe read for up, what holdings listed for down, the signed-in
        # caller, and the clients of each subscription and endpoint.
        self._prefetched: Prefetched | None = None
        self._contents: dict[str, list[records.Tagged]] = {}
        # What the last resize of each cluster did besides the plan (a park that fell back to
        # delete), for the caller to record.
        self.notes: dict[str, list[str]] = {}
        self._me: Owner | None = None
        self._built: dict[tuple[str | None, str | None, float | None], AzureClients] = {}

    # ------------------------------------------------------------ Provider protocol
    def plan(self, spec: ClusterSpec) -> Plan:
        """plan_azure(spec) with the head NIC listed after the public IP. Pure."""
        base = plan_azure(spec)
        planned = list(base.resources)
        at = next(i for i, r in enumerate(planned) if r.kind == resources.PIP) + 1
        planned.insert(at, resources.head_nic_resource(base))
        return base.model_copy(update={"provider": self.name, "resources": planned})

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """Create or adopt the cluster, then wait (azure.boot_timeout_s) until it has booted.

        A rerun after a crash creates only what is missing. The wait ends when the head's
        cloud-init is done and every node is idle in Slurm; a failed boot step or the deadline
        raises ProvisionError naming the VM.
        """
        prefetched, self._prefetched = self._prefetched, None
        cluster = UpRun(self._clients_for_spec(spec), spec, plan, self.opts, prefetched).execute()
        boot_timeout_s = spec.section(AzureSettings).boot_timeout_s
        if boot_timeout_s > 0:
            cluster = self._boot(cluster, boot_timeout_s)
        return cluster

    def _boot(self, cluster: Cluster, timeout_s: float) -> Cluster:
        """Wait until booted; a node short of GPUs or HCAs at boot (boot.ShortNodeError) is
        replaced before Slurm lists it, at most MAX_BOOT_REPLACEMENTS per `up`."""
        from orchestrator.providers.azure.boot import ShortNodeError, wait_booted
        replaced = 0
        while True:
            try:
                wait_booted(cluster, cloudinit.head_hostname(cluster.name), timeout_s=timeout_s,
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

    def _boot_progress(self, name: str, line: str) -> None:
        if self.opts.progress is not None and line != self._last_boot_line:
            self._last_boot_line = line
            self.opts.progress(ProgressEvent(action="booting", kind="cluster", name=name, detail=line))

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """PROVISIONING, with the subscription, ARM endpoint and resource group `down` deletes
        from (azure/cluster.py)."""
        clients = self.clients
        return provisional(spec, plan, subscription_id=clients.subscription_id if clients else None,
                           arm_endpoint=clients.base_url if clients else None)

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        """The cluster as Azure has it (found by its azbench-cluster tag), or None: the same
        record `up` returns (azure/cluster.py's to_cluster). Looks in the spec's subscription,
        else the configured one. Given the spec (lifecycle.up, before this provider's `up`) its
        group is read by name instead of by tag, and what was read is kept for `up`, which then
        reads none of it again."""
        clients = self._clients_for_spec(spec) if spec is not None else self._clients_for(name, None)
        if spec is not None:
            from orchestrator.providers.azure.lro import observe
            rg = default_group(name, spec.section(AzureSettings).resource_group)
            group = observe(clients, "", resources.RG, rg)
            self._prefetched = Prefetched(group=group, group_read=True)
            if group is None or group.tags.get(TAG_CLUSTER) != name:
                return None  # none, or not this cluster's (up says whose)
            return _read(name, records.Group(rg, group.location, dict(group.tags), group.state), clients,
                         self._prefetched)
        own = own_group(tagged_groups(clients, name), name)
        return _read(name, own, clients) if own is not None else None

    def check(self, spec: ClusterSpec, plan: Plan) -> tuple[list[str], list[str]]:
        """Preflight's reads for a new cluster (sizes and zones, vCPU quotas, the image), as
        results, and the problems `up` would refuse with: reads only (azure/preflight.py)."""
        from orchestrator.providers.azure.preflight import PreflightNeed, check_report
        a = spec.section(AzureSettings)
        need = PreflightNeed(region=spec.region or "", sku=spec.sku_row, new_vms=plan.nodes, head_size=a.head_size,
                             new_head=True, zones=a.zones, image=a.image, spot=a.priority == "spot")
        return check_report(self._clients_for_spec(spec), need)

    def adopt(self, name: str, *, account: str | None = None, endpoint: str | None = None,
              force: bool = False) -> Cluster | None:
        """The cluster as describe reads it (its tags: owner, expiry, creation; its scale sets and
        head), for a home without its record; None when nothing is tagged with it. One the caller
        did not create (owner.creator: its custom role's createdBy, or this home's creator nonce;
        the owner tags prove nothing) is refused unless `force`: reads only, no write."""
        clients = self.clients or self._built_clients(account, endpoint, None)
        group = own_group(tagged_groups(clients, name), name)
        if group is None:  # another group carrying the tag is a decoy: never the cluster
            return None
        made = self._creator(clients, name, group)
        if not made.mine and not force:
            raise NotOwnerError(f"cluster '{name}' is not yours: {made.describe()}",
                                hint=f"`azbench adopt {name} --force` records it here anyway (its `extend`, "
                                     "`resize` and `down` then need --force too)")
        return _read(name, group, clients)

    def down(self, cluster: Cluster) -> None:
        """Delete the cluster's resource group (what `holdings` listed, a group already being
        deleted included), verify nothing tagged with it is left there, then the head's custom
        role. Idempotent."""
        clients = self._clients_for(cluster.name, cluster)
        delete_cluster(clients, cluster.name, workers=self.opts.workers, groups=[_rg(cluster)])
        (paths.cluster_dir(cluster.name) / LRO_FILE).unlink(missing_ok=True)

    def foreign_owner(self, cluster: Cluster) -> str | None:
        """Why the live cluster is not the caller's (owner.creator: who created it, or that no
        evidence says), else None; None too when its group is gone (nothing left to protect)."""
        from orchestrator.providers.azure.lro import observe
        clients = self._clients_for(cluster.name, cluster)
        rg = _rg(cluster)
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
        with arm_call(f"list resource group {_rg(cluster)}"):
            try:
                contents = clients.group_contents(_rg(cluster))
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                contents = []
        self._contents[cluster.name] = contents
        return [Holding(kind=item.type.rsplit("/", 1)[-1], name=item.name, ours=ours(cluster.name, item),
                        billed=_billed(item, props)) for item in contents]

    def overview(self, clusters: Sequence[Cluster]) -> dict[str, CloudView]:
        """ARM's view of `clusters` from one listing of the subscription's azbench groups and one
        of its azbench resources (states expanded), per subscription and endpoint: whether each
        still exists, is being deleted or is partly there, its tags' creation time, expiry and
        owner, and what bills (scale sets' VMs not parked, the head at its recorded size)."""
        out: dict[str, CloudView] = {}
        by_account: dict[tuple[str | None, str | None], list[Cluster]] = {}
        for c in clusters:
            props = c.properties_as(AzureProps)
            by_account.setdefault((props.subscription_id, props.arm_endpoint), []).append(c)
        for (sub, endpoint), group in by_account.items():
            clients = self.clients or self._built_clients(sub, endpoint, None)
            groups = tagged_groups(clients)
            with arm_call("list resources by tag"):
                listed = clients.tagged_resources(tag_filter(), states=True)
            for c in group:
                out[c.name] = _overview(c, [g for g in groups if g.tags.get(TAG_CLUSTER) == c.name],
                                        [r for r in listed if r.tags.get(TAG_CLUSTER) == c.name])
        return out

    def connect(self, cluster: Cluster) -> Access:
        """The head over one pinned SSH connection (opened on first use): launcher and shell."""
        if cluster.ssh is None:
            raise NotAvailableError(f"cluster '{cluster.name}' has no SSH login recorded (its keys are "
                                    f"not in {paths.cluster_dir(cluster.name)})")
        runner = SshRunner(cluster.ssh, env=dict(cluster.env))
        # The admin user changes node states through sudo (slurm/launcher.py, `admin`).
        return Access(launcher=SlurmLauncher(runner, cluster, admin="sudo -n"), shell=runner, caps=self.caps,
                      python=cluster.env.get("AZBENCH_PYTHON", "python3"), closers=[runner.close])

    # ------------------------------------------------------------ capabilities
    def extend(self, cluster: Cluster, expires: datetime) -> None:
        """Move azbench-expires on everything the cluster owns; the head's agent reads it each tick."""
        from orchestrator.providers.azure.expiry import move_expiry
        move_expiry(self._clients_for(cluster.name, cluster), cluster.name, expires,
                    cluster.properties_as(AzureProps).resource_group)

    def node_states(self, cluster: Cluster) -> list[CloudNode]:
        """One row per VM from one list call per scale set (never one GET per VM)."""
        clients = self._clients_for(cluster.name, cluster)
        props = cluster.properties_as(AzureProps)
        rg = _rg(cluster)
        out: list[CloudNode] = []
        for s in props.scale_sets:
            with arm_call(f"list VMs of {s}"):
                vms = clients.set_vms(rg, s)
            out += [CloudNode(name=vm.host, scale_set=s, state=str(vm.state)) for vm in vms]
        return out

    def live_view(self, cluster: Cluster) -> CloudView:
        """ARM's view, no SSH and no writes: VM and scale-set states, instances, tags (status.py)."""
        from orchestrator.providers.azure.status import live_view
        expected = cluster.properties_as(AzureProps).scale_sets if isinstance(cluster.properties, AzureProps) else []
        group = cluster.properties_as(AzureProps).resource_group if isinstance(cluster.properties, AzureProps) else None
        return live_view(self._clients_for(cluster.name, cluster), cluster.name, expected, group)

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        """After a spot eviction: wait (at most `evict_wait_s`) until `nodes` are no longer
        running instances, then every GPU scale set back to its planned VMs (azure/spot.py);
        whole sets are restored, not only `nodes`.

        Returns the hostnames now in the sets; CapacityError when Azure has no spot capacity
        within `timeout_s` (default: the cluster's azure.spot_restore_timeout).
        """
        from orchestrator.providers.azure.spot import await_eviction, restore
        clients = self._clients_for(cluster.name, cluster)
        props = cluster.properties_as(AzureProps)
        rg = _rg(cluster)
        if nodes and evict_wait_s > 0:
            await_eviction(clients, rg, _sets_of(props.scale_sets, nodes), set(nodes), timeout_s=evict_wait_s,
                           poll_s=min(5.0, evict_wait_s), sleep=self.opts.sleep or _sleep)
        planned = {s: sum(1 for h in cluster.node_names if h.startswith(f"{s}-")) for s in props.scale_sets}
        limit = timeout_s if timeout_s is not None else float(props.spot_restore_timeout or 1800)
        done = restore(clients, rg, planned, timeout_s=limit, wait_s=self.opts.capacity_wait_s,
                       sleep=self.opts.sleep or _sleep)
        return [h for r in done for h in r.hosts]

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        """Retire `node` in Slurm, delete its scale-set instance, restore the set's capacity and
        wait until the new VM has booted through the same cloud-init and is idle in Slurm under
        its new computer name (azure/heal.py); the new node's name."""
        from orchestrator.providers.azure import heal
        clients, rg = self._clients_for(cluster.name, cluster), _rg(cluster)
        names = cluster.properties_as(AzureProps).scale_sets
        # The node's own set only (its computer name is the set's prefix + id): requests per
        # replacement do not grow with the number of sets.
        mine = _sets_of(names, [node])
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

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        """Grow: the vCPU quota preflight for the VMs to add, then, decided before any write
        (heal.plan_growth): the parked VMs started, the sets with room filled (within their
        Slurm slots and the 100-VM cap), new sets made; then wait until the new VMs are idle in
        Slurm. Shrink: retire `remove` in Slurm (the caller drained them) and park their
        instances (deallocated: no compute billed, ids kept for a grow). The cluster as described."""
        from orchestrator.providers.azure import heal
        from orchestrator.providers.azure.preflight import quota_check
        clients, rg, props = self._clients_for(cluster.name, cluster), _rg(cluster), cluster.properties_as(AzureProps)
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
        from orchestrator.providers.azure import heal
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
        from orchestrator.providers.azure import heal
        where = [heal.find_host(sets, host, cluster.name) for host in remove]
        return [SetChange(v.name, len(v.active), len(v.active) - sum(1 for w, _ in where if w.name == v.name))
                for v in sorted(sets, key=lambda v: v.name) if any(w.name == v.name for w, _ in where)]

    def _growth(self, cluster: Cluster, nodes: int,
                remove: Sequence[str]) -> tuple[Growth, list[SetView], int]:
        """(the grow's plan, the sets as they are, the rack unit); checks the count first."""
        from orchestrator.hardware.layout import rack_unit
        from orchestrator.providers.azure import heal
        clients, rg, props = self._clients_for(cluster.name, cluster), _rg(cluster), cluster.properties_as(AzureProps)
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
        from orchestrator.providers.azure import heal
        from orchestrator.providers.azure.lro import Reporter, TokenStore, ensure
        props = cluster.properties_as(AzureProps)
        rg, cdir = _rg(cluster), paths.cluster_dir(cluster.name)
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
        rack = cloudinit.rack_of(sku, plan)
        every = [ScaleSetPlan(name=s.name, vms=len(s.active), gpus=0) for s in sets] + [plan]
        node_cd = cloudinit.custom_data(cloudinit.node_cloud_init(cluster.name, sku, every, props.head_private_ip, sec,
                                                    spot=first.spot is not None), "nodes")
        set_tags = {**first.tags, TAG_SLOTS: str(cloudinit.slot_count(plan, rack)), TAG_NEXT_ID: str(vms),
                    **({TAG_RACK: str(rack)} if rack > 1 else {})}
        set_tags.pop(TAG_PARKED, None)
        subnet_id = f"{resources.rid(clients.subscription_id, rg, resources.VNET, f'{cluster.name}-vnet')}/subnets/{resources.SUBNET}"
        image = resources.image_reference(first.image or props.image or sku.image)
        body = resources.vmss_body(first.location or cluster.region or "", set_tags, sku_name=first.sku_name, scale_set=plan,
                            zone=first.zones[0] if first.zones else None, image=image, custom_data=node_cd,
                            subnet_id=subnet_id, prefix=cloudinit.computer_name_prefix(plan), spot=first.spot,
                            admin=first.admin_user or "azureuser", pubkey=sec.admin_public_key)
        report = Reporter(self.opts.progress)
        ensure(clients, rg, resources.VMSS, name, lambda: body, seen=None, tokens=TokenStore(cdir / LRO_FILE), report=report)
        view = heal.read_sets(clients, rg, [name])[0]
        heal.note_next_id(clients, rg, clients.subscription_id, view)
        return sorted(view.hosts, key=lambda h: view.hosts[h])

    def sweep(self, request: SweepRequest) -> list[SweepItem]:
        """The caller's clusters past azbench-expires (and with `all_owners` other owners'
        expired ones), deleted unless a dry run; the caller's live ones unknown to this home
        reported, never deleted (azure/teardown.py)."""
        clients = self.clients or self._built_clients(request.account, request.endpoint, None)
        return sweep(clients, dry_run=request.dry_run, known_clusters=request.known, now=request.now,
                     all_owners=request.all_owners, only=request.only,
                     principal=request.principal or self.opts.owner)

    def report_unhealthy(self, cluster: Cluster, reasons: Mapping[str, str]) -> list[HostReport]:
        """Report each drained node to Azure Guest Health Reporting (azure/guest_health.py, with
        the documentation cited): its VM's resource id, the physical host name its cloud-init
        saved from Hyper-V KVP, a documented HPC category. One result per node; a node without
        a physical host name is skipped, an ARM refusal (e.g. a subscription not allow-listed
        for the preview) is that node's "failed"."""
        from orchestrator.providers.azure import guest_health as ghr
        from orchestrator.providers.azure import heal
        from orchestrator.errors import AzbenchError
        clients, rg = self._clients_for(cluster.name, cluster), _rg(cluster)
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
        from orchestrator.providers.azure.guest_health import HOSTS_DIR
        out: dict[str, str] = {}
        with self.connect(cluster) as access:
            assert access.shell is not None
            for node in nodes:
                try:
                    out[node] = access.shell.read(f"{HOSTS_DIR}/{node}.physical").decode().strip()
                except Exception:  # noqa: BLE001 - no file: the node had no KVP value
                    continue
        return out

    def _retire(self, cluster: Cluster, nodes: Sequence[str], reason: str) -> None:
        if self.join_timeout_s <= 0:
            return  # no Slurm to talk to (see join_timeout_s)
        with self.connect(cluster) as access:
            launcher = access.launcher
            assert isinstance(launcher, SlurmLauncher)
            launcher.retire(nodes, reason)

    def _wait_joined(self, cluster: Cluster, hosts: Sequence[str], timeout_s: float | None) -> None:
        """Until `hosts` are idle in Slurm (boot.wait_booted on just them), or ProvisionError
        naming the VM whose boot step failed, or what is missing at the deadline."""
        limit = self.join_timeout_s if timeout_s is None else timeout_s
        if self.join_timeout_s <= 0 or limit <= 0:
            return
        from orchestrator.providers.azure.boot import wait_booted
        wait_booted(cluster.model_copy(update={"node_names": list(hosts)}), cloudinit.head_hostname(cluster.name),
                    timeout_s=limit, poll_s=1.0, progress=partial(self._boot_progress, cluster.name))

    # ------------------------------------------------------------ helpers
    def _clients_for_spec(self, spec: ClusterSpec) -> AzureClients:
        if self.clients is not None:
            return self.clients
        a = spec.section(AzureSettings)
        return self._built_clients(a.subscription_id, a.arm_endpoint, a.polling_interval)

    def _clients_for(self, name: str, cluster: Cluster | None) -> AzureClients:
        if self.clients is not None:
            return self.clients
        props = cluster.properties_as(AzureProps) if cluster else AzureProps()
        return self._built_clients(props.subscription_id, props.arm_endpoint, None)

    def _built_clients(self, sub: str | None, endpoint: str | None, polling: float | None) -> AzureClients:
        """Production clients, one per subscription, endpoint and polling interval for this
        provider's life (a command's): one credential, so one sign-in (signin.default_credential
        keeps the credential for the process)."""
        key = (sub, endpoint, polling)
        if key not in self._built:
            self._built[key] = clients_from_config(subscription_id=sub, arm_endpoint=endpoint, polling_interval=polling)
        return self._built[key]

    def _creator(self, clients: AzureClients, name: str, group: records.Group) -> Creator:
        """Who created the cluster's group (owner.creator), from evidence a same-name `up`'s
        group PUT cannot overwrite: the tags of what the group holds (one listing per command,
        shared with `holdings`), and only when they do not show this home's creator
        nonce, the custom role's createdBy (one GET)."""
        from orchestrator.providers.azure import roles
        if self._me is None:
            self._me = signed_in(clients, self.opts.owner)
        me = self._me
        contents = self._contents.get(name)  # `holdings` in this command listed it already
        if contents is None:
            with arm_call(f"list resource group {group.name}"):
                try:
                    contents = clients.group_contents(group.name)
                except Exception as exc:
                    if not is_not_found(exc):
                        raise
                    contents = []
            self._contents[name] = contents
        children = [dict(item.tags) for item in contents]
        made = creator(me, subscription_id=clients.subscription_id, rg=group.name, cluster=name, tags=group.tags,
                       role_created_by=None, children=children, role_read=False)
        if made.mine:
            return made
        role = roles.read_expiry_role(clients, group.name)
        return creator(me, subscription_id=clients.subscription_id, rg=group.name, cluster=name, tags=group.tags,
                       role_created_by=role.created_by if role else None, children=children)


def sweep(clients: AzureClients | None = None, *, dry_run: bool = True,
          known_clusters: Collection[str] | None = None, now: datetime | None = None,
          subscription_id: str | None = None, arm_endpoint: str | None = None,
          all_owners: bool = False, only: Collection[str] | None = None,
          principal: str | None = None) -> list[SweepItem]:
    """Find (and unless dry_run, delete) the caller's clusters past azbench-expires, on evidence
    no tag writer can forge; with `all_owners`, other principals' expired clusters too; report
    the caller's live ones unknown to this home; delete azbench's custom roles whose group is
    gone (azure/teardown.py).

    `known_clusters`: names with a live azbench record; None: do not report unknown ones.
    `only`: delete nothing but these (the ones a confirmation listed). `principal` stands in
    for the signed-in principal's object id (tests). Without `clients`, DefaultAzureCredential
    clients for AZURE_SUBSCRIPTION_ID are used.
    """
    if clients is None:
        clients = clients_from_config(subscription_id=subscription_id, arm_endpoint=arm_endpoint)
    return _sweep(clients, me=signed_in(clients, principal), dry_run=dry_run, known_clusters=known_clusters,
                  now=now, all_owners=all_owners, only=only)


def _overview(cluster: Cluster, groups: list[records.Group], listed: list[records.Tagged]) -> CloudView:
    """One cluster's CloudView from the subscription's listings (AzureProvider.overview)."""
    props = cluster.properties_as(AzureProps)
    own = own_group(groups, cluster.name, props.resource_group)  # other tagged groups are decoys
    groups = [own] if own is not None else []
    listed = [r for r in listed if own is not None and r.group.lower() == own.name.lower()]
    if not groups:
        return CloudView(exists=False)
    tags = groups[0].tags
    # The owner the resources' tags name (a same-name `up`'s group PUT cannot reach them).
    owner = next((r.tags[TAG_OWNER] for r in listed if r.tags.get(TAG_OWNER)), None) or tags.get(TAG_OWNER)
    base = CloudView(exists=True, created=parse_utc(tags.get(TAG_CREATED)), expires=parse_utc(tags.get(TAG_EXPIRES)),
                     owner=owner)
    deleting = [g for g in groups if g.state == "Deleting"]
    if deleting:
        return replace(base, phase="deleting", phase_detail=f"resource group {deleting[0].name} is being deleted",
                       resources=tuple(CloudResource("resource group", g.name, g.state, "") for g in deleting))
    rows = [CloudResource(r.type.rsplit("/", 1)[-1], r.name, r.state or "Succeeded",
                          f"{r.sku}, capacity {r.capacity}" if r.capacity is not None else "")
            for r in listed if r.type.lower() in (resources.VM.lower(), resources.VMSS.lower())]
    names = {r.name for r in listed}
    gaps = [f"{r.kind} {r.name} failed" for r in rows if r.state == "Failed"]
    gaps += [f"scale set {s} missing" for s in props.scale_sets if s not in names]
    if f"{cluster.name}-head" not in names:
        gaps.append(f"VM {cluster.name}-head missing")
    billed = tuple(b for b in (_billed(r, props) for r in listed) if b is not None)
    return replace(base, resources=tuple(rows), phase="partial" if gaps else "", phase_detail=", ".join(gaps),
                   billed=billed)


def _billed(item: records.Tagged, props: AzureProps) -> Billed | None:
    """What a listed resource bills by the hour: a scale set its VMs but the parked ones (the
    listing carries its size and capacity), the head VM its recorded size ("" when the record
    has none: not priced) unless it failed to be created; None for the rest."""
    from orchestrator.providers.azure.heal import parse_ids
    if item.type.lower() == resources.VMSS.lower():
        parked = len(parse_ids(item.tags.get(TAG_PARKED, "")))
        return Billed("scale set", item.sku, max((item.capacity or 0) - parked, 0), spot=props.is_spot)
    if item.type.lower() == resources.VM.lower():
        # A VM whose creation failed (AllocationFailed: no hardware was given) bills no compute.
        return Billed("head", props.head_size or "", 0 if item.state == "Failed" else 1)
    return None


def _read(name: str, rg: records.Group, clients: AzureClients, keep: Prefetched | None = None) -> Cluster:
    with arm_call(f"list scale sets of {rg.name}"):
        sets = clients.scale_sets_in(rg.name)
    if keep is not None:
        keep.sets = sets
    return _described(name, rg, sets, clients, keep)


def _described(name: str, rg: records.Group, sets: list[records.ScaleSet], clients: AzureClients,
               keep: Prefetched | None = None) -> Cluster:
    """Read what `up` knew from ARM: the scale sets tagged with the cluster (their VMs but the
    parked ones), the resource group's tags, the head's public and private addresses and its
    size; then the one to_cluster."""
    from orchestrator.providers.azure.heal import parse_ids
    from orchestrator.providers.azure.lro import observe
    from orchestrator.providers.azure.spot import read_set
    ours = sorted((s for s in sets if s.tags.get(TAG_CLUSTER) == name), key=lambda s: s.name)
    states = {str(s.state) for s in ours}
    state = (ClusterState.FAILED if "Failed" in states else
             ClusterState.READY if ours and states == {"Succeeded"} else ClusterState.PROVISIONING)
    pip = observe(clients, rg.name, resources.PIP, f"{name}-head-ip")
    nic = observe(clients, rg.name, resources.NIC, f"{name}-head-nic")
    head = observe(clients, rg.name, resources.VM, f"{name}-head")
    if keep is not None:
        keep.pip = pip
    hosts: list[str] = []
    vms: dict[str, int] = {}
    for s in ours:
        parked = {str(i) for i in parse_ids(s.tags.get(TAG_PARKED, ""))}
        listed = read_set(clients, rg.name, s.name)
        active = [h for h, i in zip(listed.hosts, listed.instance_ids) if i not in parked]
        hosts += active
        vms[s.name] = len(active)
    first = ours[0] if ours else None
    found = Found(name=name, region=first.location if first else rg.location, resource_group=rg.name,
                  tags=rg.tags, subscription_id=clients.subscription_id, arm_endpoint=clients.base_url,
                  sku=first.sku_name if first else None,
                  sets=tuple(ScaleSetPlan(name=s.name, vms=vms[s.name], gpus=0) for s in ours),
                  head_ip=pip.public_ip if pip else None, head_private_ip=nic.private_ip if nic else None,
                  image=first.image if first else None, admin_user=_admin(ours),
                  spot=first.spot if first else None, hosts=tuple(hosts), vms_per_rack=_rack(ours),
                  head_size=head.vm_size if head else None)
    return to_cluster(found, state)


def _rack(sets: list[records.ScaleSet]) -> int | None:
    """The VMs per NVL72 rack the sets' azbench-rack-vms tag says (GB200 sets made before the
    tag have none: None)."""
    for s in sets:
        value = s.tags.get(TAG_RACK, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return None


def _rg(cluster: Cluster) -> str:
    return default_group(cluster.name, cluster.properties_as(AzureProps).resource_group)


def _sets_of(sets: Sequence[str], hosts: Collection[str]) -> list[str]:
    """The scale sets whose VMs `hosts` are (a computer name is its set's name, '-', the id);
    every set when none matches."""
    return [s for s in sets if any(h.startswith(f"{s}-") for h in hosts)] or list(sets)


def _sleep(seconds: float) -> None:
    import time
    time.sleep(seconds)


def _admin(sets: list[records.ScaleSet]) -> str:
    """The admin user of the first set that names one, else the default `up` would use."""
    for s in sets:
        if s.admin_user:
            return s.admin_user
    return os.environ.get("AZBENCH_ADMIN_USER", "azureuser")

