"""The Provider seam. One contract test suite covers every implementation."""

from __future__ import annotations

from typing import Protocol

from orchestrator.clusters.specs import ClusterSpec
from orchestrator.models import Cluster, Plan


class Provider(Protocol):
    name: str

    def plan(self, spec: ClusterSpec) -> Plan:
        """Pure: what `up` would create. No credentials, no network, no side effects."""

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """Create or adopt the cluster; idempotent (a rerun after a crash adopts what exists)."""

    def describe(self, name: str) -> Cluster | None:
        """The live cluster or None; the provider's own state is the truth, the store a cache."""

    def down(self, cluster: Cluster) -> None:
        """Delete everything the cluster owns and verify it is gone; missing is success."""
