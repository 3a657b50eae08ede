"""What every chart of the report site shares: the `Figure` type (plotly's {"data", "layout"}
shape), the palette (one colour and marker per system on every page), the layout and legend,
the count and value axes (ticks at the counts themselves, 1-2-5 log ticks), horizontal bars and
the small colour and thinning helpers. report.figures re-exports all of it; the chart families
(figures, run_figures, history_figures, forecast_figures, fabric_figures, goodput_charts) build
on it. The rules it keeps are report.figures' docstring's."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from orchestrator.hardware.catalog import bare_name
from orchestrator.report.gpus import match_gpu

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


def _system_style(label: str) -> dict[str, Any]:
    return {"legendgroup": label, "meta": label, "showlegend": False}


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
