"""The staging job's batch script: templates/stage_data.sbatch.j2 for a StageRequest.

Pure: a request in, the script out. Which items, steps and container a recipe needs is
runs/launch.py's choice; here the values that land in #SBATCH lines and container mounts are
checked to be plain, and the mirror origin to be only scheme://host[:port].
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import StageItem, StageRequest
from orchestrator.slurm.batch import SAFE_NAME, SAFE_PATH, check_plain
from orchestrator.templating import render

_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")


def render_stage(request: StageRequest, templates_dir: Path | None = None) -> str:
    """The one-node job that stages request.recipe under request.data_root, its output in
    request.output("%j"); ConfigError for a value it will not put in the script."""
    check_plain("data_root", request.data_root or "/", SAFE_PATH)
    check_plain("partition", request.partition or "p", SAFE_NAME)
    if request.r2_origin is not None and not _ORIGIN.fullmatch(request.r2_origin):
        raise ConfigError(f"R2 origin {request.r2_origin!r} is not scheme://host[:port]")
    for step in request.steps:
        check_plain("container workdir", step.workdir, SAFE_PATH)
    container = request.container
    return render(
        "stage_data.sbatch.j2", templates_dir, recipe=request.recipe, data_root=request.data_root,
        output=request.output("%j"), partition=request.partition, items=request.items,
        fetch={item.name: _fetch(item) for item in request.items},
        r2_origin=request.r2_origin, builder=request.builder, container=container,
        squashfs=container.squashfs(request.data_root) if container else None,
        steps=request.steps, runner=request.runner, provided=request.provided)


def _fetch(item: StageItem) -> str:
    """The shell command that fetches an item in its folder: each R2 folder through the job's
    mlc_r2 (then the item's `after`), else the item's own command."""
    if not item.r2:
        return item.command
    return " && ".join([*(f"mlc_r2 -d {shlex.quote(sub)} {shlex.quote(uri)}" for sub, uri in item.r2),
                        *([f"( {item.after} )"] if item.after else [])])
