"""`azbench prepare`: stage what an MLPerf recipe needs on a cluster, as one batch job.

The job is described as data (launch.stage_request) and written and submitted by the cluster's
launcher (`Launcher.stage`): licence-gated items are verified where the user placed them
(expected files, checksums where published); public data is fetched into `<data_root>/...`
through MLCommons' R2 path (mlc_r2: the metadata URI the reference README gives, md5-checked) or
the item's command, checked against its sha256 list, then marked `.azbench-staged`; the container
is built from the implementation's pinned Dockerfile into an enroot squashfs named by its digest
(models.ContainerBuild); then each item's in-container steps (DataItem.steps: the README's
preprocessing) run with that squashfs, each marked `.azbench-step-NAME` with a key over its
command and inputs. A marked item, an existing squashfs and a step whose marker holds the current
key are skipped, so rerunning `prepare` resumes after a failure. The job prints one "NAME: ..."
line per item; this module submits it through the cluster's Launcher, waits, and turns those
lines into an ItemStatus per item.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Literal

from pydantic import computed_field

from orchestrator.errors import ConfigError, PreflightError
from orchestrator.models import ContainerBuild, Frozen, JobRef, JobState
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.recipes.catalog import Recipe, data_for, get_recipe, list_recipes, resolve
from orchestrator.recipes.configs import implementation, paths_manifest
from orchestrator.recipes.data import DataItem
from orchestrator.runs.launch import stage_request
from orchestrator.seams import Launcher, lacks

ItemState = Literal["staged", "already staged", "staging failed", "checksum mismatch", "missing",
                    "not reached", "skipped"]
_LINE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)?): (?P<what>already staged|staged|staging failed|"
                   r"checksum mismatch|missing|skipped)\b", re.M)
CONTAINER = "container"  # the ItemStatus name (and job line) of the container squashfs


class ItemStatus(Frozen):
    name: str
    kind: str  # dataset, checkpoint, tokenizer, container, step (ITEM/STEP, in the container)
    path: str
    state: ItemState
    gated: bool = False
    optional: bool = False
    # For a missing licence-gated item: where to get it and where to place it, in one line.
    instructions: str = ""

    @property
    def ok(self) -> bool:
        # skipped: a step for another implementation than the container's
        return self.state in ("staged", "already staged", "skipped") or self.optional


class PrepareResult(Frozen):
    recipe: str
    job_id: str
    job_state: str
    output: str  # the job's output file on the cluster
    items: list[ItemStatus]

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items) and self.job_state == JobState.COMPLETED.value


    @property
    def missing_gated(self) -> list[ItemStatus]:
        """Licence-gated items the user must place (prepare exits 3 on them, not 5)."""
        return [i for i in self.items if i.gated and not i.optional and not i.ok]


def check_staged(recipe: Recipe, launcher: Launcher, cluster: str, *,
                 data_root: str = DEFAULT_DATA_ROOT, container: ContainerBuild | None = None,
                 prepare_args: str = "") -> None:
    """PreflightError naming the first item of `recipe` whose `.azbench-staged` marker is absent
    on the cluster, or the container squashfs when `container` is given and it is absent (the
    launch script would stop on them after queueing; `run` refuses first). Optional items are
    not required."""
    if recipe.mlperf is None:
        return
    root = data_root.rstrip("/") or "/"
    used = recipe.mlperf.data_used_by(container.path if container else None)
    missing = [f"{d.kind} '{d.name}' is not staged under {d.host_path(root)}"
               for d in used if not d.optional
               and not launcher.tail(f"{d.host_path(root)}/.azbench-staged", nbytes=64).strip()]
    missing += [f"{d.kind} '{d.name}': step '{s.name}' has not run in the container "
                f"(no {d.step_marker(s, root)})"
                for d in used if not d.optional
                for s in d.steps_for(container.path if container else None)
                if not launcher.tail(d.step_marker(s, root), nbytes=64).strip()]
    if container is not None and not launcher.tail(container.squashfs(root), nbytes=64):
        missing.append(f"container {container.squashfs(root)} is not built "
                       f"(from {container.repo} {container.path}/Dockerfile)")
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise PreflightError(f"{recipe.name}: {missing[0]}{more}",
                             hint=f"azbench prepare {recipe.name} --cluster {cluster}{prepare_args}")


def prepare(recipe: Recipe | str, launcher: Launcher, *, data_root: str = DEFAULT_DATA_ROOT,
            partition: str | None = None, container: ContainerBuild | None = None,
            builder: str | None = None, r2_origin: str | None = None,
            runner: str | None = None, on_progress: Callable[[str], None] | None = None,
            poll_interval: float = 2.0, timeout_s: float = 24 * 3600.0,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic, cluster: str = "") -> PrepareResult:
    """Submit the staging job for `recipe`, wait for it, and report each item; `on_progress`
    gets each line the job prints as it appears (items started, files fetched, the build).
    MissingCapability (naming `cluster`) where the launcher has no staging part."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if recipe.mlperf is None:
        raise ConfigError(f"recipe '{recipe.name}' has no data to stage")
    root = data_root.rstrip("/") or "/"
    request = stage_request(recipe, data_root=root, partition=partition, container=container,
                            builder=builder, r2_origin=r2_origin, runner=runner)
    if (staging := launcher.parts().staging) is None:
        raise lacks(launcher, cluster, "stage data on a shared file system", "staging")
    ref = staging.stage(request)
    output = request.output(ref.job_id)
    progress = _Progress(launcher, output, on_progress)
    state = _wait(launcher, ref, progress, poll_interval, clock() + timeout_s, sleep, clock)
    progress.read(final=True)
    seen = _item_states(launcher.tail(output).decode(errors="replace"))
    used = recipe.mlperf.data_used_by(container.path if container else None)
    return PrepareResult(recipe=recipe.name, job_id=ref.job_id,
                         job_state=state.value if state else "timed out", output=output,
                         items=_items(used, seen, root, container))


def _wait(launcher: Launcher, ref: JobRef, progress: _Progress, poll_interval: float,
          deadline: float, sleep: Callable[[float], None],
          clock: Callable[[], float]) -> JobState | None:
    """Poll the staging job until it ends (its final state) or `deadline` passes (None: the
    job is cancelled), reading its progress lines between polls."""
    while clock() < deadline:
        status = launcher.poll([ref])[ref.job_id]
        if status.state.terminal:
            return status.state
        progress.read()
        sleep(poll_interval)
    launcher.cancel(ref)
    return None


def _item_states(text: str) -> dict[str, ItemState]:
    """Each item's (or "item/step"'s) state, as the staging job's output says it; the last
    line about an item wins."""
    seen: dict[str, ItemState] = {}
    for m in _LINE.finditer(text):
        what = m.group("what")
        seen[m.group("name")] = "already staged" if what == "already staged" else what  # type: ignore[assignment]
    return seen


def _items(used: list[DataItem], seen: dict[str, ItemState], root: str,
           container: ContainerBuild | None) -> list[ItemStatus]:
    """One status per data item, then the container (when built), then each item's steps;
    anything the job printed nothing about is "not reached"."""
    items: list[ItemStatus] = []
    for d in used:
        steps = [seen.get(f"{d.name}/{s.name}", "not reached") for s in d.steps]
        # An item made by its steps alone prints no line of its own: its state is its steps'.
        own = seen.get(d.name, "not reached") if d.stage or d.r2 or d.gated else \
            next((st for st in steps if st not in ("staged", "already staged")),
                 "staged" if "staged" in steps else "already staged")
        items.append(ItemStatus(name=d.name, kind=d.kind, path=d.host_path(root), state=own,
                                gated=d.gated is not None, optional=d.optional,
                                instructions=d.instructions(root) if d.gated and own in
                                ("missing", "checksum mismatch") else ""))
    if container is not None:
        items.append(ItemStatus(name=CONTAINER, kind=CONTAINER, path=container.squashfs(root),
                                state=seen.get(CONTAINER, "not reached")))
    items += [ItemStatus(name=f"{d.name}/{s.name}", kind="step", path=d.step_marker(s, root),
                         state=seen.get(f"{d.name}/{s.name}", "not reached"), optional=d.optional)
              for d in used for s in d.steps]
    return items


class _Progress:
    """The job's output, passed on line by line as it grows (bytes counted, so a line split
    across two reads is passed once, whole)."""

    def __init__(self, launcher: Launcher, path: str, sink: Callable[[str], None] | None) -> None:
        self.launcher, self.path, self.sink = launcher, path, sink
        self.offset, self.partial = 0, b""

    def read(self, *, final: bool = False) -> None:
        if self.sink is None:
            return
        data = self.launcher.tail(self.path, offset=self.offset)
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        if final and self.partial:
            lines, self.partial = [*lines, self.partial], b""
        for line in lines:
            self.sink(line.decode(errors="replace"))


class StagePlan(Frozen):
    """What `azbench prepare` does for one recipe x SKU x scale, offline (`prepare --list`):
    what it stages by itself, what the user must do first (each with the one command or place),
    and the size of the data, where the recipe knows it."""

    recipe: str
    sku: str
    nodes: int
    published: bool  # False: an azbench estimate scaled from another scale's config
    implementation: str  # the vendored folder whose container and README it follows
    automatic: list[str]
    user: list[str]
    size_gb: float | None  # the items whose size is known, summed
    unsized: list[str]  # the items whose size the recipe does not know

    @computed_field  # type: ignore[prop-decorator]
    @property
    def size_complete(self) -> bool:
        """Every item's size is known (size_gb is the whole)."""
        return not self.unsized
    command: str  # what to run once the user's part is done


# Base images only NVIDIA's early-access programme pulls (the NGC registry nvcr.io/nvdlfwea).
_EARLY_ACCESS = "nvcr.io/nvdlfwea/"


def stage_plans(recipe_name: str | None = None, *, data_root: str = DEFAULT_DATA_ROOT) -> list[StagePlan]:
    """A StagePlan per listed scale of `recipe_name` (every MLPerf recipe when None)."""
    recipes = [get_recipe(recipe_name)] if recipe_name else list_recipes()
    root = data_root.rstrip("/") or "/"
    return [_plan(recipe, sku, scale.nodes, scale.estimate, root)
            for recipe in recipes if recipe.mlperf is not None
            for sku, scales in recipe.mlperf.scales.items()
            for scale in sorted(scales, key=lambda s: s.nodes)]


def _plan(recipe: Recipe, sku: str, nodes: int, estimate: bool, root: str) -> StagePlan:
    r = resolve(recipe, sku, nodes)
    rel = r.vendored
    items = data_for(recipe, rel)
    folder = rel.split("/")[0] if rel else "-"
    impl = implementation(recipe.name, rel).path if rel else None
    base = [f.path for f in paths_manifest(recipe.name, rel) if f.kind == "base"] if rel else []
    auto = [_how(d, impl) for d in items if not d.gated]
    auto.append(f"container from {folder}'s Dockerfile ({', '.join(base) or 'its base image'})"
                if rel else f"no container build: the recipe's image {r.image}")
    user = [d.instructions(root) for d in items if d.gated and not d.optional]
    user += [f"container: its Dockerfile starts FROM {b}, an NVIDIA early-access image: run "
             "`docker login nvcr.io` (an NGC key with early-access rights) on the node prepare "
             "runs on, or set AZBENCH_IMAGE_BUILDER" for b in base if b.startswith(_EARLY_ACCESS)]
    known = [d.size_gb for d in items if d.size_gb is not None]
    return StagePlan(
        recipe=recipe.name, sku=r.sku_short, nodes=nodes, published=not estimate,
        implementation=folder, automatic=auto, user=user,
        size_gb=round(sum(known), 1) if known else None, unsized=[d.name for d in items if d.size_gb is None],
        command=f"azbench prepare {recipe.name} --cluster CLUSTER --sku {sku} --nodes {nodes}"
                + (f" --data-root {root}" if root != DEFAULT_DATA_ROOT else ""))


def _how(item: DataItem, implementation: str | None) -> str:
    """How prepare stages a non-gated item, e.g. "c4: MLCommons R2 (md5-checked), then unpack
    in the container"."""
    names = ", ".join(s.name for s in item.steps_for(implementation))
    if item.r2 or item.stage:
        checked = "sha256-checked" if item.checksums else "no sha256 list in the recipe: only the command's own checks"
        how = "MLCommons R2 (md5-checked)" if item.r2 else f"its download command ({checked})"
        return f"{item.name}: {how}" + (f", then {names} in the container" if names else "")
    return f"{item.name}: made in the container ({names})"
