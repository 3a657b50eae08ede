"""The Azure ML launcher: one run attempt -> one Azure ML command job on the cluster's AmlCompute.

`submit` turns an AttemptSpec into `azure.ai.ml.command(...)`: the recipe directory as code, a
container-image environment, instance_count = nodes, PyTorchDistribution (plain recipes) or
MpiDistribution (MLPerf container recipes) with one process per GPU (1 on CPU), shm_size, the
attempt's environment, MLPerf data as read-only inputs, and two outputs: a per-run checkpoints
folder shared by every attempt (so a retry resumes) and a per-attempt results folder. `poll` maps
Azure ML statuses through AZUREML_STATES; `cancel` is begin_cancel; `fetch_logs` downloads the
job's logs and results into dest/attempt-<k>/ and writes train.log from rank 0's user log, so
ingest works exactly as for Slurm. azure.ai.ml is imported only inside functions.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError, LaunchError, MissingCapability
from orchestrator.models import AttemptSpec, Cluster, JobRef, JobState, JobStatus, NodeInfo
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azureml import clients as aml
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.providers.azureml.records import JobInfo
from orchestrator.paths import RunLayout, job_name, safe_local_path
from orchestrator.seams import LauncherParts, shell_name

S = JobState
# Azure ML job status (azure/ai/ml/operations/_run_history_constants.py) -> JobState. One table.
AZUREML_STATES: dict[str, JobState] = {
    "NotStarted": S.PENDING,
    "Queued": S.PENDING,
    "Preparing": S.PENDING,  # image build / pull
    "Provisioning": S.PENDING,  # AmlCompute scaling up nodes
    "Starting": S.PENDING,
    "Running": S.RUNNING,
    "CancelRequested": S.COMPLETING,
    "Finalizing": S.COMPLETING,  # uploading outputs and logs
    "Completed": S.COMPLETED,
    "Failed": S.FAILED,
    "Canceled": S.CANCELLED,
    # Terminal in the SDK: the run stopped heartbeating because a node or its agent died. That is
    # the cloud's fault, not the recipe's, so it is an infra failure azbench retries (from a
    # checkpoint), exactly like Slurm's NODE_FAIL.
    "NotResponding": S.NODE_FAIL,
    # Also terminal in the SDK and nothing resumes it unattended: waiting on it as "pending"
    # would stall the monitor until its hang timeout. Treated like a preemption: infra, retried.
    "Paused": S.PREEMPTED,
}
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:24.09-py3"
DEFAULT_DATASTORE = "workspaceblobstore"
EXPERIMENT = "azbench"
RANK0_LOGS = ("std_log_process_0.txt", "std_log.txt")  # distributed, then single-process name
# AML compute node states that mean "do not count on this node".
_BAD_NODES = {"unusable", "leaving", "preempted"}
_ATTEMPT = re.compile(r"-a(\d+)$")


def map_state(native: str) -> JobState:
    return AZUREML_STATES.get(str(native).strip(), JobState.UNKNOWN)


class AzureMLLauncher:
    """Launcher over MLClient.jobs and .compute (through clients.py). `ml_client` is an MLClient (or a fake with the
    same operations); else `ml_factory` builds one on first use (the provider's connect passes
    one for the cluster's workspace).

    Azure ML runs jobs, not commands, on nodes it picks itself: there is no job step, drain or
    topology, no health gate on chosen nodes and no shared file system to stage data on (it has
    no part: `parts()` is all None), and a running job's log is only served as a stream
    (`follow`, through `jobs.stream`), so progress and hang detection from the log are not
    available."""

    backend = "azureml"

    def __init__(self, cluster: Cluster, ml_client: MLClient | None = None, *, image: str | None = None,
                 datastore: str = DEFAULT_DATASTORE, ml_factory: Callable[[], MLClient] | None = None) -> None:
        self.cluster = cluster
        self._ml = ml_client
        self._factory = ml_factory
        self.image = image  # an explicit override; otherwise the attempt names its image
        self.datastore = datastore

    @property
    def ml(self) -> MLClient:
        if self._ml is None:
            if self._factory is None:
                raise LaunchError(f"no Azure ML client for cluster '{self.cluster.name}'")
            self._ml = self._factory()
        return self._ml

    def submit(self, attempt: AttemptSpec, recipe_dir: Path | None = None) -> JobRef:
        """Create the command job (or adopt the one a crashed azbench already created)."""
        name = job_name(attempt.run_id, attempt.attempt)
        ref = JobRef(cluster=self.cluster.name, job_id=name, backend=self.backend, run_dir=attempt.run_dir)
        if self._get(name) is not None:
            return ref
        job = build_job(attempt, recipe_dir, self.cluster, image=self.image, datastore=self.datastore)
        with arm_call(f"submit Azure ML job {name}"):
            try:
                aml.submit_job(self.ml, job)
            except Exception as exc:
                if _is_sdk_error(exc):
                    raise LaunchError(f"Azure ML rejected job {name}: {_one_line(str(exc))}") from None
                raise
        return ref

    def find(self, name: str) -> JobRef | None:
        """The job called `name` in the workspace (job names are unique there), or None."""
        if self._get(name) is None:
            return None
        return JobRef(cluster=self.cluster.name, job_id=name, backend=self.backend)

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        """One jobs.get per job (Azure ML has no batch status call); errors read as UNKNOWN."""
        out: dict[str, JobStatus] = {}
        for ref in refs:
            try:
                job = self._get(ref.job_id)
            except LaunchError as exc:
                out[ref.job_id] = JobStatus(ref=ref, state=S.UNKNOWN, reason=exc.message)
                continue
            out[ref.job_id] = _status(ref, job)
        return out

    def cancel(self, ref: JobRef) -> None:
        """begin_cancel without waiting; a job that is gone or already ended counts as cancelled."""
        job = self._get(ref.job_id)
        if job is None or map_state(job.status).terminal:
            return
        try:
            aml.cancel_job(self.ml, ref.job_id)
        except Exception as exc:
            after = self._get(ref.job_id)
            if after is None or map_state(after.status).terminal:
                return
            raise LaunchError(f"cancel of Azure ML job {ref.job_id} failed: {_one_line(str(exc))}") from None

    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        """Logs and results of the ref's job (job_id "-": every attempt of the run) into
        dest/attempt-<k>/, train.log from rank 0's user log. Jobs still running are skipped."""
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        written: list[Path] = []
        for name, k in self._attempt_jobs(ref):
            job = self._get(name)
            if job is None or not map_state(job.status).terminal:
                continue
            with tempfile.TemporaryDirectory(prefix="azbench-aml-") as tmp:
                written += self._download(name, k, Path(tmp), root)
        return written

    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
        """A finished attempt's file (train.log, or one of its results), downloaded; Azure ML
        serves a running job's log only as a stream (MissingCapability: use `follow`)."""
        where = RunLayout.parse(path)
        if where is None:
            raise LaunchError(f"{path} is not a file of an azbench attempt (<run>/attempt-<k>/...)")
        run_id, k, rel = where
        name = job_name(run_id, k)
        job = self._get(name)
        if job is None:
            return b""
        if not map_state(job.status).terminal:
            raise self._missing("read a running job's log piecemeal",
                                hint=f"`azbench logs {run_id} --follow` streams it")
        with tempfile.TemporaryDirectory(prefix="azbench-aml-") as tmp:
            (Path(tmp) / "job").mkdir()
            self._download(name, k, Path(tmp) / "job", Path(tmp).resolve())
            local = Path(tmp) / f"attempt-{k}" / rel
            data = local.read_bytes() if local.is_file() else b""
        return data[-nbytes:] if nbytes else data[offset:]

    def follow(self, ref: JobRef, path: str, sink: Callable[[bytes], None], *,
               stop: Callable[[], bool], offset: int = 0, interval: float = 1.0,
               sleep: Callable[[float], None] | None = None) -> int:
        """A running job: azure-ai-ml's `jobs.stream`, which prints the job's user logs as they
        grow until it ends (azure/ai/ml/operations/_job_ops_helper.py,
        stream_logs_until_completion, writes to sys.stdout: redirected into `sink` here). A
        finished job: its log from `offset`, downloaded. Returns the offset reached."""
        where = RunLayout.parse(path)
        name = ref.job_id if ref.job_id not in ("", "-") else (
            job_name(where[0], where[1]) if where else "")
        job = self._get(name) if name else None
        if job is None:
            raise LaunchError(f"Azure ML has no job {name or path}")
        if map_state(job.status).terminal:
            data = self.tail(path, offset=offset)
            if data:
                sink(data)
            return offset + len(data)
        if stop():
            raise self._missing("show a running job's log without following it",
                                hint="add --follow to stream it until the job ends")
        writer = _SinkWriter(sink)
        with contextlib.redirect_stdout(writer):
            try:
                aml.stream_job(self.ml, name)
            except Exception as exc:
                after = self._get(name)
                if after is None or not map_state(after.status).terminal or not _is_sdk_error(exc):
                    raise LaunchError(f"cannot stream the log of Azure ML job {name}: "
                                      f"{_one_line(str(exc))}") from None
                # stream() raises for a job that ended Failed, after printing its log.
        return offset + writer.count

    def node_states(self) -> dict[str, NodeInfo]:
        """The compute's current nodes (none while it is scaled to zero)."""
        compute = _compute(self.cluster)
        with arm_call(f"list nodes of {compute}"):
            nodes = aml.compute_nodes(self.ml, compute)
        out = {}
        for node in nodes:
            bad = node.state in _BAD_NODES
            out[node.node_id] = NodeInfo(node.node_id, "down" if bad else node.state,
                                         reason=f"Azure ML node state {node.state}" if bad else "")
        return out

    def parts(self) -> LauncherParts:
        """No part: Azure ML places a job's nodes itself (no gate, step or drain on chosen nodes,
        no topology), mounts a job's data from the workspace's datastore (nothing to stage), and
        the recipe resumes from its newest checkpoint in that datastore itself; a running job's
        log is served only as a stream (`follow`)."""
        return LauncherParts(why_absent={
            "gate": "Azure ML places a job's nodes itself: none can be picked or left out",
            "nodes": "Azure ML replaces unhealthy nodes itself",
            "staging": "Azure ML jobs mount their data from the workspace's datastore"})

    def close(self) -> None:
        return None

    # -- helpers ---------------------------------------------------------------------------

    def _missing(self, what: str, hint: str | None = None) -> MissingCapability:
        return MissingCapability(self.cluster.name, self.backend, what, hint=hint)

    def _get(self, name: str) -> JobInfo | None:
        with arm_call(f"read Azure ML job {name}"):
            try:
                return aml.read_job(self.ml, name)
            except Exception as exc:
                if is_not_found(exc):
                    return None
                if _is_sdk_error(exc):
                    raise LaunchError(f"cannot read Azure ML job {name}: {_one_line(str(exc))}") from None
                raise

    def _attempt_jobs(self, ref: JobRef) -> list[tuple[str, int]]:
        match = _ATTEMPT.search(ref.job_id)
        if ref.job_id != "-":
            if not match:
                raise LaunchError(f"job {ref.job_id} is not an azbench attempt job (azbench-<run>-a<k>)")
            return [(ref.job_id, int(match.group(1)))]
        run_id = Path(ref.run_dir.rstrip("/")).name
        found = []
        for k in range(1, 101):  # attempts are numbered from 1 without gaps
            name = job_name(run_id, k)
            if self._get(name) is None:
                break
            found.append((name, k))
        return found

    def _download(self, name: str, k: int, tmp: Path, root: Path) -> list[Path]:
        with arm_call(f"download Azure ML job {name}"):
            try:
                aml.download_job(self.ml, name, str(tmp))
                aml.download_job(self.ml, name, str(tmp), output_name="results")
            except Exception as exc:
                if _is_sdk_error(exc):
                    raise LaunchError(f"cannot download Azure ML job {name}: {_one_line(str(exc))}") from None
                raise
        copies = [(p, f"attempt-{k}/{p.relative_to(tmp / 'named-outputs' / 'results').as_posix()}")
                  for p in _files(tmp / "named-outputs" / "results")]
        logs = tmp / "artifacts" / "user_logs"
        copies += [(p, f"attempt-{k}/user_logs/{p.relative_to(logs).as_posix()}") for p in _files(logs)]
        targets = [(src, safe_local_path(root, rel)) for src, rel in copies]  # check all first
        for src, local in targets:
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, local)
        rank0 = next((logs / n for n in RANK0_LOGS if (logs / n).is_file()), None)
        if rank0 is None:
            return [t for _, t in targets]
        train = safe_local_path(root, f"attempt-{k}/train.log")
        train.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rank0, train)
        return [t for _, t in targets] + [train]


def build_job(attempt: AttemptSpec, recipe_dir: Path | None, cluster: Cluster, *,
              image: str | None = None, datastore: str = DEFAULT_DATASTORE) -> Command:
    """The azure.ai.ml Command for one attempt (its REST body is golden-tested).

    Everything recipe-specific comes in on the attempt: its image, its distribution (MPI for
    MLPerf container recipes, torch.distributed otherwise) and its read-only data inputs."""
    from azure.ai.ml import Input, MpiDistribution, Output, PyTorchDistribution, command
    from azure.ai.ml.entities import Environment
    if recipe_dir is None or not recipe_dir.is_dir():
        raise ConfigError(f"recipe directory {recipe_dir} does not exist (Azure ML uploads it as code)")
    procs = attempt.gpus_per_node if attempt.gpus_per_node > 0 else max(attempt.tasks_per_node, 1)
    dist = MpiDistribution(process_count_per_instance=procs) if attempt.distribution == "mpi" else \
        PyTorchDistribution(process_count_per_instance=procs)
    base = f"azureml://datastores/{datastore}/paths"
    inputs = {d.name: Input(type="uri_folder", mode="ro_mount", path=f"{base}/mlperf/{d.path}")
              for d in attempt.data}
    outputs = {"checkpoints": Output(type="uri_folder", mode="rw_mount",
                                     path=f"{base}/azbench/{attempt.run_id}/checkpoints"),
               "results": Output(type="uri_folder", mode="rw_mount",
                                 path=f"{base}/azbench/{attempt.run_id}/attempt-{attempt.attempt}")}
    return command(
        name=job_name(attempt.run_id, attempt.attempt), display_name=f"{attempt.recipe} {attempt.run_id} "
        f"attempt {attempt.attempt}", experiment_name=EXPERIMENT, code=str(recipe_dir),
        command=wrap_command(attempt, {d.var: d.name for d in attempt.data if d.var}),
        environment=Environment(image=_image(attempt, image)), compute=_compute(cluster),
        instance_count=attempt.nodes, distribution=dist, shm_size="256g" if attempt.gpus_per_node else "8g",
        environment_variables=job_env(attempt), inputs=inputs, outputs=outputs,
        timeout=attempt.time_limit_min * 60,
        tags={"azbench": "1", "azbench-cluster": cluster.name, "azbench-run": attempt.run_id,
              "azbench-attempt": str(attempt.attempt)})


def wrap_command(attempt: AttemptSpec, data_vars: dict[str, str]) -> str:
    """The job's shell command: the Slurm script's prologue and epilogue, per process.

    Links the uploaded code as <run_dir>/recipe and the output mounts as the checkpoint and
    attempt dirs, so the recipe's rendered command runs unchanged; rank 0 echoes the same start
    and stop lines the Slurm batch script writes, and its user log becomes train.log.
    """
    cmd = attempt.command + (" --resume" if attempt.resume else "")
    rank0 = '[ "${RANK:-${OMPI_COMM_WORLD_RANK:-0}}" = 0 ]'
    link = ('azb_link() { ln -sfn "$1" "$2.$$" && mv -Tf "$2.$$" "$2"; }; '
            'mkdir -p "$AZBENCH_RUN_DIR" && azb_link "$PWD" "$AZBENCH_RUN_DIR/recipe" && '
            'azb_link ${{outputs.checkpoints}} "$AZBENCH_CHECKPOINT_DIR" && '
            'azb_link ${{outputs.results}} "$AZBENCH_ATTEMPT_DIR" || exit 1')
    # Azure ML substitutes ${{inputs.x}} before the shell runs, so these are not quoted values;
    # the variable names still pass the one shell-name check.
    exports = "".join(f"export {shell_name(var)}=${{{{inputs.{name}}}}}; "
                      for var, name in sorted(data_vars.items()))
    return "\n".join(line for line in [
        link, exports.rstrip(),
        # The Slurm batch script's first two log lines, with Azure ML's run id and compute name.
        (f'if {rank0}; then echo ":::DLPAL azbench ${{AZUREML_RUN_ID:-}} {attempt.nodes} - '
         f'${{AZUREML_CR_COMPUTE_NAME:-}} "{shlex.quote(attempt.recipe)}; '
         'echo "AZBENCH_ATTEMPT_START $(date +%s) attempt=$AZBENCH_ATTEMPT resume=$AZBENCH_RESUME"; fi'),
        f"bash -c {shlex.quote(cmd)} 2>&1",
        "rc=$?",
        f'if {rank0}; then echo "AZBENCH_ATTEMPT_STOP $(date +%s) rc=$rc"; fi',
        'exit "$rc"'] if line)


def job_env(attempt: AttemptSpec) -> dict[str, str]:
    """The attempt's environment (an MLPerf recipe's resolved config included), then azbench's
    own AZBENCH_* variables."""
    env: dict[str, str] = dict(attempt.env)
    run_dir = attempt.run_dir.rstrip("/")
    env.update(AZBENCH_RUN_ID=attempt.run_id, AZBENCH_ATTEMPT=str(attempt.attempt),
               AZBENCH_RUN_DIR=run_dir, AZBENCH_ATTEMPT_DIR=f"{run_dir}/attempt-{attempt.attempt}",
               AZBENCH_CHECKPOINT_DIR=f"{run_dir}/checkpoints",
               AZBENCH_RESUME="1" if attempt.resume else "0")
    return env


def _status(ref: JobRef, job: JobInfo | None) -> JobStatus:
    if job is None:
        return JobStatus(ref=ref, state=S.UNKNOWN, reason="Azure ML has no such job")
    native = job.status
    state = map_state(native)
    exit_code = 0 if state == S.COMPLETED else None  # Azure ML reports no exit status
    reason = "" if state in (S.RUNNING, S.COMPLETED) else native
    return JobStatus(ref=ref, state=state, native_state=native, exit_code=exit_code, reason=reason)


def _image(attempt: AttemptSpec, override: str | None) -> str:
    image = override or attempt.image
    if not image:
        return DEFAULT_IMAGE
    # Recipes name images the enroot way (registry#repo:tag); Docker wants registry/repo:tag.
    return image.replace("#", "/", 1)


def _compute(cluster: Cluster) -> str:
    """The AmlCompute the cluster's jobs run on (its record's, else the cluster's name)."""
    return cluster.properties_as(AzureMLProps).compute or cluster.name


class _SinkWriter:
    """A text stream whose writes go to a byte sink (what jobs.stream prints)."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.sink, self.count = sink, 0

    def write(self, text: str) -> int:
        data = text.encode()
        self.count += len(data)
        if data:
            self.sink(data)
        return len(text)

    def flush(self) -> None:
        return None


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()) if root.is_dir() else []


def _is_sdk_error(exc: BaseException) -> bool:
    """azure.ai.ml's own exceptions (validation, job state) as opposed to HTTP errors."""
    from azure.ai.ml.exceptions import MlException
    return isinstance(exc, MlException)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


if TYPE_CHECKING:
    from azure.ai.ml import MLClient
    from azure.ai.ml.entities import Command

    from orchestrator.seams import Launcher

    _CONFORMS: type[Launcher] = AzureMLLauncher  # proven by mypy (CI), not assumed
