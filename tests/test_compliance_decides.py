"""Compliance decides: a failing run is not scored, the ruleset defaults to the container's round,
the in-container checker's verdict is recorded, and a ruleset the checker lacks is "not checked"."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.recipes.catalog import resolve
from orchestrator.report.build import build_report
from orchestrator.results.compliance import check_log, in_container
from orchestrator.results.mllog import parse_lines
from orchestrator.runs.launch import launch_attempt
from orchestrator.slurm.launcher import attempt_script
from orchestrator.store.database import ResultRow


def _row(k: int, minutes: float, compliance_ok: bool | None) -> ResultRow:
    return ResultRow(id=k, content_hash=f"c{k}", source="import", round="v4.1", submitter="Org",
                     system="sys_n8", benchmark="gpt3", status="success", converged=True,
                     minutes=minutes, run_start_ms=k, nodes=8, gpus=64, sku="h100",
                     compliance_ok=compliance_ok)


def test_a_compliance_failing_run_is_excluded_from_the_score() -> None:
    # gpt3 needs 3 runs: score = median. The fastest run (1.0) failed compliance, so it counts
    # as not converged (the dropped slowest): 2.0 is dropped as fastest and the score is 3.0.
    rows = [_row(1, 1.0, False), _row(2, 2.0, True), _row(3, 3.0, None)]
    group = build_report(rows).groups[0]
    assert group.score_raw_minutes == pytest.approx(3.0)
    assert "1 run(s) failed compliance" in group.score_note
    line = next(r for r in group.run_lines if r.result_id == 1)
    assert not line.scored and line.compliance_ok is False
    clean = build_report([_row(1, 1.0, True), _row(2, 2.0, True), _row(3, 3.0, None)]).groups[0]
    assert clean.score_raw_minutes == pytest.approx(2.0) and "compliance" not in clean.score_note


def test_a_ruleset_the_checker_lacks_is_not_checked(tmp_path: Path) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"key": "run_start", "time_ms": 1, "value": null, "metadata": {}}\n')
    verdict = check_log(log, "99.0.0")
    assert not verdict.checked and verdict.label == "not checked"
    assert "not supported" in verdict.messages[0]


def test_the_in_container_verdict_is_read_from_the_log() -> None:
    def verdict(rc: int):
        s = parse_lines([":::MLLOG {\"key\": \"run_start\", \"time_ms\": 1, \"value\": null, \"metadata\": {}}",
                         f":::AZBENCH_COMPLIANCE rc={rc} ruleset=5.0.0"])
        return in_container(s.compliance_line)
    passed, failed, missing = verdict(0), verdict(1), verdict(91)
    assert passed is not None and passed.ok and passed.checked
    assert failed is not None and not failed.ok and failed.checked and failed.label == "did not pass"
    assert missing is not None and not missing.checked and missing.label == "not checked"
    assert in_container(None) is None


def test_the_launch_records_the_checker_and_defaults_to_the_container_round() -> None:
    r = resolve("llama31_405b", "h100", 64)  # v5.0 implementation -> ruleset 5.0.0
    assert r.ruleset == "5.0.0" and r.env["MLPERF_RULESET"] == "5.0.0"
    assert resolve("llama31_405b", "h100", 64, "5.1.0").ruleset == "5.1.0"  # explicit wins
    assert resolve("rgat", "h100", 1).benchmark_key == "gnn"  # v4.1 gnn implementation
    script = attempt_script(launch_attempt(r, "/shared/azbench/runs/x"))
    tail = script[script.index("mlperf_logging.compliance_checker"):]
    assert "|| true" not in tail
    assert 'echo ":::AZBENCH_COMPLIANCE rc=$crc ruleset=5.0.0" >>"$LOG"' in tail
