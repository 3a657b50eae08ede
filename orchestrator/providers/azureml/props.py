"""What an Azure ML cluster records keep beyond the common fields: AzureMLProps, `Cluster.properties` for
provider 'azureml' (read it with `cluster.properties_as(AzureMLProps)`)."""

from __future__ import annotations

from typing import Literal

from orchestrator.models import ProviderProps


class AzureMLProps(ProviderProps):
    """An Azure ML compute: its workspace (what `down` and the launcher need), its name, and
    whether azbench created it (`owned`: None until `up` knows; `down` then reads its tags)."""

    kind: Literal["azureml"] = "azureml"
    subscription_id: str | None = None
    resource_group: str | None = None
    workspace: str | None = None
    arm_endpoint: str | None = None
    compute: str | None = None
    owned: bool | None = None
    min_instances: int | None = None
