"""What an Azure cluster records keep beyond the common fields: AzureProps, `Cluster.properties` for
provider 'azure' (read it with `cluster.properties_as(AzureProps)`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import Field, field_validator

from orchestrator.models import ProviderProps, parse_utc


class AzureProps(ProviderProps):
    """An Azure cluster: where its resources live (what `down` needs to find them), its head's
    addresses, its scale sets, the node image, its tags (owner, expiry) and its spot terms.
    `priority` is "regular" or "spot"; `eviction_policy` and `spot_restore_timeout` (seconds)
    are set for spot only."""

    kind: Literal["azure"] = "azure"
    subscription_id: str | None = None
    resource_group: str | None = None
    arm_endpoint: str | None = None
    head_ip: str | None = None
    head_private_ip: str | None = None
    scale_sets: list[str] = Field(default_factory=list)
    image: str | None = None
    owner: str | None = None
    expires: str | None = Field(None, description="the azbench-expires tag: %Y-%m-%dT%H:%M:%SZ")
    priority: Literal["regular", "spot"] = "regular"
    eviction_policy: str | None = None
    spot_restore_timeout: int | None = None
    # VMs per NVLink rack of the GPU scale sets (GB200 only; the azbench-rack-vms tag of the sets)
    vms_per_rack: int | None = None
    head_size: str | None = None  # the head VM's size, as `up` made it or ARM said (None: not read)
    # What another writer did to the cluster while the `up` that wrote this record ran, and what
    # that `up` did about it (up.UpRun._restore_tags): `up` records each as an event.
    interference: list[str] = Field(default_factory=list)

    @field_validator("scale_sets", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        """Older records joined the scale-set names with commas."""
        return [s for s in value.split(",") if s] if isinstance(value, str) else value

    def deadline(self) -> datetime | None:
        return parse_utc(self.expires)

    def with_deadline(self, when: datetime) -> AzureProps:
        return self.model_copy(update={"expires": when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})

    @property
    def is_spot(self) -> bool:
        return self.priority == "spot"

    def rack_size(self) -> int | None:
        return self.vms_per_rack

    def principal(self) -> str | None:
        return self.owner

    def up_notes(self) -> tuple[str, ...]:
        return tuple(self.interference)
