"""Shared pytest set-up. Fixture plugins live in tests/fixtures/, one module per real server."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

pytest_plugins: list[str] = ["tests.fixtures.arm", "tests.fixtures.postgres", "tests.fixtures.sshd",
                             "tests.fixtures.slurm"]

SHARED = Path(__file__).resolve().parents[2] / "shared"


def pytest_configure(config: pytest.Config) -> None:
    """A test that names no $AZBENCH_HOME gets this run's own, never the user's ~/.azbench: an
    interrupted run once left an Azure operation token there (clusters/exp/azure-lro.json) that
    every later run of test_expiry tried to resume against a fake ARM long gone."""
    if not os.environ.get("AZBENCH_HOME"):
        os.environ["AZBENCH_HOME"] = tempfile.mkdtemp(prefix="azbench-test-home-")


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch) -> None:
    """Tables print at the width a pipe gets (cli.common.make_console), whatever runs the suite:
    pytest-xdist's workers inherit COLUMNS=80, which folded table cells and made the same test
    pass serially and fail under -n 2."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def azbench_home(tmp_path, monkeypatch) -> Path:
    """A private $AZBENCH_HOME for one test."""
    home = tmp_path / "azbench-home"
    monkeypatch.setenv("AZBENCH_HOME", str(home))
    monkeypatch.delenv("AZBENCH_DB_URL", raising=False)
    return home


@pytest.fixture
def shared_logs() -> Path:
    logs = SHARED / "mlperf-logs"
    if not logs.is_dir():
        pytest.skip(f"{logs} is absent (the shared MLPerf logs are not checked out beside the repo)")
    return logs
