"""The history chart of the report site: one metric at one scale over time, against the active
baseline's tolerance band so that noise does not read as a trend; scores as a line, runs'
partial means as open markers, never as scores."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from orchestrator import formats
from orchestrator.report.chart_base import BAD, BAND, Figure, GOOD, layout, side_legend
from orchestrator.report.history import HistoryPoint, HistorySeries


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

    traces = _tolerance_band(series, xs) if relative and xs else []
    traces += _point_traces(shown, y, unit, relative)
    better = "lower" if series.better == "lower" else "higher"
    return {"data": traces, "layout": layout(
        f"{series.label}<br>{unit}, {better} is better", "when", unit, xaxis=_time_axis(shown),
        yaxis=_value_axis(series, shown, y, relative), height=400, **side_legend())}


def _point_traces(shown: Sequence[HistoryPoint], y: Callable[[HistoryPoint], float], unit: str,
                  relative: bool) -> list[dict[str, Any]]:
    """Scores as a line, runs' partial means as open markers (never as a score), then the
    regressions and improvements marked."""
    def hover(p: HistoryPoint) -> str:
        what = f"runs' mean (partial: {p.partial})" if p.partial else unit
        return (f"{p.occasion}<br>{what}: {formats.sig(p.value)}"
                + (f" ({formats.pct(p.change, signed=True)} vs baseline, {p.verdict})"
                   if p.change is not None else f" ({p.verdict or 'no baseline'})"))

    traces: list[dict[str, Any]] = []
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
    return traces


def _value_axis(series: HistorySeries, shown: Sequence[HistoryPoint],
                y: Callable[[HistoryPoint], float], relative: bool) -> dict[str, Any]:
    """Change in percent on an axis that always holds the whole tolerance band, else the values
    on an axis from zero."""
    if relative:
        band = series.max_change * 100
        ys = [y(p) for p in shown] + [-band, band]
        lo, hi = min(ys), max(ys)
        pad = (hi - lo) * 0.12 or 1.0
        return {"title": {"text": "change vs baseline mean"},
                "range": [lo - pad, hi + pad], "ticksuffix": "%", "zeroline": False}
    top = max((p.value for p in shown), default=1.0) or 1.0
    return {"title": {"text": series.metric_label}, "range": [0, top * 1.12], "rangemode": "tozero"}


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
