"""The ssh cluster's record: the one `to_cluster` `up` builds from what Slurm listed on the login
node, saved as cluster.json, which `describe` reads back (azbench creates nothing remote, so
that file is the provider's own state)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from orchestrator import paths
from orchestrator.models import Cluster, ClusterState, SshTarget
from orchestrator.providers.ssh.props import SshProps
from orchestrator.providers.ssh.settings import SshSettings
from orchestrator.specs.cluster import ClusterSpec

RECORD = "cluster.json"


class SlurmNodeRow(TypedDict):
    """One node as the cluster's Slurm lists it: name, CPUs, GPUs (from its gres), state."""

    name: str
    cpus: int
    gpus: int
    state: str


def to_cluster(spec: ClusterSpec, target: SshTarget, partition: str, nodes: list[SlurmNodeRow],
               usable: int) -> Cluster:
    """The adopted cluster: the partition's nodes (`nodes`: name, cpus, gpus as parsed from
    Slurm's listing), the smallest node's CPUs and GPUs, and how many nodes are `usable`."""
    ssh = spec.section(SshSettings)
    props = SshProps(cpus_per_node=min(n["cpus"] for n in nodes), gpus_per_node=min(n["gpus"] for n in nodes),
                     usable_nodes=usable, cluster_dir=str(paths.cluster_dir(spec.name)))
    return Cluster(name=spec.name, provider="ssh", sku=spec.sku, nodes=spec.nodes,
                   state=ClusterState.READY, node_names=[n["name"] for n in nodes], partition=partition,
                   workdir=ssh.workdir, env=dict(ssh.env), ssh=target, cost_per_hour_usd=None,
                   properties=props)


def save(cluster: Cluster) -> None:
    cdir = paths.cluster_dir(cluster.name)
    cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    (cdir / RECORD).write_text(cluster.model_dump_json(indent=2))


def load(name: str) -> Cluster | None:
    """The record `up` saved (older ones, with a plain properties dict, load too), or None."""
    try:
        return Cluster.model_validate_json((paths.cluster_dir(name) / RECORD).read_text())
    except (OSError, ValueError):
        return None


def cluster_dir(cluster: Cluster) -> Path:
    return Path(cluster.properties_as(SshProps).cluster_dir or paths.cluster_dir(cluster.name))
