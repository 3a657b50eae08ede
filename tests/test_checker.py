"""mlperf_logging's compliance checker in-process (results/checker.py) and in bounded workers
(results/checkpool.py): the same verdicts as `python -m mlperf_logging.compliance_checker`, the
replaced costs equal to what they replace (read from the installed source), and a hostile log
that costs at most its time bound."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.results import checker, checkpool
from orchestrator.results.checker import UPSTREAM_STRIP, _cut, run_checker
from orchestrator.results.checkpool import MAX_CHECK_LINES, CheckJob, check_log, check_logs
from tests.test_mllog import ev

pytest.importorskip("mlperf_logging")
pytestmark = pytest.mark.timeout(300)  # a hang is a failure, not a wait

BERT = "v3.1/Azure/results/ND_H100_v5_pytorch/bert/result_0.txt"
GPT3 = "v3.1/Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3/result_2.txt"


def _parser_modules() -> list[object]:
    import importlib
    import pkgutil

    from mlperf_logging.compliance_checker import mlp_parser
    return [importlib.import_module(f"{mlp_parser.__name__}.{m.name}")
            for m in pkgutil.iter_modules(mlp_parser.__path__) if m.name.startswith("ruleset_")]


def test_every_installed_parser_strips_lines_with_the_rule_we_replace() -> None:
    """Read from the installed mlperf_logging: if a release changes the rule, this fails and
    _cut must be checked against the new one."""
    modules = _parser_modules()
    assert len(modules) >= 10
    for module in modules:
        source = inspect.getsource(module.strip_and_dedup)  # type: ignore[attr-defined]
        assert UPSTREAM_STRIP in source, module
        assert "if TOKEN not in l" in source, module


_PIECES = list(":MLOG xv{}\"\n\r\t\x0b\u2028é") + [":::MLLOG ", ":::MLL"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=20).map("".join)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_the_linear_cut_is_the_regex_it_replaces(line: str) -> None:
    for token in (":::MLLOG ", ":::MLL"):
        assert _cut(line, token) == re.sub(".*" + token, token, line)


def test_the_patched_parser_reads_a_real_log_exactly_as_the_original(
        shared_logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlperf_logging.compliance_checker.mlp_parser import ruleset_310

    def upstream(gen: object) -> list[str]:  # the rule the test above found in the source
        token = ruleset_310.TOKEN
        return [re.sub(".*" + token, token, line) for line in gen if token in line]  # type: ignore[attr-defined]

    run_checker(shared_logs / BERT, "3.1.0")  # patches ruleset_310 in this process
    assert ruleset_310.strip_and_dedup.__module__ == checker.__name__
    log = shared_logs / GPT3
    with open(log, encoding="latin-1") as fh:
        patched = ruleset_310.parse_generator(fh)
    monkeypatch.setattr(ruleset_310, "strip_and_dedup", upstream)
    with open(log, encoding="latin-1") as fh:
        original = ruleset_310.parse_generator(fh)
    assert len(original[0]) == 12_545 and patched == original


def _subprocess_verdict(log: Path, ruleset: str, tmp: Path) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage",
                           "training", "--ruleset", ruleset, "--log_output", str(tmp / "c.log"),
                           str(log)], capture_output=True, text=True, cwd=tmp, check=False)
    return proc.returncode == 0, proc.stderr


def test_in_process_verdicts_are_the_command_line_checker_verdicts(shared_logs: Path,
                                                                     tmp_path: Path) -> None:
    broken = tmp_path / "result_0.txt"  # a real log without its run_start and with a 2nd seed
    lines = (shared_logs / BERT).read_text().splitlines(keepends=True)
    lines = [ln for ln in lines if '"key": "run_start"' not in ln]
    lines += [ln.replace('"value": ', '"value": 1', 1) for ln in lines if '"key": "seed"' in ln]
    broken.write_text("".join(lines))
    for log, ruleset in ((shared_logs / BERT, "3.1.0"), (broken, "3.1.0"), (broken, "5.1.0")):
        ok, stderr = _subprocess_verdict(log, ruleset, tmp_path)
        verdict = run_checker(log, ruleset)
        assert verdict.ok == ok and verdict.checked
        # the command line's lines, as the importer kept them before; in any order, because
        # the checker walks a set of str tuples (its order changes with PYTHONHASHSEED)
        assert _unordered(verdict.messages) == _unordered(checkpool_messages(stderr))
        assert ok == (log != broken)


def _unordered(lines: list[str]) -> list[str]:
    """The lines sorted, and "'a' or 'b'" alternatives sorted within each line."""
    return sorted(" or ".join(sorted(line.split(" or "))) for line in lines)


def checkpool_messages(stderr: str) -> list[str]:
    from orchestrator.results.compliance import trim_messages
    return trim_messages(stderr)


def test_the_checkers_lines_survive_an_earlier_info_call_at_warning(shared_logs: Path) -> None:
    """A logging.info() made while the root logger sat at WARNING is cached as disabled; setting
    the root's level by assignment keeps that cache, and the checker's INFO lines and its SUCCESS
    were lost (a check in a worker forked after such a call read ok with no evidence)."""
    import logging
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.WARNING)
    try:
        logging.info("cached as disabled at WARNING")
        verdict = run_checker(shared_logs / BERT, "3.1.0")
        assert verdict.ok and verdict.messages and verdict.messages[-1].endswith("SUCCESS"), verdict.messages
        assert root.level == logging.WARNING  # restored
    finally:
        root.setLevel(before)


def test_check_logs_runs_in_parallel_workers_and_keeps_the_order(shared_logs: Path,
                                                                 tmp_path: Path) -> None:
    broken = tmp_path / "result_0.txt"
    broken.write_text(ev("submission_benchmark", "bert") + "\n")
    jobs = [CheckJob(shared_logs / BERT, "3.1.0"), CheckJob(broken, "3.1.0"),
            CheckJob(broken, "99.0.0"), CheckJob(shared_logs / BERT, "3.1.0")]
    seen: list[int] = []
    verdicts = check_logs(jobs, workers=2, on_done=lambda i, _v: seen.append(i))
    assert [v.label for v in verdicts] == ["passed", "did not pass", "not checked", "passed"]
    assert sorted(seen) == [0, 1, 2, 3]
    assert verdicts[2].messages == ["ruleset 99.0.0 not supported by installed mlperf_logging"]


def _long_log(path: Path, lines: int) -> Path:
    head = ev("submission_benchmark", "bert") + "\n" + ev("run_start") + "\n"
    body = (ev("tracked_stats", {"step_time": 1.0}, step=1) + "\n") * lines
    path.write_text(head + body + ev("run_stop", status="success") + "\n")
    return path


def test_a_log_past_its_time_bound_is_not_checked_and_the_next_one_is(shared_logs: Path,
                                                                     tmp_path: Path) -> None:
    slow = _long_log(tmp_path / "result_0.txt", 150_000)  # under the line bound: it runs
    jobs = [CheckJob(slow, "3.1.0"), CheckJob(shared_logs / BERT, "3.1.0")]
    verdicts = check_logs(jobs, workers=1, timeout_s=1.0)  # one worker: killed, then replaced
    assert verdicts[0].label == "not checked"
    assert verdicts[0].messages == ["compliance checker timed out after 1 s"]
    assert verdicts[1].label == "passed"


def test_a_log_over_the_line_bound_gets_a_verdict_without_the_checker(tmp_path: Path) -> None:
    job = CheckJob(tmp_path / "never-read.txt", "3.1.0", mllog_lines=MAX_CHECK_LINES + 1)
    (verdict,) = check_logs([job])
    assert verdict.label == "not checked"
    assert verdict.messages[0].startswith(f"{MAX_CHECK_LINES + 1:,} MLLOG lines, over the")


def test_a_worker_that_dies_is_a_not_checked_verdict(shared_logs: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def die(log: Path, ruleset: str, usage: str = "training") -> object:
        if log.name == "die.txt":
            os._exit(3)
        return real(log, ruleset, usage)
    real = checker.run_checker
    monkeypatch.setattr(checker, "run_checker", die)  # the fork inherits it
    (tmp_path / "die.txt").write_text("x\n")
    jobs = [CheckJob(tmp_path / "die.txt", "3.1.0"), CheckJob(shared_logs / BERT, "3.1.0")]
    verdicts = check_logs(jobs, workers=1)
    assert verdicts[0].messages == ["the checker process exited with code 3"]
    assert verdicts[1].label == "passed"


def test_check_log_names_a_missing_log(tmp_path: Path) -> None:
    from orchestrator.errors import NotFoundError
    with pytest.raises(NotFoundError, match="does not exist"):
        check_log(tmp_path / "absent.txt", "v5.1")


def test_workers_are_gone_after_the_checks(shared_logs: Path) -> None:
    import multiprocessing
    check_logs([CheckJob(shared_logs / BERT, "3.1.0")] * 3, workers=2)
    assert multiprocessing.active_children() == []
    assert checkpool.default_workers() >= 1
