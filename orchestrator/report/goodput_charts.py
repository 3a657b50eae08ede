"""The goodput page's charts (plotly specs, as report.figures builds them): a run's timeline and
a stacked bar per cluster. Each category has one colour on every chart (COLOURS).

Timeline: one lane per attempt (attempt 1 on top), each category a horizontal bar trace whose
bars start at their span's offset from the run's first attempt (`base`), so a lane reads left to
right as the attempt went; each failure is a red cross at the moment its work stopped, labelled
with its class. Clusters: one horizontal bar per cluster, its categories stacked as shares of
its wall time, hover giving seconds, node-hours and dollars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.goodput.model import CLUSTER_CATEGORIES, ClusterGoodput, RunGoodput
from orchestrator.report.figures import BAD, Figure, layout, side_legend

# Training green, the work of a run in blues, waiting in greys, what failures cost in reds and
# oranges; idle a pale grey; what no source covers hatched-looking dark grey.
COLOURS: dict[str, str] = {
    "training": "#1e8449", "evaluation": "#5dade2", "checkpoint": "#2471a3", "init": "#a9cce3",
    "queued": "#b2babb", "health_gate": "#af7ac5", "teardown": "#7f8c8d", "run_teardown": "#95a5a6",
    "lost_work": "#c0392b", "restart_overhead": "#e67e22", "provisioning": "#f4d03f",
    "staging": "#d4ac0d", "resize_replace": "#a04000", "idle": "#e5e8e8", "unattributed": "#34495e",
}
LANE_PX = 46
LEGEND_ROW_PX = 28  # one legend entry: the chart is at least tall enough for its legend


def _height(lanes: int, entries: int) -> int:
    return max(140 + LANE_PX * lanes, 100 + LEGEND_ROW_PX * entries)


def label(category: str) -> str:
    return category.replace("_", " ")


def timeline(g: RunGoodput) -> Figure | None:
    """The run's attempts as lanes of coloured spans, failures marked with their class."""
    if g.started_at is None or not g.attempts:
        return None
    t0 = g.started_at
    lanes = [f"attempt {a.attempt}" for a in g.attempts]
    traces: list[dict[str, Any]] = []
    for cat in (c for c in CLUSTER_CATEGORIES if c in g.categories):
        spans = [(f"attempt {a.attempt}", s) for a in g.attempts for s in a.spans if s.category == cat]
        if not spans:
            continue
        traces.append({
            "type": "bar", "orientation": "h", "name": label(cat), "legendgroup": cat,
            "y": [lane for lane, _ in spans], "x": [round(s.seconds, 3) for _, s in spans],
            "base": [round((s.start - t0).total_seconds(), 3) for _, s in spans],
            "marker": {"color": COLOURS.get(cat, "#999999")},
            "customdata": [[f"{s.start:%H:%M:%S}", f"{s.end:%H:%M:%S}", s.cause or ""] for _, s in spans],
            "hovertemplate": (f"{label(cat)}: %{{x:.1f}} s (%{{customdata[0]}} to %{{customdata[1]}} UTC)"
                              "%{customdata[2]}<extra>%{y}</extra>")})
    failures = [(f"attempt {a.attempt}", a.failure) for a in g.attempts if a.failure is not None]
    if failures:
        traces.append({
            "type": "scatter", "mode": "markers+text", "name": "failure",
            "y": [lane for lane, _ in failures],
            "x": [round((f.at - t0).total_seconds(), 3) if f.at else 0 for _, f in failures],
            "text": [f.failure_class for _, f in failures], "textposition": "top center",
            "marker": {"symbol": "x", "size": 12, "color": BAD, "line": {"width": 2, "color": BAD}},
            "hovertext": [f"{f.failure_class}: {f.evidence}"[:200] for _, f in failures],
            "hoverinfo": "text"})
    for t in traces:  # a failure class beside the spans it caused, in their hover
        if t["type"] == "bar":
            t["customdata"] = [[a, b, f" (caused by {c})" if c else ""] for a, b, c in t["customdata"]]
    fig_layout = layout(f"run {g.run_id}: {g.goodput:.1%} goodput of {g.wall_s:,.0f} s",
                        "seconds since the first attempt began", "",
                        barmode="overlay", height=_height(len(lanes), len(traces)), **side_legend())
    fig_layout["yaxis"] = {"categoryorder": "array", "categoryarray": lanes[::-1], "automargin": True}
    return {"data": traces, "layout": fig_layout}


def cluster_bars(clusters: Sequence[ClusterGoodput]) -> Figure | None:
    """One bar per cluster: its categories as shares of its wall time, stacked."""
    shown = [c for c in clusters if c.wall_s > 0]
    if not shown:
        return None
    names = [c.cluster for c in shown]
    traces = []
    for cat in CLUSTER_CATEGORIES:
        if not any(c.categories.get(cat, 0) > 0 for c in shown):
            continue
        traces.append({
            "type": "bar", "orientation": "h", "name": label(cat), "y": names,
            "x": [round(100 * c.categories.get(cat, 0.0) / c.wall_s, 3) for c in shown],
            "marker": {"color": COLOURS.get(cat, "#999999")},
            "customdata": [[round(c.categories.get(cat, 0.0), 1), round(c.node_hours.get(cat, 0.0), 3),
                            f"${c.cost_usd[cat]:,.2f}" if c.cost_usd else "no price"] for c in shown],
            "hovertemplate": (f"{label(cat)}: %{{x:.1f}}% (%{{customdata[0]}} s, %{{customdata[1]}} "
                              "node-h, %{customdata[2]})<extra>%{y}</extra>")})
    fig_layout = layout("Where each cluster's time went (share of its life)", "% of the cluster's wall time", "",
                        barmode="stack", height=_height(len(names), len(traces)), **side_legend())
    fig_layout["yaxis"] = {"categoryorder": "array", "categoryarray": names[::-1], "automargin": True}
    fig_layout["xaxis"]["range"] = [0, 100]
    fig_layout["legend"]["traceorder"] = "normal"  # the categories in their own order, not stacked-reversed
    fig_layout["bargap"] = 0.35
    return {"data": traces, "layout": fig_layout}
