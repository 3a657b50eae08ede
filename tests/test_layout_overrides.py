"""The map follows what will run (issue 46 point 4): -p overrides of the layout's variables flow
into the layout, the rank-order map, the header, --segment, DGXSYSTEM and MINIBS; GB200 node
counts whose model-parallel groups do not fit the racks a plan builds are refused with the
nearest counts that fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.hardware import catalog
from orchestrator.recipes import catalog as R
from orchestrator.recipes.parallelism import fitting_counts
from orchestrator.runs import launch as L
from tests.cli_helpers import run_cli

TP8 = {"TENSOR_MODEL_PARALLEL": "8"}


def test_tensor_parallel_8_on_2048_gb200_is_planned_everywhere_the_script_says_it() -> None:
    preview = L.describe_launch("llama31_405b", "gb200", 2048, params=dict(TP8))
    r = preview.resolved
    assert (r.tp, r.pp, r.cp, r.dp, r.gbs, r.minibs) == (8, 8, 2, 64, 1024, 16)
    assert r.placement is not None
    # Megatron's generator with TP_PP_DP_MAPPING: PP members are TP*CP = 16 ranks (4 VMs) apart,
    # so a pipeline of 8 stages covers 32 VMs: 2 racks of 16.
    assert r.placement.links["pp"] == "infiniband" and r.placement.spans["pp"].racks == 2
    assert r.placement.links["tp"] == "nvlink" and r.placement.segment == 16
    assert any(w.startswith("PP 8 leaves its NVLink domain") and "2 racks" in w for w in r.warnings)
    assert any("larger than one rack of 16 VMs" in w for w in r.warnings)
    script = preview.script
    assert "TP 8 PP 8 CP 2 VP 8 DP 64" in script and "--segment=16" in script
    assert "export DGXSYSTEM=azbench_ND_GB200_v6_2048x4x16xtp8pp8cp2" in script
    assert "export MINIBS=16\n" in script.split("azbench's layout and the recipe's overrides")[1]


def test_minibs_override_sets_the_global_batch_through_dp() -> None:
    r = R.resolve("llama31_405b", "gb200", 2048, env={"MINIBS": "16"})
    assert (r.dp, r.minibs, r.gbs) == (128, 16, 2048)


def test_an_override_that_breaks_the_relations_is_one_line() -> None:
    with pytest.raises(ConfigError) as exc:
        R.resolve("llama31_405b", "gb200", 2048, env={"TENSOR_MODEL_PARALLEL": "3"})
    assert "TENSOR_MODEL_PARALLEL=3" in exc.value.message and "\n" not in exc.value.message


@pytest.mark.parametrize("nodes, near", [(144, "128 or 160"), (2304, "2,288 or 2,320")])
def test_gb200_counts_whose_groups_overflow_the_racks_are_refused(nodes: int, near: str) -> None:
    with pytest.raises(ConfigError) as exc:
        R.resolve("llama31_405b", "gb200", nodes)
    held = nodes // 18
    assert f"built as {held} NVL72 rack(s) of 18 VMs" in exc.value.message
    assert f"would need {nodes // 16} racks" in exc.value.message
    assert exc.value.message.endswith(f"nearest counts that fit: {near}")


def test_the_nearest_counts_do_fit() -> None:
    gb200 = catalog.lookup("gb200")
    for n in fitting_counts(144, 16, gb200) + fitting_counts(2304, 16, gb200):
        r = R.resolve("llama31_405b", "gb200", n)
        assert r.placement is not None and r.placement.racks == n // 16


def test_dry_run_refuses_before_writing_a_script(capsys: pytest.CaptureFixture[str], azbench_home: Path) -> None:
    code, out, err = run_cli(capsys, "run", "llama31_405b", "--sku", "gb200", "--nodes", "144", "--dry-run")
    assert code == 2 and "#!/bin/bash" not in out and "nearest counts that fit: 128 or 160" in err
