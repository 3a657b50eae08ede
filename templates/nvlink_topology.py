#!/usr/bin/python3
"""azbench-topology: Slurm's topology.conf for GB200 racks from the NVLink domain each node reports.

Installed by the head's cloud-init as /shared/azbench/bin/azbench-topology and run by each GPU
node's cloud-init once it has written /shared/azbench/hosts/<hostname>.nvlink, under a lock:

    azbench-topology /shared/azbench/topology.json /shared/azbench/hosts /shared/slurm/topology.conf

A node's NVLink domain is its GPU fabric's cluster UUID and clique ID, as `nvidia-smi -q` shows
them ("ClusterUUID", "CliqueId" in each GPU's Fabric section; Azure/cyclecloud-slurm's
azure-slurm/slurmcc/topology.py builds its blocks from the same two fields). Nodes that report
the same domain form one rack: a Slurm block (topology/block, Slurm 23.11+) or a leaf switch
(topology/tree). A node that reported nothing (or "unknown") keeps the rack of its scale set's
instance order, the plan's guess, and the file says which nodes did, with a warning; so do the
spare slots (FUTURE nodes). topology.json: {"plugin": "topology/block"|"topology/tree",
"rack": VMs per NVL72 rack, "sets": [{"name", "vms", "racks", "slots"}]}, the plan's scale sets:
their hosts are Azure's computer names, the set's name and the instance id in 6 base-36
digits, racks by instance order then spare racks of the free slots, as
orchestrator/providers/azure/cloudinit.py's nvlink_racks (the set description keeps a 2,048-VM
cluster's cloud-init under Azure's 64 KiB customData; a test holds the two to the same racks).
Standalone: the system Python, no azbench import. Prints one summary line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def plan_racks(config: dict) -> dict[str, list[str]]:
    """The plan's racks by instance order, then spare racks (cloudinit.nvlink_racks)."""
    out: dict[str, list[str]] = {}
    for s in config["sets"]:
        name, vms, racks, slots = str(s["name"]), int(s["vms"]), max(int(s["racks"]), 1), int(s["slots"])
        rack = max(int(s.get("rack", config["rack"])), 1)  # the set's own rack size (16 or 18)
        hosts = [f"{name}-{_base36(i)}" for i in range(vms)]
        per_rack = vms // racks
        for r in range(racks):
            out[f"{name}-rack{r}"] = hosts[r * per_rack:(r + 1) * per_rack]
        spares = [f"{name}-{_base36(i)}" for i in range(vms, slots)]
        for k in range(0, len(spares), rack):
            out[f"{name}-spare{k // rack}"] = spares[k:k + rack]
    return out


def _base36(i: int) -> str:
    digits = ""
    for _ in range(6):
        i, r = divmod(i, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
    return digits


def domains(reports: Path) -> dict[str, str]:
    """{host: "CLUSTERUUID.CLIQUEID"} from <host>.nvlink files holding "UUID CLIQUE"."""
    out: dict[str, str] = {}
    for path in sorted(reports.glob("*.nvlink")):
        words = path.read_text(errors="replace").split()
        if len(words) == 2 and words[0].lower() not in ("unknown", "n/a", "0"):
            out[path.name[: -len(".nvlink")]] = f"{words[0]}.{words[1]}"
    return out


def racks(plan: dict[str, list[str]], found: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """Racks by reported NVLink domain (named after it, in the order their first host appears in
    the plan), then what is left of the plan's racks; and the reported-nothing hosts."""
    order = [h for hosts in plan.values() for h in hosts]
    by_domain: dict[str, list[str]] = {}
    for host in order:
        if host in found:
            by_domain.setdefault(found[host], []).append(host)
    out = {f"nvl-{d.split('.')[0][:8]}-{d.split('.', 1)[1]}": hosts for d, hosts in by_domain.items()}
    guessed: list[str] = []
    for name, hosts in plan.items():
        rest = [h for h in hosts if h not in found]
        if rest:
            out[name] = rest
            guessed += [h for h in rest if "-spare" not in name]
    return out, guessed


def render(plugin: str, layout: dict[str, list[str]], guessed: list[str], reported: int) -> str:
    lines = [f"# azbench-topology: {len(layout)} racks, {reported} node(s) by the NVLink domain they "
             "reported (nvidia-smi -q: ClusterUUID.CliqueId)"]
    if guessed:
        lines.append(f"# warning: {len(guessed)} node(s) reported no NVLink domain, placed by scale-set "
                     f"instance order: {','.join(guessed)}")
    if plugin == "topology/block":
        lines += [f"BlockName={name} Nodes={','.join(hosts)}" for name, hosts in layout.items()]
    else:
        lines += [f"SwitchName={name} Nodes={','.join(hosts)}" for name, hosts in layout.items()]
        if len(layout) > 1:
            lines.append(f"SwitchName=top Switches={','.join(layout)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: azbench-topology CONFIG.json REPORTS_DIR OUT", file=sys.stderr)
        return 2
    config = json.loads(Path(argv[0]).read_text())
    found = domains(Path(argv[1]))
    plan = plan_racks(config)
    layout, guessed = racks(plan, found)
    reported = sum(1 for hosts in plan.values() for h in hosts if h in found)
    out = Path(argv[2])
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render(config["plugin"], layout, guessed, reported))
    os.replace(tmp, out)
    print(f"azbench-topology: {reported} node(s) placed by NVLink domain, {len(guessed)} by instance "
          f"order; {len(layout)} racks in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
