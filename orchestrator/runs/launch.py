"""A recipe's launch as data: the attempt a resolved config becomes, and its staging job.

Plain recipes (smoke) run their command in the launcher's own script; an MLPerf recipe runs as
a ContainerRun (its image, its per-GPU command, its data mounts, its SKU's network, its
submission config), and its data and container are staged first (StageRequest). The launcher
writes the scripts (Slurm: slurm/); previews ask slurm/ for them, so `azbench run --dry-run`
shows exactly what a run submits. Here, not in recipes/, because it joins the recipe catalog to
the jobs: recipes/ stays free of launchers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.hardware import catalog
from orchestrator.errors import ConfigError
from orchestrator.models import (
    AttemptSpec,
    ContainerBuild,
    ContainerRun,
    Frozen,
    MountedData,
    StageItem,
    StageRequest,
    StageStep,
)
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.recipes.catalog import (
    Mlperf,
    Recipe,
    ResolvedConfig,
    Scalar,
    check_params,
    data_for,
    get_recipe,
    render_command,
    resolve,
)
from orchestrator.recipes.configs import PRE_ENV, bundle, implementation, launch_flags, made_dirs
from orchestrator.recipes.data import DataItem
from orchestrator.recipes.parallelism import network_profile
from orchestrator.slurm.launcher import attempt_script
from orchestrator.slurm.staging import render_stage

PREVIEW_RUN_DIR = "/shared/azbench/runs/preview"


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
    """The resolved config and the exact Slurm scripts (launch, data staging) for a request,
    with `params` (checked: unknown names refused) and the run spec's time limit applied as a
    run would; submits nothing."""
    recipe = get_recipe(recipe_name)
    params = check_params(recipe, params)
    resolved = resolve(recipe, sku, nodes, ruleset, env=params if recipe.mlperf else None)
    build = None if image else container_build(recipe, sku, nodes)
    if image:
        resolved = resolved.model_copy(update={"image": image})
    elif build:  # a run uses the squashfs `prepare` builds (attempts._mlperf_attempt)
        resolved = resolved.model_copy(update={"image": build.squashfs(data_root)})
    attempt = launch_attempt(resolved, run_dir, data_root=data_root, params=params,
                             time_limit_min=time_limit_min)
    stage = stage_request(recipe, data_root=data_root, container=build) if recipe.mlperf else None
    return LaunchPreview(resolved=resolved, script=attempt_script(attempt),
                         stage_script=render_stage(stage) if stage else None)


def launch_attempt(resolved: ResolvedConfig, run_dir: str, *, run_id: str = "preview",
                   attempt: int = 1, exclude: Sequence[str] = (),
                   data_root: str = DEFAULT_DATA_ROOT, params: dict[str, Scalar] | None = None,
                   time_limit_min: int | None = None) -> AttemptSpec:
    """One attempt of `resolved` as a launcher receives it (one timed run per job): a plain
    recipe's command, with the run spec's time limit capped by the recipe's (as
    runs/attempts.py sets it), or an MLPerf recipe's container job, never resumed."""
    recipe = get_recipe(resolved.recipe)
    if recipe.mlperf is None:
        return _plain_attempt(recipe, resolved, run_dir, run_id, attempt, exclude, params,
                              time_limit_min)
    return AttemptSpec(run_id=run_id, attempt=attempt, recipe=recipe.name, nodes=resolved.nodes,
                       run_dir=run_dir, command=recipe.launch.command, exclude=list(exclude),
                       resume=False, time_limit_min=resolved.walltime_min,
                       tasks_per_node=resolved.gpus_per_node or 1,
                       gpus_per_node=resolved.gpus_per_node,
                       container=container_run(recipe, recipe.mlperf, resolved, data_root))


def container_run(recipe: Recipe, spec: Mlperf, resolved: ResolvedConfig,
                  data_root: str = DEFAULT_DATA_ROOT) -> ContainerRun:
    """An MLPerf recipe's container job for `resolved`: its command per GPU task (results under
    /results), image, staged data, the SKU's network profile and the submission's config files."""
    net = network_profile(catalog.lookup(resolved.sku))
    files, entry, pre_env = _submission_config(recipe.name, resolved)
    place = resolved.placement
    flags = _launch_flags(recipe.name, resolved)
    return ContainerRun(
        recipe=recipe.name, benchmark=resolved.benchmark_key,
        command=render_command(recipe, run_dir="/results", nodes=resolved.nodes),
        image=resolved.image, workdir=spec.container.workdir, sku_short=resolved.sku_short,
        nodes=resolved.nodes, gpus_per_node=resolved.gpus_per_node, gpus=resolved.gpus,
        walltime_min=resolved.walltime_min,
        parallelism=resolved.parallelism,
        mp_gpus=place.mp_gpus if place else None, segment=place.segment if place else None,
        derived=resolved.derived, rule=resolved.rule, source=resolved.source,
        ruleset=resolved.ruleset, env=dict(resolved.env), network_env=dict(resolved.network_env),
        network_source=net.source, network_mounts=list(net.mounts), data_root=data_root,
        data=[MountedData(name=d.name, path=d.host_path(data_root), mount=d.mount,
                          also=d.also_paths(data_root)) for d in data_for(recipe, resolved.vendored)],
        config=resolved.config, config_files=files, config_entry=entry, pre_env=pre_env,
        scratch=sorted(spec.scratch), fabric=list(resolved.fabric), precision=resolved.precision,
        precision_source=resolved.precision_source, **flags, **_made_dirs(recipe.name, resolved, spec))


def container_build(recipe: Recipe | str, sku: str, nodes: int) -> ContainerBuild | None:
    """The container a run of `recipe` on `nodes` x `sku` uses: the implementation its resolved
    config was vendored from (None: the scale names no vendored config, the recipe's image stays)."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if recipe.mlperf is None:
        return None
    resolved = resolve(recipe, sku, nodes)
    if not resolved.vendored:
        return None
    impl = implementation(recipe.name, resolved.vendored)
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
    data = recipe.mlperf.data_used_by(container.path if container else None)
    # Licence-gated items first: a missing one is reported before any long download.
    items = tuple(_stage_item(d, root) for d in sorted(data, key=lambda d: d.gated is None)
                  if d.gated or d.r2 or d.stage)
    workdir = recipe.mlperf.container.workdir or "/"
    steps = tuple(s for d in data for s in _stage_steps(d, root, workdir, container))
    provided = tuple((d.name, d.host_path(root), tuple(d.provided_paths(root)))
                     for d in data if d.files and not d.gated)
    return StageRequest(recipe=recipe.name, data_root=root, items=items, steps=steps,
                        container=container, partition=partition, r2_origin=r2_origin,
                        builder=builder, runner=runner, provided=provided)


# -- helpers -----------------------------------------------------------------------------------

def _stage_item(d: DataItem, root: str) -> StageItem:
    return StageItem(name=d.name, kind=d.kind, dest=d.host_path(root), sha256=d.sha256_list(),
                     command=d.stage, r2=tuple(d.r2.items()), after=d.after,
                     gated_files=tuple(d.gated.files) if d.gated else (), sizes=d.size_list(),
                     optional=d.optional,
                     size_gb=d.size_gb, source=d.source)


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


def _plain_attempt(recipe: Recipe, resolved: ResolvedConfig, run_dir: str, run_id: str,
                   attempt: int, exclude: Sequence[str], params: dict[str, Scalar] | None,
                   time_limit_min: int | None) -> AttemptSpec:
    """A plain recipe's attempt: its command, run through the launcher's own script."""
    limit = recipe.launch.time_limit_min
    limit = min(time_limit_min, limit) if time_limit_min else limit
    command = render_command(recipe, run_dir=run_dir, nodes=resolved.nodes, params=params)
    return AttemptSpec(run_id=run_id, attempt=attempt, recipe=recipe.name, nodes=resolved.nodes,
                       run_dir=run_dir, command=command, env=dict(recipe.launch.env),
                       exclude=list(exclude), time_limit_min=limit,
                       tasks_per_node=recipe.launch.tasks_per_node,
                       gpus_per_node=resolved.gpus_per_node)


# The variables every container task needs from the batch script whatever the image sets.
_ALWAYS_FORCED = ("MASTER_ADDR", "MASTER_PORT", "SEED")


def _launch_flags(recipe: str, resolved: ResolvedConfig) -> dict[str, object]:
    """mpi, remap_root, container_env and launch_source as the implementation's own run.sub
    runs its timed job step (its PATHS.txt); azbench's defaults for a config-less scale. Names the
    run.sub forces that the job sets (MASTER_*, SEED, the config's own) are forced the same way."""
    rel = resolved.vendored
    if not rel:
        return {"container_env": list(_ALWAYS_FORCED)}
    flags = launch_flags(recipe, rel)
    folder = f"recipes/configs/{recipe}/{rel.rsplit('/', 1)[0]}"
    forced = [n for n in (flags["container-env"].detail.split(",") if "container-env" in flags else [])
              if n]
    where = next(iter(flags.values())).where if flags else ""
    return {"mpi": flags["mpi"].detail if "mpi" in flags else "pmix",
            "remap_root": "remap-root" in flags and flags["remap-root"].detail == "yes",
            "container_env": list(dict.fromkeys([*_ALWAYS_FORCED, *forced])),
            "launch_source": f"{folder} (the implementation's {where})" if where else ""}


# The folders a job mounts writable into the container (slurm/container.py): a folder the
# implementation creates below one of them before launch, the job creates too.
WRITABLE_MOUNTS = ("/results", "/checkpoints")


def _made_dirs(recipe: str, resolved: ResolvedConfig, spec: Mlperf) -> dict[str, object]:
    """make_dirs and make_dirs_source: the container folders the implementation's run.sub
    creates unconditionally before its timed job step, below a folder the job mounts writable,
    with the job's environment filled in (a folder whose name needs a value the job does not
    set is left to the rehearsal, which says so)."""
    rel = resolved.vendored
    if not rel:
        return {}
    env = {**resolved.config_env, **resolved.env}
    roots = (*WRITABLE_MOUNTS, *spec.scratch)
    dirs: dict[str, str] = {}
    for fact in made_dirs(recipe, rel):
        path = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), m.group(0)), fact.container)
        if fact.guard or "$" in path or path.rstrip("/") in roots:
            continue
        if any(path.startswith(root.rstrip("/") + "/") for root in roots):
            dirs.setdefault(path.rstrip("/"), fact.where)
    if not dirs:
        return {}
    folder = f"recipes/configs/{recipe}/{rel.rsplit('/', 1)[0]}"
    lines = ", ".join(dict.fromkeys(dirs.values()))
    return {"make_dirs": list(dirs), "make_dirs_source": f"{folder}/PATHS.txt: {lines}"}


def _submission_config(recipe: str,
                       resolved: ResolvedConfig) -> tuple[dict[str, str], str | None, dict[str, str]]:
    """The vendored submission config's files by name, the one to source first, and the
    topology values it reads while sourced; nothing for a config-less scale."""
    rel = resolved.vendored
    if not rel:
        return {}, None, {}
    pre_env = {k: resolved.env[k] for k in PRE_ENV if k in resolved.env}
    pre_env.update({k: v for k, v in (("DGXNNODES", str(resolved.nodes)),
                                      ("DGXNGPU", str(resolved.gpus_per_node)),
                                      ("NEXP", "1")) if k not in pre_env})
    return bundle(recipe, rel), rel.rsplit("/", 1)[-1], pre_env
