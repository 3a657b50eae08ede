"""The CLI as a user runs it: help, catalog, dry-run plans, and one-line errors with exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli_helpers import azbench, one_line_error


def test_help_lists_every_command_and_exit_codes(azbench_home):
    result = azbench("--help", home=azbench_home)
    assert result.code == 0
    for command in ("up", "run", "status", "logs", "report", "down", "recipes", "catalog",
                    "results", "init", "extend", "ssh"):
        assert f"  {command} " in result.out
    assert "3 preflight failed" in result.out


def test_help_path_imports_no_heavy_module():
    code = ("import sys\nfrom orchestrator.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('azure', 'sqlalchemy', 'matplotlib', 'paramiko', 'torch', 'rich', 'pydantic', 'jinja2', "
            "'numpy', 'yaml') or m.startswith('orchestrator.') and m not in "
            "('orchestrator.cli', 'orchestrator.cli.app', 'orchestrator.cli.common', 'orchestrator.errors', "
            "'orchestrator.paths', 'orchestrator.safetext')]\n"
            "print('HEAVY=' + ','.join(sorted(heavy)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "HEAVY="


def test_the_root_lists_each_command_as_its_own_help_says_and_loads_it_by_name():
    """cli/app.py's table (LAZY) is the root's --help without importing a command module: each
    entry shows what its command's own help shows at every width click may give it, and loading
    the entries registers exactly their commands, none left out."""
    import typer.main

    import orchestrator.cli.app  # noqa: F401  (fills LAZY)
    from orchestrator.cli.common import LAZY, Unloaded, app

    for entry in LAZY.values():
        entry.load()
    root = typer.main.get_group(app)
    loaded = {name: cmd for name, cmd in root.commands.items() if not isinstance(cmd, Unloaded)}
    assert list(loaded) == list(LAZY)
    for name, entry in LAZY.items():
        for limit in range(20, 65):  # click caps help at 78 columns: 64 for the listing
            assert entry.get_short_help_str(limit) == loaded[name].get_short_help_str(limit), (name, limit)


def test_catalog_json_has_the_three_azure_gpu_sizes(azbench_home):
    result = azbench("catalog", "--json", home=azbench_home)
    rows = {r["name"]: r for r in json.loads(result.out)}
    assert rows["Standard_ND96isr_H100_v5"]["gpus_per_vm"] == 8
    assert rows["Standard_ND96isr_H200_v5"]["gpu_memory_gb"] == 141
    gb = rows["Standard_ND128isr_NDR_GB200_v6"]
    assert (gb["gpus_per_vm"], gb["nvlink_domain_vms"], gb["cpu_arch"]) == (4, 18, "arm64")
    assert gb["quota_family"] == "standardNDISRGB200V6NDRFamily"


def test_gb200_dry_run_needs_no_credentials(azbench_home):
    result = azbench("up", "--dry-run", "--provider", "azure", "--sku", "gb200", "--nodes", "2048",
                     "--region", "eastus", "--json", home=azbench_home,
                     env={"AZURE_CLIENT_ID": "", "AZURE_TENANT_ID": ""})
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert plan["total_gpus"] == 8192
    assert max(s["vms"] for s in plan["scale_sets"]) <= 100
    assert all(s["vms"] % 16 == 0 and s["racks"] for s in plan["scale_sets"])
    assert plan["cost_per_hour_usd"] > 200_000
    assert not (azbench_home / "azbench.db").exists(), "a dry run must not touch the store"


def test_dry_run_table_shows_cost_and_resources(azbench_home):
    result = azbench("up", "--dry-run", "--provider", "azure", "--sku", "h100", "--nodes", "4",
                     "--region", "westus3", env={"COLUMNS": "200"}, home=azbench_home)
    assert result.code == 0
    assert "4 x Standard_ND96isr_H100_v5 = 32 GPUs" in result.out
    assert "~$393.66/h (estimate)" in result.out
    assert "networkSecurityGroups" in result.out and "preflight:" in result.out


@pytest.mark.parametrize("args, code, message", [
    (["up", "--dry-run", "--provider", "azure", "--sku", "h1000", "--nodes", "2", "--region", "eastus"],
     2, "azbench: not found: unknown SKU 'h1000' (did you mean 'h100'? known: h100, h200, gb200, gb300, "
        "mi300x, d4s_v5, d8s_v5, d16s_v5, local)"),
    (["up", "--dry-run", "--nodes", "0"], 2, "azbench: config error: --nodes: must be between 1 and 100000, got 0"),
    (["up", "--dry-run", "--nodes", "-1"], 2, "azbench: config error: --nodes: must be between 1 and 100000, got -1"),
    (["up", "--dry-run", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastuss"],
     2, "azbench: config error: unknown region 'eastuss' (did you mean 'eastus'?)"),
    (["up", "--dry-run", "--provider", "azure", "--sku", "gb200", "--nodes", "20", "--region", "eastus"],
     2, "racks of 18 VMs: 20 nodes is not a whole number of racks"),
    (["up", "--yes", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastus"],
     2, "no Azure subscription: set azure.subscription_id"),
    (["up", "--yes", "--provider", "azureml", "--sku", "h100", "--nodes", "2", "--region", "eastus"],
     2, "no Azure ML workspace: set"),
    (["recipes", "show", "nosuch"], 2, "azbench: not found: unknown recipe 'nosuch'"),
    (["recipes", "show", "llama31_405b", "--sku", "h100", "--nodes", "1"], 2,
     "one model replica needs TP*PP*CP = 8*8*2 = 128 GPUs, at least 16 VMs"),
    (["sweep", "--dry-run"], 2, "no Azure subscription"),
])
def test_bad_input_is_one_line_with_exit_code(azbench_home, args, code, message):
    result = azbench(*args, home=azbench_home)
    assert result.code == code
    assert message in one_line_error(result)


def test_non_integer_nodes_is_a_usage_error(azbench_home):
    result = azbench("up", "--dry-run", "--nodes", "two", home=azbench_home)
    assert result.code == 2
    assert "Invalid value for '--nodes'" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("text, message", [
    ("name: a\nnodes: [\n", "cluster.yaml:3: malformed YAML"),
    ("name: a\nnodes: 2\nnodez: 3\n", "cluster.yaml:3: unknown key 'nodez'"),
])
def test_bad_spec_file(azbench_home, tmp_path, text, message):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    result = azbench("up", "--dry-run", "-f", str(path), home=azbench_home)
    assert result.code == 2
    assert message in one_line_error(result)


def test_debug_shows_the_traceback(azbench_home):
    result = azbench("--debug", "up", "--dry-run", "--nodes", "0", home=azbench_home)
    assert result.code != 0 and "Traceback" in result.err


def test_init_writes_a_spec_that_loads(azbench_home, tmp_path):
    path = tmp_path / "cluster.yaml"
    assert azbench("init", str(path), home=azbench_home).code == 0
    plan = azbench("up", "--dry-run", "-f", str(path), "--json", home=azbench_home)
    assert plan.code == 0, plan.err
    assert json.loads(plan.out)["nodes"] == 4
    again = azbench("init", str(path), home=azbench_home)
    assert again.code == 2 and "exists" in one_line_error(again)


def test_unwritable_home_is_a_store_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    result = azbench("status", home=blocker / "home")
    assert result.code == 6
    assert "is not writable" in one_line_error(result)
    assert blocker.read_text() == "x"


def test_corrupt_database_is_refused_and_left_intact(azbench_home):
    azbench_home.mkdir(parents=True)
    db = azbench_home / "azbench.db"
    garbage = b"this is not sqlite\x00\xff" * 100
    db.write_bytes(garbage)
    result = azbench("status", home=azbench_home)
    assert result.code == 6
    assert "is not an azbench database" in one_line_error(result)
    assert db.read_bytes() == garbage


def test_fake_provider_up_status_down_round_trip(azbench_home):
    up = azbench("up", "--provider", "fake", "--name", "f1", "--sku", "h100", "--nodes", "3",
                 "--region", "eastus", "--json", home=azbench_home)
    assert up.code == 0, up.err
    assert json.loads(up.out)["cluster"]["nodes"] == 3
    status = json.loads(azbench("status", "--json", home=azbench_home).out)
    assert [(c["name"], c["state"]) for c in status["clusters"]] == [("f1", "ready")]
    down = azbench("down", "f1", home=azbench_home)
    assert down.code == 0, down.err
    status = json.loads(azbench("status", "--json", home=azbench_home).out)
    assert [(c["name"], c["state"]) for c in status["clusters"]] == [("f1", "terminated")]
    again = azbench("down", "nope", home=azbench_home)
    assert again.code == 2 and "no cluster named 'nope'" in one_line_error(again)


def test_capacity_failure_from_fake_leaves_no_cluster(azbench_home):
    up = azbench("up", "--provider", "fake", "--name", "f2", "--sku", "h100", "--nodes", "3",
                 "--region", "eastus", home=azbench_home, env={"AZBENCH_FAKE_FAIL": "capacity"})
    assert up.code == 4 and "AllocationFailed" in one_line_error(up)
    status = json.loads(azbench("status", "--json", home=azbench_home).out)
    assert status["clusters"] == []
