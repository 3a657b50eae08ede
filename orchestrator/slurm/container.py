"""An MLPerf attempt's batch script: templates/container_launch.sh.j2 (pyxis/enroot) with
templates/run_and_time.sh.j2 inside, for an AttemptSpec that carries a ContainerRun.

Pure: what the job runs (image, command, data, network, submission config) is runs/launch.py's
choice; here it becomes #SBATCH lines, container mounts and job steps. Values that land in
#SBATCH lines or in the comma-separated mount list are checked to be plain first, and the
submission's files must not contain the here-document delimiter they are written with.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import AttemptSpec, ContainerRun
from orchestrator.slurm.batch import SAFE_NAME, SAFE_PATH, check_attempt, check_plain, format_time_limit
from orchestrator.templating import render

# The here-document each submission-config file is written into the attempt directory with.
_HEREDOC = "AZBENCH_CONFIG_FILE"


def render_container_launch(attempt: AttemptSpec, job: ContainerRun, *, partition: str | None = None,
                            templates_dir: Path | None = None) -> str:
    """The batch script of one timed run: the image imported on every node, then one task per
    GPU in the container, the log checked for compliance after it; ConfigError for a value it
    will not put in the script."""
    check_attempt(attempt, partition)
    check_plain("data_root", job.data_root, SAFE_PATH)
    run_dir = attempt.run_dir.rstrip("/") or "/"
    attempt_dir = f"{run_dir}/attempt-{attempt.attempt}"
    mounts = [f"{d.path}:{d.mount}:ro" for d in job.data if d.mount]
    mounts += [f"{host}:{inside}:ro" for d in job.data for host, inside in d.also.items()]
    scratch = {path: f"{attempt_dir}/scratch/{path.strip('/').replace('/', '_')}" for path in job.scratch}
    mounts += [f"{attempt_dir}:/results", f"{run_dir}/checkpoints:/checkpoints", *job.network_mounts]
    mounts += [f"{host}:{path}" for path, host in scratch.items()]
    for mount in mounts:
        check_plain("container mount", mount.replace(":", "/"), SAFE_PATH)
    writable = {"/results": attempt_dir, "/checkpoints": f"{run_dir}/checkpoints", **scratch}
    made = [_host_folder(path, writable) for path in job.make_dirs]
    for name in [*job.container_env, *(f.name for f in job.fabric)]:
        check_plain("environment name", name, SAFE_NAME)
    check_plain("MPI plugin", job.mpi, SAFE_NAME)
    wrapper = render("run_and_time.sh.j2", templates_dir, command=job.command,
                     benchmark=job.benchmark, recipe=job.recipe)
    return render(
        "container_launch.sh.j2", templates_dir, job=job, p=job.parallelism,
        run_id=attempt.run_id, attempt=attempt.attempt, run_dir=run_dir, attempt_dir=attempt_dir,
        partition=partition, exclude=list(attempt.exclude),
        job_time=format_time_limit(job.walltime_min + 20), step_time=format_time_limit(job.walltime_min),
        mounts=",".join(mounts), wrapper=wrapper, config_files=_config_files(job),
        scratch=list(scratch.values()), made_dirs=made)


def _host_folder(path: str, writable: dict[str, str]) -> str:
    """The host folder behind container folder `path`, below one the job mounts writable;
    ConfigError for any other path (the job would create it nowhere the container sees)."""
    for inside, host in sorted(writable.items(), key=lambda kv: -len(kv[0])):
        if path.startswith(inside.rstrip("/") + "/"):
            folder = f"{host}/{path[len(inside.rstrip('/')) + 1:]}"
            check_plain("folder to create", folder, SAFE_PATH)
            return folder
    raise ConfigError(f"make_dirs: {path} is below no folder the job mounts writable "
                      f"({', '.join(sorted(writable))})")


def _config_files(job: ContainerRun) -> dict[str, str]:
    """The submission's files, each ending in a newline (the here-document's end must start a line)."""
    files = {}
    for name, text in job.config_files.items():
        if f"\n{_HEREDOC}\n" in f"\n{text}":
            raise ConfigError(f"{job.config}: {name} contains the here-document delimiter")
        files[name] = text if text.endswith("\n") else text + "\n"
    return files
