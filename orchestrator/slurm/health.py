"""The health gate's batch script: templates/health_check.sbatch.j2 for a HealthCheckPlan.

Pure: a plan in, the script out. What the numbers are (expected bus bandwidth, its fractions,
the message size) is runs/health.py's choice; here they become #SBATCH lines and the check's
arguments.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.models import HealthCheckPlan
from orchestrator.slurm.batch import format_time_limit
from orchestrator.slurm.conf import compress_hostlist
from orchestrator.templating import render


def render_health_check(plan: HealthCheckPlan, templates_dir: Path | None = None) -> str:
    """The gate job on exactly plan.nodes, one task per GPU (per node on CPU sizes), its output
    at plan.output(job id)."""
    return render(
        "health_check.sbatch.j2", templates_dir,
        run_id=plan.run_id, attempt=plan.attempt, nodelist=compress_hostlist(list(plan.nodes)),
        node_count=len(plan.nodes), tasks_per_node=max(plan.gpus_per_node, 1),
        time_limit=format_time_limit(plan.time_limit_min), out_dir=plan.out_dir, output=plan.output("%j"),
        partition=plan.partition, gpus_per_node=plan.gpus_per_node, python=plan.python,
        script=plan.script, check_dir=plan.check_dir, ib_ports=plan.ib_ports,
        expected_busbw=plan.expected_busbw, warn_frac=plan.warn_frac, fail_frac=plan.fail_frac,
        size_mb=plan.size_mb, collective_timeout=plan.collective_timeout)
