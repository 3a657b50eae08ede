"""The toy provider: clusters that exist as one JSON file, reached through a launcher that knows
only their nodes (launcher.py). Enough of the Provider seam for `azbench up/status/down`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import paths
from orchestrator.models import Cluster, ClusterState, Plan, PlannedResource, ScaleSetPlan
from orchestrator.providers.base import ProviderBase, ProviderParts
from orchestrator.seams import Access
from tests.toy_backend.launcher import ToyLauncher
from tests.toy_backend.props import ToyProps
from tests.toy_backend.settings import ToySettings

if TYPE_CHECKING:
    from orchestrator.specs.cluster import ClusterSpec


class ToyProvider(ProviderBase):
    """Free, instant clusters kept in `$AZBENCH_HOME/clusters/<name>/toy.json`."""

    name = "toy"

    def plan(self, spec: ClusterSpec) -> Plan:
        sku = spec.sku or "Local_CPU"
        return Plan(cluster=spec.name, provider=self.name, sku=sku, region=spec.region, nodes=spec.nodes,
                    gpus_per_node=0, total_gpus=0,
                    scale_sets=[ScaleSetPlan(name=f"{spec.name}-toys", vms=spec.nodes, gpus=0)],
                    resources=[PlannedResource(kind="toy/node", name=f"{spec.name}-toys", count=spec.nodes)],
                    cost_per_hour_usd=0.0)

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        found = self.describe(spec.name)
        if found is not None:
            return found
        settings = spec.section(ToySettings)
        cluster = Cluster(name=spec.name, provider=self.name, sku=plan.sku, nodes=plan.nodes, region=plan.region,
                          state=ClusterState.READY, node_names=[f"{spec.name}-toy{i}" for i in range(plan.nodes)],
                          cost_per_hour_usd=0.0,
                          properties=ToyProps(slots=settings.slots, colour=settings.colour))
        _state_file(spec.name).parent.mkdir(parents=True, exist_ok=True)
        _state_file(spec.name).write_text(cluster.model_dump_json())
        return cluster

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        path = _state_file(name)
        return Cluster.model_validate(json.loads(path.read_text())) if path.exists() else None

    def down(self, cluster: Cluster) -> None:
        _state_file(cluster.name).unlink(missing_ok=True)

    def connect(self, cluster: Cluster) -> Access:
        return Access(launcher=ToyLauncher(cluster), shell=None)

    def parts(self) -> ProviderParts:
        return ProviderParts()


def _state_file(name: str) -> Path:
    return paths.cluster_dir(name) / "toy.json"
