"""Interactive chart specs for the report site: plain data that plotly.js draws in the browser.

Each function returns a `Figure` (plotly's {"data": traces, "layout": layout} shape, JSON-ready)
or None when the report has nothing to draw. No plotting library runs in Python: the site's
script hands each spec to the vendored plotly.js (templates/report/vendor/), which gives hover,
box zoom and double-click reset for free. Trace and layout keys are plotly's
(https://plotly.com/javascript/reference/).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from orchestrator.report.build import GroupReport, Report, SkuSpeedup, WeakScaling
from orchestrator.report.history import HistorySeries
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.schema import ResultRow

Figure = dict[str, Any]
MAX_POINTS = 2000  # per line: a 20k-step run is thinned to this many points (every k-th step)
BAD, GOOD, BAND = "#c0392b", "#1e8449", "rgba(52, 152, 219, 0.18)"


def layout(title: str, xtitle: str, ytitle: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        "height": 380, "margin": {"l": 60, "r": 20, "t": 60, "b": 40}, "hovermode": "closest",
        "xaxis": {"title": {"text": xtitle}, "automargin": True},
        "yaxis": {"title": {"text": ytitle}, "automargin": True},
        "legend": {"font": {"size": 10}, "orientation": "h", "y": -0.22, "yanchor": "top"},
        "dragmode": "zoom",
    }
    out.update(extra)
    return out


_BAR = {"height": 440, "margin": {"l": 60, "r": 20, "t": 80, "b": 40},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
                   "font": {"size": 10}}}  # legend above the plot: long labels fill the bottom


def time_to_train(bench: str, groups: Sequence[GroupReport]) -> Figure | None:
    """Every run's minutes against GPU count, one trace per system, the score as a bar marker."""
    traces: list[dict[str, Any]] = []
    xs: list[int] = []
    for g in groups:
        runs = [(i, r.minutes) for i, r in enumerate(g.run_lines) if r.minutes is not None]
        if not runs or not g.workers:
            continue
        xs.append(g.workers)
        traces.append({"type": "scatter", "mode": "markers", "name": g.label,
                       "x": [g.workers] * len(runs), "y": [m for _, m in runs],
                       "text": [f"{g.label}<br>run {i}: {m:.2f} min" for i, m in runs],
                       "hoverinfo": "text", "marker": {"size": 8, "opacity": 0.7}})
        if g.score_raw_minutes is not None:
            traces.append({"type": "scatter", "mode": "markers", "name": f"{g.label} score",
                           "x": [g.workers], "y": [g.score_raw_minutes], "showlegend": False,
                           "text": [f"{g.label}<br>score {g.score_raw_minutes:.2f} min"],
                           "hoverinfo": "text",
                           "marker": {"symbol": "line-ew-open", "size": 26, "color": "black",
                                      "line": {"width": 3}}})
    if not traces:
        return None
    return {"data": traces, "layout": layout(
        f"{bench}: time to train (runs, bar = score)", "GPUs (nodes when no GPU)", "minutes",
        xaxis=_count_axis(xs, "GPUs (nodes when no GPU)"))}


def step_series(label: str, rows: Sequence[ResultRow], names: Sequence[str] | None = None
                ) -> Figure | None:
    """Step seconds over the run, one line per run; y clipped at 1.5 x p99 of the kept steps
    (first steps and post-eval steps can be 10x steady state), zoom out to see them."""
    traces, kept = [], []
    for k, row in enumerate(rows):
        summary = summary_of(row)
        steps = summary.get("step_times") or []
        if len(steps) < 2:
            continue
        kept += kept_step_times(summary)
        every = max(1, len(steps) // MAX_POINTS)
        thin = steps[::every]
        traces.append({"type": "scatter", "mode": "lines",
                       "name": names[k] if names else f"run {k}",
                       "x": [s for s, _ in thin], "y": [t for _, t in thin],
                       "line": {"width": 1}})
    if not traces:
        return None
    lay = layout(f"{label}: step time over the run", "step", "seconds")
    if kept:
        kept.sort()
        lay["yaxis"]["range"] = [0, kept[int(0.99 * (len(kept) - 1))] * 1.5]
    return {"data": traces, "layout": lay}


def step_histogram(label: str, rows: Sequence[ResultRow]) -> Figure | None:
    """The kept step times binned (first and post-eval steps excluded, §10.4)."""
    kept = sorted(t for row in rows for t in kept_step_times(summary_of(row)))
    if len(kept) < 2:
        return None
    lo, hi = kept[0], kept[int(0.99 * (len(kept) - 1))]  # outliers pile into the last bin
    bins = min(60, max(10, len(kept) // 5))
    width = (hi - lo) / bins or 1e-9
    counts = [0] * bins
    for t in kept:
        counts[min(bins - 1, max(0, int((t - lo) / width)))] += 1
    centres = [lo + (i + 0.5) * width for i in range(bins)]
    return {"data": [{"type": "bar", "x": centres, "y": counts, "width": width * 0.95,
                      "name": "steps", "hovertemplate": "%{x:.4f} s: %{y} steps<extra></extra>"}],
            "layout": layout(f"{label}: step-time distribution (median {statistics.median(kept):.4f} s)",
                             "seconds per step", "steps")}


def strong_scaling(groups: Sequence[GroupReport]) -> Figure | None:
    """Speedup over the smallest scale of each benchmark x SKU, against ideal (dashed)."""
    series: dict[tuple[str, str | None], list[GroupReport]] = defaultdict(list)
    for g in groups:
        if g.score_raw_minutes and g.workers:
            series[(g.benchmark, g.sku)].append(g)
    traces: list[dict[str, Any]] = []
    xs: list[int] = []
    for (bench, sku), members in sorted(series.items(), key=lambda kv: str(kv[0])):
        members = sorted(members, key=lambda g: g.workers or 0)
        if len({g.workers for g in members}) < 2:
            continue
        base = members[0]
        x = [g.workers or 0 for g in members]
        y = [(base.score_raw_minutes or 0) / (g.score_raw_minutes or 1) for g in members]
        xs += x
        name = f"{bench} ({_short(sku)})"
        traces.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": x, "y": y,
                       "text": [g.label for g in members],
                       "hovertemplate": "%{text}<br>%{x} GPUs: %{y:.2f}x<extra></extra>"})
        traces.append({"type": "scatter", "mode": "lines", "name": f"{name} ideal", "x": x,
                       "y": [v / x[0] for v in x], "line": {"dash": "dash", "width": 1}})
    if not traces:
        return None
    return {"data": traces, "layout": layout(
        "Strong scaling: speedup over the smallest scale vs ideal (dashed)", "GPUs",
        "speedup", xaxis=_count_axis(xs, "GPUs"), yaxis={"type": "log", "title": {"text": "speedup"}})}


def weak_scaling(points: Sequence[WeakScaling]) -> Figure | None:
    """E_weak = t_base / t per series (not capped) against the ideal 1.0."""
    if not points:
        return None
    series: dict[tuple[str, str | None], list[WeakScaling]] = defaultdict(list)
    for w in points:
        series[(w.benchmark, w.sku)].append(w)
    traces: list[dict[str, Any]] = []
    xs: list[int] = []
    for (bench, sku), members in sorted(series.items(), key=lambda kv: str(kv[0])):
        members = sorted(members, key=lambda w: w.nodes)
        x = [members[0].nodes_base] + [w.nodes for w in members]
        xs += x
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{bench} ({_short(sku)})",
                       "x": x, "y": [1.0] + [w.efficiency for w in members],
                       "hovertemplate": "%{x} nodes: %{y:.1%}<extra></extra>"})
    traces.append({"type": "scatter", "mode": "lines", "name": "ideal", "x": [min(xs), max(xs)],
                   "y": [1.0, 1.0], "line": {"dash": "dash", "color": "grey"}})
    return {"data": traces, "layout": layout(
        "Weak scaling: E_weak = t_base / t (ideal 100%)", "nodes", "efficiency",
        xaxis=_count_axis(xs, "nodes"), yaxis={"tickformat": ".0%", "title": {"text": "efficiency"}})}


def sku_speedup(pairs: Sequence[SkuSpeedup]) -> Figure | None:
    if not pairs:
        return None
    names = [f"{s.benchmark} {s.workers} GPUs: {_short(s.sku_b)} vs {_short(s.sku_a)}" for s in pairs]
    return {"data": [
        {"type": "bar", "name": "speedup", "x": names, "y": [s.speedup for s in pairs]},
        {"type": "bar", "name": "per dollar", "x": names,
         "y": [s.speedup_per_dollar for s in pairs]},
    ], "layout": layout("Speedup between SKUs at equal GPU count", "", "x faster than the slower SKU",
                        barmode="group", **_BAR)}


def mfu(groups: Sequence[GroupReport]) -> Figure | None:
    shown = [g for g in groups if g.mfu is not None or g.mfu_bf16 is not None]
    if not shown:
        return None
    names = [_bar_name(g) for g in shown]
    return {"data": [
        {"type": "bar", "name": "MFU (recipe precision)", "x": names, "y": [g.mfu for g in shown],
         "text": [g.mfu_precision or "" for g in shown]},
        {"type": "bar", "name": "MFU vs dense BF16", "x": names, "y": [g.mfu_bf16 for g in shown]},
    ], "layout": layout("Model FLOPs utilisation (median step)", "", "MFU", barmode="group",
                        yaxis={"tickformat": ".0%", "title": {"text": "MFU"}}, **_BAR)}


def cost(groups: Sequence[GroupReport]) -> Figure | None:
    shown = [g for g in groups if g.cost_all_runs_usd is not None or g.cost_per_result_usd is not None]
    if not shown:
        return None
    names = [_bar_name(g) for g in shown]
    return {"data": [
        {"type": "bar", "name": "per result", "x": names, "y": [g.cost_per_result_usd for g in shown]},
        {"type": "bar", "name": "all runs", "x": names, "y": [g.cost_all_runs_usd for g in shown]},
        {"type": "bar", "name": "all attempts", "x": names,
         "y": [g.cost_all_attempts_usd for g in shown]},
    ], "layout": layout("Cost at list price (USD)", "", "USD", barmode="group", **_BAR)}


def history(series: HistorySeries) -> Figure:
    """One metric at one scale over time: the baseline's tolerance band, the values, and the
    verdicts of `compare` (regressions red, improvements green)."""
    xs = [p.when.isoformat() for p in series.points]
    traces: list[dict[str, Any]] = []
    if series.band is not None and xs:
        lo, hi = series.band
        span = [min(xs), max(xs)] if len(xs) > 1 else xs * 2
        traces.append({"type": "scatter", "mode": "lines", "x": span, "y": [lo, lo],
                       "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"})
        traces.append({"type": "scatter", "mode": "lines", "x": span, "y": [hi, hi],
                       "fill": "tonexty", "fillcolor": BAND, "line": {"width": 0},
                       "name": f"baseline {series.baseline or ''} ±{series.max_change:.0%}",
                       "hoverinfo": "skip"})
        traces.append({"type": "scatter", "mode": "lines", "x": span,
                       "y": [series.baseline_mean] * 2, "name": "baseline mean",
                       "line": {"dash": "dot", "color": "#2e86c1", "width": 1}})
    traces.append({"type": "scatter", "mode": "lines+markers", "name": series.metric_label,
                   "x": xs, "y": [p.value for p in series.points],
                   "text": [f"{p.occasion}<br>{p.value:.4g} ({p.verdict or 'no baseline'}"
                            + (f", {p.change:+.1%}" if p.change is not None else "") + ")"
                            for p in series.points],
                   "hoverinfo": "text", "line": {"color": "#34495e"}})
    for verdict, colour, symbol in (("regression", BAD, "x"), ("improvement", GOOD, "triangle-up")):
        hits = [p for p in series.points if p.verdict == verdict]
        if hits:
            traces.append({"type": "scatter", "mode": "markers", "name": verdict,
                           "x": [p.when.isoformat() for p in hits], "y": [p.value for p in hits],
                           "text": [f"{p.occasion}: {verdict}" for p in hits], "hoverinfo": "text",
                           "marker": {"color": colour, "size": 14, "symbol": symbol}})
    xaxis: dict[str, Any] = {"type": "date", "title": {"text": "when"}}
    whens = sorted({p.when for p in series.points})
    if len(whens) == 1:  # one occasion: a day either side, not a millisecond scale
        xaxis["range"] = [(whens[0] - timedelta(days=1)).isoformat(),
                          (whens[0] + timedelta(days=1)).isoformat()]
    return {"data": traces, "layout": layout(
        f"{series.label}: {series.metric_label}", "when", series.metric_label, xaxis=xaxis)}


def _count_axis(values: Sequence[int], title: str) -> dict[str, Any]:
    """A log2 axis with ticks at the counts themselves when they span 8x or more; one count
    alone is a category (a linear axis would label 10.7515k, 10.752k, ...)."""
    vals = sorted({v for v in values if v})
    axis: dict[str, Any] = {"title": {"text": title}, "automargin": True}
    if len(vals) == 1:
        axis["type"] = "category"
    elif vals and vals[-1] / vals[0] >= 8:
        axis.update(type="log", tickvals=vals, ticktext=[str(v) for v in vals])
    return axis


def _bar_name(g: GroupReport) -> str:
    """'benchmark<br>system' (the system without round and submitter): bar labels stay legible."""
    return f"{g.benchmark}<br>{g.system}"


def _short(sku: str | None) -> str:
    return (sku or "?").removeprefix("Standard_")
