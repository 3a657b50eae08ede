"""Forward in time (forecast.forward): fit on earlier rounds, predict the next; the new-round term
of the planner's interval; stored copies of published results counted once; measured cells that
say whose result they are."""

from __future__ import annotations

import math

import pytest

from orchestrator.forecast import record
from orchestrator.forecast.forward import combined, forward_cases, level_shifts, round_term, validate_forward
from orchestrator.forecast.loo import COVERAGE, summarize
from orchestrator.forecast.plan import PlanRequest, make_plan
from orchestrator.forecast.points import Point, SeriesPoints, series_points
from orchestrator.forecast.render import plan_table
from orchestrator.store.schema import ResultRow


def _point(gpus: int, minutes: float, group: str) -> Point:
    return Point(gpus=gpus, minutes=minutes, group=group, source="published", label=f"{group} X {gpus}",
                 by=f"{group} X", round=group)


def _series(name: str, rounds: dict[str, dict[int, float]]) -> SeriesPoints:
    return SeriesPoints(benchmark=name, gpu="h100",
                        points=[_point(g, m, r) for r, pts in rounds.items() for g, m in pts.items()])


def test_a_round_is_predicted_from_earlier_rounds_only() -> None:
    # v1: perfect power law T = 1000/N; v2 runs 20% faster at every count.
    early = {8: 125.0, 16: 62.5, 32: 31.25}
    late = {g: m / 1.2 for g, m in early.items()}
    cases = forward_cases([_series("b", {"v1.0": early, "v2.0": late})])
    assert {c.round for c in cases} == {"v2.0"} and len(cases) == 3  # the first round has no past
    for c in cases:  # predicted at v1.0's level: ln(1.2) too slow, the level shift the round brought
        assert c.log_error == pytest.approx(math.log(1.2), abs=1e-9)
    assert level_shifts(cases) == [pytest.approx(math.log(1.2))]


def test_the_new_round_term_is_sized_from_earlier_rounds_only() -> None:
    pts = {"v1.0": {8: 100.0, 16: 50.0, 32: 25.0}, "v2.0": {8: 80.0, 16: 40.0, 32: 20.0},
           "v3.0": {8: 40.0, 16: 20.0, 32: 10.0}}
    cases = forward_cases([_series("b", pts)])
    held = validate_forward(cases)
    v2 = [h for h in held if h.group == "v2.0"]
    v3 = [h for h in held if h.group == "v3.0"]
    # v2.0 has no earlier shift to learn from: its band is the leave-one-out width alone
    assert all(math.log(h.high / h.predicted) == pytest.approx(c.within) for h, c in zip(v2, cases))
    # v3.0 learns v2.0's shift (ln 1.25) and widens by it in quadrature
    for h in v3:
        case = next(c for c in cases if c.round == "v3.0" and c.gpus == h.gpus)
        assert math.log(h.high / h.predicted) == pytest.approx(combined(case.within, math.log(1.25)))
    assert round_term([]) == 0.0


def test_the_record_scores_forward_at_the_nominal_coverage() -> None:
    """The benchmark's `forward` line over the vendored record (bench_plan.py prints it): at
    least 70% of next-round points fall inside the interval the planner would have drawn."""
    forward = summarize(validate_forward(forward_cases(record.all_series())))
    assert forward.points >= 100 and forward.coverage >= 0.70
    assert forward.nominal_coverage == COVERAGE


def test_the_planner_widens_for_a_new_round_but_not_at_your_own_level() -> None:
    published = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(128,)))
    term = record.round_term()
    assert term > 0 and published.basis.interval.new_round_ln == pytest.approx(term)
    row = published.rows[0]
    within = published.basis.interval.half_width_ln  # 512 GPUs is measured: no widening past the data
    assert math.log(row.high / row.minutes) == pytest.approx(combined(within, term))
    assert any("new software round" in line for line in published.basis.text)
    runs = [ResultRow(content_hash=f"s{i}", source="run", system="mine", benchmark="llama31_405b",
                      status="success", converged=True, minutes=m, run_start_ms=i, nodes=128, gpus=512,
                      sku="Standard_ND128isr_NDR_GB200_v6") for i, m in enumerate((90.0, 91.0, 92.0))]
    mine = make_plan(PlanRequest(benchmark="llama31_405b", sku="gb200", nodes=(128,), stored=tuple(runs)))
    assert mine.basis.level == "stored" and mine.basis.interval.new_round_ln == 0.0


def test_a_stored_copy_of_a_published_result_counts_once() -> None:
    published = series_points("llama31_405b", "gb200")
    p512 = next(p for p in published.points if p.gpus == 512 and p.group == "v5.1")
    copy = [ResultRow(content_hash=f"c{i}", source="import", system="tyche_ngpu512_ngc25.09_nemo",
                      benchmark="llama31_405b", status="success", converged=True, minutes=p512.minutes,
                      run_start_ms=i, nodes=128, gpus=512, round="v5.1", submitter="NVIDIA",
                      sku="Standard_ND128isr_NDR_GB200_v6") for i in range(3)]
    other = [r.model_copy(update={"content_hash": f"o{i}", "minutes": 70.0, "system": "mine", "round": None,
                                  "submitter": None}) for i, r in enumerate(copy)]
    series = series_points("llama31_405b", "gb200", stored=copy + other)
    stored = [p for p in series.points if p.source == "stored"]
    assert [p.minutes for p in stored] == [pytest.approx(70.0)]  # the copy is gone, the other stays
    assert len(series.points) == len(published.points) + 1
    reasons = [x.reason for x in series.left_out if x.label.startswith("stored: v5.1/NVIDIA")]
    assert reasons and "a stored copy of the published v5.1 NVIDIA tyche_ngpu512" in reasons[0]
    # the same score in another round is not a copy
    elsewhere = [r.model_copy(update={"round": "v6.0"}) for r in copy]
    assert len(series_points("llama31_405b", "gb200", stored=elsewhere).stored) == 1


def test_the_measured_cell_names_round_and_submitter() -> None:
    plan = make_plan(PlanRequest(benchmark="gpt3", sku="h100", nodes=(1344,)))
    columns, cells = plan_table(plan)
    assert plan.rows[0].measured_who == "v4.0 NVIDIA"
    assert cells[0][columns.index("measured min")].endswith("(v4.0 NVIDIA)")
