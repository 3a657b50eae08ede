"""Build the benchmark report from stored results: per-system scores, time-to-train,
throughput, step-time statistics and cost, plus strong/weak scaling and SKU speedups.

Pure data in, one pydantic `Report` out; the maths is orchestrator.results.metrics, rendering is
orchestrator.report.render, .terminal and .site. Resumed runs never enter a score
(mlperf-notes §6). The headline score is the one MLCommons publishes (olympic mean x
scaling.json, `score_minutes`); the raw olympic mean is kept beside it. Also here: the fastest
official score per benchmark and GPU type (`best`), the attempt history of runs that needed more
than one try; each group's GPU type (report.gpus), cost at list price (report.cost) and nearest
published result (results.definitions, the one home of every figure) come from their modules.
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

from orchestrator import formats
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen, ModelFacts, utcnow
from orchestrator.report.cost import Prices, group_cost
from orchestrator.fabric.lines import FabricLine, FabricScaling, fabric_lines, fabric_scaling
from orchestrator.report.gpus import match_gpu
from orchestrator.report.lost import LostWork
from orchestrator.report.preemption import PreemptionLine, preemption_lines
from orchestrator.report.replacements import ReplacementLine, replacement_lines
from orchestrator.results import definitions as defs
from orchestrator.results import metrics
from orchestrator.results.definitions import (
    Mfu,
    PublishedNeighbour,
    Refused,
    Scale,
    SkuSpeedup,
    StrongScaling,
    WeakScaling,
)
from orchestrator.results.metrics import Score, StepStats
from orchestrator.results.published import PublishedResult
from orchestrator.results.stragglers import spread
from orchestrator.results.mllog import RunSummary
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.explain.account import ReportExplain, explain_run, report_summary
from orchestrator.store.schema import AttemptRow, EventRow, FabricResultRow, ResultRow, RunRow

__all__ = ["Mfu", "PublishedNeighbour", "SkuSpeedup", "StrongScaling", "WeakScaling"]
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
    lost_seconds: float | None = Field(None, description="goodput's lost work of a failed attempt (report.lost)")
    result_resumed: bool = False
    message: str | None = None


def attempt_history(runs: Sequence[RunRow] | None, attempts: Sequence[AttemptRow] | None,
                    results: Sequence[ResultRow], lost: LostWork | None = None) -> list[AttemptLine]:
    """Every attempt of the runs that failed at least once (retried or not), oldest first; `lost`
    the report's shared lost work (goodput's figure: the one "lost"; one is made when not given)."""
    if not runs or not attempts:
        return []
    lost = lost if lost is not None else LostWork(runs, attempts)
    by_run: dict[str, list[AttemptRow]] = {}
    for a in attempts:
        by_run.setdefault(a.run_id, []).append(a)
    resumed = {r.run_id for r in results if r.resumed and r.run_id}
    shown = {run.id for run in runs if len(by_run.get(run.id, [])) >= 2
             or any(a.failure_class for a in by_run.get(run.id, []))}
    lines: list[AttemptLine] = []
    for run in runs:
        if run.id not in shown:
            continue
        tries = sorted(by_run.get(run.id, []), key=lambda a: a.attempt)
        lines += [AttemptLine(run_id=run.id, recipe=run.recipe, nodes=run.nodes, attempt=a.attempt,
                              state=a.state, failure_class=a.failure_class,
                              excluded_nodes=list(a.excluded_nodes),
                              resumed_from_step=a.resumed_from_step, lost_steps=a.lost_steps,
                              lost_seconds=lost.of(run.id, a.attempt),
                              result_resumed=run.id in resumed, message=a.message) for a in tries]
    return lines


def history_section(lines: Sequence[AttemptLine]) -> tuple[str, list[str], list[list[str]]]:
    header = ["run", "nodes", "attempt", "state", "failure", "excluded", "resumed from step",
              "lost steps", "lost work s", "result"]
    rows = [[line.run_id, formats.count(line.nodes), formats.count(line.attempt), line.state,
             line.failure_class or "-", ",".join(line.excluded_nodes) or "-",
             formats.count(line.resumed_from_step), formats.count(line.lost_steps),
             formats.fixed(line.lost_seconds, 1),
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
    official: bool = Field(False, description="a full MLPerf score whose counted runs passed "
                                              "compliance for the round the files name")
    compliance: str = Field("not checked", description='"passed", "failed" or "not checked": '
                            "mlperf_logging's checker on the runs the score counts "
                            "(results.definitions.verdict)")
    verdict: str = Field("no score", description="'official' or 'not official: why', the words "
                                                 "every view prints")
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
    mfu_precision_source: str = Field("", description="where mfu_precision was read")
    mfu_peak_tflops: float | None = None
    mfu_bf16: float | None = Field(None, description="against the dense BF16 peak: above 100% "
                                                     "for FP8/FP4 runs, a note, not a utilisation")
    mfu_note: str = Field("", description="how MFU was computed, or why it is blank")
    price_per_vm_hour: float | None = None
    priced_vms: int | None = Field(None, description="Azure VMs priced (nodes, or the same GPUs "
                                                     "as VMs of the catalog size)")
    system_price_per_hour: float | None = Field(None, description="priced_vms x price_per_vm_hour")
    cost_per_result_usd: float | None = Field(None, description="the runs one MLPerf score needs "
                                              "(required_runs), each at its own minutes x VMs x "
                                              "price (results.definitions.cost_per_result)")
    cost_per_run_usd: float | None = Field(None, description="one run as long as the raw olympic "
                                                             "mean x VMs x price")
    cost_all_runs_usd: float | None = None
    cost_all_attempts_usd: float | None = None
    cost_note: str = ""
    price_source: str = ""
    published: PublishedNeighbour | None = Field(None, description="the published result on the "
                                                 "same accelerator at the same GPU count, else the "
                                                 "nearest count compared per GPU (per_gpu); this "
                                                 "result itself left out")
    published_score_minutes: float | None = Field(None, description="the score MLCommons "
                                                  "published for this very result, if it is one")
    explain: ReportExplain | None = Field(None, description="the step model's prediction beside "
                                          "the measured median step (explain.account): parts, "
                                          "error; None where the model has no config for it")

    @property
    def label(self) -> str:
        return group_label((self.benchmark, self.system, self.round or "", self.submitter or ""))

    @property
    def scale(self) -> Scale:
        """What the scaling figures (results.definitions) read of this group."""
        return Scale(label=self.label, workers=self.workers, nodes=self.nodes,
                     global_batch_size=self.global_batch_size, score_minutes=self.score_minutes,
                     raw_minutes=self.score_raw_minutes,
                     median_step_s=self.step_stats.median if self.step_stats else None,
                     throughput_per_worker_minute=self.throughput_per_worker_minute)

    @property
    def kind(self) -> str:
        """"official", "partial", "not official" or "no score" (a short column; `verdict` says
        why, in the same words in every view)."""
        if self.score_minutes is None:
            return "no score"
        return "official" if self.official else ("partial" if self.partial else "not official")

    @property
    def is_published_score(self) -> bool:
        """This group's score equals the score MLCommons published for it (relative 1e-9)."""
        return (self.score_minutes is not None and self.published_score_minutes is not None
                and math.isclose(self.score_minutes, self.published_score_minutes,
                                 rel_tol=_SAME_SCORE_RTOL))


class BestLine(Frozen):
    """The fastest official MLPerf score of one benchmark on one GPU type."""

    benchmark: str
    gpu_type: str
    system: str
    gpus: int | None
    score_minutes: float
    cost_per_result_usd: float | None = None
    cost_per_run_usd: float | None = None
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
    fabric: list[FabricLine] = Field(default_factory=list, description="stored collective runs (fabric/lines.py)")
    fabric_scaling: list[FabricScaling] = Field(default_factory=list)
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
    fabric: Sequence[FabricResultRow] | None = None,
    mixed_round_speedups: bool = False,
) -> Report:
    """The report over `results` matching the filters. `runs`/`attempts` (optional) add the
    cluster filter and the cost of every attempt, failed ones included; `spot_clusters`
    ({cluster: SKU}) adds the spot section's cost saved; `model_facts` ({benchmark: facts}, as
    recipes.catalog.model_facts() gives them) adds MFU, which is blank without them; `events`
    (the store's) add the node replacements; `prices` ({size name: USD per VM-hour}) override
    the catalog's list prices; `fabric` (the store's fabric results) adds the fabric section;
    `mixed_round_speedups` pairs scores of different rounds too (flagged)."""
    rows = _filter(results, runs, benchmark=benchmark, system=system, cluster=cluster, since=since,
                   until=until)
    notes: list[str] = [] if rows else ["no results match"]
    facts = {key.strip().lower(): f for key, f in (model_facts or {}).items()}
    grouped = group_results(rows)
    # a published result stored here is one of the systems compared: never another's neighbour
    stored = [p for key, members in grouped.items() if (p := _itself(key, members)) is not None]
    groups = [_group(key, members, runs, attempts, facts, prices or {}, stored)
              for key, members in grouped.items()]
    groups.sort(key=lambda g: (g.benchmark, g.sku or "", g.workers or 0, g.system))
    notes += unmapped_notes(r.sku for r in rows)
    asked = {"benchmark": benchmark, "system": system, "cluster": cluster, "since": since,
             "until": until}
    filters = {k: str(v) for k, v in asked.items() if v is not None}
    lost = LostWork(runs or [], attempts or [])  # the history and the spot section read each run's logs once
    return Report(filters=filters, best=best_per_benchmark(groups), groups=groups,
                  strong_scaling=strong_scaling(groups),
                  weak_scaling=weak_scaling(groups, notes), speedups=sku_speedups(groups, mixed_round_speedups),
                  attempt_history=attempt_history(runs, attempts, rows, lost),
                  preemptions=preemption_lines(runs, attempts, spot_clusters or {}, lost),
                  replacements=replacement_lines(events, cluster),
                  fabric=(lines := fabric_lines(fabric or [])), fabric_scaling=fabric_scaling(lines), notes=notes)


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
                            cost_per_result_usd=g.cost_per_result_usd,
                            cost_per_run_usd=g.cost_per_run_usd, mfu=g.mfu,
                            mfu_precision=g.mfu_precision, scores=len(members)))
    return sorted(out, key=lambda b: (b.benchmark, b.score_minutes))


def unmapped_notes(skus: Iterable[str | None]) -> list[str]:
    """One warning per accelerator name the accelerator table does not know."""
    return [f"warning: {m.note}" for m in (match_gpu(s) for s in sorted({s for s in skus if s}))
            if m.unmapped]


def strong_scaling(groups: Sequence[GroupReport]) -> list[StrongScaling]:
    """Every pair of sizes within one benchmark x SKU series (results.definitions.strong_scaling)."""
    out = []
    for (bench, sku), series in _series(groups).items():
        scored = [g for g in series if g.score_raw_minutes and g.workers]
        for a, b in ((a, b) for a, b in combinations(scored, 2) if a.workers != b.workers):
            found = defs.strong_scaling(bench, sku, a.scale, b.scale)
            if isinstance(found, StrongScaling):
                out.append(found)
    return out


def weak_scaling(
    groups: Sequence[GroupReport], notes: list[str] | None = None
) -> list[WeakScaling]:
    """Step-time weak scaling against the fewest-nodes group of each series
    (results.definitions.weak_scaling); a pair where it is not defined (the work per GPU
    differs) is left out, with the reason in `notes`."""
    out = []
    for (bench, sku), series in _series(groups).items():
        timed = sorted((g for g in series if g.step_stats and g.nodes),
                       key=lambda g: (g.nodes or 0, g.system))
        for g in (g for g in timed[1:] if g.nodes != timed[0].nodes):
            found = defs.weak_scaling(bench, sku, timed[0].scale, g.scale)
            if isinstance(found, Refused):
                if notes is not None:
                    notes.append(found.text)
                continue
            out.append(found)
    return out


def sku_speedups(groups: Sequence[GroupReport], mixed_rounds: bool = False) -> list[SkuSpeedup]:
    """Pairs of SKUs with a score for the same benchmark at the same GPU count, on the MLPerf
    score (x scaling), of the same round unless `mixed_rounds` (then flagged); per dollar where
    both systems have a list price (report.cost)."""
    by_size: dict[tuple[str, int], list[GroupReport]] = defaultdict(list)
    for g in groups:
        if g.score_minutes and g.gpus and g.sku:
            by_size[(g.benchmark, g.gpus)].append(g)
    out = []
    for (bench, gpus), members in sorted(by_size.items()):
        for a, b in combinations(sorted(members, key=lambda g: -(g.score_minutes or 0)), 2):
            if a.sku == b.sku or not (mixed_rounds or defs.same_round(a.round, b.round)):
                continue  # a is the slower
            out.append(defs.sku_speedup(bench, gpus, (a.sku or "", a.scale, a.system_price_per_hour),
                                        (b.sku or "", b.scale, b.system_price_per_hour),
                                        rounds=(a.round, b.round)))
    return out


GroupKey = tuple[str, str, str, str]  # benchmark, system, round, submitter


def group_results(rows: Iterable[ResultRow]) -> dict[GroupKey, list[ResultRow]]:
    """Results per (benchmark, system, round, submitter), each list in launch order."""
    groups: dict[GroupKey, list[ResultRow]] = defaultdict(list)
    for r in rows:
        groups[(r.benchmark, r.system or "unknown", r.round or "", r.submitter or "")].append(r)
    return {key: defs.launch_order(members) for key, members in groups.items()}


def group_label(key: GroupKey) -> str:
    """'round/submitter/system' with the empty parts left out (as GroupReport.label)."""
    return "/".join(p for p in (key[2], key[3], key[1]) if p)


def names_system(row: ResultRow, value: str) -> bool:
    """Whether a --system value names this result's system: its stored system name, its label
    as the report prints it ('v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo'), or the label's tail the
    terminal prints when every row shares the head ('NVIDIA/hsg_ngpu5120_ngc25.09_nemo')."""
    if value == row.system:
        return True
    parts = value.strip("/").split("/")
    label = group_label((row.benchmark, row.system or "unknown", row.round or "", row.submitter or ""))
    return len(parts) > 1 and label.split("/")[-len(parts):] == parts


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
            and (system is None or names_system(r, system))
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


def _itself(key: GroupKey, rows: Sequence[ResultRow]) -> PublishedResult | None:
    """The vendored table's row for this group, when its results are a published one's."""
    bench, system, round_name, submitter = key
    sku = _mode(r.sku for r in rows)
    gpu = match_gpu(sku)
    alias = gpu.row.aliases[0] if gpu.row is not None and gpu.row.aliases else None
    return defs.published_row(bench, alias, sku, round_name, submitter, system)


def _group(key: GroupKey, rows: list[ResultRow], runs: Sequence[RunRow] | None,
           attempts: Sequence[AttemptRow] | None, facts: Mapping[str, ModelFacts],
           prices: Prices, stored: Sequence[PublishedResult] = ()) -> GroupReport:
    bench, system, round_name, submitter = key
    summaries = [summary_of(r) for r in rows]
    nodes, gpus, sku = _mode(r.nodes for r in rows), _mode(r.gpus for r in rows), _mode(r.sku for r in rows)
    gpu = match_gpu(sku)
    scoring = [i for i, r in enumerate(rows) if not r.resumed]
    score, note = _score(rows, bench)
    verdict = defs.verdict(rows, bench, round_name or None, score)
    note, resumed = _unscored_note(rows, note)
    scored = {scoring[j] for j in (score.scored_indices if score else [])}
    progress = [_last_progress(s) for s in summaries]
    tput = metrics.scored_throughput_per_minute([progress[i] for i in scoring], defs.scored_minutes(rows), score) \
        if score is not None and score.value_minutes is not None else None
    workers = gpus or nodes  # a CPU node has no GPU: scale by nodes
    stats = defs.step_time(rows)
    source = step_source_label(summaries)
    alias = gpu.row.aliases[0] if gpu.row is not None and gpu.row.aliases else None
    itself = _itself(key, rows)
    value = score.value_minutes if score else None
    gbs = _mode(r.global_batch_size for r in rows)
    mfu = defs.mfu(facts.get(bench.strip().lower()), bench, sku, gpus, gbs,
                   _mode(s.max_sequence_length for s in summaries), stats, source=source,
                   system=group_label(key), summaries=summaries)
    explained = _explain(bench, system, round_name, submitter, rows, runs, stats.median if stats else None)
    cost = group_cost(rows, gpu, nodes, gpus, score.raw_minutes if score else None, runs, attempts,
                      prices, runs_for_score=defs.required_runs_or_none(bench))
    return GroupReport(
        benchmark=bench, system=system, round=round_name or None, submitter=submitter or None,
        sku=sku, gpu_type=gpu.label, catalog_size=gpu.row.name if gpu.row else None, nodes=nodes,
        gpus=gpus, workers=workers,
        published=defs.published_neighbour(bench, alias, sku, gpus, value, itself, stored),
        published_score_minutes=itself.score_minutes if itself else None,
        global_batch_size=gbs, runs=len(rows),
        required_runs=metrics.REQUIRED_RUNS.get(bench), converged=sum(r.converged for r in rows),
        resumed_runs=resumed, scaling_factor=defs.scaling_factor(rows),
        score_raw_minutes=score.raw_minutes if score else None,
        score_minutes=value,
        official=verdict.official, compliance=verdict.compliance, verdict=verdict.text,
        partial=bool(score and score.runs_used < score.runs_required), score_note=note,
        run_lines=[_run_line(r, s, i in scored, p) for i, (r, s, p)
                   in enumerate(zip(rows, summaries, progress))],
        throughput_unit=next((s.progress_key for s in summaries if s.progress_key), None),
        throughput_per_minute=tput,
        throughput_per_worker_minute=tput / workers if tput is not None and workers else None,
        step_stats=stats, step_time_source=source, **_mfu_fields(mfu), **cost.model_dump(),
        explain=explained)


def _unscored_note(rows: Sequence[ResultRow], note: str) -> tuple[str, list[int]]:
    """The score's note with the runs it leaves out and why (failed compliance, resumed), and
    the resumed runs' ids."""
    failed = [r.id or 0 for r in rows if r.compliance_ok is False]
    if failed:
        note = "; ".join(filter(None, [note, f"{len(failed)} run(s) failed compliance: not "
                                             "scored (counted as not converged)"]))
    resumed = [r.id or 0 for r in rows if r.resumed]
    if resumed:
        note = "; ".join(filter(None, [note, f"{len(resumed)} resumed run(s) not scored"]))
    return note, resumed


def _mfu_fields(m: defs.Mfu) -> dict[str, Any]:
    """GroupReport's MFU fields from results.definitions.mfu's answer."""
    return {"model_tflops_per_gpu": m.model_tflops_per_gpu, "mfu": m.value, "mfu_precision": m.precision,
            "mfu_precision_source": m.precision_source, "mfu_peak_tflops": m.peak_tflops,
            "mfu_bf16": m.bf16, "mfu_note": m.note}


def _explain(bench: str, system: str, round_name: str, submitter: str, rows: Sequence[ResultRow],
             runs: Sequence[RunRow] | None, measured: float | None) -> ReportExplain | None:
    """The step model for a group: a published scale of the vendored table by its name, else a
    run of ours through its recipe's config at its scale (explain.account)."""
    found = report_summary(round_name or None, submitter or None, system, bench, measured)
    if found is not None or not runs:
        return found
    by_id = {r.id: r for r in runs}
    run = next((by_id[r.run_id] for r in rows if r.run_id in by_id), None)
    sku = _mode(r.sku for r in rows)
    if run is None or not sku:
        return None
    e = explain_run(run.id, run.recipe, run.nodes, sku, measured, 0)
    return ReportExplain(predicted_step_s=e.predicted_step_s, measured_step_s=measured,
                         components=e.components, error=e.error, not_predicted=e.not_predicted,
                         source=e.subject)


# RunSummary.step_time_source -> what the report says about it (results.mllog.StepTimeSource).
STEP_SOURCES = {
    "tracked_stats": "per-step tracked_stats",
    "tracked_block_avg": "per-block average step time (tracked_stats)",
    "block_derived": "derived: block duration / (block samples / GBS)",
    "tracked_throughput": "derived: GBS / logged throughput (samples/s, per logged window)",
    "block": "whole-block durations only: not step times, not used",
}


def step_source_label(summaries: Sequence[RunSummary]) -> str:
    """Which source the group's step times used, e.g. "per-step tracked_stats" (all runs alike)."""
    found = sorted({s.step_time_source for s in summaries if s.step_time_source})
    return "; ".join(STEP_SOURCES.get(k, k) for k in found)


def _score(rows: Sequence[ResultRow], bench: str) -> tuple[Score | None, str]:
    try:
        score = defs.time_to_train(rows, bench)
    except ConfigError as exc:  # an unknown benchmark has no required run count
        return None, f"no score: {exc.message}"
    return score, score.note


def _run_line(r: ResultRow, s: RunSummary, scored: bool, progress: float | None) -> RunLine:
    kept = kept_step_times(s)
    rate = progress / r.minutes if progress is not None and r.minutes else None
    return RunLine(
        result_id=r.id, log=r.log_path, status=r.status, converged=r.converged,
        resumed=r.resumed, scored=scored, minutes=r.minutes, progress=progress,
        progress_per_minute=rate, median_step_s=statistics.median(kept) if kept else None,
        compliance_ok=r.compliance_ok, **_node_spread(s))


def _node_spread(s: RunSummary) -> dict[str, Any]:
    """Per-node step-time spread (recipes that log azbench_node_step_time): slowest node."""
    found = spread(s.node_step_times)
    if found is None or found.nodes < 2:
        return {}
    return {"slowest_node": found.slowest, "node_spread": round(found.ratio, 3)}


def _last_progress(summary: RunSummary) -> float | None:
    value = summary.eval_points[-1].progress if summary.eval_points else None
    return float(value) if value is not None else None


def _mode(values: Iterable[Any]) -> Any:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None
