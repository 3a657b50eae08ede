"""`azbench prepare`: stage what an MLPerf recipe needs on a cluster, as one batch job.

The job is templates/stage_data.sbatch.j2 (launch.render_stage_data): each data item is fetched
by its recipe command into `<data_root>/...`, checked against its sha256 list, then marked
`.azbench-staged`; a marked item is skipped, so rerunning `prepare` resumes after a failure. The
job prints one "NAME: ..." line per item; this module submits it through the cluster's Launcher,
waits, and turns those lines into an ItemStatus per item.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Literal

from orchestrator.errors import ConfigError, PreflightError
from orchestrator.models import Frozen, JobState
from orchestrator.recipes.catalog import Recipe, get_recipe
from orchestrator.runs.launch import DEFAULT_DATA_ROOT, render_stage_data
from orchestrator.seams import Launcher

ItemState = Literal["staged", "already staged", "staging failed", "checksum mismatch", "not reached"]
_LINE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_.-]*): (?P<what>already staged|staged|staging failed|"
                   r"checksum mismatch)\b", re.M)


class ItemStatus(Frozen):
    name: str
    kind: str
    path: str
    state: ItemState

    @property
    def ok(self) -> bool:
        return self.state in ("staged", "already staged")


class PrepareResult(Frozen):
    recipe: str
    job_id: str
    job_state: str
    output: str  # the job's output file on the cluster
    items: list[ItemStatus]

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items) and self.job_state == JobState.COMPLETED.value


def check_staged(recipe: Recipe, launcher: Launcher, cluster: str, *,
                 data_root: str = DEFAULT_DATA_ROOT) -> None:
    """PreflightError naming the first item of `recipe` whose `.azbench-staged` marker is absent
    on the cluster (the launch script would stop on it after queueing; `run` refuses first)."""
    if recipe.mlperf is None:
        return
    root = data_root.rstrip("/") or "/"
    missing = [d for d in recipe.mlperf.data
               if not launcher.tail(f"{d.host_path(root)}/.azbench-staged", nbytes=64).strip()]
    if missing:
        first = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise PreflightError(f"{recipe.name}: {first.kind} '{first.name}' is not staged under "
                             f"{first.host_path(root)}{more}",
                             hint=f"azbench prepare {recipe.name} --cluster {cluster}")


def prepare(recipe: Recipe | str, launcher: Launcher, *, data_root: str = DEFAULT_DATA_ROOT,
            partition: str | None = None, import_image: bool = True,
            poll_interval: float = 2.0, timeout_s: float = 24 * 3600.0,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> PrepareResult:
    """Submit the staging job for `recipe`, wait for it, and report each item."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if recipe.mlperf is None:
        raise ConfigError(f"recipe '{recipe.name}' has no data to stage")
    root = data_root.rstrip("/") or "/"
    script = render_stage_data(recipe, data_root=root, partition=partition,
                               import_image=import_image)
    ref = launcher.submit_script(script, workdir=f"{root}/staging")
    deadline = clock() + timeout_s
    state: JobState | None = None
    while clock() < deadline:
        status = launcher.poll([ref])[ref.job_id]
        if status.state.terminal:
            state = status.state
            break
        sleep(poll_interval)
    if state is None:
        launcher.cancel(ref)
    output = f"{root}/staging/{recipe.name}-{ref.job_id}.out"
    text = launcher.tail(output).decode(errors="replace")
    seen: dict[str, ItemState] = {}
    for m in _LINE.finditer(text):
        what = m.group("what")
        seen[m.group("name")] = "already staged" if what == "already staged" else what  # type: ignore[assignment]
    items = [ItemStatus(name=d.name, kind=d.kind, path=d.host_path(root),
                        state=seen.get(d.name, "not reached")) for d in recipe.mlperf.data]
    return PrepareResult(recipe=recipe.name, job_id=ref.job_id,
                         job_state=state.value if state else "timed out", output=output,
                         items=items)
