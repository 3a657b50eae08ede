"""One attempt of a run as a launcher submits it: its spec, the MLPerf container job it may carry
(parallelism, fabric overrides) and the data it mounts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.models.base import Frozen


class DataInput(Frozen):
    """A read-only dataset, checkpoint or tokenizer an MLPerf recipe mounts: `name` (an Azure ML
    input), `var` (the variable its implementation reads the mount from), `path` under the data root."""

    name: str
    path: str
    var: str | None = None


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
