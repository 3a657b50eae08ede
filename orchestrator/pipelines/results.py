"""What a pipeline's runs mean: per-scale cases, the report, the baseline comparison and update,
and the summaries for machines and people (Markdown for a PR comment or job summary, JUnit
suites for CI test views). Reads the store, returns data; orchestrator.pipelines.pipeline calls `analyse`
once its clusters are down, the CLI calls the renderers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from orchestrator import formats
from orchestrator.errors import AzbenchError
from orchestrator.models import RunState
from orchestrator.pipelines.baselines import (
    METRICS,
    BaselineEntry,
    Comparison,
    Selection,
    collect,
    compare,
    find_baseline,
    set_baseline,
)
from orchestrator.pipelines.junit import JUnitCase, JUnitSuite
from orchestrator.store.events import StageRecord
from orchestrator.results import archive  # by module: tests replace archive.push
from orchestrator.pipelines.spec import cluster_specs
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import build_report
from orchestrator.recipes.catalog import get_recipe
from orchestrator.report.render import to_markdown

if TYPE_CHECKING:
    from orchestrator.pipelines.progress import Progress
    from orchestrator.report.build import Report
    from orchestrator.store.schema import AttemptRow, RunRow

Status = Literal["passed", "regressed", "failed", "interrupted"]
_KEY_METRICS = ("time_to_train", "step_time", "weak_scaling_efficiency", "allreduce_busbw")


class ScaleCase(BaseModel):
    """One benchmark x SKU x node count: its runs, metric means and verdicts."""

    benchmark: str
    recipe: str
    sku: str | None
    cluster: str
    nodes: int
    run_ids: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list, description="'run: message' per failed run")
    seconds: float = 0.0
    metrics: dict[str, float] = Field(default_factory=dict)
    regressions: list[str] = Field(default_factory=list)
    improvements: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.benchmark}[{self.nodes}x{self.sku or '?'}]"


class PipelineSummary(BaseModel):
    """What `--summary-json` writes: stable keys for machines."""

    pipeline: str
    status: Status
    exit_code: int
    message: str = ""
    started_at: datetime
    ended_at: datetime
    clusters: dict[str, str] = Field(default_factory=dict, description="name -> final state")
    sweeps: list[str] = Field(default_factory=list)
    stages: list[StageRecord] = Field(default_factory=list)
    cases: list[ScaleCase] = Field(default_factory=list)
    baseline: str | None = None
    baseline_updated: bool = False
    comparison: dict[str, Any] | None = None
    goodput: dict[str, str] = Field(default_factory=dict, description="cluster -> where its money "
                                    "went, in one line (orchestrator.goodput)")


@dataclass
class PipelineResult:
    summary: PipelineSummary
    report: Report | None = None
    comparison: Comparison | None = None



def analyse(st: Progress, *, with_results: bool = True
            ) -> tuple[Report | None, Comparison | None, list[ScaleCase], bool]:
    """(report, comparison, cases, baseline_updated). Every expected benchmark x scale gets a
    case, also those that never ran (the pipeline stopped early)."""
    runs = [r for rid in st.run_ids if (r := st.store.get_run(rid))] if with_results else []
    attempts = [a for r in runs for a in st.store.list_attempts(r.id)]
    report = comparison = None
    current: list[BaselineEntry] = []
    updated = False
    try:
        if runs:
            report, current = _report(st, runs, attempts)
            comparison = _compare(st, current)
    except AzbenchError as exc:
        st.stop = st.stop or exc
    cases = build_cases(st, runs, attempts, current, comparison)
    try:
        updated = _update_baseline(st, current, cases, comparison)
    except AzbenchError as exc:
        st.stop = st.stop or exc
    if with_results:
        _archive(st)
    return report, comparison, cases, updated


def _archive(st: Progress) -> None:
    """Push logs and a snapshot when the spec names a blob container. A failed push is a failed
    stage (in the summary and JUnit) but not a failed pipeline: the results are in the store."""
    policy = st.spec.archive
    if not (policy.account and policy.container):
        return
    try:
        with st.stage("archive") as rec:
            done = archive.push(st.store, archive.AzureContainer(policy.account, policy.container))
            rec.message = (f"{len(done.uploaded)} blob(s) uploaded, {done.skipped} already in "
                           f"{policy.container}")
    except AzbenchError:
        pass  # recorded on the stage


def build_cases(st: Progress, runs: Sequence[RunRow], attempts: Sequence[AttemptRow],
                current: Sequence[BaselineEntry], cmp: Comparison | None) -> list[ScaleCase]:
    entries = {(e.benchmark, e.sku, e.nodes): e for e in current}
    spans: dict[str, float] = {}
    for a in attempts:
        if a.started_at and a.ended_at:
            spans[a.run_id] = spans.get(a.run_id, 0.0) + (a.ended_at - a.started_at).total_seconds()
    cases: dict[tuple[str, str, int], ScaleCase] = {}
    for cspec in cluster_specs(st.spec):
        for entry in st.spec.matrix:
            for nodes in entry.nodes:
                bench = _benchmark(entry.recipe)
                cases[(cspec.name, bench, nodes)] = ScaleCase(
                    benchmark=bench, recipe=entry.recipe, sku=cspec.sku, cluster=cspec.name, nodes=nodes)
    for r in runs:
        case = cases.setdefault((r.cluster, r.benchmark, r.nodes), ScaleCase(
            benchmark=r.benchmark, recipe=r.recipe, sku=st.skus.get(r.cluster), cluster=r.cluster,
            nodes=r.nodes))
        case.run_ids.append(r.id)
        case.seconds += spans.get(r.id, 0.0)
        if r.state != RunState.SUCCEEDED:
            case.failed.append(f"{r.id}: {r.state}: {r.message or ''}".rstrip(": "))
    for case in cases.values():
        found = entries.get((case.benchmark, case.sku, case.nodes)) if case.sku else None
        figures = {m: found.value(m) for m, v in found.metrics.items() if v} if found else {}
        case.metrics = {m: v for m, v in figures.items() if v is not None}  # results.definitions
        deltas = cmp.for_scale(case.benchmark, case.sku, case.nodes) if cmp else []
        case.regressions = [d.describe() for d in deltas if d.verdict == "regression"]
        case.improvements = [d.describe() for d in deltas if d.verdict == "improvement"]
    return list(cases.values())


def _report(st: Progress, runs: Sequence[RunRow], attempts: Sequence[AttemptRow]
            ) -> tuple[Report, list[BaselineEntry]]:
    with st.stage("report") as rec:
        ids = {r.id for r in runs}
        results = [r for r in st.store.list_results(source="run") if r.run_id in ids]
        report = build_report(results, runs, attempts, model_facts=model_facts())
        current = collect(st.store, Selection(sweep_ids=tuple(st.sweeps))) if st.sweeps else []
        rec.message = f"{len(results)} result(s) in {len(report.groups)} group(s)"
    return report, current


def _compare(st: Progress, current: Sequence[BaselineEntry]) -> Comparison | None:
    policy = st.spec.baseline
    if not policy.name:
        return None
    with st.stage("compare") as rec:
        base = find_baseline(st.store, policy.name)
        if base is None:
            rec.status, rec.message = "skipped", f"no baseline '{policy.name}' yet"
            return None
        cmp = compare(base, current, policy.tolerances)
        rec.message = (f"{len(cmp.regressions)} regression(s), {len(cmp.improvements)} "
                       f"improvement(s) against '{policy.name}'")
        if cmp.regressions:
            rec.status = "failed"
    return cmp


def _update_baseline(st: Progress, current: Sequence[BaselineEntry], cases: Sequence[ScaleCase],
                     cmp: Comparison | None) -> bool:
    """if-missing: first clean pipeline seeds it; on-pass: every clean one rolls it; always."""
    policy = st.spec.baseline
    clean = st.stop is None and st.signum is None and not any(c.failed for c in cases) \
        and not (cmp and cmp.regressions) and any(e.metrics for e in current)
    wanted = {"never": False, "always": st.signum is None and any(e.metrics for e in current),
              "on-pass": clean,
              "if-missing": clean and find_baseline(st.store, policy.name or "") is None}
    if not policy.name or not wanted[policy.update]:
        return False
    with st.stage("baseline") as rec:
        set_baseline(st.store, policy.name, current,
                     source={"pipeline": st.spec.name, "sweeps": st.sweeps, "update": policy.update})
        rec.message = f"baseline '{policy.name}' set from sweep(s) {', '.join(st.sweeps)}"
    return True


def _benchmark(recipe: str) -> str:
    try:
        return get_recipe(recipe).benchmark
    except AzbenchError:
        return recipe


# -- renderers ------------------------------------------------------------------------------


def summary_markdown(result: PipelineResult, *, with_report: bool = True) -> str:
    """A Markdown summary for a PR comment or $GITHUB_STEP_SUMMARY."""
    s = result.summary
    out = [f"# azbench pipeline `{s.pipeline}`: {s.status.upper()}", "", s.message, "",
           "| benchmark x scale | runs | failed | " + " | ".join(METRICS[m][0] for m in _KEY_METRICS)
           + " | verdict |", "| --- " * (4 + len(_KEY_METRICS)) + "|"]
    for c in s.cases:
        verdict = "error" if c.failed else "regression" if c.regressions else \
            "not run" if not c.run_ids else "improvement" if c.improvements else "ok"
        out.append(f"| {c.name} | {len(c.run_ids)} | {len(c.failed)} | "
                   + " | ".join(_fmt(c.metrics.get(m)) for m in _KEY_METRICS) + f" | {verdict} |")
    for title, items in (("Regressions", [r for c in s.cases for r in c.regressions]),
                         ("Improvements", [i for c in s.cases for i in c.improvements]),
                         ("Failed runs", [f for c in s.cases for f in c.failed])):
        if items:
            out += ["", f"## {title}", ""] + [f"- {i}" for i in items]
    if result.comparison is not None:
        out += ["", "## Comparison", "", comparison_markdown(result.comparison).rstrip()]
    out += ["", "## Stages", "", "| stage | cluster | status | seconds | detail |",
            "| --- | --- | --- | --- | --- |"]
    out += [f"| {g.stage} | {g.cluster or ''} | {g.status} | {g.seconds:.1f} | "
            f"{g.message.replace('|', '/')} |" for g in s.stages]
    out += ["", "Clusters: " + ", ".join(f"{k} {v}" for k, v in s.clusters.items()) + "."]
    out += [f"- {k}: {v}" for k, v in s.goodput.items()]  # where each cluster's money went
    if with_report and result.report is not None:
        body = to_markdown(result.report).replace("# azbench report", "## Report", 1)
        out += ["", "<details><summary>Full report</summary>", "", body.rstrip(), "", "</details>"]
    return "\n".join(out) + "\n"


def junit_suites(summary: PipelineSummary) -> list[JUnitSuite]:
    """One suite per cluster, one case per benchmark x scale."""
    suites: dict[str, list[JUnitCase]] = {}
    why_not_run = summary.message if summary.status in ("failed", "interrupted") else "not run"
    for c in summary.cases:
        stdout = "\n".join(f"{METRICS[m][0]}: {v:.6g}" for m, v in c.metrics.items() if m in METRICS)
        case = JUnitCase(
            name=c.name, classname=f"azbench.{summary.pipeline}.{c.benchmark}", seconds=c.seconds,
            error=(f"{len(c.failed)} of {len(c.run_ids)} run(s) failed" if c.failed else
                   f"not run: {why_not_run}" if not c.run_ids else None),
            error_text="\n".join(c.failed),
            failure=f"{len(c.regressions)} regression(s): {c.regressions[0]}" if c.regressions else None,
            failure_text="\n".join(c.regressions), stdout=stdout)
        suites.setdefault(c.cluster, []).append(case)
    props = {"status": summary.status, "baseline": summary.baseline or "",
             "sweeps": ",".join(summary.sweeps)}
    return [JUnitSuite(name=f"azbench.{summary.pipeline}.{cluster}", cases=cases,
                       timestamp=summary.started_at, properties=props)
            for cluster, cases in suites.items()]


def comparison_markdown(cmp: Comparison, *, only_notable: bool = False) -> str:
    """A Markdown table of the deltas (only regressions/improvements/noise when asked)."""
    rows = [d for d in cmp.deltas if not only_notable or d.verdict in ("regression", "improvement", "noise")]
    out = [f"Compared with baseline `{cmp.baseline}`: {len(cmp.regressions)} regression(s), "
           f"{len(cmp.improvements)} improvement(s).", ""]
    notes = [f"- {n}" for n in cmp.notes]
    if not rows:
        return "\n".join(out + notes).rstrip() + "\n"
    out += ["| scale | metric | baseline | current | change | confidence | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for d in rows:
        conf = f"{d.confidence:.0%}" if d.confidence is not None else "n<2"
        change = f"{d.change:+.1%}" if d.change is not None else "-"
        mark = {"regression": "**regression**", "improvement": "improvement"}.get(d.verdict, d.verdict)
        out.append(f"| {d.label} | {METRICS[d.metric][0]} | {_fmt(d.baseline_mean)} "
                   f"(n={d.n_baseline}) | {_fmt(d.current_mean)} (n={d.n_current}) | {change} "
                   f"| {conf} | {mark} |")
    return "\n".join(out + ([""] + notes if notes else [])) + "\n"


def _fmt(value: float | None) -> str:
    return formats.sig(value)
