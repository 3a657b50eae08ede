"""Compliance decides: a failing run is not scored, the ruleset defaults to the container's round,
the in-container checker's verdict is recorded, and a ruleset the checker lacks is "not checked"."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.recipes.catalog import resolve
from orchestrator.report.build import build_report
from orchestrator.results.checkpool import check_log
from orchestrator.results.compliance import in_container
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


def test_the_launch_records_the_checker_and_defaults_to_the_container_round(tmp_path: Path) -> None:
    r = resolve("llama31_405b", "h100", 64)  # v5.0 implementation -> ruleset 5.0.0
    assert r.ruleset == "5.0.0" and r.env["MLPERF_RULESET"] == "5.0.0"
    assert resolve("llama31_405b", "h100", 64, "5.1.0").ruleset == "5.1.0"  # explicit wins
    assert resolve("rgat", "h100", 1).benchmark_key == "gnn"  # v4.1 gnn implementation
    script = attempt_script(launch_attempt(r, "/shared/azbench/runs/x"))
    tail = script[script.index("mlperf_logging.compliance_checker"):]
    assert "|| true" not in tail
    # The ruleset is a template value, so it is shell-quoted outside the double quotes (q prints
    # 5.0.0 bare); the line bash runs still writes ":::AZBENCH_COMPLIANCE rc=N ruleset=5.0.0".
    line = 'echo ":::AZBENCH_COMPLIANCE rc=$crc ruleset="5.0.0 >>"$LOG"'
    assert line in tail.splitlines()
    import subprocess
    log = tmp_path / "train.log"
    subprocess.run(["bash", "-c", f"crc=91; LOG={str(log)!r}; {line}"], check=True)
    assert log.read_text() == ":::AZBENCH_COMPLIANCE rc=91 ruleset=5.0.0\n"


def _summarizer_score(submitter_dir: Path, ruleset: str, benchmark: str) -> float | None:
    """The score MLPerf's own result summarizer gives (run on a copy: its RCP step may rewrite
    scaling.json)."""
    import csv
    import shutil
    import subprocess
    import sys
    copy = submitter_dir.parent.parent / "summarizer-copy" / submitter_dir.name
    shutil.copytree(submitter_dir, copy)
    out = copy.parent / "summary.csv"
    subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(copy), "training",
                    ruleset, "--csv", str(out)], capture_output=True, timeout=600, check=True)
    rows = list(csv.DictReader(out.open()))
    value = rows[0].get(benchmark) if rows else None
    return float(value) if value else None


def _break(log: Path, key: str) -> None:
    """Drop the line of one required key: the compliance checker then fails the log."""
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(line for line in lines if f'"key": "{key}"' not in line))


def test_a_plain_import_scores_a_non_compliant_tree_as_the_summarizer_does(shared_logs: Path,
                                                                           tmp_path: Path) -> None:
    """Azure's v3.1 BERT (10 runs) with train_samples removed from one scored run, then from a
    second: `azbench results import` (no flag) and the summarizer agree on the score, and on
    giving none once two runs fail."""
    import json
    import shutil

    pytest.importorskip("mlperf_logging")
    from tests.cli_helpers import azbench_in_process
    tree = tmp_path / "v3.1" / "Azure"
    shutil.copytree(shared_logs / "v3.1" / "Azure", tree)
    bench = tree / "results" / "ND_H100_v5_pytorch" / "bert"
    _break(bench / "result_5.txt", "train_samples")  # a run the olympic mean keeps
    expected = _summarizer_score(tree, "3.1.0", "bert")
    home = tmp_path / "home"
    done = azbench_in_process("results", "import", str(tree), home=home)
    assert done.code == 0, done.err
    assert "result_5.txt: compliance (ruleset 3.1.0) did not pass" in done.err
    report = json.loads(azbench_in_process("report", "--json", home=home).out)
    group = next(g for g in report["groups"] if g["benchmark"] == "bert")
    assert expected is not None and group["score_minutes"] == pytest.approx(expected, abs=1e-6)
    assert "1 run(s) failed compliance" in group["score_note"]

    second = tmp_path / "second" / "v3.1" / "Azure"
    shutil.copytree(tree, second)
    _break(second / "results" / "ND_H100_v5_pytorch" / "bert" / "result_2.txt", "train_samples")
    assert _summarizer_score(second, "3.1.0", "bert") is None
    home2 = tmp_path / "home2"
    assert azbench_in_process("results", "import", str(second), home=home2).code == 0
    report = json.loads(azbench_in_process("report", "--json", home=home2).out)
    group = next(g for g in report["groups"] if g["benchmark"] == "bert")
    assert group["score_minutes"] is None and not group["official"]
    assert "2 non-converged runs; at most 1 allowed" in group["score_note"]
