"""MLPerf recipes reach Slurm as their container launch script: `azbench run --dry-run` shows it,
and a real attempt submits exactly that script (pinned nodes excluded, never resumed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.specs.run import RunSpec
from orchestrator.models import Cluster
from orchestrator.recipes.catalog import get_recipe
from orchestrator.runs.attempts import attempt_spec
from orchestrator.slurm.launcher import SlurmLauncher, attempt_script
from orchestrator.store.schema import RunRow
from tests.cli_helpers import azbench, one_line_error
from testsupport.fake_runner import FakeRunner

GPU = Cluster(name="g", provider="ssh", sku="Standard_ND96isr_H100_v5", nodes=64,
              workdir="/shared/azbench", partition="gpu")


def test_mlperf_attempt_submits_the_container_launch_script():
    recipe = get_recipe("llama2_70b_lora")
    row = RunRow(id="r1", cluster="g", recipe=recipe.name, benchmark=recipe.benchmark, nodes=8,
                 run_dir="/shared/azbench/runs/r1")
    spec = attempt_spec(row, RunSpec(recipe=recipe.name, nodes=[8]), recipe, GPU, 2,
                        resume=True, exclude=["gpu-0007"])
    script = attempt_script(spec, partition=GPU.partition)
    assert spec.container and "--container-image" in script
    assert spec.resume is False, "timed MLPerf runs restart, never resume"
    assert "gpu-0007" in script and spec.gpus_per_node == 8
    fake = FakeRunner()
    fake.on("mkdir -p", stdout="")
    fake.on("sbatch", stdout="4242\n")
    ref = SlurmLauncher(fake, GPU).submit(spec)
    assert ref.job_id == "4242"
    assert fake.files["/shared/azbench/runs/r1/attempt-2/job.sbatch"].decode() == script


def test_run_dry_run_prints_resolved_parallelism_and_script(azbench_home):
    result = azbench("run", "llama31_405b", "--dry-run", "--sku", "gb200", "--nodes", "2048",
                     home=azbench_home)
    assert result.code == 0, result.err
    assert "TP 4 x PP 8 x CP 2 x DP 128, GBS 1024" in result.out
    assert "srun" in result.out and "--container-image" in result.out
    bad = azbench("run", "llama31_405b", "--dry-run", "--sku", "h100", "--nodes", "1",
                  home=azbench_home)
    assert bad.code == 2 and "at least 16 VMs" in one_line_error(bad)


def _master_port(template: str, cluster: str, job_id: int) -> int:
    """Run the template's own port lines in bash, as Slurm would, for one cluster and job."""
    import subprocess
    lines = [ln for ln in (Path(__file__).resolve().parents[1] / "templates" / template).read_text().splitlines()
             if ln.startswith(("CLUSTER_SALT=", "export MASTER_PORT="))]
    assert len(lines) == 2, f"{template}: expected the salt and the port line, got {lines}"
    out = subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$MASTER_PORT"'], check=True,
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": str(job_id),
                              "SLURM_CLUSTER_NAME": cluster})
    return int(out.stdout)


@pytest.mark.parametrize("template", ["sbatch.sh.j2", "container_launch.sh.j2"])
def test_rendezvous_port_is_salted_per_cluster_and_stable_per_job(template):
    """Two clusters sharing hosts (local emulation) with the same job id get different ports."""
    ports = {name: _master_port(template, name, 42) for name in ("alpha", "beta", "faults")}
    assert len(set(ports.values())) == 3, ports
    assert all(20000 <= p < 30000 for p in ports.values()), ports
    assert _master_port(template, "alpha", 42) == ports["alpha"]
    assert _master_port(template, "alpha", 43) != ports["alpha"]
