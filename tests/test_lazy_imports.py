"""The few imports of our own modules that stay inside functions (issue 44) each name what they
keep off a path; these tests hold those paths to it, so a stated reason cannot go stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _loaded(code: str, home: Path) -> list[str]:
    """The modules a fresh interpreter holds after `code`, one per line of its last output line."""
    script = code + "\nimport sys\nprint('LOADED=' + ','.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"AZBENCH_HOME": str(home), "PATH": "/usr/bin:/bin"}).stdout
    return out.strip().splitlines()[-1].removeprefix("LOADED=").split(",")


def test_a_dry_run_up_loads_no_database_driver(tmp_path: Path) -> None:
    # clusters/lifecycle.py imports EventRow inside the functions that write events: store.schema
    # brings sqlalchemy, which a dry run (no store) never needs.
    code = ("from orchestrator.cli import main\n"
            "try:\n    main(['up', '--provider', 'local', '--nodes', '2', '--dry-run'])\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code")
    loaded = _loaded(code, tmp_path)
    assert "orchestrator.clusters.lifecycle" in loaded  # the path under test was taken
    assert [m for m in loaded if m.split(".")[0] == "sqlalchemy"] == []


def test_reading_a_backends_records_loads_no_provider_module(tmp_path: Path) -> None:
    # Each backend's `_make` imports its provider.py inside: the registry loads the package for
    # every stored cluster's record (models.props_model), which needs only its props model.
    code = ("from orchestrator import backends\nfrom orchestrator.models import props_model\n"
            "for name in backends.names():\n    props_model(name)")
    loaded = _loaded(code, tmp_path)
    assert {f"orchestrator.providers.{b}" for b in ("azure", "azureml", "local", "ssh", "fake")} <= set(loaded)
    assert [m for m in loaded if m.startswith("orchestrator.providers.") and m.endswith(".provider")] == []


@pytest.mark.parametrize(("args", "module"), [
    # cli/fabric.py and cli/fabric_locate.py import the test and locate runners inside the
    # commands that open the store; cli/recipes.py imports EventRow inside prepare's event.
    (["fabric", "inspect", str(ROOT / "tests/data/nccl_excerpts/nccl-tests-214_sendrecv_perf_2node.txt")],
     "orchestrator.cli.fabric_locate"),
    (["recipes", "list", "--json"], "orchestrator.cli.recipes"),
])
def test_commands_that_open_no_store_load_no_database_driver(tmp_path: Path, args: list[str], module: str) -> None:
    code = ("from orchestrator.cli import main\n"
            f"try:\n    main({args!r})\n"
            "except SystemExit as e:\n    assert e.code in (0, 10, None), e.code")
    loaded = _loaded(code, tmp_path)
    assert module in loaded  # the command's module was loaded: the path under test was taken
    assert [m for m in loaded if m.split(".")[0] == "sqlalchemy"] == []
