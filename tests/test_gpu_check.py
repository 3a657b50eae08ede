"""infra/gpu-check.sh, the prepared GPU check (issue 30, point 7), in its CPU dry run: every
step prints one summary line and one JSON line, GPU-only steps say they are skipped, a failing
step still reports, and the script tells which wheels a machine without network needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("env", "health", "gemm", "smoke-1", "smoke-2", "smoke-mfu")


def _run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    results = tmp_path / "gpu_check.jsonl"
    full = {**os.environ, "AZBENCH_GPU_CHECK_PYTHON": sys.executable,
            "AZBENCH_GPU_CHECK_RESULTS": str(results), "OUT": str(tmp_path), **env}
    done = subprocess.run(["bash", str(ROOT / "infra" / "gpu-check.sh"), "--cpu-dry-run"], cwd=ROOT,
                          capture_output=True, text=True, env=full, timeout=600)
    lines = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
    return done, lines


def test_the_cpu_dry_run_reports_every_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done, lines = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    summary = {line.split()[1]: line.split()[2] for line in done.stdout.splitlines()
               if line.startswith("gpu-check: ") and line.split()[1] in STEPS}
    assert summary == {"env": "ok", "health": "ok", "gemm": "skipped", "smoke-1": "ok",
                       "smoke-2": "skipped", "smoke-mfu": "ok"}, done.stdout
    assert [x["step"] for x in lines] == list(STEPS)
    smoke = next(x for x in lines if x["step"] == "smoke-1")["data"]
    assert smoke["status"] == "success" and smoke["steps"] > 0
    mfu = next(x for x in lines if x["step"] == "smoke-mfu")["data"]
    assert mfu["code"] == "results.definitions.mfu" and mfu["non_embedding_params"] > 0
    assert "no peak FLOP/s" in mfu["mfu_note"]  # a CPU has no catalog peak: blank, with why
    assert (tmp_path / "gpu_check.jsonl").is_file()  # the copy under $OUT


def test_a_failing_step_still_prints_its_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done, lines = _run(tmp_path, AZBENCH_SMOKE_FAIL_AT_STEP="3")
    assert done.returncode == 0
    assert any(line.startswith("gpu-check: smoke-1 fail") for line in done.stdout.splitlines()), done.stdout
    assert "gpu-check: done, " in done.stdout and {x["step"] for x in lines} == set(STEPS)


def test_the_script_says_which_wheels_a_machine_without_network_needs() -> None:
    head = (ROOT / "infra" / "gpu-check.sh").read_text().split("set -uo pipefail")[0]
    assert "pip download --no-deps --only-binary=:all: --python-version 3.12" in head
    for wheel in ("mlperf-logging==", "pydantic==", "pydantic-core==", "sqlalchemy=="):
        assert wheel in head
    assert "under 8 minutes" in head
