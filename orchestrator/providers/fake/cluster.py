"""The fake cluster's record: the one `to_cluster` `up` builds, kept in
`$AZBENCH_HOME/clusters/<name>/fake.json`, which `describe` reads back."""

from __future__ import annotations

import json
import os
from pathlib import Path

from orchestrator import paths
from orchestrator.models import Cluster, ClusterState, Plan
from orchestrator.providers.fake.props import FakeProps

STATE_FILE = "fake.json"


def to_cluster(name: str, plan: Plan) -> Cluster:
    """A READY cluster of the plan's shape; its nodes are named <cluster>-00000 onwards."""
    return Cluster(name=name, provider="fake", sku=plan.sku, nodes=plan.nodes, region=plan.region,
                   state=ClusterState.READY, node_names=[f"{name}-{i:05d}" for i in range(plan.nodes)],
                   workdir="/shared/azbench", cost_per_hour_usd=plan.cost_per_hour_usd,
                   properties=FakeProps(resources=len(plan.resources)))


def save(cluster: Cluster) -> None:
    path = state_file(cluster.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cluster.model_dump_json())
    os.replace(tmp, path)


def load(name: str) -> Cluster | None:
    path = state_file(name)
    if not path.exists():
        return None
    return Cluster.model_validate(json.loads(path.read_text()))


def state_file(name: str) -> Path:
    return paths.cluster_dir(name) / STATE_FILE
