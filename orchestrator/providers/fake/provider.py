"""The fake provider: Azure-shaped plans, clusters kept in a JSON file, failure switches.

FakeProvider lets the whole flow run without a cloud: its clusters live in
`$AZBENCH_HOME/clusters/<name>/fake.json` (cluster.py). Failure switches come from
`AZBENCH_FAKE_FAIL` (capacity | quota | sku) and every call is recorded in `calls`.
"""

from __future__ import annotations

import os

from orchestrator.hardware.layout import scale_set_layout
from orchestrator.providers.base import ProviderBase, ProviderParts
from orchestrator.providers.fake.cluster import load, save, state_file, to_cluster
from orchestrator.hosts.remote import LocalRunner
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import CapacityError, PreflightError
from orchestrator.models import Cluster, Plan, PlannedResource, ScaleSetPlan
from orchestrator.seams import Access, Traits
from orchestrator.slurm.launcher import SlurmLauncher


class FakeProvider(ProviderBase):
    """Azure-shaped and in memory; its clusters are reached like local ones (commands run here)."""

    name = "fake"
    traits = Traits(shell=True, head_here=True)

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def plan(self, spec: ClusterSpec) -> Plan:
        self.calls.append(("plan", spec.name))
        if spec.sku_row.gpus_per_vm == 0:
            return _cpu_plan(spec)
        return _gpu_plan(spec)

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        self.calls.append(("up", spec.name))
        _maybe_fail(spec)
        cluster = to_cluster(spec.name, plan)
        save(cluster)
        return cluster

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        self.calls.append(("describe", name))
        return load(name)

    def down(self, cluster: Cluster) -> None:
        self.calls.append(("down", cluster.name))
        state_file(cluster.name).unlink(missing_ok=True)

    def connect(self, cluster: Cluster) -> Access:
        self.calls.append(("connect", cluster.name))
        return _connect(self, cluster)

    def parts(self) -> ProviderParts:
        """No optional part: its clusters are records in a file."""
        return ProviderParts(traits=self.traits)


def _connect(provider: FakeProvider, cluster: Cluster) -> Access:
    runner = LocalRunner(env=dict(cluster.env))
    return Access(launcher=SlurmLauncher(runner, cluster), shell=runner, traits=provider.traits,
                  python=cluster.env.get("AZBENCH_PYTHON", "python3"), closers=[runner.close])


def _maybe_fail(spec: ClusterSpec) -> None:
    switch = os.environ.get("AZBENCH_FAKE_FAIL", "")
    if switch == "capacity":
        raise CapacityError(f"AllocationFailed: no capacity for {spec.nodes} x {spec.sku} in {spec.region}")
    if switch == "quota":
        raise PreflightError(f"quota: {spec.sku_row.quota_family} has too few free vCPUs in {spec.region}")
    if switch == "sku":
        raise PreflightError(f"SkuNotAvailable: {spec.sku} is not offered in {spec.region}")


def _gpu_plan(spec: ClusterSpec) -> Plan:
    """Azure's layout (scale sets of at most 100 VMs, GB200 in whole racks) with one pretend
    resource per scale set, priced at the catalog's list price."""
    sku = spec.sku_row
    sets, warnings = scale_set_layout(spec.name, spec.nodes, sku)
    price = sku.price_per_hour_usd
    return Plan(cluster=spec.name, provider="fake", sku=sku.name, region=spec.region, nodes=spec.nodes,
                gpus_per_node=sku.gpus_per_vm, total_gpus=spec.nodes * sku.gpus_per_vm, scale_sets=sets,
                resources=[PlannedResource(kind="fake/scaleSet", name=s.name, count=s.vms) for s in sets],
                cost_per_hour_usd=round(spec.nodes * price, 2) if price is not None else None,
                warnings=warnings)


def _cpu_plan(spec: ClusterSpec) -> Plan:
    return Plan(cluster=spec.name, provider="fake", sku=spec.sku or "Local_CPU", region=spec.region,
                nodes=spec.nodes, gpus_per_node=0, total_gpus=0,
                scale_sets=[ScaleSetPlan(name=f"{spec.name}-nodes", vms=spec.nodes, gpus=0)],
                resources=[PlannedResource(kind="fake/node", name=f"{spec.name}-nodes", count=spec.nodes)],
                cost_per_hour_usd=0.0)
