"""The recipe catalog: load recipes/*.yaml and resolve a request to a checked config.

Knows nothing of Azure's APIs nor of Slurm: it turns (recipe, SKU, nodes, ruleset) into a
ResolvedConfig (exact config from the recipe, or one derived by parallelism.WEAK_RULE) and a
recipe's per-node command. runs/launch.py renders a ResolvedConfig into the batch script a
launcher submits.
"""

from __future__ import annotations

import re
import shlex
import string
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from orchestrator.hardware import catalog
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.models import FabricOverride, ModelFacts
from orchestrator.paths import recipes_dir
from orchestrator.recipes.configs import config_flag, effective_env, implementation, reads, submissions
from orchestrator.recipes.data import DataItem
from orchestrator.recipes.rank_order import MAPPING_VAR, order_from
from orchestrator.recipes.recipe import (Container as Container, Launch as Launch, Mlperf as Mlperf,
                                          Recipe as Recipe, ResolvedConfig as ResolvedConfig, Scalar as Scalar,
                                          Target as Target)
from orchestrator.recipes.parallelism import (
    FABRIC_RULES,
    Choice,
    Layout,
    Placement,
    check_gbs,
    choose,
    fabric_overrides,
    network_profile,
    nvidia_config_env,
    override_layout,
    pick_ruleset,
    place,
)
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

# Config variables whose published value depends on the global batch (learning rate, schedule,
# eval cadence): kept from the config an estimate scales from, with a warning.
_BATCH_DEPENDENT = ("LR", "MAX_STEPS", "WARMUP_STEPS", "VAL_CHECK_INTERVAL", "SKIP_EVALS",
                    "OPT_LR_WARMUP_STEPS", "LEARNING_RATE", "WARMUP", "MIN_LR")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def list_recipes() -> list[Recipe]:
    return [get_recipe(p.stem) for p in sorted(recipes_dir().glob("*.yaml"))]


def model_facts() -> dict[str, ModelFacts]:
    """The model facts the report's MFU needs, keyed by each recipe's MLPerf benchmark key and
    by its recipe name (both lower case); the first recipe (by file name) wins a shared key.
    Each carries the precision of every published system that ran a vendored config
    (configs.submissions: the systems' own READMEs name it), keyed by the system's label, and
    NVIDIA's MODEL_TFLOP_PER_SAMPLE where a vendored config sets it."""
    facts: dict[str, ModelFacts] = {}
    for recipe in list_recipes():
        if recipe.model is not None:
            model = _with_config_facts(recipe, recipe.model)
            names = recipe.mlperf.names.values() if recipe.mlperf else ()  # "ssd", "gnn" in v4.x
            for key in (recipe.benchmark.lower(), recipe.name.lower(), *(n.lower() for n in names)):
                facts.setdefault(key, model)
    for key, model in published_model_facts().items():
        facts.setdefault(key, model)
    return facts


PUBLISHED_FACTS = "published/model_facts.yaml"


@lru_cache(maxsize=1)
def published_model_facts() -> dict[str, ModelFacts]:
    """The model facts of the published benchmarks that have no recipe (recipes/published/
    model_facts.yaml: BERT, ResNet-50, 3D U-Net, Stable Diffusion), keyed by benchmark."""
    path = recipes_dir() / PUBLISHED_FACTS
    data, lines = load_yaml(path)
    try:
        return {str(k).lower(): ModelFacts.model_validate(v) for k, v in (data or {}).items()}
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None


def submission_precisions(recipe: str) -> dict[str, str]:
    """{system label: "P: FLAG=V (file:line); config X, named by README:LINE"} for every
    published system that ran one of `recipe`'s vendored configs and whose config sets a GEMM
    precision (run_precision); the sources of estimates count as much as the listed scales."""
    out: dict[str, str] = {}
    for sub in submissions(recipe):
        env = effective_env(recipe, sub.config, {})
        precision, source = run_precision(dict(env.values), dict(env.sources))
        if precision:
            out[sub.label] = (f"{precision}: {source}; config {Path(sub.config).name}, "
                              f"named by {sub.evidence}")
    return out


def _with_config_facts(recipe: Recipe, model: ModelFacts) -> ModelFacts:
    reference: tuple[float, str] | None = None
    for sku, scales in (recipe.mlperf.scales.items() if recipe.mlperf else []):
        for scale in scales:
            if not scale.config or scale.estimate:
                continue
            r = resolve(recipe, sku, scale.nodes)
            value = r.config_env.get("MODEL_TFLOP_PER_SAMPLE")
            if value and reference is None:
                reference = (float(value), _with_line(r.env_sources.get("MODEL_TFLOP_PER_SAMPLE", ""),
                                                      "MODEL_TFLOP_PER_SAMPLE"))
    update: dict[str, object] = {"config_precisions": submission_precisions(recipe.name)}
    if reference:
        update.update(reference_tflop_per_sample=reference[0], reference_source=reference[1])
    return model.model_copy(update=update)


@lru_cache(maxsize=None)
def get_recipe(name: str) -> Recipe:
    path = recipes_dir() / f"{name}.yaml"
    if not _SAFE_NAME.fullmatch(name) or not path.is_file():
        known = ", ".join(sorted(p.stem for p in recipes_dir().glob("*.yaml")))
        raise NotFoundError(f"unknown recipe '{name}'", hint=f"known recipes: {known}")
    data, lines = load_yaml(path)
    try:
        return Recipe.model_validate({**(data or {}), "source": str(path)})
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None


def check_request(recipe: Recipe, sku: str, nodes: int, cluster_nodes: int | None = None) -> None:
    """ConfigError when the recipe cannot run on `nodes` x `sku` (MLPerf recipes: full resolve)."""
    if not recipe.supports(sku):
        raise ConfigError(f"recipe '{recipe.name}' does not support {catalog.lookup(sku).short}",
                          hint=f"supported: {', '.join(recipe.skus)}")
    if nodes < recipe.min_nodes or (recipe.max_nodes and nodes > recipe.max_nodes):
        raise ConfigError(f"recipe '{recipe.name}' runs on {recipe.min_nodes}.."
                          f"{recipe.max_nodes or 'any'} nodes, not {nodes}")
    if cluster_nodes is not None and nodes > cluster_nodes:
        raise ConfigError(f"{nodes} nodes requested but the cluster has {cluster_nodes}")
    if recipe.mlperf is not None:
        resolve(recipe, sku, nodes)


def check_params(recipe: Recipe, params: dict[str, Scalar] | None) -> dict[str, Scalar]:
    """`params` checked against the recipe's own: unknown names are a ConfigError naming the
    known ones; each value takes the type of the recipe's default (a number stays a finite
    number, so `-p target=--5` is refused here, not by the job an hour later)."""
    import math
    out: dict[str, Scalar] = {}
    check_param_text(params or {})
    if recipe.mlperf is not None:
        return _env_params(recipe, params or {})
    known = ", ".join(sorted(recipe.params)) or "none"
    for key, value in (params or {}).items():
        if key not in recipe.params:
            raise ConfigError(f"recipe '{recipe.name}' has no parameter '{key[:40]}' (parameters: {known})")
        default = recipe.params[key]
        text = str(value).strip()
        if isinstance(default, bool):
            if isinstance(value, bool) or text.lower() in ("true", "false"):
                out[key] = value if isinstance(value, bool) else text.lower() == "true"
                continue
            raise ConfigError(f"parameter '{key}': {text[:40]!r} is not true or false")
        if isinstance(default, int):
            if isinstance(value, int) and not isinstance(value, bool) or re.fullmatch(r"-?[0-9]{1,18}", text):
                out[key] = int(text)
                continue
            raise ConfigError(f"parameter '{key}': {text[:40]!r} is not a whole number "
                              f"(the recipe's default is {default})")
        if isinstance(default, float):
            try:
                number = float(text) if re.fullmatch(r"[-+0-9.eE]{1,40}", text) else math.nan
            except ValueError:
                number = math.nan
            if isinstance(value, bool) or not math.isfinite(number):
                raise ConfigError(f"parameter '{key}': {text[:40]!r} is not a finite number "
                                  f"(the recipe's default is {default})")
            out[key] = number
            continue
        out[key] = text if not isinstance(value, (int, float)) else value
    return out


_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
# A line break, NUL or other control character: a value that holds one could end a line of the
# generated script (a comment, a batch directive) and start a command of its own.
_PARAM_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_param_text(params: dict[str, Scalar]) -> None:
    """ConfigError (exit 2) for a parameter whose name or value holds a newline, NUL or other
    control character, whichever path brought it (-p, a run spec, a pulled snapshot's run)."""
    for key, value in params.items():
        for what, text in (("name", str(key)), ("value", str(value))):
            found = _PARAM_CONTROL.search(text)
            if found:
                raise ConfigError(f"parameter {str(key)[:40]!r}: its {what} holds a control character "
                                  f"({found.group()!r}); a value must be one line of text")


def _env_params(recipe: Recipe, params: dict[str, Scalar]) -> dict[str, Scalar]:
    """An MLPerf recipe's parameters are its implementation's environment variables: -p NAME=VALUE
    is exported after the submission config is sourced (resolve checks that the implementation
    reads NAME, READS.txt). Names are upper-case shell names; values are kept as text."""
    out: dict[str, Scalar] = {}
    for key, value in params.items():
        if not _ENV_NAME.match(key):
            raise ConfigError(f"recipe '{recipe.name}' takes environment variables of its implementation as "
                              f"parameters (e.g. -p {MAPPING_VAR}=False); {key[:40]!r} is not one")
        out[key] = value if isinstance(value, str) else ("True" if value is True else "False" if value is False
                                                         else str(value))
    return out


def render_command(recipe: Recipe, *, run_dir: str, nodes: int,
                   params: dict[str, Scalar] | None = None, python: str = "python3") -> str:
    """The per-node command with every substituted value shell-quoted; ConfigError for a value
    with a line break or control character."""
    check_param_text(params or {})
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


def resolve(recipe: Recipe | str, sku: str, nodes: int, ruleset: str | None = None, *,
            env: dict[str, Scalar] | None = None) -> ResolvedConfig:
    """The config for `nodes` x `sku`: listed, else derived by WEAK_RULE; one-line ConfigError if
    impossible. `env` (an MLPerf recipe's -p parameters, check_params) is exported after the
    submission config; each name must be one its implementation reads."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    row = catalog.lookup(sku)
    if not recipe.supports(sku):
        raise ConfigError(f"recipe '{recipe.name}' does not support {row.short} "
                          f"(supported: {', '.join(recipe.skus)})")
    if nodes < 1:
        raise ConfigError(f"node count must be at least 1, got {nodes}")
    explicit = ruleset is not None
    ruleset = pick_ruleset(recipe.rulesets, ruleset, recipe.benchmark)
    if recipe.mlperf is None:
        return _resolve_plain(recipe, row, nodes, ruleset)
    return _resolve_mlperf(recipe, recipe.mlperf, row, nodes, ruleset, explicit=explicit,
                           overrides=_env_params(recipe, env or {}))


def container_ruleset(recipe: Recipe, config: str | None) -> str | None:
    """The ruleset of the round whose implementation (and so container) a scale's config comes
    from: recipes/configs/<recipe>/v5.0_... -> 5.0.0; None when unknown or not a recipe ruleset."""
    m = re.match(r"v(\d+)\.(\d+)_", config or "")
    found = f"{m.group(1)}.{m.group(2)}.0" if m else None
    return found if found in recipe.rulesets else None


# -- resolution --------------------------------------------------------------------------------

def _resolve_plain(recipe: Recipe, row: catalog.GpuSku, nodes: int,
                   ruleset: str | None) -> ResolvedConfig:
    check_request(recipe, row.name, nodes)
    return ResolvedConfig(
        recipe=recipe.name, benchmark=recipe.benchmark, benchmark_key=recipe.benchmark,
        ruleset=ruleset, sku=row.name, sku_short=row.short, cpu_arch=row.cpu_arch, nodes=nodes,
        gpus_per_node=row.gpus_per_vm, gpus=nodes * row.gpus_per_vm,
        dp=nodes * recipe.launch.tasks_per_node, walltime_min=recipe.launch.time_limit_min,
        env=dict(recipe.launch.env), target=recipe.target, required_runs=recipe.required_runs,
        source=recipe.source)


def _merge_layers(layers: list[tuple[dict[str, str], str]], config_env: dict[str, str],
                  sources: dict[str, str]) -> dict[str, str]:
    """The job's environment: `layers` applied in order, the last one winning. `sources` gets
    where each value came from; a layer that restates the config's own value keeps the
    config's source and names the layer beside it."""
    env: dict[str, str] = {}
    for values, where in layers:
        env.update(values)
        for name, value in values.items():
            same = (config_env.get(name) == value and name in sources
                    and not sources[name].startswith("azbench"))
            sources[name] = f"{sources[name]} (= {where})" if same else where
    return env


def _resolve_mlperf(recipe: Recipe, spec: Mlperf, row: catalog.GpuSku, nodes: int,
                    ruleset: str | None, *, explicit: bool = True,
                    overrides: dict[str, Scalar] | None = None) -> ResolvedConfig:
    """An MLPerf recipe on `nodes` x `row`: the scale config chosen for them, its layout (-p
    may change it), where its ranks go, and its env in layers (azbench's layout, data mounts,
    the recipe's env, the scale's, -p), each variable with its source. Raises ConfigError for
    a scale that fits no config and for a -p the implementation does not read."""
    what = f"{recipe.name} on {nodes} x {row.short}"
    configs = recipe.scales_for(row.name)
    if not configs:
        raise ConfigError(f"recipe '{recipe.name}' lists no scale configs for {row.short}")
    chosen = choose(configs, row.gpus_per_vm, nodes, what)
    if not explicit:  # default: the round of the implementation the container is built from
        ruleset = container_ruleset(recipe, chosen.base.config) or ruleset
    names = {**spec.env_names, **chosen.base.env_names}
    given = {k: str(v) for k, v in (overrides or {}).items()}
    layout = override_layout(chosen.layout, names, given, nodes * row.gpus_per_vm, what)
    moved = layout != chosen.layout  # -p changed the layout: groups may leave the rack, with warnings
    placement = place(layout, row, nodes, span_racks=moved)
    warnings = check_gbs(spec.gbs_rules.get(ruleset or ""), layout.gbs, f"{what} (ruleset {ruleset})",
                         spec.gbs_source)
    layers = _env_layers(recipe, spec, chosen, nvidia_config_env(
        layout, placement, row, nodes, ruleset, chosen.walltime_min, names), row, given)
    sources: dict[str, str] = {}
    config_env, config_files = _load_config(recipe.name, chosen.base.config, layers, sources)
    _refuse_unread(recipe.name, chosen.base.config, overrides or {})
    warnings += _estimate_warnings(what, chosen, config_env, layout.gbs)
    env = _merge_layers(layers, config_env, sources)
    effective = {**config_env, **env}
    placement, fabric = _placement_and_fabric(layout, row, nodes, moved, effective, sources, warnings)
    precision, precision_source = run_precision(effective, sources)
    base = chosen.base
    return ResolvedConfig(
        recipe=recipe.name, benchmark=recipe.benchmark,
        benchmark_key=spec.names.get(ruleset or "", recipe.benchmark), ruleset=ruleset,
        sku=row.name, sku_short=row.short, cpu_arch=row.cpu_arch, nodes=nodes,
        gpus_per_node=row.gpus_per_vm, gpus=layout.gpus, tp=layout.tp, pp=layout.pp,
        cp=layout.cp, vp=layout.vp, dp=layout.dp, mbs=layout.mbs, gbs=layout.gbs,
        minibs=layout.minibs, grad_accum=layout.grad_accum, walltime_min=chosen.walltime_min,
        derived=chosen.derived, rule=chosen.rule, base_nodes=chosen.base.nodes,
        source=chosen.base.source, placement=placement,
        image=spec.container.for_arch(row.cpu_arch),
        env=env, config=f"recipes/configs/{recipe.name}/{base.config}" if base.config else None,
        config_files=config_files, config_env=config_env, env_sources=sources,
        estimate=base.estimate or chosen.derived,
        network_env=dict(network_profile(row).env), fabric=fabric, precision=precision,
        precision_source=precision_source, target=recipe.target,
        required_runs=recipe.required_runs, warnings=warnings)


def _env_layers(recipe: Recipe, spec: Mlperf, chosen: Choice, layout_env: dict[str, str],
                row: catalog.GpuSku, given: dict[str, str]) -> list[tuple[dict[str, str], str]]:
    """The env's layers, lowest first, each with where it comes from: azbench's layout
    (`layout_env`), the data mounts the implementation uses, the recipe's env, the chosen
    scale's env, and -p (`given`, after the config) when there is one."""
    base = chosen.base
    yaml_name = f"recipes/{Path(recipe.source).name}"
    scale_at = f"{yaml_name} mlperf.scales ({row.short}, {base.nodes} nodes)"
    layers: list[tuple[dict[str, str], str]] = [
        (layout_env, f"azbench: layout of {scale_at}" + (f" ({chosen.rule})" if chosen.derived else "")),
        ({item.var: item.mount for item in spec.data_used_by(_implementation(recipe.name, base.config))
          if item.var and item.mount},
         f"{yaml_name} mlperf.data (mount)"),
        (dict(spec.env), f"{yaml_name} mlperf.env"),
        (dict(base.env), f"{scale_at}.env"),
    ]
    if given:
        layers.append((given, "-p on the command line (after the config)"))
    return layers


def _refuse_unread(recipe: str, config: str | None, overrides: dict[str, Scalar]) -> None:
    """ConfigError for a -p variable the implementation does not read (its READS.txt)."""
    unread = sorted(set(overrides) - (reads(recipe, config) if config else set()))
    if unread:
        raise ConfigError(f"-p {unread[0]}: {_implementation(recipe, config) or recipe} does not read "
                          f"it (its READS.txt lists every variable it reads)")


def _estimate_warnings(what: str, chosen: Choice, config_env: dict[str, str], gbs: int) -> list[str]:
    """A warning when the scale is an estimate (derived, or marked so) and its config sets
    batch-dependent hyperparameters: they were published for another global batch."""
    hyper = {k: config_env[k] for k in _BATCH_DEPENDENT if k in config_env}
    if not ((chosen.base.estimate or chosen.derived) and hyper):
        return []
    return [f"{what} is an estimate: {', '.join(f'{k}={v}' for k, v in hyper.items())}"
            f" come from {chosen.base.config} at its own global batch; check them against the"
            f" ruleset's rules for GBS {gbs}"]


def _placement_and_fabric(layout: Layout, row: catalog.GpuSku, nodes: int, moved: bool,
                          effective: dict[str, str], sources: dict[str, str],
                          warnings: list[str]) -> tuple[Placement, list[FabricOverride]]:
    """The ranks' placement in the rank order the env asks for, and the fabric variables
    azbench sets or unsets for this SKU; appends their warnings to `warnings`."""
    order, why = order_from(effective, {MAPPING_VAR: _with_line(sources[MAPPING_VAR], MAPPING_VAR)}
                            if MAPPING_VAR in sources else {})
    placement = place(layout, row, nodes, order=order, order_source=why, span_racks=moved)
    warnings += placement.warnings
    fabric = fabric_overrides(row, effective, {k: _with_line(sources[k], k) for k in FABRIC_RULES if k in sources})
    warnings += [f"{f.asked}: {f.why}; azbench " + (f"sets {f.name}={f.value}" if f.value is not None
                                                    else f"unsets {f.name}") for f in fabric]
    return placement, fabric


def _load_config(recipe: str, config: str | None, layers: list[tuple[dict[str, str], str]],
                 sources: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """What the vendored `config` exports when sourced with azbench's layout values (the first
    layer), and the files it sourced; `sources` gets where each value came from. azbench's own
    layout/topology and data-mount variables (the first two layers) go out only where this
    implementation reads them (recipes/configs/<recipe>/<dir>/READS.txt); the recipe's explicit
    env is kept, and tests/test_recipe_configs.py checks that it is read too."""
    if not config:
        return {}, []
    loaded = effective_env(recipe, config, layers[0][0])
    sources.update(loaded.sources)
    read = reads(recipe, config)
    for values, _ in layers[:2]:
        for name in set(values) - read:
            del values[name]
    return dict(loaded.values), list(loaded.files)


def run_precision(env: dict[str, str], sources: dict[str, str]) -> tuple[str | None, str]:
    """The GEMM precision an MLPerf config trains in, from the flags NVIDIA's NeMo/Megatron
    implementations read (FP4, FP8: config_common*.sh), with the file that set the deciding one;
    (None, "") when the config sets neither (DLRM, RetinaNet, R-GAT, FLUX.1)."""
    if config_flag(env.get("FP4")):
        return "fp4", f"FP4={env['FP4']} ({_with_line(sources.get('FP4', 'azbench'), 'FP4')})"
    if "FP8" in env:
        value = "fp8" if config_flag(env["FP8"]) else "bf16"
        return value, f"FP8={env['FP8']} ({_with_line(sources.get('FP8', 'azbench'), 'FP8')})"
    return None, ""


def _implementation(recipe: str, config: str | None) -> str | None:
    """The implementation folder (its path in the results repository) a vendored config comes from."""
    return implementation(recipe, config).path if config else None


def data_for(recipe: Recipe, config: str | None) -> list[DataItem]:
    """The data items a run from `config`'s implementation uses (every item without a config);
    `config` as ResolvedConfig.vendored gives it."""
    if recipe.mlperf is None:
        return []
    return recipe.mlperf.data_used_by(_implementation(recipe.name, config))


def _with_line(source: str, name: str) -> str:
    """`source` (a vendored config path) with the line that assigns `name`, where it is one."""
    base, _, rest = source.partition(" ")
    if not base.startswith("recipes/configs/"):
        return source
    path = recipes_dir() / base[len("recipes/"):]
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return source
    hit = [n for n, line in enumerate(lines, 1)
           if re.match(rf"\s*(export\s+)?{re.escape(name)}=", line)]
    return f"{base}:{hit[-1]}" + (f" {rest}" if rest else "") if hit else source
