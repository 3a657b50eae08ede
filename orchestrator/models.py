"""Typed values that flow between the parts: plans, clusters, jobs, command results.

Pydantic models cross process or file boundaries (store rows, --json output); they are the
contract between providers, launchers, the monitor and the CLI.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum, StrEnum
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator

from orchestrator import backends
from orchestrator.paths import DEFAULT_DATA_ROOT


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def local_owner() -> str:
    """Who runs azbench here, for the owner of what it records where no cloud principal is
    known: $AZBENCH_OWNER (a team's chosen name), else $USER, else the login name."""
    import getpass
    import os
    for name in ("AZBENCH_OWNER", "USER"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "unknown"


def parse_utc(text: object) -> datetime | None:
    """An ISO 8601 time (a trailing Z allowed; naive means UTC), or None when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpecSection(Frozen):
    """A backend's own section of a cluster spec (`azure:`, `local:`, ...), keyed by `KEY`, the
    backend's name. The hooks let code above the providers use a section without knowing its
    backend; a section overrides those its backend honours."""

    KEY: ClassVar[str] = ""

    def cost_cap(self) -> float | None:
        """The most USD per hour the spec allows its cluster to cost, or None."""
        return None

    def capped_lifetime(self, hours: float) -> SpecSection:
        """This section with the cluster's self-enforced lifetime at most `hours`."""
        return self

    def up_questions(self) -> list[str]:
        """What `up` must ask before it creates anything from this section (e.g. a wide SSH range)."""
        return []


class ExecResult(Frozen):
    """Outcome of one command on a Runner."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class PlannedResource(Frozen):
    """One cloud (or local) resource a plan would create."""

    kind: str
    name: str
    count: int = 1
    properties: dict[str, str | int | bool | None] = Field(default_factory=dict)


class ScaleSetPlan(Frozen):
    """One GPU node group: an Azure VM scale set (one IB fabric) or the local node range."""

    name: str
    vms: int
    gpus: int
    racks: int | None = None


class Plan(Frozen):
    """What `up` would do. Pure data: computed without credentials or network."""

    cluster: str
    provider: str
    sku: str
    region: str | None
    nodes: int
    gpus_per_node: int
    total_gpus: int
    scale_sets: list[ScaleSetPlan]
    resources: list[PlannedResource]
    cost_per_hour_usd: float | None
    cost_is_estimate: bool = True
    preflight: list[str] = Field(default_factory=list, description="a line starting 'will check' is a read "
                                 "`up` (or --dry-run --check) makes; any other line was computed by the plan")
    warnings: list[str] = Field(default_factory=list)
    lifetime: str = Field("", description="how the cluster ends by itself (expiry, scale-down); "
                          "empty when only `azbench down` ends it")
    max_hours: float | None = Field(None, description="hours until the cluster deletes itself at the latest; "
                                    "None when nothing but `azbench down` (or sweep) ends it")

    @property
    def worst_case_usd(self) -> float | None:
        """The list-price cost if it runs until it deletes itself: cost per hour x max_hours
        (None when either is unknown)."""
        if self.cost_per_hour_usd is None or self.max_hours is None:
            return None
        return round(self.cost_per_hour_usd * self.max_hours, 2)


class ClusterState(StrEnum):
    """A cluster's record. PROVISIONING is stored, with its plan, before `up` creates anything,
    so a crash mid-up still leaves a record that `azbench down` deletes from."""

    PROVISIONING = "provisioning"
    READY = "ready"
    FAILED = "failed"
    DELETING = "deleting"  # `down` is deleting it, or the cloud is (`status` read so: its expiry agent)
    DELETE_FAILED = "delete failed"  # a `down` stopped part way: its event says what is left; rerun `down`
    TERMINATED = "terminated"


class RunState(StrEnum):
    """A run (one recipe x nodes x repeat) across all its attempts."""

    PENDING = "pending"  # a row created outside a sweep (tools, older stores)
    QUEUED = "queued"
    HEALTH_CHECK = "health_check"
    SUBMITTING = "submitting"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AttemptState(StrEnum):
    """One scheduler job of a run."""

    WAITING = "waiting"  # its row exists (with its excluded nodes) before its gate and submit
    HEALTH_CHECK = "health_check"
    SUBMITTING = "submitting"
    PENDING = "pending"  # submitted: the scheduler has it
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


def _moves(table: dict[str, str]) -> dict[str, frozenset[str]]:
    return {k: frozenset(v.split()) for k, v in table.items()}


# The allowed transitions, state -> states it may become (staying put is always allowed). The
# store refuses any other change (store.database), so a bug that skips a step, or revives a
# finished run, fails loudly instead of recording what did not happen.
# State names with a space ("delete failed") are written with "_" here.
CLUSTER_MOVES = {k.replace("_", " "): frozenset(m.replace("_", " ") for m in v) for k, v in _moves({
    "provisioning": "ready failed deleting terminated",
    "ready": "provisioning failed deleting terminated",  # provisioning again: a rerun of `up`
    "failed": "provisioning ready deleting terminated",
    # failed: the cloud's delete stopped part way (`status`); delete_failed: `down`'s did
    "deleting": "failed delete_failed terminated",
    "delete_failed": "deleting terminated",  # only `down` goes on from a delete that failed
    "terminated": "provisioning",  # the same name brought up (or adopted) again
}).items()}
RUN_MOVES = _moves({
    "pending": "queued health_check submitting running failed cancelled",
    "queued": "health_check submitting retrying failed cancelled",
    "health_check": "submitting retrying failed cancelled",
    "submitting": "running retrying failed cancelled",
    "running": "retrying succeeded failed cancelled",
    "retrying": "health_check submitting running failed cancelled",
    "succeeded": "", "failed": "", "cancelled": "",
})
ATTEMPT_MOVES = _moves({
    "waiting": "health_check submitting failed cancelled",
    "health_check": "submitting failed cancelled",
    "submitting": "pending failed cancelled",
    "pending": "running succeeded failed cancelled",
    "running": "succeeded failed cancelled",
    "succeeded": "", "failed": "", "cancelled": "",
})


def legal_move(table: dict[str, frozenset[str]], old: str | Enum, new: str | Enum) -> bool:
    """Whether `old` may become `new` in `table` (one of the *_MOVES above)."""
    old = old.value if isinstance(old, Enum) else old
    new = new.value if isinstance(new, Enum) else new
    return old == new or new in table.get(old, frozenset())


class SshTarget(Frozen):
    """How to reach a cluster's login node. Host keys are pinned in `known_hosts`."""

    host: str
    port: int = 22
    user: str
    key_path: Path
    known_hosts: Path


class ProviderProps(Frozen):
    """What one provider records about a cluster beyond the common fields (Cluster.properties).

    One model per backend, in its folder (providers/<backend>/props.py, named by the registry's
    `Backend.props`), told apart by `kind` (the provider's name). Every field has a default, so
    the PROVISIONING record (stored before `up` creates anything) and older stores load; a
    backend fills in what its `down` and capabilities need."""

    kind: str = ""

    def deadline(self) -> datetime | None:
        """When the cluster deletes itself, or None (only self-expiring clusters have one)."""
        return None

    def with_deadline(self, when: datetime) -> ProviderProps:
        """These properties with the deadline moved to `when` (ValueError where none exists)."""
        raise ValueError(f"{type(self).__name__} records no expiry")

    @property
    def is_spot(self) -> bool:
        """Whether the cluster's nodes are spot (evictable) capacity."""
        return False

    def rack_size(self) -> int | None:
        """The VMs per NVLink rack the cluster was laid out with (GB200: 18, or 16 as Azure's
        record run; `resize` keeps whole racks of it), or None where the record does not say."""
        return None

    def principal(self) -> str | None:
        """The cloud principal that owns the cluster, as its resources record it (Azure: the
        azbench-owner tag, the signed-in object id), or None where the backend has none."""
        return None

    def up_notes(self) -> tuple[str, ...]:
        """What the backend saw someone else do to the cluster while `up` ran, and what it did
        about it (e.g. its tags rewritten by another writer, then restored): `up` records each
        as an `up_interference` event."""
        return ()


P = TypeVar("P", bound=ProviderProps)


def props_model(provider: str) -> type[ProviderProps]:
    """The model of what clusters of `provider` record (its backend's `props`); ValueError when
    no backend of that name is registered."""
    if provider not in backends.names():
        raise ValueError(f"no properties model for provider '{provider}'")
    model = backends.load(provider).props
    if not issubclass(model, ProviderProps):
        raise TypeError(f"provider '{provider}' records {model.__name__}, not a ProviderProps")
    return model


def _props_for(data: dict[str, Any]) -> ProviderProps:
    """The empty properties of the cluster's provider (a record with none recorded yet)."""
    return props_model(str(data.get("provider")))()


class Cluster(Frozen):
    """A cluster azbench created or adopted. `env` is exported before every remote command.
    `properties` is its provider's own record (a ProviderProps whose kind is `provider`); read
    it through `properties_as(AzureProps)`, which says so when the cluster is another kind."""

    name: str
    provider: str
    sku: str
    nodes: int
    region: str | None = None
    state: ClusterState = ClusterState.PROVISIONING
    node_names: list[str] = Field(default_factory=list)
    partition: str | None = None
    workdir: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    ssh: SshTarget | None = None
    cost_per_hour_usd: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    properties: SerializeAsAny[ProviderProps] = Field(default_factory=_props_for)

    @model_validator(mode="before")
    @classmethod
    def _typed_properties(cls, data: Any) -> Any:
        """A properties dict becomes the model its `kind` names (its backend's props). Rows
        stored before typed properties hold a plain dict without `kind`: its kind is the
        cluster's provider, and keys that model no longer has (Azure ML's unused `image`, ...)
        go."""
        if not isinstance(data, Mapping):
            return data
        props = data.get("properties")
        if not isinstance(props, Mapping):
            return data
        kind = props.get("kind", data.get("provider"))
        model = props_model(str(kind))
        if "kind" not in props:
            props = {k: v for k, v in props.items() if k in model.model_fields}
        return {**data, "properties": model.model_validate(props)}

    @model_validator(mode="after")
    def _props_match_provider(self) -> Cluster:
        if self.properties.kind != self.provider:
            raise ValueError(f"cluster '{self.name}' of provider '{self.provider}' cannot hold "
                             f"{type(self.properties).__name__} (kind '{self.properties.kind}')")
        return self

    def properties_as(self, cls: type[P]) -> P:
        """The properties as `cls`; TypeError naming both kinds when the cluster is another kind."""
        if not isinstance(self.properties, cls):
            raise TypeError(f"cluster '{self.name}' (provider '{self.provider}') has properties "
                            f"{type(self.properties).__name__}, not {cls.__name__}")
        return self.properties


class JobState(str, Enum):
    """azbench's view of a scheduler job; launchers map their native states into it."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETING = "completing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    PREEMPTED = "preempted"
    OUT_OF_MEMORY = "out_of_memory"
    BOOT_FAIL = "boot_fail"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self not in _ACTIVE


_ACTIVE = {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.UNKNOWN}

# A run (RunRow.state) in one of these states is finished: no job of it is live any more.
FINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})
FINAL_ATTEMPT_STATES = frozenset({AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELLED})


# Node states (Slurm's node-state vocabulary, which other launchers map into) that mean "do not
# schedule benchmark work here".
BAD_NODE_STATES = frozenset(
    {"down", "drained", "draining", "drain", "fail", "failing", "future", "inval", "unknown",
     "not_responding", "power_down", "powered_down", "powering_down", "reboot_issued"}
)


@dataclass(frozen=True)
class NodeInfo:
    """One node as its scheduler reports it. `state` is the base state ("down" from Slurm's "down*")."""

    name: str
    state: str
    reason: str = ""
    responding: bool = True

    @property
    def usable(self) -> bool:
        return self.responding and self.state not in BAD_NODE_STATES


class JobRef(Frozen):
    """A submitted job: enough to poll, cancel and fetch it after a restart of azbench."""

    cluster: str
    job_id: str
    backend: str = "slurm"
    run_dir: str = ""


class JobStatus(Frozen):
    ref: JobRef
    state: JobState
    native_state: str = ""
    exit_code: int | None = None
    nodes: list[str] = Field(default_factory=list)
    reason: str = ""
    elapsed_s: float | None = None


class DataInput(Frozen):
    """A read-only dataset, checkpoint or tokenizer an MLPerf recipe mounts: `name` (an Azure ML
    input), `var` (the variable its implementation reads the mount from), `path` under the data root."""

    name: str
    path: str
    var: str | None = None


# -- jobs a launcher writes itself ------------------------------------------------------------
# runs/ describes each job as data; the launcher writes its scheduler's script from it (Slurm:
# slurm/health.py, slurm/staging.py, slurm/container.py), so no script text crosses the seam.


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


class MountedData(Frozen):
    """A staged data item a container job mounts read-only: staged at `path` on the cluster
    (marked `.azbench-staged` by the staging job), seen at `mount` inside the container, and
    each `also` (a path under the item -> container path, "." for the item itself) mounted as
    well, where the implementation opens it at a second place (DLRM's /data_val, GPT-3's
    /workspace/llm/tokenizer.model)."""

    name: str
    path: str
    mount: str | None = None  # None: staged for prepare only; `also` mounts what it made
    also: dict[str, str] = Field(default_factory=dict)  # host path -> container path


class Parallelism(Frozen):
    """How a run splits its model over its GPUs: tensor, pipeline, context, virtual-pipeline and
    data parallel sizes, micro and global batch, gradient accumulation."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    vp: int | None = None
    dp: int
    mbs: int | None = None
    gbs: int | None = None
    grad_accum: int | None = None


class FabricOverride(Frozen):
    """One variable the job sets (or unsets, value None) after the submission's config because
    the cluster's fabric cannot do what the config asks, with where the config asked and why."""

    name: str
    value: str | None
    asked: str  # what the config set, e.g. "NCCL_COLLNET_ENABLE=1 [recipes/configs/...:32]"
    why: str


class ContainerRun(Frozen):
    """An MLPerf attempt as one container task per GPU on every node, for a launcher that writes
    its own batch script (Slurm: pyxis/enroot, slurm/container.py). runs/launch.py fills it from
    the recipe's resolved config; the attempt's own paths and excluded nodes come from the
    AttemptSpec that carries it."""

    recipe: str
    benchmark: str  # the MLPerf benchmark key the result line names
    command: str  # each task's command in the container, writing under /results
    image: str | None  # registry#repo:tag, or the squashfs `azbench prepare` built
    workdir: str  # the container's working directory
    sku_short: str
    nodes: int
    gpus_per_node: int
    gpus: int
    walltime_min: int  # the timed run's limit (the job gets 20 minutes more for setup)
    parallelism: Parallelism
    mp_gpus: int | None = None  # GPUs of one model-parallel group (TP*PP*CP) where it is placed
    segment: int | None = None  # VMs of one such group, kept inside one NVLink rack
    # Why there is no --segment although the layout has one (a Slurm without topology/block).
    segment_note: str = ""
    derived: bool = False
    rule: str | None = None  # how a derived config was derived
    source: str = ""  # which listed config it is
    ruleset: str | None = None  # the MLPerf ruleset the log is checked against (None: not checked)
    env: dict[str, str] = Field(default_factory=dict)  # the benchmark's variables, set last
    network_env: dict[str, str] = Field(default_factory=dict)  # the SKU's NCCL/UCX/IB setup
    network_source: str = ""
    network_mounts: list[str] = Field(default_factory=list)  # host folders the network needs
    data_root: str  # where the recipe's data is staged; `data` lies under it
    data: list[MountedData] = Field(default_factory=list)
    config: str | None = None  # the submission's config file, as vendored in recipes/configs/
    config_files: dict[str, str] = Field(default_factory=dict)  # it and what it sources, by name
    config_entry: str | None = None  # the file sourced first
    pre_env: dict[str, str] = Field(default_factory=dict)  # what the config reads while sourced
    seed: int | None = None  # None: a random seed per job
    check_compliance: bool = True  # run MLPerf's compliance checker on the log after the run
    # How the implementation's own run.sub launches its timed job step (recipes/configs/*/PATHS.txt):
    # the MPI plugin, pyxis' --container-remap-root, and the variables it forces over the
    # image's own ENV with --container-env (MASTER_ADDR, MASTER_PORT and SEED always).
    mpi: str = "pmix"
    remap_root: bool = False
    container_env: list[str] = Field(default_factory=lambda: ["MASTER_ADDR", "MASTER_PORT", "SEED"])
    launch_source: str = ""
    # Container paths backed by a fresh folder of the attempt on shared storage, as the
    # implementation's config_mounts.sh / run.sub back them under its LOGDIR (Megatron's
    # /npy_index cache, which every rank reads from the first rank that builds it).
    scratch: list[str] = Field(default_factory=list)
    # Container folders the implementation's run.sub creates before its timed job step (`mkdir`
    # rows of its PATHS.txt), under a folder the job mounts writable (/results, /checkpoints, a
    # scratch path): LoRA's /results/data_index/{train,val}, where its YAML builds the index.
    make_dirs: list[str] = Field(default_factory=list)
    make_dirs_source: str = ""  # the run.sub lines they come from
    # Settings the published config asks for that Azure's fabric cannot honour, set (or unset,
    # value None) after the config is sourced, each with why (FabricOverride).
    fabric: list[FabricOverride] = Field(default_factory=list)
    # The GEMM precision the sourced config trains in (fp4/fp8/bf16) and where that was read:
    # the launch writes it into the log (":::AZBENCH_PRECISION"), and MFU uses it.
    precision: str | None = None
    precision_source: str = ""


class AttemptSpec(Frozen):
    """Everything a launcher needs to submit one attempt of one run."""

    run_id: str
    attempt: int
    recipe: str
    nodes: int
    run_dir: str
    command: str
    env: dict[str, str] = Field(default_factory=dict)
    exclude: list[str] = Field(default_factory=list)
    resume: bool = False
    time_limit_min: int = 30
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    container: ContainerRun | None = Field(None, description="an MLPerf recipe's container job; "
                                           "a launcher with batch scripts writes its script from it")
    # What a launcher without batch scripts (Azure ML) builds its job from.
    image: str | None = Field(None, description="container image (enroot form registry#repo:tag)")
    distribution: Literal["torch", "mpi"] = "torch"
    data: list[DataInput] = Field(default_factory=list)


class ModelFacts(Frozen):
    """What MFU needs to know of a benchmark's model, each fact with its source.

    FLOPs per token F = 6*params + 12*layers*d_model*seq (mlperf-notes 10.3: 6N for forward and
    backward, Kaplan et al. 2020; 12*L*d*s for attention scores, PaLM appendix B, Chowdhery et
    al. 2022). `precision` is the GEMM precision the benchmark's reference submissions train in,
    so MFU is given against that peak as well as against dense BF16. A recipe carries them
    (its `model:` block); the report receives them from its caller, keyed by benchmark.
    """

    params: float = Field(gt=0, description="parameter count as published")
    layers: int = Field(ge=1)
    d_model: int = Field(ge=1)
    seq_len: int = Field(ge=1, description="used when the log has no max_sequence_length")
    precision: str = Field(pattern="^(bf16|fp8|fp4)$")
    # Parameters that get weight gradients; None = all (pre-training). A frozen base (LoRA) still
    # runs forward (2N) and the activation-gradient backward (2N), but no weight gradients.
    trainable_params: float | None = Field(None, gt=0)
    # Parameters every token passes through, where that is not all of them (FLUX.1: its blocks'
    # timestep modulation and the embedders run once per sample); None = params.
    token_params: float | None = Field(None, gt=0)
    # Training FLOPs per sample counted from the layer dimensions, for a model with no token
    # sequence (DLRM-DCNv2, RetinaNet, R-GAT: `seq_len` 1, a "token" is a sample); it replaces
    # the transformer formula, and `sample_flops_method` says how it was counted.
    sample_flops: float | None = Field(None, gt=0)
    sample_flops_method: str = ""
    source: str
    # The GEMM precision of the config each published system ran (the one its README names:
    # recipes/configs/*/*/SUBMISSIONS.txt), by the system's label (e.g.
    # "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo") -> "fp4: FP4=True (file:line); config X, named by
    # README:LINE", filled by recipes.catalog.model_facts for every vendored config: an imported
    # log that does not say its precision is measured against the one its system's config set.
    config_precisions: dict[str, str] = Field(default_factory=dict)
    # NVIDIA's own count, MODEL_TFLOP_PER_SAMPLE in the submissions' config_common*.sh (read from
    # the vendored file by model_facts), and why azbench's F differs where it does (the recipe's).
    reference_tflop_per_sample: float | None = None
    reference_source: str = ""
    reference_note: str = ""

    def flops_per_token(self, seq_len: int | None = None) -> float:
        seq = seq_len or self.seq_len
        if self.sample_flops is not None:  # F x GBS x seq (definitions.mfu) is then F x GBS
            return self.sample_flops / seq
        per_token = self.params if self.token_params is None else self.token_params
        trained = per_token if self.trainable_params is None else self.trainable_params
        return 4.0 * per_token + 2.0 * trained + 12.0 * self.layers * self.d_model * seq

    @property
    def formula(self) -> str:
        if self.sample_flops is not None:
            return (f"{self.sample_flops:,.4g} FLOP per sample, counted from the layer dimensions: "
                    f"{self.sample_flops_method}")
        if self.trainable_params is not None:
            return (f"4N + 2N_trainable + 12*L*d*s per token (frozen base: forward 2N and "
                    f"activation gradients 2N, weight gradients only for {self.trainable_params:,.0f}"
                    f" trainable parameters; attention: PaLM app. B)")
        if self.token_params is not None:
            return (f"6N_token + 12*L*d*s per token (N_token: the {self.token_params:,.0f} parameters "
                    f"every token passes through, of {self.params:,.0f}; the rest run once per "
                    "sample; 6N: Kaplan et al. 2020; attention: PaLM app. B)")
        return "6N + 12*L*d*s per token (6N: Kaplan et al. 2020; attention: PaLM app. B)"


_NODE_IN_TEXT = re.compile(r"\b[A-Za-z][\w-]*node[\w-]*?\d+\b|\bnode\d+\b")


def named_nodes(text: str) -> tuple[str, ...]:
    """The node names a failure's evidence spells out ("node3", "gpu-node-3"), first seen first:
    the one rule behind the retry's exclusions (runs.failures) and goodput's failure.nodes."""
    return tuple(dict.fromkeys(_NODE_IN_TEXT.findall(text or "")))
