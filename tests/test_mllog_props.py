"""Property tests (issue 22, point 7) over MLLOG parsing and import: arbitrary bytes and arbitrary
JSON in MLLOG lines never raise, every figure that comes out is finite and in range, the block
fast path and the line path agree, and an import either stores results or fails with one of
the documented errors (ConfigError, NotFoundError), leaving nothing behind.

Example counts are modest: the whole file runs in a few seconds in CI.
"""

from __future__ import annotations

import io

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.results.importer import import_path
from orchestrator.results.mllog import MAX_TIME_MS, RunSummary, parse_file, parse_lines
from orchestrator.store.database import Store

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

KEYS = ["run_start", "run_stop", "init_start", "init_stop", "eval_accuracy", "eval_stop",
        "tracked_stats", "block_start", "block_stop", "submission_benchmark", "global_batch_size",
        "target_accuracy", "resumed_from_checkpoint", "azbench_node_step_time", "cache_clear",
        "init_checkpoint_step", "seed", "weights_initialization", "other_key"]
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 1e308, -1e308, 2**53, 2**63, 10**30, 1.5]))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)
metadata = st.dictionaries(
    st.sampled_from(["status", "step", "samples_count", "epoch_num", "train_step_time"]),
    json_values, max_size=3)


@st.composite
def mllog_line(draw: st.DrawFn, pure: bool = False) -> bytes:
    """One MLLOG line with arbitrary JSON; `pure`: well-formed, as the block fast path needs."""
    body = {"key": draw(st.sampled_from(KEYS)), "value": draw(json_values),
            "time_ms": draw(st.one_of(numbers, st.none(), st.text(max_size=4))),
            "metadata": draw(st.one_of(metadata, json_values))}
    text = json.dumps(body, allow_nan=True)
    prefix = "" if pure else draw(st.sampled_from(["", "0: ", "junk "]))
    cut = None if pure else draw(st.sampled_from([None, None, None, 5]))  # sometimes cut
    line = (prefix + ":::MLLOG " + text).encode()
    return line[:cut] if cut else line


logs = st.lists(st.one_of(mllog_line(), st.binary(max_size=40)), max_size=25)
pure_logs = st.lists(mllog_line(pure=True), min_size=1, max_size=25)  # block fast path


def assert_sane(s: RunSummary) -> None:
    """What every consumer of a summary relies on: finite numbers, valid ranges, serialisable."""
    for t in (s.run_start_ms, s.run_stop_ms, s.init_start_ms, s.init_stop_ms):
        assert t is None or 0 <= t < MAX_TIME_MS
    for m in (s.minutes, s.init_minutes):
        assert m is None or (math.isfinite(m) and m >= 0)
    assert all(p.value is None or math.isfinite(p.value) for p in s.eval_points)
    assert all(isinstance(p.progress, (int, float, type(None))) for p in s.eval_points)
    assert all(math.isfinite(t.seconds) for t in s.step_times)
    assert all(math.isfinite(v) for v in s.node_step_times.values())
    assert s.target_accuracy is None or math.isfinite(s.target_accuracy)
    assert s.mllog_lines + s.other_lines + s.long_lines == s.lines_total
    assert 0 <= s.bad_lines <= s.mllog_lines
    assert s.converged is (s.status == "success" and not s.problems)
    RunSummary.model_validate_json(s.model_dump_json())  # stored and read back


@SETTINGS
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_parse_to_a_sane_summary(data: bytes) -> None:
    s = parse_lines(data.splitlines(keepends=True))
    assert_sane(s)


@SETTINGS
@given(logs)
def test_arbitrary_mllog_lines_parse_to_a_sane_summary(lines: list[bytes]) -> None:
    assert_sane(parse_lines([line + b"\n" for line in lines]))


@SETTINGS
@given(st.one_of(logs, pure_logs), st.booleans())
def test_file_and_line_paths_agree(lines: list[bytes], newline_at_end: bool) -> None:
    """parse_file (block fast path) and parse_lines (line path) give the same summary."""
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result_0.txt"
        path.write_bytes(data)
        from_file = parse_file(path)
    # Lines as a file reader gives them (split on \n only; bytes.splitlines also splits on \r).
    from_lines = parse_lines(io.BytesIO(data).readlines())
    assert_sane(from_file)
    assert from_file.model_dump() == from_lines.model_dump()


@settings(SETTINGS, max_examples=25)  # a store per example: the slow one
@given(st.lists(st.one_of(logs, pure_logs), min_size=1, max_size=3))
def test_import_stores_sane_rows_or_fails_with_a_documented_error(
        azbench_home: Path, files: list[list[bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bert"
        folder.mkdir()
        for i, lines in enumerate(files):
            (folder / f"result_{i}.txt").write_bytes(b"\n".join(lines) + b"\n")
        store = Store.open()
        try:
            before = len(store.list_results())
            try:
                summary = import_path(store, folder, archive_dir=Path(tmp) / "archive")
            except (ConfigError, NotFoundError) as exc:
                assert "\n" not in str(exc)
                assert len(store.list_results()) == before  # all or nothing
                assert not any((Path(tmp) / "archive").glob("*"))
                return
            rows = store.list_results()
            assert len(summary.imported) + len(summary.duplicates) == len(files)
            for row in rows:
                assert row.minutes is None or (math.isfinite(row.minutes) and row.minutes >= 0)
                assert row.converged is False or row.status == "success"
                assert row.status != "invalid" or row.minutes is None
        finally:
            store.close()


@pytest.mark.parametrize("time_ms", [1e308, -1, 2**63, float("inf"), "x"])
def test_each_documented_bad_time_gives_an_invalid_summary_not_an_error(time_ms: object) -> None:
    line = json.dumps({"key": "run_start", "value": None, "time_ms": time_ms}).encode()
    s = parse_lines([b":::MLLOG " + line + b"\n"])
    assert_sane(s)
    assert s.problems and s.run_start_ms is None
