"""One definition per figure: each figure's rule, the conditions under which it is defined, and
its name, in the one place every view reads it (the report's JSON, Markdown, terminal and site,
the site's history, `baseline`, `compare`, `plan` and `--vs-published`). docs/figures.md lists
them. A figure that is not defined for a pair is a `Refused` with the reason, never a number.

- time to train: the MLPerf score (`time_to_train`): the olympic mean of the first N required
  runs in launch order x the RCP scaling factor (metrics.mlperf_score); a resumed run never
  enters it, a non-converged run or one that failed compliance counts as not converged. Never a
  plain mean.
- step time: the median of every kept step (first step and post-eval steps dropped) of a
  system's runs, pooled (`step_time`).
- MFU: model FLOP/s at the median step / (GPUs x the dense peak of the precision the runs
  trained in) (`mfu`), with the precision and where it was read: the log, else the config the
  published system ran (its README names it: recipes.configs.submissions), else the recipe's
  assumption, said so. Against dense BF16 it is a second figure, above 100% for FP8/FP4 runs:
  a note, never a utilisation.
- strong scaling: speedup t_small / t_large and efficiency (t_small x GPUs_small) / (t_large x
  GPUs_large) on the raw olympic means and on the MLPerf scores (`strong_scaling`).
- weak scaling: t_base / t on median step times, defined only at the same work per GPU (global
  batch / GPUs equal within 1e-6; unknown counts as the same, as azbench's sweeps keep it) and
  never capped (`weak_scaling`).
- speedup between GPU types at the same GPU count, on MLPerf scores of the same round unless
  asked (`sku_speedup`; `SkuSpeedup.text` names both systems and rounds, and flags mixed ones).
- cost per result: the cost of the runs one MLPerf score needs (the benchmark's required runs,
  each at its own minutes x VMs x price per VM-hour: `cost_per_result`); cost per run is one run
  as long as the raw olympic mean (`cost_per_run`), under its own name only.
- published neighbour: the published closed-division result on the same accelerator at the same
  GPU count; where none is published at that count, the nearest count (log space) compared per
  GPU, in GPU-minutes per result, with `per_gpu` true (`published_neighbour`).
"""

from __future__ import annotations

from collections import Counter
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from orchestrator import formats
from orchestrator.errors import ConfigError
from orchestrator.hardware.catalog import gpu_row
from orchestrator.models import Frozen, ModelFacts
from orchestrator.results import metrics
from orchestrator.results.metrics import Score, StepStats
from orchestrator.results.published import (
    PublishedResult,
    canonical_benchmark,
    closest,
    load_published,
    series,
)
from orchestrator.results.mllog import RunSummary
from orchestrator.results.summary import EMPTY, kept_step_times, summary_of
from orchestrator.store.schema import ResultRow

SAME_WORK_RTOL = 1e-6  # per-GPU batches this close are the same work (weak scaling)


class Refused(Frozen):
    """A figure that is not defined for `subject`, and why (shown where the figure would be)."""

    figure: str
    subject: str
    reason: str

    @property
    def text(self) -> str:
        return f"{self.figure} {self.subject}: not defined: {self.reason}"


# -- time to train ------------------------------------------------------------------------------


def launch_order(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """Results in launch order (MLPerf's "objective ordering"): run_start, then log path, id."""
    return sorted(rows, key=lambda r: (r.run_start_ms is None, r.run_start_ms or 0, r.log_path or "",
                                       r.id or 0))


def scored_minutes(rows: Sequence[ResultRow]) -> list[float | None]:
    """Each non-resumed run's minutes as the score counts it (rows in launch order): None for a
    run that did not converge or failed compliance (mlperf-notes 4.2: the summarizer drops it);
    a run not checked (compliance_ok None) counts as logged."""
    return [r.minutes if r.converged and r.compliance_ok is not False else None
            for r in rows if not r.resumed]


def scaling_factor(rows: Iterable[ResultRow]) -> float:
    """The RCP scaling factor the rows carry (scaling.json), 1.0 when none does."""
    return next((r.scaling_factor for r in rows if r.scaling_factor), None) or 1.0


def time_to_train(rows: Sequence[ResultRow], benchmark: str) -> Score:
    """The MLPerf score of one system's results (launch-ordered here); ConfigError for a
    benchmark without a required run count."""
    ordered = launch_order(rows)
    return metrics.mlperf_score(scored_minutes(ordered), benchmark, scaling_factor(ordered))


# -- compliance and the verdict -------------------------------------------------------------------

ROUND_UNKNOWN = "not official: compliance not checked (round unknown: give --round)"
Compliance = Literal["passed", "failed", "not checked"]


class Verdict(Frozen):
    """Whether a score is official, and the words every view prints for it."""

    compliance: Compliance = Field(description="mlperf_logging's checker on the runs the score "
                                               "counts, for the round the files name")
    official: bool
    text: str = Field(description="'official', or 'not official: why' (the same words in "
                                  "every view)")


def _checked_for(row: ResultRow, round_name: str | None) -> bool | None:
    """The row's verdict if it was checked with the ruleset of `round_name` (an azbench run's:
    the ruleset its log names), else None."""
    target = round_name or row.ruleset
    if row.compliance_ok is None or not target:
        return None
    try:
        said = json.loads(row.compliance_json or "{}")
    except ValueError:
        return None
    ruleset = (said.get("ruleset") if isinstance(said, dict) else None) or row.ruleset or ""
    return row.compliance_ok if _major_minor(str(ruleset)) == _major_minor(target) else None


def _major_minor(name: str) -> list[str]:
    """'v5.1' and '5.1.0' -> ['5', '1']."""
    return name.strip().lstrip("v").split(".")[:2]


def verdict(rows: Sequence[ResultRow], benchmark: str, round_name: str | None,
            score: Score | None) -> Verdict:
    """A score is official only when it is a full MLPerf score and every run it counts (the first
    required runs in launch order, resumed ones never) passed mlperf_logging's checker with the
    ruleset of the round the files name. A round not known is never a verdict: ROUND_UNKNOWN."""
    counted = [r for r in launch_order(rows) if not r.resumed]
    need = required_runs_or_none(benchmark)
    counted = counted[:need] if need else counted
    found = [_checked_for(r, round_name) for r in counted]
    compliance: Compliance = ("failed" if any(v is False for v in found) else
                              "passed" if found and all(v is True for v in found) else "not checked")
    if score is None or score.value_minutes is None:
        return Verdict(compliance=compliance, official=False, text="no score")
    if compliance == "failed":
        bad = sum(v is False for v in found)
        return Verdict(compliance=compliance, official=False,
                       text=f"not official: compliance failed ({bad} of {len(found)} runs)")
    if compliance == "not checked":
        unchecked = sum(v is None for v in found)
        known = round_name or next((r.ruleset for r in counted if r.ruleset), None)
        why = ROUND_UNKNOWN if not known else (
            f"not official: compliance not checked ({unchecked} of {len(found)} runs; "
            "import without --no-compliance)")
        return Verdict(compliance=compliance, official=False, text=why)
    if not score.official:
        return Verdict(compliance=compliance, official=False,
                       text=f"not official: {score.note or 'not a full MLPerf score'}")
    return Verdict(compliance=compliance, official=True, text="official")


# -- step time ----------------------------------------------------------------------------------


def step_time(rows: Sequence[ResultRow]) -> StepStats | None:
    """Statistics of every kept step of the rows' runs, pooled (resumed runs included: their
    steps ran); `excluded` counts the logged steps left out (each run's first step and the
    first after each eval; whole-block durations); None without step times."""
    summaries = [summary_of(r) for r in rows]
    kept = [t for s in summaries for t in kept_step_times(s)]
    stats = metrics.step_time_stats([(0, t) for t in kept], drop_first=False)
    logged = sum(len(s.step_times) for s in summaries)
    return stats.model_copy(update={"excluded": logged - len(kept)}) if stats else None


# -- MFU ----------------------------------------------------------------------------------------


class Mfu(Frozen):
    """MFU of one system: `value` against the dense peak at `precision`, `bf16` against dense
    BF16; both None with the reason in `note` when a fact is missing."""

    value: float | None = None
    precision: str | None = None
    precision_source: str = Field("", description="where the precision was read")
    peak_tflops: float | None = None
    bf16: float | None = None
    model_tflops_per_gpu: float | None = None
    note: str = ""

    @property
    def bf16_over_100(self) -> bool:
        """MFU vs dense BF16 above 100%: a run in FP8/FP4 outruns BF16's peak (a note, not a bar)."""
        return (self.bf16 or 0.0) > 1.0


def group_precision(summaries: Sequence[RunSummary], config: str | None,
                    default: str | None) -> tuple[str | None, str]:
    """The runs' GEMM precision (metrics.run_precision of each run: its log, else `config` =
    the published system's config, else `default`), the one most runs say."""
    found = [metrics.run_precision(s, config, default) for s in summaries] or \
        [metrics.run_precision(EMPTY, config, default)]
    counts = Counter(p for p in found if p[0] is not None)
    return counts.most_common(1)[0][0] if counts else (None, "")


def config_precision(facts: ModelFacts, system: str | None) -> str | None:
    """The precision ("P: source") of the config the published `system` ran, found by its label
    ("v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo"), else by its submitter and system folder
    whatever the round folder was called (a clone in `tr51/`), else by the system folder alone;
    None where no vendored SUBMISSIONS.txt names it, or where the matches disagree."""
    if not system:
        return None
    if system in facts.config_precisions:
        return facts.config_precisions[system]
    parts = system.strip("/").split("/")
    for tail in (parts[-2:], parts[-1:]):
        found = {v for k, v in facts.config_precisions.items() if k.split("/")[-len(tail):] == tail}
        if len(found) == 1:
            return found.pop()
        if found:
            return None
    return None


def mfu(facts: ModelFacts | None, bench: str, sku: str | None, gpus: int | None, gbs: int | None, seq_len: int | None, stats: StepStats | None, *,
        source: str = "", system: str | None = None,
        summaries: Sequence[RunSummary] = ()) -> Mfu:
    """MFU at the median step time (mlperf-notes 10.3): F x tokens/step / step / (GPUs x peak),
    against the dense peak of the precision the runs trained in (group_precision, with the
    config of the published `system` label, "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo") and
    against dense BF16; `sku` is a size, alias or accelerator name (its catalog row has the
    peaks). Blank with the reason when a fact is missing."""
    row = gpu_row(sku)
    missing = [why for bad, why in (
        (facts is None, f"no model facts for '{bench}' in the recipe catalog"),
        (stats is None or stats.median <= 0,
         f"no step times in the log ({source})" if source else "no step times in the log"),
        (not gpus, "GPU count unknown"), (not gbs, "no global_batch_size logged"),
        (row is None or row.peak_tflops_bf16 is None, f"no peak FLOP/s for {sku or 'this system'}"),
    ) if bad]
    if missing or facts is None or stats is None or row is None or not gpus or not gbs:
        return Mfu(note="MFU blank: " + "; ".join(missing))
    seq = seq_len or facts.seq_len
    flops, tokens = facts.flops_per_token(seq), gbs * seq
    precision, where = group_precision(summaries, config_precision(facts, system), facts.precision)
    precision = precision or facts.precision
    peak = row.peak_tflops(precision)
    bf16 = metrics.mfu(flops, tokens, stats.median, gpus, row.peak_tflops_bf16 or 0.0)
    batch = (f"{formats.count(gbs)} samples/step (GBS)" if facts.sample_flops is not None else
             f"{formats.count(tokens)} tokens/step (GBS {formats.count(gbs)} x seq {formats.count(seq)})")
    notes = [f"{facts.formula}; {batch}; median step {stats.median:.4f} s ({source or 'step times'}); precision "
             f"{precision} from {where}; dense peaks of {row.gpu_model}: {precision} {formats.sig(peak, 5)}, "
             f"bf16 {formats.sig(row.peak_tflops_bf16, 5)} TFLOP/s "
             f"({row.peak_source or 'catalog'})"]
    if bf16 > 1.0:
        notes.append(f"MFU vs dense BF16 is {bf16:.1%}, above 100%: the run computes in {precision}, "
                     "faster than BF16's peak; it compares recipes, it is not a utilisation")
    if facts.reference_tflop_per_sample:
        ref = facts.reference_tflop_per_sample * 1e12 / seq
        gap = flops / ref - 1
        notes.append(f"NVIDIA's MODEL_TFLOP_PER_SAMPLE {facts.reference_tflop_per_sample:g} "
                     f"({facts.reference_source}) gives {formats.count(ref * tokens / stats.median / gpus / 1e12)} "
                     f"TFLOP/s per GPU; azbench's F is {gap:+.1%} from it"
                     + (f": {facts.reference_note}" if abs(gap) > 0.01 and facts.reference_note else ""))
    return Mfu(value=metrics.mfu(flops, tokens, stats.median, gpus, peak) if peak else None,
               precision=precision, precision_source=where, peak_tflops=peak, bf16=bf16,
               model_tflops_per_gpu=flops * tokens / stats.median / gpus / 1e12,
               note="; ".join(notes))


# -- scaling and speedup ------------------------------------------------------------------------


class Scale(Frozen):
    """What the scaling figures read of one system (a report group or a baseline's scale)."""

    label: str
    workers: int | None = Field(None, description="GPUs, or nodes when a node has no GPU")
    nodes: int | None = None
    global_batch_size: int | None = None
    score_minutes: float | None = None
    raw_minutes: float | None = None
    median_step_s: float | None = None
    throughput_per_worker_minute: float | None = None


class StrongScaling(Frozen):
    """Time-to-train scaling from `small` to `large` (plus per-worker throughput scaling)."""

    benchmark: str
    sku: str | None
    small: str
    large: str
    workers_small: int
    workers_large: int
    gbs_small: int | None = None
    gbs_large: int | None = None
    score_small: float
    score_large: float
    speedup: float
    efficiency: float
    efficiency_scaled: float | None = None
    throughput_efficiency: float | None = None


class WeakScaling(Frozen):
    """E_weak = median step at the base (fewest nodes) / median step here; not capped."""

    benchmark: str
    sku: str | None
    base: str
    system: str
    nodes_base: int
    nodes: int
    step_base_s: float
    step_s: float
    efficiency: float
    step_change: float = Field(description="t / t_base - 1: how much slower (+) or faster (-) a step got")
    min_max: float = Field(description="min(t, t_base) / max(t, t_base): the <= 100% convention "
                                       "behind Azure's quoted 99.8%")


class SkuSpeedup(Frozen):
    """How many times faster SKU b is than the slower SKU a at the same GPU count."""

    benchmark: str
    workers: int
    sku_a: str
    sku_b: str
    system_a: str
    system_b: str
    minutes_a: float
    minutes_b: float
    speedup: float
    speedup_per_gpu: float
    speedup_per_dollar: float | None = None
    round_a: str | None = None
    round_b: str | None = None
    mixed_rounds: bool = Field(False, description="the two scores are of different rounds (or "
                                                  "one round is unknown): only when asked")

    @property
    def text(self) -> str:
        """'flux1 at 72 GPUs: v5.1/NVIDIA/theia (GB300) 1.109x v5.1/Nebius/x (GB200)', every
        view's words for it, flagged when the rounds differ."""
        flag = f" (mixed rounds: {self.round_a or 'unknown'} vs {self.round_b or 'unknown'})" \
            if self.mixed_rounds else ""
        return (f"{self.benchmark} at {formats.count(self.workers)} GPUs: {self.system_b} "
                f"({self.sku_b}) {self.speedup:.3f}x {self.system_a} ({self.sku_a}){flag}")


def same_round(a: str | None, b: str | None) -> bool:
    """Two scores of one round (both named and equal, or both azbench's own, with none)."""
    return a == b


def work_per_gpu_differs(base: Scale, other: Scale) -> str | None:
    """Why weak scaling is not defined between two scales (the work per GPU differs), or None.
    An unknown batch or worker count counts as the same work (azbench's sweeps keep it)."""
    if not (base.global_batch_size and other.global_batch_size and base.workers and other.workers):
        return None
    pa, pb = base.global_batch_size / base.workers, other.global_batch_size / other.workers
    if abs(pa - pb) <= SAME_WORK_RTOL * max(pa, pb):
        return None
    return (f"batch per GPU differs ({base.global_batch_size:,}/{base.workers:,} = {pa:.4g} vs "
            f"{other.global_batch_size:,}/{other.workers:,} = {pb:.4g}): not fixed work per GPU")


def weak_scaling(benchmark: str, sku: str | None, base: Scale, other: Scale) -> WeakScaling | Refused:
    """E_weak of `other` against `base`, or why it is not defined."""
    subject = f"{benchmark} {base.label} -> {other.label}"
    why = work_per_gpu_differs(base, other) or (
        "no step times" if not (base.median_step_s and other.median_step_s) else None)
    if why or not base.median_step_s or not other.median_step_s:
        return Refused(figure="weak scaling", subject=subject, reason=why or "no step times")
    t0, t1 = base.median_step_s, other.median_step_s
    return WeakScaling(benchmark=benchmark, sku=sku, base=base.label, system=other.label,
                       nodes_base=base.nodes or 0, nodes=other.nodes or 0, step_base_s=t0, step_s=t1,
                       efficiency=metrics.weak_scaling_efficiency(t0, t1),
                       step_change=metrics.step_time_change(t0, t1),
                       min_max=metrics.step_time_min_max(t0, t1))


def strong_scaling(benchmark: str, sku: str | None, small: Scale, large: Scale,
                   gbs: tuple[int | None, int | None] = (None, None)) -> StrongScaling | Refused:
    """Speedup and efficiency from `small` to `large` on the raw olympic means, and on the MLPerf
    scores where both have one; needs a raw mean and a worker count on each side."""
    ta, tb, na, nb = small.raw_minutes, large.raw_minutes, small.workers, large.workers
    if not (ta and tb and na and nb):
        return Refused(figure="strong scaling", subject=f"{benchmark} {small.label} -> {large.label}",
                       reason="a score or worker count is missing")
    scaled = tput = None
    if small.score_minutes and large.score_minutes:
        scaled = metrics.strong_scaling_efficiency(small.score_minutes, na, large.score_minutes, nb)
    if small.throughput_per_worker_minute and large.throughput_per_worker_minute is not None:
        tput = metrics.throughput_scaling(small.throughput_per_worker_minute,
                                          large.throughput_per_worker_minute)
    return StrongScaling(
        benchmark=benchmark, sku=sku, small=small.label, large=large.label, workers_small=na,
        workers_large=nb, gbs_small=small.global_batch_size, gbs_large=large.global_batch_size,
        score_small=ta, score_large=tb, speedup=metrics.speedup(ta, tb),
        efficiency=metrics.strong_scaling_efficiency(ta, na, tb, nb),
        efficiency_scaled=scaled, throughput_efficiency=tput)


def sku_speedup(benchmark: str, gpus: int, slower: tuple[str, Scale, float | None],
                faster: tuple[str, Scale, float | None],
                rounds: tuple[str | None, str | None] = (None, None)) -> SkuSpeedup:
    """(sku, scale, system price per hour) of two systems at `gpus` GPUs, on MLPerf scores; per
    dollar where both have a price; `rounds` (slower's, faster's) flags a mixed-round pair."""
    (sku_a, a, price_a), (sku_b, b, price_b) = slower, faster
    ta, tb = a.score_minutes or 0.0, b.score_minutes or 0.0
    per_dollar = metrics.speedup_per_dollar(ta, price_a, tb, price_b) if price_a and price_b else None
    return SkuSpeedup(benchmark=benchmark, workers=gpus, sku_a=sku_a, sku_b=sku_b, system_a=a.label,
                      system_b=b.label, minutes_a=ta, minutes_b=tb, speedup=metrics.speedup(ta, tb),
                      speedup_per_gpu=metrics.speedup_per_gpu(ta, gpus, tb, gpus),
                      speedup_per_dollar=per_dollar, round_a=rounds[0], round_b=rounds[1],
                      mixed_rounds=not same_round(*rounds))


# -- cost ---------------------------------------------------------------------------------------


class CostPerResult(Frozen):
    """The cost of the runs one MLPerf score needs, and how it was got."""

    usd: float | None
    runs_for_score: int
    runs_priced: int = Field(description="runs priced at their own minutes")
    note: str = ""


def cost_per_result(run_minutes: Sequence[float | None], runs_for_score: int, vms: int,
                    price_per_vm_hour: float) -> CostPerResult:
    """Sum over the first `runs_for_score` runs (launch order) of minutes / 60 x VMs x price
    per VM-hour. A run missing (fewer stored than the score needs) or without a time is priced
    at the mean of the priced ones, and the note says how many; none priced: None."""
    used = list(run_minutes)[:runs_for_score]
    timed = [m for m in used if m is not None]
    if not timed:
        return CostPerResult(usd=None, runs_for_score=runs_for_score, runs_priced=0,
                             note="cost per result unknown: no run has a time")
    each = [metrics.run_cost_usd(metrics.node_hours(vms, m * 60), price_per_vm_hour) for m in timed]
    guessed = runs_for_score - len(timed)
    total = sum(each) + guessed * (sum(each) / len(each))
    note = (f"{runs_for_score} runs for a score, each at its own minutes" if not guessed else
            f"{runs_for_score} runs for a score: {len(timed)} at their own minutes, {guessed} "
            "not run or without a time priced at their mean")
    return CostPerResult(usd=total, runs_for_score=runs_for_score, runs_priced=len(timed), note=note)


def cost_per_run(minutes: float, vms: int, price_per_vm_hour: float) -> float:
    """One run as long as `minutes` (the raw olympic mean) on `vms` VMs: "cost per run"."""
    return metrics.run_cost_usd(metrics.node_hours(vms, minutes * 60), price_per_vm_hour)


# -- the published neighbour -------------------------------------------------------------------


class PublishedNeighbour(Frozen):
    """The published result a stored score is put beside, and how the two compare."""

    round: str
    submitter: str
    system: str
    division: str
    accelerator: str
    gpus: int
    score_minutes: float = Field(description="the published score (olympic mean x scaling)")
    same_gpus: bool = Field(description="published at the stored score's GPU count")
    per_gpu: bool = Field(False, description="compared per GPU (GPU-minutes per result), because "
                                             "the GPU counts differ")
    delta: float | None = Field(None, description="stored / published - 1 (+: the stored score is "
                                                  "slower): of the scores at the same GPU count, "
                                                  "of GPU-minutes (score x GPUs) when per_gpu")

    @property
    def config(self) -> str:
        """'v5.1 NVIDIA tyche_ngpu512_ngc25.09_nemo (512 GPUs)'."""
        return f"{self.round} {self.submitter} {self.system} ({formats.count(self.gpus)} GPUs)"

    @property
    def basis(self) -> str:
        """How the delta compares: 'same GPU count' or 'per GPU (GPU-minutes)'."""
        return "per GPU (GPU-minutes)" if self.per_gpu else "same GPU count"


def candidates(benchmark: str, gpu_alias: str | None, accelerator: str | None,
               division: str | None = "closed") -> list[PublishedResult]:
    """Published results of `benchmark` on the same accelerator: by catalog alias (every
    spelling of an H100 SXM) when the GPU has one, else by the exact accelerator name."""
    if gpu_alias:
        return series(benchmark, gpu_alias, division)
    bench = canonical_benchmark(benchmark)
    return [r for r in load_published() if accelerator and r.accelerator == accelerator
            and r.benchmark_key == bench and (division is None or r.division == division)]


def published_row(benchmark: str, gpu_alias: str | None, accelerator: str | None,
                  round_name: str | None, submitter: str | None,
                  system: str | None) -> PublishedResult | None:
    """The vendored table's row for this very result (same round, submitter folder, system
    folder and benchmark), when the stored result is a published one."""
    if not (round_name and submitter and system):
        return None
    return next((r for r in candidates(benchmark, gpu_alias, accelerator, division=None)
                 if r.round == round_name and r.org == submitter and r.system == system), None)


def published_neighbour(benchmark: str, gpu_alias: str | None, accelerator: str | None,
                        gpus: int | None, score: float | None,
                        itself: PublishedResult | None = None,
                        stored: Sequence[PublishedResult] = ()) -> PublishedNeighbour | None:
    """The published closed-division result on the same accelerator at `gpus` GPUs (ties: the
    newest round, then the fastest); none published at that count: the nearest count in log
    space, compared per GPU. `itself` (a stored copy of a published result) and `stored` (the
    published results stored in the same comparison: the other systems) are left out."""
    if not gpus:
        return None
    best = closest([r for r in candidates(benchmark, gpu_alias, accelerator)
                    if r != itself and r not in stored], gpus)
    if best is None:
        return None
    same = best.accelerators == gpus
    delta = None
    if score is not None and best.score_minutes and best.accelerators:
        delta = (score / best.score_minutes - 1 if same
                 else score * gpus / (best.score_minutes * best.accelerators) - 1)
    return PublishedNeighbour(
        round=best.round, submitter=best.submitter, system=best.system, division=best.division,
        accelerator=best.accelerator, gpus=best.accelerators, score_minutes=best.score_minutes,
        same_gpus=same, per_gpu=not same, delta=delta)


def required_runs_or_none(benchmark: str) -> int | None:
    """The benchmark's required runs, None for one without a count (no score, no cost)."""
    try:
        return metrics.required_runs(benchmark)
    except ConfigError:
        return None
