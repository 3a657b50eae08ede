"""The forecast chart of a benchmark page: `azbench plan`'s fitted time-to-train on one GPU
(forecast.curve), its 80% band, and the published and stored points it stands on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from orchestrator.forecast.curve import CurveData
from orchestrator.forecast.points import STORED, Point, group_order
from orchestrator.hardware.catalog import colour_of, find
from orchestrator.report.chart_base import (
    Figure, KELLY, PUBLISHED, Palette, count_axis, layout, side_legend, value_axis, _rgba,
    _shade)


def forecast(curve: CurveData, palette: Palette) -> Figure:
    """One benchmark on one GPU: the fitted time-to-train against GPU count (solid over the
    measured counts, dotted past them) with its 80% interval as a band, drawn first so the points
    sit on top: the published ones as open diamonds, one trace per round (the newest darkest),
    the stored ones as stars in their system's colour (`meta`: the systems key hides them)."""
    row = find(curve.gpu)
    colour = (colour_of(row.label) if row else None) or KELLY[0]
    basis, per_node = curve.basis, curve.gpus_per_node
    xs = [s.gpus for s in curve.samples]
    traces = _fit_traces(curve, colour) + _published_traces(basis.points) + \
        _stored_traces(basis.points, palette)
    ys = [v for s in curve.samples for v in (s.low, s.high)] + [p.minutes for p in basis.points]
    reach = [round(curve.min_gpus), round(curve.max_gpus)]
    lay = layout(f"{curve.benchmark} on {curve.gpu.upper()}: forecast time-to-train",
                 f"GPUs ({per_node} per node)", "minutes",
                 xaxis=count_axis(basis.measured_gpus, f"GPUs ({per_node} per node)", xs, extra=reach),
                 yaxis=value_axis(ys, "minutes (MLPerf score)"), **side_legend())
    lay["legend"]["traceorder"] = "normal"  # a band (fill: tonexty) would reverse it
    return {"data": traces, "layout": lay}


def _fit_traces(curve: CurveData, colour: str) -> list[dict[str, Any]]:
    """The 80% band, then the fit: solid over the measured counts, dotted past them."""
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
    return traces


def _published_traces(points: Sequence[Point]) -> list[dict[str, Any]]:
    """The published points as open diamonds, one trace per round, the newest first and darkest."""
    published = [p for p in points if p.source == "published"]
    rounds = sorted({p.group for p in published}, key=group_order)
    traces = []
    for k, rnd in enumerate(reversed(rounds)):
        mine = [p for p in published if p.group == rnd]
        traces.append({"type": "scatter", "mode": "markers", "name": f"published {rnd}",
                       "x": [p.gpus for p in mine], "y": [p.minutes for p in mine],
                       "text": [f"{p.label}<br>{p.gpus:,} GPUs: {p.minutes:.2f} min" for p in mine],
                       "hoverinfo": "text", "legendrank": 10 + k,
                       "marker": {"symbol": "diamond-open", "size": 10, "line": {"width": 2},
                                  "color": _shade(PUBLISHED, k, len(rounds) + 1)}})
    return traces


def _stored_traces(points: Sequence[Point], palette: Palette) -> list[dict[str, Any]]:
    """The stored points as stars in their system's colour, one legend entry for all."""
    stored: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        if p.source == "stored":
            stored[stored_system(p.label)].append(p)
    return [{"type": "scatter", "mode": "markers", "name": "stored (yours)",
             "legendgroup": "stored", "showlegend": k == 0, "meta": label, "legendrank": 100,
             "x": [p.gpus for p in mine], "y": [p.minutes for p in mine],
             "text": [f"{p.label}<br>{p.gpus:,} GPUs: {p.minutes:.2f} min"
                      + (f"<br>{p.note}" if p.note else "") for p in mine],
             "hoverinfo": "text",
             "marker": {"symbol": "star", "size": 14, "color": palette.colour(label),
                        "line": {"width": 1, "color": "#222222"}}}
            for k, (label, mine) in enumerate(sorted(stored.items()))]


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
