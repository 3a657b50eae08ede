"""`azbench fabric locate` on a cluster, wired to the health gate: the gate's fabric probe for the
per-node round on GPU sizes, and the gate's own drain for `--drain` (fabric/locate.py runs the
rounds)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.errors import MissingCapability
from orchestrator.fabric.locate import LocateReport, locate
from orchestrator.fabric.locate_plan import Suspect
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster
from orchestrator.runs.fleet import Verdict
from orchestrator.runs.fleet_gate import drain, fabric_probe, options_for
from orchestrator.seams import Access


def locate_cluster(cluster: Cluster, access: Access, *, nodes: Sequence[str] | None = None,
                   drain_found: bool = False) -> LocateReport:
    """fabric/locate.py's rounds with the gate's probe; drains the suspects only if `drain_found`."""
    if drain_found and not access.caps.node_control:
        raise MissingCapability(cluster.name, access.launcher.backend, "drain nodes")
    row = lookup(cluster.sku)
    probe = (fabric_probe(access.launcher, cluster, options_for(cluster, access), row.nvlink_domain_vms > 1)
             if row.gpus_per_vm else None)

    def drain_suspects(suspects: list[Suspect]) -> list[str]:
        return drain(access.launcher, [Verdict(node=s.node, check="fabric locate", status="slow", value=s.busbw,
                                               threshold=s.expected, unit=" GB/s", detail=s.evidence)
                                       for s in suspects])

    return locate(cluster, access, nodes=nodes, probe=probe, drain=drain_suspects if drain_found else None)


__all__ = ["locate_cluster"]
