"""Step times from the keys real logs use, their source labelled, and MFU from them (mlperf-notes §10.3-4).

Inputs: excerpts of NVIDIA's published logs in tests/data/mlperf_excerpts/ (ATTRIBUTION.md there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.recipes.catalog import model_facts
from orchestrator.results.definitions import mfu
from orchestrator.results import metrics
from orchestrator.results.mllog import parse_file, parse_lines
from orchestrator.results.summary import kept_step_times

DATA = Path(__file__).parent / "data" / "mlperf_excerpts"
GPT3 = DATA / "v4.1_NVIDIA_eos_n64_ngc24.09_nemo_gpt3_result_0.txt"
LORA = DATA / "v5.1_NVIDIA_theia_ngpu512_ngc25.09_nemo_llama2_70b_lora_result_0.txt"


def test_v41_gpt3_train_step_timing_in_s_gives_per_step_mfu_near_47_percent() -> None:
    s = parse_file(GPT3)
    assert s.step_time_source == "tracked_stats"
    # 2 blocks of 12 steps each; "validation_step_timing in s" lines are not train steps.
    assert len(s.step_times) == 24 and len(s.eval_steps) == 1
    kept = kept_step_times(s)
    assert len(kept) == 22 and all(9.3 < t < 9.6 for t in kept)
    stats = metrics.step_time_stats([(0, t) for t in kept], drop_first=False)
    assert stats is not None
    out = mfu(model_facts()["gpt3"], "gpt3", "h100", 512, s.global_batch_size,
              s.max_sequence_length, stats)
    # By hand: F = 6 x 175e9 + 12 x 96 x 12,288 x 2,048 = 1.07899e12 FLOP/token; a step is
    # GBS 2,048 x 2,048 tokens = 4,194,304; at the median step of 9.4936 s on 64 x 8 H100:
    # 1.07899e12 x 4,194,304 / 9.4936 / 512 = 931 TFLOP/s per GPU = 47.0% of the FP8 dense
    # peak (1,979) and 94.1% of BF16 (989). (The old block fallback gave ~3.9%.)
    hand = 1.07899e12 * 4_194_304 / 9.4936 / 512
    assert s.global_batch_size == 2048 and s.max_sequence_length == 2048
    assert stats.median == pytest.approx(9.4936, abs=0.01)
    assert out.model_tflops_per_gpu == pytest.approx(hand / 1e12, rel=0.002)
    assert out.value == pytest.approx(hand / 1979e12, rel=0.002)
    assert out.value == pytest.approx(0.470, abs=0.002)
    assert out.bf16 == pytest.approx(hand / 989e12, rel=0.002)


def test_v51_lora_block_averages_are_kept_not_dropped_as_after_an_eval() -> None:
    s = parse_file(LORA)
    # mlperf_common logs one train_step_time (an average, no metadata.step) per block.
    assert s.step_time_source == "tracked_block_avg"
    assert len(s.step_times) == 4 and s.eval_steps == []
    kept = kept_step_times(s)
    assert len(kept) == 3 and all(0.18 < t < 0.19 for t in kept)


def _block(t0: int, t1: int, samples: int) -> list[str]:
    start = ('{"key": "block_start", "time_ms": %d, "event_type": "INTERVAL_START", "value": null,'
             ' "metadata": {"samples_count": %d}}' % (t0, samples))
    stop = ('{"key": "block_stop", "time_ms": %d, "event_type": "INTERVAL_END", "value": null,'
            ' "metadata": {"samples_count": %d}}' % (t1, samples))
    return [":::MLLOG " + start, ":::MLLOG " + stop]


def test_without_a_step_key_step_time_is_block_duration_over_its_steps() -> None:
    gbs = ':::MLLOG {"key": "global_batch_size", "time_ms": 1, "event_type": "POINT_IN_TIME", "value": 64, "metadata": {}}'
    s = parse_lines([gbs, *_block(0, 12_000, 640), *_block(13_000, 19_000, 384)])
    assert s.step_time_source == "block_derived"
    assert [round(t.seconds, 6) for t in s.step_times] == [1.2, 1.0]  # 12 s / 10 steps, 6 s / 6
    assert kept_step_times(s) == [1.0]


def test_whole_block_durations_are_never_used_as_step_times() -> None:
    s = parse_lines(_block(0, 12_000, 640))  # no global_batch_size: steps per block unknown
    assert s.step_time_source == "block"
    assert kept_step_times(s) == []


def test_lora_mfu_counts_the_frozen_base_without_weight_gradients() -> None:
    facts = model_facts()["llama2_70b_lora"]
    assert facts.trainable_params == 44_564_480
    # By hand: 4 x 70e9 + 2 x 44,564,480 + 12 x 80 x 8,192 x 8,192 = 3.4451e11 FLOP/token,
    # against 6N + attention = 4.8443e11 for full training (1.41x more).
    assert facts.flops_per_token() == pytest.approx(4 * 70e9 + 2 * 44_564_480 + 12 * 80 * 8192 * 8192)
    assert facts.flops_per_token() == pytest.approx(3.4451e11, rel=1e-4)
    assert "frozen base" in facts.formula
    s = parse_file(LORA)
    stats = metrics.step_time_stats([(0, t) for t in kept_step_times(s)],
                                    drop_first=False)
    out = mfu(facts, "llama2_70b_lora", "gb200", 512, s.global_batch_size,
              s.max_sequence_length, stats, source="per-block average")
    assert stats is not None and s.global_batch_size == 64
    tokens = 64 * 8192
    assert out.model_tflops_per_gpu == pytest.approx(
        facts.flops_per_token() * tokens / stats.median / 512 / 1e12)
    assert "per-block average" in out.note
