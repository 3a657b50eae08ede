"""What azbench keeps from one MLPerf result log (RunSummary) and its parts: eval points, step
times and where they came from, checkpoints. Stored as JSON (results' summary_json) with its
computed fields; results/mllog.py builds one from a log's lines, and its names stay importable
from there."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import ConfigDict, Field, computed_field

from orchestrator.models import Frozen

# Where a summary's step times came from (RunSummary.step_time_source):
#   tracked_stats:  one train step each (metadata.step; post-eval steps marked)
#   tracked_block_avg: one per-block average per block (NVIDIA v5.1 mlperf_common, e.g. LoRA: a
#       train_step_time with no metadata.step just before each block_stop), so no post-eval marking
#   block_derived:  block duration / (block samples_count / global_batch_size), per block
#   tracked_throughput: GBS / the samples per second a tracked_stats "throughput" reports over its
#       window (NVIDIA's DLRM-DCNv2, RetinaNet and R-GAT logs, which log no step time): the
#       window's mean step, data loading included; used where no block gives steps
#   block:          whole block durations; not step times, and never used as such
StepTimeSource = Literal["tracked_stats", "tracked_block_avg", "block_derived", "tracked_throughput",
                         "block"]

Scalar = str | int | float | bool | None


class EvalPoint(NamedTuple):
    """One eval_accuracy: progress (samples_count, else epoch_num), value, and its time."""

    progress: int | float | None
    value: float | None
    time_ms: int


class StepTime(NamedTuple):
    """One training step: its `metadata.step` (or running index) and its duration in seconds."""

    step: int
    seconds: float


class Checkpoint(NamedTuple):
    """One checkpoint an azbench recipe logged (CHECKPOINT): the step it holds, when it was
    complete (ms) and how long writing it took (s)."""

    step: int
    time_ms: int
    seconds: float


class RunSummary(Frozen):
    """Everything azbench keeps from one result log. Stored as JSON; computed fields included."""

    # Stored as JSON with its computed fields, which validation must read past: extras ignored.
    model_config = ConfigDict(frozen=True, extra="ignore")

    benchmark: str | None = None
    ruleset: str | None = None
    submitter: str | None = None
    platform: str | None = None
    division: str | None = None
    submission_status: str | None = None
    status: str | None = None
    run_start_ms: int | None = None
    run_stop_ms: int | None = None
    init_start_ms: int | None = None
    init_stop_ms: int | None = None
    global_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    seed: int | None = None
    max_sequence_length: int | None = None
    target_accuracy: float | None = None
    progress_key: Literal["samples_count", "epoch_num"] | None = None
    eval_points: list[EvalPoint] = Field(default_factory=list)
    step_times: list[StepTime] = Field(default_factory=list)
    step_time_source: StepTimeSource | None = None
    # Median over blocks of each node's compute time per step (azbench recipes log it).
    node_step_times: dict[str, float] = Field(default_factory=dict)
    eval_steps: list[int] = Field(default_factory=list)
    # (eval_start, eval_stop) times in ms, each stop paired with the start before it.
    eval_spans: list[tuple[int, int]] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    last_time_ms: int | None = None  # the latest time_ms of any event: the last sign of work
    # The batch script's AZBENCH_ATTEMPT_START/STOP lines (epoch seconds): the job's own span.
    job_start_s: int | None = None
    job_stop_s: int | None = None
    resume_step: int | None = None
    init_checkpoint_step: int | None = None
    lines_total: int = 0
    mllog_lines: int = 0
    bad_lines: int = 0
    non_utf8_lines: int = 0
    other_lines: int = 0
    truncated: bool = False
    long_lines: int = 0  # lines over MAX_LINE bytes, skipped unread
    # Why the result is invalid (out-of-range time_ms, run_stop before run_start); empty if valid.
    problems: list[str] = Field(default_factory=list)
    key_counts: dict[str, int] = Field(default_factory=dict)
    params: dict[str, Scalar] = Field(default_factory=dict)
    dlpal: str | None = None
    sysjson: dict[str, Any] | None = None
    git_commit: str | None = None
    result_line: str | None = None
    # "rc=N ruleset=R" of the in-container compliance checker (container_launch.sh.j2).
    compliance_line: str | None = None
    # "gemm=PRECISION source=WHERE": the GEMM precision of the config the job sourced (same).
    precision_line: str | None = None
    # The lowest precision the log's fp8/fp4 hyperparameters turn on ("fp4"), and the first
    # line's words that say so ("fp4='e2m1'"); None when the log sets neither on.
    logged_precision: str | None = None
    logged_precision_text: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def minutes(self) -> float | None:
        """Time to train: first run_stop minus first run_start, in minutes."""
        return _minutes(self.run_start_ms, self.run_stop_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def init_minutes(self) -> float | None:
        return _minutes(self.init_start_ms, self.init_stop_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def converged(self) -> bool:
        return self.status == "success" and not self.problems

    @computed_field  # type: ignore[prop-decorator]
    @property
    def last_eval_progress(self) -> int | float | None:
        return self.eval_points[-1].progress if self.eval_points else None


def _minutes(start_ms: int | None, stop_ms: int | None) -> float | None:
    if start_ms is None or stop_ms is None or stop_ms < start_ms:
        return None
    return (stop_ms - start_ms) / 60000.0
