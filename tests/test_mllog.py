"""Unit tests for orchestrator.results.mllog: tolerant, streaming :::MLLOG parsing into a RunSummary."""

from __future__ import annotations

import json

import pytest

from orchestrator.errors import NotFoundError
from orchestrator.results import mllog
from orchestrator.results.mllog import RunSummary, parse_file, parse_lines

T0 = 1_700_000_000_000


def ev(key: str, value=None, t: int = 0, etype: str = "POINT_IN_TIME", **meta) -> str:
    """One MLLOG line exactly as mlperf_logging's mllog writes it (json.dumps separators)."""
    body = {"namespace": "", "time_ms": T0 + t, "event_type": etype, "key": key, "value": value,
            "metadata": {"file": "train.py", "lineno": 1, **meta}}
    return ":::MLLOG " + json.dumps(body)


def smoke_log() -> list[str]:
    """A small, complete run: 6 steps of 1 s (step 1 slow), one eval after step 3."""
    lines = [ev("cache_clear", True), ev("cache_clear", True, t=1)]
    lines += [ev("init_start", t=10 + i, etype="INTERVAL_START") for i in range(3)]
    lines += [ev("submission_benchmark", "smoke", t=20), ev("submission_org", "azbench", t=20),
              ev("submission_platform", "2xlocal", t=20), ev("submission_division", "open", t=20),
              ev("global_batch_size", 64, t=20), ev("gradient_accumulation_steps", 2.0, t=20),
              ev("seed", 7, t=20), ev("opt_base_learning_rate", 0.001, t=20),
              ev("init_stop", t=1000, etype="INTERVAL_END"),
              ev("run_start", t=1000, etype="INTERVAL_START")]
    t = 1000
    for step in range(1, 7):
        t += 2000 if step == 1 else 1000
        lines.append(ev("tracked_stats", {"train_step_time": 2.0 if step == 1 else 1.0}, t=t,
                        step=step))
        if step == 3:
            lines += [ev("eval_start", t=t + 1, etype="INTERVAL_START", samples_count=192),
                      ev("eval_accuracy", 0.5, t=t + 400, samples_count=192),
                      ev("eval_stop", t=t + 500, etype="INTERVAL_END", samples_count=192)]
            t += 500
    lines += [ev("eval_accuracy", 0.9, t=t + 100, samples_count=384),
              ev("run_stop", t=t + 200, etype="INTERVAL_END", samples_count=384, status="success")]
    return [ln + "\n" for ln in lines]


def test_complete_run_is_summarised():
    s = parse_lines(smoke_log())
    assert (s.benchmark, s.submitter, s.platform) == ("smoke", "azbench", "2xlocal")
    assert s.division == "open"
    assert s.status == "success" and s.converged
    assert s.run_start_ms == T0 + 1000 and s.init_start_ms == T0 + 10
    assert s.minutes == pytest.approx((8700 - 1000) / 60000)
    assert (s.global_batch_size, s.gradient_accumulation_steps, s.seed) == (64, 2, 7)
    assert s.params["opt_base_learning_rate"] == 0.001
    assert s.key_counts["cache_clear"] == 2 and s.key_counts["init_start"] == 3
    assert [p.progress for p in s.eval_points] == [192, 384]
    assert s.progress_key == "samples_count" and s.last_eval_progress == 384
    assert [st.step for st in s.step_times] == [1, 2, 3, 4, 5, 6]
    assert s.step_times[0].seconds == 2.0
    assert s.step_time_source == "tracked_stats"
    assert s.eval_steps == [4]  # first step that ends after eval_stop
    assert (s.lines_total, s.mllog_lines, s.bad_lines, s.truncated) == (26, 26, 0, False)
    assert s.resume_step is None


def test_str_and_bytes_lines_give_the_same_summary():
    text = smoke_log()
    assert parse_lines(text) == parse_lines([ln.encode() for ln in text])


def test_file_matches_lines_and_survives_chunk_boundaries(tmp_path, monkeypatch):
    log = tmp_path / "result_0.txt"
    log.write_text("".join(smoke_log()))
    monkeypatch.setattr(mllog, "_CHUNK", 37)  # force lines to straddle read chunks
    assert parse_file(log) == parse_lines(smoke_log())


@pytest.mark.parametrize("variant", ["clean", "crlf", "srun", "garbage", "provenance", "badjson"])
def test_block_fast_path_and_line_path_agree(tmp_path, variant):
    text = "".join(smoke_log())
    text = {"crlf": text.replace("\n", "\r\n"),
            "srun": "".join("0: " + ln for ln in smoke_log()),
            "garbage": "warning: x\n" + text + ":::MLLOG {bad\n",
            "provenance": ":::DLPAL img 42 2 node[1-2] c s\n" + text,
            "badjson": text + ':::MLLOG {"key": "x", oops}\n'}.get(variant, text)
    log = tmp_path / "result_0.txt"
    log.write_text(text, newline="")
    assert parse_file(log) == parse_lines(text.splitlines(keepends=True))
    fast = mllog._Accumulator().feed_block(text.encode())
    assert fast is (variant in ("clean", "crlf", "badjson"))


def test_garbage_binary_and_bad_json_are_counted_not_fatal():
    lines = [b"\x00\xff\xfe\x80 binary noise\n", b"plain warning text\n",
             b":::MLLOG {not json at all\n", b':::MLLOG ["a", "list"]\n',
             b':::MLLOG {"key": "cache_clear", "value": tru\n',  # cut count-only line
             ev("submission_org", "cafX").encode().replace(b"X", b"\xe9") + b"\n",  # not UTF-8
             *[ln.encode() for ln in smoke_log()]]
    s = parse_lines(lines)
    assert s.other_lines == 2
    assert s.bad_lines == 3
    assert s.non_utf8_lines == 1
    assert s.submitter == "caf\ufffd"  # decoded with replacement, first org wins
    assert s.status == "success" and s.truncated is False


def test_truncated_last_line_is_flagged(tmp_path):
    text = "".join(smoke_log())
    log = tmp_path / "cut.txt"
    log.write_text(text[: text.rindex("run_stop") + 20])  # the file ends inside run_stop
    s = parse_file(log)
    assert s.truncated is True and s.bad_lines == 1
    assert s.run_stop_ms is None and s.minutes is None and s.status is None


def test_complete_last_line_without_newline_is_not_truncated(tmp_path):
    log = tmp_path / "nonl.txt"
    log.write_text("".join(smoke_log()).rstrip("\n"))
    s = parse_file(log)
    assert s.truncated is False and s.bad_lines == 0 and s.status == "success"


def test_marker_after_other_text():
    lines = ["0: " + ev("submission_benchmark", "bert"),
             "device: cuda:2 n_gpu: 8, 16-bits training: True" + ev("submission_org", "Azure"),
             "12: " + ev("run_start", t=5), "noise " + ev("run_stop", t=60005, status="success")]
    s = parse_lines(lines)
    assert (s.benchmark, s.submitter, s.minutes, s.status) == ("bert", "Azure", 1.0, "success")
    assert s.mllog_lines == 4 and s.other_lines == 0


def test_two_markers_on_one_line_keep_the_last():
    interleaved = ev("eval_accuracy", 0.1)[:40] + ev("submission_org", "last")
    s = parse_lines([interleaved])
    assert s.submitter == "last" and s.bad_lines == 0


def test_no_run_start_means_no_minutes():
    s = parse_lines([ev("init_start"), ev("run_stop", t=100, status="aborted")])
    assert s.run_start_ms is None and s.minutes is None
    assert s.status == "aborted" and not s.converged


def test_empty_file(tmp_path):
    log = tmp_path / "empty.txt"
    log.write_bytes(b"")
    s = parse_file(log)
    assert s == RunSummary()
    assert s.minutes is None and s.lines_total == 0 and s.truncated is False


def test_crlf_lines_parse_like_lf(tmp_path):
    crlf, lf = tmp_path / "crlf.txt", tmp_path / "lf.txt"
    crlf.write_bytes("".join(smoke_log()).replace("\n", "\r\n").encode())
    lf.write_bytes("".join(smoke_log()).encode())
    assert parse_file(crlf) == parse_file(lf)
    assert parse_file(crlf).bad_lines == 0


def test_missing_file_raises_not_found(tmp_path):
    with pytest.raises(NotFoundError):
        parse_file(tmp_path / "nope.txt")


def test_resume_markers():
    resumed = parse_lines([ev("submission_benchmark", "smoke"),
                           ev("resumed_from_checkpoint", 40)])
    assert resumed.resume_step == 40
    ckpt = parse_lines([ev("submission_benchmark", "smoke"), ev("init_checkpoint_step", 12)])
    assert ckpt.resume_step == 12 and ckpt.init_checkpoint_step == 12
    # GPT-3's reference run starts from checkpoint step 2286 by rule: not a resume.
    gpt3 = parse_lines([ev("submission_benchmark", "gpt3"), ev("init_checkpoint_step", 2286)])
    assert gpt3.resume_step is None and gpt3.init_checkpoint_step == 2286


def test_provenance_lines():
    s = parse_lines([":::DLPAL nvcr.io/x:1 4242 2 node[1-2] azure ND_H100_v5\n",
                     ':::SYSJSON {"number_of_nodes": "2"}\n', "0: :::GITCOMMITID abc123\n",
                     "RESULT,smoke,,42,nvidia,2024-01-01 00:00:00\n"])
    assert s.dlpal == "nvcr.io/x:1 4242 2 node[1-2] azure ND_H100_v5"
    assert s.sysjson == {"number_of_nodes": "2"}
    assert s.git_commit == "abc123"
    assert s.result_line is not None and s.result_line.startswith("RESULT,smoke")
    assert s.other_lines == 4 and s.mllog_lines == 0


def test_block_durations_are_the_fallback_step_times():
    s = parse_lines([ev("block_start", t=0, etype="INTERVAL_START", epoch_num=0),
                     ev("block_stop", t=1500, etype="INTERVAL_END", epoch_num=0),
                     ev("block_start", t=2000, etype="INTERVAL_START", epoch_num=1),
                     ev("block_stop", t=4500, etype="INTERVAL_END", epoch_num=1)])
    assert s.step_time_source == "block"
    assert [tuple(st) for st in s.step_times] == [(0, 1.5), (1, 2.5)]


def test_block_average_tracked_stats_are_not_steps():
    s = parse_lines([ev("tracked_stats", {"train_step_time": 1.0}, t=1000, step=1),
                     ev("tracked_stats", {"throughput": 9.0, "train_step_time": 1.0}, t=1001,
                        step=0),
                     ev("tracked_stats", {"validation_step_time": 0.5}, t=1002, step=1),
                     ev("tracked_stats", {"train_step_timing": 2.0}, t=2000, step=2)])
    assert [tuple(st) for st in s.step_times] == [(1, 1.0), (2, 2.0)]


def test_summary_round_trips_through_json():
    s = parse_lines(smoke_log())
    dumped = json.loads(s.model_dump_json())
    assert dumped["minutes"] == s.minutes  # computed fields are stored too
    assert RunSummary.model_validate_json(s.model_dump_json()) == s
