"""The report's answer first (issue 31): MLPerf scores as MLCommons publishes them, the best per
benchmark and GPU type, the published neighbour of every score, cost on real (imported) data
with the price's source, and a terminal summary that fits 100 columns.

Data: the shared MLPerf logs (skipped when ../shared is absent) and the synthetic many-system
tree of testsupport/mlperf_tree.py (15 systems, H100/H200/GB200/GB300 and one unknown part)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.hardware.catalog import CATALOG, accelerator_names, lookup
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import Report, build_report
from orchestrator.report.cost import parse_price
from orchestrator.report.gpus import match_gpu
from orchestrator.report.terminal import render_text, summary_view
from orchestrator.results.importer import import_path
from orchestrator.results.published import load_published
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow
from tests.cli_helpers import azbench_in_process
from tests.conftest import SHARED
from testsupport.mlperf_tree import record_compliance_passed, write_tree

LOGS = SHARED / "mlperf-logs"


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store (sqlite file) of the synthetic tree plus the shared logs when present."""
    tmp = tmp_path_factory.mktemp("synth")
    db = tmp / "home" / "azbench.db"
    db.parent.mkdir()
    with Store.open(f"sqlite:///{db}") as store:
        import_path(store, write_tree(tmp / "tree"), archive_dir=tmp / "archive")
        if LOGS.is_dir():
            import_path(store, LOGS, archive_dir=tmp / "archive")
        record_compliance_passed(store)
    return db


@pytest.fixture(scope="module")
def synth(synth_store: Path) -> Report:
    with Store.open(f"sqlite:///{synth_store}") as store:
        return build_report(store.list_results(), model_facts=model_facts())


# -- GPU types and the accelerator table ---------------------------------------------------------


def test_every_mlperf_accelerator_name_has_a_gpu_type_and_mapped_ones_a_catalog_size() -> None:
    for name, alias in accelerator_names().items():
        m = match_gpu(name)
        assert m.label and not m.unmapped, name
        assert (m.row is not None) == (alias is not None), name
        if alias is not None:
            assert m.row is not None and m.row.name == lookup(alias).name and not m.exact
    assert match_gpu("NVIDIA H100-SXM5-80GB").label == "H100"
    assert match_gpu("NVIDIA Blackwell GPU (GB200)").label == "GB200"
    gb300 = match_gpu("NVIDIA Blackwell Ultra GPU (GB300)")
    assert gb300.label == "GB300" and gb300.row is not None and gb300.row.name == "Standard_ND128isr_GB300_v6"
    assert match_gpu("NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)").label == "B300"  # HGX: no Azure size
    assert match_gpu("NVIDIA H100-PCIe-80GB").label == "H100-PCIe-80GB"  # not the catalog's H100
    exact = match_gpu("Standard_ND96isr_H200_v5")
    assert exact.exact and exact.label == "H200"
    odd = match_gpu("Wingtip XPU-9 (prototype)")
    assert odd.unmapped and odd.row is None and "'Wingtip XPU-9 (prototype)'" in odd.note


def test_every_catalog_size_says_where_its_price_comes_from() -> None:
    for row in CATALOG:
        assert row.price_source, row.name
        if row.price_per_hour_usd is not None:
            assert "Retail Prices API" in row.price_source, row.name
    h200 = lookup("h200")
    assert h200.price_per_hour_usd == pytest.approx(84.80) and h200.price_date == "2026-09-27"


def test_unmapped_accelerator_is_a_warning_naming_it(synth: Report) -> None:
    warnings = [n for n in synth.notes if n.startswith("warning:")]
    assert warnings == ["warning: unmapped accelerator 'Wingtip XPU-9 (prototype)': not in "
                        "the catalog's accelerator table (sizes.yaml), so no GPU type, list price or "
                        "published neighbour"]


# -- cost ---------------------------------------------------------------------------------------


def test_cost_of_imported_systems_is_the_same_gpus_on_azure(synth: Report) -> None:
    groups = {(g.benchmark, g.system): g for g in synth.groups}
    # 18 nodes x 4 GB200 = 72 GPUs = 18 x ND GB200 v6 (4 GPUs per VM) at $108.16/h
    gb200 = groups[("llama2_70b_lora", "gb200-nvl72_n18_ngc25.09_nemo")]
    assert gb200.gpu_type == "GB200" and gb200.priced_vms == 18
    # per result: the 10 runs a LoRA score needs, each at its own minutes; per run: the mean
    minutes = [r.minutes or 0 for r in gb200.run_lines[:10]]
    assert gb200.cost_per_result_usd == pytest.approx(18 * 108.16 * sum(minutes) / 60)
    assert gb200.cost_per_run_usd == pytest.approx(18 * 108.16 * (gb200.score_raw_minutes or 0) / 60)
    # 9 DGX nodes x 8 H100 = 72 GPUs = 9 x ND H100 v5
    dgx = groups[("llama2_70b_lora", "dgx-h100_n9_ngc25.09_nemo_tp4pp1cp2_fp8_hybrid")]
    assert dgx.priced_vms == 9 and dgx.system_price_per_hour == pytest.approx(9 * 98.32)
    assert "72 H100 as 9 x ND H100 v5 on Azure at $98.32/VM-hour, read 2026-09-27" in dgx.cost_note
    # An Azure submission is priced as its own VMs (the size the importer read from its name)
    nd = groups[("llama2_70b_lora", "ND_H200_v5_n16_nemo")]
    assert nd.priced_vms == 16 and nd.cost_note.startswith("list-price estimate: 16 x ND H200 v5")
    gb300 = groups[("llama2_70b_lora", "gb300-nvl72_n18_ngc25.09_nemo")]
    # ND GB300 v6 has no published list price: cost unknown until --price gives one; MFU from its peaks
    assert gb300.cost_per_result_usd is None and gb300.gpu_type == "GB300"
    assert gb300.mfu and gb300.mfu_peak_tflops == lookup("gb300").peak_tflops(gb300.mfu_precision or "")
    assert "dense peaks of GB300 Blackwell Ultra 288GB" in gb300.mfu_note
    assert gb300.cost_note == ("cost unknown: no list price for Standard_ND128isr_GB300_v6 "
                               "(give one with --price gb300=USD)")
    # Every score on H100, H200 or GB200 has a cost
    assert all(g.cost_per_result_usd is not None for g in synth.groups
               if g.gpu_type in ("H100", "H200", "GB200") and g.score_minutes is not None)


def test_price_override_and_its_errors(synth_store: Path) -> None:
    with Store.open(f"sqlite:///{synth_store}") as store:
        rows = store.list_results(benchmark="llama2_70b_lora")
    name, usd = parse_price("h200=50")
    assert (name, usd) == ("Standard_ND96isr_H200_v5", 50.0)
    report = build_report(rows, prices={name: usd})
    nd = next(g for g in report.groups if g.system == "ND_H200_v5_n16_nemo")
    assert nd.price_per_vm_hour == 50.0 and nd.price_source == "--price"
    assert "at $50.00/VM-hour (--price); per result: 10 runs for a score, each at its own minutes" \
        in nd.cost_note
    assert nd.cost_per_result_usd == pytest.approx(16 * 50 * sum(r.minutes or 0 for r in nd.run_lines) / 60)
    assert nd.cost_per_run_usd == pytest.approx(16 * 50 * (nd.score_raw_minutes or 0) / 60)
    # ND GB300 v6 has no list price: --price gb300=USD prices its published results as Azure VMs
    gb300, usd = parse_price("gb300=80")
    report = build_report(rows, prices={gb300: usd})
    g = next(g for g in report.groups if g.system == "gb300-nvl72_n18_ngc25.09_nemo")
    assert g.priced_vms == 18 and g.price_source == "--price"
    assert g.cost_per_result_usd == pytest.approx(18 * 80 * sum(r.minutes or 0 for r in g.run_lines) / 60)
    assert g.cost_per_run_usd == pytest.approx(18 * 80 * (g.score_raw_minutes or 0) / 60)
    assert "72 GB300 as 18 x ND GB300 v6 on Azure at $80.00/VM-hour (--price)" in g.cost_note
    for bad, why in (("h200", "expected SKU=USD_PER_HOUR"), ("nope=3", "unknown SKU 'nope'"),
                     ("h100=-2", "not a positive price"), ("h100=abc", "not a positive price"),
                     ("h100=nan", "not a positive price")):
        with pytest.raises(ConfigError, match=why):
            parse_price(bad)


def test_speedup_per_dollar_uses_the_priced_systems() -> None:
    def row(sku: str, nodes: int, minutes: float, k: int) -> ResultRow:
        return ResultRow(content_hash=f"{sku}{k}", source="import", round="v9.9", submitter="Org",
                         system=f"{sku}_n{nodes}", benchmark="gpt3", status="success",
                         converged=True, minutes=minutes, run_start_ms=k, nodes=nodes,
                         gpus=nodes * (4 if "GB200" in sku else 8), sku=sku)

    rows = [row("NVIDIA H100-SXM5-80GB", 2, m, k) for k, m in enumerate((10, 11, 12))]
    rows += [row("NVIDIA Blackwell GPU (GB200)", 4, m, k + 5) for k, m in enumerate((4, 5, 6))]
    (sp,) = build_report(rows).speedups
    assert (sp.sku_a, sp.workers, sp.speedup) == ("NVIDIA H100-SXM5-80GB", 16, pytest.approx(11 / 5))
    # 16 H100 = 2 x ND H100 v5; 16 GB200 = 4 x ND GB200 v6
    assert sp.speedup_per_dollar == pytest.approx((11 * 2 * 98.32) / (5 * 4 * 108.16))


# -- scores, best per benchmark, the published record ---------------------------------------------


def test_headline_scores_equal_the_published_scores_of_the_shared_logs(shared_logs: Path,
                                                                       tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        import_path(store, shared_logs, archive_dir=tmp_path / "archive")
        report = build_report(store.list_results())
    assert len(report.groups) == 5
    for g in report.groups:
        assert g.published_score_minutes is not None, g.label
        assert g.score_minutes == pytest.approx(g.published_score_minutes, rel=1e-9), g.label
        assert g.published is not None and g.published.system != g.system  # never itself
    eos = next(g for g in report.groups if g.system == "eos-dfw_n64_ngc25.01_nemo")
    # the example: 405B on 512 H100 is published as 269.1 min (230.7 x 7/6), not 230.7
    assert eos.score_minutes == pytest.approx(269.1216, abs=1e-4)
    assert eos.score_raw_minutes == pytest.approx(230.6756, abs=1e-4)


def test_best_per_benchmark_is_the_fastest_official_score_per_gpu_type(synth: Report) -> None:
    keys = [(b.benchmark, b.gpu_type) for b in synth.best]
    assert len(keys) == len(set(keys))
    for b in synth.best:
        same = [g for g in synth.groups if g.benchmark == b.benchmark and g.gpu_type == b.gpu_type
                and g.official]
        assert b.score_minutes == min(g.score_minutes or math.inf for g in same)
        assert b.scores == len(same)
    assert {b.gpu_type for b in synth.best if b.benchmark == "llama31_405b"} >= {"H100", "GB200",
                                                                                 "GB300"}


def test_nearest_published_result_prefers_the_same_gpu_count(synth: Report) -> None:
    published = load_published()
    # a published result stored in the report is one of the systems compared, never a neighbour
    stored = {(h.submitter, h.system, h.round) for h in synth.groups}
    for g in synth.groups:
        n = g.published
        if g.gpu_type == "Wingtip XPU-9" or not g.gpus:
            assert n is None
            continue
        assert n is not None, g.label
        same = [r for r in published if r.division == "closed" and r.accelerators == g.gpus
                and r.benchmark == g.benchmark and match_gpu(r.accelerator).label == g.gpu_type
                and (r.org, r.system, r.round) not in stored]
        assert n.same_gpus == bool(same) and n.per_gpu == (not same), g.label
        if same:
            assert n.score_minutes in {r.score_minutes for r in same}
            assert n.delta == pytest.approx((g.score_minutes or 0) / n.score_minutes - 1)
        else:  # another GPU count: compared per GPU, in GPU-minutes per result
            assert n.gpus != g.gpus
            assert n.delta == pytest.approx((g.score_minutes or 0) * g.gpus / (n.score_minutes * n.gpus) - 1)


# -- the terminal summary --------------------------------------------------------------------------


def test_terminal_summary_fits_100_columns_in_under_110_lines(synth: Report) -> None:
    text = render_text(summary_view(synth))
    lines = text.splitlines()
    # under 110 (was 80): a system name too long for its column is printed whole on its own line (issue 49),
    # and the step model adds its table (issue 45); 13 bests and 27 scores, 104 lines here
    assert len(lines) < 110 and max(map(len, lines)) <= 100
    assert not set("│┃━┏┓┗┛═╇┡").intersection(text)  # borderless
    assert lines[0].startswith("azbench report: ") and "Best per benchmark" in text
    header = next(line for line in lines if line.strip().startswith("system"))
    assert header.split()[:4] == ["system", "GPU", "GPUs", "score"]
    assert sum(1 for line in lines if "  official  " in line) == \
        sum(1 for g in synth.groups if g.official)  # one line per score
    # narrower terminals get narrower lines, different systems stay different when cut
    narrow = render_text(summary_view(synth), width=80).splitlines()
    assert max(map(len, narrow)) <= 80
    llama = [line.split()[0] for line in narrow if "GB200" in line and " 16 " in line]
    assert llama and len(set(llama)) == len(llama)


def test_runs_and_vs_published_options(synth: Report) -> None:
    runs = render_text(summary_view(synth, runs=True))
    assert sum(1 for line in runs.splitlines() if line.endswith("pass")) == \
        sum(g.runs for g in synth.groups)
    vs = render_text(summary_view(synth, vs_published=True)).splitlines()
    nearest = [line for line in vs if line.strip().startswith("nearest: ")]
    assert len(nearest) == sum(1 for g in synth.groups if g.published is not None)
    assert any("none published for Wingtip XPU-9" in line for line in vs)
    assert max(map(len, vs)) <= 100
    view = summary_view(synth, vs_published=True)
    table = next(t for t in view.tables if t.name == "vs_published")
    assert all(isinstance(r["delta"], float) or r["delta"] is None for r in table.data())


def test_cli_report_defaults_to_the_summary(synth_store: Path) -> None:
    home = synth_store.parent
    out = azbench_in_process("report", home=home)
    assert out.code == 0, out.err
    assert len(out.out.splitlines()) < 110 and "Best per benchmark" in out.out
    vs = azbench_in_process("report", "--vs-published", "--price", "gb200=100", home=home)
    assert vs.code == 0 and "nearest: " in vs.out
    bad = azbench_in_process("report", "--price", "gb200", home=home)
    assert bad.code == 2 and "expected SKU=USD_PER_HOUR" in bad.err


def test_cli_until_before_every_result_says_none_match(synth_store: Path) -> None:
    """--until is a filter of the store's query, like --since: a date before every result
    selects nothing, and the report says so rather than printing empty tables."""
    out = azbench_in_process("report", "--until", "2000-01-01", home=synth_store.parent)
    assert (out.code, out.out, out.err) == (0, "no results match these filters\n", "")


def test_nearest_published_is_never_a_result_stored_in_the_same_comparison() -> None:
    """Issue 47.6: with two published systems stored side by side, each one's "nearest
    published" was the other system of the pair. It is now a published result the report does
    not already hold."""
    from orchestrator.results.definitions import published_neighbour
    dell = next(r for r in load_published() if r.round == "v3.1" and r.org == "Dell"
                and r.system == "XE8640x4H100-SXM-80GB" and r.benchmark_key == "retinanet")
    alone = published_neighbour("retinanet", "h100", dell.accelerator, 4, None, dell)
    assert alone is not None
    other = next(r for r in load_published() if (r.round, r.org, r.system, r.benchmark_key)
                 == (alone.round, alone.submitter, alone.system, "retinanet"))

    def rows(p: object, k: int) -> list[ResultRow]:
        return [ResultRow(content_hash=f"{p.system}{i}", source="import", round=p.round,  # type: ignore[attr-defined]
                          submitter=p.org, system=p.system, benchmark="retinanet",  # type: ignore[attr-defined]
                          status="success", converged=True, minutes=p.score_minutes,  # type: ignore[attr-defined]
                          run_start_ms=k + i, nodes=1, gpus=4, sku=p.accelerator)  # type: ignore[attr-defined]
                for i in range(5)]

    report = build_report(rows(dell, 0) + rows(other, 100))
    assert len(report.groups) == 2
    stored = {(dell.round, dell.org, dell.system), (other.round, other.org, other.system)}
    for g in report.groups:
        assert g.published is not None, g.label
        assert (g.published.round, g.published.submitter, g.published.system) not in stored, g.label
