"""What `up` lays out for a local cluster: the node names and FUTURE spare slots, its folders
and one block of ports, the topology Slurm is given (racks and scale sets, as the Azure provider
models them), and each node's own network link where it can be built (links.py).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from orchestrator.providers.local import links as netlinks
from orchestrator.providers.local import proc
from orchestrator.providers.local.cluster import LocalState, save_state
from orchestrator.providers.local.settings import LocalSettings
from orchestrator.slurm.commands import CONTROL, first_node_command
from orchestrator.slurm.conf import natural_key, tree_topology
from orchestrator.specs.cluster import ClusterSpec

RACK_SIZE = 18  # ND-series VMs per rack (leaf switch), as the Azure provider assumes
RACKS_PER_SCALE_SET = 5  # 90 VMs: a scale set of at most 100, in whole racks
# A Unix socket path may hold 107 bytes; slurmd puts step sockets deep inside its spool dir.
_MAX_RUNTIME_PREFIX = 56


def spare_slots(nodes: int) -> int:
    """FUTURE node slots in slurm.conf beyond the nodes `up` starts: room for replacements and
    growth without restarting Slurm (one folded NodeName line; no daemon until used)."""
    return max(8, nodes // 4)


def node_names(count: int, first: int = 1) -> list[str]:
    return [f"node{i}" for i in range(first, first + count)]


def _layout(spec: ClusterSpec, cdir: Path) -> LocalState:
    cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime = cdir / "run"
    if len(str(runtime)) > _MAX_RUNTIME_PREFIX:
        digest = hashlib.sha256(str(cdir).encode()).hexdigest()[:12]
        runtime = Path("/tmp", f"azbench-{os.getuid()}-{digest}")
    nodes = node_names(spec.nodes)
    spares = node_names(spare_slots(spec.nodes), first=spec.nodes + 1)
    for sub in [runtime / "munge", *(runtime / "spool" / n for n in nodes)]:
        sub.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in ("log", "slurm-state", "shared"):
        (cdir / name).mkdir(exist_ok=True)
    # One block of consecutive ports, so slurm.conf holds one NodeName line (see slurm/conf.py).
    ports = proc.free_ports(1) + proc.free_port_block(len(nodes) + len(spares))
    return LocalState(
        name=spec.name, cluster_dir=str(cdir), runtime_dir=str(runtime),
        conf=str(cdir / "slurm.conf"), workdir=str(cdir / "shared"),
        jobcomp_file=str(cdir / "log" / "jobcomp.txt"), nodes=nodes, spares=spares,
        cpus_per_node=spec.section(LocalSettings).cpus_per_node, slurmctld_port=ports[0],
        node_ports=dict(zip(nodes + spares, ports[1:])))


def _topology_text(state: LocalState) -> str:
    """topology.conf as the Azure provider would model it: 18-node racks in scale sets."""
    return ("# Slurm topology of local cluster \"" + state.name + "\": a leaf switch per 18 nodes "
            "(a rack), a switch per 5 racks (a scale set), a top switch.\n"
            + "\n".join(tree_topology(_slots(state), RACK_SIZE, RACKS_PER_SCALE_SET)) + "\n")


def _slots(state: LocalState) -> list[str]:
    """Every node slot slurm.conf defines: in service, retired and spare, in name order."""
    return sorted({*state.nodes, *state.retired, *state.spares}, key=natural_key)


def _build_links(state: LocalState, faults: dict[str, netlinks.LinkFault], bins: dict[str, str]) -> None:
    """Each node (spare slots too, so a replacement has one) its own link; the cluster's python
    enters it (providers/local/links.py). Where links cannot be built, the notes say so."""
    tag = hashlib.sha256(state.cluster_dir.encode()).hexdigest()[:6]
    state.links = netlinks.build(tag, [*state.nodes, *state.spares], faults)
    if not state.links.built and faults:
        state.links.notes.append(f"{netlinks.FAULTS_VAR} asked for "
                                 + ", ".join(f"{n}={f.text()}" for n, f in faults.items())
                                 + ": those links could not be shaped")
    if state.links.built:
        netlinks.write_python(Path(state.cluster_dir) / "bin" / "python", sys.executable, state.links,
                              first_node_command(bins.get(CONTROL, CONTROL)))
    save_state(state)


def _link_notes(links: netlinks.Links) -> list[str]:
    """What a view says about the nodes' links: their own (with faults), or why none were built."""
    if links.built:
        return [f"each node has its own link (veth on a bridge, namespaces {links.prefix}-*)"] + links.notes
    return list(links.notes) or ["nodes share this machine's loopback: no node has a link of its own "
                                 f"(set {netlinks.LINKS_VAR}=1 or {netlinks.FAULTS_VAR} at up, as root)"]
