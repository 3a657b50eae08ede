"""What users write to run a recipe: RunSpec with its RetryPolicy and HealthPolicy, from YAML
and CLI flags (specs.values.load_spec), and the `--nodes 1,2,4` list."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StrictInt, field_validator

from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.specs.values import (
    MAX_NODES,
    WEEK_S,
    NodeCount,
    Params,
    Seconds,
    between,
    load_spec,
    parse_duration,
)


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
    # provider can (its healer part), at most this many per gate and per hour.
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


def load_run_spec(path: Path | None, overrides: Mapping[str, object] | None = None) -> RunSpec:
    """RunSpec from a YAML file (optional) with CLI flag values layered on top."""
    return load_spec(RunSpec, path, overrides)


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
