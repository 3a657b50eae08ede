"""azure-ai-ml's entities as the azureml backend's typed records: vCPU usages (Azure ML's quota).

The only module of the backend that reads attributes of azure-ai-ml objects; the provider and the
launcher see plain strings and ints. Each reader says why a field may be missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.providers.azure_shared.records import QuotaRow

if TYPE_CHECKING:
    from azure.ai.ml.entities import Usage


def quota_row(usage: Usage) -> QuotaRow:
    """An Azure ML usage row under its REST label (e.g. 'Standard NDSH100v5 Family Cluster
    Dedicated vCPUs'). azure-ai-ml 1.35's Usage._from_rest_object copies the REST body into the
    entity (`result.__dict__.update(obj.as_dict())`, azure/ai/ml/entities/_compute/_usage.py):
    the camelCase keys are set, `name` is a plain dict, and the snake_case attributes stay None.
    Whichever is set is read; an absent count is 0."""
    raw = vars(usage)
    name = raw.get("name")
    label = name.get("value") if isinstance(name, dict) else name.value if name is not None else None
    current = usage.current_value if usage.current_value is not None else raw.get("currentValue")
    limit = usage.limit if usage.limit is not None else raw.get("limit")
    return QuotaRow(name=str(label or ""), current=int(current or 0), limit=int(limit or 0))
