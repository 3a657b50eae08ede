"""What users write: ClusterSpec, RunSpec, RetryPolicy, HealthPolicy, from YAML and CLI flags.

Unknown keys are errors (extra="forbid") reported as `file:line: unknown key 'x'`; flags
override the file, and a bad flag value is reported against the flag.
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.hardware import catalog, providers
from orchestrator.hardware.regions import check_region
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

RDMA_RESERVED = ipaddress.ip_network("172.16.0.0/16")
# The widest SSH source range accepted without azure.allow_wide_ssh_ingress, per IP version:
# an organisation's IPv4 block, or one IPv6 site (a /48 is what one site is assigned).
WIDEST_INGRESS = {4: 16, 6: 48}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")


def parse_duration(value: Any) -> int:
    """Seconds from an int or a string like '90s', '30m', '2h', '1d'; finite, or ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30m")
    if isinstance(value, (int, float)):
        number, unit = float(value) if isinstance(value, float) else value, "s"
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{str(value)[:40]!r} is not a duration (use e.g. 90s, 30m, 2h)")
        number, unit = float(match.group(1)), match.group(2) or "s"
    seconds = number * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{str(value)[:40]!r} is not a finite duration")
    return int(seconds)


def _fmt(value: float) -> str:
    """A bound or value for a message: 168, 0.25, 1e+300, inf (never an OverflowError)."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value) if abs(value) < 10**15 else f"{value:.3e}" if abs(value) < 10**300 else "a huge number"
        return text
    return f"{value:g}"


def between(lo: float, hi: float, unit: str = "") -> AfterValidator:
    """A pydantic check that a number is finite and lo <= value <= hi, saying both bounds:
    `expires_hours: must be between 0.25 and 168, got inf` (ConfigError adds file:line)."""
    def check(value: Any) -> Any:
        finite = not isinstance(value, float) or math.isfinite(value)
        if not (finite and lo <= value <= hi):
            raise ValueError(f"must be between {_fmt(lo)} and {_fmt(hi)}{unit}, got {_fmt(value)}")
        return value
    return AfterValidator(check)


# The bounds every number a user writes is held to (README "Limits").
MAX_NODES = 100_000
WEEK_S = 7 * 24 * 3600
NodeCount = Annotated[StrictInt, between(1, MAX_NODES)]
Seconds = Annotated[int, between(1, 30 * 24 * 3600, " seconds")]


def _finite_params(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if not key:
            raise ValueError("a parameter needs a name")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{key} must be a finite number, got {item}")
    return value


Params = Annotated[dict[str, str | int | float | bool], AfterValidator(_finite_params)]


def check_arm_endpoint(value: str) -> str:
    """An Azure Resource Manager endpoint: an https URL with a host (sovereign clouds have their
    own, e.g. https://management.usgovcloudapi.net); ValueError saying what is wrong."""
    from urllib.parse import urlsplit
    shown = value if len(value) <= 60 else value[:57] + "..."
    try:
        url = urlsplit(value)
        url.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError as exc:
        raise ValueError(f"arm endpoint {shown!r} is not a URL: {exc}") from None
    if url.scheme != "https" or not url.hostname or any(c.isspace() for c in value) or url.username:
        raise ValueError(f"arm endpoint {shown!r} is not an https URL such as "
                         "https://management.azure.com")
    return value


def is_wide_ingress(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    """Wider than /16 (IPv4) or /48 (IPv6)."""
    return net.prefixlen < WIDEST_INGRESS[net.version]


def wide_ingress_question(spec: ClusterSpec) -> str | None:
    """The question `up` asks before opening SSH to a range wider than WIDEST_INGRESS (allowed
    by azure.allow_wide_ssh_ingress), or None when the range is narrow or unset."""
    cidr = spec.azure.ssh_ingress_cidr
    if cidr is None or not is_wide_ingress(ipaddress.ip_network(cidr)):
        return None
    net = ipaddress.ip_network(cidr)
    return f"Open SSH (port 22) on the head to {net} ({net.num_addresses:,} addresses)?"


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
    arm_endpoint: str | None = None
    polling_interval: Annotated[float, between(0.01, 600, " seconds")] = 30.0
    # Seconds one `up` may spend waiting out ARM's 429s (Retry-After) in all (azure/throttle.py).
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
                             f"USD per VM-hour, got {_fmt(value)}")
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


class AzureMLOptions(Frozen):
    workspace: str | None = None
    resource_group: str | None = None
    subscription_id: str | None = None
    min_instances: Annotated[StrictInt, between(0, MAX_NODES)] = 0
    idle_seconds: Annotated[StrictInt, between(0, WEEK_S, " seconds")] = 900


class ClusterSpec(Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,38}$")
    provider: str = "local"
    sku: str | None = None
    nodes: NodeCount
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
    max_duration: Seconds = 6 * 3600
    resume: Literal["checkpoint", "restart"] = "checkpoint"
    hang_timeout: Annotated[int, between(1, WEEK_S, " seconds")] = 600  # steady state: the
    # longest silence between two training steps. Until the first step (load, warm-up), None
    # takes the recipe's launch.startup_grace_min, else hang_timeout.
    startup_grace: Annotated[int, between(1, WEEK_S, " seconds")] | None = None
    backoff_s: Annotated[float, between(0, 3600, " seconds")] = 2.0

    _durations = field_validator("max_duration", "hang_timeout", "startup_grace", mode="before")(
        classmethod(lambda cls, v: None if v is None else parse_duration(v)))


class HealthPolicy(Frozen):
    enabled: bool = True
    busbw_warn_fraction: Annotated[float, between(0.01, 1)] = 0.9
    busbw_fail_fraction: Annotated[float, between(0.01, 1)] = 0.75
    timeout: Annotated[int, between(1, 86_400, " seconds")] = 300
    # Self-healing (runs/fleet_replace.py): replace the nodes the gate drains, where the
    # provider can (capability replaces_nodes), at most this many per gate and per hour.
    replace: bool = False
    max_replacements: Annotated[int, between(0, 10_000)] = 4
    max_replacements_per_hour: Annotated[int, between(0, 10_000)] = 8

    _durations = field_validator("timeout", mode="before")(
        classmethod(lambda cls, v: parse_duration(v)))


class RunSpec(Frozen):
    recipe: str
    cluster: str | None = None
    nodes: list[NodeCount] = Field(default_factory=lambda: [1], min_length=1, max_length=1000)
    repeats: StrictInt = Field(1, ge=1, le=1000)
    params: Params = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    health: HealthPolicy = Field(default_factory=HealthPolicy)
    time_limit_min: Annotated[StrictInt, between(1, WEEK_S // 60, " minutes")] = 30


def load_cluster_spec(path: Path | None, overrides: dict[str, Any] | None = None) -> ClusterSpec:
    """ClusterSpec from a YAML file (optional) with CLI flag values layered on top."""
    return _load(ClusterSpec, path, overrides)


def load_run_spec(path: Path | None, overrides: dict[str, Any] | None = None) -> RunSpec:
    return _load(RunSpec, path, overrides)


_WHOLE = re.compile(r"-?[0-9]{1,18}")  # ASCII digits only: '²'.isdigit() is True, int('²') fails


def parse_node_list(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; ConfigError naming the bad item."""
    out: list[int] = []
    items = text.split(",")
    if len(items) > 1000:
        raise ConfigError(f"--nodes: at most 1000 node counts, got {len(items)}")
    for item in items:
        item = item.strip()
        if not _WHOLE.fullmatch(item):
            raise ConfigError(f"--nodes: {item[:20]!r} is not a whole number (use e.g. 1,2,4)")
        if not 1 <= int(item) <= MAX_NODES:
            raise ConfigError(f"--nodes: node counts must be between 1 and {MAX_NODES}, got {item}")
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
    msg = " ".join(msg.split())
    raise ConfigError(f"--{flag.replace('_', '-')}: {msg}") from None
