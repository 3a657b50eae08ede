"""The report on hand-made results: weak scaling from step times (1, 2, 4 nodes), scores with a
resumed run left out, cost, SKU speedups, filters, and the renderers (JSON, Markdown, rich; the
site's are tests/test_report_site.py's)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.report.build import build_report
from orchestrator.report.render import sections, to_json, to_markdown
from orchestrator.results.mllog import EvalPoint, RunSummary, StepTime
from orchestrator.store.database import AttemptRow, ResultRow, RunRow

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
STEADY = {1: 1.00, 2: 1.02, 4: 0.95}  # median step seconds per node count; 4 nodes is faster


def steps(steady: float, n: int = 40, eval_every: int = 10) -> tuple[list[StepTime], list[int]]:
    """Step 1 slow (warm-up), the first step after each eval slow, the rest steady +-1%."""
    out, after_eval = [], []
    for i in range(1, n + 1):
        t = steady * (1 + 0.01 * ((i % 3) - 1))
        if i == 1:
            t = steady * 5
        elif i % eval_every == 1:
            t, _ = steady * 3, after_eval.append(i)
        out.append(StepTime(i, t))
    return out, after_eval


def smoke_row(nodes: int, k: int, minutes: float, *, resumed: bool = False,
              run_id: str | None = None) -> ResultRow:
    st, after_eval = steps(STEADY[nodes])
    summary = RunSummary(
        benchmark="smoke", status="success", run_start_ms=1000 * k, run_stop_ms=1000 * k + 1,
        global_batch_size=8 * nodes, progress_key="samples_count",
        eval_points=[EvalPoint(320 * nodes, 0.91, 0)], step_times=st,
        step_time_source="tracked_stats", eval_steps=after_eval)
    return ResultRow(
        id=100 * nodes + k, content_hash=f"h{nodes}-{k}-{resumed}", run_id=run_id,
        source="run", submitter="azbench", system=f"{nodes}xLocal_CPU", benchmark="smoke",
        status="success", converged=True, minutes=minutes, run_start_ms=1000 * k,
        global_batch_size=8 * nodes, nodes=nodes, gpus=0, sku="Local_CPU", resumed=resumed,
        summary_json=summary.model_dump_json(), created_at=T0 + timedelta(hours=nodes),
        ruleset="5.1.0", compliance_ok=True,  # the in-container checker's verdict, as a run records it
        compliance_json='{"ok": true, "ruleset": "5.1.0", "messages": [], "checked": true}')


@pytest.fixture
def rows() -> list[ResultRow]:
    out = []
    for nodes in (1, 2, 4):
        for k, m in enumerate((4.0, 3.0, 5.0)):
            out.append(smoke_row(nodes, k, m / nodes))
    out.append(smoke_row(2, 9, 0.1, resumed=True))  # fastest by far, but resumed: not scored
    return out


def gpu_row(sku: str, nodes: int, minutes: float, k: int) -> ResultRow:
    return ResultRow(content_hash=f"g{sku}{k}", source="import", round="v9.9", submitter="Org",
                     system=f"{sku}_n{nodes}", benchmark="gpt3", status="success",
                     converged=True, minutes=minutes, run_start_ms=k, nodes=nodes, gpus=8,
                     sku=sku)


def test_weak_scaling_from_median_step_times(rows) -> None:
    report = build_report(rows)
    weak = {w.nodes: w for w in report.weak_scaling}
    assert set(weak) == {2, 4} and all(w.nodes_base == 1 for w in weak.values())
    # first step and post-eval steps excluded: the medians are the steady values exactly
    assert weak[2].step_base_s == pytest.approx(1.00) and weak[2].step_s == pytest.approx(1.02)
    assert weak[2].efficiency == pytest.approx(1.00 / 1.02)
    assert weak[2].step_change == pytest.approx(0.02) and weak[2].min_max == pytest.approx(1 / 1.02)
    assert weak[4].efficiency == pytest.approx(1.00 / 0.95)  # > 1: never capped
    assert weak[4].step_change == pytest.approx(-0.05) and weak[4].min_max == pytest.approx(0.95)


def test_weak_scaling_stays_readable_when_the_step_time_more_than_doubles() -> None:
    STEADY[8] = 2.58  # the local 1 -> 4 node demo measured 0.077 -> 0.181 s: 1-|dt|/t was -58%
    try:
        rows = [smoke_row(1, 0, 1.0), smoke_row(8, 0, 1.0)]
    finally:
        del STEADY[8]
    (w,) = build_report(rows).weak_scaling
    assert w.efficiency == pytest.approx(1 / 2.58) and w.min_max == pytest.approx(1 / 2.58)
    assert w.step_change == pytest.approx(1.58)
    md = to_markdown(build_report(rows))
    weak_md = md.split("## Weak scaling")[1]
    row = next(line for line in weak_md.splitlines() if "-> azbench/8xLocal_CPU" in line)
    assert "| 38.76% | +158.00% | 38.76% |" in row and "-5" not in row


def test_groups_scores_resumed_runs_and_step_stats(rows) -> None:
    groups = {g.nodes: g for g in build_report(rows).groups}
    two = groups[2]
    assert (two.runs, two.required_runs, two.converged) == (4, 3, 4)
    assert two.resumed_runs == [209] and "1 resumed run(s) not scored" in two.score_note
    assert two.score_raw_minutes == pytest.approx(2.0)  # median of 2, 1.5, 2.5
    assert two.official and two.compliance == "passed" and two.verdict == "official"
    assert [r.scored for r in two.run_lines] == [True, False, False, False]  # 2.0 is run 0
    stats = two.step_stats
    assert stats is not None and stats.median == pytest.approx(1.02)
    assert stats.count == 4 * 36 and stats.cv == pytest.approx(0.0082, abs=5e-4)
    assert stats.excluded == 4 * 4  # each run's first step and the 3 after an eval (issue 47)
    assert two.throughput_per_minute == pytest.approx(640 / 2.0)
    assert two.workers == 2  # a CPU node has no GPU: scale by nodes
    # an emulated local node has no price: no cost figure at all, never an estimate of zero
    assert two.price_per_vm_hour is None and two.cost_per_result_usd is None
    assert two.cost_note == "no price (local)"
    strong = {(s.workers_small, s.workers_large): s for s in build_report(rows).strong_scaling}
    assert strong[(1, 4)].efficiency == pytest.approx(1.0)  # 4 min on 1 node, 1 min on 4


def test_cost_and_sku_speedup_at_equal_gpu_count() -> None:
    rows = [gpu_row("Standard_ND96isr_H100_v5", 1, m, k) for k, m in enumerate((10, 11, 12))]
    rows += [gpu_row("Standard_ND128isr_NDR_GB200_v6", 2, m, k + 5) for k, m in
             enumerate((4, 5, 6))]
    report = build_report(rows)
    h100 = next(g for g in report.groups if g.sku == "Standard_ND96isr_H100_v5")
    # per result: the 3 runs a gpt3 score needs, each at its own minutes; per run: the mean
    assert h100.cost_per_result_usd == pytest.approx(33 / 60 * 98.32)
    assert h100.cost_per_run_usd == pytest.approx(11 / 60 * 98.32)
    assert h100.cost_all_runs_usd == pytest.approx(33 / 60 * 98.32)
    (sp,) = report.speedups
    assert (sp.sku_a, sp.sku_b, sp.workers) == ("Standard_ND96isr_H100_v5",
                                                "Standard_ND128isr_NDR_GB200_v6", 8)
    assert sp.speedup == pytest.approx(11 / 5) and sp.speedup_per_gpu == pytest.approx(11 / 5)
    # 1 H100 VM vs 2 GB200 VMs (8 GPUs each way) at their list prices
    assert sp.speedup_per_dollar == pytest.approx((11 * 1 * 98.32) / (5 * 2 * 108.16))


def test_filters_and_attempt_cost(rows) -> None:
    runs = [RunRow(id="r1", cluster="c1", recipe="smoke", benchmark="smoke", nodes=4)]
    attempts = [AttemptRow(run_id="r1", attempt=a, started_at=T0,
                           ended_at=T0 + timedelta(minutes=30)) for a in (1, 2)]
    rows = rows + [smoke_row(4, 7, 1.0, run_id="r1")]
    report = build_report(rows, runs, attempts, cluster="c1")
    (g,) = report.groups
    assert g.runs == 1 and g.cost_all_attempts_usd is None and report.filters == {"cluster": "c1"}
    priced = [gpu_row("Standard_ND96isr_H100_v5", 1, 20.0, 1).model_copy(update={"run_id": "r1"})]
    (h100,) = build_report(priced, runs, attempts, cluster="c1").groups
    assert h100.cost_all_attempts_usd == pytest.approx(2 * 0.5 * 4 * 98.32)  # 2 x 30 min x 4 VMs
    with pytest.raises(ConfigError, match="cluster filter needs the runs"):
        build_report(rows, cluster="c1")
    assert {g.nodes for g in build_report(rows, since=T0 + timedelta(hours=2)).groups} == {2, 4}
    assert [g.system for g in build_report(rows, system="1xLocal_CPU").groups] == ["1xLocal_CPU"]
    assert build_report(rows, benchmark="bert").notes == ["no results match"]


def test_markdown_json_and_rich_carry_the_figures(rows) -> None:
    report = build_report(rows)
    md = to_markdown(report)
    assert "## Weak scaling (step time, fixed work per worker)" in md
    assert ("| smoke | azbench/1xLocal_CPU -> azbench/2xLocal_CPU | 1 -> 2 | 1.0000 | 1.0200 "
            "| 98.04% | +2.00% | 98.04% |") in md
    assert "| - | - | - | - | - | no price (local) |" in md
    cost_section = md.split("## Cost")[1].split("## ")[0]
    assert "0.00" not in cost_section and "estimate" not in cost_section
    assert "105.26%" in md  # 4 nodes: super-linear, shown as such
    data = json.loads(to_json(report))
    effs = sorted(w["efficiency"] for w in data["weak_scaling"])
    assert effs == pytest.approx([1 / 1.02, 1 / 0.95])
    assert data["groups"][0]["step_stats"]["median"] == pytest.approx(1.0)
    titles = [title for title, _, _ in sections(report)]  # the Markdown and HTML pages' sections, in order
    # the best per benchmark opens the report (issue 31), then every score
    assert titles[0].startswith("Best per benchmark")
    assert titles[1].startswith("Results per system")
    assert "Weak scaling (step time, fixed work per worker)" in titles


def test_attempt_history_shows_failures_exclusions_and_lost_work():
    from orchestrator.report.build import build_report
    from orchestrator.report.render import to_markdown
    from orchestrator.store.schema import AttemptRow, RunRow
    runs = [RunRow(id="rA", cluster="c", recipe="smoke", benchmark="smoke", nodes=2),
            RunRow(id="rB", cluster="c", recipe="smoke", benchmark="smoke", nodes=1)]
    attempts = [AttemptRow(run_id="rA", attempt=1, state="failed", failure_class="node_fail",
                           excluded_nodes=[], lost_steps=6, lost_seconds=1.7),
                AttemptRow(run_id="rA", attempt=2, state="succeeded", excluded_nodes=["node2"],
                           resumed_from_step=20),
                AttemptRow(run_id="rB", attempt=1, state="succeeded")]
    report = build_report([], runs, attempts)
    lines = [(a.run_id, a.attempt, a.failure_class, a.excluded_nodes, a.resumed_from_step)
             for a in report.attempt_history]
    assert lines == [("rA", 1, "node_fail", [], None), ("rA", 2, None, ["node2"], 20)]
    text = to_markdown(report)
    assert "Attempt history" in text and "node_fail" in text and "node2" in text


def test_compliance_verdict_is_shown_per_run():
    from orchestrator.report.build import build_report
    from orchestrator.report.render import to_markdown
    from orchestrator.store.schema import ResultRow
    rows = [ResultRow(content_hash=f"h{i}", source="import", system="sysA", benchmark="gpt3",
                      status="success", converged=True, minutes=4.0 + i, compliance_ok=ok)
            for i, ok in enumerate([True, False, None])]
    text = to_markdown(build_report(rows))
    run_rows = [line for line in text.splitlines() if line.startswith("| gpt3 | sysA |")
                and line.count("|") == 12 and line.split("|")[4].strip() == "success"]
    assert [r.split("|")[-2].strip() for r in run_rows] == ["pass", "FAIL", "not checked"]


# -- the Markdown report in parts (issue 38, point 8) ------------------------------------------------


@pytest.fixture(scope="module")
def many_report(tmp_path_factory: pytest.TempPathFactory):
    """The report of the synthetic 15-system MLPerf tree plus the shared logs (when present)."""
    from orchestrator.recipes.catalog import model_facts
    from orchestrator.results.importer import import_path
    from orchestrator.store.database import Store
    from tests.conftest import SHARED
    from testsupport.mlperf_tree import record_compliance_passed, write_tree
    tmp = tmp_path_factory.mktemp("parts")
    with Store.open(f"sqlite:///{tmp / 'db.sqlite'}") as store:
        import_path(store, write_tree(tmp / "tree"), archive_dir=tmp / "archive")
        if (SHARED / "mlperf-logs").is_dir():
            import_path(store, SHARED / "mlperf-logs", archive_dir=tmp / "archive")
        record_compliance_passed(store)
        results = store.list_results()
    return build_report(results, model_facts=model_facts())


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")]


@pytest.mark.parametrize("limit", [65_536, 4_000])
def test_markdown_parts_stay_under_the_limit_and_lose_no_row(many_report, limit: int) -> None:
    """index.md and one part per benchmark (NAME-2.md... where one would not fit), each under
    `limit` characters (a GitHub comment holds 65,536); every row of the whole report is in
    exactly one part (the best-per-benchmark rows in the index and in their benchmark's part)."""
    from orchestrator.report import render
    parts = render.markdown_parts(many_report, limit=limit)
    names = [n for n, _ in parts]
    assert names[0] == "index.md" and len(set(names)) == len(names)
    assert all(len(text) < limit for _, text in parts), [(n, len(t)) for n, t in parts]
    benchmarks = sorted({g.benchmark for g in many_report.groups})
    assert {n.split("-")[0].removesuffix(".md") for n in names if not n.startswith("index")} == set(benchmarks)
    index = parts[0][1] + "".join(t for n, t in parts if n.startswith("index-"))
    for bench in benchmarks:
        assert f"[{bench}]({bench}.md)" in index
    whole = [md_row for title, header, rows in sections(many_report) for md_row in
             (render._md_row(r) for r in rows)]
    best = {render._md_row(r) for r in render._best_section(many_report)[2]}
    found = [row for _, text in parts for row in _rows(text)]
    headers = {render._md_row(h) for _, h, _ in sections(many_report)}
    found = [row for row in found if row not in headers]
    assert sorted(row for row in found if row not in best) == sorted(row for row in whole if row not in best)
    if limit == 4_000:
        assert any(n.endswith("-2.md") for n in names)  # the long ones were split
        cont = next(t for n, t in parts if n.endswith("-2.md"))
        assert "(continued)" in cont.splitlines()[0]


def test_report_markdown_parts_through_the_cli(tmp_path: Path) -> None:
    from tests.cli_helpers import azbench_in_process
    home = tmp_path / "home"
    home.mkdir()
    from orchestrator.store.database import Store
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        for r in [smoke_row(1, k, 10.0 + k) for k in range(3)]:
            store.add_result(r)
    out = azbench_in_process("report", "--markdown", "--parts", str(tmp_path / "md"), home=home)
    assert out.code == 0, out.err
    written = sorted(p.name for p in (tmp_path / "md").iterdir())
    assert written == ["index.md", "smoke.md"]
    assert out.out.splitlines()[0] == f"{tmp_path / 'md' / 'index.md'}\t{len((tmp_path / 'md' / 'index.md').read_text()):,} characters"
    alone = azbench_in_process("report", "--parts", str(tmp_path / "md"), home=home)
    assert alone.code == 2 and "give --markdown too" in alone.err
