"""The gate's fabric checks on GPU nodes (part of `azbench health` and of the gate before every
attempt: runs/fleet_gate.gate_nodes), judged from what each node's templates/fabric_node_check.py
read with NVIDIA's and the OFED tools.

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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.hardware.catalog import GpuSku
from orchestrator.runs.fleet import Verdict
from orchestrator.slurm.conf import natural_key

_LINE = re.compile(r"AZBENCH_FABRIC (\{.*\})\s*$")
COMPLETED, SUCCESS = "Completed", "Success"
Facts = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    node: str
    check: str
    evidence: str
    value: float | None = None
    threshold: float | None = None

    def verdict(self) -> Verdict:
        return Verdict(self.node, self.check, "fail", self.value, self.threshold, detail=self.evidence)


@dataclass
class FabricGate:
    """The fabric checks' outcome: nodes flagged (failed twice), a fault seen on every node
    (then nothing is flagged for it), and how many probe rounds it took."""

    checked: list[str]
    findings: list[Finding] = field(default_factory=list)
    fault: str = ""
    rounds: int = 0

    @property
    def verdicts(self) -> list[Verdict]:
        return [f.verdict() for f in self.findings]

    @property
    def flagged(self) -> list[str]:
        return sorted({f.node for f in self.findings}, key=natural_key)


def parse_facts(text: str) -> dict[str, Facts]:
    """Each node's AZBENCH_FABRIC line (the last one a node printed)."""
    out: dict[str, Facts] = {}
    for line in text.splitlines():
        m = _LINE.search(line)
        if m is None:
            continue
        try:
            data = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("node"):
            out[str(data["node"])] = data
    return out


def multi_node_nvlink(sku: GpuSku) -> bool:
    """GB200-like sizes: an NVLink domain (IMEX, the fabric manager) spans several VMs."""
    return sku.nvlink_domain_vms > 1


def node_findings(node: str, facts: Facts | None, sku: GpuSku) -> list[Finding]:
    """The per-node checks on one node's facts."""
    if facts is None:
        return [Finding(node, "fabric_check", "printed no AZBENCH_FABRIC line (node hung, or python3 missing)")]
    out: list[Finding] = []
    gpus = facts.get("gpus") or {}
    count = int(gpus.get("count") or 0)
    if count < sku.gpus_per_vm:
        out.append(Finding(node, "gpu_count", f"nvidia-smi lists {count} of {sku.gpus_per_vm} GPUs"
                           + (f": {gpus['error']}" if gpus.get("error") else ""), count, sku.gpus_per_vm))
    hcas = facts.get("hcas") or []
    if len(hcas) < sku.ib_links:
        names = ", ".join(str(h.get("name")) for h in hcas) or "none"
        out.append(Finding(node, "ib_hcas", f"{facts.get('hca_source', 'ibstat')} lists {len(hcas)} of {sku.ib_links} "
                           f"InfiniBand HCAs ({names})", len(hcas), sku.ib_links))
    down = [str(h.get("name")) for h in hcas if not h.get("active")]
    if down:
        out.append(Finding(node, "ib_port_state", f"InfiniBand HCA(s) with no Active port: {', '.join(down)}",
                           len(hcas) - len(down), len(hcas)))
    if not multi_node_nvlink(sku):
        return out
    imex = facts.get("imex") or {}
    if imex.get("service") != "active":
        out.append(Finding(node, "imex_service", f"systemctl is-active nvidia-imex: {imex.get('service') or 'no answer'}"))
    if not imex.get("channel"):
        out.append(Finding(node, "imex_channel", "/dev/nvidia-caps-imex-channels/channel0 does not exist "
                           "(IMEX channels are created by the administrator; none survives a reboot)"))
    if imex.get("table") is None:
        out.append(Finding(node, "imex_domain", f"nvidia-imex-ctl -N failed on this node: "
                           f"{imex.get('table_error') or 'no output'}"))
    fabric = imex.get("fabric") or []
    bad = [f"GPU {i}: State {g.get('state', '?')}, Status {g.get('status', '?')}" for i, g in enumerate(fabric)
           if g.get("state") != COMPLETED or g.get("status") != SUCCESS]
    if not fabric:
        out.append(Finding(node, "fabric_state", "nvidia-smi -q shows no GPU Fabric section"
                           + (f": {imex['fabric_error']}" if imex.get("fabric_error") else "")))
    elif bad:
        out.append(Finding(node, "fabric_state", "nvidia-smi -q: " + "; ".join(bad) + f" (want {COMPLETED}/{SUCCESS})"))
    return out


def domain_findings(facts: Mapping[str, Facts], sku: GpuSku) -> list[Finding]:
    """IMEX peers that other nodes' tables show not READY, or (in a domain of three or more)
    with every connection to them down: the peer is flagged, with the observer and what it saw;
    the node that saw it is not."""
    if not multi_node_nvlink(sku):
        return []
    by_address = {a: node for node, f in facts.items() for a in f.get("addresses") or []}
    seen: dict[str, list[str]] = {}
    for observer in sorted(facts, key=natural_key):
        table = (facts[observer].get("imex") or {}).get("table")
        if not table:
            continue
        members = {n["index"]: n["address"] for n in table.get("nodes", [])}
        for n in table.get("nodes", []):
            if n.get("status") != "READY":
                seen.setdefault(n["address"], []).append(f"{observer} lists it {n.get('status')}")
        if len(members) < 3:
            continue  # two nodes cut apart: either end could be the one down
        for k, address in members.items():
            into = sorted({cell for frm, to, cell in table.get("not_connected", []) if to == k and frm != k})
            count = sum(1 for frm, to, _ in table.get("not_connected", []) if to == k and frm != k)
            if count == len(members) - 1:
                seen.setdefault(address, []).append(f"{observer}: every connection to it is {'/'.join(into)}")
    out = []
    for address, why in seen.items():
        node = by_address.get(address)
        if node is None:
            continue  # a domain member this gate did not check: the gate names only its nodes
        out.append(Finding(node, "imex_domain", f"nvidia-imex-ctl -N: {address} ({node}) not READY or not "
                           f"connected: {'; '.join(why[:3])}" + (f" (+{len(why) - 3} more)" if len(why) > 3 else "")))
    return out


def rack_findings(facts: Mapping[str, Facts], racks: Mapping[str, Sequence[str]], sku: GpuSku) -> list[Finding]:
    """Within each rack, every node's GPUs must report one ClusterUUID.CliqueId, the rack's."""
    if not multi_node_nvlink(sku):
        return []
    out = []
    for rack, members in racks.items():
        domains = {n: _domain(facts[n]) for n in members if n in facts}
        known = {n: d for n, d in domains.items() if d}
        if not known:
            continue
        (common, count), = Counter(known.values()).most_common(1)
        for node, d in sorted(domains.items(), key=lambda kv: natural_key(kv[0])):
            if d and d != common:
                out.append(Finding(node, "nvlink_domain", f"ClusterUUID.CliqueId {d} differs from rack {rack}'s "
                                   f"{common} (on {count} of its {len(domains)} nodes)"))
            elif d is None and (facts[node].get("imex") or {}).get("fabric"):
                out.append(Finding(node, "nvlink_domain", "its GPUs report more than one ClusterUUID.CliqueId"))
    return out


def judge(facts: Mapping[str, Facts], nodes: Sequence[str], sku: GpuSku,
          racks: Mapping[str, Sequence[str]]) -> list[Finding]:
    """Every finding on `nodes`, one per node and check (evidence from several views joined)."""
    found = [f for n in nodes for f in node_findings(n, facts.get(n), sku)]
    found += [f for f in domain_findings(facts, sku) + rack_findings(facts, racks, sku) if f.node in set(nodes)]
    merged: dict[tuple[str, str], Finding] = {}
    for f in found:
        key = (f.node, f.check)
        merged[key] = f if key not in merged else Finding(f.node, f.check, f"{merged[key].evidence} | {f.evidence}",
                                                          merged[key].value, merged[key].threshold)
    return list(merged.values())


def gate_fabric(probe: Callable[[Sequence[str]], str], nodes: Sequence[str], sku: GpuSku,
                racks: Mapping[str, Sequence[str]] | None = None) -> FabricGate:
    """Probe `nodes`, judge, probe the failing ones again, and keep what failed both times;
    a check failing on every node is a fault (reported, nothing flagged for it)."""
    racks = racks or {"all": list(nodes)}
    report = FabricGate(checked=list(nodes))
    facts = parse_facts(probe(list(nodes)))
    report.rounds = 1
    first = judge(facts, nodes, sku, racks)
    failing = sorted({f.node for f in first}, key=natural_key)
    if not failing:
        return report
    again = {**facts, **parse_facts(probe(failing))}
    report.rounds = 2
    second = judge(again, nodes, sku, racks)
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


def _domain(facts: Facts) -> str | None:
    fabric = (facts.get("imex") or {}).get("fabric") or []
    found = {f"{g.get('uuid')}.{g.get('clique')}" for g in fabric
             if g.get("uuid") not in (None, "", "N/A") and g.get("clique") not in (None, "", "N/A")}
    return found.pop() if len(found) == 1 else None
