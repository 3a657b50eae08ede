"""PNG plots for the HTML report: time-to-train per node count, step time over a run, step-time
histogram, strong/weak scaling against ideal, and speedup bars between SKUs.

matplotlib is imported inside `write_all` with the Agg backend (no display, no GUI toolkit);
each plot is written only when the report has data for it.
"""

from __future__ import annotations

import errno
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.hardware.catalog import bare_name
from orchestrator.report.build import Report, group_label, group_results
from orchestrator.results.summary import kept_step_times, summary_of
from orchestrator.store.schema import ResultRow

MAX_LINES = 12
MAX_PANELS = 9
DPI = 110


def write_all(report: Report, results: Sequence[ResultRow], out_dir: Path) -> list[Path]:
    """Write every plot that has data into out_dir; returns the PNG paths in display order."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    written = []
    for plot in (time_to_train, step_time_series, step_time_histogram, strong_scaling,
                 weak_scaling, sku_speedup):
        path = plot(plt, report, results, out_dir)
        if path is not None:
            written.append(path)
    return written


def time_to_train(plt: Any, report: Report, _res: Sequence[ResultRow], out: Path) -> Path | None:
    by_bench: dict[str, list[Any]] = defaultdict(list)
    for g in report.groups:
        if g.nodes and any(r.minutes is not None for r in g.run_lines):
            by_bench[g.benchmark].append(g)
    if not by_bench:
        return None
    fig, axes = plt.subplots(1, len(by_bench), figsize=(5.5 * len(by_bench), 4), squeeze=False)
    for ax, (bench, groups) in zip(axes[0], sorted(by_bench.items())):
        for g in groups:
            runs = [r.minutes for r in g.run_lines if r.minutes is not None]
            ax.scatter([g.nodes] * len(runs), runs, s=18, alpha=0.6)
            if g.score_minutes is not None:
                ax.scatter([g.nodes], [g.score_minutes], marker="_", s=400, color="black")
        _log_if_wide(ax, [g.nodes for g in groups], "x")
        _log_if_wide(ax, [r.minutes for g in groups for r in g.run_lines], "y")
        _node_ticks(ax, [g.nodes for g in groups])
        ax.set(title=f"{bench}: time to train", xlabel="nodes", ylabel="minutes")
        ax.grid(alpha=0.3)
    return _save(plt, fig, out / "time_to_train.png")


def step_time_series(plt: Any, _r: Report, results: Sequence[ResultRow], out: Path) -> Path | None:
    """One panel per system (time scales differ by 100x between systems), one line per run."""
    panels = []
    for key, rows in group_results(results).items():
        runs = [(k, steps) for k, row in enumerate(rows)
                if len(steps := summary_of(row).get("step_times") or []) > 1]
        kept = sorted(t for row in rows for t in kept_step_times(summary_of(row)))
        if runs:
            panels.append((group_label(key), runs, kept))
    if not panels:
        return None
    fig, axes = _grid(plt, len(panels))
    for ax, (label, runs, kept) in zip(axes, panels):
        for k, steps in runs[:MAX_LINES]:
            ax.plot(range(len(steps)), [t for _, t in steps], linewidth=0.8, label=f"run {k}")
        if kept:  # first and post-eval steps can be 10x steady state: keep the steady part legible
            ax.set_ylim(0, kept[int(0.99 * (len(kept) - 1))] * 1.5)
        ax.set_title(label, fontsize=8)
        ax.set(xlabel="step (index)", ylabel="seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("Step time over the run (y clipped at 1.5 x p99)")
    return _save(plt, fig, out / "step_time.png")


def step_time_histogram(
    plt: Any, _r: Report, results: Sequence[ResultRow], out: Path
) -> Path | None:
    pools = []
    for key, rows in group_results(results).items():
        kept = [t for row in rows for t in kept_step_times(summary_of(row))]
        if len(kept) > 1:
            pools.append((group_label(key), kept))
    if not pools:
        return None
    fig, axes = _grid(plt, len(pools))
    for ax, (label, kept) in zip(axes, pools):
        ax.hist(kept, bins=min(50, max(10, len(kept) // 5)), color="tab:blue", alpha=0.8)
        ax.set_title(label, fontsize=8)
        ax.set(xlabel="seconds", ylabel="steps")
        ax.grid(alpha=0.3)
    fig.suptitle("Step-time distribution (first step and post-eval steps excluded)")
    return _save(plt, fig, out / "step_time_hist.png")


def strong_scaling(plt: Any, report: Report, _res: Sequence[ResultRow], out: Path) -> Path | None:
    series: dict[tuple[str, str | None], list[Any]] = defaultdict(list)
    for g in report.groups:
        if g.score_minutes and g.workers:
            series[(g.benchmark, g.sku)].append(g)
    series = {k: sorted(v, key=lambda g: g.workers) for k, v in series.items()
              if len({g.workers for g in v}) > 1}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    top = 1.0
    for (bench, sku), groups in sorted(series.items(), key=lambda kv: str(kv[0])):
        base = groups[0]
        xs = [g.workers for g in groups]
        ys = [base.score_minutes / g.score_minutes for g in groups]
        ideal = [x / base.workers for x in xs]
        top = max(top, *ideal, *ys)
        line = ax.plot(xs, ys, marker="o", label=f"{bench} ({sku or '?'})")[0]
        ax.plot(xs, ideal, linestyle="--", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    _node_ticks(ax, [g.workers for v in series.values() for g in v])
    ax.set(title="Strong scaling: speedup vs ideal (dashed)", xlabel="GPUs (or nodes)",
           ylabel="speedup over the smallest")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "strong_scaling.png")


def weak_scaling(plt: Any, report: Report, _res: Sequence[ResultRow], out: Path) -> Path | None:
    if not report.weak_scaling:
        return None
    series: dict[tuple[str, str | None], list[Any]] = defaultdict(list)
    for w in report.weak_scaling:
        series[(w.benchmark, w.sku)].append(w)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs_all: list[int] = []
    for (bench, sku), points in sorted(series.items(), key=lambda kv: str(kv[0])):
        points = sorted(points, key=lambda w: w.nodes)
        xs = [points[0].nodes_base] + [w.nodes for w in points]
        ys = [1.0] + [w.efficiency for w in points]
        xs_all += xs
        ax.plot(xs, ys, marker="o", label=f"{bench} ({sku or '?'}) t_base/t")
    ax.axhline(1.0, linestyle="--", color="grey", label="ideal")
    _node_ticks(ax, xs_all)
    ax.set(title="Weak scaling: E_weak = t_base / t_N (not capped)", xlabel="nodes",
           ylabel="efficiency")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "weak_scaling.png")


def sku_speedup(plt: Any, report: Report, _res: Sequence[ResultRow], out: Path) -> Path | None:
    if not report.speedups:
        return None
    labels = [f"{s.benchmark}, {s.workers} GPUs\n{_short(s.sku_b)}\nvs {_short(s.sku_a)}"
              for s in report.speedups]
    xs = list(range(len(labels)))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels)), 4.5))
    ax.bar([x - 0.2 for x in xs], [s.speedup for s in report.speedups], width=0.4,
           label="speedup")
    ax.bar([x + 0.2 for x in xs], [s.speedup_per_dollar or 0 for s in report.speedups],
           width=0.4, label="per dollar (0 = unknown price)")
    ax.axhline(1.0, linestyle="--", color="grey")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_xlim(-0.8, len(xs) - 0.2)  # one pair would otherwise fill the whole width
    ax.set(title="Speedup between SKUs at equal GPU count", ylabel="x faster than the slower SKU")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "speedup.png")


def _grid(plt: Any, n: int) -> tuple[Any, list[Any]]:
    """A figure with n panels (at most MAX_PANELS), 3 per row; spare panels hidden."""
    n = min(n, MAX_PANELS)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows + 0.5), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _node_ticks(ax: Any, values: Sequence[Any]) -> None:
    """Ticks at the node/GPU counts themselves, written plainly (not 2^n)."""
    ticks = sorted({v for v in values if v})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.minorticks_off()


def _log_if_wide(ax: Any, values: Sequence[Any], axis: str) -> None:
    vals = [v for v in values if v]
    if vals and max(vals) / min(vals) >= 8:
        if axis == "x":
            ax.set_xscale("log", base=2)
        else:
            from matplotlib.ticker import FuncFormatter

            ax.set_yscale("log")  # label 1-2-5 steps plainly; "10^2" alone says little
            plain = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "125" else "")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)


def _short(sku: str) -> str:
    return bare_name(sku)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp")
    try:
        fig.savefig(tmp, dpi=DPI, format="png")
        tmp.replace(path)
    except BaseException as exc:  # a full disk or Ctrl-C leaves no half-written plot
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreError(f"no space left on device writing {path}") from None
        raise
    finally:
        plt.close(fig)
    return path
