"""What every part of the Azure provider shares: its options, the management clients of each
subscription and endpoint, the SSH connection to the head, and `describe` (the cluster read back
from ARM). provider.py's AzureProvider is this core plus its parts (resizer.py, healer.py,
ownership.py, liveview.py) and the protocol's remaining methods; it builds the production
clients (`_built_clients`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial

from orchestrator import paths
from orchestrator.errors import NotAvailableError
from orchestrator.hosts.remote import SshRunner
from orchestrator.models import Cluster
from orchestrator.providers.azure import cloudinit, records, resources
from orchestrator.providers.azure.boot import wait_booted
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.lro import ProgressEvent, observe
from orchestrator.providers.azure.owner import Owner
from orchestrator.providers.azure.plan import default_group
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.readback import read_back
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure.teardown import own_group, tagged_groups
from orchestrator.providers.azure.up import Prefetched, UpOptions
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER
from orchestrator.providers.base import ProviderBase
from orchestrator.seams import Access, Traits
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.specs.cluster import ClusterSpec


class AzureCore(ProviderBase):
    """Provider for `--provider azure`, the part every optional part uses (see AzureProvider).

    `clients` defaults to DefaultAzureCredential clients built from the spec (or, for describe/
    down/sweep, the cluster record and the environment). `progress` receives ProgressEvents from
    worker threads (serialised); an exception it raises aborts `up` like a crash would.
    `caller_ip_lookup` returns the caller's public IP when neither azure.ssh_ingress_cidr nor
    AZBENCH_CALLER_IP is set. `capacity_wait_s` is the pause before retrying AllocationFailed.
    """

    name = "azure"
    traits = Traits(spends_money=True, shell=True)

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

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        """The cluster as Azure has it (found by its azbench-cluster tag), or None: the same
        record `up` returns (azure/cluster.py's to_cluster). Looks in the spec's subscription,
        else the configured one. Given the spec (lifecycle.up, before this provider's `up`) its
        group is read by name instead of by tag, and what was read is kept for `up`, which then
        reads none of it again."""
        clients = self._clients_for_spec(spec) if spec is not None else self._clients_for(name, None)
        if spec is not None:
            rg = default_group(name, spec.section(AzureSettings).resource_group)
            group = observe(clients, "", resources.RG, rg)
            self._prefetched = Prefetched(group=group, group_read=True)
            if group is None or group.tags.get(TAG_CLUSTER) != name:
                return None  # none, or not this cluster's (up says whose)
            return read_back(name, records.Group(rg, group.location, dict(group.tags), group.state), clients,
                         self._prefetched)
        own = own_group(tagged_groups(clients, name), name)
        return read_back(name, own, clients) if own is not None else None

    def connect(self, cluster: Cluster) -> Access:
        """The head over one pinned SSH connection (opened on first use): launcher and shell."""
        if cluster.ssh is None:
            raise NotAvailableError(f"cluster '{cluster.name}' has no SSH login recorded (its keys are "
                                    f"not in {paths.cluster_dir(cluster.name)})")
        runner = SshRunner(cluster.ssh, env=dict(cluster.env))
        # The admin user changes node states through sudo (slurm/launcher.py, `admin`).
        return Access(launcher=SlurmLauncher(runner, cluster, admin="sudo -n"), shell=runner, traits=self.traits,
                      python=cluster.env.get("AZBENCH_PYTHON", "python3"), closers=[runner.close])

    def _boot_progress(self, name: str, line: str) -> None:
        if self.opts.progress is not None and line != self._last_boot_line:
            self._last_boot_line = line
            self.opts.progress(ProgressEvent(action="booting", kind="cluster", name=name, detail=line))

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
        wait_booted(cluster.model_copy(update={"node_names": list(hosts)}), cloudinit.head_hostname(cluster.name),
                    timeout_s=limit, poll_s=1.0, progress=partial(self._boot_progress, cluster.name))

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
        """Production clients for a subscription, endpoint and polling interval (provider.py)."""
        raise NotImplementedError


def rg_of(cluster: Cluster) -> str:
    """The cluster's resource group (its record's, else the default name)."""
    return default_group(cluster.name, cluster.properties_as(AzureProps).resource_group)


def sets_of(sets: Sequence[str], hosts: Collection[str]) -> list[str]:
    """The scale sets whose VMs `hosts` are (a computer name is its set's name, '-', the id);
    every set when none matches."""
    return [s for s in sets if any(h.startswith(f"{s}-") for h in hosts)] or list(sets)
