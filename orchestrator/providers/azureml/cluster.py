"""The Azure ML cluster record: one `to_cluster` for the compute `up` made or adopted and the one
`describe` reads back, and the PROVISIONING record `down` can work from.

The record carries the workspace (subscription, resource group, workspace, ARM endpoint) that
`down` and the launcher reach the compute through, the compute's name, and whether azbench
created it (`owned`; None in the provisional record, where `down` reads the compute's tags).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from orchestrator.hardware.catalog import lookup
from orchestrator.errors import NotFoundError
from orchestrator.models import Cluster, ClusterState, Plan, parse_utc
from orchestrator.providers.azureml.props import AzureMLProps

WORKDIR = "/tmp/azbench"  # node-local: each job links its code and checkpoint mount under it


def to_cluster(name: str, target: Any, compute: Any, *, owned: bool) -> Cluster:
    """The Cluster for an AmlCompute entity in workspace `target` (an AmlTarget). Its creation
    time is the compute's own where the service reports one."""
    size = str(getattr(compute, "size", "") or "unknown")
    state = str(getattr(compute, "provisioning_state", "") or "")
    state = state.split(".")[-1].lower()
    cstate = (ClusterState.FAILED if state == "failed" else
              ClusterState.READY if state in ("succeeded", "") else ClusterState.PROVISIONING)
    try:
        price = lookup(size).price_per_hour_usd
    except NotFoundError:
        price = None
    nodes = int(getattr(compute, "max_instances", 0) or 0)
    created = _created(getattr(compute, "created_on", None))
    props = AzureMLProps(workspace=target.workspace, resource_group=target.resource_group,
                         subscription_id=target.subscription_id, arm_endpoint=target.arm_endpoint,
                         compute=compute.name, owned=owned, min_instances=int(compute.min_instances or 0))
    return Cluster(name=name, provider="azureml", sku=size, nodes=nodes, region=compute.location,
                   state=cstate, workdir=WORKDIR,
                   cost_per_hour_usd=round(price * nodes, 2) if price else None,
                   properties=props, **({"created_at": created} if created else {}))


def provisional(name: str, plan: Plan, target: Any, compute: str) -> Cluster:
    """PROVISIONING: the workspace and compute name `down` needs; ownership still unknown."""
    props = AzureMLProps(workspace=target.workspace, resource_group=target.resource_group,
                         subscription_id=target.subscription_id, arm_endpoint=target.arm_endpoint,
                         compute=compute, owned=None)
    return Cluster(name=name, provider="azureml", sku=plan.sku, nodes=plan.nodes, region=plan.region,
                   state=ClusterState.PROVISIONING, workdir=WORKDIR,
                   cost_per_hour_usd=plan.cost_per_hour_usd, properties=props)


def _created(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return parse_utc(value)
