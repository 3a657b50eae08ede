"""The health gate's pure parts: node choice, verdict parsing, the rendered batch script; and the
check script itself run as a single local process (no Slurm)."""

from __future__ import annotations

import json
import subprocess
import sys

from orchestrator.specs.run import HealthPolicy
from orchestrator.models import JobState
from orchestrator.paths import templates_dir as default_templates_dir
from orchestrator.runs.health import choose_nodes, health_plan, parse_gate_output
from orchestrator.slurm.health import render_health_check
from orchestrator.slurm.states import NodeInfo


def line(node: str, check: str, status: str, value=None, detail: str = "", rank: int = 0) -> str:
    body = {"node": node, "check": check, "status": status, "value": value, "detail": detail}
    return f"{rank}: AZBENCH_HEALTH {json.dumps(body)}"


def healthy(node: str, rank: int) -> list[str]:
    return [line(node, "disk", "ok", 80, rank=rank), line(node, "done", "ok", rank=rank)]


def test_choose_nodes_skips_bad_and_excluded_and_keeps_a_spare():
    infos = {f"node{i}": NodeInfo(f"node{i}", "idle") for i in range(1, 13)}
    infos["node2"] = NodeInfo("node2", "down", "Not responding", responding=False)
    infos["node3"] = NodeInfo("node3", "drained")
    assert choose_nodes(infos, ["node4"], 2) == ["node1", "node5", "node6"]
    assert choose_nodes(infos, [], 9)[-1] == "node12"  # natural order; 9 + 2 spares


def test_a_failing_check_fails_its_node_with_the_reason():
    text = "\n".join(healthy("node1", 0) + [line("node2", "injected", "fail", None, "marked", 1)]
                     + healthy("node2", 1) + [line("*", "allreduce_busbw", "ok", 0.6)])
    result = parse_gate_output(text, ["node1", "node2"])
    assert result.failed == {"node2": "injected: marked"}
    assert result.healthy == ["node1"] and not result.fabric and result.busbw_gbps == 0.6


def test_a_silent_node_fails_and_nothing_at_all_is_a_fabric_fault():
    result = parse_gate_output("\n".join(healthy("node1", 0)), ["node1", "node2"])
    assert "no report" in result.failed["node2"] and result.healthy == ["node1"]
    empty = parse_gate_output("srun: error\n", ["node1"], JobState.FAILED)
    assert "printed no verdict" in empty.fabric and "failed" in empty.fabric


def test_busbw_under_the_fail_fraction_is_a_fabric_fault_and_warn_only_warns():
    base = healthy("a", 0) + healthy("b", 1)
    bad = parse_gate_output("\n".join(base + [line("*", "allreduce_busbw", "fail", 200, "44%")]), ["a", "b"])
    assert bad.fabric.startswith("all-reduce busbw 200") and not bad.failed
    warn = parse_gate_output("\n".join(base + [line("*", "allreduce_busbw", "warn", 400, "88%")]), ["a", "b"])
    assert not warn.fabric and warn.warnings == ("* allreduce_busbw: 88%",)


def test_collective_failing_everywhere_is_a_fabric_fault():
    text = "\n".join([line("a", "allreduce", "fail", None, "timeout", 0),
                      line("b", "allreduce", "fail", None, "timeout", 1)])
    result = parse_gate_output(text, ["a", "b"])
    assert "all-reduce failed on every node" in result.fabric and not result.failed


def test_gpu_script_checks_gpus_ib_and_busbw_against_the_catalog():
    script = render_health_check(health_plan(
        run_id="r1", attempt=2, nodes=["gpu1", "gpu2", "gpu3"],
        out_dir="/shared/runs/r1/health/attempt-2", script="/s/h.py", check_dir="/shared/runs/r1",
        python="python3", sku="h100",
        policy=HealthPolicy(busbw_warn_fraction=0.9, busbw_fail_fraction=0.8), partition="gpu"))
    # The hostlist is shell-quoted as every template value is (sbatch strips the quotes).
    assert "#SBATCH --nodelist='gpu[1-3]'" in script and "#SBATCH --nodes=3" in script
    assert "#SBATCH --ntasks-per-node=8" in script and "#SBATCH --gpus-per-node=8" in script
    assert "--gpus 8" in script and "--ib-ports 8" in script and "--expected-busbw 450.0" in script
    assert "--warn-frac 0.9" in script and "--fail-frac 0.8" in script
    # Without fractions in the spec: the published baseline (16G, warn below 400 of 450 GB/s).
    default = render_health_check(health_plan(
        run_id="r1", attempt=2, nodes=["gpu1", "gpu2"], out_dir="/o", script="/s/h.py",
        check_dir="/c", python="python3", sku="h100", policy=HealthPolicy()))
    assert "--warn-frac 0.8889" in default and "--fail-frac 0.6667" in default
    assert "--size-mb 17179.869184" in default
    assert "#SBATCH --job-name=azbench-health-r1-a2" in script and "--no-requeue" in script


def test_cpu_script_has_no_gpu_lines():
    script = render_health_check(health_plan(
        run_id="r1", attempt=1, nodes=["node1"], out_dir="/o", script="/s/h.py", check_dir="/d",
        python="/usr/bin/python3", sku="local", policy=HealthPolicy()))
    assert "--gpus-per-node" not in script and "--gpus 0" in script and "--expected-busbw 0" in script


def test_check_script_runs_as_one_process_and_honours_the_fault_switch(tmp_path):
    env = {"SLURMD_NODENAME": "nodeX", "AZBENCH_HEALTH_FAULT_NODES": "nodeX",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29731", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(default_templates_dir() / "health_check.py"),
                          "--dir", str(tmp_path), "--size-mb", "0.1", "--iters", "1"],
                         capture_output=True, text=True, env=env, timeout=120)
    result = parse_gate_output(out.stdout, ["nodeX"])
    assert out.returncode == 0, out.stderr
    assert result.failed == {"nodeX": "injected: AZBENCH_HEALTH_FAULT_NODES names this node"}
    assert "disk" in out.stdout and "memory" in out.stdout
