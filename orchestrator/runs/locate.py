"""`azbench fabric locate` on a cluster, wired to the health gate: the gate's fabric probe for the
per-node round on GPU sizes, and the gate's own drain for `--drain` (fabric/locate.py runs the
rounds)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.errors import MissingCapability
from orchestrator.fabric.locate import LocateReport, locate, scope_of
from orchestrator.fabric.locate_plan import Collective, Suspect
from orchestrator.fabric.reading import read_text
from orchestrator.fabric.stored import run_rows
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster
from orchestrator.runs.fleet import Verdict
from orchestrator.runs.fleet_gate import drain, fabric_probe, options_for
from orchestrator.seams import Access
from orchestrator.store.database import Store


def locate_cluster(cluster: Cluster, access: Access, *, nodes: Sequence[str] | None = None,
                   drain_found: bool = False, store: Store | None = None) -> LocateReport:
    """fabric/locate.py's rounds with the gate's probe; drains the suspects only if `drain_found`;
    with `store`, each collective is stored as a fabric result (scope "locate <kind> <nodes>"), which
    the report site ranks."""
    if drain_found and not access.caps.node_control:
        raise MissingCapability(cluster.name, access.launcher.backend, "drain nodes")
    row = lookup(cluster.sku)
    probe = (fabric_probe(access.launcher, cluster, options_for(cluster, access), row.nvlink_domain_vms > 1)
             if row.gpus_per_vm else None)

    def drain_suspects(suspects: list[Suspect]) -> list[str]:
        return drain(access.launcher, [Verdict(node=s.node, check="fabric locate", status="slow", value=s.busbw,
                                               threshold=s.expected, unit=" GB/s", detail=s.evidence)
                                       for s in suspects])

    def keep(test: Collective, text: str) -> None:
        if store is not None:  # read as every output is read (fabric/reading.py): its runs, NCCL's lines, its hash
            reading = read_text(text, scope_of(test), name_hint="")
            store.add_fabric_results(run_rows(reading.sha256, [r for r in reading.runs if r.sizes], reading.log,
                                              source="test", device="GPU" if row.gpus_per_vm else "CPU",
                                              cluster=cluster.name, sku=row.name, scope=scope_of(test),
                                              nodes=len(test.nodes)))

    return locate(cluster, access, nodes=nodes, probe=probe, drain=drain_suspects if drain_found else None,
                  record=keep)


__all__ = ["locate_cluster"]
