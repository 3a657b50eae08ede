"""The charts of runs on the report site: step time over a run (one line per run, or a median
and a min-max band past MAX_RUN_LINES runs), the step-time distribution and profile, and eval
accuracy against samples. Step times are plotted against steps, never samples (`step_axis`)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from orchestrator.report.chart_base import (
    Figure, KELLY, MAX_RUN_LINES, PROFILE_POINTS, PUBLISHED, layout, side_legend, _rgba, _shade,
    _thin)
from orchestrator.results.mllog import RunSummary
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.schema import ResultRow


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
