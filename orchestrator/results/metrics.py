"""Pure maths over run results: time-to-train, MLPerf scores, step-time statistics, throughput,
MFU, scaling efficiencies, speedups and cost. No I/O; bad inputs raise ConfigError.

Conventions (docs/mlperf-notes §4 and §10): scores are olympic means over exactly N required runs,
a non-converged run (None) counts as the slowest; efficiencies are never capped at 1;
weak-scaling efficiency is t_base / t_n on step times.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.errors import ConfigError
from orchestrator.models import Frozen

if TYPE_CHECKING:
    from orchestrator.results.mllog import RunSummary

# Required result files per benchmark (mlperf_logging benchmark_meta.py; training_rules.adoc).
REQUIRED_RUNS: dict[str, int] = {
    "llama31_405b": 3, "deepseekv3_671b": 3, "qwen35_397b_grpo": 3, "gpt3": 3,
    "retinanet": 5, "ssd": 5, "resnet": 5,
    "llama31_8b": 10, "llama2_70b_lora": 10, "flux1": 10, "gpt_oss_20b": 10, "dlrm_dcnv2": 10,
    "rgat": 10, "gnn": 10, "stable_diffusion": 10, "bert": 10,
    "unet3d": 40,
    "smoke": 3,  # azbench's own CPU recipe
}
# How many runs the olympic mean drops at each end (result_summarizer: 4 for unet3d, else 1).
MAX_DROPPED: dict[str, int] = {"unet3d": 4}
SLOW_STEP_FACTOR = 1.1


class Score(Frozen):
    """One system's MLPerf score. value_minutes is None when no valid score exists (see note)."""

    benchmark: str
    value_minutes: float | None
    raw_minutes: float | None
    scaling_factor: float = 1.0
    runs_used: int
    runs_required: int
    converged: int
    official: bool
    scored_indices: list[int] = []
    note: str = ""


class StepStats(Frozen):
    """Step-time statistics in seconds; std is the population standard deviation."""

    count: int
    excluded: int
    mean: float
    median: float
    p50: float
    p95: float
    p99: float
    min: float
    max: float
    std: float
    cv: float
    slow_steps: int


class Throughput(NamedTuple):
    samples_per_s: float
    tokens_per_s: float | None


class Attempt(NamedTuple):
    """One launch of a run, successful or not: what it cost is what it held."""

    nodes: int
    seconds: float
    price_per_vm_hour: float


def required_runs(benchmark: str) -> int:
    """Result files MLPerf requires for `benchmark`; ConfigError for an unknown name."""
    try:
        return REQUIRED_RUNS[benchmark.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(REQUIRED_RUNS))
        raise ConfigError(f"unknown benchmark {benchmark!r}", hint=f"known: {known}") from None


def max_dropped_runs(benchmark: str) -> int:
    required_runs(benchmark)
    return MAX_DROPPED.get(benchmark.strip().lower(), 1)


def time_to_train_minutes(summary: RunSummary, *, require_success: bool = True) -> float | None:
    """Minutes from first run_start to first run_stop; None if missing or (by default) failed."""
    if require_success and summary.status != "success":
        return None
    return summary.minutes


def mlperf_score(
    minutes: Sequence[float | None], benchmark: str, scaling_factor: float = 1.0
) -> Score:
    """Olympic mean of run minutes (None = did not converge), times the RCP scaling factor."""
    _positive("scaling_factor", scaling_factor)
    for m in minutes:
        if m is not None and (m < 0 or math.isnan(m)):
            raise ConfigError(f"run minutes must be >= 0, got {m}")
    need, drop = required_runs(benchmark), max_dropped_runs(benchmark)
    runs, notes = list(minutes), []
    if len(runs) > need:
        notes.append(f"{len(runs)} runs given, the first {need} used (MLPerf picks the "
                     f"{need} consecutive runs closest to the median)")
        runs = runs[:need]
    conv = sorted((m, i) for i, m in enumerate(runs) if m is not None)
    failed = len(runs) - len(conv)
    base = {"benchmark": benchmark, "scaling_factor": scaling_factor, "runs_used": len(runs),
            "runs_required": need, "converged": len(conv)}
    if not conv:
        reason = "no runs" if not runs else "no converged run"
        return Score(**base, value_minutes=None, raw_minutes=None, official=False, note=reason)
    if failed > drop:
        reason = f"{failed} non-converged runs; at most {drop} allowed"
        return Score(**base, value_minutes=None, raw_minutes=None, official=False, note=reason)
    if len(runs) < need:
        kept = conv
        notes.insert(0, f"partial: {len(runs)} of {need} required runs, plain mean of the "
                        f"{len(conv)} converged")
    else:
        kept = conv[drop : len(conv) - (drop - failed)]
    raw = statistics.fmean(m for m, _ in kept)
    return Score(**base, value_minutes=raw * scaling_factor, raw_minutes=raw,
                 official=not notes, scored_indices=sorted(i for _, i in kept),
                 note="; ".join(notes))


def step_time_stats(
    step_times: Sequence[tuple[int, float]],
    exclude_steps: Iterable[int] = (),
    *,
    drop_first: bool = True,
) -> StepStats | None:
    """Stats over (step, seconds), without the first step and `exclude_steps` (post-eval steps).

    Returns None when no step is left.
    """
    excluded = set(exclude_steps)
    kept = [float(sec) for pos, (step, sec) in enumerate(step_times)
            if not (drop_first and pos == 0) and step not in excluded]
    if not kept:
        return None
    data = sorted(kept)
    mean = statistics.fmean(data)
    median = _percentile(data, 0.5)
    std = statistics.pstdev(data, mean)
    return StepStats(
        count=len(data), excluded=len(step_times) - len(data), mean=mean, median=median,
        p50=median, p95=_percentile(data, 0.95), p99=_percentile(data, 0.99), min=data[0],
        max=data[-1], std=std, cv=std / mean if mean > 0 else 0.0,
        slow_steps=sum(1 for s in data if s > SLOW_STEP_FACTOR * median),
    )


def throughput(samples: float, seconds: float, seq_len: int | None = None) -> Throughput:
    """Samples per second, and tokens per second when the sequence length is known."""
    _positive("seconds", seconds)
    per_s = samples / seconds
    return Throughput(per_s, per_s * seq_len if seq_len is not None else None)


def progress_per_minute(progress: float, minutes: float) -> float:
    """MLPerf-style throughput: progress at the last eval (samples or epoch_num) per run minute."""
    _positive("minutes", minutes)
    return progress / minutes


def scored_throughput_per_minute(
    progress: Sequence[float | None], minutes: Sequence[float | None], score: Score
) -> float | None:
    """Mean progress-per-minute over the runs that enter `score`; None if it has none."""
    rates = [progress_per_minute(p, m) for i in score.scored_indices
             if (p := progress[i]) is not None and (m := minutes[i]) is not None]
    return statistics.fmean(rates) if rates else None


def model_flops_per_token(n_params: float, layers: int, d_model: int, seq: int) -> float:
    """Training FLOPs per token: 6N (forward + backward) + 12·L·d·s (attention scores)."""
    return 6.0 * n_params + 12.0 * layers * d_model * seq


def mfu(
    flops_per_token: float, tokens_per_step: float, step_time_s: float, n_gpus: int,
    peak_tflops: float,
) -> float:
    """Model FLOPs utilisation against the dense per-GPU peak (TFLOP/s). Not capped at 1."""
    _positive("step_time_s", step_time_s)
    _positive("n_gpus", n_gpus)
    _positive("peak_tflops", peak_tflops)
    achieved = flops_per_token * tokens_per_step / step_time_s
    return achieved / (n_gpus * peak_tflops * 1e12)


def weak_scaling_efficiency(step_base: float, step_n: float) -> float:
    """t_base / t_n on step times at fixed per-GPU work; > 1 when the larger run steps faster."""
    _positive("step_base", step_base)
    _positive("step_n", step_n)
    return step_base / step_n


def step_time_change(step_base: float, step_n: float) -> float:
    """t_n / t_base - 1: the relative change of the step time (+1.5 = 2.5x slower)."""
    _positive("step_base", step_base)
    _positive("step_n", step_n)
    return step_n / step_base - 1.0


def step_time_min_max(step_base: float, step_n: float) -> float:
    """min / max of the two step times: in (0, 1] whichever run is faster.

    This is the convention behind Azure's quoted 99.8% weak scaling (t_large / t_small when the
    larger run steps faster, mlperf-notes 10.2). Unlike 1 - |dt|/t it never goes negative: a
    step time that more than doubles reads below 50%, not as a negative efficiency.
    """
    _positive("step_base", step_base)
    _positive("step_n", step_n)
    return min(step_base, step_n) / max(step_base, step_n)


def strong_scaling_efficiency(t_base: float, gpus_base: int, t_n: float, gpus_n: int) -> float:
    """(t_base * gpus_base) / (t_n * gpus_n): speedup divided by the GPU ratio."""
    for name, v in (("t_base", t_base), ("gpus_base", gpus_base), ("t_n", t_n), ("gpus_n", gpus_n)):
        _positive(name, v)
    return (t_base * gpus_base) / (t_n * gpus_n)


def throughput_scaling(per_gpu_base: float, per_gpu_n: float) -> float:
    """Per-GPU throughput at N over per-GPU throughput at the base."""
    _positive("per_gpu_base", per_gpu_base)
    return per_gpu_n / per_gpu_base


def speedup(t_a: float, t_b: float) -> float:
    """How many times faster B is than A (t_a / t_b)."""
    _positive("t_b", t_b)
    return t_a / t_b


def speedup_per_gpu(t_a: float, gpus_a: int, t_b: float, gpus_b: int) -> float:
    """Speedup of B over A per GPU spent: (t_a * gpus_a) / (t_b * gpus_b)."""
    return strong_scaling_efficiency(t_a, gpus_a, t_b, gpus_b)


def speedup_per_dollar(
    t_a: float, usd_per_hour_a: float, t_b: float, usd_per_hour_b: float
) -> float:
    """How many times cheaper a result on B is than on A: (t_a * price_a) / (t_b * price_b)."""
    _positive("t_b", t_b)
    _positive("usd_per_hour_b", usd_per_hour_b)
    return (t_a * usd_per_hour_a) / (t_b * usd_per_hour_b)


def node_hours(nodes: int, seconds: float) -> float:
    """VM-hours held by `nodes` VMs for `seconds`."""
    return nodes * seconds / 3600.0


def run_cost_usd(vm_hours: float, price_per_vm_hour: float) -> float:
    if vm_hours < 0 or price_per_vm_hour < 0:
        raise ConfigError("vm_hours and price must be >= 0")
    return vm_hours * price_per_vm_hour


def result_cost_usd(attempts: Iterable[tuple[int, float, float]]) -> float:
    """What a result really cost: every attempt, failed ones included, as (nodes, s, $/VM-h)."""
    return sum(run_cost_usd(node_hours(n, s), p) for n, s, p in (Attempt(*a) for a in attempts))


def _percentile(sorted_data: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(sorted_data) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_data) - 1)
    return sorted_data[lo] + (sorted_data[hi] - sorted_data[lo]) * (pos - lo)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value}")


_PRECISIONS = (("fp4", "fp4"), ("e2m1", "fp4"), ("fp8", "fp8"), ("e4m3", "fp8"), ("e5m2", "fp8"),
               ("bf16", "bf16"), ("fp16", "bf16"))


def run_precision(summary: RunSummary, config_precision: str | None = None,
                  default: str | None = None) -> tuple[str | None, str]:
    """The GEMM precision a run trained in and where that was read, first found of: the log's
    ":::AZBENCH_PRECISION gemm=P source=S" line (the config the job sourced), the log's
    `lowest_numerical_precision_in_linear` (MLPerf 6.0+), its fp8/fp4 hyperparameters (the config
    dump beside the MLLOG lines: RunSummary.logged_precision), the config of the run's system
    (`config_precision`, "P: source"), else `default` labelled as the recipe's assumption.
    16-bit float counts as bf16 (same dense peak)."""
    line = summary.precision_line or ""
    m = re.search(r"gemm=(\w+)(?:\s+source=(.*))?", line)
    if m and m.group(1) in ("fp4", "fp8", "bf16"):
        return m.group(1), f"the log's :::AZBENCH_PRECISION ({(m.group(2) or '').strip() or 'no source'})"
    logged = str(summary.params.get("lowest_numerical_precision_in_linear") or "").lower()
    for token, precision in _PRECISIONS:
        if token in logged:
            return precision, f"the log's lowest_numerical_precision_in_linear={logged}"
    hinted = summary.logged_precision
    if hinted in ("fp4", "fp8"):
        return hinted, f"the log's {summary.logged_precision_text or hinted} hyperparameter"
    if config_precision:
        value, _, where = config_precision.partition(": ")
        return value, f"the system's published config ({where})"
    if default:
        return default, "the recipe's model.precision (not in the log nor a vendored config)"
    return None, ""
