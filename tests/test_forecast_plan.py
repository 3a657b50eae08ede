"""The planner (forecast/plan.py): node counts, cost, quota, target and budget marks, the 4x
refusal, unknown prices and stored results, on the vendored table of published results."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.forecast.plan import PlanRequest, make_plan
from orchestrator.forecast.render import plan_lines, plan_table
from orchestrator.hardware.catalog import lookup
from orchestrator.hardware.layout import scale_set_layout
from orchestrator.store.schema import ResultRow

GB200 = lookup("gb200")


def test_gb200_default_counts_are_whole_racks_and_the_recipe_scales_within_4x() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200"))
    nodes = [r.nodes for r in plan.rows]
    assert nodes == sorted(nodes)
    assert {128, 640, 2048} <= set(nodes)  # recipes/llama31_405b.yaml's GB200 scales
    assert {18, 36, 72, 144, 288, 576, 1152, 2304, 4608} <= set(nodes)  # 1..256 racks of 18
    for row in plan.rows:
        assert row.racks is not None and row.racks * (row.vms_per_rack or 0) == row.nodes
        assert row.gpus == row.nodes * 4
        assert row.extrapolation <= 4.0
        assert row.vcpus == row.nodes * GB200.vcpus and row.quota_family == GB200.quota_family
        assert row.cost_per_hour_usd == pytest.approx(row.nodes * 108.16)
        assert row.cost_per_result_usd == pytest.approx(3 * row.minutes / row.scaling_factor / 60 * row.nodes * 108.16)
        assert row.low < row.minutes < row.high
    assert plan.rows[0].strong_scaling == pytest.approx(1.0)
    at_640 = next(r for r in plan.rows if r.nodes == 640)
    assert at_640.position == "measured" and at_640.measured_minutes == pytest.approx(18.794, abs=1e-3)
    assert at_640.measured_by == "v5.1 NVIDIA hsg_ngpu2560_ngc25.09_nemo"


def test_the_racks_column_is_the_layout_up_would_build() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(2, 18, 32, 144),
                                 extrapolate=True))
    for row in plan.rows:
        sets, _ = scale_set_layout("plan", row.nodes, GB200)
        assert row.racks == sum(s.racks or 0 for s in sets), row
        assert row.racks is not None and row.racks * (row.vms_per_rack or 0) == row.nodes
    assert {r.nodes: (r.racks, r.vms_per_rack) for r in plan.rows} == {
        2: (1, 2), 18: (1, 18), 32: (2, 16), 144: (8, 18)}  # 2 nodes: one partial rack, as `up` lays it out


def test_every_row_says_what_it_stands_on() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(576, 640, 2048)))
    by_nodes = {r.nodes: r for r in plan.rows}
    assert by_nodes[576].stands_on == "between 2,048 and 2,496 GPUs"
    assert by_nodes[640].stands_on == "2,560 GPUs measured"
    assert by_nodes[2048].stands_on == "1.6x past 5,120 GPUs" and by_nodes[2048].position == "above"
    assert plan.basis.low_gpus == 256 and plan.basis.high_gpus == 5120
    assert plan.basis.text[0].startswith("stands on 9 published points at 8 GPU counts, 256-5,120 GPUs")
    lines = plan_lines(plan)
    assert any("v5.1 NVIDIA hsg_ngpu5120_ngc25.09_nemo" in line for line in lines)
    columns, cells = plan_table(plan)
    assert "stands on" in columns and len(cells) == 3 and cells[1][columns.index("measured min")] == "18.79 (v5.1 NVIDIA)"


def test_the_target_marks_the_cheapest_count_that_meets_it() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", target_minutes=15))
    assert plan.target is not None and plan.target.nodes is not None
    chosen = next(r for r in plan.rows if r.nodes == plan.target.nodes)
    assert "target" in chosen.marks and chosen.minutes <= 15
    assert chosen.nodes % 18 == 0 or chosen.nodes % 16 == 0
    # The whole-rack counts just below it (fewer VM-hours per result: scaling is sublinear here)
    # do not meet it.
    below = tuple(n for n in range(chosen.nodes - 72, chosen.nodes) if n % 18 == 0 or n % 16 == 0)
    smaller = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=below)).rows
    assert len(smaller) >= 8
    assert all(r.minutes > 15 and r.vm_hours_per_result < chosen.vm_hours_per_result for r in smaller)
    upper = plan.target_upper
    assert upper is not None and upper.nodes is not None and upper.nodes >= chosen.nodes
    safe = next(r for r in plan.rows if r.nodes == upper.nodes)
    assert safe.high <= 15 and "target at the upper bound" in safe.marks


def test_an_unreachable_target_says_so() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", target_minutes=0.5))
    assert plan.target is not None and plan.target.nodes is None
    assert plan.target.text.startswith("no count up to")
    assert not any(r.marks for r in plan.rows)


def test_the_budget_marks_the_fastest_count_within_it() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="h100", budget_usd=100_000))
    assert plan.budget is not None and plan.budget.nodes is not None
    chosen = next(r for r in plan.rows if r.nodes == plan.budget.nodes)
    assert "budget" in chosen.marks and (chosen.cost_per_result_usd or 0) <= 100_000
    bigger = make_plan(PlanRequest(benchmark="llama31_405b", sku="h100", nodes=(chosen.nodes + 1,))).rows[0]
    assert (bigger.cost_per_result_usd or 0) > 100_000 or bigger.minutes >= chosen.minutes
    poor = make_plan(PlanRequest(benchmark="llama31_405b", sku="h100", budget_usd=10))
    assert poor.budget is not None and poor.budget.nodes is None and poor.budget.text.startswith("no count fits")


def test_a_missing_price_is_unknown_with_the_reason_never_a_number() -> None:
    # ND MI300X v5 has no list price in the catalog (H200 got one with the report's prices).
    plan = make_plan(PlanRequest(benchmark="llama2_70b_lora", sku="mi300x"))
    assert plan.price_per_vm_hour_usd is None and plan.price_note.startswith("unknown: ")
    assert all(r.cost_per_result_usd is None and r.cost_per_hour_usd is None for r in plan.rows)
    columns, cells = plan_table(plan)
    assert {c[columns.index("$/result")] for c in cells} == {"unknown"}
    with pytest.raises(ConfigError, match="--budget needs a price: ND MI300X v5"):
        make_plan(PlanRequest(benchmark="llama2_70b_lora", sku="mi300x", budget_usd=1000))


def test_predictions_past_4x_are_refused_unless_asked() -> None:
    with pytest.raises(ConfigError, match=r"--nodes 5760: 23,040 GPUs is 4.5x the largest measured scale "
                                          r"\(5,120 GPUs\) of llama31_405b on ND GB200 v6; predictions stop at 4x"):
        make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(5760,)))
    with pytest.raises(ConfigError, match="below the smallest measured scale"):
        make_plan(PlanRequest(benchmark="llama31_405b", sku="h100", nodes=(8,)))
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(5760,), extrapolate=True))
    assert plan.rows[0].extrapolation == pytest.approx(4.5) and plan.rows[0].stands_on == "4.5x past 5,120 GPUs"
    # Exactly 4x is still answered.
    assert make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(5120,))).rows[0].extrapolation == 4.0


@pytest.mark.parametrize("nodes, message", [
    ((0,), "node counts must be at least 1"),
    ((100,), "--nodes 100: ND GB200 v6 comes in NVL72 racks of 18 VMs"),
])
def test_node_counts_a_size_cannot_have_are_refused(nodes: tuple[int, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=nodes))


def test_bad_benchmarks_and_skus_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="unknown benchmark"):
        make_plan(PlanRequest(benchmark="llama99", sku="gb200"))
    with pytest.raises(NotFoundError, match="unknown SKU 'h900'"):
        make_plan(PlanRequest(benchmark="gpt3", sku="h900"))
    with pytest.raises(ConfigError, match="has no GPU"):
        make_plan(PlanRequest(benchmark="gpt3", sku="d4s_v5"))
    with pytest.raises(NotFoundError, match="no published or stored llama31_405b results on ND MI300X v5"):
        make_plan(PlanRequest(benchmark="llama31_405b", sku="mi300x"))
    with pytest.raises(ConfigError, match="measured at one GPU count only"):
        make_plan(PlanRequest(benchmark="llama31_8b", sku="h200"))


def test_stored_results_take_precedence_and_are_marked() -> None:
    runs = [ResultRow(content_hash=f"x{i}", source="run", system="16xND_H100_v5", benchmark="gpt3",
                      status="success", converged=True, minutes=m, run_start_ms=i, nodes=64, gpus=512,
                      sku="Standard_ND96isr_H100_v5") for i, m in enumerate((60.0, 62.0, 61.0))]
    plan = make_plan(PlanRequest(benchmark="gpt3", sku="h100", nodes=(64, 128), stored=tuple(runs)))
    assert plan.basis.level == "stored"
    at_64 = next(r for r in plan.rows if r.nodes == 64)
    assert at_64.measured_minutes == pytest.approx(61.0) and at_64.measured_by == "stored: 16xND_H100_v5"
    assert at_64.minutes == pytest.approx(61.0, rel=0.05)  # predictions at the stored level
    published = make_plan(PlanRequest(benchmark="gpt3", sku="h100", nodes=(64,)))
    assert published.rows[0].minutes < 55  # the v4.1 level is ~50 min at 512 GPUs
    columns, cells = plan_table(plan)
    assert cells[0][columns.index("measured min")] == "61.00* (stored)"
    assert any("stored" in line and "take precedence" in line for line in plan.notes)


def test_measured_speedups_between_gpus_are_only_where_both_were_measured() -> None:
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(128,)))
    assert plan.comparisons, "GB200 and H100 share 512, 2,048 and 2,560 GPUs"
    for line in plan.comparisons:
        gpus = int(line.split(" GPUs")[0].removeprefix("at ").replace(",", ""))
        assert gpus in plan.basis.measured_gpus
