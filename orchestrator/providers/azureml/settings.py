"""The `azureml:` section of a cluster spec: the workspace and the compute's scale-down rules."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import StrictInt, field_validator

from orchestrator.models import SpecSection
from orchestrator.providers.azure_shared.endpoints import check_arm_endpoint
from orchestrator.specs.values import MAX_NODES, WEEK_S, between


class AzureMLSettings(SpecSection):
    KEY: ClassVar[str] = "azureml"

    workspace: str | None = None
    resource_group: str | None = None
    subscription_id: str | None = None
    min_instances: Annotated[StrictInt, between(0, MAX_NODES)] = 0
    idle_seconds: Annotated[StrictInt, between(0, WEEK_S, " seconds")] = 900
    arm_endpoint: str | None = None  # sovereign clouds; else AZURE_RESOURCE_MANAGER_ENDPOINT

    @field_validator("arm_endpoint")
    @classmethod
    def _arm(cls, value: str | None) -> str | None:
        return None if value is None else check_arm_endpoint(value)
