"""A recipe's launch on Slurm: the exact batch script for one attempt of a resolved config.

Plain recipes (smoke) keep the launcher's own sbatch.sh.j2; MLPerf recipes render
templates/container_launch.sh.j2 (pyxis/enroot) with templates/run_and_time.sh.j2 inside, and
templates/stage_data.sbatch.j2 pre-stages their data. Here, not in recipes/, because it joins the
recipe catalog to the Slurm renderer: recipes/ stays free of Slurm.
"""

from __future__ import annotations

import re
import shlex

from orchestrator.hardware import catalog
from orchestrator.errors import ConfigError
from orchestrator.models import AttemptSpec, ContainerBuild, Frozen, StageItem, StageRequest, StageStep
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.recipes.catalog import (
    DataItem,
    Mlperf,
    Recipe,
    ResolvedConfig,
    Scalar,
    check_params,
    get_recipe,
    render_command,
    resolve,
)
from orchestrator.recipes.configs import PRE_ENV, bundle, implementation
from orchestrator.recipes.parallelism import network_profile
from orchestrator.slurm.batch import format_time_limit, render_sbatch
from orchestrator.slurm.staging import render_stage
from orchestrator.templating import render

PREVIEW_RUN_DIR = "/shared/azbench/runs/preview"
# Values that land in #SBATCH lines or comma-separated --container-mounts: keep them plain.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+-]*")


class LaunchPreview(Frozen):
    """What `azbench recipes show NAME --sku S --nodes N` and `azbench run --dry-run` print."""

    resolved: ResolvedConfig
    script: str
    stage_script: str | None = None


def describe_launch(recipe_name: str, sku: str, nodes: int, ruleset: str | None = None, *,
                    image: str | None = None, run_dir: str = PREVIEW_RUN_DIR,
                    data_root: str = DEFAULT_DATA_ROOT,
                    params: dict[str, Scalar] | None = None,
                    time_limit_min: int | None = None) -> LaunchPreview:
    """The resolved config and the exact scripts (launch, data staging) for a request, with
    `params` (checked: unknown names refused) and the run spec's time limit applied as a run
    would; submits nothing."""
    recipe = get_recipe(recipe_name)
    params = check_params(recipe, params)
    resolved = resolve(recipe, sku, nodes, ruleset)
    build = None if image else container_build(recipe, sku, nodes)
    if image:
        resolved = resolved.model_copy(update={"image": image})
    elif build:  # a run uses the squashfs `prepare` builds (attempts._mlperf_attempt)
        resolved = resolved.model_copy(update={"image": build.squashfs(data_root)})
    script = render_launch(resolved, run_dir, data_root=data_root, params=params,
                           time_limit_min=time_limit_min)
    stage = render_stage(stage_request(recipe, data_root=data_root, container=build)) \
        if recipe.mlperf else None
    return LaunchPreview(resolved=resolved, script=script, stage_script=stage)


def render_launch(resolved: ResolvedConfig, run_dir: str, *, run_id: str = "preview",
                  attempt: int = 1, partition: str | None = None, exclude: tuple[str, ...] = (),
                  data_root: str = DEFAULT_DATA_ROOT, seed: int | None = None,
                  check_compliance: bool = True, params: dict[str, Scalar] | None = None,
                  time_limit_min: int | None = None) -> str:
    """The exact batch script for one attempt of `resolved` (one timed run per job)."""
    recipe = get_recipe(resolved.recipe)
    if recipe.mlperf is None:
        return _render_plain(recipe, resolved, run_dir, run_id, attempt, partition, exclude,
                             params, time_limit_min)
    return _render_container(recipe, recipe.mlperf, resolved, run_dir=run_dir, run_id=run_id,
                             attempt=attempt, partition=partition, exclude=exclude,
                             data_root=data_root, seed=seed, check_compliance=check_compliance)


def container_build(recipe: Recipe | str, sku: str, nodes: int) -> ContainerBuild | None:
    """The container a run of `recipe` on `nodes` x `sku` uses: the implementation its resolved
    config was vendored from (None: the scale names no vendored config, the recipe's image stays)."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if recipe.mlperf is None:
        return None
    resolved = resolve(recipe, sku, nodes)
    if not resolved.config:
        return None
    impl = implementation(recipe.name, resolved.config.split(f"recipes/configs/{recipe.name}/", 1)[1])
    return ContainerBuild(recipe=recipe.name, repo=impl.repo, commit=impl.commit, path=impl.path,
                          arch=catalog.lookup(resolved.sku).cpu_arch)


def stage_request(recipe: Recipe | str, *, data_root: str = DEFAULT_DATA_ROOT,
                  partition: str | None = None, container: ContainerBuild | None = None,
                  builder: str | None = None, r2_origin: str | None = None,
                  runner: str | None = None) -> StageRequest:
    """The one-node job that verifies a recipe's licence-gated items, downloads the rest
    (MLCommons R2 or the item's command), builds its container under data_root, then runs the
    items' preparation steps inside that container (DataItem.steps), as data for
    `Launcher.stage`.

    `r2_origin` replaces the scheme and host of every R2 URL (a mirror; the tests' loopback
    server); `builder` is a program run instead of the docker + enroot build (AZBENCH_IMAGE_BUILDER);
    `runner` one run instead of the container job step of each step (AZBENCH_CONTAINER_RUNNER)."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if recipe.mlperf is None:
        raise ConfigError(f"recipe '{recipe.name}' has no data to stage")
    root = data_root.rstrip("/")
    data = recipe.mlperf.data
    # Licence-gated items first: a missing one is reported before any long download.
    items = tuple(_stage_item(d, root) for d in sorted(data, key=lambda d: d.gated is None)
                  if d.gated or d.r2 or d.stage)
    workdir = recipe.mlperf.container.workdir or "/"
    steps = tuple(s for d in data for s in _stage_steps(d, root, workdir, container))
    return StageRequest(recipe=recipe.name, data_root=root, items=items, steps=steps,
                        container=container, partition=partition, r2_origin=r2_origin,
                        builder=builder, runner=runner)


def _stage_item(d: DataItem, root: str) -> StageItem:
    """A gated item is verified; an R2 one fetched with mlc_r2 (then its `after`), the rest by
    its own command."""
    command = " && ".join([*(f"mlc_r2 -d {shlex.quote(sub)} {shlex.quote(uri)}" for sub, uri in d.r2.items()),
                           *([f"( {d.after} )"] if d.after else [])]) if d.r2 else d.stage
    return StageItem(name=d.name, kind=d.kind, dest=d.host_path(root), sha256=d.sha256_list(),
                     command=command, gated_files=tuple(d.gated.files) if d.gated else (),
                     optional=d.optional, size_gb=d.size_gb, source=d.source)


def _stage_steps(d: DataItem, root: str, workdir: str, container: ContainerBuild | None) -> list[StageStep]:
    """The item's steps in order, each keyed on the one before (its marker)."""
    steps: list[StageStep] = []
    prev = ""
    for i, step in enumerate(d.steps):
        marker = d.step_marker(step, root)
        steps.append(StageStep(
            label=f"{d.name}/{step.name}", source=step.source, run=step.run, dest=d.host_path(root),
            marker=marker, mounts=d.step_mounts(step, root), workdir=workdir,
            inputs="\n".join(d.step_inputs(step, root)), prev=prev,
            implementations=tuple(step.implementations),
            other_impl=container is not None and bool(step.implementations)
            and container.path not in step.implementations,
            last_of_own=i == len(d.steps) - 1 and not (d.stage or d.r2 or d.gated)))
        prev = marker
    return steps


# -- rendering ---------------------------------------------------------------------------------

def _render_plain(recipe: Recipe, resolved: ResolvedConfig, run_dir: str, run_id: str,
                  attempt: int, partition: str | None, exclude: tuple[str, ...],
                  params: dict[str, Scalar] | None = None,
                  time_limit_min: int | None = None) -> str:
    """Plain recipes run through the launcher's own template, so this is its exact script
    (the time limit as runs/attempts.py sets it: the run spec's, capped by the recipe's)."""
    limit = recipe.launch.time_limit_min
    limit = min(time_limit_min, limit) if time_limit_min else limit
    command = render_command(recipe, run_dir=run_dir, nodes=resolved.nodes, params=params)
    spec = AttemptSpec(run_id=run_id, attempt=attempt, recipe=recipe.name, nodes=resolved.nodes,
                       run_dir=run_dir, command=command, env=dict(recipe.launch.env),
                       exclude=list(exclude), time_limit_min=limit,
                       tasks_per_node=recipe.launch.tasks_per_node,
                       gpus_per_node=resolved.gpus_per_node)
    return render_sbatch(spec, partition=partition)


def _render_container(recipe: Recipe, spec: Mlperf, resolved: ResolvedConfig, *, run_dir: str,
                      run_id: str, attempt: int, partition: str | None, exclude: tuple[str, ...],
                      data_root: str, seed: int | None, check_compliance: bool) -> str:
    run_dir = run_dir.rstrip("/") or "/"
    for what, value, pattern in (("run_id", run_id, _SAFE_NAME), ("run_dir", run_dir, _SAFE_PATH),
                                 ("partition", partition or "p", _SAFE_NAME),
                                 ("data_root", data_root, _SAFE_PATH),
                                 *(("exclude", n, _SAFE_NAME) for n in exclude)):
        _check_plain(what, value, pattern)
    attempt_dir = f"{run_dir}/attempt-{attempt}"
    mounts = [f"{d.host_path(data_root)}:{d.mount}:ro" for d in spec.data]
    mounts += [f"{attempt_dir}:/results", f"{run_dir}/checkpoints:/checkpoints"]
    mounts += network_profile(catalog.lookup(resolved.sku)).mounts
    for mount in mounts:
        _check_plain("container mount", mount.replace(":", "/"), _SAFE_PATH)
    command = render_command(recipe, run_dir="/results", nodes=resolved.nodes)
    wrapper = render(
        "run_and_time.sh.j2", command=command, benchmark=resolved.benchmark_key, recipe=recipe.name)
    net = network_profile(catalog.lookup(resolved.sku))
    files: dict[str, str] = {}
    entry = None
    pre_env: dict[str, str] = {}
    if resolved.config:
        rel = resolved.config.split(f"recipes/configs/{recipe.name}/", 1)[1]
        files = bundle(recipe.name, rel)
        for name, text in files.items():
            if "\nAZBENCH_CONFIG_FILE\n" in f"\n{text}":
                raise ConfigError(f"{resolved.config}: {name} contains the here-document delimiter")
            files[name] = text if text.endswith("\n") else text + "\n"
        entry = rel.rsplit("/", 1)[-1]
        pre_env = {k: resolved.env[k] for k in PRE_ENV if k in resolved.env}
        pre_env.update({k: v for k, v in (("DGXNNODES", str(resolved.nodes)),
                                          ("DGXNGPU", str(resolved.gpus_per_node)),
                                          ("NEXP", "1")) if k not in pre_env})
    return render(
        "container_launch.sh.j2", r=resolved, run_id=run_id, attempt=attempt, run_dir=run_dir,
        attempt_dir=attempt_dir, partition=partition, exclude=list(exclude), job_time=format_time_limit(
            resolved.walltime_min + 20), step_time=format_time_limit(resolved.walltime_min),
        mounts=",".join(mounts), workdir=spec.container.workdir, network=net,
        seed=seed, check_compliance=check_compliance, wrapper=wrapper, data=spec.data,
        data_root=data_root, config_files=files, config_entry=entry, pre_env=pre_env)


def _check_plain(what: str, value: str, pattern: re.Pattern[str]) -> None:
    if not pattern.fullmatch(value):
        raise ConfigError(f"{what} {value!r} has characters azbench will not put in a batch script")

