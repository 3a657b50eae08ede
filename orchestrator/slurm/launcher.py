"""The Slurm launcher: the Launcher seam over a Runner (a local shell or one SSH connection).

One run attempt -> one batch job, watched, cancelled and fetched; plus what the health gates and
recovery need of Slurm: batch scripts, job steps on chosen nodes, node states, drain and resume,
leaf switches, checkpoints. It only talks to the cluster through `Runner.run/put/get/read`, so
the same code drives the local emulated cluster and a remote login node. Every command comes
from slurm/commands.py and every call that can fail is checked. azbench owns retries: jobs are
submitted with `--no-requeue`, and a retry is a new attempt (new job) with `--exclude`.
"""

from __future__ import annotations

import re
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError, LaunchError, NotFoundError
from orchestrator.models import (AttemptSpec, Cluster, ExecResult, FabricTestPlan, HealthCheckPlan, JobRef,
                                 JobState, JobStatus, NodeInfo, StageRequest)
from orchestrator.paths import RunLayout, safe_local_path
from orchestrator.paths import templates_dir as default_templates
from orchestrator.seams import LauncherParts, Runner, command_line
from orchestrator.slurm import commands, topology
from orchestrator.slurm.batch import parse_sbatch_id, render_sbatch
from orchestrator.slurm.conf import compress_hostlist
from orchestrator.slurm.container import render_container_launch
from orchestrator.slurm.fabric import render_fabric_test
from orchestrator.slurm.health import render_health_check
from orchestrator.slurm.staging import render_stage
from orchestrator.slurm.states import SlurmRow, map_state, parse_jobs, parse_leaf_switches, parse_sinfo

# scancel's complaints that mean "nothing left to cancel", which cancel() treats as success.
_ALREADY_GONE = ("already completing or completed", "invalid job id")
_CKPT = re.compile(r"^(?!\.).*?(\d+)\D*$")
FOLLOW_CHUNK = 1 << 20  # bytes per read while following a log: a large one is never read whole


def attempt_script(attempt: AttemptSpec, *, partition: str | None = None,
                   templates_dir: Path | None = None) -> str:
    """The batch script an attempt is submitted as: its container job's (MLPerf recipes), else
    templates/sbatch.sh.j2 around its command. Pure; `azbench run --dry-run` shows exactly this."""
    if attempt.container is not None:
        return render_container_launch(attempt, attempt.container, partition=partition,
                                       templates_dir=templates_dir)
    return render_sbatch(attempt, partition=partition, templates_dir=templates_dir)


class SlurmLauncher:
    """Launcher over Slurm. `sacct_calls`/`squeue_calls` count scheduler queries (benchmarks)."""

    backend = "slurm"

    def __init__(self, runner: Runner, cluster: Cluster, templates_dir: Path | None = None, *,
                 admin: str = "") -> None:
        self.runner = runner
        self.cluster = cluster
        # Prefix of the node-state changes (drain, resume, retire): Slurm lets only root and
        # SlurmUser change a node (scontrol(1), "update"); on a cloud head azbench logs in as the
        # admin user, so "sudo -n". Empty where azbench runs as SlurmUser (the local cluster).
        self.admin = admin
        self.templates_dir = templates_dir or default_templates()
        self.sacct_calls = 0
        self.squeue_calls = 0
        # Set once sacct says accounting storage is disabled: later polls go straight to
        # squeue, so each poll interval costs one scheduler call.
        self.accounting_disabled = False
        self._slurm_version: tuple[int, int] | None = None  # None: not read (yet, or it failed)
        self._slurm_version_asked = False

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, attempt: AttemptSpec, recipe_dir: Path | None = None) -> JobRef:
        """Stage `recipe_dir` (once per run) into <run_dir>/recipe, write the script, submit it."""
        layout = RunLayout(self.resolve_run_dir(attempt.run_dir))
        attempt = attempt.model_copy(update={"run_dir": layout.run_dir})
        attempt_dir = layout.attempt_dir(attempt.attempt)
        attempt = self._segment_where_supported(attempt)
        script = attempt_script(attempt, partition=self.cluster.partition, templates_dir=self.templates_dir)
        staged = self._prepare_dirs(layout, attempt_dir)
        if recipe_dir is not None and not staged:
            if not recipe_dir.is_dir():
                raise ConfigError(f"recipe directory {recipe_dir} does not exist")
            self.runner.put(recipe_dir, layout.recipe)
        ref = self._submit(script, f"{attempt_dir}/job.sbatch",
                           f"{attempt.run_id} attempt {attempt.attempt}")
        return ref.model_copy(update={"run_dir": layout.run_dir})

    def _segment_where_supported(self, attempt: AttemptSpec) -> AttemptSpec:
        """The attempt without --segment where this cluster's Slurm has no topology/block
        (before 23.11 the option does not exist and the submission would fail)."""
        job = attempt.container
        if job is None or not job.segment:
            return attempt
        if not self._slurm_version_asked:
            out = self._run(commands.version())
            self._slurm_version = commands.parse_version(out.stdout) if out.ok else None
            self._slurm_version_asked = True
        version = self._slurm_version
        if topology.supports_block(version):
            return attempt
        why = (f"this cluster's Slurm ({version[0]}.{version[1]:02d}) has no topology/block (23.11+)"
               if version else "this cluster's Slurm version could not be read (sbatch --version), "
               "so topology/block (23.11+) is not assumed")
        note = (f"no --segment: {why}; a topology.conf with a leaf switch per rack (azbench's own "
                f"clusters write one) keeps the job on few racks")
        return attempt.model_copy(update={"container": job.model_copy(
            update={"segment": None, "segment_note": note})})

    def run_health_check(self, plan: HealthCheckPlan) -> JobRef:
        """Copy templates/health_check.py to plan.script, submit the gate job from plan.out_dir."""
        return self._submit_in(plan.out_dir, render_health_check(plan, self.templates_dir),
                               "the health gate job", {plan.script: self.templates_dir / "health_check.py"})

    def run_fabric_test(self, plan: FabricTestPlan) -> JobRef:
        """Copy templates/fabric_collectives.py to plan.script (CPU sizes), submit the fabric
        test job from plan.out_dir."""
        files = {plan.script: self.templates_dir / "fabric_collectives.py"} if plan.script else {}
        return self._submit_in(plan.out_dir, render_fabric_test(plan, self.templates_dir),
                               f"the fabric test job {plan.test_id}", files)

    def stage(self, request: StageRequest) -> JobRef:
        """Submit the staging job from <data_root>/staging (Slurm writes its output there, and
        does not create the folder itself)."""
        return self._submit_in(f"{request.data_root}/staging", render_stage(request, self.templates_dir),
                               f"the staging job of {request.recipe}")

    def find(self, name: str) -> JobRef | None:
        """The newest job called `name`, in any state Slurm still remembers."""
        out = self._run(commands.job_by_name(name))
        if not out.ok:
            raise LaunchError(f"cannot look up job {name}: {_last_line(out.stderr)}")
        ids = [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]
        return JobRef(cluster=self.cluster.name, job_id=ids[-1], backend=self.backend) if ids else None

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        """One accounting call for all refs; one queue call for the ids it did not list."""
        by_id = {ref.job_id: ref for ref in refs}
        if not by_id:
            return {}
        wanted = set(by_id)
        rows, sacct_error = ({}, "") if self.accounting_disabled else self._accounting(wanted)
        missing = wanted - set(rows)
        squeue_error = ""
        if missing:
            found, squeue_error = self._queue(missing)
            rows.update(found)
        statuses = {job_id: _status(ref, rows.get(job_id)) for job_id, ref in by_id.items()}
        if squeue_error or sacct_error:
            for job_id in wanted - set(rows):
                statuses[job_id] = statuses[job_id].model_copy(
                    update={"reason": squeue_error or sacct_error}
                )
        return statuses

    def cancel(self, ref: JobRef) -> None:
        """Cancel; a job that already ended or was purged counts as cancelled."""
        result = self._run(commands.cancel(ref.job_id))
        if result.ok or any(gone in result.stderr.lower() for gone in _ALREADY_GONE):
            return
        raise LaunchError(f"cancelling job {ref.job_id} failed: {_last_line(result.stderr or result.stdout)}")

    # -- logs -----------------------------------------------------------------------------

    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        """Copy every file under <run_dir>/attempt-*/ into dest/attempt-*/; never outside dest."""
        listing = self._run(f"cd {shlex.quote(ref.run_dir)} && find . -path './attempt-*' -type f -printf '%P\\0'",
                            timeout=120)
        if not listing.ok:
            raise LaunchError(f"cannot list logs of job {ref.job_id} in {ref.run_dir}: "
                              f"{_last_line(listing.stderr)}")
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

    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
        return self.runner.read(path, -nbytes if nbytes else offset)

    def follow(self, ref: JobRef, path: str, sink: Callable[[bytes], None], *,
               stop: Callable[[], bool], offset: int = 0, interval: float = 1.0,
               sleep: Callable[[float], None] | None = None) -> int:
        """Read new bytes of `path` every `interval` until `stop()` holds and none are left.
        Offsets count raw bytes, so a character split across two reads is never lost."""
        wait = sleep or time.sleep
        while True:
            done = stop()
            data = self.runner.read(path, offset, FOLLOW_CHUNK)
            if data:
                offset += len(data)
                sink(data)
            if done and not data:
                return offset
            if not data:
                wait(interval)

    # -- nodes ----------------------------------------------------------------------------

    def node_states(self) -> dict[str, NodeInfo]:
        """Every node's state and reason, in one call (for the monitor and health gates)."""
        result = self._run(commands.node_states())
        if not result.ok:
            raise LaunchError(f"{commands.NODE_LIST} failed: {_last_line(result.stderr)}")
        return parse_sinfo(result.stdout)

    def drain(self, reasons: Mapping[str, str]) -> list[str]:
        """Drain each node with its reason, in one shell call; the nodes drained."""
        if not reasons:
            return []
        result = self._run(commands.as_admin(commands.drain(reasons), self.admin), timeout=120)
        if not result.ok:
            raise LaunchError(f"draining {', '.join(reasons)} failed: {_last_line(result.stderr)}")
        return list(reasons)

    def resume(self, nodes: Sequence[str]) -> None:
        """Return nodes to service. ConfigError names an unknown node or one not drained."""
        for node in nodes:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", node):
                raise ConfigError(f"{node!r} is not a node name")
        if not nodes:
            return
        result = self._run(commands.as_admin(commands.resume(nodes), self.admin))
        if result.ok:
            return
        message = _last_line(result.stderr)
        if "invalid node name" in message.lower():
            raise NotFoundError(f"no node {', '.join(nodes)} in the cluster")
        if "invalid node state" in message.lower():
            raise ConfigError(f"{', '.join(nodes)} is not drained or down (nothing to return)")
        raise LaunchError(f"returning {', '.join(nodes)} to service failed: {message}")

    def retire(self, nodes: Sequence[str], reason: str) -> None:
        """Take nodes out of the cluster for good (their VMs are gone or going): DOWN, which ends
        a job still there, then FUTURE once it has left (commands.retire). LaunchError if Slurm
        refuses."""
        if not nodes:
            return
        result = self._run(commands.as_admin(commands.retire(nodes, reason), self.admin), timeout=120)
        if not result.ok:
            raise LaunchError(f"retiring {', '.join(nodes)} in Slurm failed: "
                              f"{_last_line(result.stderr or result.stdout)}")

    def swap_topology(self, old: str, new: str, paths: Sequence[str]) -> bool:
        """Put `new` where `old` was in topology.conf (its NVLink block or leaf switch;
        slurm/topology.swap), in each of `paths` (the head's copy and the shared one the nodes
        read), then `scontrol reconfigure`. False when the first file does not exist."""
        try:
            text = self.runner.read(paths[0]).decode()
        except Exception:  # noqa: BLE001 - no topology file: nothing to move
            return False
        swapped = topology.swap(text, old, new)
        staged = f"/tmp/azbench-topology-{new}.conf"
        with tempfile.TemporaryDirectory(prefix="azbench-topology-") as tmp:
            local = Path(tmp) / "topology.conf"
            local.write_text(swapped)
            self.runner.put(local, staged)
        installs = " && ".join(f"install -m 0644 {shlex.quote(staged)} {shlex.quote(p)}" for p in paths)
        result = self._run(commands.as_admin(f"{installs} && {commands.reconfigure()}", self.admin), timeout=120)
        if not result.ok:
            raise LaunchError(f"moving {new} into {old}'s place in topology.conf failed: "
                              f"{_last_line(result.stderr or result.stdout)}")
        return True

    def leaf_switches(self) -> dict[str, list[str]]:
        """Each leaf switch and the cluster's nodes under it. The topology may also list spare
        slots (FUTURE nodes kept for replacement and resize): they are not the cluster's yet."""
        result = self._run(commands.topology())
        if not result.ok:
            return {}
        mine = set(self.cluster.node_names)
        switches = {sw: [n for n in members if n in mine]
                    for sw, members in parse_leaf_switches(result.stdout).items()}
        return {sw: members for sw, members in switches.items() if members}

    def stage_file(self, local: Path, remote: str) -> None:
        made = self._run(f"mkdir -p {shlex.quote(str(PurePosixPath(remote).parent))}")
        if not made.ok:
            raise LaunchError(f"cannot create {PurePosixPath(remote).parent}: {_last_line(made.stderr)}")
        self.runner.put(local, remote)

    def run_on_nodes(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                     env: Mapping[str, str] | None = None) -> ExecResult:
        cmd = commands.step(nodes, argv, partition=self.cluster.partition, timeout_s=timeout_s,
                            job_name="azbench-health", hostlist=compress_hostlist(list(nodes)))
        return self.runner.run(command_line(cmd, {**self.cluster.env, **(env or {})}), timeout=timeout_s)

    def run_groups(self, groups: Sequence[Sequence[str]], argv: Sequence[str], *, gpus_per_node: int,
                   timeout_s: float) -> list[str]:
        text = commands.group_steps([compress_hostlist(list(g)) for g in groups], [len(g) for g in groups],
                                    argv, partition=self.cluster.partition, gpus_per_node=gpus_per_node,
                                    timeout_s=timeout_s, job_name="azbench-nccl")
        result = self._run(text, timeout=timeout_s)
        return commands.split_groups(result.stdout, len(groups))

    def latest_checkpoint(self, run_dir: str) -> int | None:
        """The highest step number among complete (non-hidden) files in <run_dir>/checkpoints."""
        out = self._run(f"ls -1 {shlex.quote(RunLayout(run_dir).checkpoints)} 2>/dev/null || true")
        steps = [int(m.group(1)) for name in out.stdout.split() if (m := _CKPT.match(name))
                 and not name.endswith((".tmp", ".partial"))]
        return max(steps) if steps else None

    def parts(self) -> LauncherParts:
        """Every part, each this launcher's own methods: the gate's jobs on chosen nodes, drain
        and resume with the leaf switches, staging on the shared file system, checkpoints and
        a running job's log."""
        return LauncherParts(gate=self, nodes=self, staging=self, checkpoints=self, live_logs=self)

    def close(self) -> None:
        self.runner.close()

    def resolve_run_dir(self, run_dir: str) -> str:
        """Absolute run dir: a relative one is taken under the cluster's workdir."""
        if not run_dir.startswith("/") and self.cluster.workdir:
            run_dir = f"{self.cluster.workdir.rstrip('/')}/{run_dir}"
        return str(PurePosixPath(run_dir))

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, cmd: str, timeout: float = 60) -> ExecResult:
        """A command with the cluster's environment (SLURM_CONF for the local cluster, say)."""
        return self.runner.run(command_line(cmd, self.cluster.env), timeout=timeout)

    def _submit(self, script: str, script_path: str, what: str) -> JobRef:
        with tempfile.TemporaryDirectory(prefix="azbench-batch-") as tmp:
            local = Path(tmp) / "job.sbatch"
            local.write_text(script)
            self.runner.put(local, script_path)
        result = self._run(commands.submit(script_path))
        if not result.ok:
            raise LaunchError(f"submitting {what} failed: {_last_line(result.stderr or result.stdout)}")
        return JobRef(cluster=self.cluster.name, job_id=parse_sbatch_id(result.stdout), backend=self.backend)

    def _submit_in(self, workdir: str, script: str, what: str,
                   files: Mapping[str, Path] | None = None) -> JobRef:
        """Create `workdir`, copy `files` (remote path -> local file), submit `script` from
        `workdir`/job.sbatch."""
        made = self._run(f"mkdir -p {shlex.quote(workdir)}")
        if not made.ok:
            raise LaunchError(f"cannot create {workdir} on {self.cluster.name}: {_last_line(made.stderr)}")
        for remote, local in (files or {}).items():
            self.runner.put(local, remote)
        return self._submit(script, f"{workdir}/job.sbatch", what)

    def _prepare_dirs(self, layout: RunLayout, attempt_dir: str) -> bool:
        """Create the attempt and checkpoint dirs; True when the recipe is already staged."""
        q = shlex.quote
        cmd = (f"mkdir -p {q(attempt_dir)} {q(layout.checkpoints)} && "
               f"if [ -e {q(layout.recipe)} ]; then echo staged; fi")
        result = self._run(cmd)
        if not result.ok:
            raise LaunchError(f"cannot create {attempt_dir} on {self.cluster.name}: {_last_line(result.stderr)}")
        return "staged" in result.stdout

    def _accounting(self, wanted: set[str]) -> tuple[dict[str, SlurmRow], str]:
        self.sacct_calls += 1
        result = self._run(commands.accounting(sorted(wanted, key=_id_order)))
        # Without an accounting database sacct may fail or print a warning: the rows it did
        # print are still good, and the queue covers the rest.
        if not result.ok and "accounting storage is disabled" in result.stderr.lower():
            self.accounting_disabled = True
            return parse_jobs(result.stdout, wanted), ""
        error = "" if result.ok else f"job accounting failed: {_last_line(result.stderr)}"
        return parse_jobs(result.stdout, wanted), error

    def _queue(self, wanted: set[str]) -> tuple[dict[str, SlurmRow], str]:
        self.squeue_calls += 1
        result = self._run(commands.queue(sorted(wanted, key=_id_order)))
        rows = parse_jobs(result.stdout, wanted)
        if result.ok or "invalid job id" in result.stderr.lower():
            return rows, ""
        return rows, f"job queue failed: {_last_line(result.stderr)}"


def _status(ref: JobRef, row: SlurmRow | None) -> JobStatus:
    if row is None:
        return JobStatus(ref=ref, state=JobState.UNKNOWN, reason="not listed by the scheduler")
    state = map_state(row.native_state)
    # Slurm reports 0 for jobs that have not ended; that is "no exit code yet", not success.
    exit_code = row.exit_code if state.terminal else None
    return JobStatus(ref=ref, state=state, native_state=row.native_state, exit_code=exit_code,
                     nodes=row.nodes, reason=row.reason, elapsed_s=row.elapsed_s)


def _id_order(job_id: str) -> tuple[int, str]:
    return (int(job_id) if job_id.isdigit() else 0, job_id)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


if TYPE_CHECKING:
    from orchestrator.seams import Launcher

    _CONFORMS: type[Launcher] = SlurmLauncher  # proven by mypy (CI), not assumed
