"""Interactive chart specs for the report site: plain data that plotly.js draws in the browser.

Each function returns a `Figure` (plotly's {"data": traces, "layout": layout} shape, JSON-ready)
or None when the report has nothing to draw. No plotting library runs in Python: the site's
script hands each spec to the vendored plotly.js (templates/report/vendor/), which gives hover,
box zoom and double-click reset for free. Trace and layout keys are plotly's
(https://plotly.com/javascript/reference/).

Rules that hold at 20 systems and more: a system has one colour on every page (`Palette`, its
traces carry the system's label as `meta` so the page's systems key can hide them); charts of
systems have no plotly legend (the page's systems key is the legend), other charts keep a short
legend to the right of the plot, outside it; long category labels go on horizontal bars;
GPU-count ticks sit at the counts themselves, thinned so that no two labels collide; log axes
have 1-2-5 ticks written plainly; percentages are plotted in percent with auto ticks (no
"100%, 100%, 99%"); one axis never holds more than a handful of series (strong and weak scaling
are one chart per benchmark, more than MAX_RUN_LINES runs become a median line and a min-max
band); step times are plotted against steps, never samples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from orchestrator import formats
from orchestrator.hardware.catalog import colour_of
from orchestrator.report.build import GroupReport, SkuSpeedup, WeakScaling
from orchestrator.report.labels import cut_apart
from orchestrator.report.chart_base import (
    BAND, BAR_LABEL_CHARS, BAR_ROW_PX, BAD, FULL_AXIS_PX, GOOD, HALF_AXIS_PX, KELLY, MAX_POINTS,
    MAX_RUN_LINES, PROFILE_POINTS, PUBLISHED, SYMBOLS, TOOLBAR_PX, Figure, Palette, _bar_layout,
    _gpu, _hbar, _pct, _system_style, count_axis, layout, log_ticks, side_legend, value_axis)
from orchestrator.report.forecast_figures import forecast, stored_system
from orchestrator.report.history_figures import history
from orchestrator.report.run_figures import accuracy, step_axis, step_histogram, step_profile, step_series
from orchestrator.results.definitions import PublishedNeighbour

# The chart families live in their own modules (chart_base: what they share; run_figures,
# history_figures, forecast_figures); this one keeps the charts of a benchmark's systems and
# re-exports the rest, so `report.figures` stays the one import for every chart.
__all__ = ["BAD", "BAND", "BAR_LABEL_CHARS", "BAR_ROW_PX", "FULL_AXIS_PX", "GOOD", "HALF_AXIS_PX",
           "KELLY", "MAX_POINTS", "MAX_RUN_LINES", "PROFILE_POINTS", "PUBLISHED", "SYMBOLS",
           "TOOLBAR_PX", "Figure", "Palette", "accuracy", "bar_names", "cost", "count_axis",
           "explain", "forecast", "history", "layout", "log_ticks", "mfu", "published_marks",
           "side_legend", "sku_speedup", "step_axis", "step_histogram", "step_profile",
           "step_series", "stored_system", "strong_scaling", "time_to_train", "value_axis",
           "weak_scaling"]

# -- time to train and the published record -----------------------------------------------------


def time_to_train(bench: str, groups: Sequence[GroupReport], palette: Palette) -> Figure | None:
    """Per system: every run's minutes (dots) and its MLPerf score (a bar), against GPU count;
    the nearest published results as open diamonds. Systems at one GPU count sit side by side."""
    shown = [g for g in groups if g.workers and any(r.minutes is not None for r in g.run_lines)]
    if not shown:
        return None
    offsets = _side_by_side(shown)
    traces: list[dict[str, Any]] = []
    ys: list[float] = []
    for g in shown:
        x = (g.workers or 0) * offsets[g.label]
        runs = [(i, r.minutes) for i, r in enumerate(g.run_lines) if r.minutes is not None]
        ys += [m for _, m in runs]
        style = _system_style(g.label)
        traces.append({"type": "scatter", "mode": "markers", "name": g.label, **style,
                       "x": [x] * len(runs), "y": [m for _, m in runs],
                       "text": [f"{g.label}<br>{formats.count(g.workers)} GPUs, run {i}: {formats.fixed(m, 3)} min"
                                for i, m in runs],
                       "hoverinfo": "text",
                       "marker": {"size": 7, "opacity": 0.65, "color": palette.colour(g.label),
                                  "symbol": palette.symbol(g.label)}})
        if g.score_minutes is not None:
            ys.append(g.score_minutes)
            traces.append({"type": "scatter", "mode": "markers", "name": f"{g.label} score",
                           **style, "x": [x], "y": [g.score_minutes],
                           "text": [f"{g.label}<br>MLPerf score {g.score_minutes:.3f} min "
                                    f"(raw mean {g.score_raw_minutes or 0:.3f} x "
                                    f"{g.scaling_factor:.4f})"],
                           "hoverinfo": "text",
                           "marker": {"symbol": "line-ew-open", "size": 24,
                                      "color": palette.colour(g.label), "line": {"width": 4}}})
    marks = published_marks([g.published for g in shown])
    if marks:
        ys += marks["y"]
        traces.append(marks)
    xs = [t for tr in traces for t in tr["x"]]
    lay = layout(f"{bench}: runs (dots), MLPerf score (bar)", "GPUs", "minutes",
                 xaxis=count_axis([g.workers or 0 for g in shown], "GPUs", xs,
                                  extra=_neighbour_gpus(shown)),
                 yaxis=value_axis(ys, "minutes"))
    if marks:
        lay.update(side_legend())
    return {"data": traces, "layout": lay}


def published_marks(neighbours: Iterable[PublishedNeighbour | None]) -> dict[str, Any] | None:
    """One trace of the distinct published neighbours: open diamonds, one legend entry."""
    seen: dict[tuple[str, str, str], PublishedNeighbour] = {}
    for n in neighbours:
        if n is not None:
            seen.setdefault((n.round, n.submitter, n.system), n)
    if not seen:
        return None
    ns = sorted(seen.values(), key=lambda n: (n.gpus, n.score_minutes))
    return {"type": "scatter", "mode": "markers", "name": "nearest published",
            "x": [n.gpus for n in ns], "y": [n.score_minutes for n in ns],
            "text": [f"published: {n.config}<br>{n.score_minutes:.3f} min" for n in ns],
            "hoverinfo": "text", "showlegend": True,
            "marker": {"symbol": "diamond-open", "size": 12, "color": PUBLISHED,
                       "line": {"width": 2}}}


# -- scaling ------------------------------------------------------------------------------------


def strong_scaling(bench: str, groups: Sequence[GroupReport]) -> Figure | None:
    """One benchmark: speedup of the MLPerf score over the smallest GPU count, one line per GPU
    type (the fastest score at each count), against ideal (dashed)."""
    series: dict[str, dict[int, GroupReport]] = defaultdict(dict)
    for g in groups:
        if g.benchmark == bench and g.score_minutes and g.workers:
            best = series[g.gpu_type or "?"].get(g.workers)
            if best is None or (g.score_minutes or 0) < (best.score_minutes or 0):
                series[g.gpu_type or "?"][g.workers] = g
    traces: list[dict[str, Any]] = []
    xs: list[int] = []
    ys: list[float] = []
    for gpu, by_count in sorted(series.items()):
        if len(by_count) < 2:
            continue
        members = [by_count[n] for n in sorted(by_count)]
        base = members[0]
        x = [g.workers or 0 for g in members]
        y = [(base.score_minutes or 0) / (g.score_minutes or 1) for g in members]
        ideal = [v / x[0] for v in x]
        xs += x
        ys += y + ideal
        colour = colour_of(gpu) or KELLY[len(traces) // 2 % len(KELLY)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": gpu, "x": x, "y": y,
                       "line": {"color": colour}, "marker": {"color": colour},
                       "legendrank": len(traces) + 1,
                       "text": [g.label for g in members],
                       "hovertemplate": "%{text}<br>%{x} GPUs: %{y:.2f}x<extra></extra>"})
        traces.append({"type": "scatter", "mode": "lines", "name": "ideal", "x": x, "y": ideal,
                       "legendgroup": "ideal", "legendrank": 1000, "showlegend": not any(
                           t.get("legendgroup") == "ideal" for t in traces),
                       "line": {"dash": "dash", "width": 1, "color": colour},
                       "hoverinfo": "skip"})
    if not traces:
        return None
    return {"data": traces, "layout": layout(
        f"{bench}: strong scaling of the MLPerf score", "GPUs", "speedup over the fewest GPUs",
        xaxis=count_axis(xs, "GPUs", xs), yaxis=value_axis(ys, "speedup (x)"), **side_legend())}


def weak_scaling(bench: str, points: Sequence[WeakScaling]) -> Figure | None:
    """One benchmark: E_weak = t_base / t per GPU type (not capped), in percent, vs 100%."""
    mine = [w for w in points if w.benchmark == bench]
    if not mine:
        return None
    series: dict[str, list[WeakScaling]] = defaultdict(list)
    for w in mine:
        series[w.sku or "?"].append(w)
    traces: list[dict[str, Any]] = []
    xs: list[int] = []
    for k, (sku, members) in enumerate(sorted(series.items())):
        members = sorted(members, key=lambda w: w.nodes)
        x = [members[0].nodes_base] + [w.nodes for w in members]
        xs += x
        colour = KELLY[k % len(KELLY)]
        traces.append({"type": "scatter", "mode": "lines+markers",
                       "name": _gpu(sku), "x": x,
                       "y": [100.0] + [w.efficiency * 100 for w in members],
                       "line": {"color": colour}, "marker": {"color": colour},
                       "hovertemplate": "%{x} nodes: %{y:.2f}%<extra></extra>"})
    traces.append({"type": "scatter", "mode": "lines", "name": "ideal", "x": [min(xs), max(xs)],
                   "y": [100.0, 100.0], "line": {"dash": "dash", "color": "grey"},
                   "hoverinfo": "skip"})
    return {"data": traces, "layout": layout(
        f"{bench}: weak scaling, E_weak = t_base / t", "nodes", "efficiency",
        xaxis=count_axis(xs, "nodes", xs), yaxis={"ticksuffix": "%", "title": {"text": "efficiency"}},
        **side_legend())}


# -- bars (horizontal: long names are category labels) -------------------------------------------


def sku_speedup(pairs: Sequence[SkuSpeedup]) -> Figure | None:
    if not pairs:
        return None
    names = cut_apart([f"{s.benchmark} {formats.count(s.workers)} GPUs: {s.system_b} ({_gpu(s.sku_b)}) "
                       f"vs {s.system_a} ({_gpu(s.sku_a)})" + (" [mixed rounds]" if s.mixed_rounds else "")
                       for s in pairs], BAR_LABEL_CHARS)
    traces = [_hbar("speedup", names, [s.speedup for s in pairs], KELLY[0])]
    if any(s.speedup_per_dollar is not None for s in pairs):  # no legend entry without a bar
        traces.append(_hbar("per dollar", names, [s.speedup_per_dollar for s in pairs], KELLY[2]))
    for trace in traces:  # the whole names on hover: a cut label may hide a system
        trace["customdata"] = [s.text for s in pairs]
        trace["hovertemplate"] = "%{customdata}<br>" + trace["name"] + ": %{x:,.4g}<extra></extra>"
    return {"data": traces, "layout": _bar_layout(
        "Speedup between GPUs at equal GPU count (MLPerf score)", "x faster than the slower",
        len(names), barmode="group", xaxis={"rangemode": "tozero"}, **side_legend())}


def mfu(groups: Sequence[GroupReport]) -> Figure | None:
    """MFU at the run's precision (its name on the bar) and against dense BF16; a BF16 figure
    above 100% (an FP8/FP4 run outruns BF16's peak) is not a utilisation: its bar is the one at
    the run's own precision, and a note under the chart gives both values; the BF16 series is
    left out when it has no bar."""
    shown = [g for g in groups if g.mfu is not None or g.mfu_bf16 is not None]
    if not shown:
        return None
    names = bar_names(shown)
    over = [(n, g) for n, g in zip(names, shown) if g.mfu_bf16 is not None and g.mfu_bf16 > 1.0]
    traces = [_hbar("MFU (run precision)", names, [_pct(g.mfu) for g in shown], KELLY[0],
                    text=[g.mfu_precision or "" for g in shown])]
    bf16 = [None if (g.mfu_bf16 or 0.0) > 1.0 else _pct(g.mfu_bf16) for g in shown]
    if any(v is not None for v in bf16):  # no legend entry without a bar
        traces.append(_hbar("MFU vs dense BF16", names, bf16, KELLY[1]))
    lay = _bar_layout("Model FLOPs utilisation at the median step", "MFU (%)", len(names),
                      barmode="group", xaxis={"ticksuffix": "%", "rangemode": "tozero"}, **side_legend())
    if over:
        lines = [f"{n}: {(g.mfu_bf16 or 0.0):.1%} vs dense BF16 ({g.mfu_precision} run); drawn "
                 + (f"at its {g.mfu_precision} peak: {g.mfu:.1%}" if g.mfu is not None
                    else f"nowhere: no {g.mfu_precision} peak in the catalog") for n, g in over[:4]]
        lines += [f"and {len(over) - 4} more (the table has them)"] if len(over) > 4 else []
        lay["annotations"] = [{"text": "vs dense BF16 above 100%: not a utilisation, each drawn "
                                       "against its own precision's peak<br>" + "<br>".join(lines),
                               "xref": "paper", "yref": "paper", "x": 0, "y": 0, "yshift": -40,
                               "xanchor": "left", "yanchor": "top", "showarrow": False,
                               "align": "left", "font": {"size": 11}}]
        lay["margin"] = {**lay["margin"], "b": 60 + 16 * (len(lines) + 1)}
        lay["height"] = lay["height"] + 16 * (len(lines) + 1)
    return {"data": traces, "layout": lay}


def explain(groups: Sequence[GroupReport]) -> Figure | None:
    """The step model's parts stacked, one bar per system, beside a bar of the measured median
    step (explain.account); systems the model does not predict are left out."""
    shown = [g for g in groups if g.explain is not None and g.explain.predicted_step_s is not None]
    if not shown:
        return None
    names = bar_names(shown)
    parts = [k for k in ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_bubble", "pp_p2p", "dp_comm",
                         "optimizer", "other")
             if any((g.explain.components.get(k) or 0.0) > 0 for g in shown if g.explain)]
    traces = []
    for i, part in enumerate(parts):
        bar = _hbar(part, names, [g.explain.components.get(part) if g.explain else None for g in shown],
                    KELLY[i % len(KELLY)])
        bar.update(offsetgroup="model", legendgroup="model")
        traces.append(bar)
    measured = _hbar("measured (median)", names, [g.explain.measured_step_s if g.explain else None
                                                  for g in shown], "#222222")
    measured.update(offsetgroup="measured")
    traces.append(measured)
    return {"data": traces, "layout": _bar_layout(
        "Where the step goes: the model's parts beside the measured step", "seconds per step",
        len(names), barmode="stack", xaxis={"rangemode": "tozero"}, **side_legend())}


def cost(groups: Sequence[GroupReport]) -> Figure | None:
    shown = [g for g in groups if g.cost_all_runs_usd is not None or g.cost_per_result_usd is not None]
    if not shown:
        return None
    names = bar_names(shown)
    traces = [_hbar("per result", names, [g.cost_per_result_usd for g in shown], KELLY[0]),
              _hbar("all runs", names, [g.cost_all_runs_usd for g in shown], KELLY[1])]
    if any(g.cost_all_attempts_usd is not None for g in shown):
        traces.append(_hbar("all attempts", names, [g.cost_all_attempts_usd for g in shown],
                            KELLY[2]))
    values = [v for t in traces for v in t["x"] if v]
    return {"data": traces, "layout": _bar_layout(
        "Cost at list price (USD)", "USD", len(names), barmode="group",
        xaxis=value_axis(values, "USD"), **side_legend())}


def bar_names(groups: Sequence[GroupReport]) -> list[str]:
    """'benchmark · round/submitter/system', cut apart to fit a bar chart's category axis."""
    return cut_apart([f"{g.benchmark} · {g.label}" for g in groups], BAR_LABEL_CHARS)


# -- helpers -------------------------------------------------------------------------------------


def _side_by_side(groups: Sequence[GroupReport]) -> dict[str, float]:
    """x multipliers so that systems at one GPU count do not hide each other (±4% apart)."""
    at: dict[int, list[str]] = defaultdict(list)
    for g in groups:
        if g.label not in at[g.workers or 0]:
            at[g.workers or 0].append(g.label)
    out: dict[str, float] = {}
    for labels in at.values():
        for k, label in enumerate(sorted(labels)):
            out[label] = 1 + 0.04 * (k - (len(labels) - 1) / 2)
    return out


def _neighbour_gpus(groups: Sequence[GroupReport]) -> list[int]:
    return [g.published.gpus for g in groups if g.published is not None]


