"""The forecast model (orchestrator/forecast/): which points it stands on, the fit, and the
leave-one-out arithmetic on small fixed series (checked by hand, no timing). The benchmark
benchmarks/bench_plan.py runs the same leave-one-out over the whole published record.
"""

from __future__ import annotations

import math

import pytest

from orchestrator.errors import ConfigError
from orchestrator.forecast import loo, record
from orchestrator.forecast.loo import Residual, leave_one_out, summarize, validate_series
from orchestrator.forecast.model import fit_points, vertex
from orchestrator.forecast.points import (STORED, TUNED_FACTOR, Point, check_benchmark, published_points,
                                          series_points, stored_keys, stored_points)
from orchestrator.results.published import PublishedResult
from orchestrator.store.schema import ResultRow


def _p(gpus: int, minutes: float, group: str = "v5.0", source: str = "published") -> Point:
    return Point(gpus=gpus, minutes=minutes, group=group, source="stored" if source == "stored" else "published",
                 label=f"{group} {gpus}")


# -- leave-one-out arithmetic --------------------------------------------------------------------

# Three points, one round: holding one out leaves two, so each prediction is the straight line
# (on log2 GPUs, ln minutes) through the other two, continued as that line past them.
THREE = [_p(8, 8.0), _p(16, 4.0), _p(32, 1.5)]


def test_leave_one_out_predicts_each_point_from_the_line_through_the_others() -> None:
    by_gpus = {r.gpus: r for r in leave_one_out(THREE)}
    # 16 held out: the line through (3, ln 8) and (5, ln 1.5) at 4 is ln sqrt(8 x 1.5) = ln 3.464
    assert by_gpus[16].log_error == pytest.approx(math.log(math.sqrt(12.0) / 4.0))
    assert by_gpus[16].distance == 0.0
    # 8 held out: the line through (4, ln 4) and (5, ln 1.5), one doubling below: 4 x 4/1.5
    assert by_gpus[8].log_error == pytest.approx(math.log((4.0 * 4.0 / 1.5) / 8.0))
    assert by_gpus[8].distance == pytest.approx(1.0)
    # 32 held out: the line through (3, ln 8) and (4, ln 4), one doubling above: 2
    assert by_gpus[32].log_error == pytest.approx(math.log(2.0 / 1.5))
    assert by_gpus[32].distance == pytest.approx(1.0)


def test_validate_series_and_summarize_do_the_arithmetic() -> None:
    # A pool whose errors are all 0.15: the interval's half-width is 0.15 x (1 + distance).
    pool = [Residual(gpus=1, group="x", log_error=0.15, distance=0.0)] * 5
    held = {h.gpus: h for h in validate_series("toy", THREE, pool)}
    assert held[16].predicted == pytest.approx(math.sqrt(12.0))
    assert held[8].predicted == pytest.approx(16.0 / 1.5)
    assert held[32].predicted == pytest.approx(2.0)
    # 16 is held out between 8 and 32, a doubling from each: its interval widens as far as a
    # doubling past the data would (issue 47), 0.15 x (1 + 1)
    assert held[16].low == pytest.approx(math.sqrt(12.0) * math.exp(-0.30))
    assert held[32].high == pytest.approx(2.0 * math.exp(0.30))
    assert held[32].extrapolation == pytest.approx(2.0)
    # |errors|: 16 -> 1 - 3.464/4 = 0.134 (inside: ln error 0.144 <= 0.15), 8 and 32 -> 1/3
    # (ln error 0.288 <= 0.30: inside).
    summary = summarize(list(held.values()))
    assert summary.points == 3 and summary.series == 1
    assert summary.median_abs_error == pytest.approx(1.0 / 3.0)
    assert summary.worst_abs_error == pytest.approx(1.0 / 3.0)
    assert summary.coverage == 1.0
    assert summary.line() == "median abs error 33.3%, worst 33.3%, coverage 100.0%"
    narrow = [Residual(gpus=1, group="x", log_error=0.1, distance=0.0)]  # 16 only: 0.144 <= 0.2
    assert summarize(validate_series("toy", THREE, narrow)).coverage == pytest.approx(1.0 / 3.0)


def test_four_points_hold_out_to_a_least_squares_line() -> None:
    points = [_p(4, 20.0), _p(8, 9.0), _p(16, 5.5), _p(64, 1.2)]
    for r in leave_one_out(points):
        rest = [p for p in points if p.gpus != r.gpus]
        xs = [math.log2(p.gpus) for p in rest]
        ys = [math.log(p.minutes) for p in rest]
        mx, my = sum(xs) / 3, sum(ys) / 3
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        expected = my + slope * (math.log2(r.gpus) - mx)
        actual = next(p.minutes for p in points if p.gpus == r.gpus)
        assert r.log_error == pytest.approx(expected - math.log(actual))


def test_the_interval_widens_with_distance_and_mixes_own_and_pool() -> None:
    own = [Residual(gpus=1, group="x", log_error=0.05, distance=0.0)] * 40
    pool = [Residual(gpus=1, group="y", log_error=-0.5, distance=1.0)] * 100  # 0.5 / (1 + 1) = 0.25
    assert loo.half_width(own, [], 0.0) == pytest.approx(0.05)
    assert loo.half_width(own, [], 2.0) == pytest.approx(0.15)
    # 40 own errors at weight 1 against a pool of total weight 10: the 80% quantile is own's.
    assert loo.half_width(own, pool, 0.0) == pytest.approx(0.05)
    # Without own errors the pool decides.
    assert loo.half_width([], pool, 0.0) == pytest.approx(0.25)
    with pytest.raises(ConfigError):
        loo.half_width([], [], 0.0)
    with pytest.raises(ConfigError):
        summarize([])


# -- the fit ---------------------------------------------------------------------------------------

def test_a_power_law_is_recovered_and_continued_past_the_data() -> None:
    points = [_p(n, 1000.0 * n ** -0.8) for n in (8, 16, 64, 256, 512)]
    fit = fit_points(points)
    assert fit.degree in (1, 2) and abs(fit.coef[2]) < 1e-9
    assert fit.coef[1] == pytest.approx(-0.8 * math.log(2))
    for n in (8, 100, 512, 2048, 2):
        assert fit.minutes(n) == pytest.approx(1000.0 * n ** -0.8, rel=1e-9)
    assert fit.extrapolation(2048) == pytest.approx(4.0)
    assert fit.extrapolation(2) == pytest.approx(4.0)
    assert fit.extrapolation(100) == 1.0


def test_a_curve_needs_two_gpu_counts() -> None:
    with pytest.raises(ConfigError, match="two GPU counts"):
        fit_points([_p(8, 3.0), _p(8, 2.0, "v5.1")])
    with pytest.raises(ConfigError):
        fit_points([])


def test_three_counts_give_a_line_four_a_parabola() -> None:
    bent = [_p(n, 100.0 / n + 1.0) for n in (1, 4, 16, 64)]
    assert fit_points(bent[:3]).degree == 1
    assert fit_points(bent).degree == 2


def test_more_gpus_are_never_predicted_slower() -> None:
    # Times that fall, then rise: the parabola turns inside the data; past its vertex (and past
    # the data) the prediction holds the lowest value.
    points = [_p(8, 40.0), _p(16, 22.0), _p(32, 15.0), _p(64, 14.0), _p(128, 16.0)]
    fit = fit_points(points)
    turn = vertex(fit)
    assert fit.coef[2] > 0 and turn is not None and 3 < turn < 7
    predictions = [fit.minutes(n) for n in (8, 16, 32, 64, 128, 256, 1024)]
    assert all(b <= a + 1e-12 for a, b in zip(predictions, predictions[1:]))
    assert fit.minutes(1024) == pytest.approx(fit.minutes(2 ** turn))


def test_each_round_has_its_level_and_predictions_use_the_newest() -> None:
    # v5.1 is 30% faster than v5.0 at every count; the shape is shared.
    old = [_p(n, 1000.0 / n, "v5.0") for n in (64, 128, 256, 512)]
    new = [_p(n, 700.0 / n, "v5.1") for n in (128, 512)]
    fit = fit_points(old + new)
    assert fit.level == "v5.1"
    assert fit.minutes(256) == pytest.approx(700.0 / 256, rel=0.02)
    assert fit.minutes(256, "v5.0") == pytest.approx(1000.0 / 256, rel=0.02)
    assert fit.minutes(1024) == pytest.approx(700.0 / 1024, rel=0.02)


def test_stored_points_set_the_level() -> None:
    published = [_p(n, 1000.0 / n, "v5.1") for n in (64, 128, 256)]
    mine = [_p(64, 1000.0 / 64 * 1.25, STORED, "stored")]  # my cluster: 25% slower
    fit = fit_points(published + mine)
    assert fit.level == STORED
    # The ridge pulls a one-point level slightly toward the common one.
    assert fit.minutes(512) == pytest.approx(1000.0 / 512 * 1.25, rel=0.05)
    assert fit.minutes(512) > 1000.0 / 512 * 1.15


# -- points ----------------------------------------------------------------------------------------

def _row(gpus: int, minutes: float, *, round_: str = "v5.0", org: str = "NVIDIA", system: str = "sys",
         division: str = "closed", availability: str = "Available cloud") -> PublishedResult:
    return PublishedResult(
        round=round_, org=org, submitter=org, division=division, availability=availability,
        system=f"{system}_{gpus}", system_name=system, accelerator="NVIDIA H100-SXM5-80GB",
        accelerators_per_node=8, nodes=max(gpus // 8, 1), accelerators=gpus, host_processor="x",
        framework="NeMo", benchmark="gpt3", result_files=3, runs_required=3, runs_dropped=0,
        mean_minutes=minutes, scaling_factor=1.0, score_minutes=minutes,
        repo=f"mlcommons/training_results_{round_}", commit="0" * 40)


def test_published_points_keep_the_fastest_tuned_result_per_count_and_round() -> None:
    rows = [
        _row(512, 50.0), _row(512, 52.0, org="Other"),                  # fastest of v5.0 at 512 kept
        _row(512, 45.0, round_="v5.1"),                                   # v5.1 keeps its own
        _row(1024, 30.0), _row(1024, 30.0 * TUNED_FACTOR + 1, org="Slow", round_="v5.1"),  # > 2x: left out
        _row(2048, 16.0), _row(2048, 16.0, round_="v5.1"),               # republished unchanged: once
        _row(4096, 8.0, division="open"), _row(4096, 7.0, availability="Preview"),
    ]
    points, left = published_points("gpt3", "h100", rows)
    assert [(p.gpus, p.group, p.minutes) for p in points] == [
        (512, "v5.0", 50.0), (512, "v5.1", 45.0), (1024, "v5.0", 30.0), (2048, "v5.0", 16.0)]
    reasons = sorted(lo.reason.split(" ")[0] for lo in left)
    assert len(left) == 5 and reasons.count("open") == 1 and reasons.count("category") == 1
    assert any("not a tuned recipe" in lo.reason for lo in left)
    assert any("republished" in lo.reason for lo in left)
    assert any("a faster v5.0 result" in lo.reason for lo in left)


def _result(minutes: float | None, *, gpus: int = 64, sku: str = "Standard_ND96isr_H100_v5",
            system: str = "8xND_H100_v5", resumed: bool = False, compliance: bool | None = True,
            i: int = 0) -> ResultRow:
    return ResultRow(content_hash=f"h{system}{i}{minutes}", source="run", system=system, benchmark="gpt3",
                     status="success" if minutes is not None else "aborted", converged=minutes is not None,
                     minutes=minutes, run_start_ms=i, nodes=gpus // 8, gpus=gpus, sku=sku, resumed=resumed,
                     compliance_ok=compliance)


def test_stored_results_are_scored_like_the_report_and_marked() -> None:
    rows = [_result(10.0, i=0), _result(12.0, i=1), _result(11.0, i=2),
            _result(5.0, i=3, resumed=True),                    # a resumed run never counts
            _result(40.0, system="other", i=4),                 # partial: 1 of 3
            _result(9.0, system="bad", i=5, compliance=False),  # fails compliance: no score
            _result(9.0, sku="Standard_ND96isr_H200_v5", system="h200", i=6)]  # another GPU
    points, left = stored_points("gpt3", "h100", rows)
    by_label = {p.label: p for p in points}
    assert by_label["stored: 8xND_H100_v5"].minutes == pytest.approx(11.0)  # median of 3
    assert by_label["stored: 8xND_H100_v5"].note.endswith("official")
    assert by_label["stored: other"].minutes == 40.0 and "partial" in by_label["stored: other"].note
    assert all(p.group == STORED and p.source == "stored" for p in points)
    assert [lo.label for lo in left] == ["stored: bad"] and "no score" in left[0].reason


def test_series_points_reads_the_vendored_table() -> None:
    s = series_points("llama31_405b", "gb200")
    assert s.scales[0] == 256 and s.scales[-1] == 5120
    assert {"v5.0", "v5.1"} <= set(s.groups)
    assert all(p.source == "published" for p in s.points)
    assert series_points("ssd", "h100").benchmark == "retinanet"


def test_stored_results_under_an_old_benchmark_name_count() -> None:
    assert stored_keys("rgat") == ["rgat", "gnn"] and stored_keys("gpt3") == ["gpt3"]
    row = _result(10.0).model_copy(update={"benchmark": "ssd"})
    assert [p.minutes for p in stored_points("retinanet", "h100", [row])[0]] == [10.0]  # partial, 1 of 5


def test_unknown_benchmarks_are_named() -> None:
    assert check_benchmark("GPT3") == "gpt3"
    assert check_benchmark("gnn") == "rgat"
    with pytest.raises(ConfigError, match="unknown benchmark 'nope'"):
        check_benchmark("nope")


# -- the record ------------------------------------------------------------------------------------

def test_the_published_record_meets_the_issue_targets() -> None:
    """Not a timing: the leave-one-out figures the benchmark prints, as a guard against a change
    that makes the model worse (median error under 15%, at least 70% inside the 80% interval)."""
    held = [h for s in record.checked_series()
            for h in validate_series(f"{s.benchmark}/{s.gpu}", s.points, record.pool(exclude=(s.benchmark, s.gpu)))]
    summary = summarize(held)
    assert summary.series >= 20 and summary.points >= 200
    assert summary.median_abs_error < 0.15
    assert summary.coverage >= 0.70
    assert record.pool_size() == (summary.series, len([r for s in record.checked_series()
                                                       for r in leave_one_out(s.points)]))


def test_the_interval_widens_with_the_doublings_to_the_nearest_measured_count() -> None:
    """Issue 47.4: a count 3 doublings from each measured count is not "inside" and certain:
    its interval is as wide as 3 doublings past the data; the site's formula is the same."""
    from orchestrator.forecast.basis import Band, basis_of
    from orchestrator.forecast.curve import evaluate
    from orchestrator.forecast.model import fit_points
    from orchestrator.forecast.points import SeriesPoints
    points = [_p(8, 64.0), _p(512, 1.5), _p(1024, 0.8)]
    fit = fit_points(points)
    assert fit.distance(64) == pytest.approx(3.0) and fit.outside(64) == 0.0
    assert fit.distance(512) == 0.0 and fit.extrapolation(64) == 1.0  # the 4x refusal: outside only
    band = Band(q=0.1, own=0, pool_series=0, pool_errors=0)
    t, low, high = band.interval(fit, 64)
    assert math.log(high / t) == pytest.approx(0.1 * (1 + 3))
    _, low8, high8 = band.interval(fit, 8)
    assert math.log(high8 / fit.minutes(8)) == pytest.approx(0.1)
    basis = basis_of(SeriesPoints(benchmark="toy", gpu="h100", points=points), fit, band)
    assert evaluate(basis, 64) == pytest.approx((t, low, high), rel=1e-12)
