"""The local cluster's records: state.json (what `up` started, with its pids) and the one
`to_cluster` that `up` and `describe` both build the Cluster from.

A second `up` keeps the state's creation time, so the record says when the daemons first started.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator.models import Cluster, ClusterState, utcnow
from orchestrator.providers.local.links import Links
from orchestrator.providers.local.props import LocalProps

PARTITION = "local"
SKU = "Local_CPU"
STATE_FILE = "state.json"


class Daemon(BaseModel):
    pid: int
    start_time: int
    argv: list[str]
    log: str


class LocalState(BaseModel):
    """What `up` started, so `down`, `describe` and a second `up` can find it again."""

    name: str
    cluster_dir: str
    runtime_dir: str
    conf: str
    workdir: str
    jobcomp_file: str
    nodes: list[str]
    # Node slots slurm.conf defines in state FUTURE (with their ports) for replacements and
    # growth; `retired` are nodes taken out for good (replaced, or shrunk away).
    spares: list[str] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    cpus_per_node: int
    slurmctld_port: int
    node_ports: dict[str, int]
    daemons: dict[str, Daemon] = Field(default_factory=dict)
    # Each node's own network link (providers/local/links.py), when `up` was asked for links.
    links: Links = Field(default_factory=Links)
    created_at: datetime = Field(default_factory=utcnow)


def to_cluster(state: LocalState) -> Cluster:
    """The Cluster record of a started (or adopted) local cluster."""
    props = LocalProps(cluster_dir=state.cluster_dir, jobcomp_file=state.jobcomp_file,
                       slurmctld_log=str(Path(state.cluster_dir) / "log" / "slurmctld.log"),
                       slurmctld_port=state.slurmctld_port)
    return Cluster(
        name=state.name, provider="local", sku=SKU, nodes=len(state.nodes),
        state=ClusterState.READY, node_names=list(state.nodes), partition=PARTITION,
        workdir=state.workdir, env={"SLURM_CONF": state.conf}, cost_per_hour_usd=0.0,
        created_at=state.created_at, properties=props)


def load_state(cdir: Path) -> LocalState | None:
    try:
        return LocalState.model_validate_json((cdir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def save_state(state: LocalState) -> None:
    path = Path(state.cluster_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.model_dump(mode="json"), indent=2))
    tmp.replace(path)
