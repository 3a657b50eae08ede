"""The Launcher seam: submit, poll, cancel, fetch logs."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

from orchestrator.models import AttemptSpec, JobRef, JobStatus


class Launcher(Protocol):
    # True when azbench can run commands on the cluster (a login node): the Slurm health gate
    # and log-based hang detection need it. Azure ML has no such shell.
    shell_access: bool

    def submit(self, attempt: AttemptSpec) -> JobRef:
        """Stage the recipe and submit one job; returns as soon as the scheduler accepted it."""

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        """States of many jobs in one scheduler call, keyed by job id."""

    def cancel(self, ref: JobRef) -> None:
        """Cancel; idempotent."""

    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        """Copy the job's logs into `dest` (never outside it); returns the files written."""
