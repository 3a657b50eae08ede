"""Unit tests for orchestrator.results.metrics on hand-computed cases."""

from __future__ import annotations

import json
import math

import pytest

from orchestrator.errors import ConfigError
from orchestrator.results import metrics as m
from orchestrator.results.mllog import parse_lines


def test_required_runs_table():
    assert [m.required_runs(b) for b in ("llama31_405b", "gpt3", "retinanet", "bert", "unet3d")] \
        == [3, 3, 5, 10, 40]
    assert m.required_runs("smoke") == 3 and m.required_runs(" BERT ") == 10
    assert m.max_dropped_runs("unet3d") == 4 and m.max_dropped_runs("bert") == 1
    with pytest.raises(ConfigError):
        m.required_runs("nope")


def test_olympic_mean_drops_fastest_and_slowest():
    s = m.mlperf_score([5, 1, 3, 2, 4], "retinanet")
    assert s.value_minutes == 3.0 and s.raw_minutes == 3.0
    assert s.official and s.converged == 5 and s.runs_used == 5 and s.note == ""
    assert s.scored_indices == [2, 3, 4]  # runs 3, 2 and 4 minutes


def test_three_runs_score_is_the_median():
    assert m.mlperf_score([4.007883, 4.0085, 4.02445], "gpt3").value_minutes == 4.0085


def test_one_non_converged_run_is_the_dropped_slowest():
    s = m.mlperf_score([5, 1, None, 2, 4], "retinanet")
    assert s.value_minutes == pytest.approx(11 / 3)  # mean of 2, 4, 5
    assert s.official and s.converged == 4 and s.scored_indices == [0, 3, 4]


def test_two_non_converged_runs_invalidate_the_score():
    s = m.mlperf_score([5, None, 3, None, 4], "retinanet")
    assert s.value_minutes is None and s.raw_minutes is None and not s.official
    assert "2 non-converged" in s.note


def test_unet3d_drops_four_each_end_and_tolerates_four_failures():
    runs = [float(x) for x in range(1, 41)]
    assert m.mlperf_score(runs, "unet3d").value_minutes == pytest.approx(20.5)  # mean 5..36
    four_failed = runs[:36] + [None] * 4
    assert m.mlperf_score(four_failed, "unet3d").value_minutes == pytest.approx(20.5)
    assert m.mlperf_score(runs[:35] + [None] * 5, "unet3d").value_minutes is None


def test_scaling_factor_multiplies_the_raw_score():
    s = m.mlperf_score([1.0, 2.0, 3.0], "gpt3", scaling_factor=1.5)
    assert (s.raw_minutes, s.value_minutes, s.scaling_factor) == (2.0, 3.0, 1.5)
    with pytest.raises(ConfigError):
        m.mlperf_score([1.0], "gpt3", scaling_factor=0)


def test_fewer_runs_than_required_is_a_partial_plain_mean():
    s = m.mlperf_score([1.0, 2.0, None], "bert")
    assert s.value_minutes == 1.5 and not s.official
    assert s.note.startswith("partial: 3 of 10") and s.runs_required == 10


def test_more_runs_than_required_uses_the_first_n():
    s = m.mlperf_score([1.0, 2.0, 3.0, 100.0], "gpt3")
    assert s.value_minutes == 2.0 and s.runs_used == 3 and not s.official
    assert "first 3 used" in s.note


def test_no_runs_and_bad_minutes():
    assert m.mlperf_score([], "gpt3").value_minutes is None
    assert m.mlperf_score([None], "gpt3").note == "no converged run"
    with pytest.raises(ConfigError):
        m.mlperf_score([-1.0, 2.0, 3.0], "gpt3")


def test_score_round_trips_through_json():
    s = m.mlperf_score([5, 1, None, 2, 4], "retinanet", 1.1)
    assert m.Score.model_validate(json.loads(s.model_dump_json())) == s


def test_step_time_stats_exclude_first_and_post_eval_steps():
    steps = [(0, 9.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 10.0), (6, 5.0)]
    st = m.step_time_stats(steps, exclude_steps=[5])
    assert st is not None
    assert (st.count, st.excluded, st.mean, st.median, st.p50) == (5, 2, 3.0, 3.0, 3.0)
    assert st.std == pytest.approx(math.sqrt(2)) and st.cv == pytest.approx(math.sqrt(2) / 3)
    assert st.p95 == pytest.approx(4.8) and st.p99 == pytest.approx(4.96)
    assert (st.min, st.max) == (1.0, 5.0)
    assert st.slow_steps == 2  # 4 s and 5 s exceed 1.1 x 3 s


def test_step_time_stats_keep_first_when_asked_and_none_when_empty():
    st = m.step_time_stats([(0, 2.0), (1, 2.0)], drop_first=False)
    assert st is not None and st.count == 2 and st.cv == 0.0 and st.slow_steps == 0
    assert m.step_time_stats([(0, 9.0)]) is None
    assert m.step_time_stats([]) is None


def test_step_stats_from_a_parsed_run():
    from tests.test_mllog import smoke_log

    s = parse_lines(smoke_log())
    st = m.step_time_stats(s.step_times, s.eval_steps)
    assert st is not None and st.count == 4 and st.mean == 1.0  # steps 2, 3, 5, 6


def test_time_to_train_minutes():
    from tests.test_mllog import ev

    ok = parse_lines([ev("run_start", t=0), ev("run_stop", t=90_000, status="success")])
    failed = parse_lines([ev("run_start", t=0), ev("run_stop", t=90_000, status="aborted")])
    assert m.time_to_train_minutes(ok) == 1.5
    assert m.time_to_train_minutes(failed) is None
    assert m.time_to_train_minutes(failed, require_success=False) == 1.5


def test_throughput_and_progress_rates():
    assert m.throughput(1000, 10, seq_len=2048) == (100.0, 204800.0)
    assert m.throughput(1000, 10).tokens_per_s is None
    assert m.progress_per_minute(276480, 60.0) == 4608.0
    score = m.mlperf_score([3.0, 1.0, 2.0], "gpt3")  # scores run index 2 only
    assert m.scored_throughput_per_minute([10, 20, 30], [3.0, 1.0, 2.0], score) == 15.0
    with pytest.raises(ConfigError):
        m.throughput(1, 0)


def test_model_flops_and_mfu():
    assert m.model_flops_per_token(1e9, 2, 128, 256) == 6e9 + 12 * 2 * 128 * 256
    # 1e12 FLOP/token x 1000 tokens / 2 s = 5e14 FLOP/s over 4 x 250 TFLOP/s = 0.5
    assert m.mfu(1e12, 1000, 2.0, 4, 250.0) == pytest.approx(0.5)
    with pytest.raises(ConfigError):
        m.mfu(1e12, 1000, 2.0, 0, 250.0)


def test_weak_scaling_step_change_and_the_azure_convention():
    assert m.weak_scaling_efficiency(1.2734, 1.2712) == pytest.approx(1.00173, abs=1e-5)
    # Azure's quoted 99.8% on its own step times is t_large / t_small = min / max here
    assert m.step_time_min_max(1.2734, 1.2712) == pytest.approx(0.998272, abs=1e-6)
    assert m.step_time_change(1.2734, 1.2712) == pytest.approx(-0.001728, abs=1e-6)
    # a step time that more than doubles: 1-|dt|/t would be -58%; these stay readable
    assert m.step_time_min_max(0.077, 0.181) == pytest.approx(0.077 / 0.181)
    assert m.step_time_change(0.077, 0.181) == pytest.approx(1.3506, abs=1e-4)
    assert m.weak_scaling_efficiency(1.0, 2.0) == 0.5


def test_strong_scaling_and_speedups():
    eff = m.strong_scaling_efficiency(230.675633, 512, 60.167017, 2048)
    assert eff == pytest.approx(0.958480, abs=1e-6)
    assert m.strong_scaling_efficiency(10, 1, 4, 2) == 1.25  # super-linear is not capped
    assert m.throughput_scaling(2.0, 1.5) == 0.75
    assert m.speedup(10, 4) == 2.5
    assert m.speedup_per_gpu(10, 8, 4, 16) == 1.25
    assert m.speedup_per_dollar(10, 100, 4, 300) == pytest.approx(1000 / 1200)
    with pytest.raises(ConfigError):
        m.strong_scaling_efficiency(1, 0, 1, 1)


def test_costs_include_failed_attempts():
    assert m.node_hours(4, 1800) == 2.0
    assert m.run_cost_usd(1.5, 98.32) == pytest.approx(147.48)
    attempts = [(2, 3600, 10.0), (2, 1800, 10.0)]  # a failed half-hour, then the real run
    assert m.result_cost_usd(attempts) == pytest.approx(30.0)
    assert m.result_cost_usd([]) == 0
    with pytest.raises(ConfigError):
        m.run_cost_usd(-1, 10)
