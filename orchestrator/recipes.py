"""The recipe catalog: load recipes/*.yaml, check a request against a recipe, build its command.

Knows nothing of Azure or Slurm: it turns (recipe, SKU, nodes, params) into the command line
and environment that a launcher runs on every node.
"""

from __future__ import annotations

import shlex
import string
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator import catalog
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.resources import recipes_dir
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

Scalar = str | int | float | bool


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(Strict):
    metric: str
    value: float
    direction: str = Field("max", pattern="^(max|min)$")


class Launch(Strict):
    command: str
    tasks_per_node: int = Field(1, ge=1)
    time_limit_min: int = Field(30, ge=1)
    env: dict[str, str] = Field(default_factory=dict)


class Recipe(Strict):
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
    source: str = ""

    @property
    def code_path(self) -> Path | None:
        return recipes_dir() / self.code_dir if self.code_dir else None

    def supports(self, sku: str) -> bool:
        return catalog.lookup(sku).name in {catalog.lookup(s).name for s in self.skus}


def list_recipes() -> list[Recipe]:
    return [get_recipe(p.stem) for p in sorted(recipes_dir().glob("*.yaml"))]


@lru_cache(maxsize=None)
def get_recipe(name: str) -> Recipe:
    path = recipes_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in recipes_dir().glob("*.yaml")))
        raise NotFoundError(f"unknown recipe '{name}'", hint=f"known recipes: {known}")
    data, lines = load_yaml(path)
    try:
        return Recipe.model_validate({**(data or {}), "source": str(path)})
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None


def check_request(recipe: Recipe, sku: str, nodes: int, cluster_nodes: int | None = None) -> None:
    """ConfigError when the recipe cannot run on `nodes` x `sku`."""
    if not recipe.supports(sku):
        raise ConfigError(f"recipe '{recipe.name}' does not support {sku}",
                          hint=f"supported: {', '.join(recipe.skus)}")
    if nodes < recipe.min_nodes or (recipe.max_nodes and nodes > recipe.max_nodes):
        raise ConfigError(f"recipe '{recipe.name}' runs on {recipe.min_nodes}.."
                          f"{recipe.max_nodes or 'any'} nodes, not {nodes}")
    if cluster_nodes is not None and nodes > cluster_nodes:
        raise ConfigError(f"{nodes} nodes requested but the cluster has {cluster_nodes}")


def render_command(recipe: Recipe, *, run_dir: str, nodes: int,
                   params: dict[str, Scalar] | None = None, python: str = "python3") -> str:
    """The per-node command with every substituted value shell-quoted."""
    unknown = set(params or {}) - set(recipe.params)
    if unknown:
        raise ConfigError(f"recipe '{recipe.name}' has no parameter '{sorted(unknown)[0]}'",
                          hint=f"parameters: {', '.join(sorted(recipe.params)) or 'none'}")
    values: dict[str, Scalar] = {**recipe.params, **(params or {})}
    values.update(run_dir=run_dir, recipe_dir=f"{run_dir}/recipe",
                  checkpoint_dir=f"{run_dir}/checkpoints", nodes=nodes, python=python)
    fields = {f for _, f, _, _ in string.Formatter().parse(recipe.launch.command) if f}
    missing = fields - set(values)
    if missing:
        raise ConfigError(f"{recipe.source}: launch.command uses unknown field '{sorted(missing)[0]}'")
    return recipe.launch.command.format(**{k: shlex.quote(str(v)) for k, v in values.items()})
