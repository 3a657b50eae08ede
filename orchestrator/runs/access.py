"""How to reach a cluster: the Runner and Launcher for a Cluster record, and its live nodes.

Local clusters run commands in a subprocess; SSH-reached clusters through one persistent,
host-key-pinned paramiko connection. Imports are lazy so the CLI stays fast.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import AzbenchError, NotAvailableError
from orchestrator.models import ClusterState

if TYPE_CHECKING:
    from orchestrator.seams import Runner
    from orchestrator.models import Cluster
    from orchestrator.clusters.providers.azureml.launcher import AzureMLLauncher
    from orchestrator.slurm.launcher import SlurmLauncher


def runner_for(cluster: Cluster) -> Runner:
    from orchestrator.clusters.remote import LocalRunner, SshRunner
    if cluster.provider == "azureml":  # jobs go through the Azure ML API: no shell to reach
        from orchestrator.clusters.providers.azureml.launcher import NullRunner
        return NullRunner(cluster)
    if cluster.ssh is not None:
        return SshRunner(cluster.ssh, env=dict(cluster.env))
    if cluster.provider in ("local", "fake"):
        return LocalRunner(env=dict(cluster.env))
    raise NotAvailableError(f"cluster '{cluster.name}' ({cluster.provider}) has no login access yet")


def launcher_for(cluster: Cluster, runner: Runner) -> SlurmLauncher | AzureMLLauncher:
    from orchestrator.slurm.launcher import SlurmLauncher
    if cluster.provider == "azureml":
        from orchestrator.clusters.providers.azureml.launcher import AzureMLLauncher
        return AzureMLLauncher(cluster)
    return SlurmLauncher(runner, cluster)


def recipe_python(cluster: Cluster) -> str:
    """The Python that runs recipes: this interpreter on the local cluster, else python3."""
    if cluster.provider == "local":
        return sys.executable
    return cluster.env.get("AZBENCH_PYTHON", "python3")


@dataclass(frozen=True)
class NodeView:
    name: str
    state: str
    detail: str = ""


def node_views(cluster: Cluster) -> list[NodeView]:
    """Live node states: Slurm's view where azbench can log in, else the cloud's."""
    if cluster.state != ClusterState.READY:
        return []
    if cluster.provider == "azure" and cluster.ssh is None:
        from orchestrator.clusters.providers import get_provider
        provider = get_provider("azure")
        return [NodeView(n.name, n.state, n.scale_set) for n in provider.node_states(cluster)]
    try:
        runner = runner_for(cluster)
    except AzbenchError:
        return []
    try:
        infos = launcher_for(cluster, runner).node_states()
    finally:
        runner.close()
    return [NodeView(i.name, i.state + ("" if i.responding else "*"),
                     "" if i.reason.lower() == "none" else i.reason) for i in infos.values()]
