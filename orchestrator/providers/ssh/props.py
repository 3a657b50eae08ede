"""What an adopted (ssh) cluster records keep beyond the common fields: SshProps, `Cluster.properties` for
provider 'ssh' (read it with `cluster.properties_as(SshProps)`)."""

from __future__ import annotations

from typing import Literal

from orchestrator.models import ProviderProps


class SshProps(ProviderProps):
    """An adopted Slurm cluster: the smallest node's CPUs and GPUs as Slurm listed them at `up`."""

    kind: Literal["ssh"] = "ssh"
    cpus_per_node: int | None = None
    gpus_per_node: int | None = None
    usable_nodes: int | None = None
    cluster_dir: str | None = None
