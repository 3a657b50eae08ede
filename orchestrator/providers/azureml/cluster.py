"""The Azure ML cluster record: one `to_cluster` for the compute `up` made or adopted and the one
`describe` reads back, and the PROVISIONING record `down` can work from.

The record carries the workspace (subscription, resource group, workspace, ARM endpoint) that
`down` and the launcher reach the compute through, the compute's name, and whether azbench
created it (`owned`; None in the provisional record, where `down` reads the compute's tags).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.hardware.catalog import find
from orchestrator.models import Cluster, ClusterState, Plan
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.providers.azureml.records import AmlComputeInfo

WORKDIR = "/tmp/azbench"  # node-local: each job links its code and checkpoint mount under it


@dataclass(frozen=True)
class AmlTarget:
    """One workspace: where the compute lives and where jobs go."""

    subscription_id: str
    resource_group: str
    workspace: str
    arm_endpoint: str | None = None


def to_cluster(name: str, target: AmlTarget, compute: AmlComputeInfo, *, owned: bool) -> Cluster:
    """The Cluster for an AmlCompute of workspace `target`. Its creation time is the compute's
    own where the service reports one."""
    size = compute.size or "unknown"
    state = compute.provisioning_state.split(".")[-1].lower()
    cstate = (ClusterState.FAILED if state == "failed" else
              ClusterState.READY if state in ("succeeded", "") else ClusterState.PROVISIONING)
    row = find(size)
    price = row.price_per_hour_usd if row is not None else None
    nodes = compute.max_instances
    props = AzureMLProps(workspace=target.workspace, resource_group=target.resource_group,
                         subscription_id=target.subscription_id, arm_endpoint=target.arm_endpoint,
                         compute=compute.name, owned=owned, min_instances=compute.min_instances)
    return Cluster(name=name, provider="azureml", sku=size, nodes=nodes, region=compute.location,
                   state=cstate, workdir=WORKDIR,
                   cost_per_hour_usd=round(price * nodes, 2) if price else None,
                   properties=props, **({"created_at": compute.created} if compute.created else {}))


def provisional(name: str, plan: Plan, target: AmlTarget, compute: str) -> Cluster:
    """PROVISIONING: the workspace and compute name `down` needs; ownership still unknown."""
    props = AzureMLProps(workspace=target.workspace, resource_group=target.resource_group,
                         subscription_id=target.subscription_id, arm_endpoint=target.arm_endpoint,
                         compute=compute, owned=None)
    return Cluster(name=name, provider="azureml", sku=plan.sku, nodes=plan.nodes, region=plan.region,
                   state=ClusterState.PROVISIONING, workdir=WORKDIR,
                   cost_per_hour_usd=plan.cost_per_hour_usd, properties=props)

