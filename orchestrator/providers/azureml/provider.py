"""The Azure ML provider: an AmlCompute cluster (ND H100 v5 / ND H200 v5) in an existing workspace.

`plan` is pure: the AmlCompute it would create (size, min/max instances, idle scale-down, tags)
and the preflight `up` runs. `up` checks the workspace exists, preflights the size (Compute RP
resource SKUs, with azure_shared/capacity.py's checks) and Azure ML's own per-family quota, then creates the
compute with MLClient.compute.begin_create_or_update (clients.py makes the calls), or adopts one of the same name. `down`
deletes a compute azbench created (missing is success) and leaves an adopted one alone.
azure.ai.ml is imported only inside functions here and in launcher.py; the MLClient
comes from an injectable factory, so tests point the real SDK at a loopback fake ARM.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import TYPE_CHECKING, Any, Callable

from orchestrator.providers.azure_shared.capacity import TOTAL_CORES, quota_problems, sku_problems, vm_sizes
from orchestrator.providers.azure_shared.clients import ArmClients, arm_from_config
from orchestrator.providers.azure_shared.endpoints import PUBLIC_ARM
from orchestrator.providers.azure_shared.endpoints import arm_endpoint as resolve_endpoint
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure_shared.records import QuotaRow
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_OWNER
from orchestrator.providers.azureml import clients as aml
from orchestrator.providers.azureml.cluster import AmlTarget, provisional, to_cluster
from orchestrator.providers.azureml.launcher import AzureMLLauncher
from orchestrator.providers.azureml.records import AmlComputeInfo
from orchestrator.providers.base import ProviderBase, ProviderParts
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError, NotFoundError, PreflightError, ProvisionError
from orchestrator.models import Cluster, Plan, PlannedResource, ScaleSetPlan
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.seams import Access, Traits
from orchestrator.providers.azureml.settings import AzureMLSettings
from orchestrator.providers.azure_shared.signin import default_credential
from orchestrator.hardware.catalog import aml_compute_skus, gpu_skus

if TYPE_CHECKING:
    from azure.ai.ml import MLClient
    from azure.ai.ml.entities import AmlCompute
    from azure.core.credentials import TokenCredential

    from orchestrator.hardware.catalog import GpuSku

COMPUTE_KIND = "Microsoft.MachineLearningServices/workspaces/computes"
TOTAL_QUOTA = "Total Cluster Dedicated Regional vCPUs"
WORKSPACE_ENV, GROUP_ENV = "AZBENCH_AZUREML_WORKSPACE", "AZBENCH_AZUREML_RESOURCE_GROUP"
_COMPUTE_NAME = re.compile(r"^[a-z][a-z0-9-]{1,15}$")


MLClientFactory = Callable[[AmlTarget], "MLClient"]
ArmClientsFactory = Callable[[AmlTarget], ArmClients]


class AzureMLProvider(ProviderBase):
    """Provider for `--provider azureml`. `ml_client` builds an MLClient for a target (default:
    DefaultAzureCredential); `arm_clients` builds the Compute RP clients used by the size check."""

    name = "azureml"
    traits = Traits(spends_money=True)

    def __init__(self, ml_client: MLClientFactory | None = None,
                 arm_clients: ArmClientsFactory | None = None, *, owner: str | None = None) -> None:
        self.ml_client = ml_client or default_ml_client
        self.arm_clients = arm_clients or default_arm_clients
        self.owner = owner or os.environ.get("USER") or "azbench"

    # ------------------------------------------------------------ Provider protocol
    def plan(self, spec: ClusterSpec) -> Plan:
        """The AmlCompute `up` would create and the checks it runs first. Pure."""
        sku = _allowed_sku(spec)
        opts = spec.section(AzureMLSettings)
        if opts.min_instances > spec.nodes:
            raise ConfigError(f"azureml.min_instances {opts.min_instances} exceeds nodes {spec.nodes}")
        ws = opts.workspace or os.environ.get(WORKSPACE_ENV) or f"<${WORKSPACE_ENV} at up>"
        props: dict[str, str | int | bool | None] = {
            "workspace": ws, "size": sku.name, "tier": "Dedicated", "min_instances": opts.min_instances,
            "max_instances": spec.nodes, "idle_time_before_scale_down_s": opts.idle_seconds,
            "gpus": spec.nodes * sku.gpus_per_vm,
            **{f"tag:{k}": v for k, v in compute_tags(spec, "<caller at up>").items()}}
        name = compute_name(spec.name)
        cost = round(spec.nodes * sku.price_per_hour_usd, 2) if sku.price_per_hour_usd else None
        warnings = [] if cost is not None else [f"no list price known for {sku.name}: cost unknown"]
        if opts.min_instances == 0:
            warnings.append("min_instances 0: nodes are allocated when the first job starts, so "
                            "its queue time includes VM allocation and image pull")
        return Plan(cluster=spec.name, provider=self.name, sku=sku.name, region=spec.region,
                    nodes=spec.nodes, gpus_per_node=sku.gpus_per_vm,
                    total_gpus=spec.nodes * sku.gpus_per_vm,
                    scale_sets=[ScaleSetPlan(name=name, vms=spec.nodes, gpus=spec.nodes * sku.gpus_per_vm)],
                    resources=[PlannedResource(kind=COMPUTE_KIND, name=name, count=spec.nodes, properties=props)],
                    cost_per_hour_usd=cost, preflight=preflight_checks(spec), warnings=warnings,
                    lifetime=f"scales to {opts.min_instances} nodes after {opts.idle_seconds} s idle")

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """Create the compute, or adopt the existing one of the same name; idempotent."""
        target = target_from_spec(spec)
        ml = self.ml_client(target)
        name = compute_name(spec.name)
        check_workspace(ml, target)
        existing = _get_compute(ml, name)
        if existing is not None:
            return self._adopt(spec, target, existing)
        self.preflight(spec, ml=ml)
        with arm_call(f"create AmlCompute {name}"):
            created = aml.create_compute(ml, build_compute(spec, self.owner))
        return to_cluster(spec.name, target, created, owned=True)

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        """The compute as Azure ML has it, or None (needs the spec's or the environment's workspace)."""
        target = target_from_spec(spec) if spec else target_from_env()
        compute = _get_compute(self.ml_client(target), compute_name(name))
        if compute is None:
            return None
        return to_cluster(name, target, compute, owned=compute.tags.get(TAG_CLUSTER) == name)

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """PROVISIONING, with the workspace and compute name `down` needs (azureml/cluster.py)."""
        return provisional(spec.name, plan, target_from_spec(spec), compute_name(spec.name))

    def down(self, cluster: Cluster) -> None:
        """Delete the compute azbench created; missing is success; an adopted one is left alone.
        From a provisional record (ownership unknown) the compute's azbench-cluster tag decides."""
        props = cluster.properties_as(AzureMLProps)
        if props.owned is False:
            return
        ml = self.ml_client(target_from_cluster(cluster))
        name = props.compute or compute_name(cluster.name)
        if props.owned is None:
            found = _get_compute(ml, name)
            if found is None or found.tags.get(TAG_CLUSTER) != cluster.name:
                return  # gone, or not one azbench made for this cluster: never delete it
        with arm_call(f"delete AmlCompute {name}"):
            try:
                aml.delete_compute(ml, name)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
        if _get_compute(ml, name) is not None:
            raise ProvisionError(f"AmlCompute {name} still exists after delete")

    def connect(self, cluster: Cluster) -> Access:
        """Jobs through the workspace's MLClient (built on first use); no login shell."""
        launcher = AzureMLLauncher(cluster, ml_factory=lambda: self.ml_client(target_from_cluster(cluster)))
        return Access(launcher=launcher, shell=None, traits=self.traits)

    def parts(self) -> ProviderParts:
        """No optional part: Azure ML scales, heals and places the compute's nodes itself, and
        its compute carries no deadline (it scales to zero instead)."""
        return ProviderParts(traits=self.traits)

    # ------------------------------------------------------------ preflight
    def preflight(self, spec: ClusterSpec, *, ml: MLClient | None = None) -> None:
        """Size offered and unrestricted in the region (Compute RP), Azure ML family and
        regional vCPU quota free for the nodes; PreflightError listing every shortfall."""
        sku, region = _allowed_sku(spec), str(spec.region)
        target = target_from_spec(spec)
        sizes = vm_sizes(self.arm_clients(target), region)
        problems = sku_problems(sizes.get(sku.name), sku.name, region, [])
        ml = ml if ml is not None else self.ml_client(target)
        with arm_call(f"read Azure ML quotas in {region}"):
            usages = [_keyed(u) for u in aml.compute_usages(ml, region)]
        vcpus = sku.vcpus * spec.nodes  # Azure ML draws on the size family's and the regional total
        problems += quota_problems({u.name: u for u in usages}, {sku.quota_family: vcpus, TOTAL_CORES: vcpus},
                                   region, what="Azure ML quota")
        if problems:
            raise PreflightError("; ".join(problems))

    def _adopt(self, spec: ClusterSpec, target: AmlTarget, compute: AmlComputeInfo) -> Cluster:
        ours = compute.tags.get(TAG_CLUSTER) == spec.name
        if compute.size.lower() != spec.sku_row.name.lower():
            raise ConfigError(f"AmlCompute {compute.name} in workspace {target.workspace} is {compute.size}, "
                              f"not {spec.sku_row.name}: pick another --name")
        if compute.max_instances < spec.nodes and not ours:
            raise ConfigError(f"AmlCompute {compute.name} scales to {compute.max_instances} nodes, "
                              f"{spec.nodes} requested (azbench does not resize a compute it did not create)")
        if ours and compute.max_instances != spec.nodes:
            with arm_call(f"update AmlCompute {compute.name}"):
                compute = aml.create_compute(self.ml_client(target), build_compute(spec, self.owner))
        return to_cluster(spec.name, target, compute, owned=ours)


# ------------------------------------------------------------------ building blocks
def build_compute(spec: ClusterSpec, owner: str) -> AmlCompute:
    """The azure.ai.ml AmlCompute entity for `spec` (its REST body is golden-tested)."""
    from azure.ai.ml.entities import AmlCompute
    sku = _allowed_sku(spec)
    return AmlCompute(name=compute_name(spec.name), size=sku.name, location=spec.region,
                      min_instances=spec.section(AzureMLSettings).min_instances, max_instances=spec.nodes,
                      idle_time_before_scale_down=spec.section(AzureMLSettings).idle_seconds, tier="Dedicated",
                      tags=compute_tags(spec, owner))


def compute_tags(spec: ClusterSpec, owner: str) -> dict[str, str]:
    return {**spec.tags, "azbench": "1", TAG_CLUSTER: spec.name, TAG_OWNER: owner}


def compute_name(cluster: str) -> str:
    """Azure ML compute names are 2-16 characters: longer cluster names get a stable hash suffix."""
    if _COMPUTE_NAME.fullmatch(cluster):
        return cluster
    digest = hashlib.sha1(cluster.encode()).hexdigest()[:4]
    return f"{cluster[:11].rstrip('-')}-{digest}"


def preflight_checks(spec: ClusterSpec) -> list[str]:
    sku = spec.sku_row
    vcpus = sku.vcpus * spec.nodes
    ws = spec.section(AzureMLSettings).workspace or f"${WORKSPACE_ENV}"
    return [f"will check that workspace {ws} exists in its resource group",
            f"will check that {sku.name} is offered in {spec.region} and not restricted for the subscription "
            "(resource SKUs)",
            f"will check that Azure ML quota {sku.quota_family} has {vcpus:,} free vCPUs ({spec.nodes:,} x {sku.vcpus})",
            f"will check that Azure ML quota '{TOTAL_QUOTA}' has {vcpus:,} free vCPUs"]


def check_workspace(ml: MLClient, target: AmlTarget) -> None:
    """NotFoundError (exit 2) naming the workspace when it does not exist."""
    with arm_call(f"read workspace {target.workspace}"):
        try:
            aml.read_workspace(ml, target.workspace)
        except Exception as exc:
            if is_not_found(exc):
                raise NotFoundError(f"Azure ML workspace '{target.workspace}' not found in resource "
                                    f"group '{target.resource_group}'") from None
            raise


def target_from_spec(spec: ClusterSpec) -> AmlTarget:
    o = spec.section(AzureMLSettings)
    return _target(o.subscription_id, o.resource_group, o.workspace, o.arm_endpoint)


def target_from_cluster(cluster: Cluster) -> AmlTarget:
    p = cluster.properties_as(AzureMLProps)
    return _target(p.subscription_id, p.resource_group, p.workspace, p.arm_endpoint)


def target_from_env() -> AmlTarget:
    return _target(None, None, None, None)


def default_ml_client(target: AmlTarget, credential: TokenCredential | None = None, **kwargs: Any) -> MLClient:
    """An MLClient for the workspace; a non-public ARM endpoint is registered as its own cloud.
    `kwargs` go to MLClient (and on to its azure-core pipelines: policies, polling, retries)."""
    from azure.ai.ml import MLClient

    credential = credential or default_credential()
    endpoint = (target.arm_endpoint or PUBLIC_ARM).rstrip("/")
    if endpoint != PUBLIC_ARM:
        from azure.ai.ml._azure_environments import EndpointURLS as E
        kwargs["cloud"] = f"azbench-{hashlib.sha1(endpoint.encode()).hexdigest()[:10]}"
        kwargs["cloud_metadata"] = {E.AZURE_PORTAL_ENDPOINT: endpoint + "/", E.RESOURCE_MANAGER_ENDPOINT: endpoint + "/",
                                    E.ACTIVE_DIRECTORY_ENDPOINT: os.environ.get("AZURE_AUTHORITY_HOST", endpoint) + "/",
                                    E.AML_RESOURCE_ID: endpoint + "/", E.STORAGE_ENDPOINT: "core.windows.net",
                                    E.REGISTRY_DISCOVERY_ENDPOINT: endpoint + "/"}
    kwargs.setdefault("enable_telemetry", False)  # no Application Insights traffic from azbench
    kwargs.setdefault("show_progress", False)
    return MLClient(credential, target.subscription_id, target.resource_group, target.workspace, **kwargs)


def default_arm_clients(target: AmlTarget) -> ArmClients:
    """The Compute RP client's connection for the workspace's subscription (the size check)."""
    return arm_from_config(ArmClients, subscription_id=target.subscription_id, arm_endpoint=target.arm_endpoint)


# ------------------------------------------------------------------ helpers
def _allowed_sku(spec: ClusterSpec) -> GpuSku:
    """The spec's size if its catalog row is marked for Azure ML (`aml_compute` in sizes.yaml);
    ConfigError naming the sizes that are, otherwise."""
    sku = spec.sku_row
    if not sku.aml_compute:
        allowed = aml_compute_skus()
        keys = [r.key for r in allowed]
        choices = f"{', '.join(keys[:-1])} or {keys[-1]}" if len(keys) > 1 else "".join(keys) or "none is marked"
        raise ConfigError(f"size {sku.name} is not allowed for provider 'azureml' (sizes.yaml marks it "
                          f"aml_compute: false; use {choices}: {', '.join(r.name for r in allowed)})")
    return sku


def _target(sub: str | None, group: str | None, ws: str | None, endpoint: str | None) -> AmlTarget:
    sub = sub or os.environ.get("AZURE_SUBSCRIPTION_ID")
    group = group or os.environ.get(GROUP_ENV)
    ws = ws or os.environ.get(WORKSPACE_ENV)
    missing = [what for what, v in (("azureml.subscription_id or AZURE_SUBSCRIPTION_ID", sub),
                                    (f"azureml.resource_group or {GROUP_ENV}", group),
                                    (f"azureml.workspace or {WORKSPACE_ENV}", ws)) if not v]
    if missing:
        raise ConfigError(f"no Azure ML workspace: set {', '.join(missing)}")
    return AmlTarget(str(sub), str(group), str(ws), resolve_endpoint(endpoint))


def _get_compute(ml: MLClient, name: str) -> AmlComputeInfo | None:
    with arm_call(f"read AmlCompute {name}"):
        try:
            return aml.read_compute(ml, name)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise


def _keyed(row: QuotaRow) -> QuotaRow:
    """An Azure ML usage row keyed like a Compute RP one: 'Standard NDSH100v5 Family Cluster
    Dedicated vCPUs' -> 'standardNDSH100v5Family' (compared case-blind), the total -> 'cores'."""
    label = row.name
    key = TOTAL_CORES if label == TOTAL_QUOTA else label.replace("Cluster Dedicated vCPUs", "").replace(" ", "")
    return QuotaRow(name=_family_key(key), current=row.current, limit=row.limit)


def _family_key(key: str) -> str:
    for row in gpu_skus():
        if row.quota_family.lower() == key.lower():
            return row.quota_family
    return key
