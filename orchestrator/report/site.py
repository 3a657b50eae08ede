"""The report as a self-contained interactive site: `azbench report --html DIR`.

Pages: an overview (index.html) that opens with the best MLPerf score per benchmark and GPU
type, one page per benchmark (bench/) and per system (system/), history.html (every metric over
time against the active baseline) and compare.html (two systems or two runs side by side with
deltas and their step times overlaid; the selection is kept in the URL) and goodput.html (where
each cluster's time went, stacked, and a timeline per run: attempts as lanes, categories as
coloured spans, failures marked with their class). A system page drills
down from a score to its runs and from a run to its attempts, its step-time and accuracy charts
and an excerpt of its log. A benchmark page also draws, per GPU with two measured GPU counts or
more, the forecast curve of `azbench plan` (forecast.curve: the fit, its 80% band and the points
it stands on), with a "what would N nodes give?" input whose script (site.js) evaluates the
embedded curve as forecast.curve.evaluate does; a benchmark without a curve says so in one line.

Everything the pages need is written into DIR: the pages (templates/report/*.html.j2 through the
one Jinja environment), the site's script and style, and the vendored plotly.js with its
licence, so the site opens from file:// with no network, and nothing in it names a path of this
machine (a log is summarised by its name and an excerpt). Charts are plotly specs built by
orchestrator.report.figures and embedded as JSON, each system in one colour on every page (the
page's systems key says which and hides a system on click); tables sort on a header click and
filter on typed text. Returns the paths written; prints nothing.
"""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import formats
from orchestrator.forecast.curve import benchmark_curves
from orchestrator.goodput.model import ClusterGoodput, RunGoodput
from orchestrator.paths import templates_dir, write_atomic
from orchestrator.report import figures as figs
from orchestrator.report import goodput_charts as gcharts
from orchestrator.report.build import GroupReport, Report, RunLine, group_label, group_results
from orchestrator.report.fabric_site import HEADER as FABRIC_HEADER
from orchestrator.report.fabric_site import PATH as FABRIC_PATH
from orchestrator.report.fabric_site import TEMPLATE as FABRIC_TEMPLATE
from orchestrator.report.fabric_site import fabric_page_parts
from orchestrator.report.figures import Figure, Palette
from orchestrator.report.forecast_site import default_nodes, forecast_box, no_curve_line, node_count_ok
from orchestrator.report.log_excerpt import EXCERPT_LINE_CHARS, EXCERPT_LINES, log_excerpt
from orchestrator.safetext import plot_figure
from orchestrator.report.history import MIN_CHART_POINTS, History, HistorySeries
from orchestrator.results.definitions import PublishedNeighbour
from orchestrator.store.schema import AttemptRow, ResultRow, RunRow
from orchestrator.templating import render

_ASSETS = ("static/site.css", "static/site.js", "vendor/plotly-basic.min.js",
           "vendor/LICENSE-plotly.js.txt")
# Re-exported: the site's tests import them from here (their homes: forecast_site, log_excerpt).
__all__ = ["EXCERPT_LINES", "EXCERPT_LINE_CHARS", "default_nodes", "log_excerpt", "no_curve_line",
           "node_count_ok", "write_site"]
# label, value, which is better ("lower"/"higher"/""), and whether it depends on the GPU count
# (a time, a cost): the compare page colours those only between systems of one GPU count.
Metric = tuple[str, float | int | None, str, bool]


@dataclass
class Cell:
    text: str
    sort: str | float | None = None  # the value a header click sorts by (numbers sort as numbers)
    href: str | None = None
    cls: str = ""
    title: str = ""  # a tooltip
    swatch: str = ""  # a colour shown before the text (the system's colour)


@dataclass
class Table:
    id: str
    header: list[str]
    rows: list[list[Cell]]
    title: str = ""
    wide_cols: list[int] = field(default_factory=list)  # columns that may wrap anywhere
    note: str = ""


@dataclass
class Page:
    """What one template needs besides the shared navigation."""

    path: str  # relative to the site root
    template: str
    title: str
    ctx: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)


def write_site(report: Report, results: Sequence[ResultRow], out_dir: Path, *,
               runs: Sequence[RunRow] | None = None, attempts: Sequence[AttemptRow] | None = None,
               history: History | None = None, goodput: Sequence[RunGoodput] = (),
               clusters: Sequence[ClusterGoodput] = ()) -> list[Path]:
    """Write the whole site into out_dir; returns [index.html, other pages..., assets...].
    `goodput` and `clusters` (orchestrator.goodput) fill goodput.html: a stacked bar per
    cluster, a timeline per run; a run's goodput also stands beside its time to train."""
    site = _Site(report, results, runs or [], attempts or [], history)
    site.goodput = {g.run_id: g for g in goodput}
    pages = [site.overview(), *site.benchmark_pages(), *site.system_pages(), site.history_page(),
             site.compare_page(), *([site.fabric_page()] if report.fabric else []),
             goodput_page(list(goodput), list(clusters))]
    nav = {"benchmarks": site.bench_links, "systems": site.system_links, "fabric": bool(report.fabric)}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages:
        root = "../" * page.path.count("/")
        html = render(f"report/{page.template}", title=page.title, root=root, nav=nav,
                      generated=f"{report.generated_at:%Y-%m-%d %H:%M} UTC",
                      filters=report.filters, figures=_plain(page.figures), current=page.path, **page.ctx)
        written.append(_write(out_dir / page.path, html))
    assets = out_dir / "assets"
    assets.mkdir(exist_ok=True)
    for name in _ASSETS:
        target = assets / Path(name).name
        shutil.copyfile(templates_dir() / "report" / name, target)
        written.append(target)
    return written


class _Site:
    def __init__(self, report: Report, results: Sequence[ResultRow], runs: Sequence[RunRow],
                 attempts: Sequence[AttemptRow], history: History | None) -> None:
        self.report, self.history = report, history
        self.results = list(results)
        self.rows: dict[tuple[str, str], list[ResultRow]] = {
            (key[0], group_label(key)): members for key, members in group_results(results).items()}
        self.runs = {r.id: r for r in runs}
        self.attempts: dict[str, list[AttemptRow]] = defaultdict(list)
        for a in sorted(attempts, key=lambda a: a.attempt):
            self.attempts[a.run_id].append(a)
        self.bench_slug = _slugs(sorted({g.benchmark for g in report.groups}))
        self.system_slug = _slugs(sorted({g.label for g in report.groups}))
        self.bench_links = [(b, f"bench/{s}.html") for b, s in self.bench_slug.items()]
        self.system_links = [(n, f"system/{s}.html") for n, s in self.system_slug.items()]
        self.palette = Palette(self.system_slug)
        self.goodput: dict[str, RunGoodput] = {}

    # -- pages ---------------------------------------------------------------------------

    def overview(self) -> Page:
        groups = self.report.groups
        charts: dict[str, Figure | None] = {}
        benches = []
        for bench, slug in self.bench_slug.items():
            mine = [g for g in groups if g.benchmark == bench]
            charts[f"ttt-{slug}"] = figs.time_to_train(bench, mine, self.palette)
            charts[f"strong-{slug}"] = figs.strong_scaling(bench, mine)
            charts[f"weak-{slug}"] = figs.weak_scaling(bench, self.report.weak_scaling)
            benches.append({"name": bench, "slug": slug, "href": f"bench/{slug}.html"})
        charts.update({"speedup": figs.sku_speedup(self.report.speedups),
                       "mfu": figs.mfu(groups), "cost": figs.cost(groups)})
        regressions = [(s, p) for s in (self.history.series if self.history else [])
                       for p in s.regressions]
        return Page("index.html", "overview.html.j2", "azbench report", ctx={
            "best": self._best_table(),
            "key": self._systems_key(groups),
            "tables": [self._scores(groups, "scores"), self._scaling_table(), self._cost_table(groups)],
            "benches": benches,
            "counts": {"benchmarks": len(self.bench_slug), "systems": len(self.system_slug),
                       "results": sum(g.runs for g in groups),
                       "scored": sum(1 for g in groups if g.score_minutes is not None),
                       "regressions": len(regressions)},
            "regressions": [f"{s.label} {s.metric_label}: {p.occasion} ({p.change:+.1%})"
                            if p.change is not None else f"{s.label} {s.metric_label}: {p.occasion}"
                            for s, p in regressions],
            "notes": self.report.notes}, figures=_present(charts))

    def benchmark_pages(self) -> list[Page]:
        pages = []
        for bench, slug in self.bench_slug.items():
            groups = [g for g in self.report.groups if g.benchmark == bench]
            charts: dict[str, Figure | None] = {
                "ttt": figs.time_to_train(bench, groups, self.palette),
                "strong": figs.strong_scaling(bench, groups),
                "weak": figs.weak_scaling(bench, self.report.weak_scaling),
                "speedup": figs.sku_speedup([s for s in self.report.speedups if s.benchmark == bench]),
                "mfu": figs.mfu(groups), "explain": figs.explain(groups)}
            curves = benchmark_curves(bench, stored=self.results)
            for c in curves:
                charts[f"forecast-{c.gpu}"] = figs.forecast(c, self.palette)
            pages.append(Page(f"bench/{slug}.html", "benchmark.html.j2", f"{bench}", ctx={
                "key": self._systems_key(groups),
                "tables": [self._scores(groups, "scores"), self._steps_table(groups)],
                "forecast": [forecast_box(c) for c in curves],
                "forecast_none": "" if curves else no_curve_line(bench, self.results),
                "forecast_data": {c.gpu: c.model_dump(mode="json") for c in curves}},
                figures=_present(charts)))
        return pages

    def system_pages(self) -> list[Page]:
        pages = []
        for label, slug in self.system_slug.items():
            sections, charts = [], {}
            colour = self.palette.colour(label)
            for g in (g for g in self.report.groups if g.label == label):
                rows = self.rows.get((g.benchmark, label), [])
                key = self.bench_slug[g.benchmark]
                names = [f"run {i}" for i in range(len(rows))]
                charts[f"steps-{key}"] = figs.step_series(f"{g.benchmark}", rows, names, colour)
                charts[f"hist-{key}"] = figs.step_histogram(g.benchmark, rows, colour)
                charts[f"acc-{key}"] = figs.accuracy(g.benchmark, rows, colour)
                runs = []
                for i, (line, row) in enumerate(zip(g.run_lines, rows)):
                    anchor = f"run-{key}-{i}"
                    charts[f"{anchor}-steps"] = figs.step_series(f"run {i}", [row], None, colour)
                    charts[f"{anchor}-acc"] = figs.accuracy(f"run {i}", [row], colour)
                    runs.append({"anchor": anchor, "name": f"run {i}", "line": line, "row": row,
                                 "log_name": Path(row.log_path).name if row.log_path else None,
                                 "run": self.runs.get(row.run_id or ""),
                                 "attempts": self._attempts_table(anchor, row),
                                 "excerpt": log_excerpt(row.log_path)})
                sections.append({"group": g, "key": key, "bench_href": f"bench/{key}.html",
                                 "score": self._scores([g], f"score-{key}", link_system=False),
                                 "runs_table": self._runs_table(g, key), "runs": runs,
                                 "mfu_note": g.mfu_note, "cost_note": g.cost_note})
            pages.append(Page(f"system/{slug}.html", "system.html.j2", label,
                              ctx={"sections": sections, "colour": colour},
                              figures=_present(charts)))
        return pages

    def history_page(self) -> Page:
        h = self.history
        charts: dict[str, Figure | None] = {}
        ordered = sorted(h.series if h else [], key=lambda s: (s.baseline is None, -len(s.points)))
        drawn = [s for s in ordered if s.charted]  # two points are no trend: table rows
        for i, s in enumerate(drawn):  # series with a band and the longest histories first
            charts[f"h{i}"] = figs.history(s)
        series = [{"id": f"h{i}", "s": s} for i, s in enumerate(drawn)]
        single = [s for s in ordered if not s.charted]
        tables = [t for t in (self._history_table("history-points", drawn, "Every point"),
                              self._history_table("history-single", single,
                                                  f"Series with fewer than {MIN_CHART_POINTS} points "
                                                  f"({len(single)}): listed, not charted")) if t.rows]
        return Page("history.html", "history.html.j2", "History", ctx={
            "history": h, "series": series, "tables": tables, "single": len(single),
            "min_points": MIN_CHART_POINTS},
            figures=_present(charts))

    def compare_page(self) -> Page:
        systems = []
        for g in self.report.groups:
            x, y, unit = figs.step_profile(self.rows.get((g.benchmark, g.label), []))
            systems.append({"id": f"{self.bench_slug[g.benchmark]}--{self.system_slug[g.label]}",
                            "key": f"{g.benchmark} | {g.label}", "benchmark": g.benchmark,
                            "colour": self.palette.colour(g.label), "gpus": g.gpus,
                            "metrics": _group_metrics(g),
                            "profile": {"x": x, "y": y, "unit": unit}})
        runs = []
        for g in self.report.groups:
            rows = self.rows.get((g.benchmark, g.label), [])
            for i, (r, row) in enumerate(zip(g.run_lines, rows)):
                x, y, unit = figs.step_profile([row])
                runs.append({"id": f"{self.bench_slug[g.benchmark]}--{self.system_slug[g.label]}--{i}",
                             "key": f"{g.benchmark} | {g.label} | run {i}",
                             "benchmark": g.benchmark, "colour": self.palette.colour(g.label),
                             "gpus": g.gpus, "metrics": _run_metrics(r), "profile": {"x": x, "y": y, "unit": unit}})
        return Page("compare.html", "compare.html.j2", "Compare",
                    ctx={"compare_data": {"systems": systems, "runs": runs}})

    def fabric_page(self) -> Page:
        """fabric.html: the stored collective runs (report/fabric_site.py)."""
        ctx, rows, charts = fabric_page_parts(self.report)
        cells = [[Cell(text, sort=sort, cls=cls, title=title) for text, sort, cls, title in row] for row in rows]
        ctx["runs"] = Table("fabric-runs", FABRIC_HEADER, cells, title="Every run",
                            wide_cols=[len(FABRIC_HEADER) - 1])
        return Page(FABRIC_PATH, FABRIC_TEMPLATE, "Fabric", ctx=ctx, figures=charts)

    # -- tables --------------------------------------------------------------------------

    def _best_table(self) -> Table:
        rows = []
        for b in self.report.best:
            g = next((g for g in self.report.groups if g.benchmark == b.benchmark
                      and g.label == b.system), None)
            rows.append([
                Cell(b.benchmark, href=f"bench/{self.bench_slug[b.benchmark]}.html"),
                Cell(b.gpu_type), _num_cell(b.score_minutes, 3, cls="headline"),
                self._system_cell(b.system), _num_cell(b.gpus, 0),
                _num_cell(b.cost_per_result_usd, 2, title=g.cost_note if g else ""),
                _pct_cell(b.mfu),
                _delta_cell(g.published if g else None),
                _num_cell(b.scores, 0)])
        return Table("best", ["benchmark", "GPU", "MLPerf score (min)", "system", "GPUs",
                              "$ / result", "MFU", "vs nearest published", "official scores"],
                     rows, "Best per benchmark: the fastest official MLPerf score per GPU type",
                     wide_cols=[3])

    def _systems_key(self, groups: Sequence[GroupReport]) -> Table:
        """The colour of each system on this page's charts; a click on a row hides its traces."""
        seen: dict[str, GroupReport] = {}
        for g in groups:
            seen.setdefault(g.label, g)
        rows = [[Cell(label, href=f"system/{self.system_slug[label]}.html",
                      swatch=self.palette.colour(label), cls="key-system"),
                 Cell(g.gpu_type or "-"), _num_cell(g.gpus, 0),
                 Cell(", ".join(sorted({x.benchmark for x in groups if x.label == label})))]
                for label, g in sorted(seen.items())]
        return Table("systems-key", ["system (click a colour to hide it)", "GPU", "GPUs",
                                     "benchmarks"], rows, "Systems on this page", wide_cols=[0, 3])

    def _system_cell(self, label: str, link: bool = True) -> Cell:
        return Cell(label, href=f"system/{self.system_slug[label]}.html" if link else None,
                    swatch=self.palette.colour(label))

    def _scores(self, groups: Sequence[GroupReport], tid: str, link_system: bool = True) -> Table:
        rows = []
        for g in groups:
            kind = g.kind
            n = g.published
            rows.append([
                Cell(g.benchmark, href=f"bench/{self.bench_slug[g.benchmark]}.html"),
                self._system_cell(g.label, link_system), Cell(g.gpu_type or "-"),
                _num_cell(g.gpus, 0), Cell(f"{g.runs} ({g.required_runs or '-'})", g.runs),
                _num_cell(g.score_minutes, 3, cls="headline"), _num_cell(g.score_raw_minutes, 3),
                Cell(g.verdict if g.score_minutes is not None else kind,
                     cls=f"k-{kind.replace(' ', '-')}"),
                _delta_cell(n),
                _num_cell(g.step_stats.median if g.step_stats else None, 4),
                _pct_cell(g.mfu), _num_cell(g.cost_per_result_usd, 2, title=g.cost_note),
                Cell(_score_note(g), cls="note")])
        return Table(tid, ["benchmark", "system", "GPU", "GPUs", "runs (req.)",
                           "MLPerf score (min)", "olympic mean (min)", "kind",
                           "vs nearest published", "median step (s)", "MFU", "$ / result", "note"],
                     rows, "Scores", wide_cols=[1, 8, 12],
                     note="MLPerf score = the olympic mean of the runs x the RCP scaling factor "
                          "(scaling.json), as MLCommons publishes it; vs nearest published = "
                          "score / the published closed-division score on the same accelerator "
                          "at the same GPU count - 1 (+: slower, coloured); where none is "
                          "published at that count, the nearest count per GPU (GPU-minutes, "
                          "marked 'per GPU', not coloured); $ / result = the runs one MLPerf "
                          "score needs, each at its own minutes, at Azure list price (hover for "
                          "how it was priced); MFU = against the dense peak of the precision the "
                          "runs trained in (the system page says where that was read); - = "
                          "unknown. Each figure's one definition: docs/figures.md.")

    def _steps_table(self, groups: Sequence[GroupReport]) -> Table:
        rows = [[self._system_cell(g.label), _num_cell(g.nodes, 0), _num_cell(s.count, 0),
                 _num_cell(s.median, 4), _num_cell(s.mean, 4), _num_cell(s.p99, 4),
                 _pct_cell(s.cv), _num_cell(s.slow_steps, 0),
                 _num_cell(g.throughput_per_minute, 1), _num_cell(g.throughput_per_worker_minute, 3),
                 _num_cell(g.model_tflops_per_gpu, 1), _pct_cell(g.mfu), _pct_cell(g.mfu_bf16)]
                for g in groups if (s := g.step_stats) is not None]
        return Table("steps", ["system", "nodes", "steps", "median (s)", "mean (s)", "p99 (s)", "CV",
                               "slow", "tput/min", "per GPU/min", "TF/s/GPU", "MFU", "MFU vs dense BF16"],
                     rows, "Step times and throughput", wide_cols=[0])

    def _scaling_table(self) -> Table:
        rows = [[Cell(s.benchmark), Cell(f"{s.small} → {s.large}"),
                 Cell(f"{formats.count(s.workers_small)} → {formats.count(s.workers_large)}", s.workers_large),
                 _num_cell(s.speedup, 3), _pct_cell(s.efficiency), _pct_cell(s.efficiency_scaled),
                 _pct_cell(s.throughput_efficiency)] for s in self.report.strong_scaling]
        rows += [[Cell(w.benchmark), Cell(f"{w.base} → {w.system} (weak)"),
                  Cell(f"{formats.count(w.nodes_base)} → {formats.plural(w.nodes, 'node')}", w.nodes), _num_cell(None, 0),
                  _pct_cell(w.efficiency), _num_cell(None, 0), _num_cell(None, 0)]
                 for w in self.report.weak_scaling]
        return Table("scaling", ["benchmark", "from → to", "GPUs", "speedup (raw)",
                                 "efficiency (raw)", "efficiency (MLPerf score)", "tput/GPU eff."],
                     rows, "Scaling", wide_cols=[1])

    def _cost_table(self, groups: Sequence[GroupReport]) -> Table:
        rows = [[Cell(g.benchmark), self._system_cell(g.label), Cell(g.gpu_type or "-"),
                 _num_cell(g.priced_vms, 0), _num_cell(g.price_per_vm_hour, 2),
                 _num_cell(g.cost_per_result_usd, 2), _num_cell(g.cost_per_run_usd, 2),
                 _num_cell(g.cost_all_runs_usd, 2),
                 _num_cell(g.cost_all_attempts_usd, 2), Cell(g.cost_note, cls="note"),
                 Cell(g.price_source, cls="note")] for g in groups]
        return Table("cost", ["benchmark", "system", "GPU", "VMs", "$/VM-hour", "per result ($)",
                              "per run ($)", "all runs ($)", "all attempts ($)", "note",
                              "price source"], rows,
                     "Cost at list price (per result: the runs one MLPerf score needs, each at its "
                     "own minutes; per run: one run as long as the raw olympic mean)",
                     wide_cols=[1, 9, 10])

    def _runs_table(self, g: GroupReport, key: str) -> Table:
        ids = [row.run_id for row in self.rows.get((g.benchmark, g.label), [])]
        rows = [[Cell(f"run {i}", i, href=f"#run-{key}-{i}"), Cell(r.status),
                 _num_cell(r.minutes, 3), self._goodput_cell(ids[i] if i < len(ids) else None),
                 Cell("resumed" if r.resumed else ("yes" if r.scored else "")),
                 _num_cell(r.median_step_s, 4), _num_cell(r.progress_per_minute, 1),
                 Cell({True: "ok", False: "FAILED", None: "not checked"}[r.compliance_ok]),
                 Cell(f"{r.slowest_node} ({r.node_spread:.2f})" if r.slowest_node else "-"),
                 Cell(Path(r.log).name if r.log else "-")]
                for i, r in enumerate(g.run_lines)]
        return Table(f"runs-{key}", ["run", "status", "minutes", "goodput", "scored", "median step (s)",
                                     "progress/min", "compliance", "slowest node", "log"], rows,
                     "Runs", wide_cols=[8])

    def _goodput_cell(self, run_id: str | None) -> Cell:
        """The run's goodput, linked to its timeline on goodput.html; - for an imported result."""
        g = self.goodput.get(run_id or "")
        if g is None:
            return Cell("-", None, title="no attempts recorded here (an imported result)")
        return Cell(f"{g.goodput * 100:.1f}%", g.goodput, href=f"goodput.html#run-{g.run_id}",
                    title=f"training / wall time: {g.categories['training']:,.0f} of {g.wall_s:,.0f} s")

    def _attempts_table(self, anchor: str, row: ResultRow) -> Table | None:
        tries = self.attempts.get(row.run_id or "", [])
        if not tries:
            return None
        rows = [[_num_cell(a.attempt, 0), Cell(str(a.state)), Cell(a.job_id or "-"),
                 Cell(a.failure_class or "-"), Cell(", ".join(a.excluded_nodes) or "-"),
                 _num_cell(a.resumed_from_step, 0), _num_cell(a.lost_steps, 0),
                 Cell(f"{a.started_at:%Y-%m-%d %H:%M:%S}" if a.started_at else "-"),
                 Cell(f"{a.ended_at:%Y-%m-%d %H:%M:%S}" if a.ended_at else "-"),
                 Cell(a.message or "", cls="note")] for a in tries]
        return Table(f"{anchor}-attempts", ["attempt", "state", "job", "failure", "excluded",
                                            "resumed from", "lost steps", "started", "ended",
                                            "message"], rows, "Attempts", wide_cols=[4, 9])

    @staticmethod
    def _history_table(tid: str, series: Sequence[HistorySeries], title: str) -> Table:
        return Table(tid, ["series", "metric", "when", "occasion", "value", "change",
                           "confidence", "verdict"], [
            [Cell(s.label), Cell(s.metric_label),
             Cell(f"{p.when:%Y-%m-%d %H:%M}", p.when.timestamp()), Cell(p.occasion),
             Cell(formats.sig(p.value), p.value), _pct_cell(p.change, signed=True),
             _pct_cell(p.confidence), Cell(p.verdict or "-", cls=f"v-{p.verdict or 'none'}")]
            for s in series for p in s.points], title, wide_cols=[3])


def goodput_page(runs: Sequence[RunGoodput], clusters: Sequence[ClusterGoodput]) -> Page:
    """goodput.html: where each cluster's time went (a stacked bar and a table), then every run
    with its goodput beside its time to train, each opening onto its timeline."""
    charts: dict[str, Figure | None] = {"clusters": gcharts.cluster_bars(clusters)}
    cluster_rows = [[Cell(c.cluster), Cell(c.sku), _num_cell(c.nodes, 0), Cell(c.state),
                     _num_cell(c.wall_s / 3600, 2), _pct_cell(c.goodput),
                     _num_cell(sum(c.cost_usd.values()) if c.cost_usd else None, 2, title=c.price_note),
                     _num_cell(sum(c.gpu_hours.values()), 2), Cell(c.line, cls="note")] for c in clusters]
    run_rows, timelines = [], []
    for g in runs:
        top = g.causes[0] if g.causes else None
        run_rows.append([Cell(g.run_id, href=f"#run-{g.run_id}"), Cell(g.cluster), Cell(g.recipe),
                         _num_cell(g.nodes, 0), Cell(g.state), _num_cell(len(g.attempts), 0),
                         _num_cell(g.minutes, 3), _pct_cell(g.goodput), _num_cell(g.wall_s, 0),
                         _num_cell(g.categories["lost_work"], 1), _num_cell(g.categories["restart_overhead"], 1),
                         Cell(top.failure_class if top else "-"),
                         _num_cell(sum(g.cost_usd.values()) if g.cost_usd else None, 2, title=g.price_note)])
        charts[f"timeline-{g.run_id}"] = gcharts.timeline(g)
        timelines.append({"anchor": f"run-{g.run_id}", "g": g,
                          "failures": [a.failure for a in g.attempts if a.failure is not None],
                          "shares": [(gcharts.label(k), v / g.wall_s, gcharts.COLOURS.get(k, "#999"))
                                     for k, v in g.categories.items() if v > 0 and g.wall_s > 0]})
    tables = [Table("goodput-clusters", ["cluster", "SKU", "nodes", "state", "hours", "goodput", "cost ($)",
                                         "GPU-hours", "where the money went"], cluster_rows,
                    "Clusters", wide_cols=[8],
                    note="goodput = training time / wall time, the time weighted by the share of the "
                         "cluster's nodes each activity held; cost at the list price its record holds.")
              if cluster_rows else None,
              Table("goodput-runs", ["run", "cluster", "recipe", "nodes", "state", "attempts",
                                     "time to train (min)", "goodput", "wall (s)", "lost work (s)",
                                     "restart (s)", "top cause", "cost ($)"], run_rows, "Runs",
                    note="time to train = MLPerf's run_start to run_stop of the attempt that finished; "
                         "goodput = training / the run's wall time (its first attempt's start to its "
                         "last one's end); lost work and restart overhead are what its failures cost.")]
    return Page("goodput.html", "goodput.html.j2", "Goodput", ctx={
        "tables": [t for t in tables if t is not None], "timelines": timelines,
        "none": not runs and not clusters}, figures=_present(charts))


def _group_metrics(g: GroupReport) -> list[Metric]:
    """A system's figures for the compare page, the most important first."""
    s = g.step_stats
    return [("MLPerf score (min)", g.score_minutes, "lower", True),
            ("cost per result ($)", g.cost_per_result_usd, "lower", True),
            ("GPUs", g.gpus, "", False),
            ("median step (s)", s.median if s else None, "lower", True),
            ("throughput per GPU per minute", g.throughput_per_worker_minute, "higher", False),
            ("model TFLOP/s per GPU", g.model_tflops_per_gpu, "higher", False),
            ("MFU", g.mfu, "higher", False),
            ("p99 step (s)", s.p99 if s else None, "lower", True),
            ("step-time CV", s.cv if s else None, "lower", False),
            ("olympic mean, raw (min)", g.score_raw_minutes, "lower", True),
            ("scaling factor", g.scaling_factor, "", False),
            ("nearest published (min)", g.published.score_minutes if g.published else None, "", False),
            ("runs", g.runs, "", False)]


def _run_metrics(r: RunLine) -> list[Metric]:
    return [("minutes", r.minutes, "lower", True), ("median step (s)", r.median_step_s, "lower", True),
            ("progress per minute", r.progress_per_minute, "higher", True),
            ("node spread", r.node_spread, "lower", False)]


def _score_note(g: GroupReport) -> str:
    parts = [g.score_note] if g.score_note else []
    if g.published_score_minutes is not None:
        parts.append("published as " + ("this score" if g.is_published_score
                                        else f"{formats.fixed(g.published_score_minutes, 3)} min"))
    return "; ".join(parts)


def _num_cell(v: float | int | None, digits: int, cls: str = "", title: str = "") -> Cell:
    return Cell("-", None, title=title) if v is None else \
        Cell(formats.fixed(v, digits), float(v), cls=cls, title=title)


def _pct_cell(v: float | None, signed: bool = False) -> Cell:
    if v is None:
        return Cell("-", None)
    return Cell(formats.pct(v, signed=signed), v)


def _delta_cell(n: PublishedNeighbour | None) -> Cell:
    """The delta to the published neighbour: coloured only at the same GPU count; across
    counts it is per GPU (GPU-minutes), says so, and takes no colour."""
    if n is None or n.delta is None:
        return Cell("-", None, cls="delta", title=n.config if n else "")
    pct = f"{round(n.delta * 100, 1) + 0.0:+.1f}%"
    if n.per_gpu:
        return Cell(f"{pct} per GPU vs {n.config}", n.delta, cls="delta",
                    title=f"{n.config}: GPU-minutes per result (score x GPUs), across GPU counts")
    return Cell(f"{pct} vs {n.config}", n.delta,
                cls="delta " + ("worse" if n.delta > 0.005 else ("better" if n.delta < -0.005 else "")),
                title=n.config)


def _plain(figures: dict[str, Figure]) -> dict[str, Any]:
    """Every string of every chart as plain text (safetext.plot): plotly would draw a system
    name's `<a href>` as a link."""
    return {name: plot_figure(fig) for name, fig in figures.items()}


def _present(charts: dict[str, Figure | None]) -> dict[str, Figure]:
    return {k: v for k, v in charts.items() if v is not None}


def _slugs(names: Sequence[str]) -> dict[str, str]:
    """A file-name-safe, unique slug per name."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "x"
        slug, n = base, 1
        while slug.lower() in taken:
            n += 1
            slug = f"{base}-{n}"
        taken.add(slug.lower())
        out[name] = slug
    return out


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, text)  # a full disk: StoreError (exit 6), no temp file left
