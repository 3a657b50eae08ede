"""The staging job's batch script: templates/stage_data.sbatch.j2 for a StageRequest.

Pure: a request in, the script out. Which items, steps and container a recipe needs is
runs/launch.py's choice; here the values that land in #SBATCH lines and container mounts are
checked to be plain, and the mirror origin to be only scheme://host[:port].
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import StageRequest
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
        r2_origin=request.r2_origin, builder=request.builder, container=container,
        squashfs=container.squashfs(request.data_root) if container else None,
        steps=request.steps, runner=request.runner)
