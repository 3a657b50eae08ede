"""What users write: ClusterSpec, RunSpec, RetryPolicy, HealthPolicy, from YAML and CLI flags.

Unknown keys are errors (extra="forbid") reported as `file:line: unknown key 'x'`; flags
override the file, and a bad flag value is reported against the flag.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.clusters import catalog, providers
from orchestrator.clusters.regions import check_region
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

RDMA_RESERVED = ipaddress.ip_network("172.16.0.0/16")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")


def parse_duration(value: Any) -> int:
    """Seconds from an int or a string like '90s', '30m', '2h', '1d'."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30m")
    if isinstance(value, (int, float)):
        return int(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"'{value}' is not a duration (use e.g. 90s, 30m, 2h)")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return int(number * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])


class LocalOptions(Frozen):
    cpus_per_node: StrictInt = Field(1, ge=1, le=64)
    slurmd_timeout: StrictInt = Field(10, ge=5, le=600)


class SshOptions(Frozen):
    host: str
    port: StrictInt = Field(22, ge=1, le=65535)
    user: str
    key_path: Path
    known_hosts: Path | None = None
    host_key: str | None = None
    partition: str | None = None
    workdir: str = Field(description="a directory every node sees (shared filesystem)")
    env: dict[str, str] = Field(default_factory=dict)


class AzureOptions(Frozen):
    subscription_id: str | None = None
    resource_group: str | None = None
    vnet_cidr: str = "10.40.0.0/16"
    ssh_ingress_cidr: str | None = None
    zones: list[str] = Field(default_factory=list)
    fallback_regions: list[str] = Field(default_factory=list)
    image: str | None = None
    admin_user: str = "azureuser"
    head_size: str = "Standard_D8s_v5"
    max_vms_per_scale_set: StrictInt = Field(100, ge=1, le=300)
    vms_per_rack: StrictInt | None = Field(None, ge=1, le=18)
    expires_hours: float = Field(24.0, gt=0)
    # Spending guards (issue 15): the cap refuses a plan before any credential is used; the head's
    # expiry agent deletes the cluster at azbench-expires or after idle_minutes with no Slurm job.
    max_cost_per_hour: float | None = Field(None, gt=0)
    idle_minutes: StrictInt | None = Field(None, ge=5, le=7 * 24 * 60)
    self_expiry: bool = True
    arm_endpoint: str | None = None
    polling_interval: float = Field(30.0, gt=0)
    # Seconds one `up` may spend waiting out ARM's 429s (Retry-After) in all (azure/throttle.py).
    throttle_budget_s: float = Field(1200.0, gt=0)
    # -- spot capacity (evictable GPU nodes; the head is always pay-as-you-go) --
    priority: Literal["regular", "spot"] = "regular"
    eviction_policy: Literal["delete", "deallocate"] = "deallocate"
    max_price: float = Field(-1.0, description="USD per VM-hour; -1 = pay up to pay-as-you-go")
    spot_restore_timeout: int = Field(1800, description="seconds to wait for evicted capacity")

    _spot_durations = field_validator("spot_restore_timeout", mode="before")(
        classmethod(lambda cls, v: parse_duration(v)))

    @field_validator("max_price")
    @classmethod
    def _max_price(cls, value: float) -> float:
        if value != -1 and not value > 0:
            raise ValueError(f"max_price must be -1 (up to pay-as-you-go) or > 0, got {value}")
        return value
    # After ARM: how long `up` waits for cloud-init and Slurm on the VMs (0: do not wait).
    boot_timeout_s: float = Field(1800.0, ge=0)

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
    def _ingress(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ValueError(f"'{value}' is not a CIDR such as 203.0.113.7/32") from None


class AzureMLOptions(Frozen):
    workspace: str | None = None
    resource_group: str | None = None
    subscription_id: str | None = None
    min_instances: StrictInt = Field(0, ge=0)
    idle_seconds: StrictInt = Field(900, ge=0)


class ClusterSpec(Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,38}$")
    provider: str = "local"
    sku: str | None = None
    nodes: StrictInt = Field(gt=0, le=100_000)
    region: str | None = None
    local: LocalOptions = Field(default_factory=LocalOptions)
    ssh: SshOptions | None = None
    azure: AzureOptions = Field(default_factory=AzureOptions)
    azureml: AzureMLOptions = Field(default_factory=AzureMLOptions)
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("sku")
    @classmethod
    def _sku(cls, value: str | None) -> str | None:
        return None if value is None else catalog.lookup(value).name

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        return None if value is None else check_region(value)

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        if value not in providers.PROVIDERS:
            raise ValueError(f"unknown provider '{value}' (choose from {', '.join(providers.PROVIDERS)})")
        return value

    @model_validator(mode="after")
    def _provider_rules(self) -> ClusterSpec:
        sku = providers.check_spec(self.provider, self.sku, self.region, {"ssh": self.ssh})
        object.__setattr__(self, "sku", sku)
        return self

    @property
    def sku_row(self) -> catalog.GpuSku:
        return catalog.lookup(self.sku or "Local_CPU")


class RetryPolicy(Frozen):
    on: list[Literal["infra"]] = Field(default_factory=lambda: list[Literal["infra"]](["infra"]))
    max_attempts: StrictInt = Field(3, ge=1, le=100)
    max_duration: int = 6 * 3600
    resume: Literal["checkpoint", "restart"] = "checkpoint"
    hang_timeout: int = 600
    backoff_s: float = Field(2.0, ge=0)

    _durations = field_validator("max_duration", "hang_timeout", mode="before")(
        classmethod(lambda cls, v: parse_duration(v)))


class HealthPolicy(Frozen):
    enabled: bool = True
    busbw_warn_fraction: float = Field(0.9, gt=0, le=1)
    busbw_fail_fraction: float = Field(0.75, gt=0, le=1)
    timeout: int = 300

    _durations = field_validator("timeout", mode="before")(
        classmethod(lambda cls, v: parse_duration(v)))


class RunSpec(Frozen):
    recipe: str
    cluster: str | None = None
    nodes: list[StrictInt] = Field(default_factory=lambda: [1], min_length=1)
    repeats: StrictInt = Field(1, ge=1, le=1000)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    health: HealthPolicy = Field(default_factory=HealthPolicy)
    time_limit_min: StrictInt = Field(30, ge=1)

    @field_validator("nodes")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        bad = [n for n in value if n <= 0]
        if bad:
            raise ValueError(f"node counts must be positive, got {bad[0]}")
        return value


def load_cluster_spec(path: Path | None, overrides: dict[str, Any] | None = None) -> ClusterSpec:
    """ClusterSpec from a YAML file (optional) with CLI flag values layered on top."""
    return _load(ClusterSpec, path, overrides)


def load_run_spec(path: Path | None, overrides: dict[str, Any] | None = None) -> RunSpec:
    return _load(RunSpec, path, overrides)


def parse_node_list(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; ConfigError naming the bad item."""
    out: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.lstrip("-").isdigit():
            raise ConfigError(f"--nodes: '{item}' is not a whole number (use e.g. 1,2,4)")
        if int(item) <= 0:
            raise ConfigError(f"--nodes: node counts must be positive, got {item}")
        out.append(int(item))
    return out


def _load(model: type[Frozen], path: Path | None, overrides: dict[str, Any] | None) -> Any:
    data: Any = {}
    lines: dict[tuple[Any, ...], int] = {}
    if path is not None:
        data, lines = load_yaml(path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}:1: expected a mapping of keys at the top level")
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    merged = {**data, **flags}
    try:
        return model.model_validate(merged)
    except ConfigError as exc:  # raised by lookups inside validators
        raise exc from None
    except ValidationError as exc:
        loc = exc.errors()[0].get("loc", ())
        if loc and loc[0] in flags:
            return _raise_flag_error(exc, str(loc[0]))
        raise validation_error_to_config_error(exc, str(path or "spec"), lines) from None


def _raise_flag_error(exc: ValidationError, flag: str) -> Any:
    msg = exc.errors()[0].get("msg", "invalid value").removeprefix("Value error, ")
    raise ConfigError(f"--{flag.replace('_', '-')}: {msg}") from None
