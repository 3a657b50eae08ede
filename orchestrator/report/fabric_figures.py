"""The fabric charts (plotly specs, as report/figures.py's): busbw against message size, one line
per node count, and busbw at the largest size against node count; each against the SKU's
expected figure (dashed, its source in the hover and the title), markers coloured by verdict.
None when there is nothing to draw."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from orchestrator.fabric.lines import FabricLine, FabricScaling
from orchestrator.report.figures import BAD, GOOD, KELLY, Figure, count_axis, layout, side_legend, value_axis
from orchestrator.fabric.judge import Expected, human_size

WARN = "#d68910"
_VERDICT_COLOUR = {"fail": BAD, "warn": WARN, "ok": GOOD, "not checked": "#7f8c8d"}


def busbw_vs_size(label: str, collective: str, lines: Sequence[FabricLine]) -> Figure | None:
    """One cluster and collective: busbw per message size, a line per run (node count, scope)."""
    mine = [ln for ln in lines if ln.label == label and ln.collective == collective and ln.busbw]
    if not mine:
        return None
    traces: list[dict[str, Any]] = []
    sizes: list[float] = []
    values: list[float] = []
    for i, ln in enumerate(sorted(mine, key=lambda x: (x.nodes or 0, x.scope or ""))):
        points = [p for p in ln.busbw if p.busbw is not None]
        xs = [float(p.size) for p in points]
        ys = [float(p.busbw or 0.0) for p in points]
        sizes += xs
        values += ys
        colour = KELLY[i % len(KELLY)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{ln.scope or ln.nodes} ({ln.verdict})",
                       "x": xs, "y": ys, "line": {"color": colour},
                       "marker": {"color": _VERDICT_COLOUR[ln.verdict], "size": 7,
                                  "line": {"color": colour, "width": 1}},
                       "text": [human_size(int(x)) for x in xs],
                       "hovertemplate": f"{ln.scope}, {ln.ranks} ranks on {ln.hosts} hosts<br>"
                                        "%{text}: %{y:.4g} GB/s busbw<extra></extra>"})
    expected = next((ln.expected for ln in mine if ln.expected), None)
    if expected is not None and sizes:
        traces += _expected_traces(expected, [min(sizes), max(sizes)])
        values += [expected.expected_gbps, expected.warn_gbps]
    ticks = size_ticks(min(sizes), max(sizes)) if sizes and min(sizes) > 0 else []
    xaxis: dict[str, Any] = {"type": "log", "title": {"text": "message size (bytes)"}, "automargin": True}
    if ticks:
        xaxis.update(tickvals=ticks, ticktext=[human_size(int(t)) for t in ticks])
    title = f"{label}: {collective} busbw by message size" + _against(expected, mine[0].device)
    return {"data": traces, "layout": layout(title, "message size", "busbw (GB/s)", xaxis=xaxis,
                                             yaxis=value_axis(values, "busbw (GB/s)"), **side_legend())}


def busbw_vs_nodes(collective: str, series: Sequence[FabricScaling]) -> Figure | None:
    """One collective: busbw at the largest size measured against node count, a line per cluster."""
    mine = [s for s in series if s.collective == collective and s.points]
    if not mine:
        return None
    traces: list[dict[str, Any]] = []
    counts: list[int] = []
    values: list[float] = []
    for i, s in enumerate(mine):
        xs = [p.nodes for p in s.points]
        ys = [p.busbw for p in s.points]
        counts += xs
        values += ys
        colour = KELLY[i % len(KELLY)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": s.label, "x": xs, "y": ys,
                       "line": {"color": colour},
                       "marker": {"color": [_VERDICT_COLOUR[p.verdict] for p in s.points], "size": 8,
                                  "line": {"color": colour, "width": 1}},
                       "text": [f"{p.scope}, at {human_size(p.size)}: {p.verdict}" for p in s.points],
                       "hovertemplate": "%{text}<br>%{x} nodes: %{y:.4g} GB/s<extra></extra>"})
    expected = next((s.expected for s in mine if s.expected), None)
    if expected is not None and counts:
        traces += _expected_traces(expected, [min(counts), max(counts)])
        values += [expected.expected_gbps, expected.warn_gbps]
    title = f"{collective}: busbw at the largest size by node count" + _against(expected, mine[0].device)
    return {"data": traces, "layout": layout(title, "nodes", "busbw (GB/s)", xaxis=count_axis(counts, "nodes", counts),
                                             yaxis=value_axis(values, "busbw (GB/s)"), **side_legend())}


def fabric_charts(lines: Sequence[FabricLine], series: Sequence[FabricScaling]) -> dict[str, Figure]:
    """Every fabric chart of a site page, keyed by its id."""
    out: dict[str, Figure] = {}
    pairs: dict[str, set[str]] = defaultdict(set)
    for ln in lines:
        if ln.collective:
            pairs[ln.label].add(ln.collective)
    for n, (label, collectives) in enumerate(sorted(pairs.items())):
        for collective in sorted(collectives):
            fig = busbw_vs_size(label, collective, lines)
            if fig is not None:
                out[f"fabric-size-{n}-{collective}"] = fig
    for collective in sorted({s.collective for s in series}):
        fig = busbw_vs_nodes(collective, series)
        if fig is not None:
            out[f"fabric-nodes-{collective}"] = fig
    return out


def size_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """Powers of two from lo to hi (message sizes are: 8 B ... 16G), every k-th so at most `most`."""
    first, last = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
    exps = list(range(first, last + 1)) or [first]
    step = max(1, math.ceil(len(exps) / most))
    return [float(2 ** e) for e in exps[::step]]


def _expected_traces(expected: Expected, xs: list[float]) -> list[dict[str, Any]]:
    where = f"{expected.sku}: {expected.scope}; {expected.source}"
    return [{"type": "scatter", "mode": "lines", "name": f"expected {expected.expected_gbps:g} GB/s",
             "x": xs, "y": [expected.expected_gbps] * 2, "line": {"dash": "dash", "width": 1, "color": GOOD},
             "hovertemplate": f"expected {expected.expected_gbps:g} GB/s ({where})<extra></extra>"},
            {"type": "scatter", "mode": "lines", "name": f"warn level {expected.warn_gbps:g} GB/s",
             "x": xs, "y": [expected.warn_gbps] * 2, "line": {"dash": "dot", "width": 1, "color": WARN},
             "hovertemplate": f"warn level {expected.warn_gbps:g} GB/s ({where})<extra></extra>"}]


def _against(expected: Expected | None, device: str) -> str:
    if expected is not None:
        return f" (expected {expected.expected_gbps:g} GB/s, catalog)"
    return " (CPU, gloo: no baseline)" if device == "CPU" else " (no published baseline)"
