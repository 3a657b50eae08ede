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

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from orchestrator import formats
from orchestrator.forecast.curve import CurveData
from orchestrator.forecast.points import STORED, group_order
from orchestrator.hardware.catalog import bare_name, colour_of, find
from orchestrator.report.build import GroupReport, SkuSpeedup, WeakScaling
from orchestrator.report.gpus import match_gpu
from orchestrator.report.history import HistoryPoint, HistorySeries
from orchestrator.report.labels import cut_apart
from orchestrator.results.definitions import PublishedNeighbour
from orchestrator.results.mllog import RunSummary
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.schema import ResultRow

Figure = dict[str, Any]
MAX_POINTS = 2000  # per line: a 20k-step run is thinned to this many points (every k-th step)
PROFILE_POINTS = 300  # per step-time profile on the compare page
MAX_RUN_LINES = 5  # more runs than this on one axis: a median line and a min-max band
BAD, GOOD, BAND = "#c0392b", "#1e8449", "rgba(52, 152, 219, 0.18)"
PUBLISHED = "#444444"
HALF_AXIS_PX = 380  # plot width of a half-width chart at 1,280 px (what tick thinning assumes)
FULL_AXIS_PX = 820
BAR_ROW_PX = 26
TOOLBAR_PX = 40  # plotly's toolbar (modebar, 22 px) at the top right; titles start below it
BAR_LABEL_CHARS = 60
# Kelly's 22 colours of maximum contrast without white and black (K. L. Kelly, "Twenty-two
# colors of maximum contrast", Color Engineering 3(6), 1965), strongest first.
KELLY = ("#0067a5", "#f38400", "#008856", "#be0032", "#875692", "#882d17", "#e68fac", "#8db600",
         "#604e97", "#f6a600", "#b3446c", "#654522", "#e25822", "#2b3d26", "#a1caf1", "#848482",
         "#f99379", "#c2b280", "#dcd300", "#f3c300")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x")


class Palette:
    """One colour (and marker symbol) per system label, the same on every page of a site: the
    labels in sorted order take KELLY's colours; past 20 the colours repeat with the next
    marker symbol, so no two systems look alike."""

    def __init__(self, labels: Iterable[str]) -> None:
        ordered = sorted(set(labels))
        self._index = {label: i for i, label in enumerate(ordered)}

    def colour(self, label: str) -> str:
        return KELLY[self._index.get(label, 0) % len(KELLY)]

    def symbol(self, label: str) -> str:
        return SYMBOLS[(self._index.get(label, 0) // len(KELLY)) % len(SYMBOLS)]


def layout(title: str, xtitle: str, ytitle: str, **extra: Any) -> dict[str, Any]:
    """A chart's layout: the title (lines split by <br>) in the top margin below plotly's
    toolbar, never under it; `extra` keys replace (axes: extend) the defaults."""
    lines = title.count("<br>") + 1
    out: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left",
                  "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TOOLBAR_PX},
                  "automargin": True},
        "height": 380, "margin": {"l": 60, "r": 20, "t": TOOLBAR_PX + 18 * lines + 10, "b": 50},
        "hovermode": "closest",
        "xaxis": {"title": {"text": xtitle}, "automargin": True},
        "yaxis": {"title": {"text": ytitle}, "automargin": True},
        "showlegend": False, "dragmode": "zoom",
    }
    for key, value in extra.items():
        if key in ("xaxis", "yaxis") and isinstance(value, dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def side_legend() -> dict[str, Any]:
    """A legend right of the plot, outside it (plotly widens the right margin to fit it)."""
    return {"showlegend": True,
            "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                       "font": {"size": 11}, "bgcolor": "rgba(255,255,255,0)"}}


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


# -- the forecast (orchestrator.forecast.curve) ---------------------------------------------------


def forecast(curve: CurveData, palette: Palette) -> Figure:
    """One benchmark on one GPU: the fitted time-to-train against GPU count (solid over the
    measured counts, dotted past them) with its 80% interval as a band, drawn first so the points
    sit on top: the published ones as open diamonds, one trace per round (the newest darkest),
    the stored ones as stars in their system's colour (`meta`: the systems key hides them)."""
    row = find(curve.gpu)
    colour = (colour_of(row.label) if row else None) or KELLY[0]
    basis, per_node = curve.basis, curve.gpus_per_node
    xs = [s.gpus for s in curve.samples]
    hover = [f"{s.gpus:,.0f} GPUs ({s.gpus / per_node:,.0f} nodes): {s.minutes:.2f} min "
             f"[{s.low:.2f}-{s.high:.2f}]" + (f", {s.extrapolation:.1f}x past the data" if s.extrapolation > 1
                                               else "") for s in curve.samples]
    level = "yours" if basis.level == STORED else basis.level
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "x": xs, "y": [s.low for s in curve.samples],
         "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip", "name": "80% low"},
        {"type": "scatter", "mode": "lines", "x": xs, "y": [s.high for s in curve.samples],
         "fill": "tonexty", "fillcolor": _rgba(colour, 0.18), "line": {"width": 0},
         "name": "80% interval", "hoverinfo": "skip", "legendrank": 3}]
    inside = [i for i, s in enumerate(curve.samples) if basis.low_gpus <= s.gpus <= basis.high_gpus]
    outside = _outside(curve, inside)
    traces.append({"type": "scatter", "mode": "lines", "name": f"fit (level {level})",
                   "x": [xs[i] for i in inside], "y": [curve.samples[i].minutes for i in inside],
                   "text": [hover[i] for i in inside], "hoverinfo": "text", "legendrank": 1,
                   "line": {"color": colour, "width": 2}})
    traces.append({"type": "scatter", "mode": "lines", "name": "past the data",
                   "x": [xs[i] if i is not None else None for i in outside],
                   "y": [curve.samples[i].minutes if i is not None else None for i in outside],
                   "text": [hover[i] if i is not None else "" for i in outside], "hoverinfo": "text",
                   "legendrank": 2, "line": {"color": colour, "width": 2, "dash": "dot"}})
    published = [p for p in basis.points if p.source == "published"]
    rounds = sorted({p.group for p in published}, key=group_order)
    for k, rnd in enumerate(reversed(rounds)):  # the newest round first in the legend, darkest
        mine = [p for p in published if p.group == rnd]
        traces.append({"type": "scatter", "mode": "markers", "name": f"published {rnd}",
                       "x": [p.gpus for p in mine], "y": [p.minutes for p in mine],
                       "text": [f"{p.label}<br>{p.gpus:,} GPUs: {p.minutes:.2f} min" for p in mine],
                       "hoverinfo": "text", "legendrank": 10 + k,
                       "marker": {"symbol": "diamond-open", "size": 10, "line": {"width": 2},
                                  "color": _shade(PUBLISHED, k, len(rounds) + 1)}})
    stored: dict[str, list[Any]] = defaultdict(list)
    for p in basis.points:
        if p.source == "stored":
            stored[stored_system(p.label)].append(p)
    for k, (label, mine) in enumerate(sorted(stored.items())):
        traces.append({"type": "scatter", "mode": "markers", "name": "stored (yours)",
                       "legendgroup": "stored", "showlegend": k == 0, "meta": label, "legendrank": 100,
                       "x": [p.gpus for p in mine], "y": [p.minutes for p in mine],
                       "text": [f"{p.label}<br>{p.gpus:,} GPUs: {p.minutes:.2f} min"
                                + (f"<br>{p.note}" if p.note else "") for p in mine],
                       "hoverinfo": "text",
                       "marker": {"symbol": "star", "size": 14, "color": palette.colour(label),
                                  "line": {"width": 1, "color": "#222222"}}})
    ys = [v for s in curve.samples for v in (s.low, s.high)] + [p.minutes for p in basis.points]
    reach = [round(curve.min_gpus), round(curve.max_gpus)]
    lay = layout(f"{curve.benchmark} on {curve.gpu.upper()}: forecast time-to-train",
                 f"GPUs ({per_node} per node)", "minutes",
                 xaxis=count_axis(basis.measured_gpus, f"GPUs ({per_node} per node)", xs, extra=reach),
                 yaxis=value_axis(ys, "minutes (MLPerf score)"), **side_legend())
    lay["legend"]["traceorder"] = "normal"  # a band (fill: tonexty) would reverse it
    return {"data": traces, "layout": lay}


def stored_system(label: str) -> str:
    """The system label (as the report's GroupReport.label) of a stored point's label."""
    return label.removeprefix("stored: ")


def _outside(curve: CurveData, inside: Sequence[int]) -> list[int | None]:
    """Sample indexes of the dotted line: below the measured counts up to the first inside one,
    a break (None), then from the last inside one on."""
    if not inside:
        return list(range(len(curve.samples)))
    below = list(range(0, inside[0] + 1))
    above = list(range(inside[-1], len(curve.samples)))
    return below + [None] + above


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


# -- a system's runs -----------------------------------------------------------------------------


def step_axis(summary: RunSummary) -> tuple[list[float], list[float], str]:
    """(x, seconds, x title) of one run's step times, x in steps. NVIDIA's v5.0 NeMo logs give
    `metadata.step` as a sample count (1152, 2304, ...): when the logged steps advance by the
    global batch size, they are divided by it. Per-block figures are plotted per block."""
    steps = summary.step_times
    xs = [float(s.step) for s in steps]
    ts = [float(s.seconds) for s in steps]
    source = summary.step_time_source
    if source in ("tracked_block_avg", "block_derived", "block"):
        return [float(i + 1) for i in range(len(ts))], ts, "block"
    if source == "tracked_throughput":
        return [float(i + 1) for i in range(len(ts))], ts, "logged window"
    gbs = summary.global_batch_size
    gaps = [b - a for a, b in zip(xs, xs[1:]) if b > a]
    if isinstance(gbs, int) and gbs > 1 and gaps and statistics.median(gaps) == gbs:
        return [x / gbs for x in xs], ts, "step"
    return xs, ts, "step"


def step_series(label: str, rows: Sequence[ResultRow], names: Sequence[str] | None = None,
                colour: str = KELLY[0]) -> Figure | None:
    """Step seconds against steps, one line per run (more than MAX_RUN_LINES runs: the median
    across runs at each step and the min-max band); y clipped at 1.5 x p99 of the kept steps
    (first steps and post-eval steps can be 10x steady state), zoom out to see them."""
    runs = [(names[k] if names else f"run {k}", step_axis(summary_of(row)))
            for k, row in enumerate(rows)]
    runs = [(n, ax) for n, ax in runs if len(ax[0]) >= 2]
    if not runs:
        return None
    kept = sorted(t for row in rows for t in kept_step_times(summary_of(row)))
    unit = runs[0][1][2]
    traces = (_band(runs, colour) if len(runs) > MAX_RUN_LINES else
              [{"type": "scatter", "mode": "lines", "name": name, "x": _thin(x), "y": _thin(y),
                "line": {"width": 1, "color": _shade(colour, k, len(runs))}}
               for k, (name, (x, y, _)) in enumerate(runs)])
    lay = layout(f"{label}: step time over the run", unit, "seconds", **side_legend())
    if kept:
        lay["yaxis"]["range"] = [0, kept[int(0.99 * (len(kept) - 1))] * 1.5]
    return {"data": traces, "layout": lay}


def step_profile(rows: Sequence[ResultRow]) -> tuple[list[float], list[float], str]:
    """The median step time across runs at each step (x in steps), thinned to PROFILE_POINTS:
    what the compare page overlays for two systems."""
    at: dict[float, list[float]] = defaultdict(list)
    unit = "step"
    for row in rows:
        xs, ts, unit = step_axis(summary_of(row))
        for x, t in zip(xs, ts):
            at[x].append(t)
    xs = sorted(at)
    every = max(1, len(xs) // PROFILE_POINTS)
    xs = xs[::every]
    return xs, [round(statistics.median(at[x]), 6) for x in xs], unit


def step_histogram(label: str, rows: Sequence[ResultRow], colour: str = KELLY[0]) -> Figure | None:
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
                      "name": "steps", "marker": {"color": colour},
                      "hovertemplate": "%{x:.4f} s: %{y} steps<extra></extra>"}],
            "layout": layout(f"{label}: step-time distribution (median {statistics.median(kept):.4f} s)",
                             "seconds per step", "steps")}


def accuracy(label: str, rows: Sequence[ResultRow], colour: str = KELLY[0]) -> Figure | None:
    """Eval accuracy against samples (or epochs), one line per run in shades of the system's
    colour, and the target (dashed) when the log states it."""
    runs = []
    for k, row in enumerate(rows):
        s = summary_of(row)
        points = [(p.progress, p.value) for p in s.eval_points if p.progress is not None and p.value is not None]
        if points:
            runs.append((k, points, s))
    if not runs:
        return None
    key = runs[0][2].progress_key
    unit = "samples" if key == "samples_count" else f"{key or 'progress'} (as logged)"
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "name": f"runs ({len(runs)})",
         "legendgroup": "runs", "showlegend": i == 0, "x": [p for p, _ in pts],
         "y": [v for _, v in pts], "line": {"width": 1, "color": _shade(colour, i, len(runs))},
         "marker": {"size": 4}, "hovertemplate": f"run {k}: %{{y:.4g}} at %{{x:,}} {unit}"
                                                 "<extra></extra>"}
        for i, (k, pts, _) in enumerate(runs)]
    target = next((s.target_accuracy for _, _, s in runs if s.target_accuracy), None)
    xs = [p for _, pts, _ in runs for p, _ in pts]
    if isinstance(target, (int, float)):
        traces.append({"type": "scatter", "mode": "lines", "name": f"target {target:g}",
                       "x": [min(xs), max(xs)], "y": [target, target], "hoverinfo": "skip",
                       "line": {"dash": "dash", "color": PUBLISHED, "width": 1}})
    return {"data": traces, "layout": layout(f"{label}: eval accuracy vs {unit}", unit,
                                             "eval accuracy", **side_legend())}


# -- history -------------------------------------------------------------------------------------


def history(series: HistorySeries) -> Figure:
    """One metric at one scale over time, on an axis that does not turn noise into a trend.

    With a baseline: each occasion's change against the baseline mean in percent (compare's
    own `change`), the band its tolerance (the noise `compare` lets through) around zero, and
    an axis that always holds the whole band, so values inside it read flat. Without one: the
    values on an axis from zero. Regressions red, improvements green; every point's value and
    change are in its hover text."""
    relative = series.band is not None and bool(series.baseline_mean)
    shown = [p for p in series.points if p.change is not None] if relative else list(series.points)
    xs = [p.when.isoformat() for p in shown]
    unit = series.metric_label

    def y(p: HistoryPoint) -> float:
        return (p.change or 0.0) * 100 if relative else p.value

    band = series.max_change * 100
    traces = _tolerance_band(series, xs) if relative and xs else []

    def hover(p: HistoryPoint) -> str:
        what = f"runs' mean (partial: {p.partial})" if p.partial else unit
        return (f"{p.occasion}<br>{what}: {formats.sig(p.value)}"
                + (f" ({formats.pct(p.change, signed=True)} vs baseline, {p.verdict})"
                   if p.change is not None else f" ({p.verdict or 'no baseline'})"))

    scores = [p for p in shown if not p.partial]
    if scores:
        traces.append({"type": "scatter", "mode": "lines+markers", "name": "this scale" if relative else unit[:24],
                       "x": [p.when.isoformat() for p in scores], "y": [y(p) for p in scores],
                       "text": [hover(p) for p in scores], "hoverinfo": "text", "line": {"color": "#34495e"}})
    runs_only = [p for p in shown if p.partial]
    if runs_only:  # fewer runs than a score needs: their mean, drawn as runs, never as a score
        traces.append({"type": "scatter", "mode": "markers", "name": "runs' mean (not a score)",
                       "x": [p.when.isoformat() for p in runs_only], "y": [y(p) for p in runs_only],
                       "text": [hover(p) for p in runs_only], "hoverinfo": "text",
                       "marker": {"color": "#34495e", "symbol": "circle-open", "size": 9}})
    for verdict, colour, symbol in (("regression", BAD, "x"), ("improvement", GOOD, "triangle-up")):
        hits = [p for p in shown if p.verdict == verdict]
        if hits:
            traces.append({"type": "scatter", "mode": "markers", "name": verdict,
                           "x": [p.when.isoformat() for p in hits], "y": [y(p) for p in hits],
                           "text": [f"{p.occasion}: {verdict}" for p in hits], "hoverinfo": "text",
                           "marker": {"color": colour, "size": 14, "symbol": symbol}})
    if relative:
        ys = [y(p) for p in shown] + [-band, band]
        lo, hi = min(ys), max(ys)
        pad = (hi - lo) * 0.12 or 1.0
        yaxis: dict[str, Any] = {"title": {"text": "change vs baseline mean"},
                                 "range": [lo - pad, hi + pad], "ticksuffix": "%", "zeroline": False}
    else:
        top = max((p.value for p in shown), default=1.0) or 1.0
        yaxis = {"title": {"text": unit}, "range": [0, top * 1.12], "rangemode": "tozero"}
    better = "lower" if series.better == "lower" else "higher"
    return {"data": traces, "layout": layout(
        f"{series.label}<br>{unit}, {better} is better", "when", unit, xaxis=_time_axis(shown), yaxis=yaxis,
        height=400, **side_legend())}


def _tolerance_band(series: HistorySeries, xs: list[str]) -> list[dict[str, Any]]:
    """The tolerance band around zero and the baseline's line, across the occasions `xs`."""
    band = series.max_change * 100
    span = [min(xs), max(xs)] if len(xs) > 1 else xs * 2
    return [{"type": "scatter", "mode": "lines", "x": span, "y": [-band, -band],
             "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": span, "y": [band, band],
             "fill": "tonexty", "fillcolor": BAND, "line": {"width": 0},
             "name": f"tolerance ±{formats.pct(series.max_change, 0)}", "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": span, "y": [0, 0],
             "name": f"baseline {series.baseline or ''} mean {formats.sig(series.baseline_mean)}",
             "line": {"dash": "dot", "color": "#2e86c1", "width": 1}, "hoverinfo": "skip"}]


def _time_axis(shown: Sequence[HistoryPoint]) -> dict[str, Any]:
    """A date axis for the occasions: a day either side of one, dated ticks, at most ~5."""
    xaxis: dict[str, Any] = {"type": "date", "title": {"text": "when"}, "nticks": 6}
    whens = sorted({p.when for p in shown})
    if len(whens) == 1:  # one occasion: a day either side, not a millisecond scale
        xaxis["range"] = [(whens[0] - timedelta(days=1)).isoformat(),
                          (whens[0] + timedelta(days=1)).isoformat()]
    spread = (whens[-1] - whens[0]) if whens else timedelta(0)
    if spread <= timedelta(days=2):  # a date on every tick: plotly's "06:00 ... 06:00" is ambiguous
        xaxis.update(tickformat="%H:%M<br>%b %d", nticks=5)
    else:  # whole days, never two ticks on one day, at most about five ticks
        days = max(1, math.ceil(spread / timedelta(days=1) / 4))
        xaxis.update(tickformat="%b %d<br>%Y", dtick=days * 86_400_000)
    return xaxis


# -- axes ----------------------------------------------------------------------------------------


def count_axis(values: Sequence[int], title: str, positions: Sequence[float] = (),
               axis_px: int = HALF_AXIS_PX, extra: Sequence[int] = ()) -> dict[str, Any]:
    """GPU or node counts: one count alone is a category; otherwise a log axis when they span
    4x or more (linear below), with ticks at the counts themselves, thinned so that labels at
    `axis_px` never collide ("64" and "72" would read "6472"). `positions`: every x plotted
    (side-by-side offsets included), for the range; `extra`: counts that get a tick only where
    it collides with none of `values` (the published neighbours' counts)."""
    vals = sorted({v for v in values if v})
    axis: dict[str, Any] = {"title": {"text": title}, "automargin": True}
    if len(vals) <= 1:
        if len(set(positions)) <= 1:
            axis["type"] = "category"
            return axis
        vals = vals or [int(min(positions))]
    xs = sorted({float(p) for p in positions if p} | {float(v) for v in vals})
    log = xs[-1] / xs[0] >= 4
    f = math.log10 if log else float
    lo, hi = f(xs[0]), f(xs[-1])
    pad = (hi - lo) * 0.08 or (0.1 if log else 1.0)
    rng = [lo - pad, hi + pad]
    axis.update(type="log" if log else "linear", range=rng, tickvals=[], ticktext=[])
    per_unit = axis_px / (rng[1] - rng[0])

    def clear(v: float, kept: Sequence[float]) -> bool:
        return all(abs(f(v) - f(k)) * per_unit >= (len(f"{v:,.0f}") + len(f"{k:,.0f}")) * 3.8 + 12
                   for k in kept)

    ticks: list[float] = []
    for v in vals:
        if not ticks or clear(v, ticks[-1:]):
            ticks.append(v)
    for v in sorted({e for e in extra if e} - set(vals)):
        if xs[0] <= v <= xs[-1] and clear(v, ticks):
            ticks.append(v)
    ticks.sort()
    axis.update(tickvals=ticks, ticktext=[f"{v:,.0f}" for v in ticks])
    return axis


def value_axis(values: Sequence[float], title: str) -> dict[str, Any]:
    """Minutes, dollars, speedups: a log axis with plain 1-2-5 ticks when the values span 8x or
    more, else plotly's own linear ticks."""
    vals = [v for v in values if v and v > 0]
    axis: dict[str, Any] = {"title": {"text": title}, "automargin": True}
    if not vals or max(vals) / min(vals) < 8:
        axis["rangemode"] = "tozero"
        return axis
    lo, hi = math.log10(min(vals)), math.log10(max(vals))
    pad = (hi - lo) * 0.06
    ticks = log_ticks(10 ** (lo - pad), 10 ** (hi + pad))
    axis.update(type="log", range=[lo - pad, hi + pad], tickvals=ticks,
                ticktext=[f"{t:,.10g}" for t in ticks])
    return axis


def log_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """1-2-5 ticks between lo and hi; only the powers of ten (then every other one) when that
    makes more than `most`."""
    out: list[float] = []
    for step in ((1, 2, 5), (1,)):
        out = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
               for m in step if lo <= m * 10.0 ** e <= hi]
        if len(out) <= most:
            return out
    while len(out) > most:
        out = out[::2]
    return out


# -- helpers -------------------------------------------------------------------------------------


def _system_style(label: str) -> dict[str, Any]:
    return {"legendgroup": label, "meta": label, "showlegend": False}


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


def _hbar(name: str, labels: Sequence[str], values: Sequence[float | None], colour: str,
          text: Sequence[str] | None = None) -> dict[str, Any]:
    bar: dict[str, Any] = {"type": "bar", "orientation": "h", "name": name, "y": list(labels),
                           "x": list(values), "marker": {"color": colour},
                           "hovertemplate": "%{y}<br>" + name + ": %{x:,.4g}<extra></extra>"}
    if text:
        bar.update(text=list(text), textposition="auto")
    return bar


def _bar_layout(title: str, xtitle: str, rows: int, **extra: Any) -> dict[str, Any]:
    height = max(280, 110 + rows * BAR_ROW_PX * 2)  # a plot area of 150 px at least
    lay = layout(title, xtitle, "", height=height, **extra)
    lay["yaxis"].update(autorange="reversed", automargin=True, tickfont={"size": 11})
    lay["bargap"] = 0.25 if rows > 2 else 0.5
    return lay


def _band(runs: Sequence[tuple[str, tuple[list[float], list[float], str]]],
          colour: str) -> list[dict[str, Any]]:
    at: dict[float, list[float]] = defaultdict(list)
    for _, (xs, ts, _) in runs:
        for x, t in zip(xs, ts):
            at[x].append(t)
    xs = sorted(at)
    lo, mid, hi = ([min(at[x]) for x in xs], [statistics.median(at[x]) for x in xs],
                   [max(at[x]) for x in xs])
    return [{"type": "scatter", "mode": "lines", "x": _thin(xs), "y": _thin(lo),
             "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": _thin(xs), "y": _thin(hi), "fill": "tonexty",
             "fillcolor": _rgba(colour, 0.2), "line": {"width": 0},
             "name": f"min-max of {len(runs)} runs", "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": _thin(xs), "y": _thin(mid),
             "name": "median across runs", "line": {"width": 1.5, "color": colour}}]


def _thin(values: Sequence[float]) -> list[float]:
    every = max(1, len(values) // MAX_POINTS)
    return list(values[::every])


def _shade(colour: str, k: int, n: int) -> str:
    """The k-th of n shades of `colour`, from itself to a light tint."""
    if n <= 1:
        return colour
    mix = 0.6 * k / (n - 1)
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * mix):02x}" for c in (r, g, b))


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def _gpu(sku: str | None) -> str:
    """A catalog size as its name without Azure's prefix, an accelerator as its GPU type."""
    if sku and bare_name(sku) != sku:
        return bare_name(sku)
    return match_gpu(sku).label
