"""What `up` would do, as pure data: the plan, its resources and node groups, and the hooks of a
backend's own section of a cluster spec."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestrator.models.base import Frozen


class SpecSection(Frozen):
    """A backend's own section of a cluster spec (`azure:`, `local:`, ...), keyed by `KEY`, the
    backend's name. The hooks let code above the providers use a section without knowing its
    backend; a section overrides those its backend honours."""

    KEY: ClassVar[str] = ""

    def cost_cap(self) -> float | None:
        """The most USD per hour the spec allows its cluster to cost, or None."""
        return None

    def capped_lifetime(self, hours: float) -> SpecSection:
        """This section with the cluster's self-enforced lifetime at most `hours`."""
        return self

    def up_questions(self) -> list[str]:
        """What `up` must ask before it creates anything from this section (e.g. a wide SSH range)."""
        return []


class PlannedResource(Frozen):
    """One cloud (or local) resource a plan would create."""

    kind: str
    name: str
    count: int = 1
    properties: dict[str, str | int | bool | None] = Field(default_factory=dict)


class ScaleSetPlan(Frozen):
    """One GPU node group: an Azure VM scale set (one IB fabric) or the local node range."""

    name: str
    vms: int
    gpus: int
    racks: int | None = None


class Plan(Frozen):
    """What `up` would do. Pure data: computed without credentials or network."""

    cluster: str
    provider: str
    sku: str
    region: str | None
    nodes: int
    gpus_per_node: int
    total_gpus: int
    scale_sets: list[ScaleSetPlan]
    resources: list[PlannedResource]
    cost_per_hour_usd: float | None
    cost_is_estimate: bool = True
    preflight: list[str] = Field(default_factory=list, description="a line starting 'will check' is a read "
                                 "`up` (or --dry-run --check) makes; any other line was computed by the plan")
    warnings: list[str] = Field(default_factory=list)
    lifetime: str = Field("", description="how the cluster ends by itself (expiry, scale-down); "
                          "empty when only `azbench down` ends it")
    max_hours: float | None = Field(None, description="hours until the cluster deletes itself at the latest; "
                                    "None when nothing but `azbench down` (or sweep) ends it")

    @property
    def worst_case_usd(self) -> float | None:
        """The list-price cost if it runs until it deletes itself: cost per hour x max_hours
        (None when either is unknown)."""
        if self.cost_per_hour_usd is None or self.max_hours is None:
            return None
        return round(self.cost_per_hour_usd * self.max_hours, 2)
