"""The fabric test's batch script: templates/fabric_test.sbatch.j2 for a FabricTestPlan.

Pure: a plan in, the script out. Which collectives, sizes and nodes are fabric/runner.py's choice;
here they become #SBATCH lines and one job step per collective (nccl-tests on GPU sizes, azbench's
gloo runner on CPU ones).
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import FabricTestPlan
from orchestrator.slurm.batch import format_time_limit
from orchestrator.slurm.conf import compress_hostlist
from orchestrator.templating import render

_SIZE = re.compile(r"^\d+[KMG]?$")
_NAME = re.compile(r"^[a-z_]+$")


def render_fabric_test(plan: FabricTestPlan, templates_dir: Path | None = None) -> str:
    """The fabric test job: `plan.nodes` nodes (exactly plan.nodelist when given), its output
    at plan.output('%j')."""
    for size in (plan.min_size, plan.max_size):
        if not _SIZE.match(size):
            raise ConfigError(f"fabric test: message size {size!r} is not bytes or a number with K, M or G")
    for name in plan.collectives:
        if not _NAME.match(name):
            raise ConfigError(f"fabric test: {name!r} is not a collective name")
    return render(
        "fabric_test.sbatch.j2", templates_dir,
        test_id=plan.test_id, nodes=plan.nodes,
        nodelist=compress_hostlist(list(plan.nodelist)) if plan.nodelist else "",
        tasks_per_node=plan.tasks_per_node, gpus_per_node=plan.gpus_per_node,
        time_limit=format_time_limit(plan.time_limit_min), output=plan.output("%j"), out_dir=plan.out_dir,
        partition=plan.partition, collectives=list(plan.collectives), min_size=plan.min_size,
        max_size=plan.max_size, step_factor=plan.step_factor, iters=plan.iters, warmup=plan.warmup,
        nccl_tests_dir=plan.nccl_tests_dir, python=plan.python, script=plan.script, env=dict(plan.env))
