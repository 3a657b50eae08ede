"""The `azure:` section of a cluster spec: subscription and group, network (VNet, SSH ingress from
the caller only), zones and fallback regions, image, scale-set size, GB200 racks, lifetime and
spending guards, ARM endpoint and polling, spot terms, boot wait.

Every value is checked here, before any credential is used: a VNet overlapping Azure's RDMA
range, an SSH range wider than /16 (IPv4) or /48 (IPv6) without allow_wide_ssh_ingress, an ARM
endpoint that is not https.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictInt, ValidationInfo, field_validator

from orchestrator.models import SpecSection
from orchestrator.providers.azure_shared.endpoints import check_arm_endpoint
from orchestrator.specs.values import WEEK_S, between, fmt_bound, parse_duration

RDMA_RESERVED = ipaddress.ip_network("172.16.0.0/16")
# The widest SSH source range accepted without azure.allow_wide_ssh_ingress, per IP version:
# an organisation's IPv4 block, or one IPv6 site (a /48 is what one site is assigned).
WIDEST_INGRESS = {4: 16, 6: 48}


def is_wide_ingress(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    """Wider than /16 (IPv4) or /48 (IPv6)."""
    return net.prefixlen < WIDEST_INGRESS[net.version]


def wide_ingress_question(settings: AzureSettings) -> str | None:
    """The question `up` asks before opening SSH to a range wider than WIDEST_INGRESS (allowed
    by azure.allow_wide_ssh_ingress), or None when the range is narrow or unset."""
    cidr = settings.ssh_ingress_cidr
    if cidr is None or not is_wide_ingress(ipaddress.ip_network(cidr)):
        return None
    net = ipaddress.ip_network(cidr)
    return f"Open SSH (port 22) on the head to {net} ({net.num_addresses:,} addresses)?"


class AzureSettings(SpecSection):
    KEY: ClassVar[str] = "azure"

    subscription_id: str | None = None
    resource_group: str | None = None
    vnet_cidr: str = "10.40.0.0/16"
    # Declared before ssh_ingress_cidr: its validator reads this one.
    allow_wide_ssh_ingress: bool = False
    ssh_ingress_cidr: str | None = None
    zones: list[str] = Field(default_factory=list)
    fallback_regions: list[str] = Field(default_factory=list)
    image: str | None = None
    admin_user: str = "azureuser"
    head_size: str = "Standard_D8s_v5"
    max_vms_per_scale_set: StrictInt = Field(100, ge=1, le=300)
    vms_per_rack: StrictInt | None = Field(None, ge=1, le=18)
    expires_hours: Annotated[float, between(0.25, 168)] = 24.0
    # Spending guards (issue 15): the cap refuses a plan before any credential is used; the head's
    # expiry agent deletes the cluster at azbench-expires or after idle_minutes with no Slurm job.
    max_cost_per_hour: Annotated[float, between(0.01, 1_000_000)] | None = None
    idle_minutes: StrictInt | None = Field(None, ge=5, le=7 * 24 * 60)
    self_expiry: bool = True
    # The head identity's role for self-expiry: "custom" (read and delete its own group only,
    # roles.EXPIRY_ACTIONS; `up` needs Microsoft.Authorization/roleDefinitions/write) or the
    # documented fallback "contributor" (built-in Contributor on the group: broader).
    self_expiry_role: Literal["custom", "contributor"] = "custom"
    arm_endpoint: str | None = None
    polling_interval: Annotated[float, between(0.01, 600, " seconds")] = 30.0
    # Seconds one `up` may spend waiting out ARM's 429s (Retry-After) in all (azure_shared/throttle.py).
    throttle_budget_s: Annotated[float, between(1, 24 * 3600, " seconds")] = 1200.0
    # -- spot capacity (evictable GPU nodes; the head is always pay-as-you-go) --
    priority: Literal["regular", "spot"] = "regular"
    eviction_policy: Literal["delete", "deallocate"] = "deallocate"
    max_price: float = Field(-1.0, description="USD per VM-hour; -1 = pay up to pay-as-you-go")
    spot_restore_timeout: Annotated[int, between(0, WEEK_S, " seconds")] = Field(
        1800, description="seconds to wait for evicted capacity")

    _spot_durations = field_validator("spot_restore_timeout", mode="before")(
        classmethod(lambda cls, v: parse_duration(v)))

    @field_validator("max_price")
    @classmethod
    def _max_price(cls, value: float) -> float:
        if value != -1 and not 0 < value <= 10_000:  # NaN fails both tests
            raise ValueError(f"max_price must be -1 (up to pay-as-you-go) or between 0 and 10000 "
                             f"USD per VM-hour, got {fmt_bound(value)}")
        return value
    # After ARM: how long `up` waits for cloud-init and Slurm on the VMs (0: do not wait).
    boot_timeout_s: Annotated[float, between(0, 86_400, " seconds")] = 1800.0

    @field_validator("arm_endpoint")
    @classmethod
    def _arm(cls, value: str | None) -> str | None:
        return None if value is None else check_arm_endpoint(value)

    @field_validator("vnet_cidr")
    @classmethod
    def _vnet(cls, value: str) -> str:
        try:
            net = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"'{value}' is not a CIDR such as 10.40.0.0/16") from None
        if net.overlaps(RDMA_RESERVED):
            raise ValueError(f"{value} overlaps 172.16.0.0/16, which Azure's RDMA network reserves")
        return str(net)

    @field_validator("ssh_ingress_cidr")
    @classmethod
    def _ingress(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        try:
            net = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"'{value}' is not a CIDR such as 203.0.113.7/32") from None
        if is_wide_ingress(net) and not info.data.get("allow_wide_ssh_ingress", False):
            raise ValueError(f"{net} would open SSH to {net.num_addresses:,} addresses (wider than "
                             f"/{WIDEST_INGRESS[net.version]}); use your own address, e.g. 203.0.113.7/32, "
                             "or set azure.allow_wide_ssh_ingress: true")
        return str(net)

    def cost_cap(self) -> float | None:
        return self.max_cost_per_hour

    def capped_lifetime(self, hours: float) -> AzureSettings:
        return self.model_copy(update={"expires_hours": min(self.expires_hours, hours)})

    def up_questions(self) -> list[str]:
        """Opening SSH to a range wider than WIDEST_INGRESS (allowed by allow_wide_ssh_ingress)."""
        question = wide_ingress_question(self)
        return [question] if question else []
