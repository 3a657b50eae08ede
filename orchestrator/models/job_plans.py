"""Jobs a launcher writes itself: runs/ describes each job as data; the launcher writes its
scheduler's script from it (Slurm: slurm/health.py, slurm/staging.py, slurm/container.py), so
no script text crosses the seam. The health gate, a fabric test, and a staging job with the
container it builds."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from orchestrator.models.base import Frozen
from orchestrator.paths import DEFAULT_DATA_ROOT


@dataclass(frozen=True)
class HealthCheckPlan:
    """The pre-run health gate on chosen nodes (runs/health.py fills it in): the per-task checks
    (templates/health_check.py, which the launcher copies to `script`), one task per GPU or per
    node on CPU sizes, then an all-reduce judged against `expected_busbw` GB/s (0: no figure)
    with the warn and fail fractions. The job's output lands at `output(job id)`."""

    run_id: str
    attempt: int
    nodes: tuple[str, ...]
    out_dir: str
    script: str  # where health_check.py goes on the cluster
    check_dir: str  # the folder whose file system the disk check measures
    python: str
    gpus_per_node: int
    ib_ports: int
    expected_busbw: float
    warn_frac: float
    fail_frac: float
    size_mb: float  # the all-reduce's message size
    collective_timeout: float  # seconds the all-reduce may take
    time_limit_min: int  # the whole job's
    partition: str | None = None

    def output(self, job_id: str) -> str:
        """The job's output file on the cluster (Slurm: the batch script's --output with %j)."""
        return f"{self.out_dir}/slurm-{job_id}.out"


@dataclass(frozen=True)
class FabricTestPlan:
    """One `azbench fabric test` job (fabric/runner.py fills it in): the collectives, one after
    another, over `nodes` nodes (exactly `nodelist` when given: one NVLink rack, or one node per
    rack), at message sizes `min_size`..`max_size` (nccl-tests' -b/-e, factor `step_factor`).
    On GPU sizes each collective is nccl-tests' `<collective>_perf` from `nccl_tests_dir` with
    one task per GPU and `env` (NCCL_DEBUG=INFO and the SKU's network settings); on CPU sizes
    it is templates/fabric_collectives.py (which the launcher copies to `script`) run by
    `python` with `tasks_per_node` ranks per node. The job's output lands at `output(job id)`."""

    test_id: str
    nodes: int
    out_dir: str
    tasks_per_node: int
    gpus_per_node: int
    collectives: tuple[str, ...]
    min_size: str
    max_size: str
    step_factor: int
    iters: int
    warmup: int
    time_limit_min: int
    nodelist: tuple[str, ...] = ()
    nccl_tests_dir: str = ""
    python: str = ""
    script: str = ""
    env: tuple[tuple[str, str], ...] = ()
    partition: str | None = None

    def output(self, job_id: str) -> str:
        """The job's output file on the cluster (Slurm: the batch script's --output with %j)."""
        return f"{self.out_dir}/slurm-{job_id}.out"


class ContainerBuild(Frozen):
    """A recipe's container for one resolved config: built on a node from the implementation's
    pinned Dockerfile (the folder `path` of `repo` at `commit` is the build context) and saved as
    an enroot squashfs on the shared filesystem. `digest` names the squashfs: the commit pins the
    Dockerfile and every file of the context, so a new commit, folder or CPU architecture is a new
    file and an existing one is never rebuilt."""

    recipe: str
    repo: str
    commit: str
    path: str
    arch: str

    @property
    def digest(self) -> str:
        key = f"{self.repo}@{self.commit}:{self.path}/Dockerfile {self.arch}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def squashfs(self, data_root: str = DEFAULT_DATA_ROOT) -> str:
        return f"{data_root.rstrip('/')}/containers/{self.recipe}-{self.digest}.sqsh"


@dataclass(frozen=True)
class StageItem:
    """One data item of a staging job: licence-gated (`gated_files` set: only verified where the
    user placed them, never fetched), fetched through MLCommons' R2 path (`r2`: each folder
    under `dest` and its metadata URI, then the shell command `after`), or fetched by the
    recipe's shell `command` run in `dest`; then checked against `sha256` (`sha256sum -c` lines,
    empty: none) and marked staged."""

    name: str
    kind: str  # dataset, checkpoint, tokenizer
    dest: str
    sha256: str
    command: str = ""
    r2: tuple[tuple[str, str], ...] = ()
    after: str = ""
    gated_files: tuple[str, ...] = ()
    sizes: str = ""  # "BYTES  PATH" lines a gated item's files must match
    optional: bool = False  # reported when missing, never fails the job
    size_gb: float | None = None
    source: str = ""  # where the item and its command come from


@dataclass(frozen=True)
class StageStep:
    """One in-container step of a staging job (an implementation README's preprocessing): `run`
    in the built container with `mounts` ("HOST:PATH,...") and `workdir`; done when `marker`
    holds the key over the command, mounts, `inputs` (one file a line) and the previous step's
    marker `prev`. `other_impl`: the step is another implementation's than the container's
    (`implementations`), so it is not run; `last_of_own`: its item has no download of its own,
    so this step marks it staged."""

    label: str  # ITEM/STEP
    source: str
    run: str
    dest: str
    marker: str
    mounts: str
    workdir: str
    inputs: str
    prev: str = ""
    implementations: tuple[str, ...] = ()
    other_impl: bool = False
    last_of_own: bool = False


@dataclass(frozen=True)
class StageRequest:
    """`azbench prepare`'s job for one recipe (runs/launch.py fills it in): gated items verified
    first, the rest fetched, then `container` built (None: data only), then the steps. The job
    prints one "NAME: ..." line per item into `output(job_id)`.

    `r2_origin` replaces the scheme and host of every R2 URL (a mirror); `builder` is a program
    run instead of the docker + enroot build; `runner` one run instead of the container job step
    of each step."""

    recipe: str
    data_root: str  # without a trailing slash ("" is the root)
    items: tuple[StageItem, ...] = ()
    steps: tuple[StageStep, ...] = ()
    container: ContainerBuild | None = None
    partition: str | None = None
    r2_origin: str | None = None
    builder: str | None = None
    runner: str | None = None
    # (item, its folder, what it holds once staged: absolute paths, shell globs): checked last,
    # for every item marked staged (DataItem.files, what its implementation opens there).
    provided: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def output(self, job_id: str) -> str:
        """The job's output file on the cluster."""
        return f"{self.data_root}/staging/{self.recipe}-{job_id}.out"
