"""The seams between azbench's packages: the Runner and Launcher protocols."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

from orchestrator.models import AttemptSpec, ExecResult, JobRef, JobStatus


class Runner(Protocol):
    def run(self, cmd: str | Sequence[str], timeout: float = 60.0) -> ExecResult:
        """Run a shell command (a str is passed to the shell as is; a sequence is shlex-quoted)."""

    def put(self, local: Path, remote: str) -> None:
        """Copy a local file or directory tree to `remote` (created, parents too)."""

    def get(self, remote: str, local: Path) -> None:
        """Copy a remote file to `local`."""

    def close(self) -> None:
        """Release connections. Idempotent."""


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
