#!/usr/bin/python3
"""azbench-fabric-check: what one GPU node's fabric looks like, read from NVIDIA's and the OFED
tools as they print it. Standalone (the system Python, no azbench import). Prints one line:

    AZBENCH_FABRIC {"node": ..., "gpus": 4, "hcas": [...], "imex_service": "active", ...}

Read, each with its tool and format:
- GPUs: `nvidia-smi --query-gpu=index,name --format=csv,noheader` (one "0, NVIDIA GB200" line a
  GPU; nvidia-smi(1), "--query-gpu").
- InfiniBand HCAs: `ibstat` (infiniband-diags), a "CA 'mlx5_0'" block per HCA with "State:" and
  "Link layer:" per port; only HCAs with an InfiniBand port count (Azure's accelerated-networking
  Ethernet function is an mlx5 device too). Without ibstat, /sys/class/infiniband/*/ports/*/
  link_layer and state.
- with --imex (multi-node NVLink sizes, GB200): `systemctl is-active nvidia-imex` (the IMEX
  service, NVIDIA IMEX guide "Getting Started": systemd unit nvidia-imex); `nvidia-imex-ctl -N`
  (the whole domain: "Node #0 - 10.0.0.4 - READY" lines, the "Nodes From\\To" matrix of C/I/N/R/D
  and "Domain State: UP"; IMEX guide "IMEX Service Command Service"); the default IMEX channel
  /dev/nvidia-caps-imex-channels/channel0 (IMEX guide "IMEX Channels": a character device the
  administrator creates); and `nvidia-smi -q`'s Fabric section per GPU (State, Status, CliqueId,
  ClusterUUID: NVML's nvmlGpuFabricInfo_t, "Completed" with status "Success" when the GPU has
  joined the NVLink fabric).
- the node's own IPv4 addresses (`hostname -I`), so the gate can name a peer the IMEX table lists
  by address.

With --boot --gpus N --hcas M (cloud-init, before slurmd starts) it also judges the counts: a
short node writes why to /var/lib/azbench/boot-failed and /shared/azbench/boot/<host>.failed
("fabric check failed: ...", which `azbench up` reads to replace the VM before Slurm sees it)
and exits 1.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys

CHANNEL = "/dev/nvidia-caps-imex-channels/channel0"
BOOT_MARK = "fabric check failed: "


def run(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, f"{argv[0]}: {exc}"
    return done.returncode, done.stdout if done.returncode == 0 else (done.stderr or done.stdout)


def gpus() -> dict:
    rc, out = run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"])
    if rc != 0:
        return {"count": 0, "names": [], "error": out.strip()[-300:]}
    names = [line.split(",", 1)[1].strip() for line in out.splitlines() if "," in line]
    return {"count": len(names), "names": names}


def parse_ibstat(text: str) -> list[dict]:
    """HCAs with at least one InfiniBand port, each with its ports' states."""
    cas: list[dict] = []
    current: dict | None = None
    port: dict | None = None
    for line in text.splitlines():
        if (m := re.match(r"^CA '([^']+)'", line)) is not None:
            current = {"name": m.group(1), "ports": []}
            cas.append(current)
            port = None
        elif current is not None and re.match(r"^\s+Port \d+:", line):
            port = {"state": "", "link_layer": ""}
            current["ports"].append(port)
        elif port is not None and (m := re.match(r"^\s+State:\s*(\S+)", line)) is not None:
            port["state"] = m.group(1)
        elif port is not None and (m := re.match(r"^\s+Link layer:\s*(\S+)", line)) is not None:
            port["link_layer"] = m.group(1)
    return [{"name": ca["name"], "active": any(p["state"] == "Active" for p in ca["ports"])}
            for ca in cas if any(p["link_layer"] == "InfiniBand" for p in ca["ports"])]


def hcas() -> dict:
    rc, out = run(["ibstat"])
    if rc == 0:
        return {"source": "ibstat", "hcas": parse_ibstat(out)}
    found = []
    for dev in sorted(glob.glob("/sys/class/infiniband/*")):
        ports = sorted(glob.glob(f"{dev}/ports/*"))
        layers = [_read(f"{p}/link_layer") for p in ports]
        if "InfiniBand" in layers:
            found.append({"name": os.path.basename(dev),
                          "active": any("ACTIVE" in _read(f"{p}/state") for p in ports)})
    return {"source": "/sys/class/infiniband", "hcas": found, "note": out.strip()[-200:]}


def parse_imex_table(text: str) -> dict:
    """`nvidia-imex-ctl -N`: each node's address and status, the connections that are not C,
    and the domain state."""
    nodes = [{"index": int(m.group(1)), "address": m.group(2), "status": m.group(3)}
             for m in re.finditer(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)", text, re.M)]
    broken = []
    header = False
    for line in text.splitlines():
        if "Nodes From\\To" in line:
            header = True
            continue
        if header:
            cells = line.split()
            if len(cells) > 1 and cells[0].isdigit():
                broken += [[int(cells[0]), to, c] for to, c in enumerate(cells[1:]) if c != "C"]
            elif cells:
                header = False
    state = re.search(r"^Domain State:\s*(\S+)", text, re.M)
    return {"nodes": nodes, "not_connected": broken, "domain": state.group(1) if state else None}


def parse_fabric(text: str) -> list[dict]:
    """`nvidia-smi -q`: every GPU's Fabric section (State, Status, CliqueId, ClusterUUID)."""
    out: list[dict] = []
    current: dict | None = None
    for line in text.splitlines():
        if re.match(r"^\s{4}Fabric\s*$", line):
            current = {}
            out.append(current)
            continue
        if current is None:
            continue
        m = re.match(r"^\s{8}(State|Status|CliqueId|ClusterUUID)\s*:\s*(.*?)\s*$", line)
        if m:
            current[{"State": "state", "Status": "status", "CliqueId": "clique", "ClusterUUID": "uuid"}[m.group(1)]] = m.group(2)
        elif re.match(r"^\s{0,7}\S", line):
            current = None
    return out


def imex() -> dict:
    rc, out = run(["systemctl", "is-active", "nvidia-imex"])
    service = (out.strip().splitlines() or ["unknown"])[-1] if out.strip() else ("active" if rc == 0 else "unknown")
    ctl_rc, table = run(["nvidia-imex-ctl", "-N"])
    smi_rc, query = run(["nvidia-smi", "-q"])
    return {"service": service, "table": parse_imex_table(table) if ctl_rc == 0 else None,
            "table_error": "" if ctl_rc == 0 else table.strip()[-300:],
            "channel": os.path.exists(CHANNEL), "fabric": parse_fabric(query) if smi_rc == 0 else [],
            "fabric_error": "" if smi_rc == 0 else query.strip()[-300:]}


def addresses() -> list[str]:
    rc, out = run(["hostname", "-I"])
    return out.split() if rc == 0 else []


def facts(node: str, with_imex: bool) -> dict:
    ib = hcas()
    out = {"node": node, "gpus": gpus(), "hcas": ib["hcas"], "hca_source": ib["source"], "addresses": addresses()}
    if with_imex:
        out["imex"] = imex()
    return out


def shortfall(found: dict, want_gpus: int, want_hcas: int) -> str:
    """What a booting node lacks, in one line; "" when it has it all."""
    short = []
    if found["gpus"]["count"] < want_gpus:
        short.append(f"nvidia-smi lists {found['gpus']['count']} of {want_gpus} GPUs"
                     + (f" ({found['gpus']['error']})" if found["gpus"].get("error") else ""))
    if len(found["hcas"]) < want_hcas:
        names = ", ".join(h["name"] for h in found["hcas"]) or "none"
        short.append(f"{found['hca_source']} lists {len(found['hcas'])} of {want_hcas} InfiniBand HCAs ({names})")
    return "; ".join(short)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--imex", action="store_true")
    p.add_argument("--boot", action="store_true")
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--hcas", type=int, default=0)
    args = p.parse_args()
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    found = facts(node, args.imex)
    print("AZBENCH_FABRIC " + json.dumps(found), flush=True)
    if not args.boot:
        return 0
    why = shortfall(found, args.gpus, args.hcas)
    if not why:
        return 0
    note = BOOT_MARK + why
    os.makedirs("/var/lib/azbench", exist_ok=True)
    with open("/var/lib/azbench/boot-failed", "w") as fh:
        fh.write(note + "\n")
    if os.path.isdir("/shared/azbench"):
        os.makedirs("/shared/azbench/boot", exist_ok=True)
        with open(f"/shared/azbench/boot/{socket.gethostname()}.failed", "w") as fh:
            fh.write(note + "\n")
    print(f"azbench: {note}", file=sys.stderr)
    return 1


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
