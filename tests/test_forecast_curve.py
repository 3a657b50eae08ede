"""The curve a report page embeds (forecast/curve.py): samples over the reach, the points marked,
and `evaluate` (the reference a page's "what would N nodes give?" input mirrors) equal to the
planner's numbers from the basis' parameters alone."""

from __future__ import annotations

import json
import math

import pytest

from orchestrator.forecast.basis import Band, basis_of
from orchestrator.forecast.curve import benchmark_curve, benchmark_curves, evaluate
from orchestrator.forecast.model import fit_points
from orchestrator.forecast.plan import PlanRequest, make_plan
from orchestrator.forecast.points import Point, SeriesPoints
from orchestrator.store.schema import ResultRow


def test_the_curve_covers_the_reach_and_embeds_small() -> None:
    curve = benchmark_curve("llama31_405b", "gb200")
    assert (curve.gpu, curve.sku_short, curve.gpus_per_node) == ("gb200", "ND GB200 v6", 4)
    assert curve.min_gpus == pytest.approx(256 / 4) and curve.max_gpus == pytest.approx(5120 * 4)
    gpus = [s.gpus for s in curve.samples]
    assert gpus == sorted(gpus) and gpus[0] == pytest.approx(64) and gpus[-1] == pytest.approx(20480)
    assert set(curve.basis.measured_gpus) <= set(gpus)  # the line passes through each measured count
    assert curve.node_steps == [18, 16] and curve.runs_required == 3 and curve.price_per_vm_hour_usd == 108.16
    assert all(s.low < s.minutes < s.high for s in curve.samples)
    assert curve.caption.startswith("stands on 9 published points")
    assert len(curve.model_dump_json()) < 40_000
    json.loads(curve.model_dump_json())


def test_evaluate_from_the_parameters_matches_the_plan() -> None:
    curve = benchmark_curve("llama31_405b", "gb200")
    for s in curve.samples:
        assert evaluate(curve.basis, s.gpus) == pytest.approx((s.minutes, s.low, s.high), rel=1e-12)
    plan = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(72, 640, 2048, 4608)))
    for row in plan.rows:
        assert evaluate(curve.basis, row.gpus) == pytest.approx((row.minutes, row.low, row.high), rel=1e-12)


@pytest.mark.parametrize("times", [
    [40.0, 22.0, 15.0, 14.0, 16.0],    # opens upwards, turns inside the data: held after the vertex
    [50.0, 49.0, 40.0, 20.0, 6.0],     # opens downwards: steeper with scale
    [100.0, 50.0, 25.0, 12.5, 6.25],   # a straight line
])
def test_evaluate_handles_every_shape(times: list[float]) -> None:
    points = [Point(gpus=8 * 2 ** i, minutes=t, group="v5.0", source="published", label=str(i))
              for i, t in enumerate(times)]
    fit = fit_points(points)
    band = Band(q=0.1, own=3, pool_series=1, pool_errors=5)
    basis = basis_of(SeriesPoints(benchmark="toy", gpu="h100", points=points), fit, band)
    for gpus in [1, 2, 8, 12, 24, 40, 100, 128, 200, 512, 4096]:
        assert evaluate(basis, gpus) == pytest.approx(band.interval(fit, gpus), rel=1e-12)
    later = [evaluate(basis, 2 ** k)[0] for k in range(0, 14)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(later, later[1:]))


def test_curves_for_a_benchmark_skip_sizes_without_two_counts() -> None:
    assert [c.gpu for c in benchmark_curves("llama31_405b")] == ["h100", "h200", "gb200"]
    assert "h200" not in [c.gpu for c in benchmark_curves("llama31_8b")]  # measured at 64 GPUs only
    assert benchmark_curves("smoke") == []


def test_stored_points_are_in_the_curve_and_set_its_level() -> None:
    stored = [ResultRow(content_hash=f"s{i}", source="run", system="64xND_H100_v5", benchmark="gpt3",
                        status="success", converged=True, minutes=m, run_start_ms=i, nodes=64, gpus=512,
                        sku="Standard_ND96isr_H100_v5") for i, m in enumerate((60.0, 61.0, 62.0))]
    curve = benchmark_curve("gpt3", "h100", stored)
    mine = [p for p in curve.basis.points if p.source == "stored"]
    assert len(mine) == 1 and mine[0].minutes == pytest.approx(61.0)
    assert curve.basis.level == "stored"
    assert math.isclose(evaluate(curve.basis, 512)[0], 61.0, rel_tol=0.05)


@pytest.mark.parametrize("benchmark", ["llama31_405b", "maskrcnn", "rnnt"])
def test_runs_required_is_the_plans(benchmark: str) -> None:
    """maskrcnn and rnnt (older rounds) are not in results.metrics' table: the published table's
    count, as the plan's cost uses it (the curve said 1, a page's cost 5-10x too low)."""
    curves = benchmark_curves(benchmark)
    assert curves
    for c in curves:
        assert c.runs_required == make_plan(PlanRequest(benchmark=benchmark, sku=c.sku)).runs_required > 1


def test_a_stored_score_of_zero_minutes_is_left_out_not_a_crash() -> None:
    """A stored log whose run_stop is its run_start scores 0 minutes: ln 0 broke the fit (and so
    `azbench plan` and every site with such a result); it is left out with the reason."""
    stored = [ResultRow(content_hash=f"z{i}", source="run", system="64xND_H100_v5", benchmark="gpt3",
                        status="success", converged=True, minutes=0.0, run_start_ms=i, nodes=64, gpus=512,
                        sku="Standard_ND96isr_H100_v5") for i in range(3)]
    curve = benchmark_curve("gpt3", "h100", stored)
    assert all(p.source == "published" for p in curve.basis.points)
    assert any(x.reason == "a score of 0 minutes" for x in curve.basis.left_out)
