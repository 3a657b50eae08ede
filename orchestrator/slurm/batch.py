"""Batch scripts for Slurm: render one attempt's sbatch script, read sbatch's answer.

Pure text in, text out. Values that land in #SBATCH lines are checked against plain patterns
first, because sbatch splits those lines itself without a shell.
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.errors import ConfigError, LaunchError
from orchestrator.models import AttemptSpec
from orchestrator.templating import render

# Values written into #SBATCH lines (which sbatch splits itself without a shell) or into
# comma-separated container mounts: keep them plain.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+-]*")
SAFE_HOSTLIST = re.compile(r"[A-Za-z0-9._\[\],-]+")


def render_sbatch(attempt: AttemptSpec, *, partition: str | None = None,
                  templates_dir: Path | None = None) -> str:
    """The batch script for one attempt (templates/sbatch.sh.j2); checks #SBATCH values first."""
    check_attempt(attempt, partition)
    command = attempt.command + (" --resume" if attempt.resume else "")
    run_dir = attempt.run_dir.rstrip("/") or "/"
    return render(
        "sbatch.sh.j2",
        templates_dir,
        run_id=attempt.run_id,
        attempt=attempt.attempt,
        recipe=attempt.recipe,
        nodes=attempt.nodes,
        tasks_per_node=attempt.tasks_per_node,
        gpus_per_node=attempt.gpus_per_node,
        time_limit=format_time_limit(attempt.time_limit_min),
        run_dir=run_dir,
        attempt_dir=f"{run_dir}/attempt-{attempt.attempt}",
        checkpoint_dir=f"{run_dir}/checkpoints",
        partition=partition,
        exclude=list(attempt.exclude),
        env=dict(attempt.env),
        resume=attempt.resume,
        command=command,
    )


def parse_sbatch_id(stdout: str) -> str:
    """`sbatch --parsable` prints "123" or "123;cluster"; anything else is a LaunchError."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    job_id = lines[-1].split(";", 1)[0].strip() if lines else ""
    if not job_id.isdigit():
        last = lines[-1] if lines else "(nothing)"
        raise LaunchError(f"sbatch printed no job id: {last}")
    return job_id


def format_time_limit(minutes: int) -> str:
    """Minutes -> Slurm's "HH:MM:SS" (hours may exceed 24, which Slurm accepts)."""
    if minutes < 1:
        raise ConfigError(f"time limit must be at least 1 minute, got {minutes}")
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def check_plain(what: str, value: str, pattern: re.Pattern[str]) -> None:
    """ConfigError naming `what` unless `value` is wholly `pattern` (SAFE_NAME, SAFE_PATH, ...)."""
    if not pattern.fullmatch(value):
        raise ConfigError(f"{what} {value!r} has characters azbench will not put in a batch script")


def check_attempt(attempt: AttemptSpec, partition: str | None) -> None:
    """ConfigError unless the attempt's values that land in #SBATCH lines are plain and its
    counts make sense (every attempt's batch script: this one and slurm/container.py's)."""
    checks = [
        ("run_id", attempt.run_id, SAFE_NAME),
        ("run_dir", attempt.run_dir, SAFE_PATH),
        ("partition", partition or "p", SAFE_NAME),
        *(("exclude", node, SAFE_HOSTLIST) for node in attempt.exclude),
    ]
    for what, value, pattern in checks:
        check_plain(what, value, pattern)
    for what, number in (("nodes", attempt.nodes), ("tasks_per_node", attempt.tasks_per_node),
                         ("attempt", attempt.attempt)):
        if number < 1:
            raise ConfigError(f"{what} must be at least 1, got {number}")
    if attempt.gpus_per_node < 0:
        raise ConfigError(f"gpus_per_node must not be negative, got {attempt.gpus_per_node}")
