"""What a recipe is: its target, launch, container, MLPerf section and model facts as loaded from
recipes/*.yaml (`Recipe`, validated on load), and `ResolvedConfig`, the config a request resolves
to. recipes/catalog.py loads and resolves them; it re-exports these names."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from orchestrator.errors import ConfigError
from orchestrator.hardware import catalog
from orchestrator.models import FabricOverride, Frozen, ModelFacts, Parallelism
from orchestrator.paths import recipes_dir
from orchestrator.recipes.data import DataItem
from orchestrator.recipes.parallelism import LAYOUT_FIELDS, GbsRule, Placement, ScaleConfig, validate_scales

Scalar = str | int | float | bool


class Target(Frozen):
    metric: str
    value: float
    direction: str = Field("max", pattern="^(max|min)$")


class Launch(Frozen):
    command: str
    tasks_per_node: int = Field(1, ge=1)
    time_limit_min: int = Field(30, ge=1)
    env: dict[str, str] = Field(default_factory=dict)
    # The hang limit until the first training step (load, warm-up), from published logs;
    # None: the run's hang_timeout from the start.
    startup_grace_min: int | None = Field(None, ge=1)
    startup_grace_source: str = ""


class Container(Frozen):
    image: str
    image_arm64: str | None = None
    workdir: str = "/workspace"
    source: str = ""

    def for_arch(self, arch: str) -> str:
        return self.image_arm64 if arch == "arm64" and self.image_arm64 else self.image


class Mlperf(Frozen):
    framework: str
    implementation: str
    names: dict[str, str] = Field(default_factory=dict)
    gbs_rules: dict[str, GbsRule] = Field(default_factory=dict)
    gbs_source: str = ""
    container: Container
    data: list[DataItem] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_names: dict[str, str] = Field(default_factory=dict)
    scales: dict[str, list[ScaleConfig]]
    # Container paths the job backs with a fresh folder of the attempt on shared storage, each
    # with why (the implementation's mount that it mirrors).
    scratch: dict[str, str] = Field(default_factory=dict)
    # Paths the implementation names that the rehearsal must not count as opened, each with the
    # implementation's own line that shows why (an unused Hydra value, an os.path.exists check);
    # "FOLDER:PATH" waives it for one vendored implementation folder only.
    waive: dict[str, str] = Field(default_factory=dict)

    def data_used_by(self, implementation: str | None) -> list[DataItem]:
        """The data items a run from `implementation`'s container uses (None: every item)."""
        return [d for d in self.data if d.used_by(implementation)]


class Recipe(Frozen):
    name: str
    benchmark: str
    description: str
    required_runs: int = Field(ge=1)
    rulesets: list[str] = Field(default_factory=list)
    target: Target
    code_dir: str | None = None
    skus: list[str]
    min_nodes: int = Field(1, ge=1)
    max_nodes: int | None = None
    params: dict[str, Scalar] = Field(default_factory=dict)
    launch: Launch
    mlperf: Mlperf | None = None
    model: ModelFacts | None = None
    source: str = ""

    @model_validator(mode="after")
    def _check_mlperf(self) -> Recipe:
        if self.mlperf is not None:
            _validate_mlperf(self, self.mlperf)
        return self

    @property
    def code_path(self) -> Path | None:
        return recipes_dir() / self.code_dir if self.code_dir else None

    def supports(self, sku: str) -> bool:
        return catalog.lookup(sku).name in {catalog.lookup(s).name for s in self.skus}

    def scales_for(self, sku: str) -> list[ScaleConfig]:
        wanted = catalog.lookup(sku).name
        for key, configs in (self.mlperf.scales if self.mlperf else {}).items():
            if catalog.lookup(key).name == wanted:
                return sorted(configs, key=lambda c: c.nodes)
        return []


class ResolvedConfig(Frozen):
    """A request (recipe, SKU, nodes, ruleset) turned into the config that would run."""

    recipe: str
    benchmark: str
    benchmark_key: str
    ruleset: str | None
    sku: str
    sku_short: str
    cpu_arch: str
    nodes: int
    gpus_per_node: int
    gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    vp: int | None = None
    dp: int
    mbs: int | None = None
    gbs: int | None = None
    minibs: int | None = None
    grad_accum: int | None = None
    walltime_min: int
    derived: bool = False
    rule: str | None = None
    base_nodes: int | None = None
    source: str = ""
    placement: Placement | None = None
    image: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    # The submission's config (recipes/configs/<recipe>/<config>), sourced before `env`; what it
    # exports, and where every variable of the effective environment (config_env then env) came from.
    config: str | None = None
    config_files: list[str] = Field(default_factory=list)
    config_env: dict[str, str] = Field(default_factory=dict)
    env_sources: dict[str, str] = Field(default_factory=dict)
    estimate: bool = False
    network_env: dict[str, str] = Field(default_factory=dict)
    # What the cluster's fabric cannot honour of the config, set after it (parallelism.fabric_overrides).
    fabric: list[FabricOverride] = Field(default_factory=list)
    # The GEMM precision the effective environment trains in (FP4/FP8 flags), and from where.
    precision: str | None = None
    precision_source: str = ""
    target: Target
    required_runs: int
    warnings: list[str] = Field(default_factory=list)

    @property
    def parallelism(self) -> Parallelism:
        """models.Parallelism from this config's own fields of the same names (kept flat here
        for the CLI, the report and the templates that read them)."""
        return Parallelism.model_validate(self, from_attributes=True)

    @property
    def vendored(self) -> str | None:
        """`config` relative to recipes/configs/<recipe>/ (what recipes.configs' functions take:
        "<impl folder>/<file>"), None for a scale without a vendored config."""
        return self.config.split(f"recipes/configs/{self.recipe}/", 1)[1] if self.config else None


def _validate_mlperf(recipe: Recipe, spec: Mlperf) -> None:
    unknown = set(spec.gbs_rules) - set(recipe.rulesets)
    if unknown:
        raise ValueError(f"mlperf.gbs_rules names ruleset {sorted(unknown)[0]} not in rulesets")
    bad_env = set(spec.env_names) - set(LAYOUT_FIELDS)
    for configs in spec.scales.values():
        bad_env |= {f for c in configs for f in c.env_names} - set(LAYOUT_FIELDS)
    if bad_env:
        raise ValueError(f"mlperf.env_names: unknown layout field '{sorted(bad_env)[0]}'")
    for key, configs in spec.scales.items():
        if not recipe.supports(key):
            raise ValueError(f"mlperf.scales has SKU '{key}' that is not in skus")
        try:
            validate_scales(configs, catalog.lookup(key), f"{recipe.name} {key}")
        except ConfigError as exc:
            raise ValueError(exc.message) from None
