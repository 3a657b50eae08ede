"""Every figure has one definition and every view shows that one (issue 38, point 1).

One stress store of 24 systems (testsupport/mlperf_tree.py's 15 plus the 9 below: llama31_405b
on GB200 at 512, 2,560 and 5,120 GPUs with NVIDIA v5.1's batch sizes, weak-scaling series at
fixed and at changing work per GPU), rendered as every view: the report's JSON (`report
--json`), terminal summary (`report`, `--vs-published`), Markdown, the site (its compare page's
data and its history), `baseline`, `compare --json` and `plan --json`. Each figure must be the
same number in each, and that number must be what results.definitions computes from the stored
rows; a figure not defined for a pair (weak scaling at another work per GPU) must be absent from
every view, with its reason."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from orchestrator.forecast.plan import PlanRequest, make_plan
from orchestrator.hardware.catalog import lookup
from orchestrator.pipelines import baselines as bl
from orchestrator.pipelines.history import build_history
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import GroupReport, Report, build_report, group_label, group_results
from orchestrator.report.render import to_json, to_markdown
from orchestrator.report.site import write_site
from orchestrator.report.terminal import render_text, summary_view
from orchestrator.results import definitions as defs
from orchestrator.results.importer import import_path
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow
from tests.cli_helpers import azbench_in_process
from testsupport.mlperf_tree import (GB200, H200, L8B, L405, LORA, MANY, SynthSystem,
                                     record_compliance_passed, write_tree)

EXTRA = (
    # NVIDIA v5.1's three GB200 405B scales (tyche_ngpu512, hsg_ngpu2560, hsg_ngpu5120): batch
    # per GPU 2.25, 0.375, 0.25, so weak scaling between them is not defined.
    SynthSystem("Adatum", "gb200_n128_gbs1152", GB200, 128, 4, (L405,), mfu=0.28, gbs=1152, start_day=16),
    SynthSystem("Adatum", "gb200_n640_gbs960", GB200, 640, 4, (L405,), mfu=0.25, gbs=960, start_day=17),
    SynthSystem("Adatum", "gb200_n1280_gbs1280", GB200, 1280, 4, (L405,), mfu=0.24, gbs=1280,
                start_day=18),
    # H200 llama31_8b at 2 per GPU from 16 to 256 GPUs: weak scaling defined
    SynthSystem("Contoso", "ND_H200_v5_n8_nemo", H200, 8, 8, (L8B,), mfu=0.5, gbs=128, start_day=19),
    SynthSystem("Contoso", "ND_H200_v5_n32_nemo", H200, 32, 8, (L8B,), mfu=0.47, gbs=512, start_day=20),
    # GB200 LoRA: 0.5 per GPU on 32 GPUs (as the 16-GPU base), 0.11 on 144
    SynthSystem("Litware", "gb200-nvl72_n8_ngc25.09_nemo", GB200, 8, 4, (LORA,), mfu=0.46, gbs=16,
                start_day=21),
    SynthSystem("Litware", "gb200-nvl72_n36_ngc25.09_nemo", GB200, 36, 4, (LORA,), mfu=0.38, gbs=16,
                start_day=22),
    SynthSystem("Fabrikam", "dgx-h200_n4_ngc25.09_nemo", H200, 4, 8, (LORA,), mfu=0.49, start_day=23),
    SynthSystem("Fabrikam", "dgx-h200_n64_ngc25.09_nemo", H200, 64, 8, (L8B,), mfu=0.42, gbs=1024,
                start_day=24),
)


class Views:
    """The store's rows and every view rendered from them."""

    def __init__(self, home: Path, rows: list[ResultRow], site: Path) -> None:
        self.home, self.rows, self.site = home, rows, site
        self.report: Report = build_report(rows, model_facts=model_facts())
        self.json: dict[str, Any] = json.loads(to_json(self.report))
        self.markdown = to_markdown(self.report)
        self.terminal = summary_view(self.report, vs_published=True)
        self.text = render_text(self.terminal)
        self.entries = bl.entries_from(rows)
        self.baseline = bl.Baseline(name="stress", entries=self.entries)
        self.comparison = bl.compare(self.baseline, self.entries)
        self.history = build_history(rows, [], self.baseline)
        write_site(self.report, rows, site, history=self.history)
        page = (site / "compare.html").read_text()
        data = re.search(r'<script type="application/json" id="compare-data">(.*?)</script>', page, re.S)
        assert data is not None
        self.compare_page: dict[str, Any] = json.loads(data.group(1))


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> Views:
    tmp = tmp_path_factory.mktemp("figures")
    home = tmp / "home"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        import_path(store, write_tree(tmp / "tree", MANY + EXTRA), archive_dir=tmp / "archive",
                    check_compliance=False)
        record_compliance_passed(store)
        rows = store.list_results()
    return Views(home, rows, tmp / "site")


def _groups(v: Views) -> dict[str, GroupReport]:
    return {f"{g.benchmark} {g.label}": g for g in v.report.groups}


def _rows_of(v: Views) -> dict[str, list[ResultRow]]:
    return {f"{key[0]} {group_label(key)}": rows for key, rows in group_results(v.rows).items()}


def test_the_store_holds_at_least_20_systems(views: Views) -> None:
    systems = {g.label for g in views.report.groups}
    assert len(systems) == 24 and len(views.report.groups) >= 30


def test_the_score_step_time_and_cost_are_the_definitions_in_every_view(views: Views) -> None:
    v = views
    rows = _rows_of(v)
    by_json = {f"{g['benchmark']} {'/'.join(p for p in (g['round'], g['submitter'], g['system']) if p)}": g
               for g in v.json["groups"]}
    terminal = {(r["benchmark"], r["system"]): r for t in v.terminal.tables if t.name == "scores"
                for r in t.data()}
    site = {s["key"]: dict((m[0], m[1]) for m in s["metrics"]) for s in v.compare_page["systems"]}
    entries = {(e.benchmark, e.sku, e.nodes): e for e in v.entries}
    deltas = {(d.benchmark, d.sku, d.nodes, d.metric): d for d in v.comparison.deltas}
    at_scale: dict[tuple[str, str | None, int | None], int] = defaultdict(int)
    for g in v.report.groups:
        at_scale[(g.benchmark, g.sku, g.nodes)] += 1
    checked = 0
    for key, g in _groups(v).items():
        score = defs.time_to_train(rows[key], g.benchmark).value_minutes
        step = defs.step_time(rows[key])
        assert g.score_minutes == score, key
        # JSON, the terminal's data, the site's compare page, and the Markdown and text as printed
        assert by_json[key]["score_minutes"] == score and by_json[key]["cost_per_result_usd"] == g.cost_per_result_usd
        assert by_json[key]["mfu"] == g.mfu and by_json[key]["mfu_precision"] == g.mfu_precision
        t = terminal[(g.benchmark, g.label)]
        assert (t["score"], t["cost"], t["mfu"]) == (score, g.cost_per_result_usd, g.mfu)
        s = site[f"{g.benchmark} | {g.label}"]
        assert s["MLPerf score (min)"] == score and s["cost per result ($)"] == g.cost_per_result_usd
        assert s["MFU"] == g.mfu and s["median step (s)"] == (step.median if step else None)
        if score is not None:
            assert f"| {score:,.4f} |" in _md_row(v.markdown, "Results per system", g.label, g.benchmark)
            assert f"{score:,.3f}" in v.text
        if g.cost_per_result_usd is not None:
            assert f"| {g.cost_per_result_usd:,.2f} |" in _md_row(v.markdown, "Cost", g.label, g.benchmark)
        # baseline, compare and history: per scale; one system at the scale gives its figures
        e = entries[(g.benchmark, g.sku, g.nodes or 0)]
        if at_scale[(g.benchmark, g.sku, g.nodes)] == 1 and score is not None:
            assert e.value("time_to_train") == score, key
            assert deltas[(g.benchmark, g.sku, g.nodes, "time_to_train")].current_mean == score
            assert _history(v, g, "time_to_train") == [score]
            checked += 1
        if at_scale[(g.benchmark, g.sku, g.nodes)] == 1 and step is not None:
            assert e.value("step_time") == step.median
            assert deltas[(g.benchmark, g.sku, g.nodes, "step_time")].baseline_mean == step.median
            assert _history(v, g, "step_time") == [step.median]
    assert checked >= 25


def test_cost_per_result_is_the_runs_a_score_needs_in_the_report_and_the_plan(views: Views) -> None:
    v = views
    g = _groups(v)["llama31_405b v5.1/Adatum/gb200_n640_gbs960"]
    minutes = [r.minutes for r in _rows_of(v)["llama31_405b v5.1/Adatum/gb200_n640_gbs960"]]
    price = lookup("gb200").price_per_hour_usd
    assert price is not None and g.priced_vms == 640 and len(minutes) == 3
    assert g.cost_per_result_usd == pytest.approx(sum(m or 0 for m in minutes) / 60 * 640 * price)
    assert g.cost_per_run_usd == pytest.approx((g.score_raw_minutes or 0) / 60 * 640 * price)
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(640,),
                                 stored=tuple(r for r in v.rows if r.benchmark == "llama31_405b")))
    (row,) = plan.rows
    assert row.measured_minutes == g.score_minutes  # the plan's "measured" is the report's score
    # measured here: the runs' own wall times, scaled by the predicted over the measured score
    # (the plan keeps their spread, as the report prices each run; tests/test_plan_report_cost.py)
    ratio = row.minutes / g.score_minutes
    assert row.cost_per_result_usd == defs.cost_per_result([(m or 0) * ratio for m in minutes], 3, 640, price).usd
    assert row.cost_per_result_usd == pytest.approx(g.cost_per_result_usd * ratio)
    out = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--nodes", "640", "-o", "json",
                             home=v.home)
    assert out.code == 0, out.err
    assert json.loads(out.out)["rows"][0]["cost_per_result_usd"] == row.cost_per_result_usd
    report = azbench_in_process("report", "--json", "--benchmark", "llama31_405b", home=v.home)
    got = next(x for x in json.loads(report.out)["groups"] if x["system"] == "gb200_n640_gbs960")
    assert got["cost_per_result_usd"] == g.cost_per_result_usd


def test_weak_scaling_is_the_same_where_defined_and_absent_with_its_reason_elsewhere(views: Views) -> None:
    v = views
    entries = {(e.benchmark, e.sku, e.nodes): e for e in v.entries}
    defined = {(w.benchmark, w.sku, w.nodes): w for w in v.report.weak_scaling}
    nd_h200 = lookup("h200").name  # the importer reads Contoso's ND H200 v5 as the catalog size
    assert (L8B, nd_h200, 8) in defined and (L8B, nd_h200, 32) in defined  # 2 per GPU throughout
    assert (LORA, GB200, 8) in defined  # 0.5 per GPU, as the 4-node base
    for key, w in defined.items():
        e = entries[key]
        assert e.value("weak_scaling_efficiency") == w.efficiency
        d = next(d for d in v.comparison.deltas if (d.benchmark, d.sku, d.nodes) == key
                 and d.metric == "weak_scaling_efficiency")
        assert d.current_mean == w.efficiency
    refused = [n for n in v.report.notes if n.startswith("weak scaling ") and ": not defined: " in n]
    pairs = 0
    for e in v.entries:
        why = e.refused.get("weak_scaling_efficiency")
        if why is None:
            continue
        pairs += 1
        reason = why.split(": ", 1)[1]
        if "a step time is one system's" in why:  # its base scale holds two systems (issue 47)
            assert "systems at this scale" in why
            continue
        assert any(reason in n for n in refused), why
        assert "weak_scaling_efficiency" not in e.metrics and e.value("weak_scaling_efficiency") is None
        assert not [d for d in v.comparison.deltas if (d.benchmark, d.sku, d.nodes) == (e.benchmark, e.sku, e.nodes)
                    and d.metric == "weak_scaling_efficiency"]
        assert any(reason in n for n in v.comparison.notes)
        # the history compares scales within one occasion (here a day of imported logs, one
        # scale each): no point either way; tests/test_baselines.py has both in one occasion
        assert not [s for s in v.history.series if (s.benchmark, s.sku, s.nodes, s.metric)
                    == (e.benchmark, e.sku, e.nodes, "weak_scaling_efficiency")]
    assert pairs == len(refused) >= 4
    # the pair: 512 -> 2,560 GB200 GPUs at 2.25 and 0.375 per GPU
    assert (L405, GB200, 640) not in defined
    assert any("1,152/512 = 2.25 vs 960/2,560 = 0.375" in n for n in refused)
    # the baseline's 512-GPU scale holds two systems: no one step time to scale from (issue 47)
    assert "a step time is one system's" in entries[(L405, GB200, 640)].refused["weak_scaling_efficiency"]
    assert not [w for w in v.report.weak_scaling if w.efficiency > 2]  # no 5.414 anywhere
    md = v.markdown.split("## Weak scaling")[1].split("## ")[0] if "## Weak scaling" in v.markdown else ""
    assert "gb200_n640" not in md
    out = azbench_in_process("baseline", "set", "stress", "--benchmark", L405, "--yes", home=v.home)
    assert out.code == 0, out.err
    cmp = azbench_in_process("compare", "stress", "--benchmark", L405, "--json", home=v.home)
    assert cmp.code == 0, cmp.err
    data = json.loads(cmp.out)
    assert not [d for d in data["deltas"] if d["metric"] == "weak_scaling_efficiency" and d["nodes"] == 640]
    assert any("a step time is one system's" in n and "2,560 GPUs (640 nodes)" in n for n in data["notes"])
    ttt = next(d for d in data["deltas"] if d["metric"] == "time_to_train" and d["nodes"] == 640)
    assert ttt["current_mean"] == ttt["baseline_mean"] == _groups(v)["llama31_405b v5.1/Adatum/gb200_n640_gbs960"].score_minutes
    show = azbench_in_process("baseline", "show", "stress", home=v.home)
    assert "a step time is one system's" in show.out and "5.414" not in show.out


def test_the_published_neighbour_is_the_same_in_every_view_and_says_when_it_is_per_gpu(views: Views) -> None:
    v = views
    table = next(t for t in v.terminal.tables if t.name == "vs_published")
    rows = {(r["benchmark"], r["system"]): r for r in table.data()}
    per_gpu = same = 0
    for g in v.report.groups:
        n = g.published
        r = rows[(g.benchmark, g.label)]
        if n is None:
            assert r["delta"] is None
            continue
        assert r["delta"] == n.delta and r["per_gpu"] == n.per_gpu and r["nearest_gpus"] == n.gpus
        j = next(x for x in v.json["groups"] if x["benchmark"] == g.benchmark and x["system"] == g.system
                 and x["submitter"] == g.submitter)
        assert j["published"]["per_gpu"] == n.per_gpu and j["published"]["delta"] == n.delta
        if n.per_gpu:  # another GPU count: GPU-minutes per result, and the views say so
            per_gpu += 1
            assert n.gpus != g.gpus and r["basis"] == "per GPU"
            assert n.delta == pytest.approx((g.score_minutes or 0) * (g.gpus or 0) / (n.score_minutes * n.gpus) - 1)
            assert "(per GPU (GPU-minutes))" in _md_row(v.markdown, "Results per system", g.label, g.benchmark)
        else:
            same += 1
            assert n.gpus == g.gpus and r["basis"] == "=GPUs"
            assert n.delta == pytest.approx((g.score_minutes or 0) / n.score_minutes - 1)
    assert per_gpu and same
    # the site colours a delta only at the same GPU count
    page = (v.site / "index.html").read_text() + "".join(p.read_text() for p in (v.site / "bench").glob("*.html"))
    cells = [(("worse" in c.split()) or ("better" in c.split()), text) for c, text in
             re.findall(r'<td[^>]*class="delta([^"]*)"[^>]*>([^<]*)</td>', page)]
    assert cells and not [text for coloured, text in cells if coloured and "per GPU" in text]
    assert [text for coloured, text in cells if coloured and "per GPU" not in text]


def test_mfu_names_its_precision_in_every_view_and_bf16_above_100_is_a_note(views: Views) -> None:
    v = views
    g = _groups(v)["llama31_405b v5.1/Adatum/gb200_n128_gbs1152"]
    assert g.mfu is not None and g.mfu_precision == "fp8"  # not in SUBMISSIONS: the recipe's, said so
    assert "recipe's model.precision" in g.mfu_precision_source
    line = next(line for line in v.text.splitlines() if f"{g.score_minutes:,.3f}" in line)
    assert f"{g.mfu * 100:.1f}% fp8" in line
    assert f"{g.mfu * 100:.2f}% (fp8)" in v.markdown
    figures = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>',
                                   (v.site / "index.html").read_text(), re.S).group(1))  # type: ignore[union-attr]
    bars = figures["mfu"]["data"]
    over = [x for x in v.report.groups if x.mfu_bf16 is not None and x.mfu_bf16 > 1]
    assert over and all(x is None or x <= 100 for x in bars[1]["x"])  # no bar above 100%
    note = figures["mfu"]["layout"]["annotations"][0]["text"]
    assert "above 100%: not a utilisation" in note
    assert f"{over[0].mfu_bf16:.1%} vs dense BF16" in note


def _history(v: Views, g: GroupReport, metric: str) -> list[float]:
    return [p.value for s in v.history.series if (s.benchmark, s.sku, s.nodes, s.metric)
            == (g.benchmark, g.sku, g.nodes, metric) for p in s.points]


def _md_row(md: str, section: str, label: str, bench: str) -> str:
    part = md.split(f"## {section}")[1].split("\n## ")[0]
    return next(line for line in part.splitlines() if line.startswith(f"| {bench} | {label} |"))


def test_every_views_number_is_finite(views: Views) -> None:
    for g in views.json["groups"]:
        for key in ("score_minutes", "cost_per_result_usd", "cost_per_run_usd", "mfu"):
            assert g[key] is None or math.isfinite(g[key])


def test_plan_and_report_agree_on_cost_per_result_at_every_measured_scale(views: Views) -> None:
    """Issue 47.3: the plan prices a result with the report's function (the runs a score needs,
    each at its wall time: a predicted score / its RCP scaling factor), and at every count with
    a stored score its measured cost per result is the report's, to 2 % (here: exactly)."""
    v = views
    checked = 0
    for g in v.report.groups:
        if g.cost_per_result_usd is None or not g.catalog_size or g.priced_vms != g.nodes or not g.nodes:
            continue
        stored = tuple(r for r in v.rows if r.benchmark == g.benchmark)
        (row,) = make_plan(PlanRequest(benchmark=g.benchmark, sku=g.catalog_size, nodes=(g.nodes,),
                                       extrapolate=True, stored=stored)).rows
        price = lookup(g.catalog_size).price_per_hour_usd
        assert price is not None and row.scaling_factor > 0 and row.scaling_from
        runs = g.required_runs or 0
        named = next(x for x in v.report.groups
                     if f"stored: {x.label}" == row.measured_by and x.benchmark == g.benchmark)
        assert named.gpus == g.gpus and row.measured_cost_per_result_usd is not None
        assert row.measured_cost_per_result_usd == pytest.approx(named.cost_per_result_usd, rel=0.02)
        # predicted: the measured runs' wall times x predicted / measured score (their spread kept);
        # with equal runs that is runs x the predicted score / its RCP factor
        assert named.cost_per_result_usd is not None and named.score_minutes
        assert row.cost_per_result_usd == pytest.approx(
            named.cost_per_result_usd * row.minutes / named.score_minutes)
        assert row.cost_per_result_usd == pytest.approx(
            runs * row.minutes / row.scaling_factor / 60 * g.nodes * price, rel=0.05)
        checked += 1
    assert checked >= 20
    priced = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--nodes", "640", "--price",
                                "gb200=100", "-o", "json", home=v.home)
    assert priced.code == 0, priced.err
    data = json.loads(priced.out)
    assert data["price_per_vm_hour_usd"] == 100.0 and "--price" in data["price_note"]
    (row,) = data["rows"]
    report = json.loads(azbench_in_process("report", "--json", "--price", "gb200=100", home=v.home).out)
    got = next(x for x in report["groups"] if x["system"] == "gb200_n640_gbs960")
    assert row["cost_per_result_usd"] == pytest.approx(
        got["cost_per_result_usd"] * row["minutes"] / got["score_minutes"])  # measured runs, scaled
    assert row["measured_cost_per_result_usd"] == pytest.approx(got["cost_per_result_usd"], rel=1e-9)


def test_speedup_is_the_same_in_every_view_and_names_both_systems_and_rounds(views: Views) -> None:
    """Issue 47.3: one definition (results.definitions.sku_speedup), the same round unless asked,
    both systems and rounds named, in the JSON, the Markdown and the site's chart."""
    v = views
    groups = {(g.benchmark, g.label): g for g in v.report.groups}
    assert v.report.speedups
    figures = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>',
                                   (v.site / "index.html").read_text(), re.S).group(1))  # type: ignore[union-attr]
    chart = figures["speedup"]["data"][0]
    section = v.markdown.split("## Speedup between SKUs")[1].split("\n## ")[0]
    for i, s in enumerate(v.report.speedups):
        a, b = groups[(s.benchmark, s.system_a)], groups[(s.benchmark, s.system_b)]
        again = defs.sku_speedup(s.benchmark, s.workers, (a.sku or "", a.scale, a.system_price_per_hour),
                                 (b.sku or "", b.scale, b.system_price_per_hour), rounds=(a.round, b.round))
        assert again == s and not s.mixed_rounds and a.round == b.round == s.round_a == s.round_b
        j = v.json["speedups"][i]
        assert (j["speedup"], j["system_a"], j["system_b"]) == (s.speedup, s.system_a, s.system_b)
        assert chart["x"][i] == s.speedup and chart["customdata"][i] == s.text
        assert s.system_a in s.text and s.system_b in s.text
        assert any(s.system_a in line and s.system_b in line and f"| {s.speedup:,.3f} |" in line
                   for line in section.splitlines())
    names = [t["name"] for t in figures["speedup"]["data"]]
    assert ("per dollar" in names) == any(s.speedup_per_dollar is not None for s in v.report.speedups)


def _ttt_row(k: int, system: str, day: int, minutes: float) -> ResultRow:
    from datetime import datetime, timezone
    start = int(datetime(2026, 3, day, 8, tzinfo=timezone.utc).timestamp() * 1000) + k
    return ResultRow(id=k, content_hash=f"h{k}", source="import", round="v5.1", submitter="Org",
                     system=system, benchmark="gpt3", status="success", converged=True,
                     minutes=minutes, run_start_ms=start, run_stop_ms=start + int(minutes * 60000),
                     nodes=8, gpus=64, sku="h100")


def test_history_points_are_scores_or_runs_labelled_as_runs_and_one_systems() -> None:
    """Issue 47.3: runs spread over two days are no time to train on either day: each day's mean
    is marked partial (runs), never drawn as a score; a scale two systems share over time has no
    time-to-train or step-time series (it would pool them), and the notes say why."""
    from orchestrator.report import figures
    one = [_ttt_row(1, "sys_a", 1, 10.0), _ttt_row(2, "sys_a", 1, 11.0), _ttt_row(3, "sys_a", 2, 12.0)]
    hist = build_history(one, [], None)
    (ttt,) = [s for s in hist.series if s.metric == "time_to_train"]
    assert [p.value for p in ttt.points] == [10.5, 12.0]
    assert all(p.partial and "3 make a score" in p.partial for p in ttt.points)
    drawn = figures.history(ttt)
    assert [t["name"] for t in drawn["data"]] == ["runs' mean (not a score)"]
    whole = build_history([r.model_copy(update={"run_start_ms": one[0].run_start_ms}) for r in one], [], None)
    (score,) = [s for s in whole.series if s.metric == "time_to_train"]
    assert [(p.value, p.partial) for p in score.points] == [(11.0, None)]  # the median: a score
    two = one + [_ttt_row(4, "sys_b", 3, 9.0), _ttt_row(5, "sys_b", 3, 9.5), _ttt_row(6, "sys_b", 3, 9.9)]
    pooled = build_history(two, [], None)
    assert not [s for s in pooled.series if s.metric == "time_to_train"]
    assert any("2 systems at this scale over time" in n for n in pooled.notes)
