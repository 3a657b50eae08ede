"""The Azure provider: ND H100 v5 / ND H200 v5 / ND GB200 v6 Slurm clusters through the Azure SDKs.

`plan` is plan_azure plus the head's NIC, so what `--dry-run` prints is exactly what `up` creates
(`up` builds its resource names from the plan). `up` preflights and creates or adopts the cluster
(up.py), `describe` reads it back from tags and the resources (both build the record with
cluster.py's to_cluster), `down` deletes by tag and verifies nothing tagged remains (lifecycle
asks `foreign_owner` first: another owner's cluster needs --force), `sweep` removes the caller's
expired or orphaned clusters (others' expired ones with all_owners). The SDK is called in
clients.py only and its objects are read in records.py only; azure.* is imported only inside
functions, so `azbench --help` stays fast.

AzureProvider is its core (core.py: clients, the head connection, describe) and one class per
optional part, each in its own module: resizer.py, healer.py (and host reports), ownership.py,
liveview.py; the expiry and preflight parts, a few lines each, are here.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from orchestrator import paths
from orchestrator.models import Cluster, Plan
from orchestrator.providers.azure import resources
from orchestrator.providers.azure.clients import AzureClients, clients_from_config
from orchestrator.providers.azure.cluster import provisional
from orchestrator.providers.azure.core import rg_of
from orchestrator.providers.azure.expiry import move_expiry
from orchestrator.providers.azure.healer import MAX_BOOT_REPLACEMENTS, AzureHealer
from orchestrator.providers.azure.liveview import AzureLive
from orchestrator.providers.azure.lro import ProgressEvent
from orchestrator.providers.azure.owner import signed_in
from orchestrator.providers.azure.ownership import AzureOwnership
from orchestrator.providers.azure.plan import plan_azure
from orchestrator.providers.azure.preflight import PreflightNeed, check_report
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.resizer import AzureResizer
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure.teardown import delete_cluster
from orchestrator.providers.azure.teardown import sweep as _sweep
from orchestrator.providers.azure.up import LRO_FILE, UpRun
from orchestrator.providers.base import ProviderParts, SweepItem, SweepRequest
from orchestrator.specs.cluster import ClusterSpec

__all__ = ["AzureProvider", "AzureClients", "MAX_BOOT_REPLACEMENTS", "ProgressEvent", "SweepItem", "sweep"]


class AzureProvider(AzureResizer, AzureHealer, AzureOwnership, AzureLive):
    """Provider for `--provider azure` (the options: core.AzureCore)."""

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

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """PROVISIONING, with the subscription, ARM endpoint and resource group `down` deletes
        from (azure/cluster.py)."""
        clients = self.clients
        return provisional(spec, plan, subscription_id=clients.subscription_id if clients else None,
                           arm_endpoint=clients.base_url if clients else None)

    def check(self, spec: ClusterSpec, plan: Plan) -> tuple[list[str], list[str]]:
        """Preflight's reads for a new cluster (sizes and zones, vCPU quotas, the image), as
        results, and the problems `up` would refuse with: reads only (azure/preflight.py)."""
        a = spec.section(AzureSettings)
        need = PreflightNeed(region=spec.region or "", sku=spec.sku_row, new_vms=plan.nodes, head_size=a.head_size,
                             new_head=True, zones=a.zones, image=a.image, spot=a.priority == "spot")
        return check_report(self._clients_for_spec(spec), need)

    def down(self, cluster: Cluster) -> None:
        """Delete the cluster's resource group (what `holdings` listed, a group already being
        deleted included), verify nothing tagged with it is left there, then the head's custom
        role. Idempotent."""
        clients = self._clients_for(cluster.name, cluster)
        delete_cluster(clients, cluster.name, workers=self.opts.workers, groups=[rg_of(cluster)])
        (paths.cluster_dir(cluster.name) / LRO_FILE).unlink(missing_ok=True)

    def parts(self) -> ProviderParts:
        """Every optional part, each this provider itself: the methods its part classes bring
        (resizer.py, healer.py, ownership.py, liveview.py) and, here, extend, sweep and check."""
        return ProviderParts(traits=self.traits, resizer=self, expiry=self, healer=self, host_reports=self,
                             ownership=self, live=self, preflight=self)

    def extend(self, cluster: Cluster, expires: datetime) -> None:
        """Move azbench-expires on everything the cluster owns; the head's agent reads it each tick."""
        move_expiry(self._clients_for(cluster.name, cluster), cluster.name, expires,
                    cluster.properties_as(AzureProps).resource_group)

    def sweep(self, request: SweepRequest) -> list[SweepItem]:
        """The caller's clusters past azbench-expires (and with `all_owners` other owners'
        expired ones), deleted unless a dry run; the caller's live ones unknown to this home
        reported, never deleted (azure/teardown.py)."""
        clients = self.clients or self._built_clients(request.account, request.endpoint, None)
        return sweep(clients, dry_run=request.dry_run, known_clusters=request.known, now=request.now,
                     all_owners=request.all_owners, only=request.only,
                     principal=request.principal or self.opts.owner)

    def _built_clients(self, sub: str | None, endpoint: str | None, polling: float | None) -> AzureClients:
        """Production clients, one per subscription, endpoint and polling interval for this
        provider's life (a command's): one credential, so one sign-in (signin.default_credential
        keeps the credential for the process)."""
        key = (sub, endpoint, polling)
        if key not in self._built:
            self._built[key] = clients_from_config(subscription_id=sub, arm_endpoint=endpoint, polling_interval=polling)
        return self._built[key]


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
