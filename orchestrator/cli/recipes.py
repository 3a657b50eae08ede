"""`azbench recipes` and `azbench prepare`: what can run, and staging a recipe's data and
image on a cluster before its first run."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from typing import Optional

import typer

from orchestrator.cli.common import JsonOpt, Output, OutputFormat, OutputOpt, QueryOpt, app, make_console, make_table, open_store, output, say
from orchestrator.cli.common import parse_params, placement_lines
from orchestrator.clusters import lifecycle
from orchestrator.errors import ConfigError, PreflightError, RunFailedError
from orchestrator.models import ContainerBuild, utcnow
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.recipes import catalog as recipe_catalog
from orchestrator.recipes.catalog import Recipe, list_recipes
from orchestrator.runs.launch import container_build, describe_launch
from orchestrator.runs import prepare as staging  # staging.prepare: read when the command runs
from orchestrator.runs.prepare import PrepareResult, stage_plans
from orchestrator.runs.rehearsal import rehearse
from orchestrator.store.events import EventRow, PrepareData  # not store.schema: no SQLAlchemy on `recipes list`

recipes_app = typer.Typer(help="List and inspect benchmark recipes.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(recipes_app, name="recipes")

@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Recipes azbench can run."""
    out = output(as_json, fmt, query)
    recipes = list_recipes()
    if not out.rich:
        return out.emit(recipes)
    make_console().print(make_table("Recipes", ["name", "benchmark", "runs for a score", "SKUs", "description"],
                            [[r.name, r.benchmark, r.required_runs, ", ".join(r.skus), r.description]
                             for r in recipes]))


@recipes_app.command("show")
def recipes_show(name: str = typer.Argument(..., help="Recipe name."),
                 sku: str = typer.Option("local", "--sku", help="VM size or alias."),
                 nodes: int = typer.Option(1, "--nodes", help="Number of nodes (VMs)."),
                 ruleset: Optional[str] = typer.Option(None, "--ruleset", help="MLPerf ruleset, e.g. 5.1.0."),
                 image: Optional[str] = typer.Option(None, "--image", help="Override the container image."),
                 param: list[str] = typer.Option([], "--param", "-p", help="Recipe parameter KEY=VALUE, as `run` "
                                                 "takes it (MLPerf recipes: an environment variable)."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """The resolved config (parallelism, batch, placement: which ranks share a group, from the
    rank order, and what crosses the scale-out fabric) and the exact script that would run."""
    out = output(as_json, fmt, query)
    preview = describe_launch(name, sku, nodes, ruleset, image=image, params=parse_params(param) if param else None)
    if not out.rich:
        return out.emit(preview)
    r = preview.resolved
    lines = [f"{r.recipe} ({r.benchmark}, ruleset {r.ruleset or '-'}) on {r.nodes} x {r.sku_short} = {r.gpus} GPUs",
             f"target: {r.target.metric} {'>=' if r.target.direction == 'max' else '<='} {r.target.value}, "
             f"{r.required_runs} runs for a score, walltime {r.walltime_min} min"]
    if r.gbs:
        lines.append(f"parallelism: TP {r.tp} x PP {r.pp} x CP {r.cp} x DP {r.dp}"
                     f"{f' (VP {r.vp})' if r.vp else ''}, micro batch {r.mbs}, global batch {r.gbs}, "
                     f"grad accumulation {r.grad_accum}")
    lines.append(f"config: {'derived: ' + (r.rule or '') if r.derived else 'listed'} ({r.source or 'recipe'})")
    if r.placement is not None:
        lines += placement_lines(r.placement).splitlines()
    if r.image:
        lines.append(f"image: {r.image}")
    if r.config:
        lines.append(f"submission config{' (an estimate scales from it)' if r.estimate else ''}: {r.config}")
    lines += [f"warning: {w}" for w in r.warnings]
    if r.config:
        done = rehearse(name, sku, nodes)
        waived = f" ({len(done.waived)} of them by a waiver that cites the implementation)" if done.waived else ""
        lines.append(f"rehearsal: {len(done.checks)} paths {done.implementation} names, "
                     + (f"{len(done.unresolved)} unresolved" if done.unresolved else "all resolved") + waived)
        lines += [f"warning: unresolved: {c.where}: {c.problem}" for c in done.unresolved]
    effective = {**r.config_env, **r.env}
    if effective:
        lines += ["", "environment (effective value, where it came from):"]
        lines += [f"  {k}={effective[k]}  [{r.env_sources.get(k, 'azbench')}]" for k in sorted(effective)]
    say("\n".join(lines) + "\n\n--- script ---\n" + preview.script.rstrip() + "\n")
    if preview.stage_script:
        say("\n--- data staging job ---\n" + preview.stage_script.rstrip() + "\n")


def _print_progress(line: str) -> None:
    say(f"  {line}\n")
    sys.stdout.flush()


@app.command()
def prepare(recipe: Optional[str] = typer.Argument(None, help="Recipe name (with --list: all when left out)."),
            cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster to stage on."),
            sku: Optional[str] = typer.Option(None, "--sku", help="SKU whose container to build "
                                              "(default: the cluster's)."),
            nodes: Optional[int] = typer.Option(None, "--nodes", help="Scale whose submission "
                                                "config picks the implementation (default: the cluster's nodes)."),
            data_root: str = typer.Option(DEFAULT_DATA_ROOT, "--data-root",
                                          help="Shared folder the recipe's data goes under."),
            partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
            no_image: bool = typer.Option(False, "--no-image",
                                          help="Stage data only, do not build the container squashfs."),
            list_only: bool = typer.Option(False, "--list", help="Show, per recipe and scale, what "
                                           "prepare stages by itself, what you must do first (the "
                                           "command or place), and the size; no cluster needed."),
            as_json: bool = JsonOpt,
            fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Stage a recipe on the cluster as one batch job: verify its licence-gated weights and
    tokenizers (printing where to get and place each missing one), download its public data
    through MLCommons' R2 path (checksummed; a rerun resumes) and build its container from the
    implementation's pinned Dockerfile into an enroot squashfs cached by digest, then run the
    README's preprocessing inside it (each step skipped when done). Exits 3 when a
    licence-gated item is missing, 5 when anything else is not staged.

    AZBENCH_R2_ORIGIN (scheme://host[:port]) points the R2 downloads at a mirror of MLCommons'
    bucket; AZBENCH_IMAGE_BUILDER names a program on the cluster run instead of docker + enroot;
    AZBENCH_CONTAINER_RUNNER one run instead of the pyxis job step (--container-image) for each step
    the implementation's README runs in its container (energon conversion, FP16 preprocessing)."""
    out = output(as_json, fmt, query)
    if list_only:
        return _list_staging(recipe, data_root, out)
    if recipe is None or cluster is None:
        raise ConfigError("prepare needs a RECIPE and --cluster (or --list to see what it would do)",
                          hint="azbench prepare RECIPE --cluster C, or azbench prepare --list")
    found_recipe = recipe_catalog.get_recipe(recipe)
    with open_store() as store:
        found = lifecycle.reachable(cluster, store)
    build = None if no_image else _container(found_recipe, recipe, sku or found.sku, nodes or found.nodes)
    began = utcnow()
    with lifecycle.connect(found) as access:
        result = staging.prepare(found_recipe, access.launcher, data_root=data_root, partition=partition,
                       container=build, builder=os.environ.get("AZBENCH_IMAGE_BUILDER") or None,
                       r2_origin=os.environ.get("AZBENCH_R2_ORIGIN") or None,
                       runner=os.environ.get("AZBENCH_CONTAINER_RUNNER") or None,
                       on_progress=_print_progress if out.rich else None, cluster=found.name)
    _record_prepare(found.name, recipe, began, result)
    out.emit(result) if not out.rich else _print_prepared(result)
    _refuse_unless_staged(recipe, result)


def _container(recipe: Recipe, name: str, sku: str, nodes: int) -> ContainerBuild | None:
    """The container `prepare` builds for `nodes` x `sku` (None for a recipe with no MLPerf
    implementation); a scale with no submission config is a ConfigError naming the flags."""
    try:
        return None if recipe.mlperf is None else container_build(recipe, sku, nodes)
    except ConfigError as exc:
        raise ConfigError(f"prepare {name}: no container for {nodes} x {sku}: {exc.message}",
                          hint="give --sku and --nodes of the runs to come, or --no-image") from None


def _record_prepare(cluster: str, recipe: str, began: datetime, result: PrepareResult) -> None:
    """The staging job as an event, after the fact, with its span (goodput counts it as staging)."""
    with open_store() as store:
        store.add_event(EventRow(kind="prepare", cluster=cluster,
                                 message=f"prepare {recipe}: job {result.job_id} {result.job_state}",
                                 data=PrepareData(started_at=began, job_id=result.job_id, state=result.job_state)))


def _list_staging(recipe: str | None, data_root: str, out: Output) -> None:
    plans = stage_plans(recipe, data_root=data_root)
    if not out.rich:
        return out.emit(plans)
    for p in plans:
        unknown = f"{', '.join(p.unsized)}: size unknown"
        size = (f"{p.size_gb:,.1f} GB" + (f" + {unknown}" if p.unsized else "") if p.size_gb is not None
                else unknown if p.unsized else "no data")
        say(f"{p.recipe} {p.sku} x{p.nodes} ({'published' if p.published else 'estimate'}, "
                         f"{p.implementation}): {size}\n")
        say("".join(f"  automatic: {a}\n" for a in p.automatic))
        say("".join(f"  you first: {u}\n" for u in p.user))
        say(f"  then: {p.command}\n")


def _print_prepared(result: PrepareResult) -> None:
    for item in result.items:
        say(f"{item.name:24} {item.kind:10} {item.state:18} {item.path}\n")
    for item in result.items:
        if item.instructions:
            say(f"{'optional, ' if item.optional else ''}missing: {item.instructions}\n")
    say(f"job {result.job_id}: {result.job_state}; output {result.output}\n")


def _refuse_unless_staged(recipe: str, result: PrepareResult) -> None:
    """Exit 3 when an item the user must provide is missing, 5 when anything else is not staged."""
    gated = result.missing_gated
    if gated:
        raise PreflightError(f"prepare {recipe}: {len(gated)} item(s) you must provide are missing: "
                             + ", ".join(i.name for i in gated),
                             hint="place them as printed above, then rerun prepare")
    if not result.ok:
        bad = next((i for i in result.items if not i.ok), None)
        raise RunFailedError(f"prepare {recipe}: " + (f"{bad.name} {bad.state}" if bad else
                                                      f"staging job {result.job_state}"),
                             hint=f"see {result.output}; rerun prepare to resume")


