"""The Slurm launcher: one run attempt -> one sbatch job, watched and fetched through a Runner.

It only ever talks to the cluster through `Runner.run/put/get`, so the same code drives the local
emulated cluster and a remote login node over SSH. azbench owns retries: jobs are submitted with
`--no-requeue`, and a retry is a new attempt (new job) with `--exclude` and `--resume`.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path, PurePosixPath
from typing import Sequence

from orchestrator.seams import Runner
from orchestrator.errors import ConfigError, LaunchError
from orchestrator.models import AttemptSpec, Cluster, JobRef, JobState, JobStatus
from orchestrator.paths import templates_dir as default_templates
from orchestrator.slurm.batch import ENV_KEY, parse_sbatch_id, render_sbatch
from orchestrator.slurm.states import (
    NodeInfo,
    SlurmRow,
    map_state,
    parse_jobs,
    parse_sinfo,
)

SACCT_FORMAT = "JobID,State,ExitCode,NodeList,Elapsed,Reason"
# The same six columns from squeue (-O "name:" = no padding, "|" = suffix); exit_code is the raw
# wait status and TimeUsed the elapsed time. Needed in full because without an accounting
# database (the local cluster) sacct answers nothing and squeue is the only source.
SQUEUE_FORMAT = "JobID:|,State:|,exit_code:|,NodeList:|,TimeUsed:|,Reason:|"
SINFO_FORMAT = "%N|%T|%E"
# scancel's complaints that mean "nothing left to cancel", which cancel() treats as success.
_ALREADY_GONE = ("already completing or completed", "invalid job id")
_ATTEMPT_DIR = re.compile(r"attempt-\d+")


class SlurmLauncher:
    """Launcher over sbatch/sacct/squeue/scancel/sinfo. `sacct_calls` counts scheduler queries."""

    backend = "slurm"
    shell_access = True

    def __init__(self, runner: Runner, cluster: Cluster, templates_dir: Path | None = None) -> None:
        self.runner = runner
        self.cluster = cluster
        self.templates_dir = templates_dir or default_templates()
        self.sacct_calls = 0
        self.squeue_calls = 0
        # Set once sacct says accounting storage is disabled: later polls go straight to
        # squeue, so each poll interval costs one scheduler call.
        self.accounting_disabled = False

    def submit(self, attempt: AttemptSpec, recipe_dir: Path | None = None) -> JobRef:
        """Stage `recipe_dir` (once per run) into <run_dir>/recipe, write the script, sbatch it."""
        run_dir = self.resolve_run_dir(attempt.run_dir)
        attempt = attempt.model_copy(update={"run_dir": run_dir})
        attempt_dir = f"{run_dir}/attempt-{attempt.attempt}"
        script = attempt.script or render_sbatch(attempt, partition=self.cluster.partition,
                                                 templates_dir=self.templates_dir)
        staged = self._prepare_dirs(run_dir, attempt_dir)
        if recipe_dir is not None and not staged:
            if not recipe_dir.is_dir():
                raise ConfigError(f"recipe directory {recipe_dir} does not exist")
            self.runner.put(recipe_dir, f"{run_dir}/recipe")
        script_path = f"{attempt_dir}/job.sbatch"
        with tempfile.TemporaryDirectory(prefix="azbench-sbatch-") as tmp:
            local = Path(tmp) / "job.sbatch"
            local.write_text(script)
            self.runner.put(local, script_path)
        result = self.runner.run(self._sh(f"sbatch --parsable {shlex.quote(script_path)}"), timeout=60)
        if not result.ok:
            raise LaunchError(f"sbatch failed for {attempt.run_id} attempt {attempt.attempt}: "
                              f"{_one_line(result.stderr or result.stdout)}")
        job_id = parse_sbatch_id(result.stdout)
        return JobRef(cluster=self.cluster.name, job_id=job_id, backend=self.backend, run_dir=run_dir)

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        """One sacct call for all refs; one squeue call for the ids sacct did not list."""
        by_id = {ref.job_id: ref for ref in refs}
        if not by_id:
            return {}
        wanted = set(by_id)
        rows, sacct_error = ({}, "") if self.accounting_disabled else self._sacct(wanted)
        missing = wanted - set(rows)
        squeue_error = ""
        if missing:
            found, squeue_error = self._squeue(missing)
            rows.update(found)
        statuses = {job_id: _status(ref, rows.get(job_id)) for job_id, ref in by_id.items()}
        if squeue_error or sacct_error:
            for job_id in wanted - set(rows):
                statuses[job_id] = statuses[job_id].model_copy(
                    update={"reason": squeue_error or sacct_error}
                )
        return statuses

    def cancel(self, ref: JobRef) -> None:
        """scancel; a job that already ended or was purged counts as cancelled."""
        result = self.runner.run(self._sh(f"scancel {shlex.quote(ref.job_id)}"), timeout=60)
        if result.ok or any(gone in result.stderr.lower() for gone in _ALREADY_GONE):
            return
        raise LaunchError(f"scancel {ref.job_id} failed: {_one_line(result.stderr or result.stdout)}")

    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        """Copy every file under <run_dir>/attempt-*/ into dest/attempt-*/; never outside dest."""
        listing = self.runner.run(
            self._sh(f"cd {shlex.quote(ref.run_dir)} && find . -path './attempt-*' -type f -printf '%P\\0'"),
            timeout=120,
        )
        if not listing.ok:
            raise LaunchError(f"cannot list logs of job {ref.job_id} in {ref.run_dir}: "
                              f"{_one_line(listing.stderr)}")
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        names = [name for name in listing.stdout.split("\0") if name.strip("\n")]
        targets = [(name, safe_local_path(root, name)) for name in names]  # check all before copying
        written: list[Path] = []
        for name, local in targets:
            local.parent.mkdir(parents=True, exist_ok=True)
            self.runner.get(f"{ref.run_dir}/{name}", local)
            written.append(local)
        return written

    def node_states(self) -> dict[str, NodeInfo]:
        """Every node's sinfo state and reason, in one call (for the monitor and health gate)."""
        result = self.runner.run(self._sh(f"sinfo -h -N -o {shlex.quote(SINFO_FORMAT)}"), timeout=60)
        if not result.ok:
            raise LaunchError(f"sinfo failed: {_one_line(result.stderr)}")
        return parse_sinfo(result.stdout)

    def resolve_run_dir(self, run_dir: str) -> str:
        """Absolute run dir: a relative one is taken under the cluster's workdir."""
        if not run_dir.startswith("/") and self.cluster.workdir:
            run_dir = f"{self.cluster.workdir.rstrip('/')}/{run_dir}"
        return str(PurePosixPath(run_dir))

    # -- helpers ---------------------------------------------------------------------------

    def _sh(self, cmd: str) -> str:
        """Prefix the cluster's environment (SLURM_CONF for the local cluster, say)."""
        env = self.cluster.env
        for key in env:
            if not ENV_KEY.fullmatch(key):
                raise ConfigError(f"cluster env name {key!r} is not a valid shell variable name")
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(env.items()))
        return exports + cmd

    def _prepare_dirs(self, run_dir: str, attempt_dir: str) -> bool:
        """Create the attempt and checkpoint dirs; True when the recipe is already staged."""
        q = shlex.quote
        cmd = (f"mkdir -p {q(attempt_dir)} {q(run_dir + '/checkpoints')} && "
               f"if [ -e {q(run_dir + '/recipe')} ]; then echo staged; fi")
        result = self.runner.run(self._sh(cmd), timeout=60)
        if not result.ok:
            raise LaunchError(f"cannot create {attempt_dir} on {self.cluster.name}: {_one_line(result.stderr)}")
        return "staged" in result.stdout

    def _sacct(self, wanted: set[str]) -> tuple[dict[str, SlurmRow], str]:
        self.sacct_calls += 1
        ids = ",".join(sorted(wanted, key=_id_order))
        cmd = f"sacct --parsable2 --noheader -X -j {shlex.quote(ids)} -o {SACCT_FORMAT}"
        result = self.runner.run(self._sh(cmd), timeout=60)
        # Without an accounting database sacct may fail or print a warning: the rows it did
        # print are still good, and squeue covers the rest.
        if not result.ok and "accounting storage is disabled" in result.stderr.lower():
            self.accounting_disabled = True
            return parse_jobs(result.stdout, wanted), ""
        error = "" if result.ok else f"sacct failed: {_one_line(result.stderr)}"
        return parse_jobs(result.stdout, wanted), error

    def _squeue(self, wanted: set[str]) -> tuple[dict[str, SlurmRow], str]:
        self.squeue_calls += 1
        ids = ",".join(sorted(wanted, key=_id_order))
        # --states=all: a job that just ended is still in slurmctld's memory (MinJobAge) and
        # squeue shows it only when asked for every state.
        cmd = f"squeue -h --states=all -j {shlex.quote(ids)} -O {shlex.quote(SQUEUE_FORMAT)}"
        result = self.runner.run(self._sh(cmd), timeout=60)
        rows = parse_jobs(result.stdout, wanted)
        if result.ok or "invalid job id" in result.stderr.lower():
            return rows, ""
        return rows, f"squeue failed: {_one_line(result.stderr)}"


def safe_local_path(root: Path, name: str) -> Path:
    """root/name, or LaunchError when `name` could land outside root (absolute, .., symlinks)."""
    parts = name.split("/")  # split by hand: PurePosixPath would quietly fold "a/./b" and "a//b"
    bad = (
        len(parts) < 2
        or not _ATTEMPT_DIR.fullmatch(parts[0])
        or any(part in ("..", ".", "") for part in parts)
        or any(ord(ch) < 32 or ch == "\\" for ch in name)
    )
    if bad:
        raise LaunchError(f"refusing remote log name {name!r}: not a plain path under attempt-N/")
    local = root.joinpath(*parts)
    # A symlink already inside dest (dest/attempt-1 -> /etc) would carry the copy outside.
    if not local.resolve().is_relative_to(root):
        raise LaunchError(f"refusing remote log name {name!r}: it resolves outside {root}")
    return local


def _status(ref: JobRef, row: SlurmRow | None) -> JobStatus:
    if row is None:
        return JobStatus(ref=ref, state=JobState.UNKNOWN, reason="not listed by sacct or squeue")
    state = map_state(row.native_state)
    # Slurm reports 0 for jobs that have not ended; that is "no exit code yet", not success.
    exit_code = row.exit_code if state.terminal else None
    return JobStatus(ref=ref, state=state, native_state=row.native_state, exit_code=exit_code,
                     nodes=row.nodes, reason=row.reason, elapsed_s=row.elapsed_s)


def _id_order(job_id: str) -> tuple[int, str]:
    return (int(job_id) if job_id.isdigit() else 0, job_id)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
