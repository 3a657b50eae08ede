"""Bounded ingest (issue 22, point 2): only regular files are opened, a line over MAX_LINE is
skipped and counted without being buffered, an impossible timing makes that one result invalid
(the rest of the import goes on), and a second run_stop is a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.results import import_facts, import_sources, mllog
from orchestrator.results.files import open_regular, read_small
from orchestrator.results.importer import import_path
from orchestrator.results.ingest import archive_log, file_hash
from orchestrator.results.mllog import MAX_LINE, as_float, as_int, parse_file, parse_lines
from orchestrator.store.database import Store
from testsupport.small_logs import write_long_log, write_small_logs
from tests.cli_helpers import azbench, one_line_error

pytestmark = pytest.mark.timeout(240)  # a regression here is a hang: fail it sooner than the suite's 300 s, with room for a slow machine


def ev(key: str, time_ms: object = 1000, value: object = None, **meta: object) -> str:
    body = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key,
            "value": value, "metadata": meta}
    return ":::MLLOG " + json.dumps(body) + "\n"


def good_log(start: int = 1_000_000, stop: int = 1_600_000, bench: str = "bert") -> str:
    return (ev("submission_benchmark", 1, bench) + ev("run_start", start)
            + ev("run_stop", stop, status="success"))


@pytest.fixture
def store(azbench_home: Path):
    s = Store.open()
    yield s
    s.close()


# -- special files -----------------------------------------------------------------------------

def test_a_fifo_named_result_fails_the_import_in_one_line_instead_of_hanging(
        store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_0.txt").write_text(good_log())
    os.mkfifo(tmp_path / "result_1.txt")
    with pytest.raises(ConfigError, match=r"result_1.txt is a FIFO, not a regular file"):
        import_path(store, tmp_path)
    assert store.list_results() == []


def test_a_link_to_dev_zero_is_refused_before_it_is_read(store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_1.txt").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="is a character device"):
        import_path(store, tmp_path)
    with pytest.raises(ConfigError, match="is a character device"):
        parse_file(tmp_path / "result_1.txt")


def test_a_dangling_link_named_result_is_not_found(store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_1.txt").symlink_to(tmp_path / "gone")
    with pytest.raises(NotFoundError, match="broken link"):
        import_path(store, tmp_path)


def test_results_import_of_dev_null_is_a_usage_error_in_one_line(azbench_home: Path) -> None:
    result = azbench("results", "import", "/dev/null", home=azbench_home, timeout=60)
    assert result.code == 2
    assert "/dev/null is a character device" in one_line_error(result)


def test_a_run_dir_whose_log_is_a_fifo_is_refused(store: Store, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    (run / "attempt-1").mkdir(parents=True)
    os.mkfifo(run / "attempt-1" / "train.log")
    with pytest.raises(ConfigError, match="train.log is a FIFO"):
        import_path(store, tmp_path / "runs")


def test_a_system_json_that_is_a_fifo_is_a_warning_not_a_hang(store: Store, tmp_path: Path) -> None:
    bench = tmp_path / "v3.1" / "Org" / "results" / "sys1" / "bert"
    bench.mkdir(parents=True)
    (bench / "result_0.txt").write_text(good_log())
    (tmp_path / "v3.1" / "Org" / "systems").mkdir()
    os.mkfifo(tmp_path / "v3.1" / "Org" / "systems" / "sys1.json")
    (bench / "scaling.json").symlink_to("/dev/zero")  # not a file: no scaling, never read
    summary = import_path(store, tmp_path)
    assert len(summary.imported) == 1
    assert any("is a FIFO" in w.message for w in summary.warnings)


def test_open_regular_and_read_small_refuse_what_is_not_a_small_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ConfigError, match="a FIFO"):
        open_regular(tmp_path / "pipe", "thing")
    with pytest.raises(ConfigError, match="a directory"):
        open_regular(tmp_path, "thing")
    with pytest.raises(NotFoundError):
        open_regular(tmp_path / "missing", "thing")
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(ConfigError, match="over 100 bytes"):
        read_small(tmp_path / "big", 100)
    assert read_small(tmp_path / "big", 101) == b"x" * 101


def test_hash_and_archive_read_only_regular_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ConfigError, match="FIFO"):
        file_hash(tmp_path / "pipe")
    with pytest.raises(ConfigError, match="FIFO"):
        archive_log(tmp_path / "pipe", "0" * 64, tmp_path / "archive")
    (tmp_path / "log").write_bytes(b"abc")
    copy = archive_log(tmp_path / "log", file_hash(tmp_path / "log"), tmp_path / "archive")
    assert copy.read_bytes() == b"abc" and list((tmp_path / "archive").iterdir()) == [copy]


# -- long lines --------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [MAX_LINE + 1, 3 * MAX_LINE, 9 * MAX_LINE])
def test_a_long_line_anywhere_is_skipped_and_counted_the_rest_parsed(
        tmp_path: Path, size: int) -> None:
    # 9 MiB crosses two 4 MiB read chunks; 1 MiB + 1 sits inside one chunk among short lines.
    head = ev("submission_benchmark", 1, "bert") + ev("run_start", 1000)
    log = tmp_path / "result_0.txt"
    log.write_bytes(head.encode() * 2000 + b":::MLLOG {" + b"x" * size + b"}\n"
                    + ev("run_stop", 61000, status="success").encode())
    s = parse_file(log)
    assert s.long_lines == 1 and s.lines_total == 4002 and s.bad_lines == 0
    assert s.minutes == 1.0 and s.converged and s.truncated is False
    assert s.mllog_lines + s.other_lines + s.long_lines == s.lines_total


def test_a_line_of_exactly_max_line_bytes_is_still_read(tmp_path: Path) -> None:
    line = ev("run_start", 1000).encode()
    padded = line[:-2] + b" " * (MAX_LINE - len(line) + 1) + b"}\n"  # MAX_LINE bytes + newline
    assert len(padded) == MAX_LINE + 1
    log = tmp_path / "result_0.txt"
    log.write_bytes(padded)
    s = parse_file(log)
    assert s.long_lines == 0 and s.run_start_ms == 1000


def test_a_long_last_line_without_newline_is_skipped_and_marks_the_file_cut(tmp_path: Path) -> None:
    log = tmp_path / "result_0.txt"
    log.write_bytes(good_log().encode() + b"y" * (6 * MAX_LINE))
    s = parse_file(log)
    assert (s.long_lines, s.truncated, s.lines_total, s.minutes) == (1, True, 4, 10.0)


def test_a_file_that_is_one_long_line_is_not_an_mllog_and_says_why(store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_0.txt").write_bytes(b":::MLLOG {" + b"z" * (2 * MAX_LINE))
    with pytest.raises(ConfigError, match=r"1 line\(s\) over 1 MiB skipped"):
        import_path(store, tmp_path)


def test_parse_lines_skips_long_items_as_parse_file_does() -> None:
    lines = good_log().splitlines(keepends=True)
    s = parse_lines([lines[0], "q" * (MAX_LINE + 1) + "\n", *lines[1:]])
    assert (s.long_lines, s.lines_total, s.minutes, s.truncated) == (1, 4, 10.0, False)
    cut = parse_lines([*lines, "q" * (MAX_LINE + 1)])
    assert cut.long_lines == 1 and cut.truncated is True


def test_long_spans_finds_exactly_the_long_lines() -> None:
    short = b"a" * 100 + b"\n"
    data = short * 50 + b"b" * (MAX_LINE + 1) + b"\n" + short + b"c" * MAX_LINE + b"\n" + short
    spans = mllog._long_spans(data)
    assert spans == [(5050, 5050 + MAX_LINE + 2)]


# -- impossible timings, duplicates ------------------------------------------------------------

def test_out_of_range_time_makes_that_result_invalid_and_the_rest_imports(
        store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_0.txt").write_text(good_log())
    (tmp_path / "result_1.txt").write_text(
        ev("submission_benchmark", 1, "bert") + ev("run_start", 1e308)
        + ev("run_stop", 2000, status="success"))
    summary = import_path(store, tmp_path)
    rows = {Path(r.log_path or "").name: r for r in store.list_results()}
    assert len(summary.imported) == 2
    by_status = sorted((r.status, r.converged, r.minutes) for r in rows.values())
    assert by_status == [("invalid", False, None), ("success", True, 10.0)]
    assert any("run_start has time_ms 1e+308" in w.message for w in summary.warnings)
    assert not any("no run_start" in w.message for w in summary.warnings)


@pytest.mark.parametrize("bad", [-5, 2**53, "soon", 1.5, float("inf")])
def test_every_kind_of_unusable_run_stop_time_is_a_problem(bad: object) -> None:
    s = parse_lines([ev("run_start", 1000), ev("run_stop", bad, status="success")])
    assert s.run_stop_ms is None and not s.converged and s.minutes is None
    assert len(s.problems) == 1 and s.problems[0].startswith("run_stop has time_ms")


def test_run_stop_before_run_start_is_invalid_not_a_negative_time_to_train(
        store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_0.txt").write_text(good_log(start=100_000, stop=11_800))
    summary = import_path(store, tmp_path)
    (row,) = store.list_results()
    assert (row.status, row.converged, row.minutes) == ("invalid", False, None)
    assert any("run_stop precedes run_start by 1.47 min" in w.message for w in summary.warnings)


def test_a_second_run_stop_is_a_warning_and_the_first_counts(store: Store, tmp_path: Path) -> None:
    (tmp_path / "result_0.txt").write_text(good_log() + ev("run_stop", 9_000_000, status="aborted"))
    summary = import_path(store, tmp_path)
    (row,) = store.list_results()
    assert row.status == "success" and row.minutes == 10.0
    assert [w.message for w in summary.warnings if "run_stop" in w.message] == [
        "2 run_stop events in the log: the first one is used"]


def test_numbers_from_a_log_are_bounded() -> None:
    assert as_int(1e308) is None and as_int(2**63) is None and as_int(-(2**63)) == -(2**63)
    assert as_int("²") is None and as_int("٣") is None and as_int(" 42 ") == 42
    assert as_float(10**400) is None and as_float(float("nan")) is None
    assert as_float(float("-inf")) is None and as_float(3) == 3.0 and as_float(True) is None
    assert import_facts._as_int("²") is None and import_facts._as_int("9" * 30) is None
    assert import_facts._as_int(" 16 ") == 16 and import_facts._platform_nodes("99999999999x8") is None


def test_run_dir_start_search_streams_and_finds_a_needle_across_blocks(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    needle = b'"key": "run_start"'
    log.write_bytes(b"x" * 13 + needle + b"y" * 40)
    assert import_sources.file_contains(log, needle, block=16)  # split across the first two blocks
    assert import_sources.file_contains(log, needle, block=7)
    assert not import_sources.file_contains(log, b'"key": "run_stop"', block=16)


# -- many logs, concurrent imports, kill -9, a forged long log (issue 38, point 6) ---------------
# Each is bounded by its timeout mark (a regression is a hang or a crawl); their speed is
# benchmarks/bench_import.py's.

def _import_cli(path: Path, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "AZBENCH_HOME": str(home)}
    env.pop("AZBENCH_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "results", "import", "--json",
                             str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env)


def _children(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat_file.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(300)
def test_a_tree_of_10000_small_logs_imports_each_checked(azbench_home: Path, tmp_path: Path) -> None:
    top = write_small_logs(tmp_path / "tree", 10_000)
    proc = _import_cli(top, azbench_home)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert len(summary["imported"]) == 10_000 and summary["duplicates"] == []
    assert {(i["round"], i["compliance_ok"]) for i in summary["imported"]} == {("v5.1", False)}


@pytest.mark.timeout(300)
def test_two_concurrent_imports_of_2000_results_store_each_once(azbench_home: Path,
                                                                 tmp_path: Path) -> None:
    top = write_small_logs(tmp_path / "tree", 2_000)
    procs = [_import_cli(top, azbench_home) for _ in range(2)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    summaries = [json.loads(out) for out, _ in outs]
    assert sum(len(s["imported"]) for s in summaries) == 2_000
    assert all(len(s["imported"]) + len(s["duplicates"]) == 2_000 for s in summaries)
    with Store.open() as store:
        rows = store.list_results()
    assert len(rows) == 2_000 and len({r.content_hash for r in rows}) == 2_000


@pytest.mark.timeout(300)
def test_kill_9_in_the_middle_of_a_2000_result_import_leaves_a_store_a_rerun_completes(
        azbench_home: Path, tmp_path: Path) -> None:
    import signal
    import time
    top = write_small_logs(tmp_path / "tree", 2_000)
    archive = azbench_home / "archive"
    for stage in ("check", "store"):  # killed among its checkers, then while it archives
        proc = _import_cli(top, azbench_home)
        workers: list[int] = []
        while proc.poll() is None:
            if stage == "check" and (workers := _children(proc.pid)):
                break
            if stage == "store" and archive.is_dir() and any(archive.iterdir()):
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the import ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        with Store.open() as store:
            assert store.list_results() == []  # one transaction: nothing or everything
        while any(_alive(w) for w in workers):  # its checkers leave too (the timeout bounds it)
            time.sleep(0.05)
    proc = _import_cli(top, azbench_home)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert len(json.loads(out)["imported"]) == 2_000
    with Store.open() as store:
        rows = store.list_results()
    assert len(rows) == 2_000
    for row in rows[::100]:
        assert file_hash(Path(row.log_path or "")) == row.content_hash


@pytest.mark.timeout(300)
def test_a_million_line_log_gets_a_one_line_verdict_and_a_long_lined_one_is_checked(
        store: Store, tmp_path: Path) -> None:
    huge = write_long_log(tmp_path / "v5.1" / "Org" / "results" / "s" / "bert" / "result_0.txt",
                          1_000_000)
    wide = write_long_log(tmp_path / "v5.1" / "Org" / "results" / "s" / "bert" / "result_1.txt",
                          40, width=1 << 20)  # 40 lines of 1 MiB: minutes for a quadratic strip
    summary = import_path(store, tmp_path / "v5.1", archive_dir=tmp_path / "arch",
                          check_compliance=True)
    by_path = {w.path: w.message for w in summary.warnings if w.message.startswith("compliance")}
    assert by_path[str(huge)] == (
        "compliance (ruleset 5.1.0) not checked: 1,000,003 MLLOG lines, over the 200,000 the "
        "checker is given (a 2.6 MB published GPT-3 log has 12,545)")
    assert by_path[str(wide)].startswith("compliance (ruleset 5.1.0) did not pass")
    assert {i.compliance_ok for i in summary.imported} == {None, False}
