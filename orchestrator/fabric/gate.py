"""The gate's fabric checks on GPU nodes (part of `azbench health` and of the gate before every
attempt: runs/fleet_gate.gate_nodes): each node's templates/fabric_node_check.py reads the facts
with NVIDIA's and the OFED tools, and fabric/judge.py (judge_nodes, the one judge) judges them.

Per node, against the SKU's catalog row: the GPU count (nvidia-smi) and the InfiniBand HCA count
(ibstat). On sizes whose NVLink domain spans VMs (GB200 NVL72): the IMEX service is active; every
node of the domain is READY and connected in `nvidia-imex-ctl -N` (a node another node's table
shows down is the one flagged, not the node that saw it); the IMEX channel device exists; every
GPU's fabric State is Completed with Status Success (`nvidia-smi -q`); and ClusterUUID and CliqueId
are the same across the nodes of each rack (a node whose NVLink domain differs from the rack's
majority is flagged). The collective inside each rack is the fleet gate's own first round (one
nccl-tests group per leaf switch, runs/fleet.py).

A failing check is run again, on the failing nodes only, before it counts: a node is flagged
only for a check that failed both times. A check that fails on every node checked is an image or
harness fault (the driver, the tools, the job's environment), not the nodes: it is reported and
nothing is drained. Every verdict names its check and its evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.hardware.catalog import GpuSku
from orchestrator.fabric.judge import Facts, Finding, judge_nodes
from orchestrator.slurm.conf import natural_key

_MARK = "AZBENCH_FABRIC {"
_LINE = re.compile(r"AZBENCH_FABRIC (\{.*\})")  # matched where the mark was found: one try a line


@dataclass
class FabricGate:
    """The fabric checks' outcome: nodes flagged (failed twice), a fault seen on every node
    (then nothing is flagged for it), and how many probe rounds it took."""

    checked: list[str]
    findings: list[Finding] = field(default_factory=list)
    fault: str = ""
    rounds: int = 0

    @property
    def flagged(self) -> list[str]:
        return sorted({f.node for f in self.findings}, key=natural_key)


def parse_facts(text: str) -> dict[str, Facts]:
    """Each node's AZBENCH_FABRIC line (the last one a node printed)."""
    out: dict[str, Facts] = {}
    for line in text.splitlines():
        at = line.find(_MARK)
        m = _LINE.match(line.rstrip(), at) if at >= 0 else None
        if m is None:
            continue
        try:
            data = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("node"):
            out[str(data["node"])] = data
    return out


def gate_fabric(probe: Callable[[Sequence[str]], str], nodes: Sequence[str], sku: GpuSku,
                racks: Mapping[str, Sequence[str]] | None = None) -> FabricGate:
    """Probe `nodes`, judge, probe the failing ones again, and keep what failed both times;
    a check failing on every node is a fault (reported, nothing flagged for it)."""
    racks = racks or {"all": list(nodes)}
    report = FabricGate(checked=list(nodes))
    facts = parse_facts(probe(list(nodes)))
    report.rounds = 1
    first = judge_nodes(facts, nodes, sku, racks)
    failing = sorted({f.node for f in first}, key=natural_key)
    if not failing:
        return report
    again = {**facts, **parse_facts(probe(failing))}
    report.rounds = 2
    second = judge_nodes(again, nodes, sku, racks)
    before = {(f.node, f.check) for f in first}
    confirmed = [f for f in second if (f.node, f.check) in before]
    everywhere = [check for check in sorted({f.check for f in confirmed})
                  if {f.node for f in confirmed if f.check == check} >= set(nodes) and len(nodes) > 1]
    if everywhere:
        sample = next(f for f in confirmed if f.check == everywhere[0])
        report.fault = (f"{', '.join(everywhere)} failed on every node checked ({len(nodes)} of {len(nodes)}): "
                        f"an image or harness fault, not the nodes; nothing drained for it "
                        f"(e.g. {sample.node}: {sample.evidence})")
        confirmed = [f for f in confirmed if f.check not in everywhere]
    report.findings = sorted(confirmed, key=lambda f: (natural_key(f.node), f.check))
    return report
