"""Build the benchmark report from stored results: per-system scores, time-to-train,
throughput, step-time statistics and cost, plus strong/weak scaling and SKU speedups.

Pure data in, one pydantic `Report` out; the maths is orchestrator.results.metrics, rendering is
orchestrator.report.render, .terminal, .plots and .site. Resumed runs never enter a score
(mlperf-notes §6). The headline score is the one MLCommons publishes (olympic mean x
scaling.json, `score_minutes`); the raw olympic mean is kept beside it. Also here: the fastest
official score per benchmark and GPU type (`best`), the attempt history of runs that needed more
than one try; each group's GPU type (report.gpus), cost at list price (report.cost) and nearest
published result (report.vs_published) come from their modules.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from itertools import combinations
from typing import Any

from pydantic import Field

from orchestrator.hardware.catalog import gpu_row
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen, ModelFacts, utcnow
from orchestrator.report.cost import Prices, group_cost
from orchestrator.report.gpus import match_gpu
from orchestrator.report.preemption import PreemptionLine, preemption_lines
from orchestrator.report.replacements import ReplacementLine, replacement_lines
from orchestrator.report.vs_published import PublishedNeighbour, neighbour, published_row
from orchestrator.results import metrics
from orchestrator.results.metrics import StepStats
from orchestrator.results.stragglers import spread
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.schema import AttemptRow, EventRow, ResultRow, RunRow

_SAME_BATCH_RTOL = 1e-6  # per-worker batches this close are the same work (weak scaling)
_SAME_SCORE_RTOL = 1e-9  # a stored score this close to its published score is the published score


# -- attempt history -------------------------------------------------------------------------

class AttemptLine(Frozen):
    run_id: str
    recipe: str
    nodes: int
    attempt: int
    state: str
    failure_class: str | None = None
    excluded_nodes: list[str] = []
    resumed_from_step: int | None = None
    lost_steps: int | None = None
    lost_seconds: float | None = None
    result_resumed: bool = False
    message: str | None = None


def attempt_history(runs: Sequence[RunRow] | None, attempts: Sequence[AttemptRow] | None,
                    results: Sequence[ResultRow]) -> list[AttemptLine]:
    """Every attempt of the runs that failed at least once (retried or not), oldest first."""
    if not runs or not attempts:
        return []
    by_run: dict[str, list[AttemptRow]] = {}
    for a in attempts:
        by_run.setdefault(a.run_id, []).append(a)
    resumed = {r.run_id for r in results if r.resumed and r.run_id}
    lines: list[AttemptLine] = []
    for run in runs:
        tries = sorted(by_run.get(run.id, []), key=lambda a: a.attempt)
        if len(tries) < 2 and not any(a.failure_class for a in tries):
            continue
        lines += [AttemptLine(run_id=run.id, recipe=run.recipe, nodes=run.nodes, attempt=a.attempt,
                              state=a.state, failure_class=a.failure_class,
                              excluded_nodes=list(a.excluded_nodes),
                              resumed_from_step=a.resumed_from_step, lost_steps=a.lost_steps,
                              lost_seconds=a.lost_seconds, result_resumed=run.id in resumed,
                              message=a.message) for a in tries]
    return lines


def history_section(lines: Sequence[AttemptLine]) -> tuple[str, list[str], list[list[str]]]:
    header = ["run", "nodes", "attempt", "state", "failure", "excluded", "resumed from step",
              "lost steps", "lost s", "result"]
    rows = [[line.run_id, str(line.nodes), str(line.attempt), line.state, line.failure_class or "-",
             ",".join(line.excluded_nodes) or "-",
             "-" if line.resumed_from_step is None else str(line.resumed_from_step),
             "-" if line.lost_steps is None else str(line.lost_steps),
             "-" if line.lost_seconds is None else f"{line.lost_seconds:.1f}",
             "resumed (unofficial)" if line.result_resumed else ""] for line in lines]
    return "Attempt history (runs that failed at least once)", header, rows


# -- the report --------------------------------------------------------------------------------


class RunLine(Frozen):
    """One result inside a group, in launch order."""

    result_id: int | None
    log: str | None
    status: str
    converged: bool
    resumed: bool
    scored: bool
    minutes: float | None
    progress: float | None = None
    progress_per_minute: float | None = None
    median_step_s: float | None = None
    compliance_ok: bool | None = None
    slowest_node: str | None = Field(None, description="highest per-node compute time per step")
    node_spread: float | None = Field(None, description="slowest node's time / the nodes' median")


class GroupReport(Frozen):
    """One (benchmark, system): its runs, MLPerf score, throughput, step times and cost."""

    benchmark: str
    system: str
    round: str | None = None
    submitter: str | None = None
    sku: str | None = None
    gpu_type: str | None = Field(None, description="the GPU as a reader names it (the catalog row's label)")
    catalog_size: str | None = Field(None, description="the catalog size with that GPU (prices, "
                                                       "peaks); None when no Azure size has it")
    nodes: int | None = None
    gpus: int | None = None
    workers: int | None = Field(None, description="GPUs, or nodes when a node has no GPU")
    global_batch_size: int | None = None
    runs: int
    required_runs: int | None
    converged: int
    resumed_runs: list[int] = Field(default_factory=list, description="result ids, not scored")
    scaling_factor: float = 1.0
    score_raw_minutes: float | None = Field(None, description="the olympic mean (raw)")
    score_minutes: float | None = Field(None, description="the MLPerf score as MLCommons publishes "
                                                          "it: raw score x scaling_factor")
    official: bool = False
    partial: bool = False
    score_note: str = ""
    run_lines: list[RunLine] = Field(default_factory=list)
    throughput_unit: str | None = None
    throughput_per_minute: float | None = None
    throughput_per_worker_minute: float | None = None
    step_stats: StepStats | None = None
    step_time_source: str = Field("", description="where the step times came from (STEP_SOURCES)")
    model_tflops_per_gpu: float | None = Field(None, description="model FLOP/s per GPU / 1e12")
    mfu: float | None = Field(None, description="against the dense peak at mfu_precision")
    mfu_precision: str | None = None
    mfu_peak_tflops: float | None = None
    mfu_bf16: float | None = Field(None, description="against the dense BF16 peak")
    mfu_note: str = Field("", description="how MFU was computed, or why it is blank")
    price_per_vm_hour: float | None = None
    priced_vms: int | None = Field(None, description="Azure VMs priced (nodes, or the same GPUs "
                                                     "as VMs of the catalog size)")
    system_price_per_hour: float | None = Field(None, description="priced_vms x price_per_vm_hour")
    cost_per_result_usd: float | None = None
    cost_all_runs_usd: float | None = None
    cost_all_attempts_usd: float | None = None
    cost_note: str = ""
    price_source: str = ""
    published: PublishedNeighbour | None = Field(None, description="the nearest published result "
                                                 "on the same GPU, this result itself left out")
    published_score_minutes: float | None = Field(None, description="the score MLCommons "
                                                  "published for this very result, if it is one")

    @property
    def label(self) -> str:
        return group_label((self.benchmark, self.system, self.round or "", self.submitter or ""))

    @property
    def kind(self) -> str:
        """"official", "partial", "unofficial" or "no score" (what every renderer prints)."""
        if self.score_minutes is None:
            return "no score"
        return "official" if self.official else ("partial" if self.partial else "unofficial")

    @property
    def is_published_score(self) -> bool:
        """This group's score equals the score MLCommons published for it (relative 1e-9)."""
        return (self.score_minutes is not None and self.published_score_minutes is not None
                and math.isclose(self.score_minutes, self.published_score_minutes,
                                 rel_tol=_SAME_SCORE_RTOL))


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


class BestLine(Frozen):
    """The fastest official MLPerf score of one benchmark on one GPU type."""

    benchmark: str
    gpu_type: str
    system: str
    gpus: int | None
    score_minutes: float
    cost_per_result_usd: float | None = None
    mfu: float | None = None
    mfu_precision: str | None = None
    scores: int = Field(description="official scores of this benchmark on this GPU type")


class Report(Frozen):
    generated_at: datetime = Field(default_factory=utcnow)
    filters: dict[str, str] = Field(default_factory=dict)
    best: list[BestLine] = Field(default_factory=list)
    groups: list[GroupReport] = Field(default_factory=list)
    strong_scaling: list[StrongScaling] = Field(default_factory=list)
    weak_scaling: list[WeakScaling] = Field(default_factory=list)
    speedups: list[SkuSpeedup] = Field(default_factory=list)
    attempt_history: list[AttemptLine] = Field(default_factory=list)
    preemptions: list[PreemptionLine] = Field(default_factory=list)
    replacements: list[ReplacementLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def build_report(
    results: Sequence[ResultRow],
    runs: Sequence[RunRow] | None = None,
    attempts: Sequence[AttemptRow] | None = None,
    *,
    benchmark: str | None = None,
    system: str | None = None,
    cluster: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    spot_clusters: dict[str, str] | None = None,
    model_facts: Mapping[str, ModelFacts] | None = None,
    events: Sequence[EventRow] | None = None,
    prices: Prices | None = None,
) -> Report:
    """The report over `results` matching the filters. `runs`/`attempts` (optional) add the
    cluster filter and the cost of every attempt, failed ones included; `spot_clusters`
    ({cluster: SKU}) adds the spot section's cost saved; `model_facts` ({benchmark: facts}, as
    recipes.catalog.model_facts() gives them) adds MFU, which is blank without them; `events`
    (the store's) add the node replacements; `prices` ({size name: USD per VM-hour}) override
    the catalog's list prices."""
    rows = _filter(results, runs, benchmark=benchmark, system=system, cluster=cluster, since=since,
                   until=until)
    notes: list[str] = [] if rows else ["no results match"]
    facts = {key.strip().lower(): f for key, f in (model_facts or {}).items()}
    groups = [_group(key, members, runs, attempts, facts, prices or {})
              for key, members in group_results(rows).items()]
    groups.sort(key=lambda g: (g.benchmark, g.sku or "", g.workers or 0, g.system))
    notes += unmapped_notes(r.sku for r in rows)
    asked = {"benchmark": benchmark, "system": system, "cluster": cluster, "since": since,
             "until": until}
    filters = {k: str(v) for k, v in asked.items() if v is not None}
    return Report(filters=filters, best=best_per_benchmark(groups), groups=groups,
                  strong_scaling=strong_scaling(groups),
                  weak_scaling=weak_scaling(groups, notes), speedups=sku_speedups(groups),
                  attempt_history=attempt_history(runs, attempts, rows),
                  preemptions=preemption_lines(runs, attempts, spot_clusters or {}),
                  replacements=replacement_lines(events, cluster), notes=notes)


def best_per_benchmark(groups: Sequence[GroupReport]) -> list[BestLine]:
    """The fastest official score per benchmark and GPU type, fastest first within a benchmark."""
    by: dict[tuple[str, str], list[GroupReport]] = defaultdict(list)
    for g in groups:
        if g.official and g.score_minutes is not None:
            by[(g.benchmark, g.gpu_type or "?")].append(g)
    out = []
    for (bench, gpu), members in by.items():
        g = min(members, key=lambda m: (m.score_minutes or 0.0, m.label))
        out.append(BestLine(benchmark=bench, gpu_type=gpu, system=g.label, gpus=g.gpus,
                            score_minutes=g.score_minutes or 0.0,
                            cost_per_result_usd=g.cost_per_result_usd, mfu=g.mfu,
                            mfu_precision=g.mfu_precision, scores=len(members)))
    return sorted(out, key=lambda b: (b.benchmark, b.score_minutes))


def unmapped_notes(skus: Iterable[str | None]) -> list[str]:
    """One warning per accelerator name the accelerator table does not know."""
    return [f"warning: {m.note}" for m in (match_gpu(s) for s in sorted({s for s in skus if s}))
            if m.unmapped]


def strong_scaling(groups: Sequence[GroupReport]) -> list[StrongScaling]:
    """Every pair of sizes within one benchmark x SKU series, from raw (and scaled) scores."""
    out = []
    for (bench, sku), series in _series(groups).items():
        scored = [g for g in series if g.score_raw_minutes and g.workers]
        for a, b in ((a, b) for a, b in combinations(scored, 2) if a.workers != b.workers):
            ta, tb, na, nb = a.score_raw_minutes or 0, b.score_raw_minutes or 0, a.workers or 0, \
                b.workers or 0
            scaled = tput = None
            if a.score_minutes and b.score_minutes:
                scaled = metrics.strong_scaling_efficiency(a.score_minutes, na, b.score_minutes, nb)
            if a.throughput_per_worker_minute and b.throughput_per_worker_minute is not None:
                tput = metrics.throughput_scaling(a.throughput_per_worker_minute,
                                                  b.throughput_per_worker_minute)
            out.append(StrongScaling(
                benchmark=bench, sku=sku, small=a.label, large=b.label, workers_small=na,
                workers_large=nb, gbs_small=a.global_batch_size, gbs_large=b.global_batch_size,
                score_small=ta, score_large=tb, speedup=metrics.speedup(ta, tb),
                efficiency=metrics.strong_scaling_efficiency(ta, na, tb, nb),
                efficiency_scaled=scaled, throughput_efficiency=tput))
    return out


def weak_scaling(
    groups: Sequence[GroupReport], notes: list[str] | None = None
) -> list[WeakScaling]:
    """Step-time weak scaling against the fewest-nodes group of each series. Only pairs with
    the same batch per worker (fixed work per worker) count; others are skipped with a note,
    since their step-time ratio measures something else."""
    out = []
    for (bench, sku), series in _series(groups).items():
        timed = sorted((g for g in series if g.step_stats and g.nodes),
                       key=lambda g: (g.nodes or 0, g.system))
        for g in (g for g in timed[1:] if g.nodes != timed[0].nodes):
            base = timed[0]
            if not _same_work_per_worker(base, g):
                if notes is not None:
                    notes.append(f"weak scaling {bench} {base.system} -> {g.system} skipped: "
                                 "batch per worker differs (not fixed work per worker)")
                continue
            t0 = base.step_stats.median if base.step_stats else 0.0
            t1 = g.step_stats.median if g.step_stats else 0.0
            out.append(WeakScaling(
                benchmark=bench, sku=sku, base=base.label, system=g.label,
                nodes_base=base.nodes or 0, nodes=g.nodes or 0, step_base_s=t0, step_s=t1,
                efficiency=metrics.weak_scaling_efficiency(t0, t1),
                step_change=metrics.step_time_change(t0, t1),
                min_max=metrics.step_time_min_max(t0, t1)))
    return out


def sku_speedups(groups: Sequence[GroupReport]) -> list[SkuSpeedup]:
    """Pairs of SKUs with a score for the same benchmark at the same GPU count, on the MLPerf
    score (x scaling); per dollar where both systems have a list price (report.cost)."""
    by_size: dict[tuple[str, int], list[GroupReport]] = defaultdict(list)
    for g in groups:
        if g.score_minutes and g.gpus and g.sku:
            by_size[(g.benchmark, g.gpus)].append(g)
    out = []
    for (bench, gpus), members in sorted(by_size.items()):
        for a, b in combinations(sorted(members, key=lambda g: -(g.score_minutes or 0)), 2):
            ta, tb = a.score_minutes or 0, b.score_minutes or 0  # a is the slower
            if a.sku == b.sku:
                continue
            per_dollar = None
            if a.system_price_per_hour and b.system_price_per_hour:
                per_dollar = metrics.speedup_per_dollar(ta, a.system_price_per_hour,
                                                        tb, b.system_price_per_hour)
            out.append(SkuSpeedup(
                benchmark=bench, workers=gpus, sku_a=a.sku or "", sku_b=b.sku or "",
                system_a=a.label, system_b=b.label, minutes_a=ta, minutes_b=tb,
                speedup=metrics.speedup(ta, tb),
                speedup_per_gpu=metrics.speedup_per_gpu(ta, gpus, tb, gpus),
                speedup_per_dollar=per_dollar))
    return out


GroupKey = tuple[str, str, str, str]  # benchmark, system, round, submitter


def group_results(rows: Iterable[ResultRow]) -> dict[GroupKey, list[ResultRow]]:
    """Results per (benchmark, system, round, submitter), each list in launch order."""
    groups: dict[GroupKey, list[ResultRow]] = defaultdict(list)
    for r in rows:
        groups[(r.benchmark, r.system or "unknown", r.round or "", r.submitter or "")].append(r)
    for members in groups.values():  # launch order: MLPerf's "objective ordering"
        members.sort(key=lambda r: (r.run_start_ms is None, r.run_start_ms or 0, r.log_path or "",
                                    r.id or 0))
    return groups


def group_label(key: GroupKey) -> str:
    """'round/submitter/system' with the empty parts left out (as GroupReport.label)."""
    return "/".join(p for p in (key[2], key[3], key[1]) if p)


def _filter(results: Iterable[ResultRow], runs: Sequence[RunRow] | None, *, benchmark: str | None,
            system: str | None, cluster: str | None, since: datetime | None,
            until: datetime | None = None) -> list[ResultRow]:
    if cluster is not None and runs is None:
        raise ConfigError("the cluster filter needs the runs (results only know their run id)",
                          hint="pass runs=store.list_runs(cluster=...)")
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)  # stored times are UTC
    if until is not None and until.tzinfo is None:
        until = until.replace(tzinfo=timezone.utc)
    in_cluster = {r.id for r in runs or () if r.cluster == cluster}
    return [r for r in results
            if (benchmark is None or r.benchmark == benchmark)
            and (system is None or r.system == system)
            and (cluster is None or r.run_id in in_cluster)
            and (since is None or r.created_at >= since)
            and (until is None or r.created_at <= until)]


def _series(groups: Iterable[GroupReport]) -> dict[tuple[str, str | None], list[GroupReport]]:
    out: dict[tuple[str, str | None], list[GroupReport]] = defaultdict(list)
    for g in groups:
        out[(g.benchmark, g.sku)].append(g)
    for members in out.values():
        members.sort(key=lambda g: (g.workers or 0, g.system))
    return out


def _group(key: GroupKey, rows: list[ResultRow], runs: Sequence[RunRow] | None,
           attempts: Sequence[AttemptRow] | None, facts: Mapping[str, ModelFacts],
           prices: Prices) -> GroupReport:
    bench, system, round_name, submitter = key
    summaries = [summary_of(r) for r in rows]
    nodes, gpus = _mode(r.nodes for r in rows), _mode(r.gpus for r in rows)
    sku = _mode(r.sku for r in rows)
    gpu = match_gpu(sku)
    factor = next((r.scaling_factor for r in rows if r.scaling_factor), None) or 1.0
    scoring = [i for i, r in enumerate(rows) if not r.resumed]
    # A run the compliance checker failed counts as not converged, as the result summarizer
    # drops it (mlperf-notes §4.2); a run not checked (compliance_ok None) is scored as logged.
    minutes = [rows[i].minutes if rows[i].converged and rows[i].compliance_ok is not False
               else None for i in scoring]
    score, note = _score(minutes, bench, factor)
    failed = [r.id or 0 for r in rows if r.compliance_ok is False]
    if failed:
        note = "; ".join(filter(None, [note, f"{len(failed)} run(s) failed compliance: not "
                                             "scored (counted as not converged)"]))
    scored = {scoring[j] for j in (score.scored_indices if score else [])}
    progress = [_last_progress(s) for s in summaries]
    tput = metrics.scored_throughput_per_minute([progress[i] for i in scoring], minutes, score) \
        if score is not None and score.value_minutes is not None else None
    workers = gpus or nodes  # a CPU node has no GPU: scale by nodes
    stats = metrics.step_time_stats([(0, t) for s in summaries for t in kept_step_times(s)],
                                    drop_first=False)
    source = step_source_label(summaries)
    resumed = [r.id or 0 for r in rows if r.resumed]
    if resumed:
        note = "; ".join(filter(None, [note, f"{len(resumed)} resumed run(s) not scored"]))
    alias = gpu.row.aliases[0] if gpu.row is not None and gpu.row.aliases else None
    itself = published_row(bench, alias, sku, round_name, submitter, system)
    value = score.value_minutes if score else None
    return GroupReport(
        benchmark=bench, system=system, round=round_name or None, submitter=submitter or None,
        sku=sku, gpu_type=gpu.label, catalog_size=gpu.row.name if gpu.row else None, nodes=nodes,
        gpus=gpus, workers=workers,
        published=neighbour(bench, alias, sku, gpus, value, itself),
        published_score_minutes=itself.score_minutes if itself else None,
        global_batch_size=_mode(r.global_batch_size for r in rows), runs=len(rows),
        required_runs=metrics.REQUIRED_RUNS.get(bench), converged=sum(r.converged for r in rows),
        resumed_runs=resumed, scaling_factor=factor,
        score_raw_minutes=score.raw_minutes if score else None,
        score_minutes=score.value_minutes if score else None,
        official=bool(score and score.official and score.value_minutes is not None),
        partial=bool(score and score.runs_used < score.runs_required), score_note=note,
        run_lines=[_run_line(r, s, i in scored, p) for i, (r, s, p)
                   in enumerate(zip(rows, summaries, progress))],
        throughput_unit=next((s.get("progress_key") for s in summaries if s.get("progress_key")),
                             None),
        throughput_per_minute=tput,
        throughput_per_worker_minute=tput / workers if tput is not None and workers else None,
        step_stats=stats, step_time_source=source,
        **model_flops_utilisation(facts.get(bench.strip().lower()), bench, sku, gpus,
                                  _mode(r.global_batch_size for r in rows),
                                  _mode(s.get("max_sequence_length") for s in summaries), stats,
                                  source=source, system=(round_name, submitter, system, nodes),
                                  summaries=summaries),
        **group_cost(rows, gpu, nodes, gpus, score.raw_minutes if score else None, runs, attempts,
                     prices).model_dump())


# RunSummary.step_time_source -> what the report says about it (results.mllog.StepTimeSource).
STEP_SOURCES = {
    "tracked_stats": "per-step tracked_stats",
    "tracked_block_avg": "per-block average step time (tracked_stats)",
    "block_derived": "derived: block duration / (block samples / GBS)",
    "block": "whole-block durations only: not step times, not used",
}


def step_source_label(summaries: Sequence[Mapping[str, Any]]) -> str:
    """Which source the group's step times used, e.g. "per-step tracked_stats" (all runs alike)."""
    found = sorted({str(s.get("step_time_source")) for s in summaries if s.get("step_time_source")})
    return "; ".join(STEP_SOURCES.get(k, k) for k in found)


def model_flops_utilisation(facts: ModelFacts | None, bench: str, sku: str | None,
                            gpus: int | None, gbs: int | None, seq_len: int | None,
                            stats: StepStats | None, *, source: str = "",
                            system: tuple[str | None, str | None, str | None, int | None] = (None, None, None, None),
                            summaries: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """MFU at the median step time (mlperf-notes 10.3): F x tokens/step / step / (GPUs x peak),
    against the dense peak of the precision the runs trained in (metrics.run_precision: the
    log, else the published config of `system` = (round, submitter, system, nodes), else the
    recipe's) and against dense BF16 (`mfu_bf16`, above 100% when the run computes in FP8/FP4).
    Blank with the reason in `mfu_note` when a fact is missing."""
    row = gpu_row(sku)
    missing = [why for bad, why in (
        (facts is None, f"no model facts for '{bench}' in the recipe catalog"),
        (stats is None or stats.median <= 0,
         f"no step times in the log ({source})" if source else "no step times in the log"),
        (not gpus, "GPU count unknown"), (not gbs, "no global_batch_size logged"),
        (row is None or row.peak_tflops_bf16 is None, f"no peak FLOP/s for {sku or 'this system'}"),
    ) if bad]
    if missing or facts is None or stats is None or row is None or not gpus or not gbs:
        return {"mfu_note": "MFU blank: " + "; ".join(missing)}
    seq = seq_len or facts.seq_len
    flops, tokens = facts.flops_per_token(seq), gbs * seq
    round_name, submitter, name, nodes = system
    folder = f"{round_name}_{submitter}_{name}/{nodes}"
    precision, where = _group_precision(summaries, facts.config_precisions.get(folder), facts.precision)
    precision = precision or facts.precision
    peak = row.peak_tflops(precision)
    per_gpu = flops * tokens / stats.median / gpus / 1e12
    bf16 = metrics.mfu(flops, tokens, stats.median, gpus, row.peak_tflops_bf16 or 0.0)
    notes = [f"{facts.formula}; {tokens:,} tokens/step (GBS {gbs} x seq {seq}); median "
             f"step {stats.median:.4f} s ({source or 'step times'}); precision {precision} from {where}; "
             f"dense peaks of {row.gpu_model}: {precision} {peak}, bf16 {row.peak_tflops_bf16} TFLOP/s "
             f"({row.peak_source or 'catalog'})"]
    if bf16 > 1.0:
        notes.append(f"MFU vs dense BF16 is {bf16:.1%}, above 100%: the run computes in {precision}, "
                     "faster than BF16's peak; it compares recipes, it is not a utilisation")
    if facts.reference_tflop_per_sample:
        ref = facts.reference_tflop_per_sample * 1e12 / seq
        gap = flops / ref - 1
        notes.append(f"NVIDIA's MODEL_TFLOP_PER_SAMPLE {facts.reference_tflop_per_sample:g} "
                     f"({facts.reference_source}) gives {ref * tokens / stats.median / gpus / 1e12:.0f} "
                     f"TFLOP/s per GPU; azbench's F is {gap:+.1%} from it"
                     + (f": {facts.reference_note}" if abs(gap) > 0.01 and facts.reference_note else ""))
    return {
        "model_tflops_per_gpu": per_gpu,
        "mfu_bf16": bf16,
        "mfu": metrics.mfu(flops, tokens, stats.median, gpus, peak) if peak else None,
        "mfu_precision": precision, "mfu_peak_tflops": peak,
        "mfu_note": "; ".join(notes),
    }


def _group_precision(summaries: Sequence[Mapping[str, Any]], config: str | None,
                     default: str) -> tuple[str | None, str]:
    """The runs' GEMM precision (metrics.run_precision), the one most runs say."""
    found = [metrics.run_precision(s, config, default) for s in summaries] or \
        [metrics.run_precision({}, config, default)]
    return _mode(p for p in found) or (None, "")


def _score(minutes: list[float | None], bench: str, factor: float) -> tuple[Any, str]:
    try:
        score = metrics.mlperf_score(minutes, bench, factor)
    except ConfigError as exc:  # an unknown benchmark has no required run count
        return None, f"no score: {exc.message}"
    return score, score.note


def _run_line(r: ResultRow, s: dict[str, Any], scored: bool, progress: float | None) -> RunLine:
    kept = kept_step_times(s)
    rate = progress / r.minutes if progress is not None and r.minutes else None
    return RunLine(
        result_id=r.id, log=r.log_path, status=r.status, converged=r.converged,
        resumed=r.resumed, scored=scored, minutes=r.minutes, progress=progress,
        progress_per_minute=rate, median_step_s=statistics.median(kept) if kept else None,
        compliance_ok=r.compliance_ok, **_node_spread(s))


def _node_spread(s: dict[str, Any]) -> dict[str, Any]:
    """Per-node step-time spread (recipes that log azbench_node_step_time): slowest node."""
    found = spread(s.get("node_step_times") or {})
    if found is None or found.nodes < 2:
        return {}
    return {"slowest_node": found.slowest, "node_spread": round(found.ratio, 3)}


def _same_work_per_worker(a: GroupReport, b: GroupReport) -> bool:
    if not (a.global_batch_size and b.global_batch_size and a.workers and b.workers):
        return True  # unknown: the caller (azbench's own sweeps) keeps per-worker work fixed
    pa, pb = a.global_batch_size / a.workers, b.global_batch_size / b.workers
    return abs(pa - pb) <= _SAME_BATCH_RTOL * max(pa, pb)


def _last_progress(summary: dict[str, Any]) -> float | None:
    points = summary.get("eval_points") or []
    value = points[-1][0] if points and isinstance(points[-1], list) and points[-1] else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mode(values: Iterable[Any]) -> Any:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None
