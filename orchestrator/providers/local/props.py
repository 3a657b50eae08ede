"""What a local cluster records keep beyond the common fields: LocalProps, `Cluster.properties` for
provider 'local' (read it with `cluster.properties_as(LocalProps)`)."""

from __future__ import annotations

from typing import Literal

from orchestrator.models import ProviderProps


class LocalProps(ProviderProps):
    """An emulated local Slurm cluster: where its files are and how its controller listens."""

    kind: Literal["local"] = "local"
    cluster_dir: str | None = None
    jobcomp_file: str | None = None
    slurmctld_log: str | None = None
    slurmctld_port: int | None = None
