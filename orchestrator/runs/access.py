"""How to reach a cluster: the Runner and Launcher for a Cluster record.

Local clusters run commands in a subprocess; SSH-reached clusters through one persistent,
host-key-pinned paramiko connection. Imports are lazy so the CLI stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from orchestrator.errors import NotAvailableError

if TYPE_CHECKING:
    from orchestrator.launchers.azureml import AzureMLLauncher
    from orchestrator.launchers.slurm import SlurmLauncher
    from orchestrator.models import Cluster
    from orchestrator.remote import Runner


def runner_for(cluster: Cluster) -> Runner:
    from orchestrator.remote import LocalRunner, SshRunner
    if cluster.provider == "azureml":  # jobs go through the Azure ML API: no shell to reach
        from orchestrator.launchers.azureml import NullRunner
        return NullRunner(cluster)
    if cluster.ssh is not None:
        return SshRunner(cluster.ssh, env=dict(cluster.env))
    if cluster.provider in ("local", "fake"):
        return LocalRunner(env=dict(cluster.env))
    raise NotAvailableError(f"cluster '{cluster.name}' ({cluster.provider}) has no login access yet")


def launcher_for(cluster: Cluster, runner: Runner) -> SlurmLauncher | AzureMLLauncher:
    from orchestrator.launchers.slurm import SlurmLauncher
    if cluster.provider == "azureml":
        from orchestrator.launchers.azureml import AzureMLLauncher
        return AzureMLLauncher(cluster)
    return SlurmLauncher(runner, cluster)


def recipe_python(cluster: Cluster) -> str:
    """The Python that runs recipes: this interpreter on the local cluster, else python3."""
    if cluster.provider == "local":
        return sys.executable
    return cluster.env.get("AZBENCH_PYTHON", "python3")
