"""History for the report site: every baseline metric per occasion (a pipeline run's sweep, a run
of its own, or the day imported logs ran, from their own run_start), each occasion compared with
the active baseline by `compare`.

Lives in pipelines/ because baselines and `compare` do (the report floor cannot import them);
it returns orchestrator.report.history's typed History, which the site draws.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from orchestrator.pipelines.baselines import (
    METRICS,
    Baseline,
    BaselineEntry,
    MetricDelta,
    Tolerances,
    _gate_busbw,
    compare,
    entries_from,
    find_baseline,
    list_baselines,
)
from orchestrator.report.history import History, HistoryPoint, HistorySeries
from orchestrator.results import definitions as defs
from orchestrator.store.schema import ResultRow, RunRow

if TYPE_CHECKING:
    from orchestrator.store.database import Store

SeriesKey = tuple[str, str | None, int, str]  # benchmark, sku, nodes, metric
Scale = tuple[str, str | None, int]  # benchmark, sku, nodes
# Metrics that are one system's: not defined at a scale several systems share over time.
PER_SYSTEM = ("time_to_train", "step_time")


def history_from_store(store: Store, *, baseline: str | None = None,
                       tolerances: Tolerances | None = None, since: datetime | None = None,
                       until: datetime | None = None) -> History:
    """The history of every stored result; the band is `baseline` (default: the most recently
    updated baseline, none when the store has none)."""
    base = find_baseline(store, baseline) if baseline else None
    notes = []
    if baseline and base is None:
        notes.append(f"no baseline named '{baseline}': no band, no verdicts")
    if base is None and not baseline:
        known = sorted(list_baselines(store), key=lambda b: b.updated_at)
        base = known[-1] if known else None
    results = store.list_results()
    busbw = {rid: bw for rid in sorted({r.run_id for r in results if r.run_id})
             if (bw := _gate_busbw(store, rid)) is not None}
    hist = build_history(results, store.list_runs(), base, tolerances, since=since, until=until,
                         busbw=busbw)
    return hist.model_copy(update={"notes": hist.notes + notes})


def build_history(results: Sequence[ResultRow], runs: Sequence[RunRow], baseline: Baseline | None,
                  tolerances: Tolerances | None = None, *, since: datetime | None = None,
                  until: datetime | None = None, busbw: Mapping[str, float] | None = None
                  ) -> History:
    """Pure: one point per occasion x scale x metric, oldest first, with compare's verdicts;
    a point's value is the metric's figure (BaselineEntry.value: the MLPerf score of the
    occasion's runs for time to train; where the occasion has fewer runs than a score needs,
    their mean, marked `partial`: runs, never a time to train), and a metric not defined at a
    scale (weak scaling at another work per GPU; time to train or step time at a scale several
    systems share over time) has no point, its reason in the notes. `busbw` ({run id: GB/s}, the
    health gate's all-reduce figures) adds that metric."""
    tol = tolerances or Tolerances()
    systems = _systems_at_scale(results)
    points: dict[SeriesKey, list[HistoryPoint]] = defaultdict(list)
    refused: list[str] = []
    for (name, when), rows in sorted(_occasions(results, runs).items(), key=lambda kv: kv[0][1]):
        if (since and when < since) or (until and when > until):
            continue
        entries = entries_from(rows, busbw)
        verdicts: dict[SeriesKey, MetricDelta] = {}
        if baseline is not None:
            verdicts = {(d.benchmark, d.sku, d.nodes, d.metric): d
                        for d in compare(baseline, entries, tol).deltas}
        for e in entries:
            scale = (e.benchmark, e.sku, e.nodes)
            refused += _refusals(e, name, systems[scale])
            _add_points(points, e, name, when, _partial(rows, scale), systems[scale], verdicts)
    return History(baseline=baseline.name if baseline else None, since=since, until=until,
                   series=_series(points, results, baseline, tol),
                   notes=list(dict.fromkeys(refused)))


def _systems_at_scale(results: Sequence[ResultRow]) -> defaultdict[Scale, set[str]]:
    """The systems ("round/submitter/system") each scale's results ran on: a series is one
    system's, so scores and step times are never pooled across them."""
    systems: defaultdict[Scale, set[str]] = defaultdict(set)
    for r in results:
        if r.nodes:
            systems[(r.benchmark, r.sku, r.nodes)].add(
                "/".join(p for p in (r.round, r.submitter, r.system) if p))
    return systems


def _refusals(e: BaselineEntry, occasion: str, systems: set[str]) -> list[str]:
    """The notes for an occasion's entry: each baseline metric it refused and why, and the
    per-system metrics not defined because several systems share its scale over time."""
    out = [f"{e.label} {metric} ({occasion}): {why}" for metric, why in e.refused.items()
           if metric in METRICS]
    if len(systems) > 1:
        out += [f"{e.label} {metric}: not defined: {len(systems)} systems at "
                f"this scale over time ({', '.join(sorted(systems))}), a series "
                "is one system's" for metric in PER_SYSTEM
                if metric in e.metrics and metric not in e.refused]
    return out


def _add_points(points: dict[SeriesKey, list[HistoryPoint]], e: BaselineEntry, occasion: str,
                when: datetime, partial: str | None, systems: set[str],
                verdicts: Mapping[SeriesKey, MetricDelta]) -> None:
    """Append the occasion's point for each metric the entry has a value for (none for a
    refused metric, nor for a per-system metric at a scale several systems share)."""
    for metric, samples in e.metrics.items():
        value = e.value(metric)
        if not samples or value is None or metric in e.refused:
            continue
        if metric in PER_SYSTEM and len(systems) > 1:
            continue
        d = verdicts.get((e.benchmark, e.sku, e.nodes, metric))
        points[(e.benchmark, e.sku, e.nodes, metric)].append(HistoryPoint(
            when=when, occasion=occasion, value=value, samples=samples,
            partial=partial if metric == "time_to_train" else None,
            verdict=d.verdict if d else None, change=d.change if d else None,
            confidence=d.confidence if d else None))


def _series(points: Mapping[SeriesKey, list[HistoryPoint]], results: Sequence[ResultRow],
            baseline: Baseline | None, tol: Tolerances) -> list[HistorySeries]:
    """One series per key with points, sorted, each with its GPU count (the commonest at its
    scale) and the baseline's band (its mean +- the metric's max_change) where it has one."""
    gpus: dict[Scale, Counter[int]] = defaultdict(Counter)
    for r in results:
        if r.nodes and r.gpus:
            gpus[(r.benchmark, r.sku, r.nodes)][r.gpus] += 1
    base_entries = {(e.benchmark, e.sku, e.nodes): e for e in (baseline.entries if baseline else [])}
    series = []
    for key in sorted(points, key=lambda k: (k[0], k[1] or "", k[2], k[3])):
        bench, sku, nodes, metric = key
        label, better = METRICS.get(metric, (metric, "lower"))
        change = getattr(tol, metric).max_change if metric in METRICS else 0.0
        entry = base_entries.get((bench, sku, nodes))
        mean = entry.value(metric) if entry is not None and metric not in entry.refused else None
        band = (mean * (1 - change), mean * (1 + change)) if mean is not None else None
        series.append(HistorySeries(
            benchmark=bench, sku=sku, nodes=nodes, metric=metric, metric_label=label, better=better,
            gpus=gpus[(bench, sku, nodes)].most_common(1)[0][0] if gpus[(bench, sku, nodes)] else None,
            baseline=baseline.name if baseline and mean is not None else None, baseline_mean=mean,
            band=band, max_change=change, points=list(points[key])))
    return series


def _partial(rows: Sequence[ResultRow], scale: tuple[str, str | None, int]) -> str | None:
    """Why the occasion's runs at `scale` are no MLPerf score (fewer runs than the benchmark
    requires: their mean is not a time to train), or None."""
    bench, sku, nodes = scale
    mine = [r for r in rows if (r.benchmark, r.sku, r.nodes) == scale and not r.resumed]
    need = defs.required_runs_or_none(bench)
    if need is None or len(mine) >= need:
        return None
    return (f"the mean of {len(mine)} run(s), {need} make a score: runs, not a time to train")


def _occasions(results: Sequence[ResultRow], runs: Sequence[RunRow]
               ) -> dict[tuple[str, datetime], list[ResultRow]]:
    """Results per occasion: a pipeline's sweep (its first run's time), else a run of its own,
    else the day its log ran (the log's run_start, UTC; that day's first start), else, for a log
    without a run_start, the day it was imported."""
    by_id = {r.id: r for r in runs}
    keyed: dict[str, list[ResultRow]] = defaultdict(list)
    when: dict[str, datetime] = {}
    for r in results:
        run = by_id.get(r.run_id or "")
        if run is not None and run.sweep_id:
            name, at = f"pipeline run {run.sweep_id}", run.created_at
        elif run is not None:
            name, at = f"run {run.id}", run.created_at
        elif (ran := _ran_at(r.run_start_ms)) is not None:
            name, at = f"logs of {ran:%Y-%m-%d}", ran
        else:
            name, at = f"import {r.created_at:%Y-%m-%d}", r.created_at
        keyed[name].append(r)
        when[name] = min(when.get(name, at), at)
    return {(name, when[name]): rows for name, rows in keyed.items()}


def _ran_at(run_start_ms: int | None) -> datetime | None:
    """A log's run_start as a UTC time; None when absent or not a date (an invalid log)."""
    if run_start_ms is None:
        return None
    try:
        return datetime.fromtimestamp(run_start_ms / 1000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
