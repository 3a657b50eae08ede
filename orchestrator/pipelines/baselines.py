"""Performance baselines: named sets of metric samples per benchmark x scale, and comparisons.

`collect` turns stored results (plus the health gate's all-reduce figures) into samples per
benchmark x SKU x node count: time-to-train, each run's median step time, weak-scaling
efficiency against the fewest-nodes scale, and all-reduce bus bandwidth when the gate measured
it. Each metric's figure (`BaselineEntry.values`, what `compare`, the history and `baseline
show` print as the mean) is the one results.definitions defines: time to train is the MLPerf
score, step time the median of every kept step, weak scaling E_weak on those medians and only at
the same work per GPU (a scale where it is not defined has no sample, and `refused` says why);
the per-run samples feed the t-test. `set_baseline` / `get_baseline` / `list_baselines` / `delete_baseline` keep them in the
store (as BaselineRows, schema v3). `compare` checks current samples against a baseline with
per-metric tolerances and Welch's t-test over the repeats (scipy when installed, else the
stdlib version below), and lists regressions and improvements with their confidence.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from orchestrator import formats
from orchestrator.report.gpus import match_gpu
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.models import Frozen, utcnow
from orchestrator.results import definitions as defs
from orchestrator.results.metrics import mlperf_score
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.events import GateData
from orchestrator.store.schema import BaselineRow, ResultRow

if TYPE_CHECKING:
    from orchestrator.store.database import Store

Direction = Literal["lower", "higher"]
Verdict = Literal["regression", "improvement", "within", "noise", "missing", "new"]
# metric -> (label with unit, which way is better)
METRICS: dict[str, tuple[str, Direction]] = {
    "time_to_train": ("time to train (min)", "lower"),
    "step_time": ("median step time (s)", "lower"),
    "weak_scaling_efficiency": ("weak-scaling efficiency", "higher"),
    "allreduce_busbw": ("all-reduce busbw (GB/s)", "higher"),
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Tolerance(Frozen):
    """A change worse than `max_change` (a fraction: 0.1 = 10 %) is a regression when the
    t-test over the repeats is at least `min_confidence` sure (or a side has one sample)."""

    max_change: float = Field(0.10, gt=0, le=100)
    min_confidence: float = Field(0.90, ge=0, lt=1)

    @field_validator("max_change", mode="before")
    @classmethod
    def _percent(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().endswith("%"):
            return float(value.strip()[:-1]) / 100
        return value


def _tol(change: float) -> Any:
    return Field(default_factory=lambda: Tolerance(max_change=change))


class Tolerances(Frozen):
    """Per-metric tolerances; a bare number (or '10%') sets max_change only."""

    time_to_train: Tolerance = _tol(0.10)
    step_time: Tolerance = _tol(0.10)
    weak_scaling_efficiency: Tolerance = _tol(0.10)
    allreduce_busbw: Tolerance = _tol(0.15)

    @field_validator("*", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"max_change": value} if isinstance(value, (int, float, str)) else value


class BaselineEntry(Frozen):
    """Samples (one per run) of each metric at one benchmark x SKU x node count, each metric's
    figure (`values`, results.definitions) and the metrics not defined here with the reason."""

    benchmark: str
    sku: str | None = None
    nodes: int
    gpus: int | None = Field(None, description="GPUs at this scale (the results' own count)")
    global_batch_size: int | None = None
    metrics: dict[str, list[float]] = Field(default_factory=dict)
    values: dict[str, float] = Field(default_factory=dict, description="the figure per metric: "
                                     "the MLPerf score for time_to_train")
    refused: dict[str, str] = Field(default_factory=dict, description="metric -> why it is not "
                                    "defined at this scale ('not defined ...')")
    runs: list[str] = Field(default_factory=list, description="run ids (or result ids) used")
    base_nodes: int | None = Field(None, description="the scale weak scaling is measured from")

    @property
    def label(self) -> str:
        return scale_label(self.benchmark, self.sku, self.gpus, self.nodes)

    def value(self, metric: str) -> float | None:
        """The metric's figure: `values`, else (a baseline stored before figures were kept) the
        MLPerf score of the time-to-train samples (scaling factor 1) or the samples' mean."""
        if metric in self.values:
            return self.values[metric]
        samples = self.metrics.get(metric) or []
        if not samples:
            return None
        if metric == "time_to_train":
            try:
                return mlperf_score(list(samples), self.benchmark).value_minutes
            except ConfigError:
                return None
        return statistics.fmean(samples)


def scale_label(benchmark: str, sku: str | None, gpus: int | None, nodes: int) -> str:
    """"llama31_405b · GB200 · 512 GPUs (128 nodes)": the benchmark, the GPU as a reader names
    it (report.gpus) and the scale (formats.scale), as the site's history labels its series."""
    return f"{benchmark} · {match_gpu(sku).label} · {formats.scale(gpus, nodes)}"


class Baseline(Frozen):
    name: str
    source: dict[str, Any] = Field(default_factory=dict)
    entries: list[BaselineEntry] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class MetricDelta(Frozen):
    """One metric at one scale: baseline vs current, the relative change and the verdict."""

    benchmark: str
    sku: str | None
    nodes: int
    metric: str
    better: Direction
    baseline_mean: float | None = Field(description="the baseline's figure (BaselineEntry.value): "
                                        "the MLPerf score for time_to_train")
    current_mean: float | None = Field(description="the current figure, as baseline_mean")
    n_baseline: int
    n_current: int
    gpus: int | None = None
    change: float | None = Field(None, description="(current - baseline) / baseline")
    p_value: float | None = None
    confidence: float | None = Field(None, description="1 - p of Welch's t-test; None when n < 2")
    max_change: float
    verdict: Verdict

    @property
    def label(self) -> str:
        return scale_label(self.benchmark, self.sku, self.gpus, self.nodes)

    def describe(self) -> str:
        what = METRICS.get(self.metric, (self.metric, "lower"))[0]
        change = f"{self.change:+.1%}" if self.change is not None else "n/a"
        conf = f", confidence {self.confidence:.0%}" if self.confidence is not None else ", n<2"
        return (f"{self.label}, {what}: {_num(self.baseline_mean)} -> {_num(self.current_mean)} "
                f"({change}, tolerance {self.max_change:.0%}{conf})")


class Comparison(Frozen):
    baseline: str
    deltas: list[MetricDelta] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="metrics not defined at a scale, "
                                                               "and why (no delta for them)")

    @property
    def regressions(self) -> list[MetricDelta]:
        return [d for d in self.deltas if d.verdict == "regression"]

    @property
    def improvements(self) -> list[MetricDelta]:
        return [d for d in self.deltas if d.verdict == "improvement"]

    def for_scale(self, benchmark: str, sku: str | None, nodes: int) -> list[MetricDelta]:
        return [d for d in self.deltas if (d.benchmark, d.sku, d.nodes) == (benchmark, sku, nodes)]

    def to_json_data(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["regressions"] = [d.describe() for d in self.regressions]
        data["improvements"] = [d.describe() for d in self.improvements]
        return data



# -- collecting samples ----------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Which stored results a baseline or a comparison reads: those of these sweeps, matching
    the filters that are set."""

    sweep_ids: tuple[str, ...] = ()
    cluster: str | None = None
    benchmark: str | None = None
    since: datetime | None = None

    def source(self) -> dict[str, str | list[str]]:
        """What is set, as a baseline's `source` keeps it (JSON: the date as text)."""
        out: dict[str, str | list[str]] = {}
        if self.sweep_ids:
            out["sweep_ids"] = list(self.sweep_ids)
        out |= {k: v for k, v in (("cluster", self.cluster), ("benchmark", self.benchmark)) if v}
        if self.since is not None:
            out["since"] = str(self.since)
        return out


def collect(store: Store, selection: Selection) -> list[BaselineEntry]:
    """Samples from the stored results the selection names."""
    sweep_ids = selection.sweep_ids
    results = store.list_results(benchmark=selection.benchmark, cluster=selection.cluster, since=selection.since)
    if sweep_ids:
        run_ids = {r.id for s in sweep_ids for r in store.list_runs(sweep_id=s)}
        if not run_ids:
            raise NotFoundError(f"no runs in sweep(s) {', '.join(sweep_ids)}",
                                hint="see `azbench status` for sweep ids")
        results = [r for r in results if r.run_id in run_ids]
    busbw = {rid: bw for rid in {r.run_id for r in results if r.run_id}
             if (bw := _gate_busbw(store, rid)) is not None}
    return entries_from(results, busbw)


def entries_from(results: Iterable[ResultRow], busbw: Mapping[str, float] | None = None
                 ) -> list[BaselineEntry]:
    """Pure: per-scale samples and figures. Results without a node count are left out; resumed
    runs count for step times only, and time-to-train only counts converged runs."""
    groups: dict[tuple[str, str | None, int], list[ResultRow]] = defaultdict(list)
    for r in results:
        if r.nodes:
            groups[(r.benchmark, r.sku, r.nodes)].append(r)
    entries = {key: _entry(key, rows, busbw or {}) for key, rows in groups.items()}
    return _with_weak_scaling(list(entries.values()))


def _entry(key: tuple[str, str | None, int], rows: list[ResultRow],
           busbw: Mapping[str, float]) -> BaselineEntry:
    bench, sku, nodes = key
    metrics: dict[str, list[float]] = defaultdict(list)
    values: dict[str, float] = {}
    refused: dict[str, str] = {}
    scored = defs.launch_order(r for r in rows if not r.resumed)
    for r in scored:
        if r.converged and r.minutes is not None:
            metrics["time_to_train"].append(float(r.minutes))
        if r.run_id and r.run_id in busbw:
            metrics["allreduce_busbw"].append(float(busbw[r.run_id]))
    for r in defs.launch_order(rows):
        kept = kept_step_times(summary_of(r))
        if kept:
            metrics["step_time"].append(statistics.median(kept))
    systems = sorted({"/".join(p for p in (r.round, r.submitter, r.system) if p) for r in scored})
    if len(systems) > 1:
        refused["time_to_train"] = (f"not defined: {len(systems)} systems at this scale "
                                    f"({', '.join(systems)}), an MLPerf score is one system's")
    elif scored:
        try:
            score = defs.time_to_train(scored, bench).value_minutes
        except ConfigError as exc:
            refused["time_to_train"] = f"not defined: {exc.message}"
        else:
            if score is not None:
                values["time_to_train"] = score
    every = sorted({"/".join(p for p in (r.round, r.submitter, r.system) if p) for r in rows})
    stats = defs.step_time(rows)
    if len(every) > 1 and stats is not None:  # pooled, it would belong to neither
        refused["step_time"] = (f"not defined: {len(every)} systems at this scale "
                                f"({', '.join(every)}), a step time is one system's")
    elif stats is not None:
        values["step_time"] = stats.median
    if metrics.get("allreduce_busbw"):
        values["allreduce_busbw"] = statistics.fmean(metrics["allreduce_busbw"])
    gpus = Counter(r.gpus for r in rows if r.gpus).most_common(1)
    gbs = Counter(r.global_batch_size for r in rows if r.global_batch_size).most_common(1)
    return BaselineEntry(benchmark=bench, sku=sku, nodes=nodes, gpus=gpus[0][0] if gpus else None,
                         global_batch_size=gbs[0][0] if gbs else None, metrics=dict(metrics),
                         values=values, refused=refused,
                         runs=[r.run_id or f"result-{r.id}" for r in rows])


def scale_of(e: BaselineEntry) -> defs.Scale:
    """What the scaling figures read of a baseline's scale."""
    return defs.Scale(label=e.label, workers=e.gpus or e.nodes, nodes=e.nodes,
                      global_batch_size=e.global_batch_size, median_step_s=e.values.get("step_time"))


def _with_weak_scaling(entries: list[BaselineEntry]) -> list[BaselineEntry]:
    """E_weak of each scale against the fewest-nodes scale of its benchmark x SKU with step
    times (results.definitions.weak_scaling on the median steps; per run, the base's median /
    the run's median), where it is defined; else the reason in `refused`."""
    series: dict[tuple[str, str | None], list[BaselineEntry]] = defaultdict(list)
    for e in entries:
        if e.values.get("step_time") or "step_time" in e.refused:
            series[(e.benchmark, e.sku)].append(e)
    out: dict[tuple[str, str | None, int], BaselineEntry] = {
        (e.benchmark, e.sku, e.nodes): e for e in entries}
    for (bench, sku), scales in series.items():
        base = min(scales, key=lambda e: e.nodes)
        if "step_time" in base.refused:  # the base has no one step time: nothing to scale from
            for e in scales:
                if e.nodes != base.nodes:
                    out[(e.benchmark, e.sku, e.nodes)] = e.model_copy(update={
                        "base_nodes": base.nodes, "refused": {**e.refused, "weak_scaling_efficiency":
                            f"not defined against {formats.scale(base.gpus, base.nodes)}: its step "
                            f"time is {base.refused['step_time'].removeprefix('not defined: ')}"}})
            continue
        scales = [e for e in scales if "step_time" not in e.refused]
        for e in scales:
            update: dict[str, Any] = {"base_nodes": base.nodes}
            if e.nodes != base.nodes:
                found = defs.weak_scaling(bench, sku, scale_of(base), scale_of(e))
                if isinstance(found, defs.Refused):
                    update["refused"] = {**e.refused, "weak_scaling_efficiency":
                                         f"not defined against {formats.scale(base.gpus, base.nodes)}: "
                                         f"{found.reason}"}
                else:
                    base_step = found.step_base_s
                    update["metrics"] = {**e.metrics, "weak_scaling_efficiency":
                                         [base_step / s for s in e.metrics.get("step_time", []) if s > 0]}
                    update["values"] = {**e.values, "weak_scaling_efficiency": found.efficiency}
            out[(e.benchmark, e.sku, e.nodes)] = e.model_copy(update=update)
    return [out[k] for k in sorted(out, key=_sort)]


def _gate_busbw(store: Store, run_id: str) -> float | None:
    """The last all-reduce bus bandwidth the health gate measured for this run."""
    values = [e.data.busbw_gbps for e in store.list_events(run_id=run_id)
              if isinstance(e.data, GateData) and e.data.busbw_gbps is not None]
    return values[-1] if values else None


# -- the store ------------------------------------------------------------------------------


def set_baseline(store: Store, name: str, entries: Sequence[BaselineEntry],
                 source: Mapping[str, Any] | None = None) -> Baseline:
    """Create or replace baseline `name` (one transaction). ConfigError when it has no samples."""
    check_name(name)
    if not any(e.metrics for e in entries):
        raise ConfigError(f"baseline '{name}' would be empty: no stored results match",
                          hint="pick a sweep that produced results (azbench status)")
    now = utcnow()
    row = store.save_baseline(BaselineRow(
        name=name, source_json=json.dumps(dict(source or {}), sort_keys=True, default=str),
        data_json=json.dumps([e.model_dump(mode="json") for e in entries]),
        created_at=now, updated_at=now))
    return _baseline(row)


def get_baseline(store: Store, name: str) -> Baseline:
    row = store.get_baseline(name)
    if row is None:
        raise NotFoundError(f"no baseline named '{name}'", hint="see `azbench baseline list`")
    return _baseline(row)


def find_baseline(store: Store, name: str) -> Baseline | None:
    row = store.get_baseline(name)
    return _baseline(row) if row is not None else None


def list_baselines(store: Store) -> list[Baseline]:
    return [_baseline(r) for r in store.list_baselines()]


def delete_baseline(store: Store, name: str) -> None:
    if not store.delete_baseline(name):
        raise NotFoundError(f"no baseline named '{name}'", hint="see `azbench baseline list`")


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(f"baseline name '{name}' must be letters, digits, '.', '_' or '-' "
                          "(at most 128, starting with a letter or digit)")
    return name


def _baseline(row: BaselineRow) -> Baseline:
    return Baseline(name=row.name, source=json.loads(row.source_json),
                    entries=[BaselineEntry.model_validate(e) for e in json.loads(row.data_json)],
                    created_at=row.created_at, updated_at=row.updated_at)


# -- comparing -----------------------------------------------------------------------------


def compare(baseline: Baseline, current: Sequence[BaselineEntry],
            tolerances: Tolerances | None = None) -> Comparison:
    """Every metric of every scale in either set, with its verdict; a metric not defined at a
    scale on either side has no delta and a note instead."""
    tol = tolerances or Tolerances()
    base = {(e.benchmark, e.sku, e.nodes): e for e in baseline.entries}
    cur = {(e.benchmark, e.sku, e.nodes): e for e in current}
    deltas, notes = [], []
    for key in sorted(set(base) | set(cur), key=_sort):
        b, c = base.get(key), cur.get(key)
        for metric in METRICS:
            why = (c.refused.get(metric) if c else None) or (b.refused.get(metric) if b else None)
            if why:
                either = c or b
                notes.append(f"{either.label if either else key[0]} {metric}: {why}")
                continue
            if not ((b and (b.metrics.get(metric) or metric in b.values))
                    or (c and (c.metrics.get(metric) or metric in c.values))):
                continue
            delta = metric_delta(key, metric, b, c, getattr(tol, metric))
            deltas.append(delta.model_copy(update={"gpus": (c and c.gpus) or (b and b.gpus) or None}))
    return Comparison(baseline=baseline.name, deltas=deltas, notes=list(dict.fromkeys(notes)))


def metric_delta(key: tuple[str, str | None, int], metric: str, base: BaselineEntry | None,
                 cur: BaselineEntry | None, tol: Tolerance) -> MetricDelta:
    """Pure: the verdict for one metric, on its figures (BaselineEntry.value: the MLPerf score
    for time to train), sure by Welch's t-test over the per-run samples. Beyond tolerance but
    under min_confidence is noise."""
    better = METRICS[metric][1]
    bs = (base.metrics.get(metric) if base else None) or []
    cs = (cur.metrics.get(metric) if cur else None) or []
    mb, mc = (base.value(metric) if base else None), (cur.value(metric) if cur else None)
    common = dict(benchmark=key[0], sku=key[1], nodes=key[2], metric=metric, better=better,
                  n_baseline=len(bs), n_current=len(cs), max_change=tol.max_change,
                  baseline_mean=mb, current_mean=mc)
    if mb is None or mc is None:
        return MetricDelta(verdict="missing" if mb is not None else "new", **common)
    change = (mc - mb) / abs(mb) if mb else (0.0 if mc == mb else math.copysign(math.inf, mc - mb))
    worse = change if better == "lower" else -change
    p = welch_p_value(bs, cs)
    confidence = None if p is None else 1.0 - p
    sure = confidence is None or confidence >= tol.min_confidence
    verdict: Verdict = "within"
    if abs(worse) > tol.max_change:
        verdict = ("regression" if worse > 0 else "improvement") if sure else "noise"
    return MetricDelta(change=change, p_value=p, confidence=confidence, verdict=verdict, **common)


def welch_p_value(a: Sequence[float], b: Sequence[float], *, use_scipy: bool = True) -> float | None:
    """Two-sided p-value of Welch's unequal-variance t-test; None when a side has < 2 samples."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(a) - statistics.fmean(b)
    if va + vb == 0:  # no spread at all: identical means are certain, different ones too
        return 1.0 if diff == 0 else 0.0
    if use_scipy:
        try:
            from scipy import stats
        except ImportError:
            pass
        else:
            with warnings.catch_warnings():  # near-identical repeats: the answer is still right
                warnings.simplefilter("ignore", RuntimeWarning)
                return float(stats.ttest_ind(list(a), list(b), equal_var=False).pvalue)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return student_t_two_sided_p(t, df)


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    return min(1.0, max(0.0, _betainc(df / 2, 0.5, df / (df + t * t))))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes, 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float, iterations: int = 300, eps: float = 1e-15) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, iterations + 1):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _num(value: float | None) -> str:
    return formats.sig(value)


def _sort(key: tuple[str, str | None, int]) -> tuple[str, str, int]:
    return key[0], key[1] or "", key[2]
