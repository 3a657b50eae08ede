"""topology.conf for NVLink racks (GB200 NVL72): topology/block where Slurm has it, tree otherwise.

Slurm 23.11 added topology/block, whose `BlockName=<name> Nodes=<hostlist>` lines describe
NVLink domains: a job is packed into as few blocks as it fits (https://slurm.schedmd.com/
topology.html, "Block Topology"; topology.conf(5), "topology/block"). Older Slurm (Debian 12
ships 22.05, Ubuntu 22.04 21.08) has only topology/tree: a leaf switch per rack under one top
switch, which also keeps a job on as few racks as it can. `rack_topology` picks by version;
both list every node slot (spare racks included: topology/tree wants every node connected to
a switch). A replacement VM takes its predecessor's place (`swap`): it goes into the rack's
block or leaf switch, and the retired node into the spare rack the new one came from; the file
is re-read on `scontrol reconfigure` (topology.conf(5): changes take effect on "execution of
the command scontrol reconfigure").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from orchestrator.slurm.conf import compress_hostlist

BLOCK_SINCE = (23, 11)
BLOCK, TREE = "topology/block", "topology/tree"


def supports_block(version: tuple[int, int] | None) -> bool:
    """Whether Slurm `version` (major, minor) has topology/block; an unknown one does not."""
    return version is not None and tuple(version) >= BLOCK_SINCE


def rack_topology(racks: Mapping[str, Sequence[str]], version: tuple[int, int] | None,
                  top: str = "top") -> tuple[str, list[str]]:
    """(TopologyPlugin, topology.conf lines) for NVLink racks {rack name: its nodes, in order}."""
    if supports_block(version):
        return BLOCK, [f"BlockName={name} Nodes={compress_hostlist(list(nodes))}" for name, nodes in racks.items()]
    lines = [f"SwitchName={name} Nodes={compress_hostlist(list(nodes))}" for name, nodes in racks.items()]
    if len(racks) > 1:  # every switch must reach every other, or no job spans two racks
        lines.append(f"SwitchName={top} Switches={','.join(racks)}")
    return TREE, lines


def expand_hostlist(expr: str) -> list[str]:
    """Slurm hostlist text -> names: 'a[1-3,7],b-000001' -> a1 a2 a3 a7 b-000001 (zero padding kept)."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]*(?:\[[^\]]*\])?[^,\[]*", expr):
        if not part:
            continue
        m = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            width = len(lo) if lo.startswith("0") else 0
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{width}d}{suffix}")
    return out


def swap(text: str, old: str, new: str) -> str:
    """topology.conf text with `old` and `new` trading places in every Nodes= list, so the new
    node sits in the retired node's block (or leaf switch). Other lines are kept as they are."""
    def one(m: re.Match[str]) -> str:
        names = [new if n == old else old if n == new else n for n in expand_hostlist(m.group(2))]
        return m.group(1) + compress_hostlist(names)
    return "\n".join(re.sub(r"^(.*\bNodes=)(\S+)", one, line) for line in text.split("\n"))
