"""azure-ai-ml's entities as the azureml backend's typed records: computes, jobs, compute nodes and
vCPU usages (Azure ML's quota).

The only module of the backend that reads attributes of azure-ai-ml objects; the provider, its
cluster record and the launcher see plain strings, ints and datetimes. Each reader says why a
field may be missing. Two azure-ai-ml 1.35 entities, AmlComputeNodeInfo and Usage, are built by
copying the REST body into the object (`result.__dict__.update(obj.as_dict())` in their
`_from_rest_object`, azure/ai/ml/entities/_compute/_aml_compute_node_info.py and _usage.py):
the camelCase REST keys are set and the typed snake_case attributes stay None, so their readers
take whichever is set (`_either`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from orchestrator.models import parse_utc
from orchestrator.providers.azure_shared.records import QuotaRow, text

if TYPE_CHECKING:
    from azure.ai.ml.entities import AmlComputeNodeInfo, Compute, Job, Usage


@dataclass(frozen=True)
class AmlComputeInfo:
    """A compute of the workspace. `size` is '' and the instance counts 0 for a compute that is
    no AmlCompute (another kind under the same name)."""

    name: str
    location: str | None
    size: str
    provisioning_state: str  # as the service reports it ('Succeeded', 'Creating', ...); '' if none
    min_instances: int = 0
    max_instances: int = 0
    created: datetime | None = None  # the service's creation time, where it reports one
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobInfo:
    """A job of the workspace: its name and Azure ML status ('' before the service gave one)."""

    name: str
    status: str


@dataclass(frozen=True)
class ComputeNode:
    """A node of an AmlCompute: its id and Azure ML node state (lower-case; 'unknown' if none)."""

    node_id: str
    state: str


def compute(entity: Compute) -> AmlComputeInfo:
    """ComputeOperations.get returns the Compute base class
    (azure/ai/ml/operations/_compute_operations.py); the size is AmlCompute's and
    ComputeInstance's, the instance counts AmlCompute's alone."""
    from azure.ai.ml.entities import AmlCompute, ComputeInstance
    size, low, high = "", 0, 0
    if isinstance(entity, AmlCompute):
        size, low, high = entity.size or "", entity.min_instances or 0, entity.max_instances or 0
    elif isinstance(entity, ComputeInstance):
        size = entity.size or ""
    return AmlComputeInfo(name=entity.name or "", location=entity.location, size=size,
                          provisioning_state=text(entity.provisioning_state), min_instances=int(low),
                          max_instances=int(high), created=_created(entity.created_on),
                          tags=dict(entity.tags or {}))


def job(entity: Job) -> JobInfo:
    return JobInfo(name=str(entity.name), status=str(entity.status or ""))


def node(entity: AmlComputeNodeInfo) -> ComputeNode:
    raw = vars(entity)
    state = _either(entity.node_state, raw, "nodeState")
    return ComputeNode(node_id=str(_either(entity.node_id, raw, "nodeId")), state=str(state or "unknown").lower())


def quota_row(usage: Usage) -> QuotaRow:
    """An Azure ML usage row under its REST label (e.g. 'Standard NDSH100v5 Family Cluster
    Dedicated vCPUs', its `name` a plain dict there); an absent count is 0."""
    raw = vars(usage)
    name = raw.get("name")
    label = name.get("value") if isinstance(name, dict) else name.value if name is not None else None
    current = _either(usage.current_value, raw, "currentValue")
    return QuotaRow(name=str(label or ""), current=_count(current), limit=_count(usage.limit))


def _either(value: object, raw: Mapping[str, object], rest_key: str) -> object:
    """The typed attribute's value, else the REST key the entity's __dict__ got (module doc)."""
    return value if value is not None else raw.get(rest_key)


def _count(value: object) -> int:
    return int(value) if isinstance(value, (int, float, str)) and value != "" else 0


def _created(value: object) -> datetime | None:
    """Compute.created_on is typed str; the service's value may also arrive as a datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return parse_utc(value)
