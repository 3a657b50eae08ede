"""What a pipeline file says: the PipelineSpec (cluster, SKUs, matrix, policies, baseline) and
the cluster and run specs it expands to. Pure; errors name `file:line`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.specs.values import NodeCount, Params, WEEK_S, between, parse_duration
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.specs.run import HealthPolicy, RetryPolicy, RunSpec
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.pipelines.baselines import Tolerances
from orchestrator.yamlio import load_yaml, validation_error_to_config_error
from orchestrator.hardware.catalog import lookup


class MatrixEntry(Frozen):
    recipe: str
    nodes: list[NodeCount] = Field(default_factory=lambda: [1], min_length=1, max_length=1000)
    repeats: StrictInt = Field(1, ge=1, le=100)
    params: Params = Field(default_factory=dict)


class BaselinePolicy(Frozen):
    """Compare with baseline `name`; `update` says when this pipeline's results replace it."""

    name: str | None = None
    update: Literal["never", "if-missing", "on-pass", "always"] = "if-missing"
    tolerances: Tolerances = Field(default_factory=Tolerances)


class ArchivePolicy(Frozen):
    """Push raw logs and a store snapshot to Azure Blob Storage after the report (results.archive);
    off unless both are set. The key comes from $AZURE_STORAGE_KEY, else az login / identity."""

    account: str | None = Field(None, description="https://ACCOUNT.blob.core.windows.net")
    container: str | None = None


class PipelineSpec(Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    cluster: ClusterSpec
    skus: list[str] = Field(default_factory=list, description="one cluster per SKU, in turn")
    matrix: list[MatrixEntry] = Field(min_length=1, max_length=1000)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    health: HealthPolicy = Field(default_factory=HealthPolicy)
    time_limit_min: Annotated[StrictInt, between(1, WEEK_S // 60, " minutes")] | None = None
    baseline: BaselinePolicy = Field(default_factory=BaselinePolicy)
    archive: ArchivePolicy = Field(default_factory=ArchivePolicy)
    timeout: Annotated[int, between(60, WEEK_S, " seconds")] = Field(
        6 * 3600, description="the whole pipeline; sets the expires tag")

    _duration = field_validator("timeout", mode="before")(classmethod(lambda cls, v: parse_duration(v)))

    @model_validator(mode="before")
    @classmethod
    def _cluster_defaults(cls, data: Any) -> Any:
        """cluster.name defaults to the pipeline's name, cluster.nodes to the largest scale."""
        if not isinstance(data, dict) or not isinstance(data.get("cluster", {}), dict):
            return data
        cluster = dict(data.get("cluster") or {})
        cluster.setdefault("name", data.get("name"))
        scales = [n for e in data.get("matrix") or [] if isinstance(e, dict)
                  for n in e.get("nodes") or [1] if isinstance(n, int)]
        cluster.setdefault("nodes", max(scales, default=1))
        return {**data, "cluster": cluster}


def load_pipeline_spec(path: Path) -> PipelineSpec:
    """PipelineSpec from YAML; errors name `file:line`."""
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of keys at the top level")
    try:
        return PipelineSpec.model_validate(data)
    except ConfigError:
        raise
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None


def cluster_specs(spec: PipelineSpec) -> list[ClusterSpec]:
    """One ClusterSpec per SKU (named <cluster>-<sku>), expiring one hour after the timeout."""
    expires_h = spec.timeout / 3600 + 1.0
    base, own = spec.cluster, spec.cluster.own_section()
    if own is not None:
        base = base.with_section(own.capped_lifetime(expires_h))
    if not spec.skus:
        return [base]
    out = []
    for sku in spec.skus:
        row = lookup(sku)
        tag = (row.aliases[0] if row.aliases else row.name).lower().replace("_", "-")
        data = base.model_dump() | {"sku": row.name, "name": f"{base.name}-{tag}"[:39].rstrip("-")}
        out.append(ClusterSpec.model_validate(data))
    return out


def run_specs(spec: PipelineSpec, cluster: str) -> list[RunSpec]:
    extra = {"time_limit_min": spec.time_limit_min} if spec.time_limit_min else {}
    return [RunSpec(recipe=e.recipe, cluster=cluster, nodes=list(e.nodes), repeats=e.repeats,
                    params=dict(e.params), retry=spec.retry, health=spec.health, **extra)
            for e in spec.matrix]
